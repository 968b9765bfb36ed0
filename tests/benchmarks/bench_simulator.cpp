// SPDX-License-Identifier: MIT
// tests/benchmarks/bench_simulator.cpp - how fast the deterministic simulator (holdfast/testing/)
// explores schedules: bug-finding power is throughput.
//
//   benchmark                  | compared with                                 | target
//   ---------------------------+-----------------------------------------------+-----------------
//   fiber_switch               | POSIX swapcontext, the portable alternative   | <= 0.2
//   schedule_64ops             | the same shipped calls made directly, no      | (info)
//                              | simulator (what the work itself costs)        |
//   schedule_64ops_throughput  | -                                             | >= 5000 execs/s
//   mutant_caught/<mutant>     | -                                             | (info)
//
// fiber_switch is the measurement behind the execution model (fuzz/README.md): every client is a
// fiber; a switch there and back is what the scheduler pays whenever a client pauses, sleeps or
// yields. schedule_64ops runs a whole 64-operation schedule per operation: workload generation,
// the shipped lease code on memory_store under every fault, the history and the checker (S1-S5,
// L1). mutant_caught runs the seeded-PRNG search against each negative control and reports how
// many schedules it took (cases) and how long (ms), per catch.
#include <ucontext.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "holdfast/fence.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/stores/memory.hpp"
#include "holdfast/testing/detail/fiber.hpp"
#include "holdfast/testing/testing.hpp"

namespace {

using holdfast_bench::run_paired;
using holdfast_bench::with_min_max;
namespace ht = holdfast::testing;

// ---- fiber_switch ---------------------------------------------------------------------------

ht::detail::fiber bench_main;
ht::detail::fiber bench_fiber;
bool bench_stop = false;

void bounce(void*) {
  ht::detail::fiber::entered(bench_main);
  while (!bench_stop) ht::detail::fiber::switch_to(bench_fiber, bench_main);
  ht::detail::fiber::finish(bench_fiber, bench_main);
}

ucontext_t uc_main;
ucontext_t uc_fiber;
void uc_bounce() {
  for (;;) swapcontext(&uc_fiber, &uc_main);
}

void BM_fiber_switch(benchmark::State& state) {
  ht::detail::fiber::bind_main(bench_main);
  bench_stop = false;
  bench_fiber.start(&bounce, nullptr);
  static std::vector<char> uc_stack(64 * 1024);
  getcontext(&uc_fiber);
  uc_fiber.uc_stack.ss_sp = uc_stack.data();
  uc_fiber.uc_stack.ss_size = uc_stack.size();
  uc_fiber.uc_link = nullptr;
  makecontext(&uc_fiber, &uc_bounce, 0);
  run_paired(
      state, "vs POSIX swapcontext (round trip); target <= 0.2",
      [] { ht::detail::fiber::switch_to(bench_main, bench_fiber); },
      [] { swapcontext(&uc_main, &uc_fiber); });
  bench_stop = true;
  ht::detail::fiber::switch_to(bench_main, bench_fiber);  // lets it finish
}
BENCHMARK(BM_fiber_switch)->Apply(with_min_max);

// ---- schedule_64ops ---------------------------------------------------------------------------

ht::run_options sixty_four() {
  ht::run_options o;
  o.min_ops = 64;
  o.max_ops = 64;
  return o;
}

// The shipped calls of a 64-operation schedule made directly, on one thread, no simulator: 16
// rounds of try_acquire, valid, a fenced write, release (64 lease calls), with time on a
// manual_clock. What the simulated run's lease work costs by itself.
struct direct_workload {
  holdfast::manual_clock clock;
  holdfast::memory_store<holdfast::manual_clock> store{clock};
  holdfast::fenced<std::uint64_t> resource;
  holdfast::acquire_options<holdfast::manual_clock> opts;

  direct_workload() {
    opts.clock = clock;
    opts.owner = "A";
  }

  bool run() {
    bool ok = true;
    for (int i = 0; i < 16; ++i) {
      auto l = holdfast::try_acquire(store, "orders", std::chrono::milliseconds(1000), opts);
      if (!l) return false;
      if (l->valid()) ok = ok && resource.write(*l, [](std::uint64_t& v) { ++v; });
      ok = ok && l->release();
      clock.advance(std::chrono::milliseconds(10));
    }
    return ok;
  }
};

void BM_schedule_64ops(benchmark::State& state) {
  const ht::run_options o = sixty_four();
  direct_workload direct;
  std::uint64_t seed = 1;
  run_paired(
      state, "vs the same number of shipped lease calls made directly",
      [&] {
        ht::seeded_source src(seed++);
        const ht::run_result r = ht::run_schedule(src, o);
        if (!r.result.ok()) state.SkipWithError("the correct stack violated an invariant");
        benchmark::DoNotOptimize(r.log.events.data());
      },
      [&] {
        if (!direct.run()) state.SkipWithError("direct workload failed");
      },
      4);
}
BENCHMARK(BM_schedule_64ops)->Apply(with_min_max);

void BM_schedule_64ops_throughput(benchmark::State& state) {
  const ht::run_options o = sixty_four();
  std::uint64_t seed = 1;
  std::uint64_t events = 0;
  std::uint64_t decisions = 0;
  std::uint64_t switches = 0;
  std::uint64_t runs = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    ht::seeded_source src(seed++);
    const ht::run_result r = ht::run_schedule(src, o);
    if (!r.result.ok()) state.SkipWithError("the correct stack violated an invariant");
    events += r.log.events.size();
    decisions += r.log.decisions;
    switches += r.log.switches;
    ++runs;
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (runs == 0 || s <= 0) return;
  state.counters["execs_per_s"] = static_cast<double>(runs) / s;
  state.counters["events_per_s"] = static_cast<double>(events) / s;
  state.counters["events_per_exec"] = static_cast<double>(events) / static_cast<double>(runs);
  state.counters["decisions_per_exec"] = static_cast<double>(decisions) / static_cast<double>(runs);
  state.SetLabel("64-operation schedules, one core; target >= 5000 execs/s");
}
BENCHMARK(BM_schedule_64ops_throughput)->Apply(with_min_max);

// ---- mutant_caught -----------------------------------------------------------------------------

void BM_mutant_caught(benchmark::State& state) {
  const ht::mutant m = ht::all_mutants[state.range(0)];
  ht::run_options o;
  o.mutation = m;
  std::uint64_t seed = 0;
  std::uint64_t cases = 0;
  std::uint64_t catches = 0;
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    for (std::uint64_t i = 0;; ++i) {
      ht::seeded_source src(seed++);
      ++cases;
      if (!ht::run_schedule(src, o).result.ok()) break;
      if (i == 100000) {
        state.SkipWithError("not caught in 100000 schedules");
        return;
      }
    }
    ++catches;
  }
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  state.counters["cases"] = static_cast<double>(cases) / static_cast<double>(catches);
  state.counters["ms_per_catch"] = ms / static_cast<double>(catches);
  state.SetLabel(std::string(ht::to_string(m)) + ", seeded-PRNG search, schedules per catch");
}
BENCHMARK(BM_mutant_caught)
    ->DenseRange(0, static_cast<int>(std::size(ht::all_mutants)) - 1)
    ->Apply(with_min_max);

}  // namespace
