// SPDX-License-Identifier: MIT
// holdfast/store.hpp - the LeaseStore contract: what a store must do for leases and fencing to be
// safe on top of it, and a compile-time check that a type provides it.
//
// A LeaseStore is anything with these member functions (all TTLs in milliseconds):
//
//   operation                                    | outcome
//   ---------------------------------------------+---------------------------------------------
//   try_acquire(key, owner, ttl)                 | grant{token, ttl} | busy | error
//   renew(key, owner, token, ttl)                | grant{token, ttl} | lease_lost | error
//   release(key, owner, token)                   | ok | not_holder | error
//   inspect(key)            (optional)           | optional<lease_record> | error
//   wait_for_release(key, deadline)  (optional)  | woken | error
//   watch_release(key, deadline)     (optional)  | woken | error
//   wait_for_release(key, deadline, cancel)  (optional) | woken | cancelled | error
//   watch_release(key, deadline, cancel)     (optional) | woken | cancelled | error
//   watch_release(key, deadline, cancel, known) (optional) | as above; at once if not `known`'s
//   wait_for_release_any(keys, deadline, cancel) (optional) | index of a key | cancelled | error
//   try_acquire_queued(key, owner, ttl) (optional)| as try_acquire; busy also queues the caller
//   leave_queue(key)   (optional, with the above)| the caller's queued place is taken out
//   min_ttl()                        (optional)  | the shortest TTL it can honour (store_min_ttl)
//   try_acquire_rw(key, owner, ttl, mode) (opt.) | grant | busy | error  (read-write; below)
//   renew_rw(key, owner, token, ttl, mode)       | grant | lease_lost | error
//   release_rw(key, owner, token, mode)          | ok | not_holder | error
//   session_expired(key, owner, token) (optional)| true iff that lease ended with the store's
//                                                | session (store_session_expired)
//   try_acquire_until(key, owner, ttl, deadline) | as try_acquire, answered by the deadline
//                                     (optional) | (store_deadline.hpp, D1-D2)
//
// with key and owner as std::string_view (binary-safe: any bytes, including NUL), ttl as
// std::chrono::milliseconds and token as fencing_token, returning result<grant>, result<grant>,
// result<void> and result<std::optional<lease_record>>. Each operation is atomic and linearizable
// per key. The rules:
//
//  T1 tokens  Every grant of a key carries a token strictly greater than every token issued
//             before for that key, across release, expiry and (for durable stores) restart. The
//             token is issued in the *same atomic step* as the grant: "SET NX, then INCR" lets a
//             stalled acquirer receive a newer token than a later holder.
//             Re-acquiring one's own live lease returns the *same* token and extends the TTL, so
//             retrying an acquire whose reply was lost is safe.
//  T2 time    Expiry is judged by one clock, the store's. TTLs are durations, never instants.
//             A store holds every grant for at least the TTL it reports, in *real* time, whatever
//             its clock's tick: the part of a tick already elapsed at the read counts against it,
//             so a store whose clock reads true time rounded down to q ends the grant no earlier
//             than reading + TTL + q (store_hold_until()), and never truncates a TTL to whole
//             ticks. A store may apply a longer TTL than asked (rounded up, e.g. etcd's whole
//             seconds) if it reports the TTL it applied; never a shorter one than it reports.
//  T3 owners  Renew and release by anyone but the holder (owner *and* token) change nothing.
//  T4 errors  Contention is `busy`, not an error. A store that is down, times out or gets a garbage
//             reply reports an error; it never reports a grant it did not make.
//
// Bad input is rejected with invalid_argument before anything changes: an empty key or owner,
// a TTL <= 0 or above max_ttl, a token that no store issues (none, or fencing_token::max()).
// A store whose counter would have to issue fencing_token::max() reports token_exhausted.
//
// wait_for_release (optional; waiting without polling): blocks the caller until `key` may be free
// (its lease was released, or its holder's lease can have expired by the store's clock) or until
// `deadline`, whichever comes first, and returns at once if the key is free now. It is a hint, not
// a grant: the waiter then asks try_acquire, and the store stays the judge. A notification that
// is lost costs latency, never liveness beyond the holder's expiry: a waiter never sleeps past
// the instant the holder's lease can have expired because a release went unannounced. `deadline`
// is a time_point of the caller's clock type; a store offers the member only for clocks it can
// sleep on (memory_store: steady_clock; Redis, PostgreSQL and etcd: steady_clock; etcd watches
// the key from the revision its busy answer saw, as etcd's own lock waits on the key ahead of
// it). Blocking acquire() uses it when present and falls back to backoff otherwise.
// A store may hand each release to *one* waiter (memory_store and Redis wake the first in a FIFO
// queue, so a hand-off costs one wake-up however many wait): a waiter is expected to try_acquire
// when woken. watch_release (optional) is the same wait for observers that will not acquire
// (election::next_leader): it takes no place in the hand-off, and every watcher of the key wakes
// on its release. try_acquire_queued (optional, with wait_for_release) is try_acquire that, when
// the key is busy, also queues the calling thread for its next wait_for_release in the same
// request, so that joining the queue costs nothing extra (Redis, etcd). leave_queue (optional, with
// try_acquire_queued) takes that place out again for a caller that will not wait after all (its
// budget ran out during the round trip), passing on a hand-off a release already chose it for:
// a caller that leaves a queue leaves it (Redisson #1104's kind).
//
// Deadlines (optional; store_deadline.hpp): a blocking call returns by its deadline, so no store
// call it makes may run past it. try_acquire_until(key, owner, ttl, deadline) (and
// try_acquire_queued_until) is try_acquire bounded by a steady_clock deadline (at least
// store_call_floor from the call) plus a bound the store documents (D1), and a grant that may
// have been made after the deadline cut the call short is given back before it answers (D2: an
// operation that fails leaves nothing of the caller's behind, even when the store applies it
// late, as PostgreSQL does when a synchronous standby's wait is cancelled). acquire() and its
// give-back use it where present; without it each call is bounded by the store's own timeout.
//
// Cancellable waits (optional, with the waits above): `wait_for_release(key, deadline, cancel)`
// and `watch_release(key, deadline, cancel)`, with cancel a `const cancel_token&` (cancel.hpp),
// are the same waits that also end, with errc::cancelled, as soon as the token is stopped: the
// store registers a wake-up with cancel_token::on_stop() that interrupts its sleep (memory_store
// its condition variable; Redis and PostgreSQL a self-pipe in the poll() on the notification
// socket; etcd curl_multi_wakeup). The wake-up runs on the cancelling thread, so it only wakes:
// it never calls into the client library. A cancelled wait leaves what it took (a place in a
// queue, passing on a hand-off it was chosen for) as an expired one does. acquire(), campaign(),
// next_leader() and the semaphore use them when present; a store that waits but lacks them is
// woken no sooner than every cancel_wait_slice (100 ms) for a cancellable token, at the cost of
// one more call of its wait per slice, so a store that waits should offer them.
//
// wait_for_release_any (optional; semaphore.hpp): the wait above for any of several keys, with a
// cancel_token: `result<std::size_t> wait_for_release_any(const std::vector<std::string>& keys,
// const TimePoint& deadline, const cancel_token& cancel)`. It ends when any key may be free (one
// is released: the store wakes one waiter of that key, skipping waiters already woken by another
// key, so no release is spent on a thread that left; or its holder's lease can have expired),
// at `deadline`, or at a stop, and returns the index of a key to try first (keys.size() at the
// deadline). The same hint rules: a lost notification costs at most the wait until the earliest
// holder's expiry among the keys. memory_store offers it; a semaphore on a store without it waits
// on one slot, bounded by its backoff.
//
// Read-write grants (optional; read_write_lease.hpp): `try_acquire_rw(key, owner, ttl, mode)`,
// `renew_rw(key, owner, token, ttl, mode)` and `release_rw(key, owner, token, mode)`, with mode a
// lease_mode (shared: a reader; exclusive: a writer), returning result<grant>, result<grant> and
// result<void> as try_acquire, renew and release do. A read-write key is its own name space: a
// plain lease on the same name is another lock (so the plain path of every store costs nothing).
// Every grant, shared or exclusive, is a lease by T1-T4, with its own TTL and its own token from
// the one counter of the key, and:
//  RW1 modes   While an exclusive grant of a key is live, no other grant of it is made; while a
//              shared grant is live, no exclusive one is. Shared grants to distinct owners
//              coexist, each with its own token.
//  RW2 tokens  A new grant's token is greater than every token issued for the key before it, so
//              a writer's token exceeds every earlier reader's and writer's (a resource admits a
//              write only from the newest writer: fence.hpp), and a reader's token lies between
//              the writer whose data it may see and the next writer.
//  RW3 re-ask  The same owner asking again in the mode it holds live gets the same token and its
//              TTL extended (lost-reply safety). Asking in the other mode is busy: no upgrade
//              (two readers upgrading would deadlock or let two writers through) and no
//              downgrade in place; release, then acquire in the other mode.
//  RW4 writers An exclusive ask refused because readers are live records a write intent for
//   first      its owner, and while that intent is live no *new* shared grant is made (a live
//              reader's re-ask and renew still succeed): a stream of readers cannot starve a
//              writer. The intent lasts the TTL of its owner's latest refused ask (a writer that
//              vanishes blocks new readers no longer than the grant it asked for would have),
//              and ends when any exclusive grant of the key is made. One intent per key: the
//              first refused writer's (a second records none until it ends).
// Renew and release name the mode of the grant; a token of the other mode is not the holder's
// (lease_lost, not_holder). A mode outside the enum is invalid_argument (check_lease_mode).
// memory_store, redis_store, postgres_store and etcd_store offer it (stores/detail/*_shared.hpp,
// etcd_rw.hpp); has_read_write_v detects it.
// wait_for_release_rw(key, mode, deadline, cancel) (optional, with it; memory_store on
// steady_clock, Redis, PostgreSQL, etcd) is wait_for_release for one mode: woken by a read-write
// release of the key, never sleeping past the expiry of the grants (and, for a shared waiter, the
// intent) that keep `mode` out; read_write_lease.hpp's views offer it as their wait_for_release
// (can_wait_for_release_rw_v).
//
// `testing/` holds the conformance kit that checks a store against all of this at run time.
#ifndef HOLDFAST_STORE_HPP
#define HOLDFAST_STORE_HPP

