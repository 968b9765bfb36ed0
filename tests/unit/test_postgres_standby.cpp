// SPDX-License-Identifier: MIT
// Tests of postgres_store over a primary and a streaming standby the tests own (pg_basebackup
// -R), the standby promoted after the primary is killed -9 (issue #20): with an asynchronous
// standby the grants it had not received are lost and their tokens come again; with a
// synchronous one (synchronous_standby_names = '*', synchronous_commit = on) nothing reported is
// lost. And deployment() says which of the two it is. Each case ~3 s (two servers, a base backup,
// a promotion).
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "../support/real_servers.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/stores/postgres.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_postgres_standby {

using holdfast::errc;
using holdfast::fencing_token;
using holdfast::postgres_options;
using holdfast::postgres_store;
using namespace std::chrono_literals;

namespace {

struct pair_of_servers {
  std::unique_ptr<hf_test::postgres_server> primary;
  std::unique_ptr<hf_test::postgres_server> standby;
};

/// A primary (with `settings`) and its standby, both serving; nullptr members after a loud skip
/// outside CI.
pair_of_servers start_pair(std::vector<std::string> settings) {
  pair_of_servers out;
  out.primary = std::make_unique<hf_test::postgres_server>(0, std::move(settings));
  if (!out.primary->start()) {
    const std::string why = "cannot start postgres: " + out.primary->why();
    if (hf_test::in_ci() || out.primary->available()) FAIL(why);
    hf_test::loud_skip(why);
    return {};
  }
  out.standby = std::make_unique<hf_test::postgres_server>(out.primary->port());
  if (!out.standby->start()) FAIL("cannot start the standby: " + out.standby->why());
  // Streaming before the first write (with a synchronous standby a commit would wait for it).
  REQUIRE(hf_test::wait_until(
      [&] {
        return hf_test::run_program(
            {"/usr/bin/psql", "-q", "-X", "-d", out.primary->conninfo(), "-c",
             "DO $$BEGIN IF (SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming') "
             "= 0 THEN RAISE EXCEPTION 'not yet'; END IF; END$$"},
            "/dev/null");
      },
      10s));
  return out;
}

postgres_options options_for(const hf_test::postgres_server& s) {
  postgres_options o;
  o.conninfo = s.conninfo();
  o.connect_timeout = 3s;
  o.command_timeout = 3s;
  return o;
}

bool mentions(const holdfast::deployment_report& r, const std::string& what) {
  for (const std::string& risk : r.risks) {
    if (risk.find(what) != std::string::npos) return true;
  }
  return false;
}

/// Waits (bounded: 10 s) until the standby is streaming from `primary`.
void wait_streaming(postgres_store& primary) {
  REQUIRE(hf_test::wait_until(
      [&] {
        auto r = primary.deployment();
        return r && r->facts.find("standbys=1") != std::string::npos;
      },
      10s));
}

/// Promotes the standby (SELECT pg_promote(), which waits until it is done) and returns a store
/// on it that grants (bounded: 20 s). A store cannot connect to a standby at all: its session
/// setup refuses a server in recovery (postgres_life_sql).
std::unique_ptr<postgres_store> promote(const hf_test::postgres_server& standby) {
  REQUIRE(hf_test::run_program(
      {"/usr/bin/psql", "-q", "-X", "-d", standby.conninfo(), "-c", "SELECT pg_promote(true, 30)"},
      "/dev/null"));
  auto s = std::make_unique<postgres_store>(options_for(standby));
  REQUIRE(hf_test::wait_until(
      [&] {
        auto r = s->deployment();
        return r && !mentions(*r, "is a standby");
      },
      20s));
  return s;
}

}  // namespace

