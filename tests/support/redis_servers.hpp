// SPDX-License-Identifier: MIT
// The shared Redis server of the store tests (.ci/servers: HOLDFAST_REDIS_HOST / _PORT /
// _PASSWORD), with keys no other test uses, and raw commands behind the store's back: one helper
// instead of a copy per test file.
#ifndef HOLDFAST_TESTS_SUPPORT_REDIS_SERVERS_HPP
#define HOLDFAST_TESTS_SUPPORT_REDIS_SERVERS_HPP

#include <hiredis/hiredis.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <initializer_list>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "holdfast/stores/detail/redis_resp.hpp"
#include "holdfast/stores/redis_options.hpp"
#include "real_servers.hpp"

namespace hf_test {

// Options for the shared Redis, every key (leases, counter, wait queues) under the hash tag
// "{<tag>-<random>}" so that runs and test files never meet. Outside CI, without a server, a
// loud skip and nullopt; in CI a failure (.ci/servers always starts one).
inline std::optional<holdfast::redis_options> shared_redis_options(std::string_view tag) {
  std::optional<std::string> port = env("HOLDFAST_REDIS_PORT");
  if (!port) {
    if (in_ci()) FAIL("HOLDFAST_REDIS_PORT is not set (run .ci/servers start)");
    loud_skip("no Redis: HOLDFAST_REDIS_PORT unset (start one with bash .ci/servers start)");
    return std::nullopt;
  }
  holdfast::redis_options o;
  o.port = std::stoi(*port);
  o.host = env("HOLDFAST_REDIS_HOST").value_or("127.0.0.1");
  o.password = env("HOLDFAST_REDIS_PASSWORD").value_or("");
  const std::string slot = "{" + std::string(tag) + "-" + random_tag() + "}";
  o.key_prefix = slot + ":lease:";
  o.counter_key = slot + ":token";
  o.wait_prefix = slot + ":wait:";
  return o;
}

// One command on a connection of the test's own (AUTH first when `o` has a password): its integer
// reply, or -1000 if the reply is not an integer.
inline long long redis_admin_int(const holdfast::redis_options& o,
                                 const std::vector<std::string>& args) {
  redisContext* c = redisConnect(o.host.c_str(), o.port);
  REQUIRE(c != nullptr);
  REQUIRE(c->err == 0);
  if (!o.password.empty()) {
    freeReplyObject(redisCommand(c, "AUTH %b", o.password.data(), o.password.size()));
  }
  std::vector<const char*> argv;
  std::vector<std::size_t> lens;
  for (const std::string& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  auto* r = static_cast<redisReply*>(
      redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data()));
  REQUIRE(r != nullptr);
  const long long v = r->type == REDIS_REPLY_INTEGER ? r->integer : -1000;
  freeReplyObject(r);
  redisFree(c);
  return v;
}

// One command on 127.0.0.1:`port` over a connection of its own, behind the store's back (no AUTH:
// for the servers a test starts itself). `timeout` bounds the connect and the reply. The reply, or
// nullptr if either failed (Sentinel kills clients' connections while it reconfigures a server).
inline holdfast::detail::redis_reply_ptr redis_try_command(
    int port, std::initializer_list<std::string> args,
    std::chrono::milliseconds timeout = std::chrono::seconds(2)) {
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(timeout).count();
  const struct timeval tv {
    static_cast<time_t>(us / 1000000), static_cast<suseconds_t>(us % 1000000)
  };
  redisContext* c = redisConnectWithTimeout("127.0.0.1", port, tv);
  if (c == nullptr || c->err != 0) {
    redisFree(c);
    return nullptr;
  }
  redisSetTimeout(c, tv);
  std::vector<const char*> argv;
  std::vector<std::size_t> lens;
  for (const std::string& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  void* r = redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data());
  redisFree(c);
  return holdfast::detail::redis_reply_ptr(static_cast<redisReply*>(r));
}

// Kills every connection named `name` (CLIENT SETNAME) on 127.0.0.1:`port`, as a server timeout
// or restart drops an idle one: CLIENT LIST, then CLIENT KILL ID each (by name only: the server
// may be shared). No AUTH, as redis_try_command. \returns how many it killed.
inline int redis_kill_named(int port, const std::string& name) {
  holdfast::detail::redis_reply_ptr list = redis_try_command(port, {"CLIENT", "LIST"});
  if (!list || list->str == nullptr) return 0;
  int killed = 0;
  std::istringstream in(std::string(list->str, list->len));
  for (std::string line; std::getline(in, line);) {
    if (line.find(" name=" + name + " ") == std::string::npos || line.compare(0, 3, "id=") != 0) {
      continue;
    }
    holdfast::detail::redis_reply_ptr k =
        redis_try_command(port, {"CLIENT", "KILL", "ID", line.substr(3, line.find(' ') - 3)});
    killed += k && k->type == REDIS_REPLY_INTEGER && k->integer == 1 ? 1 : 0;
  }
  return killed;
}

// How many connections are subscribed to `channel` (PUBSUB NUMSUB), over a connection of the
// test's own (AUTH first when `o` has a password); -1000 if the reply has another shape.
inline long long redis_subscribers(const holdfast::redis_options& o, const std::string& channel) {
  redisContext* c = redisConnect(o.host.c_str(), o.port);
  REQUIRE(c != nullptr);
  REQUIRE(c->err == 0);
  if (!o.password.empty()) {
    freeReplyObject(redisCommand(c, "AUTH %b", o.password.data(), o.password.size()));
  }
  auto* r =
      static_cast<redisReply*>(redisCommand(c, "PUBSUB NUMSUB %b", channel.data(), channel.size()));
  REQUIRE(r != nullptr);
  const long long v =
      r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[1]->type == REDIS_REPLY_INTEGER
          ? r->element[1]->integer
          : -1000;
  freeReplyObject(r);
  redisFree(c);
  return v;
}

// The length of `key`'s wait queue (redis_store's hand-off queue).
inline long long redis_queued(const holdfast::redis_options& o, const std::string& key) {
  return redis_admin_int(o, {"LLEN", o.wait_prefix + key});
}

}  // namespace hf_test

#endif  // HOLDFAST_TESTS_SUPPORT_REDIS_SERVERS_HPP
