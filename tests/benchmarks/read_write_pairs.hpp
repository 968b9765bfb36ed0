// SPDX-License-Identifier: MIT
// tests/benchmarks/read_write_pairs.hpp - the paired read-write benchmarks every real store runs
// the same way (bench_read_write_redis.cpp, bench_read_write_etcd.cpp): a read or write lease of
// read_write_lease against a plain lease, and the store's own try_acquire_rw/release_rw against
// its try_acquire/release, each side taken and given back in the same run (run_paired, chunks of
// 16 calls: every call is a few round trips). The store is opened and checked by the benchmark;
// these time it. Kept apart from bench_common.hpp so that the benchmarks that take no read-write
// lease do not pull read_write_lease.hpp in.
#ifndef HOLDFAST_TESTS_BENCHMARKS_READ_WRITE_PAIRS_HPP
#define HOLDFAST_TESTS_BENCHMARKS_READ_WRITE_PAIRS_HPP

#include <benchmark/benchmark.h>

#include <chrono>
#include <string>

#include "bench_common.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/read_write_lease.hpp"

namespace holdfast_bench {

/// Acquire options naming sample_owner() as the owner (no random id drawn per lease).
inline holdfast::acquire_options<> given_owner() {
  holdfast::acquire_options<> o;
  o.owner = sample_owner();
  return o;
}

/// Times read_write_lease try_acquire_read (`Write` false) or try_acquire_write, then release, on
/// key "doc" against lease try_acquire + release on key "plain", both for `ttl` on `store`. A
/// failed call ends the run with SkipWithError.
template <bool Write, class Store>
void run_rw_lease_vs_lease(benchmark::State& state, Store& store, std::chrono::milliseconds ttl) {
  holdfast::read_write_lease<Store> doc(store, "doc", given_owner());
  const holdfast::acquire_options<> plain = given_owner();
  run_paired(
      state, "vs lease try_acquire + release",
      [&] {
        if constexpr (Write) {
          auto w = doc.try_acquire_write(ttl);
          if (!w || !w->release()) state.SkipWithError("write lease failed");
        } else {
          auto r = doc.try_acquire_read(ttl);
          if (!r || !r->release()) state.SkipWithError("read lease failed");
        }
      },
      [&] {
        auto l = holdfast::try_acquire(store, "plain", ttl, plain);
        if (!l || !l->release()) state.SkipWithError("plain lease failed");
      },
      16);
}

/// Times the store's try_acquire_rw (shared) + release_rw on `key` against its try_acquire +
/// release on key "plain", both for `ttl`, as sample_owner(). A failed call ends the run with
/// SkipWithError.
template <class Store>
void run_shared_grant_vs_grant(benchmark::State& state, Store& store, const std::string& key,
                               std::chrono::milliseconds ttl) {
  const std::string& owner = sample_owner();
  constexpr auto sh = holdfast::lease_mode::shared;
  run_paired(
      state, "vs store try_acquire + release",
      [&] {
        auto g = store.try_acquire_rw(key, owner, ttl, sh);
        if (!g || !store.release_rw(key, owner, g->token, sh)) state.SkipWithError("failed");
      },
      [&] {
        auto g = store.try_acquire("plain", owner, ttl);
        if (!g || !store.release("plain", owner, g->token)) state.SkipWithError("failed");
      },
      16);
}

}  // namespace holdfast_bench

#endif  // HOLDFAST_TESTS_BENCHMARKS_READ_WRITE_PAIRS_HPP
