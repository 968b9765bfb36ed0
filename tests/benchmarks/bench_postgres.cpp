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

#include "holdfast/stores/postgres.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

std::optional<holdfast::postgres_options> bench_options() {
  const char* ci = std::getenv("HOLDFAST_PG_CONNINFO");
  if (ci == nullptr) return std::nullopt;
  holdfast::postgres_options o;
  o.conninfo = ci;
  o.table = "holdfast_bench_leases";
  return o;
}

class latencies {
 public:
  void add(clock_type::duration d) {
    ns_.push_back(
        static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count()));
  }
  double quantile_us(double p) {
    if (ns_.empty()) return 0;
    std::sort(ns_.begin(), ns_.end());
    const std::size_t rank =
        static_cast<std::size_t>(p * static_cast<double>(ns_.size() - 1) + 0.5);
    return ns_[std::min(rank, ns_.size() - 1)] / 1000.0;
  }

 private:
  std::vector<double> ns_;
};

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
  latencies hf, ad, bare;
  std::size_t i = 0;
  for (auto _ : state) {
    bool good = true;
    for (std::size_t k = 0; k < 3; ++k) {  // rotate the order: no variant always goes first
      const auto t0 = clock_type::now();
      switch ((i + k) % 3) {
        case 0:
          good = holdfast_once(store) && good;
          hf.add(clock_type::now() - t0);
          break;
        case 1:
          good = adv.once() && good;
          ad.add(clock_type::now() - t0);
          break;
        default:
          good = adv.bare_once() && good;
          bare.add(clock_type::now() - t0);
          break;
      }
    }
    if (!good) {
      state.SkipWithError("a statement failed");
      return;
    }
    ++i;
  }
  const double hf50 = hf.quantile_us(0.5), hf99 = hf.quantile_us(0.99);
  const double ad50 = ad.quantile_us(0.5), ad99 = ad.quantile_us(0.99);
  state.counters["holdfast_p50_us"] = hf50;
  state.counters["holdfast_p99_us"] = hf99;
  state.counters["advisory_p50_us"] = ad50;
  state.counters["advisory_p99_us"] = ad99;
  state.counters["hf/advisory_p50"] = ad50 > 0 ? hf50 / ad50 : 0;
  state.counters["hf/advisory_p99"] = ad99 > 0 ? hf99 / ad99 : 0;
  const double b50 = bare.quantile_us(0.5), b99 = bare.quantile_us(0.99);
  state.counters["bare_p50_us"] = b50;
  state.counters["bare_p99_us"] = b99;
  state.counters["hf/bare_p50"] = b50 > 0 ? hf50 / b50 : 0;
  state.counters["hf/bare_p99"] = b99 > 0 ? hf99 / b99 : 0;
}
BENCHMARK(BM_postgres_side_by_side)->Unit(benchmark::kMicrosecond);

void BM_postgres_holdfast_acquire_release(benchmark::State& state) {
  std::optional<holdfast::postgres_options> o = bench_options();
  if (!o) {
    state.SkipWithError("HOLDFAST_PG_CONNINFO is unset: start a server (.ci/servers start)");
    return;
  }
  holdfast::postgres_store store(*o);
  latencies l;
  for (auto _ : state) {
    const auto t0 = clock_type::now();
    if (!holdfast_once(store)) {
      state.SkipWithError("a statement failed");
      return;
    }
    l.add(clock_type::now() - t0);
  }
  state.counters["p50_us"] = l.quantile_us(0.5);
  state.counters["p99_us"] = l.quantile_us(0.99);
}
BENCHMARK(BM_postgres_holdfast_acquire_release)->Unit(benchmark::kMicrosecond);

void BM_postgres_advisory_lock_unlock(benchmark::State& state) {
  std::optional<holdfast::postgres_options> o = bench_options();
  if (!o) {
    state.SkipWithError("HOLDFAST_PG_CONNINFO is unset: start a server (.ci/servers start)");
    return;
  }
  advisory_client adv(o->conninfo);
  latencies l;
  for (auto _ : state) {
    const auto t0 = clock_type::now();
    if (!adv.once()) {
      state.SkipWithError("a statement failed");
      return;
    }
    l.add(clock_type::now() - t0);
  }
  state.counters["p50_us"] = l.quantile_us(0.5);
  state.counters["p99_us"] = l.quantile_us(0.99);
}
BENCHMARK(BM_postgres_advisory_lock_unlock)->Unit(benchmark::kMicrosecond);

}  // namespace
