// SPDX-License-Identifier: MIT
// holdfast/stores/memory.hpp - memory_store: the in-process LeaseStore, thread-safe, no
// dependencies. The embedded default, and the reference the conformance kit is proven on.
//
// One mutex guards a hash map from key to lease record and a single store-wide token counter
// (as etcd's revision): every grant of every key takes the next counter value in the same
// critical section as the grant, so tokens strictly increase across keys, releases and expiries
// (T1), and a freed key needs no record kept to remember its last token. Memory is proportional
// to live leases: expired records are swept in amortized O(1) per insert, released ones at once.
//
// Record life cycle, judged by the store's clock:
//
//   state     | try_acquire            | renew                  | release
//   ----------+------------------------+------------------------+-------------------------------
//   free      | grant, next token      | lease_lost             | not_holder
//   held      | same owner: same token,| holder+token: extend   | holder+token: free
//             | TTL extended; else busy| else lease_lost        | else not_holder
//   expired   | grant, next token      | lease_lost             | holder+token: free, else
//             |                        |                        | not_holder
//
// Waiting without polling (store.hpp's wait_for_release capability; only on steady_clock, the one
// clock a condition variable can wait on): a waiter sleeps on its own condition variable in a FIFO
// queue per key until the holder's expiry or its deadline. release() wakes the first waiter of
// the key, and only that one, so a hand-off costs one wake-up however many wait; the others sleep
// on (wait_for_release_any: one place per key; the waits are detail/memory_waits.hpp, their
// queues detail/memory_waiting.hpp). Nothing is kept, and release() looks nothing up, while nobody
// waits. Read-write grants (try_acquire_rw, ...) and their wait (wait_for_release_rw, on the same
// condition variables) are detail/memory_shared.hpp.
//
// Not durable: a new memory_store starts its counter afresh (or at a value you pass in, e.g. one
// you persisted), so fences downstream must outlive the store or be reset with it.
#ifndef HOLDFAST_STORES_MEMORY_HPP
#define HOLDFAST_STORES_MEMORY_HPP

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <ratio>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "holdfast/clock.hpp"
#include "holdfast/detail/config.hpp"
#include "holdfast/detail/saturating.hpp"
#include "holdfast/detail/string_key.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/result.hpp"
#include "holdfast/store.hpp"
#include "holdfast/stores/detail/memory_shared.hpp"
#include "holdfast/stores/detail/memory_waits.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

/// Options for memory_store.
struct memory_store_options {
  /// The last token considered issued: the first grant carries the next one. Default none (0), so
  /// the first grant carries token 1. Pass a persisted value to keep tokens increasing across a
  /// process restart. fencing_token::max() makes every acquire report token_exhausted.
  fencing_token last_issued{};
};

