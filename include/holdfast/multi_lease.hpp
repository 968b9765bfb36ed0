// SPDX-License-Identifier: MIT
// holdfast/multi_lease.hpp - all-or-nothing leases on several keys: try_acquire_all() and
// acquire_all() return one multi_lease holding every key, each with its own fencing token, renewed
// and released together; a failed attempt holds none of them.
//
//   holdfast::memory_store<> store;
//   auto all = holdfast::acquire_all(store, {"account/1", "account/2"}, 10s, 2s);
//   if (!all) return all.error();
//   db.transfer(all->token("account/1"), all->token("account/2"), ...);  // fence each key
//   // all releases both keys when it goes out of scope
//
// How the keys are taken:
//
//   store                           | try_acquire_all            | acquire_all (blocking)
//   --------------------------------+----------------------------+------------------------------
//   has_try_acquire_all_v (atomic:  | one store step: every key  | that step, retried with
//   memory, Redis, PostgreSQL, etcd)| or none                    | backoff until the timeout
//   any other LeaseStore            | one key at a time in one   | one key at a time in that
//                                   | global order (sorted); on  | order, waiting for each
//                                   | busy or an error, all taken| (hold and wait); the keys
//                                   | is given back              | held are renewed meanwhile
//
// The one global order (keys sorted bytewise, and the input must not repeat a key:
// invalid_argument) is what keeps two callers with overlapping key sets from deadlocking while
// each holds one key and waits for the other (Havender's ordered resources, 1968); the give-back
// is what keeps a caller from keeping a strict subset beyond its attempt. A store call whose reply
// may have been lost (an error that is not busy) is followed by the round's "leave nothing behind"
// step: the same owner asks for that key once more (same owner: the store's T1 hands back the same
// grant if the first request applied) and releases what it gets. What the store never answers is
// freed by its TTL, since nothing renews it.
//
// Compared with its peers:
//   - Redisson's RedissonMultiLock locks the given RLocks in the order given, each with the
//     remaining wait time, and unlocks those taken on failure; it leaves ordering to the caller,
//     so two MultiLocks over {a, b} and {b, a} can each hold one lock until their wait times out.
//   - Curator's InterProcessMultiLock acquires its locks in list order and releases the acquired
//     ones in reverse on failure; ordering is the caller's too.
//   - madelson/DistributedLock's TryAcquireAllLocks / AcquireAllLocks (provider extensions, issue
//     #236, PR #248) take the names in list order with the remaining timeout and release what
//     they took if one fails; ordering is left to the caller on purpose (lock types disagree on
//     name equality).
// Here the order is the library's (callers cannot disagree), the atomic step is a store
// capability (has_try_acquire_all_v in store.hpp) rather than a special store, and each key keeps
// its own fencing token, so each resource fences with the token of the key it belongs to.
//
// A multi_lease is a set of lease<Store, Clock> (lease.hpp), one per key in sorted order; all the
// lease rules apply to each. state(): held while every lease is held; lost once any is lost.
// Keepalive: keep_alive_all(keepalive, m) adds every lease (keepalive.hpp renews each on its
// own schedule; a lease it loses turns the set lost).
#ifndef HOLDFAST_MULTI_LEASE_HPP
#define HOLDFAST_MULTI_LEASE_HPP

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "holdfast/acquire_options.hpp"
#include "holdfast/backoff.hpp"
#include "holdfast/clock.hpp"
#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/lease/detail/keepalive_port.hpp"
#include "holdfast/lease/detail/multi_acquire.hpp"
#include "holdfast/result.hpp"
#include "holdfast/store.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

template <class Store, class Clock = steady_clock>
HOLDFAST_REQUIRES(lease_store<Store>&& ttl_clock<Clock>)
class multi_lease;

