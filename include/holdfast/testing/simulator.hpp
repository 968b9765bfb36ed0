// SPDX-License-Identifier: MIT
// holdfast/testing/simulator.hpp - a deterministic simulator that runs the shipped lease code
// (lease, try_acquire/acquire, the store, fence_gate/fenced<T>) on virtual time, one client at a
// time, with every interleaving and fault chosen by a decision_source.
//
// Pieces:
//   simulator     owns simulated true time, the nodes (clients and stores) with their clocks, the
//                 client tasks (each a fiber), the scheduler and the history; decides the faults.
//                 Internal pieces: testing/detail/sim_time.hpp (a node's clock against true
//                 time: epoch, drift, tick, jumps) and testing/detail/sim_scheduler.hpp (the
//                 client tasks on fibers and the loop that runs them).
//   sim_clock     a node's clock, modelling ttl_clock, so `lease<Store, sim_clock>` and
//                 `memory_store<sim_clock>` run unchanged. Each node's clock runs at its own rate
//                 (drift) and may jump; reading a client's clock is a point where the scheduler
//                 may pause or switch that client; sleeping blocks the client in virtual time.
//   sim_store     (sim_store.hpp) wraps any LeaseStore: delays, drops, errors, lost replies,
//                 restarts; one wrapper per store, so a quorum of members composes.
//   sim_resource  (resource.hpp) a downstream resource guarded by the shipped fences.
//   fault_options (fault_options.hpp) which faults the simulator injects.
//
// How a run proceeds. Clients run one at a time on fibers (testing/detail/fiber.hpp: a user-space
// switch, no kernel thread hand-off; testing/detail/sim_scheduler.hpp runs them). A client runs
// until it reaches an *interposition point*: a read of its clock, a store request or reply, a
// resource write, a step inside a multi-step store. There the decision source says what happens
// next:
//
//   at a point          | options (0 first: the benign one)
//   --------------------+---------------------------------------------------------------------
//   any client point    | continue | let another client run | pause 1 ms .. 5 TTL | crash |
//                       | jump this client's clock (clock reads, when jumps are enabled)
//   scheduler           | which ready client runs (0 = the one that ran last)
//   new node            | its clock rate: exact | fastest/slowest within the bound | random
//                       | within | beyond the bound (when enabled)
//
// True time advances only when no client is ready: it jumps to the earliest wake-up (a sleep on
// a client's clock, a pause ending, a reply arriving). So a run costs CPU per event, not per
// simulated second, and is a pure function of the decisions: same decisions, same history.
//
// Crash. A crashed client's process is gone: whatever shipped call it was in finishes at once
// without touching anything (its store calls fail without reaching the store, its clock reads
// race ahead so every deadline passes, its sleeps return), its handles are dropped without
// releasing, and after a downtime it restarts with a new owner id. No exception is needed, so
// the simulator works in -fno-exceptions builds too.
//
// Thread-safety: a simulator and everything attached to it belong to one thread.
#ifndef HOLDFAST_TESTING_SIMULATOR_HPP
#define HOLDFAST_TESTING_SIMULATOR_HPP

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "holdfast/clock.hpp"
#include "holdfast/detail/config.hpp"
#include "holdfast/step_point.hpp"
#include "holdfast/testing/decision.hpp"
#include "holdfast/testing/detail/sim_scheduler.hpp"
#include "holdfast/testing/detail/sim_time.hpp"
#include "holdfast/testing/fault_options.hpp"
#include "holdfast/testing/history.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace testing {

class simulator;

/// A node's clock inside a simulation; models ttl_clock (clock.hpp). A cheap handle: copies
/// read the same node's clock.
///
/// now() on a client's clock, called by that client, is an interposition point (the scheduler
/// may pause or switch the client there, or jump its clock). sleep_until() blocks the calling
/// client in virtual time until this clock reaches the deadline. A default-constructed clock is
/// unbound: using it violates a precondition (HOLDFAST_ASSERT).
///
/// Thread-safety: the simulator's thread only.
class sim_clock {
 public:
  using duration = std::chrono::nanoseconds;
  using rep = duration::rep;
  using period = duration::period;
  using time_point = std::chrono::time_point<sim_clock, duration>;
  /// Not steady: a simulated clock may be made to jump on purpose.
  static constexpr bool is_steady = false;

