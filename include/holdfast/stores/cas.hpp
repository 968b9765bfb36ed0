// SPDX-License-Identifier: MIT
// holdfast/stores/cas.hpp - cas_store<KV, Clock>: a LeaseStore on top of any linearizable
// compare-and-swap key-value store (etcd, Consul, ZooKeeper, DynamoDB, a SQL row with a version
// column, FoundationDB, ...), with no clock shared between the store and its clients.
//
// The key-value store needs only two operations, per key, linearizable (the `cas_kv` concept):
//
//   expression                                  | result
//   --------------------------------------------+------------------------------------------------
//   kv.get(key)                                 | result<cas_entry>: {value, version}; version 0
//                                               | iff the key is absent (value then empty)
//   kv.compare_and_swap(key, expected, value)   | result<bool>: writes `value` iff the key's
//                                               | version is `expected` (0: absent); true iff it
//                                               | wrote. Every write gives the key a version it
//                                               | never had before (etcd mod_revision, Consul
//                                               | ModifyIndex, a version column + 1).
//
// with key and value as std::string_view (binary-safe) and versions as std::uint64_t. Errors
// (unreachable, timeout) are reported as result errors; a KV may also throw, which propagates.
//
// Expiry without a shared clock (Amazon's DynamoDB lock client): the record of a key carries its
// holder's owner id, fencing token, TTL and a record version number (RVN: 64 random bits, new on
// every write, renewals included; the KV's own version changes with it). A contender that finds a
// key held remembers the RVN it saw and when (on its own steady clock, read after the read
// returned); it takes the key over only once it has seen that *same* RVN unchanged for the
// record's full TTL. A live holder renews well within its TTL (keepalive.hpp renews at half), which
// restarts every contender's wait; a holder that stalls or crashes stops changing it. Since the
// contender's wait starts no earlier than the holder's own validity started, the holder's validity
// (lease.hpp) runs out first, within the clock-drift bound (validity.hpp; S4). Safety (S1) never
// rests on that: tokens do it.
//
// An adapter's own writes count as sightings too (from when the CAS returned), so contenders in
// the same process wait a full TTL from the grant or renewal itself, and a renewal of a record the
// adapter has seen unchanged for its full TTL is refused as lease_lost: it has expired as far as
// this adapter can tell, and is not revived (T2). A record it has not watched that long (written
// by another process, or before a restart) is renewed for its holder, since no contender of this
// adapter could have taken it over.
//
// Tokens (T1) come from a counter kept in the record and raised in the SAME compare-and-swap that
// grants the key. A released key keeps its record (state free, counter kept) instead of being
// deleted, so the next grant still continues the key's counter: deleting it would restart tokens
// at 1 below an old holder's (the "counter reset on release" bug). Tokens are per key.
//
// Record life cycle (per key; "seen unchanged" is on this cas_store's clock, counting its writes):
//
//   record            | try_acquire                      | renew               | release
//   ------------------+----------------------------------+---------------------+-----------------
//   absent            | create held, token 1             | lease_lost          | not_holder
//   free (counter c)  | held, token c+1                  | lease_lost          | not_holder
//   held by owner,    | same token, TTL >= before        | holder+token: new   | holder+token:
//   seen < TTL        |                                  | RVN, new TTL        | free, counter kept
//   held by owner,    | expired: new grant, token c+1    | lease_lost (expired,| holder+token:
//   seen >= TTL       |                                  | not revived)        | free, counter kept
//   held by another,  | busy (the wait starts or goes on)| lease_lost unless   | not_holder
//   seen < TTL        |                                  | holder+token        |
//   held by another,  | take over: token c+1             | (as above)          | (as above)
//   seen >= TTL       |                                  |                     |
//
// Differences from memory_store, by design: tokens are per key, not store-wide; an adapter that
// never saw a record being written starts its wait at its first sight of it, however old the
// record is (it cannot know), so its first try on a held key is busy.
//
// Step points (step_point.hpp): every operation is a get, then a compare-and-swap, and the
// adapter marks the point between the two (step_kind::between) and the CAS that wrote
// (step_kind::takes_effect) on its Clock. They cost nothing on steady_clock; under the conformance
// kit's simulated clock other clients run between the get and the CAS, so a KV whose
// compare_and_swap is not really conditional (a blind write) fails the kit with no work by you.
// The point sits before the adapter reads its clock, so a renewal decided after a stall is
// decided on the clock as it is after the stall.
// The cas_kv requirement and memory_cas_kv are stores/cas_kv.hpp, the record's encoding
// stores/detail/cas_record.hpp; both are included here.
// Value format (stores/detail/cas_record.hpp): "hf1" + state ('H' held, 'F' free) + counter, token,
// TTL (ms), RVN and owner length as 64-bit little-endian numbers + owner bytes; anything else in a
// key is reported as protocol_error and left unchanged.
#ifndef HOLDFAST_STORES_CAS_HPP
#define HOLDFAST_STORES_CAS_HPP

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <utility>

