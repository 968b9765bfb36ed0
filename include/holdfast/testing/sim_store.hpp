// SPDX-License-Identifier: MIT
// holdfast/testing/sim_store.hpp - sim_store<Store>: puts any LeaseStore on the simulated
// network. It is itself a LeaseStore, so `lease<sim_store<S>, sim_clock>` runs unchanged.
//
// Every call from a simulated client goes through these stages, each a decision (0 = benign):
//
//   stage     | what may happen                                                  | client sees
//   ----------+------------------------------------------------------------------+--------------
//   request   | delivered | in flight 1 ms .. 1.5 scale (others run meanwhile) |
//             | lost (never applied) | store error before applying | store goes  | timeout /
//             | down for a restart (durable stores only)                         | unavailable
//   apply     | the wrapped store applies it, atomically (recorded in the history |
//             | at this instant, with the store's clock)                          |
//   reply     | delivered | in flight 1 ms .. 1.5 scale | lost (applied, client   | the result /
//             | gets errc::timeout) | store error after applying                 | timeout /
//             |                                                                  | unavailable
//
// The wrapped store gets its own simulated node and clock (a sim_clock that is never an
// interposition point, since stores read it inside their critical sections), so expiry is judged
// by the store's clock, which drifts like any other (store.hpp, T2).
// Composition: one sim_store per store. A quorum of N members is N sim_stores, each with its own
// node, clock, faults and restarts; a quorum_store over them is itself a LeaseStore, and may in
// turn be wrapped (with faults off) to record the quorum-level operations.
// A restart (store_fault_options::restarts) takes the store down for 0.1 to 2 scale (requests fail
// with store_unavailable), at a request or between two of the store's own steps. Operations inside
// it that had not taken effect end at their next step point, not applied (unwound by an exception
// of the kit's, so the store's RAII runs); those that had (step_kind::takes_effect), or whose call
// is noexcept, run to their end and their reply is lost. It comes back once the downtime is over
// and no operation is inside the old store: a restart never destroys a store with an operation
// inside it. The state is kept (a durable store) unless on_restart() changes or replaces it (`s =
// std::make_unique<S>(wrapper.clock());`: a member that comes back empty) or keep_copies() restores
// a lagging copy (lagging_restarts), or it is a machine reboot (reboots, on_reboot(): every client
// crashes at once, the store's clock starts over, the store is reopened with a new boot identity).
// A restart_budget shared by several stores bounds how many restarts lose state ("at most N members
// of this quorum").
//
// Optional capabilities are forwarded when the wrapped store has them: inspect() (no faults, not
// recorded), and quorum.hpp's token floor, raise_token() (through the network like any operation,
// recorded as store_raise) and raise_token_floor(); renew_batch() (keepalive.hpp's batch path) as
// one renew() per request, each with its own faults. record(false) keeps a store's operations out
// of the history (e.g. quorum members, when the quorum-level operations are what is judged).
//
// Multi-step stores: a store that takes several steps per operation marks the points between them
// with holdfast::step_point(clock, step_kind::between) on the clock it was built with (an
// interposition point for the calling client: others run, it stalls or crashes there), and the step
// at which its operation takes effect with step_kind::takes_effect (the history then places the
// operation there; by default it is placed where the store returns). See step_point.hpp. The event
// also records the store's clock when the operation began (event::begin_local_ns), so a store that
// read its clock before a stall is judged by the earliest reading it could have made.
#ifndef HOLDFAST_TESTING_SIM_STORE_HPP
#define HOLDFAST_TESTING_SIM_STORE_HPP

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/result.hpp"
#include "holdfast/send_receive.hpp"
#include "holdfast/store.hpp"
#include "holdfast/testing/detail/sim_store_aim.hpp"
#include "holdfast/testing/fault_options.hpp"
#include "holdfast/testing/history.hpp"
#include "holdfast/testing/simulator.hpp"
#include "holdfast/testing/store_factory.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace testing {

