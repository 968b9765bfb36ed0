// SPDX-License-Identifier: MIT
// tests/benchmarks/bench_multi_lease.cpp - all-or-nothing leases on 4 keys (multi_lease.hpp) on
// memory_store, against 4 single leases acquired and released one after another in the same run.
//
//   benchmark                          | compared with                          | target
//   -----------------------------------+----------------------------------------+--------------
//   multi_lease_atomic_4               | 4 x (try_acquire + release) leases     | <= 1 (the
//                                      |                                        | atomic path)
//   multi_lease_ordered_4              | 4 x (try_acquire + release) leases     | (info)
//   store_try_acquire_all_4            | 4 x store try_acquire + 4 releases     | (info)
//
// The atomic path takes the store's lock once for the 4 grants (the releases are still one call
// each); the ordered path, on a store without the capability, is 4 single acquires plus the
// sorting and the handle. On a networked store the figure that matters is round trips: 1 + 4
// against 4 + 4 here; a store that also released all in one step would make it 1 + 1.
#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "bench_common.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/multi_lease.hpp"
#include "holdfast/stores/memory.hpp"

namespace {

using holdfast_bench::run_paired;
using holdfast_bench::sample_owner;
using holdfast_bench::with_min_max;

constexpr std::chrono::milliseconds kTtl{10'000};
const std::vector<std::string> kKeys{"k0", "k1", "k2", "k3"};

// A LeaseStore over memory_store without the atomic capability: the ordered path.
struct plain_store {
  holdfast::memory_store<>* s;
  holdfast::result<holdfast::grant> try_acquire(std::string_view k, std::string_view o,
                                                std::chrono::milliseconds t) {
    return s->try_acquire(k, o, t);
  }
  holdfast::result<holdfast::grant> renew(std::string_view k, std::string_view o,
                                          holdfast::fencing_token tk, std::chrono::milliseconds t) {
    return s->renew(k, o, tk, t);
  }
  holdfast::result<void> release(std::string_view k, std::string_view o,
                                 holdfast::fencing_token tk) {
    return s->release(k, o, tk);
  }
};

holdfast::acquire_options<> given_owner() {
  holdfast::acquire_options<> o;
  o.owner = sample_owner();
  return o;
}

// The baseline: 4 leases, one after another, each acquired and released.
struct four_singles {
  holdfast::memory_store<>* store;
  holdfast::acquire_options<> opts = given_owner();
  benchmark::State* state;
  void operator()() {
    for (const std::string& k : kKeys) {
      auto l = holdfast::try_acquire(*store, k, kTtl, opts);
      if (!l || !l->release()) state->SkipWithError("single lease failed");
    }
  }
};

void BM_multi_lease_atomic_4(benchmark::State& state) {
  holdfast::memory_store<> store;
  const holdfast::acquire_options<> opts = given_owner();
  run_paired(
      state, "vs 4 x lease try_acquire + release; target <= 1",
      [&] {
        auto m = holdfast::try_acquire_all(store, kKeys, kTtl, opts);
        if (!m || !m->release()) state.SkipWithError("try_acquire_all failed");
      },
      four_singles{&store, given_owner(), &state}, 64);
}
BENCHMARK(BM_multi_lease_atomic_4)->Apply(with_min_max);

void BM_multi_lease_ordered_4(benchmark::State& state) {
  holdfast::memory_store<> store;
  plain_store plain{&store};
  const holdfast::acquire_options<> opts = given_owner();
  run_paired(
      state, "vs 4 x lease try_acquire + release",
      [&] {
        auto m = holdfast::try_acquire_all(plain, kKeys, kTtl, opts);
        if (!m || !m->release()) state.SkipWithError("try_acquire_all failed");
      },
      four_singles{&store, given_owner(), &state}, 64);
}
BENCHMARK(BM_multi_lease_ordered_4)->Apply(with_min_max);

void BM_store_try_acquire_all_4(benchmark::State& state) {
  holdfast::memory_store<> store;
  const std::string& owner = sample_owner();
  const std::string_view views[4] = {kKeys[0], kKeys[1], kKeys[2], kKeys[3]};
  run_paired(
      state, "vs 4 x store try_acquire + release",
      [&] {
        holdfast::grant g[4];
        if (!store.try_acquire_all(views, 4, owner, kTtl, g)) state.SkipWithError("failed");
        for (int i = 0; i < 4; ++i) (void)store.release(views[i], owner, g[i].token);
      },
      [&] {
        for (const std::string_view k : views) {
          auto g = store.try_acquire(k, owner, kTtl);
          if (!g || !store.release(k, owner, g->token)) state.SkipWithError("failed");
        }
      },
      64);
}
BENCHMARK(BM_store_try_acquire_all_4)->Apply(with_min_max);

}  // namespace
