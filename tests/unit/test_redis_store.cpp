// SPDX-License-Identifier: MIT
// Tests of stores/redis.hpp against real redis-server processes: the LeaseStore contract (the same
// checks memory_store passes), hostile keys, garbage in the store, token exhaustion, NOSCRIPT,
// dropped connections, AUTH, the fence script, and faults on servers the tests own (kill -9,
// restart with and without persistence, a frozen server).
#include <hiredis/hiredis.h>
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "../support/fail_fast.hpp"
#include "../support/real_servers.hpp"
#include "../support/store_faults.hpp"
#include "holdfast/clock.hpp"
#include "holdfast/fence.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/multi_lease.hpp"
#include "holdfast/quorum.hpp"
#include "holdfast/stores/memory.hpp"
#include "holdfast/stores/redis.hpp"
#include "holdfast/testing/conformance.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_redis_store {

using holdfast::errc;
using holdfast::fencing_token;
using holdfast::redis_options;
using holdfast::redis_store;
using std::chrono::milliseconds;
using namespace std::string_literals;

namespace {

/// A plain hiredis connection for the test's own look behind the store's back.
class admin {
 public:
  explicit admin(const redis_options& o) {
    const struct timeval tv { 5, 0 };
    ctx_ = redisConnectWithTimeout(o.host.c_str(), o.port, tv);
    REQUIRE(ctx_ != nullptr);
    REQUIRE(ctx_->err == 0);
    if (!o.password.empty()) cmd({"AUTH", o.password});
  }
  ~admin() { redisFree(ctx_); }
  admin(const admin&) = delete;
  admin& operator=(const admin&) = delete;

