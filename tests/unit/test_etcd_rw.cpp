// SPDX-License-Identifier: MIT
// etcd_store's read-write grants (stores/detail/etcd_rw.hpp) against the shared etcd .ci/servers
// starts (HOLDFAST_ETCD_ENDPOINTS): the kit's read-write contract (conformance_shared.hpp), a
// reply lost (applied, its answer dropped: detail::etcd_link::fault, as test_etcd_lost_reply.cpp)
// at every request of every read-write call leaving no lease, key or intent behind, sessions
// racing on one key, expiry of a reader, a writer and an intent by etcd's clock, the TTL a grant
// reports (min(asked, applied)), the plain and read-write name spaces apart, a key holdfast did
// not write, and a cluster whose revision went back. Cost: about 8 s, mostly waiting for leases
// of etcd's minimum TTL (2 s) to end.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "../support/etcd_faulty.hpp"
#include "../support/etcd_servers.hpp"
#include "../support/real_servers.hpp"
#include "../support/rw_checks.hpp"
#include "holdfast/read_write_lease.hpp"
#include "holdfast/stores/etcd.hpp"
#include "holdfast/testing/conformance_shared.hpp"

namespace test_etcd_rw {

using holdfast::errc;
using holdfast::etcd_options;
using holdfast::etcd_store;
using holdfast::fencing_token;
using holdfast::lease_mode;
using holdfast::detail::etcd_fault;
using std::chrono::milliseconds;
using namespace std::chrono_literals;
constexpr lease_mode sh = lease_mode::shared;
constexpr lease_mode ex = lease_mode::exclusive;

namespace {

std::optional<etcd_options> shared() {
  return hf_test::shared_etcd("hf-rw");
}

/// etcd_faulty (tests/support/etcd_faulty.hpp), and read-write keys written by hand.
struct faulty : hf_test::etcd_faulty {
  using etcd_faulty::etcd_faulty;
  /// Puts `value` at the read-write key `sub` ("w", "i", "r/<hex>") of `key`, with no lease.
  void put_raw(std::string_view key, const std::string& sub, const std::string& value) {
    auto guard = link_.lock();
    holdfast::detail::etcd_rw_names n;
    n.set(link_.options().key_prefix, key, "x");
    std::string body = R"({"key":")";
    holdfast::detail::base64_append(n.prefix + sub, body);
    body += R"(","value":")";
    holdfast::detail::base64_append(value, body);
    body += R"("})";
    REQUIRE(link_.post("/kv/put", body));
  }
};

// Polls `ask` every 50 ms until it grants or `bound` passes (a real server: a bounded wait).
template <class F>
holdfast::result<holdfast::grant> poll(F ask, std::chrono::steady_clock::duration bound) {
  const auto end = std::chrono::steady_clock::now() + bound;
  holdfast::result<holdfast::grant> g = ask();
  while (!g && g.error() == errc::busy && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(50ms);
    g = ask();
  }
  return g;
}

}  // namespace

TEST_CASE("etcd_store meets the kit's read-write contract", "[etcd][read_write][contract]") {
  static_assert(holdfast::has_read_write_v<etcd_store>);
  std::optional<etcd_options> o = shared();
  if (!o) return;
  faulty s(*o);
  const auto rep = holdfast::testing::check_read_write_contract(s);
  INFO("violations:\n" << rep.summary() << "\nlast error: " << s.last_error_message());
  CHECK(rep.ok());
  CHECK(rep.contract_checks > 20);
  CHECK(s.keys() == 0);           // every grant released, every intent ended with a grant
  CHECK(s.leases().size() == 0);  // and every lease revoked (busy asks' and replaced intents' too)
}

// Expected: a grant reports min(asked, applied): etcd rounds the TTL up to whole seconds, at
// least 2 s, and holds the key that long; the holder trusts no more than it asked.
TEST_CASE("etcd_store read-write: a grant reports min(asked, applied TTL)", "[etcd][read_write]") {
  std::optional<etcd_options> o = shared();
  if (!o) return;
  etcd_store s(*o);
  for (const milliseconds asked : {300ms, 2500ms, 10000ms}) {
    for (const lease_mode m : {sh, ex}) {
      auto g = s.try_acquire_rw("t", "A", asked, m);
      REQUIRE(g);
      CHECK(g->ttl == asked);
      auto r = s.renew_rw("t", "A", g->token, asked, m);
      REQUIRE(r);
      CHECK(r->ttl == asked);
      CHECK(r->token == g->token);
      REQUIRE(s.release_rw("t", "A", g->token, m));
    }
  }
}

