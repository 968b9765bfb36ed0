// SPDX-License-Identifier: MIT
// tests/unit/test_etcd_min_ttl.cpp - etcd_store: a TTL under etcd_options::min_ttl is refused up
// front (issue 23 part 3): errc::invalid_argument at once, with no attempt sent and the limit named
// in the acquire_report, from try_acquire(), a blocking acquire() (which answered timeout after its
// whole deadline before) and the recipes' constructors; one ms under, at and over the limit.
// Real server (HOLDFAST_ETCD_ENDPOINTS from .ci/servers), bounded waits.
#include <catch2/catch.hpp>

#include <chrono>
#include <optional>
#include <string>

#include "../support/etcd_servers.hpp"
#include "../support/real_servers.hpp"
#include "holdfast/election.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/semaphore.hpp"
#include "holdfast/stores/etcd.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_etcd_min_ttl {

namespace {

using namespace std::chrono_literals;
using holdfast::errc;
using clk = std::chrono::steady_clock;

std::optional<holdfast::etcd_options> server() {
  std::optional<std::string> e = hf_test::env("HOLDFAST_ETCD_ENDPOINTS");
  if (!e) {
    if (hf_test::in_ci()) FAIL("HOLDFAST_ETCD_ENDPOINTS is unset (.ci/servers sets it)");
    hf_test::loud_skip("no etcd: HOLDFAST_ETCD_ENDPOINTS is unset");
    return std::nullopt;
  }
  holdfast::etcd_options o;
  o.endpoints = hf_test::split_commas(*e);
  o.key_prefix = "hf-min-ttl/" + hf_test::random_tag() + "/";
  return o;
}

}  // namespace

TEST_CASE("etcd_store: a TTL one ms under min_ttl is refused at once, at and over it granted",
          "[etcd][min_ttl]") {
  std::optional<holdfast::etcd_options> o = server();
  if (!o) return;
  CHECK(o->min_ttl == 2000ms);  // the default the options' docstring gives
  o->min_ttl = 3000ms;
  holdfast::etcd_store store(*o);
  CHECK(holdfast::store_min_ttl(store) == 3000ms);
  holdfast::acquire_report report;
  holdfast::acquire_options<> opts;
  opts.report = &report;
  auto under = holdfast::try_acquire(store, "k-under", 2999ms, opts);
  CHECK(under.error() == errc::invalid_argument);
  CHECK(report.attempts == 0);  // nothing was sent
  CHECK(report.last_store_error == errc::invalid_argument);
  CHECK(report.last_store_message.find("min_ttl of 3000 ms") != std::string::npos);
  // A blocking acquire answers at once, not timeout at its deadline.
  const auto t0 = clk::now();
  CHECK(holdfast::acquire(store, "k-under", 2999ms, 30s, opts).error() == errc::invalid_argument);
  CHECK(clk::now() - t0 < 1s);
  auto at = holdfast::try_acquire(store, "k-at", 3000ms, opts);
  CHECK(at.has_value());
  auto over = holdfast::try_acquire(store, "k-over", 3001ms, opts);
  CHECK(over.has_value());
  // The recipes refuse at construction (error()), so every call fails before the store is asked.
  holdfast::election_options<> eo;
  eo.renewal.start_thread = false;
  CHECK(holdfast::election<holdfast::etcd_store>(store, "e-under", 2999ms, eo).error() ==
        errc::invalid_argument);
  CHECK_FALSE(holdfast::election<holdfast::etcd_store>(store, "e-at", 3000ms, eo).error());
  CHECK(holdfast::semaphore<holdfast::etcd_store>(store, "s-under", 2, 2999ms).error() ==
        errc::invalid_argument);
  CHECK_FALSE(holdfast::semaphore<holdfast::etcd_store>(store, "s-at", 2, 3000ms).error());
  // A bad min_ttl is a bad option.
  o->min_ttl = -1ms;
  std::string why;
  CHECK(o->check(&why) == errc::invalid_argument);
  CHECK(why.find("min_ttl") != std::string::npos);
}

TEST_CASE("etcd_store: the default min_ttl is etcd's minimum lease TTL, 2 s with its defaults",
          "[etcd][min_ttl]") {
  // etcd raises a shorter TTL to ceil(1.5 x election timeout) s: 3 ms could never be honoured
  // (before: every grant came back with no validity, and acquire answered timeout).
  std::optional<holdfast::etcd_options> o = server();
  if (!o) return;
  holdfast::etcd_store store(*o);
  const auto t0 = clk::now();
  CHECK(holdfast::acquire(store, "k3", 3ms, 30s).error() == errc::invalid_argument);
  CHECK(holdfast::try_acquire(store, "k1999", 1999ms).error() == errc::invalid_argument);
  CHECK(clk::now() - t0 < 1s);
  auto at = holdfast::try_acquire(store, "k2000", 2000ms);
  REQUIRE(at.has_value());
  CHECK(at->ttl() == 2000ms);
}

}  // namespace test_etcd_min_ttl
