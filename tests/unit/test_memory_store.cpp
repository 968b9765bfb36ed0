// SPDX-License-Identifier: MIT
// Unit tests for holdfast/stores/memory.hpp: the in-process LeaseStore. Time is a manual_clock
// throughout; nothing sleeps.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "holdfast/clock.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/stores/memory.hpp"
#include "test_support.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_memory_store {

using holdfast::errc;
using holdfast::fencing_token;
using holdfast::manual_clock;
using holdfast_test::record_of;
using holdfast_test::same_record;
using namespace std::chrono_literals;
using ms = std::chrono::milliseconds;
using store_t = holdfast::memory_store<manual_clock>;

namespace {

constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();

store_t make_store(manual_clock c, std::uint64_t last_issued) {
  holdfast::memory_store_options o;
  o.last_issued = fencing_token(last_issued);
  return store_t(std::move(c), o);
}

}  // namespace

TEST_CASE("a free key is granted with the next token", "[memory_store]") {
  manual_clock clock;
  store_t store(clock);
  CHECK(store.last_token().is_none());
  auto g = store.try_acquire("orders", "A", 10s);
  REQUIRE(g);
  CHECK(g->token == fencing_token(1));
  CHECK(g->ttl == 10s);
  CHECK(store.last_token() == fencing_token(1));
  CHECK(store.size() == 1);
  const auto rec = record_of(store, "orders");
  REQUIRE(rec);
  CHECK(rec->owner == "A");
  CHECK(rec->token == fencing_token(1));
  CHECK(rec->remaining == 10s);
}

TEST_CASE("a live lease makes other owners busy, without changing anything", "[memory_store]") {
  manual_clock clock;
  store_t store(clock);
  REQUIRE(store.try_acquire("orders", "A", 10s));
  clock.advance(10s - 1ns);  // the last nanosecond of A's lease
  const auto before = record_of(store, "orders");
  auto b = store.try_acquire("orders", "B", 10s);
  REQUIRE_FALSE(b);
  CHECK(b.error() == errc::busy);
  CHECK(holdfast::is_contention(b.error()));
  CHECK(same_record(before, record_of(store, "orders")));
  CHECK(store.last_token() == fencing_token(1));  // busy consumed no token
}

TEST_CASE("the same owner re-acquiring its live lease gets the same token, extended",
          "[memory_store]") {
  manual_clock clock;
  store_t store(clock);
  auto first = store.try_acquire("orders", "A", 10s);
  REQUIRE(first);
  clock.advance(8s);
  auto again = store.try_acquire("orders", "A", 10s);  // e.g. a retry after a lost reply
  REQUIRE(again);
  CHECK(again->token == first->token);
  CHECK(again->ttl == 10s);
  CHECK(store.last_token() == first->token);  // no token spent
  clock.advance(9s);                          // t = 17 s: past the first TTL, inside the second
  CHECK(store.try_acquire("orders", "B", 10s).error() == errc::busy);
  clock.advance(1s);  // t = 18 s = 8 s + 10 s: expired
  auto b = store.try_acquire("orders", "B", 10s);
  REQUIRE(b);
  CHECK(b->token > first->token);
}

TEST_CASE("re-acquiring with a shorter TTL never shortens a live lease", "[memory_store]") {
  manual_clock clock;
  store_t store(clock);
  REQUIRE(store.try_acquire("orders", "A", 10s));
  auto again = store.try_acquire("orders", "A", 1s);
  REQUIRE(again);
  CHECK(again->ttl == 1s);  // what the holder may rely on
  clock.advance(5s);        // the store still honours the earlier, longer grant
  CHECK(store.try_acquire("orders", "B", 1s).error() == errc::busy);
}

TEST_CASE("a lease expires exactly TTL after the grant, by the store's clock", "[memory_store]") {
  manual_clock clock;
  store_t store(clock);
  REQUIRE(store.try_acquire("orders", "A", 1500ms));
  clock.advance(1500ms - 1ns);
  CHECK(record_of(store, "orders"));
  clock.advance(1ns);
  CHECK_FALSE(record_of(store, "orders"));  // inspect reports an expired lease as none
  CHECK(store.size() == 1);                 // ... though the record is not swept yet
}

