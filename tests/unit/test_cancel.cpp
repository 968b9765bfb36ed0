// SPDX-License-Identifier: MIT
// Tests of cancel.hpp and of what blocking acquire() does with it and with permanent errors:
// cancel_source/cancel_token, a cancelled acquire holding nothing (before, during and after the
// round trip that grants), the interruptible sleep on manual_clock and steady_clock, a permanent
// store error answered after one attempt, and the last store cause kept beside a timeout
// (acquire_report). All on manual_clock and a scripted store, except one real-thread test
// ([concurrency], for TSan) that cancels a waiting acquire from another thread; the semaphore's
// and the election's blocking calls too.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "holdfast/cancel.hpp"
#include "holdfast/election.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/semaphore.hpp"
#include "holdfast/stores/memory.hpp"
#include "test_support.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_cancel {

using holdfast::errc;
using holdfast::manual_clock;
using holdfast_test::scripted_store;
using namespace std::chrono_literals;

namespace {

// A scripted store that also keeps a server-like text of its last failure.
struct talking_store : scripted_store {
  using scripted_store::scripted_store;
  std::string said;
  [[nodiscard]] std::string last_error_message() const { return said; }
};

}  // namespace

TEST_CASE("cancel_source: a token says when its source asked to stop; a default token never does",
          "[cancel]") {
  holdfast::cancel_token none;
  CHECK_FALSE(none.stop_possible());
  CHECK_FALSE(none.stop_requested());
  holdfast::cancel_source src;
  holdfast::cancel_token t = src.token();
  CHECK(t.stop_possible());
  CHECK_FALSE(t.stop_requested());
  int woken = 0;
  {
    holdfast::cancel_token::waker w;
    t.on_stop(w, [&] { ++woken; });
    CHECK(src.request_stop());
    CHECK_FALSE(src.request_stop());  // once
  }
  CHECK(woken == 1);
  CHECK(t.stop_requested());
  holdfast::cancel_token::waker late;
  t.on_stop(late, [&] { ++woken; });  // already stopped: runs at once
  CHECK(woken == 2);
  {
    holdfast::cancel_source other;
    holdfast::cancel_token::waker gone;
    other.token().on_stop(gone, [&] { ++woken; });
  }  // the waker unregistered before its source asked: never runs
  CHECK(woken == 2);
}

#if HOLDFAST_HAS_STOP_TOKEN
TEST_CASE("cancel_token adopts a C++20 std::stop_token", "[cancel]") {
  std::stop_source s;
  holdfast::acquire_options<manual_clock> o;
  o.cancel = s.get_token();
  int woken = 0;
  holdfast::cancel_token::waker w;
  o.cancel.on_stop(w, [&] { ++woken; });
  CHECK_FALSE(o.cancel.stop_requested());
  s.request_stop();
  CHECK(o.cancel.stop_requested());
  CHECK(woken == 1);
}
#endif

TEST_CASE("acquire: a cancelled token answers cancelled before any store call, holding nothing",
          "[cancel]") {
  manual_clock clock;
  scripted_store store(clock);
  holdfast::cancel_source src;
  src.request_stop();
  holdfast::acquire_report report;
  holdfast::acquire_options<manual_clock> o;
  o.clock = clock;
  o.cancel = src.token();
  o.report = &report;
  auto l = holdfast::acquire(store, "k", 1s, 1h, o);
  CHECK(l.error() == errc::cancelled);
  CHECK(store.acquires == 0);
  CHECK(report.attempts == 0);
}

TEST_CASE(
    "acquire: cancelled during a busy round trip, it returns after that trip and holds nothing",
    "[cancel]") {
  manual_clock clock;
  scripted_store store(clock);
  REQUIRE(store.inner.try_acquire("k", "holder", 10000ms));
  holdfast::cancel_source src;
  // The third attempt's round trip sees the stop requested (another thread, in real life).
  store.on_acquire = [&](std::string_view key, std::string_view owner,
                         std::chrono::milliseconds t) {
    if (store.acquires == 3) src.request_stop();
    return store.inner.try_acquire(key, owner, t);
  };
  // Attempts 1 and 2 are followed by backoff sleeps: another thread moves time.
  std::atomic<bool> done{false};
  std::thread mover([&] {
    while (!done.load()) {
      if (clock.wait_for_sleepers(1, 10ms)) clock.advance(2s);
    }
  });
  holdfast::acquire_options<manual_clock> o;
  o.clock = clock;
  o.cancel = src.token();
  auto l = holdfast::acquire(store, "k", 1s, 1h, o);
  done = true;
  mover.join();
  CHECK(l.error() == errc::cancelled);
  CHECK(store.acquires == 3);  // not one more round trip
  CHECK(store.inner.inspect("k").value()->owner == "holder");
}

