// SPDX-License-Identifier: MIT
// Tests of stores/redis_cluster.hpp against real Redis Clusters. The cases that only need a
// serving cluster (the LeaseStore contract and the kit, keys spread over every primary, waiting,
// try_acquire_all, the token floor) use the shared one of .ci/servers (three primaries,
// HOLDFAST_REDIS_CLUSTER_SEEDS) when it is set, else the file's own; the cases that move slots,
// kill or fail a primary over use the file's own cluster (3 primaries with one replica each,
// tests/support/redis_cluster_servers.hpp), started once, on first use. They cover keys holding
// braces kept in one slot (never CROSSSLOT); a slot
// migrated by hand (SETSLOT + MIGRATE, one key per batch) under contending fenced holders, so
// MOVED, ASK and TRYAGAIN are all met; a primary cut off from its replica (requirepass + CLIENT
// KILL), killed -9, and the replica promoted by CLUSTER FAILOVER TAKEOVER (issue #20's rules:
// without acknowledgement the lost grant's token is passed by the new life and the fence refuses
// the old holder; with wait_replicas the grant the replica did not acknowledge is given back).
// The failover case runs last: it leaves the cluster serving (the old primary rejoins as a
// replica).
#include <hiredis/hiredis.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "../support/real_servers.hpp"
#include "../support/redis_cluster_servers.hpp"
#include "holdfast/cancel.hpp"
#include "holdfast/fence.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/stores/redis_cluster.hpp"
#include "holdfast/testing/conformance.hpp"
#include "holdfast/testing/conformance_multi.hpp"

namespace test_redis_cluster {

using holdfast::errc;
using holdfast::fencing_token;
using holdfast::redis_cluster_options;
using holdfast::redis_cluster_store;
using std::chrono::milliseconds;

namespace {

/// The cluster of the cases that move slots, kill or fail over a primary (3 primaries with a
/// replica each; shared with test_redis_cluster_load.cpp). nullptr only outside CI.
hf_test::redis_cluster* cluster() {
  return hf_test::own_redis_cluster();
}

using seeds = std::vector<holdfast::redis_endpoint>;

/// The nodes of a serving cluster for the cases that neither move slots nor stop nodes: the
/// shared cluster of .ci/servers (HOLDFAST_REDIS_CLUSTER_SEEDS) if set, else the file's own. Empty
/// (after a loud skip) only outside CI.
seeds serving() {
  return hf_test::serving_redis_cluster();
}

/// Options for the cluster of `nodes`, every key under a prefix of its own (runs never meet).
redis_cluster_options options_for(const seeds& nodes) {
  return hf_test::redis_cluster_test_options(nodes, hf_test::random_tag());
}

redis_cluster_options options_for(hf_test::redis_cluster& c) {
  return options_for(c.seeds());
}

/// Sends a command about a key to every node of `nodes`: the one that owns it answers, the others
/// answer MOVED, and a stopped one nothing (both ignored).
void on_owner(const seeds& nodes, const std::vector<std::string>& args) {
  for (const holdfast::redis_endpoint& n : nodes) (void)hf_test::redis_cmd(n.port, args);
}

holdfast::testing::conformance_options kit(const seeds& nodes, const redis_cluster_store& s) {
  holdfast::testing::conformance_options co;
  co.key_prefix = "k-";
  co.store_wide_tokens = false;  // tokens increase per key (per slot), not store-wide
  co.expire_now = [nodes, &s](std::string_view key) {
    on_owner(nodes, {"PEXPIREAT", s.record_key(key), "1"});
  };
  return co;
}

/// The port of the primary serving `slot`, by the view of nodes[0].
int primary_port(const seeds& nodes, std::size_t slot) {
  const std::string addr = hf_test::redis_cluster_primary_at(slot, nodes[0].port);
  return addr.empty() ? 0 : std::atoi(addr.c_str() + addr.rfind(':') + 1);
}

/// Any key whose slot `c` serves from node `primary` (by `c`'s view), with prefix `p`.
std::string key_on(hf_test::redis_cluster& c, std::size_t primary, const std::string& p) {
  for (int i = 0;; ++i) {
    const std::string k = p + std::to_string(i);
    if (c.primary_of(redis_cluster_store::slot_of(k), c.node(primary).port()) ==
        static_cast<int>(primary)) {
      return k;
    }
  }
}

/// The index of a node that is a primary now.
std::size_t some_primary(hf_test::redis_cluster& c) {
  for (std::size_t i = 0; i < c.size(); ++i) {
    if (c.node(i).running() && hf_test::redis_cmd(c.node(i).port(), {"ROLE"}) == "<array>" &&
        hf_test::nodes_flags_myself(c.node(i).port()).find("master") != std::string::npos) {
      return i;
    }
  }
  FAIL("no primary");
  return 0;
}

}  // namespace

// A test process that ends without its destructors (a ctest timeout's kill, a sanitizer's _exit)
// left its cluster's /tmp/holdfast-rcluster-* directories behind for good (its servers died with
// it). Expected: a cluster made later removes those of a process that is gone, and never one of a
// running process; a cluster destroyed normally removes its own. Needs no server: a cluster's
// directories are made when it is constructed, its nodes started only by start().
TEST_CASE("redis_cluster (tests/support): no directory outlives its process", "[redis][cluster]") {
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) ::_exit(0);
  REQUIRE(::waitpid(child, nullptr, 0) == child);  // reaped: its pid runs nothing now
  const std::string dead = "/tmp/holdfast-rcluster-" + std::to_string(child) + "-gone01";
  const std::string dead_cli = "/tmp/holdfast-rcluster-cli-" + std::to_string(child) + "-gone01";
  const std::string live = "/tmp/holdfast-rcluster-" + std::to_string(::getpid()) + "-kept01";
  for (const std::string& d : {dead, dead_cli, live}) {
    REQUIRE(::mkdir(d.c_str(), 0700) == 0);
    std::ofstream(d + "/nodes.conf") << "left behind\n";
  }
  const auto exists = [](const std::string& d) { return ::access(d.c_str(), F_OK) == 0; };
  std::vector<std::string> made;
  {
    hf_test::redis_cluster c(3, 0);
    for (std::size_t i = 0; i < c.size(); ++i) made.push_back(c.node(i).dir());
    CHECK_FALSE(exists(dead));
    CHECK_FALSE(exists(dead_cli));
    CHECK(exists(live));
    for (const std::string& d : made) CHECK(exists(d));
  }
  for (const std::string& d : made) CHECK_FALSE(exists(d));
  CHECK(exists(live));
  hf_test::remove_tree(live);
  hf_test::remove_tree(dead);
  hf_test::remove_tree(dead_cli);
}

