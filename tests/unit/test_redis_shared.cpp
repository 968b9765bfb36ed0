// SPDX-License-Identifier: MIT
// redis_store's read-write grants (stores/detail/redis_shared.hpp) against the shared Redis
// .ci/servers starts (HOLDFAST_REDIS_PORT): the kit's read-write contract (conformance_shared.hpp),
// replies lost for real between Redis and the store (tests/support/cut_proxy.hpp: applied, error
// returned) leaving nothing behind, writers first under a stream of readers, expiry by the
// server's clock, the plain and read-write name spaces apart, and a record holdfast did not write.
// Cost: about 1.5 s (four cut replies, each with a 200 ms reconnect; one 300 ms TTL).
#include <hiredis/hiredis.h>
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "../support/cut_proxy.hpp"
#include "../support/real_servers.hpp"
#include "../support/rw_checks.hpp"
#include "holdfast/backoff.hpp"
#include "holdfast/cancel.hpp"
#include "holdfast/read_write_lease.hpp"
#include "holdfast/stores/redis.hpp"
#include "holdfast/testing/conformance_shared.hpp"

namespace test_redis_shared {

using holdfast::errc;
using holdfast::fencing_token;
using holdfast::lease_mode;
using holdfast::redis_options;
using holdfast::redis_store;
using std::chrono::milliseconds;
constexpr lease_mode sh = lease_mode::shared;
constexpr lease_mode ex = lease_mode::exclusive;

namespace {

// The shared Redis with keys and a counter of this run's own; nullopt (after a loud skip) only
// outside CI.
std::optional<redis_options> shared_redis() {
  std::optional<std::string> port = hf_test::env("HOLDFAST_REDIS_PORT");
  if (!port) {
    if (hf_test::in_ci()) FAIL("HOLDFAST_REDIS_PORT is unset (.ci/servers sets it)");
    hf_test::loud_skip("no Redis: HOLDFAST_REDIS_PORT is unset");
    return std::nullopt;
  }
  redis_options o;
  o.port = std::stoi(*port);
  o.password = hf_test::env("HOLDFAST_REDIS_PASSWORD").value_or("");
  const std::string tag = hf_test::random_tag();
  o.key_prefix = "{hf-" + tag + "}:lease:";
  o.counter_key = "{hf-" + tag + "}:token";
  o.wait_prefix = "{hf-" + tag + "}:wait:";
  return o;
}

// A plain hiredis connection, to look at the record behind the store's back.
class admin {
 public:
  explicit admin(const redis_options& o) : o_(o) {
    const struct timeval tv { 5, 0 };
    ctx_ = redisConnectWithTimeout("127.0.0.1", o.port, tv);
    REQUIRE(ctx_ != nullptr);
    REQUIRE(ctx_->err == 0);
    if (!o.password.empty()) (void)cmd({"AUTH", o.password});
  }
  ~admin() { redisFree(ctx_); }
  admin(const admin&) = delete;
  admin& operator=(const admin&) = delete;

