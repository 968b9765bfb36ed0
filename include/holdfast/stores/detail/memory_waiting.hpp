// SPDX-License-Identifier: MIT
// holdfast/stores/detail/memory_waiting.hpp - memory_wait_queues: the wait queues of
// memory_store's wait_for_release and wait_for_release_any. Per key, a FIFO of waiting threads,
// each on its own condition variable, so that a release wakes one waiter and no one else. A
// thread waiting for any of several keys holds one place in each of their queues; the first
// release of any of them wakes it, a later one skips it (it is leaving) and wakes the next
// waiter, so no release is spent on a thread that already woke. memory_rw_waiters: the waiters of
// wait_for_release_rw, per read-write key and mode; a release wakes every waiting reader it may
// let in (readers share) and the first waiting writer (a hand-off, as above). Every member is
// called with the store's mutex held. Part of stores/memory.hpp; not for users.
#ifndef HOLDFAST_STORES_DETAIL_MEMORY_WAITING_HPP
#define HOLDFAST_STORES_DETAIL_MEMORY_WAITING_HPP

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/store.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

class memory_wait_queues {
 public:
  /// One waiting thread (every field guarded by the store's mutex).
  struct waiter {
    std::condition_variable cv;
    bool woken = false;      // a release chose it ...
    std::size_t by = 0;      // ... of its key number `by`
    bool cancelled = false;  // its cancel_token was stopped
  };

  /// Returns the places held now (one per key of every waiter): 0 lets release() look nothing up.
  [[nodiscard]] std::size_t places() const noexcept { return places_; }

  /// Queues `w` for every key of `names` (key i as number i). Strongly exception-safe: if an
  /// allocation fails, `w` is in no queue and the exception propagates.
  void join(const std::vector<std::string>& names, waiter* w) {
#if HOLDFAST_HAS_EXCEPTIONS
    try {
#endif
      for (std::size_t i = 0; i < names.size(); ++i) {
        queues_[names[i]].emplace_back(w, i);
        ++places_;
      }
#if HOLDFAST_HAS_EXCEPTIONS
    } catch (...) {
      leave(names, w);
      throw;
    }
#endif
  }

  /// Takes `w` out of every queue of `names` it is still in (a release took it out of the others).
  void leave(const std::vector<std::string>& names, const waiter* w) noexcept {
    for (const std::string& name : names) {
      auto q = queues_.find(name);
      if (q == queues_.end()) continue;
      auto at = std::find_if(q->second.begin(), q->second.end(),
                             [w](const place& p) { return p.first == w; });
      if (at == q->second.end()) continue;
      q->second.erase(at);
      --places_;
      if (q->second.empty()) queues_.erase(q);
    }
  }

  /// Wakes the first waiter of `key` that has not woken or been cancelled, if any; the ones
  /// before it lose their place (they are leaving). Never throws: if the key cannot be copied for
  /// the lookup (out of memory), the waiters wake at the holder's expiry instead, as if the
  /// notification had been lost.
  void wake_first(std::string_view key) noexcept {
    HOLDFAST_TRY {
      auto q = queues_.find(std::string(key));
      if (q == queues_.end()) return;
      std::optional<place> first;
      while (!first && !q->second.empty()) {
        const place p = q->second.front();
        q->second.pop_front();
        --places_;
        if (!p.first->woken && !p.first->cancelled) first = p;
      }
      if (q->second.empty()) queues_.erase(q);
      if (!first) return;
      first->first->woken = true;
      first->first->by = first->second;
      first->first->cv.notify_one();
    }
    HOLDFAST_CATCH_ALL {}
  }

 private:
  using place = std::pair<waiter*, std::size_t>;  // a waiter and the number of this key in its wait
  std::unordered_map<std::string, std::deque<place>> queues_;
  std::size_t places_ = 0;
};

class memory_rw_waiters {
 public:
  using waiter = memory_wait_queues::waiter;

  /// Returns the waiters registered now: 0 lets release_rw() look nothing up.
  [[nodiscard]] std::size_t places() const noexcept { return places_; }

  /// Returns the waiters no release has woken and no stop has cancelled yet (for metrics).
  [[nodiscard]] std::size_t asleep() const noexcept {
    std::size_t n = 0;
    for (const auto& k : keys_) {
      for (const place& p : k.second) n += p.w->woken || p.w->cancelled ? 0 : 1;
    }
    return n;
  }

  /// Registers `w`, waiting for `key` in `mode`. Strongly exception-safe (an allocation failure
  /// leaves nothing registered).
  void join(std::string_view key, lease_mode mode, waiter* w) {
    auto it = keys_.find(key);
    if (it == keys_.end()) it = keys_.emplace(std::string(key), std::vector<place>{}).first;
#if HOLDFAST_HAS_EXCEPTIONS
    try {
#endif
      it->second.push_back(place{w, mode});
#if HOLDFAST_HAS_EXCEPTIONS
    } catch (...) {
      if (it->second.empty()) keys_.erase(it);
      throw;
    }
#endif
    ++places_;
  }

  /// Takes `w` off `key`'s list.
  void leave(std::string_view key, const waiter* w) noexcept {
    auto it = keys_.find(key);
    if (it == keys_.end()) return;
    std::vector<place>& v = it->second;
    auto at = std::find_if(v.begin(), v.end(), [w](const place& p) { return p.w == w; });
    if (at == v.end()) return;
    v.erase(at);
    --places_;
    if (v.empty()) keys_.erase(it);
  }

  /// Returns true iff a waiter of `key` in `mode` is still asleep.
  [[nodiscard]] bool waits(std::string_view key, lease_mode mode) const noexcept {
    auto it = keys_.find(key);
    if (it == keys_.end()) return false;
    return std::any_of(it->second.begin(), it->second.end(), [mode](const place& p) {
      return p.mode == mode && !p.w->woken && !p.w->cancelled;
    });
  }

  /// Wakes the first sleeping writer of `key` (in the order they came), and every sleeping
  /// reader if `readers`: readers share, so a release that lets readers in lets them all in, but
  /// one writer at a time (the others would find the key taken and sleep again).
  void wake(std::string_view key, bool readers) noexcept {
    auto it = keys_.find(key);
    if (it == keys_.end()) return;
    bool writer = false;
    for (const place& p : it->second) {
      if (p.w->woken || p.w->cancelled) continue;
      if (p.mode == lease_mode::shared ? readers : !writer) {
        writer = writer || p.mode == lease_mode::exclusive;
        wake(p);
      }
    }
  }

  /// Wakes every sleeping waiter of every key.
  void wake_all() noexcept {
    for (const auto& k : keys_) {
      for (const place& p : k.second) {
        if (!p.w->woken) wake(p);
      }
    }
  }

 private:
  struct place {
    waiter* w;
    lease_mode mode;
  };
  static void wake(const place& p) noexcept {
    p.w->woken = true;
    p.w->cv.notify_one();
  }
  std::map<std::string, std::vector<place>, std::less<>> keys_;
  std::size_t places_ = 0;
};

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_DETAIL_MEMORY_WAITING_HPP
