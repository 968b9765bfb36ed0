// SPDX-License-Identifier: MIT
// The coordination recipes inside the simulator (testing/), judged by its checker, with a negative
// control each that the checker must catch:
//
//   - election (election.hpp): three simulated processes campaign for one role, lead in steps
//     (checking is_leader() on their own clock before every write, writing with their term through
//     a fence) and resign, under pauses, clock drift, delayed/lost requests and replies and store
//     errors. S1-S5 hold. Control: a leader that believes it leads until on_stopped_leading tells
//     it otherwise (client-go's callback is asynchronous: a paused leader resumes before it is
//     told), which S4 catches.
//   - semaphore (semaphore.hpp): four processes share N = 2 permits under the same faults; S1-S6
//     hold, S6 being "never more than N live permits". Control: a semaphore that counts the live
//     permits (inspect) and then grants a fresh key in a second step, the check-then-act race of a
//     semaphore built without an atomic store step, which S6 catches.
//     A second control: the semaphore as it was before issue 22, whose pass forgets a slot whose
//     reply was lost (granted, unheard: an orphaned permit, the kind of Curator #835), which the
//     checker's O1 catches. The store applies a shorter TTL than asked now and then.
//   - waiting without polling (store.hpp's wait_for_release): three processes take turns on a key
//     with blocking acquire() sleeping in the store, whose every release notification is lost (the
//     waiters live on the holder's expiry alone), with crashes, pauses and store faults; then the
//     faults heal and a contender must acquire within the L1 bound. S1-S5 and L1 hold. Control: a
//     wait that sleeps to the caller's deadline instead of the holder's expiry, which L1 catches.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "holdfast/backoff.hpp"
#include "holdfast/election.hpp"
#include "holdfast/keepalive.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/semaphore.hpp"
#include "holdfast/stores/memory.hpp"
#include "holdfast/testing/testing.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_recipes_sim {

using namespace std::chrono_literals;
using holdfast::testing::sim_clock;

namespace {

namespace ht = holdfast::testing;

constexpr std::chrono::milliseconds kTtl{1000};
using store_t = ht::sim_store<holdfast::memory_store<sim_clock>>;

void record(ht::simulator& sim, ht::event_kind k, ht::node_id n, const std::string& owner,
            std::uint8_t key, std::error_code ec = {}, std::uint64_t token = 0,
            std::int64_t value = 0) {
  if (sim.current_crashed()) return;
  ht::event e = sim.make_event(k, n);
  e.owner = owner;
  e.key = key;
  e.token = token;
  e.outcome = ht::to_outcome(ec);
  e.value = value;
  e.ttl_ms = kTtl.count();
  sim.log().add(std::move(e));
}

struct process {
  ht::node_id node = ht::no_node;
  std::string name;
  std::unique_ptr<holdfast::keepalive<sim_clock>> keepalive;
};

// One simulated world with `n` processes, each with a keepalive it polls itself.
struct world {
  world(std::uint64_t seed, std::size_t n, std::vector<std::string> keys)
      : src(seed),
        sim(src, faults()),
        store(
            sim, "store",
            [](sim_clock c) { return std::make_unique<holdfast::memory_store<sim_clock>>(c); },
            store_faults()) {
    for (std::string& k : keys) sim.log().keys.push_back(std::move(k));
    sim.log().primary_store = store.node();
    sim.log().tolerance_ns = std::chrono::nanoseconds(1ms).count();
    procs.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      process& p = procs[i];
      p.name = std::string(1, static_cast<char>('A' + i));
      p.node = sim.add_client(p.name);
      holdfast::keepalive_options ko;
      ko.start_thread = false;  // the process's fiber polls it (an event loop)
      ko.retry.initial = kTtl / 50;
      ko.retry.max_delay = kTtl / 4;
      ko.retry.seed = seed * 31 + i;
      p.keepalive = std::make_unique<holdfast::keepalive<sim_clock>>(sim.clock(p.node), ko);
    }
  }

