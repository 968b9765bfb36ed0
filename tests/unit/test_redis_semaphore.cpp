// SPDX-License-Identifier: MIT
// tests/unit/test_redis_semaphore.cpp - semaphore.hpp on redis_store (issue 22 part 5): a waiter
// sleeps until a release of *any* slot (redis_store::wait_for_release_any: one script queues it
// behind every slot, the first release's PUBLISH wakes it, one script takes it out of the other
// queues) and then asks the released slot alone; a lost notification costs at most the wait until
// the earliest holder's expiry; a stop ends the wait and leaves every queue; a permit renews
// itself past its TTL by default. Real server (HOLDFAST_REDIS_PORT from .ci/servers), real
// threads, bounded waits. Costs about 2.5 s (the expiry and renewal cases wait for real).
#include <hiredis/hiredis.h>
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "../support/real_servers.hpp"
#include "../support/redis_servers.hpp"
#include "holdfast/cancel.hpp"
#include "holdfast/semaphore.hpp"
#include "holdfast/stores/redis.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_redis_semaphore {

using namespace std::chrono_literals;
using holdfast::errc;
using holdfast::redis_options;
using holdfast::redis_store;
using clk = std::chrono::steady_clock;

namespace {

std::optional<redis_options> server() {
  return hf_test::shared_redis_options("hfs");
}

// Waits (bounded) until every one of `keys` has `n` waiters queued.
bool await_queued(const redis_options& o, const std::vector<std::string>& keys, long long n) {
  const auto limit = clk::now() + 10s;
  while (clk::now() < limit) {
    bool all = true;
    for (const std::string& k : keys) all = all && hf_test::redis_queued(o, k) == n;
    if (all) return true;
    std::this_thread::sleep_for(1ms);
  }
  return false;
}

// A redis_store seen through a forwarder that counts the semaphore's calls (a wait for any slot
// is one call of two script requests: queue, leave).
struct counted {
  redis_store* s;
  std::atomic<int> acquires{0};
  std::atomic<int> waits{0};
  std::mutex mu;
  std::vector<std::string> asked;
  explicit counted(redis_store* store) : s(store) {}
  holdfast::result<holdfast::grant> try_acquire(std::string_view k, std::string_view o,
                                                std::chrono::milliseconds t) {
    ++acquires;
    {
      std::lock_guard<std::mutex> lock(mu);
      asked.emplace_back(k);
    }
    return s->try_acquire(k, o, t);
  }
  holdfast::result<holdfast::grant> renew(std::string_view k, std::string_view o,
                                          holdfast::fencing_token tok,
                                          std::chrono::milliseconds t) {
    return s->renew(k, o, tok, t);
  }
  holdfast::result<void> release(std::string_view k, std::string_view o,
                                 holdfast::fencing_token tok) {
    return s->release(k, o, tok);
  }
  holdfast::result<std::size_t> wait_for_release_any(const std::vector<std::string>& keys,
                                                     const clk::time_point& d,
                                                     const holdfast::cancel_token& c) {
    ++waits;
    return s->wait_for_release_any(keys, d, c);
  }
};

holdfast::semaphore_options<> slow_polling() {
  holdfast::semaphore_options<> o;
  o.acquire.backoff.initial = 1h;  // a polling pass would not come within the test's bounds
  o.acquire.backoff.max_delay = 1h;
  return o;
}

}  // namespace

// Before: the waiter slept on its own first slot only, bounded by its backoff, so a release of
// another slot reached it only at the next rescan (here: an hour). Expected now, N = 3, every
// slot held, a slot other than the waiter's first released: granted that slot, 4 acquires (its
// first pass of 3 + the released slot alone), 1 wait, every queue empty afterwards.
TEST_CASE("redis semaphore: a release of any slot wakes the waiter, which asks that slot alone",
          "[redis][semaphore][wait_for_release]") {
  const std::optional<redis_options> o = server();
  if (!o) return;
  redis_store holder_store(*o);
  redis_store inner(*o);
  counted waiter_store(&inner);
  holdfast::semaphore<counted> pool(waiter_store, "p", 3, 30s, slow_polling());
  REQUIRE_FALSE(pool.error());
  std::vector<std::string> keys;
  std::vector<holdfast::grant> held;
  for (std::uint32_t i = 0; i < 3; ++i) {
    keys.push_back(pool.slot_key(i));
    held.push_back(holder_store.try_acquire(keys.back(), "holder", 30s).value());
  }
  holdfast::result<decltype(pool)::permit> got = errc::busy;
  std::thread waiter([&] { got = pool.acquire(20s); });
  REQUIRE(await_queued(*o, keys, 1));
  std::string first;
  {
    std::lock_guard<std::mutex> lock(waiter_store.mu);
    REQUIRE(waiter_store.asked.size() == 3);
    first = waiter_store.asked.front();
  }
  const std::uint32_t freed = first == keys[1] ? 2 : 1;
  const auto released_at = clk::now();
  REQUIRE(holder_store.release(keys[freed], "holder", held[freed].token).has_value());
  waiter.join();
  REQUIRE(got.has_value());
  CHECK(got->key() == keys[freed]);
  CHECK(clk::now() - released_at < 5s);  // far below the hour of backoff; bounded for CI
  CHECK(waiter_store.acquires == 4);
  CHECK(waiter_store.waits == 1);
  for (const std::string& k : keys) CHECK(hf_test::redis_queued(*o, k) == 0);
  CHECK(got->release().has_value());
}

