// SPDX-License-Identifier: MIT
// holdfast/testing/workload_recipes.hpp - the coordination recipes inside the simulator, judged
// by its checker, with negative controls that must be caught:
//
//   recipe    | the schedule                                  | control                | caught
//   ----------+-----------------------------------------------+------------------------+-------
//   election  | three processes campaign for one role, lead   | leader_trusts_callback | S4
//   (election | in steps (is_leader() on their own clock      | (leads until           |
//   .hpp)     | before every write, a fenced write with their | on_stopped_leading:    |
//             | term) and resign                              | client-go's callback is|
//             |                                               | asynchronous)          |
//   semaphore | four processes share N = 2 permits; S6 is     | count_then_grant (count| S6
//   (semaphore| "never more than N live permits". The store   | live permits, then take|
//   .hpp)     | applies a shorter TTL than asked now and then | a key in a second step)|
//             |                                               | forgets_lost_slot (the | O1
//             |                                               | pass before issue 22: a|
//             |                                               | slot whose reply was   |
//             |                                               | lost is orphaned, the  |
//             |                                               | kind of Curator #835)  |
//   waiting   | three processes take turns on a key with      | wait_until_deadline    | L1
//   (store.hpp| blocking acquire() sleeping in the store,     | (sleeps to the caller's|
//   wait_for_ | whose every release notification is lost;     | deadline, not to the   |
//   release)  | crashes; then faults heal and a contender must| holder's expiry)       |
//             | acquire within the L1 bound. Each holder      | trusts_asked_ttl (the  | S4
//             | renews once and holds on for 60-90% of the TTL| holder trusts the TTL  |
//             | (the store applies a shorter TTL now and then)| it asked, not the one  |
//             |                                               | the store applied)     |
//
// Every schedule runs under pauses, clock drift within the bound, delayed and lost requests and
// replies, and store errors; each process drives its own keepalive as an event loop.
//
// run_recipe_schedule(src, mutant) is the entry the fuzz harness (fuzz/fuzz_recipes.cpp) and
// rapidcheck (tests/property/prop_recipes.cpp) call; the seeded search (tests/unit/
// test_recipes_sim.cpp) calls the per-recipe functions with a seeded_source. Thread-safety: one
// run per thread.
#ifndef HOLDFAST_TESTING_WORKLOAD_RECIPES_HPP
#define HOLDFAST_TESTING_WORKLOAD_RECIPES_HPP

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "holdfast/backoff.hpp"
#include "holdfast/detail/config.hpp"
#include "holdfast/election.hpp"
#include "holdfast/keepalive.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/semaphore.hpp"
#include "holdfast/store.hpp"
#include "holdfast/stores/memory.hpp"
#include "holdfast/testing/checker.hpp"
#include "holdfast/testing/decision.hpp"
#include "holdfast/testing/history.hpp"
#include "holdfast/testing/resource.hpp"
#include "holdfast/testing/sim_store.hpp"
#include "holdfast/testing/simulator.hpp"
#include "holdfast/testing/verdict.hpp"
#include "holdfast/validity.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace testing {

/// The recipes the workload runs.
enum class recipe : std::uint8_t { election, semaphore, waiting };

/// The recipes' negative controls (see the table at the top of workload_recipes.hpp).
enum class recipe_mutant : std::uint8_t {
  none,
  leader_trusts_callback,
  count_then_grant,
  forgets_lost_slot,
  wait_until_deadline,
  trusts_asked_ttl,
};

/// Every recipe_mutant but none.
inline constexpr recipe_mutant all_recipe_mutants[] = {
    recipe_mutant::leader_trusts_callback, recipe_mutant::count_then_grant,
    recipe_mutant::forgets_lost_slot, recipe_mutant::wait_until_deadline,
    recipe_mutant::trusts_asked_ttl};

/// Returns the control's name as in the table ("none" for none).
inline const char* to_string(recipe_mutant m) noexcept {
  switch (m) {
    case recipe_mutant::none:
      return "none";
    case recipe_mutant::leader_trusts_callback:
      return "leader_trusts_callback";
    case recipe_mutant::count_then_grant:
      return "count_then_grant";
    case recipe_mutant::forgets_lost_slot:
      return "forgets_lost_slot";
    case recipe_mutant::wait_until_deadline:
      return "wait_until_deadline";
    case recipe_mutant::trusts_asked_ttl:
      return "trusts_asked_ttl";
  }
  return "?";
}

