// SPDX-License-Identifier: MIT
// Tests of holdfast/observer.hpp: every event kind from a lease, a keepalive, a distributed_mutex
// and a quorum_store, in the order they happen, with their timings on a manual clock; an observer
// that throws changes nothing else; no observer, no events.
#include <catch2/catch.hpp>

#include <chrono>
#include <mutex>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "holdfast/keepalive.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/mutex.hpp"
#include "holdfast/observer.hpp"
#include "holdfast/quorum.hpp"
#include "holdfast/stores/memory.hpp"
#include "test_support.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_observer {

using holdfast::errc;
using holdfast::lease_event;
using holdfast::lease_event_kind;
using holdfast::lease_state;
using holdfast::loss_cause;
using holdfast::manual_clock;
using holdfast_test::jump_clock;
using holdfast_test::scripted_store;
using namespace std::chrono_literals;
using ms = std::chrono::milliseconds;
using ns = std::chrono::nanoseconds;
using K = lease_event_kind;

namespace {

// An event as recorded (the strings copied: an event's views live only during the call).
struct seen {
  K kind;
  std::string key;
  std::string owner;
  std::uint64_t token;
  std::error_code error;
  loss_cause cause;
  ns wait;
  ns store_latency;
  std::uint32_t attempt;
  bool keepalive;
  holdfast::lease_operation operation;
  std::size_t member;
  bool answered;
};

struct recorder : holdfast::lease_observer {
  void on_event(const lease_event& e) override {
    std::lock_guard<std::mutex> lock(mu);
    log.push_back({e.kind, std::string(e.key), std::string(e.owner), e.token.value(), e.error,
                   e.cause, e.wait, e.store_latency, e.attempt, e.keepalive, e.operation, e.member,
                   e.answered});
  }
  std::vector<K> kinds() {
    std::lock_guard<std::mutex> lock(mu);
    std::vector<K> k;
    for (const seen& s : log) k.push_back(s.kind);
    return k;
  }
  std::mutex mu;
  std::vector<seen> log;
};

// Throws from every event; counts them.
struct thrower : holdfast::lease_observer {
  void on_event(const lease_event&) override {
    ++calls;
    throw std::runtime_error("observer failure");
  }
  int calls = 0;
};

template <class Clock>
holdfast::acquire_options<Clock> observed(Clock clock, holdfast::lease_observer* o,
                                          std::string owner = "A") {
  holdfast::acquire_options<Clock> opts;
  opts.clock = std::move(clock);
  opts.owner = std::move(owner);
  opts.backoff.seed = 7;
  opts.observer = o;
  return opts;
}

}  // namespace

}  // namespace test_observer

namespace Catch {
template <>
struct StringMaker<holdfast::lease_event_kind> {
  static std::string convert(holdfast::lease_event_kind k) { return holdfast::to_string(k); }
};
}  // namespace Catch