  /// Makes an unbound clock (acquire_options<sim_clock> needs a default); bind it before use.
  sim_clock() noexcept = default;
  /// Makes a handle to node `node`'s clock in `sim`.
  sim_clock(simulator& sim, node_id node) noexcept : sim_(&sim), node_(node) {}

  /// Returns this node's clock reading (see the class comment for the interposition).
  [[nodiscard]] time_point now() const;
  /// Blocks the calling client until this clock reads at least `deadline`; returns at once if it
  /// already does (or if the client has crashed).
  void sleep_until(time_point deadline) const;
  /// Returns this node's clock tick: reads are true time rounded down to it (zero: exact; see
  /// fault_options::store_clock_ticks). Zero for an unbound clock.
  [[nodiscard]] duration tick() const noexcept;

  /// Observes a store's step point (holdfast::step_point, step_point.hpp): at step_kind::between
  /// the calling client reaches an interposition point (it may be switched, paused or crashed);
  /// at step_kind::takes_effect the store operation in progress is placed at this instant in the
  /// history. Either is a no-op outside a store operation of a simulated client.
  void step_point(step_kind kind) const;

  /// Returns a handle to the same clock whose tick() says zero although its reads stay coarse:
  /// a clock that hides its tick, like a user's clock over CLOCK_MONOTONIC_COARSE that declares
  /// none. Only for the negative control mutant::holder_ignores_clock_tick (mutants.hpp).
  [[nodiscard]] sim_clock hiding_tick() const noexcept {
    sim_clock c = *this;
    c.hides_tick_ = true;
    return c;
  }

  /// Returns the node this clock belongs to.
  [[nodiscard]] node_id node() const noexcept { return node_; }
  /// Returns the simulator (null when unbound).
  [[nodiscard]] simulator* sim() const noexcept { return sim_; }

 private:
  simulator* sim_ = nullptr;
  node_id node_ = no_node;
  bool hides_tick_ = false;
};

static_assert(is_ttl_clock_v<sim_clock>, "sim_clock must model ttl_clock");

/// The simulated world: true time, nodes with clocks, client tasks, the scheduler, the history.
/// See the file comment for how a run proceeds.
class simulator {
 public:
  /// Where a client reached an interposition point.
  enum class point_kind : std::uint8_t {
    clock_read,      ///< It read its own clock.
    store_step,      ///< Between two steps of a multi-step store operation.
    resource_write,  ///< About to write to a downstream resource.
  };

  /// Makes an empty world at true time 0 that draws every choice from `decisions`, which must
  /// outlive the simulator.
  explicit simulator(decision_source& decisions, fault_options faults = {})
      : src_(decisions), faults_(faults) {
    eps_ppm_ = drift_ppm_bound(faults_.drift_bound);
    nodes_.reserve(8);  // a schedule's nodes, without regrowing (history.hpp, reserve_nodes)
    log_.reserve_nodes(8);
  }

  simulator(const simulator&) = delete;
  simulator& operator=(const simulator&) = delete;
  ~simulator() = default;

  // ---- nodes and clocks -----------------------------------------------------------------------

  /// Adds a client node named `name` (its clock's rate is drawn from the decisions) and returns
  /// its id. Clients' clocks are interposition points.
  node_id add_client(std::string name) { return add_node(std::move(name), true); }

  /// Adds a store node named `name` and returns its id. A store's clock is read inside the
  /// store's critical section, so reading it is never an interposition point.
  node_id add_store(std::string name) { return add_node(std::move(name), false); }

  /// Sets node `n`'s clock tick to `tick_ns` (>= 0; 0: exact): from now on its clock reads true
  /// time rounded down to the tick (the history records the tick for the checker).
  void set_tick(node_id n, std::int64_t tick_ns) {
    node& nd = nodes_.at(n);
    nd.tick_ns = std::max<std::int64_t>(tick_ns, 0);
    log_.ticks.resize(nodes_.size(), 0);
    log_.ticks[n] = nd.tick_ns;
  }

  /// Returns node `n`'s clock tick in ns (0: exact).
  [[nodiscard]] std::int64_t tick_ns(node_id n) const noexcept {
    return n < nodes_.size() ? nodes_[n].tick_ns : 0;
  }

