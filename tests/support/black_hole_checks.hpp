// SPDX-License-Identifier: MIT
// tests/support/black_hole_checks.hpp - check_acquire_bounded: a blocking acquire() against a
// store whose server takes connections and never answers (a black_hole) returns within its
// timeout plus a small margin, however long the store's own connect and command timeouts are
// (the tests give 10 s), with timeout or store_unavailable and a message that names the
// endpoint. Before the fix, PostgreSQL and ZooKeeper spent a whole connect_timeout per attempt
// and per give-back (15 s for acquire(3 s) in a trial). Shared by test_black_hole_*.cpp.
#ifndef HOLDFAST_TESTS_SUPPORT_BLACK_HOLE_CHECKS_HPP
#define HOLDFAST_TESTS_SUPPORT_BLACK_HOLE_CHECKS_HPP

#include <catch2/catch.hpp>

#include <chrono>
#include <string>

#include "black_hole.hpp"
#include "holdfast/error.hpp"
#include "holdfast/lease.hpp"

namespace hf_test {

/// acquire(s, "k", `ttl`, 2 s) ends within 3 s with timeout or store_unavailable, and its
/// report's message contains `endpoint`.
template <class Store>
void check_acquire_bounded(Store& s, const std::string& endpoint, std::chrono::milliseconds ttl) {
  holdfast::acquire_report report;
  holdfast::acquire_options<> o;
  o.report = &report;
  const auto t0 = std::chrono::steady_clock::now();
  auto l = holdfast::acquire(s, "k", ttl, std::chrono::seconds(2), o);
  const auto took = std::chrono::steady_clock::now() - t0;
  INFO("took " << std::chrono::duration_cast<std::chrono::milliseconds>(took).count() << " ms, "
               << report.attempts << " attempts: " << report.last_store_message);
  REQUIRE_FALSE(l);
  CHECK((l.error() == holdfast::errc::timeout || l.error() == holdfast::errc::store_unavailable));
  CHECK(took < std::chrono::seconds(3));
  CHECK(report.last_store_message.find(endpoint) != std::string::npos);
}

}  // namespace hf_test

#endif  // HOLDFAST_TESTS_SUPPORT_BLACK_HOLE_CHECKS_HPP
