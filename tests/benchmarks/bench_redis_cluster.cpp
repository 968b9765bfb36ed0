// SPDX-License-Identifier: MIT
// tests/benchmarks/bench_redis_cluster.cpp - latency of one acquire + release on a Redis Cluster:
// holdfast's redis_cluster_store next to what a careful user writes by hand, in one run, on the
// same primary (the raw key shares the lease's hash tag, so both go to the node owning its slot).
//
//   variant    | round trips | what it does
//   -----------+-------------+------------------------------------------------------------------
//   holdfast   | 2           | EVALSHA acquire (check, grant, INCR the slot's counter, PX) +
//              |             | EVALSHA release, routed by the slot map
//   cad        | 2           | SET key owner NX PX + a compare-and-delete script (GET, DEL):
//              |             | owner-checked release, no token (the baseline; goal <= 1.3x)
//
// The cluster comes from HOLDFAST_REDIS_CLUSTER_NODES ("host:port,host:port,..."; any node), else
// from HOLDFAST_REDIS_CLUSTER_SEEDS (the cluster .ci/servers starts).
#include <benchmark/benchmark.h>
#include <hiredis/hiredis.h>

#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "holdfast/stores/redis_cluster.hpp"

namespace {

std::optional<holdfast::redis_cluster_options> bench_options() {
  const char* nodes = std::getenv("HOLDFAST_REDIS_CLUSTER_NODES");
  if (nodes == nullptr || *nodes == '\0') nodes = std::getenv("HOLDFAST_REDIS_CLUSTER_SEEDS");
  if (nodes == nullptr || *nodes == '\0') return std::nullopt;
  holdfast::redis_cluster_options o;
  std::string all = nodes;
  for (std::size_t at = 0; at < all.size();) {
    const std::size_t end = std::min(all.find(',', at), all.size());
    const std::string one = all.substr(at, end - at);
    const std::size_t colon = one.rfind(':');
    if (colon != std::string::npos) {
      o.nodes.push_back({one.substr(0, colon), std::atoi(one.c_str() + colon + 1)});
    }
    at = end + 1;
  }
  o.node.key_prefix = "holdfast-bench:lease:";
  o.node.counter_key = "holdfast-bench:token:";
  return o;
}

/// A hiredis connection to the primary of the key `{bench}` (found by following MOVED once).
class raw_client {
 public:
  explicit raw_client(const holdfast::redis_cluster_options& o) {
    for (const holdfast::redis_endpoint& e : o.nodes) {
      if (open(e.host, e.port)) break;
    }
  }
  ~raw_client() { redisFree(c_); }
  raw_client(const raw_client&) = delete;
  raw_client& operator=(const raw_client&) = delete;
  [[nodiscard]] bool good() const { return c_ != nullptr && !sha_.empty(); }

  bool once() {
    holdfast::detail::redis_reply_ptr a = run({"SET", kKey, kOwner, "NX", "PX", "10000"});
    if (!a || a->type != REDIS_REPLY_STATUS) return false;
    holdfast::detail::redis_reply_ptr b = run({"EVALSHA", sha_, "1", kKey, kOwner});
    return b && b->type == REDIS_REPLY_INTEGER && b->integer == 1;
  }

 private:
  static constexpr const char* kKey = "{bench}:raw";
  static constexpr const char* kOwner = "0123456789abcdef0123456789abcdef";

  bool open(const std::string& host, int port) {
    const struct timeval tv { 2, 0 };
    redisFree(c_);
    c_ = redisConnectWithTimeout(host.c_str(), port, tv);
    if (c_ == nullptr || c_->err != 0) return false;
    holdfast::detail::redis_reply_ptr r = run({"DEL", kKey});
    if (!r) return false;
    holdfast::detail::redis_redirect to;
    if (r->type == REDIS_REPLY_ERROR &&
        holdfast::detail::parse_redis_redirect(std::string(r->str, r->len), to)) {
      return open(to.host, to.port);
    }
    holdfast::detail::redis_reply_ptr s =
        run({"SCRIPT", "LOAD",
             "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end "
             "return 0"});
    if (s && s->type == REDIS_REPLY_STRING) sha_.assign(s->str, s->len);
    return !sha_.empty();
  }
  holdfast::detail::redis_reply_ptr run(std::initializer_list<std::string> args) {
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    for (const std::string& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    return holdfast::detail::redis_reply_ptr(static_cast<redisReply*>(
        redisCommandArgv(c_, static_cast<int>(argv.size()), argv.data(), lens.data())));
  }

  redisContext* c_ = nullptr;
  std::string sha_;
};

void BM_redis_cluster_side_by_side(benchmark::State& state) {
  std::optional<holdfast::redis_cluster_options> o = bench_options();
  if (!o) {
    state.SkipWithError(
        "HOLDFAST_REDIS_CLUSTER_NODES and _SEEDS are unset: start a cluster (.ci/servers start)");
    return;
  }
  holdfast::redis_cluster_store store(*o);
  raw_client raw(*o);
  if (!store.connect() || !raw.good()) {
    state.SkipWithError("cannot reach the cluster");
    return;
  }
  const std::string owner = "0123456789abcdef0123456789abcdef";
  auto holdfast_once = [&] {
    auto g = store.try_acquire("bench", owner, std::chrono::seconds(10));
    return g && store.release("bench", owner, g->token);
  };
  holdfast_bench::run_side_by_side(
      state, {{"holdfast", holdfast_once}, {"cad", [&] { return raw.once(); }}}, "hf/",
      "a command failed");
}
BENCHMARK(BM_redis_cluster_side_by_side)->Unit(benchmark::kMicrosecond);

}  // namespace
