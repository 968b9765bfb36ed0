// SPDX-License-Identifier: MIT
// tests/unit/test_failover_load_redis.cpp - multi-process fenced workloads while a Redis primary
// fails over (issue #20 part 5): a primary, two replicas and three Sentinels of the test's own;
// four worker processes (tests/support/failover_load.hpp) acquire one key through Sentinel (two
// with wait_replicas = 0, two durable ones with wait_replicas = 1 for kill -9 and 2, every
// replica, where the old primary lives on), write through a redis_fence on a Redis that
// does not fail over (the shared one of .ci/servers, else one of the test's own), and release,
// with a TTL of 1 s, while the test fails the primary over: kill -9; SIGSTOP until the sentinels
// promoted a replica, then SIGCONT (the old primary comes back believing it is the primary);
// SENTINEL FAILOVER with the old primary alive. Expected, each time (failover_load::check):
//   - the fence's own log (appended in the fence's script) is in token order and has one owner
//     per token: no second holder, no write under a token older than one admitted (S1);
//   - no grant a durable worker was told is lost (no later holder while it was valid);
//     grants of wait_replicas = 0 workers may be, and are counted;
//   - the workers get through the fence again with the next life's tokens, no operator acting,
//     within 30 s of the fault (measured: see the summary line each case prints).
// Cost on the 2-core CI machine: ~10 s per case (two replicas' first sync, Sentinel's
// failover, a second of load after recovery); the SENTINEL FAILOVER case too: the clients leave
// the old primary within a sentinel_recheck (1 s) of the sentinels naming the promoted replica.
#include <hiredis/hiredis.h>
#include <signal.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "../support/failover_load.hpp"
#include "../support/failover_load_redis.hpp"
#include "../support/real_servers.hpp"
#include "../support/redis_servers.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/stores/redis.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_failover_load_redis {

using holdfast::fencing_token;
using holdfast::redis_options;
using holdfast::redis_store;
using namespace std::chrono_literals;
namespace fl = failover_load;

namespace {

constexpr int ttl_ms = 1000;
constexpr char worker_test[] = "failover load redis worker";

/// One command on 127.0.0.1:`port`, behind the store's back; nullptr if it fails.
holdfast::detail::redis_reply_ptr try_cmd(int port, std::initializer_list<std::string> args) {
  return hf_test::redis_try_command(port, args, 2s);
}

std::string str_of(int port, std::initializer_list<std::string> args) {
  auto r = try_cmd(port, args);
  return r && r->str != nullptr ? std::string(r->str, r->len) : std::string();
}

long long array_size(int port, std::initializer_list<std::string> args) {
  auto r = try_cmd(port, args);
  return r && r->type == REDIS_REPLY_ARRAY ? static_cast<long long>(r->elements) : -1;
}

/// A Sentinel that starts knowing its peers and the replicas (`known-sentinel`,
/// `known-replica`), so that a failover needs no discovery first (hello messages every 2 s), with
/// failover-timeout 5 s (a failed election is retried after twice that).
class sentinel final : public hf_test::owned_server {
 public:
  explicit sentinel(int primary) : primary_(primary) {
    binary_ = hf_test::find_program("HOLDFAST_REDIS_SERVER", "redis-server",
                                    {"/usr/bin/redis-server", "/usr/local/bin/redis-server"});
    dir_ = hf_test::make_temp_dir("sentinel");
    port_ = hf_test::free_port();
    id_ = hf_test::random_tag(40);
  }
  ~sentinel() override { stop(); }
  [[nodiscard]] const std::string& id() const { return id_; }
  std::vector<int> replicas;
  std::vector<const sentinel*> peers;

 protected:
  bool prepare() override {
    FILE* f = binary_.empty() || dir_.empty() ? nullptr
                                              : std::fopen((dir_ + "/sentinel.conf").c_str(), "w");
    if (f == nullptr) {
      why_ = "no redis-server, temporary directory or sentinel.conf";
      return false;
    }
    std::fprintf(f,
                 "port %d\nbind 127.0.0.1\ndir %s\nsentinel myid %s\n"
                 "sentinel announce-ip 127.0.0.1\nsentinel monitor mymaster 127.0.0.1 %d 2\n"
                 "sentinel down-after-milliseconds mymaster 1000\n"
                 "sentinel failover-timeout mymaster 5000\nsentinel parallel-syncs mymaster 2\n",
                 port_, dir_.c_str(), id_.c_str(), primary_);
    for (int r : replicas) std::fprintf(f, "sentinel known-replica mymaster 127.0.0.1 %d\n", r);
    for (const sentinel* p : peers) {
      std::fprintf(f, "sentinel known-sentinel mymaster 127.0.0.1 %d %s\n", p->port(),
                   p->id().c_str());
    }
    std::fclose(f);
    return true;
  }
  std::vector<std::string> command() override {
    return {binary_, dir_ + "/sentinel.conf", "--sentinel"};
  }
  bool ready() override {
    return hf_test::tcp_exchange(port_, "*1\r\n$4\r\nPING\r\n").find("+PONG") != std::string::npos;
  }

