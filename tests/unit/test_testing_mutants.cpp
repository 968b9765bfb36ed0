// SPDX-License-Identifier: MIT
// The negative controls (holdfast/testing/mutants.hpp): every deliberately broken variant must be
// caught by the seeded-PRNG search within a small budget, and named by the invariant it breaks.
// This is the fuzzer's assertion for builds without libFuzzer (gcc); the clang builds also run
// libFuzzer itself against each mutant (fuzz/CMakeLists.txt), and tests/property/ asserts the
// same for rapidcheck.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdio>
#include <holdfast/testing/testing.hpp>
#include <string>

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_testing_mutants {

using namespace holdfast::testing;

namespace {

// Schedules the search may try per mutant. The slowest mutant needs about 10 on average (fuzz/
// README.md has the table), so missing all of them by bad luck has odds below 1e-40.
constexpr std::uint64_t search_budget = 1000;

struct found {
  std::uint64_t cases = 0;  // schedules run, the catching one included (0: not caught)
  verdict result;
};

found search(mutant m, std::uint64_t first_seed) {
  run_options o;
  o.mutation = m;
  for (std::uint64_t i = 0; i < search_budget; ++i) {
    seeded_source src(first_seed + i);
    run_result r = run_schedule(src, o);
    if (!r.result.ok()) return {i + 1, std::move(r.result)};
  }
  return {};
}

}  // namespace

TEST_CASE("mutants: the seeded search catches every negative control, by the right invariant",
          "[testing/mutants]") {
  for (mutant m : all_mutants) {
    for (std::uint64_t first : {0u, 100000u}) {  // two independent searches per mutant
      const found f = search(m, first);
      INFO("mutant " << to_string(m) << ", search from seed " << first);
      REQUIRE(f.cases > 0);
      INFO("caught after " << f.cases << " schedules:\n" << f.result.report());
      CHECK(is_expected_violation(m, f.result.violated));
      CHECK_THAT(f.result.timeline,
                 Catch::Contains("<- " + std::string(tag(f.result.violated)) + " violated"));
    }
  }
}

TEST_CASE("mutants: the shipped fences refuse the re-issued tokens token_only_fence admits",
          "[testing/mutants]") {
  // The runs that catch token_only_fence (lagging restarts, effective_run_options), with the
  // shipped fences: S1 holds, and some writes are refused as token_reissued (the store re-issued
  // a lost grant's token to a second holder). 300 seeds: 13% of such schedules had a refusal.
  run_options c;
  c.mutation = mutant::token_only_fence;
  run_options o = effective_run_options(c);
  o.mutation = mutant::none;
  std::uint64_t refused = 0;
  for (std::uint64_t seed = 0; seed < 300; ++seed) {
    seeded_source src(seed);
    const run_result r = run_schedule(src, o);
    INFO("seed " << seed << "\n" << r.result.report());
    REQUIRE(r.result.ok());
    for (const event& e : r.log.events) {
      if (e.kind == event_kind::write &&
          e.outcome == static_cast<outcome_code>(holdfast::errc::token_reissued)) {
        ++refused;
        break;
      }
    }
  }
  CHECK(refused >= 10);
}

TEST_CASE("mutants: check_store names the equal-token rule over a store that loses its last grant",
          "[testing/mutants]") {
  // Issue 20.4: the kit's report, for a correct durable store restarted from lagging copies
  // behind fences with the old equal-token rule, names S1 and the cause. (The kit's own store:
  // its copies are copies of its state, so no files are written; file_store takes 20 s here.)
  conformance_options o;
  o.durable = true;
  o.schedules = 60;
  o.progress = progress_mode::off;
  o.run.mutation = mutant::token_only_fence;
  const conformance_report r =
      check_store([](sim_clock c) { return mutant_store<sim_clock>(c, mutant::none); }, o);
  INFO(r.summary());
  REQUIRE_FALSE(r.ok());
  CHECK_THAT(r.summary(), Catch::Contains("S1 fenced writes violated") &&
                              Catch::Contains("two holders under one token (the store lost "
                                              "grants: token_reissued)"));
}

TEST_CASE("mutants: mutant_store without a mutation is a correct store", "[testing/mutants]") {
  auto make = [](sim_clock c) { return mutant_store<sim_clock>(c, mutant::none); };
  for (std::uint64_t seed = 0; seed < 200; ++seed) {
    seeded_source src(seed);
    const run_result r = run_schedule(src, make);
    INFO("seed " << seed << "\n" << r.result.report());
    REQUIRE(r.result.ok());
  }
}

TEST_CASE("mutants: names round-trip; store mutants are told apart", "[testing/mutants]") {
  for (mutant m : all_mutants) {
    REQUIRE(mutant_from_string(to_string(m)) == m);
    REQUIRE(expected_violation(m) != invariant::none);
  }
  REQUIRE(mutant_from_string("none") == mutant::none);
  REQUIRE_FALSE(mutant_from_string("no_such_mutant"));
  REQUIRE(is_store_mutant(mutant::token_after_grant));
  REQUIRE_FALSE(is_store_mutant(mutant::no_fence));
  REQUIRE_FALSE(is_store_mutant(mutant::validity_from_reply));
  for (queue_mutant m : all_queue_mutants) {  // the hand-off queue's (workload_handoff.hpp)
    REQUIRE(queue_mutant_from_string(to_string(m)) == m);
  }
  REQUIRE(queue_mutant_from_string("none") == queue_mutant::none);
  REQUIRE_FALSE(queue_mutant_from_string("no_fence"));
}

}  // namespace test_testing_mutants
