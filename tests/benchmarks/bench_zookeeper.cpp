// SPDX-License-Identifier: MIT
// tests/benchmarks/bench_zookeeper.cpp - ZooKeeper: latency of one acquire + release through
// zookeeper_store next to the bare requests a lock needs (create of an ephemeral sequential node,
// delete) on the same C client, interleaved in one run, on one server and on a three-member
// ensemble; and the hand-off latency of blocking acquire() (wait_for_release: a watch on the
// node ahead) with 1 and 16 waiters, next to the polling acquire it replaces.
//
//   variant    | requests | what it does
//   -----------+----------+---------------------------------------------------------------------
//   holdfast   | 3        | create (ephemeral sequential) and get_children (first in line?)
//              |          | pipelined in one round trip, delete (by name: no exists first)
//   bare       | 2        | create (ephemeral sequential), delete: the baseline the goal names
//   bare_list  | 3        | create, get_children, delete: the least a queue lock can do (a lock
//              |          | must learn its place among its siblings)
//
// Servers: HOLDFAST_ZK_HOSTS (one server, as .ci/servers exports it) and
// HOLDFAST_ZK_ENSEMBLE_HOSTS; with HOLDFAST_BENCH_OWN_SERVERS=1 an unset one makes the benchmark
// start its own server or ensemble (tests/support/zookeeper_servers.hpp) for the run, else that
// benchmark is skipped (the ctest smoke run starts no JVM of its own). Hand-off requests are
// counted by the stores (every request each sends); HOLDFAST_BENCH_FULL=1 runs every hand-off
// (the smoke run does five per row). See handoff.hpp; the figures: README.md.
#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "../support/zookeeper_servers.hpp"
#include "bench_common.hpp"
#include "handoff.hpp"
#include "holdfast/stores/zookeeper.hpp"

namespace {

using holdfast_bench::polling;

// The hosts of one server (`ensemble` false) or three, from the environment or started here.
std::optional<std::string> hosts(bool ensemble) {
  const char* e = std::getenv(ensemble ? "HOLDFAST_ZK_ENSEMBLE_HOSTS" : "HOLDFAST_ZK_HOSTS");
  if (e != nullptr && *e != '\0') return std::string(e);
  const char* own = std::getenv("HOLDFAST_BENCH_OWN_SERVERS");
  if (own == nullptr || std::string(own) != "1") return std::nullopt;
  static std::unique_ptr<hf_test::zookeeper_server> one;
  static std::unique_ptr<hf_test::zookeeper_ensemble> three;
  if (ensemble) {
    if (!three) {
      three = std::make_unique<hf_test::zookeeper_ensemble>(3);
      if (!three->start()) three.reset();
    }
    if (three) return three->hosts();
  } else {
    if (!one) {
      one = std::make_unique<hf_test::zookeeper_server>();
      if (!one->start()) one.reset();
    }
    if (one) return one->hosts();
  }
  return std::nullopt;
}

holdfast::zookeeper_options bench_options(const std::string& h) {
  holdfast::zookeeper_options o;
  o.hosts = h;
  o.root = "/holdfast-bench/" + std::to_string(std::rand());
  o.session_timeout = std::chrono::milliseconds(4000);
  return o;
}

/// The bare requests, on the same client and link holdfast uses.
class bare_client {
 public:
  explicit bare_client(const holdfast::zookeeper_options& o) : link_(o), nodes_(link_) {
    auto guard = link_.lock();
    ok_ = !link_.ensure_connected() && nodes_.make_parents(o.root + "/bare") == ZOK;
  }
  bool once(bool list) {
    auto guard = link_.lock();
    std::string name;
    Stat st{};
    const std::string parent = link_.options().root + "/bare";
    if (nodes_.create(parent, "n-", holdfast_bench::sample_owner(), name, st) != ZOK) return false;
    if (list) {  // the raw request: the store's children() refuses names it did not make
      String_vector v{};
      if (zoo_get_children(link_.handle(), parent.c_str(), 0, &v) != ZOK) return false;
      deallocate_String_vector(&v);
    }
    return nodes_.remove(parent + "/" + name) == ZOK;
  }
  [[nodiscard]] bool ok() const { return ok_; }

