// SPDX-License-Identifier: MIT
// Tests of stores/zookeeper.hpp against a real ZooKeeper server (the standalone one .ci/servers
// starts, HOLDFAST_ZK_HOSTS, else one of our own): the LeaseStore contract and the conformance
// kit, acquire/renew/release/inspect, busy, token order, the TTL mapping (min_ttl is the granted
// session timeout), protected create after a lost reply, the predecessor-watch hand-off (one
// wake and at most three requests per release), session expiry as a lost lease, and
// misconfiguration answered at once.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "../support/cut_proxy.hpp"
#include "../support/fail_fast.hpp"
#include "../support/real_servers.hpp"
#include "../support/zookeeper_servers.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/stores/zookeeper.hpp"
#include "holdfast/testing/conformance.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_zookeeper_store {

using holdfast::errc;
using holdfast::fencing_token;
using holdfast::zookeeper_options;
using holdfast::zookeeper_store;
using namespace std::chrono_literals;

namespace {

/// Options on the shared server with a root of their own (runs never see each other's nodes) and
/// a 2 s session (the server, tickTime 500 ms, grants 1 to 10 s).
std::optional<zookeeper_options> shared() {
  std::string why;
  std::optional<std::string> hosts = hf_test::shared_zookeeper(why);
  if (!hosts) {
    if (hf_test::in_ci()) FAIL(why);
    hf_test::loud_skip(why);
    return std::nullopt;
  }
  zookeeper_options o;
  o.hosts = *hosts;
  o.root = "/hf-test/" + hf_test::random_tag();
  o.session_timeout = 2000ms;
  o.max_owner_bytes = 2u << 20;  // the test servers run with jute.maxbuffer = 4 MiB
  return o;
}

/// A store whose link the tests reach: requests counted, faults injected, the session shown.
class open_store : public zookeeper_store {
 public:
  using zookeeper_store::zookeeper_store;
  holdfast::detail::zookeeper_link& link() { return link_; }
  /// Ends this store's session at the server, as an expiry would: a second handle joins the
  /// session with its id and password and closes it (the server deletes its nodes; this store
  /// hears SESSION_EXPIRED when it next reaches the server). Joining moves the session to the
  /// second connection; the store's client, reconnecting, could take it back before the close
  /// (a slow sanitized build often did, and the session lived on). So the store's client is
  /// first pointed at an address that refuses (127.0.0.2, a port bound here and not listening:
  /// the 3.8 C client treats another port on the same host as the same server), the session is
  /// closed, an ephemeral probe made in it is seen gone from a third session, and only then is
  /// the store's client given the server back. Bounded: about 10 s.
  void expire_session() {
    clientid_t id{};
    const std::string probe = "/hf-expire-probe-" + hf_test::random_tag();
    const int dead = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(dead >= 0);
    sockaddr_in at{};
    at.sin_family = AF_INET;
    at.sin_addr.s_addr = htonl(0x7f000002);  // 127.0.0.2
    socklen_t len = sizeof at;
    REQUIRE(::bind(dead, reinterpret_cast<sockaddr*>(&at), sizeof at) == 0);
    REQUIRE(::getsockname(dead, reinterpret_cast<sockaddr*>(&at), &len) == 0);
    const std::string nowhere = "127.0.0.2:" + std::to_string(ntohs(at.sin_port));
    {
      auto guard = link_.lock();
      REQUIRE(link_.handle() != nullptr);
      id = *zoo_client_id(link_.handle());
      REQUIRE(zoo_create(link_.handle(), probe.c_str(), "", 0, &ZOO_OPEN_ACL_UNSAFE, ZOO_EPHEMERAL,
                         nullptr, 0) == ZOK);
      REQUIRE(zoo_set_servers(link_.handle(), nowhere.c_str()) == ZOK);
    }
    // Whatever fails below, the store's client gets its server back and the port is freed.
    struct give_back {
      open_store& s;
      int fd;
      ~give_back() {
        auto guard = s.link_.lock();
        (void)zoo_set_servers(s.link_.handle(), s.link_.options().hosts.c_str());
        ::close(fd);
      }
    } restore{*this, dead};
    const char* hosts = link_.options().hosts.c_str();
    auto connected = [](zhandle_t* z) {
      return hf_test::wait_until([&] { return zoo_state(z) == ZOO_CONNECTED_STATE; }, 5000ms);
    };
    zhandle_t* other = zookeeper_init2(hosts, nullptr, 2000, &id, nullptr, 0, [](const char*) {});
    REQUIRE(other != nullptr);
    REQUIRE(connected(other));
    zookeeper_close(other);
    zhandle_t* look =
        zookeeper_init2(hosts, nullptr, 2000, nullptr, nullptr, 0, [](const char*) {});
    REQUIRE(look != nullptr);
    REQUIRE(connected(look));
    const bool ended = hf_test::wait_until(
        [&] { return zoo_exists(look, probe.c_str(), 0, nullptr) == ZNONODE; }, 5000ms);
    zookeeper_close(look);
    REQUIRE(ended);  // the session's ephemeral probe is gone: the server ended the session
  }
};

/// Raw requests behind the store's back.
class admin {
 public:
  explicit admin(const zookeeper_options& o) : link_(o), nodes_(link_) {
    auto guard = link_.lock();
    REQUIRE_FALSE(link_.ensure_connected());
  }
  std::string parent(std::string_view key) const {
    std::string p = link_.options().root + "/";
    holdfast::detail::zookeeper_key_name(key, p);
    return p;
  }
  /// The contender nodes under `key`, in order.
  std::vector<std::string> contenders(std::string_view key) {
    auto guard = link_.lock();
    auto kids = nodes_.children(parent(key));
    REQUIRE(kids);
    std::vector<std::string> out;
    for (const auto& c : *kids) out.push_back(c.name);
    return out;
  }
  /// Deletes every contender of `key` (the holder's session "expired" for this key only).
  void expire_now(std::string_view key) {
    auto guard = link_.lock();
    auto kids = nodes_.children(parent(key));
    REQUIRE(kids);
    for (const auto& c : *kids) (void)nodes_.remove(parent(key) + "/" + c.name);
  }

