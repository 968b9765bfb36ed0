// SPDX-License-Identifier: MIT
// tests/benchmarks/semaphore_handoff.hpp - the semaphore's hand-off benchmark, shared by
// bench_semaphore_handoff.cpp (memory_store) and bench_semaphore_handoff_redis.cpp: how fast a
// released permit reaches the next waiter, measured as handoff.hpp measures the lease's.
//
// One run: P + W threads share a semaphore of P permits. P of them hold a permit each; the W
// others wait in semaphore::acquire(). A holder keeps its permit for `hold`, releases it, and
// rejoins the waiters only after someone else was granted a permit (blocked on a condition
// variable meanwhile, not spinning), so every release finds W waiters. Each grant notes its
// hand-off latency: its grant minus the start of the latest release before it (one steady clock).
// Counters as handoff.hpp's: median_us, p99_us, requests (store requests per grant, all threads),
// longest_ms (the longest one acquire() waited), handoffs.
#ifndef HOLDFAST_TESTS_BENCHMARKS_SEMAPHORE_HANDOFF_HPP
#define HOLDFAST_TESTS_BENCHMARKS_SEMAPHORE_HANDOFF_HPP

#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "handoff.hpp"
#include "holdfast/semaphore.hpp"

namespace holdfast_bench {

/// handoff.hpp's counting store, also forwarding (and counting) the store's wait for a release of
/// any of several keys when the store has it: what semaphore::acquire() waits in.
template <class Store>
struct counting_any : counting<Store> {
  template <class S = Store>
  auto wait_for_release_any(const std::vector<std::string>& keys,
                            const handoff_clock::time_point& d, const holdfast::cancel_token& c)
      -> decltype(std::declval<S&>().wait_for_release_any(keys, d, c)) {
    ++*this->n;
    return this->s->wait_for_release_any(keys, d, c);
  }
};

/// Runs `handoffs` hand-offs of a `permits`-permit semaphore among `permits` + `waiters` threads.
/// `make_sem(i)` gives thread i its semaphore (a pointer to a semaphore over thread i's store).
template <class SemPtr, class MakeSem>
handoff_result run_semaphore_handoffs(MakeSem make_sem, int permits, int waiters,
                                      std::uint64_t handoffs, std::chrono::microseconds hold) {
  using namespace std::chrono_literals;
  handoff_result out;
  std::mutex mu;
  std::atomic<std::uint64_t> grants{0};
  std::atomic<std::int64_t> released_at_ns{-1};
  std::atomic<bool> stop{false};
  std::mutex grant_mu;
  std::condition_variable grant_cv;
  const auto await_grant_after = [&](std::uint64_t n) {
    std::unique_lock<std::mutex> lock(grant_mu);
    grant_cv.wait(lock, [&] { return grants.load() > n || stop.load(); });
  };
  const auto total = static_cast<std::uint64_t>(permits);
  std::vector<std::thread> pool;
  for (int i = 0; i < permits + waiters; ++i) {
    pool.emplace_back([&, i] {
      SemPtr sem = make_sem(i);
      std::vector<double> mine;
      double longest = 0;
      bool failed = false;
      // The first `permits` threads start as holders; the others join once all permits are out.
      if (i >= permits) await_grant_after(total - 1);
      for (;;) {
        if (stop.load()) break;
        const auto asked = handoff_clock::now();
        auto p = sem->acquire(60s);
        const auto got = handoff_clock::now();
        if (!p) {
          failed = failed || !stop.load();
          break;
        }
        const std::int64_t rel = released_at_ns.load();
        std::uint64_t n;
        {
          std::lock_guard<std::mutex> lock(grant_mu);
          n = grants.fetch_add(1) + 1;
        }
        grant_cv.notify_all();
        if (rel >= 0 && n > total && n <= handoffs + total) {
          mine.push_back(static_cast<double>(got.time_since_epoch().count() - rel) / 1000.0);
        }
        if (n > total) {
          longest =
              std::max(longest, std::chrono::duration<double, std::milli>(got - asked).count());
        }
        if (hold.count() > 0) std::this_thread::sleep_for(hold);
        if (n >= handoffs + total) {
          std::lock_guard<std::mutex> lock(grant_mu);
          stop = true;
        }
        const std::uint64_t seen = grants.load();
        released_at_ns = handoff_clock::now().time_since_epoch().count();
        (void)p->release();
        if (stop.load()) {
          grant_cv.notify_all();
          break;
        }
        await_grant_after(seen);  // someone was granted a permit since: rejoin
      }
      std::lock_guard<std::mutex> lock(mu);
      out.latencies_us.insert(out.latencies_us.end(), mine.begin(), mine.end());
      out.longest_ms = std::max(out.longest_ms, longest);
      out.failed = out.failed || failed;
    });
  }
  for (std::thread& t : pool) t.join();
  out.handoffs = out.latencies_us.size();
  out.grants = grants.load();
  return out;
}

}  // namespace holdfast_bench

#endif  // HOLDFAST_TESTS_BENCHMARKS_SEMAPHORE_HANDOFF_HPP
