// tests/benchmarks/bench_quorum_redis.cpp - acquire + release latency of
// quorum_store over 3 and 5 local Redis servers against one redis_store, in one
// run.
//
//   variant  | requests per acquire+release                       | target
//   ---------+----------------------------------------------------+--------------------------
//   single   | 1 acquire script + 1 release script, one server    | (the
//   baseline) quorum3  | the same to 3 servers at once (one worker each)    |
//   (info) quorum5  | the same to 5 servers at once                      |
//   quorum5 / single <= 1.5
//
// The quorum's requests are in flight together (quorum_dispatch::threads), so
// its latency is the slowest of the majority's round trips plus the hand-offs
// to and from the workers. The members' counters agree after the first grant,
// so every acquire is one round (no raise round).
//
// BM_quorum_redis_side_by_side interleaves the three in every iteration
// (rotating their order), so all see the same machine at the same moment, and
// reports per-variant median and p99 latency in microseconds and the ratios
// quorum3/single and quorum5/single (of the medians). The five servers are
// started by the benchmark itself (tests/support/real_servers.hpp: redis-server
// on free ports, no persistence), and inherit its CPU affinity: run it under
// `taskset -c 0` to put everything on one CPU.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "../support/real_servers.hpp"
#include "bench_common.hpp"
#include "holdfast/quorum.hpp"
#include "holdfast/stores/redis.hpp"

namespace {

using clock_type = std::chrono::steady_clock;
using holdfast::redis_store;
constexpr std::string_view kOwner = "0123456789abcdef0123456789abcdef";  // a 128-bit owner id
constexpr std::chrono::milliseconds kTtl{10'000};

/// Five redis-server processes for the whole program (stopped at exit), or none
/// if they cannot be started.
std::vector<std::unique_ptr<hf_test::redis_server>>& servers() {
  static std::vector<std::unique_ptr<hf_test::redis_server>> s = [] {
    std::vector<std::unique_ptr<hf_test::redis_server>> v;
    for (int i = 0; i < 5; ++i) {
      auto srv = std::make_unique<hf_test::redis_server>();
      if (!srv->start()) return std::vector<std::unique_ptr<hf_test::redis_server>>{};
      v.push_back(std::move(srv));
    }
    return v;
  }();
  return s;
}

std::unique_ptr<redis_store> store_on(const hf_test::redis_server& srv, const std::string& tag) {
  holdfast::redis_options o;
  o.port = srv.port();
  o.key_prefix = "{hfb-" + tag + "}:lease:";
  o.counter_key = "{hfb-" + tag + "}:token";
  return std::make_unique<redis_store>(o);
}

template <class Store>
bool once(Store& s) {
  auto g = s.try_acquire("bench", kOwner, kTtl);
  return g && s.release("bench", kOwner, g->token);
}

void BM_quorum_redis_side_by_side(benchmark::State& state) {
  auto& srv = servers();
  if (srv.size() != 5) {
    state.SkipWithError(
        "cannot start five redis-server processes (is "
        "redis-server installed?)");
    return;
  }
  const std::string tag = hf_test::random_tag();
  auto single = store_on(*srv[0], tag + "-1");
  std::vector<std::unique_ptr<redis_store>> m3, m5;
  for (std::size_t i = 0; i < 3; ++i) m3.push_back(store_on(*srv[i], tag + "-3"));
  for (std::size_t i = 0; i < 5; ++i) m5.push_back(store_on(*srv[i], tag + "-5"));
  holdfast::quorum_options o;
  o.member_timeout = std::chrono::milliseconds(1000);
  holdfast::quorum_store<redis_store> q3({m3[0].get(), m3[1].get(), m3[2].get()}, o);
  holdfast::quorum_store<redis_store> q5(
      {m5[0].get(), m5[1].get(), m5[2].get(), m5[3].get(), m5[4].get()}, o);
  if (!once(*single) || !once(q3) || !once(q5)) {  // also connects every member
    state.SkipWithError("a warm-up acquire+release failed");
    return;
  }
  holdfast_bench::latencies l1, l3, l5;
  std::size_t i = 0;
  for (auto _ : state) {
    bool good = true;
    for (std::size_t k = 0; k < 3; ++k) {  // rotate the order: no variant always goes first
      const auto t0 = clock_type::now();
      switch ((i + k) % 3) {
        case 0:
          good = once(*single) && good;
          l1.add(clock_type::now() - t0);
          break;
        case 1:
          good = once(q3) && good;
          l3.add(clock_type::now() - t0);
          break;
        default:
          good = once(q5) && good;
          l5.add(clock_type::now() - t0);
          break;
      }
    }
    if (!good) {
      state.SkipWithError("an acquire or release failed");
      return;
    }
    ++i;
  }
  const double s50 = l1.quantile_us(0.5);
  const double q3_50 = l3.quantile_us(0.5);
  const double q5_50 = l5.quantile_us(0.5);
  state.counters["single_us"] = s50;
  state.counters["quorum3_us"] = q3_50;
  state.counters["quorum5_us"] = q5_50;
  state.counters["single_p99_us"] = l1.quantile_us(0.99);
  state.counters["quorum3_p99_us"] = l3.quantile_us(0.99);
  state.counters["quorum5_p99_us"] = l5.quantile_us(0.99);
  state.counters["q3_ratio"] = s50 > 0 ? q3_50 / s50 : 0;
  state.counters["q5_ratio"] = s50 > 0 ? q5_50 / s50 : 0;
  state.SetLabel("medians; q5_ratio target <= 1.5");
}
BENCHMARK(BM_quorum_redis_side_by_side)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace
