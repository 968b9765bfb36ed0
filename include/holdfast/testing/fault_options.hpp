// SPDX-License-Identifier: MIT
// holdfast/testing/fault_options.hpp - fault_options: which faults the simulator
// (simulator.hpp) injects at client points and into the nodes' clocks; store_fault_options: which
// faults a sim_store (sim_store.hpp) injects on the network and into the store (restarts,
// crashes between its steps, lagging copies, machine reboots). A schedule's are both, in
// run_options (workload_plan.hpp).
//
// Thread-safety: a plain value.
#ifndef HOLDFAST_TESTING_FAULT_OPTIONS_HPP
#define HOLDFAST_TESTING_FAULT_OPTIONS_HPP

#include <chrono>
#include <cstdint>

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

/// Which faults a sim_store injects (all but restarts on by default).
struct store_fault_options {
  /// Requests spend time in flight before the store applies them. Default on.
  bool request_delays = true;
  /// Requests are lost before reaching the store (client gets errc::timeout). Default on.
  bool lost_requests = true;
  /// Replies spend time in flight. Default on.
  bool reply_delays = true;
  /// Replies are lost after the store applied the request (client gets errc::timeout). Default on.
  bool lost_replies = true;
  /// The store answers errc::store_unavailable before applying, or after applying. Default on.
  bool errors = true;
  /// The store goes down for a restart, at a request or between two of its own steps (the
  /// operations inside it then end with store_unavailable), and comes back with its state
  /// (durable stores only). Default off.
  bool restarts = false;
  /// Now and then (1 call in 9) an acquire or renew is applied with a shorter TTL than asked
  /// (half to nine tenths of it, at least 1 ms), and the grant reports the TTL applied, as a store
  /// may (store.hpp, T2; etcd's minimum TTL, a server-side cap): a holder must trust only what
  /// the store applied. Default off (it draws one more decision per call).
  bool shorter_ttls = false;
  /// Some restarts come back from a copy lacking the store's last k >= 1 operations (a replica
  /// promoted, an fsync window, a restore): grants lost, the counter back at the copy's. Needs
  /// restarts and sim_store::keep_copies (run_schedule sets it up). Default off.
  bool lagging_restarts = false;
  /// With lagging_restarts: the first copy is taken when the store is made, before any
  /// operation, so a lagging restart can lose every grant so far, the first one included (a
  /// replica promoted before it received a write, a restore from a backup taken at set-up).
  /// Default off (the first copy is taken after the first operation that succeeded).
  bool copy_from_start = false;
  /// With lagging_restarts: every restart whose copy lags comes back from it (a deployment whose
  /// every failover loses the tail not yet replicated), with no decision drawn; off, one in two
  /// does (a decision whose 0 answer keeps the state). Default off.
  bool every_restart_lags = false;
  /// Some restarts (1 in 3) are machine reboots: every client crashes at that instant (they ran
  /// on the store's machine: an embedded store's files are local), the store's clock starts over
  /// (it reads 1 ms when the store comes back, as a steady clock counts from boot) and the store
  /// is reopened with a new store_env::boot. A store must then drop the old boot's leases (their
  /// expiry is on a clock that is gone) and keep its token counter (S2 is judged across the
  /// reboot). Needs restarts and sim_store::on_reboot (run_schedule sets it up for a factory
  /// taking a store_env, with reopen_on_restart). Default off.
  bool reboots = false;
  /// Aim stalls inside a multi-step store's operation between an expiry and a re-grant: an
  /// acquire that began once a key's lease had expired (by the store's clock), before anyone was
  /// granted it again, is held at its first step point (1 in 2) until another client's grant
  /// applies (at most 2 scale; detail/sim_store_aim.hpp). Catches a store that acts on what it
  /// read before the stall (a cleanup that lists expired keys and deletes them later). Only
  /// stores that mark step points see it. Default on.
  bool regrant_stalls = true;
  /// With regrant_stalls: take every aimed stall once a finite decision source (byte_source) has
  /// run out, instead of 1 in 2 by a decision that an exhausted source answers 0. A libFuzzer
  /// input is short early in a run (100-300 bytes) and its workload alone takes 130-260, so its
  /// schedules were never aimed. An aimed stall slows a correct store and never fails one.
  /// Default off; store_run_options() and durable_store_run_options() (fuzz_store) turn it on.
  bool stall_when_exhausted = false;
  /// How often a request, and then its reply, spends time in flight when request_delays /
  /// reply_delays are on: the weight of "delayed" against 40 for "delivered at once" (and 1 or 2
  /// for each other fault). Default 10, about one stage in five (tests/unit/test_quorum_sim.cpp
  /// gives a quorum's members 6).
  std::uint32_t delay_weight = 10;
  /// With restarts: the weight of "the store goes down" at a request, against 40 for "delivered
  /// at once". Default 1; the lagging restart's negative control runs with 3
  /// (effective_run_options(), workload_plan.hpp).
  std::uint32_t restart_weight = 1;
};

}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_FAULT_OPTIONS_HPP
