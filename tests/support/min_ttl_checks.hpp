// SPDX-License-Identifier: MIT
// The min_ttl boundary every store with a min_ttl option must keep, for the store tests
// (test_redis_min_ttl.cpp, test_postgres_min_ttl.cpp, test_etcd_min_ttl.cpp): the options' default
// is the one their docstring gives; with min_ttl = `limit`, a TTL one ms under it is refused before
// anything is sent (try_acquire, a blocking acquire at once, the recipes' constructors), at and one
// ms over it granted; a negative min_ttl is a bad option.
#ifndef HOLDFAST_TESTS_SUPPORT_MIN_TTL_CHECKS_HPP
#define HOLDFAST_TESTS_SUPPORT_MIN_TTL_CHECKS_HPP

#include <catch2/catch.hpp>

#include <chrono>
#include <string>

#include "holdfast/election.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/semaphore.hpp"

namespace hf_test {

// `Options` must have min_ttl and check(std::string*); `Store` is made from it. `default_min_ttl`
// is what a default `Options` holds; `limit` (> 1 ms) is the min_ttl the boundary is checked at.
template <class Store, class Options>
void check_min_ttl_boundary(Options o, std::chrono::milliseconds default_min_ttl,
                            std::chrono::milliseconds limit) {
  using namespace std::chrono_literals;
  using holdfast::errc;
  using clk = std::chrono::steady_clock;
  CHECK(o.min_ttl == default_min_ttl);  // the default the options' docstring gives
  o.min_ttl = limit;
  Store store(o);
  CHECK(holdfast::store_min_ttl(store) == limit);
  const auto under_ttl = limit - 1ms;
  const auto over_ttl = limit + 1ms;
  holdfast::acquire_report report;
  holdfast::acquire_options<> opts;
  opts.report = &report;
  auto under = holdfast::try_acquire(store, "k-under", under_ttl, opts);
  CHECK(under.error() == errc::invalid_argument);
  CHECK(report.attempts == 0);  // nothing was sent
  CHECK(report.last_store_error == errc::invalid_argument);
  CHECK(report.last_store_message.find("min_ttl of " + std::to_string(limit.count()) + " ms") !=
        std::string::npos);
  // A blocking acquire answers at once, not timeout at its deadline.
  const auto t0 = clk::now();
  CHECK(holdfast::acquire(store, "k-under", under_ttl, 30s, opts).error() ==
        errc::invalid_argument);
  CHECK(clk::now() - t0 < 1s);
  auto at = holdfast::try_acquire(store, "k-at", limit, opts);
  CHECK(at.has_value());
  auto over = holdfast::try_acquire(store, "k-over", over_ttl, opts);
  CHECK(over.has_value());
  // The recipes refuse at construction (error()), so every call fails before the store is asked.
  holdfast::election_options<> eo;
  eo.renewal.start_thread = false;
  CHECK(holdfast::election<Store>(store, "e-under", under_ttl, eo).error() ==
        errc::invalid_argument);
  CHECK_FALSE(holdfast::election<Store>(store, "e-at", limit, eo).error());
  CHECK(holdfast::semaphore<Store>(store, "s-under", 2, under_ttl).error() ==
        errc::invalid_argument);
  CHECK_FALSE(holdfast::semaphore<Store>(store, "s-at", 2, limit).error());
  // A bad min_ttl is a bad option.
  o.min_ttl = -1ms;
  std::string why;
  CHECK(o.check(&why) == errc::invalid_argument);
  CHECK(why.find("min_ttl") != std::string::npos);
}

}  // namespace hf_test

#endif  // HOLDFAST_TESTS_SUPPORT_MIN_TTL_CHECKS_HPP