TEST_CASE("redis_slots: CRC16 and slots as Redis computes them", "[redis][cluster]") {
  CHECK(holdfast::detail::redis_crc16("123456789") == 0x31C3);
  CHECK(holdfast::detail::redis_key_slot("foo") == 12182);
  CHECK(holdfast::detail::redis_key_slot("{user1000}.following") ==
        holdfast::detail::redis_key_slot("{user1000}.followers"));
  CHECK(holdfast::detail::redis_key_slot("foo{}{bar}") ==
        holdfast::detail::redis_crc16("foo{}{bar}") % 16384);
  // Every slot's counter name lands in that slot.
  std::string name;
  for (std::size_t s = 0; s < 16384; s += 97) {
    holdfast::detail::redis_counter_name(name, "hf:token:", s);
    CHECK(holdfast::detail::redis_key_slot(name) == s);
  }
  // A key's record, counter and life share its slot, braces or not.
  for (const std::string& k : std::vector<std::string>{"a", "a{b}c", "{", "}", "{}", "}{", "x{}",
                                                       std::string("\0{z", 3)}) {
    holdfast::detail::redis_cluster_name(name, "p:", k);
    const std::size_t slot = holdfast::detail::redis_key_slot(name);
    CHECK(slot == redis_cluster_store::slot_of(k));
  }
  // A key's own hash tag is honoured: keys sharing it share a slot, the one Redis gives the key.
  CHECK(redis_cluster_store::slot_of("{order:7}:a") == redis_cluster_store::slot_of("{order:7}:b"));
  CHECK(redis_cluster_store::slot_of("x{order:7}") ==
        holdfast::detail::redis_key_slot("{order:7}"));
  holdfast::detail::redis_redirect r;
  REQUIRE(holdfast::detail::parse_redis_redirect("redis: ASK 866 127.0.0.1:7001", r));
  CHECK((r.ask && r.slot == 866 && r.host == "127.0.0.1" && r.port == 7001));
  REQUIRE(holdfast::detail::parse_redis_redirect("MOVED 12182 ::1:7002", r));
  CHECK((!r.ask && r.host == "::1" && r.port == 7002));
  CHECK_FALSE(holdfast::detail::parse_redis_redirect("redis: TRYAGAIN x", r));
}

