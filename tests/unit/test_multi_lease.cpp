// SPDX-License-Identifier: MIT
// multi_lease.hpp: all-or-nothing leases on several keys, on the atomic path (memory_store's
// try_acquire_all capability) and the ordered path (a store without it: scripted_store), with the
// give-back after busy, errors and lost replies ("leave nothing behind"), the blocking form's
// hold-and-wait with renewals, and keepalive. Cost: well under a second.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "holdfast/clock.hpp"
#include "holdfast/keepalive.hpp"
#include "holdfast/multi_lease.hpp"
#include "holdfast/stores/memory.hpp"
#include "test_support.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_multi_lease {

using holdfast::errc;
using holdfast::fencing_token;
using holdfast::grant;
using holdfast::lease_state;
using holdfast::manual_clock;
using holdfast_test::scripted_store;
using namespace std::chrono_literals;
using ms = std::chrono::milliseconds;

namespace {

template <class Clock>
holdfast::acquire_options<Clock> options(Clock clock, std::string owner = {}) {
  holdfast::acquire_options<Clock> o;
  o.clock = std::move(clock);
  o.owner = std::move(owner);
  o.backoff.seed = 7;
  return o;
}

template <class Store>
bool held_by(Store& s, std::string_view key, std::string_view owner) {
  auto r = s.inspect(key);
  return r && *r && (*r)->owner == owner;
}

template <class Store>
bool free_key(Store& s, std::string_view key) {
  auto r = s.inspect(key);
  return r && !*r;
}

}  // namespace

static_assert(holdfast::has_try_acquire_all_v<holdfast::memory_store<manual_clock>>);
static_assert(!holdfast::has_try_acquire_all_v<scripted_store>);

TEST_CASE("memory_store try_acquire_all grants every key in one step or none", "[multi_lease]") {
  manual_clock clock;
  holdfast::memory_store<manual_clock> s(clock);
  std::string_view keys[3] = {"a", "b", "c"};
  grant g[3];
  REQUIRE(s.try_acquire_all(keys, 3, "o1", 1000ms, g));
  CHECK(g[0].token == fencing_token(1));
  CHECK(g[1].token == fencing_token(2));
  CHECK(g[2].token == fencing_token(3));
  // The same owner again: same tokens (T1), TTL extended.
  grant again[3];
  clock.advance(500ms);
  REQUIRE(s.try_acquire_all(keys, 3, "o1", 1000ms, again));
  CHECK(again[1].token == g[1].token);
  // Another owner overlapping on one key: busy, and nothing changes (d stays free).
  std::string_view other[2] = {"d", "c"};
  grant og[2];
  CHECK(s.try_acquire_all(other, 2, "o2", 1000ms, og).error() == errc::busy);
  CHECK(free_key(s, "d"));
  CHECK(s.last_token() == fencing_token(3));
  // Bad input.
  std::string_view dup[2] = {"x", "x"};
  CHECK(s.try_acquire_all(dup, 2, "o2", 1000ms, og).error() == errc::invalid_argument);
  CHECK(s.try_acquire_all(dup, 0, "o2", 1000ms, og).error() == errc::invalid_argument);
  std::string_view empty[1] = {""};
  CHECK(s.try_acquire_all(empty, 1, "o2", 1000ms, og).error() == errc::invalid_argument);
  CHECK(s.try_acquire_all(keys, 3, "o2", 0ms, og).error() == errc::invalid_argument);
  CHECK(free_key(s, "x"));
  // Expiry frees them one tick after: at 1499 ms held, at 1500 ms (500 + 1000) free.
  clock.advance(999ms);
  CHECK(s.try_acquire_all(keys, 3, "o2", 1000ms, g).error() == errc::busy);
  clock.advance(1ms);
  REQUIRE(s.try_acquire_all(keys, 3, "o2", 1000ms, g));
  CHECK(g[0].token == fencing_token(4));
}

TEST_CASE("memory_store try_acquire_all refuses grants past the token range", "[multi_lease]") {
  manual_clock clock;
  holdfast::memory_store_options o;
  o.last_issued = fencing_token(fencing_token::max().value() - 2);  // one token left
  holdfast::memory_store<manual_clock> s(clock, o);
  std::string_view keys[2] = {"a", "b"};
  grant g[2];
  CHECK(s.try_acquire_all(keys, 2, "o", 1000ms, g).error() == errc::token_exhausted);
  CHECK(free_key(s, "a"));
  REQUIRE(s.try_acquire_all(keys, 1, "o", 1000ms, g));
}