#include <chrono>
#include <cstddef>
#include <optional>
#include <ratio>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include "holdfast/cancel.hpp"
#include "holdfast/detail/config.hpp"
#include "holdfast/detail/detect.hpp"
#include "holdfast/detail/saturating.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/result.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

/// What a store hands out on a successful acquire or renew.
struct grant {
  /// The fencing token of this grant: issuable (neither none nor max), and for a new grant
  /// strictly greater than every token the store issued before for the key.
  fencing_token token;
  /// The TTL the store applied, in milliseconds (> 0). A store may grant less than was asked,
  /// never more; holders compute their validity from this figure.
  std::chrono::milliseconds ttl{0};

  friend bool operator==(const grant& a, const grant& b) noexcept {
    return a.token == b.token && a.ttl == b.ttl;
  }
  friend bool operator!=(const grant& a, const grant& b) noexcept { return !(a == b); }
};

/// The mode of a read-write grant (the read-write capability in the overview;
/// read_write_lease.hpp). The words are the field's (SQL, flock(2)'s LOCK_SH/LOCK_EX, ZooKeeper's
/// shared locks).
enum class lease_mode : unsigned char {
  shared = 0,     ///< A reader's grant: any number of owners at once, none while a writer holds.
  exclusive = 1,  ///< A writer's grant: one owner at a time, none while a reader holds.
};