  /// Returns a clock handle for node `n`.
  [[nodiscard]] sim_clock clock(node_id n) noexcept { return sim_clock(*this, n); }

  /// Returns the current simulated true time (ns since the run began).
  [[nodiscard]] std::int64_t now_ns() const noexcept { return now_; }

  /// Returns node `n`'s clock reading at the current true time, without any interposition.
  [[nodiscard]] std::int64_t local_ns(node_id n) const noexcept {
    return n < nodes_.size() ? nodes_[n].local_at(now_) : 0;
  }

  /// Returns node `n`'s clock rate error in parts per million (positive: runs fast).
  [[nodiscard]] std::int32_t skew_ppm(node_id n) const noexcept {
    return n < nodes_.size() ? nodes_[n].skew_ppm : 0;
  }

  /// Sets node `n`'s clock rate error (ppm, > -1e6) from now on. Rates beyond the drift bound end
  /// the S4 promise for the rest of the run.
  void set_skew_ppm(node_id n, std::int32_t ppm) {
    node& nd = nodes_.at(n);
    nd.rebase(now_);
    nd.skew_ppm = std::max<std::int32_t>(ppm, -900000);
    if (std::abs(static_cast<std::int64_t>(nd.skew_ppm)) > eps_ppm_) end_s4();
  }

  /// Jumps node `n`'s clock by `delta_ns` (negative: backwards) now, records it, and ends the S4
  /// promise for the rest of the run.
  void jump_clock(node_id n, std::int64_t delta_ns) {
    node& nd = nodes_.at(n);
    nd.rebase(now_);
    nd.base_local += delta_ns;
    end_s4();
    event e = make_event(event_kind::clock_jump, n);
    e.value = delta_ns;
    log_.add(std::move(e));
  }

  /// Restarts node `n`'s clock as a machine reboot does (a steady clock counts from boot): from
  /// now on it reads `local_ns` plus the time since. Not recorded here (sim_store's store_up
  /// says it) and S4 goes on: the reboot crashes the holders whose beliefs S4 judges.
  void restart_clock(node_id n, std::int64_t local_ns) {
    node& nd = nodes_.at(n);
    nd.rebase(now_);
    nd.base_local = local_ns;
  }

  /// Returns the largest per-clock rate error (ppm) that keeps any two clocks within
  /// `drift` of each other: (1+e)/(1-e) <= 1/(1-drift), i.e. e <= drift/(2-drift).
  [[nodiscard]] static std::int32_t drift_ppm_bound(double drift) noexcept {
    if (!(drift > 0.0 && drift < 1.0)) return 0;
    const double e = drift / (2.0 - drift) * 1e6;
    return static_cast<std::int32_t>(std::floor(e)) - 1;
  }

  /// Returns the earliest true time, not before now, at which node `n`'s clock reads at least
  /// `local_ns` (for aiming an operation at an instant of a store's clock).
  [[nodiscard]] std::int64_t true_time_at(node_id n, std::int64_t local_ns) const {
    return n < nodes_.size() ? nodes_[n].true_at_local(local_ns, now_) : now_;
  }

  /// Returns the first true time (>= now) at which node `n`'s clock *reads* `local_ns` or later:
  /// a coarse clock reads it once its exact time reaches the next multiple of its tick.
  [[nodiscard]] std::int64_t true_time_reading(node_id n, std::int64_t local_ns) const {
    if (n >= nodes_.size()) return now_;
    return nodes_[n].true_at_local(node::round_up(local_ns, nodes_[n].tick_ns), now_);
  }

  /// Moves true time forward by `d_ns` from outside any client (for tests that drive a store
  /// directly). Precondition: no client is running.
  void advance(std::int64_t d_ns) {
    HOLDFAST_ASSERT(sched_.current() == nullptr, "simulator::advance() from inside a client");
    if (d_ns > 0) now_ += d_ns;
  }

  // ---- clients --------------------------------------------------------------------------------

  /// Starts a client task on node `n` running `body` (on its own fiber) at the current true time.
  /// It runs when run() is called.
  void spawn(node_id n, std::function<void()> body) { sched_.spawn(n, std::move(body), now_); }

