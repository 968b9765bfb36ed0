// SPDX-License-Identifier: MIT
// Unit tests for quorum.hpp (and memory_store's token-floor capability it relies on).
//
// Most tests run the quorum with quorum_dispatch::sequential over fake members on one
// manual_clock, so every schedule is deterministic: a member's "delay" moves the shared clock
// while it answers, "down" makes it answer store_unavailable, restart_empty() replaces its store
// with a fresh one (counter and records lost). The tests marked [threads] use the default
// dispatch with real worker threads and bounded waits only.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "holdfast/fence.hpp"
#include "holdfast/keepalive.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/quorum.hpp"
#include "holdfast/stores/memory.hpp"
#include "test_support.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_quorum {

namespace {

using namespace std::chrono_literals;
using holdfast::errc;
using holdfast::fencing_token;
using holdfast::grant;
using holdfast::manual_clock;
using holdfast::quorum_dispatch;
using holdfast::quorum_options;
using holdfast::quorum_store;
using holdfast::quorum_token_mode;
using holdfast::result;
using mem = holdfast::memory_store<manual_clock>;

// A member whose faults a test controls. Models LeaseStore, inspect and the token floor.
class fake_member {
 public:
  explicit fake_member(manual_clock clock, fencing_token last_issued = {})
      : clock_(clock), store_(make(last_issued)) {}

  result<grant> try_acquire(std::string_view key, std::string_view owner,
                            std::chrono::milliseconds ttl) {
    ++acquires;
    if (std::error_code ec = before()) return ec;
    result<grant> g = store_->try_acquire(key, owner, ttl);
    if (lose_acquire_replies > 0) {  // applied at the store, the reply lost
      --lose_acquire_replies;
      if (down_after_lost_reply) down = true;
      return errc::timeout;
    }
    return g;
  }
  result<grant> renew(std::string_view key, std::string_view owner, fencing_token token,
                      std::chrono::milliseconds ttl) {
    ++renews;
    if (std::error_code ec = before()) return ec;
    return store_->renew(key, owner, token, ttl);
  }
  result<void> release(std::string_view key, std::string_view owner, fencing_token token) {
    ++releases;
    if (std::error_code ec = before()) return ec;
    return store_->release(key, owner, token);
  }
  result<std::optional<holdfast::lease_record>> inspect(std::string_view key) const {
    if (down) return errc::store_unavailable;
    return store_->inspect(key);
  }
  result<void> raise_token(std::string_view key, std::string_view owner, fencing_token token,
                           fencing_token to) {
    ++raises;
    if (std::error_code ec = before()) return ec;
    return store_->raise_token(key, owner, token, to);
  }
  result<void> raise_token_floor(fencing_token floor) {
    if (std::error_code ec = before()) return ec;
    return store_->raise_token_floor(floor);
  }

  // Loses the counter and every record, as a store restarted without persistence.
  void restart_empty() { store_ = make(fencing_token{}); }
  // Restarts keeping only the counter, as a store that persists it.
  void restart_keeping_counter() { store_ = make(store_->last_token()); }

  // The lease this member holds on `key` right now (bypassing faults), if any.
  std::optional<holdfast::lease_record> holder(std::string_view key) const {
    return store_->inspect(key).value();
  }
  fencing_token last_token() const { return store_->last_token(); }
  mem& store() { return *store_; }

  bool down = false;
  bool throws = false;
  int lose_acquire_replies = 0;        // the next n acquires apply, then answer timeout
  bool down_after_lost_reply = false;  // and the member then goes down
  std::chrono::nanoseconds delay{0};   // the shared clock moves this much (even back) per call
  int acquires = 0, renews = 0, releases = 0, raises = 0;

 private:
  std::unique_ptr<mem> make(fencing_token last) {
    return std::make_unique<mem>(clock_, holdfast::memory_store_options{last});
  }
  std::error_code before() {
    if (throws) throw std::runtime_error("member exploded");
    if (down) return errc::store_unavailable;
    if (delay != std::chrono::nanoseconds::zero()) clock_.advance(delay);
    return {};
  }

  manual_clock clock_;
  std::unique_ptr<mem> store_;
};

using quorum = quorum_store<fake_member, manual_clock>;

// N fake members on one manual clock, seeded with the given counters.
struct cluster {
  explicit cluster(std::vector<std::uint64_t> counters) {
    for (std::uint64_t c : counters) {
      members.push_back(std::make_unique<fake_member>(clock, fencing_token(c)));
    }
  }
  std::vector<fake_member*> pointers() {
    std::vector<fake_member*> v;
    for (auto& m : members) v.push_back(m.get());
    return v;
  }
  fake_member& operator[](std::size_t i) { return *members[i]; }
  std::size_t holding(std::string_view key, fencing_token token) const {
    std::size_t n = 0;
    for (const auto& m : members) {
      auto h = m->holder(key);
      n += (h && h->token == token) ? 1 : 0;
    }
    return n;
  }
  std::size_t holding_any(std::string_view key) const {
    std::size_t n = 0;
    for (const auto& m : members) n += m->holder(key) ? 1 : 0;
    return n;
  }

  manual_clock clock;
  std::vector<std::unique_ptr<fake_member>> members;
};

quorum_options sequential(quorum_token_mode mode = quorum_token_mode::floor) {
  quorum_options o;
  o.dispatch = quorum_dispatch::sequential;
  o.token_mode = mode;
  return o;
}

}  // namespace

static_assert(holdfast::is_lease_store_v<quorum>, "a quorum_store is itself a LeaseStore");
static_assert(holdfast::has_inspect_v<quorum>, "inspect() is offered when members have it");
static_assert(holdfast::is_lease_store_v<quorum_store<holdfast::memory_store<>>>);
static_assert(holdfast::has_raise_token_v<holdfast::memory_store<>>);
static_assert(holdfast::has_raise_token_floor_v<holdfast::memory_store<>>);
static_assert(holdfast::write_quorum(3, 0) == 2 && holdfast::write_quorum(5, 0) == 3);
static_assert(holdfast::write_quorum(5, 1) == 4 && holdfast::write_quorum(5, 2) == 4);
static_assert(holdfast::write_quorum(3, 1) == 3 && holdfast::write_quorum(1, 0) == 1);

