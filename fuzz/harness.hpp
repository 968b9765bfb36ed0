// SPDX-License-Identifier: MIT
// fuzz/harness.hpp - what the project's own simulator harnesses (fuzz_<target>.cpp) share: the
// HOLDFAST_MUTANT lookup, their libFuzzer defaults (-entropic=0) and their entry points.
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
#include <cstring>
#include <optional>
#include <string_view>
#include <vector>

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

/// Adds `-entropic=0` to libFuzzer's command line unless it already names `-entropic=`, and says
/// so on stderr. libFuzzer parses its flags after LLVMFuzzerInitialize returns, so the flag is
/// this target's default and an explicit `-entropic=1` still wins. The standalone replayer
/// (standalone_main.cpp) skips arguments starting with '-', so it is unaffected.
///
/// Why: the entropic power schedule (libFuzzer's default: clang 14's prints "Running with entropic
/// power schedule (0xFF, 100)") updates, for every feature a run covers, its frequency and looks it
/// up in the list of rare features, a list trimmed (to 100) only of features seen more than 255
/// times. A schedule covers thousands of features (edges and their hit-count buckets), so while the
/// corpus is young, which for a 12 s CI budget or a negative-control catch is the whole run, that
/// bookkeeping costs more CPU than the schedule: perf showed 39-48% of fuzz_lease_schedule's time
/// in InputCorpus::UpdateFeatureFrequency and 6-12% in AddRareFeature, against 13-21% in the
/// harness (ASan+UBSan -O1, and -O1 without ASan). Without it each execution took 2.2-2.8x less
/// CPU in five targets and 1.5x less in fuzz_multi_lease, and libFuzzer reached more features in
/// the same time (tests/benchmarks/README.md, "Simulator and fuzz throughput"); every negative
/// control is still caught within its budget (fuzzcatch_* tests, fuzz/README.md).
///
/// `argv` is replaced by a copy that lives until the process exits. Call it once, from
/// LLVMFuzzerInitialize; not thread-safe.
inline void default_libfuzzer_flags(int* argc, char*** argv) {
  if (argc == nullptr || argv == nullptr || *argc < 1) return;
  for (int i = 1; i < *argc; ++i) {
    if (std::strncmp((*argv)[i], "-entropic=", 10) == 0) return;
  }
  static char entropic_off[] = "-entropic=0";
  static std::vector<char*> args;
  args.assign(*argv, *argv + *argc);
  args.insert(args.begin() + 1, entropic_off);
  args.push_back(nullptr);  // argv[argc] is null, as main's is
  *argv = args.data();
  *argc += 1;
  std::fprintf(stderr,
               "holdfast: -entropic=0 added to the command line (fuzz/harness.hpp; -entropic=1 "
               "keeps libFuzzer's default)\n");
}

}  // namespace holdfast_fuzz

#if defined(HOLDFAST_FUZZ_UNITY)
#define HOLDFAST_FUZZ_ENTRY(ns)
#else
/// libFuzzer's two entry points, forwarding to ns::initialize (after default_libfuzzer_flags) and
/// ns::test_one_input.
#define HOLDFAST_FUZZ_ENTRY(ns)                                                       \
  namespace ns {                                                                      \
  int initialize(int* argc, char*** argv);                                            \
  int test_one_input(const std::uint8_t* data, std::size_t size);                     \
  }                                                                                   \
  extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {                      \
    holdfast_fuzz::default_libfuzzer_flags(argc, argv);                               \
    return ns::initialize(argc, argv);                                                \
  }                                                                                   \
  extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) { \
    return ns::test_one_input(data, size);                                            \
  }
#endif

#endif  // HOLDFAST_FUZZ_HARNESS_HPP
