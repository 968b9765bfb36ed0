// SPDX-License-Identifier: MIT
// holdfast/testing/progress.hpp - a progress line for long checks (check_store(), long simulator
// runs): schedules run, events per second, violations so far, time left.
//
//   progress_meter meter("check_store", schedules);          // quiet unless stderr is a terminal
//   for (std::uint32_t i = 0; i < schedules; ++i) {
//     ...
//     meter.update(i + 1, events_so_far, violations_so_far);
//   }
//   meter.finish();                                            // or let the destructor do it
//
//   mode       | prints
//   -----------+---------------------------------------------------------------------------------
//   automatic  | only if the stream is a terminal and HOLDFAST_PROGRESS is not "0"; forced on by
//              | HOLDFAST_PROGRESS=1 (then, off a terminal, one line per refresh)
//   off        | never
//   on         | always (off a terminal: one line per refresh)
//
// Nothing is printed during the first two seconds (a quick check stays silent), then the line is
// refreshed at most twice a second, in place on a terminal ("\r" and erase-to-end-of-line). The
// meter reads std::chrono::steady_clock (real time, not simulated time: it measures the checker).
//
// Thread-safety: a meter belongs to one thread.
//
// stall_watchdog: a check whose simulated schedule blocks for good (a store holding its own lock
// across a step point) is ended with a message naming the likely cause, instead of hanging.
#ifndef HOLDFAST_TESTING_PROGRESS_HPP
#define HOLDFAST_TESTING_PROGRESS_HPP

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "holdfast/detail/config.hpp"