namespace detail {

// Lets keep_alive_all() reach a multi_lease's leases without widening its public interface.
struct multi_access {
  template <class Store, class Clock>
  static result<void> keep_alive_all(lease_renewer<Clock>& renewer, multi_lease<Store, Clock>& m) {
    for (lease<Store, Clock>& l : m.leases_) {
      if (result<void> r = keep_alive(renewer, l); !r) return r;
    }
    return {};
  }
};

}  // namespace detail

/// Leases on several keys of one store, held together by this handle: one lease<Store, Clock>
/// per key, sorted by key, all granted to one owner id. Move-only. Releases every key when
/// destroyed (never throws from the destructor).
///
/// Thread-safety: as lease: one handle is used by one thread at a time; a keepalive may renew
/// its leases concurrently. The store must outlive the handle.
template <class Store, class Clock>
HOLDFAST_REQUIRES(lease_store<Store>&& ttl_clock<Clock>)
class multi_lease {
  friend struct detail::multi_access;

 public:
  using lease_type = lease<Store, Clock>;
  using time_point = typename Clock::time_point;

  /// Takes the leases (sorted by key, one owner) as one set.
  explicit multi_lease(std::vector<lease_type> leases) noexcept : leases_(std::move(leases)) {}
  multi_lease(multi_lease&&) noexcept = default;
  multi_lease& operator=(multi_lease&& other) noexcept {
    if (this != &other) {
      release_quietly();
      leases_ = std::move(other.leases_);
    }
    return *this;
  }
  multi_lease(const multi_lease&) = delete;
  multi_lease& operator=(const multi_lease&) = delete;
  /// Releases every key still held, last key first (see lease's destructor).
  ~multi_lease() { release_quietly(); }

  /// Returns how many keys the set holds (0 once moved from).
  [[nodiscard]] std::size_t size() const noexcept { return leases_.size(); }
  /// Returns the leases, sorted by key.
  [[nodiscard]] const std::vector<lease_type>& leases() const noexcept { return leases_; }
  /// Returns the owner id every lease of the set was granted to (empty once moved from).
  [[nodiscard]] std::string owner() const {
    return leases_.empty() ? std::string() : leases_.front().owner();
  }
  /// Returns the fencing token of `key`'s lease, or the none token (which every fence rejects) if
  /// the set does not hold `key`.
  [[nodiscard]] fencing_token token(std::string_view key) const noexcept {
    const lease_type* l = find(key);
    return l != nullptr ? l->token() : fencing_token{};
  }
  /// Returns `key`'s lease, or null if the set does not hold it.
  [[nodiscard]] const lease_type* find(std::string_view key) const noexcept {
    auto it = std::lower_bound(leases_.begin(), leases_.end(), key,
                               [](const lease_type& l, std::string_view k) { return l.key() < k; });
    return it != leases_.end() && it->key() == key ? &*it : nullptr;
  }

  /// Returns true iff the set is not empty and every lease is valid() on the holder's clock (each
  /// lease that is not turns lost and its on-loss callback runs).
  [[nodiscard]] bool valid() {
    bool ok = !leases_.empty();
    for (lease_type& l : leases_) ok = l.valid() && ok;  // every lease looks at its clock
    return ok;
  }
  /// Returns true iff the set holds `key` and its lease is valid() on the holder's clock (a lease
  /// that is not turns lost and its on-loss callback runs).
  [[nodiscard]] bool valid(std::string_view key) {
    auto it = std::lower_bound(leases_.begin(), leases_.end(), key,
                               [](const lease_type& l, std::string_view k) { return l.key() < k; });
    return it != leases_.end() && it->key() == key && it->valid();
  }
  /// Returns the earliest valid_until() of the set (time_point::min() if empty).
  [[nodiscard]] time_point valid_until() const {
    return earliest([](const lease_type& l) { return l.valid_until(); });
  }
  /// Returns the earliest renew_due_at() of the set (time_point::min() if empty).
  [[nodiscard]] time_point renew_due_at() const {
    return earliest([](const lease_type& l) { return l.renew_due_at(); });
  }
  /// Returns held iff every lease is held; else lost if any is lost, else releasing if any is,
  /// else released (also for an empty set).
  [[nodiscard]] lease_state state() const {
    bool any_lost = false;
    bool any_releasing = false;
    bool all_held = !leases_.empty();
    for (const lease_type& l : leases_) {
      const lease_state s = l.state();
      any_lost = any_lost || s == lease_state::lost;
      any_releasing = any_releasing || s == lease_state::releasing;
      all_held = all_held && s == lease_state::held;
    }
    if (all_held) return lease_state::held;
    if (any_lost) return lease_state::lost;
    return any_releasing ? lease_state::releasing : lease_state::released;
  }

