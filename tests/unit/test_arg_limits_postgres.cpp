// SPDX-License-Identifier: MIT
// tests/unit/test_arg_limits_postgres.cpp - every entry point of postgres_store that takes a key
// or an owner refuses one of 1 GiB or more (PostgreSQL's bytea field limit) with invalid_argument
// at once, naming the limit, before anything is sent: the store points at a black hole
// (tests/support/arg_limits.hpp). No server needed.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstddef>
#include <string>

#include "../support/arg_limits.hpp"
#include "../support/black_hole.hpp"
#include "holdfast/stores/postgres.hpp"

namespace test_arg_limits_postgres {

using namespace std::chrono_literals;

TEST_CASE("postgres_store refuses an over-limit key or owner at every entry point, sending nothing",
          "[postgres][hostile]") {
  hf_test::black_hole hole;
  REQUIRE(hole.port() != 0);
  holdfast::postgres_options o;
  o.conninfo = "host=127.0.0.1 port=" + std::to_string(hole.port()) +
               " dbname=holdfast user=holdfast sslmode=disable connect_timeout=10";
  o.command_timeout = 10s;
  holdfast::postgres_store s(o);
  static const std::string big(std::size_t{1} << 30, 'k');  // PostgreSQL's limit: 1 GiB - 1
  hf_test::check_arg_limits(hole, s, big, "1 GiB");
}

}  // namespace test_arg_limits_postgres
