// SPDX-License-Identifier: MIT
// Tests of stores/postgres_fence.hpp against a real PostgreSQL server: the fence's (token, owner)
// rule in one statement for the fenced UPDATE, upsert and INSERT (a run log with no seeded row),
// racing writers admitted in token order, and postgres_fence's own connection, which reconnects
// after its backend is terminated and names the fence in its errors.
#include <libpq-fe.h>
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "../support/postgres_admin.hpp"
#include "../support/real_servers.hpp"
#include "holdfast/stores/postgres.hpp"
#include "holdfast/testing/conformance_threads.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_postgres_fence {

using hf_test::admin;
using hf_test::shared_pg;
using holdfast::errc;
using holdfast::fencing_token;
using namespace std::string_literals;

// ------------------------------------------------------------------------------------------------
// Fenced updates
// ------------------------------------------------------------------------------------------------

TEST_CASE("postgres_fenced_update changes the row and its fence in one statement",
          "[postgres][fence]") {
  std::optional<std::string> ci = shared_pg();
  if (!ci) return;
  admin adm(*ci);
  const std::string table = "hf_data_" + hf_test::random_tag(8);
  adm.exec(
      "CREATE TABLE " + table +
      " (id text PRIMARY KEY, balance bigint NOT NULL, note text, fence bigint, fence_owner text)");
  adm.exec("INSERT INTO " + table +
           " VALUES ('acct', 100, NULL, NULL, NULL), ('other', 0, NULL, 50, 'o50')");
  holdfast::postgres_fence_options fo;
  fo.table = table;
  auto upd = holdfast::postgres_fenced_update::make(fo, "balance = balance + $4, note = $5");
  REQUIRE(upd);
  PGconn* c = adm.conn();
  std::string msg;

  CHECK(upd->execute(c, fencing_token(7), "w", "acct", {"10", "by 7"}));  // NULL fence: admitted
  CHECK(upd->execute(c, fencing_token(7), "w", "acct", {"10", "by 7 again"}));  // equal: admitted
  CHECK(upd->execute(c, fencing_token(6), "w", "acct", {"1000", "stale"}).error() ==
        errc::stale_token);
  CHECK(upd->execute(c, fencing_token(9), "w", "acct", {"-5", "by 9"}));
  // Token 9 again from another owner: the store re-issued it (lost grants); never admitted.
  CHECK(upd->execute(c, fencing_token(9), "x", "acct", {"1000", "twin"}, &msg).error() ==
        errc::token_reissued);
  CHECK(msg.find("token 9 was admitted for another owner") != std::string::npos);
  CHECK(upd->execute(c, fencing_token(8), "w", "acct", {"1000", "stale"}).error() ==
        errc::stale_token);
  CHECK(adm.exec("SELECT balance || ' ' || note || ' ' || fence FROM " + table +
                 " WHERE id = 'acct'") == "115 by 9 9");
  CHECK(upd->execute(c, fencing_token(49), "w", "other", {"1", "x"}).error() == errc::stale_token);
  CHECK(upd->execute(c, fencing_token(9), "w", "nobody", {"1", "x"}, &msg).error() ==
        errc::invalid_argument);
  CHECK(msg == "postgres fence \"" + table + "\".\"fence\": no row with that id");
  CHECK(upd->execute(c, fencing_token{}, "w", "acct", {"1", "x"}).error() ==
        errc::invalid_argument);
  CHECK(upd->execute(c, fencing_token(holdfast::postgres_max_token.value() + 1), "w", "acct",
                     {"1", "x"})
            .error() == errc::invalid_argument);
  CHECK(upd->execute(c, fencing_token(10), "w", "acct", {"not a number", "x"}, &msg).error() ==
        errc::invalid_argument);
  CHECK(msg.find("22P02") != std::string::npos);  // invalid_text_representation, kept
  CHECK(upd->execute(c, fencing_token(10), "w", "acct", {"1", "nul\0inside"s}).error() ==
        errc::invalid_argument);
  CHECK(upd->execute(c, fencing_token(10), "w", "acct", {"1", holdfast::postgres_param::null()}));
  CHECK(adm.exec("SELECT coalesce(note, 'NULL') FROM " + table + " WHERE id = 'acct'") == "NULL");
  CHECK(upd->execute(nullptr, fencing_token(10), "w", "acct").error() == errc::store_unavailable);
  CHECK_FALSE(holdfast::postgres_fenced_update::make(fo, ""));
  fo.table = "";
  CHECK_FALSE(holdfast::postgres_fenced_update::make(fo, "note = 'x'"));
  adm.exec("DROP TABLE " + table);
}

