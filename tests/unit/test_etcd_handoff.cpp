// SPDX-License-Identifier: MIT
// Tests of what an etcd hand-off costs (issue 24: at most 3 requests per hand-off), against real
// etcd (the shared member .ci/servers starts): the woken waiter's grant binds the key to its
// queued lease with no keepalive while half the lease's TTL is left (detail::etcd_fresh_left,
// its boundary tested by the tick on the steady clock, no server), and reports only the time
// left; a grant whose reply is lost on that path, or whose queued lease etcd no longer has,
// leaves nothing behind; a wait asks the holder's time left only after etcd_first_watch_window
// without news, and a silent watch still ends by the holder's expiry. Requests are counted per
// path through the link's fault hook; the next in line re-reads nothing when the one ahead is
// granted (it watches the key from that deletion on), and waits a first window at most when
// the one ahead leaves instead.
// ~8 s in all (the silent-watch case waits out a 2 s lease).
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>

#include "../support/etcd_faulty.hpp"
#include "holdfast/stores/etcd.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_etcd_handoff {

using holdfast::errc;
using holdfast::etcd_options;
using holdfast::etcd_store;
using holdfast::detail::etcd_fault;
using holdfast::detail::etcd_fresh_left;
using std::chrono::milliseconds;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

namespace {

/// etcd_faulty that also counts every request by path (the test reads it between calls).
struct counted : hf_test::etcd_faulty {
  explicit counted(const etcd_options& o) : etcd_faulty(o) {
    auto inner = std::move(link_.fault);
    link_.fault = [this, inner = std::move(inner)](std::string_view p, std::string_view body) {
      {
        std::lock_guard<std::mutex> lk(mu_);
        ++sent_[std::string(p)];
      }
      return inner(p, body);
    };
  }
  int sent(const std::string& path) {
    std::lock_guard<std::mutex> lk(mu_);
    return sent_[path];
  }
  std::map<std::string, int> counts() {
    std::lock_guard<std::mutex> lk(mu_);
    return sent_;
  }
  void reset() {
    std::lock_guard<std::mutex> lk(mu_);
    sent_.clear();
  }
  holdfast::detail::etcd_link& link() { return link_; }
  /// Revokes lease `id` behind the store's back (as a restore that lost it would).
  void revoke_behind(std::int64_t id) {
    auto guard = link_.lock();
    REQUIRE(link_.post("/lease/revoke", R"({"ID":")" + std::to_string(id) + R"("})"));
  }

 private:
  std::mutex mu_;
  std::map<std::string, int> sent_;
};

/// What a queued waiter saw, running blocking acquire()'s steps on one thread of its own (a
/// store's queue place belongs to the thread that took it): try_acquire_queued (busy), the wait,
/// then try_acquire_queued again; with the requests its store sent during the wait and during
/// that last attempt.
struct waited {
  bool woke = false;
  steady::time_point at{};
  std::map<std::string, int> waiting, granting;
  holdfast::result<holdfast::grant> g = errc::busy;
};

std::size_t added(const std::set<std::int64_t>& before, const std::set<std::int64_t>& after) {
  std::size_t n = 0;
  for (std::int64_t id : after) n += before.count(id) == 0 ? 1 : 0;
  return n;
}

std::future<waited> queue_and_wait(counted& s, const char* owner) {
  std::promise<void> queued;
  std::future<void> is_queued = queued.get_future();
  std::future<waited> out =
      std::async(std::launch::async, [&s, owner, q = std::move(queued)]() mutable {
        waited w;
        const bool busy = s.try_acquire_queued("k", owner, 30s).error() == errc::busy;
        s.reset();
        q.set_value();
        if (!busy) return w;
        w.woke = s.wait_for_release("k", steady::now() + 10s).has_value();
        w.at = steady::now();
        w.waiting = s.counts();
        s.reset();
        w.g = s.try_acquire_queued("k", owner, 30s);
        w.granting = s.counts();
        return w;
      });
  is_queued.wait();
  return out;
}

const std::string queue_marker = std::string(holdfast::detail::etcd_hashed_marker);

}  // namespace

