// SPDX-License-Identifier: MIT
// tests/unit/test_wait_for_release.cpp - waiting without polling (store.hpp's wait_for_release):
// blocking acquire() sleeps in the store while the key is busy, is woken by the release or at the
// latest at the holder's expiry, never later because a notification was lost, and falls back to
// backoff when a store's hints are wrong; memory_store's implementation (one waiter woken per
// release, FIFO) with real threads and bounded waits.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "holdfast/lease.hpp"
#include "holdfast/stores/memory.hpp"
#include "test_support.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_wait_for_release {

namespace {

using namespace std::chrono_literals;
using holdfast::errc;
using holdfast::manual_clock;
using holdfast_test::jump_clock;

static_assert(holdfast::can_wait_for_release_v<holdfast::memory_store<>, holdfast::steady_clock>);
static_assert(!holdfast::can_wait_for_release_v<holdfast::memory_store<manual_clock>, manual_clock>,
              "a condition variable cannot wait on manual time");
static_assert(!holdfast::can_wait_for_release_v<holdfast::memory_store<>, manual_clock>);

// A store on manual time that offers wait_for_release to jump_clock callers: a wait "sleeps" by
// moving time to the holder's expiry or the deadline, whichever is first, or returns at once if a
// release was announced since the last wait. `drop` loses every announcement (a lost pub/sub
// message); `early` makes the hint wake one tick before the expiry (a store whose clock is ahead).
struct hinting_store {
  explicit hinting_store(jump_clock c) : clock(c), inner(c.manual()) {}
  holdfast::result<holdfast::grant> try_acquire(std::string_view k, std::string_view o,
                                                holdfast_test::ms ttl) {
    ++acquires;
    return inner.try_acquire(k, o, ttl);
  }
  holdfast::result<holdfast::grant> renew(std::string_view k, std::string_view o,
                                          holdfast::fencing_token t, holdfast_test::ms ttl) {
    return inner.renew(k, o, t, ttl);
  }
  holdfast::result<void> release(std::string_view k, std::string_view o,
                                 holdfast::fencing_token t) {
    auto r = inner.release(k, o, t);
    if (r && !drop) announced = true;
    return r;
  }
  holdfast::result<void> wait_for_release(std::string_view k, const jump_clock::time_point& d) {
    ++waits;
    if (always_wrong) return {};
    if (announced) {
      announced = false;
      return {};
    }
    auto rec = inner.inspect(k);
    if (!rec) return rec.error();
    if (!*rec) return {};
    if ((*rec)->token != known_token) {  // the holder's exact expiry, from a ms-aligned reading
      known_token = (*rec)->token;
      known_expiry = clock.now() + (*rec)->remaining;
    }
    jump_clock::time_point wake = known_expiry;
    if (early && !early_used) {
      wake -= manual_clock::duration(1);
      early_used = true;
    }
    if (d < wake) wake = d;
    // Asleep now. Something may happen meanwhile (the holder releases); an announcement wakes
    // the waiter at once, a lost one leaves it asleep until `wake`.
    if (during_wait) std::exchange(during_wait, nullptr)();
    if (announced) {
      announced = false;
      return {};
    }
    if (clock.now() < wake) clock.manual().set(wake);
    return {};
  }
  jump_clock clock;
  holdfast::memory_store<manual_clock> inner;
  bool drop = false;
  bool early = false;
  bool always_wrong = false;
  bool announced = false;
  bool early_used = false;
  std::function<void()> during_wait;
  holdfast::fencing_token known_token{};
  jump_clock::time_point known_expiry{};
  int acquires = 0;
  int waits = 0;
};
static_assert(holdfast::can_wait_for_release_v<hinting_store, jump_clock>);

holdfast::acquire_options<jump_clock> opts(jump_clock c) {
  holdfast::acquire_options<jump_clock> o;
  o.clock = c;
  o.backoff.seed = 3;
  return o;
}

}  // namespace

