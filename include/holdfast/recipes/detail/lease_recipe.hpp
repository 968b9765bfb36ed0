// SPDX-License-Identifier: MIT
// holdfast/recipes/detail/lease_recipe.hpp - lease_recipe<Store, Clock, Options>: what every recipe
// over leases (distributed_mutex, election, semaphore) holds and checks before its first acquire,
// in one place: the store, the recipe's key (the mutex's key, the election's name, the prefix of
// the semaphore's slot keys), its options, and the lease TTL validated once at construction by
// acquire_options.hpp's one acquire-input check (key, TTL, validity and backoff options) and the
// given keepalive's own options. A bad argument is not an exception: error() reports it and every
// operation of the recipe fails with it.
//
// The recipes derive from it publicly, so its type aliases and error() are theirs; its members
// are protected, and the recipe names them with using-declarations. Not for users.
#ifndef HOLDFAST_RECIPES_DETAIL_LEASE_RECIPE_HPP
#define HOLDFAST_RECIPES_DETAIL_LEASE_RECIPE_HPP

#include <chrono>
#include <string>
#include <system_error>
#include <utility>

#include "holdfast/acquire_options.hpp"
#include "holdfast/clock.hpp"
#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/result.hpp"
#include "holdfast/store.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

// `Options` has `acquire` (acquire_options<Clock>) and `keepalive` (a pointer to something with
// `error()`: keepalive<Clock> or its port).
template <class Store, class Clock, class Options>
class lease_recipe {
  // Under C++20 the recipes' lease_store and ttl_clock constraints refuse a bad Store or Clock
  // first; under C++17 these name the missing operation.
  static_assert(assert_lease_store<Store>(),
                "holdfast: the Store of a distributed_mutex, election or semaphore must model "
                "LeaseStore");
  static_assert(assert_ttl_clock<Clock>(),
                "holdfast: the Clock of a distributed_mutex, election or semaphore must model "
                "ttl_clock");

 public:
  using store_type = Store;
  using clock_type = Clock;
  /// The lease type the recipe hands out.
  using lease_type = lease<Store, Clock>;
  using time_point = typename Clock::time_point;

  /// Returns errc::invalid_argument if the constructor's arguments were bad; zero otherwise.
  [[nodiscard]] std::error_code error() const noexcept { return config_error_; }

  lease_recipe(const lease_recipe&) = delete;
  lease_recipe& operator=(const lease_recipe&) = delete;

 protected:
  template <class Rep, class Period>
  lease_recipe(Store& store, std::string key, std::chrono::duration<Rep, Period> ttl, Options opts)
      : store_(store), key_(std::move(key)), opts_(std::move(opts)) {
    const result<std::chrono::milliseconds> ms = check_acquire_input(key_, ttl, opts_.acquire);
    if (!ms || check_min_ttl(*ms, store_min_ttl(store), opts_.acquire.report) ||
        (opts_.keepalive != nullptr && opts_.keepalive->error())) {
      refuse();
    } else {
      ttl_ = *ms;
    }
  }
  ~lease_recipe() = default;

  // Marks the configuration bad, for a recipe's own checks of its own options.
  void refuse() noexcept {
    config_error_ = make_error_code(errc::invalid_argument);
    ttl_ = std::chrono::milliseconds{0};
  }

  Store& store_;
  std::string key_;
  Options opts_;
  std::chrono::milliseconds ttl_{0};  // validated; zero when the configuration is bad
  std::error_code config_error_{};
};

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_RECIPES_DETAIL_LEASE_RECIPE_HPP
