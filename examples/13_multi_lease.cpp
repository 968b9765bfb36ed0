// SPDX-License-Identifier: MIT
// examples/13_multi_lease.cpp - all-or-nothing leases on several keys (multi_lease.hpp).
//
// Four teller threads move money between three accounts, each transfer holding both accounts'
// keys at once with acquire_all(). Half the tellers name the accounts (from, to) and half (to,
// from): taken in the caller's order, two such transfers could each hold one key and wait for the
// other; acquire_all takes keys in one sorted order, so they never do. Each account is a
// fenced<long> admitting writes by the token of its own key and the set's owner id. At the end a
// transfer that finds one of its keys held by someone else fails at once with try_acquire_all() and
// holds neither key.
//
// It prints what happens and checks: the total stays 300, every transfer was made, and the failed
// attempt kept nothing. Exit status 0 iff all of that holds. Runs in well under a second.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "holdfast/holdfast.hpp"

namespace {

using namespace std::chrono_literals;

constexpr int kTellers = 4;
constexpr int kTransfers = 25;

}  // namespace

int main() {
  holdfast::memory_store<> store;
  std::vector<std::string> names{"account/a", "account/b", "account/c"};
  std::vector<std::unique_ptr<holdfast::fenced<long>>> accounts;
  for (int i = 0; i < 3; ++i) {
    accounts.push_back(std::make_unique<holdfast::fenced<long>>(std::in_place, 100));
  }
  std::vector<std::thread> tellers;
  int made[kTellers] = {};
  for (int t = 0; t < kTellers; ++t) {
    tellers.emplace_back([&, t] {
      for (int i = 0; i < kTransfers; ++i) {
        const int from = (t + i) % 3;
        const int to = (t % 2 == 0) ? (from + 1) % 3 : (from + 2) % 3;  // opposite orders
        auto both = holdfast::acquire_all(store, {names[from], names[to]}, 2s, 5s);
        if (!both) {
          std::printf("teller %d: %s\n", t, both.error().message().c_str());
          continue;
        }
        const bool out =
            accounts[from]
                ->write(both->token(names[from]), both->owner(), [](long& v) { v -= 1; })
                .has_value();
        const bool in =
            out && accounts[to]
                       ->write(both->token(names[to]), both->owner(), [](long& v) { v += 1; })
                       .has_value();
        if (in) ++made[t];
        // both goes out of scope: both keys are released together
      }
    });
  }
  for (auto& th : tellers) th.join();
  long total = 0;
  for (auto& a : accounts) total += a->read([](const long& v) { return v; });
  int all = 0;
  for (int m : made) all += m;
  std::printf("%d transfers made, total %ld (expected %d and 300)\n", all, total,
              kTellers * kTransfers);

  // All or nothing: "account/c" is held elsewhere, so a transfer a -> c takes neither key.
  auto other = holdfast::try_acquire(store, names[2], 2s);
  auto attempt = holdfast::try_acquire_all(store, {names[0], names[2]}, 2s);
  auto a_free = store.inspect(names[0]);
  const bool kept_nothing =
      !attempt && attempt.error() == holdfast::errc::busy && a_free && !a_free->has_value();
  std::printf("transfer a -> c while c is held: %s; account/a %s\n",
              attempt ? "granted" : attempt.error().message().c_str(),
              kept_nothing ? "is free (nothing kept)" : "IS STILL HELD");
  const bool ok = other && total == 300 && all == kTellers * kTransfers && kept_nothing;
  std::printf("%s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
