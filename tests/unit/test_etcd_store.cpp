// SPDX-License-Identifier: MIT
// Tests of stores/etcd.hpp against a real etcd member (the shared one .ci/servers starts, or one
// of our own): the LeaseStore contract, the conformance kit, hostile keys, TTL rounding and the
// expiry granularity (measured and printed), the fence transaction, raise_token_floor, endpoint
// failover, and bad servers (down, slow, malformed JSON, unexpected shapes, error answers) from a
// fake gateway. Cluster faults and snapshot restores are in test_etcd_cluster.cpp.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "../support/etcd_servers.hpp"
#include "../support/fail_fast.hpp"
#include "../support/real_servers.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/stores/checked.hpp"
#include "holdfast/stores/etcd.hpp"
#include "holdfast/testing/conformance.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_etcd_store {

using holdfast::errc;
using holdfast::etcd_fence;
using holdfast::etcd_options;
using holdfast::etcd_store;
using holdfast::fencing_token;
using std::chrono::milliseconds;
using namespace std::chrono_literals;
using namespace std::string_literals;

namespace {

/// The member for tests that do not hurt it: .ci/servers' (HOLDFAST_ETCD_ENDPOINTS), else one of
/// our own. nullopt (after a loud skip) only outside CI.
std::optional<etcd_options> shared_etcd() {
  etcd_options o;
  if (std::optional<std::string> e = hf_test::env("HOLDFAST_ETCD_ENDPOINTS")) {
    o.endpoints = hf_test::split_commas(*e);
    return o;
  }
  static std::unique_ptr<hf_test::etcd_cluster> own;
  if (!own) {
    own = std::make_unique<hf_test::etcd_cluster>(1);
    if (!own->start()) {
      const std::string why = "no etcd: HOLDFAST_ETCD_ENDPOINTS unset and " + own->why();
      own.reset();
      if (hf_test::in_ci()) FAIL(why);
      hf_test::loud_skip(why);
      return std::nullopt;
    }
  }
  o.endpoints = own->endpoints();
  return o;
}

/// Options with a key prefix of their own, so tests and runs never see each other's leases.
etcd_options isolated(etcd_options o) {
  o.key_prefix = "hf-test/" + hf_test::random_tag() + "/";
  return o;
}

/// Raw requests behind the store's back.
class admin {
 public:
  explicit admin(const etcd_options& o) : o_(o), link_(o) {}

  nlohmann::json post(const std::string& path, const nlohmann::json& body) {
    auto guard = link_.lock();
    auto r = link_.post(path, body.dump());
    INFO(link_.last_error());
    REQUIRE(r);
    return *r;
  }
  static std::string b64(std::string_view s) {
    std::string out;
    holdfast::detail::base64_append(s, out);
    return out;
  }
  std::string etcd_key(std::string_view key) const {
    std::string k = o_.key_prefix;
    holdfast::detail::etcd_key_name(key, k);
    return k;
  }
  /// The lease bound to a lease key, or 0 if the key is absent.
  std::int64_t lease_of(std::string_view key) {
    const nlohmann::json r = post("/kv/range", {{"key", b64(etcd_key(key))}});
    if (r.find("kvs") == r.end()) return 0;
    std::int64_t id = 0;
    REQUIRE(holdfast::detail::json_int64(r["kvs"][0], "lease", id));
    return id;
  }
  /// Ends the lease on `key` now, as expiry would (etcd deletes the key with its lease).
  void expire_now(std::string_view key) {
    const std::int64_t id = lease_of(key);
    if (id != 0) post("/lease/revoke", {{"ID", std::to_string(id)}});
  }
  void put(std::string_view etcd_key_bytes, std::string_view value) {
    post("/kv/put", {{"key", b64(etcd_key_bytes)}, {"value", b64(value)}});
  }
  bool exists(std::string_view key) {
    const nlohmann::json r = post("/kv/range", {{"key", b64(etcd_key(key))}});
    return r.find("kvs") != r.end();
  }

 private:
  etcd_options o_;
  holdfast::detail::etcd_link link_;
};

/// The conformance kit's options for a store with options `o`: expiry forced by revoking the
/// key's etcd lease (etcd deletes the key with it, so a release after expiry may be not_holder),
/// store-wide tokens (one counter key).
holdfast::testing::conformance_options etcd_kit(const etcd_options& o) {
  auto adm = std::make_shared<admin>(o);
  holdfast::testing::conformance_options co;
  co.expire_now = [adm](std::string_view key) { adm->expire_now(key); };
  co.store_wide_tokens = true;
  return co;
}

#define REQUIRE_CONFORMS(report) \
  do {                           \
    const auto r_ = (report);    \
    INFO(r_.summary());          \
    REQUIRE(r_.ok());            \
  } while (false)

}  // namespace

