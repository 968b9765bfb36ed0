// SPDX-License-Identifier: MIT
// holdfast/testing/shrink.hpp - shrinks a failing schedule's decision bytes to a minimal one that
// still breaks the same invariant, so the checker's timeline shows only what matters.
//
// A schedule is a byte string (byte_source; a libFuzzer input, a corpus file, a rapidcheck tape).
// Byte 0 is always the benign or simplest answer, so a schedule gets simpler as its bytes get
// fewer and smaller. The shrinker tries, in passes, until a pass changes nothing or the budget of
// runs is spent, and keeps a candidate only if it is strictly smaller (shorter, then fewer
// non-zero bytes, then smaller bytes) and still violates the same invariant:
//
//   step             | tries                                          | simplifies
//   -----------------+------------------------------------------------+---------------------------
//   truncate         | the shortest prefix that still fails (bisect)  | later decisions: benign
//   zero chunks      | chunks of 64, 16, 4, 1 bytes set to 0          | faults, ops, choices
//   delete chunks    | chunks of 8, 2, 1 bytes removed                | shifts the rest earlier
//   halve            | each byte v -> v / 2                           | durations, sizes
//
// Why not rapidcheck's own shrinking: it shrinks a byte vector generically, element by element,
// restarting after every accepted step, and a 700-byte schedule has hundreds of bytes whose value
// does not matter (any value below a weight's threshold means "no fault"): that took minutes per
// failure here. This shrinker runs a bounded number of schedules (a few thousand at most).
//
// Thread-safety: as safe as the runner it is given.
#ifndef HOLDFAST_TESTING_SHRINK_HPP
#define HOLDFAST_TESTING_SHRINK_HPP

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/testing/checker.hpp"
#include "holdfast/testing/decision.hpp"
#include "holdfast/testing/workload.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace testing {

/// What shrink_failure() found.
struct shrink_result {
  std::vector<std::uint8_t> bytes;  ///< The smallest failing input found.
  run_result run;                   ///< Its run: history and verdict (ok if nothing failed).
  std::size_t runs = 0;             ///< Schedules run while shrinking.
};

namespace detail {

inline bool smaller(const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b) {
  if (a.size() != b.size()) return a.size() < b.size();
  std::size_t za = 0;
  std::size_t zb = 0;
  for (std::uint8_t x : a) za += x != 0 ? 1 : 0;
  for (std::uint8_t x : b) zb += x != 0 ? 1 : 0;
  if (za != zb) return za < zb;
  return a < b;
}

}  // namespace detail

/// Shrinks `bytes` (a failing schedule for `run`, which maps a byte_source to a run_result, e.g.
/// `[&](byte_source& s) { return run_schedule(s, options); }`) to a smaller input violating the
/// same invariant, running at most `budget` schedules. Returns the input unchanged (with its run)
/// if it does not fail. Deterministic: the same input and runner give the same result.
template <class Runner,
          class = std::enable_if_t<std::is_invocable_r_v<run_result, Runner&, byte_source&>>>
shrink_result shrink_failure(std::vector<std::uint8_t> bytes, Runner&& run,
                             std::size_t budget = 4000) {
  shrink_result best;
  byte_source first(bytes.data(), bytes.size());
  best.run = run(first);
  best.runs = 1;
  const invariant target = best.run.result.violated;
  if (target == invariant::none) {
    best.bytes = std::move(bytes);
    return best;
  }
  bytes.resize(bytes.size() - first.remaining());  // bytes never read change nothing
  best.bytes = std::move(bytes);

  // Runs `candidate`; keeps it if it is smaller and still fails the same way.
  const auto attempt = [&](std::vector<std::uint8_t> candidate) {
    if (best.runs >= budget || !detail::smaller(candidate, best.bytes)) return false;
    byte_source src(candidate.data(), candidate.size());
    run_result r = run(src);
    ++best.runs;
    if (r.result.violated != target) return false;
    candidate.resize(candidate.size() - src.remaining());
    best.bytes = std::move(candidate);
    best.run = std::move(r);
    return true;
  };

  bool changed = true;
  while (changed && best.runs < budget) {
    changed = false;
    // Truncate: bisect the shortest failing prefix (a prefix's missing decisions are benign).
    std::size_t lo = 0;
    std::size_t hi = best.bytes.size();
    while (lo < hi && best.runs < budget) {
      const std::size_t mid = lo + (hi - lo) / 2;
      std::vector<std::uint8_t> c(best.bytes.begin(),
                                  best.bytes.begin() + static_cast<std::ptrdiff_t>(mid));
      if (attempt(std::move(c))) {
        changed = true;
        hi = best.bytes.size();
      } else {
        lo = mid + 1;
      }
    }
    // Zero chunks, largest first.
    for (std::size_t chunk : {64u, 16u, 4u, 1u}) {
      for (std::size_t at = 0; at < best.bytes.size() && best.runs < budget; at += chunk) {
        std::vector<std::uint8_t> c = best.bytes;
        bool any = false;
        for (std::size_t i = at; i < at + chunk && i < c.size(); ++i) {
          any = any || c[i] != 0;
          c[i] = 0;
        }
        if (any && attempt(std::move(c))) changed = true;
      }
    }
    // Delete chunks.
    for (std::size_t chunk : {8u, 2u, 1u}) {
      for (std::size_t at = 0; at < best.bytes.size() && best.runs < budget;) {
        std::vector<std::uint8_t> c = best.bytes;
        const std::size_t end = at + chunk < c.size() ? at + chunk : c.size();
        c.erase(c.begin() + static_cast<std::ptrdiff_t>(at),
                c.begin() + static_cast<std::ptrdiff_t>(end));
        if (attempt(std::move(c))) {
          changed = true;  // stay at `at`: the next chunk moved here
        } else {
          at += chunk;
        }
      }
    }
    // Halve non-zero bytes.
    for (std::size_t i = 0; i < best.bytes.size() && best.runs < budget; ++i) {
      if (best.bytes[i] == 0) continue;
      std::vector<std::uint8_t> c = best.bytes;
      c[i] = static_cast<std::uint8_t>(c[i] / 2);
      if (attempt(std::move(c))) changed = true;
    }
  }
  return best;
}

/// Shrinks a failing schedule of run_schedule(src, options) (memory_store, or the mutant the
/// options select). See shrink_failure(bytes, runner, budget).
inline shrink_result shrink_failure(std::vector<std::uint8_t> bytes, const run_options& options,
                                    std::size_t budget = 4000) {
  return shrink_failure(
      std::move(bytes), [&options](byte_source& s) { return run_schedule(s, options); }, budget);
}

}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_SHRINK_HPP
