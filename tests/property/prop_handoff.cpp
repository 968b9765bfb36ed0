// SPDX-License-Identifier: MIT
// rapidcheck over waiting in a hand-off queue (holdfast/testing/workload_handoff.hpp): a
// generated decision tape picks blocking acquire() on one key or the semaphore waiting with
// wait_for_release_any, and is its whole schedule; the shipped loops keep every invariant (S1-S6,
// O1, O2, L1), and each queue control (testing/mutants.hpp: gives_up_queued, leave_not_retried)
// is caught by O2 within rapidcheck's default case count (100).
#include <rapidcheck.h>
#include <rapidcheck/catch.h>
#include <catch2/catch.hpp>

#include <string>

#include "holdfast/testing/rapidcheck.hpp"
#include "holdfast/testing/workload_handoff.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_prop_handoff {

namespace ht = holdfast::testing;

TEST_CASE("hand-off queues: waiters leave what they queued for on any tape",
          "[testing/property][handoff]") {
  rc::prop("S1-S6, O1, O2, L1", [] {
    const ht::decision_tape tape = *rc::gen::noShrink(ht::gen_decision_tape(4096));
    ht::byte_source src = tape.source();
    const ht::verdict v = ht::run_handoff_schedule(src);
    if (!v.ok()) RC_FAIL(v.report());
  });
}

TEST_CASE("hand-off queues: rapidcheck catches every queue control",
          "[testing/property][handoff]") {
  rc::detail::TestParams params = rc::detail::configuration().testParams;
  params.disableShrinking = true;  // catching is the point here
  for (ht::queue_mutant m : ht::all_queue_mutants) {
    const auto result = rc::detail::checkTestable(
        [m] {
          const ht::decision_tape tape = *ht::gen_decision_tape(4096);
          ht::byte_source src = tape.source();
          const ht::verdict v = ht::run_handoff_schedule(src, m);
          if (!v.ok()) RC_FAIL(v.report());
        },
        rc::detail::TestMetadata{}, params);
    rc::detail::FailureResult failure;
    INFO("control " << ht::to_string(m) << ", seed " << params.seed);
    REQUIRE(result.match(failure));
    INFO("caught after " << failure.numSuccess + 1 << " cases:\n" << failure.description);
    const std::string named = std::string(ht::to_string(ht::expected_violation(m))) + " violated";
    CHECK(failure.description.find(named) != std::string::npos);
  }
}

}  // namespace test_prop_handoff