#if defined(_WIN32)
#include <io.h>
#elif defined(__has_include)
#if __has_include(<unistd.h>)
#include <unistd.h>
#define HOLDFAST_PROGRESS_HAS_ISATTY 1
#endif
#endif

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace testing {

/// When a progress_meter prints (see the table at the top of progress.hpp).
enum class progress_mode : std::uint8_t {
  automatic,  ///< On a terminal, unless HOLDFAST_PROGRESS=0; HOLDFAST_PROGRESS=1 forces it on.
  off,        ///< Never.
  on,         ///< Always.
};

namespace detail {

inline bool is_terminal(std::FILE* f) noexcept {
  if (f == nullptr) return false;
#if defined(_WIN32)
  return _isatty(_fileno(f)) != 0;
#elif defined(HOLDFAST_PROGRESS_HAS_ISATTY)
  return ::isatty(::fileno(f)) != 0;
#else
  return false;
#endif
}

}  // namespace detail

/// A progress line for a long loop of schedules; see the top of progress.hpp.
///
/// Thread-safety: one thread at a time.
class progress_meter {
 public:
  using clock = std::chrono::steady_clock;

  /// Makes a meter for `total` units of work (schedules; 0 if unknown: no time-left estimate)
  /// named `what`, printing to `out` (default stderr) as `mode` says.
  progress_meter(std::string what, std::uint64_t total,
                 progress_mode mode = progress_mode::automatic, std::FILE* out = stderr)
      : what_(std::move(what)), total_(total), out_(out), start_(clock::now()), next_(start_) {
    tty_ = detail::is_terminal(out_);
    // NOLINTNEXTLINE(concurrency-mt-unsafe): read once; holdfast never sets the environment.
    const char* env = std::getenv("HOLDFAST_PROGRESS");
    switch (mode) {
      case progress_mode::off:
        enabled_ = false;
        break;
      case progress_mode::on:
        enabled_ = out_ != nullptr;
        break;
      case progress_mode::automatic:
        if (env != nullptr && std::strcmp(env, "0") == 0) {
          enabled_ = false;
        } else if (env != nullptr && std::strcmp(env, "1") == 0) {
          enabled_ = out_ != nullptr;
        } else {
          enabled_ = tty_;
        }
        break;
    }
    next_ = start_ + std::chrono::seconds(2);
  }

  progress_meter(const progress_meter&) = delete;
  progress_meter& operator=(const progress_meter&) = delete;

  /// Ends the line if anything was printed.
  ~progress_meter() { finish(); }

  /// Returns true iff this meter may print.
  [[nodiscard]] bool enabled() const noexcept { return enabled_; }

  /// Records that `done` units are finished, `events` simulated events were checked in all and
  /// `violations` were found so far; prints if it is time to. Cheap when disabled (one branch)
  /// and otherwise one clock read.
  void update(std::uint64_t done, std::uint64_t events, std::uint64_t violations) {
    if (!enabled_) return;
    last_ = {done, events, violations};
    const clock::time_point now = clock::now();
    if (now < next_) return;
    next_ = now + std::chrono::milliseconds(500);
    print(now, done, events, violations, false);
  }

  /// Prints the final state (if anything was printed before) and ends the line. Idempotent.
  void finish() {
    if (!enabled_ || !printed_ || finished_) return;
    finished_ = true;
    print(clock::now(), last_.done, last_.events, last_.violations, true);
  }

  /// Returns the line update() would print for these figures after `elapsed` (for tests).
  [[nodiscard]] std::string line(std::uint64_t done, std::uint64_t events, std::uint64_t violations,
                                 clock::duration elapsed) const {
    const double secs = std::chrono::duration<double>(elapsed).count();
    char buf[256];
    int n = std::snprintf(buf, sizeof buf, "%s: %llu", what_.c_str(),
                          static_cast<unsigned long long>(done));
    std::string s(buf, n > 0 ? static_cast<std::size_t>(n) : 0);
    if (total_ != 0) {
      std::snprintf(buf, sizeof buf, "/%llu schedules (%.0f%%)",
                    static_cast<unsigned long long>(total_),
                    100.0 * static_cast<double>(done) / static_cast<double>(total_));
    } else {
      std::snprintf(buf, sizeof buf, " schedules");
    }
    s += buf;
    std::snprintf(buf, sizeof buf, ", %.0f events/s, %llu violation%s",
                  secs > 0 ? static_cast<double>(events) / secs : 0.0,
                  static_cast<unsigned long long>(violations), violations == 1 ? "" : "s");
    s += buf;
    if (total_ != 0 && done != 0 && done < total_) {
      const double left = secs * static_cast<double>(total_ - done) / static_cast<double>(done);
      std::snprintf(buf, sizeof buf, ", ~%.0fs left", left);
      s += buf;
    }
    std::snprintf(buf, sizeof buf, " [%.0fs]", secs);
    s += buf;
    return s;
  }

 private:
  struct figures {
    std::uint64_t done = 0;
    std::uint64_t events = 0;
    std::uint64_t violations = 0;
  };

  void print(clock::time_point now, std::uint64_t done, std::uint64_t events,
             std::uint64_t violations, bool final) {
    const std::string s = line(done, events, violations, now - start_);
    if (tty_) {
      std::fprintf(out_, "\r%s\033[K%s", s.c_str(), final ? "\n" : "");
    } else {
      std::fprintf(out_, "%s\n", s.c_str());
    }
    std::fflush(out_);
    printed_ = true;
  }

  std::string what_;
  std::uint64_t total_;
  std::FILE* out_;
  clock::time_point start_;
  clock::time_point next_;
  figures last_{};
  bool enabled_ = false;
  bool tty_ = false;
  bool printed_ = false;
  bool finished_ = false;
};

/// Ends a check that has stopped making progress, with a message instead of a silent hang.
///
/// The simulator runs every client on one thread, switching between them at step points; a store
/// that holds a lock of its own (a mutex, an open transaction) across a step point blocks that
/// thread for good as soon as another client reaches the same lock. Nothing can resume it, so
/// the watchdog, a thread of its own, prints what probably happened to stderr and aborts the
/// process (a test runner then reports the failure) once `beat()` has not been called for
/// `limit` of real time. A limit of zero disables it (no thread is started).
///
///   stall_watchdog dog("check_store", std::chrono::seconds(60));
///   for (...) { run_one_schedule(); dog.beat(); }
///
/// Thread-safety: beat() may be called from any thread; the destructor stops and joins the
/// watchdog thread.
class stall_watchdog {
 public:
  /// Starts watching `what` (named in the message) with `limit` of real time between beats.
  stall_watchdog(std::string what, std::chrono::milliseconds limit) : what_(std::move(what)) {
    if (limit <= std::chrono::milliseconds::zero()) return;
    thread_ = std::thread([this, limit] { watch(limit); });
  }
  stall_watchdog(const stall_watchdog&) = delete;
  stall_watchdog& operator=(const stall_watchdog&) = delete;
  ~stall_watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }

  /// Records progress (a schedule finished, a shrink step ran).
  void beat() noexcept { beats_.fetch_add(1, std::memory_order_relaxed); }

 private:
  void watch(std::chrono::milliseconds limit) {
    using clock = std::chrono::steady_clock;
    std::unique_lock<std::mutex> lock(mu_);
    std::uint64_t seen = beats_.load(std::memory_order_relaxed);
    clock::time_point last = clock::now();
    while (!stop_) {
      cv_.wait_for(lock, std::chrono::milliseconds(200));
      if (stop_) return;
      const std::uint64_t now_beats = beats_.load(std::memory_order_relaxed);
      const clock::time_point now = clock::now();
      if (now_beats != seen) {
        seen = now_beats;
        last = now;
      } else if (now - last >= limit) {
        std::fprintf(stderr,
                     "holdfast: %s made no progress for %lld ms of real time: a simulated "
                     "schedule is blocked. The usual cause is a store holding a lock of its own "
                     "(a mutex, an open transaction) across a step point, or blocking on "
                     "something only another simulated client can release (step_point.hpp). "
                     "Aborting.\n",
                     what_.c_str(), static_cast<long long>(limit.count()));
        std::fflush(stderr);
        std::abort();
      }
    }
  }

  std::string what_;
  std::atomic<std::uint64_t> beats_{0};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_PROGRESS_HPP