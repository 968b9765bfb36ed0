// SPDX-License-Identifier: MIT
// keepalive.hpp: background renewal of many leases. The schedule, retries, loss detection and
// what release()/remove()/stop() do to renewals are tested deterministically by driving poll()
// on a manual_clock, without the thread (test_keepalive_thread.cpp tests the thread).
#include <catch2/catch.hpp>

#include <chrono>
#include <limits>
#include <mutex>
#include <string>
#include <vector>

#include "holdfast/keepalive.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/stores/memory.hpp"
#include "lifecycle_support.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_keepalive {

using namespace std::chrono_literals;
using holdfast::errc;
using holdfast::keepalive;
using holdfast::keepalive_options;
using holdfast::lease_state;
using holdfast::loss_cause;
using holdfast::manual_clock;
using lifecycle_test::injected_failure;

namespace {

using flease = lifecycle_test::keepalive_fixture::flease;

keepalive_options manual_options(double fraction = 0.5) {
  keepalive_options o;
  o.start_thread = false;
  o.renew_fraction = fraction;
  o.retry.initial = 100ms;
  o.retry.max_delay = 1s;
  o.retry.seed = 42;
  return o;
}

using fixture = lifecycle_test::keepalive_fixture;

}  // namespace

TEST_CASE("keepalive renews at half the TTL by default", "[keepalive]") {
  fixture f;
  keepalive<manual_clock> ka(f.clock, manual_options());
  auto l = f.take();
  REQUIRE(ka.add(l));
  CHECK(ka.size() == 1);
  f.at(5s - 1ns);
  CHECK(ka.poll() == manual_clock::time_point(5s));
  CHECK(f.store.renew_calls == 0);
  f.at(5s);
  CHECK(ka.poll() == manual_clock::time_point(10s));  // next due: half a TTL after this renewal
  CHECK(f.store.renew_calls == 1);
  CHECK(l.acquired_at() == manual_clock::time_point(5s));
  for (int i = 2; i <= 20; ++i) {
    f.at(std::chrono::seconds(5 * i));
    (void)ka.poll();
  }
  CHECK(f.store.renew_calls == 20);
  CHECK(l.valid());  // a minute and a half on a 10 s TTL
  CHECK(ka.stats().renewals == 20);
  CHECK(f.seen().empty());
}

TEST_CASE("keepalive renews at the configured fraction of the TTL", "[keepalive]") {
  fixture f;
  keepalive<manual_clock> ka(f.clock, manual_options(0.25));
  auto l = f.take("orders", 8s);
  REQUIRE(ka.add(l));
  f.at(2s);
  CHECK(ka.poll() == manual_clock::time_point(4s));
  CHECK(f.store.renew_calls == 1);
}

TEST_CASE("keepalive never schedules a renewal at or past valid_until", "[keepalive]") {
  fixture f;
  auto o = manual_options(0.999);
  keepalive<manual_clock> ka(f.clock, o);
  auto l = f.take("orders", 10s);
  REQUIRE(ka.add(l));
  // 99.9% of the TTL is past the validity (99% minus 2 ms): renew just before it instead.
  f.at(l.valid_until() - manual_clock::time_point() - 1ns);
  (void)ka.poll();
  CHECK(f.store.renew_calls == 1);
  CHECK(l.valid());
  CHECK(f.seen().empty());
}

TEST_CASE("keepalive retries transient errors with backoff until one succeeds", "[keepalive]") {
  fixture f;
  keepalive<manual_clock> ka(f.clock, manual_options());
  auto l = f.take();
  REQUIRE(ka.add(l));
  f.store.fail_renewals(errc::store_unavailable, 3);
  f.at(5s);
  for (int i = 1; i <= 3; ++i) {
    auto next = ka.poll();
    REQUIRE(f.store.renew_calls == i);
    REQUIRE(next);
    CHECK(*next > f.clock.now());
    CHECK(*next - f.clock.now() <= 1s);  // backoff stays under its cap
    f.clock.set(*next);
  }
  auto next = ka.poll();
  CHECK(f.store.renew_calls == 4);
  REQUIRE(next);
  CHECK(*next - f.clock.now() == 5s);  // back on the normal schedule
  CHECK(l.state() == lease_state::held);
  CHECK(l.valid());
  CHECK(l.last_error() == errc::store_unavailable);
  CHECK(ka.stats().retries == 3);
  CHECK(ka.stats().renewals == 1);
  CHECK(f.seen().empty());
}

