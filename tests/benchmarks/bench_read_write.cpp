// SPDX-License-Identifier: MIT
// tests/benchmarks/bench_read_write.cpp - read-write leases (read_write_lease.hpp) on memory_store,
// against a plain lease acquired and released in the same run.
//
//   benchmark          | subject                           | baseline                    | goal
//   -------------------+-----------------------------------+-----------------------------+-----
//   read_lease         | read_write_lease try_acquire_read | lease try_acquire +         | info
//                      | + release                         | release                     |
//   write_lease        | try_acquire_write + release       | the same                    | info
//   store_shared_grant | store try_acquire_rw + release_rw | store try_acquire + release | info
//
// A read-write hand-off (waiting in wait_for_release_rw against polling) is bench_handoff.cpp's
// BM_handoff_memory_rw.
//
// A shared or exclusive grant lives in memory_shared's own map (std::map keyed by the key, a
// vector of readers), the plain lease in memory_store's hash map: the ratio is the price of the
// read-write record, under the same store lock.
#include <chrono>
#include <string>

#include "bench_common.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/read_write_lease.hpp"
#include "holdfast/stores/memory.hpp"
#include "read_write_pairs.hpp"

namespace {

using holdfast_bench::given_owner;
using holdfast_bench::run_paired;
using holdfast_bench::sample_owner;
using holdfast_bench::with_min_max;

constexpr std::chrono::milliseconds kTtl{10'000};

struct plain_lease {
  holdfast::memory_store<>* store;
  holdfast::acquire_options<> opts = given_owner();
  benchmark::State* state;
  void operator()() {
    auto l = holdfast::try_acquire(*store, "plain", kTtl, opts);
    if (!l || !l->release()) state->SkipWithError("plain lease failed");
  }
};

void BM_read_lease(benchmark::State& state) {
  holdfast::memory_store<> store;
  holdfast::read_write_lease<holdfast::memory_store<>> doc(store, "doc", given_owner());
  run_paired(
      state, "vs lease try_acquire + release",
      [&] {
        auto r = doc.try_acquire_read(kTtl);
        if (!r || !r->release()) state.SkipWithError("read lease failed");
      },
      plain_lease{&store, given_owner(), &state}, 64);
}
BENCHMARK(BM_read_lease)->Apply(with_min_max);

void BM_write_lease(benchmark::State& state) {
  holdfast::memory_store<> store;
  holdfast::read_write_lease<holdfast::memory_store<>> doc(store, "doc", given_owner());
  run_paired(
      state, "vs lease try_acquire + release",
      [&] {
        auto w = doc.try_acquire_write(kTtl);
        if (!w || !w->release()) state.SkipWithError("write lease failed");
      },
      plain_lease{&store, given_owner(), &state}, 64);
}
BENCHMARK(BM_write_lease)->Apply(with_min_max);

void BM_store_shared_grant(benchmark::State& state) {
  holdfast::memory_store<> store;
  const std::string& owner = sample_owner();
  run_paired(
      state, "vs store try_acquire + release",
      [&] {
        auto g = store.try_acquire_rw("doc", owner, kTtl, holdfast::lease_mode::shared);
        if (!g || !store.release_rw("doc", owner, g->token, holdfast::lease_mode::shared)) {
          state.SkipWithError("failed");
        }
      },
      [&] {
        auto g = store.try_acquire("plain", owner, kTtl);
        if (!g || !store.release("plain", owner, g->token)) state.SkipWithError("failed");
      },
      64);
}
BENCHMARK(BM_store_shared_grant)->Apply(with_min_max);

}  // namespace
