// SPDX-License-Identifier: MIT
// tests/benchmarks/footprint/bench_footprint.cpp - memory_store's heap footprint, counted, not
// guessed: this program replaces the global operator new/delete with counting versions (which is
// why it is a binary of its own: the counting would tax every timing benchmark).
//
//   benchmark                         | figure                                 | compared with
//   ----------------------------------+----------------------------------------+-----------------
//   footprint_empty_store             | bytes of a new memory_store (object +  | -
//                                     | heap)                                  |
//   footprint_live_leases/N/K         | bytes per live lease, N leases, keys   | the empty store
//                                     | of K bytes, 32-byte owner ids          |
//   footprint_churn_sequential/N      | bytes after N distinct keys were each  | the empty store
//                                     | acquired then released                 | (target: equal)
//   footprint_churn_bulk/N            | bytes after N keys were all acquired,  | the empty store
//                                     | then all released                      | (target: equal)
//   footprint_expired/N               | bytes after N leases expired and one   | N live leases
//                                     | more key was acquired (sweep)          |
//
// Bytes are what malloc reserved for each block (malloc_usable_size), which is what the process
// really pays, rounding included; malloc's own per-block header (8 bytes with glibc) is not
// counted. Every churn benchmark also checks that the store's tokens kept increasing (T1 across
// release) and that size() is back to 0; a failed check is reported (SkipWithError) and makes the
// program exit with status 1, so the ctest smoke run catches it.
#include <benchmark/benchmark.h>
#include <malloc.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "holdfast/clock.hpp"
#include "holdfast/stores/memory.hpp"

