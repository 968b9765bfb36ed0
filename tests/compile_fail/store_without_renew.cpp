// SPDX-License-Identifier: MIT
// A type with try_acquire and release but no renew is not a LeaseStore: try_acquire() refuses it,
// under C++20 by the lease_store constraint (naming the renew requirement), under C++17 by a
// static_assert naming `result<grant> renew(...)`, not pages of template errors.
// expect-error: needs .result<grant> renew\(|s\.renew\(key, owner, token, ttl\)
// holdfast: control
#include <chrono>
#include <holdfast/lease.hpp>
#include <holdfast/store.hpp>
#include <optional>
#include <string_view>

struct store_without_renew {
  holdfast::result<holdfast::grant> try_acquire(std::string_view, std::string_view,
                                                std::chrono::milliseconds) {
    return holdfast::errc::busy;
  }
#ifdef HOLDFAST_COMPILE_FAIL_CONTROL  // the control adds renew, and then it compiles
  holdfast::result<holdfast::grant> renew(std::string_view, std::string_view,
                                          holdfast::fencing_token, std::chrono::milliseconds) {
    return holdfast::errc::busy;
  }
#endif
  holdfast::result<void> release(std::string_view, std::string_view, holdfast::fencing_token) {
    return holdfast::errc::not_holder;
  }
};

int main() {
  store_without_renew store;
  auto lease = holdfast::try_acquire(store, "orders", std::chrono::seconds(10));
  return lease ? 0 : 1;
}
