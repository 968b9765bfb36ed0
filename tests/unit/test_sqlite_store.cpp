// SPDX-License-Identifier: MIT
// The conformance kit on a store that is not ours: examples/sqlite_lease_store.hpp, a LeaseStore
// over SQLite written as a user would. The correct store must pass check_store (and the
// single-client contract checks the real stores pass); each deliberately broken variant must be
// caught, by the harm it does:
//
//   variant                         | caught as
//   --------------------------------+------------------------------------------------------------
//   token_second_statement          | S2 token order (a stalled grant got a newer token than a
//                                   | later holder), through the step point between its statements
//   no_owner_check                  | T3 (contract) and S5 ownership
//   blind_cas (cas_store over a KV  | S2 or S3, through cas_store's own step points: no work by
//   whose CAS ignores the version)  | the store's author
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <holdfast/clock.hpp>
#include <holdfast/testing/conformance.hpp>
#include <memory>
#include <string>
#include <vector>

#include <unistd.h>

#include "../../examples/sqlite_lease_store.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_sqlite_store {

using holdfast::testing::check_store;
using holdfast::testing::conformance_options;
using holdfast::testing::conformance_report;
using holdfast::testing::sim_clock;
using sqlite_example::sqlite_cas_store;
using sqlite_example::sqlite_flaw;
using sqlite_example::sqlite_lease_store;
using sqlite_example::sqlite_options;

namespace {

conformance_report check_sqlite(sqlite_flaw flaw) {
  return check_store([flaw](sim_clock clock) {
    sqlite_options o;  // ":memory:": a fresh database per call
    o.boot_id = "simulated";
    o.flaw = flaw;
    return std::make_unique<sqlite_lease_store<sim_clock>>(o, clock);
  });
}

conformance_report check_sqlite_cas(sqlite_flaw flaw) {
  return check_store([flaw](sim_clock clock) {
    sqlite_options o;
    o.flaw = flaw;
    return std::make_unique<sqlite_cas_store<sim_clock>>(o, clock);
  });
}

// A database file of this test's own, removed at the end.
struct temp_db {
  std::string path;
  temp_db() {
    static std::atomic<int> n{0};
    path = (std::filesystem::temp_directory_path() /
            ("holdfast-sqlite-" + std::to_string(::getpid()) + "-" + std::to_string(++n) + ".db"))
               .string();
    std::filesystem::remove(path);
  }
  ~temp_db() {
    std::error_code ec;
    std::filesystem::remove(path, ec);
    std::filesystem::remove(path + "-journal", ec);
  }
};

}  // namespace

TEST_CASE("sqlite example store: the correct store conforms", "[sqlite]") {
  const conformance_report r = check_sqlite(sqlite_flaw::none);
  INFO(r.summary());
  REQUIRE(r.ok());
  REQUIRE(r.schedules == conformance_options{}.schedules);
  const conformance_report c = check_sqlite_cas(sqlite_flaw::none);
  INFO(c.summary());
  REQUIRE(c.ok());
  REQUIRE(c.store_steps > 0);  // cas_store's own step points were explored
}

TEST_CASE("sqlite example store: a token drawn in a second statement is caught as S2", "[sqlite]") {
  const conformance_report r = check_sqlite(sqlite_flaw::token_second_statement);
  INFO(r.summary());
  REQUIRE_FALSE(r.ok());
  REQUIRE(r.store_steps > 0);
  REQUIRE_THAT(r.summary(), Catch::Contains("S2 token order violated") &&
                                Catch::Contains("took effect here; its last step ran"));
}

TEST_CASE("sqlite example store: a release without the owner check is caught", "[sqlite]") {
  const conformance_report r = check_sqlite(sqlite_flaw::no_owner_check);
  INFO(r.summary());
  REQUIRE_FALSE(r.ok());
  REQUIRE_THAT(r.summary(), Catch::Contains("T3 release by another owner") &&
                                Catch::Contains("S5 ownership violated"));
}

TEST_CASE("sqlite example store: cas_store over a blind compare-and-swap is caught", "[sqlite]") {
  const conformance_report r = check_sqlite_cas(sqlite_flaw::blind_cas);
  INFO(r.summary());
  REQUIRE_FALSE(r.ok());
  REQUIRE_THAT(r.summary(), Catch::Contains("S2 token order violated") ||
                                Catch::Contains("S3 exclusive grants violated"));
}

