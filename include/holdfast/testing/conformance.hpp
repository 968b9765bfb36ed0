// SPDX-License-Identifier: MIT
// holdfast/testing/conformance.hpp - the store conformance kit: checks a user's LeaseStore
// against the contract (store.hpp, T1-T4) and the invariants (testing/checker.hpp: S1-S5 and L1)
// under thousands of simulated schedules, and a fuzz entry point for libFuzzer.
//
//   using holdfast::testing::sim_clock;
//   auto report = holdfast::testing::check_store(
//       [](sim_clock c) { return my_store<sim_clock>(c); });
//   if (!report) std::cerr << report;  // names the rule or invariant, with a timeline
//
// and, as a whole libFuzzer target (a file of its own; copy it as it is):
//
//   #include <holdfast/testing/conformance.hpp>
//   using holdfast::testing::sim_clock;
//   extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
//     return holdfast::testing::fuzz_store(
//         [](sim_clock c) { return my_store<sim_clock>(c); }, data, size);
//   }
//
// and for a durable store, reopened from its files at every restart:
//
//     return holdfast::testing::fuzz_store(
//         [](sim_clock c, const holdfast::testing::store_env& env) {
//           return my_store<sim_clock>(c, env.dir + "/leases.db");
//         },
//         data, size, holdfast::testing::durable_store_run_options());
//
// The factory is called as factory(sim_clock) (the store judges expiry by the simulated clock it
// is given: every check runs), factory(sim_clock, const store_env&) (the same, plus a directory
// for the store's files: new for each schedule, the same across its restarts), or factory() (the
// store keeps its own time: the expiry checks run only through conformance_options::expire_now
// or expiry_by_waiting, the schedules cannot judge expiry, and the report says what was not
// explored). It returns the store by value or as a std::unique_ptr, a fresh one per call. A store
// that takes several steps per operation marks the points between them with holdfast::step_point
// (step_point.hpp) so that other clients run there; the report says when none were seen.
//
// What runs by default, and how to turn on more (conformance_options.hpp):
//   - the contract checks (conformance_contract.hpp: T1-T4, inspect, expiry to the tick, T2 on
//     a coarse clock), the hostile strings (conformance_strings.hpp: NULs, quotes, script and
//     SQL metacharacters, a 1 MiB key) and the TTL range (conformance_ttl.hpp: grants from 1 ms
//     to max_ttl, renews with another TTL) on a fresh store, and on a store with the atomic
//     multi-key grant (has_try_acquire_all_v) its all-or-nothing contract (conformance_multi.hpp);
//   - on a store that keeps its own clock, the expiry checks only with expire_now (a hook that
//     makes the store expire a key now) or expiry_by_waiting (a short TTL, waited out);
//   - contention across real threads (conformance_threads.hpp) only with threads > 0 and a
//     factory taking no clock whose stores share their state (with a sim_clock factory the
//     report says so in skipped);
//   - then 300 schedules (conformance_options::schedules), with pauses, crashes, delayed and
//     lost requests and replies, store errors, clock drift within the bound, and clients' clocks
//     jumping in every other schedule (clock_jumps), checked for S1-S5 and L1;
//   - restarts only for a store that claims durability (durable): each restart destroys the
//     store (never with an operation inside it) and calls the factory again, which must reopen
//     what the old one persisted; the store may also crash between two of its own steps (the
//     operations inside it end there with an error), and come back from a lagging copy of its
//     files that lacks its last operations (lagging_restarts), or be a machine reboot (reboots:
//     every client crashes at once, the store's clock starts over, the factory gets a new
//     store_env::boot; the store must keep its counter and drop the old boot's leases);
//   - fuzz_store() runs one schedule per input with the same faults (store_run_options()).
// A test that builds a store itself (a real server's) runs the parts on it directly:
// check_contract(store, o), check_hostile_strings(store, o), check_exclusive_grants(make, o).
//
// A failing schedule leaves its shrunk timeline in the report, and, when a directory is given
// (conformance_options::svg_dir, or HOLDFAST_SVG_DIR for check_store() and the fuzz entry
// points), a picture of it (svg.hpp) and the full text history there. check_store() shows a
// progress line on a terminal (progress.hpp; HOLDFAST_PROGRESS=0 silences it).
//
// Thread-safety: each call builds its own simulations; call it from one thread at a time.
// The kit follows Jepsen's and FoundationDB's simulation testing; the contract is store.hpp's.
#ifndef HOLDFAST_TESTING_CONFORMANCE_HPP
#define HOLDFAST_TESTING_CONFORMANCE_HPP

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/store.hpp"
#include "holdfast/testing/conformance_contract.hpp"
#include "holdfast/testing/conformance_counter.hpp"
#include "holdfast/testing/conformance_multi.hpp"
#include "holdfast/testing/conformance_options.hpp"
#include "holdfast/testing/conformance_shared.hpp"
#include "holdfast/testing/conformance_strings.hpp"
#include "holdfast/testing/conformance_threads.hpp"
#include "holdfast/testing/conformance_ttl.hpp"
#include "holdfast/testing/decision.hpp"
#include "holdfast/testing/progress.hpp"
#include "holdfast/testing/shrink.hpp"
#include "holdfast/testing/sim_store.hpp"
#include "holdfast/testing/simulator.hpp"
#include "holdfast/testing/svg.hpp"
#include "holdfast/testing/workload.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace testing {

