// SPDX-License-Identifier: MIT
// tests/unit/test_redis_min_ttl.cpp - redis_store: a TTL under redis_options::min_ttl is refused up
// front (issue 23 part 3): errc::invalid_argument at once, with no attempt sent and the limit named
// in the acquire_report, from try_acquire(), a blocking acquire() (which answered timeout after its
// whole deadline before) and the recipes' constructors; one ms under, at and over the limit.
// Real server (HOLDFAST_REDIS_PORT from .ci/servers), bounded waits.
#include <catch2/catch.hpp>

#include <chrono>
#include <optional>
#include <string>

#include "../support/min_ttl_checks.hpp"
#include "../support/real_servers.hpp"
#include "../support/redis_servers.hpp"
#include "holdfast/election.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/semaphore.hpp"
#include "holdfast/stores/redis.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_redis_min_ttl {

namespace {

using namespace std::chrono_literals;
using holdfast::errc;
using clk = std::chrono::steady_clock;

std::optional<holdfast::redis_options> server() {
  return hf_test::shared_redis_options("hfm");
}

}  // namespace

TEST_CASE("redis_store: a TTL one ms under min_ttl is refused at once, at and over it granted",
          "[redis][min_ttl]") {
  std::optional<holdfast::redis_options> o = server();
  if (!o) return;
  hf_test::check_min_ttl_boundary<holdfast::redis_store>(*o, 10ms, 500ms);
}

}  // namespace test_redis_min_ttl
