// SPDX-License-Identifier: MIT
// tests/unit/test_redis_wait.cpp - redis_store's wait_for_release: the release script wakes the
// first queued waiter (pub/sub on a second connection), one per release, in order; a lost
// notification (a DEL behind the store's back) costs the wait until the holder's expiry and never
// more; a killed notification connection ends the wait at once, so the next release still wakes
// the waiter; a waiter that gives up (also during its queued attempt) leaves the queue.
// Real server (HOLDFAST_REDIS_PORT from .ci/servers), real threads, bounded waits.
#include <hiredis/hiredis.h>
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "../support/real_servers.hpp"
#include "../support/redis_servers.hpp"
#include "holdfast/cancel.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/stores/redis.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_redis_wait {

using namespace std::chrono_literals;
using holdfast::errc;
using holdfast::redis_options;
using holdfast::redis_store;
using clk = std::chrono::steady_clock;

namespace {

std::optional<redis_options> server() {
  return hf_test::shared_redis_options("hfw");
}

// Waits (bounded) until `n` waiters are queued behind `key`.
bool await_queued(const redis_options& o, const std::string& key, long long n) {
  const auto limit = clk::now() + 10s;
  while (clk::now() < limit) {
    if (hf_test::redis_queued(o, key) == n) return true;
    std::this_thread::sleep_for(1ms);
  }
  return false;
}

holdfast::acquire_options<> slow_polling() {
  holdfast::acquire_options<> o;
  o.backoff.initial = 5s;  // a polling acquire would sleep for seconds between attempts
  o.backoff.max_delay = 5s;
  return o;
}

}  // namespace

TEST_CASE("redis wait: a release wakes the queued waiter at once", "[redis][wait_for_release]") {
  const std::optional<redis_options> o = server();
  if (!o) return;
  redis_store holder_store(*o);
  redis_store waiter_store(*o);
  auto holder = holdfast::try_acquire(holder_store, "job", 30s);
  REQUIRE(holder.has_value());
  std::atomic<long long> after_release_us{-1};
  clk::time_point released_at{};
  std::atomic<bool> released{false};
  std::thread waiter([&] {
    auto l = holdfast::acquire(waiter_store, "job", 30s, 20s, slow_polling());
    if (l && released.load()) {
      after_release_us =
          std::chrono::duration_cast<std::chrono::microseconds>(clk::now() - released_at).count();
    }
  });
  REQUIRE(await_queued(*o, "job", 1));
  released_at = clk::now();
  released = true;
  REQUIRE(holder->release().has_value());
  waiter.join();
  REQUIRE(after_release_us.load() >= 0);
  CHECK(after_release_us.load() < 2000000);  // far below the 5 s backoff; bounded for CI
  CHECK(hf_test::redis_queued(*o, "job") == 0);
}

TEST_CASE("redis wait: waiters are handed the key one release at a time, in order",
          "[redis][wait_for_release]") {
  const std::optional<redis_options> o = server();
  if (!o) return;
  redis_store holder_store(*o);
  auto first = holdfast::try_acquire(holder_store, "fifo", 30s);
  REQUIRE(first.has_value());
  constexpr int kWaiters = 4;
  std::vector<std::thread> threads;
  std::vector<holdfast::fencing_token> tokens(kWaiters);
  redis_store shared(*o);  // several threads waiting on one store share its notification link
  for (int i = 0; i < kWaiters; ++i) {
    threads.emplace_back([&, i] {
      auto l = holdfast::acquire(shared, "fifo", 30s, 20s, slow_polling());
      if (l) {
        tokens[static_cast<std::size_t>(i)] = l->token();
        (void)l->release();
      }
    });
  }
  REQUIRE(await_queued(*o, "fifo", kWaiters));
  REQUIRE(first->release().has_value());
  for (std::thread& t : threads) t.join();
  for (const auto& t : tokens) CHECK(t > first->token());
  CHECK(hf_test::redis_queued(*o, "fifo") == 0);
}

TEST_CASE("redis wait: a lost notification costs the wait until the holder's expiry, no more",
          "[redis][wait_for_release]") {
  const std::optional<redis_options> o = server();
  if (!o) return;
  redis_store holder_store(*o);
  redis_store waiter_store(*o);
  const auto granted = clk::now();
  auto holder = holdfast::try_acquire(holder_store, "lost", 700ms);
  REQUIRE(holder.has_value());
  SECTION("the key is deleted behind the store's back (no release script, no message)") {
    std::thread t([&] {
      REQUIRE(await_queued(*o, "lost", 1));
      CHECK(hf_test::redis_admin_int(*o, {"DEL", o->key_prefix + "lost"}) == 1);
    });
    auto l = holdfast::acquire(waiter_store, "lost", 1s, 20s, slow_polling());
    t.join();
    const auto took = clk::now() - granted;
    REQUIRE(l.has_value());
    CHECK(took >= 650ms);  // woken by the holder's expiry (PTTL measured after the grant)
    CHECK(took < 3s);      // not by a 5 s backoff
  }
}

