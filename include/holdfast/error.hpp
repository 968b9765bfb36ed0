// SPDX-License-Identifier: MIT
// holdfast/error.hpp - the error codes every holdfast operation reports.
//
// holdfast reports outcomes through std::error_code with its own category, so they compose with
// whatever the caller already does with <system_error>. Two kinds of codes live here:
//
//   outcome            | meaning                                          | retry?
//   -------------------+--------------------------------------------------+---------------------
//   busy               | another owner holds a live lease (contention)    | yes, after backoff
//   lease_lost         | renew found the lease expired or taken over      | acquire anew
//   not_holder         | release by an owner/token that does not hold it  | no
//   stale_token        | a fence saw a newer token already                | no (you lost)
//   store_unavailable  | the store is down, unreachable or restarting     | yes
//   timeout            | a deadline passed before the operation finished  | caller decides
//   invalid_argument   | bad input (empty key, TTL <= 0, token 0, ...)    | no, fix the call
//   protocol_error     | the store answered something malformed           | no, bug or mismatch
//   token_exhausted    | the fencing-token counter reached UINT64_MAX     | no, reset the store
//   caught_exception   | a store, clock or callback threw where nothing   | keepalive retries
//                      | may propagate (destructor, background renewer)   |
//
// `busy` is contention, a normal outcome and not a failure: is_contention() tells it apart.
#ifndef HOLDFAST_ERROR_HPP
#define HOLDFAST_ERROR_HPP

#include <string>
#include <system_error>
#include <type_traits>

#include "holdfast/detail/config.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

/// Outcomes of lease, store and fence operations. Zero is reserved for success, as
/// std::error_code requires.
enum class errc : int {
  busy = 1,           ///< Another owner holds a live lease on the key (contention, not a failure).
  lease_lost,         ///< The lease expired or was taken over; renew cannot bring it back.
  not_holder,         ///< Release or renew by an owner/token that does not hold the lease.
  stale_token,        ///< A fence has already admitted a newer fencing token.
  store_unavailable,  ///< The store could not be reached or is not serving.
  timeout,            ///< A deadline passed before the operation completed.
  invalid_argument,   ///< Bad input: empty key/owner, non-positive or unrepresentable TTL, token 0.
  protocol_error,     ///< The store's answer was malformed or violated the store contract.
  token_exhausted,    ///< The fencing-token counter cannot grow any further (UINT64_MAX).
  caught_exception,   ///< A store, clock or callback threw where an exception must not escape
                      ///< (a destructor, a keepalive thread); holdfast caught it and reports it
                      ///< on the lease (lease::last_error(), lease::last_exception()).
  token_reissued,     ///< A fence already admitted this token for another holder: the store lost
                      ///< grants (failover to a lagging replica, a crash inside its fsync window,
                      ///< a restore) and issued the token again. Re-acquire for a newer token.
  misconfigured,      ///< The store's configuration is wrong (malformed address or URI, no such
                      ///< database, an out-of-range option): permanent, never retried.
  permission_denied,  ///< The store refused the credentials or the permission (Redis AUTH/NOPERM,
                      ///< PostgreSQL 28P01/42501, etcd 401/403): permanent, never retried.
  cancelled,          ///< The caller cancelled a blocking call (a stop_token or cancel_source).
  grant_not_durable,  ///< The store made a grant it could not make durable in time (e.g. too few
                      ///< replicas acknowledged it); it was given back, nothing is held.
                      ///< Transient (a failover in progress): blocking calls retry it.
};

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

// Declared before anything compares an error_code with an errc, so that comparison converts.
template <>
struct std::is_error_code_enum<holdfast::errc> : std::true_type {};

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