TEST_CASE("keepalive retries until validity passes, then reports the loss once", "[keepalive]") {
  fixture f;
  keepalive<manual_clock> ka(f.clock, manual_options());
  auto l = f.take();
  const auto until = l.valid_until();
  REQUIRE(ka.add(l));
  f.store.fail_renewals(errc::store_unavailable);
  f.at(5s);
  for (int i = 0; i < 100; ++i) {
    auto next = ka.poll();
    if (!next) break;
    REQUIRE(*next <= until);  // never scheduled past validity
    f.clock.set(*next);
  }
  CHECK(ka.size() == 0);
  CHECK(l.state() == lease_state::lost);
  CHECK(l.loss() == loss_cause::validity_passed);
  CHECK(f.seen() == std::vector<loss_cause>{loss_cause::validity_passed});
  CHECK(ka.stats().losses == 1);
  const int calls = f.store.renew_calls;
  f.clock.advance(1h);
  CHECK_FALSE(ka.poll());
  CHECK(f.store.renew_calls == calls);  // dropped for good
}

TEST_CASE("keepalive stops for good on lease_lost", "[keepalive]") {
  fixture f;
  keepalive<manual_clock> ka(f.clock, manual_options());
  auto l = f.take();
  REQUIRE(ka.add(l));
  f.store.fail_renewals(errc::lease_lost, 1);
  f.at(5s);
  CHECK_FALSE(ka.poll());
  CHECK(f.store.renew_calls == 1);
  CHECK(l.loss() == loss_cause::renew_refused);
  CHECK_FALSE(l.valid());
  CHECK(f.seen() == std::vector<loss_cause>{loss_cause::renew_refused});
  CHECK(ka.size() == 0);
  f.at(6s);
  CHECK_FALSE(ka.poll());
  CHECK(f.store.renew_calls == 1);
  CHECK(ka.add(l).error() == errc::lease_lost);  // a lost lease cannot be kept alive again
}

TEST_CASE("keepalive reports a store exception on the lease and retries", "[keepalive]") {
  fixture f;
  keepalive<manual_clock> ka(f.clock, manual_options());
  auto l = f.take();
  REQUIRE(ka.add(l));
  f.store.throw_on_renewals(1);
  f.at(5s);
  auto next = ka.poll();  // must not throw
  REQUIRE(next);
  CHECK(l.last_error() == errc::caught_exception);
  REQUIRE(l.last_exception());
  CHECK_THROWS_MATCHES(std::rethrow_exception(l.last_exception()), injected_failure,
                       Catch::Message("renew exploded"));
  CHECK(l.state() == lease_state::held);
  f.clock.set(*next);
  (void)ka.poll();
  CHECK(f.store.renew_calls == 2);
  CHECK(ka.stats().renewals == 1);
  CHECK(l.valid());
}

TEST_CASE("keepalive catches a loss callback that throws", "[keepalive]") {
  fixture f;
  keepalive<manual_clock> ka(f.clock, manual_options());
  auto l = f.take();
  l.on_lost([](loss_cause) { throw injected_failure("callback exploded"); });
  REQUIRE(ka.add(l));
  f.store.fail_renewals(errc::lease_lost);
  f.at(5s);
  CHECK_NOTHROW(ka.poll());
  CHECK(l.state() == lease_state::lost);
  CHECK(l.last_error() == errc::caught_exception);
}

TEST_CASE("after release() no renewal of the lease reaches the store", "[keepalive]") {
  fixture f;
  keepalive<manual_clock> ka(f.clock, manual_options());
  auto l = f.take();
  REQUIRE(ka.add(l));
  SECTION("successful release") {
    REQUIRE(l.release());
  }
  SECTION("failed release (never retried)") {
    f.store.fail_releases(errc::store_unavailable);
    CHECK(l.release().error() == errc::store_unavailable);
    CHECK(l.state() == lease_state::releasing);
  }
  SECTION("release that threw") {
    f.store.throw_on_releases();
    CHECK_THROWS_AS(l.release(), injected_failure);
  }
  for (int s = 5; s <= 60; s += 5) {
    f.at(std::chrono::seconds(s));
    (void)ka.poll();
  }
  CHECK(f.store.renew_calls == 0);
  CHECK(ka.size() == 0);
  CHECK(f.seen().empty());
  // With the renewals stopped, the store's TTL has freed the key whatever release answered.
  CHECK(holdfast::try_acquire(f.inner, "orders", 10s, f.opts("b")));
}

TEST_CASE("keepalive drops a lease that was destroyed", "[keepalive]") {
  fixture f;
  keepalive<manual_clock> ka(f.clock, manual_options());
  {
    auto l = f.take();
    REQUIRE(ka.add(l));
  }
  CHECK(f.store.release_calls == 1);
  f.at(5s);
  CHECK_FALSE(ka.poll());
  CHECK(f.store.renew_calls == 0);
  CHECK(ka.size() == 0);
}

