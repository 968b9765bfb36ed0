// SPDX-License-Identifier: MIT
// holdfast/quorum_options.hpp - how a quorum_store (quorum.hpp) is configured, and what it needs
// of its members: the token-floor capability (raise_token, has_raise_token_v, the quorum_member
// concept), the dispatch (quorum_dispatch), the token mode (quorum_token_mode), the write quorum
// W (write_quorum) and quorum_options. quorum.hpp includes it; the protocol, the proof and the
// restart rules these options choose between are in quorum.hpp's overview.
//
// ## Dispatch
// quorum_dispatch::automatic (default) picks by what the members can do (send_receive.hpp):
//
//   members                          | requests go out                    | hand-offs per round
//   ---------------------------------+------------------------------------+--------------------
//   send/receive (redis_store)       | all from the caller's thread       | none (faults: some)
//                                    | (send), replies taken as they come |
//                                    | from one poll() over every socket  |
//   in-process (completes_inline:    | called in turn, in the caller's    | none
//   memory_store)                    | thread, as sequential              |
//   anything else                    | one worker thread per member       | two per member
//
// Under the split dispatch each member still has its worker: it takes a request the caller's
// thread cannot start without blocking (the member is not connected yet, or busy with another
// caller's request; the caller then polls a pipe the worker signals, alongside the sockets) and
// reads the replies still in flight when the caller stops waiting, so late replies are handled
// exactly as under threads.
// quorum_dispatch::threads: one small worker thread per member, started by the constructor; a
// member is only ever called from its own worker (or, split, from a caller's thread holding the
// member's claim), so a member needs no locking of its own. The caller waits in real time, at most
// the per-member timeout: for try_acquire's first round until every member answered (Redlock's
// rule) unless failure is already certain, for the other rounds only until the outcome is
// decided. Replies still in flight are handled when they arrive: a late grant is raised to T when
// the quorum succeeded, else released.
// quorum_dispatch::sequential calls the members one after another in the caller's thread and treats
// a reply that took longer than the per-member timeout (on the quorum's clock) as lost, giving back
// a late grant at once: deterministic, for manual_clock tests and the simulator.
#ifndef HOLDFAST_QUORUM_OPTIONS_HPP
#define HOLDFAST_QUORUM_OPTIONS_HPP

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/detail/detect.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/observer.hpp"
#include "holdfast/result.hpp"
#include "holdfast/store.hpp"
#include "holdfast/validity.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

namespace detail {

template <class S>
using raise_token_call = decltype(std::declval<S&>().raise_token(
    std::declval<std::string_view>(), std::declval<std::string_view>(),
    std::declval<fencing_token>(), std::declval<fencing_token>()));
template <class S>
using raise_token_floor_call =
    decltype(std::declval<S&>().raise_token_floor(std::declval<fencing_token>()));

template <class S>
struct has_raise_token : is_detected_convertible<result<void>, raise_token_call, S> {};
template <class S>
struct has_raise_token_floor : is_detected_convertible<result<void>, raise_token_floor_call, S> {};

}  // namespace detail

/// True iff S provides the token-floor capability quorum_store needs from its members:
/// `result<void> raise_token(std::string_view key, std::string_view owner, fencing_token token,
/// fencing_token to)`, which, atomically and only while `owner` holds the live lease on `key` with
/// `token` (or already `to`), re-labels that lease with `to` and lifts the store's counter to >=
/// `to` (errc::lease_lost otherwise). memory_store provides it.
template <class S>
inline constexpr bool has_raise_token_v = detail::has_raise_token<S>::value;

#if HOLDFAST_HAS_CONCEPTS
/// A store a quorum_store can be made of: a LeaseStore with the token-floor capability
/// `result<void> raise_token(key, owner, token, to)` (see has_raise_token_v), as a
/// requires-expression: it constrains quorum_store.
template <class S>
concept quorum_member = lease_store<S>&& requires(S& s, std::string_view key,
                                                  std::string_view owner, fencing_token token,
                                                  fencing_token to) {
  { s.raise_token(key, owner, token, to) } -> std::convertible_to<result<void>>;
};
#endif

