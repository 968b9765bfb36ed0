// SPDX-License-Identifier: MIT
// mutex.hpp: distributed_mutex models Lockable/TimedLockable over a lease. Single-threaded and
// deterministic: blocking calls run on a jump_clock whose sleeps move virtual time themselves.
#include <catch2/catch.hpp>

#include <chrono>
#include <mutex>
#include <string>
#include <system_error>
#include <type_traits>
#include <vector>

#include "holdfast/keepalive.hpp"
#include "holdfast/mutex.hpp"
#include "holdfast/stores/memory.hpp"
#include "lifecycle_support.hpp"
#include "test_support.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_mutex {

using namespace std::chrono_literals;
using holdfast::errc;
using holdfast::loss_cause;
using holdfast::manual_clock;
using holdfast_test::jump_clock;
using lifecycle_test::faulty_store;
using lifecycle_test::injected_failure;

namespace {

using mstore = holdfast::memory_store<manual_clock>;
using fstore = faulty_store<mstore>;
using jmutex = holdfast::distributed_mutex<fstore, jump_clock>;

struct fixture {
  jump_clock clock;
  mstore inner{clock.manual()};
  fstore store{inner};
  std::vector<loss_cause> losses;

  holdfast::mutex_options<jump_clock> opts() {
    holdfast::mutex_options<jump_clock> o;
    o.acquire.clock = clock;
    o.acquire.backoff.initial = 10ms;
    o.acquire.backoff.max_delay = 100ms;
    o.acquire.backoff.seed = 7;
    o.acquire.on_lost = [this](loss_cause c) { losses.push_back(c); };
    return o;
  }
  // Another process holding the key for `ttl`.
  void hold_elsewhere(std::chrono::milliseconds ttl) {
    REQUIRE(inner.try_acquire("orders", "elsewhere", ttl));
  }
};

template <class M, class = void>
struct is_lockable : std::false_type {};
template <class M>
struct is_lockable<
    M, std::void_t<decltype(std::declval<M&>().lock()), decltype(std::declval<M&>().unlock()),
                   decltype(bool{std::declval<M&>().try_lock()})>> : std::true_type {};
template <class M, class = void>
struct is_timed_lockable : std::false_type {};
template <class M>
struct is_timed_lockable<M, std::void_t<decltype(bool{std::declval<M&>().try_lock_for(1s)}),
                                        decltype(bool{std::declval<M&>().try_lock_until(
                                            std::chrono::steady_clock::now())})>> : is_lockable<M> {
};

}  // namespace

TEST_CASE("distributed_mutex models Lockable and TimedLockable", "[mutex]") {
  STATIC_REQUIRE(is_lockable<jmutex>::value);
  STATIC_REQUIRE(is_timed_lockable<jmutex>::value);
  STATIC_REQUIRE(is_timed_lockable<holdfast::distributed_mutex<holdfast::memory_store<>>>::value);
  STATIC_REQUIRE_FALSE(std::is_copy_constructible_v<jmutex>);
  STATIC_REQUIRE_FALSE(std::is_move_constructible_v<jmutex>);
}

TEST_CASE("std::unique_lock locks and unlocks through the store", "[mutex]") {
  fixture f;
  jmutex m(f.store, "orders", 10s, f.opts());
  REQUIRE_FALSE(m.error());
  CHECK(m.token().is_none());
  {
    std::unique_lock<jmutex> lock(m);
    CHECK(lock.owns_lock());
    CHECK(m.locked_by_this_thread());
    CHECK(m.valid());
    auto rec = holdfast_test::record_of(f.inner, "orders");
    REQUIRE(rec);
    CHECK(rec->token == m.token());
    CHECK(m.current_lease()->key() == "orders");
  }
  CHECK_FALSE(holdfast_test::record_of(f.inner, "orders"));
  CHECK(m.token().is_none());
  CHECK_FALSE(m.locked_by_this_thread());
  CHECK_FALSE(m.last_error());
  std::unique_lock<jmutex> again(m);  // and again, with a newer token
  CHECK(m.token() == holdfast::fencing_token(2));
}