/// Checks a lease_mode: invalid_argument unless it is shared or exclusive (a value cast from an
/// integer may be neither); a zero error code otherwise.
[[nodiscard]] inline std::error_code check_lease_mode(lease_mode mode) noexcept {
  if (mode == lease_mode::shared || mode == lease_mode::exclusive) return {};
  return errc::invalid_argument;
}

/// What inspect() reports about a key's current lease.
struct lease_record {
  std::string owner;                       ///< The holder's owner id (binary-safe).
  fencing_token token;                     ///< The holder's fencing token.
  std::chrono::milliseconds remaining{0};  ///< Time left by the store's clock, rounded down.
};

/// The longest TTL any holdfast operation accepts: 100 years, in milliseconds. Longer TTLs get
/// invalid_argument; this bound keeps `now + ttl` representable in nanoseconds on every clock.
inline constexpr std::chrono::milliseconds max_ttl{1000LL * 60 * 60 * 24 * 365 * 100};

/// Returns the reading of a store's clock from which a grant of `ttl` made when that clock read
/// `now` may end: `now + ttl + tick`, where `tick` is the clock's tick (clock_tick() in
/// clock.hpp: how far a reading may lag true time), `ttl` is rounded *up* to the clock's duration
/// and the sum clamps at time_point::max(). A store that keeps the grant while its clock reads
/// less than this holds it for at least `ttl` of real time (store.hpp, T2): at the read, up to one
/// tick of true time had already passed unseen. The issue "time at the edges" input: a clock
/// reading whole seconds, a 1500 ms grant read at 0 s (true time 0.7 s) must hold until the clock
/// reads 2.5 s (true time 3.0 s, 2.3 s after the grant), not 1.5 s (true time 2.0 s, 1.3 s).
template <class Clock, class Dur, class TRep, class TPeriod>
[[nodiscard]] std::chrono::time_point<Clock, Dur> store_hold_until(
    std::chrono::time_point<Clock, Dur> now, std::chrono::milliseconds ttl,
    std::chrono::duration<TRep, TPeriod> tick) noexcept {
  using tp = std::chrono::time_point<Clock, Dur>;
  if (ttl < std::chrono::milliseconds::zero()) ttl = std::chrono::milliseconds::zero();
  const std::optional<Dur> t = detail::checked_duration_cast<Dur>(ttl);
  if (!t) return tp::max();
  Dur held = *t;
  // checked_duration_cast truncates: on a clock coarser than 1 ms, round the TTL up to a tick.
  // Compared in whole ms (truncated, exact here since ttl is whole), so no duration is widened
  // into a finer, overflowing unit. A clock whose unit divides a millisecond (steady_clock's ns)
  // converts exactly, and skips the check and its division (this runs on every grant).
  if constexpr (std::ratio_divide<std::milli, typename Dur::period>::den != 1) {
    const std::optional<std::chrono::milliseconds> back =
        detail::checked_duration_cast<std::chrono::milliseconds>(held);
    if (back && *back < ttl) held += Dur(1);
  }
  const tp end = detail::saturating_add(now, held);
  return tick > decltype(tick)::zero() ? detail::saturating_add(end, tick) : end;
}

