// SPDX-License-Identifier: MIT
// tests/unit/test_semaphore.cpp - semaphore.hpp: N permits, each a lease with its own token and
// its own expiry; try/blocking acquire, release, free count, bad input. Manual time only.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "holdfast/semaphore.hpp"
#include "holdfast/stores/memory.hpp"
#include "test_support.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_semaphore {

namespace {

using namespace std::chrono_literals;
using holdfast::errc;
using holdfast::manual_clock;
using holdfast_test::jump_clock;

// Options on `clock`. `renew` false: these tests move time by hand to see permits expire, and a
// permit renews itself by default (tested on its own below).
template <class Clock>
holdfast::semaphore_options<Clock> options(Clock clock, bool renew = false) {
  holdfast::semaphore_options<Clock> o;
  o.acquire.clock = clock;
  o.renew = renew;
  return o;
}

}  // namespace

TEST_CASE("semaphore: N permits, each its own lease and token; the N+1st is busy", "[semaphore]") {
  manual_clock clock;
  holdfast::memory_store<manual_clock> store(clock);
  holdfast::semaphore<holdfast::memory_store<manual_clock>, manual_clock> pool(store, "gpu", 3, 1s,
                                                                               options(clock));
  REQUIRE_FALSE(pool.error());
  CHECK(pool.available().value() == 3u);
  using permit = decltype(pool)::permit;
  std::vector<permit> held;
  std::set<std::string> keys;
  for (int i = 0; i < 3; ++i) {
    auto p = pool.try_acquire();
    REQUIRE(p.has_value());
    CHECK(p->valid());
    keys.insert(p->key());
    if (!held.empty()) CHECK(p->token() > held.back().token());
    held.push_back(std::move(*p));
  }
  CHECK(keys == std::set<std::string>{"gpu#0", "gpu#1", "gpu#2"});
  CHECK(pool.available().value() == 0u);
  CHECK(pool.try_acquire().error() == errc::busy);

  REQUIRE(held[1].release().has_value());
  CHECK(pool.available().value() == 1u);
  auto again = pool.try_acquire();
  REQUIRE(again.has_value());
  CHECK(again->key() == held[1].key());
  CHECK(again->token() > held[2].token());
  CHECK(pool.try_acquire().error() == errc::busy);
}

TEST_CASE("semaphore: a dead holder's permit expires on its own; the others are untouched",
          "[semaphore]") {
  manual_clock clock;
  holdfast_test::scripted_store store(clock);
  holdfast::semaphore<holdfast_test::scripted_store, manual_clock> pool(store, "jobs", 2, 1000ms,
                                                                        options(clock));
  std::string first_key;
  holdfast::fencing_token first_token;
  {
    auto first = pool.try_acquire();
    REQUIRE(first.has_value());
    first_key = first->key();
    first_token = first->token();
    // The holder dies: its release never reaches the store.
    store.on_release = [](std::string_view, std::string_view, holdfast::fencing_token) {
      return holdfast::result<void>(errc::store_unavailable);
    };
  }
  store.on_release = nullptr;

  clock.advance(500ms);
  auto second = pool.try_acquire();
  REQUIRE(second.has_value());
  CHECK(pool.try_acquire().error() == errc::busy);

  clock.advance(500ms - 1ns);  // one tick before the first permit's expiry: still full
  CHECK(pool.try_acquire().error() == errc::busy);
  clock.advance(1ns);  // at its expiry (store clock): that slot alone is free
  CHECK(second->valid());
  auto third = pool.try_acquire();
  REQUIRE(third.has_value());
  CHECK(third->key() == first_key);
  CHECK(third->token() > first_token);
  CHECK(third->token() > second->token());
  CHECK(second->renew().has_value());  // the survivor renews as any lease does
}

