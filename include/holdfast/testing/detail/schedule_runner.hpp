// SPDX-License-Identifier: MIT
// holdfast/testing/detail/schedule_runner.hpp - runs a workload's clients (workload_plan.hpp)
// on the simulator with the shipped lease API against one sim_store, then the L1 contenders.
// Internal to workload.hpp's run_schedule (and to tests that assemble their own stores, such as
// a quorum of simulated members); not a public interface.
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
//
// Thread-safety: the simulator's thread only.
#ifndef HOLDFAST_TESTING_DETAIL_SCHEDULE_RUNNER_HPP
#define HOLDFAST_TESTING_DETAIL_SCHEDULE_RUNNER_HPP

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/keepalive.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/testing/history.hpp"
#include "holdfast/testing/mutants.hpp"
#include "holdfast/testing/resource.hpp"
#include "holdfast/testing/sim_store.hpp"
#include "holdfast/testing/simulator.hpp"
#include "holdfast/testing/workload_plan.hpp"
#include "holdfast/validity.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace testing {
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
      // holder_ignores_clock_tick: every client's clock ticks coarsely (a quarter of the TTL)
      // and hides it from the lease (options()).
      if (o.mutation == mutant::holder_ignores_clock_tick) {
        sim.set_tick(c.node, std::chrono::nanoseconds(o.ttl).count() / 4);
      }
    }
    // Each client's operations, in one allocation each (a fuzzer runs this per execution).
    for (client& c : clients_) c.ops.reserve(w.ops.size());
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
      // The contender's backoff sleeps end when its clock reads the deadline: up to a tick of
      // its clock late.
      const std::int64_t b =
          at_rate(span, sim_.skew_ppm(store_.node())) +
          at_rate(backoff_cap().count() + sim_.tick_ns(c.node), sim_.skew_ppm(c.node)) + 1000000;
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
    if (o_.mutation == mutant::holder_ignores_clock_tick) opts.clock = opts.clock.hiding_tick();
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

  // One operation of the client's program (see the table in workload_plan.hpp).
  void run(client& c, const client_op& op) {
    switch (op.kind) {
      case op_kind::work:
        return run_work(c, op);
      case op_kind::acquire:
      case op_kind::try_acquire:
        return run_acquire(c, op);
      case op_kind::write:
        if (c.held) checked_write(c);
        return;
      case op_kind::write_at_edge:
        return run_write_at_edge(c, op);
      case op_kind::write_unchecked:
        if (c.held) (void)resources_[c.key]->write(c.held->token(), c.owner);
        return;
      case op_kind::renew:
        return run_renew(c, op);
      case op_kind::release:
        return run_release(c);
      case op_kind::crash:
        sim_.crash_current();
        return;
      case op_kind::clock_regress:
        return run_clock_regress(c, op);
      case op_kind::acquire_at_expiry:
        return run_acquire_at_expiry(c, op);
      case op_kind::reacquire:
        return run_reacquire(c);
    }
  }

  // reacquire: the holder asks the store again for its own lease, as its owner. The same token:
  // the store extended the lease (T1), the holder's validity stays what it was. Another token
  // (a quorum gives one when it cannot vouch for the old grant): the holder adopts that grant,
  // with validity from its own reading before the call. An error: it keeps its lease (the
  // checker's S3 and S4 then judge whether the store kept it too).
  void run_reacquire(client& c) {
    if (!c.held || !c.held->valid()) return;  // a live holder's (one past its validity has none)
    const std::string key = key_name(c.key);
    const acquire_options<sim_clock> opts = options(c);
    const sim_clock::time_point start = opts.clock.now();
    const result<grant> g = store_.try_acquire(key, c.owner, o_.ttl);
    if (sim_.current_crashed() || !c.held) return;
    if (!g) {
      record(event_kind::acquire_failed, c, g.error());
      return;
    }
    if (g->token == c.held->token()) return;
    // The old handle releases its grant as it goes (RAII): the store may still carry it.
    c.held.emplace(
        holdfast::detail::lease_access::from_grant(store_, opts, key, c.owner, *g, o_.ttl, start));
    holdfast::detail::lease_access::arm(*c.held, opts);
    note_reply(c);
    record(event_kind::acquired, c, {}, c.held->token().value(), belief_end(c));
    keep(c);
  }

  // work: sleeps 0.1, 0.5, 1 or 2 TTL on the client's own clock.
  void run_work(client& c, const client_op& op) {
    static constexpr int tenths[] = {1, 5, 10, 20};
    const sim_clock clock = sim_.clock(c.node);
    nap(c, clock.now() + std::chrono::nanoseconds(o_.ttl) * tenths[op.arg & 3] / 10);
  }

  // acquire (timeout 0.5, 2, 5 or 1 TTL) or try_acquire, when the client holds nothing.
  void run_acquire(client& c, const client_op& op) {
    if (c.held) return;
    c.key = op.key;
    static constexpr int tenths[] = {5, 20, 50, 10};
    const std::chrono::nanoseconds ttl = o_.ttl;
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
  }

  // write_at_edge: checks and writes at the last true instant at which the holder's clock still
  // reads before its validity end (on a coarse clock its reading then lags true time the most,
  // almost a tick), or before 1 ms or 1% of the TTL ahead of it; or at the end itself.
  void run_write_at_edge(client& c, const client_op& op) {
    if (!c.held) return;
    const std::int64_t ahead[] = {0, 1000000, std::chrono::nanoseconds(o_.ttl).count() / 100};
    const std::int64_t end = belief_end(c);
    if ((op.arg & 3) == 3) {
      nap(c, sim_clock::time_point(sim_clock::duration(end)));
    } else {
      const std::int64_t target = end - ahead[op.arg & 3];
      const std::int64_t q = sim_.tick_ns(c.node);
      nap(c, sim_clock::time_point(sim_clock::duration(target - q - 1)));
      if (!c.ka && c.held && !sim_.current_crashed()) {
        const std::int64_t t = sim_.true_time_reading(c.node, target) - 1;
        if (t > sim_.now_ns()) sim_.wait_true(t - sim_.now_ns());
      }
    }
    if (c.held && !sim_.current_crashed()) checked_write(c);
  }

  // renew: now (arg 0) or late, just before the validity ends: 2% of the TTL, 1 ms or one tick.
  void run_renew(client& c, const client_op& op) {
    if (!c.held) return;
    if (op.arg != 0) {  // renew late: just before validity ends (the last moment)
      const std::int64_t ttl_ns = std::chrono::nanoseconds(o_.ttl).count();
      const std::int64_t d = op.arg == 1 ? ttl_ns / 50 : op.arg == 2 ? 1000000 : 1;
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
  }

  // release: releases and drops the lease, whatever the store answers.
  void run_release(client& c) {
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
  }

  // clock_regress: right after a poll, the holder's clock jumps back by 1, 5 or 10 TTL.
  void run_clock_regress(client& c, const client_op& op) {
    if (!c.held || !c.ka) return;
    // Right after a poll, so the clock surely reads earlier than the keepalive last saw.
    c.ka_next = poll(c);
    if (sim_.current_crashed()) return;
    static constexpr std::int64_t tenths[] = {10, 50, 100, 10};
    const std::int64_t back = std::chrono::nanoseconds(o_.ttl).count() * tenths[op.arg & 3] / 10;
    sim_.jump_clock(c.node, -back);
    record(event_kind::clock_regress, c, {}, c.held->token().value(), -back);
  }

  // acquire_at_expiry: one try_acquire one tick before, at, or one tick after the end of the
  // lease another client holds on the key, by the store's clock.
  void run_acquire_at_expiry(client& c, const client_op& op) {
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
    // It uses its lease as any new holder would: one write through the key's fence. A token the
    // store re-issued after losing grants (a lagging restart) often reaches this contender
    // first; without the write no fence ever saw it.
    (void)resources_[key]->write(r->token(), c.owner);
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

}  // namespace detail
}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_DETAIL_SCHEDULE_RUNNER_HPP
