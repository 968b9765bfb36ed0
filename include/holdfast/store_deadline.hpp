// SPDX-License-Identifier: MIT
// holdfast/store_deadline.hpp - the optional deadline capability of a LeaseStore: how the caller's
// deadline reaches one store call, so that a blocking call (acquire(), distributed_mutex,
// election::campaign, semaphore::acquire) returns by its deadline even when one store call would
// otherwise run for the store's whole command timeout, and a grant made too late is not left
// behind.
//
// A store with the capability offers
//
//   result<grant> try_acquire_until(key, owner, ttl, deadline)
//   result<grant> try_acquire_queued_until(key, owner, ttl, deadline)   (with try_acquire_queued)
//
// with deadline a std::chrono::steady_clock::time_point: try_acquire (store.hpp, T1-T4) that obeys
//
//  D1 bounded   It answers by max(deadline, start + store_call_floor), plus at most the bound it
//               documents for settling a call the deadline cut short (D2), never later. Its own
//               command timeout still applies when it comes first.
//  D2 settled   A grant that may have been made after the deadline cut the call short is settled
//               before the store answers: it is given back (released) and the answer is an
//               error that hides no grant (grant_not_durable: "made, not kept, given back"), or
//               the store learned that nothing was applied. Where it cannot tell (the server
//               stopped answering), it answers timeout or store_unavailable, errors that may hide a
//               grant (may_hide_grant, stores/detail/give_back.hpp), and the caller gives back as
//               after any lost reply: it re-asks with the same owner (which returns the same
//               grant, T1) and releases it, that re-ask bounded by store_call_floor through this
//               capability too. What a give-back cannot reach (the server is still down) lasts no
//               longer than the TTL asked.
//
// Why the store must settle it, not the caller: a store can apply a grant *after* it told the
// caller that the call failed. PostgreSQL with a synchronous standby commits locally first and then
// waits for the standby; a client that stops waiting leaves a transaction that commits anyway
// (at once when the wait is cancelled: "canceling wait for synchronous replication ... the
// transaction has already committed locally", or when the standby returns). Redis answers a
// script and then WAITs for replicas. An etcd or ZooKeeper request that timed out may still be
// applied by the leader. Only the store sees the answer that arrives late.
//
// Stores that offer it: postgres_store (the statement still running at the deadline is
// cancelled through a second session, its outcome read and a grant it made released: D2 at
// pg_settle_bound, detail/postgres_link.hpp), redis_store (WAIT's timeout, the socket's and
// connect's capped by the deadline; a grant WAIT found short is released) and etcd_store
// (libcurl's timeouts capped; the lease of a grant that may have applied is revoked): the last
// two through detail/call_bound.hpp. Not offered: zookeeper_store (the synchronous C client has no
// per-call timeout: a call ends when the client declares the connection lost, within
// session_timeout; its lost-reply give-back is its own) and quorum_store (each round is already
// bounded by its per-member wait, member_timeout, 50 ms by default, and grants arriving after it
// are given back by the quorum: quorum.hpp). A store without it is called under a call bound of
// the deadline (detail/call_until.hpp), which bounds the steps it reads it for (zookeeper_store:
// the wait for a session); other steps are bounded by the store's own timeouts only, and a
// blocking call may overrun its deadline by that much.
//
// acquire() (lease/detail/acquire.hpp) calls store_try_acquire_until() with the instant its budget
// ends on steady_clock (a budget counted on another clock is converted as a duration from now),
// and its give-back after a last answer that may hide a grant with now + store_call_floor.
#ifndef HOLDFAST_STORE_DEADLINE_HPP
#define HOLDFAST_STORE_DEADLINE_HPP

#include <chrono>
#include <string_view>
#include <utility>

#include "holdfast/detail/call_until.hpp"
#include "holdfast/detail/config.hpp"
#include "holdfast/detail/detect.hpp"
#include "holdfast/detail/saturating.hpp"
#include "holdfast/result.hpp"
#include "holdfast/store.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

/// The least time a store call gets under a deadline, in ms: a call made at or after its deadline
/// (acquire()'s last attempt is made at the deadline itself; a zero timeout still tries once; the
/// give-back after a lost reply comes once the budget is spent) is bounded by now + this instead.
/// 100 ms is several round trips to a server on the same LAN, and a small part of any budget.
inline constexpr std::chrono::milliseconds store_call_floor{100};

namespace detail {
template <class S>
using try_acquire_until_call = decltype(std::declval<S&>().try_acquire_until(
    std::declval<std::string_view>(), std::declval<std::string_view>(),
    std::declval<std::chrono::milliseconds>(),
    std::declval<const std::chrono::steady_clock::time_point&>()));
template <class S>
using try_acquire_queued_until_call = decltype(std::declval<S&>().try_acquire_queued_until(
    std::declval<std::string_view>(), std::declval<std::string_view>(),
    std::declval<std::chrono::milliseconds>(),
    std::declval<const std::chrono::steady_clock::time_point&>()));
}  // namespace detail

/// True iff S offers the deadline capability `result<grant> try_acquire_until(std::string_view
/// key, std::string_view owner, std::chrono::milliseconds ttl, const
/// std::chrono::steady_clock::time_point& deadline)` (see the overview: D1 bounded, D2 settled).
template <class S>
inline constexpr bool has_try_acquire_until_v =
    detail::is_detected_convertible<result<grant>, detail::try_acquire_until_call, S>::value;

/// True iff S offers `result<grant> try_acquire_queued_until(key, owner, ttl, deadline)`:
/// try_acquire_queued (store.hpp) under D1 and D2, as try_acquire_until is try_acquire.
template <class S>
inline constexpr bool has_try_acquire_queued_until_v =
    detail::is_detected_convertible<result<grant>, detail::try_acquire_queued_until_call, S>::value;

/// Returns the deadline a store call started at `now` gets for the caller's `deadline`: the later
/// of `deadline` and now + store_call_floor (D1).
[[nodiscard]] inline std::chrono::steady_clock::time_point store_call_deadline(
    std::chrono::steady_clock::time_point now,
    std::chrono::steady_clock::time_point deadline) noexcept {
  const std::chrono::steady_clock::time_point floor = detail::saturating_add(now, store_call_floor);
  return deadline < floor ? floor : deadline;
}

/// Asks `store` for `key` as try_acquire does, bounded by `deadline` where the store offers the
/// capability (try_acquire_until, given store_call_deadline(now, deadline)); else plain
/// try_acquire under a call_bound of that deadline (detail/call_until.hpp), which bounds the
/// steps such a store reads it for (zookeeper_store's connect), the rest by the store's own
/// timeouts only. \returns the store's answer.
/// Thread-safety: the store's own. Exceptions from the store propagate.
template <class Store>
result<grant> store_try_acquire_until(Store& store, std::string_view key, std::string_view owner,
                                      std::chrono::milliseconds ttl,
                                      std::chrono::steady_clock::time_point deadline) {
  if constexpr (has_try_acquire_until_v<Store>) {
    return store.try_acquire_until(key, owner, ttl,
                                   store_call_deadline(std::chrono::steady_clock::now(), deadline));
  } else {
    const detail::call_bound bound(store_call_deadline(std::chrono::steady_clock::now(), deadline));
    return store.try_acquire(key, owner, ttl);
  }
}

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORE_DEADLINE_HPP