TEST_CASE("etcd_fresh_left: half the applied TTL left is enough, one tick less is not",
          "[etcd][handoff]") {
  const steady::time_point t0{std::chrono::hours(1)};
  const std::chrono::nanoseconds tick(1);  // steady_clock's
  // 30 s applied: fresh up to exactly 15 s after the send, reporting the time left in whole ms
  // (rounded down: the time passed is rounded up).
  CHECK(etcd_fresh_left(30, t0, t0) == milliseconds(30000));
  CHECK(etcd_fresh_left(30, t0, t0 + 15s - tick) == milliseconds(15000));
  CHECK(etcd_fresh_left(30, t0, t0 + 15s) == milliseconds(15000));
  CHECK(etcd_fresh_left(30, t0, t0 + 15s + tick) == std::nullopt);
  CHECK(etcd_fresh_left(30, t0, t0 + 1ms + tick) == milliseconds(29998));
  // etcd's minimum, 2 s: 1 s.
  CHECK(etcd_fresh_left(2, t0, t0 + 1s) == milliseconds(1000));
  CHECK(etcd_fresh_left(2, t0, t0 + 1s + tick) == std::nullopt);
  // A clock read before the send counts as no time passed; no applied TTL is never fresh.
  CHECK(etcd_fresh_left(30, t0, t0 - 1s) == milliseconds(30000));
  CHECK(etcd_fresh_left(0, t0, t0) == std::nullopt);
  CHECK(etcd_fresh_left(30, t0, t0 + 31s) == std::nullopt);
}

TEST_CASE(
    "etcd hand-off: the woken waiter's grant is one transaction, no keepalive, and the wait "
    "asks no timetolive",
    "[etcd][handoff][wait]") {
  std::optional<etcd_options> o = hf_test::shared_etcd("hf-handoff");
  if (!o) return;
  etcd_store holder(*o);
  counted w(*o);
  auto h = holder.try_acquire("k", "H", 30s);
  REQUIRE(h);
  std::future<waited> wf = queue_and_wait(w, "W");
  std::this_thread::sleep_for(200ms);
  const auto released = steady::now();
  REQUIRE(holder.release("k", "H", h->token));
  waited r1 = wf.get();
  REQUIRE(r1.woke);
  CHECK(r1.at - released < 900ms);  // the watch event, within the first window
  CHECK(r1.waiting["/lease/timetolive"] == 0);
  INFO(w.last_error_message());
  REQUIRE(r1.g);
  const holdfast::grant* g = &*r1.g;
  CHECK(g->token > h->token);
  // Only the time left of the lease queued ~0.3 s ago: at most the 30 s asked, more than half.
  CHECK(g->ttl < 30s);
  CHECK(g->ttl > 25s);  // (well above half: the lease was granted ~0.3 s ago)
  CHECK(r1.granting["/lease/keepalive"] == 0);
  CHECK(r1.granting["/lease/grant"] == 0);
  CHECK(r1.granting["/kv/txn"] == 1);
  CHECK(w.keys(queue_marker) == 0);  // the grant deleted the entry
  // The grant is the queued lease's: renew refreshes it to the full TTL; release ends it.
  auto r = w.renew("k", "W", g->token, 30s);
  REQUIRE(r);
  CHECK(r->ttl == 30s);
  REQUIRE(w.release("k", "W", g->token));
  CHECK(w.keys() == 0);
}

TEST_CASE("etcd hand-off: a queued lease older than half its TTL is refreshed before the grant",
          "[etcd][handoff]") {
  std::optional<etcd_options> o = hf_test::shared_etcd("hf-handoff");
  if (!o) return;
  etcd_store holder(*o);
  counted w(*o);
  auto h = holder.try_acquire("k", "H", 2s);  // etcd's minimum; expires unrenewed
  REQUIRE(h);
  REQUIRE(w.try_acquire_queued("k", "W", 2s).error() == errc::busy);
  std::this_thread::sleep_for(1100ms);  // past half of the queued lease's 2 s
  REQUIRE(holder.release("k", "H", h->token));
  w.reset();
  auto g = w.try_acquire_queued("k", "W", 2s);
  INFO(w.last_error_message());
  REQUIRE(g);
  CHECK(w.sent("/lease/keepalive") == 1);
  CHECK(w.sent("/lease/grant") == 0);
  CHECK(g->ttl == 2s);  // refreshed to its full TTL
  REQUIRE(w.release("k", "W", g->token));
}