/// True iff S provides `result<void> raise_token_floor(fencing_token floor)`, which lifts the
/// store's counter to >= `floor` unconditionally (recovery after a regression).
template <class S>
inline constexpr bool has_raise_token_floor_v = detail::has_raise_token_floor<S>::value;

/// How quorum_store reaches its members (see "Dispatch" at the top of this file).
enum class quorum_dispatch {
  /// The default: requests in flight together from the caller's thread when the members have
  /// the send/receive capability, direct calls for in-process members (completes_inline), else
  /// threads.
  automatic,
  threads,     ///< One worker thread per member, requests in flight together.
  sequential,  ///< One member after another in the caller's thread: deterministic, for tests.
};

/// How quorum_store forms its fencing token.
enum class quorum_token_mode {
  /// The token floor: the max of the granting members' tokens, raised onto W members before the
  /// grant is reported. Strictly monotonic per key (see the proof in quorum.hpp). The default.
  floor,
  /// NEGATIVE CONTROL ONLY: the max of the granting members' tokens and nothing else. Tokens can
  /// go backwards when majorities differ; it exists so tests can show the checker catches that.
  /// Remembers each grant's member tokens in the quorum_store until release (renew and release
  /// need them), so an unreleased grant is never forgotten.
  naive_max,
};

/// Returns the write quorum W for `members` members tolerating `empty_restarts` members that
/// restart without their counter between two grants of a key: floor((members + empty_restarts)
/// / 2) + 1. With empty_restarts = 0 that is a strict majority. May exceed `members` (then no
/// configuration can satisfy the request; quorum_options::check reports it).
[[nodiscard]] constexpr std::size_t write_quorum(std::size_t members,
                                                 std::size_t empty_restarts) noexcept {
  return (members + empty_restarts) / 2 + 1;
}

namespace detail {
// What is wrong with a quorum's members (a null or repeated one), or "" if nothing is.
template <class Store>
std::string members_problem(const std::vector<Store*>& m) {
  for (std::size_t i = 0; i < m.size(); ++i) {
    if (m[i] == nullptr) return "member " + std::to_string(i) + " is null";
    for (std::size_t j = 0; j < i; ++j) {
      if (m[j] == m[i]) {
        return "members " + std::to_string(j) + " and " + std::to_string(i) + " are one store";
      }
    }
  }
  return {};
}
}  // namespace detail

/// Options for quorum_store.
struct quorum_options {
  /// Longest wait for one member's reply in one round, in ms (> 0). For try_acquire and renew the
  /// wait is further capped at member_timeout_share of the TTL. Default 50 ms (Redlock suggests
  /// 5-50 ms for a 10 s TTL). Under quorum_dispatch::threads, and automatic over members with
  /// send/receive, this is real time; under sequential, and automatic over in-process members
  /// (called directly), it is measured on the quorum's clock (a reply slower than it counts as
  /// lost and a late grant is given back at once).
  std::chrono::milliseconds member_timeout{50};
  /// Cap on the per-member wait as a share of the TTL, in (0, 1]. Default 0.1.
  double member_timeout_share = 0.1;
  /// Drift bound and margin of the validity check (Redlock's rule). Default 1% and 2 ms.
  validity_options validity{};
  /// How many members may restart *empty* (without their counter) between two grants of a key
  /// while tokens stay strictly monotonic; sets W = write_quorum(N, empty_restarts). Default 0:
  /// W is a strict majority, and members must persist their counters (see "Member restarts" in
  /// quorum.hpp).
  std::size_t empty_restarts = 0;
  /// automatic (default), threads or sequential; see quorum_dispatch.
  quorum_dispatch dispatch = quorum_dispatch::automatic;
  /// floor (default) or the naive_max negative control.
  quorum_token_mode token_mode = quorum_token_mode::floor;
  /// true (default): a member whose answer was an error that may hide a grant (a lost reply) is
  /// asked again with the same owner and released, so a quorum operation leaves nothing of the
  /// caller's on any member beyond what it reports (detail/give_back.hpp). NEGATIVE CONTROL ONLY
  /// when false (testing/mutants.hpp, quorum_keeps_lost_member): such a member keeps the lease
  /// until its TTL (the kind of redlock-rb #76), which the checker's O1 must catch.
  bool give_back_unsure = true;
  /// true (default): a failed try_acquire by the owner of a live grant this quorum reported
  /// (validity left) keeps the members' records under that grant's token (quorum.hpp,
  /// try_acquire; T1: a failed re-acquire never ends one's own lease). NEGATIVE CONTROL ONLY
  /// when false (testing/workload_quorum.hpp, gives_back_live_grant): the give-back releases
  /// them, a second owner is granted the key within the first's validity, which S3 must catch.
  bool keep_live_grant = true;
  /// Most requests a member's worker may have queued; beyond it the member counts as unavailable
  /// for that request (a member that hangs must not make memory grow). Default 1024, >= 1.
  std::size_t max_queued = 1024;
  /// Told of each member's answer in each round (lease_event_kind::quorum_member: operation,
  /// member index, outcome; answered = false if the member had not answered when the round was
  /// decided or its wait ran out), on
  /// the calling thread once the round is decided, with no lock held (observer.hpp). Must outlive
  /// the quorum. Default: none.
  lease_observer* observer = nullptr;