/// A LeaseStore that forwards to a wrapped Store through the simulated network (see the table at
/// the top of sim_store.hpp), recording every applied operation in the simulator's history.
/// Calls from outside a simulated client (test set-up, the contract checks) go straight to the
/// store, recorded but without faults. Calls from a crashed client fail with store_unavailable
/// without reaching the store (a dead process sends nothing). Exceptions thrown by the wrapped
/// store propagate unchanged. Thread-safety: the simulator's thread only.
template <class Store>
class sim_store {
  static_assert(assert_lease_store<Store>(), "sim_store<Store>: Store must model LeaseStore");

 public:
  using inner_type = Store;

  /// Adds a store node named `name` to `sim` and builds the store with `make`, which is called
  /// as make(sim_clock, env), make(sim_clock) (the store judges expiry by its node's simulated
  /// clock) or make(), and returns a Store or a std::unique_ptr<Store>.
  template <class Factory>
  sim_store(simulator& sim, std::string name, Factory&& make, store_fault_options faults = {},
            const store_env& env = {})
      : sim_(sim), node_(sim.add_store(std::move(name))), faults_(faults) {
    inner_ = detail::make_store<Store>(make, sim.clock(node_), env);
    high_water_ = sim.local_ns(node_);
  }

  sim_store(const sim_store&) = delete;
  sim_store& operator=(const sim_store&) = delete;

  /// LeaseStore try_acquire, through the simulated network. \returns what the store returned, or
  /// errc::timeout (request or reply lost), errc::store_unavailable (store error or down).
  result<grant> try_acquire(std::string_view key, std::string_view owner,
                            std::chrono::milliseconds ttl) {
    const std::chrono::milliseconds applied = detail::shorter_ttl(sim_, faults_, ttl);
    return perform<grant>(event_kind::store_acquire, key, owner, fencing_token{}, ttl,
                          [&]() noexcept(noexcept(inner_->try_acquire(key, owner, applied))) {
                            return inner_->try_acquire(key, owner, applied);
                          });
  }

  /// LeaseStore renew, through the simulated network (outcomes as try_acquire).
  result<grant> renew(std::string_view key, std::string_view owner, fencing_token token,
                      std::chrono::milliseconds ttl) {
    const std::chrono::milliseconds applied = detail::shorter_ttl(sim_, faults_, ttl);
    return perform<grant>(event_kind::store_renew, key, owner, token, ttl,
                          [&]() noexcept(noexcept(inner_->renew(key, owner, token, applied))) {
                            return inner_->renew(key, owner, token, applied);
                          });
  }

  /// renew_batch (keepalive's batch path): one renew() per request, each with its own faults.
  void renew_batch(const store_request* q, std::size_t n, result<grant>* out) {
    for (std::size_t i = 0; i < n; ++i) out[i] = renew(q[i].key, q[i].owner, q[i].token, q[i].ttl);
  }

  /// LeaseStore release, through the simulated network (outcomes as try_acquire).
  result<void> release(std::string_view key, std::string_view owner, fencing_token token) {
    return perform<void>(event_kind::store_release, key, owner, token, std::chrono::milliseconds{0},
                         [&]() noexcept(noexcept(inner_->release(key, owner, token))) {
                           return inner_->release(key, owner, token);
                         });
  }

  /// Forwards inspect() (when the store has it) without faults and without recording: it is an
  /// observer's read. A crashed client gets store_unavailable.
  template <class S = Store, class = std::enable_if_t<has_inspect_v<S>>>
  result<std::optional<lease_record>> inspect(std::string_view key) {
    if (sim_.current_crashed()) return errc::store_unavailable;
    return inner_->inspect(key);
  }

