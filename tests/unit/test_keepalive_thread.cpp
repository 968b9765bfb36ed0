// SPDX-License-Identifier: MIT
// keepalive.hpp, the thread: renewal on a manual clock synchronized through wait_for_sleepers(),
// loss reported while the holder works, release() serialized with a renewal in flight, and a
// prompt stop() on every kind of clock. Real threads, bounded waits only; run under TSan.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "holdfast/keepalive.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/stores/memory.hpp"
#include "lifecycle_support.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_keepalive_thread {

using namespace std::chrono_literals;
using holdfast::errc;
using holdfast::keepalive;
using holdfast::keepalive_options;
using holdfast::lease_state;
using holdfast::loss_cause;
using holdfast::manual_clock;
using lifecycle_test::eventually;
using lifecycle_test::injected_failure;

namespace {

using fixture = lifecycle_test::keepalive_fixture;

}  // namespace

TEST_CASE("the keepalive thread renews on a manual clock", "[keepalive][concurrency]") {
  fixture f;
  keepalive<manual_clock> ka(f.clock);
  auto l = f.take();
  REQUIRE(ka.add(l));
  for (int i = 1; i <= 5; ++i) {
    REQUIRE(f.clock.wait_for_sleepers(1, 20s));
    f.clock.advance(5s);
    // A sleeper stops counting once its deadline has passed, so this waits for the renewal.
    REQUIRE(f.clock.wait_for_sleepers(1, 20s));
    CHECK(f.store.renew_calls == i);
    CHECK(l.valid());
  }
  ka.stop();
  CHECK(f.store.renew_calls == 5);
}

TEST_CASE("the keepalive thread reports loss while the holder works", "[keepalive][concurrency]") {
  fixture f;
  keepalive<manual_clock> ka(f.clock);
  std::mutex mu;
  std::condition_variable cv;
  bool lost = false;
  auto o = f.opts();
  o.on_lost = [&](loss_cause c) {
    CHECK(c == loss_cause::renew_refused);
    std::lock_guard<std::mutex> lock(mu);
    lost = true;
    cv.notify_all();
  };
  auto l = holdfast::try_acquire(f.store, "orders", 10s, o);
  REQUIRE(l);
  REQUIRE(ka.add(*l));
  f.store.fail_renewals(errc::lease_lost);
  REQUIRE(f.clock.wait_for_sleepers(1, 20s));
  f.clock.advance(5s);
  {
    std::unique_lock<std::mutex> lock(mu);
    REQUIRE(cv.wait_for(lock, 20s, [&] { return lost; }));
  }
  CHECK_FALSE(l->valid());  // immediately, well before validity would have passed
  CHECK(f.clock.now() < l->valid_until());
}

TEST_CASE("release() waits for a renewal in flight, and none follows it",
          "[keepalive][concurrency]") {
  fixture f;
  keepalive<manual_clock> ka(f.clock);
  auto l = f.take();
  REQUIRE(ka.add(l));
  std::mutex mu;
  std::condition_variable cv;
  bool in_store = false, let_go = false;
  f.store.set_renew_hook(
      [&](auto, auto, auto, auto) -> std::optional<holdfast::result<holdfast::grant>> {
        std::unique_lock<std::mutex> lock(mu);
        in_store = true;
        cv.notify_all();
        cv.wait(lock, [&] { return let_go; });
        return std::nullopt;
      });
  REQUIRE(f.clock.wait_for_sleepers(1, 20s));
  f.clock.advance(5s);
  {
    std::unique_lock<std::mutex> lock(mu);
    REQUIRE(cv.wait_for(lock, 20s, [&] { return in_store; }));
  }
  std::atomic<bool> released{false};
  std::thread holder([&] {
    REQUIRE(l.release());
    released = true;
  });
  CHECK_FALSE(released.load());  // cannot overtake the renewal (it holds the lease's op mutex)
  {
    std::lock_guard<std::mutex> lock(mu);
    let_go = true;
    cv.notify_all();
  }
  holder.join();
  CHECK(released.load());
  CHECK(l.state() == lease_state::released);
  const int calls = f.store.renew_calls;
  for (int i = 0; i < 4; ++i) {
    REQUIRE(f.clock.wait_for_sleepers(1, 20s));
    f.clock.advance(5s);
  }
  REQUIRE(f.clock.wait_for_sleepers(1, 20s));
  CHECK(f.store.renew_calls == calls);
  CHECK_FALSE(f.inner.inspect("orders").value());
}

