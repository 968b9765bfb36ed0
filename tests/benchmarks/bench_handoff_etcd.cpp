// SPDX-License-Identifier: MIT
// tests/benchmarks/bench_handoff_etcd.cpp - hand-off latency on etcd: blocking acquire() that
// waits in the store (wait_for_release: a watch of the key's deletion from the revision the busy
// answer saw) next to the polling acquire it replaces (backoff 10 ms doubling to 1 s, full
// jitter), with 1 and with 16 waiters, in one run, on the member HOLDFAST_ETCD_ENDPOINTS names
// (its first endpoint). Every thread has its own etcd_store (its own connections, as processes
// would). Store requests are counted by the server: the sum of etcd's grpc_server_started_total
// over every method (the gateway turns each HTTP request into one gRPC call; a watch is one
// Watch stream) from /metrics before and after, also by method (counters r_<method>, per
// grant: which requests a grant cycle makes). Round trips through the same transport are
// measured in the same run as the units the goal is stated in: a read (kv/range, no Raft) and a
// write (kv/put, one Raft commit, fsync'd), medians in µs. See handoff.hpp for the protocol; the
// figures are in README.md.
#include <benchmark/benchmark.h>
#include <curl/curl.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "handoff.hpp"
#include "holdfast/stores/etcd.hpp"

namespace {

using holdfast_bench::polling;

std::optional<holdfast::etcd_options> bench_options() {
  const char* e = std::getenv("HOLDFAST_ETCD_ENDPOINTS");
  if (e == nullptr || *e == '\0') return std::nullopt;
  std::string s(e);
  holdfast::etcd_options o;
  o.endpoints = {s.substr(0, s.find(','))};
  o.key_prefix = "holdfast-bench-handoff/" + std::to_string(std::rand()) + "/";
  return o;
}

std::size_t append(char* data, std::size_t size, std::size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

// Every gRPC call the member started so far (its /metrics), in all and by method ("Txn",
// "LeaseGrant", ...); an empty map if it cannot be read.
std::map<std::string, std::uint64_t> grpc_calls(const std::string& endpoint) {
  std::map<std::string, std::uint64_t> out;
  std::unique_ptr<CURL, holdfast::detail::curl_easy_deleter> c(curl_easy_init());
  if (!c) return out;
  std::string text;
  const std::string url = endpoint + "/metrics";
  curl_easy_setopt(c.get(), CURLOPT_URL, url.c_str());
  curl_easy_setopt(c.get(), CURLOPT_WRITEFUNCTION, &append);
  curl_easy_setopt(c.get(), CURLOPT_WRITEDATA, &text);
  curl_easy_setopt(c.get(), CURLOPT_PROXY, "");
  if (curl_easy_perform(c.get()) != CURLE_OK) return out;
  const std::string name = "\ngrpc_server_started_total{";
  const std::string method = "grpc_method=\"";
  for (std::size_t at = text.find(name); at != std::string::npos; at = text.find(name, at + 1)) {
    const std::size_t sp = text.find("} ", at);
    const std::size_t m = text.find(method, at);
    if (sp == std::string::npos || m == std::string::npos || m > sp) continue;
    const std::size_t from = m + method.size();
    const std::uint64_t n = std::strtoull(text.c_str() + sp + 2, nullptr, 10);
    out[text.substr(from, text.find('"', from) - from)] += n;
    out[""] += n;
  }
  return out;
}

// Median round trip (µs) of `n` requests `body` to `path` through etcd_store's transport.
double rtt_us(const holdfast::etcd_options& o, const char* path, const std::string& body, int n) {
  holdfast::detail::etcd_link link(o);
  auto guard = link.lock();
  std::vector<double> v;
  for (int i = 0; i < n; ++i) {
    const auto t0 = holdfast_bench::handoff_clock::now();
    (void)link.post(path, body);
    v.push_back(std::chrono::duration<double, std::micro>(holdfast_bench::handoff_clock::now() - t0)
                    .count());
  }
  return holdfast_bench::percentile(v, 0.5);
}

template <bool Wait>
void BM_handoff_etcd(benchmark::State& state) {
  const std::optional<holdfast::etcd_options> o = bench_options();
  if (!o) {
    state.SkipWithError("no etcd: set HOLDFAST_ETCD_ENDPOINTS (.ci/servers start)");
    return;
  }
  const std::string& endpoint = o->endpoints.front();
  if (grpc_calls(endpoint).empty()) {
    state.SkipWithError("cannot read etcd's /metrics");
    return;
  }
  // Long enough for the previous holder to be waiting again before the next release: its busy
  // attempt is three Raft writes (grant, txn, revoke) and its wait two requests more.
  const std::chrono::microseconds hold(20000);
  const int waiters = static_cast<int>(state.range(0));
  const auto handoffs = static_cast<std::uint64_t>(state.range(1));
  std::string key_body = R"({"key":")";
  holdfast::detail::base64_append(o->key_prefix + "#rtt", key_body);
  const std::string put_body = key_body + R"(","value":""})";
  key_body += R"("})";
  for (auto _ : state) {
    std::vector<std::unique_ptr<holdfast::etcd_store>> stores;
    std::vector<std::unique_ptr<polling<holdfast::etcd_store>>> polled;
    for (int i = 0; i <= waiters; ++i) {
      stores.push_back(std::make_unique<holdfast::etcd_store>(*o));
      (void)stores.back()->revision();  // connected before the count starts
      polled.push_back(std::make_unique<polling<holdfast::etcd_store>>(
          polling<holdfast::etcd_store>{stores.back().get()}));
    }
    const double read_rtt = rtt_us(*o, "/kv/range", key_body, 200);
    const double write_rtt = rtt_us(*o, "/kv/put", put_body, 100);
    const std::map<std::string, std::uint64_t> before = grpc_calls(endpoint);
    holdfast_bench::handoff_result r;
    if constexpr (Wait) {
      r = holdfast_bench::run_handoffs<holdfast::etcd_store*>(
          [&](int i) { return stores[static_cast<std::size_t>(i)].get(); }, waiters, handoffs, hold,
          "k");
    } else {
      r = holdfast_bench::run_handoffs<polling<holdfast::etcd_store>*>(
          [&](int i) { return polled[static_cast<std::size_t>(i)].get(); }, waiters, handoffs, hold,
          "k");
    }
    std::map<std::string, std::uint64_t> used = grpc_calls(endpoint);
    for (auto& [m, n] : used) n -= before.count(m) != 0 ? before.at(m) : 0;
    holdfast_bench::report_handoffs(state, r, used[""]);
    // Which requests a grant cycle makes (per grant, as `requests`): e.g. r_Txn, r_LeaseGrant.
    for (const auto& [m, n] : used) {
      if (!m.empty() && n > 0 && r.grants > 0) {
        state.counters["r_" + m] = static_cast<double>(n) / static_cast<double>(r.grants);
      }
    }
    state.counters["read_rtt_us"] = read_rtt;
    state.counters["write_rtt_us"] = write_rtt;
    if (write_rtt > 0)
      state.counters["median_write_rtts"] = state.counters["median_us"] / write_rtt;
  }
  state.SetLabel(Wait ? "wait_for_release (watch)" : "polling (backoff)");
}

BENCHMARK_TEMPLATE(BM_handoff_etcd, true)
    ->Args({1, 100})
    ->Args({16, 50})
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->Apply(holdfast_bench::with_min_max);
BENCHMARK_TEMPLATE(BM_handoff_etcd, false)
    ->Args({1, 10})
    ->Args({16, 10})
    ->Iterations(1)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->Apply(holdfast_bench::with_min_max);

}  // namespace
