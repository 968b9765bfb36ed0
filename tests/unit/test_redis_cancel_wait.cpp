// SPDX-License-Identifier: MIT
// tests/unit/test_redis_cancel_wait.cpp - redis_store's cancellable waits (store.hpp): with a token
// that can be stopped, a blocking acquire and a campaign wait for the holder's release with the
// same attempts (and term step) as without one, and a stop during the wait ends it within a bound,
// its queue entry taken out. Real server (HOLDFAST_REDIS_PORT from .ci/servers), real threads,
// bounded waits (tests/support/cancel_wait_checks.hpp).
#include <hiredis/hiredis.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <optional>
#include <string>

#include "../support/cancel_wait_checks.hpp"
#include "../support/real_servers.hpp"
#include "../support/redis_servers.hpp"
#include "holdfast/stores/redis.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_redis_cancel_wait {

using holdfast::redis_options;
using holdfast::redis_store;

namespace {

std::optional<redis_options> server() {
  return hf_test::shared_redis_options("hfc");
}

}  // namespace

static_assert(holdfast::can_cancel_wait_for_release_v<redis_store, holdfast::steady_clock>);
static_assert(holdfast::can_cancel_watch_release_v<redis_store, holdfast::steady_clock>);

TEST_CASE("redis cancel: a stoppable token costs a waiting acquire no attempt; a stop ends it",
          "[redis][cancel_wait][concurrency]") {
  const std::optional<redis_options> o = server();
  if (!o) return;
  redis_store holder(*o);
  redis_store waiter(*o);
  hf_test::check_cancellable_wait_costs_nothing(holder, waiter, "k-" + hf_test::random_tag(8));
  hf_test::check_stop_ends_store_wait(holder, waiter, "c", [&](const std::string& key) {
    return hf_test::redis_queued(*o, key) ==
           0;  // the entry was taken out: no hand-off goes to nobody
  });
}

TEST_CASE("redis cancel: a campaign with a stoppable token takes the same term step as without",
          "[redis][cancel_wait][election][concurrency]") {
  const std::optional<redis_options> o = server();
  if (!o) return;
  redis_store a(*o);
  redis_store b(*o);
  hf_test::check_campaign_terms_do_not_jump(a, b, "job-" + hf_test::random_tag(8));
}

TEST_CASE("redis: next_leader sees a hand-off between its read and its watch at once",
          "[redis][cancel_wait][election]") {
  const std::optional<redis_options> o = server();
  if (!o) return;
  redis_store a(*o);
  redis_store b(*o);
  redis_store observed(*o);
  hf_test::check_next_leader_sees_handoff(a, b, observed);
}

}  // namespace test_redis_cancel_wait
