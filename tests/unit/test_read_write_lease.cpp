// SPDX-License-Identifier: MIT
// read_write_lease.hpp: shared and exclusive leases over memory_store's read-write capability:
// readers together, a writer alone, RAII release, the blocking writer whose intent keeps new
// readers out until it wins, no upgrade in place, keepalive on a shared lease, bad input.
// Time is a self_advancing_clock or a manual_clock. Cost: well under a second.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>

#include "holdfast/clock.hpp"
#include "holdfast/keepalive.hpp"
#include "holdfast/read_write_lease.hpp"
#include "holdfast/stores/memory.hpp"

namespace test_read_write_lease {

using holdfast::errc;
using holdfast::lease_state;
using holdfast::manual_clock;
using holdfast::self_advancing_clock;
using namespace std::chrono_literals;

template <class Clock>
holdfast::acquire_options<Clock> options(Clock clock, std::string owner = {}) {
  holdfast::acquire_options<Clock> o;
  o.clock = std::move(clock);
  o.owner = std::move(owner);
  o.backoff.seed = 11;
  return o;
}

using mstore = holdfast::memory_store<manual_clock>;
static_assert(
    holdfast::is_lease_store_v<holdfast::read_write_view<mstore, holdfast::lease_mode::shared>>);
static_assert(std::is_same_v<holdfast::read_write_lease<mstore, manual_clock>::shared_type,
                             holdfast::shared_lease<mstore, manual_clock>>);

TEST_CASE("readers hold together, a writer alone, each with its own token", "[read_write_lease]") {
  manual_clock clock;
  mstore store(clock);
  holdfast::read_write_lease<mstore, manual_clock> doc(store, "doc", options(clock));
  auto r1 = doc.try_acquire_read(1000ms);
  auto r2 = doc.try_acquire_read(1000ms);
  REQUIRE(r1);
  REQUIRE(r2);
  CHECK(r1->owner() != r2->owner());
  CHECK(r1->token() < r2->token());
  CHECK(doc.try_acquire_write(1000ms).error() == errc::busy);
  REQUIRE(r1->release());
  REQUIRE(r2->release());
  auto w = doc.try_acquire_write(1000ms);
  REQUIRE(w);
  CHECK(w->token() > r2->token());
  CHECK(doc.try_acquire_read(1000ms).error() == errc::busy);
  CHECK(doc.try_acquire_write(1000ms).error() == errc::busy);
}

TEST_CASE("a handle releases its grant when it goes out of scope", "[read_write_lease]") {
  manual_clock clock;
  mstore store(clock);
  holdfast::read_write_lease<mstore, manual_clock> doc(store, "doc", options(clock));
  {
    auto r = doc.try_acquire_read(1000ms);
    REQUIRE(r);
    CHECK(doc.try_acquire_write(1000ms).error() == errc::busy);
  }
  {
    auto w = doc.try_acquire_write(1000ms);
    REQUIRE(w);
    CHECK(w->state() == lease_state::held);
  }
  CHECK(doc.try_acquire_read(1000ms));
}

TEST_CASE("a blocking writer keeps new readers out and wins once the readers leave",
          "[read_write_lease]") {
  self_advancing_clock clock;
  holdfast::memory_store<self_advancing_clock> store(clock);
  holdfast::read_write_lease<holdfast::memory_store<self_advancing_clock>, self_advancing_clock>
      doc(store, "doc", options(clock));
  auto r = doc.try_acquire_read(300ms);  // expires at 300 ms; nothing renews it
  REQUIRE(r);
  auto w = doc.acquire_write(200ms, 2s);  // waits; its asks refresh its intent every <= 100 ms
  REQUIRE(w);
  CHECK(clock.now().time_since_epoch() >= 300ms);
  CHECK(w->token() > r->token());
  // Before the writer won, new readers were refused: the store says so for a fresh reader now.
  CHECK(doc.try_acquire_read(200ms).error() == errc::busy);
}

TEST_CASE("a reader does not upgrade in place: it releases, then acquires as a writer",
          "[read_write_lease]") {
  manual_clock clock;
  mstore store(clock);
  holdfast::read_write_lease<mstore, manual_clock> doc(store, "doc", options(clock, "me"));
  auto r = doc.try_acquire_read(1000ms);
  REQUIRE(r);
  CHECK(doc.try_acquire_write(1000ms).error() == errc::busy);
  REQUIRE(r->release());
  auto w = doc.try_acquire_write(1000ms);
  REQUIRE(w);
  CHECK(doc.try_acquire_read(1000ms).error() == errc::busy);  // nor a downgrade
}

TEST_CASE("a shared lease is kept alive by a keepalive", "[read_write_lease]") {
  self_advancing_clock clock;
  holdfast::memory_store<self_advancing_clock> store(clock);
  holdfast::read_write_lease<holdfast::memory_store<self_advancing_clock>, self_advancing_clock>
      doc(store, "doc", options(clock));
  holdfast::keepalive_options ko;
  ko.start_thread = false;
  holdfast::keepalive<self_advancing_clock> ka(clock, ko);
  auto r = doc.try_acquire_read(1000ms);
  REQUIRE(r);
  REQUIRE(ka.add(*r));
  const auto until = clock.now() + 5s;
  while (clock.now() < until) {
    auto next = ka.poll();
    clock.sleep_until(next && *next < until ? *next : until);
  }
  CHECK(r->valid());
  CHECK(doc.try_acquire_write(100ms).error() == errc::busy);
  REQUIRE(r->release());
  CHECK(doc.try_acquire_write(100ms));
}

TEST_CASE("bad input is invalid_argument and reaches no store", "[read_write_lease]") {
  manual_clock clock;
  mstore store(clock);
  holdfast::read_write_lease<mstore, manual_clock> empty(store, "", options(clock));
  CHECK(empty.try_acquire_read(1000ms).error() == errc::invalid_argument);
  CHECK(empty.try_acquire_write(1000ms).error() == errc::invalid_argument);
  holdfast::read_write_lease<mstore, manual_clock> doc(store, "doc", options(clock));
  CHECK(doc.try_acquire_read(0ms).error() == errc::invalid_argument);
  CHECK(doc.acquire_write(-5ms, 1s).error() == errc::invalid_argument);
  CHECK(doc.key() == "doc");
}

}  // namespace test_read_write_lease