// Expected: the standby, its WAL receiver stopped while A takes 40 grants on the primary, misses
// them; the primary dies; the promoted standby's sequence is behind A's newest token (its 32-value
// WAL prefetch covers fewer grants than A took), and A's grant of k39 is lost (B gets k39). But
// the promoted server is a new life (its timeline): B's session raised the sequence by 2^32
// before drawing, so B's token passes A's newest and fences admit B without an operator
// (issue 20 part 3, postgres_life_sql). Never below: B's token is above every token A had.
TEST_CASE("postgres standby: an asynchronous standby promoted loses grants; tokens come again",
          "[postgres][failover]") {
  pair_of_servers pg = start_pair({});
  if (!pg.primary) return;
  postgres_store on_primary(options_for(*pg.primary));
  REQUIRE(on_primary.try_acquire("warm-up", "w", 30s));
  wait_streaming(on_primary);
  auto report = on_primary.deployment();
  REQUIRE(report);
  INFO(report->facts);
  CHECK(mentions(*report, "asynchronous standby"));
  CHECK(report->life.size() > 10);

  REQUIRE(hf_test::wait_until(  // the standby replayed the table and the warm-up grant
      [&] {
        return hf_test::run_program({"/usr/bin/psql", "-q", "-X", "-d", pg.standby->conninfo(),
                                     "-c", "SELECT 1 FROM holdfast_leases LIMIT 1"},
                                    "/dev/null");
      },
      10s));
  // The standby falls behind: its WAL receiver is stopped (a SIGSTOP would not do: the WAL
  // already in its socket buffer would still be replayed after SIGCONT).
  REQUIRE(hf_test::run_program(
      {"/usr/bin/psql", "-q", "-X", "-d", pg.standby->conninfo(), "-c",
       "ALTER SYSTEM SET primary_conninfo TO ''", "-c", "SELECT pg_reload_conf()"},
      "/dev/null"));
  REQUIRE(hf_test::wait_until(
      [&] {
        auto r = on_primary.deployment();
        return r && r->facts.find("standbys=0") != std::string::npos;
      },
      10s));
  fencing_token newest_a;
  for (int i = 0; i < 40; ++i) {
    auto a = on_primary.try_acquire("k" + std::to_string(i), "A", 30s);
    REQUIRE(a);
    newest_a = a->token;  // the fence admits each: newest is A's last
  }
  pg.primary->kill9();
  std::unique_ptr<postgres_store> on_standby = promote(*pg.standby);
  auto b = on_standby->try_acquire("k39", "B", 30s);  // A's grant of k39 was lost with it
  INFO(on_standby->last_error_message());
  REQUIRE(b);
  CHECK(b->token > newest_a);  // raised past A's: a fence that admitted A's newest admits B
  CHECK(b->token.value() < newest_a.value() + (std::uint64_t{1} << 32) + 40);  // one raise
  auto after = on_standby->deployment();
  REQUIRE(after);
  CHECK(after->life != report->life);  // the same system identifier, a new timeline
  CHECK(after->life.substr(0, after->life.find('/')) ==
        report->life.substr(0, report->life.find('/')));
  auto b2 = on_standby->try_acquire("k-after", "B", 30s);
  REQUIRE(b2);
  CHECK(b2->token > b->token);
  CHECK(b2->token.value() < b->token.value() + 40);  // the life is recorded: no second raise
}

// ~3 s. The store's very first grant is lost to the promotion: the standby stops receiving WAL
// before any store connected, so it never sees the table, its sequence or the life record. The
// promoted server's first store creates all three afresh on timeline 2. Expected: with no record
// on a timeline after 1 the session raises the new sequence by 2^32 (postgres_life_sql), so B's
// token passes A's #1; before that rule B drew #1 again and a fence refused B (token_reissued)
// for as long as A's token stayed the newest it admitted.
TEST_CASE("postgres standby: promoted before the store's first grant, the new table is raised",
          "[postgres][failover]") {
  pair_of_servers pg = start_pair({});
  if (!pg.primary) return;
  REQUIRE(hf_test::run_program(
      {"/usr/bin/psql", "-q", "-X", "-d", pg.standby->conninfo(), "-c",
       "ALTER SYSTEM SET primary_conninfo TO ''", "-c", "SELECT pg_reload_conf()"},
      "/dev/null"));
  postgres_store on_primary(options_for(*pg.primary));
  REQUIRE(hf_test::wait_until(
      [&] {
        auto r = on_primary.deployment();
        return r && r->facts.find("standbys=0") != std::string::npos;
      },
      10s));
  auto a = on_primary.try_acquire("k", "A", 30s);  // creates the table: token #1
  REQUIRE(a);
  CHECK(a->token == fencing_token(1));
  pg.primary->kill9();
  std::unique_ptr<postgres_store> on_standby = promote(*pg.standby);
  auto b = on_standby->try_acquire("k", "B", 30s);
  INFO(on_standby->last_error_message());
  REQUIRE(b);
  CHECK(b->token > a->token);
  CHECK(b->token.value() > (std::uint64_t{1} << 32));  // raised: the table had no record
  CHECK(b->token.value() < (std::uint64_t{1} << 32) + 40);
  auto b2 = on_standby->try_acquire("k2", "B", 30s);
  REQUIRE(b2);
  CHECK(b2->token.value() < b->token.value() + 40);  // recorded now: no second raise
}

