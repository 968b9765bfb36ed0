// SPDX-License-Identifier: MIT
// holdfast/stores/detail/give_back.hpp - the one rule of every multi-call protocol (issue 22): an
// operation that fails leaves nothing of the caller's in any store beyond what it reports.
//
// A try_acquire whose answer is an error may still have been applied (the reply was lost, the
// store failed after applying): may_hide_grant() says when. give_back() then asks the store again
// with the same owner, which returns a live lease's own grant (store.hpp, T1: a same-owner
// re-acquire returns the same token), and releases it unless it is the grant the caller keeps.
// Used by acquire() (its last attempt), the semaphore (each slot), the quorum (each member, each
// round) and the recipes built on them. Not for users.
#ifndef HOLDFAST_STORES_DETAIL_GIVE_BACK_HPP
#define HOLDFAST_STORES_DETAIL_GIVE_BACK_HPP

#include <chrono>
#include <string_view>
#include <system_error>

#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/result.hpp"
#include "holdfast/store.hpp"
#include "holdfast/store_deadline.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

/// Whether an error answer to try_acquire may hide a grant the store made: a transient error
/// other than contention (a timeout, an unavailable store, a foreign transport error: the reply
/// may have been lost after the store applied it). Not busy, not grant_not_durable (the store
/// gave that grant back itself), and not a permanent error (bad input, exhaustion,
/// misconfiguration, garbage): asking such a store again helps nobody.
inline bool may_hide_grant(const std::error_code& ec) noexcept {
  return ec != errc::busy && ec != errc::grant_not_durable && is_transient(ec);
}

/// Gives back whatever `owner` may hold on `key` in `store` after a call whose answer was lost:
/// asks again with the same owner and `ttl` (ms; <= 0 asks for 1 ms), and releases the grant
/// unless its token is `keep` (the grant the caller reports; none: keep nothing). One to three
/// store calls (the re-ask once more when its own answer may hide a grant); best effort: a store
/// that still fails is left to free the key at its TTL. Each re-ask is bounded by
/// store_call_floor where the store offers the deadline capability (store_deadline.hpp: such a
/// store settles a re-ask the bound cut short itself), so a give-back after a blocking call's
/// deadline adds at most that much, plus the store's settling bound, to the call.
/// \returns the token that was given back, or none. Exceptions from the store propagate.
template <class Store>
fencing_token give_back(Store& store, std::string_view key, std::string_view owner,
                        std::chrono::milliseconds ttl, fencing_token keep = {}) {
  if (ttl <= std::chrono::milliseconds::zero()) ttl = std::chrono::milliseconds(1);
  const auto ask = [&] {
    return store_try_acquire_until(store, key, owner, ttl, std::chrono::steady_clock::now());
  };
  result<grant> g = ask();
  // The re-ask can itself make a grant (the store held nothing of the owner's) whose reply is
  // lost: ask once more, which returns that grant, so the give-back leaves nothing either.
  if (!g && may_hide_grant(g.error())) g = ask();
  if (!g || !g->token.is_issuable()) return {};
  if (keep.is_issuable() && g->token == keep) return {};
  (void)store.release(key, owner, g->token);
  return g->token;
}

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_DETAIL_GIVE_BACK_HPP