TEST_CASE("acquire: a lost release notification costs at most the wait until the holder's expiry",
          "[lease][wait_for_release]") {
  jump_clock clock;
  hinting_store store(clock);
  std::optional<holdfast::lease<hinting_store, jump_clock>> holder;
  holder.emplace(holdfast::try_acquire(store, "k", 1000ms, opts(clock)).value());
  clock.manual().advance(300ms);
  // While the second acquirer waits, the holder releases, and the notification is lost: the
  // waiter is woken at the holder's expiry (1000 ms), not one tick later, and gets the key then.
  store.drop = true;
  store.during_wait = [&] { REQUIRE(holder->release().has_value()); };
  auto w = holdfast::acquire(store, "k", 1000ms, 5s, opts(clock));
  REQUIRE(w.has_value());
  CHECK(clock.manual().now().time_since_epoch() == 1000ms);
  CHECK(store.waits == 1);
  CHECK(store.acquires == 3);     // the holder's, the waiter's busy one, the waiter's grant
  CHECK(clock.sleeps().empty());  // no backoff sleep at all

  // The same with the notification delivered: woken at once, granted at once (still 1000 ms).
  store.drop = false;
  holder.emplace(std::move(*w));
  store.during_wait = [&] { REQUIRE(holder->release().has_value()); };
  auto v = holdfast::acquire(store, "k", 1000ms, 5s, opts(clock));
  REQUIRE(v.has_value());
  CHECK(clock.manual().now().time_since_epoch() == 1000ms);
  CHECK(store.waits == 2);
}

TEST_CASE("acquire: a hint one tick early costs one more round, not a missed grant",
          "[lease][wait_for_release]") {
  jump_clock clock;
  hinting_store store(clock);
  auto holder = holdfast::try_acquire(store.inner, "k", 1000ms, opts(clock));
  REQUIRE(holder.has_value());
  store.early = true;
  auto w = holdfast::acquire(store, "k", 1000ms, 5s, opts(clock));
  REQUIRE(w.has_value());
  // Woken at 999.999999 ms: still busy (one tick before the expiry); the next wait ends at the
  // expiry itself, where the key is granted.
  CHECK(clock.manual().now().time_since_epoch() == 1000ms);
  CHECK(store.waits == 2);
  CHECK(store.acquires == 3);
  CHECK(w->token() > holder->token());
}

TEST_CASE("acquire: a release wakes the waiter at once; the deadline still bounds the wait",
          "[lease][wait_for_release]") {
  jump_clock clock;
  hinting_store store(clock);
  auto holder = holdfast::try_acquire(store, "k", 10s, opts(clock));
  REQUIRE(holder.has_value());
  REQUIRE(holder->release().has_value());                                  // announced
  auto again = holdfast::try_acquire(store.inner, "k", 10s, opts(clock));  // taken again
  REQUIRE(again.has_value());
  // The stale announcement wakes the waiter at once (busy again), then it waits to the deadline.
  auto w = holdfast::acquire(store, "k", 1s, 2s, opts(clock));
  CHECK(w.error() == errc::timeout);
  CHECK(clock.manual().now().time_since_epoch() == 2s);
  CHECK(store.waits == 2);
  CHECK(clock.sleeps().empty());
}

TEST_CASE("acquire: a store whose wait hints are always wrong falls back to backoff sleeps",
          "[lease][wait_for_release]") {
  jump_clock clock;
  hinting_store store(clock);
  auto holder = holdfast::try_acquire(store.inner, "k", 10s, opts(clock));
  REQUIRE(holder.has_value());
  store.always_wrong = true;  // returns at once, key still busy
  auto w = holdfast::acquire(store, "k", 1s, 1s, opts(clock));
  CHECK(w.error() == errc::timeout);
  CHECK(clock.manual().now().time_since_epoch() == 1s);
  REQUIRE_FALSE(clock.sleeps().empty());  // it did sleep, on the clock,
  CHECK(store.waits <= 7 * (static_cast<int>(clock.sleeps().size()) + 1));  // 1 round in 8
}

TEST_CASE("memory_store: wait_for_release answers at once for a free, expired or past deadline",
          "[memory_store][wait_for_release]") {
  holdfast::memory_store<> store;
  const auto now = std::chrono::steady_clock::now();
  CHECK(store.wait_for_release("free", now + 10s).has_value());
  CHECK(store.wait_for_release("", now + 10s).error() == errc::invalid_argument);
  REQUIRE(store.try_acquire("k", "a", 60000ms).has_value());
  CHECK(store.wait_for_release("k", now).has_value());  // deadline already passed
  CHECK(store.waiting() == 0u);
}

TEST_CASE("memory_store: a release hands the key to one waiter at a time, in order",
          "[memory_store][wait_for_release][concurrency]") {
  holdfast::memory_store<> store;
  auto first = holdfast::try_acquire(store, "k", 60s);
  REQUIRE(first.has_value());
  constexpr int kWaiters = 8;
  std::atomic<int> done{0};
  std::vector<std::thread> threads;
  std::vector<holdfast::fencing_token> tokens(kWaiters);
  for (int i = 0; i < kWaiters; ++i) {
    threads.emplace_back([&, i] {
      auto l = holdfast::acquire(store, "k", 60s, 30s);
      if (l) {
        tokens[static_cast<std::size_t>(i)] = l->token();
        (void)l->release();  // hands over to the next waiter
      }
      done.fetch_add(1);
    });
  }
  const auto limit = std::chrono::steady_clock::now() + 20s;
  while (store.waiting() < kWaiters && std::chrono::steady_clock::now() < limit) {
    std::this_thread::yield();
  }
  REQUIRE(store.waiting() == static_cast<std::size_t>(kWaiters));
  REQUIRE(first->release().has_value());
  for (std::thread& t : threads) t.join();
  CHECK(done.load() == kWaiters);
  for (const auto& t : tokens) CHECK(t > first->token());
  CHECK(store.waiting() == 0u);
}

TEST_CASE("memory_store: a waiter whose holder dies wakes at the holder's expiry",
          "[memory_store][wait_for_release][concurrency]") {
  holdfast::memory_store<> store;
  // The holder "dies": its record stays until the TTL (200 ms) ends; nothing is released.
  REQUIRE(store.try_acquire("k", "dead", 200ms).has_value());
  const auto granted = std::chrono::steady_clock::now();
  holdfast::acquire_options<> o;
  o.backoff.initial = 10s;  // a polling acquire would sleep for seconds here
  o.backoff.max_delay = 10s;
  auto l = holdfast::acquire(store, "k", 1s, 20s, o);
  const auto took = std::chrono::steady_clock::now() - granted;
  REQUIRE(l.has_value());
  CHECK(took >= 200ms);
  CHECK(took < 5s);  // far below the backoff it would otherwise have slept (bounded for CI)
}

TEST_CASE("memory_store: watch_release wakes every watcher on a release, and takes no hand-off",
          "[memory_store][wait_for_release][concurrency]") {
  holdfast::memory_store<> store;
  auto holder = holdfast::try_acquire(store, "k", 60s);
  REQUIRE(holder.has_value());
  std::atomic<int> watched{0};
  std::vector<std::thread> watchers;
  for (int i = 0; i < 3; ++i) {
    watchers.emplace_back([&] {
      if (store.watch_release("k", std::chrono::steady_clock::now() + 30s)) ++watched;
    });
  }
  std::optional<holdfast::fencing_token> waiter_token;
  std::thread waiter([&] {
    auto l = holdfast::acquire(store, "k", 60s, 30s);
    if (l) waiter_token = l->token();
  });
  const auto limit = std::chrono::steady_clock::now() + 20s;
  while (store.waiting() < 1 && std::chrono::steady_clock::now() < limit) {
    std::this_thread::yield();
  }
  REQUIRE(store.waiting() == 1u);
  REQUIRE(holder->release().has_value());
  waiter.join();  // the hand-off went to the waiter, not to a watcher
  for (std::thread& t : watchers) t.join();
  CHECK(watched.load() == 3);
  REQUIRE(waiter_token.has_value());
  CHECK(*waiter_token > holder->token());
  // A free key, or a deadline already passed, answers at once.
  CHECK(store.watch_release("free", std::chrono::steady_clock::now() + 30s).has_value());
}

