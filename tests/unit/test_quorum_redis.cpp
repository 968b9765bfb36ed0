// SPDX-License-Identifier: MIT
// quorum_store over five real redis-server processes on 127.0.0.1 (each started by the test on a
// free port, tests/support/real_servers.hpp): two members killed -9 while clients run (leases go
// on), a third killed (unavailable, never a false grant), and members restarted with persistence
// (tokens keep increasing) and without it (a token goes backwards; the fence refuses it; the
// token floor brings holders back), and the write quorum that tolerates empty restarts.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "../support/real_servers.hpp"
#include "holdfast/fence.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/quorum.hpp"
#include "holdfast/stores/redis.hpp"
#include "test_support.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_quorum_redis {

using namespace std::chrono_literals;
using holdfast::errc;
using holdfast::fencing_token;
using holdfast::redis_options;
using holdfast::redis_store;

namespace {

using redis_quorum = holdfast::quorum_store<redis_store>;

// Five servers the test owns, and a redis_store on each with keys of this test's own.
struct five_servers {
  explicit five_servers(hf_test::redis_server::config cfg = {}) {
    const std::string tag = hf_test::random_tag();
    for (int i = 0; i < 5; ++i) {
      auto s = std::make_unique<hf_test::redis_server>(cfg);
      if (!s->start()) {
        const std::string why = "cannot start redis-server: " + s->why();
        if (hf_test::in_ci() || s->available()) FAIL(why);
        hf_test::loud_skip(why);
        return;
      }
      redis_options o;
      o.port = s->port();
      o.key_prefix = "{hfq-" + tag + "}:lease:";
      o.counter_key = "{hfq-" + tag + "}:token";
      o.connect_timeout = 300ms;
      o.command_timeout = 1000ms;
      servers.push_back(std::move(s));
      stores.push_back(std::make_unique<redis_store>(o));
    }
    ok = true;
  }
  std::vector<redis_store*> members() {
    std::vector<redis_store*> v;
    for (auto& s : stores) v.push_back(s.get());
    return v;
  }
  // Kills server i with SIGKILL and starts it again on the same port: with persistence it comes
  // back with its counter and leases, without it empty.
  void restart(std::size_t i) {
    servers[i]->kill9();
    REQUIRE(servers[i]->start());
  }

  bool ok = false;
  std::vector<std::unique_ptr<hf_test::redis_server>> servers;
  std::vector<std::unique_ptr<redis_store>> stores;
};

holdfast::quorum_options options(std::size_t empty_restarts = 0) {
  holdfast::quorum_options o;
  o.member_timeout = 1000ms;  // a shared CI box: generous; the TTL share (10%) decides below
  o.empty_restarts = empty_restarts;
  return o;
}

}  // namespace

TEST_CASE("quorum of five Redis servers: two killed mid-run, leases go on; a third, none granted",
          "[redis][quorum][faults][concurrency]") {
  five_servers c;
  if (!c.ok) return;
  redis_quorum q(c.members(), options());
  holdfast::acquire_options<> opts;
  opts.backoff.initial = 1ms;
  opts.backoff.max_delay = 20ms;

  // Two clients take turns on one key, each writing through the fence while it holds the lease.
  holdfast::fenced<long> account;
  std::atomic<int> inside{0};
  std::atomic<bool> overlap{false};
  std::atomic<bool> stop{false};
  std::atomic<long> grants{0};
  std::mutex order_mutex;
  std::vector<fencing_token> order;
  auto client = [&] {
    while (!stop) {
      auto l = holdfast::acquire(q, "account", 10s, 2s, opts);
      if (!l) continue;
      if (inside.fetch_add(1) != 0) overlap = true;
      {
        std::lock_guard<std::mutex> lock(order_mutex);
        order.push_back(l->token());
      }
      (void)account.write(*l, [](long& v) { ++v; });
      ++grants;
      inside.fetch_sub(1);
      (void)l->release();
    }
  };
  // Waits (bounded) until the clients made `n` more grants.
  auto progress = [&](long n) {
    const long target = grants + n;
    return hf_test::wait_until([&] { return grants >= target; }, 20000ms);
  };
  std::thread a(client), b(client);
  CHECK(progress(20));
  c.servers[0]->kill9();  // mid-run: three of five remain, a majority
  c.servers[1]->kill9();
  CHECK(progress(20));  // leases go on
  stop = true;
  a.join();
  b.join();
  CHECK(!overlap);
  for (std::size_t i = 1; i < order.size(); ++i) CHECK(order[i - 1] < order[i]);
  CHECK(account.snapshot() == grants);

  // A lease held across the kill keeps renewing on the three that are left...
  auto held = holdfast::try_acquire(q, "held", 10s);
  REQUIRE(held);
  CHECK(held->renew());
  CHECK(holdfast::try_acquire(q, "held", 10s).error() == errc::busy);
  // ...until a third member dies: no majority, so no renewal and no grant, ever.
  c.servers[2]->kill9();
  CHECK(held->renew().error() == errc::store_unavailable);
  for (int i = 0; i < 3; ++i) {
    auto r = q.try_acquire("other", "intruder", 10000ms);
    REQUIRE_FALSE(r);
    CHECK(r.error() == errc::store_unavailable);
  }
}

