// SPDX-License-Identifier: MIT
// holdfast/mutex.hpp - distributed_mutex<Store, Clock>: a lease behind the standard Lockable and
// TimedLockable interfaces, so std::unique_lock, std::scoped_lock and std::lock work on it.
//
//   holdfast::distributed_mutex<holdfast::memory_store<>> m(store, "orders", 10s);
//   {
//     std::unique_lock<decltype(m)> lock(m);        // blocks, with backoff, until acquired
//     db.write(m.token(), m.owner(), ...);          // ALWAYS pass token and owner downstream
//   }                                               // unlock(): releases the lease
//
// A lock is a lease, and a lease can be lost while you hold it: a pause longer than its TTL (GC,
// swap, a stopped VM), a partition, a store failover. Nothing in std::unique_lock can tell you;
// std::mutex has no such failure. So (Kleppmann 2016; Hazelcast FencedLock and Redisson's RLock
// make the same point):
//   - pass token() and owner() with every write the lock protects and have the resource fence
//     them (fence.hpp; a fenced<T> takes the mutex itself: value.write(m, fn)): that is what
//     makes a lost lock harmless;
//   - check valid() before starting a step of work, or subscribe with acquire.on_lost (set a
//     cancellation flag), and stop when it is false;
//   - for work longer than the TTL, give the mutex a keepalive (keepalive.hpp) so the lease is
//     renewed while held.
//
//   member            | blocks?                         | on a store error
//   ------------------+---------------------------------+-----------------------------------------
//   lock()            | until acquired (backoff+jitter) | transient: retried; other: throws
//                     |                                 | std::system_error (see lock())
//   try_lock()        | one store round trip            | returns false, last_error() says why
//   try_lock_for/until| until acquired or the deadline  | returns false, last_error() says why
//   unlock()          | one store round trip            | never throws; last_error() says why
//
// Threads: like std::mutex, one distributed_mutex object may be shared by the threads of a
// process. Each lock() acquires a lease with a fresh owner id (T3), so threads exclude each other
// through the store exactly as processes do, and each thread unlocks its own lease: a thread
// whose lease was lost and taken over cannot release the new holder's. Not recursive.
#ifndef HOLDFAST_MUTEX_HPP
#define HOLDFAST_MUTEX_HPP

#include <chrono>
#include <list>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <type_traits>
#include <utility>

#include "holdfast/clock.hpp"
#include "holdfast/detail/config.hpp"
#include "holdfast/detail/random.hpp"
#include "holdfast/detail/saturating.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/lease/detail/keepalive_port.hpp"
#include "holdfast/recipes/detail/lease_recipe.hpp"
#include "holdfast/result.hpp"
#include "holdfast/store.hpp"
#include "holdfast/validity.hpp"

#if HOLDFAST_HAS_EXCEPTIONS
#include <stdexcept>
#endif

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

/// Options for distributed_mutex.
template <class Clock = steady_clock>
struct mutex_options {
  /// How each lock attempt acquires: clock, validity, backoff of lock() and try_lock_for(), and
  /// the on-loss callback every lease of this mutex gets. `acquire.label`, if set, is the readable
  /// part of the owner ids: every lock gets a fresh one (`<label>/<32 random hex digits>`). (A
  /// set `acquire.owner` is taken as the label, as 0.1 did: prefer `acquire.label`.)
  acquire_options<Clock> acquire{};
  /// If set (to a holdfast::keepalive<Clock>, keepalive.hpp), every lease this mutex acquires is
  /// kept alive by it until unlock(). It must outlive the mutex's locks. Default: none (the lease
  /// lasts one TTL; renew it yourself). The member's type is the keepalive's port, so a mutex
  /// without a keepalive needs no keepalive.hpp.
  detail::lease_renewer<Clock>* keepalive = nullptr;
};

/// A distributed mutex over a LeaseStore: lock() acquires a lease on `key`, unlock() releases it.
/// Models Lockable and TimedLockable; see the overview at the top of mutex.hpp for what that does
/// and does not promise (a lock is a lease and can be lost).
///
/// Thread-safety: every member may be called concurrently; each thread acts on its own lock.
/// Neither copyable nor movable (like std::mutex). Destroying it releases any lock still held.
template <class Store, class Clock = steady_clock>
HOLDFAST_REQUIRES(lease_store<Store>&& ttl_clock<Clock>)
class distributed_mutex : public detail::lease_recipe<Store, Clock, mutex_options<Clock>> {
  using recipe = detail::lease_recipe<Store, Clock, mutex_options<Clock>>;

 public:
  using typename recipe::lease_type;
  using typename recipe::time_point;  // store_type, clock_type and error(): the recipe's too