  holdfast::detail::redis_reply_ptr cmd(std::initializer_list<std::string> args) {
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
  std::string str(std::initializer_list<std::string> args) {
    auto r = cmd(args);
    return r->str ? std::string(r->str, r->len) : std::string();
  }

 private:
  redisContext* ctx_ = nullptr;
};

/// The Redis server for tests that do not hurt it: the shared one from .ci/servers
/// (HOLDFAST_REDIS_PORT), else one of our own. nullopt (after a loud skip) only outside CI.
std::optional<redis_options> shared_redis() {
  redis_options o;
  if (std::optional<std::string> port = hf_test::env("HOLDFAST_REDIS_PORT")) {
    o.port = std::stoi(*port);
    o.host = hf_test::env("HOLDFAST_REDIS_HOST").value_or("127.0.0.1");
    o.password = hf_test::env("HOLDFAST_REDIS_PASSWORD").value_or("");
    return o;
  }
  static std::unique_ptr<hf_test::redis_server> own;
  if (!own) {
    own = std::make_unique<hf_test::redis_server>();
    if (!own->start()) {
      const std::string why = "no Redis server: HOLDFAST_REDIS_PORT unset and " + own->why();
      own.reset();
      if (hf_test::in_ci()) FAIL(why);
      hf_test::loud_skip(why);
      return std::nullopt;
    }
  }
  o.port = own->port();
  return o;
}

/// Options with keys of their own, so tests and runs never see each other's leases or counter.
redis_options isolated(redis_options o) {
  const std::string tag = hf_test::random_tag();
  o.key_prefix = "{hf-" + tag + "}:lease:";
  o.counter_key = "{hf-" + tag + "}:token";
  return o;
}

/// A server the test owns (to kill, freeze or restart). Fails in CI, skips loudly elsewhere.
std::unique_ptr<hf_test::redis_server> own_redis(hf_test::redis_server::config cfg = {}) {
  auto s = std::make_unique<hf_test::redis_server>(cfg);
  if (!s->start()) {
    const std::string why = "cannot start redis-server: " + s->why();
    if (hf_test::in_ci() || s->available()) FAIL(why);
    hf_test::loud_skip(why);
    return nullptr;
  }
  return s;
}

redis_options options_for(const hf_test::redis_server& s) {
  redis_options o;
  o.port = s.port();
  o.password = s.cfg().password;
  o.connect_timeout = milliseconds(1000);
  o.command_timeout = milliseconds(1000);
  return isolated(o);
}

/// The conformance kit's options for a Redis store with options `o`: expiry forced by the server's
/// own clock (PEXPIREAT in the past: Redis deletes the key at once), store-wide tokens (one
/// counter); a released expired lease may be not_holder (Redis deleted the record).
holdfast::testing::conformance_options redis_kit(const redis_options& o) {
  auto adm = std::make_shared<admin>(o);
  holdfast::testing::conformance_options co;
  co.key_prefix = "k-";
  co.store_wide_tokens = true;
  const std::string prefix = o.key_prefix;
  co.expire_now = [adm, prefix](std::string_view key) {
    adm->cmd({"PEXPIREAT", prefix + std::string(key), "1"});
  };
  return co;
}

#define REQUIRE_CONFORMS(report)           \
  do {                                     \
    const auto r_ = (report);              \
    INFO("violations:\n" << r_.summary()); \
    CHECK(r_.ok());                        \
  } while (0)

}  // namespace

// ------------------------------------------------------------------------------------------------
// The contract on Redis (the kit on the reference store and on broken ones, its negative
// controls: test_testing_conformance.cpp).
// ------------------------------------------------------------------------------------------------

TEST_CASE("redis_store meets the LeaseStore contract", "[redis][contract]") {
  static_assert(holdfast::assert_lease_store<redis_store>());
  static_assert(holdfast::has_inspect_v<redis_store>);
  std::optional<redis_options> base = shared_redis();
  if (!base) return;
  const redis_options o = isolated(*base);
  redis_store s(o);
  REQUIRE_CONFORMS(holdfast::testing::check_contract(s, redis_kit(o)));
  CHECK(s.last_error_message().empty());
}

TEST_CASE("redis_store passes the conformance kit (contract and simulated schedules)",
          "[redis][contract]") {
  std::optional<redis_options> base = shared_redis();
  if (!base) return;
  // Redis keeps its own time: the contract's expiry checks run through PEXPIREAT on the
  // contract checks' store (its options are the first the factory makes); the schedules cannot
  // move the server's clock, and the report says so. The hostile strings have a test of their
  // own below.
  const redis_options first = isolated(*base);
  holdfast::testing::conformance_options co = redis_kit(first);
  co.schedules = 100;  // each some dozens of real round trips
  co.hostile_strings = false;
  int made = 0;
  const holdfast::testing::conformance_report report = holdfast::testing::check_store(
      [&] { return std::make_unique<redis_store>(made++ == 0 ? first : isolated(*base)); }, co);
  INFO(report.summary());
  CHECK(report.ok());
  CHECK(report.schedules == 100);
  CHECK(report.contract_checks > 60);
  CHECK_THAT(report.summary(), Catch::Contains("T2 expiry to the tick"));  // forced, not skipped
}

TEST_CASE("redis_store: hostile keys and owners round-trip exactly", "[redis]") {
  std::optional<redis_options> base = shared_redis();
  if (!base) return;
  const redis_options o = isolated(*base);
  redis_store s(o);
  REQUIRE_CONFORMS(holdfast::testing::check_hostile_strings(s, redis_kit(o)));
  // The counter and the rest of the server were not touched by any of them.
  admin adm(o);
  auto t = s.last_token();
  REQUIRE(t);
  CHECK(t->value() >= holdfast::testing::hostile_strings().size());
  CHECK(adm.cmd({"EXISTS", o.counter_key})->integer == 1);
}

TEST_CASE("redis_store: contending threads get exclusive grants, increasing tokens",
          "[redis][concurrency]") {
  std::optional<redis_options> base = shared_redis();
  if (!base) return;
  const redis_options o = isolated(*base);
  holdfast::testing::conformance_options co;
  co.threads = 4;
  co.grants_per_thread = 25;
  SECTION("one store per thread") {
    REQUIRE_CONFORMS(holdfast::testing::check_exclusive_grants(
        [&] { return std::make_unique<redis_store>(o); }, co));
  }
  SECTION("one store shared by every thread") {
    auto shared = std::make_shared<redis_store>(o);
    co.key_prefix = "2-";
    REQUIRE_CONFORMS(holdfast::testing::check_exclusive_grants([&] { return shared; }, co));
  }
}

TEST_CASE("redis_store under holdfast::lease: acquire, renew, RAII release", "[redis][lease]") {
  std::optional<redis_options> base = shared_redis();
  if (!base) return;
  const redis_options o = isolated(*base);
  redis_store s(o);
  fencing_token first;
  {
    auto l = holdfast::try_acquire(s, "job", std::chrono::seconds(30));
    REQUIRE(l);
    CHECK(l->valid());
    first = l->token();
    CHECK(l->renew());
    CHECK(holdfast::try_acquire(s, "job", std::chrono::seconds(30)).error() == errc::busy);
  }  // released here
  auto again = holdfast::try_acquire(s, "job", std::chrono::seconds(30));
  REQUIRE(again);
  CHECK(first < again->token());
}

// ------------------------------------------------------------------------------------------------
// Garbage, exhaustion, scripts, options, connections.
// ------------------------------------------------------------------------------------------------

TEST_CASE("redis_store: store garbage is protocol_error with the reason kept, never a grant",
          "[redis]") {
  std::optional<redis_options> base = shared_redis();
  if (!base) return;
  const redis_options o = isolated(*base);
  redis_store s(o);
  admin adm(o);
  SECTION("a lease record holdfast did not write") {
    adm.cmd({"SET", o.key_prefix + "g", "no-colon-here"});
    CHECK(s.try_acquire("g", "me", milliseconds(1000)).error() == errc::protocol_error);
    CHECK(s.last_error_message().find("HOLDFAST_CORRUPT") != std::string::npos);
    CHECK(s.inspect("g").error() == errc::protocol_error);
    CHECK(adm.str({"GET", o.key_prefix + "g"}) == "no-colon-here");  // left alone
  }
  SECTION("a lease key of the wrong type") {
    adm.cmd({"HSET", o.key_prefix + "h", "f", "v"});
    CHECK(s.try_acquire("h", "me", milliseconds(1000)).error() == errc::protocol_error);
    CHECK(s.last_error_message().find("WRONGTYPE") != std::string::npos);
    CHECK(s.renew("h", "me", fencing_token(1), milliseconds(1000)).error() == errc::protocol_error);
    CHECK(s.release("h", "me", fencing_token(1)).error() == errc::protocol_error);
  }
  SECTION("a counter that is not a number") {
    adm.cmd({"SET", o.counter_key, "abc"});
    CHECK(s.try_acquire("c", "me", milliseconds(1000)).error() == errc::protocol_error);
    CHECK(s.last_error_message().find("not an integer") != std::string::npos);
    CHECK(s.last_token().error() == errc::protocol_error);
    CHECK(adm.cmd({"EXISTS", o.key_prefix + "c"})->integer == 0);  // nothing granted
  }
  SECTION("a negative counter") {
    adm.cmd({"SET", o.counter_key, "-5"});
    CHECK(s.try_acquire("c", "me", milliseconds(1000)).error() == errc::protocol_error);
    CHECK(adm.cmd({"EXISTS", o.key_prefix + "c"})->integer == 0);
  }
}

TEST_CASE("redis_store: the counter at 2^63-1 reports token_exhausted", "[redis]") {
  std::optional<redis_options> base = shared_redis();
  if (!base) return;
  const redis_options o = isolated(*base);
  redis_store s(o);
  admin adm(o);
  adm.cmd({"SET", o.counter_key, "9223372036854775806"});
  auto last = s.try_acquire("a", "me", milliseconds(10000));
  REQUIRE(last);
  CHECK(last->token == holdfast::redis_max_token);  // exact: no rounding through Lua doubles
  CHECK(s.try_acquire("b", "me", milliseconds(10000)).error() == errc::token_exhausted);
  CHECK(s.last_error_message().find("HOLDFAST_EXHAUSTED") != std::string::npos);
  CHECK(adm.cmd({"EXISTS", o.key_prefix + "b"})->integer == 0);
  // The holder of the last token can still renew and release.
  CHECK(s.renew("a", "me", last->token, milliseconds(10000)));
  CHECK(s.release("a", "me", last->token));
  CHECK(s.raise_token_floor(fencing_token(5)));  // never lowers
  CHECK(s.last_token().value() == holdfast::redis_max_token);
  CHECK(s.raise_token_floor(fencing_token::max()).error() == errc::invalid_argument);
}

TEST_CASE("redis_store: tokens above 2^53 stay exact", "[redis]") {
  std::optional<redis_options> base = shared_redis();
  if (!base) return;
  const redis_options o = isolated(*base);
  redis_store s(o);
  // The script formats tokens below 2^53 from the Lua number and reads larger ones back as text:
  // both sides of the switch.
  REQUIRE(s.raise_token_floor(fencing_token(9007199254740990ULL)));
  auto below = s.try_acquire("below", "me", milliseconds(10000));
  REQUIRE(below);
  CHECK(below->token.value() == 9007199254740991ULL);  // 2^53 - 1
  auto at = s.try_acquire("at", "me", milliseconds(10000));
  REQUIRE(at);
  CHECK(at->token.value() == 9007199254740992ULL);                   // 2^53
  REQUIRE(s.raise_token_floor(fencing_token(9007199254740993ULL)));  // 2^53 + 1
  auto g = s.try_acquire("big", "me", milliseconds(10000));
  REQUIRE(g);
  CHECK(g->token.value() == 9007199254740994ULL);
  auto r = s.inspect("big");
  REQUIRE(r);
  REQUIRE(r->has_value());
  CHECK((*r)->token == g->token);
  CHECK(s.renew("big", "me", g->token, milliseconds(10000)));
  CHECK(s.release("big", "me", fencing_token(9007199254740995ULL)).error() == errc::not_holder);
  CHECK(s.release("big", "me", g->token));
}

TEST_CASE("redis_store: scripts are reloaded after SCRIPT FLUSH (NOSCRIPT)", "[redis]") {
  std::optional<redis_options> base = shared_redis();
  if (!base) return;
  const redis_options o = isolated(*base);
  redis_store s(o);
  admin adm(o);
  auto g = s.try_acquire("n", "me", milliseconds(10000));
  REQUIRE(g);
  adm.cmd({"SCRIPT", "FLUSH"});
  auto r = s.renew("n", "me", g->token, milliseconds(10000));
  CHECK(r);
  CHECK(s.release("n", "me", g->token));
  CHECK(s.last_error_message().empty());
}

TEST_CASE("redis_store: bad options and unreachable servers are errors, not grants", "[redis]") {
  redis_options bad;
  bad.port = 0;
  CHECK(redis_store(bad).try_acquire("k", "o", milliseconds(100)).error() ==
        errc::invalid_argument);
  redis_options clash;
  clash.counter_key = clash.key_prefix + "token";
  CHECK(redis_store(clash).connect().error() == errc::invalid_argument);
  redis_options empty_prefix;
  empty_prefix.key_prefix = "";
  CHECK(redis_store(empty_prefix).connect().error() == errc::invalid_argument);

  redis_options closed;
  closed.port = hf_test::free_port();  // nothing listens there
  redis_store s(closed);
  auto r = s.try_acquire("k", "o", milliseconds(100));
  CHECK(r.error() == errc::store_unavailable);
  CHECK(s.last_error_message().find("refused") != std::string::npos);
  // The text names the server it could not reach (a fleet's logs must say which).
  CHECK(s.last_error_message().find("127.0.0.1:" + std::to_string(closed.port)) !=
        std::string::npos);
  CHECK(holdfast::is_transient(r.error()));
}

TEST_CASE("redis_store: a connection killed mid-request reports an error and reconnects",
          "[redis]") {
  // An owned server: CLIENT PAUSE would hold up every other client of a shared one.
  auto srv = own_redis();
  if (!srv) return;
  redis_options o = options_for(*srv);
  o.client_name = "hf-victim-" + hf_test::random_tag();
  o.command_timeout = milliseconds(5000);
  redis_store s(o);
  REQUIRE(s.connect());
  admin adm(o);
  // Writes (scripts) are held back by CLIENT PAUSE WRITE, so the store's acquire is in flight
  // when its connection is killed: the script never runs.
  adm.cmd({"CLIENT", "PAUSE", "10000", "WRITE"});
  std::atomic<bool> done{false};
  holdfast::result<holdfast::grant> in_flight = errc::timeout;
  std::thread t([&] {
    in_flight = s.try_acquire("drop", "me", milliseconds(10000));
    done = true;
  });
  std::string victim_id;
  const bool blocked = hf_test::wait_until(
      [&] {
        const std::string list = adm.str({"CLIENT", "LIST"});
        const std::size_t name = list.find("name=" + o.client_name + " ");
        if (name == std::string::npos) return false;
        const std::size_t begin =
            list.rfind('\n', name) == std::string::npos ? 0 : list.rfind('\n', name) + 1;
        const std::string line = list.substr(begin, list.find('\n', name) - begin);
        if (line.find("cmd=evalsha") == std::string::npos ||
            line.find("flags=b") == std::string::npos) {
          return false;
        }
        victim_id = line.substr(3, line.find(' ') - 3);  // "id=<n> ..."
        return true;
      },
      milliseconds(5000));
  if (blocked) adm.cmd({"CLIENT", "KILL", "ID", victim_id});
  adm.cmd({"CLIENT", "UNPAUSE"});
  t.join();
  REQUIRE(blocked);
  CHECK(in_flight.error() == errc::store_unavailable);
  CHECK_FALSE(s.last_error_message().empty());
  CHECK(adm.cmd({"EXISTS", o.key_prefix + "drop"})->integer == 0);  // no grant was made
  // The next call reconnects.
  auto g = s.try_acquire("drop", "me", milliseconds(10000));
  REQUIRE(g);
  CHECK(s.release("drop", "me", g->token));
}

TEST_CASE("redis_store: raise_token re-labels only the holder's live lease", "[redis][quorum]") {
  static_assert(holdfast::has_raise_token_v<redis_store>);
  static_assert(holdfast::has_raise_token_floor_v<redis_store>);
  std::optional<redis_options> base = shared_redis();
  if (!base) return;
  const redis_options o = isolated(*base);
  redis_store s(o);
  admin adm(o);
  auto g = s.try_acquire("k", "me", milliseconds(60000));
  REQUIRE(g);
  const fencing_token to(g->token.value() + 100);
  CHECK(s.raise_token("k", "other", g->token, to).error() == errc::lease_lost);
  CHECK(s.raise_token("k", "me", fencing_token(g->token.value() + 1), to).error() ==
        errc::lease_lost);
  CHECK(s.raise_token("k", "me", to, g->token).error() == errc::invalid_argument);  // to < token
  CHECK(s.raise_token("k", "me", g->token, fencing_token::max()).error() == errc::invalid_argument);
  REQUIRE(s.raise_token("k", "me", g->token, to));
  CHECK(s.raise_token("k", "me", g->token, to));  // already raised: idempotent
  auto rec = s.inspect("k");
  REQUIRE(rec);
  REQUIRE(rec->has_value());
  CHECK((*rec)->token == to);
  CHECK((*rec)->remaining > milliseconds(0));  // the TTL was kept
  CHECK(s.last_token().value() == to);
  CHECK(s.renew("k", "me", g->token, milliseconds(60000)).error() == errc::lease_lost);
  CHECK(s.renew("k", "me", to, milliseconds(60000)));
  auto next = s.try_acquire("other-key", "me", milliseconds(60000));
  REQUIRE(next);
  CHECK(to < next->token);
  adm.cmd({"PEXPIREAT", o.key_prefix + "k", "1"});
  CHECK(s.raise_token("k", "me", to, fencing_token(to.value() + 5)).error() == errc::lease_lost);
}

TEST_CASE("quorum_store over three Redis servers: monotonic tokens, a member killed -9",
          "[redis][quorum][faults][concurrency]") {
  std::vector<std::unique_ptr<hf_test::redis_server>> servers;
  for (int i = 0; i < 3; ++i) {
    servers.push_back(own_redis());
    if (!servers.back()) return;
  }
  std::vector<std::unique_ptr<redis_store>> members;
  for (auto& srv : servers) members.push_back(std::make_unique<redis_store>(options_for(*srv)));
  // The members' counters disagree, as independent servers' do.
  REQUIRE(members[1]->raise_token_floor(fencing_token(1000)));
  holdfast::quorum_options qo;
  qo.member_timeout = milliseconds(500);
  holdfast::quorum_store<redis_store> q({members[0].get(), members[1].get(), members[2].get()}, qo);
  static_assert(holdfast::is_lease_store_v<holdfast::quorum_store<redis_store>>);
  fencing_token last;
  auto cycle = [&](const std::string& owner) {
    auto g = q.try_acquire("job", owner, milliseconds(10000));
    INFO(owner << ": " << g.error().message());
    REQUIRE(g);
    CHECK(last < g->token);
    last = g->token;
    // busy, also with one member down: no more than N - W members failed.
    CHECK(q.try_acquire("job", "intruder", milliseconds(10000)).error() == errc::busy);
    CHECK(q.release("job", owner, g->token));
  };
  cycle("a");
  CHECK(last.value() > 1000);  // the quorum's token is the members' max, and they were raised
  cycle("b");
  servers[2]->kill9();  // a majority (2 of 3) remains
  cycle("c");
  cycle("d");
  servers[1]->kill9();  // no majority: an error, never a grant
  auto none = q.try_acquire("job", "e", milliseconds(10000));
  CHECK_FALSE(none);
  CHECK(none.error() != errc::busy);
}

// ------------------------------------------------------------------------------------------------
// redis_fence
// ------------------------------------------------------------------------------------------------

TEST_CASE("redis_fence admits and writes in one script, refuses older tokens", "[redis][fence]") {
  std::optional<redis_options> base = shared_redis();
  if (!base) return;
  const redis_options o = isolated(*base);
  const std::string fk = o.key_prefix + "fence";
  const std::string dk = o.key_prefix + "data";
  holdfast::redis_fence f(o);
  admin adm(o);
  CHECK(f.newest(fk).value() == fencing_token{});
  CHECK(f.write(fk, fencing_token(10), "a", dk, "from 10"));
  CHECK(adm.str({"GET", fk}) == "10:a");  // the owner beside the newest token
  CHECK(f.write(fk, fencing_token(10), "a", dk, "from 10 again"));  // equal, same owner
  CHECK(f.write(fk, fencing_token(9), "a", dk, "from 9").error() == errc::stale_token);
  CHECK(adm.str({"GET", dk}) == "from 10 again");
  CHECK(f.write(fk, fencing_token(11), "b", dk, "from 11"));
  CHECK(f.newest(fk).value() == fencing_token(11));
  // Decimal comparison, not string comparison: 100 > 99, 9 < 10.
  CHECK(f.admit(fk, fencing_token(99), "b"));
  CHECK(f.admit(fk, fencing_token(100), "b"));
  CHECK(f.admit(fk, fencing_token(99), "b").error() == errc::stale_token);
  CHECK(f.admit(fk, fencing_token(18446744073709551614ULL), "b"));
  CHECK(f.admit(fk, fencing_token(18446744073709551613ULL), "b").error() == errc::stale_token);
  CHECK(f.admit(fk, fencing_token{}, "b").error() == errc::invalid_argument);
  CHECK(f.admit(fk, fencing_token::max(), "b").error() == errc::invalid_argument);
  CHECK(f.admit("", fencing_token(5), "b").error() == errc::invalid_argument);
  CHECK(f.admit(fk, fencing_token(5), "").error() == errc::invalid_argument);

  SECTION("an equal token from another owner is token_reissued and changes nothing") {
    const std::string fk2 = o.key_prefix + "fence-reissued";
    REQUIRE(f.write(fk2, fencing_token(7), "A", dk, "A's"));
    CHECK(f.write(fk2, fencing_token(7), "B", dk, "B's").error() == errc::token_reissued);
    CHECK(adm.str({"GET", dk}) == "A's");
    CHECK(adm.str({"GET", fk2}) == "7:A");
    CHECK(f.admit(fk2, fencing_token(7), "A"));  // the first holder still writes
    // One tick either side: 6 is stale for anyone, 8 admits B and then refuses A's 7.
    CHECK(f.admit(fk2, fencing_token(6), "A").error() == errc::stale_token);
    CHECK(f.admit(fk2, fencing_token(8), "B"));
    CHECK(f.admit(fk2, fencing_token(7), "A").error() == errc::stale_token);
    CHECK(f.admit(fk2, fencing_token(8), "A").error() == errc::token_reissued);
    // Owners are compared as bytes: a prefix, a ':' inside, a NUL are other owners.
    CHECK(f.admit(fk2, fencing_token(8), "B\0"s).error() == errc::token_reissued);
    REQUIRE(f.admit(fk2, fencing_token(9), "x:y"));
    CHECK(f.admit(fk2, fencing_token(9), "x").error() == errc::token_reissued);
    CHECK(f.admit(fk2, fencing_token(9), "x:y"));
  }
  SECTION("a bare token (no owner recorded) admits no equal token, only newer ones") {
    const std::string fk3 = o.key_prefix + "fence-bare";
    adm.cmd({"SET", fk3, "40"});
    CHECK(f.admit(fk3, fencing_token(40), "a").error() == errc::token_reissued);
    CHECK(f.admit(fk3, fencing_token(39), "a").error() == errc::stale_token);
    CHECK(f.newest(fk3).value() == fencing_token(40));
    CHECK(f.admit(fk3, fencing_token(41), "a"));
    CHECK(adm.str({"GET", fk3}) == "41:a");
  }
  SECTION("a failing command leaves the fence where it was") {
    const std::string fk2 = o.key_prefix + "fence2";
    adm.cmd({"HSET", dk + "h", "f", "v"});
    CHECK(f.execute(fk2, fencing_token(3), "a", {"LPUSH", dk + "h", "x"}).error() ==
          errc::invalid_argument);
    CHECK(f.last_error_message().find("WRONGTYPE") != std::string::npos);
    CHECK(f.newest(fk2).value() == fencing_token{});
    CHECK(f.execute(fk2, fencing_token(4), "a", {"HSET", dk + "h", "f", "w"}));
    CHECK(adm.str({"HGET", dk + "h", "f"}) == "w");
    CHECK(f.newest(fk2).value() == fencing_token(4));
  }
  SECTION("a fence key holding garbage is protocol_error") {
    for (const char* garbage : {"garbage", ":a", "0:a", "12x:a"}) {
      INFO(garbage);
      adm.cmd({"SET", fk, garbage});
      CHECK(f.admit(fk, fencing_token(50), "a").error() == errc::protocol_error);
      CHECK(f.newest(fk).error() == errc::protocol_error);
      CHECK(adm.str({"GET", fk}) == garbage);
    }
  }
  SECTION("hostile values, keys and owners round-trip") {
    std::uint64_t t = 20000;
    for (const std::string& h : holdfast::testing::hostile_strings()) {
      INFO("hostile value " << holdfast::testing::printable(h));
      if (h.empty()) continue;
      CHECK(f.write(fk + "-hostile", fencing_token(++t), h, o.key_prefix + h, h));
      CHECK(f.admit(fk + "-hostile", fencing_token(t), h));  // the same owner, byte for byte
      CHECK((adm.str({"GET", o.key_prefix + h}) == h));      // not printed: up to 1 MiB
    }
  }
}

TEST_CASE("redis_fence: racing writers, the newest token wins and stays",
          "[redis][fence][concurrency]") {
  std::optional<redis_options> base = shared_redis();
  if (!base) return;
  const redis_options o = isolated(*base);
  const std::string fk = o.key_prefix + "race";
  const std::string log = o.key_prefix + "log";
  holdfast::testing::failure_log v;  // Catch2 assertions are not thread-safe: collect, check after
                                     // join
  std::vector<std::thread> pool;
  for (int t = 0; t < 4; ++t) {
    pool.emplace_back([&, t] {
      holdfast::redis_fence f(o);
      for (int i = 1; i <= 50; ++i) {
        const fencing_token tok(static_cast<std::uint64_t>(i * 4 + t));
        auto r = f.execute(fk, tok, "w" + std::to_string(t),
                           {"RPUSH", log, std::to_string(tok.value())});
        v.expect(r || r.error() == errc::stale_token, "fenced RPUSH: " + r.error().message());
      }
    });
  }
  for (auto& th : pool) th.join();
  INFO(v.text());
  CHECK(v.empty());
  // Every admitted write is in the log, in non-decreasing token order (S1).
  admin adm(o);
  auto all = adm.cmd({"LRANGE", log, "0", "-1"});
  REQUIRE(all->type == REDIS_REPLY_ARRAY);
  std::uint64_t prev = 0;
  for (std::size_t i = 0; i < all->elements; ++i) {
    const std::uint64_t v = std::stoull(std::string(all->element[i]->str, all->element[i]->len));
    CHECK(prev <= v);
    prev = v;
  }
  CHECK(prev == 203);  // the greatest token, 50 * 4 + 3, is never refused
}

// ------------------------------------------------------------------------------------------------
// Faults on servers the tests own.
// ------------------------------------------------------------------------------------------------

TEST_CASE("redis_store: refused credentials and ACLs are permission_denied, answered at once",
          "[redis][faults][errors]") {
  auto srv = own_redis({false, "s3cret pass"});
  if (!srv) return;
  redis_options o = options_for(*srv);
  SECTION("right password") {
    redis_store s(o);
    auto g = s.try_acquire("k", "me", milliseconds(1000));
    CHECK(g);
  }
  SECTION("no password: NOAUTH, naming the option") {
    o.password.clear();
    redis_store s(o);
    hf_test::check_fails_fast(s, errc::permission_denied);
    CHECK(s.last_error_message().find("NOAUTH") != std::string::npos);
    CHECK(s.last_error_message().find("redis_options::password") != std::string::npos);
  }
  SECTION("wrong password: WRONGPASS, naming the options") {
    o.password = "wrong";
    redis_store s(o);
    hf_test::check_fails_fast(s, errc::permission_denied);
    CHECK(s.last_error_message().find("WRONGPASS") != std::string::npos);
    CHECK(s.last_error_message().find("redis_options::username/password") != std::string::npos);
  }
  SECTION("an ACL user that may not run scripts: NOPERM") {
    redis_store admin_store(o);
    REQUIRE(admin_store.connect());
    redisContext* c = redisConnect("127.0.0.1", srv->port());
    REQUIRE(c != nullptr);
    auto run = [&](std::vector<std::string> argv) {
      std::vector<const char*> a;
      std::vector<std::size_t> n;
      for (const std::string& x : argv) {
        a.push_back(x.c_str());
        n.push_back(x.size());
      }
      auto* r = static_cast<redisReply*>(
          redisCommandArgv(c, static_cast<int>(a.size()), a.data(), n.data()));
      REQUIRE(r != nullptr);
      INFO(argv[0] << ": " << (r->str != nullptr ? r->str : ""));
      CHECK(r->type != REDIS_REPLY_ERROR);
      freeReplyObject(r);
    };
    run({"AUTH", "s3cret pass"});
    run({"ACL", "SETUSER", "hf_limited", "on", ">pw", "~*", "-@all", "+auth", "+ping"});
    redisFree(c);
    o.username = "hf_limited";
    o.password = "pw";
    redis_store s(o);
    hf_test::check_fails_fast(s, errc::permission_denied);
    CHECK(s.last_error_message().find("NOPERM") != std::string::npos);
  }
}

TEST_CASE("redis_store: an out-of-range database or unknown host is misconfigured, at once",
          "[redis][errors]") {
  std::optional<redis_options> base = shared_redis();
  if (!base) return;
  SECTION("SELECT 99") {
    redis_options o = isolated(*base);
    o.database = 99;
    redis_store s(o);
    hf_test::check_fails_fast(s, errc::misconfigured);
    CHECK(s.last_error_message().find("redis_options::database 99") != std::string::npos);
    CHECK(s.last_error_message().find("DB index is out of range") != std::string::npos);
  }
  SECTION("a host name that resolves nowhere") {
    redis_options o = isolated(*base);
    o.host = "no-such-host.invalid";
    redis_store s(o);
    hf_test::check_fails_fast(s, errc::misconfigured);
    CHECK(s.last_error_message().find("redis_options::host") != std::string::npos);
  }
  SECTION("a Sentinel's port given as the server's names the sentinels option") {
    const std::optional<std::string> ports = hf_test::env("HOLDFAST_REDIS_SENTINEL_PORTS");
    if (!ports) return;  // .ci/servers starts Sentinels; without them there is nothing to meet
    redis_options o = isolated(*base);
    o.port = std::stoi(ports->substr(0, ports->find(',')));
    redis_store s(o);
    hf_test::check_fails_fast(s, errc::misconfigured);
    const std::string where = "127.0.0.1:" + std::to_string(o.port);
    CHECK(s.last_error_message().find(where + " knows no SCRIPT command: a Redis Sentinel?") !=
          std::string::npos);
    CHECK(s.last_error_message().find("redis_options::sentinels") != std::string::npos);
    CHECK(s.last_error_message().find("local ") == std::string::npos);  // no script echoed
  }
  SECTION("a port out of range names it") {
    redis_options o = isolated(*base);
    o.port = 70000;
    redis_store s(o);
    hf_test::check_fails_fast(s, errc::invalid_argument);
    CHECK(s.last_error_message() == "invalid redis_options: port 70000 is out of range 1 .. 65535");
  }
  SECTION("a negative sentinel_recheck names it; 0 (ask only at connect) is accepted") {
    redis_options o = isolated(*base);
    o.sentinel_recheck = std::chrono::milliseconds(-1);
    redis_store s(o);
    hf_test::check_fails_fast(s, errc::invalid_argument);
    CHECK(s.last_error_message() == "invalid redis_options: sentinel_recheck -1 ms is < 0");
    o.sentinel_recheck = std::chrono::milliseconds(0);
    CHECK_FALSE(o.check());
  }
}

// No server: detail::redis_primary_watch, the bookkeeping behind sentinel_recheck, over a fake
// question. Expected: not due one tick before sentinel_recheck has passed, due at it and after;
// 0 or no sentinels never due; one sentinel asked per question; a silent one moves the next
// question to the next sentinel and keeps the connection; a move only when the answering
// sentinel names another address (host or port).
TEST_CASE("redis_store: sentinel_recheck asks one sentinel, rotating past a silent one",
          "[redis][sentinel]") {
  using clock = std::chrono::steady_clock;
  redis_options o;
  o.sentinel_master = "m";
  o.sentinels = {{"127.0.0.1", 1}, {"127.0.0.1", 2}, {"127.0.0.1", 3}};
  o.sentinel_recheck = milliseconds(50);
  holdfast::detail::redis_primary_watch w;
  w.connected("10.0.0.1", 6379);
  const clock::time_point at = w.asked() + milliseconds(50);  // the boundary: due from here on
  CHECK_FALSE(w.due(o, at - std::chrono::nanoseconds(1)));
  CHECK(w.due(o, at));
  CHECK(w.due(o, at + std::chrono::nanoseconds(1)));
  redis_options never = o;
  never.sentinel_recheck = milliseconds(0);
  CHECK_FALSE(w.due(never, at));
  never = o;
  never.sentinels.clear();
  CHECK_FALSE(w.due(never, at));

  std::vector<int> asked;
  std::string names_host = "10.0.0.1";
  int names_port = 6379;
  bool silent = false;
  auto ask = [&](const holdfast::redis_endpoint& e, std::string& host, int& port, bool&) {
    asked.push_back(e.port);
    if (silent) return std::error_code(errc::store_unavailable);
    host = names_host;
    port = names_port;
    return std::error_code{};
  };
  CHECK_FALSE(w.moved(o, ask));  // the first sentinel names the same primary
  CHECK(w.asked() >= at - milliseconds(50));
  CHECK_FALSE(w.due(o, w.asked()));  // just asked
  silent = true;
  CHECK_FALSE(w.moved(o, ask));  // no answer keeps the connection ...
  silent = false;
  CHECK_FALSE(w.moved(o, ask));  // ... and the next question goes to the next sentinel
  names_port = 6380;
  CHECK(w.moved(o, ask));  // another port: a move
  names_port = 6379;
  names_host = "10.0.0.2";
  CHECK(w.moved(o, ask));  // another host: a move
  CHECK(asked == std::vector<int>{1, 1, 2, 2, 2});
}

TEST_CASE(
    "redis_store: kill -9 mid-run: errors only, no invented grant, the lease sees itself lost",
    "[redis][faults]") {
  auto srv = own_redis({true, ""});
  if (!srv) return;
  const redis_options o = options_for(*srv);
  redis_store s(o);
  holdfast::manual_clock clock;
  holdfast::acquire_options<holdfast::manual_clock> opts;
  opts.clock = clock;
  auto l = holdfast::try_acquire(s, "held", std::chrono::seconds(10), opts);
  REQUIRE(l);

  // A second client hammers the store while the server is killed under it; then every operation
  // of the store reports an error, and the lease knows it is lost from its own clock alone.
  hf_test::check_kill_mid_run([&] { return redis_store(o); }, [&] { srv->kill9(); });
  hf_test::check_dead_store(s, *l, clock);
}

TEST_CASE("redis_store: restart with persistence keeps tokens increasing", "[redis][faults]") {
  auto srv = own_redis({true, ""});
  if (!srv) return;
  const redis_options o = options_for(*srv);
  redis_store s(o);
  fencing_token newest;
  for (int i = 0; i < 20; ++i) {
    auto g = s.try_acquire("p-" + std::to_string(i), "me", milliseconds(60000));
    REQUIRE(g);
    newest = g->token;
  }
  srv->kill9();
  REQUIRE(srv->start());  // same directory: the AOF (fsync always) is replayed
  // The first call after the restart may meet the dead connection; it must not invent anything.
  auto first = s.try_acquire("after", "me", milliseconds(60000));
  if (!first) {
    CHECK(first.error() == errc::store_unavailable);
    first = s.try_acquire("after", "me", milliseconds(60000));
  }
  REQUIRE(first);
  CHECK(newest < first->token);
  // The leases survived too: still held by their owner.
  CHECK(s.try_acquire("p-19", "other", milliseconds(1000)).error() == errc::busy);
}

TEST_CASE("redis_store: restart without persistence resets the counter; fences stay safe",
          "[redis][faults][fence]") {
  auto srv = own_redis({false, ""});
  if (!srv) return;
  const redis_options o = options_for(*srv);
  redis_store s(o);
  holdfast::fence_gate gate;  // downstream, outlives the Redis restart
  fencing_token old_holder;
  fencing_token newest;
  for (int i = 0; i < 10; ++i) {
    auto g = s.try_acquire("job", "holder-" + std::to_string(i), milliseconds(60000));
    REQUIRE(g);
    REQUIRE(gate.admit(g->token, "holder-" + std::to_string(i)));
    old_holder = newest;
    newest = g->token;
    REQUIRE(s.release("job", "holder-" + std::to_string(i), g->token));
  }
  srv->kill9();
  REQUIRE(srv->start());  // empty: no AOF, no RDB
  (void)s.connect();      // drop the dead connection if this call meets it
  auto g = s.try_acquire("job", "new-holder", milliseconds(60000));
  if (!g) g = s.try_acquire("job", "new-holder", milliseconds(60000));
  REQUIRE(g);
  CHECK(g->token <= old_holder);  // the counter started again from zero
  // Safety holds: the gate refuses every pre-restart token below its newest ...
  CHECK(gate.admit(old_holder, "holder-8").error() == errc::stale_token);
  // ... but liveness does not: the new, legitimate holder is refused as well.
  CHECK(gate.admit(g->token, "new-holder").error() == errc::stale_token);
  REQUIRE(s.release("job", "new-holder", g->token));
  // The remedy: raise the counter past the newest token the fence admitted.
  REQUIRE(s.raise_token_floor(gate.newest()));
  auto g2 = s.try_acquire("job", "new-holder", milliseconds(60000));
  REQUIRE(g2);
  CHECK(newest < g2->token);
  CHECK(gate.admit(g2->token, "new-holder"));
}

TEST_CASE("redis_store: a frozen server times out, and the store recovers after",
          "[redis][faults]") {
  auto srv = own_redis({false, ""});
  if (!srv) return;
  redis_options o = options_for(*srv);
  o.command_timeout = milliseconds(200);
  o.connect_timeout = milliseconds(200);
  redis_store s(o);
  REQUIRE(s.connect());
  srv->pause();  // SIGSTOP: the socket stays open, nothing answers
  const auto t0 = std::chrono::steady_clock::now();
  auto r = s.try_acquire("frozen", "me", milliseconds(10000));
  const auto took = std::chrono::steady_clock::now() - t0;
  // A new connection to a frozen server: the kernel accepts it, the setup round trip times out.
  auto r2 = s.try_acquire("frozen", "me", milliseconds(10000));
  srv->resume();
  CHECK(r.error() == errc::timeout);
  CHECK(took < std::chrono::seconds(5));
  CHECK(r2.error() == errc::timeout);
  auto g = s.try_acquire("frozen", "me", milliseconds(10000));
  if (!g) g = s.try_acquire("frozen", "me", milliseconds(10000));
  REQUIRE(g);
  CHECK(s.release("frozen", "me", g->token));
}

TEST_CASE("redis_store: release after the connection was dropped reconnects once and frees the key",
          "[redis]") {
  // Review input: a lease destroyed right after its Redis connection dropped made one release
  // attempt that always failed (the reconnect happened only on the next call), so the key waited
  // out its TTL. Expected: release() succeeds and the key is free at once.
  std::optional<redis_options> base = shared_redis();
  if (!base) return;
  redis_options o = isolated(*base);
  o.client_name = "hf-release-" + hf_test::random_tag();
  redis_store s(o);
  admin adm(o);
  auto g = s.try_acquire("gone", "me", milliseconds(60000));
  REQUIRE(g);
  // Drops the store's idle connection (found by its client name: the server may be shared).
  const auto drop = [&] {
    const std::string list = adm.str({"CLIENT", "LIST"});
    const std::size_t name = list.find("name=" + o.client_name + " ");
    REQUIRE(name != std::string::npos);
    const std::size_t begin =
        list.rfind('\n', name) == std::string::npos ? 0 : list.rfind('\n', name) + 1;
    const std::string id = list.substr(begin + 3, list.find(' ', begin) - begin - 3);
    REQUIRE(adm.cmd({"CLIENT", "KILL", "ID", id})->integer == 1);
  };
  drop();
  CHECK(s.release("gone", "me", g->token));
  CHECK(adm.cmd({"EXISTS", o.key_prefix + "gone"})->integer == 0);
  // A lease destroyed the same way frees its key too.
  {
    holdfast::acquire_options<> ao;
    auto l = holdfast::try_acquire(s, "gone", milliseconds(60000), ao);
    REQUIRE(l);
    drop();
  }
  CHECK(adm.cmd({"EXISTS", o.key_prefix + "gone"})->integer == 0);
  // Renew and acquire are not retried: the first call after a drop reports the error.
  auto h = s.try_acquire("kept", "me", milliseconds(60000));
  REQUIRE(h);
  drop();
  CHECK(s.renew("kept", "me", h->token, milliseconds(60000)).error() == errc::store_unavailable);
  CHECK(s.release("kept", "me", h->token));
}

// ------------------------------------------------------------------------------------------------
// try_acquire_all: every key in one script, or none (detail/redis_multi.hpp).
// ------------------------------------------------------------------------------------------------

TEST_CASE("redis_store try_acquire_all meets the kit's multi-key contract", "[redis][multi]") {
  static_assert(holdfast::has_try_acquire_all_v<redis_store>);
  std::optional<redis_options> base = shared_redis();
  if (!base) return;
  const redis_options o = isolated(*base);
  redis_store s(o);
  REQUIRE_CONFORMS(holdfast::testing::check_try_acquire_all(s, redis_kit(o)));
  CHECK(s.last_error_message().empty());
}

TEST_CASE("redis_store try_acquire_all writes nothing on garbage or an exhausted counter",
          "[redis][multi]") {
  std::optional<redis_options> base = shared_redis();
  if (!base) return;
  const redis_options o = isolated(*base);
  redis_store s(o);
  admin adm(o);
  const std::string_view keys[] = {"a", "g", "b"};
  holdfast::grant g[3];
  // A record holdfast did not write, after a free key: protocol_error, and "a" stays free.
  adm.cmd({"SET", o.key_prefix + "g", "no-colon-here"});
  CHECK(s.try_acquire_all(keys, 3, "me", milliseconds(10000), g).error() == errc::protocol_error);
  CHECK(s.last_error_message().find("HOLDFAST_CORRUPT") != std::string::npos);
  CHECK(adm.cmd({"EXISTS", o.key_prefix + "a"})->integer == 0);
  adm.cmd({"DEL", o.key_prefix + "g"});
  // Room for one more token, three keys asked: token_exhausted, no key taken, counter unchanged.
  adm.cmd({"SET", o.counter_key, "9223372036854775806"});
  CHECK(s.try_acquire_all(keys, 3, "me", milliseconds(10000), g).error() == errc::token_exhausted);
  CHECK(adm.cmd({"EXISTS", o.key_prefix + "a"})->integer == 0);
  CHECK(adm.str({"GET", o.counter_key}) == "9223372036854775806");
  // One key fits: it gets the last token, exactly (no Lua double on the way).
  REQUIRE(s.try_acquire_all(keys, 1, "me", milliseconds(10000), g));
  CHECK(g[0].token == holdfast::redis_max_token);
  CHECK(s.release("a", "me", g[0].token));
  // A bad key size is refused before anything is sent.
  const std::string_view none[] = {"a", ""};
  CHECK(s.try_acquire_all(none, 2, "me", milliseconds(10000), g).error() == errc::invalid_argument);
}

TEST_CASE("redis_store try_acquire_all: tokens above 2^53 stay exact", "[redis][multi]") {
  std::optional<redis_options> base = shared_redis();
  if (!base) return;
  const redis_options o = isolated(*base);
  redis_store s(o);
  REQUIRE(s.raise_token_floor(fencing_token(9007199254740990ULL)));
  const std::string_view keys[] = {"x", "y", "z"};
  holdfast::grant g[3];
  REQUIRE(s.try_acquire_all(keys, 3, "me", milliseconds(10000), g));
  CHECK(g[0].token.value() == 9007199254740991ULL);
  CHECK(g[1].token.value() == 9007199254740992ULL);
  CHECK(g[2].token.value() == 9007199254740993ULL);
  for (int i = 0; i < 3; ++i) {
    auto r = s.inspect(keys[i]);
    REQUIRE(r);
    REQUIRE(r->has_value());
    CHECK((*r)->token == g[i].token);
    CHECK(s.release(keys[i], "me", g[i].token));
  }
}

TEST_CASE("redis_store under multi_lease: one script per attempt, overlapping sets in threads",
          "[redis][multi]") {
  std::optional<redis_options> base = shared_redis();
  if (!base) return;
  const redis_options o = isolated(*base);
  redis_store s(o);
  {
    auto m = holdfast::try_acquire_all(s, {"p", "q", "r"}, milliseconds(10000));
    REQUIRE(m);
    CHECK(m->token("p") != m->token("q"));
    CHECK(holdfast::try_acquire_all(s, {"r", "t"}, milliseconds(10000)).error() == errc::busy);
    auto t = s.inspect("t");
    REQUIRE(t);
    CHECK(!t->has_value());  // busy left nothing
  }
  // Two threads over {a, b} and {b, c}: whenever both hold, the sets never overlap by the store.
  std::atomic<int> granted{0};
  std::atomic<bool> overlap{false};
  std::atomic<int> in_b{0};
  const auto worker = [&](std::vector<std::string> keys) {
    redis_store mine(o);
    for (int i = 0; i < 15; ++i) {
      auto m = holdfast::try_acquire_all(mine, keys, milliseconds(10000));
      if (!m) {
        CHECK(m.error() == errc::busy);
        continue;
      }
      if (in_b.fetch_add(1) != 0) overlap = true;
      ++granted;
      in_b.fetch_sub(1);
      CHECK(m->release());
    }
  };
  std::thread t1(worker, std::vector<std::string>{"a", "b"});
  std::thread t2(worker, std::vector<std::string>{"b", "c"});
  t1.join();
  t2.join();
  CHECK(!overlap);
  CHECK(granted > 0);
}

// ~0.01 s. last_error_message() describes the most recent call only: an older call's text used to
// outlive later calls that succeeded, ended in contention or failed without a text of their own.
// The failure: the counter holds something the acquire script cannot INCR. Expected: that
// failure's text, then "" after busy, after an invalid_argument and after a success.
TEST_CASE("redis_store: last_error_message describes the most recent call only",
          "[redis][errors]") {
  std::optional<redis_options> base = shared_redis();
  if (!base) return;
  const redis_options o = isolated(*base);
  admin adm(o);
  redis_store s(o);
  auto held = s.try_acquire("held", "A", milliseconds(30000));
  REQUIRE(held);
  CHECK(s.last_error_message().empty());
  const auto fail_once = [&] {
    const std::string counter = adm.str({"GET", o.counter_key});
    adm.cmd({"SET", o.counter_key, "not-a-token"});
    auto bad = s.try_acquire("k", "A", milliseconds(30000));
    adm.cmd({"SET", o.counter_key, counter});
    REQUIRE(!bad);
    CHECK(s.last_error_message().find("redis: ") == 0);
  };
  fail_once();
  CHECK(s.try_acquire("held", "B", milliseconds(30000)).error() == errc::busy);
  CHECK(s.last_error_message().empty());  // contention sets no text, and clears the old one
  fail_once();
  CHECK(s.try_acquire("", "A", milliseconds(30000)).error() == errc::invalid_argument);
  CHECK(s.last_error_message().empty());  // refused before the server: still the latest call
  fail_once();
  CHECK(s.release("held", "B", held->token).error() == errc::not_holder);
  CHECK(s.last_error_message().empty());
  fail_once();
  CHECK(s.try_acquire("k", "A", milliseconds(30000)));
  CHECK(s.last_error_message().empty());
}

}  // namespace test_redis_store
