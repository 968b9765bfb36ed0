// SPDX-License-Identifier: MIT
// Tests of postgres_store's life check (issue 20 part 3, stores/detail/postgres_deployment.hpp):
// every session records the server's life "<system_identifier>/<timeline>" in a row no lease can
// have, and a session on a new life raises the sequence by 2^32 before it draws a token. A new
// life is faked here by writing another life into that row behind the store's back (the real
// promotion is in test_postgres_standby.cpp). On the shared server, each case < 0.1 s.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <string>

#include "../support/postgres_admin.hpp"
#include "holdfast/stores/postgres.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_postgres_lives {

using holdfast::errc;
using holdfast::postgres_options;
using holdfast::postgres_store;
using namespace std::chrono_literals;

namespace {

constexpr std::uint64_t raise = std::uint64_t{1} << 32;

postgres_options options_on(const std::string& conninfo, const std::string& table) {
  postgres_options o;
  o.conninfo = conninfo;
  o.table = table;
  o.connect_timeout = 3s;
  o.command_timeout = 3s;
  return o;
}

// A fresh table (and its sequence) of the test's own.
void drop(hf_test::admin& a, const std::string& table) {
  a.exec("DROP TABLE IF EXISTS " + table + ", " + table + "_rw");
  a.exec("DROP SEQUENCE IF EXISTS " + table + "_token_seq");
}

}  // namespace

// Expected: the first session records the life without a raise (tokens 1, 2 ...); a reconnect to
// the same life raises nothing (the next token is the next value); after another life is written
// into the record, the next session raises by 2^32 and records the server's life again, once: a
// further reconnect does not raise again.
TEST_CASE("postgres lives: a session on a new life raises the sequence by 2^32, once",
          "[postgres][lives]") {
  const std::optional<std::string> ci = hf_test::shared_pg();
  if (!ci) return;
  hf_test::admin a(*ci);
  const std::string table = "holdfast_lives_t1";
  drop(a, table);
  postgres_store s1(options_on(*ci, table));
  auto g1 = s1.try_acquire("k1", "A", 30s);
  REQUIRE(g1);
  CHECK(g1->token.value() < 40);  // no raise for a table without a record
  const std::string life =
      a.exec("SELECT convert_from(owner, 'UTF8') FROM " + table + " WHERE key_hash = ''::bytea");
  auto report = s1.deployment();
  REQUIRE(report);
  CHECK(life == report->life);  // "<system_identifier>/<timeline>"
  CHECK(s1.inspect("k1"));

  postgres_store s2(options_on(*ci, table));  // same life: no raise
  auto g2 = s2.try_acquire("k2", "A", 30s);
  REQUIRE(g2);
  CHECK(g2->token > g1->token);
  CHECK(g2->token.value() < g1->token.value() + 40);

  a.exec("UPDATE " + table + " SET owner = convert_to('1/00000001', 'UTF8') WHERE key_hash = ''");
  postgres_store s3(options_on(*ci, table));  // a new life: raised before its first token
  auto g3 = s3.try_acquire("k3", "B", 30s);
  REQUIRE(g3);
  CHECK(g3->token.value() > g2->token.value() + raise);
  CHECK(g3->token.value() < g2->token.value() + raise + 40);
  CHECK(a.exec("SELECT convert_from(owner, 'UTF8') FROM " + table + " WHERE key_hash = ''") ==
        life);

  postgres_store s4(options_on(*ci, table));  // recorded: no second raise
  auto g4 = s4.try_acquire("k4", "B", 30s);
  REQUIRE(g4);
  CHECK(g4->token.value() < g3->token.value() + 40);
  // The record is no lease: purge keeps it, a lease named "" cannot exist (invalid_argument).
  REQUIRE(s4.purge_expired(4s));
  CHECK(a.exec("SELECT count(*) FROM " + table + " WHERE key_hash = ''") == "1");
  CHECK(s4.try_acquire("", "B", 30s).error() == errc::invalid_argument);
  drop(a, table);
}

// Expected: a sequence within 2^32 of its maximum is raised to its maximum, not past it (no
// overflow, no error at connect); the next acquire reports token_exhausted, as any sequence at
// 2^63-1 does.
TEST_CASE("postgres lives: a raise near 2^63-1 stops at the maximum: token_exhausted",
          "[postgres][lives]") {
  const std::optional<std::string> ci = hf_test::shared_pg();
  if (!ci) return;
  hf_test::admin a(*ci);
  const std::string table = "holdfast_lives_t2";
  drop(a, table);
  postgres_store s1(options_on(*ci, table));
  REQUIRE(s1.try_acquire("k1", "A", 30s));
  a.exec("SELECT setval('" + table + "_token_seq', 9223372036854775000)");
  a.exec("UPDATE " + table + " SET owner = convert_to('1/00000001', 'UTF8') WHERE key_hash = ''");
  postgres_store s2(options_on(*ci, table));
  INFO(s2.last_error_message());
  CHECK(s2.try_acquire("k2", "B", 30s).error() == errc::token_exhausted);
  CHECK(a.exec("SELECT last_value FROM " + table + "_token_seq") == "9223372036854775807");
  drop(a, table);
}

}  // namespace test_postgres_lives
