// SPDX-License-Identifier: MIT
// examples/08_sqlite_store.cpp - your own store, checked: a LeaseStore over SQLite
// (examples/sqlite_lease_store.hpp), written the way a user with a SQLite-backed service would,
// used in production on the steady clock and checked by the conformance kit on the simulator's.
//
//   1. production: acquire a lease from the store and write with its fencing token;
//   2. holdfast::testing::check_store() over the same store built on the simulated clock: the
//      contract (T1-T4) and hundreds of schedules (S1-S5, L1), with one fresh database per call;
//   3. the same store with the classic bug (the grant committed in one statement, the token
//      drawn in a second one, with a holdfast::step_point between them) is caught, and the report
//      names the harm: the token order (S2).
//
// Exits 0 iff the store works, conforms, and its broken variant is caught. Needs libsqlite3
// (Debian: libsqlite3-dev), so it is built only with HOLDFAST_WITH_SQLITE.
#include <chrono>
#include <iostream>
#include <memory>

#include "holdfast/holdfast.hpp"
#include "holdfast/testing/conformance.hpp"
#include "sqlite_lease_store.hpp"

int main() {
  using namespace std::chrono_literals;
  using sqlite_example::sqlite_flaw;
  using sqlite_example::sqlite_lease_store;
  using sqlite_example::sqlite_options;

  // 1. In production: the store on holdfast::steady_clock (step points compile to nothing).
  sqlite_lease_store<> store(sqlite_options{});  // ":memory:"; give a file path to share it
  holdfast::fenced<long> balance;
  auto lease = holdfast::acquire(store, "account", 10s, 1s);
  if (!lease) {
    std::cerr << "acquire failed: " << lease.error().message() << "\n";
    return 1;
  }
  const bool wrote = static_cast<bool>(balance.write(*lease, [](long& b) { b += 10; }));
  std::cout << "production: token " << to_string(lease->token()) << ", write "
            << (wrote ? "admitted" : "rejected") << "\n";

  // 2. The same store on the simulator's clock, a fresh database per factory call.
  auto make = [](sqlite_flaw flaw) {
    return [flaw](holdfast::testing::sim_clock clock) {
      sqlite_options o;
      o.boot_id = "simulated";  // the simulated clock never reboots
      o.flaw = flaw;
      return std::make_unique<sqlite_lease_store<holdfast::testing::sim_clock>>(o, clock);
    };
  };
  const holdfast::testing::conformance_report good =
      holdfast::testing::check_store(make(sqlite_flaw::none));
  std::cout << "\nthe SQLite store:\n" << good;

  // 3. The token drawn in a second statement.
  const holdfast::testing::conformance_report bad =
      holdfast::testing::check_store(make(sqlite_flaw::token_second_statement));
  std::cout << "\nthe SQLite store that draws its token in a second statement:\n" << bad;

  const bool caught = !bad.ok() && bad.summary().find("S2 token order") != std::string::npos;
  std::cout << "\n"
            << (wrote && good.ok() && caught ? "ok: the store conforms and its bug is caught"
                                             : "UNEXPECTED")
            << "\n";
  return wrote && good.ok() && caught ? 0 : 1;
}
