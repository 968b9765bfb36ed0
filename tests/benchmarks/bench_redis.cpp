// SPDX-License-Identifier: MIT
// tests/benchmarks/bench_redis.cpp - latency of one acquire + release against a real Redis:
// holdfast's redis_store next to the patterns people write by hand, in one run.
//
//   variant    | round trips | what it does
//   -----------+-------------+------------------------------------------------------------------
//   holdfast   | 2           | EVALSHA acquire (check, grant, INCR token, PX) + EVALSHA release
//   raw        | 2           | SET key owner NX PX + DEL key: no token, no owner check (baseline)
//   cad        | 2           | SET NX PX + a compare-and-delete script (GET, DEL): what a careful
//              |             | user writes without holdfast (owner-checked release, no token)
//   two_step   | 3           | SET NX PX, then INCR for a token, then a compare-and-delete
//              |             | script: the classic pattern (with the token race T1 forbids)
//   fcall      | 2           | holdfast's two scripts as a Redis 7 function library (FCALL)
//   trimmed    | 2           | acquire as INCR + SET NX PX GET (+ DECR when busy): two calls on
//              |             | a free key instead of three; holdfast's release script
//
// BM_redis_side_by_side interleaves all six in every iteration (rotating their order), so all
// see the same machine at the same moment (a shared box is noisy), and reports per-variant median
// and p99 latency in microseconds and the ratios of holdfast to each as counters (hf/<name>_p50,
// hf/<name>_p99).
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
    holdfast::detail::redis_reply_ptr r = run(args);
    return r && r->type != REDIS_REPLY_ERROR;
  }
  [[nodiscard]] const std::string& cad_sha() const { return cad_sha_; }

  /// Runs a command; its bulk-string reply (a token), or "" for anything else.
  std::string str(std::initializer_list<std::string_view> args) {
    holdfast::detail::redis_reply_ptr r = run(args);
    return r && r->type == REDIS_REPLY_STRING ? std::string(r->str, r->len) : std::string();
  }
  /// Runs a command; its integer reply, or -1 for anything else.
  long long integer(std::initializer_list<std::string_view> args) {
    holdfast::detail::redis_reply_ptr r = run(args);
    return r && r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
  }
  /// SCRIPT LOAD; the SHA1, or "".
  std::string load(std::string_view script) { return str({"SCRIPT", "LOAD", script}); }

 private:
  holdfast::detail::redis_reply_ptr run(std::initializer_list<std::string_view> args) {
    argv_.clear();
    lens_.clear();
    for (std::string_view a : args) {
      argv_.push_back(a.data());
      lens_.push_back(a.size());
    }
    return holdfast::detail::redis_reply_ptr(static_cast<redisReply*>(
        redisCommandArgv(c_, static_cast<int>(argv_.size()), argv_.data(), lens_.data())));
  }

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

/// Redis' fixed cost per script, measured as variants of holdfast's own two scripts: the same
/// scripts as Redis 7 functions (FCALL), and an acquire trimmed from three redis.calls to two.
class script_variants {
 public:
  explicit script_variants(raw_client& c) : c_(c) {
    std::string lib = "#!lua name=holdfast_bench\n";
    lib += "redis.register_function('holdfast_bench_acquire', function(KEYS, ARGV)\n";
    lib += holdfast::detail::redis_acquire_script();
    lib += "end)\nredis.register_function('holdfast_bench_release', function(KEYS, ARGV)\n";
    lib += holdfast::detail::redis_release_script();
    lib += "end)\n";
    functions_ = c_.ok({"FUNCTION", "LOAD", "REPLACE", lib});
    // Trimmed acquire: draw the token first and SET NX ... GET in one call; give the token back
    // (DECR, in the same atomic script) when the key was taken. Two calls on a free key instead
    // of three, but a busy attempt now writes (INCR + DECR reach the AOF and the replicas).
    trimmed_sha_ = c_.load(
        "local n = redis.call('INCR', KEYS[2])\n"
        "local t = string.format('%d', n)\n"
        "local v = redis.call('SET', KEYS[1], t .. ':' .. ARGV[1], 'NX', 'PX', ARGV[2], 'GET')\n"
        "if not v then return t end\n"
        "redis.call('DECR', KEYS[2])\n"
        "return 0\n");
    release_sha_ = c_.load(holdfast::detail::redis_release_script());
  }
  [[nodiscard]] bool good() const { return functions_ && !trimmed_sha_.empty(); }

  bool fcall_once() {
    // redis_store's keys: lease key, counter, its life record; owner, ttl and life "" (the life
    // check skipped: redis_store's costs one GET more, so compare fcall with holdfast knowing it).
    const std::string t = c_.str({"FCALL", "holdfast_bench_acquire", "3", "{holdfast-bench}:fcall",
                                  "{holdfast-bench}:fcall-token",
                                  "{holdfast-bench}:fcall-token:life", kOwner, "10000", ""});
    // The release script's keys and arguments as redis_store sends them: lease key, wait queue;
    // owner, token, release broadcast channel, key.
    return !t.empty() && c_.integer({"FCALL", "holdfast_bench_release", "2",
                                     "{holdfast-bench}:fcall", "{holdfast-bench}:fcall-queue",
                                     kOwner, t, "{holdfast-bench}:released", "fcall"}) == 1;
  }
  bool trimmed_once() {
    const std::string t = c_.str({"EVALSHA", trimmed_sha_, "2", "{holdfast-bench}:trim",
                                  "{holdfast-bench}:trim-token", kOwner, "10000"});
    return !t.empty() && c_.integer({"EVALSHA", release_sha_, "2", "{holdfast-bench}:trim",
                                     "{holdfast-bench}:trim-queue", kOwner, t,
                                     "{holdfast-bench}:released", "trim"}) == 1;
  }

 private:
  raw_client& c_;
  bool functions_ = false;
  std::string trimmed_sha_;
  std::string release_sha_;
};

bool set_cad_once(raw_client& c) {
  return c.ok({"SET", "{holdfast-bench}:cad", kOwner, "NX", "PX", "10000"}) &&
         c.integer({"EVALSHA", c.cad_sha(), "1", "{holdfast-bench}:cad", kOwner}) == 1;
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
  script_variants scripts(raw);
  if (!scripts.good()) {
    state.SkipWithError("cannot load the script variants (FUNCTION LOAD needs Redis 7)");
    return;
  }
  holdfast_bench::run_side_by_side(state,
                                   {{"holdfast", [&] { return holdfast_once(store); }},
                                    {"raw", [&] { return raw_once(raw); }},
                                    {"cad", [&] { return set_cad_once(raw); }},
                                    {"two_step", [&] { return two_step_once(raw); }},
                                    {"fcall", [&] { return scripts.fcall_once(); }},
                                    {"trimmed", [&] { return scripts.trimmed_once(); }}},
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
