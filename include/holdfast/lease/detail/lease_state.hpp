// SPDX-License-Identifier: MIT
// holdfast/lease/detail/lease_state.hpp - the public vocabulary of a lease's life: lease_state,
// loss_cause (and its to_string) and loss_callback. Defined apart from the lease's state
// (lease_shared.hpp), which uses them; users reach them through lease.hpp, whose overview
// documents the states.
#ifndef HOLDFAST_LEASE_DETAIL_LEASE_STATE_HPP
#define HOLDFAST_LEASE_DETAIL_LEASE_STATE_HPP

#include <functional>

#include "holdfast/detail/config.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

/// Where a lease handle is in its life (see the table at the top of lease.hpp).
enum class lease_state {
  held,       ///< Granted and not known to be lost; valid() may still turn false at valid_until().
  lost,       ///< Known lost: validity passed, renew refused, clock regressed, or a garbage reply.
  released,   ///< Released (or moved-from); nothing left to do.
  releasing,  ///< release() was called but has not succeeded; never renewed again; retry release().
};

/// Why a holder stopped holding: lease::loss() and the on-loss callback (which never see
/// `resigned`: a released lease is not lost), and election's on_stopped_leading.
enum class loss_cause : unsigned char {
  none,             ///< Not lost.
  validity_passed,  ///< The holder's clock passed valid_until() (seen by valid(), renew() or a
                    ///< keepalive) before a renewal landed.
  renew_refused,    ///< The store answered renew with lease_lost (expired or taken over).
  not_holder,       ///< The store said this handle is not the holder (renew or release).
  clock_regressed,  ///< The holder's clock went backwards, so elapsed time cannot be measured.
  protocol_error,   ///< The store answered a renew with a malformed grant (other token, TTL <= 0).
  resigned,         ///< The holder gave it up itself: election::resign(), or the election was
                    ///< destroyed while leading. Election only.
  session_expired,  ///< The store's session with its server expired, taking the lease with it
                    ///< (ZooKeeper: the server heard nothing from the client for the session
                    ///< timeout); seen by renew (lease_lost) or release (not_holder) through
                    ///< store_session_expired() (store.hpp). Curator's ConnectionState.LOST.
};

/// Returns the loss_cause's name, e.g. "validity_passed".
[[nodiscard]] constexpr const char* to_string(loss_cause c) noexcept {
  switch (c) {
    case loss_cause::none:
      return "none";
    case loss_cause::validity_passed:
      return "validity_passed";
    case loss_cause::renew_refused:
      return "renew_refused";
    case loss_cause::not_holder:
      return "not_holder";
    case loss_cause::clock_regressed:
      return "clock_regressed";
    case loss_cause::protocol_error:
      return "protocol_error";
    case loss_cause::resigned:
      return "resigned";
    case loss_cause::session_expired:
      return "session_expired";
  }
  return "unknown";
}

/// The on-loss callback: called once with the cause when a lease turns lost (or when release()
/// finds that the store no longer held it). It runs on the thread that noticed the loss: the
/// holder's (in valid(), remaining(), renew(), release(), the destructor) or a keepalive's. It
/// runs with no holdfast lock held, but concurrently with the holder's thread when a keepalive
/// calls it: it must be thread-safe, should be quick (set a flag, cancel work), and must not use
/// the lease handle itself (a handle is used by one thread at a time). An exception it throws
/// propagates from valid()/renew()/release(); in a destructor or a keepalive it is caught and
/// reported as errc::caught_exception on the lease.
using loss_callback = std::function<void(loss_cause)>;

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_LEASE_DETAIL_LEASE_STATE_HPP