TEST_CASE("an expired record is taken over in place, with a newer token", "[memory_store]") {
  manual_clock clock;
  store_t store(clock);
  auto a = store.try_acquire("orders", "A", 10s);
  REQUIRE(a);
  clock.advance(11s);
  auto b = store.try_acquire("orders", "B", 10s);
  REQUIRE(b);
  CHECK(b->token > a->token);
  CHECK(store.size() == 1);
  const auto rec = record_of(store, "orders");
  REQUIRE(rec);
  CHECK(rec->owner == "B");
  CHECK(rec->token == b->token);
  // The old holder can neither renew nor release B's lease.
  CHECK(store.renew("orders", "A", a->token, 10s).error() == errc::lease_lost);
  CHECK(store.release("orders", "A", a->token).error() == errc::not_holder);
  CHECK(same_record(rec, record_of(store, "orders")));
  // Even the previous holder re-acquiring after expiry gets a new token, not its old one.
  clock.advance(11s);
  auto a2 = store.try_acquire("orders", "A", 10s);
  REQUIRE(a2);
  CHECK(a2->token > b->token);
}

TEST_CASE("renew extends a live lease for its holder only", "[memory_store]") {
  manual_clock clock;
  store_t store(clock);
  auto a = store.try_acquire("orders", "A", 10s);
  REQUIRE(a);
  clock.advance(9s);
  auto r = store.renew("orders", "A", a->token, 10s);
  REQUIRE(r);
  CHECK(r->token == a->token);
  CHECK(r->ttl == 10s);
  CHECK(record_of(store, "orders")->remaining == 10s);
  // Renew may also shorten: it sets now + ttl.
  REQUIRE(store.renew("orders", "A", a->token, 1s));
  CHECK(record_of(store, "orders")->remaining == 1s);
  REQUIRE(store.renew("orders", "A", a->token, 10s));

  const auto before = record_of(store, "orders");
  SECTION("wrong owner") {
    CHECK(store.renew("orders", "B", a->token, 10s).error() == errc::lease_lost);
  }
  SECTION("wrong token") {
    CHECK(store.renew("orders", "A", fencing_token(a->token.value() + 1), 10s).error() ==
          errc::lease_lost);
  }
  SECTION("wrong key") {
    CHECK(store.renew("invoices", "A", a->token, 10s).error() == errc::lease_lost);
    CHECK_FALSE(record_of(store, "invoices"));
  }
  CHECK(same_record(before, record_of(store, "orders")));
  CHECK(store.last_token() == a->token);
}

TEST_CASE("renew after expiry is lease_lost and never revives the lease", "[memory_store]") {
  manual_clock clock;
  store_t store(clock);
  auto a = store.try_acquire("orders", "A", 10s);
  REQUIRE(a);
  clock.advance(10s);  // exactly the expiry instant
  CHECK(store.renew("orders", "A", a->token, 10s).error() == errc::lease_lost);
  CHECK_FALSE(record_of(store, "orders"));
  clock.advance(1h);
  CHECK(store.renew("orders", "A", a->token, 10s).error() == errc::lease_lost);
  CHECK_FALSE(record_of(store, "orders"));
  // The key is free for anyone.
  auto b = store.try_acquire("orders", "B", 10s);
  REQUIRE(b);
  CHECK(b->token > a->token);
}

TEST_CASE("release frees the key for its holder only", "[memory_store]") {
  manual_clock clock;
  store_t store(clock);
  auto a = store.try_acquire("orders", "A", 10s);
  REQUIRE(a);
  const auto before = record_of(store, "orders");

  CHECK(store.release("orders", "B", a->token).error() == errc::not_holder);
  CHECK(store.release("orders", "A", fencing_token(a->token.value() + 1)).error() ==
        errc::not_holder);
  CHECK(store.release("orders", "B", fencing_token(77)).error() == errc::not_holder);
  CHECK(store.release("invoices", "A", a->token).error() == errc::not_holder);
  CHECK(same_record(before, record_of(store, "orders")));
  CHECK(store.size() == 1);

  REQUIRE(store.release("orders", "A", a->token));
  CHECK_FALSE(record_of(store, "orders"));
  CHECK(store.size() == 0);  // released records are dropped at once
  // Twice: the record is gone.
  CHECK(store.release("orders", "A", a->token).error() == errc::not_holder);
  // The next grant, of any key, gets a newer token (the counter is store-wide, not per record).
  auto b = store.try_acquire("orders", "B", 10s);
  REQUIRE(b);
  CHECK(b->token > a->token);
}

