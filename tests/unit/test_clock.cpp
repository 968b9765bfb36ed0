// SPDX-License-Identifier: MIT
// Unit tests for holdfast/clock.hpp: the ttl_clock requirements, steady_clock, and manual_clock
// (shared virtual time, sleepers woken only by moving time, bounded waits for sleepers).
#include <catch2/catch.hpp>

#include <chrono>
#include <optional>
#include <type_traits>

#include "holdfast/clock.hpp"
#include "holdfast/keepalive.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/stores/memory.hpp"
#include "test_support.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_clock {

using holdfast::manual_clock;
using namespace std::chrono_literals;

namespace {

// Types that miss one requirement each of the ttl_clock table.
struct no_types {
  int now() const { return 0; }
  void sleep_until(int) const {}
};
struct no_now {
  using duration = std::chrono::nanoseconds;
  using time_point = std::chrono::time_point<no_now, duration>;
  void sleep_until(time_point) const {}
};
struct no_sleep {
  using duration = std::chrono::nanoseconds;
  using time_point = std::chrono::time_point<no_sleep, duration>;
  time_point now() const { return {}; }
};
struct mutable_now {  // now() must be callable on a const clock
  using duration = std::chrono::nanoseconds;
  using time_point = std::chrono::time_point<mutable_now, duration>;
  time_point now() { return {}; }
  void sleep_until(time_point) const {}
};
struct wrong_now_type {  // now() must return C::time_point
  using duration = std::chrono::nanoseconds;
  using time_point = std::chrono::time_point<wrong_now_type, duration>;
  long now() const { return 0; }
  void sleep_until(time_point) const {}
};
struct not_copyable {
  using duration = std::chrono::nanoseconds;
  using time_point = std::chrono::time_point<not_copyable, duration>;
  not_copyable() = default;
  not_copyable(const not_copyable&) = delete;
  time_point now() const { return {}; }
  void sleep_until(time_point) const {}
};
struct complete {  // the positive control for the negative cases above
  using duration = std::chrono::nanoseconds;
  using time_point = std::chrono::time_point<complete, duration>;
  time_point now() const { return {}; }
  void sleep_until(time_point) {}  // sleep_until may be non-const
};

}  // namespace

TEST_CASE("is_ttl_clock_v names what a clock must provide", "[clock]") {
  STATIC_REQUIRE(holdfast::is_ttl_clock_v<holdfast::steady_clock>);
  STATIC_REQUIRE(holdfast::is_ttl_clock_v<manual_clock>);
  STATIC_REQUIRE(holdfast::is_ttl_clock_v<complete>);
  STATIC_REQUIRE(holdfast::is_ttl_clock_v<holdfast_test::jump_clock>);
  STATIC_REQUIRE(holdfast::is_ttl_clock_v<holdfast_test::coarse_clock>);
  STATIC_REQUIRE_FALSE(holdfast::is_ttl_clock_v<no_types>);
  STATIC_REQUIRE_FALSE(holdfast::is_ttl_clock_v<no_now>);
  STATIC_REQUIRE_FALSE(holdfast::is_ttl_clock_v<no_sleep>);
  STATIC_REQUIRE_FALSE(holdfast::is_ttl_clock_v<mutable_now>);
  STATIC_REQUIRE_FALSE(holdfast::is_ttl_clock_v<wrong_now_type>);
  STATIC_REQUIRE_FALSE(holdfast::is_ttl_clock_v<not_copyable>);
  STATIC_REQUIRE_FALSE(holdfast::is_ttl_clock_v<int>);
  // std::chrono::steady_clock has no sleep_until(): it is a clock, not a TTL clock.
  STATIC_REQUIRE_FALSE(holdfast::is_ttl_clock_v<std::chrono::steady_clock>);
#if HOLDFAST_HAS_CONCEPTS
  STATIC_REQUIRE(holdfast::ttl_clock<manual_clock>);
  STATIC_REQUIRE(holdfast::ttl_clock<holdfast::steady_clock>);
  STATIC_REQUIRE_FALSE(holdfast::ttl_clock<no_sleep>);
#endif
}

TEST_CASE("steady_clock reads std::chrono::steady_clock and never goes backwards", "[clock]") {
  const holdfast::steady_clock c;
  const auto a = c.now();
  const auto b = c.now();
  CHECK(a <= b);
  STATIC_REQUIRE(
      std::is_same_v<holdfast::steady_clock::time_point, std::chrono::steady_clock::time_point>);
  // A deadline in the past returns at once (no real sleep).
  c.sleep_until(a - 1h);
  c.sleep_until(holdfast::steady_clock::time_point::min());
}

