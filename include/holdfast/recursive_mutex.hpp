// SPDX-License-Identifier: MIT
// holdfast/recursive_mutex.hpp - recursive_distributed_mutex<Store, Clock>: distributed_mutex
// (mutex.hpp) that the thread holding it may lock again, as std::recursive_mutex and
// std::recursive_timed_mutex may be ([thread.mutex.recursive], [thread.timedmutex.recursive]).
//
//   holdfast::recursive_distributed_mutex<holdfast::memory_store<>> m(store, "orders", 10s);
//   void transfer() { std::lock_guard<decltype(m)> g(m); debit(); credit(); }
//   void debit()    { std::lock_guard<decltype(m)> g(m); db.write(m, ...); }  // re-entry
//
// The first lock() of a thread acquires a lease, as distributed_mutex does (one store call, a
// fresh owner id per hold); every further lock(), try_lock() or try_lock_for() by that thread is a
// re-entry: no store call, counted, the same lease and fencing token. unlock() undoes one lock;
// the lease is released in the store when the thread's count returns to zero. The count lives in
// the process (as Curator's InterProcessMutex counts per thread in the JVM), so no request carries
// it and a lost reply cannot count twice (redisson #7367; see reentrant.hpp).
//
// The standard's requirements: the owning thread may lock again; the mutex is released when
// unlock() has been called as many times as it was locked; the maximum level of ownership is
// max_recursion() (2^32 - 1 here), beyond which lock() throws std::system_error
// (resource_unavailable_try_again) and try_lock() returns false. Unlocking a mutex the calling
// thread does not own is undefined for std::recursive_mutex; here it does nothing and
// last_error() is errc::not_holder. A lease can be lost while held (mutex.hpp's overview): a
// re-entry checks nothing in the store, so check valid() and fence with token() and owner().
#ifndef HOLDFAST_RECURSIVE_MUTEX_HPP
#define HOLDFAST_RECURSIVE_MUTEX_HPP

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <utility>

#include "holdfast/clock.hpp"
#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/mutex.hpp"
#include "holdfast/store.hpp"

#if HOLDFAST_HAS_EXCEPTIONS
#include <stdexcept>
#endif

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

/// A distributed mutex that the thread holding it may lock again (see the overview of
/// recursive_mutex.hpp). Models Lockable and TimedLockable with the recursive mutex's rules.
///
/// Thread-safety: as distributed_mutex: every member may be called concurrently; each thread acts
/// on its own hold. Neither copyable nor movable. Destroying it releases every lock still held.
template <class Store, class Clock = steady_clock>
HOLDFAST_REQUIRES(lease_store<Store>&& ttl_clock<Clock>)
class recursive_distributed_mutex {
 public:
  using mutex_type = distributed_mutex<Store, Clock>;
  using lease_type = typename mutex_type::lease_type;
  using time_point = typename mutex_type::time_point;

  /// Makes an unlocked mutex on `key` of `store` whose holds are leases of `ttl`; arguments and
  /// options as distributed_mutex's constructor (bad ones are reported by error()).
  template <class Rep, class Period>
  recursive_distributed_mutex(Store& store, std::string key, std::chrono::duration<Rep, Period> ttl,
                              mutex_options<Clock> opts = {})
      : m_(store, std::move(key), ttl, std::move(opts)) {}
  recursive_distributed_mutex(const recursive_distributed_mutex&) = delete;
  recursive_distributed_mutex& operator=(const recursive_distributed_mutex&) = delete;

  /// The deepest ownership a thread may reach: 2^32 - 1 locks without an unlock.
  static constexpr std::uint32_t max_recursion() noexcept { return UINT32_MAX; }

  /// Blocks until the calling thread holds the mutex: a re-entry at once if it already does,
  /// else distributed_mutex::lock() (which throws std::system_error on an error retrying cannot
  /// cure). Throws std::system_error(resource_unavailable_try_again) at max_recursion().
  void lock() {
    if (reenter()) return;
    m_.lock();
    first();
  }

  /// Takes the mutex without waiting: a re-entry if the calling thread holds it, else one store
  /// call. \returns true if held now; false if busy, at max_recursion() or the store failed
  /// (last_error() says why).
  bool try_lock() {
    if (std::optional<bool> r = try_reenter()) return *r;
    if (!m_.try_lock()) return false;
    first();
    return true;
  }

