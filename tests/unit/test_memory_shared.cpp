// SPDX-License-Identifier: MIT
// store.hpp's read-write capability (RW1-RW4) on memory_store (stores/detail/memory_shared.hpp):
// readers coexist, a writer excludes everyone, tokens come from the store's one counter, the
// same owner's re-ask is the same grant, no upgrade or downgrade in place, the write intent that
// keeps readers from starving a writer and its bound, each instant checked one tick before, at
// and after. The read-write wait (wait_for_release_rw): the instant it sleeps to on a manual
// clock, one tick before, at and after; on steady_clock with real threads, whom a release wakes
// (and whom not), expiry, deadline, cancel, and read_write_lease sleeping in the store with the
// writer's intent kept alive. Cost: the threaded cases wait for real, about a second in all.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <optional>
#include <thread>

#include "holdfast/cancel.hpp"
#include "holdfast/clock.hpp"
#include "holdfast/read_write_lease.hpp"
#include "holdfast/store.hpp"
#include "holdfast/stores/memory.hpp"

namespace test_memory_shared {

using holdfast::errc;
using holdfast::fencing_token;
using holdfast::lease_mode;
using holdfast::manual_clock;
using namespace std::chrono_literals;
using ms = std::chrono::milliseconds;
using store_type = holdfast::memory_store<manual_clock>;

static_assert(holdfast::has_read_write_v<store_type>);
static_assert(holdfast::has_read_write_v<holdfast::memory_store<>>);
static_assert(!holdfast::has_read_write_v<int>);
// The read-write wait exists on steady_clock only, as the plain waits (a condition variable
// cannot wait on a manual clock); read_write_view then offers it to acquire().
static_assert(holdfast::can_wait_for_release_rw_v<holdfast::memory_store<>>);
static_assert(!holdfast::can_wait_for_release_rw_v<store_type>);
static_assert(holdfast::can_wait_for_release_v<
              holdfast::read_write_view<holdfast::memory_store<>, lease_mode::exclusive>,
              holdfast::steady_clock>);
static_assert(!holdfast::can_wait_for_release_v<
              holdfast::read_write_view<store_type, lease_mode::shared>, manual_clock>);

constexpr lease_mode shared = lease_mode::shared;
constexpr lease_mode exclusive = lease_mode::exclusive;

TEST_CASE("readers coexist, each with its own token; a writer waits for all", "[memory_shared]") {
  manual_clock clock;
  store_type store(clock);
  auto a = store.try_acquire_rw("k", "a", 100ms, shared);
  auto b = store.try_acquire_rw("k", "b", 100ms, shared);
  REQUIRE(a);
  REQUIRE(b);
  CHECK(a->token < b->token);
  CHECK(store.try_acquire_rw("k", "w", 100ms, exclusive).error() == errc::busy);
  REQUIRE(store.release_rw("k", "a", a->token, shared));
  CHECK(store.try_acquire_rw("k", "w", 100ms, exclusive).error() == errc::busy);
  REQUIRE(store.release_rw("k", "b", b->token, shared));
  auto w = store.try_acquire_rw("k", "w", 100ms, exclusive);
  REQUIRE(w);
  CHECK(w->token > b->token);  // RW2: greater than every earlier token
  CHECK(store.try_acquire_rw("k", "c", 100ms, shared).error() == errc::busy);
  CHECK(store.try_acquire_rw("k", "x", 100ms, exclusive).error() == errc::busy);
  REQUIRE(store.release_rw("k", "w", w->token, exclusive));
  auto c = store.try_acquire_rw("k", "c", 100ms, shared);
  REQUIRE(c);
  CHECK(c->token > w->token);  // the reader saw the writer's data
}

TEST_CASE("tokens come from the store's one counter, shared with plain leases", "[memory_shared]") {
  manual_clock clock;
  store_type store(clock);
  auto plain = store.try_acquire("k", "a", 100ms);
  REQUIRE(plain);
  auto r = store.try_acquire_rw("k", "a", 100ms, shared);  // another name space: not busy
  REQUIRE(r);
  CHECK(r->token > plain->token);
  auto p2 = store.try_acquire("k2", "a", 100ms);
  REQUIRE(p2);
  CHECK(p2->token > r->token);
}

TEST_CASE("the same owner's re-ask is the same grant, extended; the other mode is busy",
          "[memory_shared]") {
  manual_clock clock;
  store_type store(clock);
  auto r = store.try_acquire_rw("k", "a", 100ms, shared);
  REQUIRE(r);
  clock.advance(60ms);
  auto again = store.try_acquire_rw("k", "a", 100ms, shared);
  REQUIRE(again);
  CHECK(again->token == r->token);
  CHECK(store.try_acquire_rw("k", "a", 100ms, exclusive).error() == errc::busy);  // no upgrade
  clock.advance(99ms);  // 159 ms: alive by the re-ask's extension (60 + 100)
  CHECK(store.renew_rw("k", "a", r->token, 100ms, shared));
  REQUIRE(store.release_rw("k", "a", r->token, shared));
  auto w = store.try_acquire_rw("k", "a", 100ms, exclusive);
  REQUIRE(w);
  CHECK(store.try_acquire_rw("k", "a", 100ms, exclusive)->token == w->token);
  CHECK(store.try_acquire_rw("k", "a", 100ms, shared).error() == errc::busy);  // no downgrade
}

TEST_CASE("owner, token and mode checks on renew and release (T3)", "[memory_shared]") {
  manual_clock clock;
  store_type store(clock);
  auto r = store.try_acquire_rw("k", "a", 100ms, shared);
  REQUIRE(r);
  CHECK(store.renew_rw("k", "b", r->token, 100ms, shared).error() == errc::lease_lost);
  CHECK(store.renew_rw("k", "a", r->token, 100ms, exclusive).error() == errc::lease_lost);
  CHECK(store.renew_rw("k", "a", fencing_token(r->token.value() + 1), 100ms, shared).error() ==
        errc::lease_lost);
  CHECK(store.release_rw("k", "b", r->token, shared).error() == errc::not_holder);
  CHECK(store.release_rw("k", "a", r->token, exclusive).error() == errc::not_holder);
  CHECK(store.renew_rw("k", "a", r->token, 100ms, shared));
  REQUIRE(store.release_rw("k", "a", r->token, shared));
  CHECK(store.release_rw("k", "a", r->token, shared).error() == errc::not_holder);
}

TEST_CASE("bad input is invalid_argument and changes nothing", "[memory_shared]") {
  manual_clock clock;
  store_type store(clock);
  const auto bad = static_cast<lease_mode>(7);
  CHECK(store.try_acquire_rw("k", "a", 100ms, bad).error() == errc::invalid_argument);
  CHECK(store.try_acquire_rw("", "a", 100ms, shared).error() == errc::invalid_argument);
  CHECK(store.try_acquire_rw("k", "", 100ms, shared).error() == errc::invalid_argument);
  CHECK(store.try_acquire_rw("k", "a", 0ms, shared).error() == errc::invalid_argument);
  CHECK(store.renew_rw("k", "a", fencing_token{}, 10ms, shared).error() == errc::invalid_argument);
  CHECK(store.release_rw("k", "a", fencing_token(1), bad).error() == errc::invalid_argument);
  CHECK(store.try_acquire_rw("k", "a", 100ms, exclusive)->token == fencing_token(1));
}

TEST_CASE("expiry by the store's clock: one tick before, at and after", "[memory_shared]") {
  manual_clock clock;
  store_type store(clock);
  auto r = store.try_acquire_rw("k", "a", 100ms, shared);
  REQUIRE(r);
  clock.advance(99ms);
  CHECK(store.try_acquire_rw("k", "w", 100ms, exclusive).error() == errc::busy);
  clock.advance(1ms);  // at 100 ms the reader has expired
  CHECK(store.renew_rw("k", "a", r->token, 100ms, shared).error() == errc::lease_lost);
  auto w = store.try_acquire_rw("k", "w", 50ms, exclusive);
  REQUIRE(w);
  clock.advance(49ms);
  CHECK(store.try_acquire_rw("k", "b", 10ms, shared).error() == errc::busy);
  clock.advance(1ms);
  CHECK(store.try_acquire_rw("k", "b", 10ms, shared));
  CHECK(store.release_rw("k", "a", r->token, shared).error() == errc::not_holder);  // pruned
}

TEST_CASE("a refused writer's intent blocks new readers for the TTL it asked (RW4)",
          "[memory_shared]") {
  manual_clock clock;
  store_type store(clock);
  auto a = store.try_acquire_rw("k", "a", 1000ms, shared);
  REQUIRE(a);
  CHECK(store.try_acquire_rw("k", "w", 100ms, exclusive).error() == errc::busy);  // intent
  CHECK(store.try_acquire_rw("k", "b", 100ms, shared).error() == errc::busy);
  CHECK(store.try_acquire_rw("k", "a", 1000ms, shared)->token == a->token);       // a re-ask still
  CHECK(store.renew_rw("k", "a", a->token, 1000ms, shared));                      // and a renew
  CHECK(store.try_acquire_rw("k", "v", 100ms, exclusive).error() == errc::busy);  // no 2nd intent
  clock.advance(99ms);
  CHECK(store.try_acquire_rw("k", "b", 100ms, shared).error() == errc::busy);
  clock.advance(1ms);  // 100 ms: the intent has lapsed, since w did not ask again
  auto b = store.try_acquire_rw("k", "b", 100ms, shared);
  REQUIRE(b);
  CHECK(store.try_acquire_rw("k", "w", 100ms, exclusive).error() == errc::busy);  // again
  REQUIRE(store.release_rw("k", "a", a->token, shared));
  REQUIRE(store.release_rw("k", "b", b->token, shared));
  CHECK(store.try_acquire_rw("k", "c", 100ms, shared).error() == errc::busy);  // w's turn
  auto w = store.try_acquire_rw("k", "w", 100ms, exclusive);
  REQUIRE(w);
  REQUIRE(store.release_rw("k", "w", w->token, exclusive));
  CHECK(store.try_acquire_rw("k", "c", 100ms, shared));  // the grant ended the intent
}

TEST_CASE("a reader that asks to write records no intent (it would wait on itself)",
          "[memory_shared]") {
  manual_clock clock;
  store_type store(clock);
  auto a = store.try_acquire_rw("k", "a", 100ms, shared);
  REQUIRE(a);
  CHECK(store.try_acquire_rw("k", "a", 100ms, exclusive).error() == errc::busy);
  CHECK(store.try_acquire_rw("k", "b", 100ms, shared));
}

TEST_CASE("token exhaustion is reported before anything changes", "[memory_shared]") {
  manual_clock clock;
  holdfast::memory_store_options o;
  o.last_issued = fencing_token(fencing_token::max().value() - 2);
  store_type store(clock, o);
  auto r = store.try_acquire_rw("k", "a", 100ms, shared);
  REQUIRE(r);
  CHECK(store.try_acquire_rw("k", "b", 100ms, shared).error() == errc::token_exhausted);
  CHECK(store.try_acquire_rw("k", "a", 100ms, shared)->token == r->token);  // re-ask still works
}

}  // namespace test_memory_shared