#include "holdfast/clock.hpp"
#include "holdfast/detail/config.hpp"
#include "holdfast/detail/random.hpp"
#include "holdfast/detail/saturating.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/result.hpp"
#include "holdfast/step_point.hpp"
#include "holdfast/store.hpp"
#include "holdfast/stores/cas_kv.hpp"
#include "holdfast/stores/detail/cas_record.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

/// A LeaseStore over a cas_kv, with expiry judged the DynamoDB lock client's way (see the top of
/// cas.hpp): a contender takes a held key over only after this adapter has seen its record
/// unchanged for the record's full TTL on `Clock` (steady_clock by default; manual_clock in
/// tests), counted in real time: the clock must have moved by the TTL plus its tick
/// (clock_tick(), read once at construction), since the first sighting may have lagged true time
/// by up to a tick (store.hpp, T2). Models LeaseStore with inspect(). Tokens strictly increase per
/// key (T1), across release, expiry and takeover, and across restarts of this adapter (the counter
/// lives in the KV).
///
/// Thread-safety: every member may be called concurrently if the KV allows concurrent calls.
/// The KV must outlive the adapter. Exceptions: none of its own; one thrown by the KV, the clock
/// or allocation propagates unchanged.
template <class KV, class Clock = steady_clock>
HOLDFAST_REQUIRES(cas_kv<KV>&& ttl_clock<Clock>)
class cas_store {
  static_assert(detail::has_cas_get<KV>::value,
                "holdfast::cas_store<KV>: KV needs `result<cas_entry> get(std::string_view key)`; "
                "it has no get callable with that argument and returning that");
  static_assert(detail::has_cas_swap<KV>::value,
                "holdfast::cas_store<KV>: KV needs `result<bool> compare_and_swap(std::string_view "
                "key, std::uint64_t expected, std::string_view value)`; it has no compare_and_swap "
                "callable with these arguments and returning that");
  static_assert(assert_ttl_clock<Clock>(),
                "holdfast::cas_store<KV, Clock>: Clock must model ttl_clock");

 public:
  using kv_type = KV;
  using clock_type = Clock;
  using time_point = typename Clock::time_point;

  /// Makes an adapter over `kv`, measuring contenders' waits on `clock`.
  explicit cas_store(KV& kv, Clock clock = Clock{})
      : kv_(kv), clock_(std::move(clock)), tick_(clock_tick(clock_)) {}

  cas_store(const cas_store&) = delete;
  cas_store& operator=(const cas_store&) = delete;

  /// Grants `key` to `owner` for `ttl` (ms) if the key is absent, free, already `owner`'s and not
  /// seen expired (same token, TTL not shortened), or held by anyone (`owner` included) whose
  /// record this adapter has seen unchanged for that record's full TTL (a new token); a new
  /// token and its counter's increase are written in the one CAS that grants the key.
  /// \returns the grant; errc::busy if another owner holds it (and the wait is not over, or the
  ///   holder wrote meanwhile); errc::invalid_argument for bad arguments (see check_acquire_args);
  ///   errc::token_exhausted if the key's next token would be fencing_token::max();
  ///   errc::protocol_error if the key holds a value this adapter did not write, or the KV
  ///   contradicts itself (a failed CAS with the version unchanged); any error of the KV.
  result<grant> try_acquire(std::string_view key, std::string_view owner,
                            std::chrono::milliseconds ttl) {
    if (std::error_code ec = check_acquire_args(key, owner, ttl)) return ec;
    return update<result<grant>>(
        key, errc::busy,  // the key kept changing under us: contention
        [&](const cas_entry& e, const detail::cas_record* rec, detail::cas_record& next,
            std::uint64_t read_from) -> std::optional<result<grant>> {
          const time_point now = observe_clock();
          if (rec == nullptr) {
            if (!e.value.empty()) return result<grant>(errc::protocol_error);
            next = held_record(1, fencing_token(1), ttl, owner);
          } else if (rec->held && rec->owner == owner && !seen_for(key, rec->rvn, rec->ttl, now)) {
            next = *rec;  // re-acquire: same token; contenders wait at least as long as before
            if (ttl > next.ttl) next.ttl = ttl;
          } else {
            // Free, expired (even if the same owner's: a new grant needs a new token), or another
            // owner's whose record has now been seen unchanged for its TTL.
            if (rec->held && rec->owner != owner &&
                !waited_out(key, rec->rvn, rec->ttl, now, read_from)) {
              return result<grant>(errc::busy);
            }
            if (rec->counter >= fencing_token::max().value() - 1) {
              return result<grant>(errc::token_exhausted);
            }
            next = held_record(rec->counter + 1, fencing_token(rec->counter + 1), ttl, owner);
          }
          return std::nullopt;
        },
        [ttl](const detail::cas_record& written) {
          return grant{written.token, ttl};
        });
  }

