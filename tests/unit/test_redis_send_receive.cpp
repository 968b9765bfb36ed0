// SPDX-License-Identifier: MIT
// Tests of redis_store's send/receive capability (send_receive.hpp) against real redis-server
// processes: the LeaseStore contract driven entirely through send/poll/receive, several requests
// in flight from one thread with replies taken in any order, declining instead of blocking, the
// blocking operations waiting for a split request, command_timeout on a frozen server, a killed
// connection, NOSCRIPT, and bad arguments.
#include <hiredis/hiredis.h>
#include <poll.h>

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "../support/real_servers.hpp"
#include "../support/redis_servers.hpp"
#include "../support/split_only.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/quorum.hpp"
#include "holdfast/send_receive.hpp"
#include "holdfast/stores/memory.hpp"
#include "holdfast/stores/redis.hpp"
#include "holdfast/testing/conformance_contract.hpp"
#include "holdfast/testing/conformance_strings.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_redis_send_receive {

using holdfast::errc;
using holdfast::fencing_token;
using holdfast::io_interest;
using holdfast::redis_options;
using holdfast::redis_store;
using holdfast::store_op;
using holdfast::store_reply;
using holdfast::store_request;
using std::chrono::milliseconds;

static_assert(holdfast::has_send_receive_v<redis_store>);
static_assert(!holdfast::completes_inline_v<redis_store>);
static_assert(!holdfast::has_send_receive_v<holdfast::memory_store<>>);
static_assert(holdfast::completes_inline_v<holdfast::memory_store<>>);

namespace {

std::optional<redis_options> shared_redis() {
  return hf_test::shared_redis_options("hf-sr");
}

std::unique_ptr<hf_test::redis_server> own_redis() {
  auto s = std::make_unique<hf_test::redis_server>();
  if (!s->start()) {
    const std::string why = "cannot start redis-server: " + s->why();
    if (hf_test::in_ci() || s->available()) FAIL(why);
    hf_test::loud_skip(why);
    return nullptr;
  }
  return s;
}

using hf_test::wait_reply;

/// A LeaseStore whose every operation goes through redis_store's send/progress/receive (the
/// blocking operations only connect), so the contract checks exercise the split path.
using split_only = hf_test::split_only<redis_store>;

}  // namespace

TEST_CASE("redis_store send/receive: the LeaseStore contract through the split path",
          "[redis][send_receive]") {
  std::optional<redis_options> o = shared_redis();
  if (!o) return;
  split_only s(*o);
  holdfast::testing::conformance_options h;  // expiry forced through a raw command below
  h.key_prefix = "k-";
  h.store_wide_tokens = true;
  const std::string prefix = o->key_prefix;
  const redis_options ao = *o;
  h.expire_now = [ao, prefix](std::string_view key) {
    const struct timeval tv { 5, 0 };
    redisContext* c = redisConnectWithTimeout(ao.host.c_str(), ao.port, tv);
    REQUIRE(c != nullptr);
    if (!ao.password.empty()) {
      freeReplyObject(redisCommand(c, "AUTH %s", ao.password.c_str()));
    }
    const std::string k = prefix + std::string(key);
    freeReplyObject(redisCommand(c, "PEXPIREAT %b 1", k.data(), k.size()));
    redisFree(c);
  };
  const holdfast::testing::conformance_report v = holdfast::testing::check_contract(s, h);
  INFO("violations:\n" << v.summary());
  CHECK(v.ok());
  CHECK(s.sent > 10);
  const holdfast::testing::conformance_report v2 = holdfast::testing::check_hostile_strings(s, h);
  INFO(v2.summary());
  CHECK(v2.ok());
}