TEST_CASE("std::scoped_lock takes two distributed mutexes", "[mutex]") {
  fixture f;
  jmutex a(f.store, "a", 10s, f.opts());
  jmutex b(f.store, "b", 10s, f.opts());
  {
    std::scoped_lock lock(a, b);
    CHECK(a.locked_by_this_thread());
    CHECK(b.locked_by_this_thread());
  }
  CHECK_FALSE(a.locked_by_this_thread());
  CHECK_FALSE(b.locked_by_this_thread());
  CHECK(f.inner.size() == 0);
}

TEST_CASE("std::lock backs off a busy mutex instead of holding the other", "[mutex]") {
  fixture f;
  jmutex a(f.store, "a", 10s, f.opts());
  jmutex b(f.store, "orders", 10s, f.opts());
  f.hold_elsewhere(3s);  // "orders" is busy for 3 s of virtual time
  std::scoped_lock lock(a, b);
  CHECK(a.locked_by_this_thread());
  CHECK(b.locked_by_this_thread());
  CHECK(f.clock.now() >= manual_clock::time_point(3s));
}

TEST_CASE("try_lock and try_lock_for report why they failed", "[mutex]") {
  fixture f;
  jmutex m(f.store, "orders", 10s, f.opts());
  f.hold_elsewhere(10s);
  CHECK_FALSE(m.try_lock());
  CHECK(m.last_error() == errc::busy);
  CHECK(f.clock.sleeps().empty());  // did not wait
  CHECK_FALSE(m.try_lock_for(5s));
  CHECK(m.last_error() == errc::timeout);
  CHECK(f.clock.now() == manual_clock::time_point(5s));
  CHECK(m.try_lock_for(6s));  // the other lease expires at 10 s
  CHECK(f.clock.now() >= manual_clock::time_point(10s));
  CHECK(f.clock.now() <= manual_clock::time_point(11s));
  m.unlock();
}

TEST_CASE("try_lock_until takes deadlines on the mutex's clock and on std clocks", "[mutex]") {
  fixture f;
  jmutex m(f.store, "orders", 10s, f.opts());
  f.hold_elsewhere(10s);
  SECTION("a deadline in the past makes one attempt") {
    CHECK_FALSE(m.try_lock_until(manual_clock::time_point(0s) - 1h));
    CHECK(m.last_error() == errc::timeout);
    CHECK(f.store.acquire_calls == 1);
  }
  SECTION("mutex clock") {
    CHECK(m.try_lock_until(manual_clock::time_point(20s)));
  }
  SECTION("std::chrono::steady_clock, converted to a timeout") {
    CHECK_FALSE(m.try_lock_until(std::chrono::steady_clock::now() + 2s));
    // 2 s (less the real time the conversion took) measured on the mutex's clock.
    CHECK(f.clock.now() <= manual_clock::time_point(2s));
    CHECK(f.clock.now() > manual_clock::time_point(1s));
  }
  SECTION("std::unique_lock with a timeout") {
    std::unique_lock<jmutex> lock(m, 30s);
    CHECK(lock.owns_lock());
  }
}

TEST_CASE("lock() blocks with backoff until the key is free", "[mutex]") {
  fixture f;
  jmutex m(f.store, "orders", 10s, f.opts());
  f.hold_elsewhere(10s);
  m.lock();
  CHECK(m.locked_by_this_thread());
  CHECK(f.clock.now() >= manual_clock::time_point(10s));
  // Backoff: attempts spread out (full jitter under 10 ms doubling to 100 ms: ~50 ms apart on
  // average, so ~200 in 10 s), not one per clock tick.
  CHECK(f.store.acquire_calls < 400);
  CHECK(f.store.acquire_calls > 100);
  m.unlock();
}

