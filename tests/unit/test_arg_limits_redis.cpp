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

#include "../support/black_hole.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/stores/redis.hpp"
#include "holdfast/stores/redis_cluster.hpp"
#include "holdfast/stores/redis_fence.hpp"

namespace test_arg_limits_redis {

using namespace std::chrono_literals;
using holdfast::errc;
using holdfast::fencing_token;
using holdfast::lease_mode;
using holdfast::store_op;
using clk = std::chrono::steady_clock;

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

// `call` (returning a std::error_code) is refused with invalid_argument well within the 10 s
// connect timeout, the black hole saw no connection, and the store's message names the limit.
template <class Store, class Call>
void refused_at_once(hf_test::black_hole& hole, Store& s, const char* what, Call call) {
  INFO(what);
  const auto t0 = clk::now();
  const std::error_code ec = call();
  CHECK(ec == errc::invalid_argument);
  CHECK(clk::now() - t0 < 5s);  // copying 512 MiB takes a while on a loaded machine
  CHECK(hole.connections() == 0);
  CHECK(s.last_error_message().find("512 MiB") != std::string::npos);
}

}  // namespace

TEST_CASE("redis_store refuses an over-limit key or owner at every entry point, sending nothing",
          "[redis][hostile]") {
  hf_test::black_hole hole;
  REQUIRE(hole.port() != 0);
  holdfast::redis_store s(at(hole));
  const std::string_view big = over_limit();
  const fencing_token t{7};
  const auto later = clk::now() + 5s;
  for (const auto& ko : {std::pair<std::string_view, std::string_view>{big, "owner"},
                         std::pair<std::string_view, std::string_view>{"key", big}}) {
    const std::string_view k = ko.first;
    const std::string_view o = ko.second;
    refused_at_once(hole, s, "try_acquire", [&] { return s.try_acquire(k, o, 1s).error(); });
    refused_at_once(hole, s, "try_acquire_until",
                    [&] { return s.try_acquire_until(k, o, 1s, later).error(); });
    refused_at_once(hole, s, "try_acquire_queued",
                    [&] { return s.try_acquire_queued(k, o, 1s).error(); });
    refused_at_once(hole, s, "try_acquire_queued_until",
                    [&] { return s.try_acquire_queued_until(k, o, 1s, later).error(); });
    refused_at_once(hole, s, "renew", [&] { return s.renew(k, o, t, 1s).error(); });
    refused_at_once(hole, s, "release", [&] { return s.release(k, o, t).error(); });
    refused_at_once(hole, s, "raise_token",
                    [&] { return s.raise_token(k, o, t, fencing_token{9}).error(); });
    refused_at_once(hole, s, "try_acquire_rw",
                    [&] { return s.try_acquire_rw(k, o, 1s, lease_mode::shared).error(); });
    refused_at_once(hole, s, "renew_rw",
                    [&] { return s.renew_rw(k, o, t, 1s, lease_mode::shared).error(); });
    refused_at_once(hole, s, "release_rw",
                    [&] { return s.release_rw(k, o, t, lease_mode::shared).error(); });
    holdfast::grant g[1];
    refused_at_once(hole, s, "try_acquire_all",
                    [&] { return s.try_acquire_all(&k, 1, o, 1s, g).error(); });
    holdfast::acquire_options<> ao;
    ao.owner = std::string(o);
    refused_at_once(hole, s, "acquire()",
                    [&] { return holdfast::acquire(s, k, 1s, 3s, ao).error(); });
  }
  refused_at_once(hole, s, "inspect", [&] { return s.inspect(big).error(); });
  refused_at_once(hole, s, "wait_for_release",
                  [&] { return s.wait_for_release(big, later).error(); });
  refused_at_once(hole, s, "watch_release", [&] { return s.watch_release(big, later).error(); });
  refused_at_once(hole, s, "wait_for_release_rw",
                  [&] { return s.wait_for_release_rw(big, lease_mode::exclusive, later).error(); });
  const std::vector<std::string> keys{"a", over_limit()};
  refused_at_once(hole, s, "wait_for_release_any",
                  [&] { return s.wait_for_release_any(keys, later).error(); });
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
  const std::string_view big = over_limit();
  const fencing_token t{7};
  const auto later = clk::now() + 5s;
  for (const auto& ko : {std::pair<std::string_view, std::string_view>{big, "owner"},
                         std::pair<std::string_view, std::string_view>{"key", big}}) {
    const std::string_view k = ko.first;
    const std::string_view o = ko.second;
    refused_at_once(hole, s, "try_acquire", [&] { return s.try_acquire(k, o, 1s).error(); });
    refused_at_once(hole, s, "renew", [&] { return s.renew(k, o, t, 1s).error(); });
    refused_at_once(hole, s, "release", [&] { return s.release(k, o, t).error(); });
    refused_at_once(hole, s, "raise_token",
                    [&] { return s.raise_token(k, o, t, fencing_token{9}).error(); });
    holdfast::grant g[1];
    refused_at_once(hole, s, "try_acquire_all",
                    [&] { return s.try_acquire_all(&k, 1, o, 1s, g).error(); });
    holdfast::acquire_options<> ao;
    ao.owner = std::string(o);
    refused_at_once(hole, s, "acquire()",
                    [&] { return holdfast::acquire(s, k, 1s, 3s, ao).error(); });
  }
  refused_at_once(hole, s, "inspect", [&] { return s.inspect(big).error(); });
  refused_at_once(hole, s, "wait_for_release",
                  [&] { return s.wait_for_release(big, later).error(); });
  refused_at_once(hole, s, "watch_release", [&] { return s.watch_release(big, later).error(); });
}

TEST_CASE("redis_fence refuses an over-limit fence key or owner, sending nothing",
          "[redis][hostile]") {
  hf_test::black_hole hole;
  REQUIRE(hole.port() != 0);
  holdfast::redis_fence f(at(hole));
  const std::string_view big = over_limit();
  const fencing_token t{7};
  refused_at_once(hole, f, "admit(key)", [&] { return f.admit(big, t, "o").error(); });
  refused_at_once(hole, f, "admit(owner)", [&] { return f.admit("fk", t, big).error(); });
  refused_at_once(hole, f, "execute", [&] {
    return f.execute("fk", t, big, {"SET", "a", "b"}).error();
  });
  refused_at_once(hole, f, "newest", [&] { return f.newest(big).error(); });
}

}  // namespace test_arg_limits_redis
