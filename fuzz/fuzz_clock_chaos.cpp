// libFuzzer harness: like fuzz_lease_schedule, with every fault beyond the promises turned on:
// clocks that jump forwards and backwards, clock rates beyond the drift bound, store restarts
// (outages that keep state). S4 (holder belief) is then not promised after the first such fault;
// S1 (fenced writes), S2, S3, S5 and L1 must hold regardless.
#include <cstddef>
#include <cstdint>
#include <holdfast/testing/conformance.hpp>

namespace {
holdfast::testing::run_options chaos() {
  holdfast::testing::run_options o;
  o.faults.clock_jumps = true;
  o.faults.drift_beyond_bound = true;
  o.store_faults.restarts = true;
  return o;
}
const holdfast::testing::run_options options = chaos();
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  return holdfast::testing::fuzz_schedule(data, size, options);
}
