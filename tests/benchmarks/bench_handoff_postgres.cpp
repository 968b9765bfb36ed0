// SPDX-License-Identifier: MIT
// tests/benchmarks/bench_handoff_postgres.cpp - hand-off latency on PostgreSQL: blocking acquire()
// that waits in the store (wait_for_release: LISTEN on the store's channel, woken by the release
// statement's pg_notify) next to the polling acquire it replaces (backoff 10 ms doubling to 1 s,
// full jitter), with 1 and with 16 waiters, in one run, on the server HOLDFAST_PG_CONNINFO names.
// Every thread has its own postgres_store (its own connections). Store requests are counted by
// the server: xact_commit + xact_rollback of the database (pg_stat_database; every holdfast
// statement is one transaction; the statistics are flushed when a session is idle, so the count
// waits a second before and after the run and subtracts its own queries). A `SELECT 1` round trip
// is measured in the same run as the unit the goal is stated in (median, µs). See handoff.hpp for
// the protocol; the figures are in README.md. Its ctest smoke run takes ~15 s (the counts wait for
// the statistics, and a polling hand-off sleeps between tries).
#include <benchmark/benchmark.h>
#include <libpq-fe.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "bench_common.hpp"
#include "handoff.hpp"
#include "holdfast/stores/postgres.hpp"

namespace {

using holdfast_bench::polling;

std::optional<holdfast::postgres_options> bench_options() {
  const char* c = std::getenv("HOLDFAST_PG_CONNINFO");
  if (c == nullptr || *c == '\0') return std::nullopt;
  holdfast::postgres_options o;
  o.conninfo = c;
  o.table = "hf_bench_handoff";
  return o;
}

struct admin {
  explicit admin(const std::string& conninfo) : c(PQconnectdb(conninfo.c_str())) {}
  ~admin() { PQfinish(c); }
  admin(const admin&) = delete;
  admin& operator=(const admin&) = delete;
  bool ok() const { return c != nullptr && PQstatus(c) == CONNECTION_OK; }

  // Transactions of this database so far, as the statistics collector last flushed them.
  std::uint64_t transactions() {
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));  // sessions flush when idle
    PQclear(PQexec(c, "SELECT pg_stat_clear_snapshot()"));
    PGresult* r = PQexec(c,
                         "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = "
                         "current_database()");
    std::uint64_t n = 0;
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1) {
      n = std::strtoull(PQgetvalue(r, 0, 0), nullptr, 10);
    }
    PQclear(r);
    return n;
  }

  // Median `SELECT 1` round trip (µs) over `n`.
  double rtt_us(int n) {
    std::vector<double> v;
    for (int i = 0; i < n; ++i) {
      const auto t0 = holdfast_bench::handoff_clock::now();
      PQclear(PQexec(c, "SELECT 1"));
      v.push_back(
          std::chrono::duration<double, std::micro>(holdfast_bench::handoff_clock::now() - t0)
              .count());
    }
    return holdfast_bench::percentile(v, 0.5);
  }

  PGconn* c;
};

template <bool Wait>
void BM_handoff_postgres(benchmark::State& state) {
  const std::optional<holdfast::postgres_options> o = bench_options();
  if (!o) {
    state.SkipWithError("no PostgreSQL: set HOLDFAST_PG_CONNINFO (.ci/servers start)");
    return;
  }
  admin a(o->conninfo);
  if (!a.ok()) {
    state.SkipWithError("cannot reach PostgreSQL");
    return;
  }
  const int waiters = static_cast<int>(state.range(0));
  const auto handoffs = static_cast<std::uint64_t>(state.range(1));
  for (auto _ : state) {
    std::vector<std::unique_ptr<holdfast::postgres_store>> stores;
    std::vector<std::unique_ptr<polling<holdfast::postgres_store>>> polled;
    for (int i = 0; i <= waiters; ++i) {
      stores.push_back(std::make_unique<holdfast::postgres_store>(*o));
      (void)stores.back()->connect();
      polled.push_back(std::make_unique<polling<holdfast::postgres_store>>(
          polling<holdfast::postgres_store>{stores.back().get()}));
    }
    const double rtt = a.rtt_us(200);
    const std::uint64_t before = a.transactions();
    holdfast_bench::handoff_result r;
    if constexpr (Wait) {
      r = holdfast_bench::run_handoffs<holdfast::postgres_store*>(
          [&](int i) { return stores[static_cast<std::size_t>(i)].get(); }, waiters, handoffs,
          std::chrono::microseconds(3000), "k");
    } else {
      r = holdfast_bench::run_handoffs<polling<holdfast::postgres_store>*>(
          [&](int i) { return polled[static_cast<std::size_t>(i)].get(); }, waiters, handoffs,
          std::chrono::microseconds(3000), "k");
    }
    // The count's own queries: two per transactions() call (clear snapshot, select).
    const std::uint64_t used = a.transactions() - before - 2;
    holdfast_bench::report_handoffs(state, r, used);
    state.counters["rtt_us"] = rtt;
    if (rtt > 0) state.counters["median_rtts"] = state.counters["median_us"] / rtt;
  }
  state.SetLabel(Wait ? "wait_for_release (LISTEN/NOTIFY)" : "polling (backoff)");
}

BENCHMARK_TEMPLATE(BM_handoff_postgres, true)
    ->Args({1, 50})
    ->Args({16, 50})
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->Apply(holdfast_bench::with_min_max);
BENCHMARK_TEMPLATE(BM_handoff_postgres, false)
    ->Args({1, 5})
    ->Args({16, 5})
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->Apply(holdfast_bench::with_min_max);

}  // namespace