TEST_CASE("memory_store raise_token re-labels a live lease and lifts the counter", "[quorum]") {
  manual_clock clock;
  mem s(clock);
  const grant g = s.try_acquire("k", "alice", 1000ms).value();
  CHECK(g.token == fencing_token(1));
  REQUIRE(s.raise_token("k", "alice", g.token, fencing_token(50)));
  CHECK(s.inspect("k").value()->token == fencing_token(50));
  CHECK(s.last_token() == fencing_token(50));
  // Retrying the same raise succeeds again; the lease now answers to the new token only.
  CHECK(s.raise_token("k", "alice", g.token, fencing_token(50)));
  CHECK(s.renew("k", "alice", g.token, 1000ms).error() == errc::lease_lost);
  CHECK(s.renew("k", "alice", fencing_token(50), 1000ms));
  // The next grant of any key is above the raised token.
  CHECK(s.try_acquire("other", "bob", 1000ms).value().token == fencing_token(51));
  // Refused: a stranger, a wrong token, a lower target, bad tokens; nothing changes.
  CHECK(s.raise_token("k", "mallory", fencing_token(50), fencing_token(90)).error() ==
        errc::lease_lost);
  CHECK(s.raise_token("k", "alice", fencing_token(7), fencing_token(90)).error() ==
        errc::lease_lost);
  CHECK(s.raise_token("k", "alice", fencing_token(50), fencing_token(49)).error() ==
        errc::invalid_argument);
  CHECK(s.raise_token("k", "alice", fencing_token(50), fencing_token::max()).error() ==
        errc::invalid_argument);
  CHECK(s.raise_token("", "alice", fencing_token(50), fencing_token(60)).error() ==
        errc::invalid_argument);
  CHECK(s.last_token() == fencing_token(51));
  // A raise that arrives after the lease expired changes nothing (the proof in quorum.hpp
  // needs this: a late raise must not lift a counter past a grant made in the meantime).
  clock.advance(1001ms);
  CHECK(s.raise_token("k", "alice", fencing_token(50), fencing_token(900)).error() ==
        errc::lease_lost);
  CHECK(s.last_token() == fencing_token(51));
  // The floor only goes up.
  CHECK(s.raise_token_floor(fencing_token(10)));
  CHECK(s.last_token() == fencing_token(51));
  CHECK(s.raise_token_floor(fencing_token(70)));
  CHECK(s.try_acquire("k", "bob", 10ms).value().token == fencing_token(71));
  CHECK(s.raise_token_floor(fencing_token{}).error() == errc::invalid_argument);
}

TEST_CASE("quorum_store rejects bad configurations and bad input before any member is asked",
          "[quorum]") {
  cluster c({0, 0, 0, 0, 0});
  const auto all = c.pointers();
  auto bad = [&](std::vector<fake_member*> members, quorum_options o, const std::string& why) {
    quorum q(std::move(members), o, c.clock);
    CHECK(q.check() == errc::invalid_argument);
    CHECK(q.error_message() == "holdfast: quorum_store: invalid argument: " + why);
    CHECK(q.try_acquire("k", "o", 1000ms).error() == errc::invalid_argument);
    CHECK(q.renew("k", "o", fencing_token(1), 1000ms).error() == errc::invalid_argument);
    CHECK(q.release("k", "o", fencing_token(1)).error() == errc::invalid_argument);
    CHECK(q.inspect("k").error() == errc::invalid_argument);
  };
  bad({}, sequential(), "quorum of 0 members: the number must be odd (1, 3, 5, ...)");
  bad({all[0], all[1]}, sequential(), "quorum of 2 members: the number must be odd (1, 3, 5, ...)");
  bad({all[0], all[1], all[0]}, sequential(), "members 0 and 2 are one store");
  bad({all[0], nullptr, all[2]}, sequential(), "member 1 is null");
  quorum_options o = sequential();
  o.empty_restarts = 3;
  bad({all[0], all[1], all[2]}, o,
      "empty_restarts of 3 leaves no write quorum in 3 members (W = floor((members + "
      "empty_restarts) / 2) + 1 = 4)");
  o = sequential();
  o.member_timeout = 0ms;
  bad(all, o, "member_timeout of 0 ms is not in (0, max_ttl]");
  o = sequential();
  o.member_timeout_share = 0.0;
  bad(all, o, "member_timeout_share of 0.000000 is not in (0, 1]");
  o = sequential();
  o.validity.drift = 1.0;
  bad(all, o, "validity.drift of 1.000000 is not in [0, 1)");
  o = sequential();
  o.max_queued = 0;
  bad(all, o, "max_queued of 0 is not >= 1");
  for (auto& m : c.members) CHECK(m->acquires + m->renews + m->releases == 0);

  quorum q(all, sequential(), c.clock);
  REQUIRE(!q.check());
  CHECK(q.error_message().empty());
  CHECK(q.size() == 5);
  CHECK(q.quorum() == 3);
  CHECK(q.try_acquire("", "o", 1000ms).error() == errc::invalid_argument);
  CHECK(q.try_acquire("k", "", 1000ms).error() == errc::invalid_argument);
  CHECK(q.try_acquire("k", "o", 0ms).error() == errc::invalid_argument);
  CHECK(q.try_acquire("k", "o", -5ms).error() == errc::invalid_argument);
  CHECK(q.try_acquire("k", "o", holdfast::max_ttl + 1ms).error() == errc::invalid_argument);
  CHECK(q.renew("k", "o", fencing_token{}, 1000ms).error() == errc::invalid_argument);
  CHECK(q.renew("k", "o", fencing_token::max(), 1000ms).error() == errc::invalid_argument);
  CHECK(q.release("k", "o", fencing_token{}).error() == errc::invalid_argument);
  CHECK(q.inspect("").error() == errc::invalid_argument);
  CHECK(q.raise_token_floor(fencing_token{}).error() == errc::invalid_argument);
  for (auto& m : c.members) CHECK(m->acquires + m->renews + m->releases == 0);
}

