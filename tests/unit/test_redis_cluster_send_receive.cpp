// SPDX-License-Identifier: MIT
// Tests of redis_cluster_store's send/receive capability (send_receive.hpp,
// detail/redis_cluster_split.hpp) against real Redis Clusters: the LeaseStore contract driven
// through send/poll/receive on the serving cluster (.ci/servers', else the executable's own);
// requests to every primary in flight from one thread; declining instead of blocking; a
// quorum_store of three cluster stores; and, on the executable's own cluster, MOVED and ASK in a
// received reply followed (a slot moved, or half moved, behind the store's back), with the
// tokens still rising.
#include <poll.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "../support/real_servers.hpp"
#include "../support/redis_cluster_servers.hpp"
#include "../support/redis_servers.hpp"
#include "../support/split_only.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/quorum.hpp"
#include "holdfast/send_receive.hpp"
#include "holdfast/stores/redis_cluster.hpp"
#include "holdfast/testing/conformance_contract.hpp"
#include "holdfast/testing/conformance_strings.hpp"

namespace test_redis_cluster_send_receive {

using holdfast::errc;
using holdfast::fencing_token;
using holdfast::io_interest;
using holdfast::redis_cluster_options;
using holdfast::redis_cluster_store;
using holdfast::store_op;
using holdfast::store_reply;
using holdfast::store_request;
using std::chrono::milliseconds;

static_assert(holdfast::has_send_receive_v<redis_cluster_store>);
static_assert(!holdfast::completes_inline_v<redis_cluster_store>);

namespace {

using seeds = std::vector<holdfast::redis_endpoint>;

/// The shared cluster of .ci/servers, else the executable's own; empty only outside CI.
seeds serving() {
  return hf_test::serving_redis_cluster();
}

redis_cluster_options options_for(const seeds& nodes, const std::string& name = "sr") {
  return hf_test::redis_cluster_test_options(nodes, name + "-" + hf_test::random_tag());
}

using hf_test::wait_reply;

/// A LeaseStore whose every operation goes through send/progress/receive; a declined send is
/// followed by a blocking inspect of the key (it reads the map and connects the key's primary)
/// and sent again, so the contract checks exercise the split path.
struct split_only : hf_test::split_only<redis_cluster_store> {
  explicit split_only(redis_cluster_options o)
      : hf_test::split_only<redis_cluster_store>(
            std::move(o), [](redis_cluster_store& s, const store_request& r) {
              (void)s.connect();
              if (!r.key.empty()) (void)s.inspect(r.key);
            }) {}
};

/// Sends `q` (which must be accepted), waits for and returns its reply.
store_reply split(redis_cluster_store& s, const store_request& q) {
  REQUIRE_FALSE(s.send(q));
  REQUIRE(wait_reply(s, milliseconds(5000)));
  return s.receive();
}

}  // namespace

TEST_CASE("redis_cluster_store send/receive: the LeaseStore contract through the split path",
          "[redis][cluster][send_receive]") {
  const seeds nodes = serving();
  if (nodes.empty()) return;
  const redis_cluster_options o = options_for(nodes);
  split_only s(o);
  holdfast::testing::conformance_options h;
  h.key_prefix = "k-";
  h.store_wide_tokens = false;  // per key (per slot)
  const redis_cluster_store& named = s.store();
  h.expire_now = [nodes, &named](std::string_view key) {
    for (const holdfast::redis_endpoint& n : nodes) {
      (void)hf_test::redis_cmd(n.port, {"PEXPIREAT", named.record_key(key), "1"});
    }
  };
  const holdfast::testing::conformance_report v = holdfast::testing::check_contract(s, h);
  INFO("violations:\n" << v.summary());
  CHECK(v.ok());
  CHECK(s.sent > 10);
  CHECK(s.sent > 2 * s.declined);  // mostly sent at once, declined only for a new primary
  const holdfast::testing::conformance_report v2 = holdfast::testing::check_hostile_strings(s, h);
  INFO(v2.summary());
  CHECK(v2.ok());
}

TEST_CASE("redis_cluster_store send/receive: every primary in flight from one thread",
          "[redis][cluster][send_receive]") {
  const seeds nodes = serving();
  if (nodes.empty()) return;
  const redis_cluster_options o = options_for(nodes);
  // Keys on three different primaries, one store each (one request in flight per store).
  std::vector<std::string> keys;
  std::vector<std::string> primaries;
  for (int i = 0; keys.size() < 3; ++i) {
    const std::string k = "fan-" + std::to_string(i);
    const std::string p =
        hf_test::redis_cluster_primary_at(redis_cluster_store::slot_of(k), nodes[0].port);
    if (std::find(primaries.begin(), primaries.end(), p) != primaries.end()) continue;
    primaries.push_back(p);
    keys.push_back(k);
  }
  std::vector<std::unique_ptr<redis_cluster_store>> stores;
  for (std::size_t i = 0; i < 3; ++i) {
    stores.push_back(std::make_unique<redis_cluster_store>(o));
    // No map yet: declines rather than block on CLUSTER SLOTS or a connect.
    CHECK(stores[i]->send({store_op::inspect, keys[i], {}, {}, {}, milliseconds(0)}) ==
          holdfast::send_would_block());
    REQUIRE(stores[i]->connect());
    // A map, but the key's primary not connected yet: declines too.
    CHECK(stores[i]->send({store_op::inspect, keys[i], {}, {}, {}, milliseconds(0)}) ==
          holdfast::send_would_block());
    REQUIRE(stores[i]->inspect(keys[i]));
    // raise_token_floor is every primary's work: always the blocking operation.
    CHECK(stores[i]->send({store_op::raise_token_floor, {}, {}, fencing_token{5}, {}, {}}) ==
          holdfast::send_would_block());
  }
  for (int round = 0; round < 3; ++round) {
    for (std::size_t i = 0; i < 3; ++i) {
      REQUIRE_FALSE(
          stores[i]->send({store_op::try_acquire, keys[i], "me", {}, {}, milliseconds(10000)}));
      CHECK(stores[i]->send({store_op::inspect, keys[i], {}, {}, {}, milliseconds(0)}) ==
            holdfast::send_would_block());  // one in flight per store
    }
    // Replies as they come, the last store first: another order than sending's.
    const auto [replies, left] = hf_test::gather_replies(stores, std::chrono::seconds(5));
    REQUIRE(left == 0);
    for (std::size_t i = 0; i < 3; ++i) {
      REQUIRE(replies[i]->granted);
      auto seen = stores[i]->inspect(keys[i]);  // blocking, after the split request
      REQUIRE(seen);
      REQUIRE(seen->has_value());
      CHECK((*seen)->token == replies[i]->granted->token);
      const store_reply done =
          split(*stores[i], {store_op::release, keys[i], "me", replies[i]->granted->token, {}, {}});
      CHECK(done.done);
    }
  }
  // Bad arguments are accepted and reported by receive(), as the blocking operation would.
  const store_reply bad = split(*stores[0], {store_op::try_acquire, "", "me", {}, {}, {}});
  CHECK(bad.granted.error() == errc::invalid_argument);
  // receive() with nothing in flight.
  CHECK(stores[0]->receive().granted.error() == errc::invalid_argument);
}

TEST_CASE("redis_cluster_store send/receive: a quorum_store of three cluster stores",
          "[redis][cluster][send_receive][quorum]") {
  const seeds nodes = serving();
  if (nodes.empty()) return;
  // Three stores under three prefixes of one cluster: three independent lease spaces (a real
  // deployment would use three clusters; the fan-out is the same).
  redis_cluster_store a(options_for(nodes, "qa")), b(options_for(nodes, "qb")),
      c(options_for(nodes, "qc"));
  for (redis_cluster_store* s : {&a, &b, &c}) REQUIRE(s->inspect("q-key"));  // map, primary
  holdfast::quorum_store<redis_cluster_store> q({&a, &b, &c});
  fencing_token last{};
  for (int i = 0; i < 5; ++i) {
    auto l = holdfast::try_acquire(q, "q-key", std::chrono::seconds(5));
    REQUIRE(l);
    CHECK(l->token() > last);
    last = l->token();
    auto other = q.try_acquire("q-key", "someone-else", milliseconds(5000));
    CHECK(other.error() == errc::busy);
    REQUIRE(l->renew());
    REQUIRE(l->release());
  }
  for (redis_cluster_store* s : {&a, &b, &c}) CHECK_FALSE(s->inspect("q-key")->has_value());
}

TEST_CASE("redis_cluster_store send/receive: MOVED and ASK in a received reply are followed",
          "[redis][cluster][send_receive][faults]") {
  hf_test::redis_cluster* c = hf_test::own_redis_cluster();
  if (c == nullptr) return;
  const redis_cluster_options o = options_for(c->seeds());
  redis_cluster_store s(o);
  const std::string k = "moved-key";
  const std::size_t slot = redis_cluster_store::slot_of(k);
  const int from = c->primary_of(slot, c->node(0).port());
  REQUIRE(from >= 0);
  const int to = hf_test::redis_cluster_other_primary(*c, from);
  REQUIRE(to >= 0);
  auto g = s.try_acquire(k, "me", milliseconds(20000));  // map read, primary connected
  REQUIRE(g);
  // The slot moves behind the store's back: its map still names the old primary, which answers
  // MOVED; the split request is followed to the new one.
  REQUIRE(c->migrate_slot(slot, static_cast<std::size_t>(from), static_cast<std::size_t>(to), 10,
                          [] {}));
  const store_reply renewed =
      split(s, {store_op::renew, k, "me", g->token, {}, milliseconds(20000)});
  INFO(s.last_error_message());
  REQUIRE(renewed.granted);
  CHECK(renewed.granted->token == g->token);
  const store_reply released = split(s, {store_op::release, k, "me", g->token, {}, {}});
  REQUIRE(released.done);
  const store_reply again = split(s, {store_op::try_acquire, k, "me", {}, {}, milliseconds(20000)});
  REQUIRE(again.granted);
  CHECK(again.granted->token.value() > g->token.value() + (std::uint64_t{1} << 32));  // new life
  // Half a move: the record alone on the target (IMPORTING / MIGRATING): the source answers ASK
  // for it, and the renew is followed there (ASKING).
  const std::string src_id =
      hf_test::redis_cluster::id_of(c->node(static_cast<std::size_t>(to)).port());
  const std::string dst_id =
      hf_test::redis_cluster::id_of(c->node(static_cast<std::size_t>(from)).port());
  const int src = c->node(static_cast<std::size_t>(to)).port();
  const int dst = c->node(static_cast<std::size_t>(from)).port();
  const std::string sl = std::to_string(slot);
  REQUIRE(hf_test::redis_cmd(dst, {"CLUSTER", "SETSLOT", sl, "IMPORTING", src_id}) == "OK");
  REQUIRE(hf_test::redis_cmd(src, {"CLUSTER", "SETSLOT", sl, "MIGRATING", dst_id}) == "OK");
  REQUIRE(hf_test::redis_cmd(src, {"MIGRATE", "127.0.0.1", std::to_string(dst), s.record_key(k),
                                   "0", "5000"}) == "OK");
  const store_reply asked =
      split(s, {store_op::renew, k, "me", again.granted->token, {}, milliseconds(20000)});
  INFO(s.last_error_message());
  CHECK(asked.granted);
  const store_reply seen = split(s, {store_op::inspect, k, {}, {}, {}, {}});
  REQUIRE(seen.record);
  REQUIRE(seen.record->has_value());
  CHECK((*seen.record)->token == again.granted->token);
  // Finish the move (the counter and its life record follow), and the cluster serves as before.
  REQUIRE(c->migrate_slot(slot, static_cast<std::size_t>(to), static_cast<std::size_t>(from), 10,
                          [] {}));
  const store_reply last = split(s, {store_op::release, k, "me", again.granted->token, {}, {}});
  CHECK(last.done);
}

// Leave nothing behind, on the split path: every primary drops the stores' idle connections
// (CLIENT KILL here; a server timeout or restart alike). A release sent through send/receive then
// never got through; receive() sends it once more through the blocking path, as release() does,
// so the key is free at once, not at the end of its 60 s TTL; so is a quorum_store's release of
// three cluster stores (its one-thread fan-out uses the split path). A renew is not resent.
// Before the fix both releases answered store_unavailable and left the grants held.
TEST_CASE("redis_cluster_store send/receive: a release after an idle drop is sent once more",
          "[redis][cluster][send_receive][faults]") {
  const seeds nodes = serving();
  if (nodes.empty()) return;
  const std::string tag = hf_test::random_tag();
  const auto drop = [&](const std::string& name) {
    int killed = 0;
    for (const holdfast::redis_endpoint& e : nodes)
      killed += hf_test::redis_kill_named(e.port, name);
    return killed;
  };
  redis_cluster_options o = options_for(nodes, "idle");
  o.node.client_name = "hf-csdrop-" + tag;
  redis_cluster_store s(o);
  const auto split = [](redis_cluster_store& st, const store_request& q) {
    REQUIRE_FALSE(st.send(q));
    REQUIRE(wait_reply(st, milliseconds(5000)));
    return st.receive();
  };
  auto g = s.try_acquire("idle", "me", milliseconds(60000));
  REQUIRE(g);
  REQUIRE(drop(o.node.client_name) >= 1);
  const store_reply released = split(s, {store_op::release, "idle", "me", g->token, {}, {}});
  INFO(s.last_error_message());
  CHECK(released.done);
  CHECK_FALSE(s.inspect("idle")->has_value());
  auto h = s.try_acquire("idle", "me", milliseconds(60000));
  REQUIRE(h);
  REQUIRE(drop(o.node.client_name) >= 1);
  const store_reply renewed =
      split(s, {store_op::renew, "idle", "me", h->token, {}, milliseconds(60000)});
  CHECK(renewed.granted.error() == errc::store_unavailable);
  CHECK(s.release("idle", "me", h->token));

  redis_cluster_options qo[3] = {options_for(nodes, "qa"), options_for(nodes, "qb"),
                                 options_for(nodes, "qc")};
  for (auto& x : qo) x.node.client_name = "hf-cqdrop-" + tag;
  redis_cluster_store a(qo[0]), b(qo[1]), c(qo[2]);
  holdfast::quorum_store<redis_cluster_store> q({&a, &b, &c});
  {
    auto l = holdfast::try_acquire(q, "q-idle", std::chrono::seconds(60));
    REQUIRE(l);
    REQUIRE(drop(qo[0].node.client_name) >= 3);
    CHECK(l->release());
  }
  for (redis_cluster_store* m : {&a, &b, &c}) CHECK_FALSE(m->inspect("q-idle")->has_value());
}

}  // namespace test_redis_cluster_send_receive
