// SPDX-License-Identifier: MIT
// holdfast/testing/detail/sim_scheduler.hpp - the simulator's client tasks and the loop that runs
// them: each simulated client is a task on its own fiber (fiber.hpp); one runs at a time, until it
// suspends itself (a sleep, a request in flight, a pause, a yield) or finishes.
//
// Not a public header: the simulator (testing/simulator.hpp) owns one sim_scheduler and decides,
// through the chooser it passes to run(), which ready task runs next.
//
// The loop. A task is ready when true time has reached its wake-up time. Among the ready tasks the
// one that ran last comes first (choice 0), then the others in spawn order; the chooser picks one
// when there are several. When none is ready, true time jumps to the earliest wake-up. So a run
// costs CPU per event, not per simulated second, and is a pure function of the choices.
//
// Exceptions: if a task's body throws, every task is marked crashed (each then finishes at once,
// see the simulator's "Crash") and run() rethrows the first exception after all have finished.
//
// Thread-safety: the simulator's thread only.
#ifndef HOLDFAST_TESTING_DETAIL_SIM_SCHEDULER_HPP
#define HOLDFAST_TESTING_DETAIL_SIM_SCHEDULER_HPP

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/testing/detail/fiber.hpp"
#include "holdfast/testing/history.hpp"

#if HOLDFAST_HAS_EXCEPTIONS
#include <exception>
#endif

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace testing {
namespace detail {

/// A store operation in progress (simulator::store_call): registered by sim_store around each
/// call into its store, so that a step_kind::takes_effect point reaches the wrapper of the
/// operation it belongs to. Registrations nest (a wrapped quorum calling wrapped members): the
/// innermost one is told.
struct sim_store_call {
  void (*takes_effect)(void* self) = nullptr;  ///< Called at a takes_effect point.
  /// Called at a between point once the client runs again; may throw to end the operation there
  /// (sim_store: the store crashed while the operation was inside it).
  void (*between)(void* self) = nullptr;
  void* self = nullptr;             ///< The argument of both.
  sim_store_call* outer = nullptr;  ///< The registration it hides (set by enter).
};

class sim_scheduler;

/// One simulated client process: its body on its own fiber, when it runs next, and whether it has
/// crashed (the simulator's state of the process).
struct sim_task {
  sim_scheduler* sched = nullptr;
  node_id node = no_node;
  std::function<void()> body;
  fiber fib;
  std::int64_t wake_ns = 0;        // ready once true time reaches this
  std::int64_t drain_ns = 0;       // crashed: how far its clock reads have raced ahead
  sim_store_call* call = nullptr;  // innermost store operation in progress
  bool done = false;
  bool crashed = false;
};

/// The client tasks and the loop that runs them (see the file comment).
class sim_scheduler {
 public:
  /// The longest a run may go on, in scheduler steps, before the simulator gives up (a client
  /// that never sleeps nor finishes is a bug in the workload).
  static constexpr std::uint64_t step_limit = 50000000;

  sim_scheduler() {
    tasks_.reserve(8);  // a schedule's few tasks without regrowing (one scheduler per execution)
    ready_.reserve(8);
  }
  sim_scheduler(const sim_scheduler&) = delete;
  sim_scheduler& operator=(const sim_scheduler&) = delete;
  ~sim_scheduler() = default;

  /// Starts a task on node `n` running `body`, ready at true time `now`.
  void spawn(node_id n, std::function<void()> body, std::int64_t now) {
    auto t = std::make_unique<sim_task>();
    t->sched = this;
    t->node = n;
    t->body = std::move(body);
    t->wake_ns = now;
    t->fib.start(&task_entry, t.get());
    tasks_.push_back(std::move(t));
    ++live_;
  }

  /// Runs every task to completion, advancing true time `now` to each next wake-up when none is
  /// ready; `choose(n)` (n > 1) returns which of n ready tasks runs next. Rethrows a task's
  /// exception once all have finished.
  template <class Choose>
  void run(std::int64_t& now, Choose&& choose) {
    fiber::bind_main(main_);
    while (live_ > 0) {
      if (++steps_ > step_limit) fiber_fatal("simulation exceeded its step limit");
      const std::int64_t next = collect_ready(now);
      if (ready_.empty()) {
        now = next;
        continue;
      }
      sim_task* t =
          ready_[ready_.size() > 1 ? choose(static_cast<std::uint32_t>(ready_.size())) : 0];
      last_ = t;
      current_ = t;
      ++switches_;
      fiber::switch_to(main_, t->fib);
      current_ = nullptr;
      if (t->done) reap(t);
    }
    tasks_.clear();
    last_ = nullptr;
#if HOLDFAST_HAS_EXCEPTIONS
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
#endif
  }

  /// Returns the running task, or null outside any.
  [[nodiscard]] sim_task* current() const noexcept {
    return current_;
  }

  /// Suspends the running task `t` until true time reaches `wake_ns` (other tasks run meanwhile).
  void suspend_until(sim_task& t, std::int64_t wake_ns) {
    t.wake_ns = wake_ns;
    fiber::switch_to(t.fib, main_);
  }

  /// Calls `f(task&)` for every task not yet finished (e.g. to crash them all at one instant).
  template <class F>
  void for_each_live(F&& f) {
    for (const std::unique_ptr<sim_task>& t : tasks_) {
      if (!t->done) f(*t);
    }
  }

  /// Returns how many times the loop switched into a task.
  [[nodiscard]] std::uint64_t switches() const noexcept {
    return switches_;
  }

 private:
  // Fills ready_ (the task that ran last first, then spawn order) and returns the earliest
  // wake-up among the tasks that are not ready.
  std::int64_t collect_ready(std::int64_t now) {
    ready_.clear();
    std::int64_t next = std::numeric_limits<std::int64_t>::max();
    if (last_ != nullptr && !last_->done && last_->wake_ns <= now) ready_.push_back(last_);
    for (const std::unique_ptr<sim_task>& t : tasks_) {
      if (t->done) continue;
      if (t->wake_ns <= now) {
        if (t.get() != last_) ready_.push_back(t.get());
      } else if (t->wake_ns < next) {
        next = t->wake_ns;
      }
    }
    return next;
  }

  static void task_entry(void* arg) {
    sim_task* t = static_cast<sim_task*>(arg);
    sim_scheduler& s = *t->sched;
    fiber::entered(s.main_);
#if HOLDFAST_HAS_EXCEPTIONS
    try {
      t->body();
    } catch (...) {
      if (!s.error_) s.error_ = std::current_exception();
      for (const std::unique_ptr<sim_task>& other : s.tasks_) other->crashed = true;
    }
#else
    t->body();
#endif
    t->body = nullptr;  // destroy captures on this fiber's stack while it still exists
    t->done = true;
    fiber::finish(t->fib, s.main_);
  }

  void reap(sim_task* t) {
    --live_;
    if (last_ == t) last_ = nullptr;
    tasks_.erase(std::find_if(tasks_.begin(), tasks_.end(),
                              [t](const std::unique_ptr<sim_task>& p) { return p.get() == t; }));
  }

  std::vector<std::unique_ptr<sim_task>> tasks_;
  std::vector<sim_task*> ready_;
  sim_task* current_ = nullptr;
  sim_task* last_ = nullptr;
  std::size_t live_ = 0;
  std::uint64_t steps_ = 0;
  std::uint64_t switches_ = 0;
  fiber main_;
#if HOLDFAST_HAS_EXCEPTIONS
  std::exception_ptr error_;
#endif
};

}  // namespace detail
}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_DETAIL_SIM_SCHEDULER_HPP