 private:
  int primary_;
  std::string binary_, id_;
};

std::unique_ptr<hf_test::redis_server> own(int replica_of = 0) {
  hf_test::redis_server::config cfg;
  cfg.replica_of = replica_of;
  auto s = std::make_unique<hf_test::redis_server>(cfg);
  if (!s->start()) {
    const std::string why = "cannot start redis-server: " + s->why();
    if (hf_test::in_ci() || s->available()) FAIL(why);
    hf_test::loud_skip(why);
    return nullptr;
  }
  return s;
}

/// A primary, two replicas, three Sentinels watching them, and the fence's server.
struct deployment {
  std::unique_ptr<hf_test::redis_server> primary, replica1, replica2, own_fence;
  std::vector<std::unique_ptr<sentinel>> sentinels;
  int fence_port = 0;
  std::string dir = hf_test::make_temp_dir("failover-load");
  deployment() = default;
  deployment(const deployment&) = delete;
  deployment& operator=(const deployment&) = delete;
  ~deployment() {
    sentinels.clear();  // before the servers, so that nobody fails anything over while they stop
    if (!hf_test::env("HOLDFAST_FAILOVER_KEEP")) hf_test::remove_tree(dir);
  }
  [[nodiscard]] std::string sentinel_ports() const {
    std::string out;
    for (const auto& s : sentinels) out += (out.empty() ? "" : ",") + std::to_string(s->port());
    return out;
  }
  /// The primary's port as sentinel `i` names it (0 if it does not answer).
  [[nodiscard]] int primary_as_told(std::size_t i) const {
    auto r = try_cmd(sentinels[i]->port(), {"SENTINEL", "get-master-addr-by-name", "mymaster"});
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2) return 0;
    return std::atoi(r->element[1]->str);
  }
};

bool link_up(int port) {
  return str_of(port, {"INFO", "replication"}).find("master_link_status:up") != std::string::npos;
}

/// Starts `d` (bounded: ~20 s in all); false after a loud skip outside CI.
bool start(deployment& d) {
  d.primary = own();
  if (!d.primary) return false;
  d.replica1 = own(d.primary->port());
  d.replica2 = own(d.primary->port());
  REQUIRE(d.replica1);
  REQUIRE(d.replica2);
  REQUIRE(hf_test::wait_until(
      [&] { return link_up(d.replica1->port()) && link_up(d.replica2->port()); }, 10s));
  for (int i = 0; i < 3; ++i) {
    d.sentinels.push_back(std::make_unique<sentinel>(d.primary->port()));
    d.sentinels.back()->replicas = {d.replica1->port(), d.replica2->port()};
  }
  for (auto& s : d.sentinels) {
    for (auto& p : d.sentinels) {
      if (p != s) s->peers.push_back(p.get());
    }
    REQUIRE(s->start());
  }
  REQUIRE(hf_test::wait_until(
      [&] {
        for (const auto& s : d.sentinels) {
          if (array_size(s->port(), {"SENTINEL", "REPLICAS", "mymaster"}) != 2) return false;
          if (array_size(s->port(), {"SENTINEL", "SENTINELS", "mymaster"}) != 2) return false;
        }
        return true;
      },
      10s));
  if (std::optional<std::string> shared = hf_test::env("HOLDFAST_REDIS_PORT")) {
    d.fence_port = std::atoi(shared->c_str());
  } else {
    d.own_fence = own();
    REQUIRE(d.own_fence);
    d.fence_port = d.own_fence->port();
  }
  return true;
}

