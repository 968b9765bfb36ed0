// SPDX-License-Identifier: MIT
// Unit tests for holdfast/store.hpp: the grant/lease_record vocabulary, the argument checks every
// store runs first, and the compile-time LeaseStore contract check (which must detect each
// missing or mistyped operation).
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "holdfast/store.hpp"
#include "holdfast/stores/memory.hpp"
#include "test_support.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_store {

using holdfast::errc;
using holdfast::fencing_token;
using holdfast::grant;
using holdfast::result;
using namespace std::chrono_literals;
using ms = std::chrono::milliseconds;
using sv = std::string_view;

namespace {

using record_result = result<std::optional<holdfast::lease_record>>;

// The positive control: all three operations plus inspect, exactly as store.hpp spells them.
struct full_store {
  result<grant> try_acquire(sv, sv, ms) { return errc::busy; }
  result<grant> renew(sv, sv, fencing_token, ms) { return errc::lease_lost; }
  result<void> release(sv, sv, fencing_token) { return {}; }
  record_result inspect(sv) { return std::optional<holdfast::lease_record>{}; }
};
struct without_inspect {  // inspect is optional
  result<grant> try_acquire(sv, sv, ms) { return errc::busy; }
  result<grant> renew(sv, sv, fencing_token, ms) { return errc::lease_lost; }
  result<void> release(sv, sv, fencing_token) { return {}; }
};
struct without_try_acquire {
  result<grant> renew(sv, sv, fencing_token, ms) { return errc::lease_lost; }
  result<void> release(sv, sv, fencing_token) { return {}; }
};
struct without_renew {
  result<grant> try_acquire(sv, sv, ms) { return errc::busy; }
  result<void> release(sv, sv, fencing_token) { return {}; }
};
struct without_release {
  result<grant> try_acquire(sv, sv, ms) { return errc::busy; }
  result<grant> renew(sv, sv, fencing_token, ms) { return errc::lease_lost; }
};
struct acquire_returns_bool {  // the wrong return type is as good as missing
  bool try_acquire(sv, sv, ms) { return false; }
  result<grant> renew(sv, sv, fencing_token, ms) { return errc::lease_lost; }
  result<void> release(sv, sv, fencing_token) { return {}; }
};
struct release_returns_grant {
  result<grant> try_acquire(sv, sv, ms) { return errc::busy; }
  result<grant> renew(sv, sv, fencing_token, ms) { return errc::lease_lost; }
  result<grant> release(sv, sv, fencing_token) { return errc::busy; }
};
struct ttl_in_seconds {  // milliseconds do not convert implicitly to seconds (they would truncate)
  result<grant> try_acquire(sv, sv, std::chrono::seconds) { return errc::busy; }
  result<grant> renew(sv, sv, fencing_token, std::chrono::seconds) { return errc::lease_lost; }
  result<void> release(sv, sv, fencing_token) { return {}; }
};
struct renew_without_token {  // renew must be told the holder's token
  result<grant> try_acquire(sv, sv, ms) { return errc::busy; }
  result<grant> renew(sv, sv, ms) { return errc::lease_lost; }
  result<void> release(sv, sv, fencing_token) { return {}; }
};
struct raw_uint_token {  // a plain integer is not a fencing_token
  result<grant> try_acquire(sv, sv, ms) { return errc::busy; }
  result<grant> renew(sv, sv, std::uint64_t, ms) { return errc::lease_lost; }
  result<void> release(sv, sv, std::uint64_t) { return {}; }
};
struct string_keys {  // const std::string& cannot bind a string_view (binary-safe keys)
  result<grant> try_acquire(const std::string&, const std::string&, ms) { return errc::busy; }
  result<grant> renew(const std::string&, const std::string&, fencing_token, ms) {
    return errc::lease_lost;
  }
  result<void> release(const std::string&, const std::string&, fencing_token) { return {}; }
};
struct const_and_generic {  // const members and templates are fine
  template <class K, class O>
  result<grant> try_acquire(K, O, ms) const {
    return errc::busy;
  }
  result<grant> renew(sv, sv, fencing_token, ms) const { return errc::lease_lost; }
  result<void> release(sv, sv, fencing_token) const { return {}; }
};
struct inspect_returns_record {  // inspect must be able to say "none"
  result<grant> try_acquire(sv, sv, ms) { return errc::busy; }
  result<grant> renew(sv, sv, fencing_token, ms) { return errc::lease_lost; }
  result<void> release(sv, sv, fencing_token) { return {}; }
  result<holdfast::lease_record> inspect(sv) { return errc::busy; }
};

}  // namespace

