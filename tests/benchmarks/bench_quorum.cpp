// tests/benchmarks/bench_quorum.cpp - what quorum_store adds on top of its members, with
// in-process members (memory_store), where a member call costs ~100 ns and the quorum's own
// machinery is all there is to see. The real-server figures (quorum of 3 and 5 Redis servers
// against one) are in bench_quorum_redis.cpp.
//
//   benchmark                               | compared with                         | target
//   ----------------------------------------+---------------------------------------+--------
//   quorum_memory_acquire_release/N threads | one memory_store acquire+release      | (info)
//   quorum_memory_acquire_release/N seq     | one memory_store acquire+release      | (info)
//   fan_out_workers/5                       | the same 5 tasks through std::async   | <= 1
//
// fan_out_workers is the measurement behind the dispatch design: quorum_dispatch::threads keeps
// one persistent worker per member and hands it each request; std::async would start a thread
// per request. Both run five empty tasks and wait for all of them.
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bench_common.hpp"
#include "holdfast/quorum.hpp"
#include "holdfast/stores/memory.hpp"

namespace {

using holdfast_bench::run_paired;
using holdfast_bench::sample_owner;
using holdfast_bench::with_min_max;

constexpr std::chrono::milliseconds kTtl{10'000};
constexpr int kChunk = 16;  // quorum operations take µs, not ns

using mem = holdfast::memory_store<>;

void BM_quorum_memory_acquire_release(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const bool threads = state.range(1) != 0;
  std::vector<std::unique_ptr<mem>> members;
  std::vector<mem*> ptrs;
  for (std::size_t i = 0; i < n; ++i) {
    members.push_back(std::make_unique<mem>());
    ptrs.push_back(members.back().get());
  }
  holdfast::quorum_options o;
  o.dispatch = threads ? holdfast::quorum_dispatch::threads : holdfast::quorum_dispatch::sequential;
  o.member_timeout = std::chrono::milliseconds(1000);
  auto quorum = std::make_unique<holdfast::quorum_store<mem>>(ptrs, o);
  auto single = std::make_unique<mem>();
  const std::string& owner = sample_owner();
  run_paired(
      state, "vs one memory_store acquire+release",
      [&] {
        auto g = quorum->try_acquire("orders", owner, kTtl);
        if (!g || !quorum->release("orders", owner, g->token)) {
          state.SkipWithError("quorum acquire/release failed");
        }
      },
      [&] {
        auto g = single->try_acquire("orders", owner, kTtl);
        if (!g || !single->release("orders", owner, g->token)) {
          state.SkipWithError("memory_store acquire/release failed");
        }
      },
      kChunk);
}
BENCHMARK(BM_quorum_memory_acquire_release)
    ->ArgNames({"members", "threads"})
    ->Args({1, 1})
    ->Args({3, 1})
    ->Args({5, 1})
    ->Args({3, 0})
    ->Args({5, 0})
    ->Apply(with_min_max)
    ->UseRealTime();

// A persistent worker as quorum_store keeps one per member (the same queue-and-condition-variable
// shape as detail::quorum_worker, repeated here so the comparison does not depend on internals).
class worker {
 public:
  worker() : thread_([this] { run(); }) {}
  ~worker() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  void post(std::function<void()> f) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back(std::move(f));
    }
    cv_.notify_one();
  }

 private:
  void run() {
    for (;;) {
      std::function<void()> f;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        f = std::move(queue_.front());
        queue_.pop_front();
      }
      f();
    }
  }
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  std::thread thread_;
};

void BM_fan_out_workers(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  std::vector<std::unique_ptr<worker>> workers;
  for (std::size_t i = 0; i < n; ++i) workers.push_back(std::make_unique<worker>());
  std::mutex m;
  std::condition_variable cv;
  std::size_t done = 0;
  run_paired(
      state, "vs the same tasks through std::async; target <= 1",
      [&] {
        {
          std::lock_guard<std::mutex> lock(m);
          done = 0;
        }
        for (auto& w : workers) {
          w->post([&] {
            std::lock_guard<std::mutex> lock(m);
            ++done;
            cv.notify_one();
          });
        }
        std::unique_lock<std::mutex> lock(m);
        cv.wait(lock, [&] { return done == n; });
      },
      [&] {
        std::vector<std::future<void>> fs;
        fs.reserve(n);
        for (std::size_t i = 0; i < n; ++i) {
          fs.push_back(std::async(std::launch::async, [] { benchmark::ClobberMemory(); }));
        }
        for (auto& f : fs) f.wait();
      },
      kChunk);
}
BENCHMARK(BM_fan_out_workers)->Arg(5)->Apply(with_min_max)->UseRealTime();

}  // namespace
