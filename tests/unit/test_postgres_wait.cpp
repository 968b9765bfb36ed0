// SPDX-License-Identifier: MIT
// tests/unit/test_postgres_wait.cpp - postgres_store's wait_for_release: the release statement
// NOTIFYs the table's channel, a waiter LISTENing on a second session wakes at once; a
// terminated listening session ends the wait at once, so the next release still wakes the waiter.
// Real server (HOLDFAST_PG_CONNINFO from .ci/servers), real threads, bounded waits.
#include <libpq-fe.h>
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <thread>

#include "../support/postgres_admin.hpp"
#include "../support/real_servers.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/stores/postgres.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_postgres_wait {

using namespace std::chrono_literals;
using holdfast::errc;
using holdfast::postgres_options;
using holdfast::postgres_store;
using clk = std::chrono::steady_clock;

namespace {

std::optional<postgres_options> server() {
  std::optional<std::string> conninfo = hf_test::env("HOLDFAST_PG_CONNINFO");
  if (!conninfo) {
    if (hf_test::in_ci()) FAIL("HOLDFAST_PG_CONNINFO is not set (run .ci/servers start)");
    hf_test::loud_skip("no PostgreSQL: HOLDFAST_PG_CONNINFO unset");
    return std::nullopt;
  }
  postgres_options o;
  o.conninfo = *conninfo;
  o.table = "hf_wait_" + hf_test::random_tag(8);
  return hf_test::dropped_at_exit(o);  // its tables and sequence
}

bool admin(const postgres_options& o, const std::string& sql) {
  PGconn* c = PQconnectdb(o.conninfo.c_str());
  bool ok = PQstatus(c) == CONNECTION_OK;
  if (ok) {
    PGresult* r = PQexec(c, sql.c_str());
    ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
    PQclear(r);
  }
  PQfinish(c);
  return ok;
}

// Waits (bounded) until a session LISTENs on the table's channel.
bool await_listener(const postgres_options& o) {
  const auto limit = clk::now() + 10s;
  while (clk::now() < limit) {
    PGconn* c = PQconnectdb(o.conninfo.c_str());
    PGresult* r = PQexec(c, "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN%'");
    const bool yes = PQresultStatus(r) == PGRES_TUPLES_OK && std::atoi(PQgetvalue(r, 0, 0)) > 0;
    PQclear(r);
    PQfinish(c);
    if (yes) return true;
    std::this_thread::sleep_for(2ms);
  }
  return false;
}

holdfast::acquire_options<> slow_polling() {
  holdfast::acquire_options<> o;
  o.backoff.initial = 5s;
  o.backoff.max_delay = 5s;
  return o;
}

}  // namespace

TEST_CASE("postgres wait: a release wakes the waiter at once", "[postgres][wait_for_release]") {
  const std::optional<postgres_options> o = server();
  if (!o) return;
  postgres_store holder_store(*o);
  postgres_store waiter_store(*o);
  auto holder = holdfast::try_acquire(holder_store, "job", 30s);
  REQUIRE(holder.has_value());
  std::atomic<bool> released{false};
  clk::time_point released_at{};
  std::atomic<long long> after_us{-1};
  std::thread waiter([&] {
    auto l = holdfast::acquire(waiter_store, "job", 30s, 20s, slow_polling());
    if (l && released.load()) {
      after_us =
          std::chrono::duration_cast<std::chrono::microseconds>(clk::now() - released_at).count();
    }
  });
  REQUIRE(await_listener(*o));
  std::this_thread::sleep_for(50ms);  // let the waiter ask for the holder's time left and sleep
  released_at = clk::now();
  released = true;
  REQUIRE(holder->release().has_value());
  waiter.join();
  REQUIRE(after_us.load() >= 0);
  CHECK(after_us.load() < 2000000);  // far below the 5 s backoff; bounded for CI
  CHECK(admin(*o, "DROP TABLE " + o->table));
}

// Issue 22 part 4: a dead LISTEN session is no reason to sleep until the holder's expiry. The
// listening session is terminated (pg_terminate_backend), then the holder (TTL 3 s) releases.
// Before, the release's NOTIFY reached nobody and the waiter slept it out until the holder's
// expiry (3 s). Expected now: the dead session ends the wait at once, the waiter asks again and
// LISTENs on a fresh session, and the release wakes it well before the 3 s.
TEST_CASE("postgres wait: a terminated LISTEN session does not make the waiter sleep to expiry",
          "[postgres][wait_for_release]") {
  const std::optional<postgres_options> o = server();
  if (!o) return;
  postgres_store holder_store(*o);
  postgres_store waiter_store(*o);
  CHECK(waiter_store.wait_for_release("free", clk::now() + 10s).has_value());
  CHECK(waiter_store.wait_for_release("", clk::now()).error() == errc::invalid_argument);
  auto holder = holdfast::try_acquire(holder_store, "lost", 3s);
  REQUIRE(holder.has_value());
  clk::time_point released_at{};
  std::thread t([&] {
    REQUIRE(await_listener(*o));
    std::this_thread::sleep_for(50ms);
    CHECK(admin(*o,
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE "
                "'LISTEN%'"));
    REQUIRE(await_listener(*o));  // the waiter noticed and LISTENs on a fresh session
    released_at = clk::now();
    CHECK(holder->release().has_value());
  });
  auto l = holdfast::acquire(waiter_store, "lost", 1s, 20s, slow_polling());
  const auto got = clk::now();
  t.join();
  REQUIRE(l.has_value());
  CHECK(got - released_at < 1500ms);  // woken by the release (was: the 3 s expiry)
  CHECK(admin(*o, "DROP TABLE " + o->table));
}

}  // namespace test_postgres_wait
