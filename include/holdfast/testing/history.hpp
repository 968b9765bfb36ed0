// SPDX-License-Identifier: MIT
// holdfast/testing/history.hpp - what a simulation records, and what the checker reads.
//
// A history is the ordered list of everything observable that happened in one simulated run:
// every store operation at the instant the store applied it, every client-side outcome (a lease
// acquired, a validity check, a write admitted or rejected), and every injected fault (pauses,
// crashes, clock jumps, store outages). Each event carries the true (simulated, global) time, the
// acting node's own clock reading, and the primary store's clock reading, so invariants judged
// "by the store's clock" (testing/checker.hpp: S3, S4) can be checked exactly.
//
//   field      | meaning
//   -----------+--------------------------------------------------------------------------
//   true_ns    | simulated real time (ns since the run began); never goes backwards
//   local_ns   | the acting node's clock at that instant (drifts and jumps)
//   store_ns   | the primary store's clock at that instant (for expiry judgements)
//   node       | who acted (names in history::nodes); for store events, the store
//   peer       | for store events: the client that called (no_node if none)
//   kind       | what happened (event_kind)
//   key        | which lease key (names in history::keys)
//   owner      | the owner id involved
//   token      | the fencing token involved (argument or result)
//   ttl_ms     | TTL asked for or granted (ms)
//   outcome    | 0 on success, else an outcome_code (what the store did, for store events)
//   seen       | for store events: what the client was told (differs under injected faults)
//   value      | kind-specific: newest token before a write, a pause's length (ns), 1/0 for a
//              | validity check, a jump's size (ns), liveness bound (ns) for `heal`, the new
//              | token of a raise; for acquired/renewed, where the holder's belief ends
//              | (its clock, ns; 0 if not recorded); for other store events, the injected
//              | delay (ns)
//   note       | for store events: the fault injected around it (fault_note)
//   begin_local_ns | for store events: the store's clock when it began applying; earlier than
//              | local_ns only if the store stalled at a step point inside the operation (0: not
//              | recorded; local_ns is used)
//   end_local_ns | for store events: the store's clock when the store returned; later than
//              | local_ns when the operation took effect (step_kind::takes_effect) before its
//              | last step (0: not recorded)
//
// Events are appended in true-time order; a store operation is placed at its linearization
// point (the instant the store applied it), not when its reply arrived.
#ifndef HOLDFAST_TESTING_HISTORY_HPP
#define HOLDFAST_TESTING_HISTORY_HPP

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <system_error>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace testing {

/// A node's index in history::nodes.
using node_id = std::uint16_t;
/// Marks "no node" (an event not caused by any simulated node).
inline constexpr node_id no_node = std::numeric_limits<node_id>::max();

/// What an event records.
enum class event_kind : std::uint8_t {
  store_acquire,      ///< The store applied try_acquire (outcome: 0 = granted `token`).
  store_renew,        ///< The store applied renew.
  store_release,      ///< The store applied release.
  store_down,         ///< A store went down (restart begins); requests fail until store_up.
  store_up,           ///< A store came back after a restart (durable: state kept).
  acquired,           ///< A client's acquire()/try_acquire() returned a lease with `token`.
  acquire_failed,     ///< A client's acquire()/try_acquire() returned an error (`outcome`).
  renewed,            ///< A client's lease::renew() succeeded.
  renew_failed,       ///< A client's lease::renew() failed (`outcome`).
  released,           ///< A client's lease::release() succeeded.
  release_failed,     ///< A client's lease::release() failed (`outcome`).
  validity,           ///< A client checked its lease: value 1 = believes it holds, 0 = not.
  write,              ///< A resource write with `token`: outcome 0 = admitted; value = newest
                      ///< token admitted before it.
  pause,              ///< A client stalled for `value` ns (GC pause, preemption, swap).
  crash,              ///< A client crashed: its process and every handle it had are gone.
  restart,            ///< A crashed client came back (new owner id, no leases).
  clock_jump,         ///< A node's clock jumped by `value` ns (negative: backwards).
  heal,               ///< Faults stop here; value = the L1 bound (ns) for a contender to acquire.
  liveness_acquired,  ///< The liveness contender acquired (`token`).
  liveness_failed,    ///< The liveness contender gave up (`outcome`).
  store_raise,        ///< The store applied raise_token (quorum.hpp): `token` -> `value`.
  lease_lost,         ///< A client's lease turned lost (its on-loss callback ran): `value` is the
                      ///< holdfast::loss_cause.
  clock_regress,      ///< A holder's clock was made to jump back `-value` ns right after its
                      ///< keepalive read it (a regression, checked by L2).
  queue_join,         ///< The store queued client `peer` (`owner` if known) for `key`'s hand-off.
  queue_leave,        ///< The store took `peer`'s place in `key`'s queue out (outcome: 0 = it
                      ///< had one; not_applied = the request never arrived).
  queue_wake,         ///< A release of `key` handed off to `peer`: its place is taken out.
};

/// The fault injected around a store operation.
enum class fault_note : std::uint8_t {
  none,
  request_delayed,   ///< The request spent `value` ns in flight before the store applied it.
  reply_delayed,     ///< The reply spent `value` ns in flight.
  reply_lost,        ///< Applied at the store; the client got an error instead of the reply.
  error_after,       ///< Applied at the store; the store then answered with an error.
  store_crashed,     ///< The store crashed while the operation was inside it: not applied if it
                     ///< had not taken effect (its later steps never ran), else applied and its
                     ///< reply lost; the client got store_unavailable.
  machine_rebooted,  ///< store_down / store_up: the store's machine rebooted (every client
                     ///< crashed, the store's clock started over, store_env::boot is new).
};

/// Outcome numbers: 0 success, holdfast::errc values as themselves, any other error category
/// as `foreign_error`.
using outcome_code = std::int16_t;
/// An error from a category other than holdfast's (a user store's transport error).
inline constexpr outcome_code foreign_error = 99;
/// The store never applied the request (it was dropped, or failed before applying).
inline constexpr outcome_code not_applied = 98;

/// Converts an error code (zero = success) to an outcome_code.
inline outcome_code to_outcome(const std::error_code& ec) noexcept {
  if (!ec) return 0;
  if (ec.category() == error_category()) return static_cast<outcome_code>(ec.value());
  return foreign_error;
}

/// Returns a short name for an outcome_code: "ok", an errc's own name ("busy", "lease_lost", ...,
/// "caught_exception"; error.hpp's to_string(errc)), "not_applied" or "foreign_error".
inline const char* outcome_name(outcome_code c) noexcept {
  if (c == 0) return "ok";
  if (c == not_applied) return "not_applied";
  if (const char* name = holdfast::to_string(static_cast<errc>(c))) return name;
  return "foreign_error";
}

/// Returns the enumerator's name, e.g. "store_acquire".
inline const char* to_string(event_kind k) noexcept {
  switch (k) {
    case event_kind::store_acquire:
      return "store_acquire";
    case event_kind::store_renew:
      return "store_renew";
    case event_kind::store_release:
      return "store_release";
    case event_kind::store_down:
      return "store_down";
    case event_kind::store_up:
      return "store_up";
    case event_kind::acquired:
      return "acquired";
    case event_kind::acquire_failed:
      return "acquire_failed";
    case event_kind::renewed:
      return "renewed";
    case event_kind::renew_failed:
      return "renew_failed";
    case event_kind::released:
      return "released";
    case event_kind::release_failed:
      return "release_failed";
    case event_kind::validity:
      return "validity";
    case event_kind::write:
      return "write";
    case event_kind::pause:
      return "pause";
    case event_kind::crash:
      return "crash";
    case event_kind::restart:
      return "restart";
    case event_kind::clock_jump:
      return "clock_jump";
    case event_kind::heal:
      return "heal";
    case event_kind::liveness_acquired:
      return "liveness_acquired";
    case event_kind::liveness_failed:
      return "liveness_failed";
    case event_kind::store_raise:
      return "store_raise";
    case event_kind::lease_lost:
      return "lease_lost";
    case event_kind::clock_regress:
      return "clock_regress";
    case event_kind::queue_join:
      return "queue_join";
    case event_kind::queue_leave:
      return "queue_leave";
    case event_kind::queue_wake:
      return "queue_wake";
  }
  return "?";
}

/// Returns the enumerator's name, e.g. "reply_lost".
inline const char* to_string(fault_note n) noexcept {
  switch (n) {
    case fault_note::none:
      return "none";
    case fault_note::request_delayed:
      return "request_delayed";
    case fault_note::reply_delayed:
      return "reply_delayed";
    case fault_note::reply_lost:
      return "reply_lost";
    case fault_note::error_after:
      return "error_after";
    case fault_note::store_crashed:
      return "store_crashed";
    case fault_note::machine_rebooted:
      return "machine_rebooted";
  }
  return "?";
}

/// One recorded event (see the table at the top of history.hpp).
struct event {
  std::int64_t true_ns = 0;
  std::int64_t local_ns = 0;
  std::int64_t store_ns = 0;
  event_kind kind = event_kind::pause;
  node_id node = no_node;
  node_id peer = no_node;
  std::uint8_t key = 0;
  fault_note note = fault_note::none;
  outcome_code outcome = 0;
  outcome_code seen = 0;
  std::uint64_t token = 0;
  std::int64_t ttl_ms = 0;
  std::int64_t value = 0;
  std::int64_t begin_local_ns = 0;
  std::int64_t end_local_ns = 0;
  std::string owner;
};

/// The keys of one semaphore (semaphore.hpp): every key that starts with `prefix` is one of its
/// permits, and at most `permits` of them may be live at once by the store's clock (S6).
struct permit_group {
  std::string prefix;         ///< Key prefix of the permits, e.g. "pool#".
  std::uint32_t permits = 0;  ///< N, the bound on live permits.
};

/// A store operation that stopped at one of the store's own step points (holdfast::step_point,
/// step_kind::between) before it took effect, while others ran (true times, ns). The timeline
/// shows it with its operation: what a store does between its own steps (a delete of what it
/// listed before the stall) is seen nowhere else.
struct store_stall {
  std::size_t event = 0;        ///< The operation's event, in history::events.
  std::int64_t reached_ns = 0;  ///< When it reached the step point.
  std::int64_t resumed_ns = 0;  ///< When its next step ran (> reached_ns).
};

namespace detail {
// The most events one history of this thread held (history::add). Growing the vector one doubling
// at a time moved every event, owner string included, ~9 times per run: perf showed those moves,
// their allocations and the fresh pages ASan's quarantine hands out on each fuzz execution.
inline std::size_t& history_events_high_water() noexcept {
  thread_local std::size_t most = 0;
  return most;
}
}  // namespace detail

/// A whole run: its events plus what the checker needs to interpret them.
///
/// Thread-safety: a plain value; the simulator appends from its one thread.
struct history {
  std::vector<event> events;       ///< In true-time order.
  std::vector<std::string> nodes;  ///< Node names, by node_id.
  /// Each node's clock tick (ns), by node_id: its reads are true time rounded down to it (0:
  /// exact). A store may hold a grant up to two ticks beyond its TTL (store.hpp, T2). Missing: 0.
  std::vector<std::int64_t> ticks;
  std::vector<std::string> keys;    ///< Key names, by event::key.
  node_id primary_store = no_node;  ///< The store whose clock store_ns reads (S3/S4).
  /// S4 (holder belief) is promised only while every clock stays within the drift bound and no
  /// clock jumps: events at or after this true time are not checked for S4.
  std::int64_t s4_until_ns = std::numeric_limits<std::int64_t>::max();
  /// Store-clock tolerance (ns) when judging expiry: a store may end a lease up to this much
  /// later than its TTL says (it rounds up to its own resolution, its clock is coarse), so an
  /// instant this close after an expiry is not judged. There is none before an expiry: a store
  /// must never end a lease earlier than the TTL it reported (store.hpp, T2).
  std::int64_t tolerance_ns = 1000000;
  /// L2: a client that holds a lease kept alive by a keepalive and whose clock jumps backwards
  /// must learn it (lease_lost, a failed validity check or renewal) or renew within this much true
  /// time (ns): one renew interval. 0: L2 is not checked.
  std::int64_t regression_bound_ns = 0;
  /// Semaphores whose permit bound the checker enforces (S6); empty for plain lease runs.
  std::vector<permit_group> permit_groups;
  /// Decisions the simulator drew from the source during the run (the workload's come on top).
  std::uint64_t decisions = 0;
  /// Times the scheduler switched into a client fiber (each also costs the switch back).
  std::uint64_t switches = 0;
  /// step_kind::between points the stores reached inside operations of simulated clients
  /// (holdfast::step_point): 0 means no interleaving inside a store operation was explored.
  std::uint64_t store_steps = 0;
  /// The stalls of recorded store operations at step points before they took effect, in the
  /// order the operations took effect.
  std::vector<store_stall> store_stalls;

  /// Appends `e` and returns its index. The first event reserves room for as many events as the
  /// longest history this thread recorded before (up to 4,096), so runs made back to back, as a
  /// fuzzer makes them, do not regrow the vector event by event.
  std::size_t add(event e) {
    std::size_t& most = detail::history_events_high_water();
    if (events.capacity() == 0) events.reserve(most);
    events.push_back(std::move(e));
    if (events.size() > most && events.size() <= 4096) most = events.size();
    return events.size() - 1;
  }

  /// Makes room for `n` nodes' names and ticks, so that adding them allocates once.
  void reserve_nodes(std::size_t n) {
    nodes.reserve(n);
    ticks.reserve(n);
  }

  /// Returns node `n`'s clock tick in ns (0 if unknown).
  [[nodiscard]] std::int64_t tick_of(node_id n) const noexcept {
    return n < ticks.size() ? ticks[n] : 0;
  }

  /// Returns the name of node `n` ("-" for no_node).
  [[nodiscard]] const std::string& node_name(node_id n) const {
    static const std::string none = "-";
    return n < nodes.size() ? nodes[n] : none;
  }
};

/// Returns the history as text, one event per line with every field, in a fixed format: two runs
/// fed the same decisions produce byte-identical text (the determinism tests compare it).
inline std::string to_string(const history& h) {
  std::string out;
  out.reserve(h.events.size() * 96);
  char buf[320];
  for (std::size_t i = 0; i < h.events.size(); ++i) {
    const event& e = h.events[i];
    std::snprintf(buf, sizeof buf,
                  "%zu t=%lld local=%lld store=%lld %s<-%s %s key=%u owner=%s token=%llu ttl=%lld "
                  "outcome=%s seen=%s value=%lld note=%s\n",
                  i, static_cast<long long>(e.true_ns), static_cast<long long>(e.local_ns),
                  static_cast<long long>(e.store_ns), h.node_name(e.node).c_str(),
                  h.node_name(e.peer).c_str(), to_string(e.kind), static_cast<unsigned>(e.key),
                  e.owner.c_str(), static_cast<unsigned long long>(e.token),
                  static_cast<long long>(e.ttl_ms), outcome_name(e.outcome), outcome_name(e.seen),
                  static_cast<long long>(e.value), to_string(e.note));
    out += buf;
  }
  return out;
}

}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_HISTORY_HPP
