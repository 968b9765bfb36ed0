// tests/unit/test_semaphore.cpp - semaphore.hpp: N permits, each a lease with its own token and
// its own expiry; try/blocking acquire, release, free count, bad input. Manual time only.
#include <catch2/catch.hpp>

#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "holdfast/semaphore.hpp"
#include "holdfast/stores/memory.hpp"
#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using holdfast::errc;
using holdfast::manual_clock;
using holdfast_test::jump_clock;

template <class Clock>
holdfast::semaphore_options<Clock> options(Clock clock) {
  holdfast::semaphore_options<Clock> o;
  o.acquire.clock = clock;
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
  holdfast::semaphore_options<jump_clock> o;
  o.acquire.clock = clock;
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
