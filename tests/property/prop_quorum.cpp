// SPDX-License-Identifier: MIT
// rapidcheck over the quorum's simulation (holdfast/testing/workload_quorum.hpp): a generated
// decision tape is one schedule of the shipped quorum_store over three simulated members, each
// member judged too; the quorum keeps S1-S5, O1 and L1, and the control that keeps a member
// whose reply was lost (quorum_options::give_back_unsure = false, the kind of redlock-rb #76) is
// caught by O1 within rapidcheck's default case count (100); every control of all_quorum_mutants
// is caught (gives_back_live_grant, a failed re-acquire giving back a live lease, within 1,000).
#include <rapidcheck.h>
#include <rapidcheck/catch.h>
#include <catch2/catch.hpp>

#include <string>

#include "holdfast/testing/rapidcheck.hpp"
#include "holdfast/testing/workload_quorum.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_prop_quorum {

namespace ht = holdfast::testing;

TEST_CASE("quorum: three members keep S1-S5, O1 and L1 on any tape", "[testing/property][quorum]") {
  rc::prop("S1-S5, O1, L1 at the quorum and at every member", [] {
    const ht::decision_tape tape = *rc::gen::noShrink(ht::gen_decision_tape(4096));
    ht::byte_source src = tape.source();
    const ht::verdict v = ht::run_quorum_control(src, ht::quorum_mutant::none);
    if (!v.ok()) RC_FAIL(v.report());
  });
}

TEST_CASE("quorum: rapidcheck catches every negative control", "[testing/property][quorum]") {
  rc::detail::TestParams params = rc::detail::configuration().testParams;
  params.disableShrinking = true;  // catching is the point here
  const int cases = params.maxSuccess;
  for (ht::quorum_mutant m : ht::all_quorum_mutants) {
    // gives_back_live_grant needs a holder's re-acquire to fail on two members: about 1 schedule
    // in 90 of its set-up (seeded), so it gets 10 times the cases.
    params.maxSuccess = m == ht::quorum_mutant::gives_back_live_grant ? 10 * cases : cases;
    const auto result = rc::detail::checkTestable(
        [m] {
          const ht::decision_tape tape = *ht::gen_decision_tape(4096);
          ht::byte_source src = tape.source();
          const ht::verdict v = ht::run_quorum_control(src, m);
          if (!v.ok()) RC_FAIL(v.report());
        },
        rc::detail::TestMetadata{}, params);
    rc::detail::FailureResult failure;
    INFO("control " << ht::to_string(m) << ", seed " << params.seed);
    REQUIRE(result.match(failure));
    INFO("caught after " << failure.numSuccess + 1 << " cases:\n" << failure.description);
    bool named = false;  // the report names an invariant the control is expected to break
    for (ht::invariant v : {ht::invariant::o1_orphaned_grant, ht::invariant::s2_token_order,
                            ht::invariant::s3_exclusive_grants, ht::invariant::s4_holder_belief}) {
      named = named || (ht::caught_as_expected(m, v) &&
                        failure.description.find(std::string(ht::to_string(v)) + " violated") !=
                            std::string::npos);
    }
    CHECK(named);
  }
}

}  // namespace test_prop_quorum
