// SPDX-License-Identifier: MIT
// tests/benchmarks/bench_handoff.cpp - hand-off latency on memory_store: blocking acquire() that
// waits in the store (wait_for_release: one waiter woken per release, FIFO) next to the polling
// acquire it replaces (backoff 10 ms doubling to 1 s, full jitter), with 1 and with 16 waiters,
// in one run. BM_handoff_memory_rw runs the same protocol between the writers of one read-write
// key (read_write_view, exclusive: read_write_lease::acquire_write's store): waiting in
// wait_for_release_rw (a writer's release wakes the first waiting writer, FIFO) against
// polling, in the same run. See handoff.hpp for the protocol and the counters; the
// figures are in README.md.
#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <cstdint>

#include "bench_common.hpp"
#include "handoff.hpp"
#include "holdfast/read_write_lease.hpp"
#include "holdfast/stores/memory.hpp"

namespace {

using holdfast_bench::counting;
using holdfast_bench::polling;
using memory = holdfast::memory_store<>;
using writers = holdfast::read_write_view<memory, holdfast::lease_mode::exclusive>;

// One run of handoff.hpp's protocol on `subject` (a store, or a read-write key's exclusive view):
// waiting in the store's own wait (Wait) or polling with backoff; every store call is counted.
template <bool Wait, class Subject>
holdfast_bench::handoff_result handoffs_on(Subject* subject, int waiters, std::uint64_t handoffs,
                                           std::atomic<std::uint64_t>& requests) {
  counting<Subject> counted{subject, &requests};
  polling<counting<Subject>> polled{&counted};
  if constexpr (Wait) {
    return holdfast_bench::run_handoffs<counting<Subject>*>(
        [&](int) { return &counted; }, waiters, handoffs, std::chrono::microseconds(1000), "k");
  } else {
    return holdfast_bench::run_handoffs<polling<counting<Subject>>*>(
        [&](int) { return &polled; }, waiters, handoffs, std::chrono::microseconds(1000), "k");
  }
}

// {waiters, hand-offs} from the benchmark's arguments; ReadWrite: between the writers of one
// read-write key instead of the holders of a plain one.
template <bool Wait, bool ReadWrite>
void run_memory_handoffs(benchmark::State& state) {
  const int waiters = static_cast<int>(state.range(0));
  const auto handoffs = static_cast<std::uint64_t>(state.range(1));
  for (auto _ : state) {
    memory store;
    std::atomic<std::uint64_t> requests{0};
    holdfast_bench::handoff_result r;
    if constexpr (ReadWrite) {
      writers view(store);
      r = handoffs_on<Wait>(&view, waiters, handoffs, requests);
    } else {
      r = handoffs_on<Wait>(&store, waiters, handoffs, requests);
    }
    holdfast_bench::report_handoffs(state, r, requests.load());
  }
  const char* wait = ReadWrite ? "wait_for_release_rw" : "wait_for_release";
  state.SetLabel(Wait ? wait : "polling (backoff)");
}

template <bool Wait>
void BM_handoff_memory(benchmark::State& state) {
  run_memory_handoffs<Wait, false>(state);
}

// {waiters, hand-offs}: polling hand-offs take tens of ms each, so fewer of them.
BENCHMARK_TEMPLATE(BM_handoff_memory, true)
    ->Args({1, 400})
    ->Args({16, 400})
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->Apply(holdfast_bench::with_min_max);
BENCHMARK_TEMPLATE(BM_handoff_memory, false)
    ->Args({1, 20})
    ->Args({16, 20})
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->Apply(holdfast_bench::with_min_max);

template <bool Wait>
void BM_handoff_memory_rw(benchmark::State& state) {
  run_memory_handoffs<Wait, true>(state);
}

BENCHMARK_TEMPLATE(BM_handoff_memory_rw, true)
    ->Args({1, 400})
    ->Args({16, 400})
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->Apply(holdfast_bench::with_min_max);
BENCHMARK_TEMPLATE(BM_handoff_memory_rw, false)
    ->Args({1, 20})
    ->Args({16, 20})
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->Apply(holdfast_bench::with_min_max);

}  // namespace
