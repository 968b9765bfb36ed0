// tests/benchmarks/bench_redis.cpp - latency of one acquire + release against a real Redis:
// holdfast's redis_store next to the patterns people write by hand, in one run.
//
//   variant    | round trips | what it does
//   -----------+-------------+------------------------------------------------------------------
//   holdfast   | 2           | EVALSHA acquire (check, grant, INCR token, PX) + EVALSHA release
//   raw        | 2           | SET key owner NX PX + DEL key: no token, no owner check (baseline)
//   two_step   | 3           | SET NX PX, then INCR for a token, then a compare-and-delete
//              |             | script: the classic pattern (with the token race T1 forbids)
//
// BM_redis_side_by_side interleaves the three in every iteration (rotating their order), so all
// see the same machine at the same moment (a shared box is noisy), and reports per-variant median
// and p99 latency in microseconds and the ratios holdfast/raw and holdfast/two_step as counters.
// The single-variant benchmarks give Google Benchmark's usual mean for each.
//
// The server comes from HOLDFAST_REDIS_PORT (and HOLDFAST_REDIS_HOST); .ci/servers starts one, and
// tests/benchmarks/run_store_benchmarks.sh runs all of this unpinned, split across two CPUs and
// pinned to one CPU (taskset).
#include <benchmark/benchmark.h>
#include <hiredis/hiredis.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "holdfast/stores/redis.hpp"

namespace {

std::optional<holdfast::redis_options> bench_options() {
  const char* port = std::getenv("HOLDFAST_REDIS_PORT");
  if (port == nullptr) return std::nullopt;
  holdfast::redis_options o;
  o.port = std::atoi(port);
  if (const char* host = std::getenv("HOLDFAST_REDIS_HOST")) o.host = host;
  if (const char* pw = std::getenv("HOLDFAST_REDIS_PASSWORD")) o.password = pw;
  o.key_prefix = "{holdfast-bench}:lease:";
  o.counter_key = "{holdfast-bench}:token";
  return o;
}

/// A plain hiredis connection for the hand-written patterns.
class raw_client {
 public:
  explicit raw_client(const holdfast::redis_options& o) {
    const struct timeval tv { 2, 0 };
    c_ = redisConnectWithTimeout(o.host.c_str(), o.port, tv);
    if (c_ != nullptr && c_->err == 0 && !o.password.empty()) ok({"AUTH", o.password});
    if (good()) {
      holdfast::detail::redis_reply_ptr r(
          static_cast<redisReply*>(redisCommand(c_, "SCRIPT LOAD %s",
                                                "if redis.call('GET', KEYS[1]) == ARGV[1] then "
                                                "return redis.call('DEL', KEYS[1]) end return 0")));
      if (r && r->type == REDIS_REPLY_STRING) cad_sha_.assign(r->str, r->len);
    }
  }
  ~raw_client() { redisFree(c_); }
  raw_client(const raw_client&) = delete;
  raw_client& operator=(const raw_client&) = delete;

  [[nodiscard]] bool good() const { return c_ != nullptr && c_->err == 0; }

  /// Runs a command; true iff a non-error reply came back.
  bool ok(std::initializer_list<std::string_view> args) {
    argv_.clear();
    lens_.clear();
    for (std::string_view a : args) {
      argv_.push_back(a.data());
      lens_.push_back(a.size());
    }
    holdfast::detail::redis_reply_ptr r(static_cast<redisReply*>(
        redisCommandArgv(c_, static_cast<int>(argv_.size()), argv_.data(), lens_.data())));
    return r && r->type != REDIS_REPLY_ERROR;
  }
  [[nodiscard]] const std::string& cad_sha() const { return cad_sha_; }

 private:
  redisContext* c_ = nullptr;
  std::string cad_sha_;
  std::vector<const char*> argv_;
  std::vector<std::size_t> lens_;
};

constexpr std::string_view kOwner = "0123456789abcdef0123456789abcdef";  // a 128-bit owner id

bool holdfast_once(holdfast::redis_store& s) {
  auto g = s.try_acquire("bench", kOwner, std::chrono::seconds(10));
  return g && s.release("bench", kOwner, g->token);
}
bool raw_once(raw_client& c) {
  return c.ok({"SET", "{holdfast-bench}:raw", kOwner, "NX", "PX", "10000"}) &&
         c.ok({"DEL", "{holdfast-bench}:raw"});
}
bool two_step_once(raw_client& c) {
  return c.ok({"SET", "{holdfast-bench}:two", kOwner, "NX", "PX", "10000"}) &&
         c.ok({"INCR", "{holdfast-bench}:two-token"}) &&
         c.ok({"EVALSHA", c.cad_sha(), "1", "{holdfast-bench}:two", kOwner});
}

void BM_redis_side_by_side(benchmark::State& state) {
  std::optional<holdfast::redis_options> o = bench_options();
  if (!o) {
    state.SkipWithError("HOLDFAST_REDIS_PORT is unset: start a server (.ci/servers start)");
    return;
  }
  holdfast::redis_store store(*o);
  raw_client raw(*o);
  if (!store.connect() || !raw.good() || raw.cad_sha().empty()) {
    state.SkipWithError("cannot reach Redis");
    return;
  }
  holdfast_bench::run_side_by_side(state,
                                   {{"holdfast", [&] { return holdfast_once(store); }},
                                    {"raw", [&] { return raw_once(raw); }},
                                    {"two_step", [&] { return two_step_once(raw); }}},
                                   "hf/", "a command failed");
}
BENCHMARK(BM_redis_side_by_side)->Unit(benchmark::kMicrosecond);

template <class Client, class Once>
void run_single(benchmark::State& state, Once once) {
  std::optional<holdfast::redis_options> o = bench_options();
  if (!o) {
    state.SkipWithError("HOLDFAST_REDIS_PORT is unset: start a server (.ci/servers start)");
    return;
  }
  Client client(*o);
  holdfast_bench::run_latency(
      state, [&] { return once(client); }, "a command failed");
}

void BM_redis_holdfast_acquire_release(benchmark::State& state) {
  run_single<holdfast::redis_store>(state, holdfast_once);
}
void BM_redis_raw_setnx_del(benchmark::State& state) {
  run_single<raw_client>(state, raw_once);
}
void BM_redis_two_step(benchmark::State& state) {
  run_single<raw_client>(state, two_step_once);
}
BENCHMARK(BM_redis_holdfast_acquire_release)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_redis_raw_setnx_del)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_redis_two_step)->Unit(benchmark::kMicrosecond);

}  // namespace
