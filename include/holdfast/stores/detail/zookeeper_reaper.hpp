// SPDX-License-Identifier: MIT
// holdfast/stores/detail/zookeeper_reaper.hpp - zookeeper_reaper: the thread that ends a
// zookeeper_store's grants whose holder stopped renewing while the store's session lives on
// (the pings of ZooKeeper's client keep a session, and so its ephemeral nodes, alive as long as
// the process runs). It sleeps until the earliest grant's end (steady_clock), calls the store's
// reap function, and sleeps again until the end that function returns. Started on the first
// schedule(), joined by the destructor. Not for users.
//
// Locks: mu_ guards the schedule; reap() runs without it (it takes the store's lock), and the
// store calls schedule() under its own lock, so the order is always store lock -> mu_.
#ifndef HOLDFAST_STORES_DETAIL_ZOOKEEPER_REAPER_HPP
#define HOLDFAST_STORES_DETAIL_ZOOKEEPER_REAPER_HPP

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

#include "holdfast/detail/config.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

/// Calls a reap function at the instants it is scheduled for (see the file overview).
/// Thread-safety: schedule() may be called from any thread; the destructor from one.
class zookeeper_reaper {
 public:
  using time_point = std::chrono::steady_clock::time_point;

  /// `reap` ends what is due and returns the next instant it must run (time_point::max(): none).
  explicit zookeeper_reaper(std::function<time_point()> reap) : reap_(std::move(reap)) {}
  zookeeper_reaper(const zookeeper_reaper&) = delete;
  zookeeper_reaper& operator=(const zookeeper_reaper&) = delete;
  ~zookeeper_reaper() {
    {
      std::lock_guard<std::mutex> g(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  /// Makes reap run no later than `at` (an earlier schedule stands). Starts the thread once.
  void schedule(time_point at) {
    std::lock_guard<std::mutex> g(mu_);
    if (stop_ || !(at < next_)) return;
    next_ = at;
    if (!thread_.joinable()) {
      thread_ = std::thread([this] { run(); });
    } else {
      cv_.notify_all();
    }
  }

 private:
  void run() {
    std::unique_lock<std::mutex> g(mu_);
    while (!stop_) {
      if (next_ == time_point::max()) {
        cv_.wait(g);
        continue;
      }
      if (std::chrono::steady_clock::now() < next_) {
        const time_point until = next_;
        cv_.wait_until(g, until);
        continue;
      }
      next_ = time_point::max();
      g.unlock();
      const time_point then = reap_();
      g.lock();
      if (then < next_) next_ = then;
    }
  }

  std::function<time_point()> reap_;
  std::mutex mu_;
  std::condition_variable cv_;
  time_point next_ = time_point::max();
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_DETAIL_ZOOKEEPER_REAPER_HPP
