// SPDX-License-Identifier: MIT
// libFuzzer harness: the input bytes are one schedule (one byte per decision, see
// holdfast/testing/decision.hpp; once they run out, a PRNG seeded with their hash answers the
// rest: testing/tape_source.hpp, since these schedules read thousands of decisions) of the shipped
// quorum_store over three simulated members (holdfast/testing/workload_quorum.hpp): the lease
// workload, member faults (delays, lost requests and replies, errors), each member judged too. A
// violated invariant (S1-S5, O1, L1) prints its report and traps.
//
// HOLDFAST_MUTANT=<name> (a holdfast::testing::quorum_mutant) runs a negative control instead:
// the test suite asserts that libFuzzer catches each one from an empty corpus
// (fuzz/CMakeLists.txt).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <holdfast/testing/tape_source.hpp>
#include <holdfast/testing/workload_quorum.hpp>
#include "harness.hpp"

namespace fuzz_quorum_schedule {
namespace {
holdfast::testing::quorum_mutant mutation = holdfast::testing::quorum_mutant::none;
}  // namespace

int initialize(int*, char***) {
  holdfast_fuzz::read_mutant(mutation, &holdfast::testing::quorum_mutant_from_string,
                             "quorum mutant (see workload_quorum.hpp)");
  return 0;
}

int test_one_input(const std::uint8_t* data, std::size_t size) {
  holdfast::testing::tape_then_seeded_source src(data, size);
  const holdfast::testing::verdict v = holdfast::testing::run_quorum_control(src, mutation);
  if (!v.ok()) {
    std::fprintf(stderr, "holdfast: %s", v.report().c_str());
    __builtin_trap();
  }
  return 0;
}

}  // namespace fuzz_quorum_schedule

HOLDFAST_FUZZ_ENTRY(fuzz_quorum_schedule)
