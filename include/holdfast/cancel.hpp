// SPDX-License-Identifier: MIT
// holdfast/cancel.hpp - cancelling a blocking call from another thread: cancel_source (the side
// that cancels) and cancel_token (the side that is cancelled), and the interruptible sleep every
// blocking call of holdfast uses.
//
//   holdfast::cancel_source stop;                  // e.g. owned by the SIGTERM handler's thread
//   holdfast::acquire_options<> opts;
//   opts.cancel = stop.token();                    // C++20: or a std::stop_token (std::jthread's)
//   auto lease = holdfast::acquire(store, "jobs", 10s, 5min, opts);
//   ...                                            // elsewhere: stop.request_stop();
//   if (lease.error() == holdfast::errc::cancelled) { /* nothing is held */ }
//
// One type users name in C++17 and C++20: cancel_token. Under C++20 a std::stop_token converts to
// it (implicitly), so a std::jthread's token or a std::stop_source's works everywhere a
// cancel_token does. A default cancel_token is never cancelled and costs nothing.
//
// How fast a cancellation lands: a blocking call checks its token before every store call and
// after every wait, and its sleeps end at once on request_stop() when the clock is steady_clock
// (the sleep waits on a condition variable on the same steady time) or interruptible
// (clock.hpp's is_interruptible_clock_v: manual_clock; woken through wake_sleepers()). A wait
// inside the store (wait_for_release, watch_release) ends at once too where the store offers
// the cancellable form (store.hpp's can_cancel_wait_for_release_v: memory_store, Redis,
// PostgreSQL, etcd), whose sleep on_stop() wakes: the wait costs the same store calls with a
// token as without one. So a cancelled call returns errc::cancelled within one store round trip
// (the one in flight). On another clock (a simulator's, a user's) the sleep in progress runs to
// its end first; a user's store that waits without the cancellable form is woken no later than
// every cancel_wait_slice (100 ms) to check the token, and called again, not asked again.
//
// Thread-safety: request_stop(), stop_requested() and every member of cancel_token may be called
// concurrently from any thread. Modelled on C++20's std::stop_source/std::stop_token (P0660).
#ifndef HOLDFAST_CANCEL_HPP
#define HOLDFAST_CANCEL_HPP

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#if __cplusplus >= 202002L && __has_include(<stop_token>)
#include <stop_token>
#endif

#include "holdfast/clock.hpp"
#include "holdfast/detail/config.hpp"

#if defined(__cpp_lib_jthread) && __cpp_lib_jthread >= 201911L
#define HOLDFAST_HAS_STOP_TOKEN 1
#else
#define HOLDFAST_HAS_STOP_TOKEN 0
#endif

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

/// The longest a blocking call waits inside a store whose wait has no cancellable form
/// (store.hpp) before it checks its cancel_token again, when the token can be cancelled (100 ms).
/// Stores with the form are woken by the stop itself and are not sliced.
inline constexpr std::chrono::milliseconds cancel_wait_slice{100};

namespace detail {

// What a cancel_source and its tokens share: the flag, and the wakers of the sleeps in progress.
struct cancel_state {
  std::atomic<bool> requested{false};
  std::mutex mutex;
  std::uint64_t next_id = 0;
  std::vector<std::pair<std::uint64_t, std::function<void()>>> wakers;
};

}  // namespace detail

class cancel_source;

/// The cancelled side: a handle that says whether its source asked to stop. Cheap to copy (a
/// shared pointer, or a std::stop_token under C++20). A default token is never cancelled.
class cancel_token {
 public:
  /// Makes a token that is never cancelled.
  cancel_token() noexcept = default;

#if HOLDFAST_HAS_STOP_TOKEN
  /// Adopts a C++20 std::stop_token (implicit: pass a std::jthread's token where holdfast takes a
  /// cancel_token).
  cancel_token(std::stop_token st) noexcept : std_(std::move(st)) {}  // NOLINT: implicit by design
#endif

  /// Returns true iff a stop was requested.
  [[nodiscard]] bool stop_requested() const noexcept {
#if HOLDFAST_HAS_STOP_TOKEN
    if (std_.stop_requested()) return true;
#endif
    return state_ != nullptr && state_->requested.load(std::memory_order_acquire);
  }

  /// Returns true iff a stop can still be requested (or already was): false for a default token.
  [[nodiscard]] bool stop_possible() const noexcept {
#if HOLDFAST_HAS_STOP_TOKEN
    if (std_.stop_possible()) return true;
#endif
    return state_ != nullptr;
  }