// Issue 22 part 4: a dead notification session is no reason to sleep until the holder's expiry.
// The waiter's SUBSCRIBE connection is killed (CLIENT KILL TYPE pubsub), then the holder (TTL 3 s)
// releases. Before, the release's PUBLISH reached nobody, the entry was dropped and the waiter
// slept until the holder's expiry (3 s). Expected now: the dead connection ends the wait at once,
// the waiter asks again and queues on a fresh subscription, and the release wakes it: it holds
// the key well before the holder's TTL would have run out.
TEST_CASE("redis wait: a killed notification connection does not make the waiter sleep to expiry",
          "[redis][wait_for_release]") {
  const std::optional<redis_options> o = server();
  if (!o) return;
  redis_store holder_store(*o);
  redis_store waiter_store(*o);
  auto holder = holdfast::try_acquire(holder_store, "killed", 3s);
  REQUIRE(holder.has_value());
  clk::time_point released_at{};
  std::thread t([&] {
    REQUIRE(await_queued(*o, "killed", 1));
    CHECK(hf_test::redis_admin_int(*o, {"CLIENT", "KILL", "TYPE", "pubsub"}) >= 1);
    std::this_thread::sleep_for(100ms);  // the waiter notices and queues again
    released_at = clk::now();
    CHECK(holder->release().has_value());
  });
  auto l = holdfast::acquire(waiter_store, "killed", 1s, 20s, slow_polling());
  const auto got = clk::now();
  t.join();
  REQUIRE(l.has_value());
  CHECK(got - released_at < 1500ms);  // woken by the release (was: the 3 s expiry)
}

TEST_CASE("redis wait: a waiter that gives up leaves the queue; a free key answers at once",
          "[redis][wait_for_release]") {
  const std::optional<redis_options> o = server();
  if (!o) return;
  redis_store store(*o);
  CHECK(store.wait_for_release("free", clk::now() + 10s).has_value());
  CHECK(hf_test::redis_queued(*o, "free") == 0);
  CHECK(store.wait_for_release("", clk::now()).error() == errc::invalid_argument);
  auto holder = holdfast::try_acquire(store, "busy", 30s);
  REQUIRE(holder.has_value());
  const auto start = clk::now();
  auto l = holdfast::acquire(store, "busy", 1s, 300ms, slow_polling());
  CHECK(l.error() == errc::timeout);
  CHECK(clk::now() - start >= 300ms);
  CHECK(hf_test::redis_queued(*o, "busy") == 0);
  redis_options bad = *o;
  bad.wait_prefix = bad.key_prefix + "w:";
  CHECK(bad.check() == errc::invalid_argument);
}

TEST_CASE("redis wait: a watcher wakes on the release without taking the waiter's hand-off",
          "[redis][wait_for_release]") {
  const std::optional<redis_options> o = server();
  if (!o) return;
  redis_store holder_store(*o);
  redis_store waiter_store(*o);
  redis_store watcher_store(*o);
  auto holder = holdfast::try_acquire(holder_store, "w", 30s);
  REQUIRE(holder.has_value());
  std::atomic<bool> watched{false};
  std::thread watcher([&] {
    // Queued first: a hand-off queue would give it the release, a watch does not.
    if (watcher_store.watch_release("w", clk::now() + 20s)) watched = true;
  });
  std::this_thread::sleep_for(50ms);
  clk::time_point released_at{};
  std::atomic<long long> after_us{-1};
  std::thread waiter([&] {
    auto l = holdfast::acquire(waiter_store, "w", 30s, 20s, slow_polling());
    if (l) {
      after_us =
          std::chrono::duration_cast<std::chrono::microseconds>(clk::now() - released_at).count();
    }
  });
  REQUIRE(await_queued(*o, "w", 1));
  released_at = clk::now();
  REQUIRE(holder->release().has_value());
  waiter.join();
  watcher.join();
  CHECK(watched.load());
  REQUIRE(after_us.load() >= 0);
  CHECK(after_us.load() < 2000000);
  CHECK(hf_test::redis_queued(*o, "w") == 0);
}

