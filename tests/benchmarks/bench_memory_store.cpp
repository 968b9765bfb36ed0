// SPDX-License-Identifier: MIT
// tests/benchmarks/bench_memory_store.cpp - memory_store and the lease handle on it, against the
// floor a thread-safe in-process store cannot go below: one std::mutex lock+unlock plus one
// steady_clock::now() (expiry needs the time, thread safety needs the lock).
//
//   benchmark                              | compared with                        | target
//   ---------------------------------------+--------------------------------------+---------
//   memory_store_acquire_release           | mutex lock+unlock + now(), same run  | <= 2x
//   memory_store_acquire_release_among/N   | mutex lock+unlock + now(), same run  | (info)
//   memory_store_renew                     | mutex lock+unlock + now(), same run  | (info)
//   lease_acquire_release                  | mutex lock+unlock + now(), same run  | (info)
//   lease_acquire_release_given_owner      | mutex lock+unlock + now(), same run  | (info)
//   lease_vs_store/given_owner:0|1         | memory_store_acquire_release, same loop | <= 3x
//   lease_acquire_release_observed         | the same cycle, no observer, same run| (info)
//   lease_renew_observed                   | the same renew, no observer, same run| (info)
//   memory_store_contended_one_key (2 thr) | memory_store_acquire_release         | (info)
//   memory_store_distinct_keys (2 thr)     | memory_store_acquire_release         | (info)
//   mutex_now_contended (2 thr)            | the baseline of acquire_release      | (info)
//
// The lease rows show what the handle adds on top of the store: a random 128-bit owner id (or one
// copy of the caller's), the key copied into the handle, two more clock reads and the validity
// math (holdfast::try_acquire reads the holder's clock before the request and checks validity
// after the reply; the store reads its own clock in between).
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

#include "bench_common.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/observer.hpp"
#include "holdfast/stores/memory.hpp"

