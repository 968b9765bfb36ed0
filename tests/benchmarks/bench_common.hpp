// SPDX-License-Identifier: MIT
// tests/benchmarks/bench_common.hpp - what every holdfast benchmark shares: a same-run baseline,
// the ratio to it, and the counters tests/benchmarks/report.py turns into the table.
//
// The machine is shared and noisy, so a figure alone says little. A *paired* benchmark therefore
// times the subject and its baseline in alternating chunks inside the same loop (a few µs apart),
// and reports, per repetition (medians over chunks, see run_paired):
//
//   counter          | meaning
//   -----------------+--------------------------------------------------------------------
//   ns_per_op        | the subject's cost, ns per operation
//   base_ns_per_op   | the baseline's cost, ns per operation, measured interleaved with it
//   ratio            | subject / baseline time of two adjacent chunks
//
// and a label `vs <baseline>; target <= X` that the report prints. Throughput benchmarks (several
// threads) report `ops_per_s` and name, in their label, the benchmark of the same run they are
// compared with (`vs BM_name`); report.py divides the two. Every benchmark gets min and max
// statistics next to Google Benchmark's mean/median/stddev, so `--benchmark_repetitions=N
// --benchmark_report_aggregates_only=true` yields "median (min-max)" for every counter.
#ifndef HOLDFAST_TESTS_BENCHMARKS_BENCH_COMMON_HPP
#define HOLDFAST_TESTS_BENCHMARKS_BENCH_COMMON_HPP

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace holdfast_bench {

// glibc's mutex (and other libc paths) skip their atomic instructions while a process has never
// started a thread (__libc_single_threaded). Every real user of a lease library has threads, so
// start and join one before any benchmark runs; otherwise the std::mutex baselines would be
// unrealistically cheap (about 7 ns instead of about 20 ns on the project's machine).
inline const bool process_has_started_a_thread = [] {
  std::thread([] {}).join();
  return true;
}();

// Adds min and max to every statistic Google Benchmark aggregates over repetitions.
inline void with_min_max(benchmark::internal::Benchmark* b) {
  b->ComputeStatistics("min", [](const std::vector<double>& v) {
     return v.empty() ? 0.0 : *std::min_element(v.begin(), v.end());
   })->ComputeStatistics("max", [](const std::vector<double>& v) {
    return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end());
  });
}

// Operations per timed chunk, for operations of tens of ns: a chunk then lasts several µs, long
// enough that the clock read closing it (~20 ns) is under 1% of it, short enough that a chunk of
// the subject and the chunk of the baseline next to it see the same machine, and that most chunks
// run without being preempted. Operations of a few ns use kChunkFast.
inline constexpr int kChunk = 256;
inline constexpr int kChunkFast = 8192;

// Returns the median of `v` (reordering it).
inline double median_of(std::vector<double>& v) {
  if (v.empty()) return 0.0;
  const auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

// Runs `subject` and `baseline` (each a callable doing one operation) in alternating chunks of
// `chunk` operations, one chunk of each per iteration, and reports ns_per_op, base_ns_per_op and
// ratio (see the table above). The order within an iteration alternates, so neither side always
// runs on a cache the other warmed.
//
// Each figure is a *median over chunks*, and the ratio is the median of the per-iteration ratios
// of two adjacent chunks: a chunk that was preempted by another process (the machine is shared)
// is an outlier that a median ignores and a mean does not. Google Benchmark's own time column
// covers both sides and all of that noise; read the counters.
template <class Subject, class Baseline>
void run_paired(benchmark::State& state, const char* label, Subject&& subject, Baseline&& baseline,
                int chunk = kChunk) {
  using clock = std::chrono::steady_clock;
  benchmark::DoNotOptimize(process_has_started_a_thread);  // keeps its initializer in the program
  std::vector<double> subject_ns;
  std::vector<double> baseline_ns;
  std::vector<double> ratios;
  bool subject_first = true;
  for (auto _ : state) {
    double spent[2] = {0, 0};  // [0] subject, [1] baseline
    for (int side = 0; side < 2; ++side) {
      const bool run_subject = (side == 0) == subject_first;
      const clock::time_point t0 = clock::now();
      if (run_subject) {
        for (int i = 0; i < chunk; ++i) subject();
      } else {
        for (int i = 0; i < chunk; ++i) baseline();
      }
      spent[run_subject ? 0 : 1] = static_cast<double>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now() - t0).count());
    }
    subject_first = !subject_first;
    subject_ns.push_back(spent[0] / chunk);
    baseline_ns.push_back(spent[1] / chunk);
    ratios.push_back(spent[1] > 0 ? spent[0] / spent[1] : 0.0);
  }
  state.counters["ns_per_op"] = median_of(subject_ns);
  state.counters["base_ns_per_op"] = median_of(baseline_ns);
  state.counters["ratio"] = median_of(ratios);
  state.SetLabel(label);
}

