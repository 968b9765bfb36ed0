// SPDX-License-Identifier: MIT
// tests/unit/test_failover_load_postgres.cpp - a multi-process fenced workload while a
// PostgreSQL primary fails over (issue #20 part 5): a primary with a synchronous standby
// (synchronous_standby_names = '*') of the test's own; four worker processes
// (tests/support/failover_load.hpp) acquire one key through a libpq multi-host connection string
// (both servers, target_session_attrs=read-write: the way a client follows a promotion), two with
// synchronous_commit = on (a grant is reported once the standby flushed it) and two with
// synchronous_commit = local (no acknowledgement), write through postgres_fenced_insert on a
// PostgreSQL that does not fail over (the shared one of .ci/servers, else one of the test's own),
// and release, with a TTL of 1 s. The primary is killed (-9) and the standby promoted with
// `pg_ctl promote`, as a failover manager would. Expected (failover_load::check):
//   - the fence's log (inserted by the fenced statement itself) is in token order with one owner
//     per token (S1);
//   - no grant a synchronous_commit = on worker was told is lost; the others' may be, counted;
//   - the workers get through the fence again with the promoted server's tokens (its timeline is
//     a new life: the first session raises the sequence by 2^32), no operator acting, within
//     30 s of the kill (measured: see the summary line).
// Cost on the 2-core CI machine: ~8 s (initdb, a base backup, the promotion, a second of load
// after recovery).
#include <dirent.h>
#include <libpq-fe.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "../support/failover_load.hpp"
#include "../support/postgres_admin.hpp"
#include "../support/real_servers.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/stores/postgres.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_failover_load_postgres {

using holdfast::fencing_token;
using holdfast::postgres_options;
using holdfast::postgres_store;
using namespace std::chrono_literals;
namespace fl = failover_load;

namespace {

constexpr int ttl_ms = 1000;
constexpr char worker_test[] = "failover load postgres worker";

holdfast::postgres_fence_options fence_options(const std::string& tag) {
  holdfast::postgres_fence_options f;
  f.table = "failover_load_" + tag + "_fence";
  return f;
}
std::string log_table(const std::string& tag) {
  return "failover_load_" + tag + "_log";
}

/// Where pg_ctl is: HOLDFAST_PG_BINDIR, else the newest /usr/lib/postgresql/*/bin.
std::string pg_bindir() {
  if (std::optional<std::string> d = hf_test::env("HOLDFAST_PG_BINDIR")) return *d;
  std::string best;
  int best_version = 0;
  if (DIR* d = ::opendir("/usr/lib/postgresql")) {
    while (dirent* e = ::readdir(d)) {
      const int version = std::atoi(e->d_name);
      if (version > best_version) {
        best_version = version;
        best = std::string("/usr/lib/postgresql/") + e->d_name + "/bin";
      }
    }
    ::closedir(d);
  }
  return best;
}

/// The fence's log, in admission order (n is drawn while the fence row is locked).
std::vector<fl::admitted> fence_log(hf_test::admin& db, const std::string& tag) {
  std::vector<fl::admitted> out;
  PGresult* r =
      PQexec(db.conn(), ("SELECT token, owner FROM " + log_table(tag) + " ORDER BY n").c_str());
  REQUIRE(PQresultStatus(r) == PGRES_TUPLES_OK);
  for (int i = 0; i < PQntuples(r); ++i) {
    fl::admitted a;
    a.token = std::strtoull(PQgetvalue(r, i, 0), nullptr, 10);
    a.owner = PQgetvalue(r, i, 1);
    out.push_back(a);
  }
  PQclear(r);
  return out;
}

/// Runs `sql` on `conninfo` with psql (bounded), true iff it succeeded.
bool psql(const std::string& conninfo, const std::string& sql) {
  return hf_test::run_program({"/usr/bin/psql", "-q", "-X", "-d", conninfo, "-c", sql}, "/dev/null",
                              {}, "/", 10s);
}

/// A primary whose commits wait for a synchronous standby, and that standby, streaming.
std::pair<std::unique_ptr<hf_test::postgres_server>, std::unique_ptr<hf_test::postgres_server>>
start_pair() {
  auto primary = std::make_unique<hf_test::postgres_server>(
      0, std::vector<std::string>{"synchronous_standby_names=*", "synchronous_commit=on"});
  if (!primary->start()) FAIL("cannot start postgres: " + primary->why());
  auto standby = std::make_unique<hf_test::postgres_server>(primary->port());
  if (!standby->start()) FAIL("cannot start the standby: " + standby->why());
  REQUIRE(hf_test::wait_until(
      [&] {
        return psql(primary->conninfo(),
                    "DO $$BEGIN IF (SELECT count(*) FROM pg_stat_replication WHERE sync_state = "
                    "'sync' AND state = 'streaming') = 0 THEN RAISE EXCEPTION 'not yet'; END IF; "
                    "END$$");
      },
      15s));
  return {std::move(primary), std::move(standby)};
}

}  // namespace

