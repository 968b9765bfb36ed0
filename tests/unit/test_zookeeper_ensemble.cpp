// SPDX-License-Identifier: MIT
// zookeeper_store on a three-member ensemble of our own (tests/support/zookeeper_servers.hpp):
// the contract through every member, and the leader killed with SIGKILL under a holder: the
// holder's session and lease survive the election (the new leader restarts every session's
// timeout), the next grant's czxid is of the new epoch and greater, and the fence admits it.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "../support/real_servers.hpp"
#include "../support/zookeeper_servers.hpp"
#include "holdfast/stores/zookeeper.hpp"
#include "holdfast/testing/conformance.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_zookeeper_ensemble {

using holdfast::errc;
using holdfast::fencing_token;
using holdfast::zookeeper_options;
using holdfast::zookeeper_store;
using namespace std::chrono_literals;

namespace {

/// A started ensemble, or nullptr after a FAIL (CI) or a loud skip.
std::unique_ptr<hf_test::zookeeper_ensemble> ensemble() {
  auto e = std::make_unique<hf_test::zookeeper_ensemble>(3);
  if (!e->start()) {
    const std::string why = "no ZooKeeper ensemble: " + e->why();
    if (hf_test::in_ci()) FAIL(why);
    hf_test::loud_skip(why);
    return nullptr;
  }
  return e;
}

}  // namespace

TEST_CASE("zookeeper_store on an ensemble: the leader killed -9 under a holder",
          "[zookeeper][ensemble]") {
  std::unique_ptr<hf_test::zookeeper_ensemble> e = ensemble();
  if (!e) return;
  zookeeper_options o;
  o.hosts = e->hosts();
  o.root = "/hf-ensemble/" + hf_test::random_tag();
  o.session_timeout = 4000ms;
  {
    // The contract through the whole ensemble (the client picks a member at random).
    zookeeper_store s(o);
    holdfast::testing::conformance_options co;
    co.expire_now = [o](std::string_view key) {
      // The holder's node deleted behind the store's back, as its session's end would.
      std::string parent = o.root + "/";
      holdfast::detail::zookeeper_key_name(key, parent);
      holdfast::detail::zookeeper_link link(o);
      auto guard = link.lock();
      REQUIRE_FALSE(link.ensure_connected());
      holdfast::detail::zookeeper_nodes nodes(link);
      auto kids = nodes.children(parent);
      REQUIRE(kids);
      for (const auto& c : *kids) (void)nodes.remove(parent + "/" + c.name);
    };
    co.hostile_strings = false;
    const auto r = holdfast::testing::check_contract(s, co);
    INFO(r.summary());
    CHECK(r.ok());
  }
  zookeeper_store a(o);
  zookeeper_store b(o);
  holdfast::zookeeper_fence fence(o);
  auto g1 = a.try_acquire("k", "A", 4000ms);
  REQUIRE(g1);
  const std::string f = o.root + "/fence";
  REQUIRE(fence.admit(f, g1->token, "A"));
  const int leader = e->leader();
  REQUIRE(leader >= 0);
  const auto killed = std::chrono::steady_clock::now();
  e->member(static_cast<std::size_t>(leader)).kill9();
  REQUIRE(hf_test::wait_until([&] { return e->leader() >= 0 && e->serving() == 2; }, 30000ms));
  const auto elected = std::chrono::steady_clock::now() - killed;
  std::printf("zookeeper ensemble: a new leader served %lld ms after the leader's kill -9\n",
              static_cast<long long>(
                  std::chrono::duration_cast<std::chrono::milliseconds>(elected).count()));
  // The holder's session survives (a client reconnects to a live member within its timeout):
  // renew succeeds again, and meanwhile nobody else is granted the key.
  bool renewed = false;
  REQUIRE(hf_test::wait_until(
      [&] {
        auto r = a.renew("k", "A", g1->token, 4000ms);
        if (r) renewed = true;
        return r.has_value() || r.error() == errc::lease_lost;
      },
      15000ms));
  INFO(a.last_error_message());
  CHECK(renewed);
  if (renewed) CHECK(b.try_acquire("k", "B", 4000ms).error() == errc::busy);
  REQUIRE(a.release("k", "A", g1->token));
  auto g2 = b.try_acquire("k", "B", 4000ms);
  REQUIRE(g2);
  CHECK(g1->token < g2->token);
  CHECK((g1->token.value() >> 32) < (g2->token.value() >> 32));  // the new leader's epoch
  REQUIRE(fence.admit(f, g2->token, "B"));
  CHECK(fence.admit(f, g1->token, "A").error() == errc::stale_token);
  // The killed member comes back and rejoins as a follower.
  REQUIRE(e->member(static_cast<std::size_t>(leader)).start());
  CHECK(hf_test::wait_until([&] { return e->serving() == 3; }, 60000ms));
  auto seen = a.inspect("k");
  REQUIRE(seen);
  REQUIRE(*seen);
  CHECK((*seen)->token == g2->token);
}

}  // namespace test_zookeeper_ensemble
