// SPDX-License-Identifier: MIT
// tests/benchmarks/bench_redis_ack.cpp - what acknowledgement by a replica costs: one acquire +
// release on redis_store with wait_replicas = 1 (a WAIT after the granting acquire, one more
// round trip, answered once the replica has the grant) next to the same pair without it, on the
// same primary in the same iterations (run_side_by_side: rotating order, per-variant p50/p99 in
// µs, and ack/plain ratios). The primary and its replica come from .ci/servers
// (HOLDFAST_REDIS_PORT, whose replica HOLDFAST_REDIS_REPLICA_PORT is).
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>

#include "bench_common.hpp"
#include "holdfast/stores/redis.hpp"

namespace {

std::optional<holdfast::redis_options> ack_options(int replicas) {
  const char* port = std::getenv("HOLDFAST_REDIS_PORT");
  if (port == nullptr || std::getenv("HOLDFAST_REDIS_REPLICA_PORT") == nullptr) return std::nullopt;
  holdfast::redis_options o;
  o.port = std::atoi(port);
  if (const char* host = std::getenv("HOLDFAST_REDIS_HOST")) o.host = host;
  o.key_prefix = "{holdfast-bench-ack}:lease:";
  o.counter_key = "{holdfast-bench-ack}:token";
  o.wait_replicas = replicas;
  return o;
}

bool acquire_release(holdfast::redis_store& s, const std::string& key) {
  auto g = s.try_acquire(key, holdfast_bench::sample_owner(), std::chrono::seconds(10));
  return g && s.release(key, holdfast_bench::sample_owner(), g->token);
}

void BM_redis_ack_side_by_side(benchmark::State& state) {
  std::optional<holdfast::redis_options> ack = ack_options(1);
  std::optional<holdfast::redis_options> plain = ack_options(0);
  if (!ack || !plain) {
    state.SkipWithError("HOLDFAST_REDIS_PORT / _REPLICA_PORT unset: start .ci/servers");
    return;
  }
  holdfast::redis_store with_ack(*ack);
  holdfast::redis_store without(*plain);
  holdfast_bench::run_side_by_side(state,
                                   {{"ack", [&] { return acquire_release(with_ack, "a"); }},
                                    {"plain", [&] { return acquire_release(without, "p"); }}},
                                   "ack/", "an acquire or release failed");
}
BENCHMARK(BM_redis_ack_side_by_side)->Unit(benchmark::kMicrosecond);

}  // namespace