TEST_CASE("etcd encodings: SHA-256 and base64 against known vectors", "[etcd]") {
  auto hex = [](std::string_view s) {
    std::string out;
    for (unsigned char c : holdfast::detail::sha256(s)) {
      static constexpr char d[] = "0123456789abcdef";
      out += d[c >> 4];
      out += d[c & 15];
    }
    return out;
  };
  CHECK(hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  // A default std::string_view has a null data(): the digest reads nothing of it (UBSan caught a
  // memcpy from null in the etcd read-write wait, which hashes such a view).
  CHECK(hex(std::string_view()) ==
        "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(hex(std::string(1000000, 'a')) ==
        "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  for (const std::string& s : {""s, "f"s, "fo"s, "foo"s, "foob"s, "fooba"s, "foobar"s}) {
    std::string enc;
    holdfast::detail::base64_append(s, enc);
    std::string dec;
    CHECK(holdfast::detail::base64_decode(enc, dec));
    CHECK(dec == s);
  }
  std::string enc;
  holdfast::detail::base64_append("foobar", enc);
  CHECK(enc == "Zm9vYmFy");
  std::string dec;
  CHECK_FALSE(holdfast::detail::base64_decode("Zm9v!", dec));
  CHECK_FALSE(holdfast::detail::base64_decode("Z", dec));
  // Long keys and keys that look hashed are stored by their hash; short ones as themselves.
  std::string k;
  holdfast::detail::etcd_key_name("orders", k);
  CHECK(k == "orders");
  k.clear();
  holdfast::detail::etcd_key_name(std::string(257, 'x'), k);
  CHECK(k.size() == 8 + 64);
  CHECK(k.rfind("#sha256/", 0) == 0);
  std::string k2;
  holdfast::detail::etcd_key_name(k, k2);  // a short key that *looks* hashed is hashed again
  CHECK(k2 != k);
  // TTLs etcd reports, in seconds, capped at what was asked and never overflowing.
  using holdfast::detail::etcd_ttl_capped;
  CHECK(etcd_ttl_capped(0, 3000ms) == 0ms);
  CHECK(etcd_ttl_capped(-1, 3000ms) == 0ms);
  CHECK(etcd_ttl_capped(2, 300ms) == 300ms);
  CHECK(etcd_ttl_capped(2, 5000ms) == 2000ms);
  CHECK(etcd_ttl_capped(3, 3000ms) == 3000ms);
  CHECK(etcd_ttl_capped(INT64_MAX, 3000ms) == 3000ms);
  CHECK(etcd_ttl_capped(INT64_MAX, holdfast::max_ttl) == holdfast::max_ttl);
}

TEST_CASE("etcd_store: a malformed or wrong endpoint is misconfigured, answered at once",
          "[etcd][errors]") {
  std::optional<etcd_options> base = shared_etcd();
  if (!base) return;
  SECTION("a host name that resolves nowhere") {
    etcd_options o = isolated(*base);
    o.endpoints = {"http://no-such-host.invalid:2379"};
    etcd_store s(o);
    hf_test::check_fails_fast(s, errc::misconfigured);
    CHECK(s.last_error_message().find("etcd_options::endpoints") != std::string::npos);
  }
  SECTION("a gateway path that is not there (HTTP 404)") {
    etcd_options o = isolated(*base);
    o.api_path = "/v3nope";
    etcd_store s(o);
    hf_test::check_fails_fast(s, errc::misconfigured);
    CHECK(s.last_error_message().find("HTTP 404") != std::string::npos);
    CHECK(s.last_error_message().find("api_path") != std::string::npos);
  }
  SECTION("https:// to the plain-HTTP member: the handshake is named, at once") {
    etcd_options o = isolated(*base);
    REQUIRE(o.endpoints.front().rfind("http://", 0) == 0);
    o.endpoints = {"https://" + o.endpoints.front().substr(7)};
    etcd_store s(o);
    hf_test::check_fails_fast(s, errc::misconfigured);
    CHECK(s.last_error_message().find("TLS handshake failed") != std::string::npos);
    CHECK(s.last_error_message().find("http://") != std::string::npos);
  }
  SECTION("an endpoint without a scheme names it") {
    etcd_options o = isolated(*base);
    o.endpoints = {"127.0.0.1:2379"};
    etcd_store s(o);
    hf_test::check_fails_fast(s, errc::invalid_argument);
    CHECK(s.last_error_message() ==
          "etcd: invalid etcd_options: endpoints[0] \"127.0.0.1:2379\" does not start with "
          "http:// or https://");
  }
}

TEST_CASE("etcd_store meets the LeaseStore contract", "[etcd][contract]") {
  std::optional<etcd_options> base = shared_etcd();
  if (!base) return;
  const etcd_options o = isolated(*base);
  etcd_store s(o);
  REQUIRE_CONFORMS(holdfast::testing::check_contract(s, etcd_kit(o)));
  CHECK(s.last_error_message().empty());
  // And through a store that did not make the grants (every renew/release reads the key first).
  etcd_options forgetful = isolated(*base);
  forgetful.remembered_grants = 0;
  etcd_store f(forgetful);
  REQUIRE_CONFORMS(holdfast::testing::check_contract(f, etcd_kit(forgetful)));
}

TEST_CASE("etcd_store meets the LeaseStore contract on a three-member cluster",
          "[etcd][contract]") {
  // The cluster .ci/servers starts (HOLDFAST_ETCD_CLUSTER_ENDPOINTS); the fault tests in
  // test_etcd_cluster.cpp start clusters of their own, to kill and restart.
  std::optional<std::string> e = hf_test::env("HOLDFAST_ETCD_CLUSTER_ENDPOINTS");
  if (!e) {
    if (hf_test::in_ci()) FAIL("HOLDFAST_ETCD_CLUSTER_ENDPOINTS is unset (.ci/servers sets it)");
    hf_test::loud_skip("no etcd cluster: HOLDFAST_ETCD_CLUSTER_ENDPOINTS is unset");
    return;
  }
  etcd_options base;
  base.endpoints = hf_test::split_commas(*e);
  REQUIRE(base.endpoints.size() == 3);
  // Each store talks to another member first: followers forward to the leader.
  for (std::size_t first = 0; first < base.endpoints.size(); ++first) {
    etcd_options o = isolated(base);
    std::rotate(o.endpoints.begin(), o.endpoints.begin() + static_cast<std::ptrdiff_t>(first),
                o.endpoints.end());
    etcd_store s(o);
    REQUIRE_CONFORMS(holdfast::testing::check_contract(s, etcd_kit(o)));
  }
}

TEST_CASE("etcd_store passes the conformance kit (contract and simulated schedules)",
          "[etcd][contract]") {
  std::optional<etcd_options> base = shared_etcd();
  if (!base) return;
  // etcd keeps its own time: the contract's expiry checks run through a revoked lease on the
  // contract checks' store (the first the factory makes); the schedules cannot move the
  // server's clock, and the report says so (expiry by etcd's own clock: the granularity test
  // below). The hostile strings have a test of their own below.
  const etcd_options first = isolated(*base);
  holdfast::testing::conformance_options co = etcd_kit(first);
  co.schedules = 20;  // each some dozens of real round trips, each a Raft commit
  co.hostile_strings = false;
  // etcd counts TTLs in whole seconds, 2 s at least: a TTL it can apply exactly.
  co.run.ttl = 2000ms;
  int made = 0;
  const holdfast::testing::conformance_report report = holdfast::testing::check_store(
      [&] { return std::make_unique<etcd_store>(made++ == 0 ? first : isolated(*base)); }, co);
  INFO(report.summary());
  CHECK(report.ok());
  CHECK(report.schedules == 20);
  CHECK(report.contract_checks > 60);
  CHECK_THAT(report.summary(), Catch::Contains("T2 expiry to the tick"));  // forced, not skipped
}

TEST_CASE("etcd_store: hostile keys and owners round-trip exactly (NUL, quotes, 1 MiB)", "[etcd]") {
  std::optional<etcd_options> base = shared_etcd();
  if (!base) return;
  const etcd_options o = isolated(*base);
  etcd_store s(o);
  REQUIRE_CONFORMS(holdfast::testing::check_hostile_strings(s, etcd_kit(o)));
  CHECK(s.last_error_message().empty());
}

TEST_CASE("etcd_store: contending threads get exclusive grants, increasing tokens",
          "[etcd][concurrency]") {
  std::optional<etcd_options> base = shared_etcd();
  if (!base) return;
  const etcd_options o = isolated(*base);
  holdfast::testing::conformance_options co;
  co.threads = 3;
  co.grants_per_thread = 10;
  REQUIRE_CONFORMS(holdfast::testing::check_exclusive_grants(
      [&] { return std::make_unique<etcd_store>(o); }, co));
}

TEST_CASE("etcd_store under holdfast::lease: acquire, renew, RAII release", "[etcd][lease]") {
  std::optional<etcd_options> base = shared_etcd();
  if (!base) return;
  const etcd_options o = isolated(*base);
  etcd_store s(o);
  admin adm(o);
  fencing_token first;
  {
    auto l = holdfast::try_acquire(s, "orders", 3s);
    REQUIRE(l);
    first = l->token();
    CHECK(l->valid());
    CHECK(l->ttl() == 3s);
    REQUIRE(l->renew());
    CHECK(l->token() == first);
    CHECK(adm.exists("orders"));
  }
  CHECK_FALSE(adm.exists("orders"));  // released by the destructor: key and lease gone
  auto again = holdfast::try_acquire(s, "orders", 3s);
  REQUIRE(again);
  CHECK(first < again->token());
}

TEST_CASE("etcd_store: a TTL etcd rounds up is reported as asked, and held at least that long",
          "[etcd]") {
  std::optional<etcd_options> base = shared_etcd();
  if (!base) return;
  const etcd_options o = isolated(*base);
  etcd_store s(o);
  // 300 ms: etcd applies its minimum (2 s with the default election timeout); 2.5 s: 3 s.
  for (milliseconds asked : {300ms, 2500ms, 3000ms}) {
    const std::string key = "round-" + std::to_string(asked.count());
    auto g = s.try_acquire(key, "a", asked);
    REQUIRE(g);
    CHECK(g->ttl == asked);  // min(asked, applied): never more than asked (store.hpp)
    auto rec = s.inspect(key);
    REQUIRE(rec);
    REQUIRE(rec->has_value());
    // Whole seconds left by the leader's clock: at least what was asked, rounded down.
    CHECK((*rec)->remaining >= std::chrono::duration_cast<std::chrono::seconds>(asked) - 1s);
    CHECK((*rec)->remaining <= std::max<milliseconds>(asked, 3s));
    // etcd cannot lengthen a lease: a renew asking 10 s gets the lease's own TTL, which is
    // max(2 s, asked rounded up to seconds).
    auto r = s.renew(key, "a", g->token, 10s);
    REQUIRE(r);
    const auto applied = std::max<milliseconds>(2s, std::chrono::ceil<std::chrono::seconds>(asked));
    CHECK(r->ttl == applied);
    REQUIRE(s.release(key, "a", g->token));
  }
}

TEST_CASE("etcd_store: expiry granularity, measured (never early, free within TTL + 1 s)",
          "[etcd][expiry]") {
  std::optional<etcd_options> base = shared_etcd();
  if (!base) return;
  const etcd_options o = isolated(*base);
  // Four keys at staggered instants (etcd's expiry loop runs every 500 ms, so the phase matters).
  constexpr int kKeys = 4;
  std::vector<double> late_ms(kKeys, -1);
  std::vector<std::thread> threads;
  for (int i = 0; i < kKeys; ++i) {
    threads.emplace_back([&, i] {
      std::this_thread::sleep_for(milliseconds(130 * i));
      etcd_store s(o);
      const std::string key = "expiry-" + std::to_string(i);
      const auto sent = std::chrono::steady_clock::now();
      auto g = s.try_acquire(key, "dead-holder", 2s);
      if (!g) return;
      // The holder "dies": nobody renews. Poll until a contender gets the key.
      etcd_store contender(o);
      for (;;) {
        auto c = contender.try_acquire(key, "contender", 2s);
        const auto now = std::chrono::steady_clock::now();
        if (c) {
          late_ms[static_cast<std::size_t>(i)] =
              std::chrono::duration<double, std::milli>(now - sent - g->ttl).count();
          (void)contender.release(key, "contender", c->token);
          return;
        }
        if (now - sent > 10s) return;
        std::this_thread::sleep_for(10ms);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  std::sort(late_ms.begin(), late_ms.end());
  std::printf(
      "etcd expiry granularity: a dead holder's key (TTL 2 s) was free again %.0f .. %.0f "
      "ms after its TTL, measured from the acquire request\n",
      late_ms.front(), late_ms.back());
  for (double late : late_ms) {
    CHECK(late >= 0.0);     // never before the TTL
    CHECK(late <= 1000.0);  // 500 ms loop + a Raft commit, with room for a loaded machine
  }
}

TEST_CASE("etcd_store: renew and release touch only the caller's own grant", "[etcd]") {
  std::optional<etcd_options> base = shared_etcd();
  if (!base) return;
  const etcd_options o = isolated(*base);
  etcd_store a(o);
  etcd_store b(o);
  admin adm(o);
  auto g = a.try_acquire("k", "A", 3s);
  REQUIRE(g);
  // Another store (another process) renews and releases only with owner and token.
  CHECK(b.renew("k", "B", g->token, 3s).error() == errc::lease_lost);
  CHECK(b.release("k", "A", fencing_token(g->token.value() + 1)).error() == errc::not_holder);
  REQUIRE(b.renew("k", "A", g->token, 3s));
  // Expired (lease revoked behind our back): the remembered lease is gone, renew says lost.
  adm.expire_now("k");
  CHECK(a.renew("k", "A", g->token, 3s).error() == errc::lease_lost);
  CHECK(a.release("k", "A", g->token).error() == errc::not_holder);
  // B takes it over; A's stale renew/release change nothing.
  auto gb = b.try_acquire("k", "B", 3s);
  REQUIRE(gb);
  CHECK(g->token < gb->token);
  CHECK(a.renew("k", "A", g->token, 3s).error() == errc::lease_lost);
  CHECK(a.release("k", "A", g->token).error() == errc::not_holder);
  auto rec = a.inspect("k");
  REQUIRE(rec);
  REQUIRE(rec->has_value());
  CHECK((*rec)->owner == "B");
  CHECK((*rec)->token == gb->token);
  // A token above 2^63-1 is no revision: lost/not_holder without asking etcd.
  CHECK(a.renew("k", "B", fencing_token(holdfast::etcd_max_token.value() + 1), 3s).error() ==
        errc::lease_lost);
  REQUIRE(b.release("k", "B", gb->token));
}

TEST_CASE("etcd_store: a busy or failed acquire gives its unused lease back", "[etcd]") {
  // A member of its own: the check counts every lease on the server, and the shared member serves
  // other test processes that ctest runs at the same time.
  if (!shared_etcd()) return;  // (fails in CI, skips loudly elsewhere, when etcd is missing)
  hf_test::etcd_cluster own(1, "etcd-leases");
  REQUIRE(own.start());
  etcd_options base;
  base.endpoints = own.endpoints();
  const etcd_options o = isolated(base);
  etcd_store s(o);
  admin adm(o);
  auto g = s.try_acquire("k", "A", 5s);
  REQUIRE(g);
  const nlohmann::json before = adm.post("/lease/leases", nlohmann::json::object());
  for (int i = 0; i < 5; ++i) CHECK(s.try_acquire("k", "B", 5s).error() == errc::busy);
  const nlohmann::json after = adm.post("/lease/leases", nlohmann::json::object());
  const auto count = [](const nlohmann::json& j) {
    return j.find("leases") == j.end() ? std::size_t{0} : j["leases"].size();
  };
  CHECK(count(after) == count(before));  // the busy attempts left no lease behind
  // An owner larger than etcd takes in one request (1.5 MiB by default; 2 MiB is gRPC's own
  // limit) is refused before anything is sent, the message naming the limit: no lease is
  // granted, nothing is left behind. A 1.2 MiB owner fits.
  auto huge = s.try_acquire("k2", std::string(2 << 20, 'o'), 5s);
  CHECK(huge.error() == errc::invalid_argument);
  INFO(s.last_error_message());
  CHECK(s.last_error_message().find("over etcd's request limit") != std::string::npos);
  CHECK(s.last_error_message().find("--max-request-bytes") != std::string::npos);
  const nlohmann::json later = adm.post("/lease/leases", nlohmann::json::object());
  CHECK(count(later) <= count(before));
  CHECK_FALSE(adm.exists("k2"));
  auto big = s.try_acquire("k2", std::string(1200 << 10, 'o'), 5s);
  REQUIRE(big);
  REQUIRE(s.release("k2", std::string(1200 << 10, 'o'), big->token));
  REQUIRE(s.release("k", "A", g->token));
}

TEST_CASE("etcd_store: a key holdfast did not write is protocol_error, never a grant", "[etcd]") {
  std::optional<etcd_options> base = shared_etcd();
  if (!base) return;
  const etcd_options o = isolated(*base);
  etcd_store s(o);
  admin adm(o);
  adm.put(adm.etcd_key("planted"), "someone");  // no lease: not ours
  auto g = s.try_acquire("planted", "someone", 3s);
  CHECK(g.error() == errc::protocol_error);
  CHECK(s.last_error_message().find("no lease") != std::string::npos);
  CHECK(s.inspect("planted").error() == errc::protocol_error);
}

TEST_CASE("etcd_store: bad options and unreachable members are errors, not grants", "[etcd]") {
  etcd_options bad;
  bad.endpoints = {};
  CHECK(bad.check() == errc::invalid_argument);
  bad.endpoints = {"127.0.0.1:2379"};  // no scheme
  CHECK(bad.check() == errc::invalid_argument);
  bad.endpoints = {"http://127.0.0.1:2379"};
  bad.password = "pw";  // without a user
  CHECK(bad.check() == errc::invalid_argument);
  bad.password.clear();
  bad.cert_file = "c.pem";  // without a key
  CHECK(bad.check() == errc::invalid_argument);
  {
    etcd_store s(bad);
    CHECK(s.try_acquire("k", "o", 3s).error() == errc::invalid_argument);
  }
  etcd_options down;
  down.endpoints = {"http://127.0.0.1:" + std::to_string(hf_test::free_port())};
  etcd_store s(down);
  auto g = s.try_acquire("k", "o", 3s);
  CHECK(g.error() == errc::store_unavailable);
  CHECK(s.last_error_message().find("onnect") != std::string::npos);
  CHECK(s.inspect("k").error() == errc::store_unavailable);
}

TEST_CASE("etcd_store: a refused connection moves on to the next endpoint", "[etcd]") {
  std::optional<etcd_options> base = shared_etcd();
  if (!base) return;
  etcd_options o = isolated(*base);
  o.endpoints.insert(o.endpoints.begin(),
                     "http://127.0.0.1:" + std::to_string(hf_test::free_port()));
  etcd_store s(o);
  auto g = s.try_acquire("k", "o", 3s);
  REQUIRE(g);
  REQUIRE(s.release("k", "o", g->token));
}

namespace {

/// A fake gateway: answers every request with `answer` (raw HTTP), or never (answer empty).
class fake_gateway {
 public:
  explicit fake_gateway(std::string answer) : answer_(std::move(answer)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(::listen(fd_, 8) == 0);
    REQUIRE(::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~fake_gateway() {
    stop_ = true;
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }
  fake_gateway(const fake_gateway&) = delete;
  fake_gateway& operator=(const fake_gateway&) = delete;

  [[nodiscard]] etcd_options options(const char* scheme = "http://") const {
    etcd_options o;
    o.endpoints = {scheme + std::string("127.0.0.1:") + std::to_string(port_)};
    o.command_timeout = 300ms;
    return o;
  }

 private:
  void serve() {
    while (!stop_) {
      const int c = ::accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      std::string req;
      char buf[4096];
      // Read the headers and the body (Content-Length), then answer.
      for (;;) {
        const ssize_t n = ::recv(c, buf, sizeof buf, 0);
        if (n <= 0) break;
        req.append(buf, static_cast<std::size_t>(n));
        if (req[0] == '\x16') break;  // a TLS handshake: closed unanswered, as etcd without TLS
        const std::size_t end = req.find("\r\n\r\n");
        if (end == std::string::npos) continue;
        const std::size_t cl = req.find("Content-Length: ");
        const std::size_t body = cl == std::string::npos ? 0 : std::stoul(req.substr(cl + 16));
        if (req.size() >= end + 4 + body) break;
      }
      if (!req.empty() && req[0] == '\x16') {
        ::close(c);
      } else if (!answer_.empty()) {
        (void)::send(c, answer_.data(), answer_.size(), MSG_NOSIGNAL);
        ::close(c);
      } else {
        held_.push_back(c);  // never answer: the client must time out
      }
    }
  }

  std::string answer_;
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::vector<int> held_;
  std::thread thread_;

 public:
  static std::string http(int status, const std::string& body) {
    return "HTTP/1.1 " + std::to_string(status) +
           " X\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body;
  }
};

}  // namespace

namespace {
/// An error page as Python's http.server writes one (the trial's "plain HTTP server").
std::string plain_page(int status) {
  return "<!DOCTYPE HTML>\n<html lang=\"en\">\n    <head>\n        <meta charset=\"utf-8\">\n"
         "        <title>Error response</title>\n    </head>\n    <body>\n        <h1>Error "
         "response</h1>\n        <p>Error code: " +
         std::to_string(status) +
         "</p>\n        <p>Message: Unsupported method ('POST').</p>\n    </body>\n</html>\n";
}
}  // namespace

TEST_CASE("etcd_store: a slow, garbled or failing gateway is an error with its text, never a grant",
          "[etcd]") {
  struct bad_case {
    const char* what;
    std::string answer;
    errc expected;
    const char* text;  // expected in last_error_message()
  };
  const std::vector<bad_case> cases = {
      {"malformed JSON", fake_gateway::http(200, "{\"header\": {"), errc::protocol_error,
       "no JSON object"},
      {"not an object", fake_gateway::http(200, "[1,2,3]"), errc::protocol_error, "[1,2,3]"},
      {"no header", fake_gateway::http(200, R"({"ID":"7","TTL":"3"})"), errc::protocol_error,
       "no header"},
      {"unexpected shape",
       fake_gateway::http(200, R"({"header":{"revision":"1"},"ID":"x","kvs":7,"succeeded":3})"),
       errc::protocol_error, "unexpected shape"},
      {"a negative TTL",
       fake_gateway::http(200, R"({"header":{"revision":"1"},"ID":"7","TTL":"-3","kvs":[1]})"),
       errc::protocol_error, "unexpected shape"},
      {"a TTL near the top of int64",
       fake_gateway::http(
           200, R"({"header":{"revision":"1"},"ID":"7","TTL":"9223372036854775807","kvs":{}})"),
       errc::protocol_error, "unexpected shape"},
      {"no leader",
       fake_gateway::http(
           503, R"({"error":"etcdserver: no leader","message":"etcdserver: no leader","code":14})"),
       errc::store_unavailable, "etcdserver: no leader"},
      {"request timed out",
       fake_gateway::http(504, R"({"error":"x","message":"context deadline exceeded","code":4})"),
       errc::timeout, "context deadline exceeded"},
      {"a proxy's HTML page", fake_gateway::http(502, "<html>Bad Gateway</html>"),
       errc::store_unavailable, "Bad Gateway"},
      {"an empty 404 (no gateway at that path)", fake_gateway::http(404, ""), errc::misconfigured,
       "HTTP 404"},
      {"a web server's 501 page (not etcd)", fake_gateway::http(501, plain_page(501)),
       errc::misconfigured, "answered HTTP 501, not an answer of etcd's v3 JSON gateway"},
      {"a web server's 505", fake_gateway::http(505, plain_page(505)), errc::misconfigured,
       "HTTP 505"},
      {"a 400 in no gateway shape", fake_gateway::http(400, "bad request"), errc::misconfigured,
       "HTTP 400, not an answer of etcd's v3 JSON gateway (check etcd_options::endpoints"},
      {"a 418", fake_gateway::http(418, ""), errc::misconfigured, "HTTP 418"},
      {"a redirect (followed by nobody)", fake_gateway::http(301, ""), errc::misconfigured,
       "HTTP 301"},
      {"a proxy's 503 page stays transient", fake_gateway::http(503, plain_page(503)),
       errc::store_unavailable, "Error code: 503"},
      {"a 500 stays transient", fake_gateway::http(500, "oops"), errc::store_unavailable,
       "HTTP 500: oops"},
      {"a 429 stays transient", fake_gateway::http(429, ""), errc::store_unavailable, "HTTP 429"},
      {"closed without an answer", "X", errc::store_unavailable, "etcd:"},
      {"never answers", "", errc::timeout, "etcd:"},
  };
  for (const bad_case& c : cases) {
    SECTION(c.what) {
      fake_gateway gw(c.answer);
      etcd_store s(gw.options());
      auto g = s.try_acquire("k", "o", 3s);
      REQUIRE_FALSE(g);
      INFO(s.last_error_message());
      CHECK(g.error() == c.expected);
      CHECK(s.last_error_message().find(c.text) != std::string::npos);
      // The answer's excerpt is short and printable: no HTML tags, no '?' for new lines.
      CHECK(s.last_error_message().find("<") == std::string::npos);
      CHECK(s.last_error_message().find("? ") == std::string::npos);
      CHECK(s.last_error_message().find("?<") == std::string::npos);
      CHECK(s.last_error_message().size() < 400);
      CHECK_FALSE(s.renew("k", "o", fencing_token(5), 3s));
      CHECK_FALSE(s.release("k", "o", fencing_token(5)));
      CHECK_FALSE(s.inspect("k"));
      etcd_fence f(gw.options());
      CHECK_FALSE(f.admit("fence", fencing_token(5), "o"));
    }
  }
}

TEST_CASE("etcd_store: https:// to a plain-HTTP server is misconfigured only if it answers HTTP",
          "[etcd][errors]") {
  SECTION("the server answers plain HTTP: the handshake is named, no retry") {
    fake_gateway gw(fake_gateway::http(404, "404 page not found"));
    etcd_store s(gw.options("https://"));
    hf_test::check_fails_fast(s, errc::misconfigured);
    CHECK(s.last_error_message().find("TLS handshake failed") != std::string::npos);
  }
  SECTION("the server closes every connection (restarting): stays transient") {
    fake_gateway gw("X");  // not HTTP either: the plain probe fails too
    etcd_store s(gw.options("https://"));
    auto g = s.try_acquire("k", "o", 3s);
    REQUIRE_FALSE(g);
    INFO(s.last_error_message());
    CHECK(g.error() == errc::store_unavailable);
    CHECK(s.last_error_message().find("TLS handshake failed") == std::string::npos);
  }
}

TEST_CASE("etcd_fence admits and writes in one transaction, refuses older tokens",
          "[etcd][fence]") {
  std::optional<etcd_options> base = shared_etcd();
  if (!base) return;
  const etcd_options o = isolated(*base);
  etcd_fence f(o);
  admin adm(o);
  const std::string fk = o.key_prefix + "fence/acct";
  const std::string dk = o.key_prefix + "data/acct";
  auto value_of = [&](const std::string& key) {
    const nlohmann::json r = adm.post("/kv/range", {{"key", admin::b64(key)}});
    std::string v;
    if (r.count("kvs") == 0 || !holdfast::detail::json_bytes(r["kvs"][0], "value", v)) {
      return std::string("<absent>");
    }
    return v;
  };
  CHECK(f.newest(fk).value() == fencing_token{});
  REQUIRE(f.write(fk, fencing_token(100), "a", dk, "v100"));
  CHECK(value_of(fk) == "00000000000000000100:a");  // the owner beside the newest token
  CHECK(f.newest(fk).value() == fencing_token(100));
  CHECK(f.write(fk, fencing_token(99), "a", dk, "v99").error() == errc::stale_token);
  REQUIRE(f.write(fk, fencing_token(100), "a", dk, "v100b"));  // equal: the same holder again
  // Byte order is numeric order: 1000 > 999 > 100 (a plain decimal string would say "1000" <
  // "999").
  REQUIRE(f.write(fk, fencing_token(999), "a", dk, "v999"));
  REQUIRE(f.write(fk, fencing_token(1000), "a", dk, "v1000"));
  CHECK(f.write(fk, fencing_token(999), "a", dk, "late").error() == errc::stale_token);
  CHECK(value_of(dk) == "v1000");
  CHECK(f.get(dk).value() == std::optional<std::string>("v1000"));
  CHECK(f.get(o.key_prefix + "data/absent").value() == std::nullopt);
  CHECK(f.get("").error() == errc::invalid_argument);
  // Several writes, a delete among them, applied together or not at all.
  std::vector<holdfast::etcd_write> w(2);
  w[0].key = dk;
  w[1].key = o.key_prefix + "data/other";
  w[1].value = "x\0y"s;
  REQUIRE(f.execute(fk, fencing_token(1001), "a", w));
  CHECK(value_of(dk) == "<absent>");
  CHECK(f.execute(fk, fencing_token(5), "a", {w[1]}).error() == errc::stale_token);
  REQUIRE(f.execute(fk, fencing_token(1001), "a", {w[1]}));  // the same holder, writes only
  CHECK(value_of(fk) == "00000000000000001001:a");
  // Bad input.
  CHECK(f.admit("", fencing_token(5), "a").error() == errc::invalid_argument);
  CHECK(f.admit(fk, fencing_token(5), "").error() == errc::invalid_argument);
  CHECK(f.admit(fk, fencing_token{}, "a").error() == errc::invalid_argument);
  CHECK(f.admit(fk, fencing_token::max(), "a").error() == errc::invalid_argument);
  CHECK(f.write(fk, fencing_token(2000), "a", fk, "x").error() == errc::invalid_argument);

  SECTION("an equal token from another owner is token_reissued and changes nothing") {
    const std::string fk2 = o.key_prefix + "fence/reissued";
    REQUIRE(f.write(fk2, fencing_token(7), "A", dk, "A's"));
    // Owners that sort below, above, and as a prefix or an extension of "A".
    for (const std::string& other : {"B"s, "0"s, "A\0"s, "AA"s, "\xff"s, ";"s}) {
      INFO(holdfast::testing::printable(other));
      CHECK(f.write(fk2, fencing_token(7), other, dk, "other's").error() == errc::token_reissued);
    }
    CHECK(value_of(dk) == "A's");
    CHECK(value_of(fk2) == "00000000000000000007:A");
    CHECK(f.admit(fk2, fencing_token(7), "A"));  // the first holder still writes
    // One tick either side: 6 is stale for anyone, 8 admits B and then refuses A's 7 and 8.
    CHECK(f.admit(fk2, fencing_token(6), "A").error() == errc::stale_token);
    CHECK(f.admit(fk2, fencing_token(8), "B"));
    CHECK(f.admit(fk2, fencing_token(7), "A").error() == errc::stale_token);
    CHECK(f.admit(fk2, fencing_token(8), "A").error() == errc::token_reissued);
    CHECK(f.admit(fk2, fencing_token(8), "B"));
  }
  SECTION("a bare token (no owner recorded) admits no equal token, only newer ones") {
    const std::string fk3 = o.key_prefix + "fence/bare";
    adm.put(fk3, etcd_fence::text(fencing_token(40)));
    CHECK(f.admit(fk3, fencing_token(40), "a").error() == errc::token_reissued);
    CHECK(f.admit(fk3, fencing_token(39), "a").error() == errc::stale_token);
    CHECK(f.newest(fk3).value() == fencing_token(40));
    CHECK(f.admit(fk3, fencing_token(41), "a"));
    CHECK(value_of(fk3) == "00000000000000000041:a");
  }
  SECTION("corrupt fences: above the token, below every token, or not a token at all") {
    const std::string corrupt = o.key_prefix + "fence/corrupt";
    for (const char* garbage : {"zzz", "", "-1", "12", "00000000000000000007;",
                                "00000000000000000007x", "00000000000000000007:"}) {
      adm.put(corrupt, garbage);
      INFO(garbage);
      CHECK(f.admit(corrupt, fencing_token(7), "a").error() == errc::protocol_error);
      CHECK(f.newest(corrupt).error() == errc::protocol_error);
      CHECK(f.last_error_message().find("does not hold a token") != std::string::npos);
      CHECK(value_of(corrupt) == garbage);
    }
  }
}

TEST_CASE("etcd_fence: racing writers, the newest token wins and stays",
          "[etcd][fence][concurrency]") {
  std::optional<etcd_options> base = shared_etcd();
  if (!base) return;
  const etcd_options o = isolated(*base);
  const std::string fk = o.key_prefix + "fence/race";
  std::vector<std::thread> threads;
  std::atomic<int> unexpected{0};
  for (int t = 0; t < 3; ++t) {
    threads.emplace_back([&, t] {
      etcd_fence f(o);
      for (int i = 1; i <= 15; ++i) {
        auto r = f.write(fk, fencing_token(static_cast<std::uint64_t>(i * 3 + t)),
                         "w" + std::to_string(t), fk + "/data", std::to_string(i * 3 + t));
        if (!r && r.error() != errc::stale_token) ++unexpected;
      }
    });
  }
  for (std::thread& th : threads) th.join();
  CHECK(unexpected == 0);
  etcd_fence f(o);
  CHECK(f.newest(fk).value() == fencing_token(47));
}

TEST_CASE("etcd_store: raise_token_floor lifts the revision; revision() reports it", "[etcd]") {
  std::optional<etcd_options> base = shared_etcd();
  if (!base) return;
  const etcd_options o = isolated(*base);
  etcd_store s(o);
  auto before = s.revision();
  REQUIRE(before);
  const fencing_token floor(before->value() + 25);
  REQUIRE(s.raise_token_floor(floor));
  auto g = s.try_acquire("after-floor", "a", 3s);
  REQUIRE(g);
  CHECK(g->token > floor);
  // Already at the floor exactly: the next grant is still above it.
  auto at = s.revision();
  REQUIRE(at);
  REQUIRE(s.raise_token_floor(*at));
  REQUIRE(s.release("after-floor", "a", g->token));
  g = s.try_acquire("after-floor", "a", 3s);
  REQUIRE(g);
  CHECK(g->token > *at);
  CHECK(s.raise_token_floor(fencing_token(1)));  // below: nothing to do
  CHECK(s.raise_token_floor(fencing_token(g->token.value() + 1000000)).error() ==
        errc::invalid_argument);
  CHECK(s.raise_token_floor(fencing_token{}).error() == errc::invalid_argument);
  REQUIRE(s.release("after-floor", "a", g->token));
}

TEST_CASE("etcd_store: raise_token_floor leaves a live lease named like its scratch key alone",
          "[etcd]") {
  // The scratch key it writes once per skipped revision was key_prefix + "#floor", the very
  // etcd key of a user lease named "#floor": overwritten (its lease detached) and then deleted.
  std::optional<etcd_options> base = shared_etcd();
  if (!base) return;
  const etcd_options o = isolated(*base);
  etcd_store s(o);
  for (const char* key : {"#floor", "#sha256/floor"}) {
    INFO(key);
    auto g = s.try_acquire(key, "holder", 5s);
    REQUIRE(g);
    auto now = s.revision();
    REQUIRE(now);
    REQUIRE(s.raise_token_floor(fencing_token(now->value() + 3)));
    auto seen = s.inspect(key);
    REQUIRE(seen);
    REQUIRE(seen->has_value());
    CHECK((*seen)->owner == "holder");
    CHECK((*seen)->token == g->token);
    CHECK(s.try_acquire(key, "other", 5s).error() == errc::busy);
    CHECK(s.release(key, "holder", g->token));
  }
}

// ------------------------------------------------------------------------------------------------
// try_acquire_all: every key in one kv/txn, or none (detail/etcd_multi.hpp).
// ------------------------------------------------------------------------------------------------

TEST_CASE("etcd_store try_acquire_all meets the kit's multi-key contract", "[etcd][multi]") {
  static_assert(holdfast::has_try_acquire_all_v<etcd_store>);
  std::optional<etcd_options> base = shared_etcd();
  if (!base) return;
  const etcd_options o = isolated(*base);
  etcd_store s(o);
  REQUIRE_CONFORMS(holdfast::testing::check_try_acquire_all(s, etcd_kit(o)));
  CHECK(s.last_error_message().empty());
  // Through a store that did not make the grants (renew and release read each key first).
  etcd_options forgetful = isolated(*base);
  forgetful.remembered_grants = 0;
  etcd_store f(forgetful);
  REQUIRE_CONFORMS(holdfast::testing::check_try_acquire_all(f, etcd_kit(forgetful)));
}

TEST_CASE("etcd_store try_acquire_all: one revision per call, busy leaves no key or lease",
          "[etcd][multi]") {
  std::optional<etcd_options> base = shared_etcd();
  if (!base) return;
  const etcd_options o = isolated(*base);
  etcd_store s(o);
  admin adm(o);
  const std::string_view keys[] = {"a", "b", "c"};
  holdfast::grant g[3];
  REQUIRE(s.try_acquire_all(keys, 3, "me", milliseconds(5000), g));
  CHECK(g[0].token == g[1].token);  // one transaction, one revision: each key's create_revision
  CHECK(g[1].token == g[2].token);
  CHECK(adm.lease_of("a") != adm.lease_of("b"));  // each key its own lease
  CHECK(s.release("b", "me", g[1].token));
  CHECK(adm.exists("a"));  // releasing one key leaves the others
  const std::string_view other[] = {"d", "a"};
  CHECK(s.try_acquire_all(other, 2, "you", milliseconds(5000), g).error() == errc::busy);
  CHECK(!adm.exists("d"));
  // A key someone else wrote (no lease) is protocol_error, and takes nothing.
  adm.put(o.key_prefix + "w", "someone");
  const std::string_view with_w[] = {"e", "w"};
  CHECK(s.try_acquire_all(with_w, 2, "me", milliseconds(5000), g).error() == errc::protocol_error);
  CHECK(!adm.exists("e"));
}

}  // namespace test_etcd_store