  /// Forwards the token-floor capability raise_token(key, owner, token, to) (quorum.hpp) through
  /// the simulated network, like try_acquire (recorded as store_raise, `to` in event::value).
  template <class S = Store>
  auto raise_token(std::string_view key, std::string_view owner, fencing_token token,
                   fencing_token to)
      -> decltype(std::declval<S&>().raise_token(key, owner, token, to), result<void>()) {
    return perform<void>(
        event_kind::store_raise, key, owner, token, std::chrono::milliseconds{0},
        [&]() noexcept(noexcept(inner_->raise_token(key, owner, token, to))) {
          return inner_->raise_token(key, owner, token, to);
        },
        to.value());
  }

  /// Forwards raise_token_floor(floor) directly: a recovery step an operator runs, not a client
  /// request, so it sees no faults and is not recorded.
  template <class S = Store>
  auto raise_token_floor(fencing_token floor)
      -> decltype(std::declval<S&>().raise_token_floor(floor), result<void>()) {
    return inner_->raise_token_floor(floor);
  }

  /// An interposition point for the calling client between two steps of a multi-step store (as
  /// holdfast::step_point(clock(), step_kind::between)).
  void step() { sim_.store_step_point(step_kind::between); }

  /// Tells the wrapper that the calling client's operation in progress takes effect now: its
  /// history event is placed at this instant (by default an operation is placed where the store
  /// returns, which for an atomic store is where it applied). For multi-step stores whose grant
  /// is not their last step. Only the first call per operation counts.
  void linearized() {
    for (call* c : calls_) {
      if (c->who == sim_.current_node()) return linearized(*c);
    }
  }

  /// Sets what runs when the store comes back from a restart: it gets the store and may modify
  /// or replace it (default: nothing; the state is kept, as a durable store's is).
  ///
  /// With a `budget` (which must outlive this wrapper), `fn` runs only for the restarts that found
  /// budget left when the store went down, each taking one; the others keep the state. Several
  /// stores sharing one budget model "at most N members lose their state in this run" (e.g.
  /// `[&](auto& s) { s = std::make_unique<S>(wrapper.clock()); }`, a member that comes back empty).
  void on_restart(std::function<void(std::unique_ptr<Store>&)> fn,
                  restart_budget* budget = nullptr) {
    on_restart_ = std::move(fn);
    budget_ = budget;
  }

  /// Sets what a machine reboot (store_fault_options::reboots) does when the store comes back:
  /// reopen the store with a new store_env::boot (run_schedule: ++env.boot, then the factory).
  /// Without it no restart is a reboot.
  void on_reboot(std::function<void(std::unique_ptr<Store>&)> fn) { on_reboot_ = std::move(fn); }

  /// What a lagging restart does: replaces the store by one made from the copy it was taken from.
  using restore_fn = std::function<void(std::unique_ptr<Store>&)>;

  /// Keeps a lagging copy for lagging_restarts: after a successful operation, with no other one
  /// inside, the copy catches up (`take(store)` copies it and returns how to restore it) or falls
  /// one more behind. A lagging restart restores it (in place of on_restart, taking its budget);
  /// its store_up event says how many operations were lost (value) and where the copy was taken
  /// (token: history events before it), so the checker judges the store from the copy's state.
  void keep_copies(std::function<restore_fn(Store&)> take) {
    take_copy_ = std::move(take);  // copy_from_start: the first copy now, before any operation
    if (faults_.copy_from_start && faults_.lagging_restarts) restore_ = take_copy_(*inner_);
  }

  /// Records this store's operations in the history (default), or not (`false`): unrecorded
  /// operations still see every fault; store_down/store_up are always recorded.
  void record(bool on) noexcept { record_ = on; }

  /// Returns this store's simulated clock (the one the wrapped store was built with).
  [[nodiscard]] sim_clock clock() const noexcept { return sim_.clock(node_); }

