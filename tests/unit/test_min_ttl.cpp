// SPDX-License-Identifier: MIT
// tests/unit/test_min_ttl.cpp - the optional min_ttl() capability (store.hpp's store_min_ttl) away
// from real servers: lease::renew(ttl) refuses a TTL under the store's min_ttl without asking the
// store (as acquire does), and quorum_store's min_ttl is the largest of its members'. One ms under,
// at and one ms over each limit. The real stores' own limits:
// test_{redis,postgres,etcd}_min_ttl.cpp.
#include <catch2/catch.hpp>

#include <chrono>
#include <string_view>
#include <vector>

#include "holdfast/lease.hpp"
#include "holdfast/quorum.hpp"
#include "holdfast/stores/memory.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_min_ttl {

namespace {

using namespace std::chrono_literals;
using holdfast::errc;

// memory_store with a min_ttl, counting the renewals that reach it.
class floored_store : public holdfast::memory_store<> {
 public:
  explicit floored_store(std::chrono::milliseconds floor) : floor_(floor) {}
  [[nodiscard]] std::chrono::milliseconds min_ttl() const noexcept { return floor_; }
  holdfast::result<holdfast::grant> renew(std::string_view key, std::string_view owner,
                                          holdfast::fencing_token token,
                                          std::chrono::milliseconds ttl) {
    ++renewals;
    return memory_store::renew(key, owner, token, ttl);
  }
  int renewals = 0;

 private:
  std::chrono::milliseconds floor_;
};

}  // namespace

TEST_CASE("lease::renew(ttl) refuses a TTL under the store's min_ttl without asking the store",
          "[min_ttl][lease]") {
  floored_store store(500ms);
  REQUIRE(holdfast::store_min_ttl(store) == 500ms);
  auto lease = holdfast::try_acquire(store, "k", 10s);
  REQUIRE(lease.has_value());
  CHECK(lease->renew(499ms).error() == errc::invalid_argument);
  CHECK(store.renewals == 0);  // nothing was sent
  CHECK(lease->state() == holdfast::lease_state::held);
  CHECK(lease->ttl() == 10s);  // nothing changed
  CHECK_FALSE(lease->renew(500ms).error());
  CHECK_FALSE(lease->renew(501ms).error());
  CHECK(store.renewals == 2);
  CHECK(lease->ttl() == 501ms);
}

TEST_CASE("quorum_store's min_ttl is the largest of its members'", "[min_ttl][quorum]") {
  floored_store a(100ms);
  floored_store b(700ms);
  floored_store c(300ms);
  holdfast::quorum_options o;
  o.dispatch = holdfast::quorum_dispatch::sequential;
  holdfast::quorum_store<floored_store> q({&a, &b, &c}, o);
  REQUIRE_FALSE(q.check());
  CHECK(holdfast::store_min_ttl(q) == 700ms);
  CHECK(holdfast::try_acquire(q, "under", 699ms).error() == errc::invalid_argument);
  CHECK(holdfast::try_acquire(q, "at", 700ms).has_value());
  CHECK(holdfast::try_acquire(q, "over", 701ms).has_value());
  // Members without a min_ttl (memory_store) give 0: nothing is refused for it.
  holdfast::memory_store<> m1;
  holdfast::memory_store<> m2;
  holdfast::memory_store<> m3;
  holdfast::quorum_store<holdfast::memory_store<>> plain({&m1, &m2, &m3}, o);
  CHECK(holdfast::store_min_ttl(plain) == 0ms);
  CHECK(holdfast::try_acquire(plain, "short", 200ms).has_value());
}

}  // namespace test_min_ttl
