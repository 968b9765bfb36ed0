// SPDX-License-Identifier: MIT
// fuzz/harness.hpp - what the project's own simulator harnesses (fuzz_<target>.cpp) share: the
// HOLDFAST_MUTANT lookup, and their entry points.
//
// Each harness defines `int initialize(int*, char***)` and `int test_one_input(const uint8_t*,
// size_t)` in a namespace of its own (fuzz_<target>) and ends with HOLDFAST_FUZZ_ENTRY(ns),
// which defines libFuzzer's LLVMFuzzerInitialize and LLVMFuzzerTestOneInput from them. Built
// alone (a libFuzzer binary, or replay_<target> with standalone_main.cpp) the file is an
// ordinary fuzz target. fuzz/CMakeLists.txt instead compiles the harnesses together as one
// translation unit (HOLDFAST_FUZZ_UNITY defined: the macro then defines nothing) and links each
// fuzz_<target> from it and a generated two-line TU that holds only HOLDFAST_FUZZ_ENTRY: they
// instantiate the same simulator, checker and stores, which one TU instantiates and optimizes
// once (measured: four harnesses 135 s of CPU compiled apart, 54 s together; clang++ 14,
// ASan+UBSan, -O1). A user's own fuzz target needs none of this: it defines the two libFuzzer
// functions itself (README, "Checking your own store"; fuzz_example_stores.cpp).
#ifndef HOLDFAST_FUZZ_HARNESS_HPP
#define HOLDFAST_FUZZ_HARNESS_HPP

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string_view>

namespace holdfast_fuzz {

/// Sets `out` to the negative control HOLDFAST_MUTANT names, read through `parse` (one of the
/// <kind>_from_string functions of holdfast/testing/mutants.hpp and the workload headers), and
/// says so on stderr. Unset, `out` is left as it is (the correct stack). A name `parse` does not
/// know prints it with `catalogue` (where the names are listed) and aborts: a fuzzer that ran the
/// correct stack in place of a control would report a control as not caught for the wrong
/// reason. Call it once, from initialize(); not thread-safe (getenv).
template <class Mutant>
void read_mutant(Mutant& out, std::optional<Mutant> (*parse)(std::string_view) noexcept,
                 const char* catalogue) {
  const char* name = std::getenv("HOLDFAST_MUTANT");
  if (name == nullptr) return;
  const std::optional<Mutant> m = parse(name);
  if (!m) {
    std::fprintf(stderr, "HOLDFAST_MUTANT=%s: no such %s\n", name, catalogue);
    std::abort();
  }
  out = *m;
  std::fprintf(stderr, "holdfast: fuzzing the negative control %s\n", name);
}

}  // namespace holdfast_fuzz

#if defined(HOLDFAST_FUZZ_UNITY)
#define HOLDFAST_FUZZ_ENTRY(ns)
#else
/// libFuzzer's two entry points, forwarding to ns::initialize and ns::test_one_input.
#define HOLDFAST_FUZZ_ENTRY(ns)                                                       \
  namespace ns {                                                                      \
  int initialize(int* argc, char*** argv);                                            \
  int test_one_input(const std::uint8_t* data, std::size_t size);                     \
  }                                                                                   \
  extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {                      \
    return ns::initialize(argc, argv);                                                \
  }                                                                                   \
  extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) { \
    return ns::test_one_input(data, size);                                            \
  }
#endif

#endif  // HOLDFAST_FUZZ_HARNESS_HPP
