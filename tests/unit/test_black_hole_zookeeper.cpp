// SPDX-License-Identifier: MIT
// tests/unit/test_black_hole_zookeeper.cpp - acquire() against a ZooKeeper endpoint that takes
// connections and never answers, or a closed port, ends by its deadline: the wait for a session
// is bounded by the caller's time left as well as connect_timeout (detail/call_until.hpp;
// tests/support/black_hole_checks.hpp). No server needed.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>

#include "../support/black_hole.hpp"
#include "../support/black_hole_checks.hpp"
#include "holdfast/stores/zookeeper.hpp"

namespace test_black_hole_zookeeper {

using namespace std::chrono_literals;

TEST_CASE("zookeeper_store: acquire() against a black hole ends by its deadline",
          "[zookeeper][deadline]") {
  hf_test::black_hole hole;
  REQUIRE(hole.port() != 0);
  holdfast::zookeeper_options o;
  o.hosts = hole.host_port();
  o.connect_timeout = 10s;
  holdfast::zookeeper_store s(o);
  hf_test::check_acquire_bounded(s, hole.host_port(), 10s);
}

TEST_CASE("zookeeper_store: acquire() against a closed port ends by its deadline",
          "[zookeeper][deadline]") {
  std::string hosts;
  {
    hf_test::black_hole closed;  // a port that was free a moment ago, now closed
    hosts = closed.host_port();
  }
  holdfast::zookeeper_options o;
  o.hosts = hosts;
  o.connect_timeout = 10s;
  holdfast::zookeeper_store s(o);
  hf_test::check_acquire_bounded(s, hosts, 10s);
}

}  // namespace test_black_hole_zookeeper
