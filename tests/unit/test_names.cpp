// SPDX-License-Identifier: MIT
// tests/unit/test_names.cpp - one name per idea (issue 23, part 6): every generated owner id is
// `<label>/<32 hex>` (leases, mutex, reentrant holder, semaphore, election), label_of() reads the
// label back, an election_observer watches without a TTL, and 0.1's spellings (owner_label,
// identity, stop_cause, identity_of, to_stop_cause, leader_info::identity) still compile, with
// their deprecation warnings silenced here, and mean what they meant. Manual time: no sleeps.
#include <catch2/catch.hpp>

#include <cctype>
#include <chrono>
#include <optional>
#include <string>

#include "holdfast/election.hpp"
#include "holdfast/election_observer.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/mutex.hpp"
#include "holdfast/reentrant.hpp"
#include "holdfast/semaphore.hpp"
#include "holdfast/stores/memory.hpp"

namespace test_names {

namespace {

using namespace std::chrono_literals;
using holdfast::errc;
using holdfast::loss_cause;
using holdfast::manual_clock;
using store_t = holdfast::memory_store<manual_clock>;

// True iff `id` is `<label>/` and 32 lowercase hex digits.
bool labelled(const std::string& id, const std::string& label) {
  const std::string head = label + "/";
  if (id.size() != head.size() + 32 || id.compare(0, head.size(), head) != 0) return false;
  for (std::size_t i = head.size(); i < id.size(); ++i) {
    if (!std::isxdigit(static_cast<unsigned char>(id[i]))) return false;
  }
  return holdfast::label_of(id) == label;
}

holdfast::keepalive_options polled() {
  holdfast::keepalive_options k;
  k.start_thread = false;
  return k;
}

}  // namespace

TEST_CASE("names: every generated owner id is <label>/<32 hex>", "[names]") {
  manual_clock clock;
  store_t store(clock);
  holdfast::acquire_options<manual_clock> a;
  a.clock = clock;
  a.label = "host-a";
  auto lease = holdfast::try_acquire(store, "k1", 10s, a);
  REQUIRE(lease);
  CHECK(labelled(lease->owner(), "host-a"));

  holdfast::mutex_options<manual_clock> m;
  m.acquire = a;
  holdfast::distributed_mutex<store_t, manual_clock> mutex(store, "k2", 10s, m);
  REQUIRE(mutex.try_lock());
  CHECK(labelled(mutex.owner(), "host-a"));
  mutex.unlock();

  holdfast::reentrant_holder<store_t, manual_clock> holder(store, a);
  auto re = holder.try_acquire("k3", 10s);
  REQUIRE(re);
  CHECK(labelled(holder.owner(), "host-a"));

  holdfast::semaphore_options<manual_clock> s;
  s.acquire = a;
  holdfast::semaphore<store_t, manual_clock> sem(store, "pool", 2, 10s, s);
  auto permit = sem.try_acquire();
  REQUIRE(permit);
  CHECK(labelled(permit->owner(), "host-a"));

  holdfast::keepalive<manual_clock> ka(clock, polled());
  holdfast::election_options<manual_clock> e;
  e.acquire.clock = clock;
  e.keepalive = &ka;
  e.label = "host-a";
  holdfast::election<store_t, manual_clock> job(store, "job", 10s, e);
  REQUIRE(job.try_campaign());
  CHECK(labelled(job.owner(), "host-a"));
  CHECK(job.label() == "host-a");

  // No label: the random digits alone, and label_of() returns the whole id.
  a.label.clear();
  auto plain = holdfast::try_acquire(store, "k4", 10s, a);
  REQUIRE(plain);
  CHECK(plain->owner().size() == 32);
  CHECK(holdfast::label_of(plain->owner()) == plain->owner());
  CHECK(holdfast::label_of("a/b/0123") == "a/b");
  CHECK(holdfast::label_of("") == "");
}

TEST_CASE("names: an election_observer needs no TTL and sees leader, label and term",
          "[names][election]") {
  // next_leader() sleeps: on self_advancing_clock a sleep moves time itself, at once.
  using sclock = holdfast::self_advancing_clock;
  sclock clock;
  holdfast::memory_store<sclock> store(clock);
  using sstore = holdfast::memory_store<sclock>;
  holdfast::election_observer_options<sclock> oo;
  oo.clock = clock;
  oo.observe_interval = 100ms;
  holdfast::election_observer<sstore, sclock> watch(store, "job", oo);
  CHECK_FALSE(watch.error());
  auto nobody = watch.leader();
  REQUIRE(nobody);
  CHECK_FALSE(nobody->has_value());
  CHECK(watch.next_leader(std::nullopt, 250ms).error() == errc::timeout);

  holdfast::keepalive<sclock> ka(clock, polled());
  holdfast::election_options<sclock> e;
  e.acquire.clock = clock;
  e.keepalive = &ka;
  e.label = "pod-7";
  holdfast::election<sstore, sclock> job(store, "job", 1s, e);
  const holdfast::fencing_token term = job.try_campaign().value();
  auto seen = watch.next_leader(std::nullopt, 1s);
  REQUIRE(seen);
  REQUIRE(seen->has_value());
  CHECK((*seen)->label == "pod-7");
  CHECK((*seen)->owner == job.owner());
  CHECK((*seen)->term == term);
  // The candidate's own leader() is the observer's answer.
  CHECK(job.leader().value() == *seen);
  // Unrenewed, the lease expires at 1 s: the observer then sees nobody.
  auto gone = watch.next_leader(*seen, 5s);
  REQUIRE(gone);
  CHECK_FALSE(gone->has_value());

  // Bad arguments: reported by error(), and nothing is asked.
  CHECK(holdfast::election_observer<sstore, sclock>(store, "", oo).leader().error() ==
        errc::invalid_argument);
  oo.observe_interval = 0s;
  CHECK(holdfast::election_observer<sstore, sclock>(store, "job", oo).error() ==
        errc::invalid_argument);
  oo.observe_interval = 1h;  // at the limit: accepted
  CHECK_FALSE(holdfast::election_observer<sstore, sclock>(store, "job", oo).error());
  oo.observe_interval = 1h + 1ns;
  CHECK(holdfast::election_observer<sstore, sclock>(store, "job", oo).error() ==
        errc::invalid_argument);
}

HOLDFAST_DETAIL_ALLOW_DEPRECATED_BEGIN
TEST_CASE("names: 0.1's spellings still compile and mean what they meant", "[names]") {
  manual_clock clock;
  store_t store(clock);
  holdfast::acquire_options<manual_clock> a;
  a.clock = clock;
  a.owner_label = "old";  // read when label is empty
  auto lease = holdfast::try_acquire(store, "k1", 10s, a);
  REQUIRE(lease);
  CHECK(labelled(lease->owner(), "old"));
  a.label = "new";  // label wins
  auto lease2 = holdfast::try_acquire(store, "k2", 10s, a);
  REQUIRE(lease2);
  CHECK(labelled(lease2->owner(), "new"));

  // 0.1's semaphore and mutex took the prefix in acquire.owner: still a label, never shared.
  holdfast::semaphore_options<manual_clock> s;
  s.acquire.clock = clock;
  s.acquire.owner = "worker";
  holdfast::semaphore<store_t, manual_clock> sem(store, "pool", 2, 10s, s);
  auto p1 = sem.try_acquire();
  auto p2 = sem.try_acquire();
  REQUIRE(p1);
  REQUIRE(p2);
  CHECK(labelled(p1->owner(), "worker"));
  CHECK(p1->owner() != p2->owner());

  holdfast::keepalive<manual_clock> ka(clock, polled());
  holdfast::election_options<manual_clock> e;
  e.acquire.clock = clock;
  e.keepalive = &ka;
  e.identity = "host-b";
  holdfast::stop_cause told = holdfast::stop_cause::validity_passed;
  e.on_stopped_leading = [&told](holdfast::stop_cause c) { told = c; };
  holdfast::election<store_t, manual_clock> job(store, "job", 10s, e);
  CHECK(job.identity() == "host-b");
  REQUIRE(job.try_campaign());
  CHECK(labelled(job.owner(), "host-b"));
  auto now = job.leader();
  REQUIRE(now);
  REQUIRE(now->has_value());
  CHECK((*now)->identity == "host-b");
  CHECK(holdfast::identity_of((*now)->owner) == "host-b");
  REQUIRE(job.resign());
  CHECK(told == holdfast::stop_cause::resigned);
  CHECK(std::string(holdfast::to_string(told)) == "resigned");
  CHECK(holdfast::to_stop_cause(loss_cause::renew_refused) == loss_cause::renew_refused);
  CHECK(holdfast::to_stop_cause(loss_cause::none) == loss_cause::validity_passed);
}
HOLDFAST_DETAIL_ALLOW_DEPRECATED_END

}  // namespace test_names