 private:
  holdfast::detail::zookeeper_link link_;
  holdfast::detail::zookeeper_nodes nodes_;
  bool ok_ = false;
};

void side_by_side(benchmark::State& state, bool ensemble) {
  const std::optional<std::string> h = hosts(ensemble);
  if (!h) {
    state.SkipWithError(
        "no ZooKeeper: HOLDFAST_ZK_HOSTS / _ENSEMBLE_HOSTS or HOLDFAST_BENCH_OWN_SERVERS=1");
    return;
  }
  const holdfast::zookeeper_options o = bench_options(*h);
  holdfast::zookeeper_store store(o);
  bare_client bare(o);
  const std::string& owner = holdfast_bench::sample_owner();
  auto holdfast_once = [&] {
    auto g = store.try_acquire("bench", owner, std::chrono::seconds(10));
    return g && store.release("bench", owner, g->token);
  };
  if (!bare.ok() || !holdfast_once() || !bare.once(false)) {
    state.SkipWithError("cannot reach ZooKeeper");
    return;
  }
  holdfast_bench::run_side_by_side(state,
                                   {{"holdfast", holdfast_once},
                                    {"bare", [&] { return bare.once(false); }},
                                    {"bare_list", [&] { return bare.once(true); }}},
                                   "hf/", "a request failed");
}

void BM_zookeeper_single_side_by_side(benchmark::State& state) {
  side_by_side(state, false);
}
BENCHMARK(BM_zookeeper_single_side_by_side)->Unit(benchmark::kMicrosecond);

void BM_zookeeper_ensemble_side_by_side(benchmark::State& state) {
  side_by_side(state, true);
}
BENCHMARK(BM_zookeeper_ensemble_side_by_side)->Unit(benchmark::kMicrosecond);

/// A store whose requests the benchmark reads (the link's own count).
class counted_store : public holdfast::zookeeper_store {
 public:
  using holdfast::zookeeper_store::zookeeper_store;
  [[nodiscard]] std::uint64_t requests() const { return link_.requests(); }
};

template <bool Wait>
void BM_handoff_zookeeper(benchmark::State& state) {
  const std::optional<std::string> h = hosts(false);
  if (!h) {
    state.SkipWithError(
        "no ZooKeeper: HOLDFAST_ZK_HOSTS / _ENSEMBLE_HOSTS or HOLDFAST_BENCH_OWN_SERVERS=1");
    return;
  }
  const holdfast::zookeeper_options o = bench_options(*h);
  const std::chrono::microseconds hold(20000);
  const int waiters = static_cast<int>(state.range(0));
  // The ctest smoke run (no HOLDFAST_BENCH_FULL=1) does 5 hand-offs per row, not 50-100.
  const char* full = std::getenv("HOLDFAST_BENCH_FULL");
  const bool all = full != nullptr && std::string(full) == "1";
  const auto handoffs = static_cast<std::uint64_t>(all ? state.range(1) : 5);
  bare_client rtt(o);
  for (auto _ : state) {
    std::vector<std::unique_ptr<counted_store>> stores;
    std::vector<std::unique_ptr<polling<counted_store>>> polled;
    std::uint64_t before = 0;
    for (int i = 0; i <= waiters; ++i) {
      stores.push_back(std::make_unique<counted_store>(o));
      (void)stores.back()->inspect("k");  // connected before the count starts
      before += stores.back()->requests();
      polled.push_back(
          std::make_unique<polling<counted_store>>(polling<counted_store>{stores.back().get()}));
    }
    std::vector<double> rtts;
    for (int i = 0; i < 100; ++i) {
      const auto t0 = holdfast_bench::handoff_clock::now();
      (void)rtt.once(false);
      rtts.push_back(
          std::chrono::duration<double, std::micro>(holdfast_bench::handoff_clock::now() - t0)
              .count());
    }
    holdfast_bench::handoff_result r;
    if constexpr (Wait) {
      r = holdfast_bench::run_handoffs<counted_store*>(
          [&](int i) { return stores[static_cast<std::size_t>(i)].get(); }, waiters, handoffs, hold,
          "k");
    } else {
      r = holdfast_bench::run_handoffs<polling<counted_store>*>(
          [&](int i) { return polled[static_cast<std::size_t>(i)].get(); }, waiters, handoffs, hold,
          "k");
    }
    std::uint64_t after = 0;
    for (const auto& s : stores) after += s->requests();
    holdfast_bench::report_handoffs(state, r, after - before);
    // create + delete: two writes, each one round trip through Zab.
    const double write_rtt = holdfast_bench::percentile(rtts, 0.5) / 2;
    state.counters["write_rtt_us"] = write_rtt;
    if (write_rtt > 0) {
      state.counters["median_write_rtts"] = state.counters["median_us"] / write_rtt;
    }
  }
  state.SetLabel(Wait ? "wait_for_release (watch of the node ahead)" : "polling (backoff)");
}

BENCHMARK_TEMPLATE(BM_handoff_zookeeper, true)
    ->Args({1, 100})
    ->Args({16, 50})
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->Apply(holdfast_bench::with_min_max);
BENCHMARK_TEMPLATE(BM_handoff_zookeeper, false)
    ->Args({1, 10})
    ->Args({16, 10})
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->Apply(holdfast_bench::with_min_max);

}  // namespace