/// Checks a TTL: returns invalid_argument unless it is in (0, max_ttl]; a zero error code
/// otherwise.
[[nodiscard]] inline std::error_code check_ttl(std::chrono::milliseconds ttl) noexcept {
  if (ttl <= std::chrono::milliseconds::zero() || ttl > max_ttl) return errc::invalid_argument;
  return {};
}

/// Checks try_acquire's arguments: returns invalid_argument for an empty key or owner, or a TTL
/// that is not in (0, max_ttl]; a zero error code otherwise. Stores call it first so that bad input
/// is rejected identically everywhere and before anything changes.
[[nodiscard]] inline std::error_code check_acquire_args(std::string_view key,
                                                        std::string_view owner,
                                                        std::chrono::milliseconds ttl) noexcept {
  if (key.empty() || owner.empty()) return errc::invalid_argument;
  return check_ttl(ttl);
}

/// Checks release's arguments: invalid_argument for an empty key or owner, or a token no store
/// issues (none or max); a zero error code otherwise.
[[nodiscard]] inline std::error_code check_release_args(std::string_view key,
                                                        std::string_view owner,
                                                        fencing_token token) noexcept {
  if (key.empty() || owner.empty()) return errc::invalid_argument;
  if (!token.is_issuable()) return errc::invalid_argument;
  return {};
}

/// Checks renew's arguments: the union of check_acquire_args and check_release_args.
[[nodiscard]] inline std::error_code check_renew_args(std::string_view key, std::string_view owner,
                                                      fencing_token token,
                                                      std::chrono::milliseconds ttl) noexcept {
  if (std::error_code ec = check_acquire_args(key, owner, ttl)) return ec;
  return check_release_args(key, owner, token);
}