TEST_CASE("lock() fails loudly instead of blocking forever", "[mutex]") {
  fixture f;
  SECTION("bad arguments") {
    for (auto ttl : {0ms, -1ms, 1ms, std::chrono::milliseconds(holdfast::max_ttl + 1ms)}) {
      jmutex m(f.store, "orders", ttl, f.opts());
      CHECK(m.error() == errc::invalid_argument);
      CHECK_FALSE(m.try_lock());
      CHECK(m.last_error() == errc::invalid_argument);
      CHECK_FALSE(m.try_lock_for(1s));
      try {
        m.lock();
        FAIL("lock() returned");
      } catch (const std::system_error& e) {
        CHECK(e.code() == errc::invalid_argument);
      }
    }
    jmutex empty_key(f.store, "", 10s, f.opts());
    CHECK(empty_key.error() == errc::invalid_argument);
    CHECK(f.store.acquire_calls == 0);  // nothing reached the store
  }
  SECTION("recursive locking") {
    jmutex m(f.store, "orders", 10s, f.opts());
    m.lock();
    CHECK_FALSE(m.try_lock());
    CHECK(m.last_error() == std::errc::resource_deadlock_would_occur);
    try {
      m.lock();
      FAIL("lock() returned");
    } catch (const std::system_error& e) {
      CHECK(e.code() == std::errc::resource_deadlock_would_occur);
    }
    CHECK(m.locked_by_this_thread());  // the first lock is untouched
    m.unlock();
  }
  SECTION("a store answering garbage") {
    f.store.set_acquire_hook(
        [](auto, auto, auto) -> std::optional<holdfast::result<holdfast::grant>> {
          return holdfast::result<holdfast::grant>(holdfast::grant{holdfast::fencing_token{}, 10s});
        });
    jmutex m(f.store, "orders", 10s, f.opts());
    CHECK_THROWS_MATCHES(m.lock(), std::system_error,
                         Catch::Predicate<std::system_error>([](const std::system_error& e) {
                           return e.code() == errc::protocol_error;
                         }));
    CHECK_FALSE(m.locked_by_this_thread());
  }
  SECTION("a store that throws: the exception itself") {
    f.store.set_acquire_hook(
        [](auto, auto, auto) -> std::optional<holdfast::result<holdfast::grant>> {
          throw injected_failure("acquire exploded");
        });
    jmutex m(f.store, "orders", 10s, f.opts());
    CHECK_THROWS_MATCHES(m.lock(), injected_failure, Catch::Message("acquire exploded"));
    CHECK_THROWS_AS(m.try_lock(), injected_failure);
  }
}

TEST_CASE("unlock() of a lost lock does not throw and reports the loss", "[mutex]") {
  fixture f;
  jmutex m(f.store, "orders", 10s, f.opts());
  SECTION("validity passed, record still there") {
    m.lock();
    f.clock.manual().advance(9s + 900ms);  // past validity (99% - 2 ms), before the store's TTL
    CHECK_FALSE(m.valid());
    CHECK_NOTHROW(m.unlock());
    CHECK(m.last_error() == errc::lease_lost);
    CHECK(f.losses == std::vector<loss_cause>{loss_cause::validity_passed});
    CHECK_FALSE(holdfast_test::record_of(f.inner, "orders"));  // freed early anyway
  }
  SECTION("taken over by another holder") {
    m.lock();
    const auto mine = m.token();
    f.clock.manual().advance(10s);
    auto other = f.inner.try_acquire("orders", "elsewhere", 10s);
    REQUIRE(other);
    CHECK(other->token > mine);
    CHECK_NOTHROW(m.unlock());
    CHECK(m.last_error() == errc::lease_lost);
    CHECK(f.losses.size() == 1);
    auto rec = holdfast_test::record_of(f.inner, "orders");
    REQUIRE(rec);
    CHECK(rec->owner == "elsewhere");  // the new holder is untouched
  }
  CHECK_FALSE(m.locked_by_this_thread());
  CHECK(m.try_lock_for(20s));  // usable again
}

TEST_CASE("unlock() survives a failing or throwing store", "[mutex]") {
  fixture f;
  jmutex m(f.store, "orders", 10s, f.opts());
  m.lock();
  SECTION("error, then the quiet retry succeeds") {
    f.store.fail_releases(errc::store_unavailable, 1);
    CHECK_NOTHROW(m.unlock());
    CHECK(m.last_error() == errc::store_unavailable);
    CHECK(f.store.release_calls == 2);
    CHECK_FALSE(holdfast_test::record_of(f.inner, "orders"));
  }
  SECTION("throws every time: the TTL frees the key") {
    f.store.throw_on_releases();
    CHECK_NOTHROW(m.unlock());
    CHECK(m.last_error() == errc::caught_exception);
    f.store.clear_hooks();
    CHECK_FALSE(m.try_lock());
    f.clock.manual().advance(10s);
    CHECK(m.try_lock());
  }
  CHECK(f.losses.empty());
}

