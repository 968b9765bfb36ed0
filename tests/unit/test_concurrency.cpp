// SPDX-License-Identifier: MIT
// Concurrency tests of the core headers, with real threads: the cases the TSan build runs. They
// live in one file because that build compiles only the files containing the concurrency tag
// (tests/README.md); each case still carries its header's tag, so "[fence]" selects them too.
// Every wait is bounded in real time; nothing sleeps.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <future>
#include <string>
#include <unordered_set>
#include <vector>

#include "holdfast/clock.hpp"
#include "holdfast/fence.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/stores/memory.hpp"
#include "test_support.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_concurrency {

using holdfast::errc;
using holdfast::fence_gate;
using holdfast::fenced;
using holdfast::fencing_token;
using holdfast::keyed_fence_gate;
using holdfast::manual_clock;
using namespace std::chrono_literals;
using store_t = holdfast::memory_store<manual_clock>;
using tp = manual_clock::time_point;

namespace {

// A bounded real-time wait for a future: a test that hangs fails instead.
template <class T>
bool ready_within(std::future<T>& f, std::chrono::seconds limit = 20s) {
  return f.wait_for(limit) == std::future_status::ready;
}

holdfast::acquire_options<manual_clock> options(manual_clock clock, std::string owner = {}) {
  holdfast::acquire_options<manual_clock> o;
  o.clock = std::move(clock);
  o.owner = std::move(owner);
  o.backoff.seed = 12345;
  return o;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// clock
// ---------------------------------------------------------------------------------------------

TEST_CASE("manual_clock::sleep_until blocks until another thread moves time to the deadline",
          "[clock][concurrency]") {
  manual_clock c;
  std::atomic<bool> woke{false};
  auto sleeper = std::async(std::launch::async, [&] {
    c.sleep_until(manual_clock::time_point(10s));
    woke = true;
    return c.now();
  });
  REQUIRE(c.wait_for_sleepers(1, 20s));
  CHECK(c.sleepers() == 1);
  c.advance(9s);  // not there yet: the sleeper wakes, sees 9 s < 10 s, and sleeps on
  REQUIRE(c.wait_for_sleepers(1, 20s));
  CHECK_FALSE(woke);
  c.advance(1s);  // exactly the deadline
  REQUIRE(ready_within(sleeper));
  CHECK(woke);
  CHECK(sleeper.get() == manual_clock::time_point(10s));
  CHECK(c.sleepers() == 0);
}

TEST_CASE("manual_clock wakes only the sleepers whose deadline was reached",
          "[clock][concurrency]") {
  manual_clock c;
  auto early = std::async(std::launch::async, [&] { c.sleep_until(manual_clock::time_point(1s)); });
  auto late = std::async(std::launch::async, [&] { c.sleep_until(manual_clock::time_point(2s)); });
  REQUIRE(c.wait_for_sleepers(2, 20s));
  c.set(manual_clock::time_point(1500ms));
  REQUIRE(ready_within(early));
  CHECK(late.wait_for(0s) == std::future_status::timeout);
  CHECK(c.sleepers() == 1);
  c.set(manual_clock::time_point(3s));
  REQUIRE(ready_within(late));
  CHECK(c.sleepers() == 0);
}

TEST_CASE("manual_clock is safe to read and move from many threads", "[clock][concurrency]") {
  manual_clock c;
  constexpr int kThreads = 4;
  constexpr int kSteps = 2000;
  std::vector<std::future<bool>> workers;
  for (int i = 0; i < kThreads; ++i) {
    workers.push_back(std::async(std::launch::async, [c]() mutable {
      bool monotonic = true;  // only forward moves happen here, so every reader sees them in order
      auto last = c.now();
      for (int s = 0; s < kSteps; ++s) {
        c.advance(1ns);
        const auto now = c.now();
        monotonic = monotonic && last < now;
        last = now;
      }
      return monotonic;
    }));
  }
  for (auto& w : workers) {
    REQUIRE(ready_within(w));
    CHECK(w.get());
  }
  CHECK(c.now().time_since_epoch() == std::chrono::nanoseconds(kThreads * kSteps));
}

// ---------------------------------------------------------------------------------------------
// memory_store
// ---------------------------------------------------------------------------------------------

TEST_CASE("memory_store under concurrent contention: exclusive grants, unique rising tokens",
          "[memory_store][concurrency]") {
  // The clock stands still, so a granted lease stays live until released: at most one owner may
  // be between grant and release of a key at any moment, and every token is new.
  manual_clock clock;
  store_t store(clock);
  constexpr int kThreads = 4;
  constexpr int kRounds = 3000;
  constexpr int kKeys = 3;
  std::atomic<int> inside[kKeys] = {};
  std::atomic<bool> overlap{false};
  std::vector<std::future<std::vector<std::uint64_t>>> workers;
  for (int t = 0; t < kThreads; ++t) {
    workers.push_back(std::async(std::launch::async, [&, t] {
      const std::string owner = "owner" + std::to_string(t);
      std::vector<std::uint64_t> mine;
      for (int i = 0; i < kRounds; ++i) {
        const int k = (i + t) % kKeys;
        const std::string key = "key" + std::to_string(k);
        auto g = store.try_acquire(key, owner, 10s);
        if (!g) {
          if (g.error() != errc::busy) overlap = true;  // the only acceptable failure
          continue;
        }
        if (inside[k].fetch_add(1) != 0) overlap = true;
        mine.push_back(g->token.value());
        inside[k].fetch_sub(1);
        if (!store.release(key, owner, g->token)) overlap = true;
      }
      return mine;
    }));
  }
  std::unordered_set<std::uint64_t> all;
  std::size_t grants = 0;
  for (auto& w : workers) {
    REQUIRE(w.wait_for(60s) == std::future_status::ready);
    const std::vector<std::uint64_t> mine = w.get();
    for (std::size_t i = 1; i < mine.size(); ++i) CHECK(mine[i - 1] < mine[i]);
    all.insert(mine.begin(), mine.end());
    grants += mine.size();
  }
  CHECK_FALSE(overlap);
  CHECK(all.size() == grants);  // no token was issued twice
  CHECK(grants > 0);
  CHECK(store.last_token().value() == grants);  // one token per grant, none lost or skipped
  CHECK(store.size() == 0);
}

TEST_CASE("memory_store under concurrent expiry and takeover keeps tokens unique",
          "[memory_store][concurrency]") {
  // One thread moves time while the others acquire with short TTLs and never release: every key
  // is taken over again and again after expiry, with the sweep running concurrently.
  manual_clock clock;
  store_t store(clock);
  constexpr int kThreads = 3;
  constexpr int kRounds = 3000;
  std::atomic<bool> stop{false};
  auto ticker = std::async(std::launch::async, [&] {
    while (!stop) clock.advance(1ms);
  });
  struct outcome {
    std::vector<std::uint64_t> fresh;  // tokens this thread saw for the first time, in order
    bool consistent = true;            // every repeat was a re-acquire of its own live lease
  };
  std::vector<std::future<outcome>> workers;
  for (int t = 0; t < kThreads; ++t) {
    workers.push_back(std::async(std::launch::async, [&, t] {
      outcome out;
      std::vector<std::uint64_t> last_of_key(100, 0);
      for (int i = 0; i < kRounds; ++i) {
        const int k = i % 100;
        auto g = store.try_acquire("key" + std::to_string(k), "o" + std::to_string(t), 2ms);
        if (!g) {
          out.consistent = out.consistent && g.error() == errc::busy;
          continue;
        }
        const std::uint64_t tok = g->token.value();
        if (tok == last_of_key[k]) continue;  // re-acquired its own live lease: same token
        // A new grant: newer than anything this thread was granted before (store-wide counter,
        // and this thread's calls are ordered).
        out.consistent = out.consistent && (out.fresh.empty() || out.fresh.back() < tok);
        out.fresh.push_back(tok);
        last_of_key[k] = tok;
      }
      return out;
    }));
  }
  std::unordered_set<std::uint64_t> all;
  std::size_t new_grants = 0;
  for (auto& w : workers) {
    REQUIRE(w.wait_for(60s) == std::future_status::ready);
    const outcome out = w.get();
    CHECK(out.consistent);
    for (std::uint64_t tok : out.fresh) {
      CHECK(all.insert(tok).second);  // no token was granted to two threads
    }
    new_grants += out.fresh.size();
  }
  stop = true;
  REQUIRE(ticker.wait_for(60s) == std::future_status::ready);
  CHECK(store.last_token().value() == new_grants);
  CHECK(store.size() <= 2 * 100 + 65);
}

// ---------------------------------------------------------------------------------------------
// lease
// ---------------------------------------------------------------------------------------------

TEST_CASE("acquire on a real thread sleeps on the manual clock until time moves",
          "[lease][concurrency]") {
  manual_clock clock;
  store_t store(clock);
  auto a = holdfast::try_acquire(store, "orders", 10s, options(clock, "A"));
  REQUIRE(a);
  auto waiter = std::async(std::launch::async, [&] {
    return holdfast::acquire(store, "orders", 10s, 1h, options(clock, "B"));
  });
  // B is busy, so it sleeps on the manual clock; time moves only while B really sleeps. Every
  // wait is bounded in real time, and the loop in steps.
  for (int step = 0; step < 20000; ++step) {
    if (waiter.wait_for(0s) == std::future_status::ready) break;
    if (clock.wait_for_sleepers(1, 1ms)) clock.advance(500ms);
  }
  REQUIRE(waiter.wait_for(20s) == std::future_status::ready);
  auto b = waiter.get();
  REQUIRE(b);
  CHECK(b->owner() == "B");
  CHECK(b->token() > a->token());
  CHECK(b->acquired_at() >= tp(10s));
}

TEST_CASE("leases serialise real threads: every fenced write is admitted, none lost",
          "[lease][concurrency]") {
  // The clock stands still, so leases never expire: the lease alone gives mutual exclusion and
  // every new holder carries a newer token than every earlier one.
  manual_clock clock;
  store_t store(clock);
  holdfast::fenced<long> account;
  constexpr int kThreads = 4;
  constexpr int kTransactions = 300;
  std::atomic<int> stale{0};
  std::vector<std::future<void>> workers;
  for (int t = 0; t < kThreads; ++t) {
    workers.push_back(std::async(std::launch::async, [&] {
      for (int done = 0; done < kTransactions;) {
        auto l = holdfast::try_acquire(store, "account", 10s, options(clock));
        if (!l) continue;  // busy: try again (bounded by the others' progress)
        const long seen = account.snapshot();
        auto w = account.write(*l, [&](long& v) { v = seen + 1; });
        if (!w) ++stale;
        ++done;
      }  // release on scope exit
    }));
  }
  for (auto& w : workers) REQUIRE(w.wait_for(120s) == std::future_status::ready);
  CHECK(stale == 0);
  CHECK(account.snapshot() == kThreads * kTransactions);
  CHECK(account.newest() == store.last_token());
  CHECK(store.size() == 0);
}

// ---------------------------------------------------------------------------------------------
// fence
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
    workers.push_back(std::async(std::launch::async, [&, t] {
      tally out;
      fencing_token last_seen{};
      const std::string owner = "thread-" + std::to_string(t);
      for (int i = 0; i < kAdmits; ++i) {
        const fencing_token mine(issuer.fetch_add(1) + 1);
        auto r = gate.admit(mine, owner);
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
        const std::uint64_t mine = issuer.fetch_add(1) / 2 + 1;      // each token used twice ...
        const std::string owner = "holder-" + std::to_string(mine);  // ... by its one holder
        auto r = log.write(fencing_token(mine), owner,
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
        auto r = gate.admit(name, mine, "thread-" + std::to_string(t));
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

}  // namespace test_concurrency
