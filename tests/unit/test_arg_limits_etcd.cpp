// SPDX-License-Identifier: MIT
// tests/unit/test_arg_limits_etcd.cpp - every entry point of etcd_store and etcd_fence that takes
// a key or an owner refuses one over etcd's request limit (1.4 MiB each, etcd_args_problem) with
// invalid_argument at once, naming the limit, before anything is sent: the store points at a
// black hole (tests/support/arg_limits.hpp). Before, only an acquire checked, and only the
// owner. No server needed.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <vector>

#include "../support/arg_limits.hpp"
#include "../support/black_hole.hpp"
#include "holdfast/stores/etcd.hpp"

namespace test_arg_limits_etcd {

using namespace std::chrono_literals;
using hf_test::refused_at_once;
using holdfast::fencing_token;

namespace {

const std::string& over_limit() {
  static const std::string s(holdfast::etcd_max_owner_bytes + 1, 'k');
  return s;
}

holdfast::etcd_options at(const hf_test::black_hole& hole) {
  holdfast::etcd_options o;
  o.endpoints = {"http://" + hole.host_port()};
  o.connect_timeout = 10s;
  o.command_timeout = 10s;
  return o;
}

}  // namespace

TEST_CASE("etcd_store refuses an over-limit key or owner at every entry point, sending nothing",
          "[etcd][hostile]") {
  hf_test::black_hole hole;
  REQUIRE(hole.port() != 0);
  holdfast::etcd_store s(at(hole));
  hf_test::check_arg_limits(hole, s, over_limit(), "request limit");
}

TEST_CASE("etcd_fence refuses an over-limit fence key or owner, sending nothing",
          "[etcd][hostile]") {
  hf_test::black_hole hole;
  REQUIRE(hole.port() != 0);
  holdfast::etcd_fence f(at(hole));
  const std::string& big = over_limit();
  const fencing_token t{7};
  refused_at_once(hole, f, "admit(key)", "request limit",
                  [&] { return f.admit(big, t, "o").error(); });
  refused_at_once(hole, f, "admit(owner)", "request limit",
                  [&] { return f.admit("fk", t, big).error(); });
  refused_at_once(hole, f, "write", "request limit",
                  [&] { return f.write(big, t, "o", "data", "v").error(); });
  refused_at_once(hole, f, "newest", "request limit", [&] { return f.newest(big).error(); });
  refused_at_once(hole, f, "get", "request limit", [&] { return f.get(big).error(); });
}

}  // namespace test_arg_limits_etcd