TEST_CASE("a lease stays movable while a keepalive renews it", "[keepalive]") {
  fixture f;
  keepalive<manual_clock> ka(f.clock, manual_options());
  std::vector<flease> leases;
  leases.push_back(f.take("a"));
  REQUIRE(ka.add(leases.back()));
  for (int i = 0; i < 16; ++i) leases.push_back(f.take("k" + std::to_string(i)));  // reallocates
  flease moved = std::move(leases.front());
  CHECK(leases.front().state() == lease_state::released);  // moved-from
  f.at(5s);
  (void)ka.poll();
  CHECK(f.store.renew_calls == 1);
  CHECK(moved.acquired_at() == manual_clock::time_point(5s));
  REQUIRE(moved.release());
  CHECK(ka.size() == 1);  // dropped at its next due time
  f.at(10s);
  (void)ka.poll();
  CHECK(ka.size() == 0);
  CHECK(f.store.renew_calls == 1);
}

TEST_CASE("one keepalive serves many leases, each on its own schedule", "[keepalive]") {
  fixture f;
  keepalive<manual_clock> ka(f.clock, manual_options());
  std::vector<flease> leases;
  for (int i = 0; i < 50; ++i) {
    f.at(std::chrono::milliseconds(100 * i));
    (void)ka.poll();
    leases.push_back(f.take("k" + std::to_string(i), std::chrono::seconds(2 + i % 5)));
    REQUIRE(ka.add(leases.back()));
  }
  CHECK(ka.size() == 50);
  for (auto t = f.clock.now(); t < manual_clock::time_point(60s);) {
    auto next = ka.poll();
    REQUIRE(next);
    t = *next;
    f.clock.set(t);
  }
  for (auto& l : leases) CHECK(l.valid());
  CHECK(f.seen().empty());
  CHECK(ka.stats().retries == 0);
}

TEST_CASE("keepalive add() checks the lease and the keepalive", "[keepalive]") {
  fixture f;
  keepalive<manual_clock> ka(f.clock, manual_options());
  auto l = f.take();
  REQUIRE(ka.add(l));
  CHECK(ka.add(l));  // again: nothing changes
  CHECK(ka.size() == 1);
  keepalive<manual_clock> other(f.clock, manual_options());
  CHECK(other.add(l).error() == errc::invalid_argument);  // one keepalive per lease
  ka.remove(l);
  CHECK(ka.size() == 0);
  CHECK(other.add(l));  // free to move to another keepalive
  auto gone = f.take("gone");
  REQUIRE(gone.release());
  CHECK(ka.add(gone).error() == errc::lease_lost);
}

TEST_CASE("remove() stops renewals but leaves the lease held", "[keepalive]") {
  fixture f;
  keepalive<manual_clock> ka(f.clock, manual_options());
  auto l = f.take();
  REQUIRE(ka.add(l));
  ka.remove(l);
  f.at(5s);
  CHECK_FALSE(ka.poll());
  CHECK(f.store.renew_calls == 0);
  CHECK(l.state() == lease_state::held);
  CHECK(l.renew());  // still renewable by hand
}

TEST_CASE("keepalive options are checked", "[keepalive]") {
  struct bad_case {
    const char* name;
    keepalive_options opts;
  };
  std::vector<bad_case> cases;
  auto base = manual_options();
  for (double f : {0.0, 1.0, -0.5, 2.0, std::numeric_limits<double>::quiet_NaN(),
                   std::numeric_limits<double>::infinity()}) {
    auto o = base;
    o.renew_fraction = f;
    cases.push_back({"renew_fraction", o});
  }
  {
    auto o = base;
    o.poll_interval = 0ns;
    cases.push_back({"poll_interval 0", o});
    o.poll_interval = -1ms;
    cases.push_back({"poll_interval < 0", o});
    o.poll_interval = std::chrono::nanoseconds::max();  // now + interval would overflow
    cases.push_back({"poll_interval huge", o});
  }
  {
    auto o = base;
    o.retry.initial = 0ns;
    cases.push_back({"retry.initial 0", o});
  }
  for (const auto& c : cases) {
    INFO(c.name);
    fixture f;
    keepalive<manual_clock> ka(f.clock, c.opts);
    CHECK(ka.error() == errc::invalid_argument);
    auto l = f.take();
    CHECK(ka.add(l).error() == errc::invalid_argument);
    CHECK_FALSE(ka.poll());
    CHECK(l.state() == lease_state::held);
  }
  CHECK_FALSE(keepalive_options{}.check());
}