TEST_CASE("semaphore: blocking acquire waits for a permit, or times out", "[semaphore]") {
  jump_clock clock;
  holdfast::memory_store<manual_clock> store(clock.manual());
  holdfast::semaphore_options<jump_clock> o = options(clock);
  o.acquire.backoff.initial = 10ms;
  o.acquire.backoff.max_delay = 100ms;
  o.acquire.backoff.seed = 7;
  holdfast::semaphore<holdfast::memory_store<manual_clock>, jump_clock> pool(store, "p", 1, 1s, o);
  auto holder = pool.acquire(0s);
  REQUIRE(holder.has_value());
  // 300 ms of waiting while the permit lives until 1 s: timeout, at the deadline.
  auto late = pool.acquire(300ms);
  CHECK(late.error() == errc::timeout);
  CHECK(clock.manual().now().time_since_epoch() == 300ms);
  // Waiting long enough: the holder's permit expires at 1 s and the waiter gets it.
  auto got = pool.acquire(5s);
  REQUIRE(got.has_value());
  CHECK(clock.manual().now().time_since_epoch() >= 1s);
  CHECK(clock.manual().now().time_since_epoch() <= 1100ms);
  CHECK(got->token() > holder->token());
}

TEST_CASE("semaphore: a failing slot is reported, not mistaken for a full pool", "[semaphore]") {
  manual_clock clock;
  holdfast_test::scripted_store store(clock);
  holdfast::semaphore<holdfast_test::scripted_store, manual_clock> pool(store, "s", 2, 1s,
                                                                        options(clock));
  store.on_acquire = [&](std::string_view key, std::string_view owner,
                         holdfast_test::ms ttl) -> holdfast::result<holdfast::grant> {
    if (key == "s#0") return errc::store_unavailable;
    return store.inner.try_acquire(key, owner, ttl);
  };
  auto p = pool.try_acquire();
  REQUIRE(p.has_value());  // slot 1 still works
  CHECK(p->key() == "s#1");
  CHECK(pool.try_acquire().error() == errc::store_unavailable);  // slot 1 busy, slot 0 failing
  store.on_acquire = [](std::string_view, std::string_view,
                        holdfast_test::ms) -> holdfast::result<holdfast::grant> {
    return errc::protocol_error;
  };
  const int before = store.acquires;
  CHECK(pool.try_acquire().error() == errc::protocol_error);
  CHECK(store.acquires == before + 1);  // not transient: the pass ends at once
}

TEST_CASE("semaphore: bad arguments are reported and nothing reaches the store", "[semaphore]") {
  manual_clock clock;
  holdfast_test::scripted_store store(clock);
  using sem = holdfast::semaphore<holdfast_test::scripted_store, manual_clock>;
  CHECK(sem(store, "", 1, 1s, options(clock)).try_acquire().error() == errc::invalid_argument);
  CHECK(sem(store, "x", 0, 1s, options(clock)).error() == errc::invalid_argument);
  CHECK(sem(store, "x", holdfast::max_permits + 1, 1s, options(clock)).error() ==
        errc::invalid_argument);
  CHECK(sem(store, "x", 1, 0s, options(clock)).acquire(1s).error() == errc::invalid_argument);
  CHECK(sem(store, "x", 1, 2ms, options(clock)).error() == errc::invalid_argument);
  auto o = options(clock);
  o.unique_owner = false;  // then acquire.owner must be given
  CHECK(sem(store, "x", 1, 1s, o).error() == errc::invalid_argument);
  o.acquire.owner = "worker-3";
  sem exact(store, "x", 2, 1s, o);
  auto p = exact.try_acquire();
  REQUIRE(p.has_value());
  CHECK(p->owner() == "worker-3");
  CHECK(store.acquires == 1);
}

TEST_CASE("semaphore: blocking acquire on memory_store waits for a release, not a backoff",
          "[semaphore][concurrency]") {
  holdfast::memory_store<> store;
  holdfast::semaphore_options<> o;
  o.acquire.backoff.initial = 5s;  // a polling pass would sleep for seconds
  o.acquire.backoff.max_delay = 5s;
  holdfast::semaphore<holdfast::memory_store<>> pool(store, "p", 1, 60s, o);
  auto holder = pool.try_acquire();
  REQUIRE(holder.has_value());
  std::thread t([&] {
    const auto limit = std::chrono::steady_clock::now() + 20s;
    while (store.waiting() < 1 && std::chrono::steady_clock::now() < limit) {
      std::this_thread::yield();
    }
    (void)holder->release();
  });
  const auto start = std::chrono::steady_clock::now();
  auto got = pool.acquire(20s);
  t.join();
  REQUIRE(got.has_value());
  CHECK(std::chrono::steady_clock::now() - start < 4s);
}