  /// Runs every spawned task to completion, interleaving them as the decisions say. Returns when
  /// all have finished. If a task's body threw (a user store's exception), every other task is
  /// crashed so that it finishes, and the exception is rethrown here.
  void run() {
    sched_.run(now_, [this](std::uint32_t n) { return decide(n); });
  }

  /// Returns the node of the running client, or no_node outside any client.
  [[nodiscard]] node_id current_node() const noexcept {
    const task* t = sched_.current();
    return t != nullptr ? t->node : no_node;
  }

  /// Returns true iff a client is running and it has crashed (it is draining its last call).
  [[nodiscard]] bool current_crashed() const noexcept {
    const task* t = sched_.current();
    return t != nullptr && t->crashed;
  }

  /// Crashes the running client now (a scheduled crash); records it. No-op outside a client.
  void crash_current() {
    task* t = sched_.current();
    if (t == nullptr || t->crashed) return;
    crash(*t);
  }

  /// Crashes every client that is still running, now (a machine reboot takes all its processes
  /// at one instant); records each. Each restarts as after crash_current().
  void crash_clients() {
    sched_.for_each_live([this](task& t) {
      if (!t.crashed) crash(t);
    });
  }

  /// Called by a crashed client once its last call has drained: waits a downtime drawn from the
  /// decisions (0.1 to 3 * scale), records the restart (with the owner id it will use from now
  /// on, if given), and clears the crash.
  void restart_current(std::string new_owner = {}) {
    task* t = sched_.current();
    if (t == nullptr || !t->crashed) return;
    t->crashed = false;
    t->drain_ns = 0;
    static constexpr std::int64_t tenths[] = {1, 10, 30};
    wait_true(scale_ns() * tenths[decide(3)] / 10);
    event e = make_event(event_kind::restart, t->node);
    e.owner = std::move(new_owner);
    log_.add(std::move(e));
  }

  // ---- store operations in progress ----------------------------------------------------------

  /// A store operation in progress, registered by sim_store around each call into its store, so
  /// that a step_kind::takes_effect point reaches the wrapper of the operation it belongs to.
  /// Registrations nest (a wrapped quorum calling wrapped members): the innermost one is told.
  using store_call = detail::sim_store_call;

  /// Registers `c` as the running client's innermost store operation (or, outside any client,
  /// the test's own). Pair with leave_store_call(c) on the same client.
  void enter_store_call(store_call& c) noexcept {
    store_call*& top = top_call();
    c.outer = top;
    top = &c;
  }

  /// Unregisters `c` (the innermost registration of the running client).
  void leave_store_call(store_call& c) noexcept {
    store_call*& top = top_call();
    top = c.outer;
  }

  /// A store's step point (see sim_clock::step_point). Counted in history::store_steps.
  void store_step_point(step_kind kind) {
    store_call* top = top_call();
    if (top == nullptr) return;  // not inside a store operation: nothing to interleave
    if (kind == step_kind::takes_effect) {
      if (top->takes_effect != nullptr) top->takes_effect(top->self);
      return;
    }
    if (sched_.current() != nullptr) ++store_steps_;
    point(point_kind::store_step);
    if (top->between != nullptr) top->between(top->self);  // may end the operation (a crash)
  }

  // ---- interposition (called from inside clients) --------------------------------------------

  /// An interposition point of the running client: the decisions may let it continue, switch to
  /// another client, pause it, crash it, or (at clock reads, when enabled) jump its clock. At
  /// clock reads about 1 point in 6 is a fault; at resource writes and store steps about 2 in 5
  /// (that is where a stall makes history: the README's timeline).
  /// No-op outside a client, for a crashed client, and after heal().
  void point(point_kind kind) {
    task* t = sched_.current();
    if (t == nullptr || t->crashed || healed_) return;
    // Clock reads are frequent and mostly uninteresting; the points where a stall makes history
    // (between a check and a write, inside a multi-step operation) get more of the faults.
    const bool clock = kind == point_kind::clock_read;
    const std::uint32_t pauses = faults_.pauses ? 1u : 0u;
    const bool jumps = faults_.clock_jumps && clock;
    switch (weighted({clock ? 100u : 30u, faults_.preemption ? (clock ? 10u : 8u) : 0u,
                      pauses * (clock ? 4u : 3u), pauses * (clock ? 3u : 8u),
                      faults_.crashes ? 1u : 0u, jumps ? 2u : 0u})) {
      case 0:
        return;
      case 1:
        yield();
        return;
      case 2: {
        static constexpr std::int64_t ms[] = {1, 5, 20};
        const std::uint32_t c = decide(4);
        pause(c < 3 ? ms[c] * 1000000 : scale_ns() / 20);
        return;
      }
      case 3: {
        static constexpr std::int64_t tenths[] = {5, 11, 20, 50};
        pause(scale_ns() * tenths[decide(4)] / 10);
        return;
      }
      case 4:
        crash(*t);
        return;
      default: {
        static constexpr std::int64_t tenths[] = {-50, -10, -1, 1, 10, 50};
        jump_clock(t->node, scale_ns() * tenths[decide(6)] / 10);
        return;
      }
    }
  }