TEST_CASE("quorum_store grants one token that every member holds, and releases everywhere",
          "[quorum]") {
  cluster c({3, 9, 1});
  quorum q(c.pointers(), sequential(), c.clock);
  const grant g = q.try_acquire("orders", "alice", 1000ms).value();
  CHECK(g.token == fencing_token(10));  // the max of 4, 10, 2, raised everywhere
  CHECK(g.ttl == 1000ms);
  CHECK(c.holding("orders", g.token) == 3);
  CHECK(q.try_acquire("orders", "bob", 1000ms).error() == errc::busy);
  // Re-acquiring one's own lease returns the same token (T1).
  CHECK(q.try_acquire("orders", "alice", 1000ms).value().token == g.token);
  const auto rec = q.inspect("orders").value();
  REQUIRE(rec);
  CHECK(rec->owner == "alice");
  CHECK(rec->token == g.token);
  CHECK(rec->remaining == 1000ms);
  CHECK(q.renew("orders", "alice", g.token, 2000ms).value() == grant{g.token, 2000ms});
  CHECK(q.release("orders", "bob", g.token).error() == errc::not_holder);
  REQUIRE(q.release("orders", "alice", g.token));
  CHECK(c.holding_any("orders") == 0);
  CHECK(q.inspect("orders").value() == std::nullopt);
  CHECK(q.release("orders", "alice", g.token).error() == errc::not_holder);
  CHECK(q.try_acquire("orders", "bob", 1000ms).value().token > g.token);
}

TEST_CASE("quorum_store keeps working with a minority of members down", "[quorum]") {
  cluster c({0, 0, 0, 0, 0});
  quorum q(c.pointers(), sequential(), c.clock);
  c[1].down = true;
  c[3].down = true;
  const grant g = q.try_acquire("k", "alice", 1000ms).value();
  CHECK(c.holding("k", g.token) == 3);
  c.clock.advance(400ms);
  CHECK(q.renew("k", "alice", g.token, 1000ms));
  CHECK(q.inspect("k").value()->owner == "alice");
  CHECK(q.release("k", "alice", g.token));
  CHECK(c.holding_any("k") == 0);
}

TEST_CASE("quorum_store reports store_unavailable with a majority down and keeps nothing",
          "[quorum]") {
  cluster c({0, 0, 0, 0, 0});
  quorum q(c.pointers(), sequential(), c.clock);
  c[0].down = c[2].down = c[4].down = true;
  CHECK(q.try_acquire("k", "alice", 1000ms).error() == errc::store_unavailable);
  CHECK(c.holding_any("k") == 0);  // the two grants it got were given back
  CHECK(c[1].releases == 1);
  CHECK(c[3].releases == 1);
  CHECK(q.inspect("k").error() == errc::store_unavailable);
  c[0].down = c[2].down = c[4].down = false;
  const grant g = q.try_acquire("k", "alice", 1000ms).value();
  c[0].down = c[2].down = c[4].down = true;
  CHECK(q.renew("k", "alice", g.token, 1000ms).error() == errc::store_unavailable);
  CHECK(q.release("k", "alice", g.token).error() == errc::store_unavailable);
}

TEST_CASE("quorum_store under contention: busy below W, partial grants released", "[quorum]") {
  cluster c({0, 0, 0, 0, 0});
  quorum q(c.pointers(), sequential(), c.clock);
  // Another owner holds the key on three members (e.g. it is mid-acquire): we can only get two.
  for (std::size_t i : {0u, 1u, 2u}) REQUIRE(c[i].store().try_acquire("k", "bob", 1000ms));
  CHECK(q.try_acquire("k", "alice", 1000ms).error() == errc::busy);
  CHECK(c.holding_any("k") == 3);
  CHECK(!c[3].holder("k"));
  CHECK(!c[4].holder("k"));
  // Holding only two, bob cannot stop a majority.
  REQUIRE(c[2].store().release("k", "bob", c[2].holder("k")->token));
  const grant g = q.try_acquire("k", "alice", 1000ms).value();
  CHECK(c.holding("k", g.token) == 3);
  // Busy plus down: with W answers possible, contention; with fewer, unavailable.
  cluster d({0, 0, 0});
  quorum r(d.pointers(), sequential(), d.clock);
  REQUIRE(d[0].store().try_acquire("x", "bob", 1000ms));
  d[1].down = true;
  CHECK(r.try_acquire("x", "alice", 1000ms).error() == errc::busy);
  REQUIRE(d[0].store().try_acquire("y", "bob", 1000ms));
  d[2].down = true;
  CHECK(r.try_acquire("y", "alice", 1000ms).error() == errc::store_unavailable);
}

TEST_CASE("a member slower than its timeout counts as failed; its late grant is given back",
          "[quorum]") {
  cluster c({0, 0, 0, 0, 0});
  quorum_options o = sequential();
  o.member_timeout = 20ms;
  quorum q(c.pointers(), o, c.clock);
  c[4].delay = 30ms;  // over the 20 ms per-member timeout
  const grant g = q.try_acquire("k", "alice", 1000ms).value();
  CHECK(c.holding("k", g.token) == 4);
  CHECK(!c[4].holder("k"));  // its late grant was released before the quorum reported
  CHECK(c[4].acquires == 1);
  CHECK(c[4].releases == 1);
  REQUIRE(q.release("k", "alice", g.token));
  CHECK(c.holding_any("k") == 0);
  // When too many are slow the quorum fails and every late grant is given back.
  c[2].delay = c[3].delay = 30ms;
  CHECK(q.try_acquire("k", "alice", 1000ms).error() == errc::store_unavailable);
  CHECK(c.holding_any("k") == 0);
  // (Under quorum_dispatch::threads a late grant joins the lease instead: test_quorum_concurrency.)
}

TEST_CASE("a quorum reached after the validity is gone is given back with timeout", "[quorum]") {
  cluster c({0, 0, 0});
  quorum_options o = sequential();
  o.member_timeout = 1000ms;
  o.member_timeout_share = 1.0;
  quorum q(c.pointers(), o, c.clock);
  for (auto& m : c.members) m->delay = 330ms;  // 990 ms in all; validity is 1000*0.99-2 = 988
  CHECK(q.try_acquire("k", "alice", 1000ms).error() == errc::timeout);
  CHECK(c.holding_any("k") == 0);
  for (auto& m : c.members) m->delay = 320ms;  // 960 ms: still valid
  const grant g = q.try_acquire("k", "alice", 1000ms).value();
  for (auto& m : c.members) m->delay = 330ms;
  CHECK(q.renew("k", "alice", g.token, 1000ms).error() == errc::timeout);
  // A clock that goes backwards during the acquire leaves no validity to trust.
  for (auto& m : c.members) m->delay = 0ms;
  REQUIRE(q.release("k", "alice", g.token));
  c[2].delay = -10ms;
  CHECK(q.try_acquire("k", "alice", 1000ms).error() == errc::timeout);
  CHECK(c.holding_any("k") == 0);
}

