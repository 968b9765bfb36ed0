// SPDX-License-Identifier: MIT
// libFuzzer harness: the input bytes are one schedule (one byte per decision, see
// holdfast/testing/decision.hpp; once they run out, a PRNG seeded with their hash answers the
// rest: testing/tape_source.hpp, since these schedules read thousands of decisions) of one
// coordination recipe in the simulator (holdfast/testing/workload_recipes.hpp): the first decision
// picks the election, the semaphore or waiting without polling, the rest is its schedule (pauses,
// drift, delayed and lost requests and replies, store errors, shorter TTLs than asked). A violated
// invariant (S1-S6, O1, L1) prints its report and traps.
//
// HOLDFAST_MUTANT=<name> (a holdfast::testing::recipe_mutant) runs a negative control instead, in
// the recipe it breaks: the test suite asserts that libFuzzer catches each one from an empty
// corpus (fuzz/CMakeLists.txt).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <holdfast/testing/tape_source.hpp>
#include <holdfast/testing/workload_recipes.hpp>
#include "harness.hpp"

namespace fuzz_recipes {
namespace {
holdfast::testing::recipe_mutant mutation = holdfast::testing::recipe_mutant::none;
}  // namespace

int initialize(int*, char***) {
  holdfast_fuzz::read_mutant(mutation, &holdfast::testing::recipe_mutant_from_string,
                             "recipe mutant (see workload_recipes.hpp)");
  return 0;
}

int test_one_input(const std::uint8_t* data, std::size_t size) {
  holdfast::testing::tape_then_seeded_source src(data, size);
  const holdfast::testing::verdict v = holdfast::testing::run_recipe_schedule(src, mutation);
  if (!v.ok()) {
    std::fprintf(stderr, "holdfast: %s", v.report().c_str());
    __builtin_trap();
  }
  return 0;
}

}  // namespace fuzz_recipes

HOLDFAST_FUZZ_ENTRY(fuzz_recipes)