TEST_CASE("redis_cluster_store: bad options are invalid_argument, not contention",
          "[redis][cluster]") {
  redis_cluster_options o;
  std::string why;
  CHECK(o.check(&why) == errc::invalid_argument);
  CHECK_THAT(why, Catch::Contains("nodes is empty"));
  o.nodes = {{"127.0.0.1", 1}};
  o.node.key_prefix = "{tag}:lease:";
  CHECK(o.check(&why) == errc::invalid_argument);
  CHECK_THAT(why, Catch::Contains("brace"));
  redis_cluster_store s(o);
  CHECK(s.try_acquire("k", "o", milliseconds(1000)).error() == errc::invalid_argument);
  CHECK_THAT(s.last_error_message(), Catch::Contains("brace"));
}

TEST_CASE("redis_cluster_store meets the LeaseStore contract", "[redis][cluster][contract]") {
  static_assert(holdfast::assert_lease_store<redis_cluster_store>());
  const seeds nodes = serving();
  if (nodes.empty()) return;
  redis_cluster_store s(options_for(nodes));
  const auto r = holdfast::testing::check_contract(s, kit(nodes, s));
  INFO("violations:\n" << r.summary());
  CHECK(r.ok());
}

TEST_CASE("redis_cluster_store passes the conformance kit", "[redis][cluster][contract]") {
  const seeds nodes = serving();
  if (nodes.empty()) return;
  const redis_cluster_options first = options_for(nodes);
  redis_cluster_store expiring(first);
  holdfast::testing::conformance_options co = kit(nodes, expiring);
  co.schedules = 30;
  co.hostile_strings = false;  // the contract case above runs them
  // One hash tag: the kit's multi-key checks (try_acquire_all) need their keys in one slot, and a
  // store that refuses keys over several slots would fail them; the contract case spreads keys.
  co.key_prefix = "{kit}k-";
  int made = 0;
  const auto report = holdfast::testing::check_store(
      [&] {
        return std::make_unique<redis_cluster_store>(made++ == 0 ? first : options_for(nodes));
      },
      co);
  INFO(report.summary());
  CHECK(report.ok());
  CHECK(report.schedules == 30);
}

TEST_CASE("redis_cluster_store: keys spread over every primary, one script each",
          "[redis][cluster]") {
  const seeds nodes = serving();
  if (nodes.empty()) return;
  redis_cluster_store s(options_for(nodes));
  std::set<int> primaries;
  for (int i = 0; i < 40; ++i) {
    const std::string k = "spread-" + std::to_string(i) + (i % 5 == 0 ? "{x}" : "");
    auto g = s.try_acquire(k, "o", milliseconds(5000));
    REQUIRE(g);
    primaries.insert(primary_port(nodes, redis_cluster_store::slot_of(k)));
    auto seen = s.inspect(k);
    REQUIRE(seen);
    REQUIRE(seen->has_value());
    CHECK((*seen)->token == g->token);
    CHECK(s.renew(k, "o", g->token, milliseconds(5000)));
    CHECK(s.release(k, "o", g->token));
  }
  CHECK(primaries.size() == 3);
  CHECK(s.last_error_message().empty());
  auto d = s.deployment();
  REQUIRE(d);
  CHECK(d->can_lose_grants());  // no AOF, replicas without wait_replicas
}

