// SPDX-License-Identifier: MIT
// postgres_store's read-write grants (stores/detail/postgres_shared.hpp) against the shared
// PostgreSQL .ci/servers starts (HOLDFAST_PG_CONNINFO): the kit's read-write contract
// (conformance_shared.hpp), replies lost for real between the server and the store
// (tests/support/cut_proxy.hpp: applied, error returned) and asked again, expiry by the server's
// clock at its edges, the write intent's own expiry, an acquire that waited for the key's lock row
// judging what the holder committed, four sessions racing on one key, the plain and read-write
// name spaces apart on one sequence, and a missing read-write table. One set of tables for the
// file. Cost: about 1.6 s at load 6 (three cut replies, each with a 200 ms reconnect; one 250 ms
// TTL).
#include <libpq-fe.h>
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "../support/cut_proxy.hpp"
#include "../support/postgres_admin.hpp"
#include "../support/real_servers.hpp"
#include "../support/rw_checks.hpp"
#include "holdfast/backoff.hpp"
#include "holdfast/cancel.hpp"
#include "holdfast/read_write_lease.hpp"
#include "holdfast/stores/postgres.hpp"
#include "holdfast/testing/conformance_shared.hpp"

namespace test_postgres_rw {

using holdfast::errc;
using holdfast::fencing_token;
using holdfast::lease_mode;
using holdfast::postgres_options;
using holdfast::postgres_store;
using std::chrono::milliseconds;
constexpr lease_mode sh = lease_mode::shared;
constexpr lease_mode ex = lease_mode::exclusive;

namespace {

/// Options naming tables and a sequence of this test's own, dropped when it ends.
struct rw_tables {
  postgres_options opts;
  std::string conninfo;
  explicit rw_tables(std::string ci) : conninfo(std::move(ci)) {
    opts.conninfo = conninfo;
    opts.table = "hf_rw_" + hf_test::random_tag();
  }
  ~rw_tables() { hf_test::drop_store_schema(conninfo, opts); }
  rw_tables(const rw_tables&) = delete;
  rw_tables& operator=(const rw_tables&) = delete;
  [[nodiscard]] std::string table() const {
    return *holdfast::detail::pg_qualified(opts.schema, opts.table);
  }
  [[nodiscard]] std::string rw() const {
    return *holdfast::detail::pg_qualified(opts.schema, holdfast::detail::pg_rw_table_name(opts));
  }
  [[nodiscard]] std::string sequence() const {
    return *holdfast::detail::pg_qualified(opts.schema, holdfast::detail::pg_sequence_name(opts));
  }
  /// SQL: the rows of `key` (text) held by `owner` (text), or by anyone if `owner` is empty.
  [[nodiscard]] std::string rows(const std::string& key, const std::string& owner = "") const {
    return "SELECT count(*) FROM " + rw() + " WHERE key_hash = sha256(convert_to('" + key +
           "', 'UTF8')) AND owner <> ''::bytea" +
           (owner.empty() ? "" : " AND owner = convert_to('" + owner + "', 'UTF8')");
  }
  /// SQL: sets the expiry of `owner`'s row of `key` to `when` (an SQL expression).
  [[nodiscard]] std::string expire(const std::string& key, const std::string& owner,
                                   const std::string& when) const {
    return "UPDATE " + rw() + " SET expires_at = " + when +
           " WHERE key_hash = sha256(convert_to('" + key + "', 'UTF8')) AND owner = convert_to('" +
           owner + "', 'UTF8')";
  }
};

// One set of tables for the whole file (each test its own keys): DDL is the costly part of a
// test here. Dropped at exit.
rw_tables& tables(const std::string& conninfo) {
  static rw_tables t(conninfo);
  return t;
}

// The server's port in `conninfo` (libpq parses it), 0 if none.
int port_of(const std::string& conninfo) {
  int port = 0;
  PQconninfoOption* opts = PQconninfoParse(conninfo.c_str(), nullptr);
  for (PQconninfoOption* o = opts; o != nullptr && o->keyword != nullptr; ++o) {
    if (std::string(o->keyword) == "port" && o->val != nullptr) port = std::stoi(o->val);
  }
  PQconninfoFree(opts);
  return port;
}

}  // namespace

TEST_CASE("postgres_store meets the kit's read-write contract",
          "[postgres][read_write][contract]") {
  static_assert(holdfast::has_read_write_v<postgres_store>);
  std::optional<std::string> ci = hf_test::shared_pg();
  if (!ci) return;
  rw_tables& t = tables(*ci);
  postgres_store s(t.opts);
  const auto rep = holdfast::testing::check_read_write_contract(s);
  INFO("violations:\n" << rep.summary() << "\nlast error: " << s.last_error_message());
  CHECK(rep.ok());
  CHECK(rep.contract_checks > 20);
  hf_test::admin adm(*ci);
  CHECK(adm.exec(t.rows("conformance-rw")) == "0");  // every grant released: no row left
  CHECK(adm.exec(t.rows("conformance-rw-2")) == "0");
}

TEST_CASE("postgres_store read-write: a lost reply, asked again, gets the same grant",
          "[postgres][read_write][lost_reply]") {
  std::optional<std::string> ci = hf_test::shared_pg();
  if (!ci) return;
  const int port = port_of(*ci);
  REQUIRE(port > 0);
  hf_test::cut_proxy proxy(port);
  REQUIRE(proxy.port() > 0);
  rw_tables& t = tables(*ci);
  postgres_options via = t.opts;
  via.conninfo = *ci + " port=" + std::to_string(proxy.port());  // the last port= wins
  postgres_store a(via);
  postgres_store other(t.opts);
  hf_test::admin adm(*ci);
  REQUIRE(a.try_acquire_rw("warm", "A", milliseconds(10000), sh));  // connected before the cut
  const fencing_token before = *other.last_token();

  // A reader's grant applied, its reply lost: the re-ask gets that grant, and no second one.
  proxy.arm(200);
  auto lost = a.try_acquire_rw("k", "A", milliseconds(10000), sh);
  REQUIRE(proxy.cuts() == 1);
  REQUIRE_FALSE(lost.has_value());
  CHECK(lost.error() == errc::store_unavailable);
  auto r = a.try_acquire_rw("k", "A", milliseconds(10000), sh);
  REQUIRE(r);
  CHECK(r->token.value() == before.value() + 1);           // the grant the lost call made
  CHECK(other.last_token()->value() == r->token.value());  // no token drawn twice
  CHECK(adm.exec(t.rows("k")) == "1");                     // applied once: one reader

  // A release applied, its reply lost: the grant is gone; asking again is not_holder.
  proxy.arm(60);
  CHECK_FALSE(a.release_rw("k", "A", r->token, sh).has_value());
  CHECK(proxy.cuts() == 2);
  CHECK(a.release_rw("k", "A", r->token, sh).error() == errc::not_holder);  // (reconnected)
  CHECK(adm.exec(t.rows("k")) == "0");

  // A writer's grant applied, its reply lost: the re-ask gets it, its token above every token
  // granted before it, and a reader is kept out.
  proxy.arm(200);
  CHECK_FALSE(a.try_acquire_rw("k", "W", milliseconds(10000), ex).has_value());
  CHECK(proxy.cuts() == 3);
  auto w = a.try_acquire_rw("k", "W", milliseconds(10000), ex);
  REQUIRE(w);
  CHECK(w->token > r->token);
  CHECK(w->token == *other.last_token());
  CHECK(other.try_acquire_rw("k", "B", milliseconds(10000), sh).error() == errc::busy);
  REQUIRE(a.release_rw("k", "W", w->token, ex));
  REQUIRE(a.release_rw("warm", "A", before, sh));
  CHECK(adm.exec(t.rows("k")) == "0");
  CHECK(adm.exec(t.rows("warm")) == "0");
}

TEST_CASE("postgres_store read-write: expiry by the server's clock, at its edges",
          "[postgres][read_write]") {
  std::optional<std::string> ci = hf_test::shared_pg();
  if (!ci) return;
  rw_tables& t = tables(*ci);
  postgres_store s(t.opts);
  hf_test::admin adm(*ci);

  SECTION("a grant is stored for ttl + 1 us from the statement's reading, no less") {
    REQUIRE(s.connect());
    const std::string t0 = adm.exec("SELECT clock_timestamp()::text");
    auto r = s.try_acquire_rw("e1", "r", milliseconds(60000), sh);
    REQUIRE(r);
    const std::string t1 = adm.exec("SELECT clock_timestamp()::text");
    const std::string held = "(SELECT expires_at FROM " + t.rw() +
                             " WHERE key_hash = sha256('e1'::bytea) AND owner = 'r'::bytea)";
    const std::string span = "interval '60000 milliseconds' + interval '1 microsecond'";
    CHECK(adm.exec("SELECT " + held + " >= '" + t0 + "'::timestamptz + " + span) == "t");
    CHECK(adm.exec("SELECT " + held + " <= '" + t1 + "'::timestamptz + " + span) == "t");
    REQUIRE(s.release_rw("e1", "r", r->token, sh));
  }
  SECTION("a reader blocks a writer until its expiry, then neither renews nor blocks") {
    auto r = s.try_acquire_rw("e", "r", milliseconds(60000), sh);
    REQUIRE(r);
    // A second before its expiry by the server's clock: still live.
    adm.exec(t.expire("e", "r", "clock_timestamp() + interval '1 second'"));
    CHECK(s.try_acquire_rw("e", "w", milliseconds(60000), ex).error() == errc::busy);
    // Its expiry at the server's last reading (live while now < expires_at): over.
    adm.exec(t.expire("e", "r", "clock_timestamp()"));
    CHECK(s.renew_rw("e", "r", r->token, milliseconds(60000), sh).error() == errc::lease_lost);
    auto w = s.try_acquire_rw("e", "w", milliseconds(60000), ex);
    REQUIRE(w);
    CHECK(w->token > r->token);
    CHECK(adm.exec(t.rows("e", "r")) == "0");  // the expired reader's row went with the ask
    CHECK(s.release_rw("e", "r", r->token, sh).error() == errc::not_holder);
    REQUIRE(s.release_rw("e", "w", w->token, ex));
  }
  SECTION("a 250 ms reader in real time: the writer waits at least that long") {
    const auto start = std::chrono::steady_clock::now();
    auto r = s.try_acquire_rw("t", "r", milliseconds(250), sh);
    REQUIRE(r);
    auto w = s.try_acquire_rw("t", "w", milliseconds(5000), ex);
    CHECK(w.error() == errc::busy);
    while (!w && std::chrono::steady_clock::now() - start < std::chrono::seconds(3)) {
      std::this_thread::sleep_for(milliseconds(20));  // a real server: a bounded wait
      w = s.try_acquire_rw("t", "w", milliseconds(5000), ex);
    }
    REQUIRE(w);
    CHECK(std::chrono::steady_clock::now() - start >= milliseconds(250));
    CHECK(s.renew_rw("t", "r", r->token, milliseconds(5000), sh).error() == errc::lease_lost);
    CHECK(s.release_rw("t", "w", w->token, ex));
  }
}

TEST_CASE("postgres_store read-write: writers first, one intent, lasting its ask's TTL",
          "[postgres][read_write]") {
  std::optional<std::string> ci = hf_test::shared_pg();
  if (!ci) return;
  rw_tables& t = tables(*ci);
  postgres_store s(t.opts);
  hf_test::admin adm(*ci);
  const milliseconds ttl(10000);
  auto r0 = s.try_acquire_rw("doc", "r0", ttl, sh);
  auto r1 = s.try_acquire_rw("doc", "r1", ttl, sh);
  REQUIRE(r0);
  REQUIRE(r1);
  CHECK(s.try_acquire_rw("doc", "w", ttl, ex).error() == errc::busy);  // records the intent
  CHECK(adm.exec(t.rows("doc", "w")) == "1");
  CHECK(s.try_acquire_rw("doc", "r2", ttl, sh).error() == errc::busy);  // kept out
  CHECK(s.try_acquire_rw("doc", "v", ttl, ex).error() == errc::busy);   // one intent at a time
  CHECK(adm.exec(t.rows("doc", "v")) == "0");
  auto again = s.try_acquire_rw("doc", "r1", ttl, sh);  // a holder's re-ask still succeeds
  REQUIRE(again);
  CHECK(again->token == r1->token);
  CHECK(s.renew_rw("doc", "r0", r0->token, ttl, sh));                   // and so does its renewal
  CHECK(s.try_acquire_rw("doc", "r0", ttl, ex).error() == errc::busy);  // no upgrade in place
  // The intent ends at its TTL by the server's clock: then new readers come in again.
  adm.exec(t.expire("doc", "w", "clock_timestamp() + interval '1 second'"));
  CHECK(s.try_acquire_rw("doc", "r2", ttl, sh).error() == errc::busy);
  adm.exec(t.expire("doc", "w", "clock_timestamp()"));
  auto r2 = s.try_acquire_rw("doc", "r2", ttl, sh);
  REQUIRE(r2);
  // The writer asks again (a new intent); the readers leave; its next ask wins, above them all.
  CHECK(s.try_acquire_rw("doc", "w", ttl, ex).error() == errc::busy);
  REQUIRE(s.release_rw("doc", "r0", r0->token, sh));
  REQUIRE(s.release_rw("doc", "r1", r1->token, sh));
  REQUIRE(s.release_rw("doc", "r2", r2->token, sh));
  CHECK(s.try_acquire_rw("doc", "r3", ttl, sh).error() == errc::busy);  // the intent holds
  auto w = s.try_acquire_rw("doc", "w", ttl, ex);
  REQUIRE(w);
  CHECK(w->token > r2->token);
  CHECK(adm.exec(t.rows("doc")) == "1");  // the intent became the grant
  REQUIRE(s.release_rw("doc", "w", w->token, ex));
  // Any exclusive grant ends the intent, another writer's too (as memory_store).
  auto r5 = s.try_acquire_rw("doc", "r5", ttl, sh);
  REQUIRE(r5);
  CHECK(s.try_acquire_rw("doc", "w2", ttl, ex).error() == errc::busy);
  REQUIRE(s.release_rw("doc", "r5", r5->token, sh));
  auto v = s.try_acquire_rw("doc", "v", ttl, ex);
  REQUIRE(v);
  CHECK(adm.exec(t.rows("doc", "w2")) == "0");
  REQUIRE(s.release_rw("doc", "v", v->token, ex));
  auto r6 = s.try_acquire_rw("doc", "r6", ttl, sh);
  REQUIRE(r6);
  REQUIRE(s.release_rw("doc", "r6", r6->token, sh));
}

TEST_CASE(
    "postgres_store read-write: an acquire that waited for the key's lock row judges what "
    "its holder committed",
    "[postgres][read_write]") {
  std::optional<std::string> ci = hf_test::shared_pg();
  if (!ci) return;
  rw_tables& t = tables(*ci);
  postgres_options o = t.opts;
  o.application_name = "hf_rw_wait_" + hf_test::random_tag(8);  // to find its session
  postgres_store s(o);
  auto seed = s.try_acquire_rw("q", "seed", milliseconds(10000), sh);  // makes the lock row
  REQUIRE(seed);
  REQUIRE(s.release_rw("q", "seed", seed->token, sh));
  // Another session holds the lock row and grants a reader while the writer's acquire waits.
  hf_test::admin holder(*ci);
  holder.exec("BEGIN");
  holder.exec("SELECT 1 FROM " + t.rw() +
              " WHERE key_hash = sha256('q'::bytea) AND owner = ''::bytea FOR UPDATE");
  auto writer = std::async(std::launch::async,
                           [&] { return s.try_acquire_rw("q", "w", milliseconds(10000), ex); });
  hf_test::admin watch(*ci);
  const std::string waiting = "SELECT count(*) FROM pg_stat_activity WHERE application_name = '" +
                              o.application_name + "' AND wait_event_type = 'Lock'";
  for (int i = 0; i < 200 && watch.exec(waiting) == "0"; ++i) {
    std::this_thread::sleep_for(milliseconds(5));  // bounded: until the acquire waits (1 s)
  }
  CHECK(watch.exec(waiting) != "0");
  holder.exec("INSERT INTO " + t.rw() +
              " VALUES (sha256('q'::bytea), 'R'::bytea, 'q'::bytea, 's', nextval('" + t.sequence() +
              "'::regclass), clock_timestamp() + interval '1 minute')");
  holder.exec("COMMIT");
  const auto got = writer.get();
  REQUIRE_FALSE(got.has_value());
  CHECK(got.error() == errc::busy);  // it saw the reader committed while it waited
}

TEST_CASE("postgres_store read-write: sessions racing on one key never hold a writer with anyone",
          "[postgres][read_write][threads]") {
  std::optional<std::string> ci = hf_test::shared_pg();
  if (!ci) return;
  rw_tables& t = tables(*ci);
  // Each thread its own session; a holder marks itself between its grant and its release, so
  // any overlap the store let through shows as a writer beside another holder.
  const hf_test::rw_race_tally n = hf_test::run_rw_race([&] { return postgres_store(t.opts); }, 25);
  CHECK(n.overlaps == 0);
  CHECK(n.errors == 0);
  CHECK(n.grants > 20);
}

TEST_CASE("postgres_store read-write: apart from plain leases, one sequence for both",
          "[postgres][read_write]") {
  std::optional<std::string> ci = hf_test::shared_pg();
  if (!ci) return;
  rw_tables& t = tables(*ci);
  postgres_store s(t.opts);
  auto plain = s.try_acquire("n", "X", milliseconds(10000));
  REQUIRE(plain);
  auto w = s.try_acquire_rw("n", "Y", milliseconds(10000), ex);  // another lock of the same name
  REQUIRE(w);
  CHECK(w->token > plain->token);
  auto plain2 = s.try_acquire("m", "X", milliseconds(10000));
  REQUIRE(plain2);
  CHECK(plain2->token > w->token);
  CHECK(s.release("n", "X", plain->token));
  CHECK(s.release_rw("n", "Y", plain2->token, ex).error() == errc::not_holder);
  CHECK(s.release_rw("n", "Y", w->token, ex));
  CHECK(s.try_acquire_rw("n", "Y", milliseconds(10000), static_cast<lease_mode>(9)).error() ==
        errc::invalid_argument);
  CHECK(s.last_error_message().empty());
  // Through the recipe: two readers, then the writer once their handles are gone.
  holdfast::read_write_lease<postgres_store> doc(s, "doc/7");
  {
    auto r1 = doc.try_acquire_read(milliseconds(10000));
    auto r2 = doc.try_acquire_read(milliseconds(10000));
    REQUIRE(r1);
    REQUIRE(r2);
    CHECK(doc.try_acquire_write(milliseconds(10000)).error() == errc::busy);
  }
  auto lw = doc.try_acquire_write(milliseconds(10000));
  REQUIRE(lw);
  CHECK(lw->token() > plain2->token);
}

TEST_CASE("postgres_store read-write: release after the session was terminated reconnects once",
          "[postgres][read_write][faults]") {
  // As release(): the server ends the store's idle session (pg_terminate_backend, a restart, an
  // idle timeout). Before, release_rw failed once and the writer's grant blocked every reader
  // until its TTL. Expected: release_rw succeeds, the row is gone, a reader gets in at once.
  std::optional<std::string> ci = hf_test::shared_pg();
  if (!ci) return;
  rw_tables& t = tables(*ci);
  postgres_options o = t.opts;
  o.application_name = "hf-rw-idle-" + hf_test::random_tag(8);
  postgres_store s(o);
  hf_test::admin killer(*ci);
  const auto terminate = [&] {
    CHECK(killer.exec("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE "
                      "application_name = $1",
                      {o.application_name}) == "1");
    CHECK(hf_test::wait_until(  // until the server has ended it: the next call finds it broken
        [&] {
          return killer.exec("SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
                             {o.application_name}) == "0";
        },
        milliseconds(5000)));
  };
  hf_test::check_rw_release_after_drop(s, "idle", terminate,
                                       [&] { return killer.exec(t.rows("idle")) == "0"; });
}

TEST_CASE("postgres_store purge_expired: idle read-write keys go, live and recent ones stay",
          "[postgres][read_write][purge]") {
  // Before, purge_expired left the read-write table alone: the rows of keys nobody asks again
  // (and their lock rows) stayed for ever. The grace is 6 s (command_timeout 5 s); a row counts
  // as idle once it expired longer ago than that, by the server's clock.
  std::optional<std::string> ci = hf_test::shared_pg();
  if (!ci) return;
  rw_tables t(*ci);  // a table of its own: purge looks at every key
  postgres_store s(t.opts);
  hf_test::admin adm(*ci);
  const milliseconds grace(6000);
  const auto all_rows = [&](const std::string& key) {  // the lock row too
    return adm.exec("SELECT count(*) FROM " + t.rw() + " WHERE key_hash = sha256(convert_to('" +
                    key + "', 'UTF8'))");
  };
  for (const char* k : {"old", "recent", "live", "mixed", "freed"}) {
    REQUIRE(s.try_acquire_rw(k, "a", milliseconds(60000), sh));
  }
  REQUIRE(s.try_acquire_rw("mixed", "b", milliseconds(60000), sh));
  auto f = s.try_acquire_rw("freed", "w2", milliseconds(60000), sh);
  REQUIRE(f);
  REQUIRE(s.release_rw("freed", "w2", f->token, sh));
  adm.exec(t.expire("old", "a", "clock_timestamp() - interval '7 seconds'"));     // past grace
  adm.exec(t.expire("recent", "a", "clock_timestamp() - interval '5 seconds'"));  // within it
  adm.exec(t.expire("mixed", "a", "clock_timestamp() - interval '1 hour'"));      // b still live
  adm.exec(t.expire("freed", "a", "'-infinity'"));
  CHECK(all_rows("old") == "2");
  auto n = s.purge_expired(grace);
  REQUIRE(n);
  CHECK(*n == 4);  // "old": its grant and lock row; "freed": the same
  CHECK(all_rows("old") == "0");
  CHECK(all_rows("freed") == "0");
  CHECK(all_rows("recent") == "2");
  CHECK(all_rows("live") == "2");
  CHECK(all_rows("mixed") == "3");  // a key with a live grant keeps every row (its next ask
                                    // deletes the expired ones)
  CHECK(adm.exec("SELECT count(*) FROM " + t.rw() + " WHERE token < 0") == "0");  // no mark left
  // A purged key works as a new one; tokens keep rising (one sequence).
  auto again = s.try_acquire_rw("old", "c", milliseconds(60000), ex);
  REQUIRE(again);
  CHECK(again->token > f->token);
  CHECK(s.renew_rw("old", "c", again->token, milliseconds(60000), ex));
  CHECK(s.release_rw("old", "c", again->token, ex));
  // grace <= command_timeout is refused, as before.
  CHECK(s.purge_expired(milliseconds(5000)).error() == errc::invalid_argument);
}

TEST_CASE("postgres_store purge_expired waits for a key's lock row and keeps what was committed",
          "[postgres][read_write][purge]") {
  // Why purge marks first and deletes in a second statement: a key idle when purge looked, whose
  // lock row another session holds while it grants a reader. A one-statement purge would wait,
  // then judge the key by its older snapshot and delete the lock row under the new grant (whose
  // renew and release then fail). Expected: the purge waits, sees the reader, deletes nothing.
  std::optional<std::string> ci = hf_test::shared_pg();
  if (!ci) return;
  rw_tables t(*ci);
  postgres_options o = t.opts;
  o.application_name = "hf_rw_purge_" + hf_test::random_tag(8);
  postgres_store s(o);
  auto seed = s.try_acquire_rw("p", "seed", milliseconds(10000), sh);  // makes the lock row
  REQUIRE(seed);
  REQUIRE(s.release_rw("p", "seed", seed->token, sh));
  hf_test::admin holder(*ci);
  holder.exec("BEGIN");
  holder.exec("SELECT 1 FROM " + t.rw() +
              " WHERE key_hash = sha256('p'::bytea) AND owner = ''::bytea FOR UPDATE");
  auto purge = std::async(std::launch::async, [&] { return s.purge_expired(milliseconds(6000)); });
  hf_test::admin watch(*ci);
  const std::string waiting = "SELECT count(*) FROM pg_stat_activity WHERE application_name = '" +
                              o.application_name + "' AND wait_event_type = 'Lock'";
  for (int i = 0; i < 200 && watch.exec(waiting) == "0"; ++i) {
    std::this_thread::sleep_for(milliseconds(5));  // bounded: until the purge waits (1 s)
  }
  CHECK(watch.exec(waiting) != "0");
  holder.exec("INSERT INTO " + t.rw() +
              " VALUES (sha256('p'::bytea), 'R'::bytea, 'p'::bytea, 's', nextval('" + t.sequence() +
              "'::regclass), clock_timestamp() + interval '1 minute')");
  holder.exec("COMMIT");
  const auto n = purge.get();
  REQUIRE(n);
  CHECK(*n == 0);
  CHECK(watch.exec("SELECT count(*) FROM " + t.rw() + " WHERE key_hash = sha256('p'::bytea)") ==
        "2");
  const std::string token = watch.exec("SELECT token FROM " + t.rw() + " WHERE owner = 'R'::bytea");
  const fencing_token rt(std::stoull(token));
  CHECK(s.renew_rw("p", "R", rt, milliseconds(10000), sh));  // its lock row is still there
  CHECK(s.release_rw("p", "R", rt, sh));
}

TEST_CASE("postgres_store read-write: a release wakes the waiters at once",
          "[postgres][read_write][wait]") {
  // Before, a read-write release notified nobody and acquire_read/acquire_write backed off (here
  // at least 2 s a round). Expected: release_rw's NOTIFY wakes a waiting writer, and a writer's
  // release wakes both waiting readers, each well under the backoff.
  static_assert(holdfast::can_wait_for_release_rw_v<postgres_store>);
  std::optional<std::string> ci = hf_test::shared_pg();
  if (!ci) return;
  rw_tables& t = tables(*ci);
  postgres_store holder(t.opts);
  postgres_store waiter(t.opts);
  hf_test::admin adm(*ci);
  const std::string intent =
      "SELECT count(*) FROM " + t.rw() + " WHERE key_hash = sha256('wdoc'::bytea) AND mode = 'i'";
  hf_test::check_rw_release_wakes(
      holder, waiter, "wdoc", "wdoc2", [&] { return adm.exec(intent) == "1"; }, milliseconds(200));
}

TEST_CASE("postgres_store read-write: a waiter never sleeps past what keeps it out",
          "[postgres][read_write][wait]") {
  std::optional<std::string> ci = hf_test::shared_pg();
  if (!ci) return;
  rw_tables& t = tables(*ci);
  postgres_store s(t.opts);
  // (no check that a 100 ms deadline bounds the wait, unlike the Redis suite's)
  hf_test::check_rw_wait_ends(s, "wfree", "wk", "wk2", false);
}

TEST_CASE("postgres_store read-write: without its table, misconfigured; plain leases still work",
          "[postgres][read_write][errors]") {
  std::optional<std::string> ci = hf_test::shared_pg();
  if (!ci) return;
  rw_tables t(*ci);
  CHECK(postgres_store::schema_sql(t.opts).find(t.rw()) != std::string::npos);
  hf_test::admin adm(*ci);
  {
    postgres_store maker(t.opts);  // creates all three, then the read-write table goes
    REQUIRE(maker.connect());
  }
  adm.exec("DROP TABLE " + t.rw());
  postgres_options o = t.opts;
  o.create_schema = false;
  postgres_store s(o);
  auto g = s.try_acquire("k", "me", milliseconds(10000));
  REQUIRE(g);
  CHECK(s.try_acquire_rw("k", "me", milliseconds(10000), sh).error() == errc::misconfigured);
  CHECK(s.last_error_message().find("42P01") != std::string::npos);  // undefined_table
  CHECK(s.release_rw("k", "me", g->token, sh).error() == errc::misconfigured);
  CHECK(s.release("k", "me", g->token));
  auto purged = s.purge_expired(milliseconds(6000));  // the lease table only: no error
  INFO(s.last_error_message());
  CHECK(purged.has_value());
  postgres_options named = t.opts;
  named.rw_table = std::string(64, 'r');
  CHECK(named.check() == errc::invalid_argument);
}

}  // namespace test_postgres_rw