TEST_CASE("try_acquire_all holds every key with its own token, sorted", "[multi_lease]") {
  manual_clock clock;
  holdfast::memory_store<manual_clock> s(clock);
  auto m = holdfast::try_acquire_all(s, {"c", "a", "b"}, 1000ms, options(clock));
  REQUIRE(m);
  REQUIRE(m->size() == 3);
  CHECK(m->leases()[0].key() == "a");
  CHECK(m->leases()[2].key() == "c");
  CHECK(m->token("a") < m->token("b"));
  CHECK(m->token("zz").is_none());
  CHECK(m->state() == lease_state::held);
  CHECK(m->valid());
  CHECK(held_by(s, "b", m->owner()));
  clock.advance(400ms);
  REQUIRE(m->renew());
  CHECK(m->valid_until() == m->leases()[0].valid_until());
  REQUIRE(m->release());
  CHECK(m->state() == lease_state::released);
  CHECK(free_key(s, "a"));
  CHECK(free_key(s, "c"));
}

TEST_CASE("try_acquire_all refuses bad input before the store", "[multi_lease]") {
  manual_clock clock;
  scripted_store s(clock);
  CHECK(holdfast::try_acquire_all(s, std::vector<std::string>{}, 1000ms, options(clock)).error() ==
        errc::invalid_argument);
  CHECK(holdfast::try_acquire_all(s, {"a", "b", "a"}, 1000ms, options(clock)).error() ==
        errc::invalid_argument);
  CHECK(holdfast::try_acquire_all(s, {"a", ""}, 1000ms, options(clock)).error() ==
        errc::invalid_argument);
  CHECK(holdfast::try_acquire_all(s, {"a"}, 0ms, options(clock)).error() == errc::invalid_argument);
  CHECK(s.acquires == 0);
}

TEST_CASE("try_acquire_all without the capability takes keys in order and gives back on busy",
          "[multi_lease]") {
  manual_clock clock;
  scripted_store s(clock);
  auto other = holdfast::try_acquire(s.inner, "b", 1000ms, options(clock, "other"));
  REQUIRE(other);
  s.owners.clear();
  auto m = holdfast::try_acquire_all(s, {"c", "b", "a"}, 1000ms, options(clock, "me"));
  CHECK(m.error() == errc::busy);
  CHECK(s.acquires == 2);  // a, then b (busy); c never asked
  CHECK(s.releases == 1);  // a given back
  CHECK(free_key(s.inner, "a"));
  CHECK(free_key(s.inner, "c"));
}

TEST_CASE("try_acquire_all gives back a key whose reply was lost", "[multi_lease]") {
  manual_clock clock;
  scripted_store s(clock);
  int calls = 0;
  s.on_acquire = [&](std::string_view key, std::string_view owner, ms ttl) {
    auto g = s.inner.try_acquire(key, owner, ttl);
    if (key == "b" && calls++ == 0) return holdfast::result<grant>(errc::timeout);  // applied
    return g;
  };
  auto m = holdfast::try_acquire_all(s, {"a", "b", "c"}, 1000ms, options(clock, "me"));
  CHECK(m.error() == errc::timeout);
  CHECK(free_key(s.inner, "a"));
  CHECK(free_key(s.inner, "b"));  // re-asked as "me" (same token back) and released
  CHECK(free_key(s.inner, "c"));
}

TEST_CASE("try_acquire_all on the atomic path gives back after a lost reply", "[multi_lease]") {
  manual_clock clock;
  struct lossy : holdfast::memory_store<manual_clock> {
    using memory_store::memory_store;
    bool lose = true;
    holdfast::result<void> try_acquire_all(const std::string_view* k, std::size_t n,
                                           std::string_view o, ms ttl, grant* g) {
      auto r = memory_store::try_acquire_all(k, n, o, ttl, g);
      if (lose) return errc::timeout;
      return r;
    }
  } s(clock);
  static_assert(holdfast::has_try_acquire_all_v<lossy>);
  CHECK(holdfast::try_acquire_all(s, {"a", "b"}, 1000ms, options(clock, "me")).error() ==
        errc::timeout);
  CHECK(free_key(s, "a"));
  CHECK(free_key(s, "b"));
  s.lose = false;
  CHECK(holdfast::try_acquire_all(s, {"a", "b"}, 1000ms, options(clock, "me")));
}

TEST_CASE("acquire_all waits in order, renewing what it holds, and never deadlocks",
          "[multi_lease]") {
  holdfast::self_advancing_clock clock;
  holdfast::memory_store<holdfast::self_advancing_clock> inner(clock);
  // A plain LeaseStore over it (no atomic capability): the hold-and-wait path.
  struct plain {
    holdfast::memory_store<holdfast::self_advancing_clock>* s;
    holdfast::result<grant> try_acquire(std::string_view k, std::string_view o, ms t) {
      return s->try_acquire(k, o, t);
    }
    holdfast::result<grant> renew(std::string_view k, std::string_view o, fencing_token tk, ms t) {
      return s->renew(k, o, tk, t);
    }
    holdfast::result<void> release(std::string_view k, std::string_view o, fencing_token tk) {
      return s->release(k, o, tk);
    }
  } s{&inner};
  static_assert(!holdfast::has_try_acquire_all_v<plain>);
  auto o = options(clock, "me");
  // "b" is held for 3 s by someone else (renewed by nobody: it expires at 3 s).
  REQUIRE(inner.try_acquire("b", "other", 3000ms));
  auto m = holdfast::acquire_all(s, {"b", "a"}, 1000ms, 10s, o);
  REQUIRE(m);
  CHECK(m->valid());  // "a" was renewed while it waited 3 s for "b" (TTL 1 s)
  CHECK(clock.now().time_since_epoch() >= 3s);
  // The deadline passes while "b" is held: nothing is kept.
  auto o2 = options(clock, "you");
  auto late = holdfast::acquire_all(s, {"a", "b"}, 1000ms, 500ms, o2);
  CHECK(late.error() == errc::timeout);
  CHECK(!held_by(inner, "a", "you"));
}

