// SPDX-License-Identifier: MIT
// tests/unit/test_black_hole_redis.cpp - acquire() against a Redis endpoint that takes
// connections and never answers ends by its deadline (the connect and the setup round trip
// capped by the caller's time left; tests/support/black_hole_checks.hpp). No server needed.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>

#include "../support/black_hole.hpp"
#include "../support/black_hole_checks.hpp"
#include "holdfast/stores/redis.hpp"

namespace test_black_hole_redis {

using namespace std::chrono_literals;

TEST_CASE("redis_store: acquire() against a black hole ends by its deadline", "[redis][deadline]") {
  hf_test::black_hole hole;
  REQUIRE(hole.port() != 0);
  holdfast::redis_options o;
  o.port = hole.port();
  o.connect_timeout = 10s;
  o.command_timeout = 10s;
  holdfast::redis_store s(o);
  hf_test::check_acquire_bounded(s, "redis", 5s);
}

}  // namespace test_black_hole_redis
