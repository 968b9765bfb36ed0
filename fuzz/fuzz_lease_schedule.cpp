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
#include <cstdlib>
#include <holdfast/testing/conformance.hpp>
#include <optional>

namespace {
holdfast::testing::run_options options;
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* name = std::getenv("HOLDFAST_MUTANT")) {
    const std::optional<holdfast::testing::mutant> m = holdfast::testing::mutant_from_string(name);
    if (!m) {
      std::fprintf(stderr, "HOLDFAST_MUTANT=%s: no such mutant (see testing/mutants.hpp)\n", name);
      std::abort();
    }
    options.mutation = *m;
    std::fprintf(stderr, "holdfast: fuzzing the negative control %s\n", name);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return holdfast::testing::fuzz_schedule(data, size, options);
}
