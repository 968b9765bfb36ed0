// Tests of holdfast/testing/conformance.hpp: the shipped memory_store conforms; every broken store
// is reported (by a contract check or by a schedule, named, with its seed); a store that keeps its
// own time is checked as far as possible and the rest is reported as skipped.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <holdfast/stores/memory.hpp>
#include <holdfast/testing/testing.hpp>
#include <memory>
#include <sstream>
#include <string>

using namespace holdfast::testing;

TEST_CASE("check_store: the shipped memory_store conforms", "[testing/conformance]") {
  conformance_options o;
  o.schedules = 200;
  o.durable = true;  // restarts as outages with state kept: memory_store survives those
  const conformance_report r = check_store(
      [](sim_clock c) { return std::make_unique<holdfast::memory_store<sim_clock>>(c); }, o);
  INFO(r.summary());
  REQUIRE(r.ok());
  REQUIRE(static_cast<bool>(r));
  REQUIRE(r.contract_checks >= 25);
  REQUIRE(r.schedules == 200);
  REQUIRE(r.events > 200 * 20);
  // memory_store is one critical section per operation: nothing inside it to interleave, and the
  // report says so.
  REQUIRE(r.skipped.size() == 1);
  REQUIRE_THAT(r.skipped.front(), Catch::Contains("holdfast::step_point"));
  REQUIRE_THAT(r.summary(), Catch::StartsWith("store conforms"));
}

TEST_CASE("check_store: every broken store is reported", "[testing/conformance]") {
  for (mutant m : all_mutants) {
    if (!is_store_mutant(m)) continue;
    const conformance_report r =
        check_store([m](sim_clock c) { return mutant_store<sim_clock>(c, m); });
    INFO("mutant " << to_string(m) << "\n" << r.summary());
    REQUIRE_FALSE(r.ok());
    REQUIRE_THAT(r.summary(), Catch::StartsWith("store does NOT conform"));
  }
}

TEST_CASE("check_store: contract checks name the rule a store breaks", "[testing/conformance]") {
  // release_without_owner_check is caught before any schedule runs, by T3.
  const conformance_report r = check_store(
      [](sim_clock c) { return mutant_store<sim_clock>(c, mutant::release_without_owner_check); });
  REQUIRE_FALSE(r.ok());
  REQUIRE_THAT(r.failures.front(), Catch::StartsWith("T3 release by another owner"));
  // counter_reset_on_release: T1 across release.
  const conformance_report c = check_store(
      [](sim_clock k) { return mutant_store<sim_clock>(k, mutant::counter_reset_on_release); });
  REQUIRE_THAT(c.summary(), Catch::Contains("T1 across release"));
  // A failing schedule names its seed and the invariant, with a timeline.
  const conformance_report t = check_store(
      [](sim_clock k) { return mutant_store<sim_clock>(k, mutant::token_after_grant); });
  REQUIRE_THAT(t.summary(), Catch::Contains("schedule seed=") && Catch::Contains("S2 token order"));
}

TEST_CASE("check_store: a store on its own clock is checked, expiry checks are skipped",
          "[testing/conformance]") {
  conformance_options o;
  o.schedules = 100;
  const conformance_report r =
      check_store([] { return std::make_unique<holdfast::memory_store<>>(); }, o);
  INFO(r.summary());
  REQUIRE(r.ok());
  REQUIRE(r.skipped.size() == 3);
  REQUIRE_THAT(r.summary(), Catch::Contains("not explored:\n  - T2 expiry"));
  std::ostringstream os;
  os << r;
  REQUIRE(os.str() == r.summary());
}

TEST_CASE("fuzz_store: a schedule from bytes runs and returns 0 when nothing is violated",
          "[testing/conformance]") {
  const std::uint8_t bytes[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 200, 100, 50, 25};
  REQUIRE(
      fuzz_store([](sim_clock c) { return std::make_unique<holdfast::memory_store<sim_clock>>(c); },
                 bytes, sizeof bytes) == 0);
  REQUIRE(fuzz_schedule(bytes, sizeof bytes) == 0);
  REQUIRE(fuzz_schedule(nullptr, 0) == 0);
}
