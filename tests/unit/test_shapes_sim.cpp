// SPDX-License-Identifier: MIT
// The lock shapes inside the simulator (testing/shapes_workload.hpp): acquire_all() on the ordered
// path and reentrant_holder under delays, lost requests and replies, store errors, pauses and
// drift, judged by "all or nothing", "progress", "re-entry held", "re-entry freed" and S1-S5; the
// seeded search must catch each negative control, by the property it breaks. Cost: ~2 s (Debug,
// load 8), with prop_shapes.cpp ~4 s together; 3,000 more seeds ran clean at -O1 (11 s).
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>

#include "holdfast/testing/shapes_workload.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_shapes_sim {

namespace ht = holdfast::testing;

namespace {

const char* expected_property(ht::shape_mutant m) {
  switch (m) {
    case ht::shape_mutant::multi_unordered:
      return "progress";
    case ht::shape_mutant::multi_keeps_partial:
      return "all or nothing";
    case ht::shape_mutant::reentry_releases_at_first_exit:
      return "re-entry held";
    case ht::shape_mutant::reentry_counts_retries:
      return "re-entry freed";
    case ht::shape_mutant::rw_writer_while_reader:
      return "read-write exclusion";
    case ht::shape_mutant::rw_upgrade_in_place:
      return "fenced write order";
    case ht::shape_mutant::rw_admits_reissued:
      return "";  // S1 (two holders under one token): the checker's, on the writers' events
    case ht::shape_mutant::none:
      break;
  }
  return "";
}

}  // namespace

TEST_CASE("shapes: the shipped acquire_all and re-entry keep every property", "[shapes]") {
  std::uint32_t lossy_runs = 0;
  for (std::uint64_t seed = 0; seed < 100; ++seed) {
    ht::seeded_source src(seed);
    const ht::shape_verdict v = ht::run_shapes_schedule(src);
    INFO("seed " << seed << "\n" << v.text());
    REQUIRE(v.ok());
    lossy_runs += v.lost_lives > 0 ? 1 : 0;
  }
  CHECK(lossy_runs > 10);  // the read-write phase lost grants (lagging restarts) in some runs
}

TEST_CASE("shapes: the seeded search catches every negative control", "[shapes]") {
  // The first catching seed of each control, as measured (3000 seeds: unordered 62%, keeps
  // partial 55%, releases at first exit 99.9%, counts retries 92% of schedules caught;
  // rw_admits_reissued 6.7% of 1000, first at seed 52: a lost writer's token must be issued
  // again to the next writer, each writing; its runs are the read-write phase alone, ~1 ms).
  for (ht::shape_mutant m : ht::all_shape_mutants) {
    const bool rare = m == ht::shape_mutant::rw_admits_reissued;
    std::uint64_t caught_at = 0;
    ht::shape_verdict v;
    for (std::uint64_t seed = 0; seed < (rare ? 300 : 50); ++seed) {
      ht::seeded_source src(seed);
      v = ht::run_shapes_schedule(src, m);
      caught_at = seed;
      if (!v.ok()) break;
    }
    INFO("mutant " << ht::to_string(m) << ": " << v.text());
    REQUIRE(!v.ok());
    CHECK(v.property == expected_property(m));
    if (rare) {
      CHECK(v.base.report().find("two holders under one token") != std::string::npos);
      CHECK(caught_at < 100);
    } else {
      CHECK(caught_at < 5);
    }
  }
}

TEST_CASE("shapes: the same seed gives the same verdict", "[shapes]") {
  ht::seeded_source a(3), b(3);
  const ht::shape_verdict x = ht::run_shapes_schedule(a, ht::shape_mutant::multi_keeps_partial);
  const ht::shape_verdict y = ht::run_shapes_schedule(b, ht::shape_mutant::multi_keeps_partial);
  CHECK(x.text() == y.text());
  CHECK(x.property == "all or nothing");
}

}  // namespace test_shapes_sim