TEST_CASE("acquire_all on the atomic path retries until the keys are free", "[multi_lease]") {
  holdfast::self_advancing_clock clock;
  holdfast::memory_store<holdfast::self_advancing_clock> s(clock);
  REQUIRE(s.try_acquire("b", "other", 2000ms));
  auto m = holdfast::acquire_all(s, {"a", "b"}, 1000ms, 5s, options(clock));
  REQUIRE(m);
  CHECK(clock.now().time_since_epoch() >= 2s);
  auto none = holdfast::acquire_all(s, {"b", "c"}, 1000ms, 0ms, options(clock));
  CHECK(none.error() == errc::timeout);
  CHECK(free_key(s, "c"));
}

TEST_CASE("a multi_lease is kept alive by a keepalive and released together", "[multi_lease]") {
  holdfast::self_advancing_clock clock;
  holdfast::memory_store<holdfast::self_advancing_clock> s(clock);
  holdfast::keepalive_options ko;
  ko.start_thread = false;
  holdfast::keepalive<holdfast::self_advancing_clock> ka(clock, ko);
  {
    auto m = holdfast::try_acquire_all(s, {"a", "b"}, 1000ms, options(clock));
    REQUIRE(m);
    REQUIRE(holdfast::keep_alive_all(ka, *m));
    const auto until = clock.now() + 5s;
    while (clock.now() < until) {
      auto next = ka.poll();
      clock.sleep_until(next && *next < until ? *next : until);
    }
    CHECK(m->valid());
    CHECK(!free_key(s, "a"));
  }
  CHECK(free_key(s, "a"));
  CHECK(free_key(s, "b"));
}

#if HOLDFAST_HAS_EXCEPTIONS
TEST_CASE("a store's exception reaches the caller unchanged, after what was taken is given back",
          "[multi_lease]") {
  manual_clock clock;
  scripted_store s(clock);
  s.on_acquire = [&](std::string_view key, std::string_view owner, ms ttl) {
    if (key == "b") throw holdfast_test::store_failure("store down", 7);
    return s.inner.try_acquire(key, owner, ttl);
  };
  int code = 0;
  try {
    (void)holdfast::try_acquire_all(s, {"a", "b"}, 1000ms, options(clock, "me"));
  } catch (const holdfast_test::store_failure& e) {
    code = e.code;
  }
  CHECK(code == 7);
  CHECK(free_key(s.inner, "a"));  // the lease on "a" released itself while unwinding
}
#endif

TEST_CASE("the negative controls of acquire_all differ by their one bug", "[multi_lease]") {
  using holdfast::detail::multi_mutation;
  manual_clock clock;
  scripted_store s(clock);
  std::vector<std::string> order;
  s.on_acquire = [&](std::string_view key, std::string_view owner, ms ttl) {
    order.emplace_back(key);
    return s.inner.try_acquire(key, owner, ttl);
  };
  REQUIRE(s.inner.try_acquire("c", "other", 1000ms));
  const auto o = options(clock, "me");
  holdfast::detail::multi_control<scripted_store, manual_clock> unordered;
  unordered.mutation = multi_mutation::unordered;
  auto req = holdfast::detail::prepare_multi({"b", "a"}, 1000ms, o, unordered.mutation);
  REQUIRE(req);
  REQUIRE(holdfast::detail::take_all(s, *req, o, &unordered));
  CHECK(order == std::vector<std::string>{"b", "a"});  // the caller's order, not sorted
  holdfast::detail::multi_control<scripted_store, manual_clock> keeps;
  keeps.mutation = multi_mutation::keeps_partial;
  auto req2 = holdfast::detail::prepare_multi({"c", "b2"}, 1000ms, options(clock, "you"));
  REQUIRE(req2);
  CHECK(holdfast::detail::take_all(s, *req2, o, &keeps).error() == errc::busy);
  CHECK(keeps.kept.size() == 1);  // "b2" kept after the failure on "c"
  CHECK(held_by(s.inner, "b2", "you"));
}

}  // namespace test_multi_lease