TEST_CASE("holder and keepalive renew one lease concurrently without a race",
          "[keepalive][concurrency]") {
  fixture f;
  keepalive<manual_clock> ka(f.clock);
  auto l = f.take();  // TTL 10 s: validity ~9.9 s even if nobody manages to renew
  REQUIRE(ka.add(l));
  std::atomic<bool> done{false};
  std::thread holder([&] {
    // Renews for as long as time moves, so its renewals overlap the keepalive's (due at 5 s).
    for (int i = 0; i < 200 || !done.load(); ++i) {
      (void)l.renew();
      (void)l.valid();
      (void)l.valid_until();
    }
  });
  // 6 s in all: past the keepalive's due time, short of the validity, so the outcome does not
  // depend on how the threads happen to be scheduled (only TSan judges the race itself).
  for (int i = 0; i < 20; ++i) {
    f.clock.advance(300ms);
    std::this_thread::yield();
  }
  done = true;
  holder.join();
  CHECK(l.state() == lease_state::held);
  ka.stop();
  CHECK(l.release());
}

TEST_CASE("stop() is prompt however far away the next renewal is", "[keepalive][concurrency]") {
  SECTION("manual clock that never moves") {
    fixture f;
    keepalive<manual_clock> ka(f.clock);
    auto l = f.take("orders", std::chrono::hours(24 * 365));
    REQUIRE(ka.add(l));
    REQUIRE(f.clock.wait_for_sleepers(1, 20s));
    ka.stop();  // would hang here if the thread slept on the clock uninterruptibly
    CHECK(f.store.renew_calls == 0);
  }
  SECTION("steady clock, renewal an hour away") {
    holdfast::memory_store<> store;
    keepalive<> ka;
    auto l = holdfast::try_acquire(store, "orders", std::chrono::hours(2));
    REQUIRE(l);
    REQUIRE(ka.add(*l));
    ka.stop();
    CHECK(l->state() == lease_state::held);
  }
  SECTION("a clock that is neither steady nor interruptible") {
    lifecycle_test::throwing_clock clock;  // a plain user clock: now() and sleep_until() only
    STATIC_REQUIRE_FALSE(holdfast::is_interruptible_clock_v<lifecycle_test::throwing_clock>);
    holdfast::memory_store<manual_clock> store(clock.base());
    holdfast::acquire_options<lifecycle_test::throwing_clock> o;
    o.clock = clock;
    keepalive_options ko;
    ko.poll_interval = 1ms;
    keepalive<lifecycle_test::throwing_clock> ka(clock, ko);
    auto l = holdfast::try_acquire(store, "orders", 10s, o);
    REQUIRE(l);
    REQUIRE(ka.add(*l));
    clock.base().advance(5s);
    REQUIRE(eventually([&] { return ka.stats().renewals == 1; }));
    clock.arm();  // the clock now throws on the keepalive thread: reported, never terminate
    REQUIRE(eventually([&] { return ka.last_error() == errc::caught_exception; }));
    ka.stop();
    clock.arm(false);
  }
  SECTION("no leases at all") {
    keepalive<manual_clock> ka;
    keepalive<> kb;
  }
}

