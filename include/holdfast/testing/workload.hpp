// SPDX-License-Identifier: MIT
// holdfast/testing/workload.hpp - generated schedules: what simulated clients do with the shipped
// lease API, run through the simulator and judged by the checker. run_schedule() is the entry.
//
// A schedule is a workload (2-4 clients, 1-2 keys, a list of client operations) plus every
// interleaving and fault the simulator draws while running it. Both come from one
// decision_source, so one seed, one byte string or one rapidcheck case is one whole schedule.
//
// Pieces:
//   workload_plan.hpp              the operations (a table of what each does), run_options, and
//                                  generate_workload(): a workload drawn from the decisions
//   detail/schedule_runner.hpp     how the clients run it with the shipped calls, aimed at the
//                                  instants that matter; keepalives (L2); the L1 contenders
//   this header                    run_schedule(): one schedule against a store, then check()
//
// Thread-safety: run_schedule() uses only its arguments; run it on one thread per decision source.
#ifndef HOLDFAST_TESTING_WORKLOAD_HPP
#define HOLDFAST_TESTING_WORKLOAD_HPP

#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <type_traits>
#include <utility>

#include "holdfast/detail/config.hpp"
#include "holdfast/stores/memory.hpp"
#include "holdfast/testing/checker.hpp"
#include "holdfast/testing/decision.hpp"
#include "holdfast/testing/detail/schedule_runner.hpp"
#include "holdfast/testing/history.hpp"
#include "holdfast/testing/mutants.hpp"
#include "holdfast/testing/sim_store.hpp"
#include "holdfast/testing/simulator.hpp"
#include "holdfast/testing/workload_plan.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace testing {

/// What a run produced: the workload, the full history, and the checker's verdict.
struct run_result {
  workload plan;
  history log;
  verdict result;
};

namespace detail {

template <class Store, class Factory>
std::unique_ptr<Store> make_store_from(Factory& make, sim_clock clock, const store_env& env) {
  return make_store<Store>(make, clock, env);
}

/// True for the kit's own stores whose copy is a copy of their state (mutant_store): a lagging
/// restart can restore one from a copy without files. A user's copyable store may be a handle
/// sharing its state (a connection), so it is not copied.
template <class Store>
struct copies_state : std::false_type {};
template <class Clock>
struct copies_state<mutant_store<Clock>> : std::true_type {};

/// Keeps the lagging copies of store_fault_options::lagging_restarts (sim_store::keep_copies):
/// the files of store_env::dir for a factory taking a store_env (the store is destroyed, its
/// files replaced by the copy's, and the factory reopens it), or the store itself for the kit's
/// own stores. Returns false when the store cannot be copied (the fault is then not injected).
template <class Store, class Factory>
bool keep_lagging_copies(sim_store<Store>& store, Factory& make, store_env& env) {
  using restore_fn = typename sim_store<Store>::restore_fn;
  if constexpr (factory_takes_env_v<Factory>) {
    store.keep_copies([&make, &env, &store](Store&) -> restore_fn {
      auto files = std::make_shared<const dir_copy>(read_dir(env.dir));
      if (files->empty()) return nullptr;  // its state is not in its files: nothing to copy
      return [files, &make, &env, &store](std::unique_ptr<Store>& s) {
        s.reset();  // the old process is gone, its files closed, before they are replaced
        write_dir(env.dir, *files);
        ++env.restarts;
        s = make_store_from<Store>(make, store.clock(), env);
      };
    });
    return true;
  } else if constexpr (copies_state<Store>::value) {
    (void)make;
    (void)env;
    store.keep_copies([](Store& now) -> restore_fn {
      auto copy = std::make_shared<const Store>(now);
      return [copy](std::unique_ptr<Store>& s) { s = std::make_unique<Store>(*copy); };
    });
    return true;
  } else {
    (void)store;
    (void)make;
    (void)env;
    return false;
  }
}

template <class Factory>
run_result run_schedule_impl(decision_source& src, Factory& make_store, const run_options& asked) {
  const run_options o = effective_run_options(asked);
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
    if constexpr (factory_takes_env_v<Factory>) {
      if (o.reopen_on_restart && o.store_faults.reboots) {
        store.on_reboot([&make_store, &env, &store](std::unique_ptr<Store>& s) {
          s.reset();
          ++env.restarts;
          ++env.boot;  // a new boot identity: the old boot's leases died with its processes
          s = make_store_from<Store>(make_store, store.clock(), env);
        });
      }
    }
    if (o.store_faults.lagging_restarts) (void)keep_lagging_copies(store, make_store, env);
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
  if (effective_run_options(o).store_faults.lagging_restarts) {
    // memory_store cannot be copied; the kit's reference store (mutant_store, correct with
    // mutant::none) can, so the lagging copies of its restarts are copies of it.
    auto copyable = [](sim_clock c) { return mutant_store<sim_clock>(c, mutant::none); };
    return detail::run_schedule_impl(src, copyable, o);
  }
  auto make = [](sim_clock c) { return std::make_unique<memory_store<sim_clock>>(c); };
  return detail::run_schedule_impl(src, make, o);
}

}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_WORKLOAD_HPP
