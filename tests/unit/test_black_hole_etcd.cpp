// SPDX-License-Identifier: MIT
// tests/unit/test_black_hole_etcd.cpp - acquire() against an etcd endpoint that takes connections
// and never answers ends by its deadline (libcurl's timeouts capped by the caller's time left;
// tests/support/black_hole_checks.hpp). No server needed.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>

#include "../support/black_hole.hpp"
#include "../support/black_hole_checks.hpp"
#include "holdfast/stores/etcd.hpp"

namespace test_black_hole_etcd {

using namespace std::chrono_literals;

TEST_CASE("etcd_store: acquire() against a black hole ends by its deadline", "[etcd][deadline]") {
  hf_test::black_hole hole;
  REQUIRE(hole.port() != 0);
  holdfast::etcd_options o;
  o.endpoints = {"http://" + hole.host_port()};
  o.connect_timeout = 10s;
  o.command_timeout = 10s;
  holdfast::etcd_store s(o);
  hf_test::check_acquire_bounded(s, hole.host_port(), 5s);
}

TEST_CASE("etcd_store: try_acquire against a black hole takes one command_timeout, not two",
          "[etcd][deadline]") {
  // Before: the grant timed out (command_timeout), then the revoke of the lease it may have made
  // waited as long again; a second call waited a third time for the kept lease's revoke first.
  hf_test::black_hole hole;
  REQUIRE(hole.port() != 0);
  holdfast::etcd_options o;
  o.endpoints = {"http://" + hole.host_port()};
  o.connect_timeout = 1s;
  o.command_timeout = 1s;
  holdfast::etcd_store s(o);
  for (int call = 0; call < 2; ++call) {
    const auto t0 = std::chrono::steady_clock::now();
    auto g = s.try_acquire("k", "A", 5s);
    const auto took = std::chrono::steady_clock::now() - t0;
    INFO("call " << call << " took "
                 << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                 << " ms: " << s.last_error_message());
    REQUIRE_FALSE(g);
    CHECK(g.error() == holdfast::errc::timeout);
    CHECK(took >= 1s);  // the grant's own command_timeout was waited, once
    CHECK(took < 1s + 2 * holdfast::store_call_floor + 150ms);
    CHECK(s.last_error_message().find(hole.host_port()) != std::string::npos);
  }
}

}  // namespace test_black_hole_etcd
