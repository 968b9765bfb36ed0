// SPDX-License-Identifier: MIT
// Tests of holdfast/testing/decision.hpp: the three ways choices reach the simulator, and the
// conventions the rest relies on (0 is benign, exhausted byte input answers 0, recordings replay).
#include <catch2/catch.hpp>

#include <cstdint>
#include <holdfast/testing/decision.hpp>
#include <vector>

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_testing_decision {

using holdfast::testing::byte_source;
using holdfast::testing::pick;
using holdfast::testing::recording_source;
using holdfast::testing::seeded_source;

TEST_CASE("seeded_source: same seed, same answers; answers stay in range", "[testing/decision]") {
  seeded_source a(7);
  seeded_source b(7);
  seeded_source c(8);
  bool differs = false;
  for (std::uint32_t n = 1; n < 2000; ++n) {
    const std::uint32_t x = a.choose(n);
    REQUIRE(x < n);
    REQUIRE(x == b.choose(n));
    differs = differs || x != c.choose(n);
  }
  REQUIRE(differs);
  REQUIRE(a.choose(0) == 0);
  REQUIRE(a.choose(1) == 0);
  REQUIRE_FALSE(a.exhausted());
  REQUIRE(a.seed() == 7);
}

TEST_CASE("seeded_source: every answer of a small range occurs", "[testing/decision]") {
  seeded_source s(1);
  std::vector<int> seen(6, 0);
  for (int i = 0; i < 600; ++i) ++seen[s.choose(6)];
  for (int count : seen) REQUIRE(count > 50);
}

TEST_CASE("byte_source: one byte per small choice, modulo n; exhausted input answers 0",
          "[testing/decision]") {
  const std::uint8_t bytes[] = {5, 200, 0x34, 0x12, 9};
  byte_source s(bytes, sizeof bytes);
  REQUIRE(s.choose(1) == 0);  // a single option consumes nothing
  REQUIRE(s.choose(10) == 5);
  REQUIRE(s.choose(7) == 200 % 7);
  REQUIRE(s.choose(0x10000) == 0x1234);  // two bytes, little-endian
  REQUIRE(s.remaining() == 1);
  REQUIRE_FALSE(s.exhausted());
  REQUIRE(s.choose(0x10000) == 0);  // not enough bytes left: 0, and the input is used up
  REQUIRE(s.exhausted());
  REQUIRE(s.choose(3) == 0);
  byte_source empty(nullptr, 0);
  REQUIRE(empty.exhausted());
  REQUIRE(empty.choose(100) == 0);
}

TEST_CASE("recording_source: its bytes make byte_source give the same answers",
          "[testing/decision]") {
  seeded_source prng(99);
  recording_source rec(prng);
  std::vector<std::uint32_t> answers;
  const std::uint32_t ns[] = {2, 3, 256, 257, 70000, 1, 17};
  for (int round = 0; round < 50; ++round) {
    for (std::uint32_t n : ns) answers.push_back(rec.choose(n));
  }
  const std::vector<std::uint8_t> bytes = rec.to_bytes();
  byte_source replay(bytes.data(), bytes.size());
  std::size_t i = 0;
  for (int round = 0; round < 50; ++round) {
    for (std::uint32_t n : ns) REQUIRE(replay.choose(n) == answers[i++]);
  }
}

TEST_CASE("pick: weights decide, zero weights never win, answer 0 is the first option",
          "[testing/decision]") {
  const std::uint8_t zero[] = {0};
  byte_source z(zero, 1);
  REQUIRE(pick(z, {0, 3, 1}) == 1);  // 0 maps to the first non-zero weight
  seeded_source s(3);
  int counts[3] = {0, 0, 0};
  for (int i = 0; i < 4000; ++i) ++counts[pick(s, {3, 0, 1})];
  REQUIRE(counts[1] == 0);
  REQUIRE(counts[0] > 2 * counts[2]);
  REQUIRE(counts[2] > 500);
  REQUIRE(pick(s, {0, 0}) == 0);
}

}  // namespace test_testing_decision
