// SPDX-License-Identifier: MIT
// Tests of the recipes' and the keepalive's constructor refusals (issue 23): each bad argument is
// errc::invalid_argument with a text in error_message() that names the argument, its value and
// the limit, and goes to acquire.report when one is set. distributed_mutex,
// recursive_distributed_mutex, election, election_observer, semaphore and keepalive, on
// memory_store and manual_clock.
#include <catch2/catch.hpp>

#include <chrono>
#include <string>

#include "holdfast/election.hpp"
#include "holdfast/election_observer.hpp"
#include "holdfast/keepalive.hpp"
#include "holdfast/mutex.hpp"
#include "holdfast/recursive_mutex.hpp"
#include "holdfast/semaphore.hpp"
#include "holdfast/stores/memory.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_recipe_errors {

using holdfast::errc;
using holdfast::manual_clock;
using namespace std::chrono_literals;
using store_type = holdfast::memory_store<manual_clock>;

namespace {

// error() and error_message() of anything with both.
template <class T>
std::string refusal(const T& t) {
  CHECK(t.error() == errc::invalid_argument);
  return t.error_message();
}

// memory_store with a floor under its TTLs (store_min_ttl), as the real stores' min_ttl option.
struct floored_store : store_type {
  using store_type::store_type;
  [[nodiscard]] std::chrono::milliseconds min_ttl() const noexcept { return 500ms; }
};

}  // namespace

TEST_CASE("the recipes name a TTL under the store's min_ttl, one ms under it; at it is accepted",
          "[recipe_errors][semaphore][election]") {
  manual_clock clock;
  floored_store store(clock);
  holdfast::semaphore_options<manual_clock> so;
  so.acquire.clock = clock;
  CHECK(refusal(holdfast::semaphore<floored_store, manual_clock>(store, "jobs", 2, 499ms, so)) ==
        "holdfast: semaphore: invalid argument: the TTL of 499 ms is under the store's min_ttl of "
        "500 ms (its options' min_ttl: the shortest TTL it can honour)");
  CHECK_FALSE(
      holdfast::semaphore<floored_store, manual_clock>(store, "jobs", 2, 500ms, so).error());
  holdfast::election_options<manual_clock> eo;
  eo.acquire.clock = clock;
  eo.renewal.start_thread = false;
  CHECK(refusal(holdfast::election<floored_store, manual_clock>(store, "job", 499ms, eo))
            .find("the TTL of 499 ms is under the store's min_ttl of 500 ms") != std::string::npos);
}

TEST_CASE("distributed_mutex: a refused argument is named with its value and limit",
          "[recipe_errors][mutex]") {
  manual_clock clock;
  store_type store(clock);
  holdfast::mutex_options<manual_clock> o;
  o.acquire.clock = clock;
  using mutex = holdfast::distributed_mutex<store_type, manual_clock>;
  CHECK(refusal(mutex(store, "", 1s, o)) ==
        "holdfast: distributed_mutex: invalid argument: the key is empty");
  CHECK(refusal(mutex(store, "k", 0ms, o)) ==
        "holdfast: distributed_mutex: invalid argument: the TTL of 0 ms is not positive");
  CHECK(refusal(mutex(store, "k", holdfast::max_ttl + 1ms, o)) ==
        "holdfast: distributed_mutex: invalid argument: the TTL of " +
            std::to_string(holdfast::max_ttl.count() + 1) + " ms is over max_ttl (" +
            std::to_string(holdfast::max_ttl.count()) + " ms)");
  holdfast::mutex_options<manual_clock> drift = o;
  drift.acquire.validity.drift = 1.5;
  CHECK(refusal(mutex(store, "k", 1s, drift)) ==
        "holdfast: distributed_mutex: invalid argument: acquire.validity.drift of 1.5 is not in "
        "[0, 1)");
  holdfast::mutex_options<manual_clock> margin = o;
  margin.acquire.validity.margin = -1ns;
  CHECK(refusal(mutex(store, "k", 1s, margin)) ==
        "holdfast: distributed_mutex: invalid argument: acquire.validity.margin of -1 ns is "
        "negative");
  holdfast::mutex_options<manual_clock> slow = o;
  slow.acquire.backoff.initial = 2s;
  slow.acquire.backoff.max_delay = 1s;
  CHECK(refusal(mutex(store, "k", 1s, slow)) ==
        "holdfast: distributed_mutex: invalid argument: acquire.backoff.max_delay of 1000000000 "
        "ns is under initial (2000000000 ns)");
  holdfast::mutex_options<manual_clock> shrink = o;
  shrink.acquire.backoff.multiplier = 0.5;
  CHECK(refusal(mutex(store, "k", 1s, shrink)) ==
        "holdfast: distributed_mutex: invalid argument: acquire.backoff.multiplier of 0.5 is not "
        ">= 1");
  // The text also goes to acquire.report; the first refusal is the one kept.
  holdfast::acquire_report report;
  holdfast::mutex_options<manual_clock> reported = o;
  reported.acquire.report = &report;
  mutex m(store, "", 0ms, reported);
  CHECK(report.last_store_error == errc::invalid_argument);
  CHECK(report.last_store_message == m.error_message());
  CHECK(report.last_store_message ==
        "holdfast: distributed_mutex: invalid argument: the key is empty");
  holdfast::recursive_distributed_mutex<store_type, manual_clock> r(store, "", 1s, o);
  CHECK(refusal(r) == "holdfast: distributed_mutex: invalid argument: the key is empty");
  mutex good(store, "k", 1s, o);
  CHECK_FALSE(good.error());
  CHECK(good.error_message().empty());
}

