// SPDX-License-Identifier: MIT
// tests/unit/test_redis_cluster_load.cpp - a slot migration under a multi-process fenced
// workload (issue #24 part 2): the Redis Cluster of the test executable's own (three primaries
// with a replica each, tests/support/redis_cluster_servers.hpp: shared with
// test_redis_cluster.cpp's fault cases); four worker PROCESSES (tests/support/failover_load.hpp:
// blocking acquire -> fenced write -> a pause, now and then past the TTL -> a second fenced write
// -> release) contend for one key through redis_cluster_store, writing through a redis_fence on a
// Redis outside the cluster (the shared one of .ci/servers, else one of the test's own), while
// the test moves the key's slot to another primary by hand, as `redis-cli --cluster reshard`
// does (SETSLOT IMPORTING / MIGRATING, MIGRATE one key per batch with a pause between, SETSLOT
// NODE): the key's record, its slot's counter and life record move one by one, so the workers
// meet ASK and TRYAGAIN while the slot is split, and MOVED after.
// Expected (failover_load::check and expect):
//   - the fence's own log is in token order with one owner per token: no second holder under
//     one token, no write admitted after a newer token (S1);
//   - no grant is lost: a migration moves the record with its TTL, so no two workers ever
//     believed they held the key at one instant (every worker counts as "acknowledged");
//   - tokens rise across the move: the target primary's first grant in the slot raises the
//     counter by 2^32 (another server life), and such a token gets through the fence;
//   - every worker process is granted the key again after the migration ended.
// Cost: ~3 s of load (and ~5 s to create the cluster, if no case of the executable did).
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "../support/failover_load.hpp"
#include "../support/failover_load_redis.hpp"
#include "../support/real_servers.hpp"
#include "../support/redis_cluster_servers.hpp"
#include "../support/redis_servers.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/stores/redis_cluster.hpp"
#include "holdfast/stores/redis_fence.hpp"

