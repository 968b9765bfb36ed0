// Unit tests for holdfast/fence.hpp: admission by fencing token at the resource. fence_gate (one
// resource, lock-free), keyed_fence_gate (many resources), fenced<T> (admit + apply in one step).
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "holdfast/clock.hpp"
#include "holdfast/fence.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/stores/memory.hpp"
#include "test_support.hpp"

using holdfast::errc;
using holdfast::fence_gate;
using holdfast::fenced;
using holdfast::fencing_token;
using holdfast::keyed_fence_gate;
using namespace std::chrono_literals;

namespace {

constexpr std::uint64_t kMax = UINT64_MAX;

fencing_token tok(std::uint64_t v) {
  return fencing_token(v);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// fence_gate
// ---------------------------------------------------------------------------------------------

TEST_CASE("fence_gate admits tokens not older than the newest, equal included", "[fence]") {
  fence_gate gate;
  CHECK(gate.newest().is_none());
  REQUIRE(gate.admit(tok(33)));
  CHECK(gate.newest() == tok(33));
  REQUIRE(gate.admit(tok(33)));  // the same holder writing again
  REQUIRE(gate.admit(tok(34)));
  CHECK(gate.newest() == tok(34));
  REQUIRE(gate.admit(tok(1000)));  // gaps are fine: tokens are store-wide
  CHECK(gate.newest() == tok(1000));
}

TEST_CASE("fence_gate rejects an older token with stale_token and changes nothing", "[fence]") {
  fence_gate gate;
  REQUIRE(gate.admit(tok(34)));
  auto r = gate.admit(tok(33));
  REQUIRE_FALSE(r);
  CHECK(r.error() == errc::stale_token);
  CHECK(gate.newest() == tok(34));
  CHECK(gate.admit(tok(1)).error() == errc::stale_token);
  CHECK(gate.newest() == tok(34));
}

TEST_CASE("fence_gate rejects tokens no store issues, changing nothing", "[fence]") {
  fence_gate gate;
  CHECK(gate.admit(fencing_token{}).error() == errc::invalid_argument);
  CHECK(gate.admit(fencing_token::max()).error() == errc::invalid_argument);
  CHECK(gate.newest().is_none());
  REQUIRE(gate.admit(tok(kMax - 1)));  // the greatest issuable token is fine
  CHECK(gate.newest() == tok(kMax - 1));
  CHECK(gate.admit(fencing_token::max()).error() == errc::invalid_argument);
  CHECK(gate.admit(tok(kMax - 2)).error() == errc::stale_token);
  CHECK(gate.newest() == tok(kMax - 1));
}

TEST_CASE("fence_gate can start from a restored newest token", "[fence]") {
  fence_gate gate(tok(500));
  CHECK(gate.newest() == tok(500));
  CHECK(gate.admit(tok(499)).error() == errc::stale_token);
  REQUIRE(gate.admit(tok(500)));
}

// ---------------------------------------------------------------------------------------------
// keyed_fence_gate
// ---------------------------------------------------------------------------------------------

TEST_CASE("keyed_fence_gate fences each resource independently", "[fence]") {
  keyed_fence_gate gate;
  CHECK(gate.newest("orders").is_none());
  REQUIRE(gate.admit("orders", tok(34)));
  REQUIRE(gate.admit("invoices", tok(10)));  // older than orders' newest, but another resource
  CHECK(gate.admit("orders", tok(33)).error() == errc::stale_token);
  REQUIRE(gate.admit("orders", tok(34)));
  CHECK(gate.newest("orders") == tok(34));
  CHECK(gate.newest("invoices") == tok(10));
  CHECK(gate.newest("unknown").is_none());
}

TEST_CASE("keyed_fence_gate rejects bad input, changing nothing", "[fence]") {
  keyed_fence_gate gate;
  REQUIRE(gate.admit("orders", tok(5)));
  CHECK(gate.admit("", tok(6)).error() == errc::invalid_argument);
  CHECK(gate.admit("orders", fencing_token{}).error() == errc::invalid_argument);
  CHECK(gate.admit("orders", fencing_token::max()).error() == errc::invalid_argument);
  CHECK(gate.admit("fresh", fencing_token::max()).error() == errc::invalid_argument);
  CHECK(gate.newest("orders") == tok(5));
  CHECK(gate.newest("fresh").is_none());
  CHECK(gate.newest("").is_none());
}

TEST_CASE("keyed_fence_gate resource names are binary-safe", "[fence]") {
  keyed_fence_gate gate;
  const std::string_view a("r\0a", 3), b("r\0b", 3);
  REQUIRE(gate.admit(a, tok(9)));
  REQUIRE(gate.admit(b, tok(1)));
  CHECK(gate.newest(a) == tok(9));
  CHECK(gate.newest(b) == tok(1));
  CHECK(gate.newest("r").is_none());
}

// ---------------------------------------------------------------------------------------------
// fenced<T>
// ---------------------------------------------------------------------------------------------

TEST_CASE("fenced<T>::write admits the token and applies fn in one step", "[fence]") {
  fenced<int> balance;
  CHECK(balance.snapshot() == 0);
  CHECK(balance.newest().is_none());
  auto r = balance.write(tok(33), [](int& v) {
    v += 100;
    return v;
  });
  REQUIRE(r);
  CHECK(*r == 100);  // fn's result comes back
  CHECK(balance.newest() == tok(33));
  auto v = balance.write(tok(33), [](int& x) { x += 1; });  // a void fn gives result<void>
  STATIC_REQUIRE(std::is_same_v<decltype(v), holdfast::result<void>>);
  REQUIRE(v);
  CHECK(balance.read([](const int& x) { return x; }) == 101);
}

TEST_CASE("fenced<T>::write with an older token is stale_token and fn is not called", "[fence]") {
  fenced<int> balance;
  REQUIRE(balance.write(tok(34), [](int& v) { v = 1; }));
  bool called = false;
  auto r = balance.write(tok(33), [&](int& v) {
    called = true;
    v = 2;
  });
  REQUIRE_FALSE(r);
  CHECK(r.error() == errc::stale_token);
  CHECK_FALSE(called);
  CHECK(balance.snapshot() == 1);
  CHECK(balance.newest() == tok(34));
}

TEST_CASE("fenced<T>::write rejects tokens no store issues without calling fn", "[fence]") {
  fenced<int> balance;
  bool called = false;
  auto fn = [&](int&) { called = true; };
  CHECK(balance.write(fencing_token{}, fn).error() == errc::invalid_argument);
  CHECK(balance.write(fencing_token::max(), fn).error() == errc::invalid_argument);
  CHECK_FALSE(called);
  CHECK(balance.newest().is_none());
}

TEST_CASE("fenced<T>::write admits the token even when fn throws", "[fence]") {
  // Admission is the commit point: fn may have changed the value before it threw, so an older
  // token admitted afterwards would write over a newer holder's (partial) write, breaking S1.
  fenced<std::vector<int>> log;
  REQUIRE(log.write(tok(5), [](std::vector<int>& v) { v.push_back(5); }));
  CHECK_THROWS_AS(log.write(tok(7),
                            [](std::vector<int>& v) {
                              v.push_back(7);  // a partial effect, then a failure
                              throw std::runtime_error("disk full");
                            }),
                  std::runtime_error);
  CHECK(log.newest() == tok(7));                    // 7 was admitted ...
  CHECK(log.snapshot() == std::vector<int>{5, 7});  // ... and the value is as fn left it
  // So the older token 6 is refused, and the lock was released.
  CHECK(log.write(tok(6), [](std::vector<int>& v) { v.push_back(6); }).error() ==
        errc::stale_token);
  REQUIRE(log.write(tok(7), [](std::vector<int>& v) { v.push_back(8); }));  // 7 may retry
  CHECK(log.snapshot() == std::vector<int>{5, 7, 8});
}

TEST_CASE("fenced<T>: a read-modify-write must read through the gate too", "[fence]") {
  // Holder 33 lost its lease; holder 34 reads the balance, then 33's late write arrives, then 34
  // writes what it computed. Token order alone (S1) admits both writes: 33 < 34 is admitted
  // because 34 had not written yet, and 34's write then overwrites 33's deposit.
  SECTION("an unfenced read lets an older holder's write slip in and be overwritten") {
    fenced<long> balance(std::in_place, 100);
    const long seen_by_34 = balance.snapshot();                      // 34 reads 100
    REQUIRE(balance.write(tok(33), [](long& v) { v = 100 + 10; }));  // 33's late deposit lands
    REQUIRE(balance.write(tok(34), [&](long& v) { v = seen_by_34 + 10; }));
    CHECK(balance.snapshot() == 110);  // one of two deposits lost, with every write "fenced"
  }
  SECTION("a read through write() raises the gate, so the older write is refused") {
    fenced<long> balance(std::in_place, 100);
    auto seen_by_34 = balance.write(tok(34), [](long& v) { return v; });  // 34 reads 100
    REQUIRE(seen_by_34);
    CHECK(balance.write(tok(33), [](long& v) { v = 100 + 10; }).error() == errc::stale_token);
    REQUIRE(balance.write(tok(34), [&](long& v) { v = *seen_by_34 + 10; }));
    CHECK(balance.snapshot() == 110);  // 33 learns its deposit failed and can redo it
  }
}

TEST_CASE("fenced<T> can be constructed in place", "[fence]") {
  fenced<std::string> s(std::in_place, 3, 'x');
  CHECK(s.snapshot() == "xxx");
  CHECK(s.newest().is_none());
}

TEST_CASE("The README's timeline: a holder that stalls past its lease is fenced off by its token",
          "[fence]") {
  holdfast::manual_clock clock;
  holdfast::memory_store_options so;
  so.last_issued = tok(32);
  holdfast::memory_store<holdfast::manual_clock> store(clock, so);
  holdfast::acquire_options<holdfast::manual_clock> opts;
  opts.clock = clock;
  fenced<std::string> db;

  // t=0   A acquires "orders" ttl=10s -> token 33
  auto a = holdfast::try_acquire(store, "orders", 10s, opts);
  REQUIRE(a);
  CHECK(a->token() == tok(33));
  // t=1   A checks its lease: valid (then A stalls)
  clock.advance(1s);
  CHECK(a->valid());
  // t=10  the store expires A's lease; t=11 B acquires -> token 34
  clock.advance(10s);
  auto b = holdfast::try_acquire(store, "orders", 10s, opts);
  REQUIRE(b);
  CHECK(b->token() == tok(34));
  // t=12  B writes with token 34 -> admitted
  clock.advance(1s);
  REQUIRE(db.write(b->token(), [](std::string& v) { v = "B's order"; }));
  // t=15  A wakes, writes with token 33 -> REJECTED
  clock.advance(3s);
  auto stale = db.write(a->token(), [](std::string& v) { v = "A's stale order"; });
  REQUIRE_FALSE(stale);
  CHECK(stale.error() == errc::stale_token);
  CHECK(db.snapshot() == "B's order");
}