// Expected: the woken grant's transaction (kv/txn with no keepalive before it) applies and loses
// its reply: the attempt reports timeout, and the lease it bound, with the key and the queue
// entry, is revoked at once: nothing of the waiter's is left, and another owner gets the key.
TEST_CASE("etcd hand-off lost reply: a woken grant whose reply is lost leaves nothing behind",
          "[etcd][handoff][lost_reply]") {
  std::optional<etcd_options> o = hf_test::shared_etcd("hf-handoff");
  if (!o) return;
  etcd_store holder(*o);
  counted w(*o);
  const std::set<std::int64_t> before = w.leases();
  auto h = holder.try_acquire("k", "H", 30s);
  REQUIRE(h);
  REQUIRE(w.try_acquire_queued("k", "W", 30s).error() == errc::busy);
  REQUIRE(w.keys(queue_marker) == 1);
  REQUIRE(holder.release("k", "H", h->token));
  w.reset();
  w.inject("/kv/txn", etcd_fault::lost_reply);
  CHECK(w.try_acquire_queued("k", "W", 30s).error() == errc::timeout);
  w.clear();
  CHECK(w.sent("/lease/keepalive") == 0);  // the fresh path: the transaction was the request
  CHECK(w.keys() == 0);                    // no key, no queue entry
  CHECK(added(before, w.leases()) == 0);   // no lease
  auto g = holder.try_acquire("k", "H", 30s);
  REQUIRE(g);
  REQUIRE(holder.release("k", "H", g->token));
}

// Expected: a queued lease that looks fresh but that etcd no longer has (revoked behind the
// store's back: what a snapshot restore does) fails the woken grant's transaction as a whole;
// the attempt takes a new lease and grants with it, leaving no entry and no extra lease.
TEST_CASE("etcd hand-off: a fresh-looking queued lease etcd lost is replaced by a new one",
          "[etcd][handoff]") {
  std::optional<etcd_options> o = hf_test::shared_etcd("hf-handoff");
  if (!o) return;
  etcd_store holder(*o);
  counted w(*o);
  auto h = holder.try_acquire("k", "H", 30s);
  REQUIRE(h);
  const std::set<std::int64_t> before = w.leases();
  REQUIRE(w.try_acquire_queued("k", "W", 30s).error() == errc::busy);
  const std::set<std::int64_t> queued = w.leases();
  REQUIRE(added(before, queued) == 1);
  for (std::int64_t id : queued) {
    if (before.count(id) == 0) w.revoke_behind(id);
  }
  CHECK(w.keys(queue_marker) == 0);  // the entry went with its lease
  REQUIRE(holder.release("k", "H", h->token));
  w.reset();
  auto g = w.try_acquire_queued("k", "W", 30s);
  INFO(w.last_error_message());
  REQUIRE(g);
  CHECK(g->ttl == 30s);  // a new lease's full TTL
  CHECK(w.sent("/kv/txn") == 2);
  CHECK(w.sent("/lease/grant") == 1);
  CHECK(added(before, w.leases()) == 1);  // the grant's lease only
  REQUIRE(w.release("k", "W", g->token));
  CHECK(added(before, w.leases()) == 0);
  CHECK(w.keys() == 0);
}

// Two waiters queue behind a holder, A then B; B watches A's entry. The release wakes A only;
// A's grant (deleting its entry) ends B's watch, and B watches the key from that deletion on,
// taking A for the holder, with no re-read of the key and the queue (at most one range read,
// if writes came between); A's release then wakes B, whose grant is its one transaction.
TEST_CASE("etcd hand-off: the next in line re-reads nothing when the one ahead is granted",
          "[etcd][handoff][wait]") {
  std::optional<etcd_options> o = hf_test::shared_etcd("hf-handoff");
  if (!o) return;
  etcd_store holder(*o);
  etcd_store a(*o);
  counted b(*o);
  auto h = holder.try_acquire("k", "H", 30s);
  REQUIRE(h);
  REQUIRE(a.try_acquire_queued("k", "A", 30s).error() == errc::busy);
  std::future<waited> bf = queue_and_wait(b, "B");
  std::this_thread::sleep_for(200ms);
  REQUIRE(holder.release("k", "H", h->token));
  REQUIRE(a.wait_for_release("k", steady::now() + 5s));
  auto ga = a.try_acquire_queued("k", "A", 30s);
  REQUIRE(ga);
  std::this_thread::sleep_for(300ms);
  CHECK(bf.wait_for(0s) == std::future_status::timeout);  // A's grant did not wake B
  const auto released = steady::now();
  REQUIRE(a.release("k", "A", ga->token));
  waited rb = bf.get();
  REQUIRE(rb.woke);
  CHECK(rb.at - released < 900ms);  // A's release, within the first window
  CHECK(rb.waiting["/kv/txn"] == 0);
  CHECK(rb.waiting["/kv/range"] <= 1);
  CHECK(rb.waiting["/lease/timetolive"] == 0);
  INFO(b.last_error_message());
  REQUIRE(rb.g);
  CHECK(rb.g->token > ga->token);
  CHECK(rb.granting["/kv/txn"] == 1);
  CHECK(rb.granting.size() == 1);
  REQUIRE(b.release("k", "B", rb.g->token));
}

