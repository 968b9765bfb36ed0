// SPDX-License-Identifier: MIT
// holdfast/stores/detail/call_bound.hpp - how a caller's deadline reaches the transport of a real
// store (store_deadline.hpp, D1) without a parameter through every layer: a thread-local bound on
// the calls this thread makes (call_bound), the timeouts capped by it (capped_by_call), and the
// store_call_floor a give-back gets of its own once the bound is used up (call_floor). A store
// call runs on its caller's thread, under its connection's lock, so the bound is the caller's and
// other threads' calls on the same store keep theirs (call_bound itself: detail/call_until.hpp).
// Used by redis_store, etcd_store, postgres_store and zookeeper_store's connect. Not for users.
#ifndef HOLDFAST_STORES_DETAIL_CALL_BOUND_HPP
#define HOLDFAST_STORES_DETAIL_CALL_BOUND_HPP

#include <chrono>
#include <optional>

#include "holdfast/detail/call_until.hpp"
#include "holdfast/detail/config.hpp"
#include "holdfast/store_deadline.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

/// `limit` (ms), capped by the time left until call_until(), rounded up to whole ms and at least
/// 1 ms (a zero timeout means "wait forever" to WAIT, sockets and libcurl).
inline std::chrono::milliseconds capped_by_call(std::chrono::milliseconds limit) noexcept {
  const std::chrono::steady_clock::time_point until = call_until();
  if (until == std::chrono::steady_clock::time_point::max()) return limit;
  const std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now();
  if (!(now < until)) return std::chrono::milliseconds(1);
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(until - now);
  return left < limit ? left : limit;
}

/// Under a bound, gives the calls in a scope store_call_floor of their own from now (a give-back
/// after the bound was used up, D2); without one, changes nothing.
class call_floor {
 public:
  call_floor() : call_floor(call_until() != std::chrono::steady_clock::time_point::max()) {}
  /// Gives the calls in a scope store_call_floor of their own from now iff `when`, bound or not
  /// (a give-back after a request that timed out: another whole command timeout on a server that
  /// answers nothing would only double its caller's wait).
  explicit call_floor(bool when) {
    if (when) bound_.emplace(std::chrono::steady_clock::now() + store_call_floor);
  }

 private:
  std::optional<call_bound> bound_;
};

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_DETAIL_CALL_BOUND_HPP
