// SPDX-License-Identifier: MIT
// holdfast/detail/call_until.hpp - the caller's deadline for the store calls this thread makes
// now (call_until), set for a scope by call_bound: how a blocking call's deadline reaches a
// store's transport without a parameter through every layer. Set by the stores' deadline
// capability (store_deadline.hpp: redis_store, etcd_store, postgres_store) and, for a store
// without it, by store_try_acquire_until and acquire() around each attempt, so that a store that
// reads it for its connect (zookeeper_store) still bounds that step by the caller's time left.
// Read through stores/detail/call_bound.hpp (capped_by_call). A store call runs on its caller's
// thread, so the bound is the caller's; other threads keep theirs. Not for users.
#ifndef HOLDFAST_DETAIL_CALL_UNTIL_HPP
#define HOLDFAST_DETAIL_CALL_UNTIL_HPP

#include <chrono>

#include "holdfast/detail/config.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

/// The deadline of the store calls this thread makes now (time_point::max(): none).
inline std::chrono::steady_clock::time_point& call_until() noexcept {
  static thread_local std::chrono::steady_clock::time_point until =
      std::chrono::steady_clock::time_point::max();
  return until;
}

/// Bounds the store calls this thread makes in a scope by `until` (a store's try_acquire_until).
class call_bound {
 public:
  explicit call_bound(std::chrono::steady_clock::time_point until) noexcept : saved_(call_until()) {
    call_until() = until;
  }
  ~call_bound() { call_until() = saved_; }
  call_bound(const call_bound&) = delete;
  call_bound& operator=(const call_bound&) = delete;

 private:
  std::chrono::steady_clock::time_point saved_;
};

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_DETAIL_CALL_UNTIL_HPP
