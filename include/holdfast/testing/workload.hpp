// holdfast/testing/workload.hpp - generated schedules: what simulated clients do with the shipped
// lease API, run through the simulator and judged by the checker.
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
//
// Time bugs live at boundaries, so operations are aimed at the instants that matter, to the tick:
// acquire_at_expiry at a lease's end by the store's clock; write_at_edge one tick before, at, 1 ms
// and 1% of the TTL before the holder's validity ends; a late renew one tick or 1 ms (or 2% of the
// TTL) before it. Everything else lands wherever pauses, delays and sleeps put it.
// A client holds at most one lease at a time; operations that do not apply (write without a
// lease) do nothing. At the end each client releases what it holds (RAII). Then, for L1, faults
// heal and one contender per key must acquire within the bound: TTL (plus any time a backwards
// store-clock jump added) on the store's clock, plus the backoff cap, on healed clocks.
//
// With run_options::keepalive, every holder keeps its lease alive with a keepalive it drives as an
// event loop (poll(); every sleep of a holding client wakes for the renewal instants it returns
// and polls again), and its on-loss callback is recorded (lease_lost), so the history shows L2.
//
// Holder mutants (mutants.hpp) change only how the client uses the shipped lease:
// validity_from_reply keeps its own belief measured from the reply; no_drift_allowance configures
// the lease with drift 0.
#ifndef HOLDFAST_TESTING_WORKLOAD_HPP
#define HOLDFAST_TESTING_WORKLOAD_HPP

#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/keepalive.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/stores/memory.hpp"
#include "holdfast/testing/checker.hpp"
#include "holdfast/testing/decision.hpp"
#include "holdfast/testing/history.hpp"
#include "holdfast/testing/mutants.hpp"
#include "holdfast/testing/resource.hpp"
#include "holdfast/testing/sim_store.hpp"
#include "holdfast/testing/simulator.hpp"
#include "holdfast/validity.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace testing {

/// One operation of a workload (see the table at the top of workload.hpp).
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
};

/// True iff runs with `o` keep leases alive with a keepalive (run_options::keepalive, or the
/// mutant that breaks that loop).
inline bool uses_keepalive(const run_options& o) noexcept {
  return o.keepalive || o.mutation == mutant::keepalive_sleeps_through_regression;
}

/// What a run produced: the workload, the full history, and the checker's verdict.
struct run_result {
  workload plan;
  history log;
  verdict result;
};