  /// Returns errc::invalid_argument unless `members` is odd, the write quorum fits in `members`,
  /// member_timeout is in (0, max_ttl], member_timeout_share is in (0, 1], max_queued >= 1 and
  /// validity.check() is clean; a zero error code otherwise.
  [[nodiscard]] std::error_code check(std::size_t members) const noexcept {
    if (members == 0 || members % 2 == 0) return errc::invalid_argument;
    if (empty_restarts >= members || write_quorum(members, empty_restarts) > members) {
      return errc::invalid_argument;
    }
    if (member_timeout <= std::chrono::milliseconds::zero() || member_timeout > max_ttl) {
      return errc::invalid_argument;
    }
    if (!(member_timeout_share > 0.0 && member_timeout_share <= 1.0)) {
      return errc::invalid_argument;
    }
    if (max_queued == 0) return errc::invalid_argument;
    return validity.check();
  }

  /// Returns what check(members) refuses, naming the field, its value and the limit ("" if
  /// nothing): "quorum of 4 members: the number must be odd (1, 3, 5, ...)".
  [[nodiscard]] std::string problem(std::size_t members) const {
    const std::string n = std::to_string(members);
    if (members == 0 || members % 2 == 0) {
      return "quorum of " + n + " members: the number must be odd (1, 3, 5, ...)";
    }
    if (empty_restarts >= members || write_quorum(members, empty_restarts) > members) {
      return "empty_restarts of " + std::to_string(empty_restarts) + " leaves no write quorum in " +
             n + " members (W = floor((members + empty_restarts) / 2) + 1 = " +
             std::to_string(write_quorum(members, empty_restarts)) + ")";
    }
    if (member_timeout <= std::chrono::milliseconds::zero() || member_timeout > max_ttl) {
      return "member_timeout of " + std::to_string(member_timeout.count()) +
             " ms is not in (0, max_ttl]";
    }
    if (!(member_timeout_share > 0.0 && member_timeout_share <= 1.0)) {
      return "member_timeout_share of " + std::to_string(member_timeout_share) +
             " is not in (0, 1]";
    }
    if (max_queued == 0) return "max_queued of 0 is not >= 1";
    if (!(validity.drift >= 0.0 && validity.drift < 1.0)) {
      return "validity.drift of " + std::to_string(validity.drift) + " is not in [0, 1)";
    }
    if (validity.margin < std::chrono::nanoseconds::zero()) {
      return "validity.margin of " + std::to_string(validity.margin.count()) + " ns is negative";
    }
    return {};
  }
};

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_QUORUM_OPTIONS_HPP
