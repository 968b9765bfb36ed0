// SPDX-License-Identifier: MIT
// libFuzzer harness: the input bytes are one schedule (one byte per decision, see
// holdfast/testing/decision.hpp) of the lock shapes' simulation (holdfast/testing/
// shapes_workload.hpp): acquire_all() on the ordered path and reentrant_holder under every fault,
// then two processes taking {k0, k1} in opposite orders. A violated property ("all or nothing",
// "progress", "re-entry held", "re-entry freed") or invariant (S1-S5) prints its report and traps.
//
// HOLDFAST_MUTANT=<name> (a holdfast::testing::shape_mutant) runs a negative control instead: the
// test suite asserts that libFuzzer catches each one (fuzz/CMakeLists.txt).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <holdfast/testing/shapes_workload.hpp>
#include "harness.hpp"

namespace fuzz_multi_lease {
namespace {
holdfast::testing::shape_mutant mutation = holdfast::testing::shape_mutant::none;
}  // namespace

int initialize(int*, char***) {
  holdfast_fuzz::read_mutant(mutation, &holdfast::testing::shape_mutant_from_string,
                             "shape mutant (see shapes_workload.hpp)");
  return 0;
}

int test_one_input(const std::uint8_t* data, std::size_t size) {
  holdfast::testing::byte_source src(data, size);
  const holdfast::testing::shape_verdict v = holdfast::testing::run_shapes_schedule(src, mutation);
  if (!v.ok()) {
    std::fprintf(stderr, "holdfast: %s", v.text().c_str());
    __builtin_trap();
  }
  return 0;
}

}  // namespace fuzz_multi_lease

HOLDFAST_FUZZ_ENTRY(fuzz_multi_lease)