namespace detail {

/// The contract checks (conformance_contract.hpp), the hostile strings (conformance_strings.hpp),
/// then the TTL range (conformance_ttl.hpp) and, if the store has try_acquire_all, the multi-key
/// checks (conformance_multi.hpp), on one fresh store; on the simulated clock when the
/// factory takes one (expiry judged to the tick), else by expire_now or expiry_by_waiting.
template <class F>
void run_contract_checks(F& make, const conformance_options& o, conformance_report& rep) {
  seeded_source src(o.seed);
  simulator sim(src, exact_clock_faults());
  const node_id n = sim.add_store("store");
  fresh_store<F> fresh(make, sim.clock(n));
  using Store = factory_store_t<F>;
  contract_checker<Store>(*fresh.store, factory_takes_clock_v<F> ? &sim : nullptr, o, rep).run();
  if (o.hostile_strings) hostile_checker<Store>(*fresh.store, o, rep).run();
  ttl_checker<Store>(*fresh.store, factory_takes_clock_v<F> ? &sim : nullptr, o, rep).run();
  if constexpr (has_try_acquire_all_v<Store>) {  // conformance_multi.hpp
    multi_checker<Store>(*fresh.store, contract_ttl(o, factory_takes_clock_v<F>), o, rep).run();
  }
}

/// Contention across real threads (conformance_threads.hpp), for a factory on its own clock.
template <class F>
void run_thread_checks(F& make, const conformance_options& o, conformance_report& rep) {
  if constexpr (factory_takes_clock_v<F>) {
    rep.skipped.push_back(
        "contention across real threads: the factory takes a sim_clock, which is not for real "
        "threads (check it with check_exclusive_grants(make, o), o.threads > 0 and a factory "
        "taking no clock "
        "whose stores share one store's state, built with -fsanitize=thread; "
        "conformance_threads.hpp)");
  } else {
    if (o.threads == 0) return;
    const conformance_report t = check_exclusive_grants([&make] { return make(); }, o);
    rep.contract_checks += t.contract_checks;
    rep.failures.insert(rep.failures.end(), t.failures.begin(), t.failures.end());
  }
}

/// Replays the failing schedule recorded, shrinks it (shrink.hpp) and reports its minimal
/// timeline, with a picture when a directory is given (svg.hpp).
template <class F>
void report_schedule_failure(F& make, const conformance_options& o, const run_options& ri,
                             std::uint64_t seed, const run_result& r, stall_watchdog& watchdog,
                             conformance_report& rep) {
  // The seed replays the original: run_schedule(seeded_source(seed), factory, options).
  seeded_source again(seed);
  recording_source rec(again);
  (void)run_schedule(rec, make, ri);
  const shrink_result s = shrink_failure(
      rec.to_bytes(),
      [&](byte_source& b) {
        watchdog.beat();
        return run_schedule(b, make, ri);
      },
      2000);
  const std::string picture =
      save_counterexample(o.svg_dir.empty() ? svg_dir_from_env() : o.svg_dir,
                          "check_store-seed-" + std::to_string(seed), s.run.log, s.run.result);
  rep.failures.push_back("schedule seed=" + std::to_string(seed) + " (" +
                         std::to_string(r.log.events.size()) + " events; shrunk to " +
                         std::to_string(s.run.log.events.size()) + "): " + s.run.result.report() +
                         (picture.empty() ? "" : "picture: " + picture + "\n"));
}

/// The first event at which two histories of one schedule differ in what the store answered
/// (kind, node, token, outcome, TTL, instant), or npos if none does.
inline std::size_t first_difference(const history& a, const history& b) {
  const std::size_t n = std::min(a.events.size(), b.events.size());
  for (std::size_t i = 0; i < n; ++i) {
    const event& x = a.events[i];
    const event& y = b.events[i];
    if (x.kind != y.kind || x.node != y.node || x.token != y.token || x.outcome != y.outcome ||
        x.ttl_ms != y.ttl_ms || x.true_ns != y.true_ns) {
      return i;
    }
  }
  return a.events.size() == b.events.size() ? static_cast<std::size_t>(-1) : n;
}

/// Runs the first schedule twice: a store on the simulated clock must answer the same both
/// times. One that does not takes its tokens or expiry from something the kit does not drive
/// (system_clock, randomness, state kept outside the store): in production such a clock steps
/// back (NTP, a VM restore, another host) and gives a later holder a smaller token.
template <class F>
bool check_determinism(F& make, const run_options& ro, std::uint64_t seed,
                       conformance_report& rep) {
  seeded_source a(seed);
  seeded_source b(seed);
  const run_result x = run_schedule(a, make, ro);
  const run_result y = run_schedule(b, make, ro);
  ++rep.contract_checks;
  const std::size_t i = first_difference(x.log, y.log);
  if (i == static_cast<std::size_t>(-1)) return true;
  const auto describe = [i](const history& h) {
    if (i >= h.events.size()) return std::string("(the run had ended)");
    const event& e = h.events[i];
    return std::string(to_string(e.kind)) + " token " + std::to_string(e.token) + " " +
           outcome_name(e.outcome) + " at " + std::to_string(e.true_ns) + " ns";
  };
  rep.failures.push_back(
      "determinism: two runs of schedule seed=" + std::to_string(seed) + " differ at event #" +
      std::to_string(i) + " (" + describe(x.log) + ", then " + describe(y.log) +
      "): the store's answers follow something the kit does not drive (a real clock such as "
      "std::chrono::system_clock, randomness, state outside the store the factory made). "
      "Tokens or expiry taken from a clock can step back (NTP, a VM restore, a second host) and "
      "let a stale holder through a fence; take time only from the clock the factory passes, "
      "and draw tokens from a counter\n");
  return false;
}

/// The seeded schedules (S1-S5, L1), to the first failure.
template <class F>
void run_schedules(F& make, const conformance_options& o, conformance_report& rep) {
  run_options ro = o.run;
  ro.store_faults.restarts = ro.store_faults.restarts || o.durable;
  ro.reopen_on_restart = ro.reopen_on_restart || o.durable;
  if (o.durable && o.lagging_restarts) {
    if constexpr (factory_takes_env_v<F>) {
      ro.store_faults.lagging_restarts = true;
    } else {
      rep.skipped.push_back(
          "restarts from a lagging copy (a store that lost its last operations): the factory "
          "takes no store_env, so the kit cannot copy the store's files (keep them in "
          "store_env::dir)");
    }
  }
  if constexpr (factory_takes_env_v<F>) {
    ro.store_faults.reboots = ro.store_faults.reboots || (o.durable && o.reboots);
  }
  if (!factory_takes_clock_v<F>) {
    rep.skipped.push_back(
        "S3, S4, expiry in S5, L1 over schedules: the store's clock is not injectable");
  }
  progress_meter meter("check_store", o.schedules, o.progress);
  stall_watchdog watchdog("check_store", o.stall_limit);
  run_options jumps = ro;
  jumps.faults.clock_jumps = true;
  if constexpr (factory_takes_clock_v<F>) {
    if (o.schedules != 0 && !check_determinism(make, ro, o.seed, rep)) return;
  }
  for (std::uint32_t i = 0; i < o.schedules; ++i) {
    const run_options& ri = o.clock_jumps && i % 2 == 1 ? jumps : ro;
    seeded_source src(o.seed + i);
    const run_result r = run_schedule(src, make, ri);
    watchdog.beat();
    ++rep.schedules;
    rep.events += r.log.events.size();
    rep.store_steps += r.log.store_steps;
    meter.update(rep.schedules, rep.events, rep.failures.size() + (r.result.ok() ? 0 : 1));
    if (!r.result.ok()) {
      report_schedule_failure(make, o, ri, o.seed + i, r, watchdog, rep);
      break;
    }
  }
  if (rep.store_steps == 0 && rep.schedules != 0) {
    rep.skipped.push_back(
        "interleavings inside the store's operations: the store marked no step points, so each "
        "operation ran as one atomic step (right for a store that makes one call per operation; "
        "otherwise mark the points between its calls with holdfast::step_point(clock, "
        "holdfast::step_kind::between), step_point.hpp)");
  }
}

}  // namespace detail

