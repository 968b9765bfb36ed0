// SPDX-License-Identifier: MIT
// libFuzzer harness: like fuzz_lease_schedule, with every fault beyond the promises turned on:
// clocks that jump forwards and backwards, clock rates beyond the drift bound, store restarts
// (outages that keep state), and store clocks that tick coarsely (1 ms, 10 ms, 1 s; reads
// rounded down; on by default in every run). S4 (holder belief) is then not promised after the
// first such fault; S1 (fenced writes), S2, S3, S5 and L1 must hold regardless. Holders keep their
// leases alive with a keepalive and their clocks are made to regress: L2 (a holder whose clock
// regresses hears of it, or renews, within one renew interval) must hold too.
//
// HOLDFAST_MUTANT=<name> (holdfast/testing/mutants.hpp) runs a deliberately broken variant
// instead, as in fuzz_lease_schedule (fuzz/CMakeLists.txt asserts the expiry-boundary ones and
// ignores_clock_tick).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <holdfast/testing/conformance.hpp>
#include <optional>

namespace {
holdfast::testing::run_options chaos() {
  holdfast::testing::run_options o;
  o.faults.clock_jumps = true;
  o.faults.drift_beyond_bound = true;
  o.faults.store_clock_ticks = true;
  o.keepalive = true;  // holders' keepalives, clock regressions, and L2
  o.store_faults.restarts = true;
  return o;
}
holdfast::testing::run_options options = chaos();
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
