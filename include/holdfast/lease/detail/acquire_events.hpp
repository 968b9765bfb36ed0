// SPDX-License-Identifier: MIT
// holdfast/lease/detail/acquire_events.hpp - the events an observed acquire tells its observer
// (observer.hpp): each attempt's outcome and the call's. Part of lease/detail/acquire.hpp; not
// for users.
#ifndef HOLDFAST_LEASE_DETAIL_ACQUIRE_EVENTS_HPP
#define HOLDFAST_LEASE_DETAIL_ACQUIRE_EVENTS_HPP

#include <cstdint>
#include <string_view>
#include <system_error>

#include "holdfast/acquire_options.hpp"
#include "holdfast/detail/config.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/observer.hpp"
#include "holdfast/result.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

// An event of kind `kind` about one acquire outcome: a lease with `token`, or the error `ec`
// (when set; the token is then none).
inline lease_event outcome_event(lease_event_kind kind, std::string_view key,
                                 std::string_view owner, fencing_token token, std::error_code ec) {
  lease_event e;
  e.kind = kind;
  e.key = key;
  e.owner = owner;
  e.token = ec ? fencing_token{} : token;
  e.error = ec;
  return e;
}

// The same for a result: the lease's token, or its error.
template <class Lease>
lease_event outcome_event(lease_event_kind kind, std::string_view key, std::string_view owner,
                          const result<Lease>& l) {
  if (!l) return outcome_event(kind, key, owner, fencing_token{}, l.error());
  return outcome_event(kind, key, owner, l->token(), std::error_code{});
}

// Tells opts.observer how an observed try_acquire()/acquire() ended: acquired with `token`, or
// acquire_failed with `ec` (when set), waiting since `t0`, after `attempts` store calls. The
// error paths call this one directly and build no result (g++ 12 at -O3 warned of a lease read,
// maybe uninitialized, from a result built from an error: a false alarm, but users build with
// -Werror too).
template <class Clock>
void report_outcome(fencing_token token, std::error_code ec, const acquire_options<Clock>& opts,
                    std::string_view key, std::string_view owner, typename Clock::time_point t0,
                    std::uint32_t attempts) {
  lease_event e = outcome_event(ec ? lease_event_kind::acquire_failed : lease_event_kind::acquired,
                                key, owner, token, ec);
  e.wait = elapsed_ns(t0, opts.clock.now());
  e.attempt = attempts;
  notify(opts.observer, e);
}

// report_outcome for a result.
template <class Lease, class Clock>
void report_acquire(const result<Lease>& l, const acquire_options<Clock>& opts,
                    std::string_view key, std::string_view owner, typename Clock::time_point t0,
                    std::uint32_t attempts) {
  if (!l) return report_outcome(fencing_token{}, l.error(), opts, key, owner, t0, attempts);
  report_outcome(l->token(), std::error_code{}, opts, key, owner, t0, attempts);
}

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_LEASE_DETAIL_ACQUIRE_EVENTS_HPP
