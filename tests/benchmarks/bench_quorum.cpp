// SPDX-License-Identifier: MIT
// tests/benchmarks/bench_quorum.cpp - what quorum_store adds on top of its members, with
// in-process members (memory_store), where a member call costs ~100 ns and the quorum's own
// machinery is all there is to see. The real-server figures (quorum of 3 and 5 Redis servers
// against one) are in bench_quorum_redis.cpp.
//
//   benchmark                               | compared with                         | target
//   ----------------------------------------+---------------------------------------+--------
//   quorum_memory_acquire_release/N threads | one memory_store acquire+release      | (info)
//   quorum_memory_acquire_release/N seq     | one memory_store acquire+release      | (info)
//   quorum_memory_acquire_release/N auto    | one memory_store acquire+release      | <= seq
//   fan_out_workers/5                       | the same 5 tasks through std::async   | <= 1
//
// fan_out_workers is the measurement behind the dispatch design: quorum_dispatch::threads keeps
// one persistent worker per member and hands it each request (detail::fan_out, measured as the
// quorum uses it: one round, awaited); std::async would start a thread per request. Both run five
// empty tasks and wait for all of them.
#include <chrono>
#include <cstddef>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "bench_common.hpp"
#include "holdfast/quorum.hpp"
#include "holdfast/quorum/detail/fan_out.hpp"
#include "holdfast/stores/memory.hpp"

namespace {

using holdfast_bench::run_paired;
using holdfast_bench::sample_owner;
using holdfast_bench::with_min_max;

constexpr std::chrono::milliseconds kTtl{10'000};
constexpr int kChunk = 16;  // quorum operations take µs, not ns

using mem = holdfast::memory_store<>;

void BM_quorum_memory_acquire_release(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  // 0: sequential, 1: threads (worker per member), 2: automatic (the default: direct calls,
  // memory_store being in-process).
  const auto mode = state.range(1);
  std::vector<std::unique_ptr<mem>> members;
  std::vector<mem*> ptrs;
  for (std::size_t i = 0; i < n; ++i) {
    members.push_back(std::make_unique<mem>());
    ptrs.push_back(members.back().get());
  }
  holdfast::quorum_options o;
  o.dispatch = mode == 0   ? holdfast::quorum_dispatch::sequential
               : mode == 1 ? holdfast::quorum_dispatch::threads
                           : holdfast::quorum_dispatch::automatic;
  o.member_timeout = std::chrono::milliseconds(1000);
  auto quorum = std::make_unique<holdfast::quorum_store<mem>>(ptrs, o);
  auto single = std::make_unique<mem>();
  const std::string& owner = sample_owner();
  run_paired(
      state, "vs one memory_store acquire+release",
      [&] {
        auto g = quorum->try_acquire("orders", owner, kTtl);
        if (!g || !quorum->release("orders", owner, g->token)) {
          state.SkipWithError("quorum acquire/release failed");
        }
      },
      [&] {
        auto g = single->try_acquire("orders", owner, kTtl);
        if (!g || !single->release("orders", owner, g->token)) {
          state.SkipWithError("memory_store acquire/release failed");
        }
      },
      kChunk);
}
BENCHMARK(BM_quorum_memory_acquire_release)
    ->ArgNames({"members", "dispatch"})
    ->Args({1, 1})
    ->Args({3, 1})
    ->Args({5, 1})
    ->Args({3, 0})
    ->Args({5, 0})
    ->Args({1, 2})
    ->Args({3, 2})
    ->Args({5, 2})
    ->Apply(with_min_max)
    ->UseRealTime();

// The executor quorum_store dispatches through (detail/fan_out.hpp): one persistent worker per
// member, one round of requests awaited together. Measured through the executor itself, so the
// figure is the quorum's real fan-out cost, not a copy of it.
struct noop_member {};

void BM_fan_out_workers(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  std::vector<std::unique_ptr<noop_member>> members;
  std::vector<noop_member*> ptrs;
  for (std::size_t i = 0; i < n; ++i) {
    members.push_back(std::make_unique<noop_member>());
    ptrs.push_back(members.back().get());
  }
  holdfast::detail::fan_out<noop_member, holdfast::steady_clock> exec(ptrs, {});
  exec.start_workers(1024);
  const std::vector<std::size_t> all = exec.all_members();
  run_paired(
      state, "vs the same tasks through std::async; target <= 1",
      [&] {
        auto round = exec.run_round<holdfast::result<void>>(
            all, false, std::chrono::seconds(10),
            [](std::size_t, noop_member&) {
              benchmark::ClobberMemory();
              return holdfast::result<void>{};
            },
            nullptr);
        exec.finalize(round.round, nullptr);
        if (round.unanswered != 0) state.SkipWithError("a worker did not answer");
      },
      [&] {
        std::vector<std::future<void>> fs;
        fs.reserve(n);
        for (std::size_t i = 0; i < n; ++i) {
          fs.push_back(std::async(std::launch::async, [] { benchmark::ClobberMemory(); }));
        }
        for (auto& f : fs) f.wait();
      },
      kChunk);
}
BENCHMARK(BM_fan_out_workers)->Arg(5)->Apply(with_min_max)->UseRealTime();

}  // namespace