/// Returns the control named `s` ("none" included), or nullopt.
inline std::optional<recipe_mutant> recipe_mutant_from_string(std::string_view s) noexcept {
  for (recipe_mutant m : all_recipe_mutants) {
    if (s == to_string(m)) return m;
  }
  if (s == "none") return recipe_mutant::none;
  return std::nullopt;
}

/// The recipe a control breaks (none: the election, but run_recipe_schedule draws one).
inline recipe recipe_of(recipe_mutant m) noexcept {
  switch (m) {
    case recipe_mutant::count_then_grant:
    case recipe_mutant::forgets_lost_slot:
      return recipe::semaphore;
    case recipe_mutant::wait_until_deadline:
    case recipe_mutant::trusts_asked_ttl:
      return recipe::waiting;
    case recipe_mutant::none:
    case recipe_mutant::leader_trusts_callback:
      break;
  }
  return recipe::election;
}

/// The invariant the checker names when it catches `m` (invariant::none for none).
inline invariant expected_violation(recipe_mutant m) noexcept {
  switch (m) {
    case recipe_mutant::leader_trusts_callback:
      return invariant::s4_holder_belief;
    case recipe_mutant::count_then_grant:
      return invariant::s6_permit_bound;
    case recipe_mutant::forgets_lost_slot:
      return invariant::o1_orphaned_grant;
    case recipe_mutant::wait_until_deadline:
      return invariant::l1_liveness;
    case recipe_mutant::trusts_asked_ttl:
      return invariant::s4_holder_belief;
    case recipe_mutant::none:
      break;
  }
  return invariant::none;
}

namespace detail {

inline constexpr std::chrono::milliseconds recipe_ttl{1000};
inline constexpr std::uint32_t recipe_permits = 2;
inline constexpr std::uint32_t recipe_keys = 2 * recipe_permits;  // count_then_grant uses more
using recipe_store = sim_store<memory_store<sim_clock>>;

// Records a client-level event of the calling process (nothing once it crashed).
inline void recipe_record(simulator& sim, event_kind k, node_id n, const std::string& owner,
                          std::uint8_t key, std::error_code ec = {}, std::uint64_t token = 0,
                          std::int64_t value = 0) {
  if (sim.current_crashed()) return;
  event e = sim.make_event(k, n);
  e.owner = owner;
  e.key = key;
  e.token = token;
  e.outcome = to_outcome(ec);
  e.value = value;
  e.ttl_ms = recipe_ttl.count();
  sim.log().add(std::move(e));
}

struct recipe_process {
  node_id node = no_node;
  std::string name;
  std::unique_ptr<keepalive<sim_clock>> renewer;
};

// One simulated world with `n` processes, each with a keepalive it polls itself.
struct recipe_world {
  recipe_world(decision_source& src, std::uint64_t seed, std::size_t n,
               std::vector<std::string> keys)
      : sim(src, faults()),
        store(
            sim, "store", [](sim_clock c) { return std::make_unique<memory_store<sim_clock>>(c); },
            store_faults()) {
    for (std::string& k : keys) sim.log().keys.push_back(std::move(k));
    sim.log().primary_store = store.node();
    sim.log().tolerance_ns = std::chrono::nanoseconds(std::chrono::milliseconds(1)).count();
    procs.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      recipe_process& p = procs[i];
      p.name = std::string(1, static_cast<char>('A' + i));
      p.node = sim.add_client(p.name);
      keepalive_options ko;
      ko.start_thread = false;  // the process's fiber polls it (an event loop)
      ko.retry.initial = recipe_ttl / 50;
      ko.retry.max_delay = recipe_ttl / 4;
      ko.retry.seed = seed * 31 + i;
      p.renewer = std::make_unique<keepalive<sim_clock>>(sim.clock(p.node), ko);
    }
  }

  // Every store fault, and now and then a TTL shorter than asked (issue 22: a holder trusts
  // only what the store applied).
  static store_fault_options store_faults() {
    store_fault_options f;
    f.shorter_ttls = true;
    return f;
  }

  static fault_options faults() {
    fault_options f;
    f.scale = recipe_ttl;
    f.crashes = false;  // a crash kills a fiber, not its process's keepalive: not modelled here
    f.drift_bound = validity_options{}.drift;
    return f;
  }