/// Returns the enumerator's name, e.g. "busy" or "caught_exception": the one table of errc names
/// (histories, timelines and logs print these). Returns nullptr for a value that is no errc (an
/// error code from a newer peer, or zero). Thread-safe.
[[nodiscard]] constexpr const char* to_string(errc e) noexcept {
  switch (e) {
    case errc::busy:
      return "busy";
    case errc::lease_lost:
      return "lease_lost";
    case errc::not_holder:
      return "not_holder";
    case errc::stale_token:
      return "stale_token";
    case errc::store_unavailable:
      return "store_unavailable";
    case errc::timeout:
      return "timeout";
    case errc::invalid_argument:
      return "invalid_argument";
    case errc::protocol_error:
      return "protocol_error";
    case errc::token_exhausted:
      return "token_exhausted";
    case errc::caught_exception:
      return "caught_exception";
    case errc::token_reissued:
      return "token_reissued";
    case errc::misconfigured:
      return "misconfigured";
    case errc::permission_denied:
      return "permission_denied";
    case errc::cancelled:
      return "cancelled";
    case errc::grant_not_durable:
      return "grant_not_durable";
  }
  return nullptr;  // no default above: -Wswitch names an enumerator added without a name
}

namespace detail {

class error_category_impl final : public std::error_category {
 public:
  const char* name() const noexcept override { return "holdfast"; }

  std::string message(int code) const override {
    switch (static_cast<errc>(code)) {
      case errc::busy:
        return "lease is held by another owner";
      case errc::lease_lost:
        return "lease was lost (expired or taken over)";
      case errc::not_holder:
        return "caller does not hold the lease";
      case errc::stale_token:
        return "fencing token is older than one already admitted";
      case errc::store_unavailable:
        return "lease store is unavailable";
      case errc::timeout:
        return "deadline passed before the operation completed";
      case errc::invalid_argument:
        return "invalid argument";
      case errc::protocol_error:
        return "lease store answered with a malformed or contract-violating reply";
      case errc::token_exhausted:
        return "fencing-token counter is exhausted";
      case errc::caught_exception:
        return "a store, clock or callback threw; the exception was caught where it could not "
               "propagate";
      case errc::token_reissued:
        return "fencing token was already admitted for another holder: the store lost grants and "
               "issued it again";
      case errc::misconfigured:
        return "lease store is misconfigured";
      case errc::permission_denied:
        return "lease store refused the credentials or the permission";
      case errc::cancelled:
        return "the caller cancelled the operation";
      case errc::grant_not_durable:
        return "lease store could not make the grant durable in time; it was given back";
    }
    return "unknown holdfast error";
  }
};

}  // namespace detail

/// Returns the std::error_category of holdfast::errc. The object lives for the whole program;
/// thread-safe.
inline const std::error_category& error_category() noexcept {
  static const detail::error_category_impl category;
  return category;
}

/// Makes a std::error_code from an errc (found by ADL, so `std::error_code ec = errc::busy;`
/// works).
inline std::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), error_category()};
}

/// Returns true iff `ec` is holdfast's `busy`: contention, a normal outcome rather than a failure.
inline bool is_contention(const std::error_code& ec) noexcept {
  return ec == errc::busy;
}

/// Returns true iff `ec` is a permanent failure that no retry can cure: the store's
/// configuration (`misconfigured`), its refusal of the credentials (`permission_denied`), or bad
/// input (`invalid_argument`). Blocking calls return at once on these instead of retrying.
inline bool is_permanent(const std::error_code& ec) noexcept {
  return ec == errc::misconfigured || ec == errc::permission_denied || ec == errc::invalid_argument;
}

/// Returns true iff `ec` may clear up on its own, so retrying the same call later makes sense
/// (`busy`, `store_unavailable`, `timeout`, `grant_not_durable` (too few replicas acknowledged:
/// during a failover the replicas come back), or any error that does not belong to holdfast,
/// since a user's store may report transport errors in its own category).
inline bool is_transient(const std::error_code& ec) noexcept {
  if (!ec) return false;
  if (ec.category() != error_category()) return true;
  return ec == errc::busy || ec == errc::store_unavailable || ec == errc::timeout ||
         ec == errc::grant_not_durable;
}

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_ERROR_HPP
