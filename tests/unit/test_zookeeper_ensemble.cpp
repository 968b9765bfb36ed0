// SPDX-License-Identifier: MIT
// zookeeper_store on a three-member ensemble of our own (tests/support/zookeeper_servers.hpp),
// started once for the file: the contract through every member; the leader killed with SIGKILL
// under a holder: the holder's session and lease survive the election (the new leader restarts
// every session's timeout), the next grant's czxid is of the new epoch and greater, and the
// fence admits it; the conformance kit's schedules (check_store); and every member killed and
// started again: the holder's session survives or its lease ends by the rules, the next token
// is greater than every earlier one, the fence refuses the old holder.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <functional>
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

/// The file's ensemble, started on first use (three JVMs: every test case shares them and leaves
/// all three serving), or nullptr after a FAIL (CI) or a loud skip.
hf_test::zookeeper_ensemble* ensemble() {
  static std::unique_ptr<hf_test::zookeeper_ensemble> e;
  static std::string why;
  if (!e && why.empty()) {
    e = std::make_unique<hf_test::zookeeper_ensemble>(3);
    if (!e->start()) {
      why = "no ZooKeeper ensemble: " + e->why();
      e.reset();
    }
  }
  if (!e) {
    if (hf_test::in_ci()) FAIL(why);
    hf_test::loud_skip(why);
  }
  return e.get();
}

/// Options on the ensemble with a root of their own.
zookeeper_options on(const hf_test::zookeeper_ensemble& e, std::chrono::milliseconds session) {
  zookeeper_options o;
  o.hosts = e.hosts();
  o.root = "/hf-ensemble/" + hf_test::random_tag();
  o.session_timeout = session;
  return o;
}

/// The kit's expire_now: the holder's node deleted behind the store's back, as its session's end
/// would.
std::function<void(std::string_view)> delete_contenders(const zookeeper_options& o) {
  return [o](std::string_view key) {
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
}

}  // namespace

TEST_CASE("zookeeper_store on an ensemble: the leader killed -9 under a holder",
          "[zookeeper][ensemble][failover-load]") {
  hf_test::zookeeper_ensemble* e = ensemble();
  if (e == nullptr) return;
  const zookeeper_options o = on(*e, 4000ms);
  {
    // The contract through the whole ensemble (the client picks a member at random).
    zookeeper_store s(o);
    holdfast::testing::conformance_options co;
    co.expire_now = delete_contenders(o);
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
  {
    auto& back = e->member(static_cast<std::size_t>(leader));
    const bool started = back.start();
    INFO(back.why());
    REQUIRE(started);
  }
  CHECK(hf_test::wait_until([&] { return e->serving() == 3; }, 60000ms));
  // B's grant is its own again (the same token while it lived: nobody renewed it meanwhile, so
  // its store may have ended it by its TTL and grants a newer one), and A sees it.
  auto g3 = b.try_acquire("k", "B", 4000ms);
  REQUIRE(g3);
  CHECK(g2->token <= g3->token);
  auto seen = a.inspect("k");
  REQUIRE(seen);
  REQUIRE(*seen);
  CHECK((*seen)->token == g3->token);
}

TEST_CASE("zookeeper_store on an ensemble passes the conformance kit's schedules",
          "[zookeeper][ensemble][contract][failover-load]") {
  hf_test::zookeeper_ensemble* e = ensemble();
  if (e == nullptr) return;
  const zookeeper_options base = on(*e, 2000ms);
  holdfast::testing::conformance_options co;
  co.expire_now = delete_contenders(base);
  co.store_wide_tokens = false;  // czxids of queued contenders are older than later grants
  co.hostile_strings = false;    // on the standalone server (test_zookeeper_store.cpp)
  co.schedules = 4;
  co.run.ttl = 2000ms;
  int made = 0;
  const holdfast::testing::conformance_report report = holdfast::testing::check_store(
      [&] {
        zookeeper_options o = base;
        if (made++ > 0) o.root += "-" + std::to_string(made);
        return std::make_unique<zookeeper_store>(o);
      },
      co);
  INFO(report.summary());
  CHECK(report.ok());
}

TEST_CASE("zookeeper_store on an ensemble: every member killed -9 and started again",
          "[zookeeper][ensemble][failover-load]") {
  hf_test::zookeeper_ensemble* e = ensemble();
  if (e == nullptr) return;
  const zookeeper_options o = on(*e, 6000ms);
  zookeeper_store a(o);
  zookeeper_store b(o);
  holdfast::zookeeper_fence fence(o);
  auto before = b.try_acquire("other", "B", 6000ms);  // an earlier token, of another key
  REQUIRE(before);
  auto g1 = a.try_acquire("k", "A", 6000ms);
  REQUIRE(g1);
  REQUIRE(b.release("other", "B", before->token));
  const std::string f = o.root + "/fence";
  REQUIRE(fence.admit(f, g1->token, "A"));
  const auto down = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < 3; ++i) e->member(i).kill9();
  for (std::size_t i = 0; i < 3; ++i) {
    const bool started = e->member(i).start();
    INFO(e->member(i).why());
    REQUIRE(started);
  }
  REQUIRE(hf_test::wait_until([&] { return e->serving() == 3; }, 60000ms));
  const auto outage = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - down);
  // The servers restore every session from their log and restart its timeout: a client that
  // reconnects within it keeps its session and nodes. The holder's grant also ends 6 s after
  // its last renewal began (the store's reaper): within that it renews, past it lease_lost.
  std::optional<holdfast::result<holdfast::grant>> r;
  REQUIRE(hf_test::wait_until(
      [&] {
        r = a.renew("k", "A", g1->token, 6000ms);
        return r->has_value() || r->error() == errc::lease_lost;
      },
      20000ms));
  std::printf("zookeeper ensemble: all members down and up again in %lld ms; the holder %s\n",
              static_cast<long long>(outage.count()),
              r->has_value() ? "renewed (its session survived)" : "lost its lease (lease_lost)");
  if (r->has_value()) {
    CHECK(b.try_acquire("k", "B", 6000ms).error() == errc::busy);
    REQUIRE(a.release("k", "A", g1->token));
  }
  std::optional<holdfast::grant> g2;
  REQUIRE(hf_test::wait_until(
      [&] {
        auto x = b.try_acquire("k", "B", 6000ms);
        if (x) g2 = *x;
        return x.has_value();
      },
      20000ms));
  CHECK(g1->token < g2->token);
  CHECK(before->token < g2->token);
  CHECK((g1->token.value() >> 32) < (g2->token.value() >> 32));  // a new epoch after the restart
  REQUIRE(fence.admit(f, g2->token, "B"));
  CHECK(fence.admit(f, g1->token, "A").error() == errc::stale_token);
  // deployment(): three members, one of them answering srvr, no risk named.
  auto d = b.deployment();
  REQUIRE(d);
  INFO(d->facts);
  CHECK(d->facts.find("members=3") != std::string::npos);
  CHECK((d->facts.find("mode=leader") != std::string::npos ||
         d->facts.find("mode=follower") != std::string::npos));
  CHECK_FALSE(d->can_lose_grants());
  CHECK(d->life.rfind("epoch ", 0) == 0);
}

}  // namespace test_zookeeper_ensemble