  // Every store fault, and now and then a TTL shorter than asked (issue 22: a holder trusts
  // only what the store applied).
  static ht::store_fault_options store_faults() {
    ht::store_fault_options f;
    f.shorter_ttls = true;
    return f;
  }

  static ht::fault_options faults() {
    ht::fault_options f;
    f.scale = kTtl;
    f.crashes = false;  // a crash kills a fiber, not its process's keepalive: not modelled here
    f.drift_bound = holdfast::validity_options{}.drift;
    return f;
  }

  // Works until `until` in slices of at most a tenth of the TTL, polling p's keepalive.
  void work_until(process& p, sim_clock::time_point until) {
    const sim_clock clock = sim.clock(p.node);
    for (sim_clock::time_point now = clock.now(); now < until; now = clock.now()) {
      const std::optional<sim_clock::time_point> next = p.keepalive->poll();
      sim_clock::time_point wake = std::min(until, now + kTtl / 10);
      if (next && *next < wake) wake = *next;
      clock.sleep_until(wake);
    }
  }

  holdfast::acquire_options<sim_clock> acquire_options(process& p, std::uint64_t seed) {
    holdfast::acquire_options<sim_clock> o;
    o.clock = sim.clock(p.node);
    o.backoff.initial = kTtl / 50;
    o.backoff.max_delay = kTtl / 4;
    o.backoff.seed = seed;
    return o;
  }

  ht::seeded_source src;
  ht::simulator sim;
  store_t store;
  std::vector<process> procs;
};

// ---------------------------------------------------------------------------------------------
// election

enum class leader_kind {
  checks_is_leader,  ///< Checks is_leader() on its own clock before every write (the advice).
  trusts_callback,   ///< Control: leads until on_stopped_leading says otherwise.
};

ht::verdict run_election_schedule(std::uint64_t seed, leader_kind kind) {
  ht::history log;
  {
    world w(seed, 3, {"leader"});
    ht::sim_resource resource(w.sim, 0, ht::resource_mode::fenced);
    using election_t = holdfast::election<store_t, sim_clock>;
    std::vector<std::unique_ptr<election_t>> candidates;
    std::vector<int> told(w.procs.size(), 0);  // leaderships started minus stopped
    for (std::size_t i = 0; i < w.procs.size(); ++i) {
      process& p = w.procs[i];
      holdfast::election_options<sim_clock> o;
      o.label = p.name;
      o.acquire = w.acquire_options(p, seed * 7 + i);
      o.keepalive = p.keepalive.get();
      o.on_started_leading = [&told, i](holdfast::fencing_token) { ++told[i]; };
      o.on_stopped_leading = [&told, i](holdfast::loss_cause) { --told[i]; };
      candidates.push_back(std::make_unique<election_t>(w.store, "leader", kTtl, o));
    }
    for (std::size_t i = 0; i < w.procs.size(); ++i) {
      w.sim.spawn(w.procs[i].node, [&, i] {
        process& p = w.procs[i];
        election_t& e = *candidates[i];
        const sim_clock clock = w.sim.clock(p.node);
        for (int round = 0; round < 3; ++round) {
          holdfast::result<holdfast::fencing_token> term = e.campaign(3 * kTtl);
          if (!term) {
            record(w.sim, ht::event_kind::acquire_failed, p.node, p.name, 0, term.error());
            continue;
          }
          const std::string owner = e.owner();
          record(w.sim, ht::event_kind::acquired, p.node, owner, 0, {}, term->value());
          for (int step = 0; step < 8; ++step) {
            w.work_until(p, clock.now() + kTtl * (1 + (step * 3 + round) % 8) / 10);
            const bool believes =
                kind == leader_kind::checks_is_leader ? e.is_leader() : told[i] > 0;
            record(w.sim, ht::event_kind::validity, p.node, owner, 0, {}, term->value(),
                   believes ? 1 : 0);
            if (!believes) break;
            (void)resource.write(*term, owner);
          }
          const holdfast::result<void> r = e.resign();
          record(w.sim, r ? ht::event_kind::released : ht::event_kind::release_failed, p.node,
                 owner, 0, r.error(), term->value());
        }
      });
    }
    w.sim.run();
    candidates.clear();
    log = std::move(w.sim.log());
  }
  return ht::check(log);
}