// A notification that never comes (a holder whose lease simply expires, announced by nobody)
// costs the wait until the earliest holder's expiry among the slots, never more: slot 1's holder
// has 1.2 s, the others 30 s; the waiter is granted slot 1 after about 1.2 s, not at its 20 s
// deadline nor at the hour of backoff.
TEST_CASE("redis semaphore: an unannounced expiry wakes the waiter at the earliest holder's expiry",
          "[redis][semaphore][wait_for_release]") {
  const std::optional<redis_options> o = server();
  if (!o) return;
  redis_store holder_store(*o);
  redis_store waiter_store(*o);
  holdfast::semaphore<redis_store> pool(waiter_store, "e", 3, 30s, slow_polling());
  std::vector<std::string> keys;
  for (std::uint32_t i = 0; i < 3; ++i) {
    keys.push_back(pool.slot_key(i));
    REQUIRE(holder_store.try_acquire(keys.back(), "dead", i == 1 ? 1200ms : 30s).has_value());
  }
  const auto start = clk::now();
  auto got = pool.acquire(20s);
  const auto waited = clk::now() - start;
  REQUIRE(got.has_value());
  CHECK(got->key() == keys[1]);
  CHECK(waited >= 1100ms);
  CHECK(waited < 8s);
  for (const std::string& k : keys) CHECK(hf_test::redis_queued(*o, k) == 0);
}

// A stop of acquire.cancel ends the wait at once (its wake-up) with errc::cancelled, and the
// waiter leaves every queue it joined.
TEST_CASE("redis semaphore: a stop ends the wait and leaves every queue",
          "[redis][semaphore][cancel]") {
  const std::optional<redis_options> o = server();
  if (!o) return;
  redis_store holder_store(*o);
  redis_store waiter_store(*o);
  holdfast::cancel_source src;
  holdfast::semaphore_options<> so = slow_polling();
  so.acquire.cancel = src.token();
  holdfast::semaphore<redis_store> pool(waiter_store, "c", 2, 30s, so);
  std::vector<std::string> keys;
  for (std::uint32_t i = 0; i < 2; ++i) {
    keys.push_back(pool.slot_key(i));
    REQUIRE(holder_store.try_acquire(keys.back(), "holder", 30s).has_value());
  }
  holdfast::result<decltype(pool)::permit> got = errc::busy;
  std::thread waiter([&] { got = pool.acquire(20s); });
  REQUIRE(await_queued(*o, keys, 1));
  const auto stopped_at = clk::now();
  src.request_stop();
  waiter.join();
  CHECK(got.error() == errc::cancelled);
  CHECK(clk::now() - stopped_at < 2s);  // at once; bounded for CI
  for (const std::string& k : keys) CHECK(hf_test::redis_queued(*o, k) == 0);
}

// The default renewal on a real store: a 400 ms permit still held, with its token, after 1 s.
TEST_CASE("redis semaphore: a permit outlives its TTL by default", "[redis][semaphore]") {
  const std::optional<redis_options> o = server();
  if (!o) return;
  redis_store store(*o);
  holdfast::semaphore<redis_store> pool(store, "r", 1, 400ms);
  auto p = pool.try_acquire();
  REQUIRE(p.has_value());
  std::this_thread::sleep_for(1s);
  CHECK(p->valid());
  auto rec = store.inspect(p->key());
  REQUIRE(rec.has_value());
  REQUIRE(rec->has_value());
  CHECK((*rec)->token == p->token());
  CHECK(p->release().has_value());
}

}  // namespace test_redis_semaphore
