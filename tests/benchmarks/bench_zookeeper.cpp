// SPDX-License-Identifier: MIT
// tests/benchmarks/bench_zookeeper.cpp - ZooKeeper: latency of one acquire + release through
// zookeeper_store next to the bare requests a lock needs (create of an ephemeral sequential node,
// delete) on the same C client, interleaved in one run, on one server and on a three-member
// ensemble; and the hand-off latency of blocking acquire() (wait_for_release: a watch on the
// node ahead) with 1 and 16 waiters, next to the polling acquire it replaces.
//
//   variant         | requests | what it does
//   ----------------+----------+----------------------------------------------------------------
//   holdfast        | 3        | create (ephemeral sequential) and get_children (first in line?)
//                   |          | pipelined in one round trip, delete (by name: no exists first)
//   bare            | 2        | create (ephemeral sequential), delete: the baseline the goal
//                   |          | names
//   bare_list       | 3        | create, get_children, delete, one after the other
//   bare_pipe       | 3        | holdfast's requests sent as holdfast sends them (create
//                   |          | asynchronous, the list synchronous right behind it), without
//                   |          | holdfast's own work: the floor of its protocol on this client
//   bare_pipe_async | 3        | the same with an asynchronous list (its answer through the
//                   |          | client's completion thread: how holdfast sent it before)
//
// A failed request ends the benchmark with "a request failed" and says on stderr which request
// of which variant failed and why (the client's code, the store's last_error_message()).
//
// Servers: HOLDFAST_ZK_HOSTS (one server, as .ci/servers exports it) and
// HOLDFAST_ZK_ENSEMBLE_HOSTS; with HOLDFAST_BENCH_OWN_SERVERS=1 an unset one makes the benchmark
// start its own server or ensemble (tests/support/zookeeper_servers.hpp) for the run, else that
// benchmark is skipped (the ctest smoke run starts no JVM of its own). Hand-off requests are
// counted by the stores (every request each sends), per grant and per hand-off (release start ->
// next grant); HOLDFAST_BENCH_FULL=1 runs every hand-off
// (the smoke run does five per row). See handoff.hpp; the figures: README.md.
#include <benchmark/benchmark.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
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
    int rc = nodes_.create(parent, "n-", holdfast_bench::sample_owner(), name, st);
    if (rc != ZOK) return failed("create", rc);
    if (list) {  // the raw request: the store's children() refuses names it did not make
      String_vector v{};
      rc = zoo_get_children(link_.handle(), parent.c_str(), 0, &v);
      if (rc != ZOK) return failed("get_children", rc);
      deallocate_String_vector(&v);
    }
    rc = nodes_.remove(parent + "/" + name);
    return rc == ZOK || failed("delete", rc);
  }
  /// holdfast's three requests, sent as holdfast sends them (create and get_children pipelined,
  /// then delete), without holdfast's own work: the floor of its protocol on this client. The
  /// create is asynchronous (its answer reaches the caller through the client's completion
  /// thread); the list synchronous if `sync_list` (its answer handed over by the I/O thread),
  /// else asynchronous too (one thread hand-off more, as before 2026-12-07).
  bool pipelined(bool sync_list) {
    auto guard = link_.lock();
    const std::string parent = link_.options().root + "/bare";
    const std::string& owner = holdfast_bench::sample_owner();
    answers a;
    int rc = zoo_acreate2(link_.handle(), (parent + "/p-").c_str(), owner.data(),
                          static_cast<int>(owner.size()), &ZOO_OPEN_ACL_UNSAFE,
                          ZOO_EPHEMERAL_SEQUENTIAL, &answers::created, &a);
    if (rc != ZOK) return failed("acreate2", rc);
    if (sync_list) {
      String_vector v{};
      rc = zoo_get_children(link_.handle(), parent.c_str(), 0, &v);
      if (rc == ZOK) deallocate_String_vector(&v);
      a.done(rc);
    } else {
      rc = zoo_aget_children(link_.handle(), parent.c_str(), 0, &answers::listed, &a);
      if (rc != ZOK) a.done(rc);
    }
    std::unique_lock<std::mutex> l(a.m);
    a.cv.wait(l, [&] { return a.left == 0; });
    if (a.create_rc != ZOK) return failed("create (pipelined)", a.create_rc);
    if (a.list_rc != ZOK) return failed("get_children (pipelined)", a.list_rc);
    rc = nodes_.remove(a.path);
    return rc == ZOK || failed("delete", rc);
  }
  [[nodiscard]] bool ok() const { return ok_; }

 private:
  // The answers of pipelined(), written by the client's threads.
  struct answers {
    std::mutex m;
    std::condition_variable cv;
    int left = 2;
    int create_rc = ZOK;
    int list_rc = ZOK;
    std::string path;
    void done(int list) {
      std::lock_guard<std::mutex> g(m);
      list_rc = list;
      --left;
      cv.notify_all();
    }
    static void created(int rc, const char* value, const Stat* /*st*/, const void* data) {
      auto* a = static_cast<answers*>(const_cast<void*>(data));
      std::lock_guard<std::mutex> g(a->m);
      a->create_rc = rc;
      if (rc == ZOK && value != nullptr) a->path = value;
      --a->left;
      a->cv.notify_all();
    }
    static void listed(int rc, const String_vector* /*v*/, const void* data) {
      static_cast<answers*>(const_cast<void*>(data))->done(rc);
    }
  };
  // Says on stderr which bare request failed and why (the benchmark's error names no request).
  static bool failed(const char* op, int rc) {
    std::fprintf(stderr, "bench_zookeeper: bare %s: %s\n", op, zerror(rc));
    return false;
  }
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
    auto r = g ? store.release("bench", owner, g->token) : holdfast::result<void>(g.error());
    if (!r) {  // which call failed, and the store's text, for the benchmark's error
      std::fprintf(stderr, "bench_zookeeper: holdfast %s: %s (%s)\n", g ? "release" : "try_acquire",
                   r.error().message().c_str(), store.last_error_message().c_str());
    }
    return static_cast<bool>(r);
  };
  if (!bare.ok() || !holdfast_once() || !bare.once(false)) {
    state.SkipWithError("cannot reach ZooKeeper");
    return;
  }
  holdfast_bench::run_side_by_side(state,
                                   {{"holdfast", holdfast_once},
                                    {"bare", [&] { return bare.once(false); }},
                                    {"bare_list", [&] { return bare.once(true); }},
                                    {"bare_pipe", [&] { return bare.pipelined(true); }},
                                    {"bare_pipe_async", [&] { return bare.pipelined(false); }}},
                                   "hf/", "a request failed (stderr says which)");
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
    const auto sent = [&] {  // every request of every store so far (per hand-off counts)
      std::uint64_t n = 0;
      for (const auto& s : stores) n += s->requests();
      return n;
    };
    holdfast_bench::handoff_result r;
    if constexpr (Wait) {
      r = holdfast_bench::run_handoffs<counted_store*>(
          [&](int i) { return stores[static_cast<std::size_t>(i)].get(); }, waiters, handoffs, hold,
          "k", sent);
    } else {
      r = holdfast_bench::run_handoffs<polling<counted_store>*>(
          [&](int i) { return polled[static_cast<std::size_t>(i)].get(); }, waiters, handoffs, hold,
          "k", sent);
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
