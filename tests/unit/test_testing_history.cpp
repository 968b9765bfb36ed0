// SPDX-License-Identifier: MIT
// Tests of holdfast/testing/history.hpp: how a history names outcomes. The names are the errc
// enumerators' own (error.hpp's to_string(errc) is the one table), so a timeline never prints a
// holdfast error under another error's name or as foreign_error.
#include <catch2/catch.hpp>

#include <holdfast/error.hpp>
#include <holdfast/testing/history.hpp>
#include <string>
#include <system_error>
#include <utility>

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_testing_history {

using holdfast::errc;
using namespace holdfast::testing;

TEST_CASE("history: every errc outcome prints under its enumerator's name", "[testing/history]") {
  // Written down, not derived: a renamed or missing entry must fail here.
  const std::pair<errc, const char*> names[] = {
      {errc::busy, "busy"},
      {errc::lease_lost, "lease_lost"},
      {errc::not_holder, "not_holder"},
      {errc::stale_token, "stale_token"},
      {errc::store_unavailable, "store_unavailable"},
      {errc::timeout, "timeout"},
      {errc::invalid_argument, "invalid_argument"},
      {errc::protocol_error, "protocol_error"},
      {errc::token_exhausted, "token_exhausted"},
      {errc::caught_exception, "caught_exception"},
      {errc::token_reissued, "token_reissued"},
      {errc::misconfigured, "misconfigured"},
      {errc::permission_denied, "permission_denied"},
      {errc::cancelled, "cancelled"},
      {errc::grant_not_durable, "grant_not_durable"},
  };
  int expected_value = 1;  // the enumerators are contiguous from 1
  for (const auto& [e, name] : names) {
    INFO(name);
    CHECK(static_cast<int>(e) == expected_value++);
    CHECK(std::string(outcome_name(to_outcome(holdfast::make_error_code(e)))) == name);
  }
  // The list above is every errc: the value after the last one is no holdfast error.
  CHECK(holdfast::error_category().message(expected_value) == "unknown holdfast error");
  CHECK(std::string(outcome_name(0)) == "ok");
  CHECK(std::string(outcome_name(not_applied)) == "not_applied");
  CHECK(std::string(outcome_name(to_outcome(std::make_error_code(std::errc::io_error)))) ==
        "foreign_error");
}

}  // namespace test_testing_history
