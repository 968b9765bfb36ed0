// SPDX-License-Identifier: MIT
// tests/benchmarks/bench_handoff_redis.cpp - hand-off latency on Redis: blocking acquire() that
// waits in the store (wait_for_release: the release script wakes the first queued waiter over
// pub/sub) next to the polling acquire it replaces (backoff 10 ms doubling to 1 s, full jitter),
// with 1 and with 16 waiters, in one run. Every thread has its own redis_store (its own
// connections). Store requests are counted by the server: the EVALSHA calls (every holdfast
// operation is one script call), from INFO commandstats before and after. A plain PING round
// trip is measured in the same run as the unit the goal is stated in (median, µs).
// See handoff.hpp for the protocol; the figures are in README.md.
#include <benchmark/benchmark.h>
#include <hiredis/hiredis.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "handoff.hpp"
#include "holdfast/stores/redis.hpp"

namespace {

using holdfast_bench::polling;

std::optional<holdfast::redis_options> bench_options() {
  const char* port = std::getenv("HOLDFAST_REDIS_PORT");
  if (port == nullptr) return std::nullopt;
  holdfast::redis_options o;
  o.port = std::atoi(port);
  if (const char* host = std::getenv("HOLDFAST_REDIS_HOST")) o.host = host;
  if (const char* pw = std::getenv("HOLDFAST_REDIS_PASSWORD")) o.password = pw;
  o.key_prefix = "{holdfast-bench-handoff}:lease:";
  o.counter_key = "{holdfast-bench-handoff}:token";
  o.wait_prefix = "{holdfast-bench-handoff}:wait:";
  return o;
}

struct admin {
  explicit admin(const holdfast::redis_options& o) : c(redisConnect(o.host.c_str(), o.port)) {
    if (c != nullptr && c->err == 0 && !o.password.empty()) {
      freeReplyObject(redisCommand(c, "AUTH %s", o.password.c_str()));
    }
  }
  ~admin() {
    if (c != nullptr) redisFree(c);
  }
  admin(const admin&) = delete;
  admin& operator=(const admin&) = delete;
  bool ok() const { return c != nullptr && c->err == 0; }

  // EVALSHA calls so far (every request holdfast's stores send after connecting).
  std::uint64_t requests() {
    auto* r = static_cast<redisReply*>(redisCommand(c, "INFO commandstats"));
    std::uint64_t n = 0;
    if (r != nullptr && r->type == REDIS_REPLY_STRING) {
      const std::string text(r->str, r->len);
      for (const char* name : {"cmdstat_evalsha:calls="}) {
        const std::size_t at = text.find(name);
        if (at != std::string::npos)
          n += std::strtoull(text.c_str() + at + std::strlen(name), nullptr, 10);
      }
    }
    freeReplyObject(r);
    return n;
  }

  // Median PING round trip (µs) over `n` pings.
  double rtt_us(int n) {
    std::vector<double> v;
    for (int i = 0; i < n; ++i) {
      const auto t0 = holdfast_bench::handoff_clock::now();
      freeReplyObject(redisCommand(c, "PING"));
      v.push_back(
          std::chrono::duration<double, std::micro>(holdfast_bench::handoff_clock::now() - t0)
              .count());
    }
    return holdfast_bench::percentile(v, 0.5);
  }

  redisContext* c;
};

template <bool Wait>
void BM_handoff_redis(benchmark::State& state) {
  const std::optional<holdfast::redis_options> o = bench_options();
  if (!o) {
    state.SkipWithError("no Redis: set HOLDFAST_REDIS_PORT (.ci/servers start)");
    return;
  }
  admin a(*o);
  if (!a.ok()) {
    state.SkipWithError("cannot reach Redis");
    return;
  }
  const int waiters = static_cast<int>(state.range(0));
  const auto handoffs = static_cast<std::uint64_t>(state.range(1));
  for (auto _ : state) {
    std::vector<std::unique_ptr<holdfast::redis_store>> stores;
    std::vector<std::unique_ptr<polling<holdfast::redis_store>>> polled;
    for (int i = 0; i <= waiters; ++i) {
      stores.push_back(std::make_unique<holdfast::redis_store>(*o));
      (void)stores.back()->connect();
      polled.push_back(std::make_unique<polling<holdfast::redis_store>>(
          polling<holdfast::redis_store>{stores.back().get()}));
    }
    const double rtt = a.rtt_us(200);
    const std::uint64_t before = a.requests();
    holdfast_bench::handoff_result r;
    if constexpr (Wait) {
      r = holdfast_bench::run_handoffs<holdfast::redis_store*>(
          [&](int i) { return stores[static_cast<std::size_t>(i)].get(); }, waiters, handoffs,
          std::chrono::microseconds(3000), "k");
    } else {
      r = holdfast_bench::run_handoffs<polling<holdfast::redis_store>*>(
          [&](int i) { return polled[static_cast<std::size_t>(i)].get(); }, waiters, handoffs,
          std::chrono::microseconds(3000), "k");
    }
    const std::uint64_t used = a.requests() - before;
    holdfast_bench::report_handoffs(state, r, used);
    state.counters["rtt_us"] = rtt;
    if (rtt > 0) state.counters["median_rtts"] = state.counters["median_us"] / rtt;
  }
  state.SetLabel(Wait ? "wait_for_release" : "polling (backoff)");
}

BENCHMARK_TEMPLATE(BM_handoff_redis, true)
    ->Args({1, 200})
    ->Args({16, 200})
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->Apply(holdfast_bench::with_min_max);
BENCHMARK_TEMPLATE(BM_handoff_redis, false)
    ->Args({1, 20})
    ->Args({16, 20})
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->Apply(holdfast_bench::with_min_max);

}  // namespace