namespace {

using holdfast_bench::run_paired;
using holdfast_bench::sample_owner;
using holdfast_bench::with_min_max;

constexpr std::chrono::milliseconds kTtl{10'000};

// The baseline: the least a thread-safe store that judges expiry by a clock must do per call.
struct mutex_and_clock {
  std::mutex mutex;
  void operator()() {
    std::lock_guard<std::mutex> lock(mutex);
    benchmark::DoNotOptimize(std::chrono::steady_clock::now());
  }
};

constexpr const char* kVsMutexNow = "vs std::mutex lock+unlock + steady_clock::now()";

// One uncontended cycle on the store: try_acquire, then release of the grant.
void store_cycle(benchmark::State& state, holdfast::memory_store<>& store, std::string_view key,
                 const std::string& owner) {
  auto g = store.try_acquire(key, owner, kTtl);
  if (!g) {
    state.SkipWithError("try_acquire failed");
    return;
  }
  benchmark::DoNotOptimize(store.release(key, owner, g->token));
}

// One cycle through the lease handle: holdfast::try_acquire, then lease::release().
void lease_cycle(benchmark::State& state, holdfast::memory_store<>& store,
                 const holdfast::acquire_options<>& opts) {
  auto l = holdfast::try_acquire(store, "orders", kTtl, opts);
  if (!l) {
    state.SkipWithError("holdfast::try_acquire failed");
    return;
  }
  benchmark::DoNotOptimize(l->release());
}

void BM_memory_store_acquire_release(benchmark::State& state) {
  holdfast::memory_store<> store;
  const std::string& owner = sample_owner();
  mutex_and_clock baseline;
  run_paired(
      state, "vs std::mutex lock+unlock + steady_clock::now(); target <= 2",
      [&] { store_cycle(state, store, "orders", owner); }, baseline);
}
BENCHMARK(BM_memory_store_acquire_release)->Apply(with_min_max);

// The same cycle in a store that holds state.range(0) other live leases: lookups hash the key
// instead of scanning a handful of records.
void BM_memory_store_acquire_release_among(benchmark::State& state) {
  holdfast::memory_store<> store;
  const std::string& owner = sample_owner();
  for (std::int64_t i = 0; i < state.range(0); ++i) {
    if (!store.try_acquire("other-" + std::to_string(i), sample_owner(1), kTtl)) {
      state.SkipWithError("try_acquire failed");
      return;
    }
  }
  mutex_and_clock baseline;
  run_paired(
      state, kVsMutexNow, [&] { store_cycle(state, store, "orders", owner); }, baseline);
}
BENCHMARK(BM_memory_store_acquire_release_among)->Arg(1000)->Apply(with_min_max);

void BM_memory_store_renew(benchmark::State& state) {
  holdfast::memory_store<> store;
  const std::string& owner = sample_owner();
  const auto g = store.try_acquire("orders", owner, kTtl);
  if (!g) {
    state.SkipWithError("try_acquire failed");
    return;
  }
  mutex_and_clock baseline;
  run_paired(
      state, kVsMutexNow,
      [&] { benchmark::DoNotOptimize(store.renew("orders", owner, g->token, kTtl)); }, baseline);
}
BENCHMARK(BM_memory_store_renew)->Apply(with_min_max);

void BM_lease_acquire_release(benchmark::State& state) {
  holdfast::memory_store<> store;
  mutex_and_clock baseline;
  run_paired(
      state, kVsMutexNow, [&] { lease_cycle(state, store, holdfast::acquire_options<>{}); },
      baseline);
}
BENCHMARK(BM_lease_acquire_release)->Apply(with_min_max);

void BM_lease_acquire_release_given_owner(benchmark::State& state) {
  holdfast::memory_store<> store;
  holdfast::acquire_options<> opts;
  opts.owner = sample_owner();
  mutex_and_clock baseline;
  run_paired(
      state, kVsMutexNow, [&] { lease_cycle(state, store, opts); }, baseline);
}
BENCHMARK(BM_lease_acquire_release_given_owner)->Apply(with_min_max);

// The handle against the store's own cycle in the same loop (issue 26 item 3: target <= 3x):
// what holdfast::try_acquire + lease::release add on top of store.try_acquire + store.release.
// Argument 0: a random owner id per acquire (the default); 1: acquire_options::owner given.
void BM_lease_vs_store(benchmark::State& state) {
  holdfast::memory_store<> store;
  const std::string& owner = sample_owner();
  holdfast::acquire_options<> opts;
  if (state.range(0) != 0) opts.owner = owner;
  run_paired(
      state, "vs store.try_acquire + release, same loop; target <= 3",
      [&] { lease_cycle(state, store, opts); },
      [&] { store_cycle(state, store, "orders", owner); });
}
BENCHMARK(BM_lease_vs_store)->ArgName("given_owner")->Arg(0)->Arg(1)->Apply(with_min_max);

// --- the event observer (observer.hpp) ------------------------------------------------------
// An observer that counts events with relaxed atomic increments: the least a metrics observer
// does. Against the same operation without an observer in the same loop, the ratio is what being
// observed costs (two events per cycle plus a clock read around each store call). What an absent
// observer costs is the lease rows above: one pointer test per event point.
struct counting_observer final : holdfast::lease_observer {
  std::atomic<std::uint64_t> events{0};
  void on_event(const holdfast::lease_event&) override {
    events.fetch_add(1, std::memory_order_relaxed);
  }
};

void BM_lease_acquire_release_observed(benchmark::State& state) {
  holdfast::memory_store<> store;
  holdfast::acquire_options<> plain;
  plain.owner = sample_owner();
  counting_observer obs;
  holdfast::acquire_options<> observed = plain;
  observed.observer = &obs;
  run_paired(
      state, "vs the same cycle without an observer", [&] { lease_cycle(state, store, observed); },
      [&] { lease_cycle(state, store, plain); });
  if (obs.events.load() == 0) state.SkipWithError("the observer heard nothing");
}
BENCHMARK(BM_lease_acquire_release_observed)->Apply(with_min_max);

void BM_lease_renew_observed(benchmark::State& state) {
  holdfast::memory_store<> store;
  holdfast::acquire_options<> plain;
  plain.owner = sample_owner();
  counting_observer obs;
  holdfast::acquire_options<> observed = plain;
  observed.owner = sample_owner(1);
  observed.observer = &obs;
  auto a = holdfast::try_acquire(store, "orders", kTtl, plain);
  auto b = holdfast::try_acquire(store, "ledger", kTtl, observed);
  if (!a || !b) {
    state.SkipWithError("try_acquire failed");
    return;
  }
  run_paired(
      state, "vs the same renew without an observer",
      [&] { benchmark::DoNotOptimize(b->renew(kTtl)); },
      [&] { benchmark::DoNotOptimize(a->renew(kTtl)); });
}
BENCHMARK(BM_lease_renew_observed)->Apply(with_min_max);

// --- two threads ---------------------------------------------------------------------------
// Throughput is counted in completed acquire+release cycles per second, summed over both threads,
// so it compares directly with 1 / ns_per_op of the uncontended benchmark. On one key most
// attempts find the other thread's lease (busy, which costs one lock, not two); attempts_per_s
// counts those too.

void BM_memory_store_contended_one_key(benchmark::State& state) {
  static holdfast::memory_store<> store;  // shared by both threads
  const std::string& owner = sample_owner(state.thread_index());
  std::int64_t cycles = 0;
  std::int64_t attempts = 0;
  for (auto _ : state) {
    ++attempts;
    auto g = store.try_acquire("orders", owner, kTtl);
    if (g) {
      benchmark::DoNotOptimize(store.release("orders", owner, g->token));
      ++cycles;
    } else if (g.error() != holdfast::errc::busy) {
      state.SkipWithError("try_acquire failed");
      break;
    }
  }
  state.counters["ops_per_s"] =
      benchmark::Counter(static_cast<double>(cycles), benchmark::Counter::kIsRate);
  state.counters["attempts_per_s"] =
      benchmark::Counter(static_cast<double>(attempts), benchmark::Counter::kIsRate);
  state.SetLabel("vs BM_memory_store_acquire_release (uncontended, 1 thread)");
}
BENCHMARK(BM_memory_store_contended_one_key)->Threads(2)->UseRealTime()->Apply(with_min_max);

void BM_memory_store_distinct_keys(benchmark::State& state) {
  static holdfast::memory_store<> store;  // shared by both threads, one key each
  const std::string key = "orders-" + std::to_string(state.thread_index());
  const std::string& owner = sample_owner(state.thread_index());
  std::int64_t cycles = 0;
  for (auto _ : state) {
    store_cycle(state, store, key, owner);
    ++cycles;
  }
  state.counters["ops_per_s"] =
      benchmark::Counter(static_cast<double>(cycles), benchmark::Counter::kIsRate);
  state.SetLabel("vs BM_memory_store_acquire_release (uncontended, 1 thread)");
}
BENCHMARK(BM_memory_store_distinct_keys)->Threads(2)->UseRealTime()->Apply(with_min_max);

// The baseline's own behaviour under the same contention: what two threads sharing one mutex and
// reading the clock cost, so the store's contended ratio can be read against the mutex's.
void BM_mutex_now_contended(benchmark::State& state) {
  static mutex_and_clock shared;
  std::int64_t ops = 0;
  for (auto _ : state) {
    shared();
    ++ops;
  }
  state.counters["ops_per_s"] =
      benchmark::Counter(static_cast<double>(ops), benchmark::Counter::kIsRate);
  state.SetLabel("vs BM_memory_store_acquire_release:base (its baseline, 1 thread)");
}
BENCHMARK(BM_mutex_now_contended)->Threads(2)->UseRealTime()->Apply(with_min_max);

}  // namespace