TEST_CASE("election and election_observer: a refused argument is named with its value and limit",
          "[recipe_errors][election]") {
  manual_clock clock;
  store_type store(clock);
  holdfast::election_options<manual_clock> o;
  o.acquire.clock = clock;
  using election = holdfast::election<store_type, manual_clock>;
  CHECK(refusal(election(store, "", 1s, o)) ==
        "holdfast: election: invalid argument: the name is empty");
  holdfast::election_options<manual_clock> never = o;
  never.observe_interval = 0ns;
  CHECK(refusal(election(store, "job", 1s, never)) ==
        "holdfast: election: invalid argument: observe_interval of 0 ns is not in (0, 1 h]");
  holdfast::election_options<manual_clock> late = o;
  late.renewal.renew_fraction = 1.5;
  CHECK(refusal(election(store, "job", 1s, late)) ==
        "holdfast: election: invalid argument: renewal.renew_fraction of 1.5 is not in (0, 1)");
  holdfast::keepalive_options bad;
  bad.start_thread = false;
  bad.poll_interval = 2h;
  holdfast::keepalive<manual_clock> ka(clock, bad);
  holdfast::election_options<manual_clock> given = o;
  given.keepalive = &ka;
  CHECK(refusal(election(store, "job", 1s, given)) ==
        "holdfast: election: invalid argument: options.keepalive has bad options of its own (see "
        "its error_message())");
  holdfast::election_observer_options<manual_clock> oo;
  oo.clock = clock;
  using observer = holdfast::election_observer<store_type, manual_clock>;
  CHECK(refusal(observer(store, "", oo)) ==
        "holdfast: election_observer: invalid argument: the name is empty");
  oo.observe_interval = 2h;
  CHECK(refusal(observer(store, "job", oo)) ==
        "holdfast: election_observer: invalid argument: observe_interval of 7200000000000 ns is "
        "not in (0, 1 h]");
  oo.observe_interval = 1h;  // at the limit: accepted
  CHECK(observer(store, "job", oo).error_message().empty());
}

TEST_CASE("semaphore: a refused argument is named with its value and limit",
          "[recipe_errors][semaphore]") {
  manual_clock clock;
  store_type store(clock);
  holdfast::semaphore_options<manual_clock> o;
  o.acquire.clock = clock;
  using semaphore = holdfast::semaphore<store_type, manual_clock>;
  CHECK(refusal(semaphore(store, "jobs", 0, 1s, o)) ==
        "holdfast: semaphore: invalid argument: permits of 0 is not in [1, max_permits (4096)]");
  CHECK(refusal(semaphore(store, "jobs", 4097, 1s, o)) ==
        "holdfast: semaphore: invalid argument: permits of 4097 is not in [1, max_permits "
        "(4096)]");
  CHECK(semaphore(store, "jobs", 4096, 1s, o).error_message().empty());
  CHECK(refusal(semaphore(store, "", 3, 1s, o)) ==
        "holdfast: semaphore: invalid argument: the name is empty");
  holdfast::semaphore_options<manual_clock> shared = o;
  shared.unique_owner = false;
  CHECK(refusal(semaphore(store, "jobs", 3, 1s, shared)) ==
        "holdfast: semaphore: invalid argument: acquire.owner is empty, and unique_owner is false "
        "(a shared owner needs one)");
}

TEST_CASE("keepalive: a refused option is named with its value and limit",
          "[recipe_errors][keepalive]") {
  manual_clock clock;
  holdfast::keepalive_options o;
  o.start_thread = false;
  holdfast::keepalive_options fraction = o;
  fraction.renew_fraction = 0.0;
  CHECK(refusal(holdfast::keepalive<manual_clock>(clock, fraction)) ==
        "holdfast: keepalive: invalid argument: renew_fraction of 0 is not in (0, 1)");
  holdfast::keepalive_options retry = o;
  retry.retry.initial = 0ns;
  CHECK(refusal(holdfast::keepalive<manual_clock>(clock, retry)) ==
        "holdfast: keepalive: invalid argument: retry.initial of 0 ns is not positive");
  holdfast::keepalive_options poll = o;
  poll.poll_interval = -5ns;
  CHECK(refusal(holdfast::keepalive<manual_clock>(clock, poll)) ==
        "holdfast: keepalive: invalid argument: poll_interval of -5 ns is not in (0, 1 h]");
  CHECK(holdfast::keepalive<manual_clock>(clock, o).error_message().empty());
}

}  // namespace test_recipe_errors