TEST_CASE("unlock() without a lock does nothing", "[mutex]") {
  fixture f;
  jmutex m(f.store, "orders", 10s, f.opts());
  CHECK_NOTHROW(m.unlock());
  CHECK(m.last_error() == errc::not_holder);
  CHECK(f.store.release_calls == 0);
}

TEST_CASE("a mutex with a keepalive keeps its lock alive until unlock", "[mutex][keepalive]") {
  fixture f;
  holdfast::keepalive_options ko;
  ko.start_thread = false;
  holdfast::keepalive<jump_clock> ka(f.clock, ko);
  auto o = f.opts();
  o.keepalive = &ka;
  jmutex m(f.store, "orders", 10s, o);
  m.lock();
  CHECK(ka.size() == 1);
  for (int i = 1; i <= 10; ++i) {
    f.clock.manual().advance(5s);
    (void)ka.poll();
  }
  CHECK(m.valid());  // 50 s on a 10 s TTL
  CHECK(f.store.renew_calls == 10);
  m.unlock();
  CHECK_FALSE(m.last_error());
  f.clock.manual().advance(5s);
  CHECK_FALSE(ka.poll());
  CHECK(f.store.renew_calls == 10);
  holdfast::keepalive_options bad;
  bad.renew_fraction = 0;
  holdfast::keepalive<jump_clock> broken(f.clock, bad);
  o.keepalive = &broken;
  jmutex n(f.store, "orders", 10s, o);
  CHECK(n.error() == errc::invalid_argument);
}

TEST_CASE("destroying a mutex releases a lock still held", "[mutex]") {
  fixture f;
  {
    jmutex m(f.store, "orders", 10s, f.opts());
    m.lock();
  }
  CHECK(f.store.release_calls == 1);
  CHECK(f.inner.size() == 0);
}

TEST_CASE("owner ids are unique per lock, with the given label", "[mutex]") {
  fixture f;
  auto o = f.opts();
  o.acquire.label = "worker-7";
  jmutex m(f.store, "orders", 10s, o);
  m.lock();
  const std::string first = m.current_lease()->owner();
  m.unlock();
  m.lock();
  const std::string second = m.current_lease()->owner();
  CHECK(first.rfind("worker-7/", 0) == 0);
  CHECK(second.rfind("worker-7/", 0) == 0);
  CHECK(first != second);
  CHECK(first.size() == std::string("worker-7/").size() + 32);
}

TEST_CASE("try_lock_for and lock notice a clock that jumps back: the wait does not grow by it",
          "[mutex]") {
  // The kind of issue "time at the edges" (2) in distributed_mutex: the key is held elsewhere
  // for an hour; try_lock_for(5 s) runs on a clock that jumps back 100 s during the wait. Before,
  // the wait aimed at the instant start + 5 s and so lasted 105 s of clock time. Expected: the
  // call gives up (timeout) after 5 s of forward clock movement; one tick before, at and after.
  fixture f;
  jmutex m(f.store, "orders", 10s, f.opts());
  f.hold_elsewhere(std::chrono::hours(1));
  int attempts = 0;
  f.store.set_acquire_hook(
      [&](auto, auto, auto) -> std::optional<holdfast::result<holdfast::grant>> {
        if (++attempts == 3) f.clock.manual().advance(-100s);  // jump back during the wait
        return std::nullopt;
      });
  const manual_clock::time_point start = f.clock.now();
  CHECK_FALSE(m.try_lock_for(5s));
  CHECK(m.last_error() == errc::timeout);
  // Clock time moved forwards by 5 s in all, plus the one backoff sleep that the jump hid (made
  // between two readings that straddle the jump): bounded, whatever the jump's size.
  const auto hidden = f.clock.sleeps().at(1) - f.clock.sleeps().at(0);
  CHECK(f.clock.now() == start - 100s + 5s + hidden);
  CHECK(hidden < 5s);
  CHECK(attempts > 3);
}

}  // namespace test_mutex
