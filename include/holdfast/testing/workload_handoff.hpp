// SPDX-License-Identifier: MIT
// holdfast/testing/workload_handoff.hpp - waiting in a hand-off queue inside the simulator
// (testing/sim_queue.hpp: memory_store's queue, joined as Redis joins it), judged by the
// checker, O2 first (a caller that leaves a queue leaves it; detail/queue_watch.hpp):
//
//   schedule  | what runs                                         | controls (mutants.hpp)  |
//   caught
//   ----------+---------------------------------------------------+-------------------------+-------
//   handoff   | three processes take turns on a key with blocking | gives_up_queued (no     | O2
//             | acquire() (the shipped loop: try_acquire_queued,  | leave_queue: Redisson   |
//             | wait_for_release, leave_queue), budgets of 1/50 to| #1104's kind)           |
//             | 2 TTL, so attempts give up mid round trip; now and| leave_not_retried (a    | O2
//             | then a holder dies holding the key; then faults   | leave whose answer was  |
//             | heal and a contender must acquire within L1's     | lost is not asked again)|
//             | bound                                             |                         |
//   semaphore | four processes share N = 2 permits through the    | (the same controls bite | S6,
//   O1,
//             | shipped semaphore, which waits with               | here too; run in handoff| O2
//             | wait_for_release_any                              | only)                   |
//
// Every schedule runs under pauses, drift within the bound, delayed and lost requests and
// replies at every store call (lease calls, queue joins and leaves), lost notifications, a
// notification session that dies during a wait, store errors, and TTLs shorter than asked.
//
// run_handoff_schedule(src, m) is the entry the fuzz harness (fuzz/fuzz_handoff.cpp) and
// rapidcheck (tests/property/prop_handoff.cpp) call; the seeded search (tests/unit/
// test_testing_handoff.cpp) calls the per-schedule functions. Thread-safety: one run per thread.
#ifndef HOLDFAST_TESTING_WORKLOAD_HANDOFF_HPP
#define HOLDFAST_TESTING_WORKLOAD_HANDOFF_HPP

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/semaphore.hpp"
#include "holdfast/testing/checker.hpp"
#include "holdfast/testing/decision.hpp"
#include "holdfast/testing/history.hpp"
#include "holdfast/testing/mutants.hpp"
#include "holdfast/testing/resource.hpp"
#include "holdfast/testing/sim_queue.hpp"
#include "holdfast/testing/verdict.hpp"
#include "holdfast/testing/workload_recipes.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace testing {

/// The schedules of workload_handoff.hpp.
enum class handoff_schedule : std::uint8_t { handoff, semaphore };

/// The invariant the checker names when it catches `m` (none for none).
inline invariant expected_violation(queue_mutant m) noexcept {
  return m == queue_mutant::none ? invariant::none : invariant::o2_abandoned_place;
}

