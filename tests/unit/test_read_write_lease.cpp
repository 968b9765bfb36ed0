// SPDX-License-Identifier: MIT
// read_write_lease.hpp: shared and exclusive leases over memory_store's read-write capability:
// readers together, a writer alone, RAII release, the blocking writer whose intent keeps new
// readers out until it wins, no upgrade in place, keepalive on a shared lease, bad input.
// Time is a self_advancing_clock or a manual_clock. And rw_checker.hpp on hand-written histories:
// the false positive the first rapidcheck run found (a re-ask after the instant the store surely
// held a grant is still that grant), kept with its verdict, beside the violations it must still
// report. The simulator's read-write phase with restarts from lagging copies (a lost grant loses
// shared grants too): the shipped code clean, writer_while_reader still caught. Cost: ~1 s.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "holdfast/clock.hpp"
#include "holdfast/keepalive.hpp"
#include "holdfast/read_write_lease.hpp"
#include "holdfast/stores/memory.hpp"
#include "holdfast/testing/rw_checker.hpp"
#include "holdfast/testing/rw_workload.hpp"

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

// ------------------------------------------------------------------------------------------------
// rw_checker.hpp on hand-written histories (store clock in ms; one read-write key K).
// ------------------------------------------------------------------------------------------------

namespace ht = holdfast::testing;

// A store event on key `k` (0: r/K, 1: w/K) at store time `ms`, outcome 0, with TTL `ttl` ms.
ht::event rw_event(ht::event_kind kind, std::uint8_t k, std::int64_t ms, const char* owner,
                   std::uint64_t token, std::int64_t ttl = 10) {
  ht::event e;
  e.kind = kind;
  e.key = k;
  e.true_ns = e.local_ns = e.store_ns = ms * 1000000;
  e.owner = owner;
  e.token = token;
  e.ttl_ms = ttl;
  return e;
}

ht::history rw_history(std::vector<ht::event> events) {
  ht::history h;
  h.keys = {"r/K", "w/K"};
  h.events = std::move(events);
  return h;
}

constexpr auto acq = ht::event_kind::store_acquire;
constexpr auto rel = ht::event_kind::store_release;

TEST_CASE("rw_checker: a re-ask past the sure instant is the same grant, not a reissued token",
          "[read_write_lease][rw_checker]") {
  // The input the first 3,000-tape rapidcheck run reduced to (efe15f1): reader A granted token 5
  // for 10 ms at store time 0; the store still held it at 15 ms (it may, up to two ticks and any
  // tolerance past the TTL, T2) and answered A's re-ask with the same token. The checker had
  // dropped the grant at 10 ms and judged the re-ask a new grant whose token 5 is not above 5:
  // "read-write tokens". Expected verdict: clean.
  const ht::history h = rw_history({rw_event(acq, 0, 0, "A", 5), rw_event(acq, 0, 15, "A", 5),
                                    rw_event(rel, 0, 16, "A", 5), rw_event(acq, 1, 17, "W", 6)});
  const ht::rw_finding f = ht::check_read_write(h);
  INFO(f.what);
  CHECK(f.ok());
}

TEST_CASE("rw_checker: what the fix must still report", "[read_write_lease][rw_checker]") {
  // Another owner given the expired grant's token: a reissued token.
  ht::rw_finding f =
      ht::check_read_write(rw_history({rw_event(acq, 0, 0, "A", 5), rw_event(acq, 0, 15, "B", 5)}));
  CHECK(f.property == "read-write tokens");
  // A writer granted 1 ms before the reader's TTL ends: exclusion; at the TTL: clean.
  f = ht::check_read_write(rw_history({rw_event(acq, 0, 0, "A", 5), rw_event(acq, 1, 9, "W", 6)}));
  CHECK(f.property == "read-write exclusion");
  f = ht::check_read_write(rw_history({rw_event(acq, 0, 0, "A", 5), rw_event(acq, 1, 10, "W", 6)}));
  CHECK(f.ok());
  // The same owner's re-ask in the other mode is a new grant: a writer beside its own reader.
  f = ht::check_read_write(rw_history({rw_event(acq, 0, 0, "A", 5), rw_event(acq, 1, 5, "A", 6)}));
  CHECK(f.property == "read-write exclusion");
  // A reader's token admitted by the resource: fenced write order.
  ht::event w = rw_event(ht::event_kind::write, 1, 12, "A", 5);
  f = ht::check_read_write(rw_history({rw_event(acq, 0, 0, "A", 5), w}));
  CHECK(f.property == "fenced write order");
}

TEST_CASE("rw sim: a store that loses its newest grants, shared ones included",
          "[read_write_lease][rw_sim]") {
  std::uint32_t lost = 0;
  for (std::uint64_t seed = 0; seed < 30; ++seed) {
    ht::seeded_source src(seed);
    const ht::rw_verdict v = ht::run_rw_schedule(src, ht::rw_mutation::none, true);
    INFO("seed " << seed << ": " << v.rw.what << "\n" << v.base.report());
    REQUIRE(v.ok());
    lost += v.lost_lives;
  }
  CHECK(lost > 0);  // the fault happened: grants were lost
  // The negative control: a writer granted while a reader lives, caught under the same fault.
  bool caught = false;
  for (std::uint64_t seed = 0; seed < 30 && !caught; ++seed) {
    ht::seeded_source src(seed);
    const ht::rw_verdict v = ht::run_rw_schedule(src, ht::rw_mutation::writer_while_reader, true);
    caught = !v.rw.ok();
    if (caught) CHECK(v.rw.property == "read-write exclusion");
  }
  CHECK(caught);
  // The lost grants' own control: a resource that admits a token equal to the newest it admitted
  // from another owner (no token_reissued). A lost writer's token, issued again to the next
  // writer, lets both write: S1 catches it (6.7% of lossy schedules, first at seed 52), and
  // only with lost grants (never in 100 lossless schedules: no token is issued twice).
  std::uint64_t caught_at = 0;
  for (caught = false; caught_at < 300 && !caught; ++caught_at) {
    ht::seeded_source src(caught_at);
    const ht::rw_verdict v = ht::run_rw_schedule(src, ht::rw_mutation::admits_reissued, true);
    caught = !v.ok();
    if (caught) {
      INFO(v.base.report());
      CHECK(v.rw.ok());
      CHECK(v.base.report().find("two holders under one token") != std::string::npos);
    }
  }
  CHECK(caught);
  CHECK(caught_at <= 100);
  for (std::uint64_t seed = 0; seed < 100; ++seed) {
    ht::seeded_source src(seed);
    CHECK(ht::run_rw_schedule(src, ht::rw_mutation::admits_reissued, false).ok());
  }
}

}  // namespace test_read_write_lease
