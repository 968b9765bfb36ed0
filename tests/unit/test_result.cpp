// SPDX-License-Identifier: MIT
// Unit tests for holdfast/result.hpp: result<T> holds a value or a non-zero error code, and
// result<void> success or an error.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>

#include "holdfast/result.hpp"
#include "test_support.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_result {

using holdfast::errc;
using holdfast::result;

TEST_CASE("result<T> holding a value", "[result]") {
  result<int> r = 42;
  REQUIRE(r.has_value());
  REQUIRE(static_cast<bool>(r));
  CHECK(r.value() == 42);
  CHECK(*r == 42);
  CHECK_FALSE(r.error());  // a zero error code when a value is held
  CHECK(r.value_or(7) == 42);
  r.value() = 43;  // value() is a reference into the result
  CHECK(*r == 43);

  result<std::string> s = std::string("orders");
  CHECK(s->size() == 6);  // operator->
  const result<std::string>& cs = s;
  CHECK(cs.value() == "orders");
  CHECK(cs->front() == 'o');
}

TEST_CASE("result<T> holding an error", "[result]") {
  result<int> r = errc::busy;
  REQUIRE_FALSE(r.has_value());
  REQUIRE_FALSE(static_cast<bool>(r));
  CHECK(r.error() == errc::busy);
  CHECK(r.value_or(7) == 7);

  const std::error_code foreign = std::make_error_code(std::errc::timed_out);
  result<std::string> s = foreign;  // any category is accepted
  REQUIRE_FALSE(s);
  CHECK(s.error() == foreign);
  CHECK(s.error().category() == std::generic_category());
  CHECK(std::move(s).value_or("fallback") == "fallback");
}

TEST_CASE("result<T> works with move-only values", "[result]") {
  result<std::unique_ptr<int>> r = std::make_unique<int>(5);
  REQUIRE(r);
  CHECK(**r == 5);
  std::unique_ptr<int> taken = std::move(r).value();
  REQUIRE(taken);
  CHECK(*taken == 5);

  result<std::unique_ptr<int>> e = errc::lease_lost;
  CHECK(std::move(e).value_or(nullptr) == nullptr);

  // A result can itself be moved, carrying its value or error along.
  result<std::unique_ptr<int>> a = std::make_unique<int>(9);
  result<std::unique_ptr<int>> b = std::move(a);
  REQUIRE(b);
  CHECK(**b == 9);
}

TEST_CASE("result<T> keeps a value and an error apart even when T converts from errc's int",
          "[result]") {
  // errc is a scoped enum: returning errc::busy from a function returning result<int> selects the
  // error constructor, never the value 1.
  auto f = [](bool fail) -> result<int> {
    if (fail) return errc::busy;
    return 1;
  };
  CHECK(f(true).error() == errc::busy);
  CHECK_FALSE(f(true).has_value());
  CHECK(f(false).value() == 1);

  auto g = [](bool fail) -> result<bool> {
    if (fail) return errc::stale_token;
    return false;
  };
  CHECK(g(true).error() == errc::stale_token);
  REQUIRE(g(false).has_value());
  CHECK(g(false).value() == false);
}

TEST_CASE("result<void>", "[result]") {
  result<void> ok;
  CHECK(ok.has_value());
  CHECK(static_cast<bool>(ok));
  CHECK_FALSE(ok.error());
  ok.value();  // success: no effect

  result<void> bad = errc::not_holder;
  CHECK_FALSE(bad.has_value());
  CHECK(bad.error() == errc::not_holder);

  result<void> foreign = std::make_error_code(std::errc::connection_reset);
  CHECK_FALSE(foreign);
  CHECK(foreign.error() == std::errc::connection_reset);
}

TEST_CASE("result is a value type with the expected traits", "[result]") {
  STATIC_REQUIRE(std::is_same_v<result<int>::value_type, int>);
  STATIC_REQUIRE(std::is_same_v<result<void>::value_type, void>);
  STATIC_REQUIRE(std::is_copy_constructible_v<result<int>>);
  STATIC_REQUIRE(std::is_nothrow_move_constructible_v<result<int>>);
  STATIC_REQUIRE_FALSE(std::is_copy_constructible_v<result<std::unique_ptr<int>>>);
  STATIC_REQUIRE(std::is_move_constructible_v<result<std::unique_ptr<int>>>);
  // Implicit construction from a value, an errc and an error_code (the `return x;` style).
  STATIC_REQUIRE(std::is_convertible_v<int, result<int>>);
  STATIC_REQUIRE(std::is_convertible_v<errc, result<int>>);
  STATIC_REQUIRE(std::is_convertible_v<std::error_code, result<int>>);
  STATIC_REQUIRE(std::is_convertible_v<errc, result<void>>);
  // ... but never to bool implicitly (explicit operator bool), so `int x = r;` cannot compile.
  STATIC_REQUIRE_FALSE(std::is_convertible_v<result<int>, bool>);
  STATIC_REQUIRE_FALSE(std::is_convertible_v<result<int>, int>);
}

}  // namespace test_result