TEST_CASE(
    "redis wait: only a watcher subscribes to the release broadcast; one that joins a store whose "
    "waiter is reading still hears the release",
    "[redis][wait_for_release]") {
  const std::optional<redis_options> o = server();
  if (!o) return;
  const std::string broadcast = o->wait_prefix + "released";
  redis_store holder_store(*o);
  redis_store shared(*o);  // the waiter reads its notification link when the watcher arrives
  auto holder = holdfast::try_acquire(holder_store, "bc", 30s);
  REQUIRE(holder.has_value());
  std::thread waiter([&] {
    auto l = holdfast::acquire(shared, "bc", 30s, 20s, slow_polling());
    if (l) (void)l->release();
  });
  REQUIRE(await_queued(*o, "bc", 1));
  std::this_thread::sleep_for(50ms);  // asleep in the store, reading its notification link
  // A waiting store hears only the hand-offs chosen for it, not every release (a herd).
  CHECK(hf_test::redis_subscribers(*o, broadcast) == 0);
  std::atomic<long long> watched_us{-1};
  clk::time_point released_at{};
  std::atomic<bool> released{false};
  std::thread watcher([&] {
    if (shared.watch_release("bc", clk::now() + 20s) && released.load()) {
      watched_us =
          std::chrono::duration_cast<std::chrono::microseconds>(clk::now() - released_at).count();
    }
  });
  const auto limit = clk::now() + 10s;
  while (hf_test::redis_subscribers(*o, broadcast) != 1 && clk::now() < limit) {
    std::this_thread::sleep_for(1ms);
  }
  REQUIRE(hf_test::redis_subscribers(*o, broadcast) == 1);
  std::this_thread::sleep_for(50ms);  // the watcher has read the holder and sleeps
  released_at = clk::now();
  released = true;
  REQUIRE(holder->release().has_value());
  watcher.join();
  waiter.join();
  REQUIRE(watched_us.load() >= 0);
  CHECK(watched_us.load() < 2000000);  // woken by the release, not the 20 s deadline
  CHECK(hf_test::redis_queued(*o, "bc") == 0);
}

TEST_CASE("redis wait: a busy attempt joins the queue in the same request",
          "[redis][wait_for_release]") {
  const std::optional<redis_options> o = server();
  if (!o) return;
  redis_store holder_store(*o);
  redis_store waiter_store(*o);
  auto holder = holdfast::try_acquire(holder_store, "q", 30s);
  REQUIRE(holder.has_value());
  CHECK(waiter_store.try_acquire_queued("q", "me", 30000ms).error() == errc::busy);
  CHECK(hf_test::redis_queued(*o, "q") == 1);
  // Queuing again (the thread's acquire gave up and started over) replaces the old place.
  CHECK(waiter_store.try_acquire_queued("q", "me", 30000ms).error() == errc::busy);
  CHECK(hf_test::redis_queued(*o, "q") == 1);
  std::thread t([&] {
    std::this_thread::sleep_for(50ms);
    CHECK(holder->release().has_value());
  });
  const auto start = clk::now();
  CHECK(waiter_store.wait_for_release("q", clk::now() + 20s).has_value());  // no new request
  t.join();
  CHECK(clk::now() - start < 2s);
  auto got = waiter_store.try_acquire_queued("q", "me", 30000ms);
  REQUIRE(got.has_value());
  CHECK(hf_test::redis_queued(*o, "q") == 0);
  CHECK(waiter_store.release("q", "me", got->token).has_value());
}

namespace {

// A steady clock that reads `*offset` ahead of real time: a test moves it to make a round trip
// "take" the rest of a caller's budget, without sleeping for it.
struct offset_clock {
  using rep = clk::rep;
  using period = clk::period;
  using duration = clk::duration;
  using time_point = clk::time_point;
  std::shared_ptr<std::atomic<long long>> offset_ms = std::make_shared<std::atomic<long long>>(0);
  [[nodiscard]] time_point now() const {
    return clk::now() + std::chrono::milliseconds(*offset_ms);
  }
  void sleep_until(time_point t) const {
    std::this_thread::sleep_until(t - std::chrono::milliseconds(*offset_ms));
  }
};

// redis_store whose queued attempt lasts (by offset_clock) `round_trip`: the budget of an
// acquire runs out while its busy answer, which queued it, is on the way back.
struct slow_queue_store {
  redis_store& inner;
  offset_clock clock;
  std::chrono::milliseconds round_trip;
  holdfast::result<holdfast::grant> try_acquire(std::string_view k, std::string_view o,
                                                std::chrono::milliseconds t) {
    return inner.try_acquire(k, o, t);
  }
  holdfast::result<holdfast::grant> renew(std::string_view k, std::string_view o,
                                          holdfast::fencing_token tok,
                                          std::chrono::milliseconds t) {
    return inner.renew(k, o, tok, t);
  }
  holdfast::result<void> release(std::string_view k, std::string_view o,
                                 holdfast::fencing_token tok) {
    return inner.release(k, o, tok);
  }
  holdfast::result<void> wait_for_release(std::string_view k, const clk::time_point& deadline) {
    return inner.wait_for_release(k, deadline - std::chrono::milliseconds(*clock.offset_ms));
  }
  holdfast::result<holdfast::grant> try_acquire_queued(std::string_view k, std::string_view o,
                                                       std::chrono::milliseconds t) {
    holdfast::result<holdfast::grant> g = inner.try_acquire_queued(k, o, t);
    *clock.offset_ms += round_trip.count();
    return g;
  }
  holdfast::result<void> leave_queue(std::string_view k) { return inner.leave_queue(k); }
};

}  // namespace