// The negative control and the fix on one deterministic schedule (the example in quorum.hpp).
TEST_CASE("naive max goes backwards across majorities; the token floor does not", "[quorum]") {
  for (quorum_token_mode mode : {quorum_token_mode::naive_max, quorum_token_mode::floor}) {
    cluster c({0, 100, 0});
    quorum q(c.pointers(), sequential(mode), c.clock);
    holdfast::fenced<int> db;
    c[2].down = true;  // grant 1 on {A, B}
    const grant g1 = q.try_acquire("k", "alice", 1000ms).value();
    CHECK(g1.token == fencing_token(101));
    REQUIRE(db.write(g1.token, "alice", [](int& v) { v = 1; }));
    REQUIRE(q.release("k", "alice", g1.token));
    c[2].down = false;
    c[1].down = true;  // grant 2 on {A, C}
    const grant g2 = q.try_acquire("k", "bob", 1000ms).value();
    if (mode == quorum_token_mode::naive_max) {
      CHECK(g2.token == fencing_token(2));  // A issues 2, C issues 1: backwards
      CHECK(g2.token < g1.token);
      // The gate still refuses it (S1), at the cost of bob's progress.
      CHECK(db.write(g2.token, "bob", [](int& v) { v = 2; }).error() == errc::stale_token);
    } else {
      CHECK(g2.token == fencing_token(102));  // A was raised to 101 by grant 1
      CHECK(g2.token > g1.token);
      CHECK(db.write(g2.token, "bob", [](int& v) { v = 2; }));
    }
    // Renew and release work in both modes (the negative control differs only in its tokens).
    CHECK(q.renew("k", "bob", g2.token, 1000ms));
    CHECK(q.release("k", "bob", g2.token));
    CHECK(c.holding_any("k") == 0);
  }
}

TEST_CASE("the raise round runs only while the members' counters disagree", "[quorum]") {
  cluster c({5, 0, 2, 0, 7});
  quorum q(c.pointers(), sequential(), c.clock);
  const grant g = q.try_acquire("k", "alice", 1000ms).value();
  CHECK(g.token == fencing_token(8));
  int raises = 0;
  for (auto& m : c.members) raises += m->raises;
  CHECK(raises == 4);  // everybody below 8 was raised
  REQUIRE(q.release("k", "alice", g.token));
  for (auto& m : c.members) m->raises = 0;
  fencing_token last = g.token;
  for (int i = 0; i < 20; ++i) {  // counters now move together: one round trip per grant
    const grant h = q.try_acquire("k", "alice", 1000ms).value();
    CHECK(h.token > last);
    last = h.token;
    REQUIRE(q.release("k", "alice", h.token));
  }
  for (auto& m : c.members) CHECK(m->raises == 0);
}

TEST_CASE("a raise refused because the member lost the lease leaves no quorum", "[quorum]") {
  cluster c({0, 100, 0});
  quorum_options o = sequential();
  o.member_timeout = 100ms;
  o.member_timeout_share = 1.0;
  quorum q(c.pointers(), o, c.clock);
  c[2].down = true;
  // A grants token 1 at t=45 (expiring at 145), B grants 101 at t=105, both within the 100 ms
  // per-member wait. A's raise to 101 lands at t=150, after A's lease expired: refused.
  c[0].delay = 45ms;
  c[1].delay = 60ms;
  CHECK(q.try_acquire("k", "alice", 100ms).error() == errc::store_unavailable);
  CHECK(c[0].raises == 1);
  CHECK(c[0].last_token() == fencing_token(1));  // the refused raise lifted nothing
  CHECK(c.holding_any("k") == 0);
}

TEST_CASE("a member restarted empty makes tokens regress; the fence gate still holds (S1)",
          "[quorum]") {
  cluster c({0, 100, 0});
  quorum q(c.pointers(), sequential(), c.clock);
  holdfast::fence_gate gate;
  c[2].down = true;  // grant 1 on {A, B}: T1 = 101, A raised to 101
  const grant g1 = q.try_acquire("k", "alice", 1000ms).value();
  CHECK(g1.token == fencing_token(101));
  REQUIRE(gate.admit(g1.token, "alice"));
  c.clock.advance(1000ms);  // alice's lease expires (she crashed)
  c[0].restart_empty();     // A restarts without its counter
  c[2].down = false;
  c[1].down = true;  // grant 2 on {A, C}: they intersect grant 1 only in the restarted A
  const grant g2 = q.try_acquire("k", "bob", 1000ms).value();
  CHECK(g2.token < g1.token);  // S2 is lost with W = majority and an empty restart
  CHECK(gate.admit(g2.token, "bob").error() == errc::stale_token);  // S1 holds: bob is fenced off
  // The liveness cost and its cure: lift the floor to the gate's newest, acquire again.
  REQUIRE(q.release("k", "bob", g2.token));
  REQUIRE(q.raise_token_floor(gate.newest()));
  const grant g3 = q.try_acquire("k", "bob", 1000ms).value();
  CHECK(g3.token > g1.token);
  CHECK(gate.admit(g3.token, "bob"));
}