namespace detail {

// The LeaseStore operations as expressions (detect.hpp), each written once.
template <class S>
using try_acquire_call = decltype(std::declval<S&>().try_acquire(
    std::declval<std::string_view>(), std::declval<std::string_view>(),
    std::declval<std::chrono::milliseconds>()));
template <class S>
using renew_call = decltype(std::declval<S&>().renew(
    std::declval<std::string_view>(), std::declval<std::string_view>(),
    std::declval<fencing_token>(), std::declval<std::chrono::milliseconds>()));
template <class S>
using release_call = decltype(std::declval<S&>().release(std::declval<std::string_view>(),
                                                         std::declval<std::string_view>(),
                                                         std::declval<fencing_token>()));
template <class S>
using inspect_call = decltype(std::declval<S&>().inspect(std::declval<std::string_view>()));
template <class S, class TimePoint>
using wait_for_release_call = decltype(std::declval<S&>().wait_for_release(
    std::declval<std::string_view>(), std::declval<const TimePoint&>()));
template <class S, class TimePoint>
using watch_release_call = decltype(std::declval<S&>().watch_release(
    std::declval<std::string_view>(), std::declval<const TimePoint&>()));
template <class S, class TimePoint>
using cancellable_wait_for_release_call = decltype(std::declval<S&>().wait_for_release(
    std::declval<std::string_view>(), std::declval<const TimePoint&>(),
    std::declval<const cancel_token&>()));
template <class S, class TimePoint>
using cancellable_watch_release_call = decltype(std::declval<S&>().watch_release(
    std::declval<std::string_view>(), std::declval<const TimePoint&>(),
    std::declval<const cancel_token&>()));
template <class S, class TimePoint>
using wait_for_release_any_call = decltype(std::declval<S&>().wait_for_release_any(
    std::declval<const std::vector<std::string>&>(), std::declval<const TimePoint&>(),
    std::declval<const cancel_token&>()));
template <class S, class TimePoint>
using known_watch_release_call = decltype(std::declval<S&>().watch_release(
    std::declval<std::string_view>(), std::declval<const TimePoint&>(),
    std::declval<const cancel_token&>(), std::declval<fencing_token>()));
template <class S>
using try_acquire_queued_call = decltype(std::declval<S&>().try_acquire_queued(
    std::declval<std::string_view>(), std::declval<std::string_view>(),
    std::declval<std::chrono::milliseconds>()));

template <class S>
using try_acquire_all_call = decltype(std::declval<S&>().try_acquire_all(
    std::declval<const std::string_view*>(), std::declval<std::size_t>(),
    std::declval<std::string_view>(), std::declval<std::chrono::milliseconds>(),
    std::declval<grant*>()));
template <class S>
using try_acquire_rw_call = decltype(std::declval<S&>().try_acquire_rw(
    std::declval<std::string_view>(), std::declval<std::string_view>(),
    std::declval<std::chrono::milliseconds>(), std::declval<lease_mode>()));
template <class S>
using renew_rw_call = decltype(std::declval<S&>().renew_rw(
    std::declval<std::string_view>(), std::declval<std::string_view>(),
    std::declval<fencing_token>(), std::declval<std::chrono::milliseconds>(),
    std::declval<lease_mode>()));
template <class S>
using release_rw_call = decltype(std::declval<S&>().release_rw(
    std::declval<std::string_view>(), std::declval<std::string_view>(),
    std::declval<fencing_token>(), std::declval<lease_mode>()));
template <class S>
using leave_queue_call = decltype(std::declval<S&>().leave_queue(std::declval<std::string_view>()));

template <class S>
struct has_try_acquire : is_detected_convertible<result<grant>, try_acquire_call, S> {};
template <class S>
struct has_try_acquire_all : is_detected_convertible<result<void>, try_acquire_all_call, S> {};
template <class S>
struct has_read_write
    : std::integral_constant<
          bool, is_detected_convertible<result<grant>, try_acquire_rw_call, S>::value &&
                    is_detected_convertible<result<grant>, renew_rw_call, S>::value &&
                    is_detected_convertible<result<void>, release_rw_call, S>::value> {};
template <class S>
struct has_renew : is_detected_convertible<result<grant>, renew_call, S> {};
template <class S>
struct has_release : is_detected_convertible<result<void>, release_call, S> {};
template <class S>
struct has_inspect : is_detected_convertible<result<std::optional<lease_record>>, inspect_call, S> {
};
template <class S, class TimePoint>
struct has_wait_for_release
    : is_detected_convertible<result<void>, wait_for_release_call, S, TimePoint> {};
template <class S, class TimePoint>
struct has_watch_release : is_detected_convertible<result<void>, watch_release_call, S, TimePoint> {
};
template <class S, class TimePoint>
struct has_cancellable_wait_for_release
    : is_detected_convertible<result<void>, cancellable_wait_for_release_call, S, TimePoint> {};
template <class S, class TimePoint>
struct has_cancellable_watch_release
    : is_detected_convertible<result<void>, cancellable_watch_release_call, S, TimePoint> {};
template <class S, class TimePoint>
struct has_wait_for_release_any
    : is_detected_convertible<result<std::size_t>, wait_for_release_any_call, S, TimePoint> {};
template <class S, class TimePoint>
struct has_known_watch_release
    : is_detected_convertible<result<void>, known_watch_release_call, S, TimePoint> {};
template <class S>
struct has_try_acquire_queued : is_detected_convertible<result<grant>, try_acquire_queued_call, S> {
};
template <class S>
struct has_leave_queue : is_detected_convertible<result<void>, leave_queue_call, S> {};

}  // namespace detail

