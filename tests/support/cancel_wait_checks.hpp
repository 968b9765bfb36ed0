// SPDX-License-Identifier: MIT
// What every store that waits (wait_for_release) must keep under cancellation, for the store tests
// (test_cancel_wait.cpp for memory_store, test_{redis,postgres,etcd}_cancel_wait.cpp): a blocking
// acquire, and a campaign, given a token that can be stopped wait for the holder's release with
// the same store attempts (and so the same terms) as without one, because the store's own wait
// is woken by the stop (store.hpp's cancellable wait) rather than cut into 100 ms slices each
// ending in an attempt; and a request_stop() during that wait ends it with errc::cancelled
// within a bound far under a slice's worth of attempts, after the one attempt that found the key
// busy, leaving nothing behind; and next_leader sees a hand-off between its read of the leader
// and its watch at once. Real threads and (for real stores) real servers: bounded waits.
#ifndef HOLDFAST_TESTS_SUPPORT_CANCEL_WAIT_CHECKS_HPP
#define HOLDFAST_TESTS_SUPPORT_CANCEL_WAIT_CHECKS_HPP

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "holdfast/cancel.hpp"
#include "holdfast/election.hpp"
#include "holdfast/election_observer.hpp"
#include "holdfast/lease.hpp"

namespace hf_test {

// How long the holder keeps the key while the waiter waits: several cancel_wait_slice (100 ms)
// pieces, so a sliced wait would show as extra attempts.
inline constexpr std::chrono::milliseconds cancel_wait_hold{450};

// One blocking acquire of `key` on `waiter` while a lease of `holder` holds it, released after
// cancel_wait_hold; with a stoppable (never stopped) token when `stoppable`. Returns what
// acquire_report counted (its store attempts, and the last store error they met, if any).
template <class Store>
holdfast::acquire_report attempts_across_release(Store& holder, Store& waiter,
                                                 const std::string& key, bool stoppable) {
  using namespace std::chrono_literals;
  holdfast::cancel_source src;
  auto held = holdfast::try_acquire(holder, key, 20s);
  REQUIRE(held);
  holdfast::acquire_report report;
  holdfast::acquire_options<> o;
  o.report = &report;
  if (stoppable) o.cancel = src.token();
  o.backoff.initial = 5s;  // a backoff sleep would show as a late acquire
  o.backoff.max_delay = 5s;
  std::optional<decltype(holdfast::acquire(waiter, key, 10s, 20s, o))> got;
  std::thread t([&] { got.emplace(holdfast::acquire(waiter, key, 10s, 20s, o)); });
  std::this_thread::sleep_for(cancel_wait_hold);  // real-server test: a bounded wait
  const auto released = std::chrono::steady_clock::now();
  CHECK(held->release());
  t.join();
  REQUIRE(got.has_value());
  REQUIRE(*got);
  CHECK(std::chrono::steady_clock::now() - released < 2s);  // woken by the release, no backoff
  CHECK((*got)->release());
  return report;
}

// A blocking acquire waits for a release with as many attempts with a stoppable token as
// without one (two: busy, then granted after the release; a slice-cut wait made ~6). On a real
// server `key` should be unique to the run: the suites share one server and run side by side.
template <class Store>
void check_cancellable_wait_costs_nothing(Store& holder, Store& waiter, const std::string& key) {
  const holdfast::acquire_report plain =
      attempts_across_release(holder, waiter, key + "-plain", false);
  const holdfast::acquire_report with_token =
      attempts_across_release(holder, waiter, key + "-token", true);
  INFO("without a token: " << plain.attempts << " attempts, last store error '"
                           << plain.last_store_message << "'; with one: " << with_token.attempts
                           << ", '" << with_token.last_store_message << "'");
  if (plain.last_store_error || with_token.last_store_error) {
    // A transient store error (a command timeout of a loaded sanitized run) costs an attempt of
    // its own: the counts say nothing about the wait then. Say so rather than pass silently.
    WARN("a store error met during the runs; attempts not compared");
    return;
  }
  CHECK(plain.attempts == 2);
  CHECK(with_token.attempts == plain.attempts);
}

// request_stop() while a blocking acquire waits in the store: cancelled within `bound`, after its
// one busy attempt, the holder untouched; `left_nothing(key)` says the waiter left no trace
// (its queue place) behind.
template <class Store, class LeftNothing>
void check_stop_ends_store_wait(Store& holder, Store& waiter, const std::string& key,
                                LeftNothing left_nothing,
                                std::chrono::milliseconds bound = std::chrono::milliseconds(200)) {
  using namespace std::chrono_literals;
  auto held = holdfast::try_acquire(holder, key, 20s);
  REQUIRE(held);
  holdfast::cancel_source src;
  holdfast::acquire_report report;
  holdfast::acquire_options<> o;
  o.report = &report;
  o.cancel = src.token();
  o.backoff.initial = 5s;
  o.backoff.max_delay = 5s;
  std::optional<decltype(holdfast::acquire(waiter, key, 10s, 20s, o))> got;
  std::thread t([&] { got.emplace(holdfast::acquire(waiter, key, 10s, 20s, o)); });
  std::this_thread::sleep_for(cancel_wait_hold);  // in the store's wait by now (bounded)
  const auto t0 = std::chrono::steady_clock::now();
  src.request_stop();
  t.join();
  const auto took = std::chrono::steady_clock::now() - t0;
  REQUIRE(got.has_value());
  CHECK(got->error() == holdfast::errc::cancelled);
  CHECK(took < bound);
  CHECK(report.attempts == 1);  // the busy one: the wait was not cut into attempts
  CHECK(left_nothing(key));
  auto still = holdfast::try_acquire(waiter, key, 10s);
  CHECK(still.error() == holdfast::errc::busy);  // the holder still holds it
  CHECK(held->release());
}

// What one campaign across a resignation cost: its store attempts and the term step.
struct campaign_cost {
  std::uint32_t attempts = 0;
  std::uint64_t term_step = 0;  // the new term minus the old one
};

// One campaign of `candidate` while `leader` leads, the leader resigning after cancel_wait_hold;
// with a stoppable token when `stoppable`.
template <class Store>
campaign_cost term_step_across_resign(Store& a, Store& b, const std::string& name, bool stoppable) {
  using namespace std::chrono_literals;
  holdfast::cancel_source src;
  holdfast::election<Store> leader(a, name, 20s);
  const auto first = leader.campaign(0s);
  REQUIRE(first);
  holdfast::acquire_report report;
  holdfast::election_options<> eo;
  if (stoppable) eo.acquire.cancel = src.token();
  eo.acquire.report = &report;
  eo.acquire.backoff.initial = 5s;
  eo.acquire.backoff.max_delay = 5s;
  holdfast::election<Store> candidate(b, name, 20s, eo);
  std::optional<holdfast::result<holdfast::fencing_token>> second;
  std::thread t([&] { second.emplace(candidate.campaign(20s)); });
  std::this_thread::sleep_for(cancel_wait_hold);  // bounded
  CHECK(leader.resign());
  t.join();
  REQUIRE(second.has_value());
  REQUIRE(*second);
  CHECK(candidate.resign());
  return {report.attempts, (**second).value() - first->value()};
}

// Whose tokens a campaign's term step counts.
enum class tokens_issued {
  to_this_test,  // a store of the test's own (memory_store): the step is the campaign's alone
  shared,        // a shared server (etcd revisions, a counter every suite's test bumps)
};

// Terms do not jump with a stoppable token: a campaign that waits for a resignation makes the
// same attempts as without one, so on a store whose busy attempts use up tokens the same term
// step. Where other tests take tokens from the same server meanwhile (`shared`: the suites run
// side by side), the step is theirs too and only the attempts are compared.
template <class Store>
void check_campaign_terms_do_not_jump(Store& a, Store& b, const std::string& name,
                                      tokens_issued tokens = tokens_issued::shared) {
  const campaign_cost plain = term_step_across_resign(a, b, name + "-plain", false);
  const campaign_cost with_token = term_step_across_resign(a, b, name + "-token", true);
  INFO("without a token: " << plain.attempts << " attempts, term step " << plain.term_step
                           << "; with one: " << with_token.attempts << ", step "
                           << with_token.term_step);
  CHECK(with_token.attempts == plain.attempts);
  if (tokens == tokens_issued::to_this_test) CHECK(with_token.term_step == plain.term_step);
}

// `Store` seen by an election_observer, with a hook after every inspect() read: the place where
// a hand-off between next_leader's read of the leader and its watch can fall.
template <class Store>
struct inspect_hooked {
  Store* s;
  std::function<void()> after_inspect{};
  holdfast::result<holdfast::grant> try_acquire(std::string_view k, std::string_view o,
                                                std::chrono::milliseconds t) {
    return s->try_acquire(k, o, t);
  }
  holdfast::result<holdfast::grant> renew(std::string_view k, std::string_view o,
                                          holdfast::fencing_token tok,
                                          std::chrono::milliseconds t) {
    return s->renew(k, o, tok, t);
  }
  holdfast::result<void> release(std::string_view k, std::string_view o,
                                 holdfast::fencing_token tok) {
    return s->release(k, o, tok);
  }
  holdfast::result<std::optional<holdfast::lease_record>> inspect(std::string_view k) {
    auto r = s->inspect(k);
    if (after_inspect) after_inspect();
    return r;
  }
  holdfast::result<void> watch_release(std::string_view k,
                                       const std::chrono::steady_clock::time_point& d,
                                       const holdfast::cancel_token& c = {},
                                       holdfast::fencing_token known = {}) {
    return s->watch_release(k, d, c, known);
  }
};

// next_leader(A) whose first read sees A while A hands over to B before its watch starts: it
// answers B at once (the watch is given A's term and finds B's), not after sleeping through the
// watch of B's lease until its timeout (observe_interval 30 s, timeout 5 s).
template <class Store>
void check_next_leader_sees_handoff(Store& a_store, Store& b_store, Store& observed) {
  using namespace std::chrono_literals;
  static_assert(holdfast::can_watch_known_holder_v<Store, holdfast::steady_clock>);
  inspect_hooked<Store> hooked{&observed};
  auto a = holdfast::try_acquire(a_store, "job", 20s);
  REQUIRE(a);
  holdfast::election_observer_options<> oo;
  oo.observe_interval = 30s;
  holdfast::election_observer<inspect_hooked<Store>> watcher(hooked, "job", oo);
  auto known = watcher.leader();
  REQUIRE(known);
  REQUIRE(known->has_value());
  std::optional<decltype(holdfast::try_acquire(b_store, "job", 20s))> b;
  bool handed_over = false;
  hooked.after_inspect = [&] {
    if (std::exchange(handed_over, true)) return;
    CHECK(a->release());
    b.emplace(holdfast::try_acquire(b_store, "job", 20s));
  };
  const auto t0 = std::chrono::steady_clock::now();
  auto next = watcher.next_leader(*known, 5s);
  CHECK(std::chrono::steady_clock::now() - t0 < 2s);  // not the 5 s timeout
  REQUIRE(next);
  REQUIRE(next->has_value());
  REQUIRE(b.has_value());
  REQUIRE(*b);
  CHECK((*next)->term == (**b).token());
  CHECK((**b).release());
}

}  // namespace hf_test

#endif  // HOLDFAST_TESTS_SUPPORT_CANCEL_WAIT_CHECKS_HPP