// memory_store's wait for any of several keys (semaphore.hpp's waiting): answers at once for a
// free or expired key (its index) and a past deadline (keys.size()); refuses bad input.
TEST_CASE("memory_store: wait_for_release_any answers at once for a free key or a past deadline",
          "[memory_store][wait_for_release]") {
  static_assert(
      holdfast::can_wait_for_release_any_v<holdfast::memory_store<>, holdfast::steady_clock>);
  static_assert(
      !holdfast::can_wait_for_release_any_v<holdfast::memory_store<manual_clock>, manual_clock>);
  holdfast::memory_store<> store;
  const auto now = std::chrono::steady_clock::now();
  REQUIRE(store.try_acquire("a", "x", 60s).has_value());
  REQUIRE(store.try_acquire("b", "x", 60s).has_value());
  CHECK(store.wait_for_release_any({"a", "free", "b"}, now + 30s).value() == 1u);
  CHECK(store.wait_for_release_any({"a", "b"}, now).value() == 2u);  // the deadline passed
  CHECK(store.wait_for_release_any({}, now + 30s).error() == errc::invalid_argument);
  CHECK(store.wait_for_release_any({"a", ""}, now + 30s).error() == errc::invalid_argument);
  CHECK(store.waiting() == 0u);
}

// One waiter of {a, b} and, behind it, one of b alone. a and b are released back to back: a wakes
// the first waiter; b's release must not be spent on that waiter (woken already, maybe not yet
// out of b's queue) but wake the second. Expected: the first answers 0 (a), the second is woken
// too, long before the 20 s deadline and the 60 s TTL, and no place is left in any queue.
TEST_CASE("memory_store: a release skips a waiter another key already woke",
          "[memory_store][wait_for_release][concurrency]") {
  holdfast::memory_store<> store;
  const auto a = store.try_acquire("a", "x", 60s).value();
  const auto b = store.try_acquire("b", "x", 60s).value();
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + 20s;
  const auto limit = start + 20s;
  std::optional<holdfast::result<std::size_t>> first;
  std::thread t1([&] { first = store.wait_for_release_any({"a", "b"}, deadline); });
  while (store.waiting() < 2 && std::chrono::steady_clock::now() < limit) std::this_thread::yield();
  REQUIRE(store.waiting() == 2u);
  std::thread t2([&] { (void)store.wait_for_release("b", deadline); });
  while (store.waiting() < 3 && std::chrono::steady_clock::now() < limit) std::this_thread::yield();
  REQUIRE(store.waiting() == 3u);
  REQUIRE(store.release("a", "x", a.token).has_value());
  REQUIRE(store.release("b", "x", b.token).has_value());
  t1.join();
  t2.join();
  REQUIRE(first.has_value());
  CHECK(first->value() == 0u);
  CHECK(std::chrono::steady_clock::now() - start < 10s);
  CHECK(store.waiting() == 0u);
}

// A stop ends the wait with errc::cancelled and leaves no place behind.
TEST_CASE("memory_store: wait_for_release_any is woken by a stop",
          "[memory_store][wait_for_release][concurrency]") {
  holdfast::memory_store<> store;
  REQUIRE(store.try_acquire("a", "x", 60s).has_value());
  REQUIRE(store.try_acquire("b", "x", 60s).has_value());
  holdfast::cancel_source src;
  const auto limit = std::chrono::steady_clock::now() + 20s;
  std::optional<holdfast::result<std::size_t>> r;
  std::thread t([&] { r = store.wait_for_release_any({"a", "b"}, limit, src.token()); });
  while (store.waiting() < 2 && std::chrono::steady_clock::now() < limit) std::this_thread::yield();
  src.request_stop();
  t.join();
  REQUIRE(r.has_value());
  CHECK(r->error() == errc::cancelled);
  CHECK(store.waiting() == 0u);
  CHECK(std::chrono::steady_clock::now() < limit);
}

}  // namespace test_wait_for_release