  // Works until `until` in slices of at most a tenth of the TTL, polling p's keepalive.
  void work_until(recipe_process& p, sim_clock::time_point until) {
    const sim_clock clock = sim.clock(p.node);
    for (sim_clock::time_point now = clock.now(); now < until; now = clock.now()) {
      const std::optional<sim_clock::time_point> next = p.renewer->poll();
      sim_clock::time_point wake = std::min(until, now + recipe_ttl / 10);
      if (next && *next < wake) wake = *next;
      clock.sleep_until(wake);
    }
  }

  acquire_options<sim_clock> acquire_opts(recipe_process& p, std::uint64_t seed) {
    acquire_options<sim_clock> o;
    o.clock = sim.clock(p.node);
    o.backoff.initial = recipe_ttl / 50;
    o.backoff.max_delay = recipe_ttl / 4;
    o.backoff.seed = seed;
    return o;
  }

  simulator sim;
  recipe_store store;
  std::vector<recipe_process> procs;
};

using recipe_permit = lease<recipe_store, sim_clock>;

// count_then_grant: count the live permits among every key of the pool, and if fewer than N are
// live take a free key, in two steps. Another process can count in between; both take a key.
inline result<recipe_permit> count_then_grant(recipe_world& w, const acquire_options<sim_clock>& o,
                                              std::size_t offset) {
  const sim_clock clock = o.clock;
  const auto deadline = clock.now() + 3 * recipe_ttl;
  for (;;) {
    std::uint32_t live = 0;
    std::optional<std::uint32_t> free;
    for (std::uint32_t j = 0; j < recipe_keys; ++j) {
      const auto k = static_cast<std::uint32_t>((offset + j) % recipe_keys);
      auto r = w.store.inspect("pool#" + std::to_string(k));
      if (!r) return r.error();
      if (*r) {
        ++live;
      } else if (!free) {
        free = k;
      }
    }
    if (live < recipe_permits && free) {
      auto l = try_acquire(w.store, "pool#" + std::to_string(*free), recipe_ttl, o);
      if (l || l.error() != errc::busy) return l;
    }
    if (!(clock.now() < deadline)) return errc::timeout;
    clock.sleep_until(clock.now() + recipe_ttl / 20);
  }
}

// forgets_lost_slot (the kind of Curator #835): the semaphore's passes as they were before
// issue 22. A slot whose call failed transiently (perhaps a lost reply: granted, unheard) is
// neither asked again nor given back; every pass starts again at the first slot.
inline result<recipe_permit> forgetful_acquire(recipe_store& store,
                                               const acquire_options<sim_clock>& o,
                                               std::uint32_t start) {
  const sim_clock clock = o.clock;
  const auto deadline = clock.now() + 3 * recipe_ttl;
  backoff delays(o.backoff);
  for (std::uint32_t made = 1;; ++made) {
    std::error_code failure{};
    for (std::uint32_t k = 0; k < recipe_permits; ++k) {
      const std::string key = "pool#" + std::to_string((start + k) % recipe_permits);
      auto l = holdfast::detail::acquire_once(store, key, recipe_ttl, o, o.owner);
      if (l) return l;
      if (l.error() == errc::busy) continue;
      if (!is_transient(l.error())) return l.error();
      if (!failure) failure = l.error();
    }
    if (delays.exhausted(made)) return failure ? failure : make_error_code(errc::busy);
    const auto now = clock.now();
    if (!(now < deadline)) return errc::timeout;
    auto wake = now + delays.next_delay();
    if (deadline < wake) wake = deadline;
    clock.sleep_until(wake);
  }
}

