// SPDX-License-Identifier: MIT
// Tests of store_deadline.hpp: the optional deadline capability (try_acquire_until), how acquire()
// hands its budget's end to every store call and bounds its give-back by store_call_floor, and
// that a store without the capability is called as before. Time is a self-advancing clock (its
// sleeps return at once), the deadlines are steady_clock instants compared with tolerances.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "holdfast/lease.hpp"
#include "holdfast/semaphore.hpp"
#include "holdfast/store_deadline.hpp"
#include "holdfast/stores/checked.hpp"
#include "holdfast/stores/memory.hpp"

namespace test_store_deadline {

using holdfast::errc;
using holdfast::grant;
using holdfast::result;
using std::chrono::milliseconds;
using std::chrono::steady_clock;
using namespace std::chrono_literals;

namespace {

/// A store that answers every acquire with `answer` (or a memory_store's grant when `answer` is
/// success) and records, for each try_acquire_until, how far its deadline lay from the call.
struct deadline_store {
  holdfast::memory_store<> inner;
  std::error_code answer = errc::busy;
  std::vector<steady_clock::duration> given;  // deadline - now, per try_acquire_until
  int plain = 0;                              // calls of try_acquire (no deadline)

  result<grant> try_acquire_until(std::string_view key, std::string_view owner, milliseconds ttl,
                                  const steady_clock::time_point& deadline) {
    given.push_back(deadline - steady_clock::now());
    if (answer) return answer;
    return inner.try_acquire(key, owner, ttl);
  }
  result<grant> try_acquire(std::string_view key, std::string_view owner, milliseconds ttl) {
    ++plain;
    if (answer) return answer;
    return inner.try_acquire(key, owner, ttl);
  }
  result<grant> renew(std::string_view key, std::string_view owner, holdfast::fencing_token t,
                      milliseconds ttl) {
    return inner.renew(key, owner, t, ttl);
  }
  result<void> release(std::string_view key, std::string_view owner, holdfast::fencing_token t) {
    return inner.release(key, owner, t);
  }
};

bool near(steady_clock::duration got, steady_clock::duration want) {
  const auto diff = got > want ? got - want : want - got;
  return diff < 200ms;  // the test's own run time between the two readings, on a loaded machine
}

}  // namespace

TEST_CASE("store_deadline: the capability is detected; memory_store has none", "[store_deadline]") {
  STATIC_REQUIRE(holdfast::has_try_acquire_until_v<deadline_store>);
  STATIC_REQUIRE_FALSE(holdfast::has_try_acquire_until_v<holdfast::memory_store<>>);
  STATIC_REQUIRE_FALSE(holdfast::has_try_acquire_queued_until_v<deadline_store>);
}

// The floor, one tick before, at and after: a deadline earlier than now + store_call_floor gets
// the floor; at it and later, itself.
TEST_CASE("store_deadline: store_call_deadline gives at least store_call_floor",
          "[store_deadline]") {
  const steady_clock::time_point now = steady_clock::now();
  const steady_clock::time_point floor = now + holdfast::store_call_floor;
  const steady_clock::duration tick(1);
  CHECK(holdfast::store_call_deadline(now, floor - tick) == floor);
  CHECK(holdfast::store_call_deadline(now, floor) == floor);
  CHECK(holdfast::store_call_deadline(now, floor + tick) == floor + tick);
  CHECK(holdfast::store_call_deadline(now, now - 1h) == floor);  // long past
  CHECK(holdfast::store_call_deadline(now, steady_clock::time_point::max()) ==
        steady_clock::time_point::max());
}

// Expected: acquire() with a 5 s budget on a busy store (backoff on a self-advancing clock, so
// no real sleeping) hands each attempt the budget left: the first ~5 s, later ones less, never
// more than the first, the last (made at the deadline itself) store_call_floor. The plain
// try_acquire is never called.
TEST_CASE("store_deadline: acquire() bounds every store call by its budget's end",
          "[store_deadline]") {
  deadline_store s;
  holdfast::self_advancing_clock clock;
  holdfast::acquire_options<holdfast::self_advancing_clock> o;
  o.clock = clock;
  auto l = holdfast::acquire(s, "k", 10s, 5s, o);
  REQUIRE_FALSE(l);
  CHECK(l.error() == errc::timeout);
  REQUIRE(s.given.size() >= 2);
  CHECK(s.plain == 0);
  CHECK(near(s.given.front(), 5s));
  for (const auto& d : s.given) CHECK(d <= s.given.front());
  CHECK(near(s.given.back(), holdfast::store_call_floor));
}

// Expected: the last attempt's answer may hide a grant (timeout): acquire() gives back through
// the same capability, each re-ask bounded by store_call_floor (the budget is spent by then).
// With a grant hidden in the inner store, the give-back releases it: the key is free after.
TEST_CASE("store_deadline: the give-back after a doubtful last answer is bounded too",
          "[store_deadline]") {
  deadline_store s;
  s.answer = errc::timeout;
  REQUIRE(s.inner.try_acquire("k", "me", 10s));  // a grant the lost reply hid
  holdfast::self_advancing_clock clock;
  holdfast::acquire_options<holdfast::self_advancing_clock> o;
  o.clock = clock;
  o.owner = "me";
  o.backoff.max_attempts = 1;
  auto l = holdfast::acquire(s, "k", 10s, 2s, o);
  REQUIRE_FALSE(l);
  CHECK(l.error() == errc::timeout);
  REQUIRE(s.given.size() == 3);  // the attempt, then the re-ask twice (its answer hid one too)
  CHECK(near(s.given[0], 2s));
  CHECK(near(s.given[1], holdfast::store_call_floor));
  CHECK(near(s.given[2], holdfast::store_call_floor));
  // Once the store answers again, the re-ask returns the hidden grant and it is released.
  s.answer = {};
  CHECK(holdfast::detail::give_back(s, "k", "me", 10s).is_issuable());
  auto rec = s.inner.inspect("k");
  REQUIRE(rec);
  CHECK_FALSE(rec->has_value());
}

// Expected: semaphore::acquire() with a 3 s budget over two busy slots hands every slot's call the
// budget left (the first ~3 s, never more); plain try_acquire is never called.
TEST_CASE("store_deadline: semaphore::acquire() bounds every slot's call by its deadline",
          "[store_deadline]") {
  deadline_store s;
  holdfast::self_advancing_clock clock;
  holdfast::semaphore_options<holdfast::self_advancing_clock> so;
  so.acquire.clock = clock;
  so.renew = false;
  holdfast::semaphore<deadline_store, holdfast::self_advancing_clock> pool(s, "pool", 2, 10s, so);
  auto p = pool.acquire(3s);
  REQUIRE_FALSE(p);
  CHECK(p.error() == errc::timeout);
  REQUIRE(s.given.size() >= 2);
  CHECK(s.plain == 0);
  CHECK(near(s.given.front(), 3s));
  for (const auto& d : s.given) CHECK(d <= s.given.front());
}

// Expected: checked_store offers the capability iff the store it wraps does, and forwards the
// deadline (a blocking call keeps it through the wrapper) with its grants still checked.
TEST_CASE("store_deadline: checked_store forwards try_acquire_until", "[store_deadline]") {
  STATIC_REQUIRE(holdfast::has_try_acquire_until_v<holdfast::checked_store<deadline_store>>);
  STATIC_REQUIRE_FALSE(
      holdfast::has_try_acquire_until_v<holdfast::checked_store<holdfast::memory_store<>>>);
  deadline_store inner;
  inner.answer = {};
  holdfast::checked_store<deadline_store> s(inner);
  auto g = holdfast::store_try_acquire_until(s, "k", "me", 10s, steady_clock::now() + 1s);
  REQUIRE(g);
  REQUIRE(inner.given.size() == 1);
  CHECK(near(inner.given[0], 1s));
  CHECK(inner.plain == 0);
  CHECK(s.try_acquire_until("", "me", 10s, steady_clock::now()).error() == errc::invalid_argument);
}

// Expected: a store without the capability is asked with plain try_acquire, as before.
TEST_CASE("store_deadline: a store without the capability keeps plain try_acquire",
          "[store_deadline]") {
  holdfast::memory_store<> m;
  auto g = holdfast::store_try_acquire_until(m, "k", "me", 10s, steady_clock::now());
  REQUIRE(g);
  auto again = holdfast::store_try_acquire_until(m, "k", "other", 10s, steady_clock::now());
  CHECK(again.error() == errc::busy);
}

}  // namespace test_store_deadline
