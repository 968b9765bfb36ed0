// SPDX-License-Identifier: MIT
// Leave nothing behind when an exception is thrown between store calls (detail/unwind_guard.hpp):
// a store call that throws (here after applying its grant: a lost reply, as an exception) or a
// store's wait that throws, inside acquire() (a wait-queue place, a grant the throwing call made),
// try_acquire_all() (the atomic grant) and semaphore::acquire() (a slot). Each exception reaches
// the caller unchanged and the store holds nothing of the caller's afterwards. Virtual time only.
#include <catch2/catch.hpp>

#include <chrono>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>

#include "holdfast/clock.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/multi_lease.hpp"
#include "holdfast/semaphore.hpp"
#include "holdfast/stores/memory.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_acquire_unwind {

using holdfast::errc;
using holdfast::fencing_token;
using holdfast::grant;
using holdfast::manual_clock;
using holdfast::result;
using std::chrono::milliseconds;
using namespace std::chrono_literals;

namespace {

/// memory_store with a wait queue of its own bookkeeping (the keys this caller has a place on)
/// and exceptions where a test asks: after a grant is applied (try_acquire, try_acquire_all; the
/// next `throws_after_grant` such calls), or from wait_for_release.
struct throwing_store {
  explicit throwing_store(manual_clock c) : inner(c) {}
  holdfast::memory_store<manual_clock> inner;
  std::set<std::string> places;
  int throws_after_grant = 0;
  bool throw_in_wait = false;

  result<grant> try_acquire(std::string_view k, std::string_view o, milliseconds ttl) {
    result<grant> g = inner.try_acquire(k, o, ttl);
    if (g && throws_after_grant > 0 && throws_after_grant-- > 0)
      throw std::runtime_error("after the grant");
    return g;
  }
  result<grant> try_acquire_queued(std::string_view k, std::string_view o, milliseconds ttl) {
    result<grant> g = try_acquire(k, o, ttl);
    if (!g && g.error() == errc::busy) places.insert(std::string(k));
    return g;
  }
  result<void> leave_queue(std::string_view k) {
    places.erase(std::string(k));
    return {};
  }
  result<void> wait_for_release(std::string_view, const manual_clock::time_point&) {
    if (throw_in_wait) throw std::runtime_error("in the wait");
    return {};  // a hint only: "may be free now"
  }
  result<void> try_acquire_all(const std::string_view* keys, std::size_t n, std::string_view o,
                               milliseconds ttl, grant* out) {
    result<void> r = inner.try_acquire_all(keys, n, o, ttl, out);
    if (r && throws_after_grant > 0 && throws_after_grant-- > 0)
      throw std::runtime_error("after the grants");
    return r;
  }
  result<grant> renew(std::string_view k, std::string_view o, fencing_token t, milliseconds ttl) {
    return inner.renew(k, o, t, ttl);
  }
  result<void> release(std::string_view k, std::string_view o, fencing_token t) {
    return inner.release(k, o, t);
  }
  bool is_free(std::string_view k) { return !inner.inspect(k).value().has_value(); }
};

static_assert(holdfast::has_try_acquire_queued_v<throwing_store>);
static_assert(holdfast::has_leave_queue_v<throwing_store>);
static_assert(holdfast::can_wait_for_release_v<throwing_store, manual_clock>);

/// manual_clock whose sleep_until throws (a user's clock failing between store calls).
struct throwing_clock {
  using duration = manual_clock::duration;
  using time_point = manual_clock::time_point;
  manual_clock inner;
  [[nodiscard]] time_point now() const { return inner.now(); }
  void sleep_until(const time_point&) { throw std::runtime_error("in the clock"); }
};
static_assert(holdfast::is_ttl_clock_v<throwing_clock>);

holdfast::acquire_options<manual_clock> options(manual_clock clock) {
  holdfast::acquire_options<manual_clock> o;
  o.clock = clock;
  o.owner = "me";
  return o;
}

}  // namespace

// The key is busy: the first attempt queues (try_acquire_queued), then the store's wait throws.
// Expected: the exception reaches the caller and the place is taken out. Before the guard the
// place stayed, and the next release would hand the key to a caller long gone.
TEST_CASE("acquire: a wait that throws takes the queue place out", "[lease][unwind]") {
  manual_clock clock;
  throwing_store s(clock);
  REQUIRE(s.inner.try_acquire("k", "other", 10s));
  s.throw_in_wait = true;
  CHECK_THROWS_WITH(holdfast::acquire(s, "k", 5s, 30s, options(clock)), "in the wait");
  CHECK(s.places.empty());
}

// The key is busy; each wait in the store returns at once (a hint), so after seven fruitless
// waits acquire() sleeps a backoff delay on the clock, which throws. Expected: the exception
// reaches the caller and the place the queued attempts took is taken out.
TEST_CASE("acquire: a clock that throws between store calls takes the queue place out",
          "[lease][unwind]") {
  throwing_clock clock;
  throwing_store s(clock.inner);
  REQUIRE(s.inner.try_acquire("k", "other", 10s));
  holdfast::acquire_options<throwing_clock> o;
  o.clock = clock;
  CHECK_THROWS_WITH(holdfast::acquire(s, "k", 5s, 30s, o), "in the clock");
  CHECK(s.places.empty());
}

// A store call that applies its grant and then throws (its reply lost, as an exception).
// Expected: the exception reaches the caller, the grant is given back (asked again by the same
// owner, released), so the key is free at once; so for try_acquire_all's atomic grant and for a
// semaphore's slot. Before the guards each grant stayed held for its TTL.
TEST_CASE("acquire, try_acquire_all, semaphore: a store call that throws after granting",
          "[lease][multi_lease][semaphore][unwind]") {
  manual_clock clock;
  throwing_store s(clock);
  s.throws_after_grant = 1;
  CHECK_THROWS_WITH(holdfast::acquire(s, "k", 5s, 30s, options(clock)), "after the grant");
  CHECK(s.is_free("k"));
  s.throws_after_grant = 1;
  CHECK_THROWS_WITH(holdfast::try_acquire_all(s, {"a", "b"}, 5s, options(clock)),
                    "after the grants");
  CHECK(s.is_free("a"));
  CHECK(s.is_free("b"));
  holdfast::semaphore_options<manual_clock> so;
  so.acquire = options(clock);
  so.renew = false;
  holdfast::semaphore<throwing_store, manual_clock> pool(s, "p", 2, 5s, so);
  REQUIRE_FALSE(pool.error());
  s.throws_after_grant = 1;
  CHECK_THROWS_WITH(pool.acquire(30s), "after the grant");
  CHECK(s.is_free("p#0"));
  CHECK(s.is_free("p#1"));
  s.throws_after_grant = 1;
  CHECK_THROWS_WITH(pool.try_acquire(), "after the grant");
  CHECK(s.is_free("p#0"));
  CHECK(s.is_free("p#1"));
}

}  // namespace test_acquire_unwind