TEST_CASE("is_lease_store_v detects each missing or mistyped operation", "[store]") {
  STATIC_REQUIRE(holdfast::is_lease_store_v<full_store>);
  STATIC_REQUIRE(holdfast::is_lease_store_v<without_inspect>);
  STATIC_REQUIRE(holdfast::is_lease_store_v<const_and_generic>);
  STATIC_REQUIRE(holdfast::is_lease_store_v<holdfast::memory_store<>>);
  STATIC_REQUIRE(holdfast::is_lease_store_v<holdfast::memory_store<holdfast::manual_clock>>);
  STATIC_REQUIRE(holdfast::is_lease_store_v<holdfast_test::scripted_store>);

  STATIC_REQUIRE_FALSE(holdfast::is_lease_store_v<without_try_acquire>);
  STATIC_REQUIRE_FALSE(holdfast::is_lease_store_v<without_renew>);
  STATIC_REQUIRE_FALSE(holdfast::is_lease_store_v<without_release>);
  STATIC_REQUIRE_FALSE(holdfast::is_lease_store_v<acquire_returns_bool>);
  STATIC_REQUIRE_FALSE(holdfast::is_lease_store_v<release_returns_grant>);
  STATIC_REQUIRE_FALSE(holdfast::is_lease_store_v<ttl_in_seconds>);
  STATIC_REQUIRE_FALSE(holdfast::is_lease_store_v<renew_without_token>);
  STATIC_REQUIRE_FALSE(holdfast::is_lease_store_v<raw_uint_token>);
  STATIC_REQUIRE_FALSE(holdfast::is_lease_store_v<string_keys>);
  STATIC_REQUIRE_FALSE(holdfast::is_lease_store_v<int>);

  // assert_lease_store is usable in constant expressions when the contract holds.
  STATIC_REQUIRE(holdfast::assert_lease_store<full_store>());
  STATIC_REQUIRE(holdfast::assert_lease_store<holdfast::memory_store<>>());
}

TEST_CASE("has_inspect_v detects the optional inspect operation", "[store]") {
  STATIC_REQUIRE(holdfast::has_inspect_v<full_store>);
  STATIC_REQUIRE(holdfast::has_inspect_v<holdfast::memory_store<>>);
  STATIC_REQUIRE_FALSE(holdfast::has_inspect_v<without_inspect>);
  STATIC_REQUIRE_FALSE(holdfast::has_inspect_v<inspect_returns_record>);
  STATIC_REQUIRE_FALSE(holdfast::has_inspect_v<holdfast_test::scripted_store>);
}

#if HOLDFAST_HAS_CONCEPTS
TEST_CASE("the C++20 lease_store concept agrees with the trait", "[store]") {
  STATIC_REQUIRE(holdfast::lease_store<full_store>);
  STATIC_REQUIRE(holdfast::lease_store<holdfast::memory_store<>>);
  STATIC_REQUIRE_FALSE(holdfast::lease_store<without_try_acquire>);
  STATIC_REQUIRE_FALSE(holdfast::lease_store<without_renew>);
  STATIC_REQUIRE_FALSE(holdfast::lease_store<without_release>);
  // The per-operation concepts say which one is missing.
  STATIC_REQUIRE_FALSE(holdfast::store_with_try_acquire<without_try_acquire>);
  STATIC_REQUIRE(holdfast::store_with_renew<without_try_acquire>);
  STATIC_REQUIRE_FALSE(holdfast::store_with_renew<without_renew>);
  STATIC_REQUIRE_FALSE(holdfast::store_with_release<without_release>);
}
#endif

