// SPDX-License-Identifier: MIT
// store.hpp's read-write capability (RW1-RW4) on memory_store (stores/detail/memory_shared.hpp):
// readers coexist, a writer excludes everyone, tokens come from the store's one counter, the
// same owner's re-ask is the same grant, no upgrade or downgrade in place, the write intent that
// keeps readers from starving a writer and its bound, each instant checked one tick before, at
// and after. Cost: a few milliseconds.
#include <catch2/catch.hpp>

#include <chrono>

#include "holdfast/clock.hpp"
#include "holdfast/store.hpp"
#include "holdfast/stores/memory.hpp"

namespace test_memory_shared {

using holdfast::errc;
using holdfast::fencing_token;
using holdfast::lease_mode;
using holdfast::manual_clock;
using namespace std::chrono_literals;
using ms = std::chrono::milliseconds;
using store_type = holdfast::memory_store<manual_clock>;

static_assert(holdfast::has_read_write_v<store_type>);
static_assert(holdfast::has_read_write_v<holdfast::memory_store<>>);
static_assert(!holdfast::has_read_write_v<int>);

constexpr lease_mode shared = lease_mode::shared;
constexpr lease_mode exclusive = lease_mode::exclusive;

TEST_CASE("readers coexist, each with its own token; a writer waits for all", "[memory_shared]") {
  manual_clock clock;
  store_type store(clock);
  auto a = store.try_acquire_rw("k", "a", 100ms, shared);
  auto b = store.try_acquire_rw("k", "b", 100ms, shared);
  REQUIRE(a);
  REQUIRE(b);
  CHECK(a->token < b->token);
  CHECK(store.try_acquire_rw("k", "w", 100ms, exclusive).error() == errc::busy);
  REQUIRE(store.release_rw("k", "a", a->token, shared));
  CHECK(store.try_acquire_rw("k", "w", 100ms, exclusive).error() == errc::busy);
  REQUIRE(store.release_rw("k", "b", b->token, shared));
  auto w = store.try_acquire_rw("k", "w", 100ms, exclusive);
  REQUIRE(w);
  CHECK(w->token > b->token);  // RW2: greater than every earlier token
  CHECK(store.try_acquire_rw("k", "c", 100ms, shared).error() == errc::busy);
  CHECK(store.try_acquire_rw("k", "x", 100ms, exclusive).error() == errc::busy);
  REQUIRE(store.release_rw("k", "w", w->token, exclusive));
  auto c = store.try_acquire_rw("k", "c", 100ms, shared);
  REQUIRE(c);
  CHECK(c->token > w->token);  // the reader saw the writer's data
}

TEST_CASE("tokens come from the store's one counter, shared with plain leases", "[memory_shared]") {
  manual_clock clock;
  store_type store(clock);
  auto plain = store.try_acquire("k", "a", 100ms);
  REQUIRE(plain);
  auto r = store.try_acquire_rw("k", "a", 100ms, shared);  // another name space: not busy
  REQUIRE(r);
  CHECK(r->token > plain->token);
  auto p2 = store.try_acquire("k2", "a", 100ms);
  REQUIRE(p2);
  CHECK(p2->token > r->token);
}

TEST_CASE("the same owner's re-ask is the same grant, extended; the other mode is busy",
          "[memory_shared]") {
  manual_clock clock;
  store_type store(clock);
  auto r = store.try_acquire_rw("k", "a", 100ms, shared);
  REQUIRE(r);
  clock.advance(60ms);
  auto again = store.try_acquire_rw("k", "a", 100ms, shared);
  REQUIRE(again);
  CHECK(again->token == r->token);
  CHECK(store.try_acquire_rw("k", "a", 100ms, exclusive).error() == errc::busy);  // no upgrade
  clock.advance(99ms);  // 159 ms: alive by the re-ask's extension (60 + 100)
  CHECK(store.renew_rw("k", "a", r->token, 100ms, shared));
  REQUIRE(store.release_rw("k", "a", r->token, shared));
  auto w = store.try_acquire_rw("k", "a", 100ms, exclusive);
  REQUIRE(w);
  CHECK(store.try_acquire_rw("k", "a", 100ms, exclusive)->token == w->token);
  CHECK(store.try_acquire_rw("k", "a", 100ms, shared).error() == errc::busy);  // no downgrade
}

TEST_CASE("owner, token and mode checks on renew and release (T3)", "[memory_shared]") {
  manual_clock clock;
  store_type store(clock);
  auto r = store.try_acquire_rw("k", "a", 100ms, shared);
  REQUIRE(r);
  CHECK(store.renew_rw("k", "b", r->token, 100ms, shared).error() == errc::lease_lost);
  CHECK(store.renew_rw("k", "a", r->token, 100ms, exclusive).error() == errc::lease_lost);
  CHECK(store.renew_rw("k", "a", fencing_token(r->token.value() + 1), 100ms, shared).error() ==
        errc::lease_lost);
  CHECK(store.release_rw("k", "b", r->token, shared).error() == errc::not_holder);
  CHECK(store.release_rw("k", "a", r->token, exclusive).error() == errc::not_holder);
  CHECK(store.renew_rw("k", "a", r->token, 100ms, shared));
  REQUIRE(store.release_rw("k", "a", r->token, shared));
  CHECK(store.release_rw("k", "a", r->token, shared).error() == errc::not_holder);
}

TEST_CASE("bad input is invalid_argument and changes nothing", "[memory_shared]") {
  manual_clock clock;
  store_type store(clock);
  const auto bad = static_cast<lease_mode>(7);
  CHECK(store.try_acquire_rw("k", "a", 100ms, bad).error() == errc::invalid_argument);
  CHECK(store.try_acquire_rw("", "a", 100ms, shared).error() == errc::invalid_argument);
  CHECK(store.try_acquire_rw("k", "", 100ms, shared).error() == errc::invalid_argument);
  CHECK(store.try_acquire_rw("k", "a", 0ms, shared).error() == errc::invalid_argument);
  CHECK(store.renew_rw("k", "a", fencing_token{}, 10ms, shared).error() == errc::invalid_argument);
  CHECK(store.release_rw("k", "a", fencing_token(1), bad).error() == errc::invalid_argument);
  CHECK(store.try_acquire_rw("k", "a", 100ms, exclusive)->token == fencing_token(1));
}

TEST_CASE("expiry by the store's clock: one tick before, at and after", "[memory_shared]") {
  manual_clock clock;
  store_type store(clock);
  auto r = store.try_acquire_rw("k", "a", 100ms, shared);
  REQUIRE(r);
  clock.advance(99ms);
  CHECK(store.try_acquire_rw("k", "w", 100ms, exclusive).error() == errc::busy);
  clock.advance(1ms);  // at 100 ms the reader has expired
  CHECK(store.renew_rw("k", "a", r->token, 100ms, shared).error() == errc::lease_lost);
  auto w = store.try_acquire_rw("k", "w", 50ms, exclusive);
  REQUIRE(w);
  clock.advance(49ms);
  CHECK(store.try_acquire_rw("k", "b", 10ms, shared).error() == errc::busy);
  clock.advance(1ms);
  CHECK(store.try_acquire_rw("k", "b", 10ms, shared));
  CHECK(store.release_rw("k", "a", r->token, shared).error() == errc::not_holder);  // pruned
}

TEST_CASE("a refused writer's intent blocks new readers for the TTL it asked (RW4)",
          "[memory_shared]") {
  manual_clock clock;
  store_type store(clock);
  auto a = store.try_acquire_rw("k", "a", 1000ms, shared);
  REQUIRE(a);
  CHECK(store.try_acquire_rw("k", "w", 100ms, exclusive).error() == errc::busy);  // intent
  CHECK(store.try_acquire_rw("k", "b", 100ms, shared).error() == errc::busy);
  CHECK(store.try_acquire_rw("k", "a", 1000ms, shared)->token == a->token);       // a re-ask still
  CHECK(store.renew_rw("k", "a", a->token, 1000ms, shared));                      // and a renew
  CHECK(store.try_acquire_rw("k", "v", 100ms, exclusive).error() == errc::busy);  // no 2nd intent
  clock.advance(99ms);
  CHECK(store.try_acquire_rw("k", "b", 100ms, shared).error() == errc::busy);
  clock.advance(1ms);  // 100 ms: the intent has lapsed, since w did not ask again
  auto b = store.try_acquire_rw("k", "b", 100ms, shared);
  REQUIRE(b);
  CHECK(store.try_acquire_rw("k", "w", 100ms, exclusive).error() == errc::busy);  // again
  REQUIRE(store.release_rw("k", "a", a->token, shared));
  REQUIRE(store.release_rw("k", "b", b->token, shared));
  CHECK(store.try_acquire_rw("k", "c", 100ms, shared).error() == errc::busy);  // w's turn
  auto w = store.try_acquire_rw("k", "w", 100ms, exclusive);
  REQUIRE(w);
  REQUIRE(store.release_rw("k", "w", w->token, exclusive));
  CHECK(store.try_acquire_rw("k", "c", 100ms, shared));  // the grant ended the intent
}

TEST_CASE("a reader that asks to write records no intent (it would wait on itself)",
          "[memory_shared]") {
  manual_clock clock;
  store_type store(clock);
  auto a = store.try_acquire_rw("k", "a", 100ms, shared);
  REQUIRE(a);
  CHECK(store.try_acquire_rw("k", "a", 100ms, exclusive).error() == errc::busy);
  CHECK(store.try_acquire_rw("k", "b", 100ms, shared));
}

TEST_CASE("token exhaustion is reported before anything changes", "[memory_shared]") {
  manual_clock clock;
  holdfast::memory_store_options o;
  o.last_issued = fencing_token(fencing_token::max().value() - 2);
  store_type store(clock, o);
  auto r = store.try_acquire_rw("k", "a", 100ms, shared);
  REQUIRE(r);
  CHECK(store.try_acquire_rw("k", "b", 100ms, shared).error() == errc::token_exhausted);
  CHECK(store.try_acquire_rw("k", "a", 100ms, shared)->token == r->token);  // re-ask still works
}

}  // namespace test_memory_shared
