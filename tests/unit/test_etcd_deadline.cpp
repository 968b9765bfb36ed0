// SPDX-License-Identifier: MIT
// Tests of etcd_store's deadline capability (store_deadline.hpp: try_acquire_until) against an
// etcd member the test owns and freezes (SIGSTOP): a blocking acquire returns by its deadline
// although command_timeout is far longer, and nothing of the caller's outlives it once the member
// answers again. ~3 s (a member's start, a 2 s budget).
#include <catch2/catch.hpp>

#include <chrono>
#include <string>

#include "../support/etcd_servers.hpp"
#include "../support/real_servers.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/stores/etcd.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_etcd_deadline {

using holdfast::errc;
using holdfast::etcd_options;
using holdfast::etcd_store;
using namespace std::chrono_literals;

// Expected: with the member frozen and command_timeout 10 s, acquire with a 2 s budget returns
// errc::timeout within 2 s + 8 x store_call_floor (the attempt's lease grant is capped at the
// deadline; then, each bounded by store_call_floor: the revoke of the lease the grant may have
// made, the give-back's two re-asks, each of which first tries the revokes still owed and may
// revoke its own lease once more) + 200 ms of slack for the loaded machine; before the fix it
// took command_timeout (10 s). Once the member is back, the key is free: B is granted at once.
TEST_CASE("etcd deadline: a frozen member; acquire returns by its deadline, leaves nothing",
          "[etcd][deadline]") {
  hf_test::etcd_cluster cluster(1, "etcd-deadline");
  if (!cluster.start()) {
    if (hf_test::in_ci() || !hf_test::etcd_binary().empty()) FAIL(cluster.why());
    hf_test::loud_skip("cannot start etcd: " + cluster.why());
    return;
  }
  etcd_options o;
  o.endpoints = cluster.endpoints();
  o.command_timeout = 10s;
  etcd_store s(o);
  REQUIRE(s.try_acquire("warm-up", "w", 10s));
  cluster[0].pause();
  holdfast::acquire_report rep;
  holdfast::acquire_options<> ao;
  ao.report = &rep;
  ao.owner = "A";
  const auto t0 = std::chrono::steady_clock::now();
  auto l = holdfast::acquire(s, "k", 10s, 2s, ao);
  const auto took = std::chrono::steady_clock::now() - t0;
  cluster[0].resume();
  INFO(rep.last_store_message);
  REQUIRE_FALSE(l);
  CHECK(l.error() == errc::timeout);
  CHECK(took < 2s + 8 * holdfast::store_call_floor + 200ms);
  auto b = s.try_acquire("k", "B", 10s);
  INFO(s.last_error_message());
  CHECK(b);
}

}  // namespace test_etcd_deadline