TEST_CASE("acquire: a grant whose round trip saw the stop is given back: cancelled, nothing held",
          "[cancel]") {
  manual_clock clock;
  scripted_store store(clock);
  holdfast::cancel_source src;
  store.on_acquire = [&](std::string_view key, std::string_view owner,
                         std::chrono::milliseconds t) {
    src.request_stop();  // arrives while the grant is on its way back
    return store.inner.try_acquire(key, owner, t);
  };
  holdfast::acquire_options<manual_clock> o;
  o.clock = clock;
  o.cancel = src.token();
  auto l = holdfast::acquire(store, "k", 1s, 1h, o);
  CHECK(l.error() == errc::cancelled);
  CHECK(store.acquires == 1);
  CHECK(store.releases == 1);
  CHECK_FALSE(store.inner.inspect("k").value().has_value());
}

TEST_CASE("acquire: a permanent store error is answered after one attempt, with the store's text",
          "[cancel][errors]") {
  manual_clock clock;
  talking_store store(clock);
  for (errc e : {errc::permission_denied, errc::misconfigured}) {
    store.acquires = 0;
    store.said = "WRONGPASS invalid username-password pair";
    store.on_acquire = [&](std::string_view, std::string_view, std::chrono::milliseconds) {
      return holdfast::result<holdfast::grant>(e);
    };
    holdfast::acquire_report report;
    holdfast::acquire_options<manual_clock> o;
    o.clock = clock;
    o.report = &report;
    auto l = holdfast::acquire(store, "k", 1s, 5min, o);  // no other thread: a retry would hang
    CHECK(l.error() == e);
    CHECK(store.acquires == 1);
    CHECK(report.attempts == 1);
    CHECK(report.last_store_error == e);
    CHECK(report.last_store_message == store.said);
  }
}

TEST_CASE("acquire: a timeout after store errors keeps the last store cause in the report",
          "[cancel][errors]") {
  manual_clock clock;
  talking_store store(clock);
  store.on_acquire = [&](std::string_view, std::string_view, std::chrono::milliseconds) {
    store.said = "connect: Connection refused (" + std::to_string(store.acquires) + ")";
    clock.advance(600ms);  // a slow failure: the 1 s budget is gone after two
    return holdfast::result<holdfast::grant>(errc::store_unavailable);
  };
  std::atomic<bool> done{false};
  std::thread mover([&] {
    while (!done.load()) {
      if (clock.wait_for_sleepers(1, 10ms)) clock.advance(10ms);
    }
  });
  holdfast::acquire_report report;
  holdfast::acquire_options<manual_clock> o;
  o.clock = clock;
  o.report = &report;
  auto l = holdfast::acquire(store, "k", 1s, 1s, o);
  done = true;
  mover.join();
  CHECK(l.error() == errc::timeout);
  // Two store calls more than attempts: acquire() ends without a lease after an error that may
  // hide a grant, so it asks once more as the same owner to give that grant back (leave nothing
  // behind), and once again when that answer too may hide a grant (give_back.hpp). Those calls
  // are no attempts, and the cause reported is the last attempt's.
  CHECK(report.attempts >= 2);
  CHECK(static_cast<std::uint32_t>(store.acquires) == report.attempts + 2);
  CHECK(report.last_store_error == errc::store_unavailable);
  CHECK(report.last_store_message ==
        "connect: Connection refused (" + std::to_string(report.attempts) + ")");
}