TEST_CASE("members that keep their counter, or empty_restarts = f, keep tokens monotonic",
          "[quorum]") {
  SECTION("counter persisted") {
    cluster c({0, 100, 0});
    quorum q(c.pointers(), sequential(), c.clock);
    c[2].down = true;
    const grant g1 = q.try_acquire("k", "alice", 1000ms).value();
    c.clock.advance(1000ms);
    c[0].restart_keeping_counter();
    c[2].down = false;
    c[1].down = true;
    CHECK(q.try_acquire("k", "bob", 1000ms).value().token > g1.token);
  }
  SECTION("five members, W = 3: two restarts between grants regress") {
    cluster c({0, 0, 100, 0, 0});
    quorum q(c.pointers(), sequential(), c.clock);
    c[3].down = c[4].down = true;  // grant 1 on {A, B, C}
    const grant g1 = q.try_acquire("k", "alice", 1000ms).value();
    c.clock.advance(1000ms);
    c[0].restart_empty();
    c[1].restart_empty();
    c[3].down = c[4].down = false;
    c[2].down = true;  // grant 2 on {A, B, D, E}
    CHECK(q.try_acquire("k", "bob", 1000ms).value().token < g1.token);
  }
  SECTION("five members, empty_restarts = 2 (W = 4): the same two restarts keep the order") {
    cluster c({0, 0, 100, 0, 0});
    quorum_options o = sequential();
    o.empty_restarts = 2;
    quorum q(c.pointers(), o, c.clock);
    REQUIRE(q.quorum() == 4);
    c[3].down = c[4].down = true;  // the price: two members down is now unavailable
    CHECK(q.try_acquire("k", "alice", 1000ms).error() == errc::store_unavailable);
    c[3].down = false;  // grant 1 on {A, B, C, D}
    const grant g1 = q.try_acquire("k", "alice", 1000ms).value();
    c.clock.advance(1000ms);
    c[0].restart_empty();
    c[1].restart_empty();
    c[4].down = false;
    c[2].down = true;  // grant 2 on {A, B, D, E}: D kept its raised counter
    CHECK(q.try_acquire("k", "bob", 1000ms).value().token > g1.token);
  }
}

TEST_CASE("quorum renew and release need W members", "[quorum]") {
  cluster c({0, 0, 0, 0, 0});
  quorum q(c.pointers(), sequential(), c.clock);
  const grant g = q.try_acquire("k", "alice", 1000ms).value();
  // Three members lose the lease (restarted empty): W can no longer renew, the lease is lost.
  c[0].restart_empty();
  c[1].restart_empty();
  CHECK(q.renew("k", "alice", g.token, 1000ms));  // three still hold it
  c[2].restart_empty();
  CHECK(q.renew("k", "alice", g.token, 1000ms).error() == errc::lease_lost);
  // Two lost + one down: W is unreachable by the answers, but not provably lost: transient.
  cluster d({0, 0, 0, 0, 0});
  quorum r(d.pointers(), sequential(), d.clock);
  const grant h = r.try_acquire("k", "alice", 1000ms).value();
  d[0].restart_empty();
  d[1].restart_empty();
  d[2].down = true;
  CHECK(r.renew("k", "alice", h.token, 1000ms).error() == errc::store_unavailable);
  // Release: two released, two restarted say not_holder, one down: cannot tell whether W held
  // it, so unavailable (the two that answered are free now; the TTL frees the rest).
  CHECK(r.release("k", "alice", h.token).error() == errc::store_unavailable);
  CHECK(d[3].holder("k") == std::nullopt);
  CHECK(d[4].holder("k") == std::nullopt);
  // Once the down member answers not_holder too, the answer is definite.
  d[2].down = false;
  d[2].restart_empty();
  CHECK(r.release("k", "alice", h.token).error() == errc::not_holder);
  // A holder whose lease expired and was taken over is told not_holder, although one member
  // still had its stale record (which it removes).
  cluster x({0, 0, 0, 0, 0});
  quorum xq(x.pointers(), sequential(), x.clock);
  const grant old = xq.try_acquire("k", "alice", 100ms).value();
  x.clock.advance(100ms);
  x[4].down = true;
  const grant now = xq.try_acquire("k", "bob", 100ms).value();
  x[4].down = false;
  CHECK(x[4].store().size() == 1);  // alice's expired record is still there
  CHECK(xq.release("k", "alice", old.token).error() == errc::not_holder);
  CHECK(x[4].store().size() == 0);
  CHECK(x.holding("k", now.token) == 4);
  // An expired lease is never revived.
  const grant e = q.try_acquire("e", "alice", 100ms).value();
  c.clock.advance(100ms);
  CHECK(q.renew("e", "alice", e.token, 100ms).error() == errc::lease_lost);
}

TEST_CASE("quorum inspect reports the holder W members agree on", "[quorum]") {
  cluster c({0, 0, 0, 0, 0});
  quorum q(c.pointers(), sequential(), c.clock);
  REQUIRE(q.inspect("k").value() == std::nullopt);
  const grant g = q.try_acquire("k", "alice", 1000ms).value();
  c.clock.advance(100ms);
  REQUIRE(c[0].store().renew("k", "alice", g.token, 5000ms));  // one member holds it longer
  auto rec = q.inspect("k").value();
  REQUIRE(rec);
  CHECK(rec->remaining == 900ms);  // the third-longest: when fewer than W still hold it
  // Two members down, the other three agree: still the holder.
  c[3].down = c[4].down = true;
  CHECK(q.inspect("k").value()->owner == "alice");
  // Only two members left holding it and two down: cannot tell.
  c[2].restart_empty();
  CHECK(q.inspect("k").error() == errc::store_unavailable);
  c[3].down = c[4].down = false;
  c[3].restart_empty();
  c[4].restart_empty();
  CHECK(q.inspect("k").value() == std::nullopt);
}

TEST_CASE("lease<quorum_store> works unchanged: acquire, renew, fenced writes, RAII release",
          "[quorum]") {
  cluster c({0, 0, 0, 0, 0});
  quorum q(c.pointers(), sequential(), c.clock);
  holdfast::acquire_options<manual_clock> opts;
  opts.clock = c.clock;
  holdfast::fenced<int> db;
  {
    auto l = holdfast::try_acquire(q, "k", 1000ms, opts);
    REQUIRE(l);
    CHECK(l->valid());
    CHECK(db.write(*l, [](int& v) { ++v; }));
    c[1].down = true;
    c.clock.advance(500ms);
    REQUIRE(l->renew());
    CHECK(l->valid());
    CHECK(holdfast::try_acquire(q, "k", 1000ms, opts).error() == errc::busy);
    c[1].down = false;
  }  // released by the destructor, on every member (member 1 missed only the renew)
  CHECK(c.holding_any("k") == 0);
}

TEST_CASE("a member's exception is masked by a quorum and reaches the caller without one",
          "[quorum]") {
  cluster c({0, 0, 0});
  quorum q(c.pointers(), sequential(), c.clock);
  c[1].throws = true;
  const grant g = q.try_acquire("k", "alice", 1000ms).value();
  CHECK(q.release("k", "alice", g.token));
  c[2].throws = true;
  CHECK_THROWS_AS(q.try_acquire("k", "alice", 1000ms), std::runtime_error);
  CHECK(c.holding_any("k") == 0);  // member 0's grant was given back before the exception
}