// One process's semaphore rounds: take a permit (as `m` says), hold it with fenced writes while
// it is valid, release it.
inline void semaphore_rounds(recipe_world& w, std::size_t i, std::uint64_t seed, recipe_mutant m,
                             std::vector<std::unique_ptr<sim_resource>>& resources) {
  recipe_process& p = w.procs[i];
  const sim_clock clock = w.sim.clock(p.node);
  for (int round = 0; round < 3; ++round) {
    semaphore_options<sim_clock> so;
    so.acquire = w.acquire_opts(p, seed * 7 + i * 3 + static_cast<std::uint64_t>(round));
    so.acquire.owner = p.name + std::to_string(round);
    so.unique_owner = false;  // deterministic: the history replays byte for byte
    so.renew = false;  // p.renewer renews it below (a keepalive thread would not be simulated)
    result<recipe_permit> permit = errc::busy;
    if (m == recipe_mutant::forgets_lost_slot) {
      permit = forgetful_acquire(w.store, so.acquire, static_cast<std::uint32_t>(i + round));
    } else if (m == recipe_mutant::count_then_grant) {
      permit = count_then_grant(w, so.acquire, i + static_cast<std::size_t>(round));
    } else {
      semaphore<recipe_store, sim_clock> pool(w.store, "pool", recipe_permits, recipe_ttl, so);
      permit = pool.acquire(3 * recipe_ttl);
    }
    const std::string& owner = so.acquire.owner;
    if (!permit) {
      recipe_record(w.sim, event_kind::acquire_failed, p.node, owner, 0, permit.error());
      continue;
    }
    const auto key = static_cast<std::uint8_t>(permit->key().back() - '0');
    const std::uint64_t token = permit->token().value();
    recipe_record(w.sim, event_kind::acquired, p.node, owner, key, {}, token);
    (void)p.renewer->add(*permit);
    for (int step = 0; step < 6; ++step) {
      w.work_until(p, clock.now() + recipe_ttl * (1 + (step * 3 + round) % 8) / 10);
      const bool believes = permit->valid();
      recipe_record(w.sim, event_kind::validity, p.node, owner, key, {}, token, believes ? 1 : 0);
      if (!believes) break;
      (void)resources[key]->write(permit->token(), owner);
    }
    const result<void> r = permit->release();
    recipe_record(w.sim, r ? event_kind::released : event_kind::release_failed, p.node, owner, key,
                  r.error(), token);
  }
}

/// A store in front of the simulated one whose wait_for_release never hears a release (every
/// notification lost): it sleeps on the calling client's clock until the holder's lease can have
/// expired (its time left by the store, 1 ms more) or the deadline, whichever comes first;
/// wait_until_deadline sleeps to the deadline. trusts_asked_ttl reports every grant with the TTL
/// asked, not the (perhaps shorter) one the store applied: the holder then trusts what it asked.
struct lossy_waiting_store {
  recipe_store* s;
  simulator* sim;
  bool until_deadline;
  bool trusts_asked = false;
  result<grant> try_acquire(std::string_view k, std::string_view o, std::chrono::milliseconds t) {
    return as_asked(s->try_acquire(k, o, t), t);
  }
  result<grant> renew(std::string_view k, std::string_view o, fencing_token tok,
                      std::chrono::milliseconds t) {
    return as_asked(s->renew(k, o, tok, t), t);
  }
  result<grant> as_asked(result<grant> g, std::chrono::milliseconds asked) const {
    if (g && trusts_asked) return grant{g->token, asked};
    return g;
  }
  result<void> release(std::string_view k, std::string_view o, fencing_token tok) {
    return s->release(k, o, tok);
  }
  result<void> wait_for_release(std::string_view k, const sim_clock::time_point& deadline) {
    const sim_clock clock = sim->clock(sim->current_node());
    auto held = s->inspect(k);
    if (!held) return held.error();
    if (!*held) return {};
    sim_clock::time_point wake = deadline;
    if (!until_deadline) {
      const auto expiry = clock.now() + (*held)->remaining + std::chrono::milliseconds(1);
      if (expiry < wake) wake = expiry;
    }
    clock.sleep_until(wake);
    return {};
  }
};
static_assert(can_wait_for_release_v<lossy_waiting_store, sim_clock>);