  /// Returns the wrapped store.
  [[nodiscard]] Store& inner() noexcept { return *inner_; }
  /// Returns this store's node in the simulator.
  [[nodiscard]] node_id node() const noexcept { return node_; }
  /// Returns the largest reading of this store's clock at any applied operation so far, or at
  /// its creation (ns), to bound how long leases may still live after a backwards jump.
  [[nodiscard]] std::int64_t clock_high_water() const noexcept { return high_water_; }
  /// Returns the fault options.
  [[nodiscard]] const store_fault_options& faults() const noexcept { return faults_; }

 private:
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);

  struct call {
    sim_store* store = nullptr;
    node_id who = no_node;
    std::size_t index = npos;
    bool killed = false;       // the store went down while this operation was inside it
    bool may_unwind = false;   // the store's operation may throw (it is not noexcept)
    bool aimed = false;        // its first step point was passed (regrant_stalls decided)
    detail::step_trace steps;  // its stalls at step points, for history::store_stalls
    event e;
  };

  void linearized(call& c) {
    if (c.index != npos) return;
    stamp(c.e);
    if (!record_) return;
    c.index = sim_.log().add(c.e);
    c.steps.took_effect(sim_.log(), c.index);
  }

  // At a `between` step point, once the calling client runs again: the store may crash here
  // (with restarts on), and an operation whose store went down ends here.
  void between_steps(call& c) {
    if (!std::exchange(c.aimed, true)) aim_stall(c);
    c.steps.resumed(sim_.now_ns());
    if (!c.killed && faults_.restarts && c.who != no_node && !sim_.healed() &&
        !sim_.current_crashed() && sim_.weighted({30, 1}) == 1) {
      go_down(c.who);
    }
#if HOLDFAST_HAS_EXCEPTIONS
    // Before it took effect (step_kind::takes_effect, or its return): it never does. After, it
    // runs to its end (the crash came after its commit) and its reply is lost.
    if (c.killed && c.may_unwind && c.index == npos) throw detail::store_crash_unwind{};
#endif
  }

  // store_fault_options::regrant_stalls (detail/sim_store_aim.hpp): an acquire that began once a
  // key's lease had expired, not yet granted again, waits here (1 in 2, or always once the input
  // has run out with stall_when_exhausted) for another grant.
  void aim_stall(call& c) {
    if (!faults_.regrant_stalls || c.killed || c.who == no_node || sim_.healed() ||
        sim_.current_crashed() || c.e.kind != event_kind::store_acquire ||
        !aim_.expired_at(c.e.begin_local_ns) ||
        !detail::take_aimed_stall(sim_, faults_.stall_when_exhausted)) {
      return;
    }
    aim_.stall(sim_, [this, &c] { return c.killed || sim_.current_crashed(); });
  }

  void stamp(event& e) const {
    e.true_ns = sim_.now_ns();
    e.local_ns = sim_.local_ns(node_);
    e.store_ns = sim_.local_ns(sim_.log().primary_store);
  }

  event make(event_kind kind, std::string_view key, std::string_view owner, fencing_token token,
             std::chrono::milliseconds ttl) {
    event e = sim_.make_event(kind, node_);
    e.peer = sim_.current_node();
    e.key = key_index(key);
    e.owner.assign(owner.data(), owner.size());
    e.token = token.value();
    e.ttl_ms = ttl.count();
    return e;
  }

  std::uint8_t key_index(std::string_view key) {
    std::vector<std::string>& keys = sim_.log().keys;
    for (std::size_t i = 0; i < keys.size(); ++i) {
      if (keys[i] == key) return static_cast<std::uint8_t>(i);
    }
    if (keys.size() >= 255) return 255;
    keys.emplace_back(key);
    return static_cast<std::uint8_t>(keys.size() - 1);
  }

  // Records a request that never reached the store, and returns the client's error.
  std::error_code not_applied_(const event& proto, errc seen) {
    if (record_) {
      event e = proto;
      stamp(e);
      e.outcome = not_applied;
      e.seen = static_cast<outcome_code>(seen);
      sim_.log().add(std::move(e));
    }
    return seen;
  }

  // The call's event: the recorded one once it is in the history (re-taken after every wait: the
  // history grows while this client waits for its reply), else the call's own copy.
  event& event_of(call& c) {
    return record_ && c.index != npos ? sim_.log().events[c.index] : c.e;
  }

  // Notes a fault in the event; its duration goes into event::value, except for a raise, whose
  // value is its `to`.
  static void note(event& e, fault_note n, std::int64_t d) noexcept {
    e.note = n;
    if (e.kind != event_kind::store_raise) e.value = d;
  }

  // One call through the network: request, apply, reply (the table at the top of the file).
  template <class T, class Apply>
  result<T> perform(event_kind kind, std::string_view key, std::string_view owner,
                    fencing_token token, std::chrono::milliseconds ttl, Apply&& apply,
                    std::uint64_t to = 0) {
    if (sim_.current_crashed()) return errc::store_unavailable;
    if (down() && may_come_back()) come_back();
    const bool faulty = sim_.current_node() != no_node && !sim_.healed();
    call c;
    c.who = sim_.current_node();
    c.e = make(kind, key, owner, token, ttl);
    c.e.outcome = not_applied;
    if (kind == event_kind::store_raise) c.e.value = static_cast<std::int64_t>(to);
    if (faulty) {
      if (const std::optional<errc> lost = request_stage(c)) return not_applied_(c.e, *lost);
    }
    if (down()) {
      if (!may_come_back()) return not_applied_(c.e, errc::store_unavailable);
      come_back();
    }
    result<T> seen = apply_stage<T>(c, apply);
    if (c.killed) return crashed_inside(c);
    copy_after_apply(static_cast<bool>(seen));
    if (faulty && !sim_.current_crashed()) {
      if (const std::optional<errc> lost = reply_stage(c)) seen = *lost;
    }
    event_of(c).seen = to_outcome(seen.error());
    if (sim_.current_crashed()) return errc::store_unavailable;
    return seen;
  }

  // The request's fate: delivered (nullopt; perhaps after a delay, or to a store that just went
  // down), or lost / refused before the store saw it (the client's error).
  std::optional<errc> request_stage(call& c) {
    const store_fault_options& f = faults_;
    switch (sim_.weighted({40, f.request_delays ? f.delay_weight : 0u, f.lost_requests ? 1u : 0u,
                           f.errors ? 1u : 0u, f.restarts ? f.restart_weight : 0u})) {
      case 0:
        return std::nullopt;
      case 1: {
        const std::int64_t d = detail::network_delay(sim_);
        note(c.e, fault_note::request_delayed, d);
        sim_.wait_true(d);
        return std::nullopt;
      }
      case 2:
        sim_.wait_true(detail::network_delay(sim_));
        return errc::timeout;
      case 3:
        return errc::store_unavailable;
      default:
        go_down();
        return std::nullopt;
    }
  }

  // Applies the call to the wrapped store. The event is placed where the store says its operation
  // took effect (linearized()) or, by default, where it returns: for an atomic store, the instant
  // it applied.
  template <class T, class Apply>
  result<T> apply_stage(call& c, Apply& apply) {
    calls_.push_back(&c);
    high_water_ = std::max(high_water_, sim_.local_ns(node_));
    c.e.begin_local_ns = sim_.local_ns(node_);
    c.steps.begin(sim_.now_ns());
    c.store = this;
    c.may_unwind = !noexcept(apply());
    simulator::store_call registration;
    registration.takes_effect = [](void* self) {
      call& k = *static_cast<call*>(self);
      k.store->linearized(k);
    };
    registration.between = [](void* self) {
      call& k = *static_cast<call*>(self);
      k.store->between_steps(k);
    };
    registration.self = &c;
    sim_.enter_store_call(registration);
    struct unregister {
      simulator& sim;
      simulator::store_call& registration;
      std::vector<call*>& calls;
      call* c;
      ~unregister() {
        sim.leave_store_call(registration);
        calls.erase(std::find(calls.begin(), calls.end(), c));
      }
    } guard{sim_, registration, calls_, &c};
#if HOLDFAST_HAS_EXCEPTIONS
    result<T> r = errc::store_unavailable;
    try {
      r = apply();
    } catch (const detail::store_crash_unwind&) {
      return r;  // ended at a step point before taking effect: the store went down with it inside
    }
#else
    result<T> r = apply();
#endif
    linearized(c);
    event& e = event_of(c);
    e.outcome = to_outcome(r.error());
    e.end_local_ns = sim_.local_ns(node_);
    if constexpr (std::is_same_v<T, grant>) {
      if (r) {
        e.token = r->token.value();
        e.ttl_ms = r->ttl.count();
        aim_.granted(e.key, e.kind == event_kind::store_acquire, e.local_ns, e.ttl_ms);
      }
    } else if (r && e.kind == event_kind::store_release) {
      aim_.released(e.key);
    }
    return r;
  }

  // The reply's fate: delivered (nullopt; perhaps after a delay), lost (the store applied the
  // call, the client gets errc::timeout) or an error after applying.
  std::optional<errc> reply_stage(call& c) {
    const store_fault_options& f = faults_;
    switch (sim_.weighted(
        {40, f.reply_delays ? f.delay_weight : 0u, f.lost_replies ? 2u : 0u, f.errors ? 1u : 0u})) {
      case 0:
        return std::nullopt;
      case 1: {
        const std::int64_t d = detail::network_delay(sim_);
        note(event_of(c), fault_note::reply_delayed, d);
        sim_.wait_true(d);
        return std::nullopt;
      }
      case 2:
        note(event_of(c), fault_note::reply_lost, 0);
        sim_.wait_true(detail::network_delay(sim_));
        return errc::timeout;
      default:
        note(event_of(c), fault_note::error_after, 0);
        return errc::store_unavailable;
    }
  }

  // An operation the store went down with: the client gets store_unavailable. One that ended at
  // a step point never took effect (recorded as not applied); one that ran to its end applied,
  // and its reply is lost to the crash.
  std::error_code crashed_inside(call& c) {
    if (c.index == npos) {
      c.e.note = fault_note::store_crashed;
      return not_applied_(c.e, errc::store_unavailable);
    }
    event& e = event_of(c);
    e.note = fault_note::store_crashed;
    e.seen = static_cast<outcome_code>(errc::store_unavailable);
    return errc::store_unavailable;
  }

  // After an operation that succeeded, the lagging copy catches up (1 in 2) or falls one more
  // operation behind, decided only when no operation is inside the store (so the copy is of a
  // state between operations).
  void copy_after_apply(bool changed) {
    if (!changed || !take_copy_ || !faults_.lagging_restarts || !faults_.restarts ||
        !calls_.empty())
      return;
    if (sim_.current_node() == no_node || sim_.healed()) return;
    if (restore_ && sim_.decide(2) == 0) {
      ++copy_lags_;
      return;
    }
    restore_ = take_copy_(*inner_);  // may be empty: nothing to copy
    copy_lags_ = 0;
    copy_at_ = sim_.log().events.size();
  }

  bool down() const noexcept {
    return down_until_ >= 0;
  }

  // The downtime is over (or faults healed) and no operation is still inside the old store.
  bool may_come_back() const noexcept {
    return (sim_.now_ns() >= down_until_ || sim_.healed()) && calls_.empty();
  }

  // Takes the store down for 0.1, 0.5 or 2 scale; with a restart budget, decides now whether the
  // on_restart action runs when it comes back. Every operation inside the store ends at its next
  // step point. `inside`: the client inside whose operation the store crashed (no_node: at a
  // request), recorded as the store_down event's peer, with value 1.
  void go_down(node_id inside = no_node) {
    if (down()) return;
    static constexpr std::int64_t tenths[] = {1, 5, 20};
    down_until_ = sim_.now_ns() + sim_.scale_ns() * tenths[sim_.decide(3)] / 10;
    restart_armed_ = budget_ == nullptr || budget_->left > 0;
    // A lagging restart (1 in 2, or every_restart_lags) loses the operations the copy lacks.
    lagging_armed_ = restart_armed_ && restore_ && copy_lags_ > 0 && faults_.lagging_restarts &&
                     (faults_.every_restart_lags || sim_.decide(2) == 1);
    reboot_armed_ = !lagging_armed_ && on_reboot_ && faults_.reboots && sim_.decide(3) == 2;
    if (budget_ != nullptr && restart_armed_ && (on_restart_ || lagging_armed_)) --budget_->left;
    for (call* c : calls_) c->killed = true;
    event e = sim_.make_event(event_kind::store_down, node_);
    e.peer = inside;
    e.value = inside == no_node ? 0 : 1;
    if (reboot_armed_) e.note = fault_note::machine_rebooted;
    sim_.log().add(std::move(e));
    if (reboot_armed_) sim_.crash_clients();  // every process on the machine, at this instant
  }

  // A machine reboot's return: the store's clock starts over (1 ms since boot), the lagging copy
  // (of an earlier boot) is dropped, and on_reboot reopens the store with a new boot identity.
  void come_back_rebooted() {
    // high_water_ stays: a store that kept the old boot's leases frees them once its new clock
    // passes their old expiry, and L1 allows for that (it should drop them: store_env::boot).
    sim_.restart_clock(node_, 1000000);
    restore_ = nullptr;
    copy_lags_ = 0;
    event up = sim_.make_event(event_kind::store_up, node_);
    up.note = fault_note::machine_rebooted;
    sim_.log().add(std::move(up));
    on_reboot_(inner_);
  }

  void come_back() {
    down_until_ = -1;
    if (std::exchange(reboot_armed_, false)) {
      restart_armed_ = false;
      return come_back_rebooted();
    }
    event up = sim_.make_event(event_kind::store_up, node_);
    if (lagging_armed_) {
      up.value = copy_lags_;
      up.token = copy_at_;
    }
    sim_.log().add(std::move(up));
    if (lagging_armed_) {
      restore_(inner_);
      restore_ = nullptr;  // the copy is the store now; the next one is taken after an operation
      copy_lags_ = 0;
    } else if (on_restart_ && (budget_ == nullptr || restart_armed_)) {
      on_restart_(inner_);
    }
    restart_armed_ = false;
    lagging_armed_ = false;
  }

  simulator& sim_;
  node_id node_;
  store_fault_options faults_;
  std::unique_ptr<Store> inner_;
  std::function<void(std::unique_ptr<Store>&)> on_restart_;
  restart_budget* budget_ = nullptr;             // on_restart's budget, if any
  bool restart_armed_ = false;                   // with a budget: this restart runs on_restart
  std::function<restore_fn(Store&)> take_copy_;  // keep_copies()
  restore_fn restore_;                           // the lagging copy's restore, if one was taken
  std::int64_t copy_lags_ = 0;                   // operations applied since it was taken
  std::uint64_t copy_at_ = 0;                    // history events before it
  bool lagging_armed_ = false;                   // this restart restores the lagging copy
  std::function<void(std::unique_ptr<Store>&)> on_reboot_;
  bool reboot_armed_ = false;  // this restart is a machine reboot
  bool record_ = true;
  std::int64_t down_until_ = -1;
  std::int64_t high_water_ = 0;
  detail::regrant_aim aim_;   // regrant_stalls
  std::vector<call*> calls_;  // operations in progress (several, when a multi-step store yields)
};

}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_SIM_STORE_HPP