namespace {

// A member that caps every TTL at 30 ms (store.hpp allows granting less than asked) and whose
// acquire reply takes 40 ms of the shared clock to arrive.
struct capped_slow_member {
  mem& store;
  manual_clock clock;
  result<grant> try_acquire(std::string_view k, std::string_view o, std::chrono::milliseconds t) {
    auto g = store.try_acquire(k, o, std::min(t, std::chrono::milliseconds(30)));
    clock.advance(40ms);
    return g;
  }
  result<grant> renew(std::string_view k, std::string_view o, fencing_token tok,
                      std::chrono::milliseconds t) {
    auto g = store.renew(k, o, tok, std::min(t, std::chrono::milliseconds(30)));
    clock.advance(40ms);
    return g;
  }
  result<void> release(std::string_view k, std::string_view o, fencing_token t) {
    return store.release(k, o, t);
  }
  result<void> raise_token(std::string_view k, std::string_view o, fencing_token a,
                           fencing_token b) {
    return store.raise_token(k, o, a, b);
  }
};

// A member that answers every renew with a grant it did not make: another token.
struct foreign_token_renew_member {
  mem store;
  explicit foreign_token_renew_member(manual_clock c) : store(c) {}
  result<grant> try_acquire(std::string_view k, std::string_view o, std::chrono::milliseconds t) {
    return store.try_acquire(k, o, t);
  }
  result<grant> renew(std::string_view, std::string_view, fencing_token tok,
                      std::chrono::milliseconds t) {
    return grant{fencing_token(tok.value() + 1000), t};
  }
  result<void> release(std::string_view k, std::string_view o, fencing_token t) {
    return store.release(k, o, t);
  }
  result<void> raise_token(std::string_view k, std::string_view o, fencing_token a,
                           fencing_token b) {
    return store.raise_token(k, o, a, b);
  }
};

}  // namespace

TEST_CASE("quorum validity is judged by the TTL the members applied, not the one asked for",
          "[quorum]") {
  manual_clock clock;
  mem m(clock);
  capped_slow_member member{m, clock};
  quorum_options opts;
  opts.dispatch = quorum_dispatch::sequential;
  quorum_store<capped_slow_member, manual_clock> q({&member}, opts, clock);
  // The member applied 30 ms and the reply took 40 ms: the grant expired at the member before it
  // arrived, so reporting it would let a second owner in while the first believes it holds it.
  auto g = q.try_acquire("orders", "owner-A", 10s);
  REQUIRE_FALSE(g);
  CHECK(g.error() == errc::timeout);
  CHECK(m.try_acquire("orders", "owner-B", 10s));  // and nothing was reported for it
}

TEST_CASE("quorum renew counts only renewals that carry the token presented", "[quorum]") {
  manual_clock clock;
  foreign_token_renew_member a(clock), b(clock), c(clock);
  quorum_options opts;
  opts.dispatch = quorum_dispatch::sequential;
  quorum_store<foreign_token_renew_member, manual_clock> q({&a, &b, &c}, opts, clock);
  auto g = q.try_acquire("orders", "owner-A", 10s);
  REQUIRE(g);
  auto r = q.renew("orders", "owner-A", g->token, 10s);
  CHECK_FALSE(r);  // every member answered with a grant it did not make: nothing was renewed
}

TEST_CASE("keepalive renews a quorum lease through a minority outage, and sees a majority's loss",
          "[quorum]") {
  cluster c({0, 0, 0, 0, 0});
  quorum q(c.pointers(), sequential(), c.clock);
  holdfast::keepalive_options ko;
  ko.start_thread = false;  // driven by poll() on the manual clock
  ko.retry.seed = 7;
  holdfast::keepalive<manual_clock> ka(c.clock, ko);
  holdfast::acquire_options<manual_clock> opts;
  opts.clock = c.clock;
  auto l = holdfast::try_acquire(q, "k", 1000ms, opts);
  REQUIRE(l);
  REQUIRE(ka.add(*l));
  c[0].down = c[4].down = true;  // a minority down: renewals go on
  for (int i = 1; i <= 10; ++i) {
    c.clock.advance(500ms);
    (void)ka.poll();
  }
  CHECK(l->valid());  // 5 s on a 1 s TTL
  CHECK(c[2].renews >= 10);
  CHECK(holdfast::try_acquire(q, "k", 1000ms, opts).error() == errc::busy);
  c[1].restart_empty();  // now a majority has lost the lease: renew says lease_lost
  c[2].restart_empty();
  c[3].restart_empty();
  c.clock.advance(500ms);
  (void)ka.poll();
  CHECK(l->state() == holdfast::lease_state::lost);
  CHECK(!l->valid());
}

// Timeline 2 of issue 22 (the kind of redlock-rb #76): 3 members, counters 0, 5, 5. A acquires:
// m1 grants #1 but its reply is lost (timeout); m2 and m3 grant #6, so the quorum reports #6.
// Before the fix nothing gave m1's #1 back: A's release(#6) found not_holder there, and with m2
// down B got busy for a whole TTL although nobody held the lock. Expected now: the acquire asks
// m1 again with A's owner (same grant, #1 != #6) and releases it, so m1 is free at once.
TEST_CASE("quorum: a member whose acquire reply was lost is given back (acquire)", "[quorum]") {
  cluster c({0, 5, 5});
  quorum q(c.pointers(), sequential());
  c[0].lose_acquire_replies = 1;
  auto a = q.try_acquire("k", "A", 10s);
  REQUIRE(a.has_value());
  CHECK(a->token == fencing_token(6));
  CHECK_FALSE(c[0].holder("k").has_value());  // asked again (#1) and released
  CHECK(c[0].acquires == 2);
  CHECK(c[0].releases == 1);
  REQUIRE(q.release("k", "A", a->token).has_value());
  c[1].down = true;
  auto b = q.try_acquire("k", "B", 10s);
  REQUIRE(b.has_value());  // m1 and m3: a quorum, at once (was: busy until A's TTL ran out)
  CHECK(b->token > a->token);
}

