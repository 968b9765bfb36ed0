// SPDX-License-Identifier: MIT
// Lease life cycle (lease.hpp): loss detection on the holder's own clock, the on-loss callback,
// release on error, destructors that never throw, and clocks that jump. Every test runs on a
// manual_clock, single-threaded and deterministic.
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "holdfast/lease.hpp"
#include "holdfast/stores/memory.hpp"
#include "lifecycle_support.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_lease_lifecycle {

using namespace std::chrono_literals;
using holdfast::errc;
using holdfast::lease_state;
using holdfast::loss_cause;
using holdfast::manual_clock;
using lifecycle_test::faulty_store;
using lifecycle_test::injected_failure;

namespace {

using mstore = holdfast::memory_store<manual_clock>;
using fstore = faulty_store<mstore>;

struct fixture {
  manual_clock clock;
  mstore inner{clock};
  fstore store{inner};
  std::vector<loss_cause> losses;

  holdfast::acquire_options<manual_clock> opts(std::string owner = {}) {
    holdfast::acquire_options<manual_clock> o;
    o.clock = clock;
    o.owner = std::move(owner);
    o.on_lost = [this](loss_cause c) { losses.push_back(c); };
    return o;
  }
  holdfast::lease<fstore, manual_clock> take(std::string key = "orders",
                                             std::chrono::milliseconds ttl = 10s) {
    auto l = holdfast::try_acquire(store, key, ttl, opts());
    REQUIRE(l);
    return std::move(*l);
  }
};

}  // namespace

TEST_CASE("a lease notices on its own clock that its validity passed", "[lease]") {
  fixture f;
  auto l = f.take();
  f.clock.advance(l.valid_until() - f.clock.now() - 1ns);
  CHECK(l.valid());
  CHECK(f.losses.empty());
  f.clock.advance(1ns);                   // exactly valid_until: no longer trusted
  CHECK(l.state() == lease_state::held);  // state() reads no clock
  CHECK_FALSE(l.valid());
  CHECK(l.state() == lease_state::lost);
  CHECK(l.loss() == loss_cause::validity_passed);
  REQUIRE(f.losses == std::vector<loss_cause>{loss_cause::validity_passed});
  CHECK_FALSE(l.valid());  // the callback fires once, however often loss is seen
  CHECK(l.remaining() == manual_clock::duration::zero());
  CHECK(f.losses.size() == 1);
  CHECK(f.store.renew_calls == 0);  // no store involved in noticing
}

TEST_CASE("renew after validity passed is lease_lost and never reaches the store", "[lease]") {
  fixture f;
  auto l = f.take();
  f.clock.advance(10s);  // the store's TTL has also run out; nobody else took the key
  CHECK(l.renew().error() == errc::lease_lost);
  CHECK(f.store.renew_calls == 0);
  CHECK(l.loss() == loss_cause::validity_passed);
  CHECK(f.losses == std::vector<loss_cause>{loss_cause::validity_passed});
  // Even a store that would happily extend it cannot bring it back.
  CHECK(l.renew().error() == errc::lease_lost);
  CHECK(f.store.renew_calls == 0);
  CHECK(f.losses.size() == 1);
}

TEST_CASE("a renew refused by the store turns the lease lost, once", "[lease]") {
  fixture f;
  auto l = f.take();
  SECTION("lease_lost") {
    f.store.fail_renewals(errc::lease_lost);
    CHECK(l.renew().error() == errc::lease_lost);
    CHECK(l.loss() == loss_cause::renew_refused);
  }
  SECTION("not_holder") {
    f.store.fail_renewals(errc::not_holder);
    CHECK(l.renew().error() == errc::lease_lost);
    CHECK(l.loss() == loss_cause::not_holder);
  }
  CHECK(l.state() == lease_state::lost);
  CHECK_FALSE(l.valid());  // immediately, though validity has not passed on the clock
  CHECK(f.losses.size() == 1);
  f.store.clear_hooks();
  CHECK(l.renew().error() == errc::lease_lost);  // not revived
  CHECK(f.store.renew_calls == 1);
  CHECK(f.losses.size() == 1);
}

