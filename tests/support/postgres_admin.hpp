// SPDX-License-Identifier: MIT
// tests/support/postgres_admin.hpp - what the PostgreSQL test files share: a plain libpq session
// for looking behind a store's back (admin), the database for tests that do not hurt the
// server (shared_pg: HOLDFAST_PG_CONNINFO, or a server of the test's own), and the clean-up of
// what a store makes there (drop_store_schema, dropped_at_exit).
#ifndef HOLDFAST_TESTS_SUPPORT_POSTGRES_ADMIN_HPP
#define HOLDFAST_TESTS_SUPPORT_POSTGRES_ADMIN_HPP

#include <libpq-fe.h>
#include <catch2/catch.hpp>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "holdfast/stores/detail/postgres_sql.hpp"
#include "holdfast/stores/postgres_options.hpp"
#include "real_servers.hpp"

namespace hf_test {

/// A plain libpq session for the test's own look behind the store's back.
class admin {
 public:
  explicit admin(const std::string& conninfo) : c_(PQconnectdb(conninfo.c_str())) {
    REQUIRE(c_ != nullptr);
    INFO(PQerrorMessage(c_));
    REQUIRE(PQstatus(c_) == CONNECTION_OK);
    PQsetNoticeProcessor(
        c_, [](void*, const char*) {}, nullptr);
  }
  ~admin() { PQfinish(c_); }
  admin(const admin&) = delete;
  admin& operator=(const admin&) = delete;

  /// Runs `sql` with text parameters; returns the first column of the first row ("" if none).
  std::string exec(const std::string& sql, std::vector<std::string> params = {}) {
    std::vector<const char*> values;
    for (const std::string& p : params) values.push_back(p.c_str());
    PGresult* r = PQexecParams(c_, sql.c_str(), static_cast<int>(values.size()), nullptr,
                               values.data(), nullptr, nullptr, 0);
    const ExecStatusType st = PQresultStatus(r);
    INFO(sql << ": " << PQresultErrorMessage(r));
    CHECK((st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK));
    std::string out;
    if (st == PGRES_TUPLES_OK && PQntuples(r) > 0 && PQnfields(r) > 0) out = PQgetvalue(r, 0, 0);
    PQclear(r);
    return out;
  }
  /// Sends `sql` without waiting for its result (for statements that block).
  void send(const std::string& sql) { REQUIRE(PQsendQuery(c_, sql.c_str()) == 1); }
  void drain() {
    while (PGresult* r = PQgetResult(c_)) PQclear(r);
  }
  PGconn* conn() { return c_; }

 private:
  PGconn* c_;
};

/// The database for tests that do not hurt the server: the shared one (HOLDFAST_PG_CONNINFO) or
/// one of our own. nullopt (after a loud skip) only outside CI.
inline std::optional<std::string> shared_pg() {
  if (std::optional<std::string> ci = hf_test::env("HOLDFAST_PG_CONNINFO")) return ci;
  static std::unique_ptr<hf_test::postgres_server> own;
  if (!own) {
    own = std::make_unique<hf_test::postgres_server>();
    if (!own->start()) {
      const std::string why = "no PostgreSQL: HOLDFAST_PG_CONNINFO unset and " + own->why();
      own.reset();
      if (hf_test::in_ci()) FAIL(why);
      hf_test::loud_skip(why);
      return std::nullopt;
    }
  }
  return own->conninfo();
}

/// Drops everything a postgres_store with options `o` makes (schema_sql): the lease table, the
/// read-write table and the sequence, IF they exist. Best effort (a test's clean-up); no Catch2
/// checks, so it may run at exit.
inline void drop_store_schema(const std::string& conninfo, const holdfast::postgres_options& o) {
  PGconn* c = PQconnectdb(conninfo.c_str());
  if (PQstatus(c) == CONNECTION_OK) {
    PQclear(PQexec(c, "SET client_min_messages = warning"));
    namespace d = holdfast::detail;
    for (const std::optional<std::string>& t :
         {d::pg_qualified(o.schema, o.table), d::pg_qualified(o.schema, d::pg_rw_table_name(o))}) {
      if (t) PQclear(PQexec(c, ("DROP TABLE IF EXISTS " + *t).c_str()));
    }
    if (std::optional<std::string> s = d::pg_qualified(o.schema, d::pg_sequence_name(o))) {
      PQclear(PQexec(c, ("DROP SEQUENCE IF EXISTS " + *s).c_str()));
    }
  }
  PQfinish(c);
}

/// Registers `o` (its conninfo names the server) for drop_store_schema when the test program
/// exits: for files whose tests share one set of tables. Returns `o`.
inline const holdfast::postgres_options& dropped_at_exit(const holdfast::postgres_options& o) {
  struct registry {
    std::mutex mu;
    std::vector<holdfast::postgres_options> all;
    ~registry() {
      for (const holdfast::postgres_options& x : all) drop_store_schema(x.conninfo, x);
    }
  };
  static registry r;
  std::lock_guard<std::mutex> lk(r.mu);
  r.all.push_back(o);
  return o;
}

}  // namespace hf_test

#endif  // HOLDFAST_TESTS_SUPPORT_POSTGRES_ADMIN_HPP