 private:
  holdfast::detail::zookeeper_link link_;
  holdfast::detail::zookeeper_nodes nodes_;
};

holdfast::testing::conformance_options zk_kit(const zookeeper_options& o) {
  auto adm = std::make_shared<admin>(o);
  holdfast::testing::conformance_options co;
  co.expire_now = [adm](std::string_view key) { adm->expire_now(key); };
  co.store_wide_tokens = false;  // czxids of queued contenders are older than later grants
  return co;
}

}  // namespace

// The kit's own expiry check (expiry_by_waiting: a lease not renewed must end by its TTL while
// its store lives; about 3.5 s of waiting on a 1 s session); check_store below forces expiry
// with expire_now (the session's end) instead.
TEST_CASE("zookeeper_store meets the LeaseStore contract", "[zookeeper][contract]") {
  std::optional<zookeeper_options> o = shared();
  if (!o) return;
  o->session_timeout = 1000ms;  // the server's minimum (2 ticks of 500 ms)
  zookeeper_store s(*o);
  holdfast::testing::conformance_options co = zk_kit(*o);
  co.expire_now = nullptr;
  co.expiry_by_waiting = 1000ms;
  const auto r = holdfast::testing::check_contract(s, co);
  INFO(r.summary());
  CHECK(r.ok());
  UNSCOPED_INFO(r.summary());
  CHECK(s.last_error_message().empty());
}

TEST_CASE("zookeeper_store passes the conformance kit (contract and simulated schedules)",
          "[zookeeper][contract]") {
  std::optional<zookeeper_options> base = shared();
  if (!base) return;
  holdfast::testing::conformance_options co = zk_kit(*base);
  co.schedules = 10;
  co.hostile_strings = true;
  co.run.ttl = 2000ms;  // the session timeout asked (and granted) below
  int made = 0;
  const holdfast::testing::conformance_report report = holdfast::testing::check_store(
      [&] {
        zookeeper_options o = *base;
        if (made++ > 0) o.root += "-" + std::to_string(made);
        return std::make_unique<zookeeper_store>(o);
      },
      co);
  INFO(report.summary());
  CHECK(report.ok());
  CHECK(report.contract_checks > 60);
}

TEST_CASE("zookeeper_store: acquire, busy, renew, inspect, release; tokens are czxids in order",
          "[zookeeper]") {
  std::optional<zookeeper_options> o = shared();
  if (!o) return;
  zookeeper_store a(*o);
  zookeeper_store b(*o);
  admin adm(*o);
  auto g = a.try_acquire("k", "A", 5000ms);
  REQUIRE(g);
  CHECK(g->ttl == 2000ms);  // the session timeout the server granted, at most what was asked
  CHECK(adm.contenders("k").size() == 1);
  CHECK(b.try_acquire("k", "B", 5000ms).error() == errc::busy);
  CHECK(adm.contenders("k").size() == 1);        // the busy attempt deleted its node
  auto again = a.try_acquire("k", "A", 5000ms);  // T1's retry rule: the same token
  REQUIRE(again);
  CHECK(again->token == g->token);
  CHECK(adm.contenders("k").size() == 1);
  auto r = a.renew("k", "A", g->token, 3000ms);
  REQUIRE(r);
  CHECK(r->token == g->token);
  CHECK(r->ttl == 2000ms);
  CHECK(b.renew("k", "B", g->token, 3000ms).error() == errc::lease_lost);
  CHECK(b.release("k", "A", fencing_token(g->token.value() + 1)).error() == errc::not_holder);
  auto seen = b.inspect("k");
  REQUIRE(seen);
  REQUIRE(*seen);
  CHECK((*seen)->owner == "A");
  CHECK((*seen)->token == g->token);
  // Another store with the same owner cannot renew a grant of this store's session.
  CHECK(b.renew("k", "A", g->token, 3000ms).error() == errc::lease_lost);
  REQUIRE(a.release("k", "A", g->token));
  CHECK(a.release("k", "A", g->token).error() == errc::not_holder);
  auto none = b.inspect("k");
  REQUIRE(none);
  CHECK_FALSE(*none);
  fencing_token last = g->token;
  for (int i = 0; i < 5; ++i) {
    zookeeper_store& s = i % 2 == 0 ? b : a;
    auto n = s.try_acquire("k", i % 2 == 0 ? "B" : "A", 2000ms);
    REQUIRE(n);
    CHECK(last < n->token);
    last = n->token;
    REQUIRE(s.release("k", i % 2 == 0 ? "B" : "A", n->token));
  }
}

TEST_CASE("zookeeper_store: a TTL under the granted session timeout is refused, naming min_ttl",
          "[zookeeper][min_ttl]") {
  std::optional<zookeeper_options> o = shared();
  if (!o) return;
  SECTION("the session asked for is granted") {
    zookeeper_store s(*o);
    CHECK(holdfast::store_min_ttl(s) == 2000ms);  // before the session: the one asked
    CHECK(s.try_acquire("k", "A", 1999ms).error() == errc::invalid_argument);
    CHECK(s.last_error_message().find("min_ttl of 2000 ms") != std::string::npos);
    auto g = s.try_acquire("k", "A", 2000ms);
    REQUIRE(g);
    CHECK(g->ttl == 2000ms);
    auto over = s.try_acquire("k2", "A", 2001ms);
    REQUIRE(over);
    CHECK(over->ttl == 2000ms);
  }
  SECTION("a session shorter than the server's minimum is raised, and min_ttl with it") {
    o->session_timeout = 200ms;  // the server's minimum is 2 ticks = 1000 ms
    zookeeper_store s(*o);
    auto g = s.try_acquire("k", "A", 500ms);
    CHECK(g.error() == errc::invalid_argument);
    CHECK(s.last_error_message().find("min_ttl of 1000 ms") != std::string::npos);
    CHECK(holdfast::store_min_ttl(s) == 1000ms);
    holdfast::acquire_report report;
    holdfast::acquire_options<> opts;
    opts.report = &report;
    CHECK(holdfast::try_acquire(s, "k", 999ms, opts).error() == errc::invalid_argument);
    CHECK(report.attempts == 0);  // refused by the lease layer, nothing sent
    auto ok = s.try_acquire("k", "A", 1000ms);
    REQUIRE(ok);
    CHECK(ok->ttl == 1000ms);
  }
}

