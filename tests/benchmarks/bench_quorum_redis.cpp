// SPDX-License-Identifier: MIT
// tests/benchmarks/bench_quorum_redis.cpp - acquire + release latency of quorum_store over 3 and
// 5 local Redis servers against one redis_store, in one run, with today's dispatch and the
// previous one side by side.
//
//   variant   | requests per acquire + release                                | target
//   ----------+---------------------------------------------------------------+-----------------
//   single    | 1 acquire script + 1 release script, one server                | (the baseline)
//   quorum3   | the same to 3 servers, all put on the wire from the caller's   | <= 1.3x single
//             | thread, replies read from one poll() (quorum_dispatch::automatic)|
//   quorum5   | the same to 5 servers                                          | <= 1.5x single
//   threads3  | 3 servers, one worker thread per member (quorum_dispatch::     | (the previous
//             | threads, the default before the split dispatch)               | design)
//   threads5  | 5 servers, worker threads                                      |
//   hand5     | the same five acquire scripts, then the five release scripts,  | (the floor of
//             | written by hand on the send/receive capability: all sent, then | one-thread
//             | taken from one poll() loop, waiting as the quorum does (every  | dispatch)
//             | acquire reply, a majority of release replies)                  |
//
// quorum5/hand5 is the honest figure for the quorum's own cost (goal <= 1.2x): the same requests
// on the same sockets from one thread, with nothing but the waiting. quorum5/single also counts
// the four extra servers' CPU on a 2-vCPU machine.
//
// The members' counters agree after the first grant, so every acquire is one round (no raise
// round). BM_quorum_redis_side_by_side interleaves the five in every iteration (rotating their
// order, bench_common.hpp's run_side_by_side), so all see the same machine at the same moment,
// and reports each variant's median and p99 in microseconds and <variant>/single of both. The
// five servers are started by the benchmark itself (tests/support/real_servers.hpp: redis-server
// on free ports, no persistence) and inherit its CPU affinity: run it under `taskset -c 0` to put
// everything on one CPU.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <poll.h>

#include "../support/real_servers.hpp"
#include "bench_common.hpp"
#include "holdfast/quorum.hpp"
#include "holdfast/stores/redis.hpp"

