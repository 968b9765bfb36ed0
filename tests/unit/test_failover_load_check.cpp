// SPDX-License-Identifier: MIT
// tests/unit/test_failover_load_check.cpp - negative controls of the failover load tests'
// checker (tests/support/failover_load.hpp): hand-made records and fence logs with each fault
// the checker must report (a write admitted after a newer token, two owners under one token, a
// write from no holder, an admitted write missing from the fence's log, a lost acknowledged
// grant, in one history and across two lives), and the clean histories it must pass. No
// servers; a few ms.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "../support/failover_load.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_failover_load_check {

namespace fl = failover_load;

namespace {

constexpr fl::ns ms = 1000000;

fl::grant_told grant(std::uint64_t token, const std::string& owner, fl::ns told, fl::ns until,
                     bool acked = false, fl::ns release_sent = 0) {
  fl::grant_told g;
  g.token = token;
  g.owner = owner;
  g.asked = told - ms;
  g.told = told;
  g.valid_until = until;
  g.acked = acked;
  g.release_sent = release_sent;
  return g;
}

fl::write_told write(std::uint64_t token, const std::string& owner, fl::ns at,
                     const std::string& outcome = "ok") {
  fl::write_told w;
  w.token = token;
  w.owner = owner;
  w.at = at;
  w.outcome = outcome;
  return w;
}

bool says(const fl::verdict& v, const std::string& what) {
  for (const std::string& s : v.violations) {
    if (s.find(what) != std::string::npos) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("failover load check: a clean history passes", "[failover-load]") {
  fl::records r;
  r.grants = {grant(5, "A", 100 * ms, 900 * ms, true, 200 * ms),
              grant(6, "B", 300 * ms, 1100 * ms, false, 400 * ms),
              grant(fl::life_gap + 2, "C", 3000 * ms, 3900 * ms, true, 3100 * ms)};
  r.writes = {write(5, "A", 150 * ms), write(6, "B", 350 * ms),
              write(5, "A", 380 * ms, "stale_token"), write(fl::life_gap + 2, "C", 3050 * ms)};
  const std::vector<fl::admitted> log = {{5, "A"}, {6, "B"}, {fl::life_gap + 2, "C"}};
  const fl::verdict v = fl::check(log, r, 1000 * ms);
  CHECK(v.violations.empty());
  CHECK(v.lost_acked == 0);
  CHECK(v.lost_unacked == 0);
  CHECK(v.write_outcomes.at("stale_token") == 1);
  REQUIRE(v.liveness_s);
  CHECK(*v.liveness_s == Approx(2.05));
  CHECK(v.newest_before_fault == 6);
}

TEST_CASE("failover load check: each fault of the fence's log is reported", "[failover-load]") {
  fl::records r;
  r.grants = {grant(5, "A", 100 * ms, 900 * ms), grant(6, "B", 1000 * ms, 1900 * ms),
              grant(6, "C", 2000 * ms, 2900 * ms)};
  SECTION("a write admitted after a newer token") {
    r.writes = {write(5, "A", 150 * ms), write(6, "B", 1050 * ms), write(5, "A", 1060 * ms)};
    const fl::verdict v = fl::check({{5, "A"}, {6, "B"}, {5, "A"}}, r, 0);
    CHECK(says(v, "admitted after the newer 6"));
  }
  SECTION("two holders under one token") {
    r.writes = {write(6, "B", 1050 * ms), write(6, "C", 2050 * ms)};
    const fl::verdict v = fl::check({{6, "B"}, {6, "C"}}, r, 0);
    CHECK(says(v, "a second holder under one token"));
    CHECK(v.reissued_tokens == 1);
  }
  SECTION("a write from no holder of its token") {
    const fl::verdict v = fl::check({{7, "A"}}, r, 0);
    CHECK(says(v, "no worker was granted this token"));
  }
  SECTION("a write told admitted that the fence's log lacks") {
    r.writes = {write(5, "A", 150 * ms), write(5, "A", 160 * ms)};
    const fl::verdict v = fl::check({{5, "A"}}, r, 0);
    CHECK(says(v, "2 writes told admitted, 1 in the fence's log"));
  }
}

TEST_CASE("failover load check: a lost grant is the lower token's; acknowledged ones fail",
          "[failover-load]") {
  fl::records r;
  SECTION("one history: B granted over A's live grant; A acknowledged") {
    r.grants = {grant(5, "A", 100 * ms, 1000 * ms, true), grant(6, "B", 500 * ms, 1400 * ms)};
    const fl::verdict v = fl::check({}, r, 0);
    CHECK(v.lost_acked == 1);
    CHECK(says(v, "acknowledged grant 5 (A) lost"));
  }
  SECTION("one history: the same with A unacknowledged is counted, not failed") {
    r.grants = {grant(5, "A", 100 * ms, 1000 * ms), grant(6, "B", 500 * ms, 1400 * ms, true)};
    const fl::verdict v = fl::check({}, r, 0);
    CHECK(v.lost_unacked == 1);
    CHECK(v.violations.empty());
  }
  SECTION("two lives: an old primary's grant while the next life's holder holds") {
    r.grants = {grant(fl::life_gap + 3, "A", 100 * ms, 1000 * ms, true),
                grant(9, "B", 200 * ms, 900 * ms, false)};
    fl::verdict v = fl::check({}, r, 0);
    CHECK(v.lost_unacked == 1);  // B's, on the server about to be demoted
    CHECK(v.violations.empty());
    r.grants[1].acked = true;  // acknowledged there by a replica not yet re-pointed
    v = fl::check({}, r, 0);
    CHECK(says(v, "acknowledged grant 9 (B) lost"));
  }
  SECTION("no overlap: A asked to release before B was told") {
    r.grants = {grant(5, "A", 100 * ms, 1000 * ms, true, 400 * ms),
                grant(6, "B", 500 * ms, 1400 * ms)};
    const fl::verdict v = fl::check({}, r, 0);
    CHECK(v.lost_acked == 0);
    CHECK(v.lost_unacked == 0);
  }
}

}  // namespace test_failover_load_check