TEST_CASE("the holder may release its expired lease until someone takes it over",
          "[memory_store]") {
  manual_clock clock;
  store_t store(clock);
  auto a = store.try_acquire("orders", "A", 10s);
  REQUIRE(a);
  clock.advance(1h);
  REQUIRE(store.release("orders", "A", a->token));
  CHECK(store.size() == 0);
}

TEST_CASE("tokens increase store-wide across keys, releases and expiries", "[memory_store]") {
  manual_clock clock;
  store_t store(clock);
  std::vector<fencing_token> seen;
  for (int round = 0; round < 50; ++round) {
    const std::string key = "k" + std::to_string(round % 3);
    auto g = store.try_acquire(key, "owner" + std::to_string(round), 10s);
    REQUIRE(g);
    seen.push_back(g->token);
    if (round % 2 == 0) {
      REQUIRE(store.release(key, "owner" + std::to_string(round), g->token));
    } else {
      clock.advance(10s);  // let it expire instead
    }
  }
  for (std::size_t i = 1; i < seen.size(); ++i) CHECK(seen[i - 1] < seen[i]);
  CHECK(store.last_token() == seen.back());
}

TEST_CASE("memory_store_options::last_issued sets where tokens continue", "[memory_store]") {
  manual_clock clock;
  store_t store = make_store(clock, 32);
  auto g = store.try_acquire("orders", "A", 10s);
  REQUIRE(g);
  CHECK(g->token == fencing_token(33));  // the README timeline's A
}

TEST_CASE("a counter near UINT64_MAX issues up to max-1, then token_exhausted changing nothing",
          "[memory_store]") {
  manual_clock clock;
  store_t store = make_store(clock, kMax - 2);
  auto last = store.try_acquire("a", "A", 10s);
  REQUIRE(last);
  CHECK(last->token == fencing_token(kMax - 1));  // the greatest issuable token
  CHECK(last->token.is_issuable());

  auto exhausted = store.try_acquire("b", "B", 10s);
  REQUIRE_FALSE(exhausted);
  CHECK(exhausted.error() == errc::token_exhausted);
  CHECK_FALSE(record_of(store, "b"));
  CHECK(store.size() == 1);
  CHECK(store.last_token() == fencing_token(kMax - 1));

  // The holder keeps working: re-acquire, renew and release need no new token.
  auto again = store.try_acquire("a", "A", 10s);
  REQUIRE(again);
  CHECK(again->token == last->token);
  REQUIRE(store.renew("a", "A", last->token, 10s));
  REQUIRE(store.release("a", "A", last->token));
  // Taking over an expired record needs a token too.
  REQUIRE(store.try_acquire("a", "A", 10s).error() == errc::token_exhausted);
  CHECK(store.size() == 0);
}

TEST_CASE("last_issued of max-1 or max exhausts the counter at once", "[memory_store]") {
  for (std::uint64_t start : {kMax - 1, kMax}) {
    manual_clock clock;
    store_t store = make_store(clock, start);
    CHECK(store.try_acquire("a", "A", 10s).error() == errc::token_exhausted);
    CHECK(store.size() == 0);
    CHECK(store.last_token() == fencing_token(start));
  }
}

TEST_CASE("bad arguments are invalid_argument and change nothing", "[memory_store]") {
  manual_clock clock;
  store_t store(clock);
  auto a = store.try_acquire("orders", "A", 10s);
  REQUIRE(a);
  const auto before = record_of(store, "orders");
  const std::error_code bad = errc::invalid_argument;

  CHECK(store.try_acquire("", "A", 10s).error() == bad);
  CHECK(store.try_acquire("x", "", 10s).error() == bad);
  CHECK(store.try_acquire("x", "A", 0ms).error() == bad);
  CHECK(store.try_acquire("x", "A", -1ms).error() == bad);
  CHECK(store.try_acquire("x", "A", holdfast::max_ttl + 1ms).error() == bad);
  CHECK(store.try_acquire("x", "A", ms::max()).error() == bad);
  // Bad arguments are reported as such even for a held key (checked before anything else).
  CHECK(store.try_acquire("orders", "A", 0ms).error() == bad);

  CHECK(store.renew("orders", "A", a->token, 0ms).error() == bad);
  CHECK(store.renew("orders", "A", fencing_token{}, 10s).error() == bad);
  CHECK(store.renew("orders", "A", fencing_token::max(), 10s).error() == bad);
  CHECK(store.renew("orders", "", a->token, 10s).error() == bad);
  CHECK(store.renew("", "A", a->token, 10s).error() == bad);

  CHECK(store.release("orders", "A", fencing_token{}).error() == bad);
  CHECK(store.release("orders", "A", fencing_token::max()).error() == bad);
  CHECK(store.release("", "A", a->token).error() == bad);
  CHECK(store.release("orders", "", a->token).error() == bad);

  CHECK(store.inspect("").error() == bad);

  CHECK(same_record(before, record_of(store, "orders")));
  CHECK(store.size() == 1);
  CHECK(store.last_token() == a->token);
}