// Timeline 3 of issue 22 (the kind of Redisson #1104): acquire() decides to queue before its
// attempt; the budget runs out during that round trip, so it returns timeout, but the busy answer
// had queued it. Before the fix its entry stayed: the next release handed the key to nobody and
// a live waiter behind it slept until the holder's expiry (3.0 s instead of ~0.3 s). Expected
// now: the timed-out caller leaves the queue (LLEN 0), and the live waiter behind it is woken by
// the release at once.
TEST_CASE("redis wait: a waiter whose budget ran out during its queued attempt leaves the queue",
          "[redis][wait_for_release]") {
  const std::optional<redis_options> o = server();
  if (!o) return;
  redis_store holder_store(*o);
  redis_store gone_store(*o);
  redis_store live_store(*o);
  auto holder = holdfast::try_acquire(holder_store, "h", 3s);
  REQUIRE(holder.has_value());
  slow_queue_store slow{gone_store, {}, 500ms};
  holdfast::acquire_options<offset_clock> so;
  so.clock = slow.clock;
  so.backoff.initial = 5s;
  so.backoff.max_delay = 5s;
  auto gone = holdfast::acquire(slow, "h", 3s, 200ms, so);
  CHECK(gone.error() == errc::timeout);
  CHECK(hf_test::redis_queued(*o, "h") ==
        0);  // left (was: 1, a place held by a caller that had gone)
  std::atomic<long long> after_release_ms{-1};
  std::atomic<bool> released{false};
  clk::time_point released_at{};
  std::thread live([&] {
    auto l = holdfast::acquire(live_store, "h", 3s, 20s, slow_polling());
    if (l && released.load()) {
      after_release_ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(clk::now() - released_at).count();
    }
  });
  REQUIRE(await_queued(*o, "h", 1));
  released_at = clk::now();
  released = true;
  REQUIRE(holder->release().has_value());
  live.join();
  REQUIRE(after_release_ms.load() >= 0);
  CHECK(after_release_ms.load() < 1500);  // woken by the release, not the 3 s expiry
}

// The same kind, cancelled: a waiter cancelled while it sleeps in the queue must take its place
// out too. acquire_retrying used to call leave_queue on its timeout path only; redis_store's own
// wait already dequeues a waiter that was not woken, so on Redis this held before too (etcd's
// queue place outlives a wait, and was left until its lease's TTL). Expected: cancelled within
// about a round trip, and LLEN 0.
TEST_CASE("redis wait: a waiter cancelled while queued leaves the queue",
          "[redis][wait_for_release][cancel]") {
  const std::optional<redis_options> o = server();
  if (!o) return;
  redis_store holder_store(*o);
  redis_store waiter_store(*o);
  auto holder = holdfast::try_acquire(holder_store, "cq", 3s);
  REQUIRE(holder.has_value());
  holdfast::cancel_source src;
  holdfast::acquire_options<> wo = slow_polling();
  wo.cancel = src.token();
  holdfast::result<holdfast::lease<redis_store>> got(errc::busy);
  std::thread waiter([&] { got = holdfast::acquire(waiter_store, "cq", 3s, 20s, wo); });
  REQUIRE(await_queued(*o, "cq", 1));
  const clk::time_point asked = clk::now();
  src.request_stop();
  waiter.join();
  CHECK(got.error() == errc::cancelled);
  CHECK(clk::now() - asked < 1s);               // within a round trip or so, not the 20 s budget
  CHECK(hf_test::redis_queued(*o, "cq") == 0);  // left (was: 1)
  REQUIRE(holder->release().has_value());
}

}  // namespace test_redis_wait