TEST_CASE("remove(l) then add(l) while a poll is in flight schedules l once",
          "[keepalive][concurrency]") {
  // Review input: a poll() has taken leases a and b off the schedule (both due at 5 s) and is
  // renewing a; meanwhile another thread removes b and adds it again. Before, the poll then
  // renewed b and put it back beside the entry add() had made: b was renewed twice per interval
  // and size() said 3. Expected: size() 2 and one renewal of b per interval.
  fixture f;
  keepalive_options o;
  o.start_thread = false;
  keepalive<manual_clock> ka(f.clock, o);
  auto a = holdfast::try_acquire(f.store, "a", 10s, f.opts());
  auto b = holdfast::try_acquire(f.store, "b", 10s, f.opts());
  REQUIRE(a);
  REQUIRE(b);
  REQUIRE(ka.add(*a));
  REQUIRE(ka.add(*b));
  std::mutex mu;
  std::condition_variable cv;
  bool in_renewal = false, go_on = false;
  std::atomic<int> renewals_of_b{0};
  f.store.set_renew_hook([&](std::string_view key, auto, auto,
                             auto) -> std::optional<holdfast::result<holdfast::grant>> {
    if (key == "b") {
      ++renewals_of_b;
      return std::nullopt;
    }
    std::unique_lock<std::mutex> lock(mu);
    if (!go_on) {
      in_renewal = true;
      cv.notify_all();
      CHECK(cv.wait_for(lock, 10s, [&] { return go_on; }));
    }
    return std::nullopt;
  });
  f.clock.set(manual_clock::time_point(5s));
  std::thread poller([&] { (void)ka.poll(); });
  {
    std::unique_lock<std::mutex> lock(mu);
    REQUIRE(cv.wait_for(lock, 10s, [&] { return in_renewal; }));
  }
  ka.remove(*b);  // b is in the poll's batch, not yet renewed
  REQUIRE(ka.add(*b));
  {
    std::lock_guard<std::mutex> lock(mu);
    go_on = true;
  }
  cv.notify_all();
  poller.join();
  CHECK(ka.size() == 2);
  // One renewal of b per interval from here on: the in-flight entry did not come back.
  const int before = renewals_of_b.load();
  for (int i = 1; i <= 4; ++i) {
    f.clock.advance(5s);
    (void)ka.poll();
    CHECK(renewals_of_b.load() - before == i);
  }
  CHECK(ka.size() == 2);
  CHECK(a->valid());
  CHECK(b->valid());
}

TEST_CASE(
    "the keepalive thread wakes when its manual clock jumps back and reports "
    "clock_regressed",
    "[keepalive][concurrency]") {
  // Issue input (time at the edges, 2) with the thread: asleep until the renewal due at 10 s, it
  // used to sleep through a jump back of 100 s for 104 s more. Expected: the jump ends the sleep,
  // and on_lost(clock_regressed) comes without the clock moving any further.
  fixture f;
  manual_clock store_clock;
  fixture::mstore store(store_clock);
  keepalive<manual_clock> ka(f.clock);
  auto a = holdfast::try_acquire(store, "k", 10s, f.opts());
  REQUIRE(a);
  REQUIRE(ka.add(*a));
  REQUIRE(f.clock.wait_for_sleepers(1, 10s));
  f.clock.set(manual_clock::time_point(5s));
  store_clock.set(manual_clock::time_point(5s));
  REQUIRE(f.clock.wait_for_sleepers(1, 10s));  // renewed, asleep until 10 s
  CHECK(ka.stats().renewals == 1);
  f.clock.set(manual_clock::time_point(6s));
  REQUIRE(f.clock.wait_for_sleepers(1, 10s));
  f.clock.set(manual_clock::time_point(6s - 100s));
  CHECK(eventually([&] { return f.seen().size() == 1; }));
  REQUIRE(f.seen().size() == 1);
  CHECK(f.seen()[0] == loss_cause::clock_regressed);
  CHECK(ka.stats().regressions == 1);
  // The keepalive calls on_lost, then drops the lease (keepalive.hpp's table: "callback,
  // drop"), so the drop may come just after the callback is seen.
  CHECK(eventually([&] { return ka.size() == 0; }));
}

}  // namespace test_keepalive_thread