/// An in-process LeaseStore over a hash map, with expiry judged by `Clock` (steady_clock by
/// default; manual_clock or a simulator clock in tests). Models LeaseStore with inspect(),
/// and the read-write capability (has_read_write_v); on steady_clock also the waits without
/// polling (wait_for_release, wait_for_release_any, watch_release, wait_for_release_rw).
///
/// Time (store.hpp, T2): a grant of `ttl` made when the clock read `now` is held while the clock
/// reads less than now + ttl + clock_tick(clock) (the tick is read once, at construction), so it
/// lasts at least `ttl` of real time even on a clock that reads rounded down (store_hold_until()).
///
/// Tokens are store-wide: every grant of any key carries a token strictly greater than every token
/// this store issued before (a stronger promise than T1's per-key order). raise_token() and
/// raise_token_floor() (the token-floor capability quorum_store needs) only ever move the counter
/// up, so they keep that promise for grants.
///
/// Thread-safety: every member function may be called concurrently. Exceptions: none of its own;
/// one thrown by Clock::now() or by allocation propagates unchanged and leaves the store as it was.
template <class Clock = steady_clock>
class memory_store : public detail::memory_waits<memory_store<Clock>, Clock>,
                     public detail::memory_shared<memory_store<Clock>, Clock> {
  static_assert(is_ttl_clock_v<Clock>, "holdfast::memory_store<Clock>: Clock must model ttl_clock");
  friend class detail::memory_waits<memory_store<Clock>, Clock>;   // waits for a release
  friend class detail::memory_shared<memory_store<Clock>, Clock>;  // read-write grants (RW1-4)

 public:
  using clock_type = Clock;
  using time_point = typename Clock::time_point;
  /// In-process: every operation finishes in the caller's thread without I/O, so a quorum calls
  /// this store directly instead of handing requests to a thread (send_receive.hpp).
  static constexpr bool completes_inline = true;

  /// Makes an empty store judging expiry by `clock`.
  explicit memory_store(Clock clock = Clock{}, memory_store_options opts = {})
      : clock_(std::move(clock)),
        tick_(clock_tick(clock_)),
        last_token_(opts.last_issued.value()) {}

  memory_store(const memory_store&) = delete;
  memory_store& operator=(const memory_store&) = delete;

  /// Grants `key` to `owner` for `ttl` (ms) iff it has no unexpired lease, with a new token.
  /// The same owner re-acquiring its own live lease gets the same token back and its TTL extended
  /// to now + ttl. \returns the grant; errc::busy if another owner holds a live lease;
  /// errc::invalid_argument for an empty key/owner or ttl not in (0, max_ttl];
  /// errc::token_exhausted if the next token would be fencing_token::max().
  result<grant> try_acquire(std::string_view key, std::string_view owner,
                            std::chrono::milliseconds ttl) {
    if (std::error_code ec = check_acquire_args(key, owner, ttl)) return ec;
    std::lock_guard<std::mutex> lock(mutex_);
    const time_point now = clock_.now();
    auto it = find(key);
    if (it != map_.end() && now < it->second.expires_at) {
      record& r = it->second;
      if (r.owner != owner) return errc::busy;
      r.expires_at = std::max(r.expires_at, expiry(now, ttl));
      return grant{r.token, ttl};
    }
    if (last_token_ >= fencing_token::max().value() - 1) return errc::token_exhausted;
    return grant{grant_free(it, key, owner, ttl, now), ttl};
  }

  /// Grants every one of `keys[0..count)` to `owner` for `ttl` (ms) in one atomic step, or none:
  /// the atomic multi-key capability multi_lease.hpp's try_acquire_all() uses (store.hpp,
  /// has_try_acquire_all_v). Each key is judged as try_acquire() judges it (a key `owner` holds
  /// live keeps its token and has its TTL extended; a free or expired key gets the next token,
  /// in the order given); `grants[i]` receives key i's grant. If any key is held live by another
  /// owner nothing changes at all (no TTL is extended either).
  /// \returns success; errc::busy if some key is held by another owner; errc::invalid_argument
  ///   for count 0, a null pointer, a bad key/owner/TTL (check_acquire_args) or a key given twice;
  ///   errc::token_exhausted if the new grants would need fencing_token::max().
  /// Exceptions: an allocation failure propagates with the store as it was. O(count^2) duplicate
  /// check: meant for a handful of keys.
  result<void> try_acquire_all(const std::string_view* keys, std::size_t count,
                               std::string_view owner, std::chrono::milliseconds ttl,
                               grant* grants) {
    if (keys == nullptr || grants == nullptr || count == 0) return errc::invalid_argument;
    for (std::size_t i = 0; i < count; ++i) {
      if (std::error_code ec = check_acquire_args(keys[i], owner, ttl)) return ec;
      for (std::size_t j = 0; j < i; ++j) {
        if (keys[j] == keys[i]) return errc::invalid_argument;
      }
    }
    // The expiries to restore should an insert throw: inline for a handful of keys, else
    // allocated, either way before any change.
    time_point inline_old[8];
    std::vector<time_point> heap_old(count > 8 ? count : 0);
    time_point* old = count > 8 ? heap_old.data() : inline_old;
    for (std::size_t i = 0; i < count; ++i) old[i] = time_point::min();
    std::lock_guard<std::mutex> lock(mutex_);
    const time_point now = clock_.now();
    std::uint64_t fresh = 0;
    for (std::size_t i = 0; i < count; ++i) {  // phase 1: judge every key, change nothing
      auto it = find(keys[i]);
      if (it != map_.end() && now < it->second.expires_at) {
        if (it->second.owner != owner) return errc::busy;
        old[i] = it->second.expires_at;
      } else {
        ++fresh;
      }
    }
    if (fresh > fencing_token::max().value() - 1 - last_token_) return errc::token_exhausted;
    const std::uint64_t before = last_token_;
    (void)before;  // used only to undo after an exception
    std::size_t done = 0;
    HOLDFAST_TRY {
      for (; done < count; ++done) grants[done] = grant_one(keys[done], owner, ttl, now);
    }
    HOLDFAST_CATCH_ALL {
#if HOLDFAST_HAS_EXCEPTIONS
      undo_all(keys, done, owner, old, before);
      throw;
#endif
    }
    return {};
  }

  /// Extends the lease on `key` to now + `ttl` (ms) iff `owner` holds it with `token` and it has
  /// not expired. An expired lease is never revived. \returns the grant (same token);
  /// errc::lease_lost if the key is free, expired, or held by another owner or token;
  /// errc::invalid_argument for bad arguments (see check_renew_args).
  result<grant> renew(std::string_view key, std::string_view owner, fencing_token token,
                      std::chrono::milliseconds ttl) {
    if (std::error_code ec = check_renew_args(key, owner, token, ttl)) return ec;
    std::lock_guard<std::mutex> lock(mutex_);
    const time_point now = clock_.now();
    auto it = find(key);
    if (it == map_.end()) return errc::lease_lost;
    record& r = it->second;
    if (!(now < r.expires_at) || r.token != token || r.owner != owner) return errc::lease_lost;
    r.expires_at = expiry(now, ttl);
    return grant{token, ttl};
  }

  /// Frees `key` iff `owner` holds it with `token` (expired or not: a record still carrying that
  /// token was never granted to anyone else). \returns success; errc::not_holder otherwise;
  /// errc::invalid_argument for bad arguments (see check_release_args). Reads no clock.
  result<void> release(std::string_view key, std::string_view owner, fencing_token token) {
    if (std::error_code ec = check_release_args(key, owner, token)) return ec;
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = find(key);
    if (it == map_.end() || it->second.token != token || it->second.owner != owner) {
      return errc::not_holder;
    }
    recycle(it);
    this->released(key);  // wakes a waiter and the watchers (memory_waits.hpp)
    return {};
  }

  /// Raises the fencing token of `owner`'s live lease on `key` from `token` to `to`, and the
  /// store-wide counter to at least `to`, in one atomic step: the token-floor capability that keeps
  /// quorum tokens monotonic (quorum.hpp). Afterwards the lease carries `to` (renew and release
  /// must pass `to`), its TTL is unchanged, and every later grant carries a token greater than
  /// `to`. The lease must still be live and held with `token` (or already with `to`: a retried
  /// call succeeds again), so a raise that arrives after the lease expired changes nothing.
  /// `to` may equal a token this store issued for another key; per key, tokens still increase.
  /// \returns success; errc::lease_lost if the key is free, expired, or held by another owner or
  ///   token; errc::invalid_argument for an empty key or owner, `token` or `to` not issuable, or
  ///   `to` < `token`.
  result<void> raise_token(std::string_view key, std::string_view owner, fencing_token token,
                           fencing_token to) {
    if (std::error_code ec = check_release_args(key, owner, token)) return ec;
    if (!to.is_issuable() || to < token) return errc::invalid_argument;
    std::lock_guard<std::mutex> lock(mutex_);
    const time_point now = clock_.now();
    auto it = find(key);
    if (it == map_.end()) return errc::lease_lost;
    record& r = it->second;
    if (!(now < r.expires_at) || r.owner != owner || (r.token != token && r.token != to)) {
      return errc::lease_lost;
    }
    r.token = to;
    if (last_token_ < to.value()) last_token_ = to.value();
    return {};
  }

  /// Raises the store-wide counter to at least `floor`, so every later grant carries a token
  /// greater than `floor`; never lowers it and leaves live leases as they are. Used to recover
  /// after tokens regressed (a member restarted without its counter; see quorum.hpp).
  /// \returns success; errc::invalid_argument if `floor` is not issuable. Reads no clock.
  result<void> raise_token_floor(fencing_token floor) {
    if (!floor.is_issuable()) return errc::invalid_argument;
    std::lock_guard<std::mutex> lock(mutex_);
    if (last_token_ < floor.value()) last_token_ = floor.value();
    return {};
  }

  /// Returns the live lease on `key`, or nullopt if the key is free or its lease expired.
  /// \returns errc::invalid_argument for an empty key.
  result<std::optional<lease_record>> inspect(std::string_view key) const {
    if (key.empty()) return errc::invalid_argument;
    std::lock_guard<std::mutex> lock(mutex_);
    const time_point now = clock_.now();
    auto it = find(key);
    if (it == map_.end() || !(now < it->second.expires_at)) {
      return std::optional<lease_record>{};
    }
    // What is left for certain in real time: the tick the read may lag does not count.
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        detail::saturating_sub(it->second.expires_at, detail::saturating_add(now, tick_)));
    if (left < std::chrono::milliseconds::zero()) left = std::chrono::milliseconds::zero();
    return std::optional<lease_record>{lease_record{it->second.owner, it->second.token, left}};
  }

  /// Returns the newest token this store has issued (none if it has issued none).
  [[nodiscard]] fencing_token last_token() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return fencing_token(last_token_);
  }

  /// Returns how many records the store keeps, live or expired-but-not-yet-swept. Bounded by about
  /// twice the live leases plus a small constant.
  [[nodiscard]] std::size_t size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return map_.size() - released_count_;
  }

  /// Returns a copy of the store's clock.
  [[nodiscard]] Clock clock() const {
    return clock_;
  }

 private:
  // A record is live, expired, or *released*: a released record stays in the map, marked with the
  // none token and the earliest time_point (so every expiry test sees it as expired), for the next
  // acquire of its key to take over in place, or for a new key to reuse its node and strings. At
  // most max_released are kept; the rest are erased at once. They are not counted by size().
  struct record {
    std::string owner;
    fencing_token token;
    time_point expires_at;
  };
  using map_type = detail::string_key_map<record>;
  using entry = typename map_type::value_type;

  // Returns the reading from which a grant of `ttl` made at reading `now` may end: now + ttl +
  // the clock's tick, the TTL rounded *up* to the clock's duration (store_hold_until, store.hpp,
  // T2). Plain `now + ttl` on a clock that reads rounded down would end a grant up to one tick
  // early in real time: a clock reading whole seconds freed a 1500 ms grant made at 0.7 s at 2.0 s,
  // while its holder trusted it until 2.18 s.
  time_point expiry(time_point now, std::chrono::milliseconds ttl) const noexcept {
    return store_hold_until(now, ttl, tick_);
  }

  // Copies an owner id into a record. Ids of one length (holdfast's are all 32 hex digits) are
  // copied over the old bytes: std::string::assign would take an out-of-line call to do the same.
  static void set_owner(record& r, std::string_view owner) {
    if (r.owner.size() == owner.size()) {
      owner.copy(r.owner.data(), owner.size());
    } else {
      r.owner.assign(owner.data(), owner.size());
    }
  }

  // Grants the free or expired `key` (found at `it`, or end) to `owner` with the next token
  // (mutex_ held, the counter checked). Strongly exception-safe: nothing changes if it throws.
  fencing_token grant_free(typename map_type::iterator it, std::string_view key,
                           std::string_view owner, std::chrono::milliseconds ttl, time_point now) {
    const fencing_token token(last_token_ + 1);
    const time_point expires_at = expiry(now, ttl);
    if (it != map_.end()) {  // an expired or released record of this key: take it over in place
      record& r = it->second;
      set_owner(r, owner);  // the one step that may throw: before any change
      if (r.token.is_none()) unlist_released(&*it);
      r.token = token;
      r.expires_at = expires_at;
    } else {
      insert(key, owner, token, expires_at, now);
    }
    last_token_ = token.value();  // only after the grant is in place (allocation may throw)
    return token;
  }

  // One key of try_acquire_all's phase 2 (judged free or owner's in phase 1, mutex_ held).
  grant grant_one(std::string_view key, std::string_view owner, std::chrono::milliseconds ttl,
                  time_point now) {
    auto it = find(key);
    if (it != map_.end() && now < it->second.expires_at) {
      it->second.expires_at = std::max(it->second.expires_at, expiry(now, ttl));
      return grant{it->second.token, ttl};
    }
    return grant{grant_free(it, key, owner, ttl, now), ttl};
  }

  // Undoes the first `done` keys of a try_acquire_all whose key `done` threw: extended records
  // get their old expiry back, new grants are freed, the counter returns to `before`.
  void undo_all(const std::string_view* keys, std::size_t done, std::string_view owner,
                const time_point* old, std::uint64_t before) noexcept {
    for (std::size_t i = 0; i < done; ++i) {
      auto it = find(keys[i]);
      if (it == map_.end() || it->second.owner != owner) continue;
      if (old[i] != time_point::min()) {
        it->second.expires_at = old[i];
      } else {
        recycle(it);
      }
    }
    last_token_ = before;
  }

  typename map_type::iterator find(const std::string_view& key) {
    return detail::find_string_key(map_, key);
  }
  typename map_type::const_iterator find(const std::string_view& key) const {
    return detail::find_string_key(map_, key);
  }

  void insert(std::string_view key, std::string_view owner, fencing_token token,
              time_point expires_at, time_point now) {
    if (map_.size() >= sweep_at_) sweep(now);
    if (released_count_ > 0) {
      // Reuse a released record's node: no allocation for the node, the key or the owner string.
      // Unlisted first: should an assign below throw, the node is simply dropped.
      const std::string_view old_key = released_[--released_count_]->first.view();
      typename map_type::node_type node =
          map_.extract(detail::string_key(detail::string_key::borrow_tag{}, old_key));
      node.key().assign(key);
      set_owner(node.mapped(), owner);
      node.mapped().token = token;
      node.mapped().expires_at = expires_at;
      map_.insert(std::move(node));
      return;
    }
    map_.emplace(std::piecewise_construct, std::forward_as_tuple(key),
                 std::forward_as_tuple(record{std::string(owner), token, expires_at}));
  }

  // Frees a record: keeps it, released, for reuse if fewer than max_released are kept, else
  // erases it.
  void recycle(typename map_type::iterator it) {
    if (released_count_ < max_released) {
      it->second.token = fencing_token{};
      it->second.expires_at = time_point::min();
      released_[released_count_++] = &*it;
    } else {
      map_.erase(it);
    }
    maybe_shrink();
  }

  // Takes a released record off the list, because its key is being acquired again.
  void unlist_released(entry* e) noexcept {
    for (std::size_t i = released_count_; i-- > 0;) {  // most often the newest one
      if (released_[i] == e) {
        released_[i] = released_[--released_count_];
        return;
      }
    }
  }

  // Drops every expired (and released) record. Called when the map has doubled since the last
  // sweep, so its cost is amortized O(1) per insert and the map never holds more than ~2x the live
  // leases + min_sweep.
  void sweep(time_point now) {
    for (auto it = map_.begin(); it != map_.end();) {
      if (now < it->second.expires_at) {
        ++it;
      } else {
        it = map_.erase(it);
      }
    }
    released_count_ = 0;  // released records carry the earliest time_point: all were erased
    sweep_at_ = map_.size() * 2 > min_sweep ? map_.size() * 2 : min_sweep;
    maybe_shrink();
  }

  // Gives back the bucket array when it is far larger than the records (after many distinct keys
  // came and went), so memory returns to what the live leases need. The factor-8 gap between
  // growth and shrink keeps acquire/release cycles from rehashing back and forth.
  // Shrinking is only an optimisation and rehash() allocates: a failure to shrink must not turn a
  // release that already took effect into an exception (the caller would retry and get
  // not_holder), so it is swallowed and the larger bucket array simply stays.
  void maybe_shrink() noexcept {
    if (map_.bucket_count() > shrink_buckets && map_.size() * 8 < map_.bucket_count()) {
      HOLDFAST_TRY {
        map_.rehash(0);
      }
      HOLDFAST_CATCH_ALL {}
    }
  }

  static constexpr std::size_t max_released = 16;
  static constexpr std::size_t min_sweep = 64;
  static constexpr std::size_t shrink_buckets = 1024;

  Clock clock_;
  typename Clock::duration tick_;  // clock_tick(clock_), read once
  mutable std::mutex mutex_;
  map_type map_;
  entry* released_[max_released] = {};  // a fixed array: releasing never allocates
  std::size_t released_count_ = 0;
  std::size_t sweep_at_ = min_sweep;
  std::uint64_t last_token_ = 0;
};

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_MEMORY_HPP