/// Draws a workload from `src` (the first decisions of a schedule). Each client's next operation
/// is drawn from what makes sense for it: one that (as far as the plan knows) holds no lease
/// mostly acquires; one that holds mostly writes, renews and releases. A source answering 0
/// everywhere gives the smallest workload: 2 clients, 1 key, min_ops `work` operations.
inline workload generate_workload(decision_source& src, const run_options& o) {
  workload w;
  const std::uint32_t max_clients =
      std::min<std::uint32_t>(std::max<std::uint32_t>(o.max_clients, 2), 4);
  w.clients = 2 + src.choose(max_clients - 1);
  w.keys = o.max_keys > 1 && src.choose(4) == 3 ? 2 : 1;  // mostly one key: more contention
  if (o.mutation == mutant::no_fence) {
    w.resource = resource_mode::unfenced;
  } else if (o.mutation == mutant::check_then_write) {
    w.resource = resource_mode::check_then_write;
  } else {
    w.resource = src.choose(2) == 0 ? resource_mode::fenced : resource_mode::gate;
  }
  const std::uint32_t lo = std::max<std::uint32_t>(o.min_ops, 1);
  const std::uint32_t hi = std::max(lo, o.max_ops);
  const std::uint32_t n = lo + src.choose(hi - lo + 1);
  static constexpr op_kind free_ops[] = {op_kind::work, op_kind::acquire, op_kind::try_acquire,
                                         op_kind::crash, op_kind::acquire_at_expiry};
  static constexpr op_kind held_ops[] = {
      op_kind::work,  op_kind::write,   op_kind::write_at_edge, op_kind::write_unchecked,
      op_kind::renew, op_kind::release, op_kind::crash,         op_kind::clock_regress};
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
    op.kind = h ? held_ops[pick(src, {2, 7, 5, 2, 5, 2, 1, regress})]
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

namespace detail {

inline const char* key_name(std::uint32_t k) noexcept {
  return k == 0 ? "orders" : "ledger";
}

/// Runs a workload's clients on the simulator against one sim_store, then the L1 contenders.
template <class Store>
class schedule_runner {
 public:
  using store_type = sim_store<Store>;
  using lease_type = lease<store_type, sim_clock>;

  schedule_runner(simulator& sim, store_type& store, const workload& w, const run_options& o)
      : sim_(sim), store_(store), w_(w), o_(o) {
    for (std::uint32_t k = 0; k < w.keys; ++k) {
      resources_.push_back(
          std::make_unique<sim_resource>(sim, static_cast<std::uint8_t>(k), w.resource));
    }
    clients_.resize(w.clients);
    for (std::uint32_t i = 0; i < w.clients; ++i) {
      client& c = clients_[i];
      c.name = std::string(1, static_cast<char>('A' + i));
      c.owner = c.name;
      c.node = sim.add_client(c.name);
    }
    for (const client_op& op : w.ops) clients_[op.client].ops.push_back(op);
  }

  void run_clients() {
    for (client& c : clients_) {
      sim_.spawn(c.node, [this, &c] { program(c); });
    }
    sim_.run();
  }

  void run_liveness() {
    sim_.heal();
    const std::int64_t ttl_ns = std::chrono::nanoseconds(o_.ttl).count();
    const std::int64_t store_now = sim_.local_ns(store_.node());
    const std::int64_t excess = std::max<std::int64_t>(0, store_.clock_high_water() - store_now);
    // A store on a coarse clock may hold a grant up to two ticks beyond its TTL (store.hpp, T2).
    const std::int64_t span = ttl_ns + excess + 2 * sim_.log().tick_of(store_.node()) +
                              std::chrono::nanoseconds(o_.tolerance).count();
    const auto at_rate = [](std::int64_t local, std::int32_t ppm) {
      const long double t = static_cast<long double>(local) * 1e6L / (1e6L + ppm);
      return static_cast<std::int64_t>(t) + 1;
    };
    contenders_.resize(w_.keys);
    std::int64_t bound = 0;
    for (std::uint32_t k = 0; k < w_.keys; ++k) {
      client& c = contenders_[k];
      c.name = w_.keys == 1 ? "L" : "L" + std::to_string(k + 1);
      c.owner = c.name;
      c.node = sim_.add_client(c.name);
      const std::int64_t b = at_rate(span, sim_.skew_ppm(store_.node())) +
                             at_rate(backoff_cap().count(), sim_.skew_ppm(c.node)) + 1000000;
      bound = std::max(bound, b);
    }
    event heal = sim_.make_event(event_kind::heal, no_node);
    heal.value = bound;
    sim_.log().add(std::move(heal));
    for (std::uint32_t k = 0; k < w_.keys; ++k) {
      client& c = contenders_[k];
      sim_.spawn(c.node, [this, &c, k, bound] { contend(c, k, bound); });
    }
    sim_.run();
  }

 private:
  struct client {
    node_id node = no_node;
    std::string name;
    std::string owner;
    std::uint32_t incarnation = 1;
    std::uint32_t attempts = 0;
    std::vector<client_op> ops;
    std::optional<lease_type> held;
    std::uint8_t key = 0;
    std::int64_t belief_until = 0;  // validity_from_reply: the mutant's own belief (local ns)
    std::unique_ptr<keepalive<sim_clock>> ka;      // run_options::keepalive: its event loop's
    std::optional<sim_clock::time_point> ka_next;  // the instant its last poll() returned
  };

  std::chrono::nanoseconds backoff_cap() const {
    return std::max<std::chrono::nanoseconds>(std::chrono::nanoseconds(o_.ttl) / 4,
                                              std::chrono::milliseconds(2));
  }

  acquire_options<sim_clock> options(client& c) {
    acquire_options<sim_clock> opts;
    opts.clock = sim_.clock(c.node);
    opts.owner = c.owner;
    opts.validity = o_.validity;
    if (o_.mutation == mutant::no_drift_allowance) opts.validity.drift = 0.0;
    opts.backoff.initial = std::max<std::chrono::nanoseconds>(std::chrono::nanoseconds(o_.ttl) / 50,
                                                              std::chrono::milliseconds(1));
    opts.backoff.max_delay = backoff_cap();
    opts.backoff.seed = (static_cast<std::uint64_t>(c.node) << 40) ^
                        (static_cast<std::uint64_t>(c.incarnation) << 20) ^ ++c.attempts;
    return opts;
  }

  void record(event_kind k, client& c, std::error_code ec = {}, std::uint64_t token = 0,
              std::int64_t value = 0) {
    if (sim_.current_crashed()) return;  // a dead process reports nothing
    event e = sim_.make_event(k, c.node);
    e.owner = c.owner;
    e.key = c.key;
    e.token = token;
    e.outcome = to_outcome(ec);
    e.value = value;
    e.ttl_ms = o_.ttl.count();
    sim_.log().add(std::move(e));
  }

  std::int64_t span_ns() const { return trusted_span(o_.ttl, o_.validity).count(); }

  // The holder's belief: the shipped lease's valid(), or the mutant's reply-based belief.
  bool believes(client& c) {
    if (o_.mutation == mutant::validity_from_reply) {
      const std::int64_t now = sim_.clock(c.node).now().time_since_epoch().count();
      return c.held->state() == lease_state::held && now < c.belief_until;
    }
    return c.held->valid();
  }

  std::int64_t belief_end(client& c) const {
    if (o_.mutation == mutant::validity_from_reply) return c.belief_until;
    return c.held->valid_until().time_since_epoch().count();
  }

  void note_reply(client& c) {
    // validity_from_reply: the bug is here, measuring from the reply's arrival.
    if (o_.mutation == mutant::validity_from_reply)
      c.belief_until = sim_.local_ns(c.node) + span_ns();
  }

  void checked_write(client& c) {
    const bool valid = believes(c);
    record(event_kind::validity, c, {}, c.held->token().value(), valid ? 1 : 0);
    if (valid) (void)resources_[c.key]->write(c.held->token(), c.owner);
  }

  // run_options::keepalive: hands the new lease to the client's keepalive (made on first use, no
  // thread: the client polls it) and records its loss when the on-loss callback tells.
  void keep(client& c) {
    if (!uses_keepalive(o_) || !c.held) return;
    if (!c.ka) {
      keepalive_options ko;
      ko.start_thread = false;
      ko.retry.initial = std::max<std::chrono::nanoseconds>(std::chrono::nanoseconds(o_.ttl) / 50,
                                                            std::chrono::milliseconds(1));
      ko.retry.max_delay = backoff_cap();
      ko.retry.seed = (static_cast<std::uint64_t>(c.node) << 40) ^ c.incarnation;
      c.ka = std::make_unique<keepalive<sim_clock>>(sim_.clock(c.node), ko);
    }
    const std::uint64_t token = c.held->token().value();
    c.held->on_lost([this, &c, token](loss_cause why) {
      record(event_kind::lease_lost, c, {}, token, static_cast<std::int64_t>(why));
    });
    (void)c.ka->add(*c.held);
    c.ka_next.reset();
  }

  // One pass of the client's keepalive; records the renewals it made.
  std::optional<sim_clock::time_point> poll(client& c) {
    const std::uint64_t before = c.ka->stats().renewals;
    std::optional<sim_clock::time_point> next = c.ka->poll();
    if (c.ka->stats().renewals > before && c.held && !sim_.current_crashed()) {
      record(event_kind::renewed, c, {}, c.held->token().value(), belief_end(c));
    }
    return next;
  }

  // Sleeps the client until its clock reads `target`. With a keepalive, as an event loop: it
  // wakes at each renewal instant the keepalive returns and polls it after every wake, so a
  // clock that went backwards is found at once. The mutant keepalive_sleeps_through_regression
  // polls only when woken for a renewal: after a jump back it sleeps until the old instant.
  void nap(client& c, sim_clock::time_point target) {
    const sim_clock clock = sim_.clock(c.node);
    if (!c.ka) {
      clock.sleep_until(target);
      return;
    }
    const bool mutant_loop = o_.mutation == mutant::keepalive_sleeps_through_regression;
    bool poll_now = !mutant_loop || !c.ka_next;
    for (;;) {
      if (sim_.current_crashed()) return;
      if (poll_now || !mutant_loop) c.ka_next = poll(c);
      if (sim_.current_crashed()) return;
      sim_clock::time_point wake = target;
      const bool for_ka = c.ka_next && *c.ka_next < target;
      if (for_ka) wake = *c.ka_next;
      clock.sleep_until(wake);
      if (sim_.current_crashed()) return;
      poll_now = for_ka;
      if (!(clock.now() < target)) return;
    }
  }

  void program(client& c) {
    for (const client_op& op : c.ops) {
      if (sim_.current_crashed()) restart(c);
      run(c, op);
    }
    if (sim_.current_crashed()) {
      c.held.reset();  // a dead process releases nothing (the store call fails at once)
    } else if (c.held) {
      run(c, client_op{op_kind::release, 0, 0, 0});
    }
    c.held.reset();
    c.ka.reset();
  }

  void restart(client& c) {
    c.held.reset();
    c.ka.reset();  // the process died with its keepalive
    c.ka_next.reset();
    ++c.incarnation;
    c.owner = c.name + "#" + std::to_string(c.incarnation);
    sim_.restart_current(c.owner);
  }

  void run(client& c, const client_op& op) {
    const std::chrono::nanoseconds ttl = o_.ttl;
    switch (op.kind) {
      case op_kind::work: {
        static constexpr int tenths[] = {1, 5, 10, 20};
        const sim_clock clock = sim_.clock(c.node);
        nap(c, clock.now() + ttl * tenths[op.arg & 3] / 10);
        return;
      }
      case op_kind::acquire:
      case op_kind::try_acquire: {
        if (c.held) return;
        c.key = op.key;
        static constexpr int tenths[] = {5, 20, 50, 10};
        const acquire_options<sim_clock> opts = options(c);
        result<lease_type> r = op.kind == op_kind::try_acquire
                                   ? holdfast::try_acquire(store_, key_name(op.key), o_.ttl, opts)
                                   : holdfast::acquire(store_, key_name(op.key), o_.ttl,
                                                       ttl * tenths[op.arg & 3] / 10, opts);
        if (sim_.current_crashed()) return;
        if (!r) {
          record(event_kind::acquire_failed, c, r.error());
          return;
        }
        c.held.emplace(std::move(*r));
        note_reply(c);
        // value: where the holder's belief ends (its clock), for pictures (svg.hpp).
        record(event_kind::acquired, c, {}, c.held->token().value(), belief_end(c));
        keep(c);
        return;
      }
      case op_kind::write:
        if (c.held) checked_write(c);
        return;
      case op_kind::write_at_edge: {
        if (!c.held) return;
        // One tick before the validity ends, 1 ms before, 1% of the TTL before, or at it.
        static constexpr std::int64_t before[] = {1, 1000000, 0, 0};
        std::int64_t d = before[op.arg & 3];
        if ((op.arg & 3) == 2) d = ttl.count() / 100;
        nap(c, sim_clock::time_point(sim_clock::duration(belief_end(c) - d)));
        if (c.held && !sim_.current_crashed()) checked_write(c);
        return;
      }
      case op_kind::write_unchecked:
        if (c.held) (void)resources_[c.key]->write(c.held->token(), c.owner);
        return;
      case op_kind::renew: {
        if (!c.held) return;
        if (op.arg != 0) {  // renew late: just before validity ends (the last moment)
          const std::int64_t d = op.arg == 1 ? ttl.count() / 50 : op.arg == 2 ? 1000000 : 1;
          nap(c, sim_clock::time_point(
                     sim_clock::duration(c.held->valid_until().time_since_epoch().count() - d)));
          if (!c.held || sim_.current_crashed()) return;
        }
        result<void> r = c.held->renew();
        if (r) {
          note_reply(c);
          record(event_kind::renewed, c, {}, c.held->token().value(), belief_end(c));
        } else {
          record(event_kind::renew_failed, c, r.error(), c.held->token().value());
        }
        return;
      }
      case op_kind::release: {
        if (!c.held) return;
        // An event loop runs what is due before it blocks in a call (the mutant's does not).
        if (c.ka && o_.mutation != mutant::keepalive_sleeps_through_regression) {
          c.ka_next = poll(c);
          if (!c.held || sim_.current_crashed()) return;
        }
        result<void> r = c.held->release();
        record(r ? event_kind::released : event_kind::release_failed, c, r.error(),
               c.held->token().value());
        c.held.reset();  // done with it either way (the destructor retries a failed release)
        return;
      }
      case op_kind::crash:
        sim_.crash_current();
        return;
      case op_kind::clock_regress: {
        if (!c.held || !c.ka) return;
        // Right after a poll, so the clock surely reads earlier than the keepalive last saw.
        c.ka_next = poll(c);
        if (sim_.current_crashed()) return;
        static constexpr std::int64_t tenths[] = {10, 50, 100, 10};
        const std::int64_t back = ttl.count() * tenths[op.arg & 3] / 10;
        sim_.jump_clock(c.node, -back);
        record(event_kind::clock_regress, c, {}, c.held->token().value(), -back);
        return;
      }
      case op_kind::acquire_at_expiry: {
        if (c.held) return;
        c.key = op.key;
        aim_at_expiry(op.key, static_cast<int>(op.arg % 3) - 1);
        if (sim_.current_crashed()) return;
        result<lease_type> r = holdfast::try_acquire(store_, key_name(op.key), o_.ttl, options(c));
        if (sim_.current_crashed()) return;
        if (!r) {
          record(event_kind::acquire_failed, c, r.error());
          return;
        }
        record(event_kind::acquired, c, {}, r->token().value());
        c.held.emplace(std::move(*r));
        note_reply(c);
        keep(c);
        return;
      }
    }
  }

  // The latest expiry, by the store's clock, of the lease the store granted or extended last on
  // `key` (from the history), or nullopt if that lease was released or none was granted.
  std::optional<std::int64_t> store_expiry(std::uint8_t key) {
    const std::vector<event>& ev = sim_.log().events;
    for (std::size_t i = ev.size(); i-- > 0;) {
      const event& e = ev[i];
      if (e.node != store_.node() || e.key != key || e.outcome != 0) continue;
      if (e.kind == event_kind::store_release) return std::nullopt;
      if (e.kind == event_kind::store_acquire || e.kind == event_kind::store_renew) {
        return e.local_ns + e.ttl_ms * 1000000;
      }
    }
    return std::nullopt;
  }

  // Sleeps the calling client until the store's clock is one tick before (`where` -1), at (0) or
  // one tick after (+1) the end of the lease on `key`; aims again (a few times) if the lease was
  // renewed meanwhile. Returns at once when no lease is live.
  void aim_at_expiry(std::uint8_t key, int where) {
    const node_id store = store_.node();
    for (int aim = 0; aim < 4 && !sim_.current_crashed(); ++aim) {
      const std::optional<std::int64_t> end = store_expiry(key);
      if (!end || sim_.local_ns(store) >= *end + where) return;
      // The first instant the store's clock reads `end` (+1 tick for "after"), or the last one
      // before it.
      std::int64_t t = sim_.true_time_at(store, *end + (where > 0 ? 1 : 0));
      if (where < 0) t -= 1;
      if (t > sim_.now_ns()) sim_.wait_true(t - sim_.now_ns());
      if (store_expiry(key) == end) return;
    }
  }

  void contend(client& c, std::uint32_t key, std::int64_t bound) {
    c.key = static_cast<std::uint8_t>(key);
    const acquire_options<sim_clock> opts = options(c);
    result<lease_type> r = holdfast::acquire(store_, key_name(key), o_.ttl,
                                             std::chrono::nanoseconds(bound) + o_.ttl, opts);
    if (!r) {
      record(event_kind::liveness_failed, c, r.error());
      return;
    }
    record(event_kind::liveness_acquired, c, {}, r->token().value());
    (void)r->release();
  }

  simulator& sim_;
  store_type& store_;
  const workload& w_;
  const run_options& o_;
  std::vector<std::unique_ptr<sim_resource>> resources_;
  std::vector<client> clients_;
  std::vector<client> contenders_;
};

template <class Store, class Factory>
std::unique_ptr<Store> make_store_from(Factory& make, sim_clock clock, const store_env& env) {
  return make_store<Store>(make, clock, env);
}

template <class Factory>
run_result run_schedule_impl(decision_source& src, Factory& make_store, const run_options& o) {
  using Store = factory_store_t<Factory>;
  constexpr bool simulated_clock = factory_takes_clock_v<Factory>;
  run_result out;
  out.plan = generate_workload(src, o);
  fault_options f = o.faults;
  f.scale = o.ttl;
  f.drift_bound = o.validity.drift;
  {
    simulator sim(src, f);
    for (std::uint32_t k = 0; k < out.plan.keys; ++k) sim.log().keys.emplace_back(key_name(k));
    store_env env;
    std::unique_ptr<scratch_dir> dir;  // outlives the store: it closes its files first
    if constexpr (factory_takes_env_v<Factory>) {
      dir = std::make_unique<scratch_dir>();
      env.dir = dir->path();
    }
    sim_store<Store> store(sim, "store", make_store, o.store_faults, env);
    if (o.reopen_on_restart) {
      store.on_restart([&make_store, &env, &store](std::unique_ptr<Store>& s) {
        s.reset();  // the old process is gone, its files closed, before the new one opens them
        ++env.restarts;
        s = make_store_from<Store>(make_store, store.clock(), env);
      });
    }
    if (simulated_clock) {
      sim.log().primary_store = store.node();
      sim.log().tolerance_ns = std::chrono::nanoseconds(o.tolerance).count();
    } else {
      // The store keeps real time, not simulated time: expiry cannot be judged (S3, S4, the
      // expiry half of S5 and L1 are skipped; S1, S2 and ownership still are checked).
      sim.log().tolerance_ns = std::numeric_limits<std::int64_t>::max() / 4;
    }
    if (uses_keepalive(o)) {
      // L2: one renew interval (half the TTL on the holder's clock, which may run up to 5% slow),
      // in true time.
      sim.log().regression_bound_ns =
          std::chrono::nanoseconds(o.ttl).count() / 2 * 106 / 100 + 1000000;
    }
    schedule_runner<Store> runner(sim, store, out.plan, o);
    runner.run_clients();
    if (o.liveness && simulated_clock) runner.run_liveness();
    out.log = std::move(sim.log());
  }
  out.result = check(out.log);
  return out;
}

}  // namespace detail

/// Runs one schedule drawn from `src` against a store made by `make_store` (called as
/// make_store(sim_clock, const store_env&), make_store(sim_clock) or make_store(), returning the
/// store or a std::unique_ptr to it), and
/// checks the history. A store that does not take the simulated clock keeps real time, so
/// invariants that judge expiry (S3, S4, expiry in S5, L1) are skipped for it.
/// Exceptions thrown by the store propagate (after every simulated client has finished).
template <class Factory,
          class = std::enable_if_t<detail::is_store_factory_v<std::remove_reference_t<Factory>>>>
run_result run_schedule(decision_source& src, Factory&& make_store, const run_options& o = {}) {
  return detail::run_schedule_impl(src, make_store, o);
}

/// Runs one schedule drawn from `src` against the shipped memory_store, or, when o.mutation is a
/// store mutant, against the broken mutant_store (see mutants.hpp), and checks the history.
inline run_result run_schedule(decision_source& src, const run_options& o = {}) {
  if (is_store_mutant(o.mutation)) {
    auto make = [m = o.mutation](sim_clock c) { return mutant_store<sim_clock>(c, m); };
    return detail::run_schedule_impl(src, make, o);
  }
  auto make = [](sim_clock c) { return std::make_unique<memory_store<sim_clock>>(c); };
  return detail::run_schedule_impl(src, make, o);
}

}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_WORKLOAD_HPP