// Timeline 1 of issue 22 (the kind of Curator #835): N = 2, the acquirer's start slot is busy, the
// other slot grants but its reply is lost (a transient timeout), so pass 1 fails. The holder of
// the start slot then releases. Before the fix pass 2 took the start slot and the first grant
// (same owner, a token the caller never saw) stayed held and unrenewed for its TTL: one permit in
// use, none free. Expected now: the same owner asks the slot whose reply was lost once more and
// gets that very grant back (the other slot, the token the lost reply carried, one request
// more); the start slot stays free for others.
TEST_CASE("semaphore: a retry after a lost reply gets its own grant back, no orphaned slot",
          "[semaphore]") {
  jump_clock clock;
  holdfast_test::scripted_store store(clock.manual());
  holdfast::semaphore_options<jump_clock> o = options(clock);
  o.acquire.owner = "w";
  o.unique_owner = false;  // a fixed owner: the start slot is the one "w" hashes to
  o.acquire.backoff.initial = 10ms;
  o.acquire.backoff.max_delay = 10ms;
  holdfast::semaphore<holdfast_test::scripted_store, jump_clock> pool(store, "s", 2, 1s, o);
  REQUIRE_FALSE(pool.error());
  // Whichever slot "w" starts at, the other one is where the reply gets lost.
  std::string start_key;
  {
    auto probe = pool.try_acquire();
    REQUIRE(probe.has_value());
    start_key = probe->key();
    REQUIRE(probe->release().has_value());
  }
  const std::string other_key = start_key == "s#0" ? "s#1" : "s#0";
  auto held = store.inner.try_acquire(start_key, "other", 1s);
  REQUIRE(held.has_value());
  holdfast::fencing_token lost_token{};
  int lost = 0;
  store.on_acquire = [&](std::string_view key, std::string_view owner,
                         holdfast_test::ms ttl) -> holdfast::result<holdfast::grant> {
    auto g = store.inner.try_acquire(key, owner, ttl);
    if (key == other_key && lost == 0 && g) {
      ++lost;  // applied at the store, the reply lost
      lost_token = g->token;
      REQUIRE(store.inner.release(start_key, "other", held->token).has_value());
      return errc::timeout;
    }
    return g;
  };
  auto p = pool.acquire(500ms);
  REQUIRE(p.has_value());
  CHECK(lost == 1);
  CHECK(p->key() == other_key);  // its own grant back, not a second slot
  CHECK(p->token() == lost_token);
  CHECK_FALSE(holdfast_test::record_of(store.inner, start_key).has_value());  // s#start free
  auto other = store.inner.try_acquire(start_key, "someone", 1s);
  CHECK(other.has_value());
}

// The same lost reply, and the same owner's second ask (try_acquire asks once more after a
// transient error) fails before reaching the store: the try ends without a permit. Expected:
// store_unavailable (the last answer), and the slot whose reply was lost asked a third time and
// released, so the failed try leaves nothing behind (3 acquires of s#1, 1 release, s#1 free).
TEST_CASE("semaphore: a failed try gives back the slot whose reply was lost", "[semaphore]") {
  manual_clock clock;
  holdfast_test::scripted_store store(clock);
  holdfast::semaphore_options<manual_clock> o;
  o.acquire.clock = clock;
  holdfast::semaphore<holdfast_test::scripted_store, manual_clock> pool(store, "s", 2, 1s, o);
  REQUIRE(store.inner.try_acquire("s#0", "other", 1s).has_value());
  int calls = 0;
  store.on_acquire = [&](std::string_view key, std::string_view owner,
                         holdfast_test::ms ttl) -> holdfast::result<holdfast::grant> {
    if (key != "s#1") return store.inner.try_acquire(key, owner, ttl);
    ++calls;
    if (calls == 2) return errc::store_unavailable;  // not applied
    auto g = store.inner.try_acquire(key, owner, ttl);
    if (calls == 1 && g) return errc::timeout;  // applied, the reply lost
    return g;
  };
  auto p = pool.try_acquire();
  CHECK(p.error() == errc::store_unavailable);
  CHECK(calls == 3);
  CHECK(store.releases == 1);
  CHECK_FALSE(holdfast_test::record_of(store.inner, "s#1").has_value());
}