  /// Suspends the running client for `d_ns` of true time (a request or reply in flight); other
  /// clients run meanwhile. Outside a client, advances true time directly.
  void wait_true(std::int64_t d_ns) {
    if (d_ns < 0) d_ns = 0;
    task* t = sched_.current();
    if (t == nullptr) {
      now_ += d_ns;
      return;
    }
    sched_.suspend_until(*t, now_ + d_ns);
  }

  /// Lets another ready client run (the running one stays ready).
  void yield() {
    task* t = sched_.current();
    if (t == nullptr) return;
    sched_.suspend_until(*t, now_);
  }

  /// Returns a choice in [0, n) from the decision source (counted in history::decisions).
  std::uint32_t decide(std::uint32_t n) {
    if (n > 1) ++decisions_;
    return src_.choose(n);
  }

  /// Picks an index with probability proportional to `weights` (see pick()); index 0 must be the
  /// benign option. Counted in history::decisions.
  std::size_t weighted(std::initializer_list<std::uint32_t> weights) {
    ++decisions_;
    return pick(src_, weights);
  }

  /// Returns the decision source (for components that weigh their own choices).
  [[nodiscard]] decision_source& decisions() noexcept { return src_; }

  /// Returns the fault options.
  [[nodiscard]] const fault_options& faults() const noexcept { return faults_; }

  /// Returns `scale` in nanoseconds (at least 1 ms).
  [[nodiscard]] std::int64_t scale_ns() const noexcept {
    return std::max<std::int64_t>(faults_.scale.count(), 1000000);
  }

  /// Stops every fault from now on: points continue, stores deliver, clocks stop jumping (rates
  /// stay). Used before a liveness check. Idempotent.
  void heal() { healed_ = true; }
  /// Returns true once heal() was called.
  [[nodiscard]] bool healed() const noexcept { return healed_; }

  // ---- history --------------------------------------------------------------------------------

  /// Returns the history recorded so far (decisions counted up to now).
  [[nodiscard]] history& log() noexcept {
    log_.decisions = decisions_;
    log_.switches = sched_.switches();
    log_.store_steps = store_steps_;
    return log_;
  }

  /// Makes an event of kind `k` by node `n` stamped with the current true time, `n`'s clock and
  /// the primary store's clock (not yet added).
  [[nodiscard]] event make_event(event_kind k, node_id n) const {
    event e;
    e.true_ns = now_;
    e.local_ns = local_ns(n);
    e.store_ns = local_ns(log_.primary_store);
    e.kind = k;
    e.node = n;
    return e;
  }

  /// The longest a run may go on, in scheduler steps, before the simulator gives up (a client
  /// that never sleeps nor finishes is a bug in the workload).
  static constexpr std::uint64_t step_limit = detail::sim_scheduler::step_limit;

 private:
  friend class sim_clock;

  using node = detail::node_clock;
  using task = detail::sim_task;

  // The running client's innermost store operation, or the test's own outside any client.
  store_call*& top_call() noexcept {
    task* t = sched_.current();
    return t != nullptr ? t->call : outside_call_;
  }