// Issue #22 (leave nothing behind): the key's primary drops the store's idle connection (CLIENT
// KILL here; a server timeout or restart alike). The release that finds it dead never reached the
// server, so it is sent once more, as redis_store's: it succeeds and the key is free at once, not
// at the end of its TTL; so is a lease's destructor. Renew is not resent: it reports the drop.
TEST_CASE("redis_cluster_store: a release after its primary dropped the idle connection is resent",
          "[redis][cluster]") {
  const seeds nodes = serving();
  if (nodes.empty()) return;
  redis_cluster_options o = options_for(nodes);
  o.node.client_name = "hf-crel-" + hf_test::random_tag();
  redis_cluster_store s(o);
  redis_cluster_store other(o);
  const std::string k = "idle-drop";
  // Kills the store's connections on the primary of k (by client name: the cluster may be shared).
  const auto drop = [&] {
    const int port = primary_port(nodes, redis_cluster_store::slot_of(k));
    const std::string list = hf_test::redis_cmd(port, {"CLIENT", "LIST"});
    int killed = 0;
    for (std::size_t at = list.find(" name=" + o.node.client_name + " "); at != std::string::npos;
         at = list.find(" name=" + o.node.client_name + " ", at + 1)) {
      const std::size_t line =
          list.rfind('\n', at) == std::string::npos ? 0 : list.rfind('\n', at) + 1;
      const std::string id = list.substr(line + 3, list.find(' ', line) - line - 3);
      killed += hf_test::redis_cmd(port, {"CLIENT", "KILL", "ID", id}) == "1" ? 1 : 0;
    }
    REQUIRE(killed >= 1);
  };
  const auto is_free = [&] {
    auto seen = s.inspect(k);
    REQUIRE(seen);
    return !seen->has_value();
  };
  auto g = s.try_acquire(k, "me", milliseconds(60000));
  REQUIRE(g);
  drop();
  CHECK(s.release(k, "me", g->token));
  CHECK(is_free());
  auto theirs = other.try_acquire(k, "you", milliseconds(60000));
  REQUIRE(theirs);
  CHECK(other.release(k, "you", theirs->token));
  {
    holdfast::acquire_options<> ao;
    auto l = holdfast::try_acquire(s, k, milliseconds(60000), ao);
    REQUIRE(l);
    drop();
  }
  CHECK(is_free());
  auto h = s.try_acquire(k, "me", milliseconds(60000));
  REQUIRE(h);
  drop();
  CHECK(s.renew(k, "me", h->token, milliseconds(60000)).error() == errc::store_unavailable);
  CHECK(s.release(k, "me", h->token));
  CHECK(is_free());
}