// One process's waiting rounds: acquire (sleeping in the store), write while valid, release;
// now and then the holder dies holding the key.
inline void waiting_rounds(recipe_world& w, lossy_waiting_store& store, sim_resource& resource,
                           std::size_t i, std::uint64_t seed) {
  using lease_t = lease<lossy_waiting_store, sim_clock>;
  recipe_process& p = w.procs[i];
  const sim_clock clock = w.sim.clock(p.node);
  for (int round = 0; round < 3; ++round) {
    const std::string owner = p.name + std::to_string(round);
    acquire_options<sim_clock> o = w.acquire_opts(p, seed * 7 + i * 3 + round);
    o.owner = owner;
    result<lease_t> l = acquire(store, "orders", recipe_ttl, 3 * recipe_ttl, o);
    if (!l) {
      recipe_record(w.sim, event_kind::acquire_failed, p.node, owner, 0, l.error());
      continue;
    }
    recipe_record(w.sim, event_kind::acquired, p.node, owner, 0, {}, l->token().value());
    const int turn = round + static_cast<int>(i);
    clock.sleep_until(clock.now() + recipe_ttl * (1 + turn % 4) / 5);
    bool valid = l->valid();
    recipe_record(w.sim, event_kind::validity, p.node, owner, 0, {}, l->token().value(),
                  valid ? 1 : 0);
    if (valid) (void)resource.write(l->token(), owner);
    // Renew once and hold on for 60-90% of the TTL: the store may have applied less than asked.
    if (valid && l->renew()) {
      clock.sleep_until(clock.now() + recipe_ttl * (6 + turn % 4) / 10);
      valid = l->valid();
      recipe_record(w.sim, event_kind::validity, p.node, owner, 0, {}, l->token().value(),
                    valid ? 1 : 0);
      if (valid) (void)resource.write(l->token(), owner);
    }
    if ((seed + i + static_cast<std::uint64_t>(round)) % 3 == 0) {
      // The holder dies here: nothing releases the key, the waiters have only its expiry.
      l->on_lost(nullptr);
      w.sim.crash_current();
      return;
    }
    const result<void> r = l->release();
    recipe_record(w.sim, r ? event_kind::released : event_kind::release_failed, p.node, owner, 0,
                  r.error(), l->token().value());
  }
}

// L1: faults stop; a contender must acquire within TTL (+ drift and tolerance) plus the backoff
// cap, waiting in the store; a store whose clock ticks coarsely may hold the last grant up to
// two of its ticks longer (store.hpp, T2).
inline void waiting_liveness(recipe_world& w, lossy_waiting_store& store, std::uint64_t seed) {
  w.sim.heal();
  const std::int64_t bound = std::chrono::nanoseconds(recipe_ttl).count() * 21 / 20 +
                             std::chrono::nanoseconds(recipe_ttl / 4).count() + 2000000 +
                             2 * w.sim.log().tick_of(w.store.node());
  event heal = w.sim.make_event(event_kind::heal, no_node);
  heal.value = bound;
  w.sim.log().add(std::move(heal));
  const node_id contender = w.sim.add_client("L");
  w.sim.spawn(contender, [&w, &store, contender, bound, seed] {
    acquire_options<sim_clock> o;
    o.clock = w.sim.clock(contender);
    o.owner = "L";
    o.backoff.initial = recipe_ttl / 50;
    o.backoff.max_delay = recipe_ttl / 4;
    o.backoff.seed = seed;
    auto l = acquire(store, "orders", recipe_ttl, std::chrono::nanoseconds(bound) + recipe_ttl, o);
    recipe_record(w.sim, l ? event_kind::liveness_acquired : event_kind::liveness_failed, contender,
                  "L", 0, l.error(), l ? l->token().value() : 0);
    if (l) (void)l->release();
  });
  w.sim.run();
}

}  // namespace detail

/// One election schedule (three candidates, three terms each) drawn from `src`; `seed` seeds the
/// processes' backoff jitter. `m` is none or leader_trusts_callback. Returns the checker's verdict.
inline verdict run_election_schedule(decision_source& src, std::uint64_t seed,
                                     recipe_mutant m = recipe_mutant::none) {
  using election_t = election<detail::recipe_store, sim_clock>;
  const std::chrono::milliseconds ttl = detail::recipe_ttl;
  history log;
  {
    detail::recipe_world w(src, seed, 3, {"leader"});
    sim_resource resource(w.sim, 0, resource_mode::fenced);
    std::vector<std::unique_ptr<election_t>> candidates;
    std::vector<int> told(w.procs.size(), 0);  // leaderships started minus stopped
    for (std::size_t i = 0; i < w.procs.size(); ++i) {
      detail::recipe_process& p = w.procs[i];
      election_options<sim_clock> o;
      o.label = p.name;
      o.acquire = w.acquire_opts(p, seed * 7 + i);
      o.keepalive = p.renewer.get();
      o.on_started_leading = [&told, i](fencing_token) { ++told[i]; };
      o.on_stopped_leading = [&told, i](loss_cause) { --told[i]; };
      candidates.push_back(std::make_unique<election_t>(w.store, "leader", ttl, o));
    }
    for (std::size_t i = 0; i < w.procs.size(); ++i) {
      w.sim.spawn(w.procs[i].node, [&, i] {
        detail::recipe_process& p = w.procs[i];
        election_t& e = *candidates[i];
        const sim_clock clock = w.sim.clock(p.node);
        for (int round = 0; round < 3; ++round) {
          result<fencing_token> term = e.campaign(3 * ttl);
          if (!term) {
            detail::recipe_record(w.sim, event_kind::acquire_failed, p.node, p.name, 0,
                                  term.error());
            continue;
          }
          const std::string owner = e.owner();
          detail::recipe_record(w.sim, event_kind::acquired, p.node, owner, 0, {}, term->value());
          for (int step = 0; step < 8; ++step) {
            w.work_until(p, clock.now() + ttl * (1 + (step * 3 + round) % 8) / 10);
            const bool believes =
                m == recipe_mutant::leader_trusts_callback ? told[i] > 0 : e.is_leader();
            detail::recipe_record(w.sim, event_kind::validity, p.node, owner, 0, {}, term->value(),
                                  believes ? 1 : 0);
            if (!believes) break;
            (void)resource.write(*term, owner);
          }
          const result<void> r = e.resign();
          detail::recipe_record(w.sim, r ? event_kind::released : event_kind::release_failed,
                                p.node, owner, 0, r.error(), term->value());
        }
      });
    }
    w.sim.run();
    candidates.clear();
    log = std::move(w.sim.log());
  }
  return check(log);
}