// ---------------------------------------------------------------------------------------------
// semaphore

constexpr std::uint32_t kPermits = 2;
constexpr std::uint32_t kKeys = 2 * kPermits;  // the control may use more keys than permits

enum class semaphore_kind {
  shipped,            ///< holdfast::semaphore.
  count_then_grant,   ///< Control: counts live permits, then grants a fresh key in a second step.
  forgets_lost_slot,  ///< Control: the semaphore before issue 22 (a lost reply's slot orphaned).
};

holdfast::result<holdfast::lease<store_t, sim_clock>> errc_busy() {
  return holdfast::errc::busy;
}

// The control: count the live permits among every key of the pool, and if fewer than N are live
// take a free key, in two steps. Another process can count in between, and both take a key.
holdfast::result<holdfast::lease<store_t, sim_clock>> count_then_grant(
    world& w, const holdfast::acquire_options<sim_clock>& o, std::size_t offset) {
  const sim_clock clock = o.clock;
  const auto deadline = clock.now() + 3 * kTtl;
  for (;;) {
    std::uint32_t live = 0;
    std::optional<std::uint32_t> free;
    for (std::uint32_t j = 0; j < kKeys; ++j) {
      const std::uint32_t k = static_cast<std::uint32_t>((offset + j) % kKeys);
      auto r = w.store.inspect("pool#" + std::to_string(k));
      if (!r) return r.error();
      if (*r) {
        ++live;
      } else if (!free) {
        free = k;
      }
    }
    if (live < kPermits && free) {
      auto l = holdfast::try_acquire(w.store, "pool#" + std::to_string(*free), kTtl, o);
      if (l || l.error() != holdfast::errc::busy) return l;
    }
    if (!(clock.now() < deadline)) return holdfast::errc::timeout;
    clock.sleep_until(clock.now() + kTtl / 20);
  }
}

// The control for O1 (the kind of Curator #835): the semaphore's passes as they were before issue
// 22. A slot whose call failed transiently (perhaps a lost reply: granted, unheard) is neither
// asked again nor given back; every pass starts again at the first slot.
holdfast::result<holdfast::lease<store_t, sim_clock>> forgetful_acquire(
    store_t& store, const holdfast::acquire_options<sim_clock>& o, std::uint32_t start) {
  const sim_clock clock = o.clock;
  const auto deadline = clock.now() + 3 * kTtl;
  holdfast::backoff delays(o.backoff);
  for (std::uint32_t made = 1;; ++made) {
    std::error_code failure{};
    for (std::uint32_t k = 0; k < kPermits; ++k) {
      const std::string key = "pool#" + std::to_string((start + k) % kPermits);
      auto l = holdfast::detail::acquire_once(store, key, kTtl, o, o.owner);
      if (l) return l;
      if (l.error() == holdfast::errc::busy) continue;
      if (!holdfast::is_transient(l.error())) return l.error();
      if (!failure) failure = l.error();
    }
    if (delays.exhausted(made)) return failure ? failure : holdfast::errc::busy;
    const auto now = clock.now();
    if (!(now < deadline)) return holdfast::errc::timeout;
    auto wake = now + delays.next_delay();
    if (deadline < wake) wake = deadline;
    clock.sleep_until(wake);
  }
}

