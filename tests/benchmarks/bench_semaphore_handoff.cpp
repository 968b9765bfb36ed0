// SPDX-License-Identifier: MIT
// tests/benchmarks/bench_semaphore_handoff.cpp - the semaphore's hand-off on memory_store: 4
// permits, 16 waiters in semaphore::acquire(), every store call counted (semaphore_handoff.hpp;
// a wait, for one key or for any of the slots, counts as one call);
// next to the same semaphore over a store that cannot wait (polling with backoff), in one run.
// The figures are in README.md.
#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "bench_common.hpp"
#include "handoff.hpp"
#include "holdfast/semaphore.hpp"
#include "holdfast/stores/memory.hpp"
#include "semaphore_handoff.hpp"

namespace {

using holdfast_bench::counting_any;
using holdfast_bench::polling;
using memory = holdfast::memory_store<>;

template <class Store>
void run(benchmark::State& state, Store& store, std::atomic<std::uint64_t>& requests) {
  const int permits = static_cast<int>(state.range(0));
  const int waiters = static_cast<int>(state.range(1));
  const auto handoffs = static_cast<std::uint64_t>(state.range(2));
  holdfast::semaphore_options<> so;
  so.renew = state.range(3) != 0;  // renew = 0: no keepalive, as before issue 22 part 5
  using sem_type = holdfast::semaphore<Store>;
  std::vector<std::unique_ptr<sem_type>> sems;
  for (int i = 0; i < permits + waiters; ++i) {
    sems.push_back(std::make_unique<sem_type>(store, "sem", static_cast<std::uint32_t>(permits),
                                              std::chrono::seconds(30), so));
  }
  requests = 0;
  const holdfast_bench::handoff_result r = holdfast_bench::run_semaphore_handoffs<sem_type*>(
      [&](int i) { return sems[static_cast<std::size_t>(i)].get(); }, permits, waiters, handoffs,
      std::chrono::microseconds(1000));
  holdfast_bench::report_handoffs(state, r, requests.load());
}

template <bool Wait>
void BM_semaphore_handoff_memory(benchmark::State& state) {
  for (auto _ : state) {
    memory store;
    std::atomic<std::uint64_t> requests{0};
    counting_any<memory> counted{{&store, &requests}};
    polling<counting_any<memory>> polled{&counted};
    if constexpr (Wait) {
      run(state, counted, requests);
    } else {
      run(state, polled, requests);
    }
  }
  state.SetLabel(Wait ? "store can wait" : "polling (backoff)");
}

// {permits, waiters, hand-offs, renew}
BENCHMARK_TEMPLATE(BM_semaphore_handoff_memory, true)
    ->Args({4, 16, 400, 1})
    ->Args({4, 16, 400, 0})
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->Apply(holdfast_bench::with_min_max);
BENCHMARK_TEMPLATE(BM_semaphore_handoff_memory, false)
    ->Args({4, 16, 100, 1})
    ->Args({4, 16, 100, 0})
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->Apply(holdfast_bench::with_min_max);

}  // namespace