TEST_CASE("grant and lease_record", "[store]") {
  const grant a{fencing_token(33), 10s};
  const grant b{fencing_token(33), 10000ms};
  const grant c{fencing_token(34), 10s};
  const grant d{fencing_token(33), 9s};
  CHECK(a == b);
  CHECK(a != c);
  CHECK(a != d);
  const grant empty{};
  CHECK(empty.token.is_none());
  CHECK(empty.ttl == 0ms);
  const holdfast::lease_record r{};
  CHECK(r.owner.empty());
  CHECK(r.token.is_none());
  CHECK(r.remaining == 0ms);
}

TEST_CASE("max_ttl is 100 years and fits in nanoseconds from any sane time", "[store]") {
  CHECK(holdfast::max_ttl == std::chrono::hours(24 * 365 * 100));
  // now + max_ttl in int64 nanoseconds must not overflow for any time within ~190 years of the
  // epoch: max_ttl is about a third of the nanosecond range.
  CHECK(std::chrono::duration_cast<std::chrono::nanoseconds>(holdfast::max_ttl).count() <
        std::numeric_limits<std::int64_t>::max() / 2);
}

TEST_CASE("check_ttl accepts (0, max_ttl]", "[store]") {
  const std::error_code bad = errc::invalid_argument;
  CHECK(holdfast::check_ttl(0ms) == bad);
  CHECK(holdfast::check_ttl(-1ms) == bad);
  CHECK(holdfast::check_ttl(ms::min()) == bad);
  CHECK(holdfast::check_ttl(holdfast::max_ttl + 1ms) == bad);
  CHECK(holdfast::check_ttl(ms::max()) == bad);
  CHECK_FALSE(holdfast::check_ttl(1ms));
  CHECK_FALSE(holdfast::check_ttl(10s));
  CHECK_FALSE(holdfast::check_ttl(holdfast::max_ttl));
}

TEST_CASE("check_acquire_args rejects empty keys and owners and bad TTLs", "[store]") {
  const std::error_code bad = errc::invalid_argument;
  CHECK_FALSE(holdfast::check_acquire_args("orders", "A", 10s));
  CHECK(holdfast::check_acquire_args("", "A", 10s) == bad);
  CHECK(holdfast::check_acquire_args("orders", "", 10s) == bad);
  CHECK(holdfast::check_acquire_args("orders", "A", 0ms) == bad);
  CHECK(holdfast::check_acquire_args("orders", "A", -10s) == bad);
  CHECK(holdfast::check_acquire_args("orders", "A", holdfast::max_ttl + 1ms) == bad);
  // Keys and owners are binary-safe: a NUL byte is just a byte, and a lone NUL is not empty.
  CHECK_FALSE(holdfast::check_acquire_args(sv("a\0b", 3), sv("\0", 1), 1ms));
}

TEST_CASE("check_release_args rejects empty names and tokens no store issues", "[store]") {
  const std::error_code bad = errc::invalid_argument;
  CHECK_FALSE(holdfast::check_release_args("orders", "A", fencing_token(1)));
  CHECK_FALSE(holdfast::check_release_args("orders", "A", fencing_token(UINT64_MAX - 1)));
  CHECK(holdfast::check_release_args("orders", "A", fencing_token{}) == bad);
  CHECK(holdfast::check_release_args("orders", "A", fencing_token::max()) == bad);
  CHECK(holdfast::check_release_args("", "A", fencing_token(1)) == bad);
  CHECK(holdfast::check_release_args("orders", "", fencing_token(1)) == bad);
}

TEST_CASE("check_renew_args is the union of the acquire and release checks", "[store]") {
  const std::error_code bad = errc::invalid_argument;
  const fencing_token t(5);
  CHECK_FALSE(holdfast::check_renew_args("k", "o", t, 1ms));
  CHECK(holdfast::check_renew_args("", "o", t, 1ms) == bad);
  CHECK(holdfast::check_renew_args("k", "", t, 1ms) == bad);
  CHECK(holdfast::check_renew_args("k", "o", t, 0ms) == bad);
  CHECK(holdfast::check_renew_args("k", "o", t, holdfast::max_ttl + 1ms) == bad);
  CHECK(holdfast::check_renew_args("k", "o", fencing_token{}, 1ms) == bad);
  CHECK(holdfast::check_renew_args("k", "o", fencing_token::max(), 1ms) == bad);
}

}  // namespace test_store