// Expected: with a synchronous standby every grant reported was flushed on it before the commit
// returned, so the promoted standby still holds A's lease on "k" (B is busy) and its tokens pass
// A's newest.
TEST_CASE("postgres standby: a synchronous standby promoted keeps every grant reported",
          "[postgres][failover]") {
  pair_of_servers pg = start_pair({"synchronous_standby_names=*", "synchronous_commit=on"});
  if (!pg.primary) return;
  postgres_store on_primary(options_for(*pg.primary));
  wait_streaming(on_primary);
  REQUIRE(hf_test::wait_until(
      [&] { return static_cast<bool>(on_primary.try_acquire("warm-up", "w", 30s)); }, 10s));
  auto report = on_primary.deployment();
  REQUIRE(report);
  INFO(report->facts);
  CHECK(report->facts.find("synchronous_standbys=1") != std::string::npos);
  CHECK_FALSE(mentions(*report, "asynchronous standby"));
  fencing_token newest_a;
  for (int i = 0; i < 40; ++i) {
    auto a = on_primary.try_acquire("k" + std::to_string(i), "A", 30s);
    REQUIRE(a);
    newest_a = a->token;
  }
  pg.primary->kill9();
  std::unique_ptr<postgres_store> on_standby = promote(*pg.standby);
  CHECK(on_standby->try_acquire("k39", "B", 30s).error() == errc::busy);  // A's lease survived
  auto b = on_standby->try_acquire("k-new", "B", 30s);
  REQUIRE(b);
  CHECK(b->token > newest_a);
}

// ~4 s. A release commits locally (synchronous_commit = local for its transaction): a release the
// promotion loses only keeps the key held until its expiry, so it waits for no standby. Expected,
// with the synchronous standby's WAL receiver stopped: a grant waits for it and fails with an
// error when command_timeout cancels it (never a grant); A's release of a grant made while the
// standby streamed returns at once, and B is granted that key on the primary's own view after it.
TEST_CASE("postgres standby: a release waits for no synchronous standby; a grant does",
          "[postgres][failover]") {
  pair_of_servers pg = start_pair({"synchronous_standby_names=*", "synchronous_commit=on"});
  if (!pg.primary) return;
  postgres_options o = options_for(*pg.primary);
  o.command_timeout = 1500ms;
  postgres_store on_primary(o);
  wait_streaming(on_primary);
  fencing_token a_token;
  REQUIRE(hf_test::wait_until(
      [&] {
        auto a = on_primary.try_acquire("k", "A", 30s);
        if (a) a_token = a->token;
        return static_cast<bool>(a);
      },
      10s));
  REQUIRE(hf_test::run_program(  // the standby stops receiving: synchronous commits now wait
      {"/usr/bin/psql", "-q", "-X", "-d", pg.standby->conninfo(), "-c",
       "ALTER SYSTEM SET primary_conninfo TO ''", "-c", "SELECT pg_reload_conf()"},
      "/dev/null"));
  REQUIRE(hf_test::wait_until(
      [&] {
        auto r = on_primary.deployment();
        return r && r->facts.find("standbys=0") != std::string::npos;
      },
      10s));
  auto waited = on_primary.try_acquire("other", "C", 30s);
  INFO(on_primary.last_error_message());
  REQUIRE_FALSE(waited);  // the grant waited for the standby, and command_timeout cancelled it
  // It had committed locally: the store gave it back rather than leave it to C's TTL.
  CHECK(waited.error() == errc::grant_not_durable);
  auto left = on_primary.inspect("other");
  REQUIRE(left);
  CHECK_FALSE(left->has_value());
  const auto t0 = std::chrono::steady_clock::now();
  auto released = on_primary.release("k", "A", a_token);
  const auto took = std::chrono::steady_clock::now() - t0;
  INFO(on_primary.last_error_message());
  CHECK(released);
  CHECK(took < o.command_timeout);  // it did not wait out command_timeout for the standby
}

