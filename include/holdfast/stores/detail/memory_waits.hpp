// SPDX-License-Identifier: MIT
// holdfast/stores/detail/memory_waits.hpp - memory_store's waits for a plain lease: not public.
// memory_store derives from memory_waits (CRTP), which reaches the store's mutex, clock and
// records through friendship, as memory_shared.hpp does for the read-write grants.
//
//   member                 | who wakes it
//   -----------------------+-----------------------------------------------------------------
//   wait_for_release       | the key's release, one waiter per release in FIFO order (the
//   wait_for_release_any   | queues of memory_waiting.hpp), its holder's expiry, its deadline
//   watch_release          | every release or take-over of the key (one condition variable for
//                          | all watchers), its holder's expiry, its deadline
//
// Each also ends at a stop of its cancel_token, which wakes it from the cancelling thread. All of
// them exist only when Clock is steady_clock, the one clock a condition variable can wait on.
// release() calls released() with the store's mutex held; it looks nothing up while nobody waits.
// Part of stores/memory.hpp; not for users.
#ifndef HOLDFAST_STORES_DETAIL_MEMORY_WAITS_HPP
#define HOLDFAST_STORES_DETAIL_MEMORY_WAITS_HPP

#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "holdfast/cancel.hpp"
#include "holdfast/clock.hpp"
#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/result.hpp"
#include "holdfast/stores/detail/memory_waiting.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

// The plain waits of memory_store<Clock> (Store), as a base it derives from (CRTP).
template <class Store, class Clock>
class memory_waits {
  using time_point = typename Clock::time_point;

 public:
  /// Blocks until `key` may be free: released (the first waiter of the key is woken), or its
  /// holder's lease expired by the store's clock, or `deadline` passed, or `cancel` was stopped,
  /// whichever comes first; returns at once if the key is free now. Waiters are woken one per
  /// release, in the order they started waiting; a woken waiter should try_acquire at once (it may
  /// still find the key taken by a newcomer). Waking says nothing about the key: the store stays
  /// the judge. A stop wakes the waiter's condition variable from the cancelling thread; a
  /// cancelled waiter leaves the queue and passes on a hand-off a release had chosen it for. The
  /// store's wait_for_release capability and its cancellable form (store.hpp), used by blocking
  /// acquire(); offered only when Clock is steady_clock. \returns success (woken, for any of the
  ///   reasons above); errc::cancelled once `cancel` was stopped (at once if it already was);
  ///   errc::invalid_argument for an empty key. Exceptions: std::bad_alloc may propagate.
  template <class C = Clock, class = std::enable_if_t<std::is_same_v<C, steady_clock>>>
  result<void> wait_for_release(std::string_view key, const time_point& deadline,
                                const cancel_token& cancel = {}) {
    if (key.empty()) return errc::invalid_argument;
    result<std::size_t> r = wait_any(&key, 1, deadline, cancel);
    if (!r) return r.error();
    return {};
  }

  /// Blocks until any of `keys` may be free, as wait_for_release waits for one (store.hpp's
  /// wait_for_release_any capability, used by semaphore::acquire()): the waiter holds a place in
  /// the FIFO queue of every key, and the first release of any of them wakes it (a later one
  /// skips it and wakes the next waiter of its key). Also ends at the earliest holder's expiry,
  /// at `deadline`, or at a stop of `cancel`; returns at once if a key is free now. Offered only
  /// when Clock is steady_clock. \returns the index of a key that may be free (released,
  ///   expired, or free now: try it first), or keys.size() if `deadline` came first;
  ///   errc::cancelled, errc::invalid_argument (no keys, or an empty one) as wait_for_release.
  template <class C = Clock, class = std::enable_if_t<std::is_same_v<C, steady_clock>>>
  result<std::size_t> wait_for_release_any(const std::vector<std::string>& keys,
                                           const time_point& deadline,
                                           const cancel_token& cancel = {}) {
    std::vector<std::string_view> views(keys.begin(), keys.end());
    for (const std::string_view k : views) {
      if (k.empty()) return errc::invalid_argument;
    }
    if (views.empty()) return errc::invalid_argument;
    return wait_any(views.data(), views.size(), deadline, cancel);
  }

