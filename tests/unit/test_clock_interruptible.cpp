// SPDX-License-Identifier: MIT
// clock.hpp: manual_clock's interruptible sleep (sleep_until(tp, stop) + wake_sleepers()) and its
// sleeper count, which excludes sleepers that are due or have a wake-up to answer, so that
// `advance(); wait_for_sleepers(n)` waits for the woken thread to be asleep again.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <thread>

#include "holdfast/clock.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_clock_interruptible {

using namespace std::chrono_literals;
using holdfast::manual_clock;

TEST_CASE("interruptible clock detection", "[clock]") {
  STATIC_REQUIRE(holdfast::is_interruptible_clock_v<manual_clock>);
  STATIC_REQUIRE_FALSE(holdfast::is_interruptible_clock_v<holdfast::steady_clock>);
  STATIC_REQUIRE_FALSE(holdfast::is_interruptible_clock_v<int>);
}

TEST_CASE("sleep_until(tp, stop) returns at once when stop holds on entry", "[clock]") {
  manual_clock c;
  CHECK_FALSE(c.sleep_until(manual_clock::time_point(1h), [] { return true; }));
  CHECK(c.sleep_until(manual_clock::time_point(0s), [] { return true; }));  // already due
  CHECK(c.sleepers() == 0);
}

TEST_CASE("wake_sleepers() ends a sleep whose stop holds", "[clock][concurrency]") {
  manual_clock c;
  std::atomic<bool> stop{false};
  std::atomic<int> result{-1};
  std::thread t(
      [&] { result = c.sleep_until(manual_clock::time_point(1h), [&] { return stop.load(); }); });
  REQUIRE(c.wait_for_sleepers(1, 20s));
  c.wake_sleepers();  // stop() is false: back to sleep, and counted again
  REQUIRE(c.wait_for_sleepers(1, 20s));
  CHECK(result == -1);
  stop = true;
  c.wake_sleepers();
  CHECK(c.sleepers() == 0);  // no longer counted the moment it has a wake-up to answer
  t.join();
  CHECK(result == 0);
  CHECK(c.now() == manual_clock::time_point(0s));
}

TEST_CASE("a sleeper stops counting the moment its deadline is reached", "[clock][concurrency]") {
  manual_clock c;
  std::atomic<int> woke{0};
  std::thread t([&] {
    c.sleep_until(manual_clock::time_point(10s));
    ++woke;
    c.sleep_until(manual_clock::time_point(20s));
    ++woke;
  });
  REQUIRE(c.wait_for_sleepers(1, 20s));
  c.advance(10s);  // the sleeper is due: it no longer counts, even before it has returned ...
  REQUIRE(c.wait_for_sleepers(1, 20s));
  CHECK(woke == 1);  // ... so waiting for a sleeper now means waiting for the second sleep
  c.advance(10s);
  t.join();
  CHECK(woke == 2);
}

TEST_CASE("a manual_clock moved backwards ends every sleep", "[clock][concurrency]") {
  // A sleeper waiting for an instant must re-read the clock after a jump back, not wait for the
  // lost time again (issue "time at the edges", 2).
  holdfast::manual_clock clock;
  clock.set(holdfast::manual_clock::time_point(6s));
  std::atomic<int> result{-1};
  std::thread sleeper([&] {
    result =
        clock.sleep_until(holdfast::manual_clock::time_point(10s), [] { return false; }) ? 1 : 0;
  });
  REQUIRE(clock.wait_for_sleepers(1, 10s));
  clock.advance(-100s);
  sleeper.join();
  CHECK(result == 0);  // interrupted, not reached
  CHECK(clock.sleepers() == 0);
  // The plain sleep returns too; a forward move short of the deadline does not end it.
  std::atomic<bool> done{false};
  std::thread plain([&] {
    clock.sleep_until(holdfast::manual_clock::time_point(10s));
    done = true;
  });
  REQUIRE(clock.wait_for_sleepers(1, 10s));
  clock.advance(1s);
  CHECK(clock.wait_for_sleepers(1, 10s));
  CHECK_FALSE(done);
  clock.advance(-1ns);
  plain.join();
  CHECK(done);
}

}  // namespace test_clock_interruptible