TEST_CASE("postgres_fenced_update: racing writers are admitted in token order",
          "[postgres][fence][concurrency]") {
  std::optional<std::string> ci = shared_pg();
  if (!ci) return;
  admin adm(*ci);
  const std::string table = "hf_race_" + hf_test::random_tag(8);
  adm.exec("CREATE TABLE " + table +
           " (id bytea PRIMARY KEY, log bigint[] NOT NULL, fence bigint, fence_owner text)");
  const std::string id = "row\0with'nul"s;
  {
    const char* values[] = {id.data()};
    const int lengths[] = {static_cast<int>(id.size())};
    const int formats[] = {1};
    PQclear(PQexecParams(adm.conn(),
                         ("INSERT INTO " + table + " VALUES ($1, '{}', NULL, NULL)").c_str(), 1,
                         nullptr, values, lengths, formats, 0));
  }
  holdfast::postgres_fence_options fo;
  fo.table = table;
  auto upd = holdfast::postgres_fenced_update::make(fo, "log = log || $1::bigint");
  REQUIRE(upd);
  holdfast::testing::failure_log v;
  std::vector<std::thread> pool;
  for (int t = 0; t < 4; ++t) {
    pool.emplace_back([&, t] {
      PGconn* c = PQconnectdb(ci->c_str());
      for (int i = 1; i <= 25; ++i) {
        // Writer t is owner "w<t>": tokens are distinct, so the owner rule never refuses here.
        auto r = upd->execute(c, fencing_token(static_cast<std::uint64_t>(i * 4 + t)),
                              "w" + std::to_string(t), holdfast::postgres_param::bytes(id));
        v.expect(r || r.error() == errc::stale_token, "fenced update: " + r.error().message());
      }
      PQfinish(c);
    });
  }
  for (auto& th : pool) th.join();
  INFO(v.text());
  CHECK(v.empty());
  // The log holds every admitted token in non-decreasing order, ending with the greatest (S1).
  const std::string ok = adm.exec(
      "SELECT bool_and(a <= b) AND max(b) = 103 FROM (SELECT x AS a, lead(x) OVER (ORDER BY o) AS "
      "b FROM " +
      table + ", unnest(log) WITH ORDINALITY AS u(x, o)) s WHERE b IS NOT NULL");
  CHECK(ok == "t");
  adm.exec("DROP TABLE " + table);
}

TEST_CASE("postgres fences admit by (token, owner): one tick either side of the newest token",
          "[postgres][fence]") {
  std::optional<std::string> ci = shared_pg();
  if (!ci) return;
  admin adm(*ci);
  const std::string table = "hf_rule_" + hf_test::random_tag(8);
  adm.exec("CREATE TABLE " + table +
           " (id text PRIMARY KEY, n bigint, fence bigint, fence_owner text)");
  adm.exec("INSERT INTO " + table + " VALUES ('r', 0, 20, 'a')");
  holdfast::postgres_fence_options fo;
  fo.table = table;
  auto upd = holdfast::postgres_fenced_update::make(fo, "n = n + 1");
  REQUIRE(upd);
  PGconn* c = adm.conn();
  // Expected values written down: 19 -> stale for anyone, 20 -> only 'a', 21 -> anyone.
  CHECK(upd->execute(c, fencing_token(19), "a", "r").error() == errc::stale_token);
  CHECK(upd->execute(c, fencing_token(19), "b", "r").error() == errc::stale_token);
  CHECK(upd->execute(c, fencing_token(20), "b", "r").error() == errc::token_reissued);
  CHECK(upd->execute(c, fencing_token(20), "a", "r"));
  CHECK(upd->execute(c, fencing_token(20), "", "r").error() == errc::invalid_argument);
  CHECK(upd->execute(c, fencing_token(21), "b", "r"));
  CHECK(upd->execute(c, fencing_token(21), "a", "r").error() == errc::token_reissued);
  CHECK(adm.exec("SELECT n || ' ' || fence || ' ' || fence_owner FROM " + table) == "2 21 b");
  // A fence row whose owner is NULL (a column added to an old table) admits its token to nobody.
  adm.exec("UPDATE " + table + " SET fence_owner = NULL");
  CHECK(upd->execute(c, fencing_token(21), "b", "r").error() == errc::token_reissued);
  CHECK(upd->execute(c, fencing_token(22), "b", "r"));
  adm.exec("DROP TABLE " + table);
}

TEST_CASE("postgres_fenced_upsert inserts a new row or updates an admitted one",
          "[postgres][fence]") {
  std::optional<std::string> ci = shared_pg();
  if (!ci) return;
  admin adm(*ci);
  const std::string table = "hf_ups_" + hf_test::random_tag(8);
  adm.exec("CREATE TABLE " + table +
           " (id text PRIMARY KEY, total bigint NOT NULL, fence bigint, fence_owner text)");
  holdfast::postgres_fence_options fo;
  fo.table = table;
  auto ups = holdfast::postgres_fenced_upsert::make(fo, "total", "$4",
                                                    "total = " + table + ".total + EXCLUDED.total");
  REQUIRE(ups);
  PGconn* c = adm.conn();
  std::string msg;
  CHECK(ups->execute(c, fencing_token(5), "a", "k", {"10"}));  // no row: inserted
  CHECK(ups->execute(c, fencing_token(5), "a", "k", {"1"}));   // same holder: updated
  CHECK(ups->execute(c, fencing_token(4), "a", "k", {"100"}).error() == errc::stale_token);
  CHECK(ups->execute(c, fencing_token(5), "b", "k", {"100"}, &msg).error() == errc::token_reissued);
  CHECK(msg.find("postgres fence \"" + table + "\".\"fence\"") == 0);
  CHECK(ups->execute(c, fencing_token(6), "b", "k", {"2"}));
  CHECK(adm.exec("SELECT total || ' ' || fence || ' ' || fence_owner FROM " + table) == "13 6 b");
  CHECK_FALSE(holdfast::postgres_fenced_upsert::make(fo, "total", "", "total = 1"));
  CHECK_FALSE(holdfast::postgres_fenced_upsert::make(fo, "", "", ""));
  CHECK(holdfast::postgres_fenced_upsert::make(fo, "", "", "total = 1"));
  adm.exec("DROP TABLE " + table);
}

