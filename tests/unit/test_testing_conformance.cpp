// Tests of holdfast/testing/conformance.hpp: the shipped memory_store conforms; every broken store
// is reported (by a contract check or by a schedule, named, with its seed); a store that keeps its
// own time is checked as far as possible and the rest is reported as skipped.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <holdfast/clock.hpp>
#include <holdfast/stores/memory.hpp>
#include <holdfast/testing/testing.hpp>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

using namespace holdfast::testing;

TEST_CASE("check_store: the shipped memory_store conforms", "[testing/conformance]") {
  conformance_options o;
  o.schedules = 200;
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

namespace {
// A handle to a store that outlives it, as a reopened database file does.
struct reopened {
  std::shared_ptr<holdfast::memory_store<sim_clock>> s;
  holdfast::result<holdfast::grant> try_acquire(std::string_view k, std::string_view o,
                                                std::chrono::milliseconds ttl) {
    return s->try_acquire(k, o, ttl);
  }
  holdfast::result<holdfast::grant> renew(std::string_view k, std::string_view o,
                                          holdfast::fencing_token t,
                                          std::chrono::milliseconds ttl) {
    return s->renew(k, o, t, ttl);
  }
  holdfast::result<void> release(std::string_view k, std::string_view o,
                                 holdfast::fencing_token t) {
    return s->release(k, o, t);
  }
};
}  // namespace

TEST_CASE("check_store: durable re-creates the store through the factory at each restart",
          "[testing/conformance]") {
  // A store that keeps its state in memory is not durable: made anew at a restart, its token
  // counter starts over, and the kit must see it (the factory is really called again).
  conformance_options o;
  o.durable = true;
  const conformance_report r = check_store(
      [](sim_clock c) { return std::make_unique<holdfast::memory_store<sim_clock>>(c); }, o);
  INFO(r.summary());
  REQUIRE_FALSE(r.ok());
  REQUIRE_THAT(r.summary(), Catch::Contains("is back") && Catch::Contains("violated"));
  // A factory taking a store_env gets one directory per schedule, the same across restarts;
  // this one keeps a memory_store per directory, so reopening it finds the state again.
  std::vector<std::string> dirs;
  std::map<std::string, std::shared_ptr<holdfast::memory_store<sim_clock>>> disk;
  int calls = 0;
  conformance_options few;
  few.schedules = 30;
  few.durable = true;
  const conformance_report e = check_store(
      [&](sim_clock c, const store_env& env) {
        ++calls;
        if (env.restarts == 0) dirs.push_back(env.dir);
        REQUIRE(std::filesystem::is_directory(env.dir));
        REQUIRE(env.dir == dirs.back());
        auto& s = disk[env.dir];
        if (!s) s = std::make_shared<holdfast::memory_store<sim_clock>>(c);
        return reopened{s};
      },
      few);
  INFO(e.summary());
  REQUIRE(e.ok());
  // The contract checks, the coarse-clock check (T2), then one per schedule.
  REQUIRE(dirs.size() == 2 + 30);
  REQUIRE(calls > static_cast<int>(dirs.size()));  // restarts called it again
  for (const std::string& d : dirs) REQUIRE_FALSE(std::filesystem::exists(d));
}

TEST_CASE(
    "check_store: a store that forgets its clock's tick is reported, by contract and by "
    "schedule",
    "[testing/conformance]") {
  // Issue "time at the edges" (1): a store on a clock that reads whole seconds (rounded down)
  // ending a 1500 ms grant at reading + TTL. The contract check names T2 coarse clock; the
  // schedules (store clocks with ticks of 1 ms, 10 ms, 1 s) find it as S3.
  const conformance_report r = check_store(
      [](sim_clock c) { return mutant_store<sim_clock>(c, mutant::ignores_clock_tick); });
  INFO(r.summary());
  REQUIRE_FALSE(r.ok());
  REQUIRE(r.failures.size() == 2);
  REQUIRE_THAT(r.failures.front(), Catch::StartsWith("T2 coarse clock: on a store clock that "
                                                     "reads whole seconds"));
  REQUIRE_THAT(r.failures.back(), Catch::Contains("S3 exclusive grants violated"));
  // The correct mutant_store (it adds the tick) passes both.
  const conformance_report ok =
      check_store([](sim_clock c) { return mutant_store<sim_clock>(c, mutant::none); });
  INFO(ok.summary());
  REQUIRE(ok.ok());
}

TEST_CASE("check_store: expire_now checks T2 on a store that keeps its own clock",
          "[testing/conformance]") {
  holdfast::manual_clock clock;
  conformance_options o;
  o.schedules = 10;
  o.expire_now = [&clock](std::string_view) { clock.advance(std::chrono::hours(1)); };
  const conformance_report r = check_store(
      [&clock] { return std::make_unique<holdfast::memory_store<holdfast::manual_clock>>(clock); },
      o);
  INFO(r.summary());
  REQUIRE(r.ok());
  REQUIRE_THAT(r.summary(), Catch::Contains("T2 expiry to the tick"));
  REQUIRE_THAT(r.summary(), !Catch::Contains("T2 expiry: the store's clock is not injectable"));
  // Negative control: a store on its own clock that revives an expired lease is caught.
  const conformance_report bad = check_store(
      [&clock] {
        return mutant_store<holdfast::manual_clock>(clock, mutant::renew_revives_expired);
      },
      o);
  INFO(bad.summary());
  REQUIRE_THAT(bad.summary(), Catch::Contains("T2 no revival"));
}