TEST_CASE("a renew answered with another token is a protocol error and a loss", "[lease]") {
  fixture f;
  auto l = f.take();
  f.store.set_renew_hook([](auto, auto, holdfast::fencing_token t,
                            auto ttl) -> std::optional<holdfast::result<holdfast::grant>> {
    return holdfast::result<holdfast::grant>(
        holdfast::grant{holdfast::fencing_token(t.value() + 1), ttl});
  });
  CHECK(l.renew().error() == errc::protocol_error);
  CHECK(l.loss() == loss_cause::protocol_error);
  CHECK(l.last_error() == errc::protocol_error);
  CHECK(f.losses == std::vector<loss_cause>{loss_cause::protocol_error});
}

TEST_CASE("a transient renew error keeps the lease and its old validity", "[lease]") {
  fixture f;
  auto l = f.take();
  const auto until = l.valid_until();
  f.store.fail_renewals(errc::store_unavailable, 1);
  f.clock.advance(5s);
  CHECK(l.renew().error() == errc::store_unavailable);
  CHECK(l.state() == lease_state::held);
  CHECK(l.valid_until() == until);
  CHECK(l.last_error() == errc::store_unavailable);
  CHECK(l.renew());  // retry before validity runs out
  CHECK(l.valid_until() > until);
  CHECK(f.losses.empty());
}

TEST_CASE("a clock that goes backwards makes the lease lost and never extends it", "[lease]") {
  fixture f;
  f.clock.advance(100s);
  auto l = f.take();
  const auto until = l.valid_until();
  f.clock.advance(-1s);  // a user clock regressing (a jump back)
  CHECK_FALSE(l.valid());
  CHECK(l.loss() == loss_cause::clock_regressed);
  CHECK(l.valid_until() == until);
  f.clock.advance(2s);  // back past the last reading: still lost
  CHECK_FALSE(l.valid());
  CHECK(l.renew().error() == errc::lease_lost);
  CHECK(f.store.renew_calls == 0);
  CHECK(f.losses == std::vector<loss_cause>{loss_cause::clock_regressed});
}

TEST_CASE("a clock that jumps forwards only shortens what the holder trusts", "[lease]") {
  fixture f;
  auto l = f.take();
  f.clock.advance(24h);  // e.g. a suspended VM resuming; never a reason to trust longer
  CHECK_FALSE(l.valid());
  CHECK(l.loss() == loss_cause::validity_passed);
  // The default clock is std::chrono::steady_clock, so wall-clock jumps (NTP, date -s) cannot
  // reach a lease at all; TTLs are durations, never wall-clock instants.
  STATIC_REQUIRE(std::chrono::steady_clock::is_steady);
  STATIC_REQUIRE(
      std::is_same_v<holdfast::steady_clock::time_point, std::chrono::steady_clock::time_point>);
}

TEST_CASE("on_lost set after the loss fires at once, and only once", "[lease]") {
  fixture f;
  auto l = f.take();
  l.on_lost(nullptr);  // drop the fixture's callback
  f.clock.advance(1h);
  CHECK_FALSE(l.valid());
  int calls = 0;
  l.on_lost([&](loss_cause c) {
    ++calls;
    CHECK(c == loss_cause::validity_passed);
  });
  CHECK(calls == 1);
  l.on_lost([&](loss_cause) { ++calls; });
  CHECK_FALSE(l.valid());
  CHECK(calls == 1);
}

TEST_CASE("released and lost handles cannot be renewed back to life", "[lease]") {
  fixture f;
  auto l = f.take();
  REQUIRE(l.release());
  CHECK(l.state() == lease_state::released);
  CHECK(l.renew().error() == errc::lease_lost);
  CHECK_FALSE(l.valid());
  CHECK(f.store.renew_calls == 0);
  CHECK(l.release());  // idempotent
  CHECK(f.store.release_calls == 1);
  CHECK(f.losses.empty());
}

