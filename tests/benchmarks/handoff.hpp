// SPDX-License-Identifier: MIT
// tests/benchmarks/handoff.hpp - the hand-off benchmark shared by bench_handoff.cpp (memory_store)
// and bench_handoff_redis.cpp: how fast a released lease reaches the next waiter, with blocking
// acquire() waiting in the store (wait_for_release) or polling with backoff (today's default for a
// store without the capability), side by side in one run.
//
// One run: W+1 threads take turns on one key. The holder releases; of the W threads waiting in
// acquire(), one is granted the key; it notes the hand-off's latency (its grant minus the
// release's start, on one steady clock), holds the key for `hold`, releases, waits until someone
// else has been granted it, and joins the waiters again. `hold` is long enough for that thread to
// be waiting again before the next release, so every release finds W waiters. Reported per run:
//
//   counter       | meaning
//   --------------+-------------------------------------------------------------------------
//   median_us     | median hand-off latency (release sent -> next grant returned), µs
//   p99_us        | 99th percentile of the same
//   requests      | store requests per hand-off (per grant), all threads together: joining
//                 | the queue, polling, waiting, granting, releasing; connection set-up
//                 | (connect, AUTH, SCRIPT LOAD, SUBSCRIBE) is not counted
//   longest_ms    | the longest any single acquire() waited in the run (starvation)
//   release_us    | median duration of the holder's release() call (sent -> answered), µs: the
//                 | round trip of the request the hand-off starts with, under the same
//                 | conditions (an idle pause before it, a script or statement, not a PING)
//   median_releases | median_us / release_us: the hand-off in round trips of the release; the
//                 | protocol's floor is ~2 (the release, then the woken waiter's attempt)
//   handoff_requests | mean store requests from a release's start to the next grant's return,
//                 | all threads together (only when the benchmark passes a request count)
//
// "Polling" wraps the store in a forwarder without wait_for_release, so acquire() retries with
// its default backoff (10 ms doubling to 1 s, full jitter), exactly as before the capability.
#ifndef HOLDFAST_TESTS_BENCHMARKS_HANDOFF_HPP
#define HOLDFAST_TESTS_BENCHMARKS_HANDOFF_HPP

#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "holdfast/lease.hpp"

namespace holdfast_bench {

using handoff_clock = std::chrono::steady_clock;

/// A store seen through a forwarder that hides wait_for_release: acquire() then polls.
template <class Store>
struct polling {
  Store* s;
  holdfast::result<holdfast::grant> try_acquire(std::string_view k, std::string_view o,
                                                std::chrono::milliseconds t) {
    return s->try_acquire(k, o, t);
  }
  holdfast::result<holdfast::grant> renew(std::string_view k, std::string_view o,
                                          holdfast::fencing_token tok,
                                          std::chrono::milliseconds t) {
    return s->renew(k, o, tok, t);
  }
  holdfast::result<void> release(std::string_view k, std::string_view o,
                                 holdfast::fencing_token tok) {
    return s->release(k, o, tok);
  }
};

struct handoff_result {
  std::vector<double> latencies_us;
  std::vector<double> releases_us;       // each release() call's duration
  std::vector<double> handoff_requests;  // requests from each release's start to the next grant
  double longest_ms = 0;
  std::uint64_t handoffs = 0;  // hand-offs measured
  std::uint64_t grants = 0;    // every grant of the run (the first and the winding-down ones too)
  bool failed = false;
};

/// Runs `handoffs` hand-offs among `waiters` + 1 threads. `make_store(i)` gives thread i its
/// store (a pointer; it may be shared); acquire() goes to it as it is. `hold` is how long each
/// holder keeps the key. `requests_now` (optional) returns the requests every store sent so far:
/// each hand-off's share (release start -> next grant returned) goes to handoff_requests. It is
/// read before the grant is announced, so no thread that waits for a grant adds to it.
template <class StorePtr, class MakeStore>
handoff_result run_handoffs(MakeStore make_store, int waiters, std::uint64_t handoffs,
                            std::chrono::microseconds hold, const std::string& key,
                            const std::function<std::uint64_t()>& requests_now = {}) {
  using namespace std::chrono_literals;
  handoff_result out;
  std::mutex mu;
  std::atomic<std::uint64_t> grants{0};
  std::atomic<std::int64_t> released_at_ns{-1};       // when the latest release started
  std::atomic<std::uint64_t> requests_at_release{0};  // requests_now() then
  std::atomic<bool> stop{false};
  // Threads that are not waiting in acquire() block here (not spin: a spinning thread would take
  // the CPU the woken waiter needs) until the grant count moves on.
  std::mutex grant_mu;
  std::condition_variable grant_cv;
  const auto await_grant_after = [&](std::uint64_t n) {
    std::unique_lock<std::mutex> lock(grant_mu);
    grant_cv.wait(lock, [&] { return grants.load() != n || stop.load(); });
  };
  const int threads = waiters + 1;
  std::vector<std::thread> pool;
  for (int i = 0; i < threads; ++i) {
    pool.emplace_back([&, i] {
      StorePtr store = make_store(i);
      std::vector<double> mine;
      std::vector<double> releases;
      std::vector<double> counts;
      double longest = 0;
      bool failed = false;
      // Thread 0 starts as the holder; the others join once it holds the key.
      if (i != 0) await_grant_after(0);
      for (;;) {
        if (stop.load()) break;
        const auto asked = handoff_clock::now();
        auto l = holdfast::acquire(*store, key, 30s, 60s);
        const auto got = handoff_clock::now();
        const std::uint64_t sent = requests_now ? requests_now() : 0;
        if (!l) {
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
        if (rel >= 0 && n > 1 && n <= handoffs + 1) {
          mine.push_back(static_cast<double>(got.time_since_epoch().count() - rel) / 1000.0);
          if (requests_now) counts.push_back(static_cast<double>(sent - requests_at_release));
        }
        longest = std::max(longest, std::chrono::duration<double, std::milli>(got - asked).count());
        if (hold.count() > 0) std::this_thread::sleep_for(hold);
        if (n > handoffs) {
          std::lock_guard<std::mutex> lock(grant_mu);
          stop = true;
        }
        if (requests_now) requests_at_release = requests_now();
        const auto release_start = handoff_clock::now();
        released_at_ns = release_start.time_since_epoch().count();
        (void)l->release();
        releases.push_back(
            std::chrono::duration<double, std::micro>(handoff_clock::now() - release_start)
                .count());
        if (stop.load()) {
          grant_cv.notify_all();
          break;
        }
        // Rejoin only after someone else got the key, so every release finds all W waiting.
        await_grant_after(n);
      }
      std::lock_guard<std::mutex> lock(mu);
      out.latencies_us.insert(out.latencies_us.end(), mine.begin(), mine.end());
      out.releases_us.insert(out.releases_us.end(), releases.begin(), releases.end());
      out.handoff_requests.insert(out.handoff_requests.end(), counts.begin(), counts.end());
      out.longest_ms = std::max(out.longest_ms, longest);
      out.failed = out.failed || failed;
    });
  }
  for (std::thread& t : pool) t.join();
  out.handoffs = out.latencies_us.size();
  out.grants = grants.load();
  return out;
}

inline double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t at = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(at, v.size() - 1)];
}

