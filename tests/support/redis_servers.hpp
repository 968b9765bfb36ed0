// SPDX-License-Identifier: MIT
// The shared Redis server of the store tests (.ci/servers: HOLDFAST_REDIS_HOST / _PORT /
// _PASSWORD), with keys no other test uses: one helper instead of a copy per test file.
#ifndef HOLDFAST_TESTS_SUPPORT_REDIS_SERVERS_HPP
#define HOLDFAST_TESTS_SUPPORT_REDIS_SERVERS_HPP

#include <catch2/catch.hpp>

#include <optional>
#include <string>
#include <string_view>

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

}  // namespace hf_test

#endif  // HOLDFAST_TESTS_SUPPORT_REDIS_SERVERS_HPP
