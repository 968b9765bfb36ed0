// SPDX-License-Identifier: MIT
// Tests of holdfast/step_point.hpp: step points cost nothing on clocks that do not observe them,
// and under the simulator they let the conformance kit interleave clients inside a store's
// operation. Negative controls: a store that draws its token in a second step ("SET NX, then
// INCR"), written as a user would, and cas_store over a KV whose compare-and-swap is a blind
// write; the kit must fail both, naming the real harm (the token order), and pass the correct
// versions of the same stores.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <holdfast/clock.hpp>
#include <holdfast/step_point.hpp>
#include <holdfast/store.hpp>
#include <holdfast/stores/cas.hpp>
#include <holdfast/stores/memory.hpp>
#include <holdfast/testing/testing.hpp>
#include <map>
#include <memory>
#include <string>
#include <string_view>

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_step_point {

using holdfast::step_kind;
using namespace holdfast::testing;

namespace {

static_assert(!holdfast::has_step_point_v<holdfast::steady_clock>);
static_assert(!holdfast::has_step_point_v<holdfast::manual_clock>);
static_assert(holdfast::has_step_point_v<sim_clock>);

// A clock that counts the step points it sees: a user's clock may observe them too.
struct counting_clock : holdfast::manual_clock {
  int* between = nullptr;
  int* effects = nullptr;
  void step_point(step_kind k) const { ++*(k == step_kind::between ? between : effects); }
};

// A store written the way a user would, with two statements per grant when TwoSteps: first the
// grant (owner and expiry), then the token from a counter. Between them it marks a step point,
// and it marks the grant's statement as the one that takes effect.
template <class Clock, bool TwoSteps>
class two_statement_store {
 public:
  explicit two_statement_store(Clock clock) : clock_(clock) {}

  holdfast::result<holdfast::grant> try_acquire(std::string_view key, std::string_view owner,
                                                std::chrono::milliseconds ttl) {
    if (std::error_code ec = holdfast::check_acquire_args(key, owner, ttl)) return ec;
    const auto now = clock_.now();
    auto it = rows_.find(std::string(key));
    if (it != rows_.end() && now < it->second.expires) {
      if (it->second.owner != owner || it->second.token == 0) return holdfast::errc::busy;
      it->second.expires = std::max(it->second.expires, hold_until(now, ttl));
      return holdfast::grant{holdfast::fencing_token(it->second.token), ttl};
    }
    if (!TwoSteps) {  // one statement: the grant and its token together
      rows_[std::string(key)] = row{std::string(owner), ++counter_, hold_until(now, ttl)};
      return holdfast::grant{holdfast::fencing_token(rows_[std::string(key)].token), ttl};
    }
    // Statement 1: INSERT OR REPLACE INTO leases(key, owner, expires) ...
    rows_[std::string(key)] = row{std::string(owner), 0, hold_until(now, ttl)};
    holdfast::step_point(clock_, step_kind::takes_effect);
    holdfast::step_point(clock_, step_kind::between);
    // Statement 2: UPDATE counter SET n = n + 1 RETURNING n; UPDATE leases SET token = n ...
    const std::uint64_t t = ++counter_;
    auto again = rows_.find(std::string(key));
    if (again != rows_.end() && again->second.owner == owner && again->second.token == 0) {
      again->second.token = t;
    }
    return holdfast::grant{holdfast::fencing_token(t), ttl};
  }

  holdfast::result<holdfast::grant> renew(std::string_view key, std::string_view owner,
                                          holdfast::fencing_token token,
                                          std::chrono::milliseconds ttl) {
    if (std::error_code ec = holdfast::check_renew_args(key, owner, token, ttl)) return ec;
    const auto now = clock_.now();
    auto it = rows_.find(std::string(key));
    if (it == rows_.end() || !(now < it->second.expires) || it->second.owner != owner ||
        it->second.token != token.value()) {
      return holdfast::errc::lease_lost;
    }
    it->second.expires = hold_until(now, ttl);
    return holdfast::grant{token, ttl};
  }

  holdfast::result<void> release(std::string_view key, std::string_view owner,
                                 holdfast::fencing_token token) {
    if (std::error_code ec = holdfast::check_release_args(key, owner, token)) return ec;
    auto it = rows_.find(std::string(key));
    if (it == rows_.end() || it->second.owner != owner || it->second.token != token.value()) {
      return holdfast::errc::not_holder;
    }
    rows_.erase(it);
    return {};
  }

 private:
  // Until when a grant made at reading `now` holds: its TTL plus the clock's tick, which the
  // reading may lag (store.hpp, T2).
  typename Clock::time_point hold_until(typename Clock::time_point now,
                                        std::chrono::milliseconds ttl) const {
    return holdfast::store_hold_until(now, ttl, holdfast::clock_tick(clock_));
  }

  struct row {
    std::string owner;
    std::uint64_t token = 0;
    typename Clock::time_point expires{};
  };
  Clock clock_;
  std::map<std::string, row> rows_;
  std::uint64_t counter_ = 0;
};

// A cas_kv whose compare_and_swap ignores the expected version: a blind write, as a KV with a
// broken conditional update would do.
class blind_cas_kv {
 public:
  holdfast::result<holdfast::cas_entry> get(std::string_view key) const {
    auto it = map_.find(std::string(key));
    if (it == map_.end()) return holdfast::cas_entry{};
    return it->second;
  }
  holdfast::result<bool> compare_and_swap(std::string_view key, std::uint64_t /*expected*/,
                                          std::string_view value) {
    map_[std::string(key)] = holdfast::cas_entry{std::string(value), ++last_};
    return true;
  }

 private:
  std::map<std::string, holdfast::cas_entry> map_;
  std::uint64_t last_ = 0;
};

// A KV and its adapter, made together by one factory call (the adapter keeps a reference).
template <class KV>
struct cas_node {
  explicit cas_node(sim_clock clock) : store(kv, clock) {}
  holdfast::result<holdfast::grant> try_acquire(std::string_view k, std::string_view o,
                                                std::chrono::milliseconds ttl) {
    return store.try_acquire(k, o, ttl);
  }
  holdfast::result<holdfast::grant> renew(std::string_view k, std::string_view o,
                                          holdfast::fencing_token t,
                                          std::chrono::milliseconds ttl) {
    return store.renew(k, o, t, ttl);
  }
  holdfast::result<void> release(std::string_view k, std::string_view o,
                                 holdfast::fencing_token t) {
    return store.release(k, o, t);
  }
  KV kv;
  holdfast::cas_store<KV, sim_clock> store;
};

}  // namespace

TEST_CASE("step_point calls the clock's member only if it has one", "[step_point]") {
  holdfast::step_point(holdfast::steady_clock{}, step_kind::between);  // compiles to nothing
  int between = 0;
  int effects = 0;
  counting_clock c;
  c.between = &between;
  c.effects = &effects;
  holdfast::step_point(c, step_kind::between);
  holdfast::step_point(c, step_kind::between);
  holdfast::step_point(c, step_kind::takes_effect);
  REQUIRE(between == 2);
  REQUIRE(effects == 1);
}

TEST_CASE("step_point: a store's own steps are interleaved and the token order is judged",
          "[step_point][testing/conformance]") {
  conformance_options o;
  o.schedules = 300;
  const conformance_report good =
      check_store([](sim_clock c) { return two_statement_store<sim_clock, false>(c); }, o);
  INFO(good.summary());
  REQUIRE(good.ok());
  const conformance_report bad =
      check_store([](sim_clock c) { return two_statement_store<sim_clock, true>(c); }, o);
  INFO(bad.summary());
  REQUIRE_FALSE(bad.ok());
  REQUIRE(bad.store_steps > 0);
  // The real harm: a later holder got an older token than a stalled one.
  REQUIRE_THAT(bad.summary(), Catch::Contains("S2 token order violated"));
  REQUIRE_THAT(bad.summary(), !Catch::Contains("step points"));
}

TEST_CASE("step_point: cas_store marks its steps, so a blind compare-and-swap is caught",
          "[step_point][cas][testing/conformance]") {
  conformance_options o;
  o.schedules = 300;
  const conformance_report good = check_store(
      [](sim_clock c) { return std::make_unique<cas_node<holdfast::memory_cas_kv>>(c); }, o);
  INFO(good.summary());
  REQUIRE(good.ok());
  REQUIRE(good.store_steps > 0);
  REQUIRE_THAT(good.summary(), !Catch::Contains("step points"));
  const conformance_report blind =
      check_store([](sim_clock c) { return std::make_unique<cas_node<blind_cas_kv>>(c); }, o);
  INFO(blind.summary());
  REQUIRE_FALSE(blind.ok());
  REQUIRE_THAT(blind.summary(), Catch::Contains("S2 token order violated") ||
                                    Catch::Contains("S3 exclusive grants violated"));
}

TEST_CASE("step_point: a store that marks none is reported as not explored inside",
          "[step_point][testing/conformance]") {
  conformance_options o;
  o.schedules = 20;
  const conformance_report r = check_store(
      [](sim_clock c) { return std::make_unique<holdfast::memory_store<sim_clock>>(c); }, o);
  INFO(r.summary());
  REQUIRE(r.ok());
  REQUIRE(r.store_steps == 0);
  REQUIRE_THAT(r.summary(),
               Catch::Contains("not explored:") && Catch::Contains("holdfast::step_point"));
}

}  // namespace test_step_point
