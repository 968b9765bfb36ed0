// SPDX-License-Identifier: MIT
// tests/benchmarks/bench_postgres.cpp - latency of one acquire + release against a real
// PostgreSQL: holdfast's postgres_store next to session advisory locks, in one run.
//
//   variant    | round trips | what it does
//   -----------+-------------+------------------------------------------------------------------
//   holdfast   | 2           | prepared INSERT ... ON CONFLICT (grant + token from a sequence,
//              |             | a durable row) + prepared UPDATE (owner/token-checked release)
//   advisory   | 2           | SELECT pg_try_advisory_lock($1) + SELECT pg_advisory_unlock($1):
//              |             | in memory only, no token, no TTL, dies with the session (baseline)
//   bare       | 2           | two prepared "UPDATE one row SET v = v + 1": the cheapest durable
//              |             | write of the same shape (each commits, as holdfast's do)
//
// BM_postgres_side_by_side interleaves the three in every iteration (rotating their order) and
// reports per-variant median and p99 in microseconds and the ratios holdfast/advisory and
// holdfast/bare as counters.
// The holdfast statements write and commit (WAL), so their cost depends on the server's
// synchronous_commit and fsync: tests/benchmarks/run_store_benchmarks.sh says which it used.
//
// The server comes from HOLDFAST_PG_CONNINFO; .ci/servers starts one.
#include <benchmark/benchmark.h>
#include <libpq-fe.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "holdfast/stores/postgres.hpp"

namespace {

std::optional<holdfast::postgres_options> bench_options() {
  const char* ci = std::getenv("HOLDFAST_PG_CONNINFO");
  if (ci == nullptr) return std::nullopt;
  holdfast::postgres_options o;
  o.conninfo = ci;
  o.table = "holdfast_bench_leases";
  return o;
}

/// A plain libpq session with the advisory-lock statements prepared.
class advisory_client {
 public:
  explicit advisory_client(const std::string& conninfo) : c_(PQconnectdb(conninfo.c_str())) {
    if (!good()) return;
    PQclear(PQprepare(c_, "lock", "SELECT pg_try_advisory_lock($1::int8)", 1, nullptr));
    PQclear(PQprepare(c_, "unlock", "SELECT pg_advisory_unlock($1::int8)", 1, nullptr));
    PQclear(PQexec(c_, "SET client_min_messages = warning"));
    PQclear(PQexec(c_,
                   "CREATE TABLE IF NOT EXISTS holdfast_bench_bare (id int PRIMARY KEY, v bigint); "
                   "INSERT INTO holdfast_bench_bare VALUES (1, 0) ON CONFLICT DO NOTHING"));
    PQclear(
        PQprepare(c_, "bump", "UPDATE holdfast_bench_bare SET v = v + 1 WHERE id = 1", 0, nullptr));
  }
  ~advisory_client() { PQfinish(c_); }
  advisory_client(const advisory_client&) = delete;
  advisory_client& operator=(const advisory_client&) = delete;
  [[nodiscard]] bool good() const { return c_ != nullptr && PQstatus(c_) == CONNECTION_OK; }

  bool once() { return call("lock") && call("unlock"); }
  bool bare_once() { return bump() && bump(); }

 private:
  bool call(const char* name) {
    const char* values[] = {"7243"};
    PGresult* r = PQexecPrepared(c_, name, 1, values, nullptr, nullptr, 0);
    const bool ok =
        PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 && PQgetvalue(r, 0, 0)[0] == 't';
    PQclear(r);
    return ok;
  }
  bool bump() {
    PGresult* r = PQexecPrepared(c_, "bump", 0, nullptr, nullptr, nullptr, 0);
    const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    PQclear(r);
    return ok;
  }
  PGconn* c_;
};

constexpr std::string_view kOwner = "0123456789abcdef0123456789abcdef";

bool holdfast_once(holdfast::postgres_store& s) {
  auto g = s.try_acquire("bench", kOwner, std::chrono::seconds(10));
  return g && s.release("bench", kOwner, g->token);
}

void BM_postgres_side_by_side(benchmark::State& state) {
  std::optional<holdfast::postgres_options> o = bench_options();
  if (!o) {
    state.SkipWithError("HOLDFAST_PG_CONNINFO is unset: start a server (.ci/servers start)");
    return;
  }
  holdfast::postgres_store store(*o);
  advisory_client adv(o->conninfo);
  if (!store.connect() || !adv.good()) {
    state.SkipWithError("cannot reach PostgreSQL");
    return;
  }
  holdfast_bench::run_side_by_side(state,
                                   {{"holdfast", [&] { return holdfast_once(store); }},
                                    {"advisory", [&] { return adv.once(); }},
                                    {"bare", [&] { return adv.bare_once(); }}},
                                   "hf/", "a statement failed");
}
BENCHMARK(BM_postgres_side_by_side)->Unit(benchmark::kMicrosecond);

void BM_postgres_holdfast_acquire_release(benchmark::State& state) {
  std::optional<holdfast::postgres_options> o = bench_options();
  if (!o) {
    state.SkipWithError("HOLDFAST_PG_CONNINFO is unset: start a server (.ci/servers start)");
    return;
  }
  holdfast::postgres_store store(*o);
  holdfast_bench::run_latency(
      state, [&] { return holdfast_once(store); }, "a statement failed");
}
BENCHMARK(BM_postgres_holdfast_acquire_release)->Unit(benchmark::kMicrosecond);

void BM_postgres_advisory_lock_unlock(benchmark::State& state) {
  std::optional<holdfast::postgres_options> o = bench_options();
  if (!o) {
    state.SkipWithError("HOLDFAST_PG_CONNINFO is unset: start a server (.ci/servers start)");
    return;
  }
  advisory_client adv(o->conninfo);
  holdfast_bench::run_latency(
      state, [&] { return adv.once(); }, "a statement failed");
}
BENCHMARK(BM_postgres_advisory_lock_unlock)->Unit(benchmark::kMicrosecond);

}  // namespace