// Expected, for a reply lost at each request of each read-write call: the call reports an error
// (no grant); afterwards etcd holds no lease and no key of the failed call (the ask's lease is
// revoked, with whatever its transaction put), and the key is as it was before the call. A busy
// ask whose give-back is lost leaves its lease only until the store's next attempt.
TEST_CASE("etcd_store read-write: a lost reply leaves nothing behind",
          "[etcd][read_write][lost_reply]") {
  std::optional<etcd_options> o = shared();
  if (!o) return;
  faulty a(*o);
  etcd_store b(*o);
  SECTION("a grant: lease/grant or kv/txn lost; asked again, a grant") {
    for (const char* path : {"/lease/grant", "/kv/txn"}) {
      for (const lease_mode m : {sh, ex}) {
        INFO(path << " " << static_cast<int>(m));
        a.inject(path, etcd_fault::lost_reply);
        CHECK(a.try_acquire_rw("k", "A", 30s, m).error() == errc::timeout);
        a.clear();
        CHECK(a.leases().size() == 0);
        CHECK(a.keys() == 0);
        auto w = b.try_acquire_rw("k", "B", 30s, ex);  // nothing of A's keeps B out
        REQUIRE(w);
        REQUIRE(b.release_rw("k", "B", w->token, ex));
        auto g = a.try_acquire_rw("k", "A", 30s, m);  // asked again
        REQUIRE(g);
        CHECK(g->token > w->token);
        REQUIRE(a.release_rw("k", "A", g->token, m));
      }
    }
  }
  SECTION("an intent: its txn lost, then the txn of a grant that deletes it") {
    auto r = b.try_acquire_rw("k", "R", 30s, sh);
    REQUIRE(r);
    a.inject("/kv/txn", etcd_fault::lost_reply, 2);  // the first reads, the second records
    CHECK(a.try_acquire_rw("k", "W", 30s, ex).error() == errc::timeout);
    a.clear();
    CHECK(a.leases().size() == 0);
    CHECK(a.keys() == 1);                          // the reader's key alone: no intent
    auto n = b.try_acquire_rw("k", "N", 30s, sh);  // so a new reader comes in
    REQUIRE(n);
    REQUIRE(b.release_rw("k", "N", n->token, sh));
    CHECK(a.try_acquire_rw("k", "W", 30s, ex).error() == errc::busy);  // records the intent
    CHECK(a.keys() == 2);
    CHECK(a.leases().size() == 1);  // the intent's
    CHECK(b.try_acquire_rw("k", "N", 30s, sh).error() == errc::busy);
    CHECK(a.try_acquire_rw("k", "W", 30s, ex).error() == errc::busy);  // re-bound: one lease
    CHECK(a.leases().size() == 1);
    REQUIRE(b.release_rw("k", "R", r->token, sh));
    a.inject("/kv/txn", etcd_fault::lost_reply, 2);  // the grant that deletes the intent
    CHECK(a.try_acquire_rw("k", "W", 30s, ex).error() == errc::timeout);
    a.clear();
    CHECK(a.leases().size() == 0);
    CHECK(a.keys() == 0);
    auto w = a.try_acquire_rw("k", "W", 30s, ex);
    REQUIRE(w);
    REQUIRE(a.release_rw("k", "W", w->token, ex));
  }
  SECTION("a re-ask's keepalive, a renewal, a release") {
    auto g = a.try_acquire_rw("k", "A", 30s, sh);
    REQUIRE(g);
    a.inject("/lease/keepalive", etcd_fault::lost_reply);
    CHECK(a.try_acquire_rw("k", "A", 30s, sh).error() == errc::timeout);
    a.clear();
    CHECK(a.leases().size() == 1);  // the grant's own, kept: it was live before the call
    CHECK(a.keys() == 1);
    a.inject("/lease/keepalive", etcd_fault::lost_reply);
    CHECK(a.renew_rw("k", "A", g->token, 30s, sh).error() == errc::timeout);
    a.clear();
    auto again = a.try_acquire_rw("k", "A", 30s, sh);
    REQUIRE(again);
    CHECK(again->token == g->token);
    a.inject("/lease/revoke", etcd_fault::lost_reply);
    CHECK(a.release_rw("k", "A", g->token, sh).error() == errc::timeout);
    a.clear();
    CHECK(a.release_rw("k", "A", g->token, sh).error() == errc::not_holder);  // it applied
    CHECK(a.leases().size() == 0);
    CHECK(a.keys() == 0);
  }
  SECTION("a busy ask whose give-back is lost: revoked by the next attempt") {
    auto w = b.try_acquire_rw("k", "B", 30s, ex);
    REQUIRE(w);
    a.inject("/lease/revoke", etcd_fault::unsent);
    CHECK(a.try_acquire_rw("k", "A", 30s, sh).error() == errc::busy);
    a.clear();
    CHECK(a.leases().size() == 1);  // left for now
    CHECK(a.try_acquire_rw("k", "A", 30s, sh).error() == errc::busy);
    CHECK(a.leases().size() == 0);  // the next attempt revoked it first
    REQUIRE(b.release_rw("k", "B", w->token, ex));
  }
}