/// Checks the store made by `make_store` against the LeaseStore contract and the safety and
/// liveness invariants (see the table at the top of conformance.hpp) and returns the report.
///
/// \param make_store  the factory: make_store(sim_clock), make_store(sim_clock, const
///                    store_env&) or make_store(), returning a fresh store by value or as a
///                    std::unique_ptr (see the top of conformance.hpp).
/// \param o           what to check (conformance_options; the defaults check a store on the
///                    simulated clock fully).
/// \returns the report: contract checks report every failure; the first failing schedule is
///          reported with its seed (re-run it with seeded_source(seed) and run_schedule()) and
///          the timeline of its shrunk form (shrink.hpp); checks that could not run are listed
///          in skipped.
///
/// Exceptions thrown by the store propagate. Thread-safety: each call builds its own
/// simulations; the store is called from the calling thread only, except by the threads of
/// o.threads.
template <class Factory>
conformance_report check_store(Factory&& make_store, const conformance_options& o = {}) {
  using F = std::remove_reference_t<Factory>;
  conformance_report rep;
  detail::run_contract_checks(make_store, o, rep);
  if constexpr (has_read_write_v<detail::factory_store_t<F>>) {
    detail::check_shared_grants(make_store, o, rep);  // conformance_shared.hpp
  }
  if constexpr (detail::factory_takes_clock_v<F>) detail::check_coarse_clock(make_store, o, rep);
  detail::check_counter_ends(make_store, o, rep);
  if constexpr (detail::factory_takes_clock_v<F>) detail::check_reboot(make_store, o, rep);
  detail::run_thread_checks(make_store, o, rep);
  detail::run_schedules(make_store, o, rep);
  return rep;
}

