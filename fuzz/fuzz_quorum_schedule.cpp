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
#include <cstdlib>
#include <holdfast/testing/tape_source.hpp>
#include <holdfast/testing/workload_quorum.hpp>
#include <optional>

namespace {
holdfast::testing::quorum_mutant mutation = holdfast::testing::quorum_mutant::none;
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* name = std::getenv("HOLDFAST_MUTANT")) {
    const std::optional<holdfast::testing::quorum_mutant> m =
        holdfast::testing::quorum_mutant_from_string(name);
    if (!m) {
      std::fprintf(stderr, "HOLDFAST_MUTANT=%s: no such quorum mutant (see workload_quorum.hpp)\n",
                   name);
      std::abort();
    }
    mutation = *m;
    std::fprintf(stderr, "holdfast: fuzzing the negative control %s\n", name);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  holdfast::testing::tape_then_seeded_source src(data, size);
  const holdfast::testing::verdict v = holdfast::testing::run_quorum_control(src, mutation);
  if (!v.ok()) {
    std::fprintf(stderr, "holdfast: %s", v.report().c_str());
    __builtin_trap();
  }
  return 0;
}
