// SPDX-License-Identifier: MIT
// quorum_store::renew_batch (quorum/detail/quorum_batch.hpp): many renewals in one round, each
// member sent the whole batch (its renew_batch when it has one, else renew() per lease), each
// lease judged as renew() judges it. Members are memory_stores on one manual_clock; the leases'
// records are changed directly on the members to make one lease of the batch lost on a majority
// or a minority. Sequential and worker dispatch. Costs well under a second.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "holdfast/keepalive.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/quorum.hpp"
#include "holdfast/send_receive.hpp"
#include "holdfast/stores/memory.hpp"

namespace test_quorum_batch {

namespace {

using namespace std::chrono_literals;
using holdfast::errc;
using holdfast::fencing_token;
using holdfast::grant;
using holdfast::manual_clock;
using holdfast::quorum_dispatch;
using holdfast::quorum_options;
using holdfast::result;
using holdfast::store_op;
using holdfast::store_request;
using mem = holdfast::memory_store<manual_clock>;

// A memory_store that also offers renew_batch, counting its batches (one per member per round).
class batch_member : public mem {
 public:
  using mem::mem;
  void renew_batch(const store_request* q, std::size_t n, result<grant>* out) {
    ++batches;
    if (throw_batch) throw std::runtime_error("member batch failed");
    for (std::size_t i = 0; i < n; ++i) out[i] = renew(q[i].key, q[i].owner, q[i].token, q[i].ttl);
  }
  int batches = 0;
  bool throw_batch = false;
};

template <class M>
struct cluster {
  explicit cluster(quorum_dispatch d) {
    for (int i = 0; i < 3; ++i) members.push_back(std::make_unique<M>(clock));
    std::vector<M*> p;
    for (auto& m : members) p.push_back(m.get());
    quorum_options o;
    o.dispatch = d;
    q = std::make_unique<holdfast::quorum_store<M, manual_clock>>(p, o, clock);
  }
  manual_clock clock;
  std::vector<std::unique_ptr<M>> members;
  std::unique_ptr<holdfast::quorum_store<M, manual_clock>> q;
};

store_request renewal(const char* key, const char* owner, fencing_token t,
                      std::chrono::milliseconds ttl) {
  return store_request{store_op::renew, key, owner, t, {}, ttl};
}

// Three leases a, b, c held by "alice" (1 s); b is then lost on `lose_b_on` members (released
// there directly); the batch renews a, b, c and a request with an empty owner to 2 s.
template <class M>
std::vector<result<grant>> batch_with_b_lost(cluster<M>& c, std::size_t lose_b_on,
                                             std::vector<fencing_token>& tokens) {
  tokens.clear();
  for (const char* k : {"a", "b", "c"}) tokens.push_back(c.q->try_acquire(k, "alice", 1s)->token);
  for (std::size_t i = 0; i < lose_b_on; ++i)
    REQUIRE(c.members[i]->release("b", "alice", tokens[1]));
  const std::vector<store_request> q{
      renewal("a", "alice", tokens[0], 2s), renewal("b", "alice", tokens[1], 2s),
      renewal("c", "alice", tokens[2], 2s), renewal("d", "", tokens[2], 2s)};
  std::vector<result<grant>> out(q.size(), result<grant>(errc::protocol_error));
  c.q->renew_batch(q.data(), q.size(), out.data());
  return out;
}

}  // namespace

TEMPLATE_TEST_CASE("quorum renew_batch: one lease lost on a majority fails alone",
                   "[quorum][batch]", mem, batch_member) {
  for (quorum_dispatch d : {quorum_dispatch::sequential, quorum_dispatch::threads}) {
    cluster<TestType> c(d);
    std::vector<fencing_token> t;
    const auto out = batch_with_b_lost(c, 2, t);
    // The round is decided by W = 2 replies; under threads the third member may still be
    // renewing on its worker. Destroying the quorum store finishes every queued task, so the
    // members are read below only once all three have their batch.
    c.q.reset();
    CHECK(out[0].value() == grant{t[0], 2000ms});
    CHECK(out[1].error() == errc::lease_lost);  // 2 of 3 said lease_lost: W = 2 unreachable
    CHECK(out[2].value() == grant{t[2], 2000ms});
    CHECK(out[3].error() == errc::invalid_argument);  // bad arguments: sent nowhere
    // The renewed leases were extended on every member; b was not revived anywhere.
    c.clock.advance(1500ms);
    for (auto& m : c.members) {
      CHECK(m->inspect("a").value()->remaining == 500ms);
      CHECK(m->inspect("c").value()->remaining == 500ms);
    }
    CHECK(c.members[0]->inspect("b").value() == std::nullopt);
    CHECK(c.members[1]->inspect("b").value() == std::nullopt);
    // The one member that still held b renewed it, as renew() leaves it: a minority's record,
    // which no quorum can grant under (W = 2) and which its TTL frees.
    CHECK(c.members[2]->inspect("b").value()->remaining == 500ms);
    if constexpr (std::is_same_v<TestType, batch_member>) {
      for (auto& m : c.members) CHECK(m->batches == 1);  // the whole batch in one call each
    }
  }
}

TEST_CASE("quorum renew_batch: a lease lost on a minority is still renewed", "[quorum][batch]") {
  cluster<batch_member> c(quorum_dispatch::sequential);
  std::vector<fencing_token> t;
  const auto out = batch_with_b_lost(c, 1, t);
  CHECK(out[0].value() == grant{t[0], 2000ms});
  CHECK(out[1].value() == grant{t[1], 2000ms});  // members 1 and 2 renewed: W = 2
  CHECK(out[2].value() == grant{t[2], 2000ms});
  CHECK(out[3].error() == errc::invalid_argument);
}

TEST_CASE("quorum renew_batch: a member failing as a whole fails nothing on a majority",
          "[quorum][batch]") {
  cluster<batch_member> c(quorum_dispatch::sequential);
  const fencing_token a = c.q->try_acquire("a", "alice", 1s)->token;
  c.members[0]->throw_batch = true;  // one member throws: the other two renew
  const store_request q[] = {renewal("a", "alice", a, 2s)};
  result<grant> out[1] = {result<grant>(errc::protocol_error)};
  c.q->renew_batch(q, 1, out);
  CHECK(out[0].value() == grant{a, 2000ms});
  c.members[1]->throw_batch = true;  // two throw: W unreachable, the member's exception surfaces
  CHECK_THROWS_AS(c.q->renew_batch(q, 1, out), std::runtime_error);
  CHECK(out[0].error() == errc::store_unavailable);
}

TEST_CASE("keepalive renews a quorum's leases through renew_batch", "[quorum][batch]") {
  cluster<batch_member> c(quorum_dispatch::sequential);
  holdfast::keepalive_options ko;
  ko.start_thread = false;
  ko.max_batch = 16;
  holdfast::keepalive<manual_clock> ka(c.clock, ko);
  holdfast::acquire_options<manual_clock> ao;
  ao.clock = c.clock;
  auto l1 = holdfast::try_acquire(*c.q, "x", 900ms, ao);
  auto l2 = holdfast::try_acquire(*c.q, "y", 900ms, ao);
  REQUIRE(l1);
  REQUIRE(l2);
  REQUIRE(ka.add(*l1));
  REQUIRE(ka.add(*l2));
  c.clock.set(manual_clock::time_point(450ms));  // half the TTL (the default): both due
  (void)ka.poll();
  CHECK(ka.stats().renewals == 2);
  CHECK(ka.stats().batches == 1);
  for (auto& m : c.members) CHECK(m->batches == 1);  // both leases in one batch per member
  for (auto& m : c.members) CHECK(m->inspect("x").value()->remaining == 900ms);
  for (auto& m : c.members) CHECK(m->inspect("y").value()->remaining == 900ms);
}

}  // namespace test_quorum_batch