ht::verdict run_semaphore_schedule(std::uint64_t seed, semaphore_kind kind) {
  using permit_t = holdfast::lease<store_t, sim_clock>;
  ht::history log;
  {
    std::vector<std::string> keys;
    for (std::uint32_t k = 0; k < kKeys; ++k) keys.push_back("pool#" + std::to_string(k));
    world w(seed, 4, keys);
    w.sim.log().permit_groups.push_back(ht::permit_group{"pool#", kPermits});
    std::vector<std::unique_ptr<ht::sim_resource>> resources;
    for (std::uint32_t k = 0; k < kKeys; ++k) {
      resources.push_back(std::make_unique<ht::sim_resource>(w.sim, static_cast<std::uint8_t>(k),
                                                             ht::resource_mode::fenced));
    }
    for (std::size_t i = 0; i < w.procs.size(); ++i) {
      w.sim.spawn(w.procs[i].node, [&, i] {
        process& p = w.procs[i];
        const sim_clock clock = w.sim.clock(p.node);
        for (int round = 0; round < 3; ++round) {
          holdfast::semaphore_options<sim_clock> so;
          so.acquire = w.acquire_options(p, seed * 7 + i * 3 + static_cast<std::uint64_t>(round));
          so.acquire.owner = p.name + std::to_string(round);
          so.unique_owner = false;  // deterministic: the history replays byte for byte
          holdfast::result<permit_t> permit = errc_busy();
          if (kind == semaphore_kind::shipped) {
            holdfast::semaphore<store_t, sim_clock> pool(w.store, "pool", kPermits, kTtl, so);
            permit = pool.acquire(3 * kTtl);
          } else if (kind == semaphore_kind::forgets_lost_slot) {
            permit = forgetful_acquire(w.store, so.acquire, static_cast<std::uint32_t>(i + round));
          } else {
            permit = count_then_grant(w, so.acquire, i + static_cast<std::size_t>(round));
          }
          if (!permit) {
            record(w.sim, ht::event_kind::acquire_failed, p.node, so.acquire.owner, 0,
                   permit.error());
            continue;
          }
          const std::uint8_t key = static_cast<std::uint8_t>(permit->key().back() - '0');
          record(w.sim, ht::event_kind::acquired, p.node, so.acquire.owner, key, {},
                 permit->token().value());
          (void)p.keepalive->add(*permit);
          for (int step = 0; step < 6; ++step) {
            w.work_until(p, clock.now() + kTtl * (1 + (step * 3 + round) % 8) / 10);
            const bool believes = permit->valid();
            record(w.sim, ht::event_kind::validity, p.node, so.acquire.owner, key, {},
                   permit->token().value(), believes ? 1 : 0);
            if (!believes) break;
            (void)resources[key]->write(permit->token(), so.acquire.owner);
          }
          const holdfast::result<void> r = permit->release();
          record(w.sim, r ? ht::event_kind::released : ht::event_kind::release_failed, p.node,
                 so.acquire.owner, key, r.error(), permit->token().value());
        }
      });
    }
    w.sim.run();
    log = std::move(w.sim.log());
  }
  return ht::check(log);
}

// ---------------------------------------------------------------------------------------------
// waiting without polling

enum class wait_kind {
  until_expiry,    ///< Wakes at the holder's expiry at the latest (the contract).
  until_deadline,  ///< Control: sleeps to the caller's deadline when no notification comes.
};

/// A sim_store whose wait_for_release never hears a release (every notification lost): it sleeps
/// on the calling client's clock until the holder's lease can have expired (its time left by the
/// store, 1 ms more) or the deadline, whichever comes first; the control sleeps to the deadline.
struct lossy_waiting_store {
  store_t* s;
  ht::simulator* sim;
  wait_kind kind;
  holdfast::result<holdfast::grant> try_acquire(std::string_view k, std::string_view o,
                                                std::chrono::milliseconds t) {
    return s->try_acquire(k, o, t);
  }
  holdfast::result<holdfast::grant> renew(std::string_view k, std::string_view o,
                                          holdfast::fencing_token tok,
                                          std::chrono::milliseconds t) {
    return s->renew(k, o, tok, t);
  }
  holdfast::result<void> release(std::string_view k, std::string_view o,
                                 holdfast::fencing_token tok) {
    return s->release(k, o, tok);
  }
  holdfast::result<void> wait_for_release(std::string_view k,
                                          const sim_clock::time_point& deadline) {
    const sim_clock clock = sim->clock(sim->current_node());
    auto held = s->inspect(k);
    if (!held) return held.error();
    if (!*held) return {};
    sim_clock::time_point wake = deadline;
    if (kind == wait_kind::until_expiry) {
      const auto expiry = clock.now() + (*held)->remaining + 1ms;
      if (expiry < wake) wake = expiry;
    }
    clock.sleep_until(wake);
    return {};
  }
};
static_assert(holdfast::can_wait_for_release_v<lossy_waiting_store, sim_clock>);

