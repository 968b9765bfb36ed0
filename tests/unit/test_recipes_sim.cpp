// SPDX-License-Identifier: MIT
// The coordination recipes inside the simulator (holdfast/testing/workload_recipes.hpp, where
// the schedules and their controls are described), judged by its checker, with a seeded search
// per recipe and per negative control:
//
//   - election: S1-S5 hold; a leader that believes it leads until on_stopped_leading tells it
//     otherwise (client-go's callback is asynchronous) is caught by S4.
//   - semaphore: S1-S6 and O1 hold (S6: never more than N live permits) while the store applies a
//     shorter TTL than asked now and then; a count-then-grant semaphore is caught by S6, the
//     semaphore before issue 22 (a lost reply's slot forgotten, the kind of Curator #835) by O1.
//   - waiting without polling: S1-S5 and L1 hold with every release notification lost; a wait
//     that sleeps to the caller's deadline instead of the holder's expiry is caught by L1, a
//     holder that trusts the TTL it asked instead of the one the store applied (on acquire or
//     renew) by S4.
#include <catch2/catch.hpp>

#include <cstdint>
#include <optional>

#include "holdfast/testing/testing.hpp"
#include "holdfast/testing/workload_recipes.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_recipes_sim {

namespace {

namespace ht = holdfast::testing;
using ht::recipe_mutant;

ht::verdict run_election_schedule(std::uint64_t seed, recipe_mutant m) {
  ht::seeded_source src(seed);
  return ht::run_election_schedule(src, seed, m);
}

ht::verdict run_semaphore_schedule(std::uint64_t seed, recipe_mutant m) {
  ht::seeded_source src(seed);
  return ht::run_semaphore_schedule(src, seed, m);
}

ht::verdict run_waiting_schedule(std::uint64_t seed, recipe_mutant m) {
  ht::seeded_source src(seed);
  return ht::run_waiting_schedule(src, seed, m);
}

}  // namespace

TEST_CASE("election schedules keep S1-S5 under pauses, drift and store faults",
          "[election][testing]") {
  for (std::uint64_t seed = 1; seed <= 150; ++seed) {
    const ht::verdict v = run_election_schedule(seed, recipe_mutant::none);
    INFO("seed " << seed << "\n" << v.report());
    REQUIRE(v.ok());
  }
}

TEST_CASE("a leader trusting on_stopped_leading instead of is_leader() is caught (control)",
          "[election][testing]") {
  std::optional<ht::verdict> caught;
  for (std::uint64_t seed = 1; seed <= 300 && !caught; ++seed) {
    ht::verdict v = run_election_schedule(seed, recipe_mutant::leader_trusts_callback);
    if (!v.ok()) caught = std::move(v);
  }
  REQUIRE(caught);
  INFO(caught->report());
  CHECK(caught->violated == ht::invariant::s4_holder_belief);
}

TEST_CASE("semaphore schedules keep S1-S6 (at most N live permits) under faults",
          "[semaphore][testing]") {
  for (std::uint64_t seed = 1; seed <= 150; ++seed) {
    const ht::verdict v = run_semaphore_schedule(seed, recipe_mutant::none);
    INFO("seed " << seed << "\n" << v.report());
    REQUIRE(v.ok());
  }
}

TEST_CASE("a count-then-grant semaphore is caught exceeding N live permits (control)",
          "[semaphore][testing]") {
  std::optional<ht::verdict> caught;
  std::uint64_t seed = 1;
  for (; seed <= 300 && !caught; ++seed) {
    ht::verdict v = run_semaphore_schedule(seed, recipe_mutant::count_then_grant);
    if (!v.ok()) caught = std::move(v);
  }
  REQUIRE(caught);
  INFO("seed " << seed - 1 << "\n" << caught->report());
  CHECK(caught->violated == ht::invariant::s6_permit_bound);
  CHECK_THAT(caught->report(), Catch::Contains("the bound is 2"));
}

TEST_CASE("a semaphore that forgets a slot whose reply was lost is caught by O1 (control)",
          "[semaphore][testing]") {
  std::optional<ht::verdict> caught;
  std::uint64_t seed = 1;
  for (; seed <= 300 && !caught; ++seed) {
    ht::verdict v = run_semaphore_schedule(seed, recipe_mutant::forgets_lost_slot);
    if (!v.ok()) caught = std::move(v);
  }
  REQUIRE(caught);
  INFO("seed " << seed - 1 << "\n" << caught->report());
  CHECK(caught->violated == ht::invariant::o1_orphaned_grant);
}

TEST_CASE("waiting schedules keep S1-S5 and L1 with every release notification lost",
          "[lease][wait_for_release][testing]") {
  for (std::uint64_t seed = 1; seed <= 150; ++seed) {
    const ht::verdict v = run_waiting_schedule(seed, recipe_mutant::none);
    INFO("seed " << seed << "\n" << v.report());
    REQUIRE(v.ok());
  }
}

TEST_CASE("a wait that sleeps past the holder's expiry is caught by L1 (control)",
          "[lease][wait_for_release][testing]") {
  std::optional<ht::verdict> caught;
  for (std::uint64_t seed = 1; seed <= 150 && !caught; ++seed) {
    ht::verdict v = run_waiting_schedule(seed, recipe_mutant::wait_until_deadline);
    if (!v.ok()) caught = std::move(v);
  }
  REQUIRE(caught);
  INFO(caught->report());
  CHECK(caught->violated == ht::invariant::l1_liveness);
}

TEST_CASE("a holder trusting the TTL it asked, not the one the store applied, is caught (control)",
          "[lease][testing]") {
  std::optional<ht::verdict> caught;
  std::uint64_t seed = 1;
  for (; seed <= 150 && !caught; ++seed) {
    ht::verdict v = run_waiting_schedule(seed, recipe_mutant::trusts_asked_ttl);
    if (!v.ok()) caught = std::move(v);
  }
  REQUIRE(caught);
  INFO("seed " << seed - 1 << "\n" << caught->report());
  CHECK(caught->violated == ht::invariant::s4_holder_belief);
}

}  // namespace test_recipes_sim
