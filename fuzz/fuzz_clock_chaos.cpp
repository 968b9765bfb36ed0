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
#include <holdfast/testing/conformance.hpp>
#include "harness.hpp"

namespace fuzz_clock_chaos {
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

int initialize(int*, char***) {
  holdfast_fuzz::read_mutant(options.mutation, &holdfast::testing::mutant_from_string,
                             "mutant (see testing/mutants.hpp)");
  return 0;
}

int test_one_input(const std::uint8_t* data, std::size_t size) {
  return holdfast::testing::fuzz_schedule(data, size, options);
}

}  // namespace fuzz_clock_chaos

HOLDFAST_FUZZ_ENTRY(fuzz_clock_chaos)
