// SPDX-License-Identifier: MIT
// tests/support/rw_checks.hpp - the read-write checks the real-store suites make the same way
// (test_redis_shared.cpp, test_postgres_rw.cpp): a release wakes read_write_lease's blocking
// acquire at once (check_rw_release_wakes, against slow_polling()'s backoff of at least 2 s a
// round), and wait_for_release_rw ends when what keeps the mode out expires, on a stop of its
// token, and by half a waiting writer's intent's time left (RW4), refusing bad input
// (check_rw_wait_ends); and sessions racing on one key never hold a writer beside anyone
// (run_rw_race, also test_etcd_rw.cpp); release_rw after a dropped connection reconnects once
// (check_rw_release_after_drop). Every wait is bounded; real servers, so real time.
#ifndef HOLDFAST_TESTS_SUPPORT_RW_CHECKS_HPP
#define HOLDFAST_TESTS_SUPPORT_RW_CHECKS_HPP

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "holdfast/backoff.hpp"
#include "holdfast/cancel.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/read_write_lease.hpp"
#include "real_servers.hpp"

namespace hf_test {

/// Acquire options whose backoff sleeps at least 2 s at each of its first three delays (a seed
/// picked so, full jitter notwithstanding): an acquire that wakes sooner was woken by the store.
inline holdfast::acquire_options<> slow_polling() {
  holdfast::acquire_options<> o;
  o.backoff.initial = std::chrono::seconds(5);
  o.backoff.max_delay = std::chrono::seconds(5);
  for (std::uint64_t seed = 1;; ++seed) {
    o.backoff.seed = seed;
    holdfast::backoff b(o.backoff);
    bool slow = true;
    for (int i = 0; i < 3; ++i) slow = slow && b.next_delay() >= std::chrono::seconds(2);
    if (slow) return o;
  }
}

/// Checks that a read-write release wakes read_write_lease's blocking acquire (slow_polling())
/// at once: a writer waiting on `key`'s reader gets the key within 1.5 s of the reader's release;
/// then a writer holds `key2`, two readers wait and both get it within 1.5 s of its release.
/// `holder` takes and releases the grants (30 s), `waiter` serves the waiting leases;
/// `intent_seen()` is true once the waiting writer's intent is recorded; `settle` is what the two
/// readers get to ask (busy) and fall asleep.
template <class Store, class IntentSeen>
void check_rw_release_wakes(Store& holder, Store& waiter, const std::string& key,
                            const std::string& key2, IntentSeen intent_seen,
                            std::chrono::milliseconds settle) {
  using clk = std::chrono::steady_clock;
  using std::chrono::milliseconds;
  constexpr holdfast::lease_mode sh = holdfast::lease_mode::shared;
  constexpr holdfast::lease_mode ex = holdfast::lease_mode::exclusive;
  holdfast::read_write_lease<Store> doc(waiter, key, slow_polling());
  auto r = holder.try_acquire_rw(key, "R", milliseconds(30000), sh);
  REQUIRE(r);
  std::atomic<long long> after_ms{-1};
  std::atomic<clk::rep> released_at{0};
  std::thread writer([&] {
    auto w = doc.acquire_write(milliseconds(30000), milliseconds(20000));
    if (w && released_at.load() != 0) {
      after_ms = std::chrono::duration_cast<milliseconds>(
                     clk::now() - clk::time_point(clk::duration(released_at.load())))
                     .count();
    }
  });
  // Bounded: until the writer's first ask recorded its intent, then a moment to fall asleep.
  REQUIRE(wait_until(intent_seen, milliseconds(5000)));
  std::this_thread::sleep_for(milliseconds(50));
  released_at = clk::now().time_since_epoch().count();
  REQUIRE(holder.release_rw(key, "R", r->token, sh));
  writer.join();
  INFO("writer took " << after_ms.load() << " ms after the release");
  REQUIRE(after_ms.load() >= 0);
  CHECK(after_ms.load() < 1500);  // the backoff would have slept at least 2000

  // A writer holds; two readers wait; its release wakes both.
  auto w = holder.try_acquire_rw(key2, "W", milliseconds(30000), ex);
  REQUIRE(w);
  holdfast::read_write_lease<Store> doc2(waiter, key2, slow_polling());
  std::atomic<int> woken{0};
  std::atomic<bool> released{false};
  std::vector<std::thread> readers;
  for (int i = 0; i < 2; ++i) {
    readers.emplace_back([&] {
      auto rl = doc2.acquire_read(milliseconds(30000), milliseconds(20000));
      if (rl && released.load()) ++woken;
    });
  }
  std::this_thread::sleep_for(settle);  // both asked (busy) and fell asleep
  const auto t0 = clk::now();
  released = true;
  REQUIRE(holder.release_rw(key2, "W", w->token, ex));
  for (std::thread& t : readers) t.join();
  CHECK(woken.load() == 2);
  CHECK(clk::now() - t0 < milliseconds(1500));  // (the backoff: at least 2 s)
}

/// Checks where `s`'s wait_for_release_rw ends: at once on `free_key`; on `key`, held by a reader
/// of 1 s nobody releases, at once for a reader (readers share) and at the reader's expiry (the
/// server's clock, 0.8 to 3 s) for a writer, not at the 10 s deadline; with `check_deadline`, at
/// a 100 ms deadline; with cancelled on a stop of its token (after 100 ms); invalid_argument for
/// an empty key or a mode out of range; and on `key2`, a reader of 10 s against a writer's
/// intent of 1 s, by half the intent's time left (RW4: 0.4 to 1.5 s).
template <class Store>
void check_rw_wait_ends(Store& s, const std::string& free_key, const std::string& key,
                        const std::string& key2, bool check_deadline) {
  using clk = std::chrono::steady_clock;
  using holdfast::errc;
  using std::chrono::milliseconds;
  constexpr holdfast::lease_mode sh = holdfast::lease_mode::shared;
  constexpr holdfast::lease_mode ex = holdfast::lease_mode::exclusive;
  // Nothing keeps the mode out: at once.
  auto t0 = clk::now();
  CHECK(s.wait_for_release_rw(free_key, ex, t0 + milliseconds(10000)));
  CHECK(clk::now() - t0 < milliseconds(1000));
  // A reader of 1 s that nobody releases: a writer's wait ends at its expiry (by the server's
  // clock), not at the deadline; a reader's wait ends at once (readers share).
  auto r = s.try_acquire_rw(key, "R", milliseconds(1000), sh);
  REQUIRE(r);
  t0 = clk::now();
  CHECK(s.wait_for_release_rw(key, sh, t0 + milliseconds(10000)));
  CHECK(clk::now() - t0 < milliseconds(700));
  CHECK(s.wait_for_release_rw(key, ex, t0 + milliseconds(10000)));
  CHECK(clk::now() - t0 >= milliseconds(800));  // (not woken early: nothing was released)
  CHECK(clk::now() - t0 < milliseconds(3000));
  // The wait is a hint (it may end up to a one-way trip before the expiry): ask until granted.
  REQUIRE(
      wait_until([&] { return s.try_acquire_rw(key, "W", milliseconds(10000), ex).has_value(); },
                 milliseconds(2000)));
  // The deadline bounds it; a stop of the token ends it with cancelled; bad input is refused.
  if (check_deadline) {
    t0 = clk::now();
    CHECK(s.wait_for_release_rw(key, sh, t0 + milliseconds(100)));
    CHECK(clk::now() - t0 < milliseconds(2000));
  }
  holdfast::cancel_source stop;
  std::thread canceller([&] {
    std::this_thread::sleep_for(milliseconds(100));
    stop.request_stop();
  });
  t0 = clk::now();
  CHECK(s.wait_for_release_rw(key, sh, t0 + milliseconds(10000), stop.token()).error() ==
        errc::cancelled);
  canceller.join();
  CHECK(clk::now() - t0 < milliseconds(2000));
  CHECK(s.wait_for_release_rw("", sh, t0).error() == errc::invalid_argument);
  CHECK(s.wait_for_release_rw(key, static_cast<holdfast::lease_mode>(9), t0).error() ==
        errc::invalid_argument);
  // A writer waiting on a reader wakes by half its intent's time left, to ask again before the
  // intent lapses (RW4): here the reader holds 10 s, the writer's intent 1 s.
  auto r2 = s.try_acquire_rw(key2, "R", milliseconds(10000), sh);
  REQUIRE(r2);
  CHECK(s.try_acquire_rw(key2, "W", milliseconds(1000), ex).error() == errc::busy);  // intent
  t0 = clk::now();
  CHECK(s.wait_for_release_rw(key2, ex, t0 + milliseconds(10000)));
  CHECK(clk::now() - t0 >= milliseconds(400));
  CHECK(clk::now() - t0 < milliseconds(1500));  // (the reader's 10 s without the cap)
}

/// What run_rw_race counted over all its threads.
struct rw_race_tally {
  int grants = 0;         ///< grants taken
  int exclusive = 0;      ///< of which exclusive
  int overlaps = 0;       ///< grants made while a writer held, or a writer's while anyone held
  int errors = 0;         ///< asks that failed other than busy, and releases that failed
  int stale_writers = 0;  ///< writers' tokens not above every earlier writer's (RW2)
};

/// Four threads, each with a store of its own (`make()`, one connection or session each), ask
/// `rounds` times for key "race" (10 s), as owner "t<id>", exclusive on every third round and
/// shared otherwise, mark themselves held between grant and release_rw, and count (under one
/// mutex) any overlap the store let through.
template <class MakeStore>
rw_race_tally run_rw_race(MakeStore make, int rounds) {
  constexpr holdfast::lease_mode sh = holdfast::lease_mode::shared;
  constexpr holdfast::lease_mode ex = holdfast::lease_mode::exclusive;
  std::mutex mu;
  rw_race_tally n;
  int readers = 0;
  int writers = 0;
  holdfast::fencing_token newest_writer;
  const auto work = [&](int id) {
    auto s = make();
    const std::string me = "t" + std::to_string(id);
    for (int i = 0; i < rounds; ++i) {
      const holdfast::lease_mode m = (i + id) % 3 == 0 ? ex : sh;
      auto g = s.try_acquire_rw("race", me, std::chrono::milliseconds(10000), m);
      if (!g) {
        std::lock_guard<std::mutex> lk(mu);
        if (g.error() != holdfast::errc::busy) ++n.errors;
        continue;
      }
      {
        std::lock_guard<std::mutex> lk(mu);
        ++n.grants;
        if (m == ex ? (readers > 0 || writers > 0) : writers > 0) ++n.overlaps;
        ++(m == ex ? writers : readers);
        if (m == ex) {
          ++n.exclusive;
          if (g->token <= newest_writer) ++n.stale_writers;  // RW2: above every earlier token
          newest_writer = g->token;
        }
      }
      std::this_thread::yield();
      {
        std::lock_guard<std::mutex> lk(mu);
        --(m == ex ? writers : readers);
      }
      if (!s.release_rw("race", me, g->token, m)) {
        std::lock_guard<std::mutex> lk(mu);
        ++n.errors;
      }
    }
  };
  std::vector<std::thread> threads;
  for (int id = 0; id < 4; ++id) threads.emplace_back(work, id);
  for (std::thread& th : threads) th.join();
  return n;
}

/// Checks release_rw and renew_rw after the server ended `s`'s idle connection or session
/// (`drop()`: CLIENT KILL, pg_terminate_backend): a writer's release_rw of `key` reconnects once
/// and succeeds, and `gone()` is then true (the record is gone); a reader of `key` gets it at
/// once (not after the writer's 60 s TTL); after another drop, renew_rw is not sent again (it
/// reports store_unavailable) and release_rw succeeds.
template <class Store, class Drop, class Gone>
void check_rw_release_after_drop(Store& s, const std::string& key, Drop drop, Gone gone) {
  using std::chrono::milliseconds;
  constexpr holdfast::lease_mode sh = holdfast::lease_mode::shared;
  constexpr holdfast::lease_mode ex = holdfast::lease_mode::exclusive;
  auto w = s.try_acquire_rw(key, "W", milliseconds(60000), ex);
  REQUIRE(w);
  drop();
  CHECK(s.release_rw(key, "W", w->token, ex));
  CHECK(gone());
  auto r = s.try_acquire_rw(key, "R", milliseconds(60000), sh);
  REQUIRE(r);  // at once, not after the writer's TTL
  // Renew is not sent again: the first call after a drop reports the error.
  drop();
  CHECK(s.renew_rw(key, "R", r->token, milliseconds(60000), sh).error() ==
        holdfast::errc::store_unavailable);
  CHECK(s.release_rw(key, "R", r->token, sh));
}

}  // namespace hf_test

#endif  // HOLDFAST_TESTS_SUPPORT_RW_CHECKS_HPP