/// Runs the workload over `d`, calls fault(d) once the fence admitted some writes, and checks
/// the run (see the file's comment). The odd workers ask wait_replicas = `durable`: 1 where the
/// old primary dies, 2 (every replica) where it can serve on after the promotion (a replica not
/// yet re-pointed can acknowledge a grant there and drop it at its resync: redis_options).
void run_load(const std::string& name, deployment& d, const std::function<void(deployment&)>& fault,
              int durable = 1) {
  const auto began = std::chrono::steady_clock::now();
  const std::string tag = hf_test::random_tag();
  const std::string fence_key = "failover-load:" + tag + ":fence";
  const std::string log_key = "failover-load:" + tag + ":log";
  {
    fl::workers w(d.dir, worker_test);
    for (int i = 0; i < 4; ++i) {
      fl::settings s;
      s.set("key", "load");
      s.set("ttl_ms", ttl_ms);
      s.set("sentinels", d.sentinel_ports());
      s.set("wait_replicas", i % 2 == 1 ? durable : 0);
      s.set("fence_port", d.fence_port);
      s.set("fence_key", fence_key);
      s.set("log_key", log_key);
      w.start(i, s, i % 2 == 1);
    }
    const bool warm = hf_test::wait_until(
        [&] {
          return array_size(d.fence_port, {"LRANGE", log_key, "0", "9"}) >= 10;
        },
        15s);
    if (!warm) FAIL("no writes admitted before the fault\n" << w.output());
    const fl::ns fault_at = fl::now_ns();
    fault(d);
    const bool live = hf_test::wait_until(
        [&] { return fl::redis_newest_logged(d.fence_port, log_key) > fl::life_gap; }, 30s);
    std::this_thread::sleep_for(live ? 1000ms : 0ms);  // load after the recovery
    w.stop();
    const std::vector<fl::admitted> log = fl::redis_fence_log(d.fence_port, log_key);
    const fl::records r = w.read();
    const fl::verdict v = fl::check(log, r, fault_at);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
    std::printf("%s\n", fl::summary(name, v, r, seconds).c_str());
    INFO(fl::summary(name, v, r, seconds) << "\n" << w.output());
    fl::expect(v, w, live);
  }
  try_cmd(d.fence_port, {"DEL", fence_key, log_key});
}

}  // namespace

// Run by the cases below in worker processes (hidden: it does nothing unless
// HOLDFAST_FAILOVER_WORKER names a settings file).
TEST_CASE("failover load redis worker", "[.][failover-load]") {
  std::optional<fl::settings> s = fl::worker_settings();
  if (!s) return;
  redis_options o;
  o.sentinel_master = "mymaster";
  std::istringstream ports(s->get("sentinels"));
  for (std::string p; std::getline(ports, p, ',');)
    o.sentinels.push_back({"127.0.0.1", std::stoi(p)});
  o.wait_replicas = static_cast<int>(s->num("wait_replicas"));
  o.wait_timeout = 300ms;
  o.connect_timeout = 300ms;
  o.command_timeout = 1000ms;
  redis_store store(o);
  fl::run_redis_fenced_worker(store, *s);
}

TEST_CASE("failover load redis: kill -9 of the primary under fenced load",
          "[redis][failover][failover-load]") {
  deployment d;
  if (!start(d)) return;
  run_load("redis kill -9", d, [](deployment& x) { x.primary->kill9(); });
}

TEST_CASE("failover load redis: the primary frozen (SIGSTOP) past the TTL and the failover",
          "[redis][failover][failover-load]") {
  deployment d;
  if (!start(d)) return;
  run_load(
      "redis SIGSTOP", d,
      [](deployment& x) {
        const auto frozen = std::chrono::steady_clock::now();
        x.primary->pause();
        // Frozen until the sentinels promoted a replica (and at least twice the TTL): then it comes
        // back believing it is the primary, with its clients' requests still queued.
        const bool promoted = hf_test::wait_until(
            [&] {
              return std::chrono::steady_clock::now() - frozen >
                         2 * std::chrono::milliseconds(ttl_ms) &&
                     x.primary_as_told(0) != x.primary->port() && x.primary_as_told(0) != 0;
            },
            30s);
        x.primary->resume();
        std::printf(
            "failover load [redis SIGSTOP]: frozen %.2f s, %s\n",
            std::chrono::duration<double>(std::chrono::steady_clock::now() - frozen).count(),
            promoted ? "a replica was promoted meanwhile" : "no promotion within 30 s");
        CHECK(promoted);
      },
      2);
}

// Once [!mayfail] (session 7: in 3 of 7 runs no next-life token reached the fence within 30 s).
// The old primary keeps serving until Sentinel demotes it (over 30 s in those runs); the
// wait_replicas = 0 workers stayed on it and the wait_replicas = 1 ones had grants acknowledged
// by the replica not yet re-pointed and then lost. Now every store asks the sentinels again
// each sentinel_recheck (1 s) and moves to the promoted replica, and the durable workers ask
// every replica (wait_replicas = 2).
TEST_CASE("failover load redis: SENTINEL FAILOVER with the old primary alive",
          "[redis][failover][failover-load]") {
  deployment d;
  if (!start(d)) return;
  run_load(
      "redis SENTINEL FAILOVER", d,
      [](deployment& x) {
        // Asked again only while it answers NOGOODSLAVE (nothing done: the sentinel has not read
        // the replica's own INFO yet) or while, 12 s after an OK, the sentinel still names the
        // old primary: Sentinel's manual failover can end without a promotion (seen once in 8
        // runs: 0 grants of a next life in 30 s), and a failover that never happened tests
        // nothing of ours. (INPROG: one is under way; wait for it.)
        const int old_primary = x.primary->port();
        std::string said;
        int asked = 0;
        bool promoted = false;
        for (int round = 0; round < 3 && !promoted; ++round) {
          hf_test::wait_until(
              [&] {
                said = str_of(x.sentinels[0]->port(), {"SENTINEL", "FAILOVER", "mymaster"});
                ++asked;
                return said.rfind("NOGOODSLAVE", 0) != 0;
              },
              15s);
          promoted = hf_test::wait_until(
              [&] {
                const int now = x.primary_as_told(0);
                return now != 0 && now != old_primary;
              },
              12s);
        }
        std::printf("failover load [redis SENTINEL FAILOVER]: asked %d times, %s\n", asked,
                    promoted ? "a replica was promoted" : "no promotion in three rounds");
        CHECK(promoted);
      },
      2);
}