  /// Makes an unlocked mutex on `key` of `store`, whose locks are leases of `ttl` (ms, or any
  /// duration; truncated to whole milliseconds). Never fails: bad arguments (empty key, TTL not in
  /// [1 ms, max_ttl] or too short for any validity on the clock, bad validity/backoff options, a
  /// keepalive with invalid options) are reported by error(), and every lock attempt then fails
  /// with it.
  template <class Rep, class Period>
  distributed_mutex(Store& store, std::string key, std::chrono::duration<Rep, Period> ttl,
                    mutex_options<Clock> opts = {})
      : recipe(store, std::move(key), ttl, std::move(opts), "distributed_mutex", "key") {}

  distributed_mutex(const distributed_mutex&) = delete;
  distributed_mutex& operator=(const distributed_mutex&) = delete;

  /// Releases every lock still held (quietly; see lease's destructor).
  ~distributed_mutex() = default;

  /// Blocks until the calling thread holds the lock, retrying contention and transient store
  /// errors with exponential backoff and full jitter (acquire.backoff), sleeping on the clock.
  /// Fails, rather than block forever, on an error retrying cannot cure: bad arguments (error()),
  /// the calling thread already holding the lock (std::errc::resource_deadlock_would_occur, as
  /// std::mutex may), a non-transient store error (protocol_error, token_exhausted,
  /// misconfigured, permission_denied, ...), or errc::cancelled when acquire.cancel is stopped
  /// (cancel.hpp; within one store round trip, holding nothing). Like
  /// std::mutex::lock it reports that by throwing std::system_error carrying the error code; in a
  /// build without exceptions, where that is impossible, it is a violated precondition
  /// (HOLDFAST_ASSERT): check error() first and use try_lock_for() there.
  /// Exceptions from the store or clock propagate unchanged.
  void lock() {
    if (this->config_error_) fail(this->config_error_);
    if (locked_by_this_thread())
      fail(std::make_error_code(std::errc::resource_deadlock_would_occur));
    for (;;) {
      result<lease_type> l = holdfast::acquire(this->store_, this->key_, this->ttl_,
                                               std::chrono::hours(24), attempt_options());
      if (l) {
        adopt(std::move(*l));
        return;
      }
      note(l.error());
      if (!is_transient(l.error())) fail(l.error());  // acquire's timeout is transient: go on
    }
  }

  /// Tries once to take the lock for the calling thread, without waiting. \returns true if taken;
  /// false if busy (contention), the calling thread already holds it, the arguments were bad, or
  /// the store failed; last_error() says which. Exceptions from the store or clock propagate.
  bool try_lock() {
    if (std::error_code ec = precheck()) return refuse(ec);
    result<lease_type> l =
        holdfast::try_acquire(this->store_, this->key_, this->ttl_, attempt_options());
    if (!l) return refuse(l.error());
    adopt(std::move(*l));
    return true;
  }

  /// Like try_lock(), retrying with backoff until `timeout` has passed on the clock (<= 0: one
  /// attempt). On failure last_error() says why (errc::timeout if the key stayed busy).
  template <class Rep, class Period>
  bool try_lock_for(const std::chrono::duration<Rep, Period>& timeout) {
    if (std::error_code ec = precheck()) return refuse(ec);
    result<lease_type> l =
        holdfast::acquire(this->store_, this->key_, this->ttl_, timeout, attempt_options());
    if (!l) return refuse(l.error());
    adopt(std::move(*l));
    return true;
  }

  /// Like try_lock_for() until `deadline` on the mutex's clock (a deadline in the past makes one
  /// attempt).
  bool try_lock_until(const time_point& deadline) {
    Clock clock = this->opts_.acquire.clock;
    return try_lock_for(detail::saturating_sub(deadline, clock.now()));
  }

  /// Like try_lock_for() until `deadline` on another clock with a static now() (e.g.
  /// std::chrono::steady_clock, as std::unique_lock may pass), converted to a timeout.
  template <class C, class D,
            class = std::enable_if_t<!std::is_same_v<std::chrono::time_point<C, D>, time_point>>,
            class = decltype(C::now())>
  bool try_lock_until(const std::chrono::time_point<C, D>& deadline) {
    return try_lock_for(
        detail::saturating_sub(deadline, std::chrono::time_point_cast<D>(C::now())));
  }

  /// Releases the calling thread's lock. Never throws (std::unique_lock calls it from its
  /// destructor). The lock is gone for this thread afterwards, whatever the store says:
  ///   - lease still valid: released in the store; last_error() unchanged;
  ///   - lease lost (validity passed, renewal refused, taken over): the loss is reported through
  ///     acquire.on_lost (if not yet) and last_error() == errc::lease_lost; the store's record, if
  ///     still this lease's, is freed;
  ///   - the store fails or throws: last_error() says so (caught_exception for a throw); one more
  ///     release is tried quietly, then the TTL frees the key (nothing renews it any more);
  ///   - the calling thread holds no lock: nothing happens; last_error() == errc::not_holder.
  void unlock() noexcept {
    std::optional<lease_type> mine = take_mine();
    if (!mine) {
      note(make_error_code(errc::not_holder));
      return;
    }
    HOLDFAST_TRY {
      const bool was_valid = mine->valid();
      result<void> r = mine->release();
      if (!was_valid || !r) note(was_valid ? r.error() : make_error_code(errc::lease_lost));
    }
    HOLDFAST_CATCH_ALL {
      note(make_error_code(errc::caught_exception));
    }
    // `mine` is destroyed here: if its release failed, its destructor tries once more.
  }

