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

#include "../support/min_ttl_checks.hpp"
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
  hf_test::check_min_ttl_boundary<holdfast::postgres_store>(*o, 10ms, 500ms);
}

}  // namespace test_postgres_min_ttl
