// SPDX-License-Identifier: MIT
// tests/benchmarks/bench_keepalive_postgres.cpp - one keepalive renewing many leases on one
// PostgreSQL: renewals per second and client CPU per renewal, batched (postgres_store::
// renew_batch: one UPDATE ... FROM unnest statement per batch of 256) against one statement per
// renewal (max_batch = 1), in the same iteration. The same program as bench_keepalive_redis.cpp
// (see it for the method), on the server HOLDFAST_PG_CONNINFO names, a table of its own per run.
#include <benchmark/benchmark.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "holdfast/keepalive.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/stores/postgres.hpp"

namespace {

using namespace std::chrono_literals;

// Steady time plus an offset the benchmark moves forward: every lease falls due at once without
// waiting for real. Never moves back, so no lease sees a regression.
struct offset_clock {
  using duration = std::chrono::steady_clock::duration;
  using rep = duration::rep;
  using period = duration::period;
  using time_point = std::chrono::time_point<offset_clock, duration>;
  static inline std::atomic<std::int64_t> offset_ns{0};
  time_point now() const noexcept {
    return time_point(std::chrono::steady_clock::now().time_since_epoch() +
                      std::chrono::nanoseconds(offset_ns.load()));
  }
  void sleep_until(const time_point&) const {}  // never slept on: poll() is driven by hand
};

using rlease = holdfast::lease<holdfast::postgres_store, offset_clock>;

std::optional<holdfast::postgres_options> bench_options() {
  const char* c = std::getenv("HOLDFAST_PG_CONNINFO");
  if (c == nullptr || *c == '\0') return std::nullopt;
  holdfast::postgres_options o;
  o.conninfo = c;
  o.table = "hf_bench_ka_" + std::to_string(std::random_device{}() % 1000000);
  return o;
}

std::int64_t thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

// N leases on one keepalive with the given max_batch.
struct fleet {
  fleet(holdfast::postgres_store& store, const std::string& name, std::int64_t n,
        std::size_t max_batch)
      : ka(offset_clock{}, options(max_batch)) {
    holdfast::acquire_options<offset_clock> ao;
    leases.reserve(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) {
      auto l = holdfast::try_acquire(store, name + std::to_string(i), 60s, ao);
      if (!l) return;
      leases.push_back(std::move(*l));
      if (!ka.add(leases.back())) return;
    }
    ok = true;
  }
  static holdfast::keepalive_options options(std::size_t max_batch) {
    holdfast::keepalive_options o;
    o.start_thread = false;
    o.max_batch = max_batch;
    return o;
  }
  // One poll() renewing every lease: {wall ns, thread CPU ns}; {-1, -1} if one was not renewed.
  std::pair<std::int64_t, std::int64_t> pass() {
    const std::uint64_t before = ka.stats().renewals;
    const std::int64_t cpu0 = thread_cpu_ns();
    const auto t0 = std::chrono::steady_clock::now();
    (void)ka.poll();
    const auto t1 = std::chrono::steady_clock::now();
    const std::int64_t cpu1 = thread_cpu_ns();
    if (ka.stats().renewals - before != leases.size()) return {-1, -1};
    return {std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count(), cpu1 - cpu0};
  }

  std::vector<rlease> leases;
  holdfast::keepalive<offset_clock> ka;
  bool ok = false;
};

void BM_keepalive_postgres(benchmark::State& state) {
  const std::optional<holdfast::postgres_options> o = bench_options();
  if (!o) {
    state.SkipWithError("HOLDFAST_PG_CONNINFO unset (bash .ci/servers start)");
    return;
  }
  const std::int64_t n = state.range(0);
  holdfast::postgres_store store_batched(*o);
  holdfast::postgres_store store_single(*o);
  fleet batched(store_batched, "b", n, 256);
  fleet single(store_single, "s", n, 1);
  if (!batched.ok || !single.ok) {
    state.SkipWithError(("cannot acquire the leases: " + store_batched.last_error_message() +
                         store_single.last_error_message())
                            .c_str());
    return;
  }
  std::vector<double> pass, base, cpu, base_cpu, ratio;
  bool first_batched = true;
  for (auto _ : state) {
    offset_clock::offset_ns += std::chrono::nanoseconds(30s).count();  // half a TTL: all due
    std::pair<std::int64_t, std::int64_t> b, s;
    if (first_batched) {
      b = batched.pass();
      s = single.pass();
    } else {
      s = single.pass();
      b = batched.pass();
    }
    first_batched = !first_batched;
    if (b.first < 0 || s.first < 0) {
      state.SkipWithError("a renewal was not granted");
      return;
    }
    pass.push_back(static_cast<double>(b.first));
    base.push_back(static_cast<double>(s.first));
    cpu.push_back(static_cast<double>(b.second) / static_cast<double>(n));
    base_cpu.push_back(static_cast<double>(s.second) / static_cast<double>(n));
    ratio.push_back(static_cast<double>(b.first) / static_cast<double>(s.first));
  }
  const double p = holdfast_bench::median_of(pass);
  const double q = holdfast_bench::median_of(base);
  const double nn = static_cast<double>(n);
  state.counters["pass_ms"] = p / 1e6;
  state.counters["base_pass_ms"] = q / 1e6;
  state.counters["renewals_per_s"] = p > 0 ? nn * 1e9 / p : 0;
  state.counters["base_renewals_s"] = q > 0 ? nn * 1e9 / q : 0;
  state.counters["cpu_ns"] = holdfast_bench::median_of(cpu);
  state.counters["base_cpu_ns"] = holdfast_bench::median_of(base_cpu);
  state.counters["ratio"] = holdfast_bench::median_of(ratio);
  state.SetItemsProcessed(state.iterations() * 2 * n);
  state.SetLabel("vs max_batch=1 (one round trip per renewal); goal: 10,000 within TTL/10");
}
// The ctest smoke run (--benchmark_min_time=0.001) stops at 100 leases: 10,000 cost 20,000
// acquires, releases and a one-at-a-time pass, tens of seconds on a loaded machine.
bool smoke_run() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string args((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return args.find("--benchmark_min_time=0.001") != std::string::npos;
}

void many_leases(benchmark::internal::Benchmark* b) {
  b->Arg(1)->Arg(100);
  if (!smoke_run()) b->Arg(10000);
}

BENCHMARK(BM_keepalive_postgres)
    ->Apply(many_leases)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Apply(holdfast_bench::with_min_max);

}  // namespace