TEST_CASE("zookeeper_store: a create whose reply is lost neither orphans a node nor queues twice",
          "[zookeeper][lost_reply]") {
  std::optional<zookeeper_options> o = shared();
  if (!o) return;
  open_store a(*o);
  zookeeper_store b(*o);
  admin adm(*o);
  int lost = 0;
  std::vector<std::string> ops;  // what the store asked, in order
  a.link().fault = [&](const char* op) {
    ops.emplace_back(op);
    if (std::string_view(op) != "create") return holdfast::detail::zookeeper_fault::none;
    ++lost;
    return holdfast::detail::zookeeper_fault::lost_reply;
  };
  SECTION("a grant: found by its prefix, data and session, and kept") {
    auto g = a.try_acquire("k", "A", 2000ms);
    CHECK(lost == 1);
    // The search reads a view at least as new as the create: a sync of the parent first.
    CHECK(ops == std::vector<std::string>{"create", "sync"});
    REQUIRE(g);
    CHECK(adm.contenders("k").size() == 1);
    a.link().fault = nullptr;
    CHECK(b.try_acquire("k", "B", 2000ms).error() == errc::busy);
    REQUIRE(a.release("k", "A", g->token));
    CHECK(adm.contenders("k").empty());
  }
  SECTION("busy, not queued: the found node is deleted") {
    auto h = b.try_acquire("k", "B", 2000ms);
    REQUIRE(h);
    CHECK(a.try_acquire("k", "A", 2000ms).error() == errc::busy);
    CHECK(lost == 1);
    CHECK(adm.contenders("k").size() == 1);
  }
  SECTION("busy, queued: one place, not two") {
    auto h = b.try_acquire("k", "B", 2000ms);
    REQUIRE(h);
    CHECK(a.try_acquire_queued("k", "A", 2000ms).error() == errc::busy);
    CHECK(adm.contenders("k").size() == 2);
    a.link().fault = nullptr;
    CHECK(a.try_acquire_queued("k", "A", 2000ms).error() == errc::busy);  // the same place
    CHECK(adm.contenders("k").size() == 2);
    REQUIRE(a.leave_queue("k"));
    CHECK(adm.contenders("k").size() == 1);
  }
}

TEST_CASE("zookeeper_store: a connection cut between create and its reply leaves what it reports",
          "[zookeeper][lost_reply]") {
  std::optional<zookeeper_options> o = shared();
  if (!o) return;
  const int server_port = std::stoi(o->hosts.substr(o->hosts.rfind(':') + 1));
  hf_test::cut_proxy proxy(server_port);
  REQUIRE(proxy.port() > 0);
  zookeeper_options via = *o;
  via.hosts = "127.0.0.1:" + std::to_string(proxy.port());
  zookeeper_store a(via);
  zookeeper_store b(*o);
  admin adm(*o);
  auto warm = a.try_acquire("warm", "A", 2000ms);  // the session is up before the cut
  REQUIRE(warm);
  // A create carries its path, data and ACL: well over 40 bytes; a ping is 12. Whether the
  // server applied the cut create is its business (here it has not, so far: the request of a
  // session that reconnected meanwhile is refused); either way the store leaves exactly what it
  // reports: a grant and its one node, or an error and no node.
  proxy.arm(40);
  auto g = a.try_acquire("k", "A", 2000ms);
  CHECK(proxy.cuts() == 1);
  if (g) {
    CHECK(adm.contenders("k").size() == 1);
  } else {
    CHECK(g.error() == errc::store_unavailable);
    CHECK(adm.contenders("k").empty());
    g = a.try_acquire("k", "A", 2000ms);
    REQUIRE(g);
    CHECK(adm.contenders("k").size() == 1);
  }
  CHECK(b.try_acquire("k", "B", 2000ms).error() == errc::busy);
  REQUIRE(a.release("k", "A", g->token));
  CHECK(adm.contenders("k").empty());
  // Queued: one place at most, never two.
  auto h = b.try_acquire("q", "B", 2000ms);
  REQUIRE(h);
  proxy.arm(40);
  const auto first = a.try_acquire_queued("q", "A", 2000ms);
  CHECK(proxy.cuts() == 2);
  CHECK_FALSE(first.has_value());
  CHECK(adm.contenders("q").size() == (first.error() == errc::busy ? 2u : 1u));
  CHECK(a.try_acquire_queued("q", "A", 2000ms).error() == errc::busy);
  CHECK(adm.contenders("q").size() == 2);
  REQUIRE(b.release("q", "B", h->token));
  REQUIRE(a.wait_for_release("q", std::chrono::steady_clock::now() + 5s));
  auto mine = a.try_acquire_queued("q", "A", 2000ms);
  REQUIRE(mine);
  CHECK(h->token < mine->token);
  CHECK(adm.contenders("q").size() == 1);
}