/// A store whose every request is counted (one call = one request), forwarding
/// wait_for_release when the store has it.
template <class Store>
struct counting {
  Store* s;
  std::atomic<std::uint64_t>* n;
  holdfast::result<holdfast::grant> try_acquire(std::string_view k, std::string_view o,
                                                std::chrono::milliseconds t) {
    ++*n;
    return s->try_acquire(k, o, t);
  }
  holdfast::result<holdfast::grant> renew(std::string_view k, std::string_view o,
                                          holdfast::fencing_token tok,
                                          std::chrono::milliseconds t) {
    ++*n;
    return s->renew(k, o, tok, t);
  }
  holdfast::result<void> release(std::string_view k, std::string_view o,
                                 holdfast::fencing_token tok) {
    ++*n;
    return s->release(k, o, tok);
  }
  template <class S = Store>
  auto wait_for_release(std::string_view k, const handoff_clock::time_point& d)
      -> decltype(std::declval<S&>().wait_for_release(k, d)) {
    ++*n;
    return s->wait_for_release(k, d);
  }
};

/// Sets the benchmark's counters from a run and the store requests it took.
inline void report_handoffs(benchmark::State& state, const handoff_result& r,
                            std::uint64_t requests) {
  if (r.failed || r.handoffs == 0) {
    state.SkipWithError("an acquire failed");
    return;
  }
  state.counters["median_us"] = percentile(r.latencies_us, 0.5);
  state.counters["p99_us"] = percentile(r.latencies_us, 0.99);
  // Per grant: every grant of the run, including the first and those of the winding down, since
  // the requests of those are counted too.
  state.counters["requests"] = static_cast<double>(requests) / static_cast<double>(r.grants);
  state.counters["longest_ms"] = r.longest_ms;
  if (!r.handoff_requests.empty()) {
    double sum = 0;
    for (double c : r.handoff_requests) sum += c;
    state.counters["handoff_requests"] = sum / static_cast<double>(r.handoff_requests.size());
  }
  state.counters["handoffs"] = static_cast<double>(r.handoffs);
  const double release_us = percentile(r.releases_us, 0.5);
  state.counters["release_us"] = release_us;
  if (release_us > 0) {
    state.counters["median_releases"] = percentile(r.latencies_us, 0.5) / release_us;
  }
}

}  // namespace holdfast_bench

#endif  // HOLDFAST_TESTS_BENCHMARKS_HANDOFF_HPP