TEST_CASE("sqlite example store: the contract checks the real stores pass", "[sqlite]") {
  holdfast::manual_clock clock;
  sqlite_options o;
  sqlite_lease_store<holdfast::manual_clock> s(o, clock);
  conformance_options co;
  co.expire_now = [&clock](std::string_view) { clock.advance(std::chrono::hours(1)); };
  co.release_after_expiry_succeeds = true;  // the record stays until it is taken over
  co.store_wide_tokens = true;              // one counter in the database
  const conformance_report v = holdfast::testing::check_contract(s, co);
  INFO(v.summary());
  REQUIRE(v.ok());
  const conformance_report hostile = holdfast::testing::check_hostile_strings(s, co);
  INFO(hostile.summary());
  REQUIRE(hostile.ok());
  // Negative control: the variant that releases without checking the owner.
  sqlite_options flawed;
  flawed.flaw = sqlite_flaw::no_owner_check;
  sqlite_lease_store<holdfast::manual_clock> bad(flawed, clock);
  const conformance_report b = holdfast::testing::check_contract(bad, co);
  INFO(b.summary());
  REQUIRE_THAT(b.summary(), Catch::Contains("FAILED T3 release by another owner"));
}

TEST_CASE("sqlite example store: tokens survive reopening the file; a reboot drops old leases",
          "[sqlite]") {
  temp_db db;
  holdfast::manual_clock clock;
  sqlite_options o;
  o.path = db.path;
  o.boot_id = "boot-1";
  holdfast::fencing_token first;
  {
    sqlite_lease_store<holdfast::manual_clock> s(o, clock);
    auto g = s.try_acquire("k", "a", std::chrono::seconds(10));
    REQUIRE(g);
    first = g->token;
  }
  {
    sqlite_lease_store<holdfast::manual_clock> s(o, clock);  // the same boot: the lease is kept
    REQUIRE(s.try_acquire("k", "b", std::chrono::seconds(10)).error() == holdfast::errc::busy);
  }
  o.boot_id = "boot-2";  // after a reboot the steady clock restarted: the old lease is gone
  sqlite_lease_store<holdfast::manual_clock> s(o, clock);
  auto g = s.try_acquire("k", "b", std::chrono::seconds(10));
  REQUIRE(g);
  REQUIRE(g->token > first);  // ... and the counter was kept
}

TEST_CASE("sqlite example store: durable, reopened from its file through the factory at restarts",
          "[sqlite]") {
  conformance_options o;
  o.schedules = 60;
  o.durable = true;
  const auto file_backed = [](sim_clock clock, const holdfast::testing::store_env& env) {
    sqlite_options s;
    s.path = env.dir + "/leases.db";  // a new directory per schedule, the same across restarts
    s.boot_id = "boot-" + std::to_string(env.boot);  // the kit reboots the machine too
    s.sync_commits = false;  // restarts close the file cleanly: no fsync needed to reopen it
    return std::make_unique<sqlite_lease_store<sim_clock>>(s, clock);
  };
  const conformance_report r = check_store(file_backed, o);
  INFO(r.summary());
  REQUIRE(r.ok());
  // Negative control: the same store in ":memory:" claims durability it does not have.
  const conformance_report m = check_store(
      [](sim_clock clock) {
        sqlite_options s;
        s.boot_id = "simulated";
        return std::make_unique<sqlite_lease_store<sim_clock>>(s, clock);
      },
      o);
  INFO(m.summary());
  REQUIRE_FALSE(m.ok());
}

TEST_CASE("sqlite example store: one holder at a time across threads sharing a file",
          "[sqlite][concurrency]") {
  temp_db db;
  const std::string path = db.path;
  conformance_options co;
  co.threads = 3;
  co.grants_per_thread = 5;
  const conformance_report v = holdfast::testing::check_exclusive_grants(
      [&path] {
        sqlite_options o;
        o.path = path;
        return std::make_unique<sqlite_lease_store<>>(o);
      },
      co);
  INFO(v.summary());
  REQUIRE(v.ok());
  // Negative control: each thread on a database of its own (":memory:") shares nothing.
  const conformance_report apart = holdfast::testing::check_exclusive_grants(
      [] { return std::make_unique<sqlite_lease_store<>>(sqlite_options{}); }, co);
  INFO(apart.summary());
  REQUIRE_THAT(apart.summary(), Catch::Contains("tokens of successive grants must strictly"));
}

}  // namespace test_sqlite_store
