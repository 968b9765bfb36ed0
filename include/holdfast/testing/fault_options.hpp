// SPDX-License-Identifier: MIT
// holdfast/testing/fault_options.hpp - fault_options: which faults the simulator
// (simulator.hpp) injects at client points and into the nodes' clocks. sim_store's network faults
// are store_fault_options (sim_store.hpp); a schedule's are both, in run_options
// (workload_plan.hpp).
//
// Thread-safety: a plain value.
#ifndef HOLDFAST_TESTING_FAULT_OPTIONS_HPP
#define HOLDFAST_TESTING_FAULT_OPTIONS_HPP

#include <chrono>

#include "holdfast/detail/config.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace testing {

/// Which faults the simulator injects at client points and into clocks. Durations are multiples
/// of `scale` (give it the TTL under test), so the same options stress a 100 ms and a 30 s lease
/// alike.
struct fault_options {
  /// Typical lease TTL; pauses, delays and jumps are drawn as fractions and multiples of it.
  std::chrono::nanoseconds scale = std::chrono::seconds(1);
  /// Let the scheduler switch clients at points (interleavings). Default on.
  bool preemption = true;
  /// Pause clients at points: 1 ms up to 5 * scale (GC pause, swapped out, slow disk). Default on.
  bool pauses = true;
  /// Crash clients at points (they restart later with a new owner id). Default on.
  bool crashes = true;
  /// Give nodes clock rates that differ within `drift_bound`. Default on.
  bool drift = true;
  /// The clock-rate error the clients' validity math allows (validity_options::drift): rates are
  /// chosen so that any two clocks differ by at most that factor. Default 0.01 (1%).
  double drift_bound = 0.01;
  /// Also give some clocks rates beyond the bound (S4 is then not promised). Default off.
  bool drift_beyond_bound = false;
  /// Make client clocks jump forwards and backwards (S4 is then not promised). Default off.
  bool clock_jumps = false;
  /// Give each store node's clock a tick drawn from exact, 1 ms, 10 ms and 1 s: its reads are
  /// true time rounded *down* to the tick, and sim_clock::tick() declares it, so a store must
  /// still hold every grant for the TTL it reports in real time (store.hpp, T2: memory_store adds
  /// the tick; a store that ignores it frees keys up to a tick early and breaks S3). Default on.
  bool store_clock_ticks = true;
  /// Give client nodes' clocks a tick too (6 in 9 exact, 2 in 9 1 ms, 1 in 9 scale / 10), read
  /// and declared the same way: a holder must stop trusting its lease one tick earlier than an
  /// exact clock would (a reading may lag true time by almost a tick; lease.hpp, validity.hpp).
  /// Default on.
  bool client_clock_ticks = true;
};

}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_FAULT_OPTIONS_HPP
