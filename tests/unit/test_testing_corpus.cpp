// SPDX-License-Identifier: MIT
// How fuzz/corpus/{lease_schedule,clock_chaos}/ were made, kept runnable so they can be remade
// when the schedule encoding changes (hidden: run it by name, it writes files):
//
//   HOLDFAST_CORPUS_OUT=fuzz/corpus build/<dir>/tests/holdfast_unit_tests "[.make_corpus]"
//
// Seeds are recorded runs of the seeded PRNG (recording_source -> bytes that byte_source, and so
// the fuzz targets, replay exactly), plus, for fuzz_lease_schedule, one shrunk input per mutant
// that catches it: schedules known to reach the interesting corners. Every seed passes on the
// correct stack (checked here, and by the replay_<target> tests in every build).
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <holdfast/testing/testing.hpp>
#include <string>
#include <vector>

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_testing_corpus {

using namespace holdfast::testing;

namespace {

void write(const std::filesystem::path& file, const std::vector<std::uint8_t>& bytes) {
  std::ofstream out(file, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

void seeds(const std::filesystem::path& dir, const run_options& o, int count) {
  std::filesystem::create_directories(dir);
  for (int seed = 0; seed < count; ++seed) {
    seeded_source prng(static_cast<std::uint64_t>(seed));
    recording_source rec(prng);
    const run_result r = run_schedule(rec, o);
    REQUIRE(r.result.ok());
    char name[32];
    std::snprintf(name, sizeof name, "seed-%03d", seed);
    write(dir / name, rec.to_bytes());
  }
}

}  // namespace

TEST_CASE("make the fuzz seed corpus", "[.make_corpus]") {
  // Hidden tags do not hide a case from an exclusion-only filter such as "~[concurrency]" (how
  // ctest runs the suite), so without the variable this case does nothing.
  const char* out = std::getenv("HOLDFAST_CORPUS_OUT");
  if (out == nullptr) return;
  const std::filesystem::path root(out);
  seeds(root / "lease_schedule", run_options{}, 24);
  for (mutant m : all_mutants) {
    run_options o;
    o.mutation = m;
    for (std::uint64_t seed = 0;; ++seed) {
      seeded_source prng(seed);
      recording_source rec(prng);
      if (run_schedule(rec, o).result.ok()) continue;
      const shrink_result s = shrink_failure(rec.to_bytes(), o);
      byte_source correct(s.bytes.data(), s.bytes.size());
      REQUIRE(run_schedule(correct).result.ok());
      write(root / "lease_schedule" / (std::string("catches-") + to_string(m)), s.bytes);
      break;
    }
  }
  run_options chaos;
  chaos.faults.clock_jumps = true;
  chaos.faults.drift_beyond_bound = true;
  chaos.store_faults.restarts = true;
  seeds(root / "clock_chaos", chaos, 24);
}

}  // namespace test_testing_corpus
