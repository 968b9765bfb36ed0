// SPDX-License-Identifier: MIT
// How fuzz/corpus/{lease_schedule,clock_chaos}/ were made, kept runnable so they can be remade
// when the schedule encoding changes (hidden: run it by name, it writes files):
//
//   HOLDFAST_CORPUS_OUT=fuzz/corpus build/<dir>/tests/holdfast_unit_tests "[.make_corpus]"
//
// Seeds are recorded runs of the seeded PRNG (recording_source -> bytes that byte_source, and so
// the fuzz targets, replay exactly), plus, for fuzz_lease_schedule, one shrunk input per mutant
// that catches it: schedules known to reach the interesting corners. Every seed passes on the
// correct stack (checked here, and by the replay_<target> tests in every build), and every
// committed catches-<mutant> still catches its mutant (checked below, so an encoding change that
// leaves them stale fails the suite instead of quietly emptying the corpus of its corners).
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <holdfast/testing/testing.hpp>
#include <iterator>
#include <optional>
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

std::vector<std::uint8_t> read(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  REQUIRE(in.good());
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// The committed fuzz/corpus/lease_schedule/, found from this file's path (absolute in CMake
/// builds; relative to the build directory, where `meson test` runs, in Meson's).
std::filesystem::path committed_lease_corpus() {
  return std::filesystem::path(__FILE__).parent_path() / ".." / ".." / "fuzz" / "corpus" /
         "lease_schedule";
}

}  // namespace

TEST_CASE("each committed catches-<mutant> seed catches its mutant and passes the correct stack",
          "[testing/corpus]") {
  const std::filesystem::path dir = committed_lease_corpus();
  INFO("corpus directory: " << dir.string());
  REQUIRE(std::filesystem::is_directory(dir));
  for (const std::filesystem::directory_entry& e : std::filesystem::directory_iterator(dir)) {
    const std::string file = e.path().filename().string();
    const std::string prefix = "catches-";
    if (file.compare(0, prefix.size(), prefix) != 0) continue;
    INFO("seed: " << file);
    const std::optional<mutant> m = mutant_from_string(file.substr(prefix.size()));
    REQUIRE(m.has_value());  // a seed named for no mutant (renamed or removed) is stale too
    const std::vector<std::uint8_t> bytes = read(e.path());
    run_options o;  // as fuzz_lease_schedule with HOLDFAST_MUTANT=<mutant>: defaults + mutation
    o.mutation = *m;
    byte_source broken(bytes.data(), bytes.size());
    CHECK_FALSE(run_schedule(broken, o).result.ok());
    byte_source correct(bytes.data(), bytes.size());
    const verdict v = run_schedule(correct, run_options{}).result;
    INFO(v.report());
    CHECK(v.ok());
  }
  for (mutant m : all_mutants) {  // and every mutant has one (remake the corpus for a new one)
    INFO("missing: catches-" << to_string(m));
    CHECK(std::filesystem::exists(dir / (std::string("catches-") + to_string(m))));
  }
}

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
