// SPDX-License-Identifier: MIT
// tests/benchmarks/bench_multi_lease_redis.cpp - all-or-nothing grants of 4 keys on a real Redis
// (redis_store::try_acquire_all: one script, detail/redis_multi.hpp) against single acquires of
// the same keys, in the same run (bench_multi_lease.cpp has the memory_store side).
//
//   benchmark                        | subject                       | baseline             | goal
//   ---------------------------------+-------------------------------+----------------------+-----
//   redis_all4_vs_4_singles          | try_acquire_all(4) + 4 release| 4 x (try_acquire +   | < 1
//                                    | (5 round trips)               | release) (8)         |
//   redis_all4_acquire_vs_one_acquire| try_acquire_all(4), timed     | try_acquire(1), timed| <= 1
//                                    | alone (1 round trip)          | alone (1)            | (+ε)
//   redis_multi_lease4_vs_4_leases   | holdfast::try_acquire_all     | 4 leases acquired and| < 1
//                                    | (4 keys) + release()          | released in turn     |
//
// The goal (25): the atomic path costs no more than one single acquire's round trip; the
// second row measures exactly that (the releases, untimed, happen between the samples). Figures are
// medians over samples (run_paired's, or per call in the second row), with the ratio subject over
// baseline. Needs HOLDFAST_REDIS_PORT (.ci/servers start); without it each benchmark is skipped.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bench_common.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/multi_lease.hpp"
#include "holdfast/stores/redis.hpp"

namespace {

using holdfast_bench::median_of;
using holdfast_bench::run_paired;
using holdfast_bench::sample_owner;
using holdfast_bench::with_min_max;

constexpr std::chrono::milliseconds kTtl{10'000};
const std::vector<std::string> kKeys{"m0", "m1", "m2", "m3"};

std::optional<holdfast::redis_options> bench_options() {
  const char* port = std::getenv("HOLDFAST_REDIS_PORT");
  if (port == nullptr) return std::nullopt;
  holdfast::redis_options o;
  o.port = std::atoi(port);
  if (const char* host = std::getenv("HOLDFAST_REDIS_HOST")) o.host = host;
  if (const char* pw = std::getenv("HOLDFAST_REDIS_PASSWORD")) o.password = pw;
  o.key_prefix = "{hf-bench-multi}:lease:";
  o.counter_key = "{hf-bench-multi}:token";
  o.wait_prefix = "{hf-bench-multi}:wait:";
  return o;
}

void BM_redis_all4_vs_4_singles(benchmark::State& state) {
  const std::optional<holdfast::redis_options> o = bench_options();
  if (!o) {
    state.SkipWithError("no Redis: set HOLDFAST_REDIS_PORT (.ci/servers start)");
    return;
  }
  holdfast::redis_store store(*o);
  if (!store.connect()) {
    state.SkipWithError("cannot reach Redis");
    return;
  }
  const std::string& owner = sample_owner();
  const std::string_view views[4] = {kKeys[0], kKeys[1], kKeys[2], kKeys[3]};
  run_paired(
      state, "vs 4 x (try_acquire + release); goal < 1",
      [&] {
        holdfast::grant g[4];
        if (!store.try_acquire_all(views, 4, owner, kTtl, g)) state.SkipWithError("failed");
        for (int i = 0; i < 4; ++i) (void)store.release(views[i], owner, g[i].token);
      },
      [&] {
        for (const std::string_view k : views) {
          auto g = store.try_acquire(k, owner, kTtl);
          if (!g || !store.release(k, owner, g->token)) state.SkipWithError("failed");
        }
      },
      16);
}
BENCHMARK(BM_redis_all4_vs_4_singles)->Apply(with_min_max);

// The acquire step alone: per sample one try_acquire_all of 4 free keys and one try_acquire of
// 1 free key, each timed by itself (order alternating), the releases between them untimed.
void BM_redis_all4_acquire_vs_one_acquire(benchmark::State& state) {
  const std::optional<holdfast::redis_options> o = bench_options();
  if (!o) {
    state.SkipWithError("no Redis: set HOLDFAST_REDIS_PORT (.ci/servers start)");
    return;
  }
  holdfast::redis_store store(*o);
  if (!store.connect()) {
    state.SkipWithError("cannot reach Redis");
    return;
  }
  using clock = std::chrono::steady_clock;
  const std::string& owner = sample_owner();
  const std::string_view views[4] = {kKeys[0], kKeys[1], kKeys[2], kKeys[3]};
  std::vector<double> all_ns;
  std::vector<double> one_ns;
  std::vector<double> ratios;
  bool all_first = true;
  for (auto _ : state) {
    double spent[2] = {0, 0};
    for (int side = 0; side < 2; ++side) {
      const bool all = (side == 0) == all_first;
      holdfast::grant g[4];
      const clock::time_point t0 = clock::now();
      bool ok = false;
      if (all) {
        ok = store.try_acquire_all(views, 4, owner, kTtl, g).has_value();
      } else {
        auto one = store.try_acquire(views[0], owner, kTtl);
        ok = one.has_value();
        if (ok) g[0] = *one;
      }
      spent[all ? 0 : 1] = static_cast<double>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now() - t0).count());
      if (!ok) state.SkipWithError("acquire failed");
      for (int i = 0; i < (all ? 4 : 1); ++i) (void)store.release(views[i], owner, g[i].token);
    }
    all_first = !all_first;
    all_ns.push_back(spent[0]);
    one_ns.push_back(spent[1]);
    ratios.push_back(spent[1] > 0 ? spent[0] / spent[1] : 0.0);
  }
  state.counters["ns_per_op"] = median_of(all_ns);
  state.counters["base_ns_per_op"] = median_of(one_ns);
  state.counters["ratio"] = median_of(ratios);
  state.SetLabel("try_acquire_all(4) vs try_acquire(1), acquire alone; goal <= 1");
}
BENCHMARK(BM_redis_all4_acquire_vs_one_acquire)->Apply(with_min_max);

void BM_redis_multi_lease4_vs_4_leases(benchmark::State& state) {
  const std::optional<holdfast::redis_options> o = bench_options();
  if (!o) {
    state.SkipWithError("no Redis: set HOLDFAST_REDIS_PORT (.ci/servers start)");
    return;
  }
  holdfast::redis_store store(*o);
  if (!store.connect()) {
    state.SkipWithError("cannot reach Redis");
    return;
  }
  holdfast::acquire_options<> opts;
  opts.owner = sample_owner();
  run_paired(
      state, "vs 4 x lease try_acquire + release; goal < 1",
      [&] {
        auto m = holdfast::try_acquire_all(store, kKeys, kTtl, opts);
        if (!m || !m->release()) state.SkipWithError("try_acquire_all failed");
      },
      [&] {
        for (const std::string& k : kKeys) {
          auto l = holdfast::try_acquire(store, k, kTtl, opts);
          if (!l || !l->release()) state.SkipWithError("single lease failed");
        }
      },
      16);
}
BENCHMARK(BM_redis_multi_lease4_vs_4_leases)->Apply(with_min_max);

}  // namespace