// ~5 s (two servers, a base backup, the standby stopped and started). With the synchronous
// standby stopped, every grant's commit waits for it. Expected: a blocking acquire with a 2 s
// budget (command_timeout 10 s, so only the deadline can bound it) returns errc::timeout by
// 2 s + 2 x pg_settle_bound (cancel and outcome, then the release: store_deadline.hpp, D1) +
// 100 ms of slack for the loaded machine, its last store error grant_not_durable: the insert,
// committed locally when the cancel ended its wait, was given back, so the key is free at once
// and stays free once the standby is back (the cancelled commit does not come back as A's
// grant); B then acquires it at once. Before the fix the call took command_timeout and A's grant
// appeared when the standby returned.
TEST_CASE("postgres standby: with the synchronous standby stopped, acquire keeps its deadline",
          "[postgres][failover][deadline]") {
  pair_of_servers pg = start_pair({"synchronous_standby_names=*", "synchronous_commit=on"});
  if (!pg.primary) return;
  postgres_options o = options_for(*pg.primary);
  o.command_timeout = 10s;
  postgres_store s(o);
  wait_streaming(s);
  REQUIRE(hf_test::wait_until([&] { return static_cast<bool>(s.try_acquire("warm-up", "w", 30s)); },
                              10s));
  pg.standby->stop();
  holdfast::acquire_report rep;
  holdfast::acquire_options<> ao;
  ao.report = &rep;
  ao.owner = "A";
  const auto t0 = std::chrono::steady_clock::now();
  auto l = holdfast::acquire(s, "k", 30s, 2s, ao);
  const auto took = std::chrono::steady_clock::now() - t0;
  INFO(rep.last_store_message);
  REQUIRE_FALSE(l);
  CHECK(l.error() == errc::timeout);
  CHECK(took < 2s + 2 * holdfast::detail::pg_settle_bound + 100ms);
  CHECK(rep.last_store_error == errc::grant_not_durable);
  auto now_free = s.inspect("k");
  REQUIRE(now_free);
  CHECK_FALSE(now_free->has_value());
  // The standby returns: nothing of A's comes back with it; B is granted at once.
  REQUIRE(pg.standby->start());
  wait_streaming(s);
  auto b = s.try_acquire("k", "B", 30s);
  INFO(s.last_error_message());
  REQUIRE(b);
  auto rec = s.inspect("k");
  REQUIRE(rec);
  REQUIRE(rec->has_value());
  CHECK((*rec)->owner == "B");
}

// ~6 s (two servers, a base backup, the standby stopped and started). Leave nothing behind, for
// the grants try_acquire's settling did not cover: with the synchronous standby stopped, a
// multi-key grant's COMMIT and a read-write grant's commit wait for it. Expected: each answers by
// command_timeout (1 s) + the cancel and the releases (2 x pg_settle_bound on a live server) +
// slack with grant_not_durable: cancelled, committed locally, given back. Nothing of A's comes back
// when the standby returns: B then takes every key at once. Before the fix both answered timeout
// at command_timeout, their sessions dropped, and the grants committed when the standby came
// back, so B found every key held by A until its 30 s TTL.
TEST_CASE("postgres standby: try_acquire_all and try_acquire_rw give back a grant made too late",
          "[postgres][failover][deadline]") {
  pair_of_servers pg = start_pair({"synchronous_standby_names=*", "synchronous_commit=on"});
  if (!pg.primary) return;
  postgres_options o = options_for(*pg.primary);
  o.command_timeout = 1s;
  postgres_store s(o);
  wait_streaming(s);
  REQUIRE(hf_test::wait_until([&] { return static_cast<bool>(s.try_acquire("warm-up", "w", 30s)); },
                              10s));
  pg.standby->stop();
  const auto bound = o.command_timeout + 2 * holdfast::detail::pg_settle_bound + 300ms;
  const std::string_view keys[] = {"m1", "m2"};
  holdfast::grant grants[2];
  auto t0 = std::chrono::steady_clock::now();
  auto all = s.try_acquire_all(keys, 2, "A", 30s, grants);
  auto took = std::chrono::steady_clock::now() - t0;
  INFO(s.last_error_message());
  REQUIRE_FALSE(all);
  CHECK(all.error() == errc::grant_not_durable);
  CHECK(took < bound);
  t0 = std::chrono::steady_clock::now();
  auto rw = s.try_acquire_rw("rw", "A", 30s, holdfast::lease_mode::exclusive);
  took = std::chrono::steady_clock::now() - t0;
  INFO(s.last_error_message());
  REQUIRE_FALSE(rw);
  CHECK(rw.error() == errc::grant_not_durable);
  CHECK(took < bound);
  REQUIRE(pg.standby->start());
  wait_streaming(s);
  for (const std::string_view k : keys) {
    auto b = s.try_acquire(k, "B", 30s);
    INFO(std::string(k) + ": " + s.last_error_message());
    CHECK(b);
  }
  auto b_rw = s.try_acquire_rw("rw", "B", 30s, holdfast::lease_mode::exclusive);
  INFO(s.last_error_message());
  CHECK(b_rw);
}

