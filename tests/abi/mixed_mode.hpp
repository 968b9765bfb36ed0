// SPDX-License-Identifier: MIT
// What both halves of the mixed-mode link test run: a lease and a quorum over
// memory stores, on a manual clock, with every outcome checked. Defined inline in both TUs, as
// user code including holdfast is, so an ODR clash would show up as one TU running the other's
// code with the wrong layout.
#ifndef HOLDFAST_TESTS_ABI_MIXED_MODE_HPP
#define HOLDFAST_TESTS_ABI_MIXED_MODE_HPP

#include <chrono>

#include "holdfast/holdfast.hpp"

#define HOLDFAST_ABI_TEST_STRINGIFY2(x) #x
#define HOLDFAST_ABI_TEST_STRINGIFY(x) HOLDFAST_ABI_TEST_STRINGIFY2(x)

namespace holdfast_abi_test {

const char* abi_name_exc();
const char* abi_name_noexc();
int exercise_exc();
int exercise_noexc();

/// 0 on success, the number of the failed check otherwise.
inline int exercise() {
  using namespace std::chrono_literals;
  holdfast::manual_clock clock;
  holdfast::memory_store<holdfast::manual_clock> store(clock);
  holdfast::acquire_options<holdfast::manual_clock> o;
  o.clock = clock;
  auto l = holdfast::try_acquire(store, "abi", 10s, o);
  if (!l) return 1;
  if (!l->valid()) return 2;
  clock.advance(5s);
  if (!l->renew()) return 3;
  if (!l->release()) return 4;

  holdfast::memory_store<holdfast::manual_clock> m1(clock), m2(clock), m3(clock);
  holdfast::quorum_store<holdfast::memory_store<holdfast::manual_clock>> q({&m1, &m2, &m3});
  auto g = q.try_acquire("abi", "owner-1", 10s);
  if (!g) return 5;
  if (!q.release("abi", "owner-1", g->token)) return 6;
  return 0;
}

}  // namespace holdfast_abi_test

#endif  // HOLDFAST_TESTS_ABI_MIXED_MODE_HPP
