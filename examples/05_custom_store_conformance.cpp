// SPDX-License-Identifier: MIT
// examples/05_custom_store_conformance.cpp - check your own LeaseStore with the conformance kit.
//
// map_store below is a lease store written the way a user would: a std::map from key to record,
// a token counter, expiry by an injectable clock. holdfast::testing::check_store() then runs the
// LeaseStore contract (T1-T4) and thousands of simulated schedules of the shipped lease code over
// it, with pauses, crashes, lost replies, delays and clock drift, and checks S1-S5 and L1:
//
//   auto report = holdfast::testing::check_store(
//       [](holdfast::testing::sim_clock c) { return map_store<holdfast::testing::sim_clock>(c); });
//
// Before the schedules the kit runs the contract checks (bad input, grants, contention, renew and
// release by others, tokens across release and expiry, inspect() when the store has it) and the
// hostile strings (embedded NULs, quotes, SQL/Lua/RESP metacharacters, a 1 MiB key).
//
// A store that keeps its own clock (a server's: Redis, PostgreSQL, etcd) cannot be handed the
// simulated clock. Give the kit a hook that makes a key expire now by the store's clock
// (conformance_options::expire_now: PEXPIREAT in the past, an UPDATE of the expiry column, a
// revoked etcd lease; here a manual clock moved on) and the expiry checks run on it too;
// without a hook, conformance_options::expiry_by_waiting grants a short TTL and waits it out.
//
// The same store with one classic bug (release without checking who releases) is reported, with
// the rule it breaks. The example exits 0 iff the store conforms, on either clock, and the buggy
// one is caught. (A store shared between threads needs a mutex; the simulator runs one client
// at a time.)
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <map>
#include <string>
#include <string_view>

#include "holdfast/holdfast.hpp"
#include "holdfast/testing/conformance.hpp"

namespace {

// A user's store. Clock is a template parameter so the kit can hand it a simulated clock; in
// production it would be holdfast::steady_clock.
template <class Clock, bool CheckOwnerOnRelease = true>
class map_store {
 public:
  explicit map_store(Clock clock) : clock_(clock) {}

  holdfast::result<holdfast::grant> try_acquire(std::string_view key, std::string_view owner,
                                                std::chrono::milliseconds ttl) {
    if (std::error_code ec = holdfast::check_acquire_args(key, owner, ttl)) return ec;
    const auto now = clock_.now();
    auto it = leases_.find(std::string(key));
    if (it != leases_.end() && now < it->second.expires) {
      if (it->second.owner != owner) return holdfast::errc::busy;
      it->second.expires = std::max(it->second.expires, expiry(now, ttl));  // same owner: extend
      return holdfast::grant{it->second.token, ttl};
    }
    const holdfast::fencing_token token(++counter_);  // issued with the grant, in one step
    leases_[std::string(key)] = record{std::string(owner), token, expiry(now, ttl)};
    return holdfast::grant{token, ttl};
  }

  holdfast::result<holdfast::grant> renew(std::string_view key, std::string_view owner,
                                          holdfast::fencing_token token,
                                          std::chrono::milliseconds ttl) {
    if (std::error_code ec = holdfast::check_renew_args(key, owner, token, ttl)) return ec;
    const auto now = clock_.now();
    auto it = leases_.find(std::string(key));
    if (it == leases_.end() || !(now < it->second.expires) || it->second.owner != owner ||
        it->second.token != token) {
      return holdfast::errc::lease_lost;
    }
    it->second.expires = expiry(now, ttl);
    return holdfast::grant{token, ttl};
  }

  holdfast::result<void> release(std::string_view key, std::string_view owner,
                                 holdfast::fencing_token token) {
    if (std::error_code ec = holdfast::check_release_args(key, owner, token)) return ec;
    auto it = leases_.find(std::string(key));
    if (it == leases_.end()) return holdfast::errc::not_holder;
    if (CheckOwnerOnRelease && (it->second.owner != owner || it->second.token != token)) {
      return holdfast::errc::not_holder;
    }
    leases_.erase(it);
    return {};
  }

 private:
  using time_point = typename Clock::time_point;
  struct record {
    std::string owner;
    holdfast::fencing_token token;
    time_point expires;
  };

  // A grant must last its TTL in real time even if the clock reads coarsely (store.hpp, T2): the
  // clock's tick, which the reading `now` may lag, is added (store_hold_until). The kit checks
  // this with store clocks that read whole seconds, 10 ms or 1 ms, rounded down.
  time_point expiry(time_point now, std::chrono::milliseconds ttl) const {
    return holdfast::store_hold_until(now, ttl, holdfast::clock_tick(clock_));
  }

  Clock clock_;
  std::map<std::string, record> leases_;
  std::uint64_t counter_ = 0;
};

}  // namespace

int main() {
  using holdfast::testing::sim_clock;

  const auto good =
      holdfast::testing::check_store([](sim_clock clock) { return map_store<sim_clock>(clock); });
  std::cout << "map_store:\n" << good << "\n";

  // The store on a clock of its own: the kit cannot move it, the expire_now hook can.
  holdfast::manual_clock own;
  holdfast::testing::conformance_options o;
  o.schedules = 50;
  o.expire_now = [own](std::string_view /*key*/) mutable { own.advance(std::chrono::hours(1)); };
  const auto own_clock =
      holdfast::testing::check_store([own] { return map_store<holdfast::manual_clock>(own); }, o);
  std::cout << "map_store on its own clock, expiry through expire_now:\n" << own_clock << "\n";

  const auto buggy = holdfast::testing::check_store(
      [](sim_clock clock) { return map_store<sim_clock, false>(clock); });
  std::cout << "map_store with release not checking the owner:\n" << buggy;

  return good && own_clock && !buggy ? 0 : 1;
}