/// True iff S offers the optional waiting capability for callers on `Clock`:
/// `result<void> wait_for_release(std::string_view key, const Clock::time_point& deadline)`,
/// which sleeps until the key may be free or the deadline (see the overview of store.hpp).
template <class S, class Clock>
inline constexpr bool can_wait_for_release_v =
    detail::has_wait_for_release<S, typename Clock::time_point>::value;

/// True iff S offers the optional observer's wait for callers on `Clock`:
/// `result<void> watch_release(std::string_view key, const Clock::time_point& deadline)`, which
/// sleeps like wait_for_release but takes no place in the hand-off (see the overview).
template <class S, class Clock>
inline constexpr bool can_watch_release_v =
    detail::has_watch_release<S, typename Clock::time_point>::value;

/// True iff S offers wait_for_release's cancellable form for callers on `Clock`: `result<void>
/// wait_for_release(std::string_view key, const Clock::time_point& deadline, const cancel_token&
/// cancel)`, which also ends, with errc::cancelled, once `cancel` is stopped, woken by the stop
/// (see the overview). Without it, a cancellable wait is cut into cancel_wait_slice pieces.
template <class S, class Clock>
inline constexpr bool can_cancel_wait_for_release_v =
    detail::has_cancellable_wait_for_release<S, typename Clock::time_point>::value;

/// True iff S offers watch_release's cancellable form for callers on `Clock`: `result<void>
/// watch_release(std::string_view key, const Clock::time_point& deadline, const cancel_token&
/// cancel)`, ending with errc::cancelled once `cancel` is stopped (see the overview).
template <class S, class Clock>
inline constexpr bool can_cancel_watch_release_v =
    detail::has_cancellable_watch_release<S, typename Clock::time_point>::value;

/// True iff S offers, for callers on `Clock`, `result<std::size_t> wait_for_release_any(const
/// std::vector<std::string>& keys, const Clock::time_point& deadline, const cancel_token&
/// cancel)`: a wait for a release of any of `keys` (see the overview; semaphore.hpp uses it).
template <class S, class Clock>
inline constexpr bool can_wait_for_release_any_v =
    detail::has_wait_for_release_any<S, typename Clock::time_point>::value;

/// True iff S offers the cancellable watch from a known holder for callers on `Clock`:
/// `result<void> watch_release(key, deadline, const cancel_token& cancel, fencing_token known)`,
/// which returns at once if `key` is not held under `known` (free, or another token: the holder
/// the caller read has gone already), else watches as watch_release does. It closes the gap
/// between reading the holder and watching it: a hand-off in between would otherwise be watched
/// as the new holder's lease, and slept through (election_observer::next_leader uses it).
template <class S, class Clock>
inline constexpr bool can_watch_known_holder_v =
    detail::has_known_watch_release<S, typename Clock::time_point>::value;

