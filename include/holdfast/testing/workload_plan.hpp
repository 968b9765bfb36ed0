// SPDX-License-Identifier: MIT
// holdfast/testing/workload_plan.hpp - what the simulated clients of one schedule do: the
// operations, the options of a run, and generate_workload(), which draws a workload from the
// decisions. workload.hpp runs it (run_schedule); testing/detail/schedule_runner.hpp is how.
//
// A schedule is a workload (2-4 clients, 1-2 keys, a list of client operations) plus every
// interleaving and fault the simulator draws while running it. Both come from one
// decision_source, so one seed, one byte string or one rapidcheck case is one whole schedule.
//
//   operation        | what the client does (shipped calls in brackets)
//   -----------------+----------------------------------------------------------------------------
//   work             | sleeps 0.1-2 TTL on its own clock (doing something else)
//   acquire          | blocks for the key, timeout 0.5-5 TTL        [holdfast::acquire]
//   try_acquire      | one attempt                                   [holdfast::try_acquire]
//   write            | checks its lease, writes with its token if valid  [lease::valid, fence]
//   write_at_edge    | sleeps until just before its validity ends, then checks and writes
//                    | (a holder using its lease to the last moment)   [lease::valid_until]
//   write_unchecked  | writes with its token without checking (a holder that lost track)
//   renew            | extends its lease, now or at the last moment    [lease::renew]
//   release          | releases and drops its lease                    [lease::release]
//   crash            | crashes now (restarts later with a new owner id)
//   clock_regress    | (keepalive runs only) just after a poll, the holder's clock jumps back by
//                    | 1, 5 or 10 TTL: it must hear of it, or renew, within one renew interval
//                    | (L2)                                          [keepalive::poll]
//   acquire_at_expiry| waits until the lease another client holds on the key ends by the
//                    | store's clock, then tries: one tick before, at, or one tick after that
//                    | instant (aimed again if the lease was renewed meanwhile)
//                    |                                               [holdfast::try_acquire]
//   reacquire        | (run_options::reacquires only) a holder asks the store again for its own
//                    | lease as the same owner (a retry after a lost reply, a second handle
//                    | under one owner id): same token, the store extended it (T1), the
//                    | holder's validity stays; another token, it adopts that grant; an error,
//                    | it keeps its lease, whose validity a failed re-acquire must not cut short
//                    |                                               [store.try_acquire]
//
// Thread-safety: plain values and a pure function of the decisions.
#ifndef HOLDFAST_TESTING_WORKLOAD_PLAN_HPP
#define HOLDFAST_TESTING_WORKLOAD_PLAN_HPP

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/testing/decision.hpp"
#include "holdfast/testing/mutants.hpp"
#include "holdfast/testing/resource.hpp"
#include "holdfast/testing/sim_store.hpp"
#include "holdfast/testing/simulator.hpp"
#include "holdfast/validity.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace testing {

/// One operation of a workload (see the table at the top of workload_plan.hpp).
enum class op_kind : std::uint8_t {
  work,
  acquire,
  try_acquire,
  write,
  write_at_edge,
  write_unchecked,
  renew,
  release,
  crash,
  acquire_at_expiry,
  clock_regress,
  reacquire,
};

/// Returns the operation's name, e.g. "write_at_edge".
inline const char* to_string(op_kind k) noexcept {
  switch (k) {
    case op_kind::work:
      return "work";
    case op_kind::acquire:
      return "acquire";
    case op_kind::try_acquire:
      return "try_acquire";
    case op_kind::write:
      return "write";
    case op_kind::write_at_edge:
      return "write_at_edge";
    case op_kind::write_unchecked:
      return "write_unchecked";
    case op_kind::renew:
      return "renew";
    case op_kind::release:
      return "release";
    case op_kind::crash:
      return "crash";
    case op_kind::acquire_at_expiry:
      return "acquire_at_expiry";
    case op_kind::clock_regress:
      return "clock_regress";
    case op_kind::reacquire:
      return "reacquire";
  }
  return "?";
}

/// One step of one client: what, which key (for acquires), and a size class 0-3 (timeout, sleep
/// or edge distance; see the table).
struct client_op {
  op_kind kind = op_kind::work;
  std::uint8_t client = 0;
  std::uint8_t key = 0;
  std::uint8_t arg = 0;
};

