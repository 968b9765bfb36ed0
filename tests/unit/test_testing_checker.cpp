// SPDX-License-Identifier: MIT
// Tests of holdfast/testing/checker.hpp on hand-written histories: for every invariant, a history
// that keeps it (no false alarm) and one that breaks it (caught, named, with a timeline). The
// checker's negative controls against real broken code are in test_testing_mutants.cpp.
#include <catch2/catch.hpp>

#include <cstdint>
#include <holdfast/testing/checker.hpp>
#include <holdfast/testing/history.hpp>
#include <string>
#include <tuple>
#include <utility>

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_testing_checker {

using namespace holdfast::testing;

namespace {

constexpr std::int64_t ms = 1000000;

// A two-client, one-store history builder. Store time == true time (the store's epoch is 0).
struct builder {
  history h;
  node_id store = 0, a = 1, b = 2;

  builder() {
    h.nodes = {"store", "A", "B"};
    h.keys = {"orders"};
    h.primary_store = store;
    h.tolerance_ns = 0;
  }

  event& add(event_kind k, node_id n, std::int64_t t) {
    event e;
    e.kind = k;
    e.node = n;
    e.true_ns = t;
    e.local_ns = t;
    e.store_ns = t;
    h.add(std::move(e));
    return h.events.back();
  }
  event& grant(node_id who, const char* owner, std::int64_t t, std::uint64_t token,
               std::int64_t ttl_ms = 1000, event_kind k = event_kind::store_acquire) {
    event& e = add(k, store, t);
    e.peer = who;
    e.owner = owner;
    e.token = token;
    e.ttl_ms = ttl_ms;
    return e;
  }
  event& release(node_id who, const char* owner, std::int64_t t, std::uint64_t token) {
    event& e = add(event_kind::store_release, store, t);
    e.peer = who;
    e.owner = owner;
    e.token = token;
    return e;
  }
  event& write(node_id who, const char* owner, std::int64_t t, std::uint64_t token,
               bool admitted = true) {
    event& e = add(event_kind::write, who, t);
    e.owner = owner;
    e.token = token;
    e.outcome = admitted ? 0 : static_cast<outcome_code>(holdfast::errc::stale_token);
    return e;
  }
  event& belief(node_id who, const char* owner, std::int64_t t, std::uint64_t token, bool valid) {
    event& e = add(event_kind::validity, who, t);
    e.owner = owner;
    e.token = token;
    e.value = valid ? 1 : 0;
    return e;
  }
};

}  // namespace

TEST_CASE("checker: the README's timeline keeps every invariant", "[testing/checker]") {
  builder x;
  x.grant(x.a, "A", 0, 33, 10000);
  x.belief(x.a, "A", 1000 * ms, 33, true);
  x.add(event_kind::pause, x.a, 1000 * ms).value = 14000 * ms;
  x.grant(x.b, "B", 11000 * ms, 34, 10000);
  x.write(x.b, "B", 12000 * ms, 34);
  x.write(x.a, "A", 15000 * ms, 33, false);  // rejected: 33 < 34
  const verdict v = check(x.h);
  INFO(v.report());
  REQUIRE(v.ok());
  REQUIRE(v.report() == "all invariants hold (S1-S6, L1)\n");
}

TEST_CASE("checker: S1 catches a stale write admitted after a newer one", "[testing/checker]") {
  builder x;
  x.grant(x.a, "A", 0, 33, 10000);
  x.belief(x.a, "A", 1000 * ms, 33, true);
  x.add(event_kind::pause, x.a, 1000 * ms).value = 14000 * ms;
  x.grant(x.b, "B", 11000 * ms, 34, 10000);
  x.write(x.b, "B", 12000 * ms, 34);
  x.write(x.a, "A", 15000 * ms, 33, true);  // the bug: admitted
  const verdict v = check(x.h);
  REQUIRE(v.violated == invariant::s1_fenced_writes);
  REQUIRE(v.at == x.h.events.size() - 1);
  REQUIRE_THAT(v.what, Catch::Contains("#33") && Catch::Contains("#34"));
  // The timeline tells the README timeline's story: grant, check, stall, expiry, newer grant,
  // write.
  INFO(v.report());
  REQUIRE_THAT(v.timeline, Catch::Contains("A acquires \"orders\" ttl=10000ms"));
  REQUIRE_THAT(v.timeline, Catch::Contains("A checks its lease #33"));
  REQUIRE_THAT(v.timeline, Catch::Contains("A pauses 14.000s"));
  REQUIRE_THAT(v.timeline, Catch::Contains("expiry of A's lease #33"));
  REQUIRE_THAT(v.timeline, Catch::Contains("B writes with token #34"));
  REQUIRE_THAT(v.timeline, Catch::Contains("ADMITTED") && Catch::Contains("<- S1 violated"));
  REQUIRE_THAT(v.report(), Catch::StartsWith("S1 fenced writes violated: "));
}

TEST_CASE("checker: equal tokens are admitted many times", "[testing/checker]") {
  builder x;
  x.grant(x.a, "A", 0, 5);
  x.write(x.a, "A", 1 * ms, 5);
  x.write(x.a, "A", 2 * ms, 5);
  REQUIRE(check(x.h).ok());
}

TEST_CASE("checker: S1 catches two holders admitted under one token", "[testing/checker]") {
  // Issue 20: the store lost A's grant (#5) and re-issued #5 to B. The fence must admit only
  // one of them; a resource that admits both breaks S1. Refusing B (token_reissued) keeps it.
  for (bool b_admitted : {false, true}) {
    builder x;
    x.grant(x.a, "A", 0, 5);
    x.write(x.a, "A", 1 * ms, 5);
    x.write(x.b, "B", 2 * ms, 5, b_admitted);
    x.write(x.a, "A", 3 * ms, 5);  // A is the one holder admitted under #5: it keeps writing
    const verdict v = check(x.h);
    INFO(v.report());
    if (!b_admitted) {
      REQUIRE(v.ok());
      continue;
    }
    REQUIRE(v.violated == invariant::s1_fenced_writes);
    REQUIRE(v.at == 2);
    REQUIRE_THAT(v.what, Catch::Contains("B's write with #5") &&
                             Catch::Contains("two holders under one token"));
  }
}

TEST_CASE("checker: S2 catches a token that does not grow", "[testing/checker]") {
  builder ok;
  ok.grant(ok.a, "A", 0, 1);
  ok.release(ok.a, "A", 10 * ms, 1);
  ok.grant(ok.b, "B", 20 * ms, 2);
  REQUIRE(check(ok.h).ok());

  builder x;  // a counter reset on release
  x.grant(x.a, "A", 0, 1);
  x.release(x.a, "A", 10 * ms, 1);
  x.grant(x.b, "B", 20 * ms, 1);
  verdict v = check(x.h);
  REQUIRE(v.violated == invariant::s2_token_order);
  REQUIRE_THAT(v.timeline, Catch::Contains("A releases"));

  builder y;  // token 0 is never issued
  y.grant(y.a, "A", 0, 0);
  REQUIRE(check(y.h).violated == invariant::s2_token_order);
}

TEST_CASE("checker: the same owner re-acquiring gets the same token, not a violation",
          "[testing/checker]") {
  builder x;
  x.grant(x.a, "A", 0, 7);
  x.grant(x.a, "A", 500 * ms, 7);  // retry after a lost reply: same token, extended
  x.belief(x.a, "A", 1400 * ms, 7, true);
  REQUIRE(check(x.h).ok());
}

TEST_CASE("checker: S3 catches overlapping grants, and respects expiry and release",
          "[testing/checker]") {
  builder after_expiry;
  after_expiry.grant(after_expiry.a, "A", 0, 1, 1000);
  after_expiry.grant(after_expiry.b, "B", 1000 * ms, 2);  // exactly at expiry: fine
  REQUIRE(check(after_expiry.h).ok());

  builder x;
  x.grant(x.a, "A", 0, 1, 1000);
  x.grant(x.b, "B", 999 * ms, 2);
  const verdict v = check(x.h);
  REQUIRE(v.violated == invariant::s3_exclusive_grants);
  REQUIRE_THAT(v.what, Catch::Contains("A's lease #1 was live"));

  // The tolerance is for stores that end a lease late (they round up, their clock is coarse);
  // none may end one early (store.hpp, T2), so one tick before the expiry is still an overlap.
  builder tolerant = x;
  tolerant.h.tolerance_ns = 2 * ms;
  REQUIRE(check(tolerant.h).violated == invariant::s3_exclusive_grants);
  builder one_tick;
  one_tick.grant(one_tick.a, "A", 0, 1, 1000);
  one_tick.grant(one_tick.b, "B", 1000 * ms - 1, 2);
  REQUIRE(check(one_tick.h).violated == invariant::s3_exclusive_grants);

  // A multi-step store is judged from the store's clock when its operation began: a grant that
  // began at 1 s and committed at 1.3 s may end at 2 s, so B at 2 s is no overlap; a tick
  // earlier it is.
  builder multi;
  multi.grant(multi.a, "A", 1300 * ms, 1, 1000).begin_local_ns = 1000 * ms;
  multi.grant(multi.b, "B", 2000 * ms, 2);
  REQUIRE(check(multi.h).ok());
  builder multi_early = multi;
  multi_early.h.events[1].local_ns -= 1;
  multi_early.h.events[1].store_ns -= 1;
  REQUIRE(check(multi_early.h).violated == invariant::s3_exclusive_grants);
}

TEST_CASE("checker: S3 judges by the store's clock, not by true time", "[testing/checker]") {
  builder x;
  x.grant(x.a, "A", 0, 1, 1000);
  event& g = x.grant(x.b, "B", 900 * ms, 2);  // 0.9 s true time, but the store's clock ran fast
  g.local_ns = 1000 * ms;
  g.store_ns = 1000 * ms;
  REQUIRE(check(x.h).ok());
}

TEST_CASE("checker: S4 catches a holder that believes after its lease expired or moved",
          "[testing/checker]") {
  builder ok;
  ok.grant(ok.a, "A", 0, 1, 1000);
  ok.belief(ok.a, "A", 980 * ms, 1, true);
  ok.belief(ok.a, "A", 1500 * ms, 1, false);
  REQUIRE(check(ok.h).ok());

  builder late;
  late.grant(late.a, "A", 0, 1, 1000);
  late.belief(late.a, "A", 1001 * ms, 1, true);
  verdict v = check(late.h);
  REQUIRE(v.violated == invariant::s4_holder_belief);
  REQUIRE_THAT(v.what, Catch::Contains("had expired"));

  builder moved;
  moved.grant(moved.a, "A", 0, 1, 1000);
  moved.release(moved.a, "A", 10 * ms, 1);  // released by someone's request...
  moved.grant(moved.b, "B", 20 * ms, 2);
  moved.belief(moved.a, "A", 30 * ms, 1, true);  // ...yet A still believes
  v = check(moved.h);
  REQUIRE(v.violated == invariant::s4_holder_belief);
  REQUIRE_THAT(v.what, Catch::Contains("holder is B"));

  builder jumped = late;  // once a clock left its bound, S4 is not promised
  jumped.h.s4_until_ns = 500 * ms;
  REQUIRE(check(jumped.h).ok());
}

TEST_CASE("checker: S5 catches renew and release by non-holders, and revival",
          "[testing/checker]") {
  builder ok;
  ok.grant(ok.a, "A", 0, 1, 1000);
  ok.grant(ok.a, "A", 900 * ms, 1, 1000, event_kind::store_renew);
  ok.belief(ok.a, "A", 1800 * ms, 1, true);  // the renewal extended the lease
  ok.release(ok.a, "A", 2500 * ms, 1);       // an expired record may still be released
  REQUIRE(check(ok.h).ok());

  builder other;
  other.grant(other.a, "A", 0, 1);
  other.release(other.b, "B", 10 * ms, 1);
  REQUIRE(check(other.h).violated == invariant::s5_ownership);

  builder wrong_token;
  wrong_token.grant(wrong_token.a, "A", 0, 1);
  wrong_token.grant(wrong_token.a, "A", 10 * ms, 2, 1000, event_kind::store_renew);
  REQUIRE(check(wrong_token.h).violated == invariant::s5_ownership);

  builder revived;
  revived.grant(revived.a, "A", 0, 1, 1000);
  revived.grant(revived.a, "A", 1500 * ms, 1, 1000, event_kind::store_renew);
  const verdict v = check(revived.h);
  REQUIRE(v.violated == invariant::s5_ownership);
  REQUIRE_THAT(v.what, Catch::Contains("renew extended from the old expiry"));

  builder refused;  // a refused renew by a non-holder changes nothing and breaks nothing
  refused.grant(refused.a, "A", 0, 1);
  refused.grant(refused.b, "B", 10 * ms, 1, 1000, event_kind::store_renew).outcome =
      static_cast<outcome_code>(holdfast::errc::lease_lost);
  REQUIRE(check(refused.h).ok());
}

TEST_CASE("checker: raise_token re-labels the holder's lease; by anyone else it is S5",
          "[testing/checker]") {
  builder ok;
  ok.grant(ok.a, "A", 0, 3);
  event& r = ok.grant(ok.a, "A", 10 * ms, 3, 0, event_kind::store_raise);
  r.value = 9;
  ok.grant(ok.a, "A", 20 * ms, 9, 1000, event_kind::store_renew);  // renewed under the new token
  ok.belief(ok.a, "A", 900 * ms, 9, true);
  ok.release(ok.a, "A", 950 * ms, 9);
  ok.grant(ok.b, "B", 960 * ms, 10);
  REQUIRE(check(ok.h).ok());

  builder low;  // after a raise to 9, a grant must carry more than 9
  low.grant(low.a, "A", 0, 3);
  low.grant(low.a, "A", 10 * ms, 3, 0, event_kind::store_raise).value = 9;
  low.release(low.a, "A", 20 * ms, 9);
  low.grant(low.b, "B", 30 * ms, 4);
  REQUIRE(check(low.h).violated == invariant::s2_token_order);

  builder stranger;
  stranger.grant(stranger.a, "A", 0, 3);
  stranger.grant(stranger.b, "B", 10 * ms, 3, 0, event_kind::store_raise).value = 9;
  const verdict v = check(stranger.h);
  REQUIRE(v.violated == invariant::s5_ownership);
  REQUIRE_THAT(v.timeline, Catch::Contains("raises"));

  builder late;
  late.grant(late.a, "A", 0, 3, 1000);
  late.grant(late.a, "A", 1500 * ms, 3, 0, event_kind::store_raise).value = 9;
  REQUIRE(check(late.h).violated == invariant::s5_ownership);
}

TEST_CASE("checker: a request the store never applied is ignored", "[testing/checker]") {
  builder x;
  x.grant(x.a, "A", 0, 1, 1000);
  x.grant(x.b, "B", 10 * ms, 2).outcome = not_applied;
  REQUIRE(check(x.h).ok());
}

TEST_CASE("checker: L1 requires the contender to acquire within the bound after healing",
          "[testing/checker]") {
  builder ok;
  ok.add(event_kind::heal, no_node, 0).value = 1500 * ms;
  ok.add(event_kind::liveness_acquired, ok.b, 1400 * ms);
  REQUIRE(check(ok.h).ok());

  builder slow;
  slow.add(event_kind::heal, no_node, 0).value = 1500 * ms;
  slow.add(event_kind::liveness_acquired, slow.b, 1600 * ms);
  REQUIRE(check(slow.h).violated == invariant::l1_liveness);

  builder failed;
  failed.add(event_kind::heal, no_node, 0).value = 1500 * ms;
  failed.add(event_kind::liveness_failed, failed.b, 3000 * ms).outcome =
      static_cast<outcome_code>(holdfast::errc::timeout);
  REQUIRE(check(failed.h).violated == invariant::l1_liveness);

  builder silent;
  silent.add(event_kind::heal, no_node, 0).value = 1500 * ms;
  REQUIRE(check(silent.h).violated == invariant::l1_liveness);
}

TEST_CASE("checker: the first violation in event order is the one reported", "[testing/checker]") {
  builder x;
  x.grant(x.a, "A", 0, 2);
  x.grant(x.b, "B", 10 * ms, 1);  // S2 (and S3) here...
  x.write(x.b, "B", 20 * ms, 2);
  x.write(x.a, "A", 30 * ms, 1);  // ...before S1 here
  REQUIRE(check(x.h).violated == invariant::s2_token_order);
}

TEST_CASE("history: to_string is one fixed-format line per event", "[testing/checker]") {
  builder x;
  x.grant(x.a, "A", 0, 3).note = fault_note::reply_lost;
  const std::string text = to_string(x.h);
  REQUIRE(text ==
          "0 t=0 local=0 store=0 store<-A store_acquire key=0 owner=A token=3 ttl=1000 "
          "outcome=ok seen=ok value=0 note=reply_lost\n");
  REQUIRE(std::string(tag(invariant::s3_exclusive_grants)) == "S3");
  REQUIRE(std::string(to_string(invariant::l1_liveness)) == "L1 liveness");
}

TEST_CASE("checker: a grant with a garbage TTL is reported as T4, without overflowing",
          "[testing/checker]") {
  // Review input: a store granting a TTL near the top of the millisecond range. Before, the
  // checker computed now + ttl_ms * 1000000 in int64 (signed overflow, UB) and said nothing.
  for (const std::int64_t ttl :
       {std::int64_t{INT64_MAX}, std::int64_t{INT64_MAX / 1000000 + 1},
        std::int64_t{holdfast::max_ttl.count() + 1}, std::int64_t{0}, std::int64_t{-1}}) {
    CAPTURE(ttl);
    builder b;
    b.grant(b.a, "A", 0, 1, ttl);
    const verdict v = check(b.h);
    REQUIRE(v.violated == invariant::t4_store_answers);
    CHECK(v.at == 0);
    CHECK_THAT(v.report(),
               Catch::Contains("T4 store answers violated") && Catch::Contains("<- T4 violated"));
  }
  // At max_ttl itself (100 years) the grant is fine, and so is a renew of it.
  builder b;
  b.grant(b.a, "A", 0, 1, holdfast::max_ttl.count());
  b.grant(b.a, "A", 1 * ms, 1, holdfast::max_ttl.count(), event_kind::store_renew);
  CHECK(check(b.h).ok());
}

TEST_CASE("checker: a store on a coarse clock may hold a grant up to one tick beyond its TTL",
          "[testing/checker]") {
  // store.hpp, T2: expiry lies in [TTL, TTL + 2 ticks] after the grant by the store's exact clock
  // (the tick the read may lag, then the wait for the first reading past it). With a 1 s tick,
  // renewing up to 2 s after the TTL is fine; at 2 s it is a revival (one tick before, at, after).
  for (const std::int64_t after : {std::int64_t{500 * ms}, std::int64_t{2000 * ms - 1},
                                   std::int64_t{2000 * ms}, std::int64_t{2000 * ms + 1}}) {
    CAPTURE(after);
    builder b;
    b.h.ticks = {1000 * ms, 0, 0};
    b.grant(b.a, "A", 0, 1, 1000);
    b.grant(b.a, "A", 1000 * ms + after, 1, 1000, event_kind::store_renew);
    const verdict v = check(b.h);
    if (after < 2000 * ms) {
      CHECK(v.ok());
    } else {
      CHECK(v.violated == invariant::s5_ownership);
    }
  }
}

TEST_CASE("checker: L2, a kept-alive holder whose clock regresses must hear of it in time",
          "[testing/checker]") {
  // testing/checker.hpp L2: within history::regression_bound_ns of true time (one renew interval,
  // its own stalls not counted) a loss report, a failed check or a renewal must follow the
  // regression.
  const auto base = [] {
    builder b;
    b.h.regression_bound_ns = 500 * ms;
    b.grant(b.a, "A", 0, 1);
    b.add(event_kind::acquired, b.a, 0).owner = "A";
    b.add(event_kind::clock_regress, b.a, 100 * ms).value = -5000 * ms;
    return b;
  };
  SECTION("heard at the bound, and one tick before it: no violation") {
    for (const std::int64_t at : {std::int64_t{599 * ms}, std::int64_t{600 * ms}}) {
      builder b = base();
      event& lost = b.add(event_kind::lease_lost, b.a, at);
      lost.owner = "A";
      lost.value = 4;  // loss_cause::clock_regressed
      b.add(event_kind::heal, no_node, 2000 * ms).value = 10000 * ms;
      b.add(event_kind::liveness_acquired, b.b, 2100 * ms);
      CHECK(check(b.h).ok());
    }
  }
  SECTION("heard one tick after the bound: L2") {
    builder b = base();
    b.add(event_kind::lease_lost, b.a, 600 * ms + 1).owner = "A";
    const verdict v = check(b.h);
    REQUIRE(v.violated == invariant::l2_regression);
    CHECK(v.at == 2);
    CHECK_THAT(v.report(), Catch::Contains("L2 clock regression noticed violated") &&
                               Catch::Contains("<- L2 violated"));
  }
  SECTION("a renewal answers it; the holder's own stall does not count") {
    builder b = base();
    b.add(event_kind::pause, b.a, 200 * ms).value = 1000 * ms;
    b.add(event_kind::renewed, b.a, 1500 * ms).owner = "A";
    CHECK(check(b.h).ok());
  }
  SECTION("never heard, and the run goes on: L2") {
    builder b = base();
    b.add(event_kind::write, b.b, 5000 * ms).owner = "B";
    CHECK(check(b.h).violated == invariant::l2_regression);
  }
  SECTION("not checked when the bound is 0") {
    builder b = base();
    b.h.regression_bound_ns = 0;
    b.add(event_kind::write, b.b, 5000 * ms).owner = "B";
    CHECK(check(b.h).ok());
  }
}

TEST_CASE("verdict: every invariant has one tag and one name, from one table",
          "[testing/verdict]") {
  // testing/verdict.hpp: tag() and to_string() read the same table; the reports, the SVG and the
  // mutants' expectations print these exact strings.
  const std::tuple<invariant, const char*, const char*> all[] = {
      {invariant::none, "-", "no violation"},
      {invariant::s1_fenced_writes, "S1", "S1 fenced writes"},
      {invariant::s2_token_order, "S2", "S2 token order"},
      {invariant::s3_exclusive_grants, "S3", "S3 exclusive grants"},
      {invariant::s4_holder_belief, "S4", "S4 holder belief"},
      {invariant::s5_ownership, "S5", "S5 ownership"},
      {invariant::l1_liveness, "L1", "L1 liveness"},
      {invariant::s6_permit_bound, "S6", "S6 permit bound"},
      {invariant::t4_store_answers, "T4", "T4 store answers"},
      {invariant::l2_regression, "L2", "L2 clock regression noticed"},
      {invariant::o1_orphaned_grant, "O1", "O1 no orphaned grants"},
      {invariant::o2_abandoned_place, "O2", "O2 no abandoned queue places"},
  };
  for (const auto& [inv, t, name] : all) {
    CAPTURE(name);
    CHECK(std::string(tag(inv)) == t);
    CHECK(std::string(to_string(inv)) == name);
  }
  const auto outside = static_cast<invariant>(200);  // a value the enumeration does not name
  CHECK(std::string(tag(outside)) == "?");
  CHECK(std::string(to_string(outside)) == "?");
  CHECK(verdict{}.report() == "all invariants hold (S1-S6, L1)\n");
  const verdict v{invariant::s3_exclusive_grants, 4, "why", "  t=0.000s    line\n"};
  CHECK(v.report() == "S3 exclusive grants violated: why\n  t=0.000s    line\n");
}

TEST_CASE("checker: a lost lease reads loss_cause's own name in the timeline, '?' past it",
          "[testing/checker]") {
  // The lease_lost line names holdfast::to_string(loss_cause) (one table in
  // detail/lease_shared.hpp); a value no cause has must not index past it.
  const std::pair<std::int64_t, const char*> causes[] = {{0, "none"},
                                                         {1, "validity_passed"},
                                                         {2, "renew_refused"},
                                                         {3, "not_holder"},
                                                         {4, "clock_regressed"},
                                                         {5, "protocol_error"},
                                                         {6, "resigned"},
                                                         {7, "session_expired"},
                                                         {8, "?"},
                                                         {255, "?"},
                                                         {256, "?"},
                                                         {-1, "?"}};
  for (const auto& [value, name] : causes) {
    CAPTURE(value);
    builder b;
    b.h.regression_bound_ns = 500 * ms;
    b.grant(b.a, "A", 0, 1);
    b.add(event_kind::acquired, b.a, 0).owner = "A";
    b.add(event_kind::clock_regress, b.a, 100 * ms).value = -5000 * ms;
    event& lost = b.add(event_kind::lease_lost, b.a, 600 * ms + 1);  // one tick late: L2
    lost.owner = "A";
    lost.token = 1;
    lost.value = value;
    const verdict v = check(b.h);
    REQUIRE(v.violated == invariant::l2_regression);
    CHECK_THAT(v.timeline, Catch::Contains("A is told its lease #1 is lost") &&
                               Catch::Contains(std::string(" -> ") + name + "\n"));
  }
}

namespace {

// A's attempt (owner "A1"): the store grants "orders" #5 but the reply is lost (seen timeout);
// then `tail` happens, then A's attempt ends with acquire_failed at 10 ms.
template <class Tail>
verdict lost_reply_attempt(Tail tail) {
  builder x;
  x.h.keys = {"orders", "other"};
  event& g = x.grant(x.a, "A1", 1 * ms, 5);
  g.seen = static_cast<outcome_code>(holdfast::errc::timeout);
  g.note = fault_note::reply_lost;
  tail(x);
  event& end = x.add(event_kind::acquire_failed, x.a, 10 * ms);
  end.owner = "A1";
  end.outcome = static_cast<outcome_code>(holdfast::errc::timeout);
  return check(x.h);
}

}  // namespace

TEST_CASE("checker: O1 catches an attempt that walked away from a lost reply's grant",
          "[testing/checker]") {
  const verdict v = lost_reply_attempt([](builder&) {});
  INFO(v.report());
  REQUIRE(v.violated == invariant::o1_orphaned_grant);
  CHECK(v.at == 1);
  CHECK_THAT(v.what, Catch::Contains("#5") && Catch::Contains("\"orders\"") &&
                         Catch::Contains("told timeout"));
  CHECK_THAT(v.report(), Catch::StartsWith("O1 no orphaned grants violated: "));
}

TEST_CASE("checker: O1 holds when the attempt went back (asked again, or released)",
          "[testing/checker]") {
  // Asked again with the same owner (the same grant back), then released.
  CHECK(lost_reply_attempt([](builder& x) {
          x.grant(x.a, "A1", 2 * ms, 5);
          x.release(x.a, "A1", 3 * ms, 5);
        }).ok());
  // Asked again, but that request was lost: the attempt did what it could.
  CHECK(lost_reply_attempt([](builder& x) {
          event& e = x.grant(x.a, "A1", 2 * ms, 0);
          e.outcome = not_applied;
          e.seen = static_cast<outcome_code>(holdfast::errc::timeout);
        }).ok());
  // The grant expired (TTL 1 s) before the attempt ended: nothing is left behind.
  builder x;
  event& g = x.grant(x.a, "A1", 1 * ms, 5, 5);
  g.seen = static_cast<outcome_code>(holdfast::errc::timeout);
  x.add(event_kind::acquire_failed, x.a, 100 * ms).owner = "A1";
  CHECK(check(x.h).ok());
  // Another client's end of attempt, or another owner's: not this attempt's grant.
  builder y;
  event& h = y.grant(y.a, "A1", 1 * ms, 5);
  h.seen = static_cast<outcome_code>(holdfast::errc::timeout);
  y.add(event_kind::acquire_failed, y.b, 2 * ms).owner = "B1";
  CHECK(check(y.h).ok());
}

TEST_CASE("checker: O1 judges an acquired attempt by the lease it reported", "[testing/checker]") {
  // A semaphore's pass: "other" granted with its reply lost, then "orders" granted and
  // reported. The first grant is orphaned (the kind of Curator #835).
  builder x;
  x.h.keys = {"orders", "other"};
  event& lost = x.grant(x.a, "A1", 1 * ms, 5);
  lost.key = 1;
  lost.seen = static_cast<outcome_code>(holdfast::errc::timeout);
  x.grant(x.a, "A1", 2 * ms, 6);
  event& got = x.add(event_kind::acquired, x.a, 3 * ms);
  got.owner = "A1";
  got.token = 6;
  const verdict v = check(x.h);
  INFO(v.report());
  REQUIRE(v.violated == invariant::o1_orphaned_grant);
  CHECK_THAT(v.what, Catch::Contains("\"other\""));
  // The reported lease alone: fine.
  builder y;
  y.grant(y.a, "A1", 2 * ms, 6);
  event& ok = y.add(event_kind::acquired, y.a, 3 * ms);
  ok.owner = "A1";
  ok.token = 6;
  CHECK(check(y.h).ok());
}

}  // namespace test_testing_checker