TEST_CASE(
    "zookeeper_store: a release wakes exactly the next waiter; the second in line is granted "
    "with no request, a later one with one list",
    "[zookeeper][wait_for_release]") {
  std::optional<zookeeper_options> o = shared();
  if (!o) return;
  open_store s(*o);
  zookeeper_store holder(*o);
  auto g = holder.try_acquire("k", "H", 2000ms);
  REQUIRE(g);
  constexpr int n = 3;
  std::atomic<int> queued{0};
  std::atomic<int> woken{0};    // waits that returned
  std::atomic<int> granted{0};  // of which ended in a grant
  std::atomic<int> permit{0};   // waiter i may release once permit > i
  std::vector<fencing_token> tokens(n);
  std::vector<std::chrono::milliseconds> ttls(n);
  std::vector<std::thread> waiters;
  for (int i = 0; i < n; ++i) {
    waiters.emplace_back([&, i] {
      // In order: waiter i queues once waiter i - 1 has.
      CHECK(hf_test::wait_until([&] { return queued.load() == i; }, 5000ms));
      const std::string owner = "W" + std::to_string(i);
      CHECK(s.try_acquire_queued("k", owner, 2000ms).error() == errc::busy);
      ++queued;
      for (int round = 0; round < 5; ++round) {
        CHECK(s.wait_for_release("k", std::chrono::steady_clock::now() + 20s));
        ++woken;
        auto w = s.try_acquire_queued("k", owner, 2000ms);
        if (!w) continue;
        tokens[static_cast<std::size_t>(i)] = w->token;
        ttls[static_cast<std::size_t>(i)] = w->ttl;
        ++granted;
        CHECK(hf_test::wait_until([&] { return permit.load() > i; }, 10000ms));
        CHECK(s.release("k", owner, w->token));
        return;
      }
    });
  }
  REQUIRE(hf_test::wait_until([&] { return queued.load() == n; }, 5000ms));
  std::this_thread::sleep_for(100ms);
  CHECK(woken == 0);
  std::vector<std::uint64_t> per_handoff;
  std::uint64_t before = s.link().requests();
  REQUIRE(holder.release("k", "H", g->token));
  for (int i = 0; i < n; ++i) {
    REQUIRE(hf_test::wait_until([&] { return granted.load() == i + 1; }, 10000ms));
    std::this_thread::sleep_for(150ms);  // a herd would wake the others meanwhile
    CHECK(woken == i + 1);               // one wake per release: the next in line only
    per_handoff.push_back(s.link().requests() - before);
    before = s.link().requests();
    ++permit;
  }
  for (auto& t : waiters) t.join();
  for (int i = 1; i < n; ++i) CHECK(tokens[i - 1] < tokens[i]);  // FIFO, tokens in order
  // The first hand-off: none of s's (the holder's delete is another store's): W0's list after
  // its create named H alone ahead, so H's deletion event is W0's grant. Its TTL is the session
  // timeout less the time since its wait's exists (zookeeper_ticket.hpp): under 2000 ms, and at
  // least half of it. Then each: the releasing waiter's delete (by name, no read first), the next
  // waiter's list (W1 and W2 had more than one node ahead), and a grant of the full timeout.
  CHECK(per_handoff[0] == 0);
  CHECK(ttls[0] < 2000ms);
  CHECK(ttls[0] >= 1000ms);
  for (int i = 1; i < n; ++i) {
    CHECK(per_handoff[static_cast<std::size_t>(i)] == 2);
    CHECK(ttls[static_cast<std::size_t>(i)] == 2000ms);
  }
}

TEST_CASE("zookeeper_store: a woken grant with no request keeps within its session's timeout",
          "[zookeeper][wait_for_release]") {
  using holdfast::detail::zookeeper_ticket;
  using holdfast::detail::zookeeper_woken_ttl;
  const auto start = std::chrono::steady_clock::now();
  zookeeper_ticket t;
  t.alone = true;
  t.ahead_gone = true;
  // Half the session timeout (1000 ms of 2000) since the wait's exists left: one tick (1 ns)
  // before, at, and after the boundary. Left: 1000 ms + 1 ns, 1000 ms (still granted), and
  // 1000 ms - 1 ns (asks again: a list restarts the session's timeout).
  t.heard = start - 1000ms + std::chrono::nanoseconds(1);
  CHECK(zookeeper_woken_ttl(t, start, 2000ms) == std::optional(1000ms));
  t.heard = start - 1000ms;
  CHECK(zookeeper_woken_ttl(t, start, 2000ms) == std::optional(1000ms));
  t.heard = start - 1000ms - std::chrono::nanoseconds(1);
  CHECK(zookeeper_woken_ttl(t, start, 2000ms) == std::nullopt);
  // Rounded down to whole ms; never more than the timeout.
  t.heard = start - std::chrono::microseconds(1500);
  CHECK(zookeeper_woken_ttl(t, start, 2000ms) == std::optional(1998ms));
  t.heard = start;
  CHECK(zookeeper_woken_ttl(t, start, 2000ms) == std::optional(2000ms));
  // No grant without both facts: the node ahead was the only one, and it was seen deleted.
  t.alone = false;
  CHECK(zookeeper_woken_ttl(t, start, 2000ms) == std::nullopt);
  t.alone = true;
  t.ahead_gone = false;
  CHECK(zookeeper_woken_ttl(t, start, 2000ms) == std::nullopt);

  // On the server: a waiter second in line whose holder kept the key past half the session
  // timeout is not granted by the event: one list, and a grant of the whole timeout.
  std::optional<zookeeper_options> o = shared();
  if (!o) return;
  open_store s(*o);
  zookeeper_store holder(*o);
  auto g = holder.try_acquire("k", "H", 2000ms);
  REQUIRE(g);
  REQUIRE(s.try_acquire_queued("k", "W", 2000ms).error() == errc::busy);
  std::thread late([&] {
    std::this_thread::sleep_for(1100ms);
    CHECK(holder.release("k", "H", g->token));
  });
  REQUIRE(s.wait_for_release("k", std::chrono::steady_clock::now() + 20s));
  late.join();
  const std::uint64_t before = s.link().requests();
  auto w = s.try_acquire_queued("k", "W", 2000ms);
  REQUIRE(w);
  CHECK(s.link().requests() - before == 1);  // the list
  CHECK(w->ttl == 2000ms);
  CHECK(g->token < w->token);
}

TEST_CASE("zookeeper_store: lease<> on a woken grant renews with the TTL it asked for",
          "[zookeeper][wait_for_release][lease]") {
  // The woken grant reports under min_ttl() (the session timeout less the time since the wait's
  // exists); a renewal with that TTL would be refused (invalid_argument). lease<> asks for the
  // 2000 ms it asked for, and its validity follows the shorter grant until then.
  std::optional<zookeeper_options> o = shared();
  if (!o) return;
  open_store s(*o);
  zookeeper_store holder(*o);
  admin adm(*o);
  auto g = holder.try_acquire("k", "H", 2000ms);
  REQUIRE(g);
  std::thread late([&] {  // releases once W is queued behind H
    CHECK(hf_test::wait_until([&] { return adm.contenders("k").size() == 2; }, 10000ms));
    CHECK(holder.release("k", "H", g->token));
  });
  holdfast::acquire_options<> ao;
  ao.owner = "W";
  auto l = holdfast::acquire(s, "k", 2000ms, 10s, ao);
  late.join();
  REQUIRE(l);
  CHECK(l->ttl() < 2000ms);  // woken: no request, under min_ttl()
  CHECK(l->asked_ttl() == 2000ms);
  CHECK(l->valid_until() <= l->acquired_at() + l->ttl());
  REQUIRE(l->renew());
  CHECK(l->ttl() == 2000ms);
  CHECK(l->asked_ttl() == 2000ms);
  CHECK(l->release());
}