TEST_CASE("etcd_store read-write: sessions racing on one key never hold a writer with anyone",
          "[etcd][read_write][threads]") {
  std::optional<etcd_options> o = shared();
  if (!o) return;
  // Each thread its own store (connection); a holder marks itself between its grant and its
  // release, so any overlap etcd let through shows as a writer beside another holder.
  const hf_test::rw_race_tally n = hf_test::run_rw_race([&] { return etcd_store(*o); }, 20);
  CHECK(n.overlaps == 0);
  CHECK(n.errors == 0);
  CHECK(n.stale_writers == 0);
  CHECK(n.grants > 20);
  CHECK(n.exclusive > 0);
  faulty look(*o);
  CHECK(look.keys() <= 1);  // at most an intent a refused writer left, ending with its lease
}

// Expected: etcd ends a reader's, a writer's and an intent's key with its lease, by its own
// clock: never before the applied TTL (2 s, etcd's minimum) from the request, and about 0.6 s
// after at most (its expiry loop; 2 s of slack here for a loaded machine).
TEST_CASE("etcd_store read-write: a reader, a writer and an intent expire by etcd's clock",
          "[etcd][read_write][expiry]") {
  std::optional<etcd_options> o = shared();
  if (!o) return;
  etcd_store s(*o);
  etcd_store other(*o);
  const auto start = std::chrono::steady_clock::now();
  auto r = s.try_acquire_rw("er", "r", 1000ms, sh);  // applied: 2 s
  REQUIRE(r);
  auto w = s.try_acquire_rw("ew", "w", 1000ms, ex);
  REQUIRE(w);
  auto ir = s.try_acquire_rw("ei", "r", 30s, sh);  // a long reader, and an intent of 2 s
  REQUIRE(ir);
  CHECK(s.try_acquire_rw("ei", "w", 1000ms, ex).error() == errc::busy);
  CHECK(other.try_acquire_rw("ei", "n", 30s, sh).error() == errc::busy);
  const auto writer = poll([&] { return other.try_acquire_rw("er", "W", 30s, ex); }, 5s);
  const auto writer_at = std::chrono::steady_clock::now() - start;
  REQUIRE(writer);
  CHECK(writer->token > ir->token);
  CHECK(writer_at >= 2s);
  CHECK(writer_at < 4s);
  const auto reader = poll([&] { return other.try_acquire_rw("ew", "R", 30s, sh); }, 3s);
  REQUIRE(reader);
  CHECK(std::chrono::steady_clock::now() - start >= 2s);
  const auto newcomer = poll([&] { return other.try_acquire_rw("ei", "n", 30s, sh); }, 3s);
  REQUIRE(newcomer);  // the intent ended with its lease: readers come in again
  CHECK(s.renew_rw("er", "r", r->token, 1000ms, sh).error() == errc::lease_lost);
  CHECK(s.renew_rw("ew", "w", w->token, 1000ms, ex).error() == errc::lease_lost);
  CHECK(s.release_rw("er", "r", r->token, sh).error() == errc::not_holder);
  REQUIRE(other.release_rw("er", "W", writer->token, ex));
  REQUIRE(other.release_rw("ew", "R", reader->token, sh));
  REQUIRE(other.release_rw("ei", "n", newcomer->token, sh));
  REQUIRE(s.release_rw("ei", "r", ir->token, sh));
}

