// SPDX-License-Identifier: MIT
// tests/unit/test_postgres_cancel_wait.cpp - postgres_store's cancellable waits (store.hpp): with a
// token that can be stopped, a blocking acquire and a campaign wait for the holder's release with
// the same attempts as without one, so the terms (nextval on every attempt, busy ones too) take
// the same step; a stop during the wait ends it within a bound. Real server
// (HOLDFAST_PG_CONNINFO from .ci/servers), real threads, bounded waits
// (tests/support/cancel_wait_checks.hpp).
#include <catch2/catch.hpp>

#include <optional>
#include <string>

#include "../support/cancel_wait_checks.hpp"
#include "../support/postgres_admin.hpp"
#include "../support/real_servers.hpp"
#include "holdfast/stores/postgres.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_postgres_cancel_wait {

using holdfast::postgres_options;
using holdfast::postgres_store;

namespace {

std::optional<postgres_options> server() {
  std::optional<std::string> conninfo = hf_test::env("HOLDFAST_PG_CONNINFO");
  if (!conninfo) {
    if (hf_test::in_ci()) FAIL("HOLDFAST_PG_CONNINFO is not set (run .ci/servers start)");
    hf_test::loud_skip("no PostgreSQL: HOLDFAST_PG_CONNINFO unset");
    return std::nullopt;
  }
  postgres_options o;
  o.conninfo = *conninfo;
  o.table = "hf_cancel_" + hf_test::random_tag(8);
  return hf_test::dropped_at_exit(o);  // its tables and sequence
}

}  // namespace

static_assert(holdfast::can_cancel_wait_for_release_v<postgres_store, holdfast::steady_clock>);
static_assert(holdfast::can_cancel_watch_release_v<postgres_store, holdfast::steady_clock>);

TEST_CASE("postgres cancel: a stoppable token costs a waiting acquire no attempt; a stop ends it",
          "[postgres][cancel_wait][concurrency]") {
  const std::optional<postgres_options> o = server();
  if (!o) return;
  postgres_store holder(*o);
  postgres_store waiter(*o);
  hf_test::check_cancellable_wait_costs_nothing(holder, waiter, "k");
  // PostgreSQL keeps no queue: a waiter leaves nothing behind but its LISTEN session.
  hf_test::check_stop_ends_store_wait(holder, waiter, "c", [](const std::string&) { return true; });
}

TEST_CASE("postgres cancel: a campaign with a stoppable token takes the same term step as without",
          "[postgres][cancel_wait][election][concurrency]") {
  const std::optional<postgres_options> o = server();
  if (!o) return;
  postgres_store a(*o);
  postgres_store b(*o);
  hf_test::check_campaign_terms_do_not_jump(a, b, "job", hf_test::tokens_issued::to_this_test);
}

TEST_CASE("postgres: next_leader sees a hand-off between its read and its watch at once",
          "[postgres][cancel_wait][election]") {
  const std::optional<postgres_options> o = server();
  if (!o) return;
  postgres_store a(*o);
  postgres_store b(*o);
  postgres_store observed(*o);
  hf_test::check_next_leader_sees_handoff(a, b, observed);
}

}  // namespace test_postgres_cancel_wait
