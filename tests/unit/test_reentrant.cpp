// SPDX-License-Identifier: MIT
// reentrant.hpp and recursive_mutex.hpp: re-entry by a holder that already holds the key gets the
// same grant and token, counted, released in the store when the count returns to zero; a retried
// request id counts once (redisson #7367); the recursive mutex meets the standard's recursive
// mutex rules and works with std::lock_guard / std::unique_lock. Cost: well under a second.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "holdfast/clock.hpp"
#include "holdfast/recursive_mutex.hpp"
#include "holdfast/reentrant.hpp"
#include "holdfast/stores/memory.hpp"
#include "test_support.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_reentrant {

using holdfast::errc;
using holdfast::fencing_token;
using holdfast::manual_clock;
using holdfast_test::scripted_store;
using namespace std::chrono_literals;
using ms = std::chrono::milliseconds;

namespace {

template <class Clock>
holdfast::acquire_options<Clock> options(Clock clock) {
  holdfast::acquire_options<Clock> o;
  o.clock = std::move(clock);
  o.backoff.seed = 11;
  return o;
}

bool free_key(holdfast::memory_store<manual_clock>& s, std::string_view key) {
  auto r = s.inspect(key);
  return r && !*r;
}

}  // namespace

TEST_CASE("a re-entry gets the same token, counted, without a store call", "[reentrant]") {
  manual_clock clock;
  scripted_store s(clock);
  holdfast::reentrant_holder<scripted_store, manual_clock> me(s, options(clock));
  auto t1 = me.try_acquire("k", 1000ms);
  REQUIRE(t1);
  auto t2 = me.try_acquire("k", 1000ms);
  REQUIRE(t2);
  CHECK(*t1 == *t2);
  CHECK(s.acquires == 1);
  CHECK(me.hold_count("k") == 2);
  REQUIRE(me.release("k"));
  CHECK(me.hold_count("k") == 1);
  CHECK(!free_key(s.inner, "k"));
  CHECK(s.releases == 0);
  REQUIRE(me.release("k"));
  CHECK(free_key(s.inner, "k"));
  CHECK(s.releases == 1);
  CHECK(me.release("k").error() == errc::not_holder);
  // Another owner is busy meanwhile; a new hold after release gets a newer token.
  auto t3 = me.try_acquire("k", 1000ms);
  REQUIRE(t3);
  CHECK(*t3 > *t1);
  holdfast::reentrant_holder<scripted_store, manual_clock> you(s, options(clock));
  CHECK(you.try_acquire("k", 1000ms).error() == errc::busy);
}

TEST_CASE("a retried request id counts once; its release is idempotent", "[reentrant]") {
  manual_clock clock;
  holdfast::memory_store<manual_clock> s(clock);
  holdfast::reentrant_holder<holdfast::memory_store<manual_clock>, manual_clock> me(s,
                                                                                    options(clock));
  REQUIRE(me.try_acquire("k", 1000ms, "req-1"));
  REQUIRE(me.try_acquire("k", 1000ms, "req-2"));
  REQUIRE(me.try_acquire("k", 1000ms, "req-2"));  // the caller's retry after a lost reply
  CHECK(me.hold_count("k") == 2);
  REQUIRE(me.release("k", "req-2"));
  REQUIRE(me.release("k", "req-2"));  // retried release: nothing changes
  CHECK(me.hold_count("k") == 1);
  CHECK(!free_key(s, "k"));
  REQUIRE(me.release("k", "req-1"));
  CHECK(free_key(s, "k"));
}

TEST_CASE("the negative controls of re-entry differ by their one bug", "[reentrant]") {
  manual_clock clock;
  holdfast::memory_store<manual_clock> s(clock);
  using holder = holdfast::reentrant_holder<holdfast::memory_store<manual_clock>, manual_clock>;
  holder a(s, options(clock));
  holdfast::detail::reentry_access::mutate(a, holdfast::detail::reentry_mutation::counts_retries);
  REQUIRE(a.try_acquire("k", 1000ms, "r"));
  REQUIRE(a.try_acquire("k", 1000ms, "r"));
  CHECK(a.hold_count("k") == 2);  // counted twice: the lock outlives its last release
  holder b(s, options(clock));
  holdfast::detail::reentry_access::mutate(
      b, holdfast::detail::reentry_mutation::releases_at_first_exit);
  REQUIRE(b.try_acquire("j", 1000ms));
  REQUIRE(b.try_acquire("j", 1000ms));
  REQUIRE(b.release("j"));
  CHECK(free_key(s, "j"));  // freed while one entry is still counted
}

TEST_CASE("a re-entry into a lost lease reports lease_lost", "[reentrant]") {
  manual_clock clock;
  holdfast::memory_store<manual_clock> s(clock);
  holdfast::reentrant_holder<holdfast::memory_store<manual_clock>, manual_clock> me(s,
                                                                                    options(clock));
  auto t = me.try_acquire("k", 1000ms);
  REQUIRE(t);
  clock.advance(1000ms);
  CHECK(me.try_acquire("k", 1000ms).error() == errc::lease_lost);
  CHECK(me.hold_count("k") == 1);
  CHECK(me.release("k"));  // the last entry: the store had expired it already
  CHECK(me.hold_count("k") == 0);
}

TEST_CASE("recursive_distributed_mutex re-enters with std::lock_guard and std::unique_lock",
          "[reentrant]") {
  manual_clock clock;
  holdfast::memory_store<manual_clock> s(clock);
  holdfast::mutex_options<manual_clock> mo;
  mo.acquire = options(clock);
  holdfast::recursive_distributed_mutex<holdfast::memory_store<manual_clock>, manual_clock> m(
      s, "k", 1000ms, mo);
  REQUIRE(!m.error());
  {
    std::lock_guard<decltype(m)> g(m);
    const fencing_token t = m.token();
    {
      std::unique_lock<decltype(m)> u(m);
      CHECK(m.lock_count() == 2);
      CHECK(m.token() == t);
      CHECK(m.try_lock());
      CHECK(m.try_lock_for(0ms));
      CHECK(m.lock_count() == 4);
      m.unlock();
      m.unlock();
    }
    CHECK(m.lock_count() == 1);
    CHECK(!free_key(s, "k"));
    // Another thread is excluded (it tries once and fails: busy).
    bool other = true;
    std::thread th([&] { other = m.try_lock(); });
    th.join();
    CHECK(!other);
    CHECK(m.valid());
  }
  CHECK(m.lock_count() == 0);
  CHECK(free_key(s, "k"));
  m.unlock();  // not held: nothing happens
  CHECK(m.last_error() == errc::not_holder);
}

TEST_CASE("recursive_distributed_mutex excludes other threads while re-entered",
          "[reentrant][concurrency]") {
  holdfast::memory_store<> s;
  holdfast::recursive_distributed_mutex<holdfast::memory_store<>> m(s, "k", 10s);
  int inside = 0;
  int most = 0;
  long total = 0;
  auto work = [&] {
    for (int i = 0; i < 50; ++i) {
      std::lock_guard<decltype(m)> outer(m);
      std::lock_guard<decltype(m)> inner(m);  // a re-entry: no store call
      most = std::max(most, ++inside);
      ++total;
      --inside;
    }
  };
  std::thread a(work);
  std::thread b(work);
  a.join();
  b.join();
  CHECK(most == 1);
  CHECK(total == 100);
  auto r = s.inspect("k");
  CHECK((r && !*r));
}

}  // namespace test_reentrant