TEST_CASE("postgres_fenced_insert appends to a run log under a fence row it creates",
          "[postgres][fence]") {
  std::optional<std::string> ci = shared_pg();
  if (!ci) return;
  admin adm(*ci);
  const std::string tag = hf_test::random_tag(8);
  holdfast::postgres_fence_options fo;
  fo.table = "hf_fences_" + tag;
  const std::string log = "hf_runs_" + tag;
  adm.exec(holdfast::postgres_fenced_insert::table_sql(fo).value());
  adm.exec("CREATE TABLE " + log + " (job text NOT NULL, token bigint NOT NULL, at timestamptz)");
  auto ins = holdfast::postgres_fenced_insert::make(fo, log, "job, token, at", "$4, $1, now()");
  REQUIRE(ins);
  PGconn* c = adm.conn();
  CHECK(ins->execute(c, fencing_token(3), "a", "nightly", {"run 1"}));  // no fence row yet
  CHECK(ins->execute(c, fencing_token(3), "a", "nightly", {"run 1, again"}));
  CHECK(ins->execute(c, fencing_token(2), "z", "nightly", {"stale"}).error() == errc::stale_token);
  CHECK(ins->execute(c, fencing_token(3), "b", "nightly", {"twin"}).error() ==
        errc::token_reissued);
  CHECK(ins->execute(c, fencing_token(1), "z", "weekly", {"other fence row"}));
  CHECK(adm.exec("SELECT string_agg(job || '@' || token, ',' ORDER BY job) FROM " + log) ==
        "other fence row@1,run 1@3,run 1, again@3");
  CHECK(adm.exec("SELECT count(*) FROM " + fo.table) == "2");
  CHECK_FALSE(holdfast::postgres_fenced_insert::make(fo, "", "job", "$4"));
  CHECK_FALSE(holdfast::postgres_fenced_insert::make(fo, log, "", "$4"));
  adm.exec("DROP TABLE " + log);
  adm.exec("DROP TABLE " + fo.table);
}

TEST_CASE("postgres_fence reconnects after its backend is terminated and names the fence",
          "[postgres][fence][faults]") {
  std::optional<std::string> ci = shared_pg();
  if (!ci) return;
  admin adm(*ci);
  const std::string table = "hf_fc_" + hf_test::random_tag(8);
  adm.exec("CREATE TABLE " + table +
           " (id text PRIMARY KEY, n bigint NOT NULL, fence bigint, fence_owner text)");
  adm.exec("INSERT INTO " + table + " VALUES ('r', 0, NULL, NULL)");
  holdfast::postgres_options po;
  po.conninfo = *ci;
  po.application_name = "hf-fence-" + hf_test::random_tag(8);
  po.command_timeout = std::chrono::milliseconds(5000);
  holdfast::postgres_fence fence(po);
  holdfast::postgres_fence_options fo;
  fo.table = table;
  auto upd = holdfast::postgres_fenced_update::make(fo, "n = n + 1");
  REQUIRE(upd);
  CHECK(fence.execute(*upd, fencing_token(1), "a", "r"));
  adm.exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '" +
           po.application_name + "'");
  // The next call finds the connection dead (reported, not retried: it may have been applied),
  // the one after reconnects.
  auto dead = fence.execute(*upd, fencing_token(1), "a", "r");
  if (!dead) {
    CHECK(dead.error() == errc::store_unavailable);
    CHECK(fence.last_error_message().find("postgres fence \"" + table + "\".\"fence\": ") == 0);
  }
  CHECK(fence.execute(*upd, fencing_token(2), "a", "r"));
  CHECK(fence.execute(*upd, fencing_token(1), "a", "r").error() == errc::stale_token);
  // A fence naming a column that is not there is misconfigured, with the server's text.
  fo.owner_column = "no_such_column";
  auto wrong = holdfast::postgres_fenced_update::make(fo, "n = n + 1");
  REQUIRE(wrong);
  CHECK(fence.execute(*wrong, fencing_token(3), "a", "r").error() == errc::misconfigured);
  CHECK(fence.last_error_message().find("42703") != std::string::npos);
  CHECK(fence.last_error_message().find("no_such_column") != std::string::npos);
  CHECK(adm.exec("SELECT n || ' ' || fence FROM " + table) == (dead ? "3 2" : "2 2"));
  adm.exec("DROP TABLE " + table);
}

}  // namespace test_postgres_fence
