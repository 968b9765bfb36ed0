// SPDX-License-Identifier: MIT
// Smoke test of the build: the umbrella header links into a Catch2 suite, and one lease round
// trip works. The real per-header suites live beside this file ([lease], [fence], ...).
#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <holdfast/holdfast.hpp>
#include <optional>
#include <thread>
#include <vector>

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_smoke {

using namespace std::chrono_literals;

TEST_CASE("a lease round trip admits its token downstream", "[smoke]") {
  holdfast::manual_clock clock;
  holdfast::memory_store<holdfast::manual_clock> store(clock);
  holdfast::acquire_options<holdfast::manual_clock> opts;
  opts.clock = clock;

  auto first = holdfast::try_acquire(store, "orders", 10s, opts);
  REQUIRE(first);
  REQUIRE_FALSE(holdfast::try_acquire(store, "orders", 10s, opts));  // a second owner: busy

  holdfast::fence_gate gate;
  REQUIRE(gate.admit(first.value()));
  REQUIRE(first.value().release());

  auto second = holdfast::try_acquire(store, "orders", 10s, opts);
  REQUIRE(second);
  REQUIRE(first.value().token() < second.value().token());
  REQUIRE(gate.admit(second.value()));
  REQUIRE_FALSE(gate.admit(first.value()));  // the old holder is fenced off
}

// Gives the TSan job (ctest -L concurrency) real threads to watch from the first commit on. The
// winners' leases are kept until every thread is done: a lease released by its destructor at the
// end of a thread would let a later thread win too.
TEST_CASE("contending threads: exactly one wins a live lease", "[smoke][concurrency]") {
  using lease_type = holdfast::lease<holdfast::memory_store<>>;
  holdfast::memory_store<> store;
  std::vector<std::optional<lease_type>> held(4);
  std::vector<std::thread> threads;
  for (auto& slot : held) {
    threads.emplace_back([&store, &slot] {
      auto l = holdfast::try_acquire(store, "orders", 60s);
      if (l) slot.emplace(std::move(l.value()));
    });
  }
  for (auto& t : threads) t.join();
  REQUIRE(std::count_if(held.begin(), held.end(), [](const auto& s) { return s.has_value(); }) ==
          1);
}

}  // namespace test_smoke
