// SPDX-License-Identifier: MIT
// holdfast/backoff.hpp - exponential backoff with full jitter, for retrying a contended acquire.
//
// Attempt n (from 0) waits a uniformly random time in [0, min(max_delay, initial * multiplier^n)]
// ("full jitter", Brooker, "Exponential Backoff And Jitter", AWS Architecture Blog 2015): many
// contenders that all failed at once spread out instead of retrying in lockstep. A deadline and an
// optional attempt limit bound the whole wait (lease.hpp's acquire()).
#ifndef HOLDFAST_BACKOFF_HPP
#define HOLDFAST_BACKOFF_HPP

#include <chrono>
#include <cmath>
#include <cstdint>
#include <optional>
#include <system_error>

#include "holdfast/detail/config.hpp"
#include "holdfast/detail/random.hpp"
#include "holdfast/error.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

/// How a blocking acquire spaces its attempts.
struct backoff_options {
  /// Upper bound of the first delay (ns), > 0. Default 10 ms.
  std::chrono::nanoseconds initial = std::chrono::milliseconds(10);
  /// Cap on any single delay's upper bound (ns), >= initial. Default 1 s.
  std::chrono::nanoseconds max_delay = std::chrono::seconds(1);
  /// Growth factor of the upper bound per attempt, >= 1. Default 2.
  double multiplier = 2.0;
  /// Attempts allowed in all (the first included); 0 means "until the deadline". Default 0.
  std::uint32_t max_attempts = 0;
  /// Seed for the jitter; nullopt (default) draws one from the OS. Set it to replay a schedule.
  std::optional<std::uint64_t> seed{};

  /// Returns errc::invalid_argument if initial <= 0, max_delay < initial, or multiplier < 1 (or
  /// NaN); a zero error code otherwise.
  [[nodiscard]] std::error_code check() const noexcept {
    if (initial <= std::chrono::nanoseconds::zero() || max_delay < initial) {
      return errc::invalid_argument;
    }
    if (!(multiplier >= 1.0)) return errc::invalid_argument;
    return {};
  }
};

/// A sequence of jittered, exponentially growing delays. Precondition: `opts.check()` is clean.
/// Thread-safety: one object per retry loop; not for concurrent use.
class backoff {
 public:
  explicit backoff(const backoff_options& opts)
      : opts_(opts),
        gen_(opts.seed ? *opts.seed : detail::thread_generator().next()),
        ceiling_(static_cast<long double>(opts.initial.count())) {}

  /// Returns the delay (ns) to wait before the next attempt and counts one attempt as made.
  std::chrono::nanoseconds next_delay() noexcept {
    ++attempts_;
    const long double cap = static_cast<long double>(opts_.max_delay.count());
    const long double bound = ceiling_ < cap ? ceiling_ : cap;
    ceiling_ = bound * static_cast<long double>(opts_.multiplier);  // grows to cap, no overflow
    return std::chrono::nanoseconds(
        static_cast<std::int64_t>(gen_.uniform_inclusive(static_cast<std::uint64_t>(bound))));
  }

  /// Returns how many delays have been handed out.
  [[nodiscard]] std::uint32_t attempts() const noexcept { return attempts_; }

  /// Returns true iff `max_attempts` is set and that many attempts have been made, counting
  /// `made` attempts so far.
  [[nodiscard]] bool exhausted(std::uint32_t made) const noexcept {
    return opts_.max_attempts != 0 && made >= opts_.max_attempts;
  }

 private:
  backoff_options opts_;
  detail::xoshiro256 gen_;
  long double ceiling_;
  std::uint32_t attempts_ = 0;
};

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_BACKOFF_HPP