TEST_CASE("keys and owners are binary-safe", "[memory_store]") {
  manual_clock clock;
  store_t store(clock);
  const std::string_view k1("a\0b", 3), k2("a\0c", 3), o1("\0x", 2), o2("\0y", 2);
  auto g1 = store.try_acquire(k1, o1, 10s);
  REQUIRE(g1);
  auto g2 = store.try_acquire(k2, o2, 10s);  // a different key, despite the common prefix
  REQUIRE(g2);
  CHECK(store.try_acquire(k1, o2, 10s).error() == errc::busy);  // a different owner
  CHECK(store.try_acquire("a", o1, 10s));                       // "a" is yet another key
  CHECK(record_of(store, k1)->owner == std::string(o1));
  CHECK(store.release(k1, o2, g1->token).error() == errc::not_holder);
  CHECK(store.release(k1, o1, g1->token));
}

TEST_CASE("inspect reports the remaining time rounded down to milliseconds", "[memory_store]") {
  manual_clock clock;
  store_t store(clock);
  REQUIRE(store.try_acquire("orders", "A", 1000ms));
  clock.advance(1ns);
  CHECK(record_of(store, "orders")->remaining == 999ms);
  clock.set(manual_clock::time_point(1000ms - 1ns));
  CHECK(record_of(store, "orders")->remaining == 0ms);  // live, with under a millisecond left
  clock.advance(1ns);
  CHECK_FALSE(record_of(store, "orders"));
}

TEST_CASE("expiry saturates near the clock's time_point::max", "[memory_store]") {
  manual_clock clock;
  clock.set(manual_clock::time_point::max() - 1ms);
  store_t store(clock);
  auto a = store.try_acquire("orders", "A", holdfast::max_ttl);  // now + ttl overflows: clamped
  REQUIRE(a);
  CHECK(record_of(store, "orders")->remaining == 1ms);
  CHECK(store.try_acquire("orders", "B", 10s).error() == errc::busy);
  REQUIRE(store.renew("orders", "A", a->token, 10s));
  clock.advance(1ms);  // at time_point::max() nothing is "before" the expiry any more
  CHECK_FALSE(record_of(store, "orders"));
  auto b = store.try_acquire("orders", "B", 10s);
  REQUIRE(b);
  CHECK(b->token > a->token);
}

TEST_CASE("a coarse store clock never holds a lease for less than the TTL it granted",
          "[memory_store]") {
  // The store's clock has a duration of whole seconds (tick 1 s). A 1500 ms grant read at 0 s is
  // held until the clock reads 0 + 2 s (1500 ms rounded up to the tick) + 1 s (the tick the read
  // may lag) = 3 s, so for at least 1500 ms of real time wherever in the tick it was made.
  holdfast_test::coarse_clock clock;
  holdfast::memory_store<holdfast_test::coarse_clock> store(clock);
  CHECK(holdfast::clock_tick(clock) == 1s);
  clock.fine().set(holdfast::manual_clock::time_point(999ms));  // read as 0 s
  auto a = store.try_acquire("orders", "A", 1500ms);
  REQUIRE(a);
  CHECK(a->ttl == 1500ms);
  clock.fine().set(holdfast::manual_clock::time_point(3s - 1ns));
  CHECK(store.try_acquire("orders", "B", 1500ms).error() == errc::busy);
  clock.fine().set(holdfast::manual_clock::time_point(3s));
  CHECK(store.try_acquire("orders", "B", 1500ms));

  // The same holds for renew, and for a TTL below one tick: 1 ms read at 3 s holds until 5 s.
  auto r = store.try_acquire("renewed", "A", 1500ms);
  REQUIRE(r);
  REQUIRE(store.renew("renewed", "A", r->token, 1ms));
  clock.fine().set(holdfast::manual_clock::time_point(5s - 1ns));
  CHECK(store.try_acquire("renewed", "B", 1500ms).error() == errc::busy);
  clock.fine().set(holdfast::manual_clock::time_point(5s));
  CHECK(store.try_acquire("renewed", "B", 1500ms));
}

