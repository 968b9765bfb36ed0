// SPDX-License-Identifier: MIT
// libFuzzer harness: the input bytes are one schedule (one byte per decision, see
// holdfast/testing/decision.hpp; once they run out, a PRNG seeded with their hash answers the
// rest: testing/tape_source.hpp) of waiting in a hand-off queue (holdfast/testing/
// workload_handoff.hpp, the queue of testing/sim_queue.hpp): the first decision picks blocking
// acquire() taking turns on one key or the semaphore waiting with wait_for_release_any, the rest
// is its schedule (pauses, drift, delayed and lost requests and replies at every lease call and
// every queue join and leave, lost notifications, dying notification sessions, store errors,
// shorter TTLs than asked). A violated invariant (S1-S6, O1, O2, L1) prints its report and traps.
//
// HOLDFAST_MUTANT=<name> (a holdfast::testing::queue_mutant, testing/mutants.hpp) runs a
// negative control instead: the test suite asserts that libFuzzer catches each one from an empty
// corpus (fuzz/CMakeLists.txt).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <holdfast/testing/tape_source.hpp>
#include <holdfast/testing/workload_handoff.hpp>
#include "harness.hpp"

namespace fuzz_handoff {
namespace {
holdfast::testing::queue_mutant mutation = holdfast::testing::queue_mutant::none;
}  // namespace

int initialize(int*, char***) {
  holdfast_fuzz::read_mutant(mutation, &holdfast::testing::queue_mutant_from_string,
                             "queue mutant (see mutants.hpp)");
  return 0;
}

int test_one_input(const std::uint8_t* data, std::size_t size) {
  holdfast::testing::tape_then_seeded_source src(data, size);
  const holdfast::testing::verdict v = holdfast::testing::run_handoff_schedule(src, mutation);
  if (!v.ok()) {
    std::fprintf(stderr, "holdfast: %s", v.report().c_str());
    __builtin_trap();
  }
  return 0;
}

}  // namespace fuzz_handoff

HOLDFAST_FUZZ_ENTRY(fuzz_handoff)