TEST_CASE("a failed release keeps the handle able to retry and stops renewal", "[lease]") {
  fixture f;
  auto l = f.take();
  f.store.fail_releases(errc::store_unavailable, 1);
  CHECK(l.release().error() == errc::store_unavailable);
  CHECK(l.state() == lease_state::releasing);
  CHECK(l.last_error() == errc::store_unavailable);
  CHECK_FALSE(l.valid());                        // the holder has let go
  CHECK(l.renew().error() == errc::lease_lost);  // and nothing renews it any more
  CHECK(f.store.renew_calls == 0);
  REQUIRE(f.inner.inspect("orders").value());  // the record is still there ...
  CHECK(l.release());                          // ... until the retry frees it
  CHECK(l.state() == lease_state::released);
  CHECK_FALSE(f.inner.inspect("orders").value());
  CHECK(f.losses.empty());
}

TEST_CASE("a release that is never retried leaves the key to its TTL", "[lease]") {
  fixture f;
  {
    auto l = f.take("orders", 10s);
    f.store.fail_releases(errc::store_unavailable);  // every attempt, the destructor's too
    CHECK(l.release().error() == errc::store_unavailable);
  }
  CHECK(f.store.release_calls == 2);  // release() and the destructor's one retry
  f.store.clear_hooks();
  CHECK(holdfast::try_acquire(f.inner, "orders", 10s, f.opts("b")).error() == errc::busy);
  f.clock.advance(10s);
  CHECK(holdfast::try_acquire(f.inner, "orders", 10s, f.opts("b")));
}

TEST_CASE("release finding the lease gone reports an unnoticed loss as not_holder", "[lease]") {
  fixture f;
  auto l = f.take();
  l.on_lost(nullptr);
  f.clock.advance(10s);  // the store expired it; the holder did not look
  auto b = holdfast::try_acquire(f.inner, "orders", 10s, f.opts("b"));
  REQUIRE(b);
  loss_cause seen = loss_cause::none;
  l.on_lost([&](loss_cause c) { seen = c; });
  CHECK(l.release().error() == errc::not_holder);
  CHECK(l.state() == lease_state::released);
  CHECK(l.loss() == loss_cause::not_holder);
  CHECK(seen == loss_cause::not_holder);
  CHECK(b->valid());  // the new holder is untouched (T3)
}

TEST_CASE("not_holder on a release retry is not reported as a loss", "[lease]") {
  fixture f;
  auto l = f.take();
  // The first release lands in the store but its reply is lost.
  f.store.set_release_hook([&](std::string_view k, std::string_view o,
                               holdfast::fencing_token t) -> std::optional<holdfast::result<void>> {
    f.store.set_release_hook(nullptr);
    (void)f.inner.release(k, o, t);
    return holdfast::result<void>(errc::timeout);
  });
  CHECK(l.release().error() == errc::timeout);
  CHECK(l.release().error() == errc::not_holder);
  CHECK(l.state() == lease_state::released);
  CHECK(l.loss() == loss_cause::none);
  CHECK(f.losses.empty());
}

TEST_CASE("the destructor reports a loss it finds through the callback", "[lease]") {
  fixture f;
  {
    auto l = f.take();
    f.clock.advance(1h);
  }
  CHECK(f.losses == std::vector<loss_cause>{loss_cause::validity_passed});
  CHECK(f.store.release_calls == 1);  // and still frees the record early
  CHECK_FALSE(f.inner.inspect("orders").value());
}

