// SPDX-License-Identifier: MIT
// tests/unit/test_election.cpp - election.hpp: campaign, resign, observe,
// callbacks, loss within validity, and the term as fencing token. Manual time,
// keepalive polled by hand: no real sleeps.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "holdfast/election.hpp"
#include "holdfast/fence.hpp"
#include "holdfast/stores/memory.hpp"
#include "test_support.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_election {

namespace {

using namespace std::chrono_literals;
using holdfast::errc;
using holdfast::fencing_token;
using holdfast::loss_cause;
using holdfast::manual_clock;

struct events {
  std::vector<fencing_token> started;
  std::vector<loss_cause> stopped;
};

template <class Store>
holdfast::election_options<manual_clock> options(manual_clock clock,
                                                 holdfast::keepalive<manual_clock>& ka,
                                                 std::string label, events& ev) {
  holdfast::election_options<manual_clock> o;
  o.label = std::move(label);
  o.acquire.clock = clock;
  o.keepalive = &ka;
  o.on_started_leading = [&ev](fencing_token t) { ev.started.push_back(t); };
  o.on_stopped_leading = [&ev](loss_cause c) { ev.stopped.push_back(c); };
  return o;
}

holdfast::keepalive_options manual_keepalive() {
  holdfast::keepalive_options k;
  k.start_thread = false;
  return k;
}

}  // namespace

TEST_CASE("election: campaign makes a leader whose term is the lease's fencing token",
          "[election]") {
  manual_clock clock;
  holdfast::memory_store<manual_clock> store(clock);
  holdfast::keepalive<manual_clock> ka(clock, manual_keepalive());
  events a_ev, b_ev;
  using election = holdfast::election<holdfast::memory_store<manual_clock>, manual_clock>;
  election a(store, "report", 10s, options<void>(clock, ka, "host-a", a_ev));
  election b(store, "report", 10s, options<void>(clock, ka, "host-b", b_ev));
  REQUIRE_FALSE(a.error());

  CHECK_FALSE(a.is_leader());
  CHECK(a.term().is_none());
  auto nobody = b.leader();
  REQUIRE(nobody.has_value());
  CHECK_FALSE(nobody->has_value());

  auto term = a.campaign(1s);
  REQUIRE(term.has_value());
  CHECK(*term == store.last_token());
  CHECK(a.term() == *term);
  CHECK(a.is_leader());
  REQUIRE(a_ev.started == std::vector<fencing_token>{*term});
  CHECK(a_ev.stopped.empty());
  CHECK(a.campaign(1s).value() == *term);  // already leading: same term, no second callback
  CHECK(a_ev.started.size() == 1);

  // A follower observes without campaigning: readable label and term.
  auto seen = b.leader();
  REQUIRE(seen.has_value());
  REQUIRE(seen->has_value());
  CHECK((*seen)->label == "host-a");
  CHECK((*seen)->owner.rfind("host-a/", 0) == 0);
  CHECK((*seen)->term == *term);
  CHECK((*seen)->remaining == 10s);

  CHECK(b.try_campaign().error() == errc::busy);
  CHECK_FALSE(b.is_leader());
  CHECK(b_ev.started.empty());

  // Resign: told once, and the next leader's term is greater.
  REQUIRE(a.resign().has_value());
  CHECK_FALSE(a.is_leader());
  CHECK(a.term().is_none());
  CHECK(a_ev.stopped == std::vector<loss_cause>{loss_cause::resigned});
  REQUIRE(a.resign().has_value());  // nothing to do
  CHECK(a_ev.stopped.size() == 1);
  auto next = b.try_campaign();
  REQUIRE(next.has_value());
  CHECK(*next > *term);
  CHECK(b_ev.started == std::vector<fencing_token>{*next});
}

TEST_CASE("election: a deposed leader's writes are refused by the term", "[election]") {
  manual_clock clock;
  holdfast::memory_store<manual_clock> store(clock);
  holdfast::keepalive<manual_clock> ka(clock, manual_keepalive());
  events a_ev, b_ev;
  using election = holdfast::election<holdfast::memory_store<manual_clock>, manual_clock>;
  election a(store, "job", 1s, options<void>(clock, ka, "a", a_ev));
  election b(store, "job", 1s, options<void>(clock, ka, "b", b_ev));
  holdfast::fence_gate gate;

  const fencing_token old_term = a.campaign(0s).value();
  const std::string old_owner = a.owner();
  REQUIRE(gate.admit(old_term, old_owner).has_value());
  // a stalls (no renewal: the keepalive is never polled) past its TTL; b takes
  // over.
  clock.advance(1s);
  const fencing_token new_term = b.campaign(0s).value();
  CHECK(new_term > old_term);
  REQUIRE(gate.admit(new_term, b.owner()).has_value());
  CHECK(gate.admit(old_term, old_owner).error() == errc::stale_token);  // a's late write
  // a notices on its own clock, once.
  CHECK_FALSE(a.is_leader());
  CHECK(a_ev.stopped == std::vector<loss_cause>{loss_cause::validity_passed});
  CHECK_FALSE(a.is_leader());
  CHECK(a_ev.stopped.size() == 1);
  auto seen = a.leader();
  REQUIRE(seen.has_value());
  REQUIRE(seen->has_value());
  CHECK((*seen)->label == "b");
  CHECK((*seen)->term == new_term);
}