// Issue 24 part 2: a queued node whose caller left (a lost create reply it could not search for,
// its deadline, a cancel, an exception after the create reached the server) must not block the
// key while the store's session lives on (it would: the session's pings keep it). Expected in
// every section: the node is gone within 1 s (the reaper's 100 ms rounds, or at once), and the
// next contender, queued behind the holder, is granted within 1 s of the release (one delete,
// the watch, one list: a few round trips), not after the 2 s session timeout. About 0.3 s each.
TEST_CASE("zookeeper_store: a place whose caller left does not block the key",
          "[zookeeper][leave]") {
  std::optional<zookeeper_options> o = shared();
  if (!o) return;
  zookeeper_store h(*o);
  open_store s(*o);
  zookeeper_store n(*o);
  admin adm(*o);
  auto hg = h.try_acquire("k", "H", 2000ms);
  REQUIRE(hg);
  using holdfast::detail::zookeeper_fault;
  SECTION("a create whose reply was lost, and whose search could not run") {
    s.link().fault = [](const char*) { return zookeeper_fault::lost_reply; };  // create, sync
    CHECK(s.try_acquire_queued("k", "V", 2000ms).error() == errc::store_unavailable);
    s.link().fault = nullptr;
  }
  SECTION("its deadline passed while it waited for the node ahead") {
    holdfast::acquire_options<> ao;
    ao.owner = "V";
    CHECK(holdfast::acquire(s, "k", 2000ms, 150ms, ao).error() == errc::timeout);
  }
  SECTION("it was cancelled while it waited") {
    holdfast::cancel_source src;
    holdfast::acquire_options<> ao;
    ao.owner = "V";
    ao.cancel = src.token();
    std::thread v(
        [&] { CHECK(holdfast::acquire(s, "k", 2000ms, 10s, ao).error() == errc::cancelled); });
    CHECK(hf_test::wait_until([&] { return adm.contenders("k").size() == 2; }, 2000ms));
    src.request_stop();
    v.join();
  }
  SECTION("an exception left its wait") {
    s.link().fault = [](const char* op) {
      if (std::string_view(op) == "wait") throw std::runtime_error("the caller's own");
      return zookeeper_fault::none;
    };
    holdfast::acquire_options<> ao;
    ao.owner = "V";
    CHECK_THROWS_AS(holdfast::acquire(s, "k", 2000ms, 10s, ao), std::runtime_error);
  }
  SECTION("an exception left the call after its create reached the server") {
    s.link().fault = [](const char* op) {
      if (std::string_view(op) == "create") throw std::runtime_error("the caller's own");
      return zookeeper_fault::none;
    };
    CHECK_THROWS_AS(s.try_acquire_queued("k", "V", 2000ms), std::runtime_error);
  }
  s.link().fault = nullptr;
  REQUIRE(hf_test::wait_until([&] { return adm.contenders("k").size() == 1; }, 1000ms));
  CHECK(n.try_acquire_queued("k", "N", 2000ms).error() == errc::busy);
  std::atomic<long long> took_ms{-1};
  const auto released = std::chrono::steady_clock::now() + 100ms;
  std::thread next([&] {
    for (int round = 0; round < 5; ++round) {
      CHECK(n.wait_for_release("k", std::chrono::steady_clock::now() + 5s));
      if (auto g = n.try_acquire_queued("k", "N", 2000ms)) {
        took_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - released)
                      .count();
        CHECK(n.release("k", "N", g->token));
        return;
      }
    }
  });
  std::this_thread::sleep_until(released);
  REQUIRE(h.release("k", "H", hg->token));
  next.join();
  INFO("the next contender was granted " << took_ms.load() << " ms after the release");
  CHECK(took_ms.load() >= 0);
  CHECK(took_ms.load() < 1000);  // a hand-off takes milliseconds; the session ends after 2 s
}

TEST_CASE("zookeeper_store: an expired session is a lost lease, and says so",
          "[zookeeper][session]") {
  std::optional<zookeeper_options> o = shared();
  if (!o) return;
  open_store s(*o);
  zookeeper_store other(*o);
  auto g = s.try_acquire("k", "A", 2000ms);
  REQUIRE(g);
  s.expire_session();
  // The server deletes the node with the session: another owner gets the key once the server has
  // processed the close (not always before zookeeper_close returns: ci-run9 under ASan was busy).
  std::optional<holdfast::result<holdfast::grant>> h;
  REQUIRE(hf_test::wait_until(
      [&] {
        h = other.try_acquire("k", "B", 2000ms);
        return h->has_value();
      },
      5000ms));
  CHECK(g->token < (*h)->token);
  for (int i = 0; i < 50; ++i) {
    auto r = s.renew("k", "A", g->token, 2000ms);
    REQUIRE_FALSE(r.has_value());
    if (r.error() == errc::lease_lost) break;
    // Until the store hears of the expiry: a transient error (a reply that did not come within
    // the session's bounds is a timeout; ci-run11 under ASan at load 23 saw one).
    CHECK((r.error() == errc::store_unavailable || r.error() == errc::timeout));
    std::this_thread::sleep_for(100ms);
  }
  CHECK(s.renew("k", "A", g->token, 2000ms).error() == errc::lease_lost);
  CHECK(s.last_error_message().find("expired") != std::string::npos);
  // The store opened a new session and serves again.
  CHECK(s.try_acquire("k", "A", 2000ms).error() == errc::busy);
  REQUIRE(other.release("k", "B", (*h)->token));
  CHECK(s.try_acquire("k", "A", 2000ms).has_value());
}