namespace test_observer {

TEST_CASE("observer: try_acquire reports the attempt and the outcome with its timings",
          "[observer]") {
  jump_clock clock;
  scripted_store store(clock.manual());
  recorder rec;
  store.on_acquire = [&](std::string_view k, std::string_view o, ms ttl) {
    clock.manual().advance(7ms);  // the store takes 7 ms to answer
    return store.inner.try_acquire(k, o, ttl);
  };
  auto l = holdfast::try_acquire(store, "orders", 10s, observed(clock, &rec));
  REQUIRE(l);
  REQUIRE(rec.kinds() == std::vector<K>{K::acquire_attempt, K::acquired});
  const seen& a = rec.log[0];
  REQUIRE(a.key == "orders");
  REQUIRE(a.owner == "A");
  REQUIRE(a.token == l->token().value());
  REQUIRE(!a.error);
  REQUIRE(a.attempt == 1);
  REQUIRE(a.store_latency == 7ms);
  const seen& b = rec.log[1];
  REQUIRE(b.token == l->token().value());
  REQUIRE(b.wait == 7ms);
  REQUIRE(b.attempt == 1);

  SECTION("contention is busy in both events") {
    recorder other;
    auto busy = holdfast::try_acquire(store, "orders", 10s, observed(clock, &other, "B"));
    REQUIRE(busy.error() == errc::busy);
    REQUIRE(other.kinds() == std::vector<K>{K::acquire_attempt, K::acquire_failed});
    REQUIRE(other.log[0].error == errc::busy);
    REQUIRE(other.log[1].error == errc::busy);
    REQUIRE(other.log[1].token == 0);
  }
  SECTION("bad input never reaches the store: one acquire_failed, zero attempts") {
    recorder bad;
    auto r = holdfast::try_acquire(store, "", 10s, observed(clock, &bad));
    REQUIRE(r.error() == errc::invalid_argument);
    REQUIRE(bad.kinds() == std::vector<K>{K::acquire_failed});
    REQUIRE(bad.log[0].attempt == 0);
    REQUIRE(bad.log[0].error == errc::invalid_argument);
  }
  SECTION("a store error is each error's own code") {
    recorder down;
    store.on_acquire = [](std::string_view, std::string_view, ms) {
      return holdfast::result<holdfast::grant>(errc::store_unavailable);
    };
    auto r = holdfast::try_acquire(store, "other", 10s, observed(clock, &down));
    // A transient error may hide a grant (a lost reply): try_acquire asks once more (issue 22).
    REQUIRE(down.kinds() ==
            std::vector<K>{K::acquire_attempt, K::acquire_attempt, K::acquire_failed});
    REQUIRE(down.log[0].error == errc::store_unavailable);
    REQUIRE(down.log[1].error == errc::store_unavailable);
    REQUIRE(down.log[1].attempt == 2);
    REQUIRE(down.log[2].error == errc::store_unavailable);
    REQUIRE(down.log[2].attempt == 2);
  }
}

TEST_CASE("observer: the blocking acquire reports every attempt, then the wait", "[observer]") {
  jump_clock clock;
  scripted_store store(clock.manual());
  recorder rec;
  int busy_left = 2;
  store.on_acquire = [&](std::string_view k, std::string_view o, ms ttl) {
    if (busy_left-- > 0) return holdfast::result<holdfast::grant>(errc::busy);
    return store.inner.try_acquire(k, o, ttl);
  };
  const auto t0 = clock.now();
  auto l = holdfast::acquire(store, "orders", 10s, 5s, observed(clock, &rec));
  REQUIRE(l);
  REQUIRE(rec.kinds() ==
          std::vector<K>{K::acquire_attempt, K::acquire_attempt, K::acquire_attempt, K::acquired});
  REQUIRE(rec.log[0].attempt == 1);
  REQUIRE(rec.log[1].attempt == 2);
  REQUIRE(rec.log[2].attempt == 3);
  REQUIRE(rec.log[0].error == errc::busy);
  REQUIRE(!rec.log[2].error);
  REQUIRE(rec.log[3].attempt == 3);
  // The wait is the backoff the clock slept through.
  REQUIRE(clock.sleeps().size() == 2);
  REQUIRE(rec.log[3].wait == clock.now() - t0);
  REQUIRE(rec.log[3].wait > 0ns);
  REQUIRE(rec.log[3].wait <= 5s);

  SECTION("a timeout ends with acquire_failed(timeout) after the attempts") {
    recorder waited;
    auto t = holdfast::acquire(store, "orders", 10s, 100ms, observed(clock, &waited, "B"));
    REQUIRE(t.error() == errc::timeout);
    const std::vector<K> k = waited.kinds();
    REQUIRE(k.size() >= 2);
    REQUIRE(k.back() == K::acquire_failed);
    for (std::size_t i = 0; i + 1 < k.size(); ++i) REQUIRE(k[i] == K::acquire_attempt);
    REQUIRE(waited.log.back().error == errc::timeout);
    REQUIRE(waited.log.back().wait >= 100ms);
    REQUIRE(waited.log.back().attempt == k.size() - 1);
  }
}

TEST_CASE("observer: renewals, losses with their cause, and releases, in order", "[observer]") {
  manual_clock clock;
  scripted_store store(clock);
  recorder rec;
  auto l = holdfast::try_acquire(store, "orders", 10s, observed(clock, &rec));
  REQUIRE(l);
  store.on_renew = [&](std::string_view k, std::string_view o, holdfast::fencing_token t, ms ttl) {
    clock.advance(3ms);
    return store.inner.renew(k, o, t, ttl);
  };

  SECTION("renewed, then a transient failure that keeps the lease, then released") {
    REQUIRE(l->renew());
    store.on_renew = [](std::string_view, std::string_view, holdfast::fencing_token, ms) {
      return holdfast::result<holdfast::grant>(errc::store_unavailable);
    };
    REQUIRE(l->renew().error() == errc::store_unavailable);
    REQUIRE(l->state() == lease_state::held);
    REQUIRE(l->release());
    REQUIRE(rec.kinds() == std::vector<K>{K::acquire_attempt, K::acquired, K::renewed,
                                          K::renew_failed, K::released});
    REQUIRE(rec.log[2].store_latency == 3ms);
    REQUIRE(!rec.log[2].keepalive);
    REQUIRE(rec.log[3].error == errc::store_unavailable);
    REQUIRE(!rec.log[4].error);
  }
  SECTION("a refused renewal: renew_failed, then lost(renew_refused); the release after it") {
    store.on_renew = [](std::string_view, std::string_view, holdfast::fencing_token, ms) {
      return holdfast::result<holdfast::grant>(errc::lease_lost);
    };
    REQUIRE(l->renew().error() == errc::lease_lost);
    REQUIRE(l->release());
    REQUIRE(rec.kinds() ==
            std::vector<K>{K::acquire_attempt, K::acquired, K::renew_failed, K::lost, K::released});
    REQUIRE(rec.log[2].error == errc::lease_lost);
    REQUIRE(rec.log[3].cause == loss_cause::renew_refused);
  }
  SECTION("validity passing is a loss seen once, by valid(); renew then is not sent") {
    clock.advance(10s);
    REQUIRE_FALSE(l->valid());
    REQUIRE_FALSE(l->valid());
    REQUIRE(l->renew().error() == errc::lease_lost);
    REQUIRE(rec.kinds() ==
            std::vector<K>{K::acquire_attempt, K::acquired, K::lost, K::renew_failed});
    REQUIRE(rec.log[2].cause == loss_cause::validity_passed);
    REQUIRE(rec.log[3].store_latency == 0ns);  // never sent
    REQUIRE(store.renews == 0);
  }
  SECTION("validity passing seen by renew(): renew_failed, then lost") {
    clock.advance(10s);
    REQUIRE(l->renew().error() == errc::lease_lost);
    REQUIRE(rec.kinds() ==
            std::vector<K>{K::acquire_attempt, K::acquired, K::renew_failed, K::lost});
    REQUIRE(rec.log[3].cause == loss_cause::validity_passed);
  }
  SECTION("release finding another holder: lost(not_holder), then released(not_holder)") {
    store.on_release = [](std::string_view, std::string_view, holdfast::fencing_token) {
      return holdfast::result<void>(errc::not_holder);
    };
    REQUIRE(l->release().error() == errc::not_holder);
    REQUIRE(rec.kinds() == std::vector<K>{K::acquire_attempt, K::acquired, K::lost, K::released});
    REQUIRE(rec.log[2].cause == loss_cause::not_holder);
    REQUIRE(rec.log[3].error == errc::not_holder);
  }
  SECTION("a failed release, then its retry") {
    int fail = 1;
    store.on_release = [&](std::string_view k, std::string_view o, holdfast::fencing_token t) {
      if (fail-- > 0) return holdfast::result<void>(errc::store_unavailable);
      return store.inner.release(k, o, t);
    };
    REQUIRE(l->release().error() == errc::store_unavailable);
    REQUIRE(l->release());
    REQUIRE(rec.kinds() ==
            std::vector<K>{K::acquire_attempt, K::acquired, K::release_failed, K::released});
    REQUIRE(rec.log[2].error == errc::store_unavailable);
  }
  SECTION("the destructor's release is reported too") {
    { auto gone = std::move(*l); }
    REQUIRE(rec.kinds() == std::vector<K>{K::acquire_attempt, K::acquired, K::released});
  }
}

TEST_CASE("observer: a keepalive's renewals and losses, to the lease's and its own observer",
          "[observer]") {
  manual_clock clock;
  scripted_store store(clock);
  recorder mine;
  recorder keeper;
  holdfast::keepalive_options ko;
  ko.start_thread = false;
  ko.observer = &keeper;
  holdfast::keepalive<manual_clock> ka(clock, ko);
  auto l = holdfast::try_acquire(store, "orders", 10s, observed(clock, &mine));
  REQUIRE(l);
  REQUIRE(ka.add(*l));
  clock.advance(5s);
  (void)ka.poll();
  REQUIRE(ka.stats().renewals == 1);
  store.on_renew = [](std::string_view, std::string_view, holdfast::fencing_token, ms) {
    return holdfast::result<holdfast::grant>(errc::lease_lost);
  };
  clock.advance(5s);
  (void)ka.poll();
  REQUIRE(l->state() == lease_state::lost);
  REQUIRE(mine.kinds() ==
          std::vector<K>{K::acquire_attempt, K::acquired, K::renewed, K::renew_failed, K::lost});
  for (std::size_t i = 2; i < 5; ++i) REQUIRE(mine.log[i].keepalive);
  REQUIRE(mine.log[4].cause == loss_cause::renew_refused);
  REQUIRE(keeper.kinds() == std::vector<K>{K::renewed, K::renew_failed, K::lost});

  SECTION("one observer given to both is told once") {
    recorder both;
    holdfast::keepalive_options o2 = ko;
    o2.observer = &both;
    holdfast::keepalive<manual_clock> ka2(clock, o2);
    auto l2 = holdfast::try_acquire(store.inner, "ledger", 10s, observed(clock, &both));
    REQUIRE(l2);
    REQUIRE(ka2.add(*l2));
    clock.advance(5s);
    (void)ka2.poll();
    REQUIRE(both.kinds() == std::vector<K>{K::acquire_attempt, K::acquired, K::renewed});
  }
}

TEST_CASE("observer: an observer that throws changes nothing but its own events", "[observer]") {
  manual_clock clock;
  holdfast::memory_store<manual_clock> store(clock);
  thrower bad;
  int callbacks = 0;
  auto opts = observed(clock, &bad);
  opts.on_lost = [&](loss_cause) { ++callbacks; };
  auto l = holdfast::try_acquire(store, "orders", 10s, opts);
  REQUIRE(l);  // the lease is granted and returned as without an observer
  REQUIRE(bad.calls == 2);
  REQUIRE(l->renew());
  REQUIRE(l->valid());
  clock.advance(10s);
  REQUIRE_FALSE(l->valid());
  REQUIRE(callbacks == 1);  // the callback still runs after the observer threw on `lost`
  REQUIRE(l->loss() == loss_cause::validity_passed);
  REQUIRE(!l->last_error());  // an observer's exception is not the lease's error
  REQUIRE(l->release());
  REQUIRE(l->state() == lease_state::released);
  REQUIRE(bad.calls == 5);  // attempt, acquired, renewed, lost, released: each one tried

  SECTION("on a keepalive's thread too") {
    holdfast::keepalive_options ko;
    ko.start_thread = false;
    ko.observer = &bad;
    holdfast::keepalive<manual_clock> ka(clock, ko);
    auto l2 = holdfast::try_acquire(store, "ledger", 10s, observed(clock, &bad));
    REQUIRE(ka.add(*l2));
    clock.advance(5s);
    (void)ka.poll();
    REQUIRE(ka.stats().renewals == 1);
    REQUIRE(!l2->last_error());
    REQUIRE(l2->valid());
  }
}

TEST_CASE("observer: none given, none called; a mutex passes its acquire options' observer",
          "[observer]") {
  manual_clock clock;
  holdfast::memory_store<manual_clock> store(clock);
  recorder rec;
  {
    holdfast::mutex_options<manual_clock> mo;
    mo.acquire = observed(clock, &rec, "worker");
    holdfast::distributed_mutex<holdfast::memory_store<manual_clock>, manual_clock> m(
        store, "orders", 10s, mo);
    REQUIRE(m.try_lock());
    m.unlock();
  }
  REQUIRE(rec.kinds() == std::vector<K>{K::acquire_attempt, K::acquired, K::released});
  REQUIRE(rec.log[0].owner.rfind("worker/", 0) == 0);
  auto quiet = holdfast::try_acquire(store, "orders", 10s, observed(clock, nullptr));
  REQUIRE(quiet);
  REQUIRE(rec.log.size() == 3);
}

namespace {

// A quorum member over a memory_store that answers store_unavailable while `down`.
struct member_store {
  explicit member_store(manual_clock c) : inner(std::move(c)) {}
  holdfast::result<holdfast::grant> try_acquire(std::string_view k, std::string_view o, ms ttl) {
    if (down) return errc::store_unavailable;
    return inner.try_acquire(k, o, ttl);
  }
  holdfast::result<holdfast::grant> renew(std::string_view k, std::string_view o,
                                          holdfast::fencing_token t, ms ttl) {
    if (down) return errc::store_unavailable;
    return inner.renew(k, o, t, ttl);
  }
  holdfast::result<void> release(std::string_view k, std::string_view o,
                                 holdfast::fencing_token t) {
    if (down) return errc::store_unavailable;
    return inner.release(k, o, t);
  }
  holdfast::result<void> raise_token(std::string_view k, std::string_view o,
                                     holdfast::fencing_token from, holdfast::fencing_token to) {
    if (down) return errc::store_unavailable;
    return inner.raise_token(k, o, from, to);
  }
  holdfast::memory_store<manual_clock> inner;
  bool down = false;
};

}  // namespace

TEST_CASE("observer: a quorum reports each member's answer to each round", "[observer][quorum]") {
  manual_clock clock;
  member_store m0(clock), m1(clock), m2(clock);
  m2.down = true;
  recorder members;
  recorder lease_events;
  holdfast::quorum_options qo;
  qo.dispatch = holdfast::quorum_dispatch::sequential;
  qo.observer = &members;
  holdfast::quorum_store<member_store, manual_clock> quorum({&m0, &m1, &m2}, qo, clock);
  auto l = holdfast::try_acquire(quorum, "orders", 10s, observed(clock, &lease_events));
  REQUIRE(l);
  REQUIRE(l->renew());
  REQUIRE(l->release());
  REQUIRE(members.log.size() == 9);
  const holdfast::lease_operation ops[] = {holdfast::lease_operation::acquire,
                                           holdfast::lease_operation::renew,
                                           holdfast::lease_operation::release};
  for (std::size_t round = 0; round < 3; ++round) {
    for (std::size_t m = 0; m < 3; ++m) {
      const seen& e = members.log[round * 3 + m];
      INFO("round " << round << " member " << m);
      REQUIRE(e.kind == K::quorum_member);
      REQUIRE(e.operation == ops[round]);
      REQUIRE(e.member == m);
      REQUIRE(e.answered);
      REQUIRE(e.key == "orders");
      if (m == 2) {
        REQUIRE(e.error == errc::store_unavailable);
      } else {
        REQUIRE(!e.error);
        REQUIRE(e.token == l->token().value());
      }
    }
  }
  // The lease on the quorum is observed as on any store.
  REQUIRE(lease_events.kinds() ==
          std::vector<K>{K::acquire_attempt, K::acquired, K::renewed, K::released});
}

TEST_CASE("observer: a keepalive thread's events arrive with no holdfast lock held",
          "[observer][concurrency]") {
  // The observer runs on the keepalive's thread while the holder uses the lease, and itself calls
  // into holdfast (the same lease's valid(), another lease's renew()): with any holdfast lock
  // held during the call this would deadlock or race (TSan).
  holdfast::memory_store<> store;
  struct reentrant : holdfast::lease_observer {
    void on_event(const lease_event& e) override {
      if (e.kind != K::renewed || !e.keepalive) return;
      std::lock_guard<std::mutex> lock(mu);
      if (other != nullptr) (void)other->renew();
      ++renewals;
    }
    std::mutex mu;
    holdfast::lease<holdfast::memory_store<>>* other = nullptr;
    int renewals = 0;
  } obs;
  holdfast::acquire_options<> opts;
  opts.observer = &obs;
  auto mine = holdfast::try_acquire(store, "orders", 600ms, opts);  // renewed every 300 ms
  auto other = holdfast::try_acquire(store, "ledger", 10s);
  REQUIRE(mine);
  REQUIRE(other);
  {
    std::lock_guard<std::mutex> lock(obs.mu);
    obs.other = &*other;
  }
  holdfast::keepalive<> ka;
  REQUIRE(ka.add(*mine));
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  int seen = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    (void)mine->valid();  // the holder's thread uses the lease meanwhile
    std::lock_guard<std::mutex> lock(obs.mu);
    seen = obs.renewals;
    if (seen >= 2) break;
  }
  REQUIRE(seen >= 2);
  ka.stop();
}

}  // namespace test_observer
