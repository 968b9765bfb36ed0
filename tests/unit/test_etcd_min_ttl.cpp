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

#include "../support/etcd_faulty.hpp"
#include "../support/etcd_servers.hpp"
#include "../support/min_ttl_checks.hpp"
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
  return hf_test::shared_etcd("hf-min-ttl");
}

}  // namespace

TEST_CASE("etcd_store: a TTL one ms under min_ttl is refused at once, at and over it granted",
          "[etcd][min_ttl]") {
  std::optional<holdfast::etcd_options> o = server();
  if (!o) return;
  // etcd's default is its own minimum lease TTL (next test); the boundary at 3000 ms.
  hf_test::check_min_ttl_boundary<holdfast::etcd_store>(*o, 2000ms, 3000ms);
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
