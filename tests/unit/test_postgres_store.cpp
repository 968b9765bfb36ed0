// SPDX-License-Identifier: MIT
// Tests of stores/postgres.hpp against real PostgreSQL servers: the LeaseStore contract (the same
// checks memory_store passes), hostile keys, table naming, token exhaustion, purge, a backend
// terminated mid-statement, statement timeouts, and faults on a server the tests own (kill -9 of
// every server process, restart, a frozen server).
#include <libpq-fe.h>
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "../support/fail_fast.hpp"
#include "../support/postgres_admin.hpp"
#include "../support/real_servers.hpp"
#include "../support/store_faults.hpp"
#include "holdfast/clock.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/stores/postgres.hpp"
#include "holdfast/testing/conformance.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_postgres_store {

using holdfast::errc;
using holdfast::fencing_token;
using holdfast::postgres_options;
using holdfast::postgres_store;
using std::chrono::milliseconds;
using namespace std::string_literals;

namespace {

// Lease rows only: the table also holds the server's life record (key_hash '', postgres_life_sql).
const std::string leases_only = " WHERE key_hash <> ''::bytea";

#define REQUIRE_CONFORMS(report)           \
  do {                                     \
    const auto r_ = (report);              \
    INFO("violations:\n" << r_.summary()); \
    CHECK(r_.ok());                        \
  } while (0)

using hf_test::admin;
using hf_test::shared_pg;

/// Options naming tables and a sequence of their own; all are dropped when the test ends.
struct isolated {
  postgres_options opts;
  std::string conninfo;
  explicit isolated(std::string ci, std::string table = "") : conninfo(std::move(ci)) {
    opts.conninfo = conninfo;
    opts.table = table.empty() ? "hf_" + hf_test::random_tag() : table;
    opts.command_timeout = milliseconds(5000);
  }
  ~isolated() { hf_test::drop_store_schema(conninfo, opts); }  // the read-write table too
  [[nodiscard]] std::string table() const {
    return *holdfast::detail::pg_qualified(opts.schema, opts.table);
  }
  [[nodiscard]] std::string sequence() const {
    return *holdfast::detail::pg_qualified(opts.schema, holdfast::detail::pg_sequence_name(opts));
  }
};

/// The conformance kit's options for a store on `iso`'s table: expiry forced by the database's
/// own clock (the record's expiry moved into the past), store-wide tokens (one sequence), and a
/// release of one's own expired lease succeeds (the record stays until taken over).
holdfast::testing::conformance_options pg_kit(const isolated& iso) {
  auto adm = std::make_shared<admin>(iso.conninfo);
  holdfast::testing::conformance_options co;
  co.key_prefix = "k-";
  co.store_wide_tokens = true;
  co.release_after_expiry_succeeds = true;
  const std::string table = iso.table();
  co.expire_now = [adm, table](std::string_view key) {
    const char* values[] = {key.data()};
    const int lengths[] = {static_cast<int>(key.size())};
    const int formats[] = {1};
    PGresult* r = PQexecParams(adm->conn(),
                               ("UPDATE " + table +
                                " SET expires_at = clock_timestamp() - interval '1 millisecond' "
                                "WHERE key_hash = sha256($1::bytea)")
                                   .c_str(),
                               1, nullptr, values, lengths, formats, 0);
    PQclear(r);
  };
  return co;
}

/// A server the fault tests own (to kill, freeze, restart): one per process, since initdb costs
/// seconds; each test finds it running. Fails in CI, skips loudly elsewhere.
hf_test::postgres_server* own_pg() {
  static std::unique_ptr<hf_test::postgres_server> s;
  if (!s) s = std::make_unique<hf_test::postgres_server>();
  if (!s->start()) {
    const std::string why = "cannot start PostgreSQL: " + s->why();
    if (hf_test::in_ci() || s->available()) FAIL(why);
    hf_test::loud_skip(why);
    return nullptr;
  }
  return s.get();
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// The contract
// ------------------------------------------------------------------------------------------------

TEST_CASE("postgres_store meets the LeaseStore contract", "[postgres][contract]") {
  static_assert(holdfast::assert_lease_store<postgres_store>());
  static_assert(holdfast::has_inspect_v<postgres_store>);
  std::optional<std::string> ci = shared_pg();
  if (!ci) return;
  isolated iso(*ci);
  postgres_store s(iso.opts);
  REQUIRE_CONFORMS(holdfast::testing::check_contract(s, pg_kit(iso)));
  CHECK(s.last_error_message().empty());
}

TEST_CASE("postgres_store passes the conformance kit (contract and simulated schedules)",
          "[postgres][contract]") {
  std::optional<std::string> ci = shared_pg();
  if (!ci) return;
  // PostgreSQL keeps its own time: the contract's expiry checks run through an UPDATE of the
  // contract checks' store's table (the first the factory makes); the schedules cannot move the
  // server's clock, and the report says so. The hostile strings have a test of their own below.
  std::vector<std::unique_ptr<isolated>> tables;  // one table per store, dropped at the end
  tables.push_back(std::make_unique<isolated>(*ci));
  holdfast::testing::conformance_options co = pg_kit(*tables.front());
  co.schedules = 40;  // each some dozens of real statements, and a table
  co.hostile_strings = false;
  bool first = true;
  const holdfast::testing::conformance_report report = holdfast::testing::check_store(
      [&] {
        if (!first) tables.push_back(std::make_unique<isolated>(*ci));
        first = false;
        return std::make_unique<postgres_store>(tables.back()->opts);
      },
      co);
  INFO(report.summary());
  CHECK(report.ok());
  CHECK(report.schedules == 40);
  CHECK(report.contract_checks > 60);
  CHECK_THAT(report.summary(), Catch::Contains("T2 expiry to the tick"));  // forced, not skipped
}

TEST_CASE("postgres_store: hostile keys and owners round-trip exactly", "[postgres]") {
  std::optional<std::string> ci = shared_pg();
  if (!ci) return;
  isolated iso(*ci);
  postgres_store s(iso.opts);
  REQUIRE_CONFORMS(holdfast::testing::check_hostile_strings(s, pg_kit(iso)));
  admin adm(*ci);
  CHECK(adm.exec("SELECT count(*) FROM " + iso.table() + leases_only) ==
        std::to_string(holdfast::testing::hostile_strings().size() + 3));
}

TEST_CASE("postgres_store: contending threads get exclusive grants, increasing tokens",
          "[postgres][concurrency]") {
  std::optional<std::string> ci = shared_pg();
  if (!ci) return;
  isolated iso(*ci);
  holdfast::testing::conformance_options co;
  co.threads = 4;
  co.grants_per_thread = 15;
  SECTION("one store per thread") {
    REQUIRE_CONFORMS(holdfast::testing::check_exclusive_grants(
        [&] { return std::make_unique<postgres_store>(iso.opts); }, co));
  }
  SECTION("one store shared by every thread") {
    auto shared = std::make_shared<postgres_store>(iso.opts);
    co.key_prefix = "2-";
    REQUIRE_CONFORMS(holdfast::testing::check_exclusive_grants([&] { return shared; }, co));
  }
}

TEST_CASE("postgres_store: first connections racing to create the table all succeed",
          "[postgres][concurrency]") {
  std::optional<std::string> ci = shared_pg();
  if (!ci) return;
  isolated iso(*ci);
  holdfast::testing::failure_log v;
  std::vector<std::thread> pool;
  for (int t = 0; t < 4; ++t) {
    pool.emplace_back([&] {
      postgres_store s(iso.opts);
      auto r = s.connect();
      v.expect(bool(r), "connect: " + s.last_error_message());
    });
  }
  for (auto& th : pool) th.join();
  INFO(v.text());
  CHECK(v.empty());
}

TEST_CASE("postgres_store under holdfast::lease: acquire, renew, RAII release",
          "[postgres][lease]") {
  std::optional<std::string> ci = shared_pg();
  if (!ci) return;
  isolated iso(*ci);
  postgres_store s(iso.opts);
  fencing_token first;
  {
    auto l = holdfast::try_acquire(s, "job", std::chrono::seconds(30));
    REQUIRE(l);
    CHECK(l->valid());
    first = l->token();
    CHECK(l->renew());
    CHECK(holdfast::try_acquire(s, "job", std::chrono::seconds(30)).error() == errc::busy);
  }
  auto again = holdfast::try_acquire(s, "job", std::chrono::seconds(30));
  REQUIRE(again);
  CHECK(first < again->token());
}

TEST_CASE("postgres_store: an acquire that waited for the row lock still gets the newest token",
          "[postgres]") {
  // The race T1 forbids, staged: B's acquire starts (and would draw a token for a new row), then
  // waits on the key's row lock while another grant with a newer token is made and expires. The
  // token B gets must be drawn after the lock, above that newer one, not the one drawn earlier.
  std::optional<std::string> ci = shared_pg();
  if (!ci) return;
  isolated iso(*ci);
  iso.opts.application_name = "hf-waiter-" + hf_test::random_tag(8);
  postgres_store a(iso.opts);
  REQUIRE(a.try_acquire("k", "a", milliseconds(60000)));
  admin locker(*ci);
  locker.exec("BEGIN");
  locker.exec("SELECT 1 FROM " + iso.table() + " FOR UPDATE");
  postgres_store b(iso.opts);
  REQUIRE(b.connect());
  holdfast::result<holdfast::grant> got = errc::timeout;
  std::thread t([&] { got = b.try_acquire("k", "b", milliseconds(60000)); });
  admin watcher(*ci);
  const bool waiting = hf_test::wait_until(
      [&] {
        return watcher.exec(
                   "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 "
                   "AND wait_event_type = 'Lock'",
                   {iso.opts.application_name}) == "1";
      },
      milliseconds(5000));
  // Meanwhile: a grant with a newer token, which then expired.
  const std::string newer =
      locker.exec("UPDATE " + iso.table() + " SET token = nextval('" + iso.sequence() +
                  "'), owner = 'x'::bytea, expires_at = '-infinity' "
                  "RETURNING token");
  locker.exec("COMMIT");
  t.join();
  REQUIRE(waiting);
  REQUIRE(got);
  CHECK(std::stoull(newer) < got->token.value());
}

// ------------------------------------------------------------------------------------------------
// Names, schema, exhaustion, purge
// ------------------------------------------------------------------------------------------------

TEST_CASE("postgres_store: table names are quoted, bad names refused", "[postgres]") {
  std::optional<std::string> ci = shared_pg();
  if (!ci) return;
  SECTION("a name full of SQL metacharacters is just a name") {
    isolated iso(*ci, "hf \"odd\"; DROP TABLE x; -- '" + hf_test::random_tag(6));
    postgres_store s(iso.opts);
    auto g = s.try_acquire("k", "me", milliseconds(10000));
    INFO(s.last_error_message());
    REQUIRE(g);
    admin adm(*ci);
    CHECK(adm.exec("SELECT count(*) FROM " + iso.table() + leases_only) == "1");
  }
  SECTION("schema-qualified") {
    admin adm(*ci);
    const std::string schema = "hf_schema_" + hf_test::random_tag(6);
    adm.exec("CREATE SCHEMA \"" + schema + "\"");
    {
      isolated iso(*ci);
      iso.opts.schema = schema;
      postgres_store s(iso.opts);
      REQUIRE(s.try_acquire("k", "me", milliseconds(10000)));
      CHECK(adm.exec("SELECT count(*) FROM " + iso.table() + leases_only) == "1");
    }
    adm.exec("DROP SCHEMA \"" + schema + "\" CASCADE");
  }
  SECTION("invalid names") {
    for (const std::string& bad : {""s, std::string(64, 'x'), "nul\0name"s}) {
      postgres_options o;
      o.conninfo = *ci;
      o.table = bad;
      postgres_store s(o);
      CHECK(s.try_acquire("k", "me", milliseconds(1000)).error() == errc::invalid_argument);
    }
    postgres_options o;
    o.conninfo = *ci;
    o.table = std::string(60, 't');  // the derived sequence name would exceed 63 bytes
    CHECK(postgres_store(o).connect().error() == errc::invalid_argument);
    o.sequence = "short_seq";
    CHECK(o.check() == std::error_code{});
  }
}

TEST_CASE("postgres_store: a missing or foreign table is an error with the server's reason",
          "[postgres]") {
  std::optional<std::string> ci = shared_pg();
  if (!ci) return;
  SECTION("create_schema off and no table") {
    isolated iso(*ci);
    iso.opts.create_schema = false;
    postgres_store s(iso.opts);
    // Misconfiguration (permanent: a blocking acquire returns at once), not contention.
    CHECK(s.try_acquire("k", "me", milliseconds(1000)).error() == errc::misconfigured);
    CHECK(s.last_error_message().find("42P01") != std::string::npos);  // undefined_table
    // A DBA creates it from schema_sql(); then the same store works.
    admin adm(*ci);
    const std::string sql = postgres_store::schema_sql(iso.opts);
    PQclear(PQexec(adm.conn(), sql.c_str()));
    CHECK(s.try_acquire("k", "me", milliseconds(1000)));
  }
  SECTION("a table of that name with another layout") {
    isolated iso(*ci);
    admin adm(*ci);
    adm.exec("CREATE TABLE " + iso.table() + " (key_hash text PRIMARY KEY, note text)");
    postgres_store s(iso.opts);
    CHECK(s.try_acquire("k", "me", milliseconds(1000)).error() == errc::misconfigured);
    CHECK(s.last_error_message().find("42703") != std::string::npos);  // undefined_column
  }
}

TEST_CASE("postgres_store: refused roles, missing databases and bad conninfo fail at once",
          "[postgres][errors]") {
  std::optional<std::string> ci = shared_pg();
  if (!ci) return;
  SECTION("no such role (28000): permission_denied") {
    isolated iso(*ci);
    iso.opts.conninfo = *ci + " user=hf_no_such_role";
    postgres_store s(iso.opts);
    hf_test::check_fails_fast(s, errc::permission_denied);
    CHECK(s.last_error_message().find("hf_no_such_role") != std::string::npos);
    CHECK(s.last_error_message().find("postgres_options::conninfo") != std::string::npos);
  }
  SECTION("no such database (3D000): misconfigured") {
    isolated iso(*ci);
    iso.opts.conninfo = *ci + " dbname=hf_no_such_db";
    postgres_store s(iso.opts);
    hf_test::check_fails_fast(s, errc::misconfigured);
    CHECK(s.last_error_message().find("database \"hf_no_such_db\" does not exist") !=
          std::string::npos);
  }
  SECTION("port=abc: misconfigured") {
    isolated iso(*ci);
    iso.opts.conninfo = *ci + " port=abc";
    postgres_store s(iso.opts);
    hf_test::check_fails_fast(s, errc::misconfigured);
    CHECK(s.last_error_message().find("abc") != std::string::npos);
  }
  SECTION("a malformed URI: misconfigured, naming conninfo") {
    isolated iso(*ci);
    iso.opts.conninfo = "postgresql://[::1";
    postgres_store s(iso.opts);
    hf_test::check_fails_fast(s, errc::misconfigured);
    CHECK(s.last_error_message().find("postgres_options::conninfo") != std::string::npos);
  }
  SECTION("no privilege on the schema (42501): permission_denied") {
    admin adm(*ci);
    const std::string role = "hf_weak_" + hf_test::random_tag(6);
    adm.exec("CREATE ROLE " + role + " LOGIN");
    {
      isolated iso(*ci);
      iso.opts.conninfo = *ci + " user=" + role;
      postgres_store s(iso.opts);  // creating its table needs CREATE on public
      hf_test::check_fails_fast(s, errc::permission_denied);
      CHECK(s.last_error_message().find("42501") != std::string::npos);
    }
    adm.exec("DROP ROLE " + role);
  }
}

// The CI server trusts every local connection, so refused credentials are checked on the texts
// libpq and the server give (English lc_messages). A server that wants a password and a conninfo
// without one ("fe_sendauth: no password supplied") was store_unavailable, retried until the
// deadline (found by a new user's trial); expected: permission_denied, at once.
TEST_CASE("postgres_store: refused credentials are permission_denied by libpq's text",
          "[postgres][errors]") {
  using holdfast::detail::classify_pg_connect_failure;
  CHECK(classify_pg_connect_failure("fe_sendauth: no password supplied\n") ==
        errc::permission_denied);
  CHECK(classify_pg_connect_failure(
            "connection to server at \"127.0.0.1\", port 5432 failed: FATAL:  password "
            "authentication failed for user \"app\"") == errc::permission_denied);
  CHECK(classify_pg_connect_failure("FATAL:  role \"nobody\" does not exist") ==
        errc::permission_denied);
  CHECK(classify_pg_connect_failure("FATAL:  database \"nosuchdb\" does not exist") ==
        errc::misconfigured);
  // Not a configuration fault: retried.
  CHECK(classify_pg_connect_failure("connection to server at \"127.0.0.1\", port 1 failed: "
                                    "Connection refused") == errc::store_unavailable);
}

TEST_CASE("postgres_store: the sequence at 2^63-1 reports token_exhausted", "[postgres]") {
  std::optional<std::string> ci = shared_pg();
  if (!ci) return;
  isolated iso(*ci);
  postgres_store s(iso.opts);
  auto held = s.try_acquire("held", "me", milliseconds(10000));
  REQUIRE(held);
  admin adm(*ci);
  adm.exec("SELECT setval('" + iso.sequence() + "', 9223372036854775806)");
  auto last = s.try_acquire("last", "me", milliseconds(10000));
  REQUIRE(last);
  CHECK(last->token == holdfast::postgres_max_token);
  CHECK(s.try_acquire("more", "me", milliseconds(10000)).error() == errc::token_exhausted);
  CHECK(s.last_error_message().find("2200H") != std::string::npos);
  CHECK(s.inspect("more").value() == std::nullopt);
  // Holders can still renew and release; only new grants are impossible.
  CHECK(s.renew("held", "me", held->token, milliseconds(10000)));
  CHECK(s.release("held", "me", held->token));
  CHECK(s.last_token().value() == holdfast::postgres_max_token);
}

TEST_CASE("postgres_store: released and expired rows are kept until purge_expired", "[postgres]") {
  std::optional<std::string> ci = shared_pg();
  if (!ci) return;
  isolated iso(*ci);
  iso.opts.command_timeout = milliseconds(2000);
  postgres_store s(iso.opts);
  auto a = s.try_acquire("a", "me", milliseconds(60000));
  auto b = s.try_acquire("b", "me", milliseconds(60000));
  auto c = s.try_acquire("c", "me", milliseconds(60000));
  REQUIRE((a && b && c));
  REQUIRE(s.release("a", "me", a->token));
  admin adm(*ci);
  CHECK(adm.exec("SELECT count(*) FROM " + iso.table() + leases_only) == "3");
  CHECK(s.purge_expired(milliseconds(2000)).error() == errc::invalid_argument);
  CHECK(s.purge_expired(holdfast::max_ttl + milliseconds(1)).error() == errc::invalid_argument);
  CHECK(s.purge_expired(milliseconds(3000)).value() == 1);  // "a": released (-infinity)
  // "b" expired an hour ago by the database's clock; "c" is live.
  adm.exec("UPDATE " + iso.table() +
           " SET expires_at = clock_timestamp() - interval '1 hour' WHERE key = 'b'::bytea");
  CHECK(s.purge_expired(milliseconds(3000)).value() == 1);
  CHECK(adm.exec("SELECT count(*) FROM " + iso.table() + leases_only) == "1");
  // A purged key starts again with a fresh, greater token.
  auto a2 = s.try_acquire("a", "me", milliseconds(60000));
  REQUIRE(a2);
  CHECK(c->token < a2->token);
}

// ------------------------------------------------------------------------------------------------
// Connections and faults
// ------------------------------------------------------------------------------------------------

TEST_CASE("postgres_store: a backend terminated mid-statement reports an error, then reconnects",
          "[postgres][faults]") {
  std::optional<std::string> ci = shared_pg();
  if (!ci) return;
  isolated iso(*ci);
  iso.opts.application_name = "hf-victim-" + hf_test::random_tag(8);
  postgres_store s(iso.opts);
  auto g = s.try_acquire("k", "me", milliseconds(60000));
  REQUIRE(g);
  // Hold the lease row locked, so the store's renew is in flight, waiting, when it is killed.
  admin locker(*ci);
  locker.exec("BEGIN");
  locker.exec("SELECT 1 FROM " + iso.table() + " FOR UPDATE");
  holdfast::result<holdfast::grant> in_flight = errc::timeout;
  std::thread t([&] { in_flight = s.renew("k", "me", g->token, milliseconds(60000)); });
  admin killer(*ci);
  const bool waiting = hf_test::wait_until(
      [&] {
        return killer.exec(
                   "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 "
                   "AND wait_event_type = 'Lock'",
                   {iso.opts.application_name}) == "1";
      },
      milliseconds(5000));
  if (waiting) {
    killer.exec(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
        {iso.opts.application_name});
  }
  t.join();
  locker.exec("ROLLBACK");
  REQUIRE(waiting);
  CHECK(in_flight.error() == errc::store_unavailable);
  CHECK(s.last_error_message().find("terminating connection") != std::string::npos);
  // Nothing changed, and the next call reconnects.
  auto r = s.renew("k", "me", g->token, milliseconds(60000));
  CHECK(r);
  CHECK(s.release("k", "me", g->token));
}

TEST_CASE("postgres_store: a statement stuck past command_timeout reports timeout", "[postgres]") {
  std::optional<std::string> ci = shared_pg();
  if (!ci) return;
  isolated iso(*ci);
  iso.opts.command_timeout = milliseconds(300);
  postgres_store s(iso.opts);
  auto g = s.try_acquire("k", "me", milliseconds(60000));
  REQUIRE(g);
  admin locker(*ci);
  locker.exec("BEGIN");
  locker.exec("SELECT 1 FROM " + iso.table() + " FOR UPDATE");
  const auto t0 = std::chrono::steady_clock::now();
  auto r = s.try_acquire("k", "other", milliseconds(60000));
  const auto took = std::chrono::steady_clock::now() - t0;
  locker.exec("ROLLBACK");
  CHECK(r.error() == errc::timeout);
  CHECK(took < std::chrono::seconds(3));
  CHECK_FALSE(s.last_error_message().empty());
  CHECK(s.try_acquire("k", "other", milliseconds(60000)).error() == errc::busy);
}

TEST_CASE("postgres_store: unreachable server and bad options are errors, not grants",
          "[postgres]") {
  postgres_options o;
  o.conninfo = "host=127.0.0.1 port=" + std::to_string(hf_test::free_port()) +
               " dbname=postgres user=holdfast";
  postgres_store s(o);
  auto r = s.try_acquire("k", "me", milliseconds(1000));
  CHECK(r.error() == errc::store_unavailable);
  CHECK(s.last_error_message().find("refused") != std::string::npos);
  postgres_options bad = o;
  bad.command_timeout = milliseconds(0);
  CHECK(postgres_store(bad).connect().error() == errc::invalid_argument);
}

TEST_CASE("postgres_store: kill -9 of the server: errors only, the lease sees itself lost",
          "[postgres][faults]") {
  auto srv = own_pg();
  if (!srv) return;
  isolated iso(srv->conninfo());
  iso.opts.connect_timeout = milliseconds(1000);
  iso.opts.command_timeout = milliseconds(1000);
  postgres_store s(iso.opts);
  holdfast::manual_clock clock;
  holdfast::acquire_options<holdfast::manual_clock> opts;
  opts.clock = clock;
  auto l = holdfast::try_acquire(s, "held", std::chrono::seconds(10), opts);
  REQUIRE(l);

  hf_test::check_kill_mid_run([&] { return postgres_store(iso.opts); }, [&] { srv->kill9(); },
                              {30, 5000, 10, milliseconds(20000)});
  hf_test::check_dead_store(s, *l, clock);

  SECTION("restart: the sequence and the leases survive") {
    const fencing_token before = l->token();
    REQUIRE(srv->start());
    auto g = s.try_acquire("after", "me", milliseconds(60000));
    INFO(s.last_error_message());
    REQUIRE(g);
    CHECK(before < g->token);
    // The killed run's grants were committed or not; either way, "held" is still held by the
    // lease's owner (its TTL has 10 s by the database's clock) or free, never someone else's.
    auto rec = s.inspect("held");
    REQUIRE(rec);
    if (rec->has_value()) CHECK((*rec)->owner == l->owner());
  }
}

TEST_CASE("postgres_store: a frozen server times out, and the store recovers after",
          "[postgres][faults]") {
  auto srv = own_pg();
  if (!srv) return;
  isolated iso(srv->conninfo());
  iso.opts.connect_timeout = milliseconds(300);
  iso.opts.command_timeout = milliseconds(300);
  postgres_store s(iso.opts);
  REQUIRE(s.connect());
  srv->pause();
  const auto t0 = std::chrono::steady_clock::now();
  auto r = s.try_acquire("frozen", "me", milliseconds(10000));
  const auto took = std::chrono::steady_clock::now() - t0;
  auto r2 = s.try_acquire("frozen", "me", milliseconds(10000));  // a new connection: also stuck
  srv->resume();
  CHECK(r.error() == errc::timeout);
  CHECK(took < std::chrono::seconds(5));
  CHECK(r2.error() == errc::timeout);
  iso.opts.command_timeout = milliseconds(5000);
  postgres_store s2(iso.opts);
  auto g = s2.try_acquire("frozen", "me", milliseconds(10000));
  INFO(s2.last_error_message());
  REQUIRE(g);
}

TEST_CASE("postgres_store: release after the session was terminated reconnects once, frees the key",
          "[postgres][faults]") {
  // The kind of the Redis review input on PostgreSQL: the server ends the store's idle session
  // (pg_terminate_backend, a restart, an idle timeout); before, the next release failed once and
  // the key waited out its TTL. Expected: release() succeeds and the row is free at once.
  std::optional<std::string> ci = shared_pg();
  if (!ci) return;
  isolated iso(*ci);
  iso.opts.application_name = "hf-idle-" + hf_test::random_tag(8);
  postgres_store s(iso.opts);
  admin killer(*ci);
  const auto terminate = [&] {
    CHECK(killer.exec("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE "
                      "application_name = $1",
                      {iso.opts.application_name}) == "1");
    // Wait until the server has ended it, so the store's next call finds it broken.
    CHECK(hf_test::wait_until(
        [&] {
          return killer.exec("SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
                             {iso.opts.application_name}) == "0";
        },
        milliseconds(5000)));
  };
  auto g = s.try_acquire("k", "me", milliseconds(60000));
  REQUIRE(g);
  terminate();
  CHECK(s.release("k", "me", g->token));
  CHECK_FALSE(s.inspect("k")->has_value());
  auto other = s.try_acquire("k", "other", milliseconds(60000));
  REQUIRE(other);  // free at once, not after the TTL
  // Renew is not retried: the first call after the session ended reports the error.
  terminate();
  CHECK(s.renew("k", "other", other->token, milliseconds(60000)).error() ==
        errc::store_unavailable);
  CHECK(s.release("k", "other", other->token));
}

// ------------------------------------------------------------------------------------------------
// try_acquire_all: every key in one transaction, or none (detail/postgres_multi.hpp).
// ------------------------------------------------------------------------------------------------

TEST_CASE("postgres_store try_acquire_all meets the kit's multi-key contract",
          "[postgres][multi]") {
  static_assert(holdfast::has_try_acquire_all_v<postgres_store>);
  std::optional<std::string> ci = shared_pg();
  if (!ci) return;
  isolated iso(*ci);
  postgres_store s(iso.opts);
  REQUIRE_CONFORMS(holdfast::testing::check_try_acquire_all(s, pg_kit(iso)));
  CHECK(s.last_error_message().empty());
  // Busy rolled back the rows its lock step inserted: only keys ever granted have a row.
  admin adm(*ci);
  CHECK(adm.exec("SELECT count(*) FROM " + iso.table() + leases_only + " AND token = 0") == "0");
}

TEST_CASE("postgres_store try_acquire_all: an exhausted sequence takes no key",
          "[postgres][multi]") {
  std::optional<std::string> ci = shared_pg();
  if (!ci) return;
  isolated iso(*ci);
  postgres_store s(iso.opts);
  const std::string_view keys[] = {"a", "b"};
  holdfast::grant g[2];
  REQUIRE(s.connect());  // creates the table and the sequence
  admin adm(*ci);
  adm.exec("SELECT setval('" + iso.sequence() + "', 9223372036854775806)");
  CHECK(s.try_acquire_all(keys, 2, "me", milliseconds(10000), g).error() == errc::token_exhausted);
  CHECK(s.last_error_message().find("2200H") != std::string::npos);
  CHECK(s.inspect("a").value() == std::nullopt);
  // nextval is not rolled back: the last value went to the failed call (a gap, as try_acquire's
  // busy answers leave), so the next call is refused too, on a session that came back.
  CHECK(s.try_acquire_all(keys, 1, "me", milliseconds(10000), g).error() == errc::token_exhausted);
  CHECK(s.inspect("a").value() == std::nullopt);
  CHECK(s.last_token().value() == holdfast::postgres_max_token);
}

TEST_CASE("postgres_store try_acquire_all: opposite key orders in two sessions never deadlock",
          "[postgres][multi]") {
  std::optional<std::string> ci = shared_pg();
  if (!ci) return;
  isolated iso(*ci);
  std::atomic<int> granted{0};
  std::atomic<int> errors{0};
  const auto worker = [&](std::vector<std::string_view> keys) {
    postgres_store mine(iso.opts);
    for (int i = 0; i < 30; ++i) {
      holdfast::grant g[3];
      const holdfast::result<void> r =
          mine.try_acquire_all(keys.data(), 3, "o" + std::string(keys[0]), milliseconds(10000), g);
      if (!r) {
        if (r.error() != errc::busy) {
          ++errors;
          UNSCOPED_INFO(mine.last_error_message());
        }
        continue;
      }
      ++granted;
      for (int k = 0; k < 3; ++k)
        CHECK(mine.release(keys[k], "o" + std::string(keys[0]), g[k].token));
    }
  };
  // As given, the two lists lock in opposite orders: the store sorts by key hash.
  std::thread t1(worker, std::vector<std::string_view>{"a", "b", "c"});
  std::thread t2(worker, std::vector<std::string_view>{"c", "b", "a"});
  t1.join();
  t2.join();
  CHECK(errors == 0);  // a deadlock would be 40P01 here
  CHECK(granted > 0);
}

// ~0.1 s. last_error_message() describes the most recent call only: an older call's text used to
// outlive later calls that succeeded, ended in contention or failed without a text of their own.
// The failure: the sequence at its maximum (2200H, token_exhausted). Expected: that failure's text
// (the SQLSTATE), then "" after busy, after an invalid_argument and after a success.
TEST_CASE("postgres_store: last_error_message describes the most recent call only",
          "[postgres][errors]") {
  std::optional<std::string> ci = shared_pg();
  if (!ci) return;
  isolated iso(*ci);
  postgres_store s(iso.opts);
  auto held = s.try_acquire("held", "A", milliseconds(30000));
  REQUIRE(held);
  CHECK(s.last_error_message().empty());
  admin adm(*ci);
  const auto fail_once = [&] {
    const std::string last = adm.exec("SELECT last_value FROM " + iso.sequence());
    adm.exec("SELECT setval('" + iso.sequence() + "', 9223372036854775807)");
    auto bad = s.try_acquire("k", "A", milliseconds(30000));
    adm.exec("SELECT setval('" + iso.sequence() + "', " + last + ")");
    REQUIRE(!bad);
    CHECK(bad.error() == errc::token_exhausted);
    CHECK(s.last_error_message().find("2200H") != std::string::npos);
  };
  fail_once();
  CHECK(s.try_acquire("held", "B", milliseconds(30000)).error() == errc::busy);
  CHECK(s.last_error_message().empty());  // contention sets no text, and clears the old one
  fail_once();
  CHECK(s.try_acquire("", "A", milliseconds(30000)).error() == errc::invalid_argument);
  CHECK(s.last_error_message().empty());  // refused before the server: still the latest call
  fail_once();
  CHECK(s.try_acquire("k", "A", milliseconds(30000)));
  CHECK(s.last_error_message().empty());
}

}  // namespace test_postgres_store
