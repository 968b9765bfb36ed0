// SPDX-License-Identifier: MIT
// holdfast/reentrant.hpp - reentrant_holder<Store, Clock>: one owner that may acquire a key it
// already holds. A re-entry gets the same grant and fencing token back and is counted; the lease
// is released in the store when the count returns to zero.
//
//   holdfast::reentrant_holder<holdfast::memory_store<>> me(store);
//   auto t1 = me.try_acquire("orders", 10s);   // store call: token 33, count 1
//   auto t2 = me.try_acquire("orders", 10s);   // re-entry: token 33, count 2, no store call
//   me.release("orders");                      // count 1, still held
//   me.release("orders");                      // count 0: released in the store
//
// Where the count lives. In the holder, beside its lease, as Curator's InterProcessMutex keeps its
// lockCount in the JVM: only the first entry reaches the store, and it is an ordinary acquire with
// the holder's one owner id, so a retry after a lost reply gets the same grant back (T1) and
// counts once. Redisson counts in the store (a hash field incremented by the lock script); a
// script whose reply is lost and is retried then counts twice and the lock outlives its last
// unlock (redisson #7367). Here no request that carries a count crosses the network.
//
// Idempotent per request. A caller that itself retries (an RPC layer that re-sends "enter" after a
// lost reply) passes a request id: an entry whose id is already counted and not yet released is
// not counted again (it gets the same token), and a release whose id is no longer counted changes
// nothing and succeeds. Without an id every call counts.
//
//   count | try_acquire / acquire                   | release
//   ------+-----------------------------------------+----------------------------------------
//   0     | store call; held: count 1               | not_holder
//   n > 0 | lease valid: count n+1 (same id: n),     | count n-1 (an unknown id: n, success);
//         | same token; lease lost: lease_lost      | at 0 the lease is released in the store
//
// Hazelcast's FencedLock is reentrant per thread and session with one fencing token for the whole
// reentrant hold, which is this rule; distributed_mutex's recursive sibling is
// recursive_distributed_mutex (recursive_mutex.hpp).
#ifndef HOLDFAST_REENTRANT_HPP
#define HOLDFAST_REENTRANT_HPP

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "holdfast/acquire_options.hpp"
#include "holdfast/clock.hpp"
#include "holdfast/detail/config.hpp"
#include "holdfast/detail/random.hpp"
#include "holdfast/detail/unwind_guard.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/result.hpp"
#include "holdfast/store.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

namespace detail {

// Negative controls of the re-entry simulation (tests/unit/test_reentrant_sim.cpp); none on every
// shipped path.
enum class reentry_mutation : std::uint8_t {
  none,
  releases_at_first_exit,  // the first release frees the lease whatever the count
  counts_retries,          // a retried request id is counted again
};

struct reentry_access;

}  // namespace detail

/// One owner id over a LeaseStore whose acquires of a key it already holds are re-entries: the
/// same lease and token, counted, released in the store when the count returns to zero (see the
/// table at the top of reentrant.hpp).
///
/// Thread-safety: every member may be called concurrently; calls are serialized by one mutex held
/// for their whole duration (a blocking acquire() holds it while it waits; an on-loss callback
/// must not call back into the holder). All threads act as the
/// one owner: for per-thread ownership use recursive_distributed_mutex. Destroying it releases
/// every lease still held. The store must outlive it.
template <class Store, class Clock = steady_clock>
HOLDFAST_REQUIRES(lease_store<Store>&& ttl_clock<Clock>)
class reentrant_holder {
 public:
  using lease_type = lease<Store, Clock>;

  /// Makes a holder whose owner id is opts.owner, or `<opts.label>/<fresh random id>` (the random
  /// id alone for an empty label); the other options apply to every acquire.
  explicit reentrant_holder(Store& store, acquire_options<Clock> opts = {})
      : store_(store), opts_(std::move(opts)) {
    if (opts_.owner.empty()) opts_.owner = detail::labelled_owner_id(detail::label_in(opts_));
  }
  reentrant_holder(const reentrant_holder&) = delete;
  reentrant_holder& operator=(const reentrant_holder&) = delete;
  /// Releases every lease still held (quietly; see lease's destructor).
  ~reentrant_holder() = default;

  /// Returns the owner id of every lease this holder acquires.
  [[nodiscard]] const std::string& owner() const noexcept { return opts_.owner; }

  /// Enters `key` once without waiting: a re-entry if held (no store call), else one try_acquire
  /// (lease.hpp) of `ttl`. `request_id` (optional) makes the call idempotent (see the overview).
  /// \returns the fencing token (the same for every entry of one hold);
  ///   errc::lease_lost if the key is held but its lease is no longer valid (release every entry
  ///     and acquire anew); errc::busy and every error try_acquire() reports for a first entry.
  template <class Rep, class Period>
  result<fencing_token> try_acquire(std::string_view key, std::chrono::duration<Rep, Period> ttl,
                                    std::string_view request_id = {}) {
    std::lock_guard<std::mutex> lock(mu_);
    if (entry* e = find(key)) return reenter(*e, request_id);
    return first_entry(key, request_id, holdfast::try_acquire(store_, key, ttl, opts_));
  }