ht::verdict run_waiting_schedule(std::uint64_t seed, wait_kind kind) {
  using lease_t = holdfast::lease<lossy_waiting_store, sim_clock>;
  ht::history log;
  {
    world w(seed, 3, {"orders"});
    lossy_waiting_store store{&w.store, &w.sim, kind};
    ht::sim_resource resource(w.sim, 0, ht::resource_mode::fenced);
    const auto options = [&](process& p, const std::string& owner, std::uint64_t s) {
      holdfast::acquire_options<sim_clock> o = w.acquire_options(p, s);
      o.owner = owner;
      return o;
    };
    for (std::size_t i = 0; i < w.procs.size(); ++i) {
      w.sim.spawn(w.procs[i].node, [&, i] {
        process& p = w.procs[i];
        const sim_clock clock = w.sim.clock(p.node);
        for (int round = 0; round < 3; ++round) {
          const std::string owner = p.name + std::to_string(round);
          holdfast::result<lease_t> l = holdfast::acquire(
              store, "orders", kTtl, 3 * kTtl, options(p, owner, seed * 7 + i * 3 + round));
          if (!l) {
            record(w.sim, ht::event_kind::acquire_failed, p.node, owner, 0, l.error());
            continue;
          }
          record(w.sim, ht::event_kind::acquired, p.node, owner, 0, {}, l->token().value());
          clock.sleep_until(clock.now() + kTtl * (1 + (round + static_cast<int>(i)) % 4) / 5);
          const bool valid = l->valid();
          record(w.sim, ht::event_kind::validity, p.node, owner, 0, {}, l->token().value(),
                 valid ? 1 : 0);
          if (valid) (void)resource.write(l->token(), owner);
          if ((seed + i + static_cast<std::uint64_t>(round)) % 3 == 0) {
            // The holder dies here: nothing releases the key, the waiters have only its expiry.
            l->on_lost(nullptr);
            w.sim.crash_current();
            return;
          }
          const holdfast::result<void> r = l->release();
          record(w.sim, r ? ht::event_kind::released : ht::event_kind::release_failed, p.node,
                 owner, 0, r.error(), l->token().value());
        }
      });
    }
    w.sim.run();
    // L1: faults stop; a contender must acquire within TTL (+ drift and tolerance) plus the
    // backoff cap, waiting in the store; a store whose clock ticks coarsely may hold the last
    // grant up to two of its ticks longer (store.hpp, T2).
    w.sim.heal();
    const std::int64_t bound = std::chrono::nanoseconds(kTtl).count() * 21 / 20 +
                               std::chrono::nanoseconds(kTtl / 4).count() + 2000000 +
                               2 * w.sim.log().tick_of(w.store.node());
    ht::event heal = w.sim.make_event(ht::event_kind::heal, ht::no_node);
    heal.value = bound;
    w.sim.log().add(std::move(heal));
    const ht::node_id contender = w.sim.add_client("L");
    w.sim.spawn(contender, [&] {
      holdfast::acquire_options<sim_clock> o;
      o.clock = w.sim.clock(contender);
      o.owner = "L";
      o.backoff.initial = kTtl / 50;
      o.backoff.max_delay = kTtl / 4;
      o.backoff.seed = seed;
      auto l = holdfast::acquire(store, "orders", kTtl, std::chrono::nanoseconds(bound) + kTtl, o);
      record(w.sim, l ? ht::event_kind::liveness_acquired : ht::event_kind::liveness_failed,
             contender, "L", 0, l.error(), l ? l->token().value() : 0);
      if (l) (void)l->release();
    });
    w.sim.run();
    log = std::move(w.sim.log());
  }
  return ht::check(log);
}

}  // namespace

