// SPDX-License-Identifier: MIT
// libFuzzer harness: the input bytes are a whole schedule (workload, interleaving, faults; one
// byte per decision, see holdfast/testing/decision.hpp) of the shipped lease stack on
// memory_store, fenced<T> and fence_gate, with clocks within the drift bound. Any violated
// invariant (S1-S5, L1) prints the timeline, its shrunk form, and traps.
//
// HOLDFAST_MUTANT=<name> (holdfast/testing/mutants.hpp) runs a deliberately broken variant
// instead: the test suite asserts that libFuzzer catches each one (fuzz/CMakeLists.txt).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <holdfast/testing/conformance.hpp>
#include "harness.hpp"

namespace fuzz_lease_schedule {
namespace {
holdfast::testing::run_options options;
}  // namespace

int initialize(int*, char***) {
  holdfast_fuzz::read_mutant(options.mutation, &holdfast::testing::mutant_from_string,
                             "mutant (see testing/mutants.hpp)");
  return 0;
}

int test_one_input(const std::uint8_t* data, std::size_t size) {
  return holdfast::testing::fuzz_schedule(data, size, options);
}

}  // namespace fuzz_lease_schedule

HOLDFAST_FUZZ_ENTRY(fuzz_lease_schedule)
