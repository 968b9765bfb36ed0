// SPDX-License-Identifier: MIT
// tests/support/failover_load_redis.hpp - the Redis fence of the multi-process fenced workloads
// (failover_load.hpp), shared by test_failover_load_redis.cpp (a Sentinel failover) and
// test_redis_cluster_load.cpp (a slot migrated): a worker's fenced write is a redis_fence on a
// Redis of its own (127.0.0.1, not failing over with the lease store) whose admitted write
// appends "<token> <owner> <tag>" to a log there in the same script (run_redis_fenced_worker),
// and the parent reads that log back (redis_fence_log, redis_newest_logged).
#ifndef HOLDFAST_TESTS_SUPPORT_FAILOVER_LOAD_REDIS_HPP
#define HOLDFAST_TESTS_SUPPORT_FAILOVER_LOAD_REDIS_HPP

#include <hiredis/hiredis.h>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "failover_load.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/stores/redis_fence.hpp"
#include "redis_servers.hpp"

namespace failover_load {

/// The fence's log at `log_key` on 127.0.0.1:`port`, in admission order (fails the test if the
/// log cannot be read within 2 s).
inline std::vector<admitted> redis_fence_log(int port, const std::string& log_key) {
  std::vector<admitted> out;
  auto r =
      hf_test::redis_try_command(port, {"LRANGE", log_key, "0", "-1"}, std::chrono::seconds(2));
  REQUIRE(r);
  REQUIRE(r->type == REDIS_REPLY_ARRAY);
  for (std::size_t i = 0; i < r->elements; ++i) {
    std::istringstream in(std::string(r->element[i]->str, r->element[i]->len));
    admitted a;
    in >> a.token >> a.owner;
    out.push_back(a);
  }
  return out;
}

/// The token of the fence log's newest entry (0: none, or no answer within 2 s).
inline std::uint64_t redis_newest_logged(int port, const std::string& log_key) {
  auto r = hf_test::redis_try_command(port, {"LINDEX", log_key, "-1"}, std::chrono::seconds(2));
  const std::string s = r && r->str != nullptr ? std::string(r->str, r->len) : std::string();
  return std::strtoull(s.c_str(), nullptr, 10);
}

/// run_worker over `store` with each write fenced by a redis_fence on the settings'
/// "fence_port" (127.0.0.1), key "fence_key", appending to the list "log_key".
template <class Store>
void run_redis_fenced_worker(Store& store, const settings& s) {
  holdfast::redis_options fo;
  fo.port = static_cast<int>(s.num("fence_port"));
  holdfast::redis_fence fence(fo);
  const std::string fence_key = s.get("fence_key"), log_key = s.get("log_key");
  run_worker(
      store,
      [&](holdfast::fencing_token t, std::string_view owner, const std::string& tag) {
        const std::string entry = std::to_string(t.value()) + " " + std::string(owner) + " " + tag;
        return fence.execute(fence_key, t, owner, {"RPUSH", log_key, entry});
      },
      s);
}

}  // namespace failover_load

#endif  // HOLDFAST_TESTS_SUPPORT_FAILOVER_LOAD_REDIS_HPP