TEST_CASE("quorum of five Redis servers with persistence: tokens increase across kill -9 restarts",
          "[redis][quorum][faults][concurrency]") {
  hf_test::redis_server::config persistent;
  persistent.persistent = true;  // appendonly yes, appendfsync always
  five_servers c(persistent);
  if (!c.ok) return;
  redis_quorum q(c.members(), options());
  fencing_token last;
  // A blocking acquire: after a restart each member's first call fails once (its connection was
  // cut; redis_store reconnects on the next call), which the quorum reports as transient.
  auto acquire = [&](const std::string& owner) {
    holdfast::acquire_options<> opts;
    opts.owner = owner;
    opts.backoff.initial = 1ms;
    opts.backoff.max_delay = 20ms;
    return holdfast::acquire(q, "job", 10s, 5s, opts);
  };
  auto cycle = [&](const char* owner) {
    auto l = acquire(owner);
    INFO(owner << ": " << l.error().message());
    REQUIRE(l);
    CHECK(last < l->token());
    last = l->token();
    REQUIRE(l->release());
  };
  cycle("a");
  cycle("b");
  c.restart(0);
  c.restart(1);
  c.restart(2);  // a majority restarted at once: their counters came back from the AOF
  cycle("c");
  for (std::size_t i = 0; i < 5; ++i) c.restart(i);  // all of them
  cycle("d");
  // A lease held across a restart of every member is still held afterwards.
  auto g = acquire("e");
  REQUIRE(g);
  CHECK(last < g->token());
  for (std::size_t i = 0; i < 5; ++i) c.restart(i);
  (void)q.try_acquire("job", "intruder", 10000ms);  // reconnects every member; must not grant
  CHECK(q.try_acquire("job", "intruder", 10000ms).error() == errc::busy);
  CHECK(g->renew());
  CHECK(g->release());
}

TEST_CASE("quorum of five Redis servers without persistence: a token regresses, the fence holds",
          "[redis][quorum][faults][concurrency]") {
  five_servers c;
  if (!c.ok) return;
  redis_quorum q(c.members(), options());
  holdfast::fence_gate gate;
  auto acquire = [&](const std::string& owner) {  // blocking: see the persistence test
    holdfast::acquire_options<> opts;
    opts.owner = owner;
    opts.backoff.initial = 1ms;
    opts.backoff.max_delay = 20ms;
    return holdfast::acquire(q, "job", 10s, 5s, opts);
  };
  // Grant 1 on members 0-2 (3 and 4 down): all three are raised to the grant's token.
  c.servers[3]->kill9();
  c.servers[4]->kill9();
  REQUIRE(c.stores[1]->raise_token_floor(fencing_token(100)));
  const auto g1 = q.try_acquire("job", "alice", 10000ms);
  REQUIRE(g1);
  CHECK(g1->token == fencing_token(101));
  REQUIRE(gate.admit(g1->token, "alice"));
  REQUIRE(q.release("job", "alice", g1->token));
  // Members 0 and 1 restart empty; 3 and 4 come back empty; 2, the one member that still knows
  // 101, is down. Grant 2's majority {0, 1, 3, 4} has forgotten grant 1.
  c.restart(0);
  c.restart(1);
  REQUIRE(c.servers[3]->start());
  REQUIRE(c.servers[4]->start());
  c.servers[2]->kill9();
  auto g2 = acquire("bob");
  REQUIRE(g2);
  CHECK(g2->token() < g1->token);                       // S2 lost: Kleppmann's limit
  CHECK(gate.admit(*g2).error() == errc::stale_token);  // S1 kept: the fence refuses it
  // The liveness cost: bob cannot write until some grant passes 101. The cure: lift the floor
  // to the newest token the fence admitted, then acquire again.
  REQUIRE(g2->release());
  REQUIRE(q.raise_token_floor(gate.newest()));
  auto g3 = acquire("bob");
  REQUIRE(g3);
  CHECK(g3->token() > g1->token);
  CHECK(gate.admit(*g3));
}

TEST_CASE("quorum of five Redis servers, empty_restarts = 2: two empty restarts keep the order",
          "[redis][quorum][faults][concurrency]") {
  five_servers c;
  if (!c.ok) return;
  redis_quorum q(c.members(), options(2));  // W = 4 of 5
  REQUIRE(q.quorum() == 4);
  fencing_token last;
  for (int round = 0; round < 3; ++round) {
    holdfast::acquire_options<> opts;  // blocking: see the persistence test
    opts.backoff.initial = 1ms;
    opts.backoff.max_delay = 20ms;
    auto l = holdfast::acquire(q, "job", 10s, 5s, opts);
    REQUIRE(l);
    CHECK(last < l->token());
    last = l->token();
    REQUIRE(l->release());
    // Two members restart without their counter; every W-set still holds one that kept it.
    c.restart(static_cast<std::size_t>(round) % 5);
    c.restart((static_cast<std::size_t>(round) + 2) % 5);
  }
  // The price: with two members down, W = 4 cannot be reached.
  c.servers[0]->kill9();
  c.servers[1]->kill9();
  (void)q.try_acquire("job", "late", 10000ms);  // reconnects the restarted members
  CHECK(q.try_acquire("job", "late", 10000ms).error() == errc::store_unavailable);
}

}  // namespace test_quorum_redis