TEST_CASE("etcd_store read-write: apart from plain leases, one revision for both",
          "[etcd][read_write]") {
  std::optional<etcd_options> o = shared();
  if (!o) return;
  faulty s(*o);
  auto plain = s.try_acquire("n", "X", 10s);
  REQUIRE(plain);
  auto w = s.try_acquire_rw("n", "Y", 10s, ex);  // another lock of the same name
  REQUIRE(w);
  CHECK(w->token > plain->token);
  auto plain2 = s.try_acquire("m", "X", 10s);
  REQUIRE(plain2);
  CHECK(plain2->token > w->token);
  CHECK(s.release("n", "X", plain->token));
  CHECK(s.release_rw("n", "Y", plain2->token, ex).error() == errc::not_holder);
  CHECK(s.release_rw("n", "Y", w->token, sh).error() == errc::not_holder);  // the other mode
  CHECK(s.renew_rw("n", "Z", w->token, 10s, ex).error() == errc::lease_lost);
  // Another store (nothing remembered) checks owner and token on the key itself.
  etcd_store t(*o);
  CHECK(t.renew_rw("n", "Z", w->token, 10s, ex).error() == errc::lease_lost);
  CHECK(t.release_rw("n", "Y", fencing_token(w->token.value() + 1), ex).error() ==
        errc::not_holder);
  auto tw = t.renew_rw("n", "Y", w->token, 10s, ex);
  REQUIRE(tw);
  CHECK(tw->token == w->token);
  CHECK(t.release_rw("n", "Y", w->token, ex));
  CHECK(s.try_acquire_rw("n", "Y", 10s, static_cast<lease_mode>(9)).error() ==
        errc::invalid_argument);
  // Through the recipe: two readers, then the writer once their handles are gone.
  holdfast::read_write_lease<etcd_store> doc(s, "doc/7");
  {
    auto r1 = doc.try_acquire_read(10s);
    auto r2 = doc.try_acquire_read(10s);
    REQUIRE(r1);
    REQUIRE(r2);
    CHECK(doc.try_acquire_write(10s).error() == errc::busy);
  }
  auto lw = doc.try_acquire_write(10s);
  REQUIRE(lw);
  CHECK(lw->token() > plain2->token);
  REQUIRE(lw->release());
  REQUIRE(s.release("m", "X", plain2->token));
  CHECK(s.keys() == 0);
  CHECK(s.leases().size() == 0);
}

TEST_CASE("etcd_store read-write: a key holdfast did not write is protocol_error",
          "[etcd][read_write][errors]") {
  std::optional<etcd_options> o = shared();
  if (!o) return;
  faulty s(*o);
  s.put_raw("f", "w", "someone");  // no lease
  CHECK(s.try_acquire_rw("f", "A", 10s, sh).error() == errc::protocol_error);
  // A name holdfast does not use: the first transaction looks at holdfast's names only (a free
  // key: granted); an ask that reads the range (a reader holds) refuses what it finds.
  s.put_raw("g", "zz", "someone");
  auto r = s.try_acquire_rw("g", "R", 10s, sh);
  REQUIRE(r);
  CHECK(s.try_acquire_rw("g", "A", 10s, ex).error() == errc::protocol_error);
  CHECK(s.leases().size() == 1);  // the reader's: the asks' leases went back
  REQUIRE(s.release_rw("g", "R", r->token, sh));
  CHECK(s.leases().size() == 0);
}

// As test_etcd_lost_reply's "etcd lives": the store's second endpoint is a member of another
// cluster whose revision is far behind (what a restore looks like to it). Expected: the
// read-write grant there carries a token above every token the first cluster gave this store.
TEST_CASE("etcd_store read-write: a cluster whose revision went back is raised first",
          "[etcd][read_write][lives]") {
  std::optional<etcd_options> o = shared();
  if (!o) return;
  const std::optional<hf_test::etcd_second_life> lives = hf_test::second_life(*o);
  if (!lives) return;
  faulty a(lives->two);
  // First: ahead by at least 2500 revisions, so that the raise on the second (one write per
  // revision) outlasts the 2 s lease the ask there takes first: the grant needs a fresh lease.
  REQUIRE(a.raise_token_floor(fencing_token(lives->low.value() + 2500)));
  auto g1 = a.try_acquire_rw("k", "A", 30s, ex);
  REQUIRE(g1);
  REQUIRE(a.release_rw("k", "A", g1->token, ex));
  a.inject("/kv/range", etcd_fault::lost_reply);
  CHECK_FALSE(a.inspect("k"));  // lost: the next request goes to the second cluster
  a.clear();
  const auto raise_start = std::chrono::steady_clock::now();
  auto g2 = a.try_acquire_rw("k", "A", 1000ms, sh);
  WARN("the ask raised the second cluster in "
       << std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - raise_start)
              .count()
       << " ms");
  INFO(a.last_error_message());
  REQUIRE(g2);
  CHECK(g2->token > g1->token);  // raised before drawing
  etcd_store behind(lives->on_second);
  auto rev = behind.revision();
  REQUIRE(rev);
  CHECK(rev->value() >= g2->token.value());  // the second cluster granted it
  REQUIRE(a.release_rw("k", "A", g2->token, sh));
}

}  // namespace test_etcd_rw