TEST_CASE("a store clock reading whole seconds holds a grant for its TTL in real time",
          "[memory_store]") {
  // Issue input (time at the edges, 1): the store's clock reads true time rounded down to whole
  // seconds; the holder's clock is exact; default validity options (1%, 2 ms).
  //   t = 0.7 s: A try_acquire(k, 1500 ms) -> granted (read as 0 s; held until the clock reads
  //              2.5 s, i.e. true time 3.0 s)
  //   t = 2.0 s: B try_acquire(k) -> busy (before: granted, while A.valid() was true until 2.183 s)
  manual_clock truth;
  holdfast_test::rounding_clock store_clock(truth, 1s);
  holdfast::memory_store<holdfast_test::rounding_clock> store(store_clock);
  holdfast::acquire_options<manual_clock> o;
  o.clock = truth;
  o.owner = "A";
  truth.set(manual_clock::time_point(700ms));
  auto a = holdfast::try_acquire(store, "k", 1500ms, o);
  REQUIRE(a);
  CHECK(a->valid_until() == manual_clock::time_point(2183ms - 1ns));  // 0.7 + 1.485 - 0.002
  truth.set(manual_clock::time_point(2s));
  CHECK(store.try_acquire("k", "B", 1500ms).error() == errc::busy);
  for (const std::chrono::nanoseconds t :
       {2183ms - 2ns, 2183ms - 1ns, 2183ms - 0ns}) {  // one tick around A's validity end
    truth.set(manual_clock::time_point(t));
    CHECK(store.try_acquire("k", "B", 1500ms).error() == errc::busy);
  }
  CHECK_FALSE(a->valid());
  // Freed at true time 3.0 s (2.3 s after the grant): one tick before, at, after.
  truth.set(manual_clock::time_point(3s - 1ns));
  CHECK(store.try_acquire("k", "B", 1500ms).error() == errc::busy);
  truth.set(manual_clock::time_point(3s));
  auto b = store.try_acquire("k", "B", 1500ms);
  REQUIRE(b);
  CHECK(b->token > a->token());
}

TEST_CASE("a store clock with a 10 ms tick holds a grant for its TTL in real time",
          "[memory_store]") {
  // Issue input (time at the edges, 1): tick 10 ms, TTL 100 ms requested at t = 0.009 s. Before:
  // freed at 0.100 s while A was valid until 0.106 s. Expected: busy until true time 0.110 s
  // (read 0 + 100 ms + 10 ms), A valid until 0.106 s.
  manual_clock truth;
  holdfast_test::rounding_clock store_clock(truth, 10ms);
  holdfast::memory_store<holdfast_test::rounding_clock> store(store_clock);
  holdfast::acquire_options<manual_clock> o;
  o.clock = truth;
  o.owner = "A";
  truth.set(manual_clock::time_point(9ms));
  auto a = holdfast::try_acquire(store, "k", 100ms, o);
  REQUIRE(a);
  CHECK(a->valid_until() == manual_clock::time_point(106ms - 1ns));  // 0.009 + 0.099 - 0.002
  for (const std::chrono::nanoseconds t :
       {100ms - 1ns, 100ms - 0ns, 100ms + 1ns, 106ms - 1ns, 106ms - 0ns, 110ms - 1ns}) {
    truth.set(manual_clock::time_point(t));
    CHECK(store.try_acquire("k", "B", 100ms).error() == errc::busy);
  }
  truth.set(manual_clock::time_point(110ms));
  CHECK(store.try_acquire("k", "B", 100ms));
  // inspect() reports what is left for certain: read 110 ms, lease until 220 ms, minus the tick.
  CHECK(record_of(store, "k")->remaining == 100ms);
}