/// The run options fuzz_store() uses by default: run_options' defaults with clients' clocks
/// jumping (S1-S3, S5 and L1 hold under jumps; S4 is checked up to the first jump), and aimed
/// stalls taken once an input has run out (store_fault_options::stall_when_exhausted: libFuzzer's
/// short inputs are mostly used up by their workload).
inline run_options store_run_options() {
  run_options o;
  o.faults.clock_jumps = true;
  o.store_faults.stall_when_exhausted = true;
  return o;
}

/// The run options for fuzz_store() on a store that claims durability: store_run_options() with
/// restarts (each reopens the store through the factory; the store may crash between two of its
/// steps) and, for a factory taking a store_env, restarts from a lagging copy of its files and
/// machine reboots (a new store_env::boot, the store's clock started over, every client crashed).
inline run_options durable_store_run_options() {
  run_options o = store_run_options();
  o.store_faults.restarts = true;
  o.store_faults.lagging_restarts = true;
  o.store_faults.reboots = true;
  o.reopen_on_restart = true;
  return o;
}

namespace detail {

// The contract checks of check_store that fuzz_store() runs once per process (contract, hostile
// strings, TTL range, counter ends, a reboot for a durable run, and a schedule run twice for
// determinism), as a report.
template <class F>
conformance_report fuzz_contract_report(F& make, const run_options& o) {
  conformance_options co;
  co.run = o;
  conformance_report rep;
  run_contract_checks(make, co, rep);
  if constexpr (factory_takes_clock_v<F>) check_coarse_clock(make, co, rep);
  check_counter_ends(make, co, rep);
  co.durable = o.reopen_on_restart && o.store_faults.reboots;
  if constexpr (factory_takes_clock_v<F>) check_reboot(make, co, rep);
  if constexpr (factory_takes_clock_v<F>) (void)check_determinism(make, o, 1, rep);
  return rep;
}

// fuzz_contract_report() once per process and factory type, for fuzz_store(): prints the report
// and traps if any check fails.
template <class F>
void fuzz_contract_once(F& make, const run_options& o) {
  static const bool checked = [&] {
    const conformance_report rep = fuzz_contract_report(make, o);
    if (!rep.ok()) {
      std::fprintf(stderr, "holdfast: %s", rep.summary().c_str());
      std::fflush(stderr);
      HOLDFAST_TRAP();
    }
    return true;
  }();
  (void)checked;
}

// Prints a violation found by a fuzz entry point, and its shrunk form, then traps.
template <class Runner>
[[noreturn]] void report_and_trap(const run_result& r, const std::uint8_t* data, std::size_t size,
                                  Runner&& run) {
  std::fprintf(stderr, "holdfast: %s", r.result.report().c_str());
  const shrink_result s = shrink_failure(std::vector<std::uint8_t>(data, data + size), run, 2000);
  std::fprintf(stderr,
               "holdfast: shrunk to %zu decision bytes (from %zu) in %zu runs; minimal timeline:\n"
               "%s",
               s.bytes.size(), size, s.runs, s.run.result.report().c_str());
  // With HOLDFAST_SVG_DIR set, the shrunk schedule's picture and text go there too, named by a
  // hash of the input so that several crashes keep their own.
  std::uint64_t hash = 14695981039346656037ull;
  for (std::size_t i = 0; i < size; ++i) hash = (hash ^ data[i]) * 1099511628211ull;
  char name[40];
  std::snprintf(name, sizeof name, "fuzz-%016llx", static_cast<unsigned long long>(hash));
  const std::string picture =
      save_counterexample(svg_dir_from_env(), name, s.run.log, s.run.result);
  if (!picture.empty()) std::fprintf(stderr, "holdfast: picture: %s\n", picture.c_str());
  std::fflush(stderr);
  HOLDFAST_TRAP();
}

}  // namespace detail