// ~3 s (two servers, a base backup). A store and a fence pointed at the standby (hot standby,
// read-only) and a store whose session is read-only on the primary. Expected: every path
// (connect with its schema creation, acquire, renew, release, the fence) answers misconfigured at
// once, never store_unavailable: a blocking acquire with a 5 s budget returns in well under 1 s,
// the text saying the server is a standby (pg_is_in_recovery()), naming host:port and saying to
// point the store at the primary. The read-only session names default_transaction_read_only.
TEST_CASE("postgres standby: a store or fence pointed at a standby is misconfigured, at once",
          "[postgres][failover][errors]") {
  pair_of_servers pg = start_pair({});
  if (!pg.primary) return;
  const std::string where = "127.0.0.1:" + std::to_string(pg.standby->port());
  auto says_standby = [&](const std::string& msg) {
    INFO(msg);
    CHECK(msg.find("is a standby (in recovery: pg_is_in_recovery()") != std::string::npos);
    CHECK(msg.find(where) != std::string::npos);
    CHECK(msg.find("point the store at the primary") != std::string::npos);
  };
  postgres_store s(options_for(*pg.standby));
  const auto t0 = std::chrono::steady_clock::now();
  auto l = holdfast::acquire(s, "k", 3000ms, 5s);
  const auto took = std::chrono::steady_clock::now() - t0;
  REQUIRE(!l);
  CHECK(l.error() == errc::misconfigured);
  CHECK(took < 1s);
  says_standby(s.last_error_message());
  CHECK(s.connect().error() == errc::misconfigured);  // the schema's creation is never tried
  CHECK(s.try_acquire("k", "A", 3s).error() == errc::misconfigured);
  CHECK(s.renew("k", "A", fencing_token{1}, 3s).error() == errc::misconfigured);
  CHECK(s.release("k", "A", fencing_token{1}).error() == errc::misconfigured);
  says_standby(s.last_error_message());

  holdfast::postgres_fence fence(options_for(*pg.standby));
  holdfast::postgres_fence_options fo;
  fo.table = "hf_standby_fence";
  auto upd = holdfast::postgres_fenced_update::make(fo, "n = n + 1");
  REQUIRE(upd);
  CHECK(fence.execute(*upd, fencing_token{1}, "A", "r").error() == errc::misconfigured);
  says_standby(fence.last_error_message());

  // On the primary, a read-only session: the schema creation's 25006, misconfigured too.
  postgres_options ro = options_for(*pg.primary);
  ro.conninfo += " options='-c default_transaction_read_only=on'";
  postgres_store on_ro(ro);
  CHECK(on_ro.try_acquire("k", "A", 3s).error() == errc::misconfigured);
  INFO(on_ro.last_error_message());
  CHECK(on_ro.last_error_message().find("default_transaction_read_only") != std::string::npos);
  CHECK(on_ro.last_error_message().find("25006") != std::string::npos);
  // The primary itself grants.
  postgres_store on_primary(options_for(*pg.primary));
  CHECK(on_primary.try_acquire("k", "A", 3s));
}

}  // namespace test_postgres_standby
