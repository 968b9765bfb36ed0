// SPDX-License-Identifier: MIT
// Tests of cancellable waits inside a store (store.hpp's can_cancel_wait_for_release_v, cancel.hpp)
// on memory_store: with a token that can be stopped, a blocking acquire, a campaign and
// next_leader wait for a release with the same store calls as without one (the stop wakes the
// store's own wait; nothing is cut into 100 ms slices), a stop ends the wait at once leaving the
// queue, and a store without the cancellable form (the fallback) is woken every slice but makes
// no attempt in between. Real threads, bounded waits ([concurrency], for TSan).
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "../support/cancel_wait_checks.hpp"
#include "holdfast/cancel.hpp"
#include "holdfast/election.hpp"
#include "holdfast/election_observer.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/stores/memory.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_cancel_wait {

using holdfast::errc;
using holdfast::memory_store;
using namespace std::chrono_literals;
using clk = std::chrono::steady_clock;

namespace {

// memory_store seen through the waits a user's store might offer: only the two-argument ones
// (Cancellable false: the sliced fallback), or both forms; counts inspect() and wait calls.
template <bool Cancellable>
struct counting_store {
  memory_store<>* s;
  std::atomic<int> inspects{0};
  std::atomic<int> waits{0};
  holdfast::result<holdfast::grant> try_acquire(std::string_view k, std::string_view o,
                                                std::chrono::milliseconds t) {
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
  std::function<void()> after_inspect{};  // runs after each inspect() read (a race in between)
  holdfast::result<std::optional<holdfast::lease_record>> inspect(std::string_view k) {
    ++inspects;
    auto r = s->inspect(k);
    if (after_inspect) after_inspect();
    return r;
  }
  holdfast::result<void> wait_for_release(std::string_view k, const clk::time_point& d) {
    ++waits;
    return s->wait_for_release(k, d);
  }
  holdfast::result<void> watch_release(std::string_view k, const clk::time_point& d) {
    ++waits;
    return s->watch_release(k, d);
  }
  template <bool C = Cancellable, class = std::enable_if_t<C>>
  holdfast::result<void> wait_for_release(std::string_view k, const clk::time_point& d,
                                          const holdfast::cancel_token& c) {
    ++waits;
    return s->wait_for_release(k, d, c);
  }
  template <bool C = Cancellable, class = std::enable_if_t<C>>
  holdfast::result<void> watch_release(std::string_view k, const clk::time_point& d,
                                       const holdfast::cancel_token& c,
                                       holdfast::fencing_token known = {}) {
    ++waits;
    return s->watch_release(k, d, c, known);
  }
};

static_assert(holdfast::can_cancel_wait_for_release_v<memory_store<>, holdfast::steady_clock>);
static_assert(holdfast::can_cancel_watch_release_v<memory_store<>, holdfast::steady_clock>);
static_assert(
    holdfast::can_cancel_wait_for_release_v<counting_store<true>, holdfast::steady_clock>);
static_assert(
    !holdfast::can_cancel_wait_for_release_v<counting_store<false>, holdfast::steady_clock>);
static_assert(holdfast::can_wait_for_release_v<counting_store<false>, holdfast::steady_clock>);
static_assert(holdfast::can_watch_known_holder_v<memory_store<>, holdfast::steady_clock>);
static_assert(holdfast::can_watch_known_holder_v<counting_store<true>, holdfast::steady_clock>);

// Waits (bounded) until `n` threads wait in the store.
bool until_waiting(const memory_store<>& s, std::size_t n) {
  const auto give_up = clk::now() + 10s;
  while (s.waiting() != n && clk::now() < give_up) std::this_thread::sleep_for(1ms);
  return s.waiting() == n;
}

}  // namespace

TEST_CASE("memory_store: a stoppable token costs a waiting acquire no attempt; a stop ends it",
          "[cancel_wait][memory_store][concurrency]") {
  memory_store<> store;
  hf_test::check_cancellable_wait_costs_nothing(store, store, "k");
  hf_test::check_stop_ends_store_wait(store, store, "c",
                                      [&](const std::string&) { return store.waiting() == 0; });
}

TEST_CASE("memory_store: a campaign with a stoppable token takes the same term step as without",
          "[cancel_wait][memory_store][election][concurrency]") {
  memory_store<> store;
  hf_test::check_campaign_terms_do_not_jump(store, store, "job",
                                            hf_test::tokens_issued::to_this_test);
}

TEST_CASE("memory_store: a cancelled waiter passes on the hand-off a release chose it for",
          "[cancel_wait][memory_store][concurrency]") {
  memory_store<> store;
  auto held = holdfast::try_acquire(store, "k", 20s);
  REQUIRE(held);
  holdfast::cancel_source src;
  std::optional<holdfast::result<void>> first;
  std::optional<holdfast::result<void>> second;
  std::thread a([&] { first.emplace(store.wait_for_release("k", clk::now() + 20s, src.token())); });
  REQUIRE(until_waiting(store, 1));
  std::thread b([&] { second.emplace(store.wait_for_release("k", clk::now() + 20s)); });
  REQUIRE(until_waiting(store, 2));
  const auto t0 = clk::now();
  src.request_stop();  // the first waiter leaves; the second stays queued
  a.join();
  CHECK(first->error() == errc::cancelled);
  CHECK(store.waiting() == 1);
  CHECK(held->release());  // wakes the one waiter still there
  b.join();
  CHECK(second->has_value());
  CHECK(clk::now() - t0 < 10s);  // woken by the release, not at the holder's expiry (20 s)
  CHECK(store.waiting() == 0);
  holdfast::cancel_source stopped;
  stopped.request_stop();
  CHECK(store.wait_for_release("free", clk::now() + 1s, stopped.token()).error() ==
        errc::cancelled);
}

TEST_CASE("election_observer::next_leader with a stoppable token: one watch, no re-reads",
          "[cancel_wait][election][concurrency]") {
  memory_store<> store;
  counting_store<true> counted{&store};
  auto held = holdfast::try_acquire(store, "job", 20s);
  REQUIRE(held);
  holdfast::cancel_source src;
  holdfast::election_observer_options<> oo;
  oo.cancel = src.token();
  oo.observe_interval = 30s;
  holdfast::election_observer<counting_store<true>> watcher(counted, "job", oo);
  auto now = watcher.leader();
  REQUIRE(now);
  counted.inspects = 0;
  std::optional<decltype(watcher.next_leader(*now, 20s))> next;
  std::thread t([&] { next.emplace(watcher.next_leader(*now, 20s)); });
  std::this_thread::sleep_for(hf_test::cancel_wait_hold);  // bounded
  CHECK(held->release());
  t.join();
  REQUIRE(next.has_value());
  REQUIRE(*next);
  CHECK_FALSE(next->value().has_value());  // nobody leads now
  CHECK(counted.inspects == 2);            // before the watch, and after the release
  CHECK(counted.waits == 1);
  // A stop during the watch ends it at once.
  auto again = holdfast::try_acquire(store, "job", 20s);
  REQUIRE(again);
  auto leads = watcher.leader();
  REQUIRE(leads);
  std::thread u([&] { next.emplace(watcher.next_leader(*leads, 20s)); });
  while (store.watching() != 1) std::this_thread::sleep_for(1ms);
  const auto t0 = clk::now();
  src.request_stop();
  u.join();
  CHECK(next->error() == errc::cancelled);
  CHECK(clk::now() - t0 < 200ms);
}

TEST_CASE("next_leader: a hand-off between reading the leader and watching it is seen at once",
          "[cancel_wait][election]") {
  memory_store<> store;
  counting_store<true> counted{&store};
  auto a = holdfast::try_acquire(store, "job", 20s);
  REQUIRE(a);
  holdfast::election_observer_options<> oo;
  oo.observe_interval = 30s;  // a watch of the wrong lease would sleep until the timeout below
  holdfast::election_observer<counting_store<true>> watcher(counted, "job", oo);
  auto known = watcher.leader();
  REQUIRE(known);
  REQUIRE(known->has_value());
  // next_leader's first read still sees A; A hands over to B before its watch starts.
  std::optional<holdfast::result<holdfast::lease<memory_store<>>>> b;
  bool handed_over = false;
  counted.after_inspect = [&] {
    if (std::exchange(handed_over, true)) return;
    CHECK(a->release());
    b.emplace(holdfast::try_acquire(store, "job", 20s));
  };
  const auto t0 = clk::now();
  auto next = watcher.next_leader(*known, 5s);
  CHECK(clk::now() - t0 < 2s);  // not the 5 s timeout: the watch returned at once
  REQUIRE(next);
  REQUIRE(next->has_value());
  REQUIRE(b.has_value());
  REQUIRE(*b);
  CHECK((*next)->term == (**b).token());
  CHECK(counted.waits == 1);
}

TEST_CASE("a store without the cancellable wait: woken every slice, but no attempt in between",
          "[cancel_wait][concurrency]") {
  memory_store<> store;
  counting_store<false> counted{&store};
  const std::uint32_t attempts =
      hf_test::attempts_across_release(counted, counted, "k", /*stoppable=*/true).attempts;
  CHECK(attempts == 2);
  CHECK(counted.waits >= 3);  // re-called every cancel_wait_slice (100 ms) over 450 ms
  counted.waits = 0;
  hf_test::check_stop_ends_store_wait(counted, counted, "c",
                                      [&](const std::string&) { return store.waiting() == 0; });
}

}  // namespace test_cancel_wait
