// SPDX-License-Identifier: MIT
// tests/unit/test_black_hole_postgres.cpp - acquire() against a PostgreSQL endpoint that takes
// connections and never answers ends by its deadline: the connect is bounded by the caller's time
// left as well as connect_timeout (tests/support/black_hole_checks.hpp). No server needed.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>

#include "../support/black_hole.hpp"
#include "../support/black_hole_checks.hpp"
#include "holdfast/stores/postgres.hpp"

namespace test_black_hole_postgres {

using namespace std::chrono_literals;

TEST_CASE("postgres_store: acquire() against a black hole ends by its deadline",
          "[postgres][deadline]") {
  hf_test::black_hole hole;
  REQUIRE(hole.port() != 0);
  holdfast::postgres_options o;
  o.conninfo = "host=127.0.0.1 port=" + std::to_string(hole.port()) +
               " dbname=holdfast user=holdfast sslmode=disable";
  o.connect_timeout = 10s;
  o.command_timeout = 10s;
  holdfast::postgres_store s(o);
  hf_test::check_acquire_bounded(s, hole.host_port(), 5s);
}

}  // namespace test_black_hole_postgres