  /// Renews every lease with the TTL it asked for (lease::renew(): asked_ttl(), whatever the store
  /// granted), all of them even if one fails.
  /// \returns success; errc::lease_lost if any lease is lost (the set no longer holds every key:
  ///   release it and acquire anew); else the first other error (transient: retry until
  ///   valid_until()). Exceptions from the store or clock propagate.
  result<void> renew() {
    std::error_code first;
    bool lost = false;
    for (lease_type& l : leases_) {
      result<void> r = l.renew();
      if (r) continue;
      lost = lost || r.error() == errc::lease_lost;
      if (!first) first = r.error();
    }
    if (lost) return errc::lease_lost;
    if (first) return first;
    return {};
  }

  /// Releases every lease, last key first (lease::release()), all of them even if one fails.
  /// \returns success; else the first error (a lease that failed stays releasing and may be
  ///   released again by calling release() once more; its TTL frees it otherwise).
  result<void> release() {
    std::error_code first;
    for (auto it = leases_.rbegin(); it != leases_.rend(); ++it) {
      result<void> r = it->release();
      if (!r && !first) first = r.error();
    }
    if (first) return first;
    return {};
  }

 private:
  template <class F>
  time_point earliest(F f) const {
    if (leases_.empty()) return time_point::min();
    time_point t = f(leases_.front());
    for (const lease_type& l : leases_) t = std::min(t, f(l));
    return t;
  }

  void release_quietly() noexcept {
    while (!leases_.empty()) leases_.pop_back();  // each lease's destructor releases it
  }

  std::vector<lease_type> leases_;
};

/// Hands every lease of `m` to `renewer` (a holdfast::keepalive<Clock>, keepalive.hpp), which
/// renews each on its own schedule until it is released. \returns success; else the first error
/// keepalive::add() reports (the leases added so far stay added). May throw std::bad_alloc.
template <class Store, class Clock>
result<void> keep_alive_all(detail::lease_renewer<Clock>& renewer, multi_lease<Store, Clock>& m) {
  return detail::multi_access::keep_alive_all(renewer, m);
}

/// Tries once to acquire every key of `keys` in `store` for `ttl` (ms, or any duration; truncated
/// to whole ms) as one owner (opts.owner, or a fresh random id): all of them, or none. On a store
/// with has_try_acquire_all_v that is one atomic store step; on any other, the keys are taken one
/// at a time in sorted order and, at the first that fails, everything taken is given back (see
/// the overview).
/// \returns the multi_lease (every lease held and valid);
///   errc::busy if another owner holds a live lease on any key (nothing is kept);
///   errc::invalid_argument for no keys, a key given twice, an empty key or any input acquire()
///     refuses (nothing reaches the store);
///   errc::timeout if a grant arrived after the validity it gives had passed (all given back);
///   any error the store reports (all given back as far as the store answers).
/// Exceptions from the store or clock propagate, after everything taken was given back.
/// Thread-safety: as safe as the store.
template <class Store, class Rep, class Period, class Clock = steady_clock>
HOLDFAST_REQUIRES(lease_store<Store>&& ttl_clock<Clock>)
result<multi_lease<Store, Clock>> try_acquire_all(Store& store, std::vector<std::string> keys,
                                                  std::chrono::duration<Rep, Period> ttl,
                                                  const acquire_options<Clock>& opts = {}) {
  static_assert(assert_lease_store<Store>(),
                "holdfast::try_acquire_all: Store must model LeaseStore");
  result<detail::multi_request> req = detail::prepare_multi(
      std::move(keys), ttl, opts, detail::multi_mutation::none, store_min_ttl(store));
  if (!req) return req.error();
  result<std::vector<lease<Store, Clock>>> got = detail::take_all(store, *req, opts);
  if (!got) return got.error();
  return multi_lease<Store, Clock>(std::move(*got));
}

