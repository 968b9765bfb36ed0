// SPDX-License-Identifier: MIT
// tests/unit/test_postgres_min_ttl.cpp - postgres_store: a TTL under postgres_options::min_ttl is
// refused up front (issue 23 part 3): errc::invalid_argument at once, with no attempt sent and the
// limit named in the acquire_report, from try_acquire(), a blocking acquire() (which answered
// timeout after its whole deadline before) and the recipes' constructors; one ms under, at and over
// the limit. Real server (HOLDFAST_PG_CONNINFO from .ci/servers), bounded waits.
#include <catch2/catch.hpp>

#include <chrono>
#include <optional>
#include <string>

#include "../support/real_servers.hpp"
#include "holdfast/election.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/semaphore.hpp"
#include "holdfast/stores/postgres.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_postgres_min_ttl {

namespace {

using namespace std::chrono_literals;
using holdfast::errc;
using clk = std::chrono::steady_clock;

std::optional<holdfast::postgres_options> server() {
  std::optional<std::string> conninfo = hf_test::env("HOLDFAST_PG_CONNINFO");
  if (!conninfo) {
    if (hf_test::in_ci()) FAIL("HOLDFAST_PG_CONNINFO is not set (run .ci/servers start)");
    hf_test::loud_skip("no PostgreSQL: HOLDFAST_PG_CONNINFO unset");
    return std::nullopt;
  }
  holdfast::postgres_options o;
  o.conninfo = *conninfo;
  o.table = "hf_min_ttl";  // one table for every run: the test leaves no lease behind
  return o;
}

}  // namespace

TEST_CASE("postgres_store: a TTL one ms under min_ttl is refused at once, at and over it granted",
          "[postgres][min_ttl]") {
  std::optional<holdfast::postgres_options> o = server();
  if (!o) return;
  CHECK(o->min_ttl == 10ms);  // the default the options' docstring gives
  o->min_ttl = 500ms;
  holdfast::postgres_store store(*o);
  CHECK(holdfast::store_min_ttl(store) == 500ms);
  holdfast::acquire_report report;
  holdfast::acquire_options<> opts;
  opts.report = &report;
  auto under = holdfast::try_acquire(store, "k-under", 499ms, opts);
  CHECK(under.error() == errc::invalid_argument);
  CHECK(report.attempts == 0);  // nothing was sent
  CHECK(report.last_store_error == errc::invalid_argument);
  CHECK(report.last_store_message.find("min_ttl of 500 ms") != std::string::npos);
  // A blocking acquire answers at once, not timeout at its deadline.
  const auto t0 = clk::now();
  CHECK(holdfast::acquire(store, "k-under", 499ms, 30s, opts).error() == errc::invalid_argument);
  CHECK(clk::now() - t0 < 1s);
  auto at = holdfast::try_acquire(store, "k-at", 500ms, opts);
  CHECK(at.has_value());
  auto over = holdfast::try_acquire(store, "k-over", 501ms, opts);
  CHECK(over.has_value());
  // The recipes refuse at construction (error()), so every call fails before the store is asked.
  holdfast::election_options<> eo;
  eo.renewal.start_thread = false;
  CHECK(holdfast::election<holdfast::postgres_store>(store, "e-under", 499ms, eo).error() ==
        errc::invalid_argument);
  CHECK_FALSE(holdfast::election<holdfast::postgres_store>(store, "e-at", 500ms, eo).error());
  CHECK(holdfast::semaphore<holdfast::postgres_store>(store, "s-under", 2, 499ms).error() ==
        errc::invalid_argument);
  CHECK_FALSE(holdfast::semaphore<holdfast::postgres_store>(store, "s-at", 2, 500ms).error());
  // A bad min_ttl is a bad option.
  o->min_ttl = -1ms;
  std::string why;
  CHECK(o->check(&why) == errc::invalid_argument);
  CHECK(why.find("min_ttl") != std::string::npos);
}

}  // namespace test_postgres_min_ttl