namespace {

using clock_type = std::chrono::steady_clock;
using holdfast::redis_store;
constexpr std::string_view kOwner = "0123456789abcdef0123456789abcdef";  // a 128-bit owner id
constexpr std::chrono::milliseconds kTtl{10'000};

/// Five redis-server processes for the whole program (stopped at exit), or none
/// if they cannot be started.
std::vector<std::unique_ptr<hf_test::redis_server>>& servers() {
  static std::vector<std::unique_ptr<hf_test::redis_server>> s = [] {
    std::vector<std::unique_ptr<hf_test::redis_server>> v;
    for (int i = 0; i < 5; ++i) {
      auto srv = std::make_unique<hf_test::redis_server>();
      if (!srv->start()) return std::vector<std::unique_ptr<hf_test::redis_server>>{};
      v.push_back(std::move(srv));
    }
    return v;
  }();
  return s;
}

std::unique_ptr<redis_store> store_on(const hf_test::redis_server& srv, const std::string& tag) {
  holdfast::redis_options o;
  o.port = srv.port();
  o.key_prefix = "{hfb-" + tag + "}:lease:";
  o.counter_key = "{hfb-" + tag + "}:token";
  return std::make_unique<redis_store>(o);
}

template <class Store>
bool once(Store& s) {
  auto g = s.try_acquire("bench", kOwner, kTtl);
  return g && s.release("bench", kOwner, g->token);
}

// A quorum of `n` members on the first n servers, with stores of its own (own connections and
// keys), dispatching as `d`.
struct quorum_of {
  quorum_of(const std::vector<std::unique_ptr<hf_test::redis_server>>& srv, std::size_t n,
            holdfast::quorum_dispatch d, const std::string& tag) {
    std::vector<redis_store*> ptrs;
    for (std::size_t i = 0; i < n; ++i) {
      members.push_back(store_on(*srv[i], tag));
      ptrs.push_back(members.back().get());
    }
    holdfast::quorum_options o;
    o.member_timeout = std::chrono::milliseconds(1000);
    o.dispatch = d;
    q = std::make_unique<holdfast::quorum_store<redis_store>>(ptrs, o);
  }
  std::vector<std::unique_ptr<redis_store>> members;
  std::unique_ptr<holdfast::quorum_store<redis_store>> q;
};

// The hand-written one-thread fan-out: `n` redis_stores of its own, each request sent to every
// store (send), then the replies taken from one poll() loop (progress, receive), as the quorum's
// split dispatch does, with its bookkeeping stripped: the floor of one-thread dispatch. It waits
// as the quorum does: the acquire for every reply (Redlock's first round), the release until a
// majority released; the release replies still out are read at the start of the next round, on
// the same thread (the quorum hands them to the members' workers).
struct hand_fan_out {
  hand_fan_out(const std::vector<std::unique_ptr<hf_test::redis_server>>& srv, std::size_t n,
               const std::string& tag) {
    for (std::size_t i = 0; i < n; ++i) members.push_back(store_on(*srv[i], tag));
    fds.resize(n);
    tokens.resize(n);
    out.assign(n, 0);
  }
  ~hand_fan_out() {
    for (std::size_t i = 0; i < members.size(); ++i) {
      if (out[i]) (void)members[i]->receive();  // every send() is followed by one receive()
    }
  }
  hand_fan_out(const hand_fan_out&) = delete;
  hand_fan_out& operator=(const hand_fan_out&) = delete;

  // Sends `op` to every member (the token each holds for a release) and waits for `enough`
  // replies, each of which must succeed; false otherwise.
  bool round(holdfast::store_op op, std::size_t enough) {
    using holdfast::store_request;
    const std::size_t n = members.size();
    for (std::size_t i = 0; i < n; ++i) {
      if (out[i]) (void)members[i]->receive();  // the last release's reply (a late one)
      const store_request r{op, "bench", kOwner, tokens[i], {}, kTtl};
      if (members[i]->send(r)) return false;
      out[i] = 1;
    }
    std::size_t in = 0;
    bool good = true;
    while (in < enough) {
      for (std::size_t i = 0; i < n && in < enough; ++i) {
        if (!out[i] || !members[i]->progress()) continue;
        const holdfast::store_reply rep = members[i]->receive();
        out[i] = 0;
        if (op == holdfast::store_op::try_acquire) {
          good = good && rep.granted.has_value();
          if (rep.granted) tokens[i] = rep.granted->token;
        } else {
          good = good && rep.done.has_value();
        }
        ++in;
      }
      if (in >= enough) break;
      nfds_t k = 0;
      for (std::size_t i = 0; i < n; ++i) {
        if (!out[i]) continue;
        const holdfast::io_interest want = members[i]->interest();
        fds[k].fd = want.fd;
        fds[k].events = static_cast<short>((want.read ? POLLIN : 0) | (want.write ? POLLOUT : 0));
        fds[k].revents = 0;
        ++k;
      }
      if (::poll(fds.data(), k, 1000) <= 0) return false;
    }
    return good;
  }

  bool once() {
    const std::size_t n = members.size();
    return round(holdfast::store_op::try_acquire, n) &&
           round(holdfast::store_op::release, n / 2 + 1);
  }

  std::vector<std::unique_ptr<redis_store>> members;
  std::vector<struct pollfd> fds;
  std::vector<holdfast::fencing_token> tokens;
  std::vector<char> out;  // a reply still to be read
};

void BM_quorum_redis_side_by_side(benchmark::State& state) {
  auto& srv = servers();
  if (srv.size() != 5) {
    state.SkipWithError(
        "cannot start five redis-server processes (is "
        "redis-server installed?)");
    return;
  }
  const std::string tag = hf_test::random_tag();
  auto single = store_on(*srv[0], tag + "-1");
  using holdfast::quorum_dispatch;
  quorum_of q3(srv, 3, quorum_dispatch::automatic, tag + "-3");
  quorum_of q5(srv, 5, quorum_dispatch::automatic, tag + "-5");
  quorum_of t3(srv, 3, quorum_dispatch::threads, tag + "-t3");
  quorum_of t5(srv, 5, quorum_dispatch::threads, tag + "-t5");
  hand_fan_out h5(srv, 5, tag + "-h5");
  for (auto& m : h5.members) (void)once(*m);  // connects (send() declines until connected)
  // Warm-up: also connects every member.
  if (!once(*single) || !once(*q3.q) || !once(*q5.q) || !once(*t3.q) || !once(*t5.q) ||
      !h5.once()) {
    state.SkipWithError("a warm-up acquire+release failed");
    return;
  }
  holdfast_bench::run_side_by_side(state,
                                   {{"single", [&] { return once(*single); }},
                                    {"quorum3", [&] { return once(*q3.q); }},
                                    {"quorum5", [&] { return once(*q5.q); }},
                                    {"threads3", [&] { return once(*t3.q); }},
                                    {"threads5", [&] { return once(*t5.q); }},
                                    {"hand5", [&] { return h5.once(); }}},
                                   "single/", "an acquire or release failed");
  // run_side_by_side gives single/<variant>; the targets read <variant>/single.
  for (const char* v : {"quorum3", "quorum5", "threads3", "threads5", "hand5"}) {
    for (const char* p : {"p50", "p99"}) {
      const double s = state.counters[std::string("single_") + p + "_us"];
      const double x = state.counters[std::string(v) + "_" + p + "_us"];
      state.counters[std::string(v) + "/single_" + p] = s > 0 ? x / s : 0;
      state.counters.erase(std::string("single/") + v + "_" + p);
    }
  }
  for (const char* p : {"p50", "p99"}) {
    const double h = state.counters[std::string("hand5_") + p + "_us"];
    const double x = state.counters[std::string("quorum5_") + p + "_us"];
    state.counters[std::string("quorum5/hand5_") + p] = h > 0 ? x / h : 0;
  }
  state.SetLabel(
      "targets: quorum5/single <= 1.5, quorum3/single <= 1.3, quorum5/hand5 <= 1.2 (p50, p99)");
}
BENCHMARK(BM_quorum_redis_side_by_side)->UseRealTime()->Unit(benchmark::kMicrosecond);

}  // namespace

namespace {

// The servers' CPU time so far, in µs, summed over the first `n` (Redis' INFO cpu: main thread
// and background threads, user + system); -1 if a server cannot be asked.
double servers_cpu_us(const std::vector<std::unique_ptr<hf_test::redis_server>>& srv,
                      std::size_t n) {
  double total = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const struct timeval tv { 2, 0 };
    redisContext* c = redisConnectWithTimeout("127.0.0.1", srv[i]->port(), tv);
    if (c == nullptr || c->err != 0) {
      if (c != nullptr) redisFree(c);
      return -1;
    }
    holdfast::detail::redis_reply_ptr r(static_cast<redisReply*>(redisCommand(c, "INFO cpu")));
    redisFree(c);
    if (!r || r->type != REDIS_REPLY_STRING) return -1;
    const std::string info(r->str, r->len);
    for (const char* field : {"used_cpu_sys:", "used_cpu_user:"}) {
      const std::size_t at = info.find(field);
      if (at == std::string::npos) return -1;
      total += std::stod(info.substr(at + std::string_view(field).size())) * 1e6;
    }
  }
  return total;
}

// Where the time goes: one variant alone (0 single, 1 quorum3, 2 quorum5, 3 threads3, 4 threads5),
// with the client's CPU per acquire+release (Google Benchmark's CPU column, this thread; the
// workers' CPU is not in it) and the servers' (server_cpu_us). On two vCPUs a round cannot take
// less than the CPU it needs divided by two.
void BM_quorum_redis_cpu(benchmark::State& state) {
  auto& srv = servers();
  if (srv.size() != 5) {
    state.SkipWithError("cannot start five redis-server processes");
    return;
  }
  const std::string tag = hf_test::random_tag();
  const auto v = state.range(0);
  using holdfast::quorum_dispatch;
  const std::size_t n = v == 0 ? 1 : (v == 1 || v == 3) ? 3 : 5;
  std::unique_ptr<redis_store> single;
  std::unique_ptr<quorum_of> q;
  if (v == 0) {
    single = store_on(*srv[0], tag);
  } else {
    q = std::make_unique<quorum_of>(
        srv, n, v <= 2 ? quorum_dispatch::automatic : quorum_dispatch::threads, tag);
  }
  const auto run = [&] { return v == 0 ? once(*single) : once(*q->q); };
  if (!run()) {
    state.SkipWithError("a warm-up acquire+release failed");
    return;
  }
  const double before = servers_cpu_us(srv, n);
  std::size_t ops = 0;
  holdfast_bench::latencies l;
  for (auto _ : state) {
    const auto t0 = clock_type::now();
    if (!run()) {
      state.SkipWithError("an acquire or release failed");
      return;
    }
    l.add(clock_type::now() - t0);
    ++ops;
  }
  const double after = servers_cpu_us(srv, n);
  state.counters["p50_us"] = l.quantile_us(0.5);
  state.counters["server_cpu_us"] =
      before >= 0 && after >= 0 && ops > 0 ? (after - before) / static_cast<double>(ops) : -1;
}
BENCHMARK(BM_quorum_redis_cpu)->ArgName("variant")->DenseRange(0, 4)->Unit(benchmark::kMicrosecond);

}  // namespace
