// SPDX-License-Identifier: MIT
// tests/benchmarks/bench_semaphore_handoff_redis.cpp - the semaphore's hand-off on Redis: 4
// permits, 16 waiters in semaphore::acquire(), every thread with its own redis_store; next to the
// same semaphore over a forwarder that hides the store's waiting (polling with backoff), in one
// run. Store requests are counted by the server (EVALSHA calls from INFO commandstats, as in
// bench_handoff_redis.cpp); connecting and SUBSCRIBE are not counted. The median PING round trip
// of the same run is rtt_us. See semaphore_handoff.hpp; the figures are in README.md.
#include <benchmark/benchmark.h>
#include <hiredis/hiredis.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "bench_common.hpp"
#include "handoff.hpp"
#include "holdfast/semaphore.hpp"
#include "holdfast/stores/redis.hpp"
#include "semaphore_handoff.hpp"

namespace {

using holdfast_bench::polling;

std::optional<holdfast::redis_options> bench_options() {
  const char* port = std::getenv("HOLDFAST_REDIS_PORT");
  if (port == nullptr) return std::nullopt;
  holdfast::redis_options o;
  o.port = std::atoi(port);
  if (const char* host = std::getenv("HOLDFAST_REDIS_HOST")) o.host = host;
  if (const char* pw = std::getenv("HOLDFAST_REDIS_PASSWORD")) o.password = pw;
  o.key_prefix = "{holdfast-bench-sem}:lease:";
  o.counter_key = "{holdfast-bench-sem}:token";
  o.wait_prefix = "{holdfast-bench-sem}:wait:";
  return o;
}

// A plain connection of the benchmark's own: counts the server's EVALSHA calls, times PING.
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
  std::uint64_t requests() {
    auto* r = static_cast<redisReply*>(redisCommand(c, "INFO commandstats"));
    std::uint64_t n = 0;
    if (r != nullptr && r->type == REDIS_REPLY_STRING) {
      const std::string text(r->str, r->len);
      const char* name = "cmdstat_evalsha:calls=";
      const std::size_t at = text.find(name);
      if (at != std::string::npos) {
        n = std::strtoull(text.c_str() + at + std::strlen(name), nullptr, 10);
      }
    }
    freeReplyObject(r);
    return n;
  }
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

// Store: redis_store itself, or polling<redis_store> (the store's waiting hidden).
template <class Store>
void run(benchmark::State& state, admin& a, const holdfast::redis_options& o) {
  const int permits = static_cast<int>(state.range(0));
  const int waiters = static_cast<int>(state.range(1));
  const auto handoffs = static_cast<std::uint64_t>(state.range(2));
  holdfast::semaphore_options<> so;
  so.renew = state.range(3) != 0;  // renew = 0: no keepalive, as before issue 22 part 5
  using sem_type = holdfast::semaphore<Store>;
  std::vector<std::unique_ptr<holdfast::redis_store>> stores;
  std::vector<std::unique_ptr<polling<holdfast::redis_store>>> wrappers;
  std::vector<std::unique_ptr<sem_type>> sems;
  for (int i = 0; i < permits + waiters; ++i) {
    stores.push_back(std::make_unique<holdfast::redis_store>(o));
    (void)stores.back()->connect();
    Store* seen = nullptr;
    if constexpr (std::is_same_v<Store, holdfast::redis_store>) {
      seen = stores.back().get();
    } else {
      wrappers.push_back(std::make_unique<Store>(Store{stores.back().get()}));
      seen = wrappers.back().get();
    }
    sems.push_back(std::make_unique<sem_type>(*seen, "sem", static_cast<std::uint32_t>(permits),
                                              std::chrono::seconds(30), so));
  }
  const double rtt = a.rtt_us(200);
  const std::uint64_t before = a.requests();
  const holdfast_bench::handoff_result r = holdfast_bench::run_semaphore_handoffs<sem_type*>(
      [&](int i) { return sems[static_cast<std::size_t>(i)].get(); }, permits, waiters, handoffs,
      std::chrono::microseconds(3000));
  holdfast_bench::report_handoffs(state, r, a.requests() - before);
  state.counters["rtt_us"] = rtt;
  if (rtt > 0) state.counters["median_rtts"] = state.counters["median_us"] / rtt;
}

template <bool Wait>
void BM_semaphore_handoff_redis(benchmark::State& state) {
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
  for (auto _ : state) {
    if constexpr (Wait) {
      run<holdfast::redis_store>(state, a, *o);
    } else {
      run<polling<holdfast::redis_store>>(state, a, *o);
    }
  }
  state.SetLabel(Wait ? "store can wait" : "polling (backoff)");
}

BENCHMARK_TEMPLATE(BM_semaphore_handoff_redis, true)
    ->Args({4, 16, 200, 1})
    ->Args({4, 16, 200, 0})
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->Apply(holdfast_bench::with_min_max);
BENCHMARK_TEMPLATE(BM_semaphore_handoff_redis, false)
    ->Args({4, 16, 50, 1})
    ->Args({4, 16, 50, 0})
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->Apply(holdfast_bench::with_min_max);

}  // namespace