TEST_CASE("stop() detaches every lease and refuses new ones", "[keepalive]") {
  fixture f;
  keepalive<manual_clock> ka(f.clock, manual_options());
  auto l = f.take();
  REQUIRE(ka.add(l));
  ka.stop();
  CHECK(ka.stopped());
  CHECK(ka.size() == 0);
  f.at(5s);
  CHECK_FALSE(ka.poll());
  CHECK(f.store.renew_calls == 0);
  auto m = f.take("other");
  CHECK(ka.add(m).error() == errc::invalid_argument);
  keepalive<manual_clock> next(f.clock, manual_options());
  CHECK(next.add(l));  // the stopped keepalive let go of it
  ka.stop();           // idempotent
}

TEST_CASE("a holder clock that jumps back is noticed at the next poll: clock_regressed",
          "[keepalive]") {
  // Issue input (time at the edges, 2): holder clock manual_clock, keepalive over it, TTL 10 s
  // with on_lost set; the store's clock is separate and does not jump.
  //   t = 0: A acquires and is added.  t = 5: renewed (store expiry 15).
  //   t = 6: the holder's clock jumps back 100 s. Run on to t = 30.
  // Before: no renewal and no on_lost until the holder's clock read 10 again (104 s later) while
  // the store freed the key at 15. Expected: on_lost(clock_regressed) at the first poll after the
  // jump, i.e. within one renew interval.
  manual_clock holder;
  manual_clock store_clock;
  fixture::mstore store(store_clock);
  std::vector<loss_cause> losses;
  holdfast::acquire_options<manual_clock> o;
  o.clock = holder;
  o.on_lost = [&](loss_cause c) { losses.push_back(c); };
  keepalive<manual_clock> ka(holder, manual_options());
  auto a = holdfast::try_acquire(store, "k", 10s, o);
  REQUIRE(a);
  REQUIRE(ka.add(*a));
  const auto both_at = [&](std::chrono::nanoseconds t) {
    holder.set(manual_clock::time_point(t));
    store_clock.set(manual_clock::time_point(t));
  };
  both_at(5s - 1ns);
  CHECK(ka.poll() == manual_clock::time_point(5s));  // not yet due
  both_at(5s);
  CHECK(ka.poll() == manual_clock::time_point(10s));
  CHECK(ka.stats().renewals == 1);
  both_at(6s);
  CHECK(ka.poll() == manual_clock::time_point(10s));  // nothing due, no regression
  CHECK(losses.empty());
  holder.set(manual_clock::time_point(6s - 100s));  // the jump; the store's clock stays at 6 s
  CHECK(ka.poll() == std::nullopt);                 // the lease is dropped
  REQUIRE(losses.size() == 1);
  CHECK(losses[0] == loss_cause::clock_regressed);
  CHECK(a->state() == lease_state::lost);
  CHECK(a->loss() == loss_cause::clock_regressed);
  CHECK(ka.stats().regressions == 1);
  CHECK(ka.stats().renewals == 1);
  CHECK(ka.size() == 0);
  // Run on to t = 30 on both clocks: nothing more is renewed or reported; the store frees the key
  // at 15 by its own clock, and B gets it there (one tick before: busy).
  for (int t = 7; t <= 30; ++t) {
    holder.advance(1s);
    store_clock.set(manual_clock::time_point(std::chrono::seconds(t)));
    CHECK(ka.poll() == std::nullopt);
    if (t == 15) {
      store_clock.set(manual_clock::time_point(15s - 1ns));
      CHECK(store.try_acquire("k", "B", 10s).error() == errc::busy);
      store_clock.set(manual_clock::time_point(15s));
      CHECK(store.try_acquire("k", "B", 10s));
    }
  }
  CHECK(losses.size() == 1);
  CHECK(ka.stats().renewals == 1);
}

TEST_CASE("a clock that went back before the keepalive's first poll is still noticed",
          "[keepalive]") {
  // The lease read its clock at 0 s; the clock then jumped back 100 s before the lease was added
  // to a keepalive that had never read it. The keepalive starts from the lease's own latest
  // reading, so its first poll finds the regression (before: the renewal due at 5 s was 105 s
  // away and nothing was reported).
  fixture f;
  keepalive<manual_clock> ka(f.clock, manual_options());
  auto l = holdfast::try_acquire(f.store, "orders", 10s, f.opts());
  REQUIRE(l);
  f.clock.set(manual_clock::time_point(-100s));
  REQUIRE(ka.add(*l));
  CHECK(ka.poll() == std::nullopt);
  REQUIRE(f.seen().size() == 1);
  CHECK(f.seen()[0] == loss_cause::clock_regressed);
  CHECK(ka.stats().regressions == 1);
}

}  // namespace test_keepalive