// A steady-clock memory_store seen through a forwarder that counts every call, and offers the
// store's wait for any of several keys (what semaphore::acquire() uses on memory_store).
struct counted_store {
  explicit counted_store(holdfast::memory_store<>* store) : s(store) {}
  holdfast::memory_store<>* s;
  std::atomic<int> acquires{0};
  std::atomic<int> renews{0};
  std::atomic<int> releases{0};
  std::atomic<int> waits{0};
  std::mutex mu;
  std::vector<std::string> asked;  // every key try_acquire was asked, in order
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
    ++renews;
    return s->renew(k, o, tok, t);
  }
  holdfast::result<void> release(std::string_view k, std::string_view o,
                                 holdfast::fencing_token tok) {
    ++releases;
    return s->release(k, o, tok);
  }
  holdfast::result<std::size_t> wait_for_release_any(const std::vector<std::string>& keys,
                                                     const std::chrono::steady_clock::time_point& d,
                                                     const holdfast::cancel_token& c) {
    ++waits;
    return s->wait_for_release_any(keys, d, c);
  }
};

// Part 5 of issue 22: before, a waiter slept on its own first slot only, bounded by the backoff,
// and rescanned every slot after each pause (3 waiters over 6 s sent 172 acquire scripts). Now a
// release of *any* slot wakes it, and it asks that slot alone. Expected for N = 3, every slot
// held by others, the waiter asleep, then a slot other than its first released: 3 acquires (its
// first pass) + 1 (the released slot) = 4, one wait, granted the released slot. The backoff is an
// hour, so any polling pass would not end within the test's bound. Real threads, bounded waits.
TEST_CASE("semaphore: a release of any slot wakes a waiter, which asks that slot alone",
          "[semaphore][concurrency]") {
  holdfast::memory_store<> inner;
  counted_store store(&inner);
  holdfast::semaphore_options<> o;
  o.acquire.backoff.initial = 1h;
  o.acquire.backoff.max_delay = 1h;
  holdfast::semaphore<counted_store> pool(store, "p", 3, 60s, o);
  REQUIRE_FALSE(pool.error());
  std::vector<holdfast::grant> held;
  for (std::uint32_t i = 0; i < 3; ++i)
    held.push_back(inner.try_acquire(pool.slot_key(i), "other", 60s).value());
  holdfast::result<decltype(pool)::permit> got = errc::busy;
  std::thread waiter([&] { got = pool.acquire(20s); });
  const auto limit = std::chrono::steady_clock::now() + 20s;
  while (inner.waiting() < 3 && std::chrono::steady_clock::now() < limit) std::this_thread::yield();
  REQUIRE(inner.waiting() == 3);  // one place in each slot's queue
  std::string first;
  {
    std::lock_guard<std::mutex> lock(store.mu);
    REQUIRE(store.asked.size() == 3);
    first = store.asked.front();
  }
  const std::uint32_t freed = first == pool.slot_key(1) ? 2 : 1;  // not the waiter's first slot
  REQUIRE(inner.release(pool.slot_key(freed), "other", held[freed].token).has_value());
  waiter.join();
  REQUIRE(got.has_value());
  CHECK(got->key() == pool.slot_key(freed));
  CHECK(store.acquires == 4);
  CHECK(store.waits == 1);
  CHECK(store.asked.back() == pool.slot_key(freed));
  CHECK(inner.waiting() == 0);  // it left the other two queues
  CHECK(got->release().has_value());
}