TEST_CASE("destructors never throw, whatever the store, clock or callback do", "[lease]") {
  fixture f;
  SECTION("store throws on release") {
    {
      auto l = f.take();
      f.store.throw_on_releases();
    }
    CHECK(f.store.release_calls == 1);
  }
  SECTION("callback throws") {
    {
      auto l = f.take();
      l.on_lost([](loss_cause) { throw injected_failure("callback exploded"); });
      f.clock.advance(1h);
    }
    CHECK(f.store.release_calls == 1);
  }
  SECTION("move-assigning over a lease whose store throws") {
    auto a = f.take("a");
    auto b = f.take("b");
    f.store.throw_on_releases(1);
    a = std::move(b);  // a's old lease is released quietly
    CHECK(a.key() == "b");
    CHECK(a.valid());
  }
}

TEST_CASE("store and clock exceptions reach the caller unchanged", "[lease]") {
  fixture f;
  auto l = f.take();
  const auto until = l.valid_until();
  SECTION("renew") {
    f.store.throw_on_renewals(1);
    f.clock.advance(1s);
    CHECK_THROWS_MATCHES(l.renew(), injected_failure, Catch::Message("renew exploded"));
    CHECK(l.state() == lease_state::held);
    CHECK(l.valid_until() == until);
    CHECK(l.renew());
  }
  SECTION("release") {
    f.store.throw_on_releases(1);
    CHECK_THROWS_MATCHES(l.release(), injected_failure, Catch::Message("release exploded"));
    CHECK(l.state() == lease_state::releasing);  // nothing renews it after a release attempt
    CHECK(l.release());
  }
  SECTION("acquire") {
    f.store.set_acquire_hook(
        [](auto, auto, auto) -> std::optional<holdfast::result<holdfast::grant>> {
          throw injected_failure("acquire exploded");
        });
    CHECK_THROWS_MATCHES(holdfast::try_acquire(f.store, "other", 10s, f.opts()), injected_failure,
                         Catch::Message("acquire exploded"));
  }
  CHECK(f.losses.empty());
}

TEST_CASE("a clock that throws reaches valid() callers unchanged", "[lease]") {
  lifecycle_test::throwing_clock clock;
  holdfast::memory_store<manual_clock> store(clock.base());
  holdfast::acquire_options<lifecycle_test::throwing_clock> o;
  o.clock = clock;
  auto l = holdfast::try_acquire(store, "k", 10s, o);
  REQUIRE(l);
  clock.arm();
  CHECK_THROWS_AS(l->valid(), injected_failure);
  CHECK(l->state() == lease_state::held);
  clock.arm(false);
  CHECK(l->valid());
  clock.arm();
  // ~lease below reads the clock too: it must swallow the exception and still release.
}

TEST_CASE("a grant too late to be worth anything fires no callback", "[lease]") {
  fixture f;
  // The reply arrives after the validity it gives has passed: acquire hands the key back.
  f.store.set_acquire_hook(
      [&](std::string_view k, std::string_view o,
          std::chrono::milliseconds t) -> std::optional<holdfast::result<holdfast::grant>> {
        auto g = f.inner.try_acquire(k, o, t);
        f.clock.advance(t);
        return g;
      });
  CHECK(holdfast::try_acquire(f.store, "orders", 10s, f.opts()).error() == errc::timeout);
  CHECK(f.losses.empty());
  CHECK(f.store.release_calls == 1);
}

TEST_CASE("lease_state and loss_cause have readable names", "[lease]") {
  CHECK(std::string(holdfast::to_string(loss_cause::none)) == "none");
  CHECK(std::string(holdfast::to_string(loss_cause::validity_passed)) == "validity_passed");
  CHECK(std::string(holdfast::to_string(loss_cause::renew_refused)) == "renew_refused");
  CHECK(std::string(holdfast::to_string(loss_cause::not_holder)) == "not_holder");
  CHECK(std::string(holdfast::to_string(loss_cause::clock_regressed)) == "clock_regressed");
  CHECK(std::string(holdfast::to_string(loss_cause::protocol_error)) == "protocol_error");
  CHECK(holdfast::make_error_code(errc::caught_exception).message().find("threw") !=
        std::string::npos);
}

}  // namespace test_lease_lifecycle