TEST_CASE("redis_cluster_store: a slot migrated under fenced holders keeps tokens increasing",
          "[redis][cluster][faults]") {
  hf_test::redis_cluster* c = cluster();
  if (c == nullptr) return;
  const redis_cluster_options o = options_for(*c);
  const std::size_t from = some_primary(*c);
  // Four keys in one slot: the first key's slot, with hash tags to share it.
  const std::string base = key_on(*c, from, "mig-");
  const std::size_t slot = redis_cluster_store::slot_of(base);
  std::size_t to = from;
  for (std::size_t i = 0; i < c->size(); ++i) {
    if (i != from && c->primary_of(0, c->node(i).port()) >= 0 &&
        hf_test::nodes_flags_myself(c->node(i).port()).find("master") != std::string::npos) {
      to = i;
      break;
    }
  }
  REQUIRE(to != from);
  std::vector<std::string> keys = {base};
  {
    redis_cluster_store filler(o);
    for (int i = 0; keys.size() < 4; ++i) {
      const std::string k = "mig-x" + std::to_string(i);
      if (redis_cluster_store::slot_of(k) == slot) keys.push_back(k);
      if (i > 2000000) break;
    }
  }
  REQUIRE(keys.size() == 4);
  holdfast::keyed_fence_gate fence;
  std::mutex mu;
  std::map<std::string, std::vector<std::pair<fencing_token, std::string>>> grants;
  std::atomic<bool> stop{false};
  std::atomic<int> admitted{0}, reissued{0}, errors{0}, bad_errors{0}, release_errors{0};
  std::string last_release_error;
  std::vector<std::thread> workers;
  for (int w = 0; w < 3; ++w) {
    workers.emplace_back([&, w] {
      redis_cluster_store s(o);
      const std::string me = "w" + std::to_string(w);
      for (int i = 0; !stop.load(); ++i) {
        const std::string& k = keys[static_cast<std::size_t>(i + w) % keys.size()];
        auto g = s.try_acquire(k, me, milliseconds(2000));
        if (!g) {
          if (g.error() != errc::busy) {
            ++errors;
            if (g.error() != errc::store_unavailable && g.error() != errc::timeout) ++bad_errors;
          }
          continue;
        }
        {
          std::lock_guard<std::mutex> lk(mu);
          grants[k].emplace_back(g->token, me);
          auto a = fence.admit(k, g->token, me);
          if (a)
            ++admitted;
          else if (a.error() == errc::token_reissued)
            ++reissued;
        }
        auto r = s.release(k, me, g->token);
        if (!r) {
          ++release_errors;
          std::lock_guard<std::mutex> lk(mu);
          last_release_error = s.last_error_message();
        }
      }
    });
  }
  std::this_thread::sleep_for(milliseconds(300));
  const int before = admitted.load();
  const bool moved =
      c->migrate_slot(slot, from, to, 1, [] { std::this_thread::sleep_for(milliseconds(50)); });
  const int during = admitted.load() - before;
  std::this_thread::sleep_for(milliseconds(600));
  stop = true;
  for (auto& t : workers) t.join();
  INFO(c->why());
  REQUIRE(moved);
  INFO("admitted " << admitted << " (" << during << " during the migration), errors " << errors);
  CHECK(admitted > 10);
  CHECK(bad_errors == 0);  // never CROSSSLOT, MOVED or ASK: only a migration that outlasted
  INFO("release errors " << release_errors << ": " << last_release_error);
  CHECK(release_errors == 0);
  // No fence ever saw one token from two holders, and each key's tokens grow in the order the
  // store granted them (a grant is recorded before its release, so a later grant of the key is
  // recorded later, unless a 2 s TTL ran out in between).
  CHECK(reissued == 0);
  for (auto& [k, list] : grants) {
    for (std::size_t i = 1; i < list.size(); ++i) CHECK(list[i - 1].first < list[i].first);
  }
  // The store follows the slot to its new primary.
  redis_cluster_store s(o);
  auto g = s.try_acquire(keys[0], "after", milliseconds(2000));
  REQUIRE(g);
  CHECK(c->primary_of(slot, c->node(to).port()) == static_cast<int>(to));
  CHECK(g->token > grants[keys[0]].back().first);
}

TEST_CASE("redis_cluster_store: a release wakes a waiter at once (sharded pub/sub)",
          "[redis][cluster][wait]") {
  static_assert(holdfast::can_wait_for_release_v<redis_cluster_store, std::chrono::steady_clock>);
  static_assert(holdfast::can_watch_release_v<redis_cluster_store, std::chrono::steady_clock>);
  const seeds nodes = serving();
  if (nodes.empty()) return;
  const redis_cluster_options o = options_for(nodes);
  redis_cluster_store holder(o);
  redis_cluster_store waiter(o);
  const auto soon = [] { return std::chrono::steady_clock::now() + std::chrono::seconds(5); };
  // A free key: at once.
  REQUIRE(waiter.wait_for_release("w-free", soon()));
  for (int round = 0; round < 3; ++round) {  // the second and third reuse a pooled connection
    const std::string k = "w-" + std::to_string(round);
    auto g = holder.try_acquire(k, "H", milliseconds(10000));
    REQUIRE(g);
    std::atomic<bool> back{false};
    holdfast::result<void> got = errc::protocol_error;
    std::chrono::steady_clock::time_point woke{};
    std::thread t([&] {
      got = waiter.wait_for_release(k, soon());
      woke = std::chrono::steady_clock::now();
      back = true;
    });
    std::this_thread::sleep_for(milliseconds(150));  // subscribed and asleep by now
    CHECK_FALSE(back.load());
    const auto released = std::chrono::steady_clock::now();
    REQUIRE(holder.release(k, "H", g->token));
    t.join();
    CHECK(got);
    INFO("woken " << std::chrono::duration_cast<std::chrono::microseconds>(woke - released).count()
                  << " us after the release");
    CHECK(woke - released < milliseconds(100));  // a round trip, not the 10 s TTL
  }
  // Cancelled while asleep; and the holder's expiry ends a wait nobody released (bounded).
  auto g = holder.try_acquire("w-x", "H", milliseconds(400));
  REQUIRE(g);
  holdfast::cancel_source stop;
  std::thread canceller([&] {
    std::this_thread::sleep_for(milliseconds(100));
    stop.request_stop();
  });
  const auto began = std::chrono::steady_clock::now();
  CHECK(waiter.wait_for_release("w-x", soon(), stop.token()).error() == errc::cancelled);
  canceller.join();
  CHECK(std::chrono::steady_clock::now() - began < milliseconds(350));
  CHECK(waiter.watch_release("w-x", soon()));  // woken by the expiry, ~300 ms on
  CHECK(std::chrono::steady_clock::now() - began < milliseconds(1500));
  // Blocking acquire() uses the wait: the release hands the key over at once.
  auto g2 = holder.try_acquire("w-y", "H", milliseconds(10000));
  REQUIRE(g2);
  std::thread releaser([&] {
    std::this_thread::sleep_for(milliseconds(150));
    (void)holder.release("w-y", "H", g2->token);
  });
  const auto asked = std::chrono::steady_clock::now();
  auto l = holdfast::acquire(waiter, "w-y", milliseconds(5000), std::chrono::seconds(5));
  releaser.join();
  REQUIRE(l);
  CHECK(std::chrono::steady_clock::now() - asked < milliseconds(1000));
}

