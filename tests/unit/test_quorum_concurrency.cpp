// SPDX-License-Identifier: MIT
// Unit tests for quorum.hpp's default dispatch: one worker thread per member. Real threads, so
// these cases are tagged [concurrency] (the TSan build runs them) and every wait is bounded.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <vector>

#include "holdfast/fence.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/quorum.hpp"
#include "holdfast/stores/memory.hpp"
#include "test_support.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_quorum_concurrency {

using namespace std::chrono_literals;
using holdfast::errc;
using holdfast::fencing_token;
using holdfast::grant;
using holdfast::quorum_options;
using holdfast::quorum_store;
using holdfast::result;

namespace {

// A member over a real-clock memory_store whose calls can be held at a gate, or made to wait
// until every member has been entered (which only concurrent requests can satisfy).
struct gated_member {
  struct shared_state {
    std::mutex mutex;
    std::condition_variable cv;
    std::size_t arrived = 0;
  };

  result<grant> try_acquire(std::string_view key, std::string_view owner,
                            std::chrono::milliseconds ttl) {
    if (throws) throw std::runtime_error("member exploded");
    if (std::error_code ec = wait_turn()) return ec;
    return store.try_acquire(key, owner, ttl);
  }
  result<grant> renew(std::string_view key, std::string_view owner, fencing_token token,
                      std::chrono::milliseconds ttl) {
    return store.renew(key, owner, token, ttl);
  }
  result<void> release(std::string_view key, std::string_view owner, fencing_token token) {
    return store.release(key, owner, token);
  }
  result<void> raise_token(std::string_view key, std::string_view owner, fencing_token token,
                           fencing_token to) {
    return store.raise_token(key, owner, token, to);
  }

  // Blocks the calling worker while `held` is set (at most 10 s), or, with `barrier` set, until
  // `barrier` members have arrived (at most 10 s; then it answers store_unavailable).
  std::error_code wait_turn() {
    std::unique_lock<std::mutex> lock(shared->mutex);
    ++shared->arrived;
    shared->cv.notify_all();
    if (barrier != 0 &&
        !shared->cv.wait_for(lock, 10s, [&] { return shared->arrived >= barrier; })) {
      return errc::store_unavailable;
    }
    shared->cv.wait_for(lock, 10s, [&] { return !held; });
    return {};
  }
  void open() {
    std::lock_guard<std::mutex> lock(shared->mutex);
    held = false;
    shared->cv.notify_all();
  }

  std::shared_ptr<shared_state> shared;
  holdfast::memory_store<> store;
  std::size_t barrier = 0;
  bool held = false;  // guarded by shared->mutex
  std::atomic<bool> throws{false};
};

// Five gated members sharing one state.
struct gated_cluster {
  gated_cluster() {
    for (int i = 0; i < 5; ++i) {
      members.push_back(std::make_unique<gated_member>());
      members.back()->shared = shared;
    }
  }
  std::vector<gated_member*> pointers() {
    std::vector<gated_member*> v;
    for (auto& m : members) v.push_back(m.get());
    return v;
  }
  std::shared_ptr<gated_member::shared_state> shared =
      std::make_shared<gated_member::shared_state>();
  std::vector<std::unique_ptr<gated_member>> members;
};

}  // namespace

TEST_CASE("quorum_store asks the members concurrently", "[quorum][concurrency]") {
  gated_cluster c;
  for (auto& m : c.members) m->barrier = 5;  // each request waits until all five are in flight
  quorum_options o;
  o.member_timeout = 20000ms;
  quorum_store<gated_member> q(c.pointers(), o);
  // One after another, the first member would wait out its 10 s bound and fail.
  const grant g = q.try_acquire("k", "alice", 100s).value();
  CHECK(q.release("k", "alice", g.token));
}

