// SPDX-License-Identifier: MIT
// holdfast/recipes/detail/lease_recipe.hpp - lease_recipe<Store, Clock, Options>: what every recipe
// over leases (distributed_mutex, election, semaphore) holds and checks before its first acquire,
// in one place: the store, the recipe's key (the mutex's key, the election's name, the prefix of
// the semaphore's slot keys), its options, and the lease TTL validated once at construction by
// acquire_options.hpp's one acquire-input check (key, TTL, validity and backoff options) and the
// given keepalive's own options. A bad argument is not an exception: error() reports it,
// error_message() says which argument, its value and the limit, and every operation of the recipe
// fails with it.
//
// The recipes derive from it publicly, so its type aliases and error() are theirs; its members
// are protected, and the recipe names them with using-declarations. Not for users.
#ifndef HOLDFAST_RECIPES_DETAIL_LEASE_RECIPE_HPP
#define HOLDFAST_RECIPES_DETAIL_LEASE_RECIPE_HPP

#include <chrono>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include "holdfast/acquire_options.hpp"
#include "holdfast/clock.hpp"
#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/lease/detail/option_texts.hpp"
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

  /// Returns what error() refers to, naming the argument, its value and the limit it broke
  /// ("holdfast: election: invalid argument: the TTL of 0 ms is not positive"); empty when error()
  /// is zero. The constructor also puts it, with the code, in acquire.report if that is set.
  [[nodiscard]] const std::string& error_message() const noexcept { return config_message_; }

  lease_recipe(const lease_recipe&) = delete;
  lease_recipe& operator=(const lease_recipe&) = delete;

 protected:
  // `recipe` and `key_name` name the recipe and its key in the texts of error_message().
  template <class Rep, class Period>
  lease_recipe(Store& store, std::string key, std::chrono::duration<Rep, Period> ttl, Options opts,
               const char* recipe = "recipe", const char* key_name = "key")
      : store_(store), key_(std::move(key)), opts_(std::move(opts)), recipe_(recipe) {
    const result<std::chrono::milliseconds> ms = check_acquire_input(key_, ttl, opts_.acquire);
    acquire_report floor;
    if (key_.empty()) {
      refuse(std::string("the ") + key_name + " is empty");
    } else if (!ms) {
      std::string why = validity_problem(opts_.acquire.validity, "acquire.validity");
      if (why.empty()) why = backoff_problem(opts_.acquire.backoff, "acquire.backoff");
      refuse(why.empty() ? invalid_acquire_input_text(key_, ttl, opts_.acquire) : why);
    } else if (check_min_ttl(*ms, store_min_ttl(store), &floor)) {
      // "holdfast: invalid argument: the TTL of ...": refuse() puts its own prefix on.
      const std::string& said = floor.last_store_message;
      const std::string_view prefix = "holdfast: invalid argument: ";
      refuse(said.compare(0, prefix.size(), prefix) == 0 ? said.substr(prefix.size()) : said);
    } else if (opts_.keepalive != nullptr && opts_.keepalive->error()) {
      refuse("options.keepalive has bad options of its own (see its error_message())");
    } else {
      ttl_ = *ms;
    }
  }
  ~lease_recipe() = default;

  // Marks the configuration bad, for a recipe's own checks of its own options: `why` names the
  // argument, its value and the limit. The first refusal's text stays.
  void refuse(const std::string& why) {
    if (!config_error_) {
      config_message_ = "holdfast: " + std::string(recipe_) + ": invalid argument: " + why;
      if (opts_.acquire.report != nullptr) {
        opts_.acquire.report->last_store_error = make_error_code(errc::invalid_argument);
        opts_.acquire.report->last_store_message = config_message_;
      }
    }
    config_error_ = make_error_code(errc::invalid_argument);
    ttl_ = std::chrono::milliseconds{0};
  }
  void refuse() { refuse("an argument is out of range"); }

  Store& store_;
  std::string key_;
  Options opts_;
  std::chrono::milliseconds ttl_{0};  // validated; zero when the configuration is bad
  std::error_code config_error_{};
  std::string config_message_{};
  const char* recipe_;
};

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_RECIPES_DETAIL_LEASE_RECIPE_HPP