  /// Enters `key`, waiting up to `timeout` for a first entry (acquire(), lease.hpp); a re-entry
  /// returns at once. \returns as try_acquire(), with errc::timeout if the deadline passed.
  template <class Rep, class Period, class TRep, class TPeriod>
  result<fencing_token> acquire(std::string_view key, std::chrono::duration<Rep, Period> ttl,
                                std::chrono::duration<TRep, TPeriod> timeout,
                                std::string_view request_id = {}) {
    std::lock_guard<std::mutex> lock(mu_);
    if (entry* e = find(key)) return reenter(*e, request_id);
    return first_entry(key, request_id, holdfast::acquire(store_, key, ttl, timeout, opts_));
  }

  /// Leaves `key` once: the entry named `request_id`, or (without one) an anonymous entry, or
  /// else the newest entry. At count zero the lease is released in the store (lease::release()).
  /// \returns success (also for a request id no longer counted: already released);
  ///   errc::not_holder if this holder holds no entry of `key`;
  ///   at count zero, any error lease::release() reports (the entry is gone either way; the
  ///     lease's TTL frees the key if the store never answers).
  result<void> release(std::string_view key, std::string_view request_id = {}) {
    std::unique_lock<std::mutex> lock(mu_);
    auto it = map_.find(key);
    if (it == map_.end()) return errc::not_holder;
    entry& e = it->second;
    if (!request_id.empty()) {
      auto id = std::find(e.ids.begin(), e.ids.end(), request_id);
      if (id == e.ids.end()) return {};  // already released: idempotent
      e.ids.erase(id);
    } else if (e.anonymous > 0) {
      --e.anonymous;
    } else if (!e.ids.empty()) {
      e.ids.pop_back();
    }
    if (mutation_ != detail::reentry_mutation::releases_at_first_exit && count(e) > 0) return {};
    lease_type l = std::move(e.l);
    map_.erase(it);
    lock.unlock();
    return l.release();
  }

  /// Returns how many entries of `key` are counted (0: not held).
  [[nodiscard]] std::size_t hold_count(std::string_view key) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    return it == map_.end() ? 0 : count(it->second);
  }

  /// Returns the fencing token of `key`'s hold, or the none token if not held.
  [[nodiscard]] fencing_token token(std::string_view key) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    return it == map_.end() ? fencing_token{} : it->second.l.token();
  }

  /// Returns true iff `key` is held and its lease is valid on the holder's clock (lease::valid()).
  [[nodiscard]] bool valid(std::string_view key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    return it != map_.end() && it->second.l.valid();
  }

 private:
  friend struct detail::reentry_access;

  struct entry {
    lease_type l;
    std::size_t anonymous = 0;
    std::vector<std::string> ids;
  };
  static std::size_t count(const entry& e) noexcept { return e.anonymous + e.ids.size(); }

  entry* find(std::string_view key) {
    auto it = map_.find(key);
    return it == map_.end() ? nullptr : &it->second;
  }

  result<fencing_token> reenter(entry& e, std::string_view request_id) {
    if (!e.l.valid()) return errc::lease_lost;
    add(e, request_id);
    return e.l.token();
  }

  void add(entry& e, std::string_view request_id) {
    if (request_id.empty()) {
      ++e.anonymous;
    } else if (mutation_ == detail::reentry_mutation::counts_retries ||
               std::find(e.ids.begin(), e.ids.end(), request_id) == e.ids.end()) {
      e.ids.emplace_back(request_id);
    }
  }

  result<fencing_token> first_entry(std::string_view key, std::string_view request_id,
                                    result<lease_type>&& l) {
    if (!l) return l.error();
    const fencing_token t = l->token();
    auto ins = map_.emplace(std::string(key), entry{std::move(*l), 0, {}});
    // An allocation that throws in add() would leave the lease held by an entry nobody entered:
    // the entry goes, and its lease releases itself (detail/unwind_guard.hpp).
    const detail::on_unwind undo([&] { map_.erase(ins.first); });
    add(ins.first->second, request_id);
    return t;
  }

  Store& store_;
  acquire_options<Clock> opts_;
  mutable std::mutex mu_;
  std::map<std::string, entry, std::less<>> map_;
  detail::reentry_mutation mutation_ = detail::reentry_mutation::none;
};

namespace detail {

// Sets a holder's negative control (testing only).
struct reentry_access {
  template <class Store, class Clock>
  static void mutate(reentrant_holder<Store, Clock>& h, reentry_mutation m) noexcept {
    h.mutation_ = m;
  }
};

}  // namespace detail

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_REENTRANT_HPP