  node_id add_node(std::string name, bool client) {
    HOLDFAST_ASSERT(nodes_.size() < no_node, "too many simulated nodes");
    const node_id id = static_cast<node_id>(nodes_.size());
    node nd;
    nd.base_true = now_;
    // Unrelated clocks: each node's epoch is elsewhere (steady clocks only promise rate).
    nd.base_local = now_ + static_cast<std::int64_t>(id + 1) * 1000000000000LL;
    nd.skew_ppm = draw_skew();
    nodes_.push_back(nd);
    if (std::abs(static_cast<std::int64_t>(nodes_.back().skew_ppm)) > eps_ppm_) end_s4();
    log_.nodes.push_back(std::move(name));
    log_.ticks.resize(nodes_.size(), 0);
    if (!client && faults_.store_clock_ticks) {
      static constexpr std::int64_t ticks[] = {0, 1000000, 10000000, 1000000000};
      set_tick(id, ticks[weighted({2, 1, 1, 2})]);
    }
    if (client && faults_.client_clock_ticks) {
      const std::int64_t ticks[] = {0, 1000000, faults_.scale.count() / 10};
      set_tick(id, ticks[weighted({6, 2, 1})]);
    }
    return id;
  }

  std::int32_t draw_skew() {
    if (!faults_.drift) return 0;
    const std::uint32_t beyond = faults_.drift_beyond_bound ? 1u : 0u;
    switch (weighted({1, 1, 1, 1, beyond, beyond})) {
      case 0:
        return 0;
      case 1:
        return eps_ppm_;
      case 2:
        return -eps_ppm_;
      case 3:
        return static_cast<std::int32_t>(decide(2u * static_cast<std::uint32_t>(eps_ppm_) + 1)) -
               eps_ppm_;
      case 4:
        return 50000;  // 5% fast
      default:
        return -50000;  // 5% slow
    }
  }

  void end_s4() noexcept { log_.s4_until_ns = std::min(log_.s4_until_ns, now_); }

  std::int64_t read_clock(node_id n) {
    task* t = sched_.current();
    if (t != nullptr && t->node == n) {
      if (!t->crashed) point(point_kind::clock_read);
      if (t->crashed) {
        // Drain: every deadline the dead process computed passes within a few reads.
        t->drain_ns += 1000LL * 1000000000LL;
        return local_ns(n) + t->drain_ns;
      }
    }
    return node::round_down(local_ns(n), tick_ns(n));
  }

  void sleep_on_clock(node_id n, std::int64_t deadline) {
    HOLDFAST_ASSERT(n < nodes_.size(), "sim_clock of an unknown node");
    task* t = sched_.current();
    if (t == nullptr) {
      now_ =
          std::max(now_, nodes_[n].true_at_local(deadline, now_));  // a test driving time directly
      return;
    }
    if (t->crashed) return;
    const std::int64_t wake = true_time_reading(n, deadline);
    if (wake <= now_) return;
    sched_.suspend_until(*t, wake);
  }

  void pause(std::int64_t d_ns) {
    task* t = sched_.current();
    event e = make_event(event_kind::pause, t->node);
    e.value = d_ns;
    log_.add(std::move(e));
    wait_true(d_ns);
  }

  void crash(task& t) {
    t.crashed = true;
    log_.add(make_event(event_kind::crash, t.node));
  }

  decision_source& src_;
  fault_options faults_;
  std::int32_t eps_ppm_ = 0;
  std::int64_t now_ = 0;
  std::vector<node> nodes_;
  detail::sim_scheduler sched_;
  std::uint64_t decisions_ = 0;
  std::uint64_t store_steps_ = 0;
  store_call* outside_call_ = nullptr;
  bool healed_ = false;
  history log_;
};

inline sim_clock::time_point sim_clock::now() const {
  HOLDFAST_ASSERT(sim_ != nullptr, "sim_clock::now() on an unbound clock");
  return time_point(duration(sim_->read_clock(node_)));
}

inline void sim_clock::step_point(step_kind kind) const {
  HOLDFAST_ASSERT(sim_ != nullptr, "sim_clock::step_point() on an unbound clock");
  sim_->store_step_point(kind);
}

inline sim_clock::duration sim_clock::tick() const noexcept {
  return duration(sim_ != nullptr && !hides_tick_ ? sim_->tick_ns(node_) : 0);
}

inline void sim_clock::sleep_until(time_point deadline) const {
  HOLDFAST_ASSERT(sim_ != nullptr, "sim_clock::sleep_until() on an unbound clock");
  sim_->sleep_on_clock(node_, deadline.time_since_epoch().count());
}

}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_SIMULATOR_HPP