TEST_CASE("redis_cluster_store: a waiter whose slot migrates is woken, then woken by the release",
          "[redis][cluster][wait][faults]") {
  hf_test::redis_cluster* c = cluster();
  if (c == nullptr) return;
  const redis_cluster_options o = options_for(*c);
  const std::size_t from = some_primary(*c);
  const std::string k = key_on(*c, from, "wm-");
  const std::size_t slot = redis_cluster_store::slot_of(k);
  std::size_t to = from;
  for (std::size_t i = 0; i < c->size() && to == from; ++i) {
    if (i != from &&
        hf_test::nodes_flags_myself(c->node(i).port()).find("master") != std::string::npos) {
      to = i;
    }
  }
  REQUIRE(to != from);
  redis_cluster_store holder(o);
  redis_cluster_store waiter(o);
  auto g = holder.try_acquire(k, "H", milliseconds(8000));
  REQUIRE(g);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(6);
  std::atomic<int> wakes{0};
  std::chrono::steady_clock::time_point woke{};
  std::thread t([&] {
    // As acquire() does: wait, look, wait again until the key is free.
    for (int i = 0; i < 5 && std::chrono::steady_clock::now() < deadline; ++i) {
      if (!waiter.wait_for_release(k, deadline)) break;
      ++wakes;
      auto seen = waiter.inspect(k);
      if (seen && !seen->has_value()) break;
    }
    woke = std::chrono::steady_clock::now();
  });
  std::this_thread::sleep_for(milliseconds(150));
  REQUIRE(c->migrate_slot(slot, from, to, 1, [] {}));
  REQUIRE(hf_test::wait_until([&] { return wakes.load() >= 1; }, std::chrono::seconds(3)));
  std::this_thread::sleep_for(milliseconds(150));  // subscribed again, on the new primary
  const auto released = std::chrono::steady_clock::now();
  REQUIRE(holder.release(k, "H", g->token));
  t.join();
  CHECK(wakes >= 2);
  CHECK(woke - released < milliseconds(500));  // not the 8 s TTL, nor the 6 s deadline
}