namespace {

std::atomic<std::int64_t> g_live_bytes{0};

void* counted_alloc(std::size_t size, std::size_t align) {
  if (size == 0) size = 1;
  void* p = nullptr;
  if (align <= alignof(std::max_align_t)) {
    p = std::malloc(size);
  } else if (::posix_memalign(&p, align, size) != 0) {
    p = nullptr;
  }
  if (p != nullptr) {
    g_live_bytes.fetch_add(static_cast<std::int64_t>(::malloc_usable_size(p)),
                           std::memory_order_relaxed);
  }
  return p;
}

void counted_free(void* p) noexcept {
  if (p == nullptr) return;
  g_live_bytes.fetch_sub(static_cast<std::int64_t>(::malloc_usable_size(p)),
                         std::memory_order_relaxed);
  std::free(p);
}

void* counted_alloc_or_throw(std::size_t size, std::size_t align) {
  void* p = counted_alloc(size, align);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

std::int64_t live_bytes() {
  return g_live_bytes.load(std::memory_order_relaxed);
}

}  // namespace

// The replaceable global allocation functions ([new.delete]); the array, nothrow and sized forms
// are replaced too, so no allocation escapes the count.
void* operator new(std::size_t n) {
  return counted_alloc_or_throw(n, 0);
}
void* operator new[](std::size_t n) {
  return counted_alloc_or_throw(n, 0);
}
void* operator new(std::size_t n, std::align_val_t a) {
  return counted_alloc_or_throw(n, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t n, std::align_val_t a) {
  return counted_alloc_or_throw(n, static_cast<std::size_t>(a));
}
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  return counted_alloc(n, 0);
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  return counted_alloc(n, 0);
}
void operator delete(void* p) noexcept {
  counted_free(p);
}
void operator delete[](void* p) noexcept {
  counted_free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  counted_free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  counted_free(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
  counted_free(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
  counted_free(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
  counted_free(p);
}
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
  counted_free(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
  counted_free(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
  counted_free(p);
}

namespace {

bool g_failed = false;

// Reports a failed check: in the benchmark's output, and in the program's exit status.
void fail(benchmark::State& state, const char* why) {
  g_failed = true;
  state.SkipWithError(why);
}

using store_type = holdfast::memory_store<holdfast::manual_clock>;

constexpr std::chrono::milliseconds kTtl{10'000};

// Key number i, exactly `length` bytes long (at least 9): "k" + zero-padded number.
std::string make_key(std::int64_t i, std::size_t length) {
  char digits[32];
  std::snprintf(digits, sizeof digits, "%08lld", static_cast<long long>(i));
  std::string key = "k" + std::string(digits);
  if (key.size() < length) key.append(length - key.size(), '-');
  return key;
}

// Heap bytes a new store takes, plus its own size: what "an empty store" costs.
struct empty_figure {
  std::int64_t bytes = 0;
  empty_figure() {
    holdfast::manual_clock clock;
    const std::int64_t before = live_bytes();
    auto store = std::make_unique<store_type>(clock);
    bytes = live_bytes() - before;
  }
};

std::int64_t empty_store_bytes() {
  static const empty_figure figure;
  return figure.bytes;
}

void BM_footprint_empty_store(benchmark::State& state) {
  for (auto _ : state) {
  }
  state.counters["bytes"] = static_cast<double>(empty_store_bytes());
  state.counters["sizeof_store"] = static_cast<double>(sizeof(store_type));
  state.SetLabel("object + heap of a new memory_store");
}
BENCHMARK(BM_footprint_empty_store)->Iterations(1)->Repetitions(1);

void BM_footprint_live_leases(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  const auto key_length = static_cast<std::size_t>(state.range(1));
  std::vector<std::string> keys;
  keys.reserve(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) keys.push_back(make_key(i, key_length));
  std::int64_t bytes = 0;
  for (auto _ : state) {
    holdfast::manual_clock clock;
    const std::int64_t before = live_bytes();
    auto store = std::make_unique<store_type>(clock);
    for (std::int64_t i = 0; i < n; ++i) {
      // A distinct 32-byte owner per lease, like holdfast::try_acquire's random ids.
      if (!store->try_acquire(keys[static_cast<std::size_t>(i)], make_key(i, 32), kTtl)) {
        fail(state, "try_acquire failed");
        return;
      }
    }
    bytes = live_bytes() - before;
  }
  state.counters["bytes"] = static_cast<double>(bytes);
  state.counters["empty_bytes"] = static_cast<double>(empty_store_bytes());
  state.counters["bytes_per_lease"] =
      static_cast<double>(bytes - empty_store_bytes()) / static_cast<double>(n);
  state.SetLabel("32-byte owner ids; vs the empty store");
}
BENCHMARK(BM_footprint_live_leases)
    ->Args({1000, 12})
    ->Args({1000, 40})
    ->Args({100000, 12})
    ->Args({100000, 40})
    ->Iterations(1)
    ->Repetitions(1);

// Checks what every churn benchmark promises besides the bytes: tokens kept increasing across
// releases (T1) and the store holds no record any more.
bool check_after_churn(benchmark::State& state, const store_type& store, std::uint64_t grants,
                       bool tokens_increased) {
  if (!tokens_increased) {
    fail(state, "a grant's token was not greater than every earlier one");
    return false;
  }
  if (store.last_token().value() != grants) {
    fail(state, "last_token() is not the number of grants");
    return false;
  }
  if (store.size() != 0) {
    fail(state, "size() is not 0 after every key was released");
    return false;
  }
  return true;
}

void report_churn(benchmark::State& state, std::int64_t bytes_after) {
  state.counters["bytes_after"] = static_cast<double>(bytes_after);
  state.counters["empty_bytes"] = static_cast<double>(empty_store_bytes());
  state.counters["residue_bytes"] = static_cast<double>(bytes_after - empty_store_bytes());
  state.SetLabel("vs the empty store; target: equal, tokens still increasing");
}

void BM_footprint_churn_sequential(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  const std::string owner = make_key(0, 32);  // allocated before counting starts
  std::int64_t bytes = 0;
  for (auto _ : state) {
    holdfast::manual_clock clock;
    const std::int64_t before = live_bytes();
    auto store = std::make_unique<store_type>(clock);
    std::uint64_t last = 0;
    bool increasing = true;
    for (std::int64_t i = 0; i < n; ++i) {
      const std::string key = make_key(i, 12);
      auto g = store->try_acquire(key, owner, kTtl);
      if (!g || !store->release(key, owner, g->token)) {
        fail(state, "acquire or release failed");
        return;
      }
      increasing = increasing && g->token.value() > last;
      last = g->token.value();
    }
    bytes = live_bytes() - before;
    if (!check_after_churn(state, *store, static_cast<std::uint64_t>(n), increasing)) return;
  }
  report_churn(state, bytes);
}
BENCHMARK(BM_footprint_churn_sequential)
    ->Arg(1)
    ->Arg(1000)
    ->Arg(100000)
    ->Iterations(1)
    ->Repetitions(1);

void BM_footprint_churn_bulk(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  std::vector<std::string> keys;
  keys.reserve(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) keys.push_back(make_key(i, 12));
  std::vector<holdfast::fencing_token> tokens(static_cast<std::size_t>(n));
  const std::string owner = make_key(0, 32);  // allocated before counting starts
  std::int64_t bytes = 0;
  for (auto _ : state) {
    holdfast::manual_clock clock;
    const std::int64_t before = live_bytes();
    auto store = std::make_unique<store_type>(clock);
    std::uint64_t last = 0;
    bool increasing = true;
    for (std::int64_t i = 0; i < n; ++i) {
      auto g = store->try_acquire(keys[static_cast<std::size_t>(i)], owner, kTtl);
      if (!g) {
        fail(state, "try_acquire failed");
        return;
      }
      increasing = increasing && g->token.value() > last;
      last = g->token.value();
      tokens[static_cast<std::size_t>(i)] = g->token;
    }
    for (std::int64_t i = 0; i < n; ++i) {
      const auto k = static_cast<std::size_t>(i);
      if (!store->release(keys[k], owner, tokens[k])) {
        fail(state, "release failed");
        return;
      }
    }
    // A second round over the same keys: the store's counter, not per-key records, keeps
    // tokens increasing.
    for (std::int64_t i = 0; i < n; ++i) {
      const auto k = static_cast<std::size_t>(i);
      auto g = store->try_acquire(keys[k], owner, kTtl);
      if (!g || !store->release(keys[k], owner, g->token)) {
        fail(state, "second round failed");
        return;
      }
      increasing = increasing && g->token.value() > last;
      last = g->token.value();
    }
    bytes = live_bytes() - before;
    if (!check_after_churn(state, *store, static_cast<std::uint64_t>(2 * n), increasing)) return;
  }
  report_churn(state, bytes);
}
BENCHMARK(BM_footprint_churn_bulk)->Arg(1000)->Arg(100000)->Iterations(1)->Repetitions(1);

void BM_footprint_expired(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  const std::string owner = make_key(0, 32);  // allocated before counting starts
  std::int64_t live = 0;
  std::int64_t after = 0;
  for (auto _ : state) {
    holdfast::manual_clock clock;
    const std::int64_t before = live_bytes();
    auto store = std::make_unique<store_type>(clock);
    for (std::int64_t i = 0; i < n; ++i) {
      if (!store->try_acquire(make_key(i, 12), owner, kTtl)) {
        fail(state, "try_acquire failed");
        return;
      }
    }
    live = live_bytes() - before;
    clock.advance(2 * kTtl);
    // Expired records go at the next sweep, which an insert triggers once the map has doubled
    // since the last one; acquire new keys until it has run.
    std::int64_t extra = 0;
    while (store->size() > static_cast<std::size_t>(extra)) {
      if (!store->try_acquire(make_key(n + extra, 12), owner, kTtl)) {
        fail(state, "try_acquire failed");
        return;
      }
      ++extra;
      if (extra > 4 * n + 128) {
        fail(state, "expired records were never swept");
        return;
      }
    }
    after = live_bytes() - before;
    state.counters["new_keys_until_sweep"] = static_cast<double>(extra);
    state.counters["live_after_sweep"] = static_cast<double>(store->size());
  }
  state.counters["bytes_with_n_live"] = static_cast<double>(live);
  state.counters["bytes_after_sweep"] = static_cast<double>(after);
  state.SetLabel("N leases expire, then new keys are acquired until the sweep runs");
}
BENCHMARK(BM_footprint_expired)->Arg(1000)->Arg(100000)->Iterations(1)->Repetitions(1);

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return g_failed ? 1 : 0;
}