TEST_CASE("manual_clock starts at the epoch and moves only when told", "[clock]") {
  manual_clock c;
  CHECK(c.now().time_since_epoch() == 0ns);
  CHECK(c.now() == c.now());
  c.advance(1500ms);
  CHECK(c.now().time_since_epoch() == 1500ms);
  c.advance(-500ms);  // backwards, on purpose
  CHECK(c.now().time_since_epoch() == 1s);
  c.set(manual_clock::time_point(42ns));
  CHECK(c.now().time_since_epoch() == 42ns);
  c.set(manual_clock::time_point(-5s));  // before the epoch is fine too
  CHECK(c.now().time_since_epoch() == -5s);
  CHECK(c.sleepers() == 0);
}

TEST_CASE("manual_clock copies share one time; separate clocks do not", "[clock]") {
  manual_clock a;
  manual_clock copy = a;
  manual_clock other;
  a.advance(10s);
  CHECK(copy.now().time_since_epoch() == 10s);
  copy.advance(1s);
  CHECK(a.now().time_since_epoch() == 11s);
  CHECK(other.now().time_since_epoch() == 0s);
}

TEST_CASE("manual_clock saturates instead of overflowing at the ends of its range", "[clock]") {
  using tp = manual_clock::time_point;
  manual_clock c;
  c.set(tp::max() - 1ns);
  c.advance(10ns);  // would overflow int64 nanoseconds
  CHECK(c.now() == tp::max());
  c.advance(manual_clock::duration::max());
  CHECK(c.now() == tp::max());
  c.set(tp::min() + 1ns);
  c.advance(-10ns);
  CHECK(c.now() == tp::min());
  c.advance(manual_clock::duration::min());
  CHECK(c.now() == tp::min());
  c.advance(1s);  // and it still moves normally afterwards
  CHECK(c.now() == tp::min() + 1s);
}

TEST_CASE("manual_clock::sleep_until returns at once for a deadline already reached", "[clock]") {
  manual_clock c;
  c.advance(5s);
  c.sleep_until(manual_clock::time_point(5s));  // equal: reached
  c.sleep_until(manual_clock::time_point(1s));  // past
  CHECK(c.sleepers() == 0);
  // No sleeper: a zero real-time wait reports so instead of blocking.
  CHECK_FALSE(c.wait_for_sleepers(1, 0ms));
  CHECK(c.wait_for_sleepers(0, 0ms));
}

TEST_CASE("self_advancing_clock runs blocking acquire and a keepalive on one thread", "[clock]") {
  // Issue input (time at the edges, 4): manual_clock::sleep_until blocks until another thread
  // moves time, so a single-threaded test of code that calls acquire() or drives a keepalive
  // hung. With self_advancing_clock it runs to completion in virtual time.
  using clock_t = holdfast::self_advancing_clock;
  using tp = clock_t::time_point;
  STATIC_REQUIRE(holdfast::is_ttl_clock_v<clock_t>);
  STATIC_REQUIRE_FALSE(holdfast::is_interruptible_clock_v<clock_t>);
  clock_t clock;
  CHECK(holdfast::clock_tick(clock) == 0ns);
  holdfast::memory_store<clock_t> store(clock);
  REQUIRE(store.try_acquire("k", "elsewhere", 10s));  // held until 10 s
  holdfast::acquire_options<clock_t> o;
  o.clock = clock;
  o.backoff.seed = 1;
  // Busy until 10 s: acquire backs off in virtual time and gets the key at 10 s (one tick before:
  // still busy), within its 1 min timeout, with no other thread.
  auto l = holdfast::acquire(store, "k", 10s, std::chrono::minutes(1), o);
  REQUIRE(l);
  CHECK(clock.now() >= tp(10s));
  CHECK(clock.now() < tp(11s));  // backoff is capped at 1 s
  CHECK(clock.sleeps() > 1);
  // A keepalive without its thread, driven as an event loop: renewals at 5 s steps of the TTL.
  holdfast::keepalive_options ko;
  ko.start_thread = false;
  holdfast::keepalive<clock_t> ka(clock, ko);
  REQUIRE(ka.add(*l));
  const tp start = l->acquired_at();
  for (int i = 1; i <= 4; ++i) {
    const std::optional<tp> next = ka.poll();
    REQUIRE(next);
    clock.sleep_until(*next);
  }
  CHECK(ka.stats().renewals == 3);
  CHECK(l->valid());
  CHECK(l->acquired_at() == start + 15s);
  // Sleeping into the past does not move time back; advance() and set() move it by hand.
  const tp now = clock.now();
  clock.sleep_until(now - 1s);
  CHECK(clock.now() == now);
  clock.advance(1ns);
  CHECK(clock.now() == now + 1ns);
}

}  // namespace test_clock
