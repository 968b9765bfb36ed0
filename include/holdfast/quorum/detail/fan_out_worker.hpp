// SPDX-License-Identifier: MIT
// holdfast/quorum/detail/fan_out_worker.hpp - fan_out_worker: one thread serving one member of a
// fan-out (detail/fan_out.hpp), FIFO, with a bounded queue, and the claim that decides who may
// call the member (its worker, or the caller's thread putting a request on the wire itself).
// Not for users.
#ifndef HOLDFAST_QUORUM_DETAIL_FAN_OUT_WORKER_HPP
#define HOLDFAST_QUORUM_DETAIL_FAN_OUT_WORKER_HPP

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

#include "holdfast/detail/config.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

// One worker thread serving one member, FIFO, with a bounded queue. Tasks never throw (the
// executor wraps them).
//
// The claim: whoever calls the member holds it. The worker takes it for each task it runs; the
// caller's thread takes it with try_claim() to put a request on the wire itself (split dispatch),
// and only when the worker is idle with nothing queued, so member calls keep their FIFO order. A
// request the caller started and stopped waiting for is finished on the worker by a task posted
// with post_claimed(): it carries the caller's claim and runs before anything else queued. So a
// task never waits for a claim that only a task behind it could give back.
class fan_out_worker {
 public:
  explicit fan_out_worker(std::size_t max_queued)
      : max_queued_(max_queued), thread_([this] { run(); }) {}
  fan_out_worker(const fan_out_worker&) = delete;
  fan_out_worker& operator=(const fan_out_worker&) = delete;

  // Finishes every queued task (releases and clean-ups among them), then joins.
  ~fan_out_worker() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }

  // Queues `task`; false if the queue is full (the member is not keeping up).
  bool post(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (queue_.size() >= max_queued_) return false;
      queue_.push_back(item{std::move(task), false});
    }
    cv_.notify_one();
    return true;
  }

  // Takes the claim for the calling thread if the worker is idle and nothing is queued.
  bool try_claim() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (claimed_ || !queue_.empty()) return false;
    claimed_ = true;
    return true;
  }

  // Gives back the claim try_claim() took. Wakes the worker only if a task waits for the claim:
  // a wake-up for nothing would cost the very hand-off the caller's thread is avoiding.
  void release_claim() {
    bool waiting = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      claimed_ = false;
      waiting = !queue_.empty();
    }
    if (waiting) cv_.notify_one();
  }

  // Hands the caller's claim to `task`, queued ahead of everything; never refused (it finishes a
  // request already on the wire, which must be read).
  void post_claimed(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_front(item{std::move(task), true});
    }
    cv_.notify_one();
  }

 private:
  struct item {
    std::function<void()> task;
    bool claimed;  // carries the claim of the thread that posted it
  };

  void run() {
    for (;;) {
      item next;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [this] {
          return (stop_ && queue_.empty()) ||
                 (!queue_.empty() && (queue_.front().claimed || !claimed_));
        });
        if (queue_.empty()) return;
        next = std::move(queue_.front());
        queue_.pop_front();
        claimed_ = true;
      }
      next.task();
      {
        std::lock_guard<std::mutex> lock(mutex_);
        claimed_ = false;
      }
    }
  }

  std::size_t max_queued_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<item> queue_;
  bool claimed_ = false;  // someone is calling the member
  bool stop_ = false;
  std::thread thread_;  // last: starts once everything it uses exists
};

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_QUORUM_DETAIL_FAN_OUT_WORKER_HPP
