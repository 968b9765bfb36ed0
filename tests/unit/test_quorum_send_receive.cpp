// SPDX-License-Identifier: MIT
// Unit tests for quorum.hpp's split dispatch (quorum_dispatch::automatic over members with the
// send/receive capability, send_receive.hpp) and its direct calls to in-process members. The
// members here are memory_stores behind a fake send/receive: a reply "arrives" when a byte is
// written to a pipe the quorum polls, and a test can hold a member's replies back (a slow or hung
// server). Real threads, bounded waits. Redis members are covered by test_quorum_redis.cpp.
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "holdfast/quorum.hpp"
#include "holdfast/send_receive.hpp"
#include "holdfast/stores/memory.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_quorum_send_receive {

namespace {

using namespace std::chrono_literals;
using holdfast::errc;
using holdfast::fencing_token;
using holdfast::grant;
using holdfast::quorum_options;
using holdfast::quorum_store;
using holdfast::result;
using holdfast::store_op;
using holdfast::store_reply;
using holdfast::store_request;

bool wait_until(const std::function<bool()>& f, std::chrono::milliseconds bound) {
  const auto end = std::chrono::steady_clock::now() + bound;
  while (!f()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// A member with the send/receive capability over a memory_store. send() runs the operation at
// once (the "server" executes on arrival) and delivers the reply through a pipe, unless replies
// are held: then it is delivered by deliver(). Blocking calls wait while replies are held.
class split_member {
 public:
  split_member() {
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    rd_ = fds[0];
    wr_ = fds[1];
    ::fcntl(rd_, F_SETFL, O_NONBLOCK);
  }
  ~split_member() {
    ::close(rd_);
    ::close(wr_);
  }
  split_member(const split_member&) = delete;
  split_member& operator=(const split_member&) = delete;

  // Blocking operations (workers, fallback).
  result<grant> try_acquire(std::string_view k, std::string_view o, std::chrono::milliseconds t) {
    blocking_wait();
    return store.try_acquire(k, o, t);
  }
  result<grant> renew(std::string_view k, std::string_view o, fencing_token tk,
                      std::chrono::milliseconds t) {
    blocking_wait();
    return store.renew(k, o, tk, t);
  }
  result<void> release(std::string_view k, std::string_view o, fencing_token tk) {
    blocking_wait();
    return store.release(k, o, tk);
  }
  result<std::optional<holdfast::lease_record>> inspect(std::string_view k) {
    blocking_wait();
    return store.inspect(k);
  }
  result<void> raise_token(std::string_view k, std::string_view o, fencing_token tk,
                           fencing_token to) {
    blocking_wait();
    return store.raise_token(k, o, tk, to);
  }
  result<void> raise_token_floor(fencing_token f) {
    blocking_wait();
    return store.raise_token_floor(f);
  }

  // The send/receive capability.
  std::error_code send(const store_request& r) {
    std::lock_guard<std::mutex> lock(m_);
    if (in_flight_ || !connected) return holdfast::send_would_block();
    ++sends;
    in_flight_ = true;
    ready_ = false;
    reply_ = store_reply{};
    switch (r.op) {
      case store_op::try_acquire:
        reply_.granted = store.try_acquire(r.key, r.owner, r.ttl);
        break;
      case store_op::renew:
        reply_.granted = store.renew(r.key, r.owner, r.token, r.ttl);
        break;
      case store_op::release:
        reply_.done = store.release(r.key, r.owner, r.token);
        break;
      case store_op::inspect:
        reply_.record = store.inspect(r.key);
        break;
      case store_op::raise_token:
        reply_.done = store.raise_token(r.key, r.owner, r.token, r.to);
        break;
      case store_op::raise_token_floor:
        reply_.done = store.raise_token_floor(r.token);
        break;
    }
    if (!hold_) deliver_locked();
    return {};
  }
  holdfast::io_interest interest() const {
    std::lock_guard<std::mutex> lock(m_);
    if (!in_flight_ || ready_) return {};
    return {rd_, true, false};
  }
  bool progress() {
    std::lock_guard<std::mutex> lock(m_);
    return !in_flight_ || ready_;
  }
  store_reply receive() {
    std::unique_lock<std::mutex> lock(m_);
    cv_.wait_for(lock, 10s, [this] { return ready_ || !in_flight_; });
    char c;
    while (::read(rd_, &c, 1) == 1) {
    }
    store_reply out = std::move(reply_);
    if (!ready_) {
      out.granted = errc::timeout;
      out.done = errc::timeout;
    }
    in_flight_ = false;
    ready_ = false;
    ++receives;
    receiver = std::this_thread::get_id();
    return out;
  }

  // Holds back replies (and blocking calls) until deliver()/unhold().
  void hold() {
    std::lock_guard<std::mutex> lock(m_);
    hold_ = true;
  }
  void unhold() {
    std::lock_guard<std::mutex> lock(m_);
    hold_ = false;
    if (in_flight_ && !ready_) deliver_locked();
    cv_.notify_all();
  }
  [[nodiscard]] bool waiting() const {
    std::lock_guard<std::mutex> lock(m_);
    return in_flight_ && !ready_;
  }

  holdfast::memory_store<> store;
  std::atomic<int> sends{0};
  std::atomic<int> receives{0};
  std::atomic<int> blocking{0};
  std::atomic<bool> connected{true};
  std::thread::id receiver{};

 private:
  void deliver_locked() {
    ready_ = true;
    const char c = 1;
    (void)!::write(wr_, &c, 1);
    cv_.notify_all();
  }
  void blocking_wait() {
    ++blocking;
    std::unique_lock<std::mutex> lock(m_);
    cv_.wait_for(lock, 10s, [this] { return !hold_; });
  }

  mutable std::mutex m_;
  std::condition_variable cv_;
  bool in_flight_ = false;
  bool ready_ = false;
  bool hold_ = false;
  store_reply reply_;
  int rd_ = -1;
  int wr_ = -1;
};

static_assert(holdfast::has_send_receive_v<split_member>);

struct cluster {
  explicit cluster(std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) members.push_back(std::make_unique<split_member>());
  }
  std::vector<split_member*> pointers() {
    std::vector<split_member*> v;
    for (auto& m : members) v.push_back(m.get());
    return v;
  }
  std::vector<std::unique_ptr<split_member>> members;
};

// An in-process member that records the thread that called it.
struct inline_member : holdfast::memory_store<> {
  static constexpr bool completes_inline = true;
  result<grant> try_acquire(std::string_view k, std::string_view o, std::chrono::milliseconds t) {
    caller = std::this_thread::get_id();
    return memory_store::try_acquire(k, o, t);
  }
  std::thread::id caller{};
};

}  // namespace

TEST_CASE("split dispatch: every request goes out from the caller's thread, no worker call",
          "[quorum][concurrency]") {
  cluster c(5);
  quorum_store<split_member> q(c.pointers());
  for (int round = 0; round < 3; ++round) {
    const grant g = q.try_acquire("k", "alice", 10s).value();
    CHECK(q.renew("k", "alice", g.token, 10s));
    REQUIRE(q.inspect("k").value().has_value());
    CHECK(q.release("k", "alice", g.token));
  }
  for (auto& m : c.members) {
    CHECK(m->blocking == 0);         // no request went through a worker
    CHECK(m->sends == m->receives);  // every reply read
    CHECK(m->receiver == std::this_thread::get_id());
    CHECK(m->sends >= 9);
  }
}

TEST_CASE("split dispatch: the first round awaits every member, replies in any order",
          "[quorum][concurrency]") {
  cluster c(5);
  c.members[0]->hold();  // the first member sent to answers last
  quorum_options o;
  o.member_timeout = 5000ms;
  o.member_timeout_share = 1.0;
  quorum_store<split_member> q(c.pointers(), o);
  std::atomic<bool> done{false};
  result<grant> g = errc::timeout;
  std::thread t([&] {
    g = q.try_acquire("k", "alice", 100s);
    done = true;
  });
  REQUIRE(wait_until([&] { return c.members[0]->waiting(); }, 5000ms));
  // Four grants are in, a majority; Redlock's first round still waits for the fifth.
  std::this_thread::sleep_for(30ms);
  CHECK_FALSE(done.load());
  c.members[0]->unhold();
  t.join();
  REQUIRE(g);
  for (auto& m : c.members) {
    CHECK(m->receives == 1);
    CHECK(m->blocking == 0);
  }
  CHECK(q.release("k", "alice", g->token));
}

TEST_CASE(
    "split dispatch: a hung member holds up the quorum only for its timeout; its late grant "
    "joins the lease",
    "[quorum][concurrency]") {
  cluster c(5);
  // Different counters: the late member's token is below the quorum's, so it must be raised.
  for (std::size_t i = 0; i < 4; ++i)
    REQUIRE(c.members[i]->store.raise_token_floor(fencing_token(40)));
  c.members[4]->hold();
  quorum_options o;
  o.member_timeout = 20ms;
  o.member_timeout_share = 1.0;
  quorum_store<split_member> q(c.pointers(), o);
  const auto t0 = std::chrono::steady_clock::now();
  const grant g = q.try_acquire("k", "alice", 100s).value();
  CHECK(std::chrono::steady_clock::now() - t0 < 5s);
  CHECK(g.token == fencing_token(41));
  c.members[4]->unhold();  // the late reply: a grant with token 1, raised to 41 on its worker
  CHECK(wait_until(
      [&] {
        auto r = c.members[4]->store.inspect("k");
        return r && r->has_value() && (*r)->token == g.token && (*r)->owner == "alice";
      },
      5000ms));
  CHECK(c.members[4]->receiver != std::this_thread::get_id());  // read on the worker
  CHECK(q.release("k", "alice", g.token));
  for (auto& m : c.members) CHECK(wait_until([&] { return m->sends == m->receives; }, 5000ms));
}

TEST_CASE("split dispatch: a failed attempt gives back every grant, the late ones too",
          "[quorum][concurrency]") {
  cluster c(3);
  c.members[1]->hold();
  c.members[2]->hold();
  quorum_options o;
  o.member_timeout = 20ms;
  o.member_timeout_share = 1.0;
  quorum_store<split_member> q(c.pointers(), o);
  CHECK(q.try_acquire("k", "alice", 100s).error() == errc::store_unavailable);
  // Member 0 granted on time and was given the lease back (through its worker: the clean-up
  // round); members 1 and 2 granted late, after the caller gave up.
  c.members[1]->unhold();
  c.members[2]->unhold();
  for (auto& m : c.members) {
    CHECK(wait_until(
        [&] {
          auto r = m->store.inspect("k");
          return r && !r->has_value();
        },
        5000ms));
  }
  // And the key is free for the next owner.
  const grant g = q.try_acquire("k", "bob", 100s).value();
  CHECK(q.release("k", "bob", g.token));
}

TEST_CASE("split dispatch: a member that declines to send goes through its worker",
          "[quorum][concurrency]") {
  cluster c(3);
  c.members[2]->connected = false;  // send() declines: connecting would block
  quorum_store<split_member> q(c.pointers());
  const grant g = q.try_acquire("k", "alice", 10s).value();
  CHECK(q.release("k", "alice", g.token));
  // The release round is decided by the first two: member 2's release may still be running.
  CHECK(wait_until([&] { return c.members[2]->blocking == 2; }, 5000ms));
  CHECK(c.members[2]->sends == 0);
  for (std::size_t i = 0; i < 2; ++i) {
    CHECK(c.members[i]->sends == 2);
    CHECK(c.members[i]->sends == c.members[i]->receives);
  }
}

TEST_CASE("split dispatch: concurrent callers are exclusive and tokens increase",
          "[quorum][concurrency]") {
  cluster c(5);
  quorum_options o;
  o.member_timeout = 5000ms;
  quorum_store<split_member> q(c.pointers(), o);
  std::atomic<int> inside{0};
  std::atomic<bool> overlap{false};
  std::mutex order_mutex;
  fencing_token last{};
  bool increasing = true;
  std::atomic<int> grants{0};
  std::atomic<int> bad{0};
  auto worker = [&](const std::string& name) {
    for (int i = 0; i < 200; ++i) {
      const std::string owner = name + "-" + std::to_string(i);
      auto g = q.try_acquire("one", owner, 10s);
      if (!g) continue;
      ++grants;
      if (++inside > 1) overlap = true;
      {
        std::lock_guard<std::mutex> lock(order_mutex);
        if (!(last < g->token)) increasing = false;
        last = g->token;
      }
      --inside;
      // Catch2 assertions are not thread-safe: count failures instead.
      if (q.release("one", "not-" + owner, g->token).error() != errc::not_holder) ++bad;
      if (!q.release("one", owner, g->token)) ++bad;
    }
  };
  std::thread a(worker, "a"), b(worker, "b");
  a.join();
  b.join();
  CHECK_FALSE(overlap.load());
  CHECK(increasing);
  CHECK(grants > 0);
  CHECK(bad == 0);
  for (auto& m : c.members) CHECK(m->sends == m->receives);
}

TEST_CASE("in-process members are called in the caller's thread, with no worker",
          "[quorum][concurrency]") {
  std::vector<std::unique_ptr<inline_member>> ms;
  std::vector<inline_member*> ptrs;
  for (int i = 0; i < 3; ++i) {
    ms.push_back(std::make_unique<inline_member>());
    ptrs.push_back(ms.back().get());
  }
  quorum_store<inline_member> q(ptrs);
  const grant g = q.try_acquire("k", "alice", 10s).value();
  for (auto* m : ptrs) CHECK(m->caller == std::this_thread::get_id());
  CHECK(q.release("k", "alice", g.token));
  // Threads, asked for explicitly, still use the workers.
  // The round returns at W = 2 replies; the third member may still be called on its worker, so
  // the callers are read once the store (and with it each worker, after its queue) is gone.
  {
    quorum_options o;
    o.dispatch = holdfast::quorum_dispatch::threads;
    quorum_store<inline_member> qt(ptrs, o);
    const grant g2 = qt.try_acquire("k2", "alice", 10s).value();
    CHECK(qt.release("k2", "alice", g2.token));
  }
  for (auto* m : ptrs) CHECK(m->caller != std::this_thread::get_id());
}

}  // namespace test_quorum_send_receive