// The same with m1 down right after the lost reply, so the acquire cannot reclaim it; m1 then
// comes back. Expected: A's release(#6) finds not_holder at m1, asks it again with A's owner
// (#1) and releases it; B then gets m1 and m3 with m2 down.
TEST_CASE("quorum: release gives back a member holding the owner's lease under its own token",
          "[quorum]") {
  cluster c({0, 5, 5});
  quorum q(c.pointers(), sequential());
  c[0].lose_acquire_replies = 1;
  c[0].down_after_lost_reply = true;
  auto a = q.try_acquire("k", "A", 10s);
  REQUIRE(a.has_value());
  CHECK(a->token == fencing_token(6));
  c[0].down = false;
  REQUIRE(c[0].holder("k").has_value());
  CHECK(c[0].holder("k")->token == fencing_token(1));  // A's, under m1's own token
  REQUIRE(q.release("k", "A", a->token).has_value());
  CHECK_FALSE(c[0].holder("k").has_value());
  c[1].down = true;
  auto b = q.try_acquire("k", "B", 10s);
  REQUIRE(b.has_value());
}

// A failed attempt with a lost reply: m1 grants (reply lost), m2 and m3 are busy. Redlock's rule
// (nothing kept from a failed attempt) now covers m1 too. Expected: busy, and m1 free.
TEST_CASE("quorum: a failed acquire gives back a member whose reply was lost", "[quorum]") {
  cluster c({0, 0, 0});
  quorum q(c.pointers(), sequential());
  REQUIRE(c[1].store().try_acquire("k", "other", 10s).has_value());
  REQUIRE(c[2].store().try_acquire("k", "other", 10s).has_value());
  c[0].lose_acquire_replies = 1;
  CHECK(q.try_acquire("k", "A", 10s).error() == errc::busy);
  CHECK_FALSE(c[0].holder("k").has_value());
}

}  // namespace test_quorum

namespace test_quorum {

// The kind fuzz_quorum_schedule found (S2: "granted #5 to A#2 after granting A#2's #5"): a grant
// ended on the members (a release freed W - 1 of them and was cut short, or its validity passed),
// one member still held the owner's record, and the owner's next acquire was answered by that
// record (its token, a same-owner re-acquire) beside a member whose lagging counter issued the
// same token fresh. W equal answers, so the quorum reported the ended grant's token again.
TEST_CASE("quorum: the same owner after a release that ended its grant gets a greater token",
          "[quorum]") {
  cluster c({4, 4, 4});
  quorum q(c.pointers(), sequential(), c.clock);
  c[0].down = true;  // m1 misses the grant and the release: its counter stays at 4
  const grant g1 = q.try_acquire("orders", "alice", 1000ms).value();
  CHECK(g1.token == fencing_token(5));  // m2 and m3 issued 5 (no raise round)
  c[2].down = true;                     // the release frees m2 only; m3 keeps alice's record of #5
  CHECK(q.release("orders", "alice", g1.token).error() == errc::store_unavailable);
  CHECK(c.holding("orders", g1.token) == 1);
  CHECK(c[0].last_token() == fencing_token(4));
  c[0].down = false;
  c[2].down = false;
  c[1].down = true;  // m1 issues 5 fresh, m3 answers with its record of #5
  const grant g2 = q.try_acquire("orders", "alice", 1000ms).value();
  CHECK(g2.token > g1.token);  // before: #5 again, for a grant after one that ended
  CHECK(c.holding("orders", g2.token) == 2);
  CHECK(c.holding("orders", g1.token) == 0);  // both raised to it
  // The same live grant again (no release, validity left): the same token (T1).
  CHECK(q.try_acquire("orders", "alice", 1000ms).value().token == g2.token);
}

TEST_CASE("quorum: the same owner gets its token again only within the grant's validity",
          "[quorum]") {
  // TTL 1000 ms, validity 1% + 2 ms: trusted for just under 988 ms (trusted_span rounds down)
  // from the start of the acquire or renew, less the quorum clock's tick (0 on manual_clock, which
  // reads in ns); the members hold the records 1000 ms. One ns before the validity ends the
  // re-acquire is the same grant; at the end and one ns after, the grant may have ended as far
  // as the quorum can tell: a greater token (the members are raised to it).
  const auto span = std::chrono::duration_cast<std::chrono::nanoseconds>(
      holdfast::trusted_span(1000ms, quorum_options{}.validity));
  REQUIRE(span > 987ms);
  REQUIRE(span <= 988ms);
  const std::chrono::nanoseconds end = span - holdfast::clock_tick(manual_clock{});
  const std::chrono::nanoseconds tick = 1ns;
  for (const std::chrono::nanoseconds at : {end - tick, end, end + tick}) {
    cluster c({0, 0, 0});
    quorum q(c.pointers(), sequential(), c.clock);
    const grant g = q.try_acquire("k", "alice", 1000ms).value();
    c.clock.advance(at);
    const grant again = q.try_acquire("k", "alice", 1000ms).value();
    INFO("re-acquired " << at.count() << " ns after the grant");
    CHECK((again.token == g.token) == (at < end));
    CHECK(c.holding("k", again.token) == 3);
  }
  // A renewal starts the validity again.
  cluster c({0, 0, 0});
  quorum q(c.pointers(), sequential(), c.clock);
  const grant g = q.try_acquire("k", "alice", 1000ms).value();
  c.clock.advance(900ms);
  REQUIRE(q.renew("k", "alice", g.token, 1000ms));
  c.clock.advance(900ms);  // 1800 ms after the grant, 900 after the renewal
  CHECK(q.try_acquire("k", "alice", 1000ms).value().token == g.token);
}

}  // namespace test_quorum

namespace test_quorum {

namespace {

// X's validity from a grant at 0 with a 1000 ms TTL: just under 988 ms on manual_clock (see
// "the same owner gets its token again only within the grant's validity").
std::chrono::nanoseconds validity_end_1000ms() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             holdfast::trusted_span(1000ms, quorum_options{}.validity)) -
         holdfast::clock_tick(manual_clock{});
}

}  // namespace