TEST_CASE("redis_store send/receive: many requests in flight from one thread, any reply order",
          "[redis][send_receive]") {
  std::optional<redis_options> o = shared_redis();
  if (!o) return;
  constexpr std::size_t n = 4;  // four connections to one server, one shared counter
  std::vector<std::unique_ptr<redis_store>> stores;
  for (std::size_t i = 0; i < n; ++i) {
    stores.push_back(std::make_unique<redis_store>(*o));
    // Not connected: send declines rather than block on a connect.
    CHECK(stores.back()->send({store_op::inspect, "x", {}, {}, {}, milliseconds(0)}) ==
          holdfast::send_would_block());
    REQUIRE(stores.back()->connect());
  }
  for (int round = 0; round < 3; ++round) {
    // Each store asks for a key of its own; all requests go out before any reply is read.
    std::vector<std::string> keys;
    for (std::size_t i = 0; i < n; ++i) keys.push_back("multi-" + std::to_string(i));
    for (std::size_t i = 0; i < n; ++i) {
      REQUIRE_FALSE(
          stores[i]->send({store_op::try_acquire, keys[i], "me", {}, {}, milliseconds(10000)}));
      // One request per connection: a second one declines while the first is in flight.
      CHECK(stores[i]->send({store_op::inspect, keys[i], {}, {}, {}, milliseconds(0)}) ==
            holdfast::send_would_block());
    }
    // Poll all sockets at once and take replies as they come (last store first when several
    // are ready, so the order differs from the sending order).
    const auto [replies, left] = hf_test::gather_replies(stores, std::chrono::seconds(5));
    REQUIRE(left == 0);
    std::vector<fencing_token> tokens;
    for (std::size_t i = 0; i < n; ++i) {
      REQUIRE(replies[i]->granted);
      CHECK(replies[i]->granted->ttl == milliseconds(10000));
      tokens.push_back(replies[i]->granted->token);
      // The other fields say the operation did not fill them.
      CHECK(replies[i]->done.error() == errc::protocol_error);
      CHECK(replies[i]->record.error() == errc::protocol_error);
    }
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t j = 0; j < i; ++j) CHECK(tokens[i] != tokens[j]);  // one counter
    }
    // Release through the split path too, then check with the blocking operation.
    for (std::size_t i = 0; i < n; ++i) {
      REQUIRE_FALSE(stores[i]->send({store_op::release, keys[i], "me", tokens[i], {}, {}}));
    }
    for (std::size_t i = 0; i < n; ++i) {
      CHECK(stores[i]->receive().done);
      auto r = stores[i]->inspect(keys[i]);
      REQUIRE(r);
      CHECK_FALSE(r->has_value());
    }
  }
}

TEST_CASE("redis_store send/receive: every operation, bad arguments, receive without send",
          "[redis][send_receive]") {
  std::optional<redis_options> o = shared_redis();
  if (!o) return;
  redis_store s(*o);
  REQUIRE(s.connect());
  const auto split = [&](const store_request& r) {
    REQUIRE_FALSE(s.send(r));
    REQUIRE(wait_reply(s, milliseconds(5000)));
    CHECK(s.interest().fd < 0);
    return s.receive();
  };
  // No request in flight.
  CHECK(s.receive().granted.error() == errc::invalid_argument);
  CHECK(s.progress());
  // Bad arguments: accepted, reported by receive(), nothing sent.
  CHECK(split({store_op::try_acquire, "", "me", {}, {}, milliseconds(1000)}).granted.error() ==
        errc::invalid_argument);
  CHECK(split({store_op::try_acquire, "k", "me", {}, {}, milliseconds(0)}).granted.error() ==
        errc::invalid_argument);
  CHECK(split({store_op::release, "k", "me", fencing_token{}, {}, {}}).done.error() ==
        errc::invalid_argument);
  CHECK(split({store_op::raise_token, "k", "me", fencing_token(5), fencing_token(4), {}})
            .done.error() == errc::invalid_argument);
  CHECK(split({store_op::raise_token_floor, {}, {}, fencing_token{}, {}, {}}).done.error() ==
        errc::invalid_argument);
  CHECK(split({store_op::inspect, "", {}, {}, {}, {}}).record.error() == errc::invalid_argument);
  // Every operation, as the blocking ones answer.
  const holdfast::grant g =
      split({store_op::try_acquire, "ops", "me", {}, {}, milliseconds(10000)}).granted.value();
  CHECK(split({store_op::try_acquire, "ops", "you", {}, {}, milliseconds(10000)}).granted.error() ==
        errc::busy);
  CHECK(split({store_op::try_acquire, "ops", "me", {}, {}, milliseconds(10000)})
            .granted.value()
            .token == g.token);
  const holdfast::grant r =
      split({store_op::renew, "ops", "me", g.token, {}, milliseconds(20000)}).granted.value();
  CHECK(r.token == g.token);
  CHECK(r.ttl == milliseconds(20000));
  CHECK(split({store_op::renew, "ops", "you", g.token, {}, milliseconds(20000)}).granted.error() ==
        errc::lease_lost);
  const auto rec = split({store_op::inspect, "ops", {}, {}, {}, {}}).record.value();
  REQUIRE(rec.has_value());
  CHECK(rec->owner == "me");
  CHECK(rec->token == g.token);
  const fencing_token up(g.token.value() + 100);
  CHECK(split({store_op::raise_token, "ops", "me", g.token, up, {}}).done);
  CHECK(split({store_op::raise_token, "ops", "you", g.token, up, {}}).done.error() ==
        errc::lease_lost);
  CHECK(s.inspect("ops").value()->token == up);
  CHECK(split({store_op::raise_token_floor, {}, {}, fencing_token(up.value() + 50), {}, {}}).done);
  CHECK(split({store_op::release, "ops", "me", g.token, {}, {}}).done.error() == errc::not_holder);
  CHECK(split({store_op::release, "ops", "me", up, {}, {}}).done);
  // The floor holds for the next grant.
  CHECK(s.try_acquire("ops2", "me", milliseconds(1000)).value().token.value() > up.value() + 50);
}