// Run by the case below in worker processes (hidden: it does nothing unless
// HOLDFAST_FAILOVER_WORKER names a settings file).
TEST_CASE("failover load postgres worker", "[.][failover-load]") {
  std::optional<fl::settings> s = fl::worker_settings();
  if (!s) return;
  postgres_options o;
  o.conninfo = s->get("conninfo");
  o.connect_timeout = 1000ms;
  o.command_timeout = 1000ms;
  postgres_store store(o);
  postgres_options fo;
  fo.conninfo = s->get("fence_conninfo");
  holdfast::postgres_fence fence(fo);
  const std::string tag = s->get("tag");
  auto statement = holdfast::postgres_fenced_insert::make(fence_options(tag), log_table(tag),
                                                          "token, owner, tag", "$1, $3, $4");
  if (!statement) return;  // the parent sees no writes and fails
  fl::run_worker(
      store,
      [&](fencing_token t, std::string_view owner, const std::string& write_tag) {
        return fence.execute(*statement, t, owner, "load", {write_tag});
      },
      *s);
}

TEST_CASE("failover load postgres: kill -9 of the primary then pg_ctl promote of its standby",
          "[postgres][failover][failover-load]") {
  std::optional<std::string> fence_db = hf_test::shared_pg();
  if (!fence_db) return;
  auto servers = start_pair();
  hf_test::postgres_server& primary = *servers.first;
  hf_test::postgres_server& standby = *servers.second;
  const auto began = std::chrono::steady_clock::now();
  const std::string tag = hf_test::random_tag();
  hf_test::admin db(*fence_db);
  auto table = holdfast::postgres_fenced_insert::table_sql(fence_options(tag));
  REQUIRE(table);
  db.exec(*table);
  db.exec("CREATE TABLE " + log_table(tag) +
          " (n bigserial PRIMARY KEY, token bigint NOT NULL, owner text NOT NULL, tag text)");
  const std::string dir = hf_test::make_temp_dir("failover-load");
  const std::string both = "host=127.0.0.1,127.0.0.1 port=" + std::to_string(primary.port()) + "," +
                           std::to_string(standby.port()) +
                           " dbname=postgres user=holdfast target_session_attrs=read-write";
  {
    fl::workers w(dir, worker_test);
    for (int i = 0; i < 4; ++i) {
      fl::settings s;
      s.set("key", "load");
      s.set("ttl_ms", ttl_ms);
      s.set("conninfo", both + (i % 2 == 1 ? "" : " options='-c synchronous_commit=local'"));
      s.set("fence_conninfo", *fence_db);
      s.set("tag", tag);
      w.start(i, s, i % 2 == 1);
    }
    const bool warm = hf_test::wait_until(
        [&] { return std::atoi(db.exec("SELECT count(*) FROM " + log_table(tag)).c_str()) >= 10; },
        20s);
    if (!warm) FAIL("no writes admitted before the fault\n" << w.output());
    const fl::ns fault_at = fl::now_ns();
    primary.kill9();
    // The failover manager's part: promote the standby (pg_ctl promote waits until it is done).
    const bool promoted = hf_test::run_program(
        {pg_bindir() + "/pg_ctl", "-D", standby.dir() + "/data", "promote", "-w", "-t", "30"},
        dir + "/promote.log", hf_test::unprivileged_user(), standby.dir());
    const double promoted_after = static_cast<double>(fl::now_ns() - fault_at) / 1e9;
    INFO("pg_ctl promote: " << hf_test::read_file(dir + "/promote.log"));
    REQUIRE(promoted);
    auto newest = [&] {
      return std::strtoull(db.exec("SELECT coalesce(max(token), 0) FROM " + log_table(tag)).c_str(),
                           nullptr, 10);
    };
    const bool live = hf_test::wait_until([&] { return newest() > fl::life_gap; }, 30s);
    std::this_thread::sleep_for(live ? 1000ms : 0ms);  // load after the recovery
    w.stop();
    const std::vector<fl::admitted> log = fence_log(db, tag);
    const fl::records r = w.read();
    const fl::verdict v = fl::check(log, r, fault_at);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
    const std::string line = fl::summary("postgres kill -9 + pg_ctl promote", v, r, seconds);
    std::printf("%s; promoted %.2f s after the kill\n", line.c_str(), promoted_after);
    INFO(line << "\n" << w.output());
    fl::expect(v, w, live);
  }
  db.exec("DROP TABLE " + log_table(tag) + ", " + fence_options(tag).table);
  hf_test::remove_tree(dir);
}

}  // namespace test_failover_load_postgres