/// True iff S offers `result<grant> try_acquire_queued(key, owner, ttl)`: try_acquire that, when
/// busy, also queues the calling thread for its next wait_for_release (see the overview).
template <class S>
inline constexpr bool has_try_acquire_queued_v = detail::has_try_acquire_queued<S>::value;

/// True iff S offers the optional atomic multi-key grant `result<void> try_acquire_all(const
/// std::string_view* keys, std::size_t count, std::string_view owner, std::chrono::milliseconds
/// ttl, grant* grants)`: every key granted to `owner` in one atomic step (each judged as
/// try_acquire judges it, grants[i] for keys[i]), or none and nothing changed (busy). Keys are
/// distinct; a duplicate, count 0 or bad arguments are invalid_argument. memory_store (one lock),
/// redis_store (one script over keys of one slot), postgres_store (one transaction) and etcd_store
/// (one txn) offer it; testing/conformance_multi.hpp checks it. multi_lease.hpp uses it.
template <class S>
inline constexpr bool has_try_acquire_all_v = detail::has_try_acquire_all<S>::value;

/// True iff S offers the optional read-write grants (see the overview, RW1-RW4):
/// `result<grant> try_acquire_rw(std::string_view key, std::string_view owner,
/// std::chrono::milliseconds ttl, lease_mode mode)`, `result<grant> renew_rw(key, owner,
/// fencing_token token, ttl, mode)` and `result<void> release_rw(key, owner, token, mode)`. All
/// three are needed. memory_store, redis_store, postgres_store and etcd_store offer them;
/// read_write_lease.hpp and the conformance kit use them when present.
template <class S>
inline constexpr bool has_read_write_v = detail::has_read_write<S>::value;

/// True iff S offers `result<void> leave_queue(key)`: takes out the place try_acquire_queued took
/// for the calling thread (see the overview). A store with try_acquire_queued should offer it:
/// acquire() calls it when its budget ran out during a queued attempt.
template <class S>
inline constexpr bool has_leave_queue_v = detail::has_leave_queue<S>::value;

namespace detail {
template <class S>
using min_ttl_call = decltype(std::chrono::milliseconds(std::declval<const S&>().min_ttl()));
}  // namespace detail

/// Returns the shortest lease TTL `store` is asked for: its `min_ttl()` (optional capability, in
/// ms) where it has one (the Redis, PostgreSQL and etcd stores: their options' min_ttl, which
/// says where the bound comes from; quorum_store: the largest of its members'), else 0.
/// try_acquire(), acquire(), acquire_all(), lease::renew(ttl) and the recipes' constructors refuse
/// a TTL under it with errc::invalid_argument (the message, naming the limit, in
/// acquire_options::report).
template <class Store>
[[nodiscard]] std::chrono::milliseconds store_min_ttl(const Store& store) noexcept {
  if constexpr (detail::is_detected<detail::min_ttl_call, Store>::value) {
    return std::chrono::milliseconds(store.min_ttl());
  } else {
    (void)store;
    return std::chrono::milliseconds{0};
  }
}

namespace detail {
template <class S>
using session_expired_call = decltype(bool(std::declval<S&>().session_expired(
    std::declval<std::string_view>(), std::declval<std::string_view>(),
    std::declval<fencing_token>())));
}  // namespace detail

/// Returns true iff `store` says the lease (key, owner, token) it granted ended because the
/// store's session with its server expired: its `session_expired(key, owner, token)` (optional
/// capability; zookeeper_store, whose leases live as long as its ZooKeeper session), else false.
/// lease<> asks it after renew answered lease_lost (or a first release not_holder), so that the
/// on-loss callback gets loss_cause::session_expired rather than renew_refused (not_holder),
/// as Curator's ConnectionState.LOST tells a lock holder. A wrapper store that does not forward
/// it reports false (the loss then keeps its plain cause). Thread-safety: the store's own.
template <class Store>
[[nodiscard]] bool store_session_expired(Store& store, std::string_view key, std::string_view owner,
                                         fencing_token token) {
  if constexpr (detail::is_detected<detail::session_expired_call, Store>::value) {
    return static_cast<bool>(store.session_expired(key, owner, token));
  } else {
    (void)store, (void)key, (void)owner, (void)token;
    return false;
  }
}

