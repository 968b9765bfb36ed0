// SPDX-License-Identifier: MIT
// holdfast/testing/detail/sim_time.hpp - how a simulated node's clock reads against the
// simulator's true time: its own epoch, its rate error (drift, in ppm), its tick, and jumps.
//
// Not a public header: the simulator (testing/simulator.hpp) keeps one node_clock per node and
// is the only user. Pure integer arithmetic on nanoseconds, no state beyond the node's own.
//
// A node's clock is piecewise linear in true time. Each segment starts at true time `base_true`,
// where the clock read `base_local`, and advances (1 + skew_ppm / 1e6) per true nanosecond. A
// rate change or a jump starts a new segment (rebase()), so the reading is continuous across a
// rate change and moves by exactly the jump at a jump. Reads round down to `tick_ns`: a coarse
// clock reads true time truncated to its tick (fault_options::store_clock_ticks and
// client_clock_ticks).
//
// Thread-safety: a plain value; the simulator's thread only.
#ifndef HOLDFAST_TESTING_DETAIL_SIM_TIME_HPP
#define HOLDFAST_TESTING_DETAIL_SIM_TIME_HPP

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "holdfast/detail/config.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace testing {
namespace detail {

/// One simulated node's clock as a function of true time (see the file comment).
struct node_clock {
  std::int64_t base_true = 0;   // true time of the current segment's start
  std::int64_t base_local = 0;  // clock reading at base_true
  std::int32_t skew_ppm = 0;    // rate error: local advances (1 + skew/1e6) per true ns
  std::int64_t tick_ns = 0;     // reads are rounded down to this (0: exact)

  /// Returns `v` rounded down to a multiple of `tick` (`v` itself for tick <= 0).
  static std::int64_t round_down(std::int64_t v, std::int64_t tick) noexcept {
    if (tick <= 0) return v;
    std::int64_t r = v % tick;
    if (r < 0) r += tick;
    return v - r;
  }

  /// Returns `v` rounded up to a multiple of `tick` (`v` itself for tick <= 0): the first reading
  /// at or after `v` that a clock with that tick shows.
  static std::int64_t round_up(std::int64_t v, std::int64_t tick) noexcept {
    const std::int64_t down = round_down(v, tick);
    return down == v ? v : down + tick;
  }

  /// Returns floor(d * ppm / 1e6) for d >= 0 without overflow for any simulated span.
  static std::int64_t scaled_ppm(std::int64_t d, std::int32_t ppm) noexcept {
    const std::int64_t q = d / 1000000;
    const std::int64_t r = d % 1000000;
    const std::int64_t p = r * ppm;
    std::int64_t f = p / 1000000;
    if (p % 1000000 != 0 && p < 0) --f;
    return q * ppm + f;
  }

  /// Returns the exact (not tick-rounded) reading at true time `t`.
  std::int64_t local_at(std::int64_t t) const noexcept {
    const std::int64_t d = t - base_true;
    return base_local + d + scaled_ppm(d, skew_ppm);
  }

  /// Returns the earliest true time >= `now` at which the exact reading is at least `target`.
  std::int64_t true_at_local(std::int64_t target, std::int64_t now) const noexcept {
    if (local_at(now) >= target) return now;
    const long double need = static_cast<long double>(target - base_local);
    const long double rate = 1.0L + static_cast<long double>(skew_ppm) / 1e6L;
    const long double est = std::ceil(need / rate);
    if (!(est < 4.0e18L)) return std::numeric_limits<std::int64_t>::max() / 2;
    std::int64_t t = std::max(now, base_true + static_cast<std::int64_t>(est));
    while (local_at(t) < target) ++t;
    while (t > now && local_at(t - 1) >= target) --t;
    return t;
  }

  /// Starts a new segment at true time `now` (before a rate change or a jump).
  void rebase(std::int64_t now) noexcept {
    base_local = local_at(now);
    base_true = now;
  }
};

}  // namespace detail
}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_DETAIL_SIM_TIME_HPP