/// What the clients of one schedule do.
struct workload {
  std::uint32_t clients = 2;                       ///< 2 to run_options::max_clients.
  std::uint32_t keys = 1;                          ///< 1 to run_options::max_keys.
  resource_mode resource = resource_mode::fenced;  ///< The guard at every resource.
  std::vector<client_op> ops;                      ///< In program order (each client's in turn).
};

/// How schedules are generated and run.
struct run_options {
  /// The TTL every client asks for (ms). Fault durations scale with it. Default 1 s.
  std::chrono::milliseconds ttl{1000};
  /// Operations per schedule: drawn from [min_ops, max_ops]. Default 32..64: long enough that a
  /// random schedule usually exercises a whole acquire/write/expire/take-over cycle.
  std::uint32_t min_ops = 32;
  std::uint32_t max_ops = 64;
  /// Clients per schedule: drawn from [2, max_clients] (at most 4). Default 3.
  std::uint32_t max_clients = 3;
  /// Keys per schedule: drawn from [1, max_keys] (at most 2). Default 2.
  std::uint32_t max_keys = 2;
  /// Client and clock faults (scale and drift_bound are set from ttl and validity.drift).
  fault_options faults{};
  /// Store faults (set restarts only for a store that claims durability).
  store_fault_options store_faults{};
  /// At each restart (store_faults.restarts), destroy the store and make it anew through the
  /// factory, which must come back with what the old one persisted (a factory taking a
  /// store_env finds the same directory). Off: the restart is an outage and the store object,
  /// with its state, is kept. Default off.
  bool reopen_on_restart = false;
  /// A negative control to run instead of the correct stack (default none).
  mutant mutation = mutant::none;
  /// End with the L1 check (faults heal, a contender must acquire in time). Default on.
  bool liveness = true;
  /// The clients' validity options; `drift` is also the bound the simulated clocks respect.
  validity_options validity{};
  /// Store-clock tolerance when judging expiry (a store may round TTLs). Default 1 ms.
  std::chrono::nanoseconds tolerance = std::chrono::milliseconds(1);
  /// Holders keep their leases alive with a poll()-driven keepalive, clock_regress operations
  /// make their clocks jump back, and L2 is checked (a holder whose clock regresses hears of it,
  /// or renews, within one renew interval). Default off; fuzz_clock_chaos turns it on.
  bool keepalive = false;
  /// Holders also re-acquire their own live leases (op_kind::reacquire), where lost replies and
  /// member faults meet a holder's own second grant. Default off (the draws of every other run
  /// stay as they were); the quorum schedules turn it on (workload_quorum.hpp).
  bool reacquires = false;
  /// 0 (default): the workload is read from the decisions, one per field of each operation (a
  /// 64-operation workload is the first ~200 bytes of an input). 1-8: the workload is drawn from
  /// a seeded_source whose seed is the first `workload_seed_bytes` byte-sized decisions, so it
  /// costs that many bytes of an input however long it is, and the decisions after them go to
  /// interleavings and faults from the first bytes on (a short libFuzzer input reaches them).
  std::uint32_t workload_seed_bytes = 0;
};

/// True iff runs with `o` keep leases alive with a keepalive (run_options::keepalive, or the
/// mutant that breaks that loop).
inline bool uses_keepalive(const run_options& o) noexcept {
  return o.keepalive || o.mutation == mutant::keepalive_sleeps_through_regression;
}

/// The options a run with `o` really uses: `o`, except that a negative control which bites only
/// under a fault turns that fault on. mutant::token_only_fence (the equal-token rule) needs a
/// store that loses its newest grant and re-issues its token: a durable store restarted from a
/// lagging copy (store_fault_options::lagging_restarts) taken from its creation on
/// (copy_from_start), every restart whose copy lags losing what the copy lacks
/// (every_restart_lags), restarts at 30 in 82 requests (restart_weight), up to 4 clients, and a
/// workload drawn from a two-byte seed (workload_seed_bytes) so that the faults start at an
/// input's third byte: about 1 seeded schedule in 5 catches it, and 64-byte inputs do too
/// (fuzz/README.md, "Why S1 seldom caught").
inline run_options effective_run_options(run_options o) noexcept {
  if (o.mutation == mutant::token_only_fence) {
    o.store_faults.restarts = true;
    o.store_faults.lagging_restarts = true;
    o.store_faults.copy_from_start = true;
    o.store_faults.every_restart_lags = true;
    o.store_faults.restart_weight = std::max<std::uint32_t>(o.store_faults.restart_weight, 30);
    o.max_clients = 4;
    o.workload_seed_bytes = std::max<std::uint32_t>(o.workload_seed_bytes, 2);
  }
  return o;
}