/// One semaphore schedule (four processes, N = 2 permits, three rounds each) drawn from `src`;
/// `m` is none, count_then_grant or forgets_lost_slot. Returns the checker's verdict.
inline verdict run_semaphore_schedule(decision_source& src, std::uint64_t seed,
                                      recipe_mutant m = recipe_mutant::none) {
  history log;
  {
    std::vector<std::string> keys;
    for (std::uint32_t k = 0; k < detail::recipe_keys; ++k) {
      keys.push_back("pool#" + std::to_string(k));
    }
    detail::recipe_world w(src, seed, 4, keys);
    w.sim.log().permit_groups.push_back(permit_group{"pool#", detail::recipe_permits});
    std::vector<std::unique_ptr<sim_resource>> resources;
    for (std::uint32_t k = 0; k < detail::recipe_keys; ++k) {
      resources.push_back(std::make_unique<sim_resource>(w.sim, static_cast<std::uint8_t>(k),
                                                         resource_mode::fenced));
    }
    for (std::size_t i = 0; i < w.procs.size(); ++i) {
      w.sim.spawn(w.procs[i].node, [&w, i, seed, m, &resources] {
        detail::semaphore_rounds(w, i, seed, m, resources);
      });
    }
    w.sim.run();
    log = std::move(w.sim.log());
  }
  return check(log);
}

/// One waiting schedule (three processes taking turns with blocking acquire(), every release
/// notification lost, then the L1 contender) drawn from `src`; `m` is none or
/// wait_until_deadline. Returns the checker's verdict.
inline verdict run_waiting_schedule(decision_source& src, std::uint64_t seed,
                                    recipe_mutant m = recipe_mutant::none) {
  history log;
  {
    detail::recipe_world w(src, seed, 3, {"orders"});
    detail::lossy_waiting_store store{&w.store, &w.sim, m == recipe_mutant::wait_until_deadline,
                                      m == recipe_mutant::trusts_asked_ttl};
    sim_resource resource(w.sim, 0, resource_mode::fenced);
    for (std::size_t i = 0; i < w.procs.size(); ++i) {
      w.sim.spawn(w.procs[i].node, [&w, &store, &resource, i, seed] {
        detail::waiting_rounds(w, store, resource, i, seed);
      });
    }
    w.sim.run();
    detail::waiting_liveness(w, store, seed);
    log = std::move(w.sim.log());
  }
  return check(log);
}

/// One schedule of one recipe, everything drawn from `src`: the recipe `m` breaks (for none, the
/// first decision picks one of the three), then a jitter seed (one decision), then the
/// schedule. The fuzz harness and rapidcheck call this. Returns the checker's verdict.
inline verdict run_recipe_schedule(decision_source& src, recipe_mutant m = recipe_mutant::none) {
  recipe r = recipe_of(m);
  if (m == recipe_mutant::none) r = static_cast<recipe>(src.choose(3));
  const std::uint64_t seed = src.choose(256);
  switch (r) {
    case recipe::semaphore:
      return run_semaphore_schedule(src, seed, m);
    case recipe::waiting:
      return run_waiting_schedule(src, seed, m);
    case recipe::election:
      break;
  }
  return run_election_schedule(src, seed, m);
}

}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_WORKLOAD_RECIPES_HPP