TEST_CASE("redis_cluster_store: try_acquire_all in one slot, refused across slots",
          "[redis][cluster][multi]") {
  static_assert(holdfast::has_try_acquire_all_v<redis_cluster_store>);
  const seeds nodes = serving();
  if (nodes.empty()) return;
  redis_cluster_options o = options_for(nodes);
  redis_cluster_store s(o);
  holdfast::testing::conformance_options co = kit(nodes, s);
  co.key_prefix = "{m}k-";  // every key of the kit in one slot
  const auto rep = holdfast::testing::check_try_acquire_all(s, co);
  INFO(rep.summary());
  CHECK(rep.ok());
  const std::string_view two[] = {"a-1", "b-2"};
  REQUIRE(redis_cluster_store::slot_of("a-1") != redis_cluster_store::slot_of("b-2"));
  holdfast::grant gs[3];
  CHECK(s.try_acquire_all(two, 2, "o", milliseconds(1000), gs).error() == errc::invalid_argument);
  CHECK_THAT(s.last_error_message(), Catch::Contains("different slots"));
  CHECK_FALSE(s.inspect("a-1")->has_value());
  // A lost reply (the script ran, the connection timed out first) leaves nothing the owner cannot
  // take back: a busy script on the slot's primary holds our call past command_timeout.
  const std::string_view keys[] = {"{lost}a", "{lost}b", "{lost}c"};
  const int port = primary_port(nodes, redis_cluster_store::slot_of("{lost}a"));
  REQUIRE(port != 0);
  o.node.command_timeout = milliseconds(100);
  redis_cluster_store quick(o);
  REQUIRE(quick.inspect("{lost}a"));  // connected before the server is made busy
  std::thread busy([port] {
    (void)hf_test::redis_cmd(
        port, {"EVAL",
               "local a = redis.call('TIME') repeat local b = redis.call('TIME') until "
               "(b[1] - a[1]) * 1000000 + (b[2] - a[2]) > 400000 return 1",
               "0"});
  });
  std::this_thread::sleep_for(milliseconds(100));
  const auto lost = quick.try_acquire_all(keys, 3, "L", milliseconds(30000), gs);
  busy.join();
  CHECK(lost.error() == errc::timeout);
  auto seen = quick.inspect("{lost}b");
  REQUIRE(seen);
  REQUIRE(seen->has_value());  // the script did run
  holdfast::grant again[3];
  REQUIRE(quick.try_acquire_all(keys, 3, "L", milliseconds(30000), again));
  CHECK(again[1].token == (*seen)->token);
  for (std::size_t i = 0; i < 3; ++i) CHECK(quick.release(keys[i], "L", again[i].token));
  CHECK_FALSE(quick.inspect("{lost}c")->has_value());
}

TEST_CASE("redis_cluster_store: raise_token_floor lifts every slot, raise_token one lease",
          "[redis][cluster][floor]") {
  const seeds nodes = serving();
  if (nodes.empty()) return;
  redis_cluster_store s(options_for(nodes));
  CHECK(s.raise_token_floor(fencing_token{}).error() == errc::invalid_argument);
  const fencing_token floor{std::uint64_t{1} << 40};
  const auto began = std::chrono::steady_clock::now();
  REQUIRE(s.raise_token_floor(floor));
  INFO("raise_token_floor took "
       << std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - began).count()
       << " ms");
  CHECK(std::chrono::steady_clock::now() - began < std::chrono::seconds(20));  // 3.4 s at load 15
  std::set<int> primaries;
  for (int i = 0; i < 12; ++i) {
    const std::string k = "fl-" + std::to_string(i);
    primaries.insert(primary_port(nodes, redis_cluster_store::slot_of(k)));
    auto g = s.try_acquire(k, "o", milliseconds(5000));
    REQUIRE(g);
    CHECK(g->token > floor);
    CHECK(s.release(k, "o", g->token));
  }
  CHECK(primaries.size() == 3);
  REQUIRE(s.raise_token_floor(fencing_token{5}));  // never lowers
  auto g = s.try_acquire("fl-0", "o", milliseconds(5000));
  REQUIRE(g);
  CHECK(g->token > floor);
  const fencing_token to{g->token.value() + 1000};
  REQUIRE(s.raise_token("fl-0", "o", g->token, to));
  CHECK((*s.inspect("fl-0"))->token == to);
  CHECK(s.raise_token("fl-0", "x", to, to).error() == errc::lease_lost);
  CHECK(s.release("fl-0", "o", to));
  auto next = s.try_acquire("fl-0", "o", milliseconds(5000));
  REQUIRE(next);
  CHECK(next->token > to);
  CHECK(s.release("fl-0", "o", next->token));
}