TEST_CASE(
    "election: a leader whose renewals fail is told at the end of its "
    "validity, not later",
    "[election]") {
  manual_clock clock;
  holdfast_test::scripted_store store(clock);
  holdfast::keepalive<manual_clock> ka(clock, manual_keepalive());
  events ev;
  holdfast::election<holdfast_test::scripted_store, manual_clock> a(
      store, "job", 1000ms, options<void>(clock, ka, "a", ev));
  const fencing_token term = a.campaign(0s).value();
  (void)term;
  store.on_renew = [](std::string_view, std::string_view, fencing_token, holdfast_test::ms) {
    return holdfast::result<holdfast::grant>(errc::store_unavailable);
  };
  const auto until = a.valid_until().value();  // start + 1000ms * 0.99 - 2ms: about +988 ms
  CHECK(until.time_since_epoch() <= 988ms);
  CHECK(until.time_since_epoch() > 987ms);
  // Poll the keepalive at each instant it asks for, up to one tick before the
  // validity ends.
  for (;;) {
    const auto next = ka.poll();
    REQUIRE(next.has_value());
    if (!(*next < until)) break;
    clock.set(*next);
  }
  clock.set(until - manual_clock::duration(1));
  (void)ka.poll();
  CHECK(ev.stopped.empty());  // one tick before: still leading, still retrying
  clock.set(until);
  (void)ka.poll();
  CHECK(ev.stopped == std::vector<loss_cause>{loss_cause::validity_passed});  // at: told
  CHECK_FALSE(a.is_leader());
  CHECK(a.term().is_none());
  // The store still holds the lease a little longer (drift + margin): nobody
  // else leads yet.
  CHECK(holdfast::try_acquire(store.inner, "job", 1s,
                              [&] {
                                holdfast::acquire_options<manual_clock> o;
                                o.clock = clock;
                                return o;
                              }())
            .error() == errc::busy);
}

TEST_CASE("election: a renewal the store refuses stops the leader with that cause", "[election]") {
  manual_clock clock;
  holdfast::memory_store<manual_clock> store(clock);
  holdfast::keepalive<manual_clock> ka(clock, manual_keepalive());
  events ev;
  holdfast::election<holdfast::memory_store<manual_clock>, manual_clock> a(
      store, "job", 1s, options<void>(clock, ka, "a", ev));
  const fencing_token term = a.campaign(0s).value();
  // Someone frees the record behind the leader's back (an operator, a store
  // failover).
  REQUIRE(store.release("job", store.inspect("job").value()->owner, term).has_value());
  clock.advance(500ms);
  (void)ka.poll();
  CHECK(ev.stopped == std::vector<loss_cause>{loss_cause::renew_refused});
  CHECK_FALSE(a.is_leader());
  // A new campaign starts a new leadership with a greater term and a new owner
  // id.
  const fencing_token again = a.campaign(0s).value();
  CHECK(again > term);
  CHECK(ev.started.size() == 2);
}

TEST_CASE("election: next_leader reports changes and times out when nothing changes",
          "[election]") {
  holdfast_test::jump_clock clock;
  holdfast::memory_store<manual_clock> store(clock.manual());
  holdfast::keepalive_options k;
  k.start_thread = false;
  holdfast::election_options<holdfast_test::jump_clock> o;
  o.acquire.clock = clock;
  o.observe_interval = 100ms;
  holdfast::keepalive<holdfast_test::jump_clock> ka(clock, k);
  o.keepalive = &ka;
  o.label = "a";
  holdfast::election<holdfast::memory_store<manual_clock>, holdfast_test::jump_clock> a(
      store, "job", 1s, o);
  o.label = "watcher";
  holdfast::election<holdfast::memory_store<manual_clock>, holdfast_test::jump_clock> w(
      store, "job", 1s, o);

  auto none = w.next_leader(std::nullopt, 250ms);
  CHECK(none.error() == errc::timeout);  // asked at 0, 100, 200, 250 ms: nobody
  CHECK(clock.sleeps().size() == 3);
  const fencing_token term = a.campaign(0s).value();
  auto first = w.next_leader(std::nullopt, 1s);
  REQUIRE(first.has_value());
  REQUIRE(first->has_value());
  CHECK((*first)->term == term);
  // Unchanged until the lease expires unrenewed (1 s after the grant): then
  // nobody leads.
  auto gone = w.next_leader(*first, 5s);
  REQUIRE(gone.has_value());
  CHECK_FALSE(gone->has_value());
  CHECK(clock.manual().now().time_since_epoch() >= 1250ms);
  CHECK(clock.manual().now().time_since_epoch() <= 1350ms);
}

