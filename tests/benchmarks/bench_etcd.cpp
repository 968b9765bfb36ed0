// SPDX-License-Identifier: MIT
// tests/benchmarks/bench_etcd.cpp - latency of one acquire + release against real etcd (one
// member, and a three-member cluster): holdfast's etcd_store next to the sequence a user writes
// by hand with the same client (libcurl to the v3 JSON gateway), interleaved in one run.
//
//   variant    | round trips | what it does
//   -----------+-------------+------------------------------------------------------------------
//   holdfast   | 3           | lease/grant, kv/txn put-if-absent bound to the lease, lease/revoke
//              |             | (which deletes the key in the same Raft entry)
//   bare       | 4           | lease/grant, kv/txn put-if-absent, kv/deleterange, lease/revoke:
//              |             | the hand-written sequence (baseline; parses only what it needs)
//   bare3      | 3           | lease/grant, kv/txn put-if-absent, lease/revoke: the same requests
//              |             | as holdfast, hand-written (holdfast's own overhead shows here)
//
// BM_etcd_transport times the floor of one request: GET /version (HTTP only, no gateway, no
// Raft) and a kv/range of an absent key (gateway + a linearizable read), to show what the JSON
// gateway costs next to a Raft commit.
//
// Servers: HOLDFAST_ETCD_ENDPOINTS (one member) and HOLDFAST_ETCD_CLUSTER_ENDPOINTS (the cluster),
// as .ci/servers exports them.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>

#include "bench_common.hpp"
#include "holdfast/stores/etcd.hpp"

namespace {

std::optional<holdfast::etcd_options> bench_options(const char* variable) {
  const char* e = std::getenv(variable);
  if (e == nullptr || *e == '\0') return std::nullopt;
  holdfast::etcd_options o;
  o.endpoints.clear();
  std::string s(e);
  for (std::size_t start = 0; start <= s.size();) {
    const std::size_t end = std::min(s.find(',', start), s.size());
    if (end > start) o.endpoints.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  o.key_prefix = "holdfast-bench/";
  return o;
}

/// The hand-written sequence, on the same client holdfast uses (one kept-alive libcurl handle).
class bare_client {
 public:
  explicit bare_client(const holdfast::etcd_options& o) : link_(o) {
    holdfast::detail::base64_append("holdfast-bench/bare", key_);
    holdfast::detail::base64_append(holdfast_bench::sample_owner(), owner_);
    holdfast::detail::base64_append("holdfast-bench/absent", absent_);
  }

  bool once(bool with_delete) {
    auto r = link_.post("/lease/grant", R"({"TTL":"10"})");
    if (!r) return false;
    const auto id = r->find("ID");
    if (id == r->end() || !id->is_string()) return false;
    const std::string lease = id->get<std::string>();
    body_ = R"({"compare":[{"key":")" + key_ +
            R"(","target":"CREATE","result":"EQUAL","create_revision":"0"}],)"
            R"("success":[{"request_put":{"key":")" +
            key_ + R"(","value":")" + owner_ + R"(","lease":")" + lease + R"("}}]})";
    r = link_.post("/kv/txn", body_);
    if (!r || !r->value("succeeded", false)) return false;
    if (with_delete && !link_.post("/kv/deleterange", R"({"key":")" + key_ + R"("})")) {
      return false;
    }
    return bool(link_.post("/lease/revoke", R"({"ID":")" + lease + R"("})"));
  }

  bool range_absent() { return bool(link_.post("/kv/range", R"({"key":")" + absent_ + R"("})")); }

 private:
  holdfast::detail::etcd_link link_;
  std::string key_;
  std::string owner_;
  std::string absent_;
  std::string body_;
};

/// GET /version with its own kept-alive handle: HTTP and nothing else.
class version_client {
 public:
  explicit version_client(const std::string& endpoint) : url_(endpoint + "/version") {
    holdfast::detail::curl_ready();
    c_ = curl_easy_init();
    curl_easy_setopt(c_, CURLOPT_URL, url_.c_str());
    curl_easy_setopt(c_, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c_, CURLOPT_PROXY, "");
    curl_easy_setopt(c_, CURLOPT_WRITEFUNCTION, &version_client::sink);
  }
  ~version_client() { curl_easy_cleanup(c_); }
  version_client(const version_client&) = delete;
  version_client& operator=(const version_client&) = delete;
  bool once() { return curl_easy_perform(c_) == CURLE_OK; }

 private:
  static std::size_t sink(char*, std::size_t size, std::size_t n, void*) { return size * n; }
  std::string url_;
  CURL* c_ = nullptr;
};

void side_by_side(benchmark::State& state, const char* variable) {
  std::optional<holdfast::etcd_options> o = bench_options(variable);
  if (!o) {
    state.SkipWithError("no etcd endpoints in the environment: start them (.ci/servers start)");
    return;
  }
  holdfast::etcd_store store(*o);
  bare_client bare(*o);
  const std::string& owner = holdfast_bench::sample_owner();
  auto holdfast_once = [&] {
    auto g = store.try_acquire("bench", owner, std::chrono::seconds(10));
    return g && store.release("bench", owner, g->token);
  };
  if (!holdfast_once() || !bare.once(true)) {
    state.SkipWithError("cannot reach etcd");
    return;
  }
  holdfast_bench::run_side_by_side(state,
                                   {{"holdfast", holdfast_once},
                                    {"bare", [&] { return bare.once(true); }},
                                    {"bare3", [&] { return bare.once(false); }}},
                                   "hf/", "a request failed");
}

void BM_etcd_single_side_by_side(benchmark::State& state) {
  side_by_side(state, "HOLDFAST_ETCD_ENDPOINTS");
}
BENCHMARK(BM_etcd_single_side_by_side)->Unit(benchmark::kMicrosecond);

void BM_etcd_cluster_side_by_side(benchmark::State& state) {
  side_by_side(state, "HOLDFAST_ETCD_CLUSTER_ENDPOINTS");
}
BENCHMARK(BM_etcd_cluster_side_by_side)->Unit(benchmark::kMicrosecond);

void BM_etcd_transport(benchmark::State& state) {
  std::optional<holdfast::etcd_options> o = bench_options("HOLDFAST_ETCD_ENDPOINTS");
  if (!o) {
    state.SkipWithError("no etcd endpoints in the environment: start them (.ci/servers start)");
    return;
  }
  bare_client range(*o);
  version_client version(o->endpoints.front());
  if (!range.range_absent() || !version.once()) {
    state.SkipWithError("cannot reach etcd");
    return;
  }
  holdfast_bench::run_side_by_side(state,
                                   {{"range", [&] { return range.range_absent(); }},
                                    {"http_version", [&] { return version.once(); }}},
                                   "range/", "a request failed");
}
BENCHMARK(BM_etcd_transport)->Unit(benchmark::kMicrosecond);

}  // namespace
