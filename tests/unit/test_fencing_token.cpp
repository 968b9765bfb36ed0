// SPDX-License-Identifier: MIT
// Unit tests for holdfast/fencing_token.hpp: a strong, totally ordered, opaque 64-bit token where 0
// means "none" and UINT64_MAX is never issued.
#include <catch2/catch.hpp>

#include <cstdint>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <type_traits>
#include <unordered_set>
#include <utility>

#include "holdfast/fencing_token.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_fencing_token {

using holdfast::fencing_token;

namespace {

constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();

// Detection of arithmetic: the token has none, on purpose (nobody computes a token).
template <class T, class = void>
struct can_add_int : std::false_type {};
template <class T>
struct can_add_int<T, std::void_t<decltype(std::declval<T>() + 1)>> : std::true_type {};
template <class T, class = void>
struct can_increment : std::false_type {};
template <class T>
struct can_increment<T, std::void_t<decltype(++std::declval<T&>())>> : std::true_type {};
template <class T, class = void>
struct can_subtract : std::false_type {};
template <class T>
struct can_subtract<T, std::void_t<decltype(std::declval<T>() - std::declval<T>())>>
    : std::true_type {};

}  // namespace

TEST_CASE("the none token", "[fencing_token]") {
  constexpr fencing_token none;
  STATIC_REQUIRE(none.value() == 0);
  STATIC_REQUIRE(none.is_none());
  STATIC_REQUIRE_FALSE(none.is_issuable());
  STATIC_REQUIRE(fencing_token::none() == none);
  STATIC_REQUIRE(fencing_token(0) == none);
}

TEST_CASE("issuable tokens are 1 .. UINT64_MAX-1", "[fencing_token]") {
  STATIC_REQUIRE(fencing_token(1).is_issuable());
  STATIC_REQUIRE(fencing_token(kMax - 1).is_issuable());
  STATIC_REQUIRE_FALSE(fencing_token(kMax).is_issuable());
  STATIC_REQUIRE_FALSE(fencing_token::max().is_issuable());
  STATIC_REQUIRE(fencing_token::max().value() == kMax);
  STATIC_REQUIRE_FALSE(fencing_token::max().is_none());
}

TEST_CASE("tokens are totally ordered by value", "[fencing_token]") {
  const std::uint64_t values[] = {0, 1, 2, 33, 34, std::uint64_t{1} << 63, kMax - 1, kMax};
  for (std::uint64_t a : values) {
    for (std::uint64_t b : values) {
      const fencing_token ta(a), tb(b);
      INFO(a << " vs " << b);
      CHECK((ta == tb) == (a == b));
      CHECK((ta != tb) == (a != b));
      CHECK((ta < tb) == (a < b));
      CHECK((ta <= tb) == (a <= b));
      CHECK((ta > tb) == (a > b));
      CHECK((ta >= tb) == (a >= b));
    }
  }
  STATIC_REQUIRE(fencing_token(33) < fencing_token(34));  // usable in constant expressions
}

TEST_CASE("tokens print as #<value> or #none", "[fencing_token]") {
  CHECK(holdfast::to_string(fencing_token{}) == "#none");
  CHECK(holdfast::to_string(fencing_token(33)) == "#33");
  CHECK(holdfast::to_string(fencing_token::max()) == "#18446744073709551615");

  std::ostringstream os;
  os << fencing_token(34) << ' ' << fencing_token{};
  CHECK(os.str() == "#34 #none");

  std::wostringstream wos;  // any character type
  wos << fencing_token(7);
  CHECK(wos.str() == L"#7");
}

TEST_CASE("tokens hash by value and key unordered containers", "[fencing_token]") {
  CHECK(std::hash<fencing_token>{}(fencing_token(99)) == std::hash<std::uint64_t>{}(99));
  std::unordered_set<fencing_token> seen;
  seen.insert(fencing_token(1));
  seen.insert(fencing_token(1));
  seen.insert(fencing_token(kMax - 1));
  CHECK(seen.size() == 2);
  CHECK(seen.count(fencing_token(kMax - 1)) == 1);
  CHECK(seen.count(fencing_token(2)) == 0);
}

TEST_CASE("tokens are a strong, opaque value type without arithmetic", "[fencing_token]") {
  STATIC_REQUIRE(std::is_trivially_copyable_v<fencing_token>);
  STATIC_REQUIRE(sizeof(fencing_token) == sizeof(std::uint64_t));
  // No implicit conversions in either direction: a count, a size or a timestamp is not a token.
  STATIC_REQUIRE_FALSE(std::is_convertible_v<std::uint64_t, fencing_token>);
  STATIC_REQUIRE_FALSE(std::is_convertible_v<int, fencing_token>);
  STATIC_REQUIRE_FALSE(std::is_convertible_v<fencing_token, std::uint64_t>);
  STATIC_REQUIRE_FALSE(std::is_convertible_v<fencing_token, bool>);
  STATIC_REQUIRE(std::is_constructible_v<fencing_token, std::uint64_t>);  // explicit only
  // No arithmetic: tokens are granted, never computed.
  STATIC_REQUIRE_FALSE(can_add_int<fencing_token>::value);
  STATIC_REQUIRE_FALSE(can_increment<fencing_token>::value);
  STATIC_REQUIRE_FALSE(can_subtract<fencing_token>::value);
  // The detectors themselves can detect (a check that cannot fail proves nothing).
  STATIC_REQUIRE(can_add_int<std::uint64_t>::value);
  STATIC_REQUIRE(can_increment<std::uint64_t>::value);
  STATIC_REQUIRE(can_subtract<std::uint64_t>::value);
}

}  // namespace test_fencing_token