// The default (issue 22 part 5): a permit keeps itself alive, as a lease added to a keepalive,
// with a keepalive of the semaphore's own (started at its first grant). TTL 1 s; time moved by
// hand to 3 s, three TTLs: the permit is still valid and still the store's holder, the pool still
// full. With renew = false the same permit is gone at 1 s (the TTL alone).
TEST_CASE("semaphore: a permit outlives its TTL by default; renew = false lasts one TTL",
          "[semaphore][keepalive]") {
  manual_clock clock;
  holdfast::memory_store<manual_clock> store(clock);
  using sem = holdfast::semaphore<holdfast::memory_store<manual_clock>, manual_clock>;
  SECTION("renewed by default") {
    sem pool(store, "r", 1, 1s, options(clock, true));
    auto p = pool.try_acquire();
    REQUIRE(p.has_value());
    REQUIRE(clock.wait_for_sleepers(1, 10s));  // the semaphore's keepalive, due at 500 ms
    for (int i = 0; i < 6; ++i) {
      clock.advance(500ms);
      REQUIRE(clock.wait_for_sleepers(1, 10s));  // renewed, asleep until the next renewal
    }
    CHECK(p->valid());
    CHECK(store.inspect("r#0").value().value().token == p->token());
    CHECK(pool.try_acquire().error() == errc::busy);
    CHECK(p->release().has_value());
  }
  SECTION("renew = false: one TTL") {
    sem pool(store, "r", 1, 1s, options(clock, false));
    auto p = pool.try_acquire();
    REQUIRE(p.has_value());
    clock.advance(1s - 1ns);
    CHECK(pool.try_acquire().error() == errc::busy);
    clock.advance(1ns);
    CHECK_FALSE(p->valid());
    CHECK(pool.try_acquire().has_value());
  }
  SECTION("a given keepalive renews as before (the semaphore starts none)") {
    holdfast::keepalive<manual_clock> ka(clock);
    auto o = options(clock, true);
    o.keepalive = &ka;
    sem pool(store, "r", 1, 1s, o);
    auto p = pool.try_acquire();
    REQUIRE(p.has_value());
    REQUIRE(clock.wait_for_sleepers(1, 10s));
    clock.advance(500ms);
    REQUIRE(clock.wait_for_sleepers(1, 10s));
    CHECK(ka.stats().renewals == 1);
    CHECK(clock.sleepers() == 1);  // only the given keepalive sleeps on the clock
  }
}

// A renewal the store refuses turns the permit lost and tells acquire.on_lost, as for any lease
// in a keepalive: the default renewal reports loss like a lease's.
TEST_CASE("semaphore: a permit whose renewal is refused is lost, told through on_lost",
          "[semaphore][keepalive]") {
  manual_clock clock;
  holdfast_test::scripted_store store(clock);
  auto o = options(clock, true);
  std::atomic<int> lost{0};
  std::atomic<holdfast::loss_cause> why{holdfast::loss_cause::none};
  o.acquire.on_lost = [&](holdfast::loss_cause c) {
    why = c;
    ++lost;
  };
  holdfast::semaphore<holdfast_test::scripted_store, manual_clock> pool(store, "r", 1, 1s, o);
  auto p = pool.try_acquire();
  REQUIRE(p.has_value());
  store.on_renew = [](std::string_view, std::string_view, holdfast::fencing_token,
                      holdfast_test::ms) -> holdfast::result<holdfast::grant> {
    return errc::lease_lost;
  };
  REQUIRE(clock.wait_for_sleepers(1, 10s));
  clock.advance(500ms);
  const auto limit = std::chrono::steady_clock::now() + 10s;
  while (lost == 0 && std::chrono::steady_clock::now() < limit) std::this_thread::yield();
  CHECK(lost == 1);
  CHECK(why == holdfast::loss_cause::renew_refused);
  CHECK(store.renews == 1);
  CHECK_FALSE(p->valid());
}

}  // namespace test_semaphore
