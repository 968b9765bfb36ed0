// SPDX-License-Identifier: MIT
// rapidcheck over the recipes' simulation (holdfast/testing/workload_recipes.hpp): a generated
// decision tape picks a recipe (election, semaphore, waiting) and is its whole schedule; the
// shipped recipes keep every invariant (S1-S6, O1, L1), and each negative control is caught
// within rapidcheck's default case count (100), by the invariant it breaks: the semaphore that
// forgets a slot whose reply was lost by O1 (issue 22), count-then-grant by S6, the leader that
// trusts its callback by S4, the wait to the deadline by L1, the holder that trusts the TTL it
// asked (not the one the store applied) by S4.
#include <rapidcheck.h>
#include <rapidcheck/catch.h>
#include <catch2/catch.hpp>

#include <string>

#include "holdfast/testing/rapidcheck.hpp"
#include "holdfast/testing/workload_recipes.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_prop_recipes {

namespace ht = holdfast::testing;

TEST_CASE("recipes: election, semaphore and waiting keep every invariant on any tape",
          "[testing/property][recipes]") {
  rc::prop("S1-S6, O1, L1", [] {
    const ht::decision_tape tape = *rc::gen::noShrink(ht::gen_decision_tape(4096));
    ht::byte_source src = tape.source();
    const ht::verdict v = ht::run_recipe_schedule(src);
    if (!v.ok()) RC_FAIL(v.report());
  });
}

TEST_CASE("recipes: rapidcheck catches every negative control", "[testing/property][recipes]") {
  rc::detail::TestParams params = rc::detail::configuration().testParams;
  params.disableShrinking = true;  // catching is the point here
  for (ht::recipe_mutant m : ht::all_recipe_mutants) {
    const auto result = rc::detail::checkTestable(
        [m] {
          const ht::decision_tape tape = *ht::gen_decision_tape(4096);
          ht::byte_source src = tape.source();
          const ht::verdict v = ht::run_recipe_schedule(src, m);
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

}  // namespace test_prop_recipes