/// Runs the schedule that `data` decodes to (one byte per decision; see byte_source) against
/// the store made by `make_store`. The first call in a process (per factory type) first runs
/// the contract checks of check_store() (contract, hostile strings, TTL range, counter ends, a
/// schedule run twice for determinism) and traps with their report if one fails. For a durable
/// store pass durable_store_run_options() (restarts, crashes between its steps, lagging
/// copies, machine reboots; the contract checks then reboot the store once too). If an invariant is
/// violated it prints the report, shrinks the input (shrink.hpp) and prints the minimal timeline
/// too, then calls __builtin_trap() so libFuzzer records the input (the crash file replays the
/// original schedule). Returns 0. A whole fuzz target is three lines (see the top of
/// conformance.hpp).
template <class Factory>
int fuzz_store(Factory&& make_store, const std::uint8_t* data, std::size_t size,
               const run_options& o = store_run_options()) {
  detail::fuzz_contract_once(make_store, o);
  byte_source src(data, size);
  const run_result r = run_schedule(src, make_store, o);
  if (!r.result.ok()) {
    detail::report_and_trap(r, data, size,
                            [&](byte_source& s) { return run_schedule(s, make_store, o); });
  }
  return 0;
}

/// As fuzz_store(), against the shipped memory_store, or the mutant o.mutation selects.
inline int fuzz_schedule(const std::uint8_t* data, std::size_t size, const run_options& o = {}) {
  byte_source src(data, size);
  const run_result r = run_schedule(src, o);
  if (!r.result.ok()) {
    detail::report_and_trap(r, data, size, [&](byte_source& s) { return run_schedule(s, o); });
  }
  return 0;
}

}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_CONFORMANCE_HPP