TEST_CASE("redis_store send/receive: blocking operations wait for the split request in flight",
          "[redis][send_receive][concurrency]") {
  std::optional<redis_options> o = shared_redis();
  if (!o) return;
  redis_store s(*o);
  REQUIRE(s.connect());
  REQUIRE_FALSE(s.send({store_op::try_acquire, "wait", "me", {}, {}, milliseconds(10000)}));
  REQUIRE(wait_reply(s, milliseconds(5000)));
  std::atomic<bool> done{false};
  holdfast::result<holdfast::grant> other = errc::timeout;
  std::thread t([&] {
    other = s.try_acquire("wait", "you", milliseconds(10000));
    done = true;
  });
  // The reply is in but not received: the connection is still this request's.
  std::this_thread::sleep_for(milliseconds(50));
  CHECK_FALSE(done.load());
  const store_reply mine = s.receive();
  CHECK(hf_test::wait_until([&] { return done.load(); }, milliseconds(5000)));
  t.join();
  REQUIRE(mine.granted);
  CHECK(other.error() == errc::busy);  // its reply was not mistaken for ours, nor ours for its
  CHECK(s.release("wait", "me", mine.granted->token));
}

TEST_CASE("redis_store send/receive: NOSCRIPT is answered by EVAL with the script's text",
          "[redis][send_receive]") {
  std::optional<redis_options> o = shared_redis();
  if (!o) return;
  redis_store s(*o);
  REQUIRE(s.connect());
  {
    const struct timeval tv { 5, 0 };
    redisContext* c = redisConnectWithTimeout(o->host.c_str(), o->port, tv);
    REQUIRE(c != nullptr);
    if (!o->password.empty()) freeReplyObject(redisCommand(c, "AUTH %s", o->password.c_str()));
    freeReplyObject(redisCommand(c, "SCRIPT FLUSH"));
    redisFree(c);
  }
  REQUIRE_FALSE(s.send({store_op::try_acquire, "noscript", "me", {}, {}, milliseconds(10000)}));
  REQUIRE(wait_reply(s, milliseconds(5000)));
  const holdfast::grant g = s.receive().granted.value();
  // EVAL cached the script under its SHA1 again: the blocking path's EVALSHA finds it.
  CHECK(s.release("noscript", "me", g.token));
  CHECK(s.last_error_message().empty());
}