  holdfast::detail::redis_reply_ptr cmd(const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    for (const std::string& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    void* r = redisCommandArgv(ctx_, static_cast<int>(argv.size()), argv.data(), lens.data());
    REQUIRE(r != nullptr);
    return holdfast::detail::redis_reply_ptr(static_cast<redisReply*>(r));
  }
  std::string record(const std::string& key) const { return o_.counter_key + ":rw:" + key; }
  long long fields(const std::string& key) { return cmd({"HLEN", record(key)})->integer; }
  bool exists(const std::string& key) { return cmd({"EXISTS", record(key)})->integer == 1; }
  std::string field(const std::string& key, const std::string& f) {
    auto r = cmd({"HGET", record(key), f});
    return r->str != nullptr ? std::string(r->str, r->len) : std::string();
  }

 private:
  redis_options o_;
  redisContext* ctx_ = nullptr;
};

std::string token_of(const std::string& field_value) {
  return field_value.substr(0, field_value.find(' '));
}

}  // namespace

TEST_CASE("redis_store meets the kit's read-write contract", "[redis][read_write][contract]") {
  static_assert(holdfast::has_read_write_v<redis_store>);
  std::optional<redis_options> o = shared_redis();
  if (!o) return;
  redis_store s(*o);
  const auto rep = holdfast::testing::check_read_write_contract(s);
  INFO("violations:\n" << rep.summary());
  CHECK(rep.ok());
  CHECK(rep.contract_checks > 20);
  admin adm(*o);
  CHECK_FALSE(adm.exists("conformance-rw"));  // every grant released: the record went with them
}

TEST_CASE("redis_store read-write: a lost reply leaves nothing behind",
          "[redis][read_write][lost_reply]") {
  std::optional<redis_options> o = shared_redis();
  if (!o) return;
  hf_test::cut_proxy proxy(o->port);
  REQUIRE(proxy.port() > 0);
  redis_options via = *o;
  via.port = proxy.port();
  redis_store a(via);
  redis_store other(*o);
  admin adm(*o);
  REQUIRE(a.try_acquire_rw("warm", "A", milliseconds(5000), sh));  // connected before the cut
  const fencing_token before = *other.last_token();

  // A reader's grant applied, its reply lost: the re-ask gets that grant, and no second one.
  proxy.arm(60);
  auto lost = a.try_acquire_rw("k", "A", milliseconds(10000), sh);
  REQUIRE(proxy.cuts() == 1);
  REQUIRE_FALSE(lost.has_value());
  CHECK(lost.error() == errc::store_unavailable);
  auto r = a.try_acquire_rw("k", "A", milliseconds(10000), sh);
  REQUIRE(r);
  CHECK(r->token.value() == before.value() + 1);  // the grant the lost call made
  CHECK(token_of(adm.field("k", "r:A")) == std::to_string(r->token.value()));
  CHECK(adm.fields("k") == 1);                             // applied once: one reader
  CHECK(other.last_token()->value() == r->token.value());  // no token drawn twice

  // A renewal applied, its reply lost: the grant stands and renews again.
  proxy.arm(60);
  CHECK_FALSE(a.renew_rw("k", "A", r->token, milliseconds(10000), sh).has_value());
  CHECK(a.renew_rw("k", "A", r->token, milliseconds(10000), sh));

  // A release applied, its reply lost: the record is gone; asking again is not_holder.
  proxy.arm(60);
  CHECK_FALSE(a.release_rw("k", "A", r->token, sh).has_value());
  CHECK_FALSE(adm.exists("k"));
  CHECK(a.release_rw("k", "A", r->token, sh).error() == errc::not_holder);

  // A writer's grant applied, its reply lost: the re-ask gets it, its token above every token
  // granted before it (the lost reader's included), and a reader is kept out.
  proxy.arm(60);
  CHECK_FALSE(a.try_acquire_rw("k", "W", milliseconds(10000), ex).has_value());
  auto w = a.try_acquire_rw("k", "W", milliseconds(10000), ex);
  REQUIRE(w);
  CHECK(w->token > r->token);
  CHECK(w->token == *other.last_token());
  CHECK(other.try_acquire_rw("k", "B", milliseconds(10000), sh).error() == errc::busy);
  REQUIRE(a.release_rw("k", "W", w->token, ex));
  REQUIRE(a.release_rw("warm", "A", fencing_token(before.value()), sh));
  CHECK_FALSE(adm.exists("k"));
  CHECK_FALSE(adm.exists("warm"));
  CHECK(proxy.cuts() == 4);
}

TEST_CASE("redis_store read-write: a stream of readers does not starve a writer",
          "[redis][read_write]") {
  std::optional<redis_options> o = shared_redis();
  if (!o) return;
  redis_store s(*o);
  const milliseconds ttl(10000);
  auto first = s.try_acquire_rw("doc", "r0", ttl, sh);
  REQUIRE(first);
  auto second = s.try_acquire_rw("doc", "r1", ttl, sh);  // overlapping readers: no writer yet
  REQUIRE(second);
  CHECK(s.try_acquire_rw("doc", "w", ttl, ex).error() == errc::busy);  // the intent is recorded
  // Every new reader now waits; the ones holding leave, and the writer's next ask wins.
  for (int i = 2; i < 6; ++i) {
    CHECK(s.try_acquire_rw("doc", "r" + std::to_string(i), ttl, sh).error() == errc::busy);
  }
  CHECK(s.try_acquire_rw("doc", "v", ttl, ex).error() == errc::busy);  // one intent at a time
  CHECK(s.try_acquire_rw("doc", "r1", ttl, sh));                       // a holder's re-ask
  REQUIRE(s.release_rw("doc", "r0", first->token, sh));
  REQUIRE(s.release_rw("doc", "r1", second->token, sh));
  auto w = s.try_acquire_rw("doc", "w", ttl, ex);
  REQUIRE(w);
  CHECK(w->token > second->token);
  REQUIRE(s.release_rw("doc", "w", w->token, ex));
}

TEST_CASE("redis_store read-write: a reader's TTL runs by the server's clock",
          "[redis][read_write]") {
  std::optional<redis_options> o = shared_redis();
  if (!o) return;
  redis_store s(*o);
  admin adm(*o);
  const auto start = std::chrono::steady_clock::now();
  auto r = s.try_acquire_rw("t", "r", milliseconds(300), sh);
  REQUIRE(r);
  auto w = s.try_acquire_rw("t", "w", milliseconds(5000), ex);
  CHECK(w.error() == errc::busy);
  CHECK(adm.cmd({"PTTL", adm.record("t")})->integer > 300);  // the hash outlives its fields
  while (!w && std::chrono::steady_clock::now() - start < std::chrono::seconds(3)) {
    std::this_thread::sleep_for(milliseconds(20));  // a real server: a bounded wait
    w = s.try_acquire_rw("t", "w", milliseconds(5000), ex);
  }
  REQUIRE(w);
  CHECK(std::chrono::steady_clock::now() - start >= milliseconds(300));
  CHECK(s.renew_rw("t", "r", r->token, milliseconds(5000), sh).error() == errc::lease_lost);
  CHECK(s.release_rw("t", "w", w->token, ex));
}

TEST_CASE("redis_store read-write: a plain lease and a read-write lock of one name are apart",
          "[redis][read_write]") {
  std::optional<redis_options> o = shared_redis();
  if (!o) return;
  redis_store s(*o);
  admin adm(*o);
  auto plain = s.try_acquire("n", "X", milliseconds(10000));
  REQUIRE(plain);
  auto w = s.try_acquire_rw("n", "Y", milliseconds(10000), ex);
  REQUIRE(w);
  CHECK(w->token > plain->token);  // one counter for both (RW2 across name spaces)
  auto plain2 = s.try_acquire("m", "X", milliseconds(10000));
  REQUIRE(plain2);
  CHECK(plain2->token > w->token);
  CHECK(s.release("n", "X", plain->token));
  CHECK(s.release("m", "X", plain2->token));
  CHECK(s.release_rw("n", "Y", w->token, ex));
  // Garbage in the record: protocol_error, nothing granted.
  (void)adm.cmd({"HSET", adm.record("g"), "zz", "not holdfast's"});
  CHECK(s.try_acquire_rw("g", "Y", milliseconds(10000), sh).error() == errc::protocol_error);
  (void)adm.cmd({"DEL", adm.record("g")});
  // Bad input loses nothing: a bad mode is invalid_argument before anything is sent.
  CHECK(s.try_acquire_rw("n", "Y", milliseconds(10000), static_cast<lease_mode>(9)).error() ==
        errc::invalid_argument);
  CHECK_FALSE(adm.exists("n"));
}

TEST_CASE("redis_store read-write: release after the connection was dropped reconnects once",
          "[redis][read_write][faults]") {
  // As release(): the server drops the store's idle connection (CLIENT KILL, a timeout, a
  // restart). Before, release_rw failed once and a writer's grant kept every reader out until its
  // TTL. Expected: release_rw succeeds, the record is gone, a reader gets in at once.
  std::optional<redis_options> o = shared_redis();
  if (!o) return;
  o->client_name = "hf-rw-release-" + hf_test::random_tag();
  redis_store s(*o);
  admin adm(*o);
  const auto drop_mine = [&] {  // the store's connection, found by its name (a shared server)
    auto list = adm.cmd({"CLIENT", "LIST"});
    const std::string text(list->str, list->len);
    const std::size_t name = text.find("name=" + o->client_name + " ");
    REQUIRE(name != std::string::npos);
    const std::size_t begin =
        text.rfind('\n', name) == std::string::npos ? 0 : text.rfind('\n', name) + 1;
    const std::string id = text.substr(begin + 3, text.find(' ', begin) - begin - 3);
    REQUIRE(adm.cmd({"CLIENT", "KILL", "ID", id})->integer == 1);
  };
  hf_test::check_rw_release_after_drop(s, "gone", drop_mine, [&] { return !adm.exists("gone"); });
  CHECK_FALSE(adm.exists("gone"));
}

TEST_CASE("redis_options: a key_prefix or wait_prefix overlapping the read-write records",
          "[redis][read_write][options]") {
  // Before, check() let these through and every read-write call (of some keys, or of all) was
  // refused, one by one, with invalid_argument. Expected: the option is named at once, before
  // anything is sent, for plain calls too.
  redis_options base;
  REQUIRE_FALSE(base.check());
  const std::string rw = base.counter_key + ":rw:";
  struct bad_case {
    const char* option;
    std::string key_prefix;
    std::string wait_prefix;
  };
  const bad_case cases[] = {
      {"key_prefix", rw, base.wait_prefix},           // every record would be a lease key
      {"key_prefix", rw + "doc/", base.wait_prefix},  // the records of "doc/..."
      {"key_prefix", base.counter_key + ":r", base.wait_prefix},  // a prefix of the records
      {"wait_prefix", base.key_prefix, rw},
      {"wait_prefix", base.key_prefix, rw + "q"},
      {"wait_prefix", base.key_prefix, base.counter_key + ":r"},
  };
  for (const bad_case& c : cases) {
    redis_options o = base;
    o.key_prefix = c.key_prefix;
    o.wait_prefix = c.wait_prefix;
    std::string why;
    CHECK(o.check(&why) == errc::invalid_argument);
    INFO(why);
    CHECK(why.find(c.option) != std::string::npos);
    CHECK(why.find(":rw:") != std::string::npos);
    redis_store s(o);  // refused before any connection: no server needed
    CHECK(s.try_acquire_rw("doc/1", "me", milliseconds(1000), sh).error() ==
          errc::invalid_argument);
    CHECK(s.try_acquire("x", "me", milliseconds(1000)).error() == errc::invalid_argument);
    CHECK(s.last_error_message().find(c.option) != std::string::npos);
  }
  // Neighbours that do not overlap stay valid.
  redis_options ok = base;
  ok.key_prefix = base.counter_key + ":rx:";
  CHECK_FALSE(ok.check());
}

TEST_CASE("redis_store read-write: a release wakes the waiters at once",
          "[redis][read_write][wait]") {
  // Before, a read-write release woke nobody and acquire_read/acquire_write backed off (here at
  // least 2 s a round): a writer waiting for a reader slept past its release. Expected now: the
  // release's announcement wakes a waiting writer, and a writer's release wakes both waiting
  // readers, each well under the backoff.
  static_assert(holdfast::can_wait_for_release_rw_v<redis_store>);
  static_assert(
      holdfast::can_wait_for_release_v<
          holdfast::read_write_view<redis_store, lease_mode::exclusive>, holdfast::steady_clock>);
  std::optional<redis_options> o = shared_redis();
  if (!o) return;
  redis_store holder(*o);
  redis_store waiter(*o);
  admin adm(*o);
  hf_test::check_rw_release_wakes(
      holder, waiter, "doc", "doc2", [&] { return !adm.field("doc", "i").empty(); },
      milliseconds(150));
}

TEST_CASE("redis_store read-write: a waiter never sleeps past what keeps it out",
          "[redis][read_write][wait]") {
  std::optional<redis_options> o = shared_redis();
  if (!o) return;
  redis_store s(*o);
  hf_test::check_rw_wait_ends(s, "free", "k", "k2", true);
}

TEST_CASE("redis_store read-write: read_write_lease over Redis", "[redis][read_write]") {
  std::optional<redis_options> o = shared_redis();
  if (!o) return;
  redis_store s(*o);
  holdfast::read_write_lease<redis_store> doc(s, "doc/7");
  {
    auto r1 = doc.try_acquire_read(milliseconds(10000));
    auto r2 = doc.try_acquire_read(milliseconds(10000));
    REQUIRE(r1);
    REQUIRE(r2);
    CHECK(doc.try_acquire_write(milliseconds(10000)).error() == errc::busy);
  }  // both released by their destructors
  auto w = doc.try_acquire_write(milliseconds(10000));
  REQUIRE(w);
  CHECK(w->token() > fencing_token(1));
}

}  // namespace test_redis_shared
