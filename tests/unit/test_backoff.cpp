// SPDX-License-Identifier: MIT
// Unit tests for holdfast/backoff.hpp: exponential backoff with full jitter (Brooker 2015): attempt
// n waits uniformly in [0, min(max_delay, initial * multiplier^n)], reproducibly from a seed.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <vector>

#include "holdfast/backoff.hpp"
#include "test_support.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_backoff {

using holdfast::backoff;
using holdfast::backoff_options;
using namespace std::chrono_literals;
using ns = std::chrono::nanoseconds;

namespace {

backoff_options seeded(std::uint64_t seed) {
  backoff_options o;
  o.seed = seed;
  return o;
}

std::vector<ns> first_delays(backoff_options o, int n) {
  backoff b(o);
  std::vector<ns> out;
  for (int i = 0; i < n; ++i) out.push_back(b.next_delay());
  return out;
}

}  // namespace

TEST_CASE("backoff_options::check", "[backoff]") {
  const backoff_options d;
  CHECK_FALSE(d.check());
  CHECK(d.initial == 10ms);
  CHECK(d.max_delay == 1s);
  CHECK(d.multiplier == 2.0);
  CHECK(d.max_attempts == 0);
  CHECK_FALSE(d.seed.has_value());

  const std::error_code bad = holdfast::errc::invalid_argument;
  backoff_options o;
  o.initial = 0ns;
  CHECK(o.check() == bad);
  o.initial = -1ms;
  CHECK(o.check() == bad);
  o = {};
  o.max_delay = o.initial - 1ns;
  CHECK(o.check() == bad);
  o.max_delay = o.initial;  // equal is fine: a constant bound
  CHECK_FALSE(o.check());
  o = {};
  o.multiplier = 0.999;
  CHECK(o.check() == bad);
  o.multiplier = std::numeric_limits<double>::quiet_NaN();
  CHECK(o.check() == bad);
  o.multiplier = -2.0;
  CHECK(o.check() == bad);
  o.multiplier = 1.0;  // no growth is allowed
  CHECK_FALSE(o.check());
  o.multiplier = std::numeric_limits<double>::infinity();  // jumps straight to the cap
  CHECK_FALSE(o.check());
}

TEST_CASE("each delay lies in [0, min(max_delay, initial * multiplier^n)]", "[backoff]") {
  backoff_options o;
  o.initial = 1ms;
  o.max_delay = 100ms;
  o.multiplier = 3.0;
  for (std::uint64_t seed = 0; seed < 200; ++seed) {
    o.seed = seed;
    backoff b(o);
    long double bound = 1e6L;  // ns
    for (int n = 0; n < 12; ++n) {
      const ns d = b.next_delay();
      INFO("seed " << seed << " attempt " << n);
      CHECK(d >= 0ns);
      CHECK(static_cast<long double>(d.count()) <= (bound < 1e8L ? bound : 1e8L));
      bound *= 3;
    }
    CHECK(b.attempts() == 12);
  }
}

TEST_CASE("the jitter is full: delays spread over the whole [0, bound]", "[backoff]") {
  // 1000 seeds, first delay with bound 1000 ns: a fixed, deterministic sample.
  backoff_options o;
  o.initial = 1000ns;
  o.max_delay = 1000ns;
  ns lo = ns::max(), hi = ns::min();
  long double sum = 0;
  for (std::uint64_t seed = 1; seed <= 1000; ++seed) {
    o.seed = seed;
    const ns d = backoff(o).next_delay();
    lo = std::min(lo, d);
    hi = std::max(hi, d);
    sum += static_cast<long double>(d.count());
  }
  CHECK(lo < 50ns);   // not "equal jitter" (which never goes below bound/2)
  CHECK(hi > 950ns);  // not a fixed fraction of the bound
  CHECK(sum / 1000 > 400);
  CHECK(sum / 1000 < 600);
}

TEST_CASE("the bound grows to max_delay and stays there", "[backoff]") {
  backoff_options o = seeded(7);
  o.initial = 1ms;
  o.max_delay = 8ms;
  o.multiplier = 2.0;
  // After many attempts, delays still respect the cap, and reach well into it.
  backoff b(o);
  ns hi = 0ns;
  for (int n = 0; n < 2000; ++n) {
    const ns d = b.next_delay();
    REQUIRE(d <= 8ms);
    if (n >= 3) hi = std::max(hi, d);
  }
  CHECK(hi > 7ms);
}

TEST_CASE("extreme options never overflow", "[backoff]") {
  backoff_options o = seeded(3);
  o.initial = 1ns;
  o.max_delay = ns::max();
  o.multiplier = 1e300;
  backoff b(o);
  CHECK(b.next_delay() <= 1ns);
  for (int n = 0; n < 100; ++n) {
    const ns d = b.next_delay();
    REQUIRE(d >= 0ns);
    REQUIRE(d <= ns::max());
  }
  o.multiplier = std::numeric_limits<double>::infinity();
  backoff inf(o);
  for (int n = 0; n < 100; ++n) REQUIRE(inf.next_delay() >= 0ns);
  // initial == max_delay == max: every delay is a full-range draw, still non-negative.
  o.initial = ns::max();
  o.multiplier = 2;
  backoff top(o);
  for (int n = 0; n < 100; ++n) REQUIRE(top.next_delay() >= 0ns);
}

TEST_CASE("a seed replays the same schedule; different seeds differ", "[backoff]") {
  CHECK(first_delays(seeded(42), 20) == first_delays(seeded(42), 20));
  CHECK(first_delays(seeded(42), 20) != first_delays(seeded(43), 20));
  // Unseeded backoffs draw their seed from the OS: two of them practically never agree on 20
  // delays of up to ~1 s each.
  CHECK(first_delays(backoff_options{}, 20) != first_delays(backoff_options{}, 20));
}

TEST_CASE("attempt counting and max_attempts", "[backoff]") {
  backoff unlimited(seeded(1));
  CHECK(unlimited.attempts() == 0);
  CHECK_FALSE(unlimited.exhausted(0));
  CHECK_FALSE(unlimited.exhausted(std::numeric_limits<std::uint32_t>::max()));

  backoff_options o = seeded(1);
  o.max_attempts = 3;
  backoff three(o);
  CHECK_FALSE(three.exhausted(0));
  CHECK_FALSE(three.exhausted(2));
  CHECK(three.exhausted(3));
  CHECK(three.exhausted(4));
  (void)three.next_delay();
  (void)three.next_delay();
  CHECK(three.attempts() == 2);
}

}  // namespace test_backoff