TEST_CASE("election: bad arguments are reported and nothing reaches the store", "[election]") {
  manual_clock clock;
  holdfast_test::scripted_store store(clock);
  holdfast::election_options<manual_clock> o;
  o.acquire.clock = clock;
  o.renewal.start_thread = false;
  holdfast::election<holdfast_test::scripted_store, manual_clock> empty_name(store, "", 1s, o);
  CHECK(empty_name.error() == errc::invalid_argument);
  CHECK(empty_name.campaign(1s).error() == errc::invalid_argument);
  holdfast::election<holdfast_test::scripted_store, manual_clock> short_ttl(store, "x", 2ms, o);
  CHECK(short_ttl.error() == errc::invalid_argument);
  o.label.clear();  // allowed: the owner ids are the random digits alone, as for a lease
  holdfast::election<holdfast_test::scripted_store, manual_clock> no_label(store, "x", 1s, o);
  CHECK_FALSE(no_label.error());
  o.label = "a";
  o.observe_interval = 0s;
  holdfast::election<holdfast_test::scripted_store, manual_clock> no_interval(store, "x", 1s, o);
  CHECK(no_interval.error() == errc::invalid_argument);
  CHECK(store.acquires == 0);
  CHECK(holdfast::label_of("host/pod-7/0123") == "host/pod-7");
  CHECK(holdfast::label_of("plain") == "plain");
  CHECK(std::string(holdfast::to_string(loss_cause::renew_refused)) == "renew_refused");
}

TEST_CASE("election: with real threads, a resignation hands leadership over at once",
          "[election][concurrency]") {
  holdfast::memory_store<> store;
  std::atomic<int> started{0};
  std::atomic<int> stopped{0};
  holdfast::election_options<> o;
  o.on_started_leading = [&](fencing_token) { ++started; };
  o.on_stopped_leading = [&](loss_cause) { ++stopped; };
  o.acquire.backoff.initial = 5s;  // a polling campaign would sleep for seconds
  o.acquire.backoff.max_delay = 5s;
  o.observe_interval = 10s;
  o.label = "a";
  holdfast::election<holdfast::memory_store<>> a(store, "role", 60s, o);
  o.label = "b";
  holdfast::election<holdfast::memory_store<>> b(store, "role", 60s, o);
  o.label = "watcher";
  holdfast::election<holdfast::memory_store<>> w(store, "role", 60s, o);
  const fencing_token first = a.campaign(1s).value();
  std::optional<fencing_token> second;
  std::thread follower([&] {
    auto t = b.campaign(20s);
    if (t) second = *t;
  });
  std::optional<holdfast::leader_info> seen;
  const auto now_leads = w.leader();  // a, asked before anyone resigns
  REQUIRE(now_leads.has_value());
  REQUIRE(now_leads->has_value());
  std::thread watcher([&] {
    auto next = w.next_leader(*now_leads, 20s);  // woken by the release, not the 10 s interval
    if (next) seen = next->value_or(holdfast::leader_info{});
  });
  const auto limit = std::chrono::steady_clock::now() + 20s;
  // Resign only once the follower waits and the watcher watches: a watch that starts after the
  // hand-off watches the new leader's lease and sleeps out the interval (next_leader reads the
  // leader, then watches whoever holds the key then: a window CI's TSan run hit, 10 s).
  while ((store.waiting() < 1 || store.watching() < 1) &&
         std::chrono::steady_clock::now() < limit) {
    std::this_thread::yield();
  }
  const auto resigned_at = std::chrono::steady_clock::now();
  REQUIRE(a.resign().has_value());
  follower.join();
  watcher.join();
  CHECK(std::chrono::steady_clock::now() - resigned_at < 4s);
  REQUIRE(second.has_value());
  CHECK(*second > first);
  CHECK(b.is_leader());
  CHECK(started.load() == 2);
  CHECK(stopped.load() == 1);
  CHECK(seen.has_value());
}

}  // namespace test_election