// Once [!mayfail] (session 7, ci-asan18: the lease never left `held` within 10 s): the session
// had not ended, the store's client having taken it back from expire_session()'s second handle
// before the close. expire_session() now keeps the store's client away meanwhile and checks an
// ephemeral probe is gone, so the session has ended when it returns.
TEST_CASE("zookeeper_store: a session expiry reaches the holder's on_lost as session_expired",
          "[zookeeper][session]") {
  std::optional<zookeeper_options> o = shared();
  if (!o) return;
  o->session_timeout = 4000ms;  // validity to spare while the store hears of the expiry
  open_store s(*o);
  std::vector<holdfast::loss_cause> told;
  holdfast::acquire_options ao;
  ao.on_lost = [&](holdfast::loss_cause c) { told.push_back(c); };
  auto l = holdfast::try_acquire(s, "k", 4000ms, ao);
  REQUIRE(l);
  CHECK_FALSE(s.session_expired("k", l->owner(), l->token()));
  s.expire_session();
  // Renew until the store hears of the expiry: renewals succeed until the server has processed
  // the close (under load, seconds: ci-run at load 20), then fail transiently, then lease_lost.
  REQUIRE(hf_test::wait_until(
      [&] { return !l->renew() && l->state() != holdfast::lease_state::held; }, 10000ms));
  CHECK(l->loss() == holdfast::loss_cause::session_expired);
  CHECK(told == std::vector<holdfast::loss_cause>{holdfast::loss_cause::session_expired});
  CHECK(s.session_expired("k", l->owner(), l->token()));
  CHECK_FALSE(s.session_expired("k", "someone else", l->token()));
  CHECK(std::string(holdfast::to_string(holdfast::loss_cause::session_expired)) ==
        "session_expired");
}

TEST_CASE("zookeeper_store: a grant not renewed ends by its TTL while its store's session lives",
          "[zookeeper][expiry]") {
  std::optional<zookeeper_options> o = shared();
  if (!o) return;
  o->session_timeout = 1000ms;
  zookeeper_store a(*o);
  zookeeper_store b(*o);
  admin adm(*o);
  REQUIRE(a.try_acquire("warm", "A", 1000ms));  // the session (and min_ttl) before timing
  const auto t0 = std::chrono::steady_clock::now();
  auto g = a.try_acquire("k", "A", 1000ms);
  REQUIRE(g);
  REQUIRE(g->ttl == 1000ms);
  // Before its end (t0 + TTL, less a margin for the test's own calls): held, also across stores.
  std::this_thread::sleep_until(t0 + 600ms);
  const auto renewed = std::chrono::steady_clock::now();  // before the call: the end's origin
  auto r = a.renew("k", "A", g->token, 1000ms);           // moves the end to about t0 + 1600 ms
  REQUIRE(r);
  std::this_thread::sleep_until(t0 + 1350ms);  // past the first end, before the renewed one
  CHECK(b.try_acquire("k", "B", 1000ms).error() == errc::busy);
  CHECK(adm.contenders("k").size() == 1);
  // After the renewed end the reaper deletes the node although the session lives on: another
  // store is granted the key (a greater token), the old holder can neither renew nor release.
  std::optional<holdfast::grant> h;
  REQUIRE(hf_test::wait_until(
      [&] {
        auto x = b.try_acquire("k", "B", 1000ms);
        if (x) h = *x;
        return x.has_value();
      },
      3000ms));
  const auto taken = std::chrono::steady_clock::now();
  CHECK(taken >= renewed + 1000ms - 5ms);   // never before the TTL after the renewal began
  CHECK(taken < renewed + 1000ms + 400ms);  // the reaper is on time (not a session's end)
  CHECK(g->token < h->token);
  CHECK(a.renew("k", "A", g->token, 1000ms).error() == errc::lease_lost);
  CHECK(a.release("k", "A", g->token).error() == errc::not_holder);
  CHECK_FALSE(a.session_expired("k", "A", g->token));  // its TTL ended it, not the session
  REQUIRE(b.release("k", "B", h->token));
  // One's own expired grant comes back with a new token; "warm" (not renewed) went too.
  auto again = a.try_acquire("k", "A", 1000ms);
  REQUIRE(again);
  CHECK(h->token < again->token);
  CHECK(adm.contenders("warm").empty());
}

// Writes `value` and a newline to <dir>/<name> in one rename, so a reader in another process never
// sees half of it.
namespace {
void publish(const std::string& dir, const std::string& name, const std::string& value) {
  std::ofstream(dir + "/" + name + ".tmp") << value << "\n";
  REQUIRE(::rename((dir + "/" + name + ".tmp").c_str(), (dir + "/" + name).c_str()) == 0);
}
// A holder's valid_until() as nanoseconds of steady_clock (CLOCK_MONOTONIC: one clock for every
// process on this machine), in <dir>/valid_until.
void publish_valid_until(const std::string& dir, std::chrono::steady_clock::time_point t) {
  publish(dir, "valid_until",
          std::to_string(
              std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count()));
}
}  // namespace