// The one ahead leaves instead (its entry deleted with no grant), after the holder released:
// the waiter behind then watches the key, taking the one ahead for its holder; the key is
// free, so the range read (if writes came between) or, at the latest, the end of the first
// window (the one ahead's lease is gone) ends its wait: never the deadline.
TEST_CASE("etcd hand-off: the one ahead leaving after the release costs the first window at most",
          "[etcd][handoff][wait]") {
  std::optional<etcd_options> o = hf_test::shared_etcd("hf-handoff");
  if (!o) return;
  etcd_store holder(*o);
  etcd_store a(*o);
  counted b(*o);
  auto h = holder.try_acquire("k", "H", 30s);
  REQUIRE(h);
  REQUIRE(a.try_acquire_queued("k", "A", 30s).error() == errc::busy);
  const auto t = steady::now();
  std::future<waited> bf = queue_and_wait(b, "B");
  std::this_thread::sleep_for(200ms);
  REQUIRE(holder.release("k", "H", h->token));
  std::this_thread::sleep_for(100ms);
  REQUIRE(a.leave_queue("k"));
  waited rb = bf.get();
  REQUIRE(rb.woke);
  CHECK(rb.at - t < 300ms + holdfast::detail::etcd_first_watch_window + 700ms);
  CHECK(rb.waiting["/kv/txn"] == 0);
  CHECK(rb.waiting["/lease/timetolive"] <= 1);
  REQUIRE(rb.g);
  REQUIRE(b.release("k", "B", rb.g->token));
}

// A watch that hears nothing (here: of a queue entry that is never deleted, while the holder's
// 2 s lease expires) must still end by the holder's expiry: after the first window, the
// holder's time left bounds the sleep. Never the 10 s deadline.
TEST_CASE("etcd hand-off: a silent watch still ends by the holder's expiry", "[etcd][handoff]") {
  std::optional<etcd_options> o = hf_test::shared_etcd("hf-handoff");
  if (!o) return;
  etcd_store holder(*o);
  counted w(*o);
  REQUIRE(holder.try_acquire("k", "H", 2s));
  holdfast::detail::etcd_link& link = w.link();
  auto guard = link.lock();
  std::string body;
  std::string k = o->key_prefix;
  holdfast::detail::etcd_key_name("k", k);
  // The watched key exists and is never deleted (a missing one would count as gone, should
  // another test's writes make etcd create the watch past the read's revision).
  const std::string never = k + "#never";
  std::string put = R"({"key":")";
  holdfast::detail::base64_append(never, put);
  put += R"(","value":""})";
  REQUIRE(link.post("/kv/put", put));
  std::int64_t rev = 0;
  auto read = holdfast::detail::etcd_range(link, body, k, &rev);
  REQUIRE(read);
  REQUIRE(*read);
  const holdfast::detail::etcd_sighting seen{k, rev, (*read)->lease, (*read)->create_revision};
  holdfast::detail::etcd_watch watch;
  w.reset();
  const auto t = steady::now();
  auto e = holdfast::detail::etcd_watch_round(link, guard, body, watch, never, false, seen, t + 10s,
                                              3600);
  const auto waited = steady::now() - t;
  REQUIRE(e);
  CHECK(*e == holdfast::detail::etcd_watch::end::quiet);
  CHECK(waited >= holdfast::detail::etcd_first_watch_window);
  CHECK(waited < 3500ms);  // the 2 s lease's time left (+ whole-second rounding), not 10 s
  CHECK(w.sent("/lease/timetolive") == 1);
}

}  // namespace test_etcd_handoff