TEST_CASE("redis_cluster_store: a primary killed -9 behind its replica, promoted (issue #20)",
          "[redis][cluster][faults]") {
  hf_test::redis_cluster* c = cluster();
  if (c == nullptr) return;
  redis_cluster_options o = options_for(*c);
  const std::size_t m = some_primary(*c);
  const int r = c->replica_of(m);
  REQUIRE(r >= 0);
  hf_test::redis_cluster_node& primary = c->node(m);
  hf_test::redis_cluster_node& replica = c->node(static_cast<std::size_t>(r));
  const std::string k = key_on(*c, m, "fo-");
  const std::string k2 = key_on(*c, m, "fo2-");
  redis_cluster_store a(o);
  redis_cluster_options acked = o;
  acked.node.wait_replicas = 1;
  acked.node.wait_timeout = milliseconds(300);
  redis_cluster_store d(acked);
  // Warm-up: an acknowledged grant and release (the replica has the counter and its life), and
  // A's store connected to the primary.
  auto w = d.try_acquire(k, "warm", milliseconds(5000));
  REQUIRE(w);
  REQUIRE(d.release(k, "warm", w->token));
  REQUIRE(a.inspect(k));
  // Cut the replica off: the primary now wants a password its replica does not have (connections
  // already open stay authenticated), and drops the replication link; the replica cannot get back
  // in, so the next grants exist only on the primary. (SIGSTOP would not do: the stream waits in
  // the stopped replica's socket buffer and is applied when it resumes.)
  REQUIRE(hf_test::redis_cmd(primary.port(), {"CONFIG", "SET", "requirepass", "hf-cut"}) == "OK");
  REQUIRE(hf_test::wait_until(
      [&] {
        redisContext* x = redisConnect("127.0.0.1", primary.port());
        if (x == nullptr) return false;
        freeReplyObject(redisCommand(x, "AUTH hf-cut"));
        freeReplyObject(redisCommand(x, "CLIENT KILL TYPE replica"));
        auto* info = static_cast<redisReply*>(redisCommand(x, "INFO replication"));
        const bool cut =
            info != nullptr && info->type == REDIS_REPLY_STRING &&
            std::string(info->str, info->len).find("connected_slaves:0") != std::string::npos;
        freeReplyObject(info);
        redisFree(x);
        return cut;
      },
      std::chrono::seconds(10)));
  holdfast::keyed_fence_gate fence;
  auto ga = a.try_acquire(k, "A", milliseconds(30000));
  REQUIRE(ga);
  REQUIRE(fence.admit(k, ga->token, "A"));
  primary.kill9();
  REQUIRE(hf_test::redis_cmd(replica.port(), {"CLUSTER", "FAILOVER", "TAKEOVER"}) == "OK");
  REQUIRE(hf_test::wait_until(
      [&] {
        return hf_test::nodes_flags_myself(replica.port()).find("master") != std::string::npos;
      },
      std::chrono::seconds(10)));
  // B, on the promoted replica, which lost A's grant: a token above A's (the new life raised the
  // slot's counter by 2^32), so the fence admits B and then refuses A.
  redis_cluster_store b(o);
  holdfast::result<holdfast::grant> gb = errc::store_unavailable;
  const bool got = hf_test::wait_until(
      [&] { return static_cast<bool>(gb = b.try_acquire(k, "B", milliseconds(5000))); },
      std::chrono::seconds(15));
  INFO("B: " << b.last_error_message());
  REQUIRE(got);
  CHECK(gb->token > ga->token);
  CHECK(gb->token.value() >= (std::uint64_t{1} << 32));
  CHECK(fence.admit(k, gb->token, "B"));
  CHECK(fence.admit(k, ga->token, "A").error() == errc::stale_token);
  // A's own store follows the map to the new primary too: its lease is gone there.
  holdfast::result<holdfast::grant> ra = errc::store_unavailable;
  REQUIRE(hf_test::wait_until(
      [&] {
        ra = a.renew(k, "A", ga->token, milliseconds(5000));
        return ra || ra.error() == errc::lease_lost;
      },
      std::chrono::seconds(15)));
  CHECK(ra.error() == errc::lease_lost);
  // The old primary comes back as a replica; the cluster serves everything again.
  REQUIRE(primary.start());
  CHECK(c->wait_ok(std::chrono::seconds(30)));
}

}  // namespace test_redis_cluster
