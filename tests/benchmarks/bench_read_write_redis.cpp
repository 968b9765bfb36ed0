// SPDX-License-Identifier: MIT
// tests/benchmarks/bench_read_write_redis.cpp - read-write grants on a real Redis (redis_store's
// try_acquire_rw/release_rw: one script each, detail/redis_shared.hpp) against a plain lease
// acquired and released in the same run (bench_read_write.cpp has the memory_store side).
//
//   benchmark               | subject                          | baseline                | goal
//   ------------------------+----------------------------------+-------------------------+------
//   redis_read_lease        | read_write_lease try_acquire_read| lease try_acquire +     | ~1
//                           | + release (2 round trips)        | release (2 round trips) |
//   redis_write_lease       | try_acquire_write + release      | the same                | ~1
//   redis_store_shared_grant| try_acquire_rw + release_rw      | try_acquire + release   | ~1
//
// Both sides are two round trips; the ratio is the price of the read-write script (HGETALL, TIME
// and the record's parse) over the plain one (GET, SET PX). Figures are run_paired's medians, the
// ratio subject over baseline. Needs HOLDFAST_REDIS_PORT (.ci/servers start); without it each
// benchmark is skipped.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>

#include "bench_common.hpp"
#include "holdfast/stores/redis.hpp"
#include "read_write_pairs.hpp"

namespace {

using holdfast_bench::run_rw_lease_vs_lease;
using holdfast_bench::run_shared_grant_vs_grant;
using holdfast_bench::with_min_max;

constexpr std::chrono::milliseconds kTtl{10'000};

std::optional<holdfast::redis_options> bench_options() {
  const char* port = std::getenv("HOLDFAST_REDIS_PORT");
  if (port == nullptr) return std::nullopt;
  holdfast::redis_options o;
  o.port = std::atoi(port);
  if (const char* host = std::getenv("HOLDFAST_REDIS_HOST")) o.host = host;
  if (const char* pw = std::getenv("HOLDFAST_REDIS_PASSWORD")) o.password = pw;
  o.key_prefix = "{hf-bench-rw}:lease:";
  o.counter_key = "{hf-bench-rw}:token";
  o.wait_prefix = "{hf-bench-rw}:wait:";
  return o;
}

// Options for one benchmark's store, or nullopt after SkipWithError.
std::optional<holdfast::redis_options> options_or_skip(benchmark::State& state) {
  std::optional<holdfast::redis_options> o = bench_options();
  if (!o) state.SkipWithError("no Redis: set HOLDFAST_REDIS_PORT (.ci/servers start)");
  return o;
}

template <bool Write>
void BM_redis_rw_lease(benchmark::State& state) {
  const std::optional<holdfast::redis_options> o = options_or_skip(state);
  if (!o) return;
  holdfast::redis_store redis(*o);
  if (!redis.connect()) return state.SkipWithError("cannot reach Redis");
  run_rw_lease_vs_lease<Write>(state, redis, kTtl);
}
void BM_redis_read_lease(benchmark::State& state) {
  BM_redis_rw_lease<false>(state);
}
void BM_redis_write_lease(benchmark::State& state) {
  BM_redis_rw_lease<true>(state);
}
BENCHMARK(BM_redis_read_lease)->Apply(with_min_max);
BENCHMARK(BM_redis_write_lease)->Apply(with_min_max);

void BM_redis_store_shared_grant(benchmark::State& state) {
  const std::optional<holdfast::redis_options> o = options_or_skip(state);
  if (!o) return;
  holdfast::redis_store redis(*o);
  if (!redis.connect()) return state.SkipWithError("cannot reach Redis");
  run_shared_grant_vs_grant(state, redis, "doc", kTtl);
}
BENCHMARK(BM_redis_store_shared_grant)->Apply(with_min_max);

}  // namespace