// The child of the SIGSTOP test (run as `<this executable> "[.zookeeper_child]"` with
// HOLDFAST_ZK_CHILD=<hosts>|<root>|<dir>): acquires "stopped" as "child" through holdfast::lease
// on a 1 s session, writes its token to <dir>/token and its valid_until() to <dir>/valid_until
// (again after each renewal), then renews every 50 ms and appends what it
// saw to <dir>/log ("ok", "lost <valid 0|1> <cause>", "err <code>") until it is lost.
TEST_CASE("zookeeper child process (the SIGSTOP test's)", "[.zookeeper_child]") {
  const std::optional<std::string> spec = hf_test::env("HOLDFAST_ZK_CHILD");
  REQUIRE(spec);
  const std::size_t a = spec->find('|');
  const std::size_t b = spec->find('|', a + 1);
  zookeeper_options o;
  o.hosts = spec->substr(0, a);
  o.root = spec->substr(a + 1, b - a - 1);
  const std::string dir = spec->substr(b + 1);
  o.session_timeout = 1000ms;
  zookeeper_store s(o);
  auto l = holdfast::try_acquire(s, "stopped", 1000ms);
  REQUIRE(l);
  publish(dir, "token", std::to_string(l->token().value()));
  publish_valid_until(dir, l->valid_until());
  std::ofstream log(dir + "/log");
  for (int i = 0; i < 400; ++i) {
    std::this_thread::sleep_for(50ms);
    const bool valid_before = l->valid();
    auto r = l->renew();
    if (r) {
      publish_valid_until(dir, l->valid_until());
      log << "ok" << std::endl;
      continue;
    }
    if (r.error() == errc::lease_lost || l->state() == holdfast::lease_state::lost) {
      log << "lost " << valid_before << " " << holdfast::to_string(l->loss()) << " "
          << s.last_error_message() << std::endl;
      return;
    }
    log << "err " << r.error().message() << std::endl;
  }
}

TEST_CASE("zookeeper_store: a client stopped past its session timeout loses its lease, and knows",
          "[zookeeper][session]") {
  std::optional<zookeeper_options> o = shared();
  if (!o) return;
  const std::string dir = hf_test::make_temp_dir("zk-child");
  REQUIRE_FALSE(dir.empty());
  ::setenv("HOLDFAST_ZK_CHILD", (o->hosts + "|" + o->root + "|" + dir).c_str(), 1);
  char self[4096] = {};
  REQUIRE(::readlink("/proc/self/exe", self, sizeof self - 1) > 0);
  const pid_t child = hf_test::spawn({self, "[.zookeeper_child]"}, dir + "/child.out", {}, dir);
  ::unsetenv("HOLDFAST_ZK_CHILD");
  REQUIRE(child > 0);
  REQUIRE(
      hf_test::wait_until([&] { return !hf_test::read_file(dir + "/token").empty(); }, 10000ms));
  const fencing_token child_token(std::stoull(hf_test::read_file(dir + "/token")));
  holdfast::zookeeper_fence fence(*o);
  const std::string f = o->root + "/stopped-fence";
  REQUIRE(fence.admit(f, child_token, "child"));
  zookeeper_store s(*o);
  CHECK(s.try_acquire("stopped", "parent", 2000ms).error() == errc::busy);
  ::kill(child, SIGSTOP);
  const auto stopped = std::chrono::steady_clock::now();
  // The server ends the frozen client's session 1 s (its timeout, rounded up to a tick of 500 ms)
  // after it last heard from it: the key is free within about 1.5 s of the stop. The bound that
  // matters is not the stop but the holder's own validity: the key is never free while the child
  // still trusted its lease. Its last renewal may have begun up to 50 ms (plus a round trip)
  // before the stop, so "1 s after the stop" is not a bound (CI once saw 958 ms, legitimately).
  std::optional<holdfast::grant> mine;
  REQUIRE(hf_test::wait_until(
      [&] {
        auto g = s.try_acquire("stopped", "parent", 2000ms);
        if (g) mine = *g;
        return g.has_value();
      },
      5000ms));
  const auto freed = std::chrono::steady_clock::now() - stopped;
  INFO("freed " << std::chrono::duration_cast<std::chrono::milliseconds>(freed).count()
                << " ms after SIGSTOP");
  std::printf(
      "zookeeper: a SIGSTOPped holder's key (session 1000 ms) was free %lld ms later\n",
      static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(freed).count()));
  const std::chrono::steady_clock::time_point child_valid_until(
      std::chrono::nanoseconds(std::stoll(hf_test::read_file(dir + "/valid_until"))));
  INFO("the child's validity ended "
       << std::chrono::duration_cast<std::chrono::milliseconds>(child_valid_until - stopped).count()
       << " ms after SIGSTOP");
  CHECK(stopped + freed >= child_valid_until);  // no overlap with the frozen holder's validity
  CHECK(freed >= 1000ms - 50ms - 200ms);        // the session ran its timeout from the last renewal
  CHECK(freed < 3000ms);
  CHECK(child_token < mine->token);
  REQUIRE(fence.admit(f, mine->token, "parent"));
  ::kill(child, SIGCONT);
  const int status = hf_test::wait_exit(child, 10000ms);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  const std::string log = hf_test::read_file(dir + "/log");
  INFO("child log:\n" << log << "\nchild output:\n" << hf_test::read_file(dir + "/child.out"));
  // Resumed, the child finds its validity gone (lease<> knows it without the store) or hears
  // lease_lost from renew; it never renews successfully after the stop.
  const std::size_t lost_at = log.find("lost ");
  REQUIRE(lost_at != std::string::npos);
  CHECK(log.find("lost 0 ") != std::string::npos);  // not valid any more when it woke
  // And its stale token is refused by the fence the new holder wrote through.
  CHECK(fence.admit(f, child_token, "child").error() == errc::stale_token);
  hf_test::remove_tree(dir);
}

TEST_CASE("zookeeper_store: deployment() names a standalone server as a risk",
          "[zookeeper][deployment]") {
  std::optional<zookeeper_options> o = shared();
  if (!o) return;
  zookeeper_store s(*o);
  auto d = s.deployment();
  REQUIRE(d);
  INFO(d->facts);
  CHECK(d->facts.find("members=1 mode=standalone version=3.") != std::string::npos);
  CHECK(d->facts.find("session_timeout=2000ms") != std::string::npos);
  REQUIRE(d->can_lose_grants());
  CHECK(d->risks.front().find("standalone") != std::string::npos);
  CHECK(d->life.rfind("epoch ", 0) == 0);
}

