// SPDX-License-Identifier: MIT
// The kit's multi-key contract (testing/conformance_multi.hpp): memory_store passes it (directly
// and through check_store), and it catches each broken try_acquire_all, by the rule it breaks:
// one that keeps the keys it took before a busy one, one that hands every key one token, one that
// draws new tokens on a same-owner retry, one that takes a repeated key. Cost: ~0.1 s (Debug).
#include <catch2/catch.hpp>

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "holdfast/stores/memory.hpp"
#include "holdfast/testing/conformance.hpp"
#include "holdfast/testing/conformance_multi.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_conformance_multi {

using holdfast::errc;
using holdfast::grant;
using holdfast::result;
using std::chrono::milliseconds;
namespace ht = holdfast::testing;

namespace {

// Takes the keys one at a time and keeps those it took when a later one is busy.
class partial_store : public holdfast::memory_store<> {
 public:
  result<void> try_acquire_all(const std::string_view* keys, std::size_t n, std::string_view owner,
                               milliseconds ttl, grant* grants) {
    if (result<void> r = check(keys, n, owner, ttl); !r) return r;
    for (std::size_t i = 0; i < n; ++i) {  // one at a time, nothing given back on busy
      result<grant> g = try_acquire(keys[i], owner, ttl);
      if (!g) return g.error();
      grants[i] = *g;
    }
    return {};
  }
  // The argument checks memory_store makes.
  result<void> check(const std::string_view* keys, std::size_t n, std::string_view owner,
                     milliseconds ttl) {
    if (keys == nullptr || n == 0) return errc::invalid_argument;
    for (std::size_t i = 0; i < n; ++i) {
      if (std::error_code ec = holdfast::check_acquire_args(keys[i], owner, ttl)) return ec;
      for (std::size_t j = 0; j < i; ++j) {
        if (keys[j] == keys[i]) return errc::invalid_argument;
      }
    }
    return {};
  }
};

// Takes the keys one at a time and never looks for a repeated one.
class repeated_key_store : public holdfast::memory_store<> {
 public:
  result<void> try_acquire_all(const std::string_view* keys, std::size_t n, std::string_view owner,
                               milliseconds ttl, grant* grants) {
    if (keys == nullptr || n == 0) return errc::invalid_argument;
    for (std::size_t i = 0; i < n; ++i) {
      result<grant> g = try_acquire(keys[i], owner, ttl);
      if (!g) return g.error();
      grants[i] = *g;
    }
    return {};
  }
};

// Reports the first key's token for every key.
class one_token_store : public partial_store {
 public:
  result<void> try_acquire_all(const std::string_view* keys, std::size_t n, std::string_view owner,
                               milliseconds ttl, grant* grants) {
    if (result<void> r = memory_store::try_acquire_all(keys, n, owner, ttl, grants); !r) return r;
    for (std::size_t i = 1; i < n; ++i) grants[i].token = grants[0].token;  // reported, not held
    return {};
  }
};

// Draws new tokens for keys the owner already holds (a retry after a lost reply).
class retry_store : public partial_store {
 public:
  result<void> try_acquire_all(const std::string_view* keys, std::size_t n, std::string_view owner,
                               milliseconds ttl, grant* grants) {
    if (result<void> r = check(keys, n, owner, ttl); !r) return r;
    for (std::size_t i = 0; i < n; ++i) {  // a same-owner key is released and granted anew
      if (auto rec = inspect(keys[i]); rec && *rec && (*rec)->owner == owner) {
        (void)release(keys[i], owner, (*rec)->token);
      }
    }
    return memory_store::try_acquire_all(keys, n, owner, ttl, grants);
  }
};

bool failed_with(const ht::conformance_report& r, const std::string& rule) {
  for (const std::string& f : r.failures) {
    if (f.rfind(rule, 0) == 0) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("memory_store meets the kit's multi-key contract", "[conformance][multi]") {
  holdfast::memory_store<> s;
  const ht::conformance_report r = ht::check_try_acquire_all(s);
  INFO(r.summary());
  CHECK(r.ok());
  CHECK(r.contract_checks > 50);
  // check_store runs it too, on the simulated clock, for a store with the capability.
  ht::conformance_options o;
  o.schedules = 0;
  const ht::conformance_report all =
      ht::check_store([](ht::sim_clock c) { return holdfast::memory_store<ht::sim_clock>(c); }, o);
  INFO(all.summary());
  CHECK(all.ok());
  CHECK(all.contract_checks >= r.contract_checks + 60);
}

TEST_CASE("the multi-key contract catches each broken try_acquire_all", "[conformance][multi]") {
  {
    partial_store s;
    const ht::conformance_report r = ht::check_try_acquire_all(s);
    INFO(r.summary());
    CHECK(failed_with(r, "multi busy leaves nothing"));
  }
  {
    one_token_store s;
    const ht::conformance_report r = ht::check_try_acquire_all(s);
    INFO(r.summary());
    CHECK(failed_with(r, "multi all"));
  }
  {
    retry_store s;
    const ht::conformance_report r = ht::check_try_acquire_all(s);
    INFO(r.summary());
    CHECK(failed_with(r, "multi T1 same owner"));
  }
  {
    repeated_key_store s;
    const ht::conformance_report r = ht::check_try_acquire_all(s);
    INFO(r.summary());
    CHECK(failed_with(r, "multi T4 a key given twice"));
  }
  // And through check_store, for a factory's store with the capability.
  ht::conformance_options o;
  o.schedules = 0;
  const ht::conformance_report r =
      ht::check_store([] { return std::make_unique<partial_store>(); }, o);
  CHECK(failed_with(r, "multi busy leaves nothing"));
}

}  // namespace test_conformance_multi