  /// Returns the calling thread's fencing token, or the none token if it holds no lock. Pass it,
  /// with owner(), with every write the lock protects.
  [[nodiscard]] fencing_token token() const {
    const lease_type* l = mine();
    return l != nullptr ? l->token() : fencing_token{};
  }

  /// Returns the owner id of the calling thread's lease (fresh for every lock(), the identity the
  /// store and every fence know this holder by), or an empty string if it holds no lock. With
  /// token() it makes the mutex a fence_holder (fence.hpp) on the thread that locked it.
  [[nodiscard]] std::string owner() const {
    const lease_type* l = mine();
    return l != nullptr ? l->owner() : std::string();
  }

  /// Returns true iff the calling thread holds the lock and its lease is still valid on the
  /// holder's clock (see lease::valid(); the on-loss callback may run). Check it before each step
  /// of work under the lock.
  [[nodiscard]] bool valid() {
    lease_type* l = mine();
    return l != nullptr && l->valid();
  }

  /// Returns true iff the calling thread has locked and not yet unlocked, whether or not its lease
  /// is still valid.
  [[nodiscard]] bool locked_by_this_thread() const { return mine() != nullptr; }

  /// Returns the calling thread's lease (to read its state, validity or loss cause), or null. It
  /// stays valid until this thread unlocks.
  [[nodiscard]] const lease_type* current_lease() const { return mine(); }

  /// Returns the key this mutex locks.
  [[nodiscard]] const std::string& key() const noexcept { return this->key_; }

  /// Returns the error of the most recent failed lock attempt or unlock, by any thread (zero if
  /// none failed).
  [[nodiscard]] std::error_code last_error() const {
    std::lock_guard<std::mutex> lock(mu_);
    return last_error_;
  }

 private:
  using entry = std::pair<std::thread::id, lease_type>;

  [[noreturn]] static void fail(std::error_code ec) {
#if HOLDFAST_HAS_EXCEPTIONS
    throw std::system_error(ec, "holdfast::distributed_mutex::lock");
#else
    (void)ec;
    HOLDFAST_ASSERT(false, "distributed_mutex::lock() failed and exceptions are disabled");
    std::abort();  // HOLDFAST_ASSERT must not return; make sure of it
#endif
  }

  std::error_code precheck() const {
    if (this->config_error_) return this->config_error_;
    if (locked_by_this_thread())
      return std::make_error_code(std::errc::resource_deadlock_would_occur);
    return {};
  }

  void note(std::error_code ec) const noexcept {
    std::lock_guard<std::mutex> lock(mu_);
    last_error_ = ec;
  }
  bool refuse(std::error_code ec) const noexcept {
    note(ec);
    return false;
  }

  acquire_options<Clock> attempt_options() const {
    acquire_options<Clock> o = this->opts_.acquire;
    o.owner = detail::fresh_owner_id(o);
    return o;
  }

  void adopt(lease_type&& l) {
    if (this->opts_.keepalive != nullptr) {
      if (result<void> r = detail::keep_alive(*this->opts_.keepalive, l); !r)
        note(r.error());  // still locked
    }
    std::lock_guard<std::mutex> lock(mu_);
    held_.emplace_back(std::this_thread::get_id(), std::move(l));
  }

  // Only the calling thread touches its own entry, and std::list never moves elements, so the
  // pointer stays good (outside mu_) until that thread unlocks.
  lease_type* mine() const {
    const std::thread::id me = std::this_thread::get_id();
    std::lock_guard<std::mutex> lock(mu_);
    for (entry& e : held_) {
      if (e.first == me) return &e.second;
    }
    return nullptr;
  }

  std::optional<lease_type> take_mine() noexcept {
    const std::thread::id me = std::this_thread::get_id();
    std::list<entry> out;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto it = held_.begin(); it != held_.end(); ++it) {
        if (it->first == me) {
          out.splice(out.begin(), held_, it);  // no allocation, no throw
          break;
        }
      }
    }
    if (out.empty()) return std::nullopt;
    return std::optional<lease_type>(std::move(out.front().second));
  }

  mutable std::mutex mu_;  // guards held_'s structure and last_error_
  mutable std::list<entry> held_;
  mutable std::error_code last_error_{};
};

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_MUTEX_HPP