TEST_CASE("a hung member holds up the quorum only for the per-member timeout; its late grant joins",
          "[quorum][concurrency]") {
  gated_cluster c;
  auto& ms = c.members;
  ms[4]->held = true;  // member 4 hangs (for up to 10 s) in its first request
  grant g;
  {
    quorum_options o;
    o.member_timeout = 20ms;  // the per-member wait: then the four others decide
    o.member_timeout_share = 1.0;
    quorum_store<gated_member> q(c.pointers(), o);
    g = q.try_acquire("k", "alice", 100s).value();
    {
      std::lock_guard<std::mutex> lock(c.shared->mutex);
      CHECK(ms[4]->held);  // returned while member 4 was still stuck
    }
    ms[4]->open();
  }  // the destructor lets member 4's worker finish: its late grant joins the lease under g.token
  for (auto& m : ms) {
    const auto rec = m->store.inspect("k").value();
    REQUIRE(rec);
    CHECK(rec->token == g.token);
  }

  // A failed acquire gives back grants that arrive after it gave up, too.
  {
    std::lock_guard<std::mutex> lock(c.shared->mutex);
    for (std::size_t i = 2; i < 5; ++i) ms[i]->held = true;
  }
  {
    quorum_options o;
    o.member_timeout = 20ms;
    o.member_timeout_share = 1.0;
    quorum_store<gated_member> q(c.pointers(), o);
    CHECK(q.try_acquire("x", "bob", 100s).error() == errc::store_unavailable);
    for (std::size_t i = 2; i < 5; ++i) ms[i]->open();
  }
  for (auto& m : ms) CHECK(m->store.inspect("x").value() == std::nullopt);
}

TEST_CASE("threaded quorum: concurrent holders are exclusive and tokens increase",
          "[quorum][concurrency]") {
  std::vector<std::unique_ptr<holdfast::memory_store<>>> ms;
  std::vector<holdfast::memory_store<>*> ptrs;
  for (std::uint64_t i = 0; i < 5; ++i) {
    // Different starting counters: the first grants need the raise round.
    ms.push_back(std::make_unique<holdfast::memory_store<>>(
        holdfast::steady_clock{}, holdfast::memory_store_options{fencing_token(i * 7)}));
    ptrs.push_back(ms.back().get());
  }
  quorum_options o;
  o.member_timeout = 5000ms;
  quorum_store<holdfast::memory_store<>> q(ptrs, o);
  holdfast::acquire_options<> opts;
  opts.backoff.initial = 50us;
  opts.backoff.max_delay = 2ms;
  std::atomic<int> inside{0};
  std::atomic<bool> overlap{false};
  std::mutex order_mutex;
  std::vector<fencing_token> order;
  holdfast::fenced<int> db;
  std::vector<std::thread> threads;
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 40; ++i) {
        auto l = holdfast::acquire(q, "k", 60s, 30s, opts);
        if (!l) continue;
        if (inside.fetch_add(1) != 0) overlap = true;
        {
          std::lock_guard<std::mutex> lock(order_mutex);
          order.push_back(l->token());
        }
        (void)db.write(*l, [](int& v) { ++v; });
        inside.fetch_sub(1);
        (void)l->release();
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(!overlap);
  CHECK(order.size() == 120);
  for (std::size_t i = 1; i < order.size(); ++i) CHECK(order[i - 1] < order[i]);
  CHECK(db.snapshot() == 120);
}

TEST_CASE("threaded quorum: a member's exception is masked by a quorum, rethrown without one",
          "[quorum][concurrency]") {
  gated_cluster c;
  quorum_options o;
  o.member_timeout = 5000ms;
  {
    quorum_store<gated_member> q(c.pointers(), o);
    c.members[1]->throws = true;
    c.members[3]->throws = true;
    const grant g = q.try_acquire("k", "alice", 100s).value();
    CHECK(q.release("k", "alice", g.token));
    c.members[4]->throws = true;
    CHECK_THROWS_AS(q.try_acquire("k", "alice", 100s), std::runtime_error);
  }
  for (auto& m : c.members) CHECK(m->store.inspect("k").value() == std::nullopt);
}

}  // namespace test_quorum_concurrency
