// SPDX-License-Identifier: MIT
// tests/benchmarks/bench_read_write_etcd.cpp - read-write grants on a real etcd (etcd_store's
// try_acquire_rw/release_rw: detail/etcd_rw.hpp) against a plain lease acquired and released on
// the same etcd in the same run (bench_read_write.cpp has the memory_store side,
// bench_read_write_redis.cpp Redis').
//
//   benchmark               | subject                          | baseline                | goal
//   ------------------------+----------------------------------+-------------------------+------
//   etcd_read_lease         | read_write_lease try_acquire_read| lease try_acquire +     | ~1
//                           | + release (3 round trips)        | release (3 round trips) |
//   etcd_write_lease        | try_acquire_write + release      | the same                | ~1
//   etcd_store_shared_grant | try_acquire_rw + release_rw      | try_acquire + release   | ~1
//   etcd_store_shared_join  | the same beside another reader   | the same                | ~4/3
//                           | (4 round trips)                  |                         |
//
// On a free key both sides are lease/grant, one kv/txn and lease/revoke (two Raft commits and a
// revoke); the ratio is the price of the read-write transaction (a compare over the key's range
// instead of one key's create revision, and the store's names: two SHA-256) over the plain one.
// Figures are run_paired's medians, the ratio subject over baseline. Needs
// HOLDFAST_ETCD_ENDPOINTS (.ci/servers start); without it each benchmark is skipped.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>

#include "bench_common.hpp"
#include "holdfast/stores/etcd.hpp"
#include "read_write_pairs.hpp"

namespace {

using holdfast_bench::run_rw_lease_vs_lease;
using holdfast_bench::run_shared_grant_vs_grant;
using holdfast_bench::with_min_max;

constexpr std::chrono::milliseconds kTtl{10'000};

std::optional<holdfast::etcd_options> bench_options() {
  const char* e = std::getenv("HOLDFAST_ETCD_ENDPOINTS");
  if (e == nullptr || *e == '\0') return std::nullopt;
  holdfast::etcd_options o;
  o.endpoints.clear();
  const std::string s(e);
  for (std::size_t start = 0; start <= s.size();) {
    const std::size_t end = std::min(s.find(',', start), s.size());
    if (end > start) o.endpoints.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  o.key_prefix = "holdfast-bench-rw/";
  return o;
}

// Options for one benchmark's store, or nullopt after SkipWithError.
std::optional<holdfast::etcd_options> options_or_skip(benchmark::State& state) {
  std::optional<holdfast::etcd_options> o = bench_options();
  if (!o) state.SkipWithError("no etcd: set HOLDFAST_ETCD_ENDPOINTS (.ci/servers start)");
  return o;
}

template <bool Write>
void BM_etcd_rw_lease(benchmark::State& state) {
  const std::optional<holdfast::etcd_options> o = options_or_skip(state);
  if (!o) return;
  holdfast::etcd_store etcd(*o);
  if (!etcd.revision()) return state.SkipWithError("cannot reach etcd");
  run_rw_lease_vs_lease<Write>(state, etcd, kTtl);
}
void BM_etcd_read_lease(benchmark::State& state) {
  BM_etcd_rw_lease<false>(state);
}
void BM_etcd_write_lease(benchmark::State& state) {
  BM_etcd_rw_lease<true>(state);
}
BENCHMARK(BM_etcd_read_lease)->Apply(with_min_max);
BENCHMARK(BM_etcd_write_lease)->Apply(with_min_max);

void BM_etcd_store_shared_grant(benchmark::State& state) {
  const std::optional<holdfast::etcd_options> o = options_or_skip(state);
  if (!o) return;
  holdfast::etcd_store etcd(*o);
  if (!etcd.revision()) return state.SkipWithError("cannot reach etcd");
  run_shared_grant_vs_grant(state, etcd, "doc", kTtl);
}
BENCHMARK(BM_etcd_store_shared_grant)->Apply(with_min_max);

// A reader joining readers: another owner holds a shared grant on the key throughout, so the
// first transaction's guard (an empty range) fails, the ask judges the range it read and sends a
// second, guarded transaction: 4 round trips against the plain lease's 3.
void BM_etcd_store_shared_join(benchmark::State& state) {
  const std::optional<holdfast::etcd_options> o = options_or_skip(state);
  if (!o) return;
  holdfast::etcd_store etcd(*o);
  if (!etcd.revision()) return state.SkipWithError("cannot reach etcd");
  constexpr auto sh = holdfast::lease_mode::shared;
  auto other = etcd.try_acquire_rw("joined", "another reader", std::chrono::minutes(5), sh);
  if (!other) return state.SkipWithError("cannot take the other reader's grant");
  run_shared_grant_vs_grant(state, etcd, "joined", kTtl);
  (void)etcd.release_rw("joined", "another reader", other->token, sh);
}
BENCHMARK(BM_etcd_store_shared_join)->Apply(with_min_max);

}  // namespace