  /// Like try_lock(), waiting up to `timeout` for a first hold (a re-entry returns at once).
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& timeout) {
    if (std::optional<bool> r = try_reenter()) return *r;
    if (!m_.try_lock_for(timeout)) return false;
    first();
    return true;
  }

  /// Like try_lock_for() until `deadline` (the mutex's clock, or any clock with a static now()).
  template <class TimePoint>
  bool try_lock_until(const TimePoint& deadline) {
    if (std::optional<bool> r = try_reenter()) return *r;
    if (!m_.try_lock_until(deadline)) return false;
    first();
    return true;
  }

  /// Undoes one lock of the calling thread; at count zero releases the lease
  /// (distributed_mutex::unlock(): never throws, last_error() says what the store answered).
  /// A thread that holds nothing changes nothing (last_error() == errc::not_holder).
  void unlock() noexcept {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = counts_.find(std::this_thread::get_id());
      if (it != counts_.end() && it->second > 1) {
        --it->second;
        return;
      }
      if (it != counts_.end()) counts_.erase(it);
    }
    m_.unlock();  // not held: notes not_holder
  }

  /// Returns how many locks the calling thread holds without an unlock (0: none).
  [[nodiscard]] std::uint32_t lock_count() const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = counts_.find(std::this_thread::get_id());
    return it == counts_.end() ? 0 : it->second;
  }

  /// Returns the calling thread's fencing token (one for its whole hold), or the none token.
  [[nodiscard]] fencing_token token() const { return m_.token(); }
  /// Returns the owner id of the calling thread's lease, or an empty string. With token() it
  /// makes the mutex a fence_holder (fence.hpp) on the thread that holds it.
  [[nodiscard]] std::string owner() const { return m_.owner(); }
  /// Returns true iff the calling thread holds the mutex and its lease is valid.
  [[nodiscard]] bool valid() { return m_.valid(); }
  /// Returns true iff the calling thread holds the mutex.
  [[nodiscard]] bool locked_by_this_thread() const { return m_.locked_by_this_thread(); }
  /// Returns the calling thread's lease, or null.
  [[nodiscard]] const lease_type* current_lease() const { return m_.current_lease(); }
  /// Returns the key this mutex locks.
  [[nodiscard]] const std::string& key() const noexcept { return m_.key(); }
  /// Returns errc::invalid_argument if the constructor's arguments were bad; zero otherwise.
  [[nodiscard]] std::error_code error() const noexcept { return m_.error(); }
  /// Returns what error() refers to (distributed_mutex::error_message()); empty if none.
  [[nodiscard]] const std::string& error_message() const noexcept { return m_.error_message(); }
  /// Returns the error of the most recent failed lock attempt or unlock (zero if none failed).
  [[nodiscard]] std::error_code last_error() const {
    std::lock_guard<std::mutex> lock(mu_);
    return last_error_ ? last_error_ : m_.last_error();
  }

 private:
  // Re-enters if the calling thread holds the mutex: true, or throws at max_recursion().
  bool reenter() {
    std::optional<bool> r = try_reenter();
    if (!r) return false;
    if (*r) return true;
#if HOLDFAST_HAS_EXCEPTIONS
    throw std::system_error(std::make_error_code(std::errc::resource_unavailable_try_again),
                            "holdfast::recursive_distributed_mutex::lock");
#else
    HOLDFAST_ASSERT(false, "recursive_distributed_mutex::lock() beyond max_recursion()");
    std::abort();
#endif
  }

  // nullopt if the calling thread holds nothing; true after a re-entry; false at the limit.
  std::optional<bool> try_reenter() {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = counts_.find(std::this_thread::get_id());
    if (it == counts_.end()) return std::nullopt;
    if (it->second == max_recursion()) {
      last_error_ = std::make_error_code(std::errc::resource_unavailable_try_again);
      return false;
    }
    ++it->second;
    return true;
  }

  void first() {
    std::lock_guard<std::mutex> lock(mu_);
    counts_[std::this_thread::get_id()] = 1;
    last_error_ = {};
  }

  mutex_type m_;
  mutable std::mutex mu_;  // guards counts_ and last_error_
  std::map<std::thread::id, std::uint32_t> counts_;
  std::error_code last_error_{};
};

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_RECURSIVE_MUTEX_HPP
