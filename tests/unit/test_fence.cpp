// Unit tests for holdfast/fence.hpp: admission by fencing token at the resource. fence_gate (one
// resource, lock-free), keyed_fence_gate (many resources), fenced<T> (admit + apply in one step).
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
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

TEST_CASE("fenced<T>::write with a throwing fn leaves the newest token unchanged", "[fence]") {
  fenced<std::vector<int>> log;
  REQUIRE(log.write(tok(5), [](std::vector<int>& v) { v.push_back(5); }));
  CHECK_THROWS_AS(log.write(tok(7),
                            [](std::vector<int>& v) {
                              v.push_back(7);  // a partial effect, then a failure
                              throw std::runtime_error("disk full");
                            }),
                  std::runtime_error);
  CHECK(log.newest() == tok(5));                    // 7 was never admitted ...
  CHECK(log.snapshot() == std::vector<int>{5, 7});  // ... the value is as fn left it
  // So token 6 is still admissible, and the lock was released.
  REQUIRE(log.write(tok(6), [](std::vector<int>& v) { v.push_back(6); }));
  CHECK(log.newest() == tok(6));
}

TEST_CASE("fenced<T> can be constructed in place", "[fence]") {
  fenced<std::string> s(std::in_place, 3, 'x');
  CHECK(s.snapshot() == "xxx");
  CHECK(s.newest().is_none());
}

TEST_CASE("DESIGN §1: a holder that stalls past its lease is fenced off by its token", "[fence]") {
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

// ---------------------------------------------------------------------------------------------
// Concurrency (run under TSan)
// ---------------------------------------------------------------------------------------------

TEST_CASE("fence_gate hammered by threads stays a linearizable maximum", "[fence][concurrency]") {
  // Tokens are handed out in increasing order; threads admit them in whatever order the
  // scheduler allows. Whatever the interleaving, a correct gate keeps these true.
  fence_gate gate;
  std::atomic<std::uint64_t> issuer{0};
  constexpr int kThreads = 4;
  constexpr int kAdmits = 20000;
  struct tally {
    int admitted = 0;
    int stale = 0;
    bool consistent = true;
  };
  std::vector<std::future<tally>> workers;
  for (int t = 0; t < kThreads; ++t) {
    workers.push_back(std::async(std::launch::async, [&] {
      tally out;
      fencing_token last_seen{};
      for (int i = 0; i < kAdmits; ++i) {
        const fencing_token mine(issuer.fetch_add(1) + 1);
        auto r = gate.admit(mine);
        const fencing_token now = gate.newest();
        if (r) {
          ++out.admitted;
          out.consistent = out.consistent && now >= mine;  // admitted: newest is at least mine
        } else {
          ++out.stale;
          out.consistent = out.consistent && r.error() == errc::stale_token && now > mine;
        }
        out.consistent = out.consistent && now >= last_seen;  // the newest never goes back
        last_seen = now;
      }
      return out;
    }));
  }
  int admitted = 0, stale = 0;
  for (auto& w : workers) {
    REQUIRE(w.wait_for(60s) == std::future_status::ready);
    const tally t = w.get();
    CHECK(t.consistent);
    admitted += t.admitted;
    stale += t.stale;
  }
  CHECK(admitted + stale == kThreads * kAdmits);
  CHECK(admitted > 0);
  // The greatest token can never be stale, so the gate ends on it.
  CHECK(gate.newest() == fencing_token(static_cast<std::uint64_t>(kThreads) * kAdmits));
}

TEST_CASE("fenced<T> hammered by threads admits writes in non-decreasing token order",
          "[fence][concurrency]") {
  fenced<std::vector<std::uint64_t>> log;
  std::atomic<std::uint64_t> issuer{0};
  std::atomic<int> rejected{0};
  constexpr int kThreads = 4;
  constexpr int kWrites = 5000;
  std::vector<std::future<void>> workers;
  for (int t = 0; t < kThreads; ++t) {
    workers.push_back(std::async(std::launch::async, [&] {
      for (int i = 0; i < kWrites; ++i) {
        const std::uint64_t mine = issuer.fetch_add(1) / 2 + 1;  // each token used twice
        auto r = log.write(fencing_token(mine),
                           [&](std::vector<std::uint64_t>& v) { v.push_back(mine); });
        if (!r) ++rejected;
      }
    }));
  }
  for (auto& w : workers) REQUIRE(w.wait_for(60s) == std::future_status::ready);
  const std::vector<std::uint64_t> admitted = log.snapshot();
  REQUIRE_FALSE(admitted.empty());
  CHECK(admitted.size() + static_cast<std::size_t>(rejected) == kThreads * kWrites);
  bool ordered = true;  // S1: admitted writes carry non-decreasing tokens
  for (std::size_t i = 1; i < admitted.size(); ++i)
    ordered = ordered && admitted[i - 1] <= admitted[i];
  CHECK(ordered);
  CHECK(log.newest() == fencing_token(admitted.back()));
  CHECK(admitted.back() == kThreads * kWrites / 2);
}

TEST_CASE("keyed_fence_gate hammered by threads on a few resources", "[fence][concurrency]") {
  keyed_fence_gate gate;
  constexpr int kResources = 3;
  std::atomic<std::uint64_t> issuer[kResources] = {};
  constexpr int kThreads = 4;
  constexpr int kAdmits = 5000;
  std::vector<std::future<bool>> workers;
  for (int t = 0; t < kThreads; ++t) {
    workers.push_back(std::async(std::launch::async, [&, t] {
      bool consistent = true;
      for (int i = 0; i < kAdmits; ++i) {
        const int res = (i + t) % kResources;
        const std::string name = "resource" + std::to_string(res);
        const fencing_token mine(issuer[res].fetch_add(1) + 1);
        auto r = gate.admit(name, mine);
        const fencing_token now = gate.newest(name);
        consistent =
            consistent && (r ? now >= mine : (r.error() == errc::stale_token && now > mine));
      }
      return consistent;
    }));
  }
  for (auto& w : workers) {
    REQUIRE(w.wait_for(60s) == std::future_status::ready);
    CHECK(w.get());
  }
  for (int res = 0; res < kResources; ++res) {
    CHECK(gate.newest("resource" + std::to_string(res)) == fencing_token(issuer[res].load()));
  }
}