/// try_acquire_all() over a braced list of keys.
template <class Store, class Rep, class Period, class Clock = steady_clock>
HOLDFAST_REQUIRES(lease_store<Store>&& ttl_clock<Clock>)
result<multi_lease<Store, Clock>> try_acquire_all(Store& store,
                                                  std::initializer_list<std::string_view> keys,
                                                  std::chrono::duration<Rep, Period> ttl,
                                                  const acquire_options<Clock>& opts = {}) {
  return holdfast::try_acquire_all(store, std::vector<std::string>(keys.begin(), keys.end()), ttl,
                                   opts);
}

/// Acquires every key of `keys`, all or none, waiting until `timeout` has passed on opts.clock
/// (<= 0: one attempt). On a store with has_try_acquire_all_v the atomic step is retried with
/// opts.backoff; on any other the keys are taken in sorted order, each with a blocking acquire()
/// (lease.hpp) that waits for its key while the keys already taken are held and renewed at their
/// renew instants; one owner id throughout, so a retry after a lost reply gets its grant back.
/// \returns the multi_lease;
///   errc::timeout if the deadline passed before every key was held (nothing is kept);
///   errc::invalid_argument as for try_acquire_all();
///   errc::lease_lost if a key taken was lost while waiting for a later one and no time was left
///     to start over (it starts over, everything given back, while time is left);
///   at once, any non-transient store error (nothing is kept).
/// Blocks the calling thread for at most `timeout` plus the last store calls.
/// Exceptions from the store or clock propagate, after everything taken was given back.
template <class Store, class Rep, class Period, class TRep, class TPeriod,
          class Clock = steady_clock>
HOLDFAST_REQUIRES(lease_store<Store>&& ttl_clock<Clock>)
result<multi_lease<Store, Clock>> acquire_all(Store& store, std::vector<std::string> keys,
                                              std::chrono::duration<Rep, Period> ttl,
                                              std::chrono::duration<TRep, TPeriod> timeout,
                                              const acquire_options<Clock>& opts = {}) {
  static_assert(assert_lease_store<Store>(), "holdfast::acquire_all: Store must model LeaseStore");
  result<detail::multi_request> req = detail::prepare_multi(
      std::move(keys), ttl, opts, detail::multi_mutation::none, store_min_ttl(store));
  if (!req) return req.error();
  result<std::vector<lease<Store, Clock>>> got =
      detail::wait_all(store, *req, detail::budget_of<Clock>(timeout), opts);
  if (!got) return got.error();
  return multi_lease<Store, Clock>(std::move(*got));
}

/// acquire_all() over a braced list of keys.
template <class Store, class Rep, class Period, class TRep, class TPeriod,
          class Clock = steady_clock>
HOLDFAST_REQUIRES(lease_store<Store>&& ttl_clock<Clock>)
result<multi_lease<Store, Clock>> acquire_all(Store& store,
                                              std::initializer_list<std::string_view> keys,
                                              std::chrono::duration<Rep, Period> ttl,
                                              std::chrono::duration<TRep, TPeriod> timeout,
                                              const acquire_options<Clock>& opts = {}) {
  return holdfast::acquire_all(store, std::vector<std::string>(keys.begin(), keys.end()), ttl,
                               timeout, opts);
}

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_MULTI_LEASE_HPP