  /// Blocks until `key` may have changed hands, for observers (election::next_leader): until its
  /// lease is released or taken over, or expires by the store's clock, or `deadline`, whichever
  /// comes first, or until `cancel` is stopped (its wake-up wakes the watchers from the cancelling
  /// thread); at once if the key is free now, or not held under `known` (when given: the holder
  /// the caller read is gone; store.hpp's can_watch_known_holder_v). Unlike wait_for_release it
  /// takes no place in the hand-off queue: every watcher wakes on every release. Offered only when
  /// Clock is steady_clock. \returns success; errc::cancelled once `cancel` was stopped;
  ///   errc::invalid_argument for an empty key.
  template <class C = Clock, class = std::enable_if_t<std::is_same_v<C, steady_clock>>>
  result<void> watch_release(std::string_view key, const time_point& deadline,
                             const cancel_token& cancel = {}, fencing_token known = {}) {
    if (key.empty()) return errc::invalid_argument;
    Store& s = self();
    cancel_token::waker guard;  // before the lock: see wait_any
    if (cancel.stop_possible()) cancel.on_stop(guard, [this] { wake_cancelled(nullptr); });
    std::unique_lock<std::mutex> lock(s.mutex_);
    if (cancel.stop_requested()) return errc::cancelled;
    const time_point now = s.clock_.now();
    auto it = s.find(key);
    if (it == s.map_.end() || !(now < it->second.expires_at)) return {};
    const fencing_token token = known.is_none() ? it->second.token : known;
    const time_point until = deadline < it->second.expires_at ? deadline : it->second.expires_at;
    ++watching_;
    watch_cv_.wait_until(lock, until, [&] {
      if (cancel.stop_requested()) return true;
      auto i = s.find(key);
      return i == s.map_.end() || i->second.token != token;
    });
    --watching_;
    if (cancel.stop_requested()) return errc::cancelled;
    return {};
  }

  /// Returns how many threads are blocked in watch_release() now (for tests and metrics).
  [[nodiscard]] std::size_t watching() const {
    std::lock_guard<std::mutex> lock(self().mutex_);
    return watching_;
  }

  /// Returns how many places the threads blocked in wait_for_release() (one each) and
  /// wait_for_release_any() (one per key) hold in the wait queues now (for tests and metrics).
  [[nodiscard]] std::size_t waiting() const {
    std::lock_guard<std::mutex> lock(self().mutex_);
    return waiters_.places();
  }

 protected:
  memory_waits() = default;
  ~memory_waits() = default;

  // A plain release of `key` took effect (the store's mutex held): wakes its first waiter and
  // every watcher. Looks nothing up while nobody waits.
  void released(std::string_view key) noexcept {
    if (waiters_.places() != 0) waiters_.wake_first(key);
    if (watching_ != 0) watch_cv_.notify_all();
  }

 private:
  using waiter = memory_wait_queues::waiter;

  Store& self() noexcept { return static_cast<Store&>(*this); }
  const Store& self() const noexcept { return static_cast<const Store&>(*this); }

  // The stop of a waiter's cancel_token (on the cancelling thread): wakes that waiter, or for
  // nullptr the watchers (each checks its own token).
  void wake_cancelled(waiter* w) {
    std::lock_guard<std::mutex> lock(self().mutex_);
    if (w == nullptr) return watch_cv_.notify_all();
    w->cancelled = true;
    w->cv.notify_all();
  }

  // The wait of wait_for_release(_any) for `n` keys (see there): the index of a key that may be
  // free, n at the deadline, or errc::cancelled.
  result<std::size_t> wait_any(const std::string_view* keys, std::size_t n,
                               const time_point& deadline, const cancel_token& cancel) {
    Store& s = self();
    // Declared before the lock, so the stop's wake-up (which takes the store's mutex on the
    // cancelling thread, under the token's own lock) is unregistered only after it is released.
    waiter w;
    cancel_token::waker guard;
    if (cancel.stop_possible()) cancel.on_stop(guard, [this, &w] { wake_cancelled(&w); });
    std::unique_lock<std::mutex> lock(s.mutex_);
    if (cancel.stop_requested()) return errc::cancelled;
    const time_point now = s.clock_.now();
    time_point until = deadline;
    std::size_t soonest = n;  // the key whose holder's expiry ends the wait, if one does
    for (std::size_t i = 0; i < n; ++i) {
      auto it = s.find(keys[i]);
      if (it == s.map_.end() || !(now < it->second.expires_at)) return i;
      if (it->second.expires_at < until) {
        until = it->second.expires_at;
        soonest = i;
      }
    }
    if (!(now < until)) return soonest;
    const std::vector<std::string> names(keys, keys + n);
    waiters_.join(names, &w);
    w.cv.wait_until(lock, until, [&w] { return w.woken || w.cancelled; });
    waiters_.leave(names, &w);  // expiry, deadline, a stop, or the queues of other keys
    if (!w.cancelled) return w.woken ? w.by : soonest;
    if (w.woken) waiters_.wake_first(names[w.by]);  // the hand-off goes on, not to nobody
    return errc::cancelled;
  }

  memory_wait_queues waiters_;        // wait_for_release(_any): per key, FIFO
  std::condition_variable watch_cv_;  // watch_release sleeps here; every release wakes all
  std::size_t watching_ = 0;
};

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_DETAIL_MEMORY_WAITS_HPP
