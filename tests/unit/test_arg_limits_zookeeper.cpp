// SPDX-License-Identifier: MIT
// tests/unit/test_arg_limits_zookeeper.cpp - every entry point of zookeeper_store that takes an
// owner, and of zookeeper_fence that takes an owner or a path, refuses one over
// zookeeper_options::max_owner_bytes with invalid_argument at once, naming the option, before
// anything is sent: the store points at a black hole (tests/support/arg_limits.hpp). Before,
// only an acquire checked. A lease key has no limit (a long one is hashed into its node name).
// No server needed.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>

#include "../support/arg_limits.hpp"
#include "../support/black_hole.hpp"
#include "holdfast/stores/zookeeper.hpp"

namespace test_arg_limits_zookeeper {

using namespace std::chrono_literals;
using hf_test::refused_at_once;
using holdfast::fencing_token;

namespace {

const std::string& over_limit() {
  static const std::string s(holdfast::zookeeper_default_max_owner_bytes + 1, 'k');
  return s;
}

holdfast::zookeeper_options at(const hf_test::black_hole& hole) {
  holdfast::zookeeper_options o;
  o.hosts = hole.host_port();
  o.connect_timeout = 10s;
  return o;
}

}  // namespace

TEST_CASE("zookeeper_store refuses an over-limit owner at every entry point, sending nothing",
          "[zookeeper][hostile]") {
  hf_test::black_hole hole;
  REQUIRE(hole.port() != 0);
  holdfast::zookeeper_store s(at(hole));
  hf_test::check_arg_limits(hole, s, over_limit(), "max_owner_bytes", false);
}

TEST_CASE("zookeeper_fence refuses an over-limit path or owner, sending nothing",
          "[zookeeper][hostile]") {
  hf_test::black_hole hole;
  REQUIRE(hole.port() != 0);
  holdfast::zookeeper_fence f(at(hole));
  const std::string big = "/" + over_limit();
  const fencing_token t{7};
  const char* limit = "max_owner_bytes";
  refused_at_once(hole, f, "admit(path)", limit, [&] { return f.admit(big, t, "o").error(); });
  refused_at_once(hole, f, "admit(owner)", limit, [&] { return f.admit("/f", t, big).error(); });
  refused_at_once(hole, f, "write", limit, [&] { return f.write("/f", t, "o", big, "v").error(); });
  refused_at_once(hole, f, "newest", limit, [&] { return f.newest(big).error(); });
  refused_at_once(hole, f, "get", limit, [&] { return f.get(big).error(); });
}

}  // namespace test_arg_limits_zookeeper