  /// Extends the lease on `key` to `ttl` (ms) iff `owner` holds it with `token`: a new record
  /// version, which restarts every contender's wait. A record this adapter has itself seen
  /// unchanged for its full TTL (it wrote it, or watched it, that long ago) is expired here and is
  /// not revived; one it has not watched that long is renewed, since no contender of this adapter
  /// could have taken it (see the top of cas.hpp).
  /// \returns the grant (same token);
  ///   errc::lease_lost if the key is absent, free, held by another owner or token, or expired as
  ///   above; errc::invalid_argument for bad arguments (see check_renew_args);
  ///   errc::protocol_error as for try_acquire; errc::store_unavailable if the record kept
  ///   changing under the adapter; any error of the KV.
  result<grant> renew(std::string_view key, std::string_view owner, fencing_token token,
                      std::chrono::milliseconds ttl) {
    if (std::error_code ec = check_renew_args(key, owner, token, ttl)) return ec;
    return update<result<grant>>(
        key, errc::store_unavailable,
        [&](const cas_entry&, const detail::cas_record* rec, detail::cas_record& next,
            std::uint64_t) -> std::optional<result<grant>> {
          if (rec == nullptr || !rec->held || rec->owner != owner || rec->token != token) {
            return result<grant>(errc::lease_lost);
          }
          if (seen_for(key, rec->rvn, rec->ttl, observe_clock())) {
            return result<grant>(errc::lease_lost);
          }
          next = *rec;
          next.ttl = ttl;
          return std::nullopt;
        },
        [token, ttl](const detail::cas_record&) {
          return grant{token, ttl};
        });
  }

  /// Frees `key` iff `owner` holds it with `token`: the record stays, marked free, keeping its
  /// token counter. \returns success; errc::not_holder otherwise; errc::invalid_argument for bad
  ///   arguments (see check_release_args); errc::protocol_error as for try_acquire;
  ///   errc::store_unavailable if the record kept changing under the adapter; any error of the KV.
  result<void> release(std::string_view key, std::string_view owner, fencing_token token) {
    if (std::error_code ec = check_release_args(key, owner, token)) return ec;
    return update<result<void>>(
        key, errc::store_unavailable,
        [&](const cas_entry&, const detail::cas_record* rec, detail::cas_record& next,
            std::uint64_t) -> std::optional<result<void>> {
          if (rec == nullptr || !rec->held || rec->owner != owner || rec->token != token) {
            return result<void>(errc::not_holder);
          }
          next = detail::cas_record{};
          next.counter = rec->counter;  // freed, not deleted: the counter must survive (T1)
          return std::nullopt;
        },
        [](const detail::cas_record&) { return result<void>{}; });
  }

