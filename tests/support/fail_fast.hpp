// SPDX-License-Identifier: MIT
// tests/support/fail_fast.hpp - check_fails_fast: a blocking acquire with a 5-minute budget on a
// misconfigured store must answer at once (one store call, well under 3 s) with the expected
// code, and keep the store's text in its acquire_report. Shared by the real-store test files.
#ifndef HOLDFAST_TESTS_SUPPORT_FAIL_FAST_HPP
#define HOLDFAST_TESTS_SUPPORT_FAIL_FAST_HPP

#include <catch2/catch.hpp>

#include <chrono>
#include <string>

#include "holdfast/error.hpp"
#include "holdfast/lease.hpp"

namespace hf_test {

/// Runs acquire(store, "k", 1 s TTL, 5 min timeout) and checks it fails fast with `expected`.
/// Returns its report (attempts, last store error and text).
template <class Store>
holdfast::acquire_report check_fails_fast(Store& store, holdfast::errc expected) {
  holdfast::acquire_report report;
  holdfast::acquire_options<> o;
  o.report = &report;
  const auto t0 = std::chrono::steady_clock::now();
  auto l =
      holdfast::acquire(store, "k", std::chrono::milliseconds(3000), std::chrono::minutes(5), o);
  const auto took = std::chrono::steady_clock::now() - t0;
  INFO(store.last_error_message());
  CHECK(l.error() == expected);
  CHECK(report.attempts == 1);  // no retry
  CHECK(took < std::chrono::seconds(3));
  CHECK(report.last_store_error == expected);
  CHECK(report.last_store_message == store.last_error_message());
  return report;
}

}  // namespace hf_test

#endif  // HOLDFAST_TESTS_SUPPORT_FAIL_FAST_HPP