TEST_CASE("election schedules keep S1-S5 under pauses, drift and store faults",
          "[election][testing]") {
  for (std::uint64_t seed = 1; seed <= 150; ++seed) {
    const ht::verdict v = run_election_schedule(seed, leader_kind::checks_is_leader);
    INFO("seed " << seed << "\n" << v.report());
    REQUIRE(v.ok());
  }
}

TEST_CASE("a leader trusting on_stopped_leading instead of is_leader() is caught (control)",
          "[election][testing]") {
  std::optional<ht::verdict> caught;
  for (std::uint64_t seed = 1; seed <= 300 && !caught; ++seed) {
    ht::verdict v = run_election_schedule(seed, leader_kind::trusts_callback);
    if (!v.ok()) caught = std::move(v);
  }
  REQUIRE(caught);
  INFO(caught->report());
  CHECK(caught->violated == ht::invariant::s4_holder_belief);
}

TEST_CASE("semaphore schedules keep S1-S6 (at most N live permits) under faults",
          "[semaphore][testing]") {
  for (std::uint64_t seed = 1; seed <= 150; ++seed) {
    const ht::verdict v = run_semaphore_schedule(seed, semaphore_kind::shipped);
    INFO("seed " << seed << "\n" << v.report());
    REQUIRE(v.ok());
  }
}

TEST_CASE("a count-then-grant semaphore is caught exceeding N live permits (control)",
          "[semaphore][testing]") {
  std::optional<ht::verdict> caught;
  std::uint64_t seed = 1;
  for (; seed <= 300 && !caught; ++seed) {
    ht::verdict v = run_semaphore_schedule(seed, semaphore_kind::count_then_grant);
    if (!v.ok()) caught = std::move(v);
  }
  REQUIRE(caught);
  INFO("seed " << seed - 1 << "\n" << caught->report());
  CHECK(caught->violated == ht::invariant::s6_permit_bound);
  CHECK_THAT(caught->report(), Catch::Contains("the bound is 2"));
}

TEST_CASE("a semaphore that forgets a slot whose reply was lost is caught by O1 (control)",
          "[semaphore][testing]") {
  std::optional<ht::verdict> caught;
  std::uint64_t seed = 1;
  for (; seed <= 300 && !caught; ++seed) {
    ht::verdict v = run_semaphore_schedule(seed, semaphore_kind::forgets_lost_slot);
    if (!v.ok()) caught = std::move(v);
  }
  REQUIRE(caught);
  INFO("seed " << seed - 1 << "\n" << caught->report());
  CHECK(caught->violated == ht::invariant::o1_orphaned_grant);
}

TEST_CASE("waiting schedules keep S1-S5 and L1 with every release notification lost",
          "[lease][wait_for_release][testing]") {
  for (std::uint64_t seed = 1; seed <= 150; ++seed) {
    const ht::verdict v = run_waiting_schedule(seed, wait_kind::until_expiry);
    INFO("seed " << seed << "\n" << v.report());
    REQUIRE(v.ok());
  }
}

TEST_CASE("a wait that sleeps past the holder's expiry is caught by L1 (control)",
          "[lease][wait_for_release][testing]") {
  std::optional<ht::verdict> caught;
  for (std::uint64_t seed = 1; seed <= 150 && !caught; ++seed) {
    ht::verdict v = run_waiting_schedule(seed, wait_kind::until_deadline);
    if (!v.ok()) caught = std::move(v);
  }
  REQUIRE(caught);
  INFO(caught->report());
  CHECK(caught->violated == ht::invariant::l1_liveness);
}

}  // namespace test_recipes_sim