// The lead's reproduction (a failed re-acquire by a live holder gave its lease back): 3 members,
// W = 2. X is granted #1 for 1000 ms at 0. At +10 ms X re-acquires; m1 is down, m2 and m3 apply
// it (X's records extended to 1010 ms, token #1) and their replies are lost (or m2's arrives and
// m3's is lost): store_unavailable. Before the fix the give-back asked m2 and m3 again and
// released #1 there, and at +20 ms Y was granted #2 while X's #1 had ~968 ms of validity left.
// Expected: the give-back keeps X's live #1; Y is busy one ns before, at and one ns after the end
// of X's validity (m2 and m3 hold X's extended records until 1010 ms), and is granted at 1010 ms,
// with a greater token.
TEST_CASE("quorum: a failed re-acquire by a live holder keeps its lease (T1)", "[quorum]") {
  const std::chrono::nanoseconds end = validity_end_1000ms();
  for (const bool m2_answers : {false, true}) {
    INFO((m2_answers ? "m2 answers, m3's reply lost" : "m2's and m3's replies lost"));
    cluster c({0, 0, 0});
    quorum q(c.pointers(), sequential(), c.clock);
    const grant x = q.try_acquire("k", "X", 1000ms).value();
    CHECK(x.token == fencing_token(1));
    c.clock.advance(10ms);
    c[0].down = true;
    c[1].lose_acquire_replies = m2_answers ? 0 : 1;
    c[2].lose_acquire_replies = 1;
    CHECK(q.try_acquire("k", "X", 1000ms).error() == errc::store_unavailable);
    CHECK(c.holding("k", x.token) == 3);  // m1 (down) and m2, m3: X's #1, nothing released
    CHECK(c[1].releases == 0);
    CHECK(c[2].releases == 0);
    c.clock.advance(10ms);  // +20 ms: the lead's Y
    CHECK(q.try_acquire("k", "Y", 1000ms).error() == errc::busy);
    for (const std::chrono::nanoseconds at : {end - 1ns, end, end + 1ns}) {
      c.clock.set(manual_clock::time_point(at));
      INFO("Y tries " << at.count() << " ns after X's grant");
      CHECK(q.try_acquire("k", "Y", 1000ms).error() == errc::busy);
    }
    // m2 and m3 hold X's records until 1010 ms (the failed attempt extended them, as a single
    // store's re-acquire does); m1 is still down.
    c.clock.set(manual_clock::time_point(1010ms - 1ns));
    CHECK(q.try_acquire("k", "Y", 1000ms).error() == errc::busy);
    c.clock.set(manual_clock::time_point(1010ms));
    const grant y = q.try_acquire("k", "Y", 1000ms).value();
    CHECK(y.token > x.token);
  }
}

// After the kept lease: X's renew, its re-acquire within its validity (the same grant, T1) and
// its release work as if the failed attempt had not happened; after the validity a re-acquire
// gets a greater token (S2: the book still remembers #1 and its validity, not the extension).
TEST_CASE("quorum: the lease a failed re-acquire kept renews, re-acquires and releases",
          "[quorum]") {
  const std::chrono::nanoseconds end = validity_end_1000ms();
  for (const std::chrono::nanoseconds at : {end - 1ns, end, end + 1ns}) {
    INFO("X re-acquires " << at.count() << " ns after its grant");
    cluster c({0, 0, 0});
    quorum q(c.pointers(), sequential(), c.clock);
    const grant x = q.try_acquire("k", "X", 1000ms).value();
    c.clock.advance(10ms);
    c[0].down = true;
    c[1].lose_acquire_replies = 1;
    c[2].lose_acquire_replies = 1;
    REQUIRE(q.try_acquire("k", "X", 1000ms).error() == errc::store_unavailable);
    c[0].down = false;
    c.clock.set(manual_clock::time_point(at));
    const result<grant> again = q.try_acquire("k", "X", 1000ms);
    REQUIRE(again.has_value());
    CHECK((again->token == x.token) == (at < end));
    CHECK(c.holding("k", again->token) == 3);
    REQUIRE(q.release("k", "X", again->token).has_value());
    CHECK(c.holding_any("k") == 0);
  }
  cluster c({0, 0, 0});
  quorum q(c.pointers(), sequential(), c.clock);
  const grant x = q.try_acquire("k", "X", 1000ms).value();
  c.clock.advance(10ms);
  c[0].down = true;
  c[1].lose_acquire_replies = 1;
  c[2].lose_acquire_replies = 1;
  REQUIRE(q.try_acquire("k", "X", 1000ms).error() == errc::store_unavailable);
  c.clock.advance(900ms);
  const result<grant> renewed = q.renew("k", "X", x.token, 1000ms);  // m2 and m3
  REQUIRE(renewed.has_value());
  CHECK(renewed->token == x.token);
}

// Leave nothing behind still holds once X's grant may have ended: a failed re-acquire keeps X's
// records only while the members may hold the grant by the TTL the quorum reported (T2: 1000 ms,
// plus the 1% drift bound and the clock's tick, from the start of the grant: 1010 ms). X is
// granted #1 at 0; a first failed re-acquire at +10 ms extends m2's and m3's records to 1010 ms;
// a second one (m2's and m3's replies lost again) one ns before 1010 ms keeps them (extended
// again); at 1010 ms and one ns after, the records have expired, m2 and m3 grant fresh tokens,
// and the give-back releases them: nothing of X's is left there.
TEST_CASE("quorum: a failed re-acquire after the grant's TTL gives everything back", "[quorum]") {
  const std::chrono::nanoseconds bound = 1010ms;  // 1000 ms + ceil(1% of it) + tick (0 here)
  REQUIRE(holdfast::clock_tick(manual_clock{}) == manual_clock::duration::zero());
  for (const std::chrono::nanoseconds at : {bound - 1ns, bound, bound + 1ns}) {
    INFO("X re-acquires again " << at.count() << " ns after its grant");
    cluster c({0, 0, 0});
    quorum q(c.pointers(), sequential(), c.clock);
    const grant x = q.try_acquire("k", "X", 1000ms).value();
    c[0].down = true;
    for (const std::chrono::nanoseconds when : {std::chrono::nanoseconds(10ms), at}) {
      c.clock.set(manual_clock::time_point(when));
      c[1].lose_acquire_replies = 1;
      c[2].lose_acquire_replies = 1;
      CHECK(q.try_acquire("k", "X", 1000ms).error() == errc::store_unavailable);
    }
    const bool kept = at < bound;
    CHECK(c[1].holder("k").has_value() == kept);
    CHECK(c[2].holder("k").has_value() == kept);
    CHECK(c.holding("k", x.token) == (kept ? 2u : 0u));  // m1's record ended at 1000 ms
  }
}

}  // namespace test_quorum
