// SPDX-License-Identifier: MIT
// rapidcheck over the lock shapes' simulation (testing/shapes_workload.hpp): a generated decision
// tape is one schedule of acquire_all() and reentrant_holder; the shipped code keeps every
// property, and each negative control is caught within rapidcheck's default case count (100), by
// the property it breaks (rw_admits_reissued, a rarer schedule, within 600). Cost: ~2 s (Debug,
// load 8).
#include <rapidcheck.h>
#include <rapidcheck/catch.h>
#include <catch2/catch.hpp>

#include <string>

#include "holdfast/testing/rapidcheck.hpp"
#include "holdfast/testing/shapes_workload.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_prop_shapes {

namespace ht = holdfast::testing;

TEST_CASE("shapes: acquire_all and re-entry keep their properties on any tape",
          "[testing/property][shapes]") {
  rc::prop("all or nothing, progress, re-entry, S1-S5", [] {
    const ht::decision_tape tape = *rc::gen::noShrink(ht::gen_decision_tape(2048));
    ht::byte_source src = tape.source();
    const ht::shape_verdict v = ht::run_shapes_schedule(src);
    if (!v.ok()) RC_FAIL(v.text());
  });
}

TEST_CASE("shapes: rapidcheck catches every negative control", "[testing/property][shapes]") {
  rc::detail::TestParams params = rc::detail::configuration().testParams;
  params.disableShrinking = true;
  for (ht::shape_mutant m : ht::all_shape_mutants) {
    // rw_admits_reissued needs a lost writer's token issued again to the next writer, each
    // writing: ~5% of tapes (a median of ~17 cases, up to 100+), so it gets 600 cases (~0.3 s),
    // which miss it with odds ~1e-13 instead of ~1% at the default 100.
    params.maxSuccess = m == ht::shape_mutant::rw_admits_reissued ? 600 : 100;
    const auto result = rc::detail::checkTestable(
        [m] {
          const ht::decision_tape tape = *ht::gen_decision_tape(2048);
          ht::byte_source src = tape.source();
          const ht::shape_verdict v = ht::run_shapes_schedule(src, m);
          if (!v.ok()) RC_FAIL(v.text());
        },
        rc::detail::TestMetadata{}, params);
    rc::detail::FailureResult failure;
    INFO("mutant " << ht::to_string(m) << ", seed " << params.seed);
    REQUIRE(result.match(failure));
    INFO("caught after " << failure.numSuccess + 1 << " cases:\n" << failure.description);
    CHECK(failure.description.find(" violated") != std::string::npos);
  }
}

}  // namespace test_prop_shapes
