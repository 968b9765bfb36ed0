// SPDX-License-Identifier: MIT
// tests/benchmarks/bench_fence.cpp - admission by (fencing token, owner), against the physical
// limit of a token-only admission: a bare std::atomic<std::uint64_t> compare-exchange "max" loop.
//
//   benchmark                     | compared with                              | target
//   ------------------------------+--------------------------------------------+--------
//   fence_gate_admit_newer        | atomic CAS-max loop, rising tokens         | <= 1.5x
//   fence_gate_admit_same         | atomic CAS-max loop, one repeated token    | <= 1.5x
//   fence_gate_admit_newer_owner  | the same loop; the owner id hashed per call| (info)
//   fence_gate_admit_same_owner   | the same loop; the owner id hashed per call| (info)
//   fenced_write_vs_atomic        | atomic CAS-max loop, rising tokens         | <= 1.5x
//   fenced_write_vs_mutex         | std::mutex + compare + plain write         | (info)
//   fenced_write_same_vs_mutex    | the same, one holder writing again         | (info)
//   keyed_fence_gate_admit        | fence_gate_admit_newer's CAS-max loop      | (info)
//
// "newer" raises the gate on every call (a new holder per write); "same" repeats one (token,
// owner) pair (one holder writing many times). Since issue 20 a fence admits by token AND owner
// (fence.hpp): fence_gate keeps a 64-bit digest of the owner beside the token under a seqlock.
// The rows with the target pass the digest made once per holder (fence_gate::owner_digest, what
// a hot loop does); the *_owner rows pass the owner id (32 hex digits, holdfast's shape) and so
// also pay for hashing it on every call. The baseline checks no owner at all: it is the old rule.
//
// fenced<T>::write cannot reach the atomic figure by design: it admits the pair AND applies the
// caller's function to T as one atomic step, and for an arbitrary T and function only a lock does
// that. Its fair comparison is the cheapest correct alternative a user would write by hand,
// std::mutex + compare token and owner + write; the atomic ratio shows the price of the lock.
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>

#include "bench_common.hpp"
#include "holdfast/fence.hpp"

