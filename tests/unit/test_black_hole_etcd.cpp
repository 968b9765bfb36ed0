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

}  // namespace test_black_hole_etcd