/// Draws a workload from `src` (the first decisions of a schedule). Each client's next operation
/// is drawn from what makes sense for it: one that (as far as the plan knows) holds no lease
/// mostly acquires; one that holds mostly writes, renews and releases (from a seed first, with
/// run_options::workload_seed_bytes). Without a seed, a source answering 0
/// everywhere gives the smallest workload: 2 clients, 1 key, min_ops `work` operations.
inline workload generate_workload(decision_source& src, const run_options& o) {
  if (o.workload_seed_bytes != 0) {
    std::uint64_t seed = 0;
    const std::uint32_t n = std::min<std::uint32_t>(o.workload_seed_bytes, 8);
    for (std::uint32_t i = 0; i < n; ++i) seed |= std::uint64_t{src.choose(256)} << (8 * i);
    seeded_source from_seed(seed);
    run_options inner = o;
    inner.workload_seed_bytes = 0;
    return generate_workload(from_seed, inner);
  }
  workload w;
  const std::uint32_t max_clients =
      std::min<std::uint32_t>(std::max<std::uint32_t>(o.max_clients, 2), 4);
  w.clients = 2 + src.choose(max_clients - 1);
  w.keys = o.max_keys > 1 && src.choose(4) == 3 ? 2 : 1;  // mostly one key: more contention
  if (o.mutation == mutant::no_fence) {
    w.resource = resource_mode::unfenced;
  } else if (o.mutation == mutant::check_then_write) {
    w.resource = resource_mode::check_then_write;
  } else if (o.mutation == mutant::token_only_fence) {
    w.resource = resource_mode::token_only;
  } else {
    w.resource = src.choose(2) == 0 ? resource_mode::fenced : resource_mode::gate;
  }
  const std::uint32_t lo = std::max<std::uint32_t>(o.min_ops, 1);
  const std::uint32_t hi = std::max(lo, o.max_ops);
  const std::uint32_t n = lo + src.choose(hi - lo + 1);
  static constexpr op_kind free_ops[] = {op_kind::work, op_kind::acquire, op_kind::try_acquire,
                                         op_kind::crash, op_kind::acquire_at_expiry};
  static constexpr op_kind held_ops[] = {
      op_kind::work,     op_kind::write,   op_kind::write_at_edge, op_kind::write_unchecked,
      op_kind::renew,    op_kind::release, op_kind::crash,         op_kind::clock_regress,
      op_kind::reacquire};
  // 0 without keepalives: the same draws as before. The mutant that breaks the loop gets more.
  const std::uint32_t regress = !uses_keepalive(o)                                          ? 0
                                : o.mutation == mutant::keepalive_sleeps_through_regression ? 12
                                                                                            : 3;
  bool holds[4] = {false, false, false, false};
  w.ops.reserve(n);
  for (std::uint32_t i = 0; i < n; ++i) {
    client_op op;
    op.client = static_cast<std::uint8_t>(src.choose(w.clients));
    bool& h = holds[op.client];
    op.kind = h ? held_ops[pick(src, {2, 7, 5, 2, 5, 2, 1, regress, o.reacquires ? 12u : 0u})]
                : free_ops[pick(src, {1, 6, 2, 0, 3})];
    if (op.kind == op_kind::acquire || op.kind == op_kind::try_acquire ||
        op.kind == op_kind::acquire_at_expiry) {
      h = true;
    }
    if (op.kind == op_kind::release || op.kind == op_kind::crash) h = false;
    op.key = static_cast<std::uint8_t>(src.choose(w.keys));
    op.arg = static_cast<std::uint8_t>(src.choose(4));
    w.ops.push_back(op);
  }
  return w;
}

}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_WORKLOAD_PLAN_HPP
