// SPDX-License-Identifier: MIT
// mutex.hpp with real threads: threads of one process exclude each other through the store,
// whether they share one distributed_mutex object or each have their own, and std::scoped_lock
// over two mutexes taken in opposite orders does not deadlock. Backoff is kept to microseconds,
// so contention costs no real sleeping to speak of; everything else is bounded by the TTLs.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "holdfast/fence.hpp"
#include "holdfast/mutex.hpp"
#include "holdfast/stores/memory.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_mutex_thread {

using namespace std::chrono_literals;

namespace {

using store_t = holdfast::memory_store<>;
using mutex_t = holdfast::distributed_mutex<store_t>;

holdfast::mutex_options<> fast_options() {
  holdfast::mutex_options<> o;
  o.acquire.backoff.initial = 20us;
  o.acquire.backoff.max_delay = 200us;
  return o;
}

// Counts the threads inside a critical section; more than one at a time is a violation.
struct exclusion_probe {
  std::atomic<int> inside{0};
  std::atomic<int> violations{0};
  // Stays inside a while (yielding), so that a broken lock really lets threads overlap here.
  void enter() {
    if (inside.fetch_add(1) != 0) ++violations;
    for (int i = 0; i < 20; ++i) std::this_thread::yield();
  }
  void leave() {
    if (inside.fetch_sub(1) != 1) ++violations;
  }
};

}  // namespace

TEST_CASE("threads sharing one distributed_mutex exclude each other", "[mutex][concurrency]") {
  store_t store;
  mutex_t m(store, "counter", 1h, fast_options());
  holdfast::fenced<int> counter;
  exclusion_probe probe;
  constexpr int kThreads = 3, kRounds = 100;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kRounds; ++i) {
        std::unique_lock<mutex_t> lock(m);
        probe.enter();
        const auto r = counter.write(m, [](int& v) { ++v; });  // this thread's token, owner
        if (!r) ++probe.violations;  // a fence refusal would mean two holders overlapped
        probe.leave();
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(probe.violations == 0);
  CHECK(counter.snapshot() == kThreads * kRounds);
  CHECK(counter.newest() == store.last_token());
  CHECK(store.size() == 0);
}

TEST_CASE("threads with a distributed_mutex each exclude each other", "[mutex][concurrency]") {
  store_t store;
  exclusion_probe probe;
  std::atomic<int> done{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&] {
      mutex_t mine(store, "counter", 1h, fast_options());
      for (int i = 0; i < 100; ++i) {
        std::lock_guard<mutex_t> lock(mine);
        probe.enter();
        ++done;
        probe.leave();
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(probe.violations == 0);
  CHECK(done == 300);
}

TEST_CASE("std::scoped_lock in opposite orders does not deadlock", "[mutex][concurrency]") {
  store_t store;
  mutex_t a(store, "a", 1h, fast_options());
  mutex_t b(store, "b", 1h, fast_options());
  exclusion_probe probe;
  std::thread t1([&] {
    for (int i = 0; i < 100; ++i) {
      std::scoped_lock lock(a, b);
      probe.enter();
      probe.leave();
    }
  });
  std::thread t2([&] {
    for (int i = 0; i < 100; ++i) {
      std::scoped_lock lock(b, a);
      probe.enter();
      probe.leave();
    }
  });
  t1.join();
  t2.join();
  CHECK(probe.violations == 0);
  CHECK(store.size() == 0);
}

}  // namespace test_mutex_thread
