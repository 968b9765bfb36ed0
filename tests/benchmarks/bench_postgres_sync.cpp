// SPDX-License-Identifier: MIT
// tests/benchmarks/bench_postgres_sync.cpp - what a synchronous standby costs: one acquire +
// release on postgres_store whose session commits with synchronous_commit = on (each commit
// returns once the synchronous standby flushed it: no grant reported is lost by a promotion)
// next to the same pair with synchronous_commit = local (the commit waits for the primary's own
// disk only: what a primary without a synchronous standby does), on the same primary in the same
// iterations (run_side_by_side: rotating order, per-variant p50/p99 in µs, and sync/local
// ratios).
//
// The primary comes from HOLDFAST_PG_CONNINFO. For the figures it must have a synchronous
// standby: tests/benchmarks/run_store_benchmarks.sh starts .ci/servers with
// `-c synchronous_standby_names=* -c synchronous_commit=local` (every other session commits as
// before; only the "sync" session asks for the standby). The counter sync_standbys says how many
// synchronous standbys were streaming; with 0 (the test servers' asynchronous standby, as in the
// CI smoke run) both variants commit locally and the label says so.
#include <benchmark/benchmark.h>
#include <libpq-fe.h>

#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "bench_common.hpp"
#include "holdfast/stores/postgres.hpp"

namespace {

constexpr std::string_view kOwner = "0123456789abcdef0123456789abcdef";

std::optional<holdfast::postgres_options> session(const char* synchronous_commit) {
  const char* ci = std::getenv("HOLDFAST_PG_CONNINFO");
  if (ci == nullptr || std::string_view(ci).find("://") != std::string_view::npos) {
    return std::nullopt;  // a URI cannot take " options=..." appended
  }
  holdfast::postgres_options o;
  o.conninfo = std::string(ci) + " options='-c synchronous_commit=" + synchronous_commit + "'";
  o.table = "holdfast_bench_sync_leases";
  return o;
}

/// Synchronous standbys streaming from the primary at `conninfo` (-1 if it cannot be asked).
int synchronous_standbys(const std::string& conninfo) {
  PGconn* c = PQconnectdb(conninfo.c_str());
  int n = -1;
  if (PQstatus(c) == CONNECTION_OK) {
    PGresult* r = PQexec(c,
                         "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming' AND "
                         "sync_state IN ('sync', 'quorum')");
    if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1) {
      n = std::atoi(PQgetvalue(r, 0, 0));
    }
    PQclear(r);
  }
  PQfinish(c);
  return n;
}

bool acquire_release(holdfast::postgres_store& s, const std::string& key) {
  auto g = s.try_acquire(key, kOwner, std::chrono::seconds(10));
  return g && s.release(key, kOwner, g->token);
}

void BM_postgres_sync_side_by_side(benchmark::State& state) {
  std::optional<holdfast::postgres_options> sync = session("on");
  std::optional<holdfast::postgres_options> local = session("local");
  if (!sync || !local) {
    state.SkipWithError("HOLDFAST_PG_CONNINFO is unset or a URI: start .ci/servers");
    return;
  }
  holdfast::postgres_store with_standby(*sync);
  holdfast::postgres_store without(*local);
  if (!with_standby.connect() || !without.connect()) {
    state.SkipWithError("cannot reach PostgreSQL");
    return;
  }
  const int standbys = synchronous_standbys(std::getenv("HOLDFAST_PG_CONNINFO"));
  holdfast_bench::run_side_by_side(state,
                                   {{"sync", [&] { return acquire_release(with_standby, "s"); }},
                                    {"local", [&] { return acquire_release(without, "l"); }}},
                                   "sync/", "an acquire or release failed");
  state.counters["sync_standbys"] = standbys;
  if (standbys <= 0) state.SetLabel("no synchronous standby: both variants commit locally");
}
BENCHMARK(BM_postgres_sync_side_by_side)->Unit(benchmark::kMicrosecond);

}  // namespace