// ~1.5 s, no Sentinel (its two steps by hand, in its order). The limit of wait_replicas the load
// cases above cannot show with a 1 s TTL (their clients reach the promoted replica only once the
// old primary is demoted, ~10 s later): Sentinel promotes one replica and only then re-points the
// others at it, and until then the old primary, still serving, has a replica that acknowledges.
// Expected: A's grant, acknowledged by R2 (wait_replicas = 1), is lost when R2 resyncs from the
// promoted R1; B is granted the key on R1 while A's lease is valid; the fence admits B (its token
// is the next life's) and refuses A's next write (stale_token). With wait_replicas = 2 (every
// replica) the same grant is refused as grant_not_durable instead: R1 no longer acknowledges.
TEST_CASE(
    "failover load redis: wait_replicas = 1 loses a grant acknowledged by a replica re-pointed "
    "later",
    "[redis][failover]") {
  auto p = own();
  if (!p) return;
  auto r1 = own(p->port());
  auto r2 = own(p->port());
  auto f = own();
  REQUIRE(r1);
  REQUIRE(r2);
  REQUIRE(f);
  REQUIRE(hf_test::wait_until([&] { return link_up(r1->port()) && link_up(r2->port()); }, 10s));
  redis_options o;
  o.port = p->port();
  o.wait_replicas = 1;
  redis_store on_p(o);
  REQUIRE(on_p.try_acquire("warm-up", "w", 10s));  // acknowledged: R1 and R2 have the counter
  REQUIRE(hf_test::wait_until(
      [&] {
        return str_of(r1->port(), {"GET", "{holdfast}:token"}) == "1";
      },
      10s));
  // Sentinel's first step: promote R1.
  REQUIRE(str_of(r1->port(), {"REPLICAOF", "NO", "ONE"}) == "OK");
  SECTION("wait_replicas = 1: R2 acknowledges, and its resync from R1 loses the grant") {
    auto a = on_p.try_acquire("k", "A", 10s);
    INFO(on_p.last_error_message());
    REQUIRE(a);  // reported: R2 acknowledged it
    redis_options fo;
    fo.port = f->port();
    holdfast::redis_fence fence(fo);
    REQUIRE(fence.write("fence", a->token, "A", "data", "A-1"));
    // Sentinel's second step: re-point R2 at R1 (a full resync: R2 drops what only P had).
    REQUIRE(str_of(r2->port(), {"REPLICAOF", "127.0.0.1", std::to_string(r1->port())}) == "OK");
    REQUIRE(hf_test::wait_until([&] { return link_up(r2->port()); }, 10s));
    redis_options on_r1_o = o;
    on_r1_o.port = r1->port();
    redis_store on_r1(on_r1_o);
    auto b = on_r1.try_acquire("k", "B", 10s);  // A's lease (10 s) is still valid by its clock
    INFO(on_r1.last_error_message());
    REQUIRE(b);
    CHECK(b->token.value() > fl::life_gap);
    CHECK(fence.write("fence", b->token, "B", "data", "B-1"));
    CHECK(fence.write("fence", a->token, "A", "data", "A-2").error() ==
          holdfast::errc::stale_token);
    CHECK(str_of(f->port(), {"GET", "data"}) == "B-1");
  }
  SECTION("wait_replicas = 2 (every replica): the same grant is refused, nothing is held") {
    redis_options all = o;
    all.wait_replicas = 2;
    all.wait_timeout = 300ms;
    redis_store strict(all);
    auto a = strict.try_acquire("k", "A", 10s);
    REQUIRE_FALSE(a);
    CHECK(a.error() == holdfast::errc::grant_not_durable);
    auto held = try_cmd(p->port(), {"EXISTS", "{holdfast}:lease:k"});
    REQUIRE(held);
    CHECK(held->integer == 0);
  }
}

}  // namespace test_failover_load_redis