TEST_CASE("sleep_until_or_cancelled ends a steady_clock sleep at once on request_stop",
          "[cancel][concurrency]") {
  holdfast::steady_clock clock;
  holdfast::cancel_source src;
  const auto t0 = std::chrono::steady_clock::now();
  std::thread stopper([&] {
    std::this_thread::sleep_for(20ms);  // real-thread test: a bounded wait
    src.request_stop();
  });
  const bool slept = holdfast::detail::sleep_until_or_cancelled(clock, t0 + 30s, src.token());
  stopper.join();
  CHECK_FALSE(slept);
  CHECK(std::chrono::steady_clock::now() - t0 < 10s);
}

TEST_CASE("acquire on steady_clock: cancelled from another thread while it waits on a busy key",
          "[cancel][concurrency]") {
  holdfast::memory_store<> store;
  REQUIRE(store.try_acquire("k", "holder", 60000ms));
  holdfast::cancel_source src;
  holdfast::acquire_options<> o;
  o.cancel = src.token();
  o.backoff.initial = 5s;  // a long backoff: only the cancellation can end the wait early
  o.backoff.max_delay = 5s;
  std::atomic<bool> started{false};
  holdfast::result<holdfast::lease<holdfast::memory_store<>>> l(errc::busy);
  std::thread waiter([&] {
    started = true;
    l = holdfast::acquire(store, "k", 1s, 5min, o);
  });
  while (!started.load()) std::this_thread::yield();
  std::this_thread::sleep_for(50ms);  // let it reach its wait (bounded; real threads)
  const auto t0 = std::chrono::steady_clock::now();
  src.request_stop();
  waiter.join();
  const auto took = std::chrono::steady_clock::now() - t0;
  CHECK(l.error() == errc::cancelled);
  CHECK(took < 2s);  // within a wait slice (100 ms) plus a round trip, on a loaded machine
  CHECK(store.inspect("k").value()->owner == "holder");
}

TEST_CASE("semaphore::acquire: cancelled between slots, and a grant that saw the stop given back",
          "[cancel][semaphore]") {
  manual_clock clock;
  scripted_store store(clock);
  holdfast::cancel_source src;
  holdfast::semaphore_options<manual_clock> so;
  so.acquire.clock = clock;
  so.acquire.cancel = src.token();
  holdfast::semaphore<scripted_store, manual_clock> pool(store, "jobs", 3, 1000ms, so);
  REQUIRE_FALSE(pool.error());
  SECTION("every slot busy: the stop during the 2nd slot's round trip ends the pass there") {
    for (int i = 0; i < 3; ++i) {
      REQUIRE(store.inner.try_acquire("jobs#" + std::to_string(i), "other", 60000ms));
    }
    store.on_acquire = [&](std::string_view k, std::string_view o, std::chrono::milliseconds t) {
      if (store.acquires == 2) src.request_stop();
      return store.inner.try_acquire(k, o, t);
    };
    CHECK(pool.acquire(1h).error() == errc::cancelled);  // no other thread: a sleep would hang
    CHECK(store.acquires == 2);
  }
  SECTION("granted while the stop came: released, nothing held") {
    store.on_acquire = [&](std::string_view k, std::string_view o, std::chrono::milliseconds t) {
      src.request_stop();
      return store.inner.try_acquire(k, o, t);
    };
    CHECK(pool.acquire(1h).error() == errc::cancelled);
    CHECK(store.acquires == 1);
    CHECK(store.releases == 1);
    for (int i = 0; i < 3; ++i) {
      CHECK_FALSE(store.inner.inspect("jobs#" + std::to_string(i)).value().has_value());
    }
  }
}

TEST_CASE("election: campaign and next_leader answer cancelled once the token is stopped",
          "[cancel][election]") {
  manual_clock clock;
  holdfast::memory_store<manual_clock> store(clock);
  REQUIRE(store.try_acquire("job", "someone/1", 60000ms));
  holdfast::cancel_source src;
  holdfast::election_options<manual_clock> eo;
  eo.acquire.clock = clock;
  eo.acquire.cancel = src.token();
  holdfast::election<holdfast::memory_store<manual_clock>, manual_clock> e(store, "job", 1000ms,
                                                                           eo);
  src.request_stop();
  CHECK(e.campaign(1h).error() == errc::cancelled);
  auto now = e.leader();
  REQUIRE(now);
  CHECK(e.next_leader(*now, 1h).error() == errc::cancelled);
  CHECK(store.inspect("job").value()->owner == "someone/1");
}

}  // namespace test_cancel