// A 32-character owner id, the length and alphabet of holdfast's default random owner ids.
inline const std::string& sample_owner(int i = 0) {
  static const std::vector<std::string> owners = [] {
    std::vector<std::string> v;
    for (int k = 0; k < 8; ++k) {
      std::string s = "0123456789abcdef0123456789abcdef";
      s[0] = static_cast<char>('a' + k);
      v.push_back(s);
    }
    return v;
  }();
  return owners[static_cast<std::size_t>(i) % owners.size()];
}

// ---------------------------------------------------------------------------------------------
// Round-trip latency (real stores: Redis, PostgreSQL, etcd, quorums of them). One operation costs
// tens of µs to ms, so each one is timed on its own and the figures are percentiles, not means.
// ---------------------------------------------------------------------------------------------

/// Per-operation latencies, for percentiles (Google Benchmark itself reports means).
class latencies {
 public:
  void add(std::chrono::steady_clock::duration d) {
    ns_.push_back(
        static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count()));
  }
  /// The p-quantile in microseconds (nearest rank), 0 when empty.
  double quantile_us(double p) {
    if (ns_.empty()) return 0;
    std::sort(ns_.begin(), ns_.end());
    const auto rank = static_cast<std::size_t>(p * static_cast<double>(ns_.size() - 1) + 0.5);
    return ns_[std::min(rank, ns_.size() - 1)] / 1000.0;
  }

 private:
  std::vector<double> ns_;
};

/// One way of doing the measured operation: a name for the counters and a callable that does it
/// once and says whether it succeeded.
struct latency_variant {
  std::string name;
  std::function<bool()> once;
};

/// Times `variants` interleaved, one operation of each per iteration in a rotating order (so all
/// see the same machine at the same moment and none always goes first), and reports for each
/// variant `<name>_p50_us` and `<name>_p99_us`, and for every variant after the first the ratios
/// of the first to it, `<ratio_prefix><name>_p50` and `..._p99` (e.g. "hf/raw_p50"). A failed
/// operation ends the benchmark with an error saying `what` failed.
inline void run_side_by_side(benchmark::State& state, std::vector<latency_variant> variants,
                             std::string_view ratio_prefix = "hf/",
                             const char* what = "an operation failed") {
  using clock_type = std::chrono::steady_clock;
  const std::size_t n = variants.size();
  std::vector<latencies> lat(n);
  std::size_t i = 0;
  for (auto _ : state) {
    bool good = true;
    for (std::size_t k = 0; k < n; ++k) {
      const std::size_t v = (i + k) % n;
      const auto t0 = clock_type::now();
      good = variants[v].once() && good;
      lat[v].add(clock_type::now() - t0);
    }
    if (!good) {
      state.SkipWithError(what);
      return;
    }
    ++i;
  }
  std::vector<double> p50(n), p99(n);
  for (std::size_t v = 0; v < n; ++v) {
    p50[v] = lat[v].quantile_us(0.5);
    p99[v] = lat[v].quantile_us(0.99);
    state.counters[variants[v].name + "_p50_us"] = p50[v];
    state.counters[variants[v].name + "_p99_us"] = p99[v];
  }
  for (std::size_t v = 1; v < n; ++v) {
    const std::string r = std::string(ratio_prefix) + variants[v].name;
    state.counters[r + "_p50"] = p50[v] > 0 ? p50[0] / p50[v] : 0;
    state.counters[r + "_p99"] = p99[v] > 0 ? p99[0] / p99[v] : 0;
  }
}

/// Times one way of doing the operation alone and reports `p50_us` and `p99_us`.
template <class Once>
void run_latency(benchmark::State& state, Once&& once, const char* what = "an operation failed") {
  using clock_type = std::chrono::steady_clock;
  latencies l;
  for (auto _ : state) {
    const auto t0 = clock_type::now();
    if (!once()) {
      state.SkipWithError(what);
      return;
    }
    l.add(clock_type::now() - t0);
  }
  state.counters["p50_us"] = l.quantile_us(0.5);
  state.counters["p99_us"] = l.quantile_us(0.99);
}

}  // namespace holdfast_bench

#endif  // HOLDFAST_TESTS_BENCHMARKS_BENCH_COMMON_HPP
