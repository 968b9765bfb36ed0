// SPDX-License-Identifier: MIT
// tests/unit/test_arg_limits_redis.cpp - every entry point of redis_store, redis_cluster_store and
// redis_fence that takes a key or an owner refuses one over Redis' size limit (512 MiB per
// argument, proto-max-bulk-len; a key 511 MiB with room for its prefix) with invalid_argument at
// once, naming the limit, before anything is sent or even connected. The store points at a
// black hole (a listener that never answers): a call that connected shows in its connection
// count, and one that sent would wait for its command timeout. The trial that found it: a
// blocking acquire() with a 513 MiB key or owner went through try_acquire_queued, which checked
// emptiness only, and sent it. No server needed.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "../support/arg_limits.hpp"
#include "../support/black_hole.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/stores/redis.hpp"
#include "holdfast/stores/redis_cluster.hpp"
#include "holdfast/stores/redis_fence.hpp"

namespace test_arg_limits_redis {

using namespace std::chrono_literals;
using hf_test::refused_at_once;
using holdfast::fencing_token;

namespace {

// One byte over Redis' 512 MiB argument limit: over the limit both as a key and as an owner.
const std::string& over_limit() {
  static const std::string s((std::size_t{512} << 20) + 1, 'k');
  return s;
}

holdfast::redis_options at(const hf_test::black_hole& hole) {
  holdfast::redis_options o;
  o.port = hole.port();
  o.connect_timeout = 10s;
  o.command_timeout = 10s;
  return o;
}

}  // namespace

TEST_CASE("redis_store refuses an over-limit key or owner at every entry point, sending nothing",
          "[redis][hostile]") {
  hf_test::black_hole hole;
  REQUIRE(hole.port() != 0);
  holdfast::redis_store s(at(hole));
  hf_test::check_arg_limits(hole, s, over_limit(), "512 MiB");
  refused_at_once(hole, s, "raise_token", "512 MiB", [&] {
    return s.raise_token(over_limit(), "o", fencing_token{7}, fencing_token{9}).error();
  });
}

TEST_CASE("redis_cluster_store refuses an over-limit key or owner at every entry point",
          "[redis][hostile]") {
  hf_test::black_hole hole;
  REQUIRE(hole.port() != 0);
  holdfast::redis_cluster_options co;
  co.nodes = {{"127.0.0.1", hole.port()}};
  co.node.connect_timeout = 10s;
  co.node.command_timeout = 10s;
  holdfast::redis_cluster_store s(co);
  hf_test::check_arg_limits(hole, s, over_limit(), "512 MiB");
  refused_at_once(hole, s, "raise_token", "512 MiB", [&] {
    return s.raise_token("k", over_limit(), fencing_token{7}, fencing_token{9}).error();
  });
}

TEST_CASE("redis_fence refuses an over-limit fence key or owner, sending nothing",
          "[redis][hostile]") {
  hf_test::black_hole hole;
  REQUIRE(hole.port() != 0);
  holdfast::redis_fence f(at(hole));
  const std::string_view big = over_limit();
  const fencing_token t{7};
  refused_at_once(hole, f, "admit(key)", "512 MiB", [&] { return f.admit(big, t, "o").error(); });
  refused_at_once(hole, f, "admit(owner)", "512 MiB",
                  [&] { return f.admit("fk", t, big).error(); });
  refused_at_once(hole, f, "execute", "512 MiB", [&] {
    return f.execute("fk", t, big, {"SET", "a", "b"}).error();
  });
  refused_at_once(hole, f, "newest", "512 MiB", [&] { return f.newest(big).error(); });
}

}  // namespace test_arg_limits_redis