namespace detail {

template <queue_mutant M>
using handoff_store = sim_queue_store<recipe_store, M>;

// An acquire budget drawn from the schedule: 1/50, 1/10, 1/2 or 2 TTL (short ones give up
// during a round trip, after queuing).
inline std::chrono::milliseconds handoff_budget(simulator& sim) {
  static constexpr std::int64_t fiftieths[] = {1, 5, 25, 100};
  return recipe_ttl * fiftieths[sim.decide(4)] / 50;
}

// One process's rounds on "orders": acquire (queued, waiting in the store), write while valid,
// release; now and then the holder dies holding the key.
template <class Store>
void handoff_rounds(recipe_world& w, Store& store, sim_resource& resource, std::size_t i,
                    std::uint64_t seed) {
  recipe_process& p = w.procs[i];
  const sim_clock clock = w.sim.clock(p.node);
  for (int round = 0; round < 4; ++round) {
    const std::string owner = p.name + std::to_string(round);
    acquire_options<sim_clock> o = w.acquire_opts(p, seed * 7 + i * 3 + round);
    o.owner = owner;
    auto l = acquire(store, "orders", recipe_ttl, handoff_budget(w.sim), o);
    if (!l) {
      recipe_record(w.sim, event_kind::acquire_failed, p.node, owner, 0, l.error());
      clock.sleep_until(clock.now() + recipe_ttl / 10);
      continue;
    }
    recipe_record(w.sim, event_kind::acquired, p.node, owner, 0, {}, l->token().value());
    clock.sleep_until(clock.now() + recipe_ttl * (1 + (round + i) % 4) / 10);
    const bool valid = l->valid();
    recipe_record(w.sim, event_kind::validity, p.node, owner, 0, {}, l->token().value(),
                  valid ? 1 : 0);
    if (valid) (void)resource.write(l->token(), owner);
    if ((seed + i + static_cast<std::uint64_t>(round)) % 5 == 0) {
      l->on_lost(nullptr);  // the holder dies here: the waiters have only its expiry
      w.sim.crash_current();
      return;
    }
    const result<void> r = l->release();
    recipe_record(w.sim, r ? event_kind::released : event_kind::release_failed, p.node, owner, 0,
                  r.error(), l->token().value());
  }
}

// L1: faults stop; a contender must acquire within TTL (+ drift, tolerance, a poll step) plus
// the backoff cap, waiting in the queue.
template <class Store>
void handoff_liveness(recipe_world& w, Store& store, std::uint64_t seed) {
  w.sim.heal();
  const std::int64_t bound = std::chrono::nanoseconds(recipe_ttl).count() * 21 / 20 +
                             std::chrono::nanoseconds(recipe_ttl / 4).count() + 8000000 +
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

// One process's semaphore rounds on the queue store: the shipped semaphore waits with
// wait_for_release_any between its passes.
template <class Store>
void queued_semaphore_rounds(recipe_world& w, Store& store, std::size_t i, std::uint64_t seed,
                             std::vector<std::unique_ptr<sim_resource>>& resources) {
  recipe_process& p = w.procs[i];
  const sim_clock clock = w.sim.clock(p.node);
  for (int round = 0; round < 3; ++round) {
    semaphore_options<sim_clock> so;
    so.acquire = w.acquire_opts(p, seed * 7 + i * 3 + static_cast<std::uint64_t>(round));
    so.acquire.owner = p.name + std::to_string(round);
    so.unique_owner = false;  // deterministic: the history replays byte for byte
    so.renew = false;         // p.renewer renews it below
    semaphore<Store, sim_clock> pool(store, "pool", recipe_permits, recipe_ttl, so);
    auto permit = pool.acquire(handoff_budget(w.sim) + recipe_ttl / 2);
    const std::string& owner = so.acquire.owner;
    if (!permit) {
      recipe_record(w.sim, event_kind::acquire_failed, p.node, owner, 0, permit.error());
      continue;
    }
    const auto key = static_cast<std::uint8_t>(permit->key().back() - '0');
    const std::uint64_t token = permit->token().value();
    recipe_record(w.sim, event_kind::acquired, p.node, owner, key, {}, token);
    (void)p.renewer->add(*permit);
    for (int step = 0; step < 4; ++step) {
      w.work_until(p, clock.now() + recipe_ttl * (1 + (step * 3 + round) % 6) / 10);
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

}  // namespace detail

/// One hand-off schedule (three processes, four rounds each, then the L1 contender) drawn from
/// `src`; `seed` seeds the backoff jitter; M picks a control. Returns the checker's verdict.
template <queue_mutant M = queue_mutant::none>
verdict run_handoff_queue_schedule(decision_source& src, std::uint64_t seed) {
  history log;
  {
    detail::recipe_world w(src, seed, 3, {"orders"});
    detail::handoff_store<M> store(w.sim, w.store);
    sim_resource resource(w.sim, 0, resource_mode::fenced);
    for (std::size_t i = 0; i < w.procs.size(); ++i) {
      w.sim.spawn(w.procs[i].node, [&w, &store, &resource, i, seed] {
        detail::handoff_rounds(w, store, resource, i, seed);
      });
    }
    w.sim.run();
    detail::handoff_liveness(w, store, seed);
    log = std::move(w.sim.log());
  }
  return check(log);
}

/// One semaphore schedule on the queue store (four processes, N = 2, three rounds each) drawn
/// from `src`. Returns the checker's verdict.
template <queue_mutant M = queue_mutant::none>
verdict run_queued_semaphore_schedule(decision_source& src, std::uint64_t seed) {
  history log;
  {
    std::vector<std::string> keys;
    for (std::uint32_t k = 0; k < detail::recipe_permits; ++k) {
      keys.push_back("pool#" + std::to_string(k));
    }
    detail::recipe_world w(src, seed, 4, keys);
    w.sim.log().permit_groups.push_back(permit_group{"pool#", detail::recipe_permits});
    detail::handoff_store<M> store(w.sim, w.store);
    std::vector<std::unique_ptr<sim_resource>> resources;
    for (std::uint32_t k = 0; k < detail::recipe_permits; ++k) {
      resources.push_back(std::make_unique<sim_resource>(w.sim, static_cast<std::uint8_t>(k),
                                                         resource_mode::fenced));
    }
    for (std::size_t i = 0; i < w.procs.size(); ++i) {
      w.sim.spawn(w.procs[i].node, [&w, &store, i, seed, &resources] {
        detail::queued_semaphore_rounds(w, store, i, seed, resources);
      });
    }
    w.sim.run();
    log = std::move(w.sim.log());
  }
  return check(log);
}

/// One schedule, everything drawn from `src`: for none the first decision picks the schedule
/// (a control runs the hand-off one), then a jitter seed (one decision), then the schedule. The
/// fuzz harness and rapidcheck call this. Returns the checker's verdict.
inline verdict run_handoff_schedule(decision_source& src, queue_mutant m = queue_mutant::none) {
  handoff_schedule s = handoff_schedule::handoff;
  if (m == queue_mutant::none) s = static_cast<handoff_schedule>(src.choose(2));
  const std::uint64_t seed = src.choose(256);
  switch (m) {
    case queue_mutant::gives_up_queued:
      return run_handoff_queue_schedule<queue_mutant::gives_up_queued>(src, seed);
    case queue_mutant::leave_not_retried:
      return run_handoff_queue_schedule<queue_mutant::leave_not_retried>(src, seed);
    case queue_mutant::none:
      break;
  }
  if (s == handoff_schedule::semaphore) return run_queued_semaphore_schedule<>(src, seed);
  return run_handoff_queue_schedule<>(src, seed);
}

}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_WORKLOAD_HANDOFF_HPP
