// SPDX-License-Identifier: MIT
// examples/07_quorum.cpp - one lease over five independent stores, with a fencing token that keeps
// increasing whichever majority grants it.
//
// Five in-process memory_stores stand in for five Redis servers. A quorum_store over them is
// itself a LeaseStore, so the ordinary lease API works on it. The example:
//   1. takes a lease on a majority and writes with its token;
//   2. takes two members down: the holder keeps renewing, on the three that are left;
//   3. hands the key around while the set of live members changes, and checks that every grant's
//      token is above the previous one, although each member has its own counter. The same
//      schedule with quorum_token_mode::naive_max (the max of the majority's member tokens, the
//      obvious and wrong design) goes backwards, and the fence refuses the stale token.
// The exit status is 0 iff all of that happened.
#include <array>
#include <chrono>
#include <cstdio>
#include <string_view>

#include "holdfast/holdfast.hpp"

namespace {

using namespace std::chrono_literals;

/// A memory_store that can be switched off, as a server that crashed or is cut off. A quorum
/// member must offer the token-floor capability raise_token() besides the LeaseStore operations.
class member {
 public:
  holdfast::result<holdfast::grant> try_acquire(std::string_view key, std::string_view owner,
                                                std::chrono::milliseconds ttl) {
    if (down) return holdfast::errc::store_unavailable;
    return store_.try_acquire(key, owner, ttl);
  }
  holdfast::result<holdfast::grant> renew(std::string_view key, std::string_view owner,
                                          holdfast::fencing_token token,
                                          std::chrono::milliseconds ttl) {
    if (down) return holdfast::errc::store_unavailable;
    return store_.renew(key, owner, token, ttl);
  }
  holdfast::result<void> release(std::string_view key, std::string_view owner,
                                 holdfast::fencing_token token) {
    if (down) return holdfast::errc::store_unavailable;
    return store_.release(key, owner, token);
  }
  holdfast::result<void> raise_token(std::string_view key, std::string_view owner,
                                     holdfast::fencing_token token, holdfast::fencing_token to) {
    if (down) return holdfast::errc::store_unavailable;
    return store_.raise_token(key, owner, token, to);
  }

  holdfast::memory_store<>& store() { return store_; }

  bool down = false;  // set only while no request is in flight (between quorum calls)

 private:
  holdfast::memory_store<> store_;
};

/// Hands "jobs" around five times while members go down and come back; returns how many grants
/// carried a token that was not above the previous one.
int hand_around(holdfast::quorum_token_mode mode) {
  std::array<member, 5> m;
  holdfast::quorum_options opts;
  opts.token_mode = mode;
  // Sequential: the members are flipped between calls, so no request may be left in flight.
  opts.dispatch = holdfast::quorum_dispatch::sequential;
  holdfast::quorum_store<member> quorum({&m[0], &m[1], &m[2], &m[3], &m[4]}, opts);
  holdfast::fence_gate gate;
  // Member 1 has served other keys and its counter is far ahead of the rest.
  if (!m[1].store().raise_token_floor(holdfast::fencing_token(100))) return 100;
  // Which members are down for each grant: the majorities differ from grant to grant.
  const std::array<std::array<bool, 5>, 4> down = {{{false, false, false, true, true},
                                                    {true, true, false, false, false},
                                                    {false, false, true, false, true},
                                                    {true, true, false, false, false}}};
  holdfast::fencing_token last{};
  int backwards = 0;
  for (const auto& pattern : down) {
    for (std::size_t i = 0; i < m.size(); ++i) m[i].down = pattern[i];
    auto l = holdfast::try_acquire(quorum, "jobs", 10s);
    if (!l) return 100;
    const bool admitted = static_cast<bool>(gate.admit(*l));
    std::printf("  %-9s grant %-5s %s\n",
                mode == holdfast::quorum_token_mode::floor ? "floor" : "naive max",
                to_string(l->token()).c_str(),
                admitted ? "admitted" : "REFUSED by the fence (stale)");
    if (!(last < l->token())) ++backwards;
    if (last < l->token()) last = l->token();
  }
  return backwards;
}

}  // namespace

int main() {
  // 1 and 2: a lease on five members that survives two of them going down.
  std::array<member, 5> m;
  holdfast::quorum_options opts;
  opts.dispatch = holdfast::quorum_dispatch::sequential;  // see hand_around()
  holdfast::quorum_store<member> quorum({&m[0], &m[1], &m[2], &m[3], &m[4]}, opts);
  holdfast::fenced<long> balance;
  auto lease = holdfast::acquire(quorum, "account", 10s, 1s);
  if (!lease) return 1;
  if (!balance.write(*lease, [](long& b) { b += 10; })) return 2;
  m[1].down = m[3].down = true;
  if (!lease->renew()) return 3;  // three of five renew it
  std::printf("lease %s held by a majority, renewed with two members down\n",
              to_string(lease->token()).c_str());
  m[4].down = true;  // now only two are left: no majority, no renewal
  if (lease->renew().error() != holdfast::errc::store_unavailable) return 4;
  std::printf("with three members down renew reports: store_unavailable\n");

  // 3: tokens across changing majorities.
  const int floor_backwards = hand_around(holdfast::quorum_token_mode::floor);
  const int naive_backwards = hand_around(holdfast::quorum_token_mode::naive_max);
  std::printf("token went backwards: %d time(s) with the floor, %d with the naive max\n",
              floor_backwards, naive_backwards);
  return floor_backwards == 0 && naive_backwards > 0 ? 0 : 5;
}