namespace test_redis_cluster_load {

using holdfast::fencing_token;
using namespace std::chrono_literals;
namespace fl = failover_load;

namespace {

constexpr int ttl_ms = 1000;
constexpr char worker_test[] = "cluster migration load worker";

/// The workers that were told of a grant after `since` (ns, steady clock).
std::set<int> granted_after(const fl::records& r, fl::ns since) {
  std::set<int> out;
  for (const fl::grant_told& g : r.grants) {
    if (g.told > since) out.insert(g.worker);
  }
  return out;
}

}  // namespace

TEST_CASE("cluster migration load worker", "[.][failover-load]") {
  std::optional<fl::settings> s = fl::worker_settings();
  if (!s) return;
  holdfast::redis_cluster_options o;
  std::istringstream ports(s->get("seeds"));
  for (std::string p; std::getline(ports, p, ',');) o.nodes.push_back({"127.0.0.1", std::stoi(p)});
  const std::string tag = s->get("tag");
  o.node.key_prefix = "hf-" + tag + ":lease:";
  o.node.counter_key = "hf-" + tag + ":token:";
  o.node.wait_prefix = "hf-" + tag + ":wait:";
  o.node.connect_timeout = 300ms;
  o.node.command_timeout = 1000ms;
  holdfast::redis_cluster_store store(o);
  fl::run_redis_fenced_worker(store, *s);
}

TEST_CASE("redis_cluster_store: a slot migrated under a multi-process fenced workload",
          "[redis][cluster][faults][failover-load]") {
  hf_test::redis_cluster* own = hf_test::own_redis_cluster();
  if (own == nullptr) return;
  hf_test::redis_cluster& c = *own;
  std::unique_ptr<hf_test::redis_server> own_fence;
  int fence_port = 0;
  if (std::optional<std::string> shared = hf_test::env("HOLDFAST_REDIS_PORT")) {
    fence_port = std::atoi(shared->c_str());
  } else {
    own_fence = std::make_unique<hf_test::redis_server>();
    REQUIRE(own_fence->start());
    fence_port = own_fence->port();
  }
  const std::string key = "mig-load";
  const std::size_t slot = holdfast::redis_cluster_store::slot_of(key);
  const int from = c.primary_of(slot, c.node(0).port());
  REQUIRE(from >= 0);
  const int other = hf_test::redis_cluster_other_primary(c, from);
  REQUIRE(other >= 0);
  const auto to = static_cast<std::size_t>(other);
  const std::string tag = hf_test::random_tag();
  const std::string fence_key = "cluster-load:" + tag + ":fence";
  const std::string log_key = "cluster-load:" + tag + ":log";
  std::string seeds;
  for (const holdfast::redis_endpoint& e : c.seeds()) {
    seeds += (seeds.empty() ? "" : ",") + std::to_string(e.port);
  }
  const std::string dir = hf_test::make_temp_dir("cluster-load");
  const auto began = std::chrono::steady_clock::now();
  {
    fl::workers w(dir, worker_test);
    for (int i = 0; i < 4; ++i) {
      fl::settings s;
      s.set("key", key);
      s.set("ttl_ms", ttl_ms);
      s.set("seeds", seeds);
      s.set("tag", tag);
      s.set("fence_port", fence_port);
      s.set("fence_key", fence_key);
      s.set("log_key", log_key);
      w.start(i, s, true);  // no grant may be lost to a migration
    }
    const bool warm = hf_test::wait_until(
        [&] {
          return std::atoll(hf_test::redis_cmd(fence_port, {"LLEN", log_key}).c_str()) >= 10;
        },
        15s);
    if (!warm) FAIL("no writes admitted before the migration\n" << w.output());
    const fl::ns fault_at = fl::now_ns();
    const std::uint64_t before = fl::redis_newest_logged(fence_port, log_key);
    // One key per batch, 150 ms apart: the record, the counter and its life record leave one by
    // one, so for a while the slot is split between the two primaries.
    const bool moved = c.migrate_slot(slot, static_cast<std::size_t>(from), to, 1,
                                      [] { std::this_thread::sleep_for(150ms); });
    const fl::ns moved_at = fl::now_ns();
    INFO(c.why());
    REQUIRE(moved);
    const bool live = hf_test::wait_until(
        [&] { return fl::redis_newest_logged(fence_port, log_key) > fl::life_gap; }, 15s);
    const bool everyone =
        hf_test::wait_until([&] { return granted_after(w.read(), moved_at).size() == 4; }, 15s);
    w.stop();
    const std::vector<fl::admitted> log = fl::redis_fence_log(fence_port, log_key);
    const fl::records r = w.read();
    const fl::verdict v = fl::check(log, r, fault_at);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
    const std::string line = fl::summary("redis cluster slot migration", v, r, seconds);
    fl::ns first_raised = 0;  // the first write admitted under a token of the target's life
    for (const fl::write_told& x : r.writes) {
      if (x.outcome == "ok" && x.token > before + fl::life_gap && x.at > fault_at &&
          (first_raised == 0 || x.at < first_raised)) {
        first_raised = x.at;
      }
    }
    std::printf(
        "%s; migration %.2f s; first write under the target's tokens %.2f s after it began\n",
        line.c_str(), static_cast<double>(moved_at - fault_at) / 1e9,
        first_raised == 0 ? -1.0 : static_cast<double>(first_raised - fault_at) / 1e9);
    INFO(line << "\n" << w.output());
    for (const std::string& violation : v.violations) FAIL_CHECK(violation);
    CHECK(w.clean_exits() == 4);
    CHECK(v.reissued_tokens == 0);
    CHECK(v.lost_acked == 0);
    CHECK(before > 0);
    CHECK(live);
    CHECK(everyone);
    CHECK(c.primary_of(slot, c.node(0).port()) == static_cast<int>(to));
  }
  (void)hf_test::redis_cmd(fence_port, {"DEL", fence_key, log_key});
  if (!hf_test::env("HOLDFAST_FAILOVER_KEEP")) hf_test::remove_tree(dir);
}

}  // namespace test_redis_cluster_load