#if HOLDFAST_HAS_CONCEPTS
/// S provides `result<grant> try_acquire(std::string_view key, std::string_view owner,
/// std::chrono::milliseconds ttl)`.
template <class S>
concept store_with_try_acquire = requires(S& s, std::string_view key, std::string_view owner,
                                          std::chrono::milliseconds ttl) {
  { s.try_acquire(key, owner, ttl) } -> std::convertible_to<result<grant>>;
};
/// S provides `result<grant> renew(std::string_view key, std::string_view owner, fencing_token,
/// std::chrono::milliseconds ttl)`.
template <class S>
concept store_with_renew = requires(S& s, std::string_view key, std::string_view owner,
                                    fencing_token token, std::chrono::milliseconds ttl) {
  { s.renew(key, owner, token, ttl) } -> std::convertible_to<result<grant>>;
};
/// S provides `result<void> release(std::string_view key, std::string_view owner, fencing_token)`.
template <class S>
concept store_with_release = requires(S& s, std::string_view key, std::string_view owner,
                                      fencing_token token) {
  { s.release(key, owner, token) } -> std::convertible_to<result<void>>;
};
/// The LeaseStore contract's operations (see the table at the top of store.hpp), as one
/// requires-expression: it constrains lease, try_acquire, acquire, distributed_mutex and
/// quorum_store, so a type that is not a LeaseStore is refused at the call, with the first
/// operation it cannot do named in the diagnostic.
template <class S>
concept lease_store = requires(S& s, std::string_view key, std::string_view owner,
                               fencing_token token, std::chrono::milliseconds ttl) {
  { s.try_acquire(key, owner, ttl) } -> std::convertible_to<result<grant>>;
  { s.renew(key, owner, token, ttl) } -> std::convertible_to<result<grant>>;
  { s.release(key, owner, token) } -> std::convertible_to<result<void>>;
};
/// S also provides the optional `result<std::optional<lease_record>> inspect(std::string_view)`.
template <class S>
concept store_with_inspect = requires(S& s, std::string_view key) {
  { s.inspect(key) } -> std::convertible_to<result<std::optional<lease_record>>>;
};

/// True iff S provides the three required LeaseStore operations with the signatures above (the
/// C++17 spelling; under C++20 it is the concept lease_store).
template <class S>
inline constexpr bool is_lease_store_v = lease_store<S>;
/// True iff S also provides the optional inspect(key) operation.
template <class S>
inline constexpr bool has_inspect_v = store_with_inspect<S>;
#else
/// True iff S provides the three required LeaseStore operations with the signatures above
/// (C++17 spelling; under C++20 it is the concept `lease_store`).
template <class S>
inline constexpr bool is_lease_store_v =
    detail::has_try_acquire<S>::value&& detail::has_renew<S>::value&& detail::has_release<S>::value;
/// True iff S also provides the optional inspect(key) operation.
template <class S>
inline constexpr bool has_inspect_v = detail::has_inspect<S>::value;
#endif

/// Fails to compile, with a message naming the operation S cannot do, unless S models
/// LeaseStore. Returns true, so it can sit in a static_assert or a constexpr variable. The C++17
/// diagnostic (under C++20 the lease_store constraint refuses S first). A member of the right
/// name with another signature or return type does not count, so the message says what is needed.
template <class S>
constexpr bool assert_lease_store() noexcept {
  static_assert(detail::has_try_acquire<S>::value,
                "holdfast: a LeaseStore needs `result<grant> try_acquire(std::string_view key, "
                "std::string_view owner, std::chrono::milliseconds ttl)`; the store has no "
                "try_acquire callable with these arguments and returning that");
  static_assert(detail::has_renew<S>::value,
                "holdfast: a LeaseStore needs `result<grant> renew(std::string_view key, "
                "std::string_view owner, fencing_token token, std::chrono::milliseconds ttl)`; the "
                "store has no renew callable with these arguments and returning that");
  static_assert(detail::has_release<S>::value,
                "holdfast: a LeaseStore needs `result<void> release(std::string_view key, "
                "std::string_view owner, fencing_token token)`; the store has no release "
                "callable with these arguments and returning that");
  return true;
}

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORE_HPP