  /// Returns the lease on `key` as this adapter sees it: nullopt if absent or free, or if this
  /// adapter has seen the same record for its full TTL (a contender would take it over);
  /// otherwise the record, with `remaining` = TTL minus how long this adapter has seen it
  /// unchanged (the full TTL if it has neither written nor watched it). Starts no wait.
  /// \returns errc::invalid_argument for an empty key; errc::protocol_error for a value this
  ///   adapter did not write; any error of the KV.
  result<std::optional<lease_record>> inspect(std::string_view key) const {
    if (key.empty()) return errc::invalid_argument;
    result<cas_entry> e = kv_.get(key);
    if (!e) return e.error();
    if (e->version == 0) {
      if (!e->value.empty()) return errc::protocol_error;
      return std::optional<lease_record>{};
    }
    std::optional<detail::cas_record> rec = detail::cas_record::decode(e->value);
    if (!rec) return errc::protocol_error;
    if (!rec->held) return std::optional<lease_record>{};
    const time_point now = clock_.now();
    std::chrono::milliseconds left = rec->ttl;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      auto it = seen_.find(std::string(key));
      if (it != seen_.end() && it->second.rvn == rec->rvn && !(now < it->second.since)) {
        if (elapsed(it->second.since, rec->ttl, now)) return std::optional<lease_record>{};
        // Watched for at most this long in real time (the first reading may have lagged a tick).
        const auto watched = std::chrono::duration_cast<std::chrono::milliseconds>(
            detail::saturating_sub(detail::saturating_add(now, tick_), it->second.since));
        left = watched < rec->ttl ? rec->ttl - watched : std::chrono::milliseconds::zero();
      }
    }
    return std::optional<lease_record>{lease_record{rec->owner, rec->token, left}};
  }

  /// Returns how many held records this adapter is timing: ones it wrote, and ones it found held
  /// by another (a wait in progress). An entry goes when the key is freed through this adapter,
  /// is replaced when the key's record changes, or is swept once it has stood unchanged for two
  /// TTLs: memory stays within about twice the keys in use plus 64, not every key ever seen.
  [[nodiscard]] std::size_t watching() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return seen_.size();
  }

  /// Returns a copy of the adapter's clock.
  [[nodiscard]] Clock clock() const { return clock_; }

 private:
  struct sighting {
    std::uint64_t rvn;              // which write of the record
    time_point since;               // when this adapter first saw it (or wrote it), read after
    std::uint64_t order;            // sightings_ when it was recorded: later ones are larger
    std::chrono::milliseconds ttl;  // the record's TTL (for the sweep)
  };

  static constexpr int max_attempts = 8;
  static constexpr std::size_t min_sweep = 64;

  static detail::cas_record held_record(std::uint64_t counter, fencing_token token,
                                        std::chrono::milliseconds ttl, std::string_view owner) {
    detail::cas_record r;
    r.held = true;
    r.counter = counter;
    r.token = token;
    r.ttl = ttl;
    r.owner.assign(owner.data(), owner.size());
    return r;
  }

  // The one get/decode/CAS/retry loop of try_acquire, renew and release. Each attempt reads the
  // key and decodes its record (a value this adapter did not write is protocol_error; an absent
  // key gives `decide` a null record), then `decide(entry, record, next, read_from)` either
  // returns the operation's outcome or fills `next`, which is written iff the key is still at the
  // version read; once written, `done(next)` is the outcome. `read_from` is sightings_made() from
  // before the get (see waited_out). Between the get and the CAS is a step point: other clients
  // may write there. A failed CAS looks again, up to max_attempts (then `contended`); a failed CAS
  // whose version then reads unchanged is a KV contradicting itself (protocol_error).
  template <class R, class Decide, class Done>
  R update(std::string_view key, errc contended, Decide decide, Done done) {
    std::uint64_t failed_version = 0;
    for (int attempt = 0; attempt < max_attempts; ++attempt) {
      const std::uint64_t read_from = sightings_made();
      result<cas_entry> e = kv_.get(key);
      if (!e) return e.error();
      step_point(clock_, step_kind::between);  // others may write between the get and the CAS
      std::optional<detail::cas_record> rec;
      if (e->version != 0) {
        if (e->version == failed_version) return errc::protocol_error;
        rec = detail::cas_record::decode(e->value);
        if (!rec) return errc::protocol_error;
      }
      detail::cas_record next;
      if (std::optional<R> outcome = decide(*e, rec ? &*rec : nullptr, next, read_from)) {
        return *outcome;
      }
      result<bool> written = write(key, e->version, next);
      if (!written) return written.error();
      if (*written) return done(next);
      failed_version = e->version;
    }
    return contended;
  }

  // Writes `next` with a fresh record version number iff the key is still at `version`. On
  // success, a held record's write counts as a sighting from now (read after the CAS returned, so
  // no earlier than the write): a contender of this adapter waits a full TTL from here, and a
  // renewal after that is refused. \returns whether it wrote, or the KV's error.
  result<bool> write(std::string_view key, std::uint64_t version, detail::cas_record& next) {
    next.rvn = detail::thread_generator().next();
    result<bool> swapped = kv_.compare_and_swap(key, version, next.encode());
    if (!swapped || !*swapped) return swapped;
    step_point(clock_, step_kind::takes_effect);  // the CAS that wrote is the commit
    if (!next.held) {  // freed: nothing to time, and release reads no clock
      std::lock_guard<std::mutex> lock(mutex_);
      if (!seen_.empty()) seen_.erase(std::string(key));
      return true;
    }
    // A clock that throws here leaves the write in place, untimed: contenders then wait a full TTL
    // from their own first sight of it, which is the safe side.
    const time_point now = clock_.now();
    std::lock_guard<std::mutex> lock(mutex_);
    if (seen_.size() >= sweep_at_) sweep(now);
    seen_.insert_or_assign(std::string(key), sighting{next.rvn, now, ++sightings_, next.ttl});
    return true;
  }

  // Forgets the sightings this adapter has watched unchanged for two full TTLs (and ticks): the
  // record was freed or rewritten through another adapter, or its holder is long gone. Called
  // when the map has doubled since the last sweep, so the cost is amortized O(1) per new entry
  // and the map stays within about twice the keys in use (written or seen held within their last
  // two TTLs) plus min_sweep, instead of growing with every key ever seen held by another owner.
  // Forgetting is the safe side: a contender's next look at such a key starts a new wait, and a
  // renewal of it is judged as one of a record this adapter never watched (cas.hpp's top).
  // Caller holds mutex_.
  void sweep(time_point now) {
    for (auto it = seen_.begin(); it != seen_.end();) {
      const sighting& x = it->second;
      const bool long_gone = !(now < x.since) && elapsed(x.since, x.ttl, now) &&
                             elapsed(store_hold_until(x.since, x.ttl, tick_), x.ttl, now);
      if (long_gone) {
        it = seen_.erase(it);
      } else {
        ++it;
      }
    }
    sweep_at_ = seen_.size() * 2 > min_sweep ? seen_.size() * 2 : min_sweep;
  }

  // Reads the clock. If it went backwards, every wait in progress restarts: elapsed time can no
  // longer be measured, and waiting longer is the safe side.
  time_point observe_clock() {
    const time_point now = clock_.now();
    std::lock_guard<std::mutex> lock(mutex_);
    if (last_now_ && now < *last_now_) seen_.clear();
    last_now_ = now;
    return now;
  }

  // Whether this adapter has seen write `rvn` of `key` unchanged for `ttl` by `now`; starts (or
  // restarts) the wait when that write is new to it.
  // `read_from` is sightings_made() from before the get that returned `rvn`: a sighting recorded
  // since then (this adapter's own write, or another caller's newer read) may be of a later write
  // than the one this read returned, so a different rvn then does not replace it. Otherwise a
  // stale read would erase the timing of this adapter's own write, and a renewal after its TTL
  // would revive it (found by the step points, under the simulator).
  bool waited_out(std::string_view key, std::uint64_t rvn, std::chrono::milliseconds ttl,
                  time_point now, std::uint64_t read_from) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (seen_.size() >= sweep_at_ && seen_.find(std::string(key)) == seen_.end()) sweep(now);
    auto [it, inserted] =
        seen_.try_emplace(std::string(key), sighting{rvn, now, ++sightings_, ttl});
    if (inserted) return false;
    if (it->second.rvn != rvn) {
      if (it->second.order <= read_from) it->second = sighting{rvn, now, ++sightings_, ttl};
      return false;
    }
    return elapsed(it->second.since, ttl, now);
  }

  std::uint64_t sightings_made() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return sightings_;
  }

  // Whether this adapter has seen write `rvn` of `key` for `ttl` by `now`, without starting a wait.
  bool seen_for(std::string_view key, std::uint64_t rvn, std::chrono::milliseconds ttl,
                time_point now) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = seen_.find(std::string(key));
    return it != seen_.end() && it->second.rvn == rvn && elapsed(it->second.since, ttl, now);
  }

  // Whether `ttl` of real time has surely passed between the readings `since` and `now`: the clock
  // must read at least since + ttl (rounded up to its duration) + its tick, since `since` may
  // have lagged true time by up to a tick (store.hpp, T2; store_hold_until in store.hpp).
  bool elapsed(time_point since, std::chrono::milliseconds ttl, time_point now) const {
    return !(now < store_hold_until(since, ttl, tick_));
  }

  KV& kv_;
  Clock clock_;
  typename Clock::duration tick_;  // clock_tick(clock_), read once
  mutable std::mutex mutex_;  // guards seen_, sightings_, last_now_; never held across a KV call
  std::unordered_map<std::string, sighting> seen_;
  std::uint64_t sightings_ = 0;       // sightings recorded so far (orders them)
  std::size_t sweep_at_ = min_sweep;  // sweep when seen_ reaches this size
  std::optional<time_point> last_now_;
};

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_CAS_HPP