TEST_CASE("memory is proportional to live leases, not to keys ever used", "[memory_store]") {
  manual_clock clock;
  store_t store(clock);
  SECTION("many distinct keys that expire") {
    for (int i = 0; i < 20000; ++i) {
      REQUIRE(store.try_acquire("key" + std::to_string(i), "A", 1ms));
      clock.advance(1ms);  // every earlier lease has expired
    }
    // Swept whenever the map doubles: at most ~2x live (here 1) plus the minimum sweep size.
    CHECK(store.size() <= 65);
  }
  SECTION("many distinct keys that are released") {
    for (int i = 0; i < 20000; ++i) {
      const std::string key = "key" + std::to_string(i);
      auto g = store.try_acquire(key, "A", 10s);
      REQUIRE(g);
      REQUIRE(store.release(key, "A", g->token));
    }
    CHECK(store.size() == 0);
  }
  SECTION("a burst of live leases that then expire") {
    for (int i = 0; i < 5000; ++i) REQUIRE(store.try_acquire("live" + std::to_string(i), "A", 1s));
    CHECK(store.size() == 5000);
    clock.advance(1s);
    for (int i = 0; i < 5000; ++i) {
      REQUIRE(store.try_acquire("next" + std::to_string(i), "A", 1ms));
      clock.advance(1ms);
    }
    CHECK(store.size() <= 65);
  }
  SECTION("live leases are never swept") {
    for (int i = 0; i < 1000; ++i) REQUIRE(store.try_acquire("live" + std::to_string(i), "A", 1h));
    for (int i = 0; i < 1000; ++i) {
      REQUIRE(store.try_acquire("short" + std::to_string(i), "B", 1ms));
      clock.advance(1ms);
    }
    for (int i = 0; i < 1000; ++i) {
      const auto rec = record_of(store, "live" + std::to_string(i));
      REQUIRE(rec);
      CHECK(rec->owner == "A");
    }
    CHECK(store.size() <= 2 * 1000 + 65);
  }
}

TEST_CASE("an exception from the store's clock propagates and leaves the store as it was",
          "[memory_store]") {
  holdfast_test::throwing_clock clock;
  holdfast::memory_store<holdfast_test::throwing_clock> store(clock);
  auto a = store.try_acquire("orders", "A", 10s);
  REQUIRE(a);
  clock.set_failing(true);
  CHECK_THROWS_AS(store.try_acquire("invoices", "B", 10s), holdfast_test::store_failure);
  CHECK_THROWS_AS(store.renew("orders", "A", a->token, 20s), holdfast_test::store_failure);
  CHECK_THROWS_AS(store.inspect("orders"), holdfast_test::store_failure);
  clock.set_failing(false);
  CHECK(store.size() == 1);
  CHECK(store.last_token() == a->token);
  CHECK_FALSE(record_of(store, "invoices"));
  CHECK(record_of(store, "orders")->remaining == 10s);  // the failed renew changed nothing
  // The store is still usable, and its mutex was not left locked.
  CHECK(store.try_acquire("invoices", "B", 10s));
}

TEST_CASE("released records are reused without mixing keys up, in a map large enough to hash",
          "[memory_store]") {
  // Small maps are scanned; this one holds more live keys than that, so every lookup below goes
  // through the hash table, including lookups of keys whose node was recycled from another key.
  manual_clock clock;
  store_t store(clock);
  for (int i = 0; i < 40; ++i) REQUIRE(store.try_acquire("live" + std::to_string(i), "L", 1h));
  std::vector<fencing_token> tokens;
  for (int i = 0; i < 200; ++i) {
    const std::string key = "tmp" + std::to_string(i);
    auto g = store.try_acquire(key, "T", 1h);
    REQUIRE(g);
    tokens.push_back(g->token);
    const auto rec = record_of(store, key);
    REQUIRE(rec);
    CHECK(rec->token == g->token);
    CHECK(store.try_acquire(key, "other", 1h).error() == errc::busy);  // found by its new key
    if (i % 3 != 0) REQUIRE(store.release(key, "T", g->token));        // recycled for the next
  }
  for (int i = 0; i < 200; ++i) {
    const auto rec = record_of(store, "tmp" + std::to_string(i));
    if (i % 3 == 0) {
      REQUIRE(rec);
      CHECK(rec->token == tokens[static_cast<std::size_t>(i)]);
    } else {
      CHECK_FALSE(rec);
    }
  }
  for (int i = 0; i < 40; ++i) {
    const auto rec = record_of(store, "live" + std::to_string(i));
    REQUIRE(rec);
    CHECK(rec->owner == "L");
  }
  CHECK(store.size() == 40 + 67);
}

}  // namespace test_memory_store