TEST_CASE(
    "redis_store send/receive: a frozen server times out at command_timeout; a killed one "
    "is store_unavailable; both reconnect",
    "[redis][send_receive][faults]") {
  auto srv = own_redis();
  if (!srv) return;
  redis_options o;
  o.port = srv->port();
  o.connect_timeout = milliseconds(300);
  o.command_timeout = milliseconds(300);
  redis_store s(o);
  REQUIRE(s.connect());

  srv->pause();  // SIGSTOP: the socket stays open, nothing answers
  const auto t0 = std::chrono::steady_clock::now();
  REQUIRE_FALSE(s.send({store_op::try_acquire, "frozen", "me", {}, {}, milliseconds(10000)}));
  CHECK_FALSE(s.progress());
  const io_interest want = s.interest();
  CHECK(want.fd >= 0);
  CHECK(want.read);
  const store_reply r = s.receive();  // waits out command_timeout, counted from send()
  const auto took = std::chrono::steady_clock::now() - t0;
  CHECK(r.granted.error() == errc::timeout);
  CHECK(took >= milliseconds(300));
  CHECK(took < std::chrono::seconds(5));
  CHECK_FALSE(s.last_error_message().empty());
  // The connection was dropped: the next send declines until a blocking call reconnects.
  CHECK(s.send({store_op::inspect, "frozen", {}, {}, {}, {}}) == holdfast::send_would_block());
  srv->resume();
  REQUIRE(hf_test::wait_until([&] { return static_cast<bool>(s.connect()); }, milliseconds(5000)));

  srv->pause();
  REQUIRE_FALSE(s.send({store_op::inspect, "killed", {}, {}, {}, {}}));
  srv->kill9();  // the connection closes with the request unanswered
  const store_reply k = s.receive();
  CHECK(k.record.error() == errc::store_unavailable);
  REQUIRE(srv->start());
  auto g = s.try_acquire("killed", "me", milliseconds(10000));
  if (!g) g = s.try_acquire("killed", "me", milliseconds(10000));
  REQUIRE(g);
  CHECK(s.release("killed", "me", g->token));
}

// Leave nothing behind, on the split path: the server drops the store's idle connection (CLIENT
// KILL here; a server timeout or restart alike). A release sent through send/receive then never
// got through; receive() sends it once more, as release() does, so the key is free at once, not
// at the end of its 60 s TTL. So is a quorum_store's release, whose one-thread fan-out sends it
// through every member's split path. A renew is not resent: it reports the drop. Before the fix
// both releases answered store_unavailable and left the grants held.
TEST_CASE("redis_store send/receive: a release after an idle drop is sent once more",
          "[redis][send_receive][faults]") {
  std::optional<redis_options> base = shared_redis();
  if (!base) return;
  const std::string name = "hf-srdrop-" + hf_test::random_tag();
  redis_options o = *base;
  o.client_name = name;
  redis_store s(o);
  const auto split = [](redis_store& st, const store_request& q) {
    REQUIRE_FALSE(st.send(q));
    REQUIRE(wait_reply(st, milliseconds(5000)));
    return st.receive();
  };
  auto g = s.try_acquire("idle", "me", milliseconds(60000));
  REQUIRE(g);
  REQUIRE(hf_test::redis_kill_named(o.port, name) == 1);
  const store_reply released = split(s, {store_op::release, "idle", "me", g->token, {}, {}});
  INFO(s.last_error_message());
  CHECK(released.done);
  CHECK_FALSE(s.inspect("idle")->has_value());
  auto h = s.try_acquire("idle", "me", milliseconds(60000));
  REQUIRE(h);
  REQUIRE(hf_test::redis_kill_named(o.port, name) == 1);
  const store_reply renewed =
      split(s, {store_op::renew, "idle", "me", h->token, {}, milliseconds(60000)});
  CHECK(renewed.granted.error() == errc::store_unavailable);
  CHECK(s.release("idle", "me", h->token));

  std::vector<std::unique_ptr<redis_store>> members;
  for (int i = 0; i < 3; ++i) {
    std::optional<redis_options> m = shared_redis();  // a key space of its own each
    REQUIRE(m);
    m->client_name = name + "-q";
    members.push_back(std::make_unique<redis_store>(*m));
  }
  holdfast::quorum_store<redis_store> q({members[0].get(), members[1].get(), members[2].get()});
  {
    auto l = holdfast::try_acquire(q, "q-idle", std::chrono::seconds(60));
    REQUIRE(l);
    REQUIRE(hf_test::redis_kill_named(o.port, name + "-q") == 3);
    CHECK(l->release());
  }
  for (auto& m : members) CHECK_FALSE(m->inspect("q-idle")->has_value());
}

}  // namespace test_redis_send_receive
