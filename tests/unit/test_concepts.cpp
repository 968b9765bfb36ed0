// SPDX-License-Identifier: MIT
// The requirements (store.hpp's lease_store, clock.hpp's ttl_clock, cas.hpp's cas_kv, quorum.hpp's
// quorum_member) have two spellings: C++20 requires-expressions that constrain the public
// templates, and the C++17 detection traits behind the static_asserts. These checks pin both to
// the same answer on types that do and do not qualify, including near misses (the right name with
// another signature or return type), so the two cannot drift apart. They are compile-time checks;
// the run-time case only makes the file a test.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <holdfast/clock.hpp>
#include <holdfast/quorum.hpp>
#include <holdfast/store.hpp>
#include <holdfast/stores/cas.hpp>
#include <holdfast/stores/memory.hpp>
#include <string_view>

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_concepts {

namespace {

using holdfast::fencing_token;
using holdfast::grant;
using holdfast::result;
using ms = std::chrono::milliseconds;

// A LeaseStore, and near misses of it.
struct good_store {
  result<grant> try_acquire(std::string_view, std::string_view, ms);
  result<grant> renew(std::string_view, std::string_view, fencing_token, ms);
  result<void> release(std::string_view, std::string_view, fencing_token);
};
struct renew_other_signature {  // renew takes an int token: the name exists, the call does not
  result<grant> try_acquire(std::string_view, std::string_view, ms);
  result<grant> renew(std::string_view, std::string_view, int, ms);
  result<void> release(std::string_view, std::string_view, fencing_token);
};
struct release_returns_bool {  // the right arguments, the wrong result
  result<grant> try_acquire(std::string_view, std::string_view, ms);
  result<grant> renew(std::string_view, std::string_view, fencing_token, ms);
  bool release(std::string_view, std::string_view, fencing_token);
};
struct member_with_raise : good_store {
  result<void> raise_token(std::string_view, std::string_view, fencing_token, fencing_token);
};

// Clocks.
struct good_clock {
  using duration = std::chrono::nanoseconds;
  using time_point = std::chrono::time_point<good_clock, duration>;
  time_point now() const;
  void sleep_until(const time_point&);
};
struct clock_now_not_const {
  using duration = std::chrono::nanoseconds;
  using time_point = std::chrono::time_point<clock_now_not_const, duration>;
  time_point now();
  void sleep_until(const time_point&);
};
struct clock_without_types {
  std::chrono::steady_clock::time_point now() const;
  void sleep_until(const std::chrono::steady_clock::time_point&);
};

// Key-value stores.
struct kv_without_swap {
  result<holdfast::cas_entry> get(std::string_view);
};
struct kv_swap_returns_void {
  result<holdfast::cas_entry> get(std::string_view);
  void compare_and_swap(std::string_view, std::uint64_t, std::string_view);
};

template <class S>
constexpr bool store_traits() {
  return holdfast::detail::has_try_acquire<S>::value && holdfast::detail::has_renew<S>::value &&
         holdfast::detail::has_release<S>::value;
}
template <class KV>
constexpr bool kv_traits() {
  return holdfast::detail::has_cas_get<KV>::value && holdfast::detail::has_cas_swap<KV>::value;
}

// Each requirement, both spellings, the expected answer written down.
#if HOLDFAST_HAS_CONCEPTS
#define HOLDFAST_TEST_STORE(S, yes) \
  static_assert(store_traits<S>() == (yes) && holdfast::lease_store<S> == (yes), #S)
#define HOLDFAST_TEST_CLOCK(C, yes) \
  static_assert(                    \
      holdfast::detail::is_ttl_clock<C>::value == (yes) && holdfast::ttl_clock<C> == (yes), #C)
#define HOLDFAST_TEST_KV(KV, yes) \
  static_assert(kv_traits<KV>() == (yes) && holdfast::cas_kv<KV> == (yes), #KV)
#define HOLDFAST_TEST_MEMBER(S, yes)                                              \
  static_assert((store_traits<S>() && holdfast::has_raise_token_v<S>) == (yes) && \
                    holdfast::quorum_member<S> == (yes),                          \
                #S)
#else
#define HOLDFAST_TEST_STORE(S, yes) \
  static_assert(store_traits<S>() == (yes) && holdfast::is_lease_store_v<S> == (yes), #S)
#define HOLDFAST_TEST_CLOCK(C, yes) static_assert(holdfast::is_ttl_clock_v<C> == (yes), #C)
#define HOLDFAST_TEST_KV(KV, yes) \
  static_assert(kv_traits<KV>() == (yes) && holdfast::is_cas_kv_v<KV> == (yes), #KV)
#define HOLDFAST_TEST_MEMBER(S, yes) \
  static_assert((store_traits<S>() && holdfast::has_raise_token_v<S>) == (yes), #S)
#endif

HOLDFAST_TEST_STORE(good_store, true);
HOLDFAST_TEST_STORE(holdfast::memory_store<>, true);
HOLDFAST_TEST_STORE(renew_other_signature, false);
HOLDFAST_TEST_STORE(release_returns_bool, false);
HOLDFAST_TEST_STORE(int, false);

HOLDFAST_TEST_CLOCK(good_clock, true);
HOLDFAST_TEST_CLOCK(holdfast::steady_clock, true);
HOLDFAST_TEST_CLOCK(holdfast::manual_clock, true);
HOLDFAST_TEST_CLOCK(clock_now_not_const, false);
HOLDFAST_TEST_CLOCK(clock_without_types, false);
HOLDFAST_TEST_CLOCK(int, false);

HOLDFAST_TEST_KV(holdfast::memory_cas_kv, true);
HOLDFAST_TEST_KV(kv_without_swap, false);
HOLDFAST_TEST_KV(kv_swap_returns_void, false);

HOLDFAST_TEST_MEMBER(holdfast::memory_store<>, true);
HOLDFAST_TEST_MEMBER(member_with_raise, true);
HOLDFAST_TEST_MEMBER(good_store, false);

}  // namespace

TEST_CASE("concepts and C++17 traits agree on every requirement", "[concepts]") {
  // Everything above is checked at compile time; this only says so at run time.
  SUCCEED("lease_store, ttl_clock, cas_kv and quorum_member agree with their traits");
}

}  // namespace test_concepts
