// SPDX-License-Identifier: MIT
// Unit tests for holdfast/error.hpp: the errc codes, their category, and the contention/transient
// classification that acquire()'s retry loop relies on.
#include <catch2/catch.hpp>

#include <iterator>
#include <set>
#include <string>
#include <system_error>

#include "holdfast/error.hpp"
#include "test_support.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_error {

namespace {

using holdfast::errc;

constexpr errc all_codes[] = {
    errc::busy,
    errc::lease_lost,
    errc::not_holder,
    errc::stale_token,
    errc::store_unavailable,
    errc::timeout,
    errc::invalid_argument,
    errc::protocol_error,
    errc::token_exhausted,
    errc::caught_exception,
    errc::token_reissued,
    errc::misconfigured,
    errc::permission_denied,
    errc::cancelled,
    errc::grant_not_durable,
};

}  // namespace

TEST_CASE("errc converts to std::error_code in holdfast's category", "[error]") {
  const std::error_code ec = errc::busy;  // implicit, through is_error_code_enum + ADL
  CHECK(ec.category() == holdfast::error_category());
  CHECK(ec.value() == static_cast<int>(errc::busy));
  CHECK(ec == errc::busy);
  CHECK(ec != errc::lease_lost);
  CHECK(holdfast::make_error_code(errc::timeout) == errc::timeout);
  CHECK(std::string(holdfast::error_category().name()) == "holdfast");
  // One category object for the whole program: comparisons across calls must agree.
  CHECK(&holdfast::error_category() == &holdfast::error_category());
}

TEST_CASE("every errc is non-zero and has its own message", "[error]") {
  std::set<std::string> messages;
  std::set<int> values;
  for (errc e : all_codes) {
    const std::error_code ec = e;
    CHECK(ec);  // non-zero: zero means success in std::error_code
    const std::string msg = ec.message();
    CHECK_FALSE(msg.empty());
    CHECK(msg != "unknown holdfast error");
    messages.insert(msg);
    values.insert(ec.value());
  }
  CHECK(messages.size() == std::size(all_codes));
  CHECK(values.size() == std::size(all_codes));
  // A value outside the enum (e.g. from a newer peer) still gets a message, not UB.
  CHECK(holdfast::error_category().message(0) == "unknown holdfast error");
  CHECK(holdfast::error_category().message(9999) == "unknown holdfast error");
}

TEST_CASE("holdfast codes do not compare equal to other categories' codes with the same value",
          "[error]") {
  // errc::busy is 1, and so is EPERM in the generic category: they must not be confused.
  const std::error_code eperm(1, std::generic_category());
  CHECK(eperm != errc::busy);
  CHECK_FALSE(holdfast::is_contention(eperm));
  const std::error_code busy = errc::busy;
  CHECK(busy != eperm);
}

TEST_CASE("is_contention is true for busy only", "[error]") {
  for (errc e : all_codes) {
    INFO(Catch::StringMaker<errc>::convert(e));
    CHECK(holdfast::is_contention(e) == (e == errc::busy));
  }
  CHECK_FALSE(holdfast::is_contention(std::error_code{}));
}

TEST_CASE(
    "is_transient: busy, store_unavailable, timeout, grant_not_durable and foreign errors "
    "may clear up",
    "[error]") {
  for (errc e : all_codes) {
    INFO(Catch::StringMaker<errc>::convert(e));
    const bool expected = e == errc::busy || e == errc::store_unavailable || e == errc::timeout ||
                          e == errc::grant_not_durable;
    CHECK(holdfast::is_transient(e) == expected);
  }
  // Success is not an error at all.
  CHECK_FALSE(holdfast::is_transient(std::error_code{}));
  // A user's store may report transport errors in its own category: retried.
  CHECK(holdfast::is_transient(std::make_error_code(std::errc::connection_refused)));
  CHECK(holdfast::is_transient(std::error_code(5, std::system_category())));
}

TEST_CASE("is_permanent: misconfiguration, refused credentials and bad input are never retried",
          "[error]") {
  for (errc e : all_codes) {
    INFO(Catch::StringMaker<errc>::convert(e));
    const bool expected =
        e == errc::misconfigured || e == errc::permission_denied || e == errc::invalid_argument;
    CHECK(holdfast::is_permanent(e) == expected);
    if (expected) CHECK_FALSE(holdfast::is_transient(e));
  }
  CHECK_FALSE(holdfast::is_permanent(std::error_code{}));
  CHECK_FALSE(holdfast::is_permanent(std::make_error_code(std::errc::connection_refused)));
}

TEST_CASE("to_string(errc) names every enumerator, and nothing else", "[error]") {
  std::set<std::string> names;
  for (errc e : all_codes) {
    const char* n = holdfast::to_string(e);
    REQUIRE(n != nullptr);
    names.insert(n);
  }
  CHECK(names.size() == std::size(all_codes));
  CHECK(std::string(holdfast::to_string(errc::busy)) == "busy");
  CHECK(std::string(holdfast::to_string(errc::caught_exception)) == "caught_exception");
  CHECK(holdfast::to_string(static_cast<errc>(0)) == nullptr);
  CHECK(holdfast::to_string(static_cast<errc>(9999)) == nullptr);
  static_assert(holdfast::to_string(errc::timeout)[0] == 't', "usable in constant expressions");
}

}  // namespace test_error