  /// A registration of on_stop(): unregisters its wake function when destroyed.
  class waker {
   public:
    waker() = default;
    waker(const waker&) = delete;
    waker& operator=(const waker&) = delete;
    waker(waker&&) = delete;
    waker& operator=(waker&&) = delete;
    ~waker() {
      if (state_ == nullptr) return;
      std::lock_guard<std::mutex> lock(state_->mutex);
      for (std::size_t i = 0; i < state_->wakers.size(); ++i) {
        if (state_->wakers[i].first == id_) {
          state_->wakers.erase(state_->wakers.begin() + static_cast<std::ptrdiff_t>(i));
          break;
        }
      }
    }

   private:
    friend class cancel_token;
    std::shared_ptr<detail::cancel_state> state_;
    std::uint64_t id_ = 0;
#if HOLDFAST_HAS_STOP_TOKEN
    std::optional<std::stop_callback<std::function<void()>>> std_;
#endif
  };

  /// Runs `wake` once when a stop is requested, while `guard` lives (at once, on this thread, if
  /// one already was). `wake` must be cheap, must not block and must not call into this token's
  /// source; it runs on the thread that calls request_stop(). For holdfast's sleeps; users need
  /// not call it.
  void on_stop(waker& guard, const std::function<void()>& wake) const {
#if HOLDFAST_HAS_STOP_TOKEN
    if (std_.stop_possible()) guard.std_.emplace(std_, wake);
#endif
    if (state_ == nullptr) return;
    bool now = false;
    {
      std::lock_guard<std::mutex> lock(state_->mutex);
      now = state_->requested.load(std::memory_order_acquire);
      if (!now) {
        guard.state_ = state_;
        guard.id_ = ++state_->next_id;
        state_->wakers.emplace_back(guard.id_, wake);
      }
    }
    if (now) wake();
  }

 private:
  friend class cancel_source;
  explicit cancel_token(std::shared_ptr<detail::cancel_state> s) noexcept : state_(std::move(s)) {}

  std::shared_ptr<detail::cancel_state> state_;
#if HOLDFAST_HAS_STOP_TOKEN
  std::stop_token std_;
#endif
};

/// The cancelling side: request_stop() cancels every blocking call given one of its tokens, now
/// and later (a stop cannot be taken back). Copies share one state. Thread-safe.
class cancel_source {
 public:
  /// Makes a source nobody has asked to stop yet.
  cancel_source() : state_(std::make_shared<detail::cancel_state>()) {}

  /// Returns a token of this source.
  [[nodiscard]] cancel_token token() const noexcept { return cancel_token(state_); }

  /// Asks every holder of a token to stop and wakes their sleeps. \returns true iff this call
  /// made the request (false if one was made before).
  bool request_stop() {
    // The wakers run under the lock: a sleep that ends meanwhile unregisters its waker (under the
    // same lock) before its condition variable goes away, so no waker outlives what it wakes.
    std::lock_guard<std::mutex> lock(state_->mutex);
    if (state_->requested.exchange(true, std::memory_order_acq_rel)) return false;
    for (auto& w : state_->wakers) w.second();
    state_->wakers.clear();
    return true;
  }

  /// Returns true iff request_stop() was called.
  [[nodiscard]] bool stop_requested() const noexcept {
    return state_->requested.load(std::memory_order_acquire);
  }

 private:
  std::shared_ptr<detail::cancel_state> state_;
};

namespace detail {

/// Sleeps on `clock` until `deadline` or until `cancel` is stopped, whichever comes first (see the
/// file overview for which clocks are interrupted at once). Returns false iff cancelled.
template <class Clock>
bool sleep_until_or_cancelled(Clock& clock, typename Clock::time_point deadline,
                              const cancel_token& cancel) {
  if (!cancel.stop_possible()) {
    clock.sleep_until(deadline);
    return true;
  }
  if (cancel.stop_requested()) return false;
  if constexpr (std::is_same_v<Clock, steady_clock>) {
    std::mutex m;
    std::condition_variable cv;
    cancel_token::waker guard;
    cancel.on_stop(guard, [&] {
      std::lock_guard<std::mutex> lock(m);
      cv.notify_all();
    });
    std::unique_lock<std::mutex> lock(m);
    cv.wait_until(lock, deadline, [&] { return cancel.stop_requested(); });
  } else if constexpr (is_interruptible_clock_v<Clock>) {
    cancel_token::waker guard;
    Clock waking = clock;
    cancel.on_stop(guard, [waking]() mutable { waking.wake_sleepers(); });
    (void)clock.sleep_until(deadline, [&] { return cancel.stop_requested(); });
  } else {
    clock.sleep_until(deadline);
  }
  return !cancel.stop_requested();
}

}  // namespace detail

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_CANCEL_HPP