TEST_CASE("zookeeper_store: misconfiguration is answered at once, an absent server in bound",
          "[zookeeper][errors]") {
  SECTION("hosts the client cannot parse or resolve") {
    zookeeper_options o;
    o.hosts = "no-such-host.invalid:2181";
    o.session_timeout = 2000ms;  // under check_fails_fast's TTL of 3 s
    zookeeper_store s(o);
    hf_test::check_fails_fast(s, errc::misconfigured);
    CHECK(s.last_error_message().find("zookeeper_options::hosts") != std::string::npos);
  }
  SECTION("bad options name the field") {
    zookeeper_options o;
    o.root = "holdfast";
    o.session_timeout = 2000ms;
    zookeeper_store s(o);
    hf_test::check_fails_fast(s, errc::invalid_argument);
    CHECK(s.last_error_message().find("root") != std::string::npos);
  }
  SECTION("a chroot that does not exist is named; once it exists the same hosts work") {
    std::optional<zookeeper_options> o = shared();
    if (!o) return;
    const std::string chroot = "/hf-chroot-" + hf_test::random_tag();
    zookeeper_options rooted = *o;
    rooted.hosts += chroot;
    rooted.root = "/holdfast";
    {
      zookeeper_store s(rooted);
      hf_test::check_fails_fast(s, errc::misconfigured);
      CHECK(s.last_error_message().find("chroot " + chroot) != std::string::npos);
      CHECK(s.last_error_message().find("create it, or drop it from hosts") != std::string::npos);
    }
    zookeeper_options maker = *o;  // makes the chroot as the parent of its own root
    maker.root = chroot + "/made";
    zookeeper_store m(maker);
    REQUIRE(m.try_acquire("k", "M", 3000ms));
    zookeeper_store s(rooted);
    auto g = s.try_acquire("k", "A", 3000ms);
    INFO(s.last_error_message());
    CHECK(g);
  }
  SECTION("a port over 65535 is refused by the options check, named") {
    for (const char* hosts : {"127.0.0.1:99999", "127.0.0.1:2181,127.0.0.1:0/app"}) {
      zookeeper_options o;
      o.hosts = hosts;
      o.session_timeout = 2000ms;
      std::string why;
      CHECK(o.check(&why) == errc::invalid_argument);
      CHECK(why.find("out of range 1 .. 65535") != std::string::npos);
      zookeeper_store s(o);
      hf_test::check_fails_fast(s, errc::invalid_argument);
    }
    zookeeper_options fine;
    fine.hosts = "127.0.0.1:65535,[::1]:2181/app:1";  // the chroot is not a port
    CHECK_FALSE(fine.check());
  }
  SECTION("nothing listens: store_unavailable after connect_timeout, no grant") {
    zookeeper_options o;
    o.hosts = "127.0.0.1:" + std::to_string(hf_test::free_port());
    o.connect_timeout = 300ms;
    zookeeper_store s(o);
    const auto t0 = std::chrono::steady_clock::now();
    CHECK(s.try_acquire("k", "A", 20000ms).error() == errc::store_unavailable);
    CHECK(std::chrono::steady_clock::now() - t0 < 2s);
    CHECK(s.last_error_message().find("connect_timeout") != std::string::npos);
  }
}

TEST_CASE("zookeeper_fence admits and writes in one multi, refuses older and reissued tokens",
          "[zookeeper][fence]") {
  std::optional<zookeeper_options> o = shared();
  if (!o) return;
  holdfast::zookeeper_fence fence(*o);
  const std::string f = o->root + "/fences/orders";
  const std::string d = o->root + "/data/orders";
  CHECK(fence.newest(f).value() == fencing_token());
  REQUIRE(fence.write(f, fencing_token(10), "A", d, "v10"));
  CHECK(fence.get(d).value() == std::optional<std::string>("v10"));
  REQUIRE(fence.write(f, fencing_token(10), "A", d, "v10b"));  // the same holder again
  CHECK(fence.write(f, fencing_token(10), "B", d, "x").error() == errc::token_reissued);
  CHECK(fence.write(f, fencing_token(9), "C", d, "x").error() == errc::stale_token);
  CHECK(fence.get(d).value() == std::optional<std::string>("v10b"));  // refusals changed nothing
  REQUIRE(fence.admit(f, fencing_token(12), "D"));
  CHECK(fence.newest(f).value() == fencing_token(12));
  CHECK(fence.write(f, fencing_token(11), "A", d, "late").error() == errc::stale_token);
  CHECK(fence.get(d).value() == std::optional<std::string>("v10b"));
  CHECK(fence.admit(f, fencing_token(), "A").error() == errc::invalid_argument);
  CHECK(fence.admit("relative", fencing_token(1), "A").error() == errc::invalid_argument);
  // The tokens zookeeper_store issues go through it: a stalled holder is refused.
  zookeeper_store s(*o);
  auto g1 = s.try_acquire("k", "A", 2000ms);
  REQUIRE(g1);
  REQUIRE(s.release("k", "A", g1->token));
  auto g2 = s.try_acquire("k", "B", 2000ms);
  REQUIRE(g2);
  REQUIRE(fence.write(f + "2", g2->token, "B", d, "from B"));
  CHECK(fence.write(f + "2", g1->token, "A", d, "from stalled A").error() == errc::stale_token);
  CHECK(fence.get(d).value() == std::optional<std::string>("from B"));
}

TEST_CASE("zookeeper_fence: racing writers, the newest token wins and stays",
          "[zookeeper][fence][concurrency]") {
  std::optional<zookeeper_options> o = shared();
  if (!o) return;
  const std::string f = o->root + "/race/fence";
  const std::string d = o->root + "/race/data";
  std::vector<std::thread> writers;
  std::atomic<int> admitted{0};
  for (int w = 0; w < 4; ++w) {
    writers.emplace_back([&, w] {
      holdfast::zookeeper_fence fence(*o);
      for (int i = 1; i <= 10; ++i) {
        const auto t = static_cast<std::uint64_t>(i * 4 + w);
        auto r = fence.write(f, fencing_token(t), "W" + std::to_string(w), d, std::to_string(t));
        if (r) {
          ++admitted;
        } else {
          CHECK(r.error() == errc::stale_token);
        }
      }
    });
  }
  for (auto& t : writers) t.join();
  holdfast::zookeeper_fence fence(*o);
  CHECK(admitted >= 10);
  CHECK(fence.newest(f).value() == fencing_token(43));
  CHECK(fence.get(d).value() == std::optional<std::string>("43"));
}

}  // namespace test_zookeeper_store