namespace test_memory_rw_wait {

using holdfast::errc;
using holdfast::lease_mode;
using holdfast::manual_clock;
using namespace std::chrono_literals;
using store_type = holdfast::memory_store<manual_clock>;
using steady_store = holdfast::memory_store<>;
using steady = std::chrono::steady_clock;

constexpr lease_mode shared = lease_mode::shared;
constexpr lease_mode exclusive = lease_mode::exclusive;
constexpr manual_clock::duration tick{1};

// The instant a grant of `ttl` made at the clock's reading now ends (store.hpp, T2).
manual_clock::time_point end_of(const manual_clock& clock, std::chrono::milliseconds ttl) {
  return holdfast::store_hold_until(clock.now(), ttl, holdfast::clock_tick(clock));
}

TEST_CASE("wait_until_rw: a writer keeps both modes out until its expiry, not a tick longer",
          "[memory_shared][wait_for_release_rw]") {
  manual_clock clock;
  store_type store(clock);
  CHECK(store.wait_until_rw("k", shared).value() == std::nullopt);  // free
  CHECK(store.wait_until_rw("", shared).error() == errc::invalid_argument);
  CHECK(store.wait_until_rw("k", static_cast<lease_mode>(7)).error() == errc::invalid_argument);
  const auto end = end_of(clock, 100ms);
  REQUIRE(store.try_acquire_rw("k", "w", 100ms, exclusive));
  CHECK(store.wait_until_rw("k", shared).value() == end);
  CHECK(store.wait_until_rw("k", exclusive).value() == end);
  clock.set(end - tick);
  CHECK(store.wait_until_rw("k", shared).value() == end);
  CHECK(store.wait_until_rw("k", exclusive).value() == end);
  clock.set(end);
  CHECK(store.wait_until_rw("k", shared).value() == std::nullopt);
  CHECK(store.wait_until_rw("k", exclusive).value() == std::nullopt);
  clock.set(end + tick);
  CHECK(store.wait_until_rw("k", exclusive).value() == std::nullopt);
}

TEST_CASE("wait_until_rw: readers keep a writer out until the last one ends, never a reader",
          "[memory_shared][wait_for_release_rw]") {
  manual_clock clock;
  store_type store(clock);
  REQUIRE(store.try_acquire_rw("k", "a", 50ms, shared));
  const auto end = end_of(clock, 100ms);
  REQUIRE(store.try_acquire_rw("k", "b", 100ms, shared));
  CHECK(store.wait_until_rw("k", shared).value() == std::nullopt);
  CHECK(store.wait_until_rw("k", exclusive).value() == end);  // the later of the two
  clock.set(end - tick);
  CHECK(store.wait_until_rw("k", exclusive).value() == end);
  clock.set(end);
  CHECK(store.wait_until_rw("k", exclusive).value() == std::nullopt);
  clock.set(end + tick);
  CHECK(store.wait_until_rw("k", exclusive).value() == std::nullopt);
}

TEST_CASE("wait_until_rw: an intent keeps readers out to its end; a writer sleeps half of it",
          "[memory_shared][wait_for_release_rw]") {
  manual_clock clock;
  store_type store(clock);
  const auto reader_end = end_of(clock, 1000ms);
  REQUIRE(store.try_acquire_rw("k", "a", 1000ms, shared));
  const auto intent_end = end_of(clock, 100ms);
  REQUIRE(store.try_acquire_rw("k", "w", 100ms, exclusive).error() == errc::busy);  // intent
  CHECK(store.wait_until_rw("k", shared).value() == intent_end);
  // RW4: the writer asks again before its intent lapses, not at the reader's end.
  const auto t0 = clock.now();
  CHECK(store.wait_until_rw("k", exclusive).value() == t0 + (intent_end - t0) / 2);
  clock.set(intent_end - tick);
  CHECK(store.wait_until_rw("k", shared).value() == intent_end);
  CHECK(store.wait_until_rw("k", exclusive).value() == clock.now());  // ask now
  clock.set(intent_end);
  CHECK(store.wait_until_rw("k", shared).value() == std::nullopt);  // the intent lapsed
  CHECK(store.wait_until_rw("k", exclusive).value() == reader_end);
  clock.set(intent_end + tick);
  CHECK(store.wait_until_rw("k", shared).value() == std::nullopt);
}

// Runs `wait` on a thread and returns once `n` threads sleep in the store's read-write wait.
template <class F>
std::thread waiting_thread(steady_store& store, std::size_t n, F wait) {
  std::thread t(std::move(wait));
  const auto limit = steady::now() + 20s;
  while (store.waiting_rw() < n && steady::now() < limit) std::this_thread::yield();
  return t;
}

TEST_CASE("wait_for_release_rw: a writer's release wakes every reader and one writer, in order",
          "[memory_shared][wait_for_release_rw][concurrency]") {
  steady_store store;
  auto w = store.try_acquire_rw("k", "w", 60s, exclusive);
  REQUIRE(w);
  const auto limit = steady::now() + 30s;
  std::optional<holdfast::result<void>> r1, r2, x1, x2;
  std::thread t1 =
      waiting_thread(store, 1, [&] { r1 = store.wait_for_release_rw("k", shared, limit); });
  std::thread t2 =
      waiting_thread(store, 2, [&] { x1 = store.wait_for_release_rw("k", exclusive, limit); });
  std::thread t3 =
      waiting_thread(store, 3, [&] { r2 = store.wait_for_release_rw("k", shared, limit); });
  std::thread t4 =
      waiting_thread(store, 4, [&] { x2 = store.wait_for_release_rw("k", exclusive, limit); });
  REQUIRE(store.waiting_rw() == 4u);
  REQUIRE(store.release_rw("other", "w", w->token, exclusive).error() == errc::not_holder);
  CHECK(store.waiting_rw() == 4u);  // nothing released: nobody woken
  REQUIRE(store.release_rw("k", "w", w->token, exclusive));
  CHECK(store.waiting_rw() == 1u);  // woken in the release's critical section: all but x2
  t1.join();
  t2.join();
  t3.join();
  CHECK(r1->has_value());
  CHECK(r2->has_value());
  CHECK(x1->has_value());
  auto v = store.try_acquire_rw("k", "v", 60s, exclusive);
  REQUIRE(v);
  REQUIRE(store.release_rw("k", "v", v->token, exclusive));
  CHECK(store.waiting_rw() == 0u);
  t4.join();
  CHECK(x2->has_value());
  CHECK(steady::now() < limit);
}

TEST_CASE("wait_for_release_rw: a reader's release wakes no reader, and a writer only last",
          "[memory_shared][wait_for_release_rw][concurrency]") {
  steady_store store;
  auto a = store.try_acquire_rw("k", "a", 60s, shared);
  auto b = store.try_acquire_rw("k", "b", 60s, shared);
  REQUIRE(a);
  REQUIRE(b);
  REQUIRE(store.try_acquire_rw("k", "w", 60s, exclusive).error() == errc::busy);  // w's intent
  const auto limit = steady::now() + 30s;
  std::optional<holdfast::result<void>> rr, rw;
  std::thread reader =
      waiting_thread(store, 1, [&] { rr = store.wait_for_release_rw("k", shared, limit); });
  std::thread writer =
      waiting_thread(store, 2, [&] { rw = store.wait_for_release_rw("k", exclusive, limit); });
  REQUIRE(store.waiting_rw() == 2u);
  REQUIRE(store.release_rw("k", "a", a->token, shared));
  CHECK(store.waiting_rw() == 2u);  // b still reads: neither can get in
  REQUIRE(store.release_rw("k", "b", b->token, shared));
  CHECK(store.waiting_rw() == 1u);  // the writer, not the reader (w's intent keeps it out)
  writer.join();
  REQUIRE(rw->has_value());
  auto g = store.try_acquire_rw("k", "w", 60s, exclusive);
  REQUIRE(g);
  CHECK(store.waiting_rw() == 1u);  // a grant wakes nobody
  REQUIRE(store.release_rw("k", "w", g->token, exclusive));
  CHECK(store.waiting_rw() == 0u);
  reader.join();
  CHECK(rr->has_value());
  CHECK(store.try_acquire_rw("k", "c", 60s, shared));
}

TEST_CASE("wait_for_release_rw: an unreleased grant's expiry ends the wait, not sooner",
          "[memory_shared][wait_for_release_rw][concurrency]") {
  steady_store store;
  REQUIRE(store.try_acquire_rw("k", "dead", 150ms, exclusive));  // its holder never releases
  const auto end = store.wait_until_rw("k", shared).value();
  REQUIRE(end.has_value());
  REQUIRE(store.wait_for_release_rw("k", shared, steady::now() + 30s));
  const auto woke = steady::now();
  CHECK(woke >= *end);
  CHECK(woke < *end + 5s);  // bounded for CI
  CHECK(store.try_acquire_rw("k", "r", 1s, shared));
  CHECK(store.waiting_rw() == 0u);
}

TEST_CASE("wait_for_release_rw: deadline, free key and bad input answer without sleeping on",
          "[memory_shared][wait_for_release_rw][concurrency]") {
  steady_store store;
  CHECK(store.wait_for_release_rw("k", exclusive, steady::now() + 30s).has_value());  // free
  CHECK(store.wait_for_release_rw("", shared, steady::now() + 30s).error() ==
        errc::invalid_argument);
  CHECK(store.wait_for_release_rw("k", static_cast<lease_mode>(7), steady::now() + 30s).error() ==
        errc::invalid_argument);
  REQUIRE(store.try_acquire_rw("k", "r", 60s, shared));
  CHECK(store.wait_for_release_rw("k", shared, steady::now() + 30s).has_value());  // not kept out
  CHECK(store.wait_for_release_rw("k", exclusive, steady::now()).has_value());  // deadline passed
  const auto deadline = steady::now() + 50ms;
  CHECK(store.wait_for_release_rw("k", exclusive, deadline).has_value());
  CHECK(steady::now() >= deadline);
  CHECK(store.waiting_rw() == 0u);
}

TEST_CASE("wait_for_release_rw: a stop ends the wait with cancelled and leaves nothing behind",
          "[memory_shared][wait_for_release_rw][concurrency]") {
  steady_store store;
  REQUIRE(store.try_acquire_rw("k", "w", 60s, exclusive));
  holdfast::cancel_source src;
  const auto limit = steady::now() + 30s;
  std::optional<holdfast::result<void>> r;
  std::thread t = waiting_thread(
      store, 1, [&] { r = store.wait_for_release_rw("k", shared, limit, src.token()); });
  REQUIRE(store.waiting_rw() == 1u);
  src.request_stop();
  t.join();
  CHECK(r->error() == errc::cancelled);
  CHECK(store.waiting_rw() == 0u);
  CHECK(steady::now() < limit);
  CHECK(store.wait_for_release_rw("k", shared, limit, src.token()).error() == errc::cancelled);
}

// A writer a release chose but whose stop came before it ran passes the wake-up on: the
// release is not spent on a thread that left. Which comes first is the scheduler's choice, so
// the case runs a few times and checks whichever happened.
TEST_CASE("wait_for_release_rw: a woken writer that is cancelled wakes the next writer",
          "[memory_shared][wait_for_release_rw][concurrency]") {
  int passed_on = 0;
  for (int i = 0; i < 20; ++i) {
    steady_store store;
    auto w = store.try_acquire_rw("k", "w", 60s, exclusive);
    REQUIRE(w);
    holdfast::cancel_source src;
    const auto limit = steady::now() + 30s;
    std::optional<holdfast::result<void>> x1, x2;
    std::thread t1 = waiting_thread(
        store, 1, [&] { x1 = store.wait_for_release_rw("k", exclusive, limit, src.token()); });
    std::thread t2 =
        waiting_thread(store, 2, [&] { x2 = store.wait_for_release_rw("k", exclusive, limit); });
    REQUIRE(store.waiting_rw() == 2u);
    REQUIRE(store.release_rw("k", "w", w->token, exclusive));  // chooses x1
    src.request_stop();
    t1.join();
    if (x1->has_value()) {  // x1 ran first: it had the wake-up, x2 sleeps on
      CHECK(store.waiting_rw() == 1u);
      auto v = store.try_acquire_rw("k", "v", 60s, exclusive);
      REQUIRE(v);
      REQUIRE(store.release_rw("k", "v", v->token, exclusive));
    } else {
      CHECK(x1->error() == errc::cancelled);
      CHECK(store.waiting_rw() == 0u);  // passed on to x2
      ++passed_on;
    }
    t2.join();
    CHECK(x2->has_value());
    CHECK(steady::now() < limit);
  }
  INFO("a cancelled writer passed its wake-up on in " << passed_on << " of 20 runs");
  CHECK(passed_on <= 20);
}

TEST_CASE("read_write_lease on memory_store sleeps in the store instead of backing off",
          "[memory_shared][wait_for_release_rw][read_write_lease][concurrency]") {
  steady_store store;
  holdfast::acquire_options<> o;
  o.backoff.initial = 10s;  // a polling acquire would sleep for seconds
  o.backoff.max_delay = 10s;
  holdfast::read_write_lease<steady_store> doc(store, "doc", o);
  auto w = doc.try_acquire_write(60s);
  REQUIRE(w);
  std::optional<holdfast::result<holdfast::shared_lease<steady_store>>> r;
  std::thread t = waiting_thread(store, 1, [&] { r = doc.acquire_read(60s, 20s); });
  REQUIRE(store.waiting_rw() == 1u);  // asleep in the store
  const holdfast::fencing_token writer_token = w->token();
  const auto released = steady::now();
  REQUIRE(w->release());
  t.join();
  REQUIRE(r->has_value());
  CHECK(steady::now() - released < 5s);  // far below the backoff (bounded for CI)
  CHECK((**r).token() > writer_token);
}

TEST_CASE("a waiting writer renews its intent, so new readers stay out until it wins",
          "[memory_shared][wait_for_release_rw][read_write_lease][concurrency]") {
  steady_store store;
  auto a = store.try_acquire_rw("doc", "a", 60s, shared);
  REQUIRE(a);
  holdfast::read_write_lease<steady_store> doc(store, "doc");
  std::optional<holdfast::result<holdfast::exclusive_lease<steady_store>>> w;
  // The intent lasts 200 ms from each ask; the reader holds 60 s.
  std::thread t = waiting_thread(store, 1, [&] { w = doc.acquire_write(200ms, 20s); });
  REQUIRE(store.waiting_rw() == 1u);
  std::this_thread::sleep_for(700ms);  // 3.5 intents: the first lapsed long ago unless renewed
  CHECK(store.try_acquire_rw("doc", "late", 60s, shared).error() == errc::busy);
  CHECK(store.wait_until_rw("doc", shared).value().has_value());  // the intent lives
  REQUIRE(store.release_rw("doc", "a", a->token, shared));
  t.join();
  REQUIRE(w->has_value());
  CHECK((**w).token() > a->token);
}

}  // namespace test_memory_rw_wait
