// SPDX-License-Identifier: MIT
// keepalive.hpp's batch path on a real Redis (redis_store::renew_batch, detail/redis_batch.hpp):
// 1,000 leases renewed by one poll() in pipelined batches, one of them taken away meanwhile; a
// NOSCRIPT inside a batch; a request that is not a renewal; a connection killed under a batch.
// The leases' validity is on a manual_clock (no test sleeps); expiry is Redis' own clock.
#include <hiredis/hiredis.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "../support/real_servers.hpp"
#include "../support/redis_servers.hpp"
#include "holdfast/keepalive.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/stores/redis.hpp"

namespace test_keepalive_redis {

using namespace std::chrono_literals;
using holdfast::errc;
using holdfast::lease_state;
using holdfast::loss_cause;
using holdfast::manual_clock;
using holdfast::redis_options;
using holdfast::redis_store;
using holdfast::store_op;
using holdfast::store_request;

static_assert(holdfast::detail::has_renew_batch_v<redis_store>);

namespace {

using rlease = holdfast::lease<redis_store, manual_clock>;

// Runs one command on a connection of the test's own (AUTH first when needed).
void admin(const redis_options& o, const std::vector<std::string>& args) {
  const struct timeval tv { 5, 0 };
  redisContext* c = redisConnectWithTimeout(o.host.c_str(), o.port, tv);
  REQUIRE(c != nullptr);
  REQUIRE(c->err == 0);
  if (!o.password.empty()) freeReplyObject(redisCommand(c, "AUTH %s", o.password.c_str()));
  std::vector<const char*> argv;
  std::vector<std::size_t> lens;
  for (const std::string& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  freeReplyObject(redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data()));
  redisFree(c);
}

// Kills the connection named `name` (CLIENT LIST, then CLIENT KILL ID: the server is shared).
void kill_client(const redis_options& o, const std::string& name) {
  const struct timeval tv { 5, 0 };
  redisContext* c = redisConnectWithTimeout(o.host.c_str(), o.port, tv);
  REQUIRE(c != nullptr);
  if (!o.password.empty()) freeReplyObject(redisCommand(c, "AUTH %s", o.password.c_str()));
  auto* list = static_cast<redisReply*>(redisCommand(c, "CLIENT LIST"));
  REQUIRE(list != nullptr);
  REQUIRE(list->type == REDIS_REPLY_STRING);
  const std::string text(list->str, list->len);
  freeReplyObject(list);
  const std::size_t at = text.find(" name=" + name + " ");
  REQUIRE(at != std::string::npos);
  const std::size_t line = text.rfind('\n', at);
  const std::size_t id = text.find("id=", line == std::string::npos ? 0 : line);
  const std::string num = text.substr(id + 3, text.find(' ', id) - id - 3);
  freeReplyObject(redisCommand(c, "CLIENT KILL ID %s", num.c_str()));
  redisFree(c);
}

}  // namespace

TEST_CASE("keepalive on Redis: 1,000 leases renewed by one poll in pipelined batches",
          "[redis][keepalive][keepalive_batch]") {
  std::optional<redis_options> o = hf_test::shared_redis_options("hf-kab");
  if (!o) return;
  redis_store store(*o);
  manual_clock clock;
  holdfast::acquire_options<manual_clock> ao;
  ao.clock = clock;
  std::vector<rlease> held;
  held.reserve(1000);
  for (int i = 0; i < 1000; ++i) {
    auto l = holdfast::try_acquire(store, "k" + std::to_string(i), 60s, ao);
    REQUIRE(l);
    held.push_back(std::move(*l));
  }
  holdfast::keepalive_options ko;
  ko.start_thread = false;
  holdfast::keepalive<manual_clock> ka(clock, ko);
  for (rlease& l : held) REQUIRE(ka.add(l));
  // k17 is taken away behind the holder's back: only its own renewal is refused.
  admin(*o, {"SET", o->key_prefix + "k17", "1:someone-else", "PX", "60000"});
  clock.set(manual_clock::time_point(30s));
  CHECK(ka.poll() == manual_clock::time_point(60s));
  const holdfast::keepalive_stats st = ka.stats();
  CHECK(st.renewals == 999);
  CHECK(st.losses == 1);
  CHECK(st.batches == 4);  // 1,000 in batches of at most 256
  CHECK(held[17].loss() == loss_cause::renew_refused);
  for (std::size_t i = 0; i < held.size(); ++i) {
    if (i == 17) continue;
    if (held[i].state() != lease_state::held || held[i].acquired_at() != clock.now()) {
      FAIL("lease " << i << " was not renewed: " << held[i].last_error().message());
    }
  }
  // The store did renew: the record's TTL was set again by PEXPIRE (Redis' clock).
  auto r = store.inspect("k999");
  REQUIRE(r);
  REQUIRE(*r);
  CHECK((*r)->remaining > 50s);
  ka.stop();
  admin(*o, {"DEL", o->key_prefix + "k17"});
}

TEST_CASE("redis_store::renew_batch: NOSCRIPT, a request that is not a renewal, a lost lease",
          "[redis][keepalive_batch]") {
  std::optional<redis_options> o = hf_test::shared_redis_options("hf-kab");
  if (!o) return;
  redis_store store(*o);
  auto a = store.try_acquire("a", "me", 10s);
  auto b = store.try_acquire("b", "me", 10s);
  REQUIRE(a);
  REQUIRE(b);
  admin(*o, {"SCRIPT", "FLUSH"});  // every call of the batch answers NOSCRIPT, none ran
  const std::vector<store_request> q = {
      {store_op::renew, "a", "me", a->token, {}, 20000ms},
      {store_op::renew, "b", "", b->token, {}, 20000ms},  // no owner: invalid, not sent
      {store_op::release, "b", "me", b->token, {}, {}},   // not a renewal: refused
      {store_op::renew, "b", "me", b->token, {}, 20000ms},
      {store_op::renew, "c", "me", a->token, {}, 20000ms},  // no such lease
  };
  std::vector<holdfast::result<holdfast::grant>> out(q.size(), errc::protocol_error);
  store.renew_batch(q.data(), q.size(), out.data());
  REQUIRE(out[0]);
  CHECK(out[0]->token == a->token);
  CHECK(out[0]->ttl == 20000ms);
  CHECK(out[1].error() == errc::invalid_argument);
  CHECK(out[2].error() == errc::invalid_argument);
  REQUIRE(out[3]);
  CHECK(out[4].error() == errc::lease_lost);
  auto r = store.inspect("b");
  REQUIRE(r);
  REQUIRE(*r);
  CHECK((*r)->remaining > 15s);
  CHECK(store.release("a", "me", a->token));
  CHECK(store.release("b", "me", b->token));
}

TEST_CASE(
    "redis_store::renew_batch: a connection killed under the batch leaves every reply "
    "unknown, and the next batch reconnects",
    "[redis][keepalive_batch][faults]") {
  std::optional<redis_options> o = hf_test::shared_redis_options("hf-kab");
  if (!o) return;
  o->client_name = "hf-kab-" + hf_test::random_tag();
  redis_store store(*o);
  auto a = store.try_acquire("a", "me", 10s);
  REQUIRE(a);
  kill_client(*o, o->client_name);
  const std::vector<store_request> q(3, {store_op::renew, "a", "me", a->token, {}, 10000ms});
  std::vector<holdfast::result<holdfast::grant>> out(q.size(), errc::protocol_error);
  store.renew_batch(q.data(), q.size(), out.data());
  for (const auto& r : out) {
    REQUIRE_FALSE(r);
    CHECK((r.error() == errc::store_unavailable || r.error() == errc::timeout));
  }
  store.renew_batch(q.data(), q.size(), out.data());
  for (const auto& r : out) CHECK(r);
  CHECK(store.release("a", "me", a->token));
}

}  // namespace test_keepalive_redis