namespace {

using holdfast_bench::kChunkFast;
using holdfast_bench::run_paired;
using holdfast_bench::with_min_max;

// An owner id of the shape holdfast gives every lease: 32 lowercase hex digits.
constexpr std::string_view kOwner = "5d0c1f3a9b7e42c68e01f2a3b4c5d6e7";

// The physical limit of an admission: raise an atomic to `t` unless it already holds more.
struct atomic_max {
  std::atomic<std::uint64_t> newest{0};
  bool operator()(std::uint64_t t) {
    std::uint64_t seen = newest.load(std::memory_order_acquire);
    while (seen < t) {
      if (newest.compare_exchange_weak(seen, t, std::memory_order_acq_rel,
                                       std::memory_order_acquire)) {
        return true;
      }
    }
    return seen == t;
  }
};

void BM_fence_gate_admit_newer(benchmark::State& state) {
  holdfast::fence_gate gate;
  const holdfast::fence_gate::owner_digest owner(kOwner);
  atomic_max baseline;
  std::uint64_t next = 0;
  std::uint64_t base_next = 0;
  run_paired(
      state, "vs atomic compare-exchange max loop (rising tokens, no owner); target <= 1.5",
      [&] { benchmark::DoNotOptimize(gate.admit(holdfast::fencing_token(++next), owner)); },
      [&] { benchmark::DoNotOptimize(baseline(++base_next)); }, kChunkFast);
}
BENCHMARK(BM_fence_gate_admit_newer)->Apply(with_min_max);

void BM_fence_gate_admit_same(benchmark::State& state) {
  holdfast::fence_gate gate(holdfast::fencing_token(42), kOwner);
  const holdfast::fence_gate::owner_digest owner(kOwner);
  atomic_max baseline;
  baseline.newest = 42;
  run_paired(
      state, "vs atomic compare-exchange max loop (one repeated token, no owner); target <= 1.5",
      [&] { benchmark::DoNotOptimize(gate.admit(holdfast::fencing_token(42), owner)); },
      [&] { benchmark::DoNotOptimize(baseline(42)); }, kChunkFast);
}
BENCHMARK(BM_fence_gate_admit_same)->Apply(with_min_max);

void BM_fence_gate_admit_newer_owner(benchmark::State& state) {
  holdfast::fence_gate gate;
  const std::string owner(kOwner);
  atomic_max baseline;
  std::uint64_t next = 0;
  std::uint64_t base_next = 0;
  run_paired(
      state, "vs atomic compare-exchange max loop (rising tokens, no owner); owner hashed per call",
      [&] { benchmark::DoNotOptimize(gate.admit(holdfast::fencing_token(++next), owner)); },
      [&] { benchmark::DoNotOptimize(baseline(++base_next)); }, kChunkFast);
}
BENCHMARK(BM_fence_gate_admit_newer_owner)->Apply(with_min_max);

void BM_fence_gate_admit_same_owner(benchmark::State& state) {
  holdfast::fence_gate gate(holdfast::fencing_token(42), kOwner);
  const std::string owner(kOwner);
  atomic_max baseline;
  baseline.newest = 42;
  run_paired(
      state,
      "vs atomic compare-exchange max loop (one repeated token, no owner); owner hashed per call",
      [&] { benchmark::DoNotOptimize(gate.admit(holdfast::fencing_token(42), owner)); },
      [&] { benchmark::DoNotOptimize(baseline(42)); }, kChunkFast);
}
BENCHMARK(BM_fence_gate_admit_same_owner)->Apply(with_min_max);

void BM_fenced_write_vs_atomic(benchmark::State& state) {
  holdfast::fenced<std::uint64_t> value;
  atomic_max baseline;
  std::uint64_t next = 0;
  std::uint64_t base_next = 0;
  run_paired(
      state,
      "vs atomic compare-exchange max loop (rising tokens); target <= 1.5 (not reachable by "
      "design: admit+apply is one lock)",
      [&] {
        benchmark::DoNotOptimize(
            value.write(holdfast::fencing_token(++next), kOwner, [](std::uint64_t& v) { ++v; }));
      },
      [&] { benchmark::DoNotOptimize(baseline(++base_next)); }, kChunkFast);
}
BENCHMARK(BM_fenced_write_vs_atomic)->Apply(with_min_max);

// What a user would write by hand to fence a value correctly: one mutex around the check of
// token and owner and the write.
struct mutex_fenced_value {
  std::mutex mutex;
  std::uint64_t newest = 0;
  std::string owner;
  std::uint64_t value = 0;
  bool operator()(std::uint64_t t, std::string_view o) {
    std::lock_guard<std::mutex> lock(mutex);
    if (t < newest || (t == newest && o != owner)) return false;
    if (t != newest) {
      owner.assign(o.data(), o.size());
      newest = t;
    }
    ++value;
    return true;
  }
};

void BM_fenced_write_vs_mutex(benchmark::State& state) {
  holdfast::fenced<std::uint64_t> value;
  mutex_fenced_value baseline;
  std::uint64_t next = 0;
  std::uint64_t base_next = 0;
  run_paired(
      state, "vs std::mutex + compare token and owner + plain write (rising tokens)",
      [&] {
        benchmark::DoNotOptimize(
            value.write(holdfast::fencing_token(++next), kOwner, [](std::uint64_t& v) { ++v; }));
      },
      [&] { benchmark::DoNotOptimize(baseline(++base_next, kOwner)); }, kChunkFast);
}
BENCHMARK(BM_fenced_write_vs_mutex)->Apply(with_min_max);

void BM_fenced_write_same_vs_mutex(benchmark::State& state) {
  holdfast::fenced<std::uint64_t> value;
  mutex_fenced_value baseline;
  (void)value.write(holdfast::fencing_token(42), kOwner, [](std::uint64_t&) {});
  (void)baseline(42, kOwner);
  run_paired(
      state, "vs std::mutex + compare token and owner + plain write (one repeated pair)",
      [&] {
        benchmark::DoNotOptimize(
            value.write(holdfast::fencing_token(42), kOwner, [](std::uint64_t& v) { ++v; }));
      },
      [&] { benchmark::DoNotOptimize(baseline(42, kOwner)); }, kChunkFast);
}
BENCHMARK(BM_fenced_write_same_vs_mutex)->Apply(with_min_max);

void BM_keyed_fence_gate_admit(benchmark::State& state) {
  holdfast::keyed_fence_gate gate;
  atomic_max baseline;
  std::uint64_t next = 0;
  std::uint64_t base_next = 0;
  run_paired(
      state, "vs atomic compare-exchange max loop (rising tokens)",
      [&] {
        benchmark::DoNotOptimize(gate.admit("orders", holdfast::fencing_token(++next), kOwner));
      },
      [&] { benchmark::DoNotOptimize(baseline(++base_next)); });
}
BENCHMARK(BM_keyed_fence_gate_admit)->Apply(with_min_max);

}  // namespace
