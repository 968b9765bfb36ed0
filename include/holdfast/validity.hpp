// SPDX-License-Identifier: MIT
// holdfast/validity.hpp - how long a holder may trust its lease, on its own clock.
//
// The store judges expiry by its own clock (store.hpp, T2); the holder cannot see that clock. So
// the holder trusts its lease only for a conservative share of the TTL, measured on its own clock
// from an instant read *before* the request was sent (a reply can only arrive later, so the store
// started the TTL no earlier than that instant):
//
//     valid_until = start + ttl * (1 - drift) - margin
//
// `drift` bounds the relative rate error between the holder's clock and the store's (1% by
// default, as in Redlock); `margin` is a fixed allowance for what drift does not cover (scheduling,
// the store's own TTL resolution). Measuring from the reply instead of the request is a classic
// bug: the request's time in flight is then silently added to the holder's belief.
//
// Validity only decides what the holder *believes* (invariant S4). Safety (S1) never depends on
// it: a holder that is paused past its validity is stopped by the fencing token, not by this math.
#ifndef HOLDFAST_VALIDITY_HPP
#define HOLDFAST_VALIDITY_HPP

#include <chrono>
#include <cstdint>
#include <cstring>
#include <optional>
#include <system_error>

#include "holdfast/detail/config.hpp"
#include "holdfast/detail/saturating.hpp"
#include "holdfast/error.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

/// How conservative a holder is about its lease's validity.
struct validity_options {
  /// Bound on the relative clock-rate error between holder and store, in [0, 1). Default 0.01 (1%,
  /// the Redlock default).
  double drift = 0.01;
  /// Fixed safety allowance subtracted from every validity span, >= 0. Default 2 ms (Redlock).
  std::chrono::nanoseconds margin = std::chrono::milliseconds(2);

  /// Returns errc::invalid_argument if drift is not in [0, 1) (or NaN) or margin is negative;
  /// a zero error code otherwise.
  [[nodiscard]] std::error_code check() const noexcept {
    if (!(drift >= 0.0 && drift < 1.0)) return errc::invalid_argument;
    if (margin < std::chrono::nanoseconds::zero()) return errc::invalid_argument;
    return {};
  }
};

namespace detail {

// A 128-bit unsigned number as two 64-bit halves: the product of two 64-bit numbers.
struct wide_product {
  std::uint64_t hi;
  std::uint64_t lo;
};

// Returns a * b exactly, from four 32-bit partial products: the portable form, used where the
// compiler has no 128-bit integer (and tested against it where it has one).
constexpr wide_product multiply_wide_portable(std::uint64_t a, std::uint64_t b) noexcept {
  const std::uint64_t mask = 0xffffffffu;
  const std::uint64_t a0 = a & mask, a1 = a >> 32, b0 = b & mask, b1 = b >> 32;
  const std::uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
  const std::uint64_t middle = (p00 >> 32) + (p01 & mask) + (p10 & mask);  // < 3 * 2^32
  return {p11 + (p01 >> 32) + (p10 >> 32) + (middle >> 32), (middle << 32) | (p00 & mask)};
}

// Returns a * b exactly.
constexpr wide_product multiply_wide(std::uint64_t a, std::uint64_t b) noexcept {
#if defined(__SIZEOF_INT128__)
  __extension__ using u128 = unsigned __int128;
  const u128 p = static_cast<u128>(a) * b;
  return {static_cast<std::uint64_t>(p >> 64), static_cast<std::uint64_t>(p)};
#else
  return multiply_wide_portable(a, b);
#endif
}

// n * f, exactly: the whole part and whether a fraction was cut off.
struct scaled_count {
  std::uint64_t whole;
  bool cut;
};

// Returns n * f exactly for n < 2^63 and f in [0, 1] (a double is m * 2^-s with m < 2^53, so the
// product is the 116-bit n * m shifted right by s). Exact where `long double` arithmetic rounds
// (its 64-bit mantissa holds fewer than the product's bits) and far cheaper than its std::ceil.
// Precondition: f in [0, 1] (validity_options::check, or a caller's own range test).
inline scaled_count scale_by_fraction(std::uint64_t n, double f) noexcept {
  std::uint64_t bits = 0;
  static_assert(sizeof bits == sizeof f, "an IEEE 754 binary64 double");
  std::memcpy(&bits, &f, sizeof bits);
  const unsigned biased = static_cast<unsigned>(bits >> 52) & 0x7ffu;
  std::uint64_t m = bits & ((std::uint64_t{1} << 52) - 1);
  unsigned s = 1074;  // subnormal: m * 2^-1074
  if (biased != 0) {  // normal: (2^52 + m) * 2^(biased - 1075); f <= 1 makes s >= 52
    m |= std::uint64_t{1} << 52;
    s = 1075 - biased;
  }
  if (m == 0 || n == 0) return {0, false};
  const wide_product p = multiply_wide(n, m);
  if (s >= 128) return {0, true};
  if (s >= 64) {
    const unsigned r = s - 64;
    const std::uint64_t low_bits = r == 0 ? 0 : (p.hi & ((std::uint64_t{1} << r) - 1));
    return {p.hi >> r, p.lo != 0 || low_bits != 0};
  }
  // 52 <= s < 64: the product is below 2^116, so the whole part is below 2^64.
  return {(p.hi << (64 - s)) | (p.lo >> s), (p.lo & ((std::uint64_t{1} << s) - 1)) != 0};
}

}  // namespace detail

/// Returns for how long (in nanoseconds) a holder may trust a grant of `ttl`:
/// `ttl * (1 - drift) - margin`, rounded down, and zero when that is not positive (the grant is
/// then worthless to the holder). Never overflows: a TTL beyond the nanosecond range saturates.
/// Precondition: `opts.check()` is clean (a bad drift is treated as 100%, i.e. zero validity).
template <class Rep, class Period>
[[nodiscard]] std::chrono::nanoseconds trusted_span(std::chrono::duration<Rep, Period> ttl,
                                                    const validity_options& opts) noexcept;

namespace detail {

// trusted_span() of options whose check() the caller has just found clean (an acquire's input
// check): the same span, without checking them a second time on every acquire.
template <class Rep, class Period>
[[nodiscard]] std::chrono::nanoseconds checked_trusted_span(std::chrono::duration<Rep, Period> ttl,
                                                            const validity_options& opts) noexcept {
  using ns = std::chrono::nanoseconds;
  const std::optional<ns> t = detail::checked_duration_cast<ns>(ttl);
  const std::int64_t ttl_ns = t ? t->count() : (ttl.count() > 0 ? ns::max().count() : 0);
  if (ttl_ns <= 0) return ns::zero();
  // Round the drift allowance *up* and the result *down*: both err toward trusting less. The
  // product is exact (integer arithmetic on the double's exact value), so the result is the
  // exact ttl*(1-drift) - margin rounded down: never more trusting, and never 1 ns less than it.
  const detail::scaled_count drift =
      detail::scale_by_fraction(static_cast<std::uint64_t>(ttl_ns), opts.drift);
  // drift < 1, so the allowance, drift.whole + 1 at most, never exceeds ttl_ns.
  const std::int64_t allowance = static_cast<std::int64_t>(drift.whole) + (drift.cut ? 1 : 0);
  const std::int64_t after_drift = ttl_ns - allowance;  // >= 0
  const std::int64_t margin = opts.margin.count();
  if (after_drift <= margin) return ns::zero();
  return ns(after_drift - margin);
}

}  // namespace detail

template <class Rep, class Period>
std::chrono::nanoseconds trusted_span(std::chrono::duration<Rep, Period> ttl,
                                      const validity_options& opts) noexcept {
  if (opts.check()) return std::chrono::nanoseconds::zero();
  return detail::checked_trusted_span(ttl, opts);
}

namespace detail {

// Both valid_until() overloads once trusted_span() gave `span`: `start + span`, the span rounded
// down to the clock's duration so a coarse clock never extends validity, clamped to the clock's
// range, then less the tick's lag (tick - 1 unit; none for a tick of one unit or zero), clamped
// to `start`. Apart so that an acquire, whose input check computes the span of its TTL, need not
// compute it again for the lease it grants (lease/detail/acquire.hpp).
template <class Clock, class Dur>
std::chrono::time_point<Clock, Dur> valid_until_of_span(std::chrono::time_point<Clock, Dur> start,
                                                        std::chrono::nanoseconds span,
                                                        Dur tick) noexcept {
  using tp = std::chrono::time_point<Clock, Dur>;
  const std::optional<Dur> span_ticks = checked_duration_cast<Dur>(span);
  const tp until = span_ticks ? saturating_add(start, *span_ticks) : tp::max();
  if (!(tick > Dur(1))) return until;
  const Dur lag = tick - Dur(1);
  return until - start > lag ? until - lag : start;
}

}  // namespace detail

/// Returns the instant on the holder's clock after which it must stop trusting a grant of `ttl`
/// whose request left at `start`: `start + trusted_span(ttl, opts)`, clamped to the clock's range.
/// `start` must be read *before* the request was sent (validity.hpp). A result equal to `start`
/// means the grant is never valid.
template <class Clock, class Dur, class Rep, class Period>
[[nodiscard]] std::chrono::time_point<Clock, Dur> valid_until(
    std::chrono::time_point<Clock, Dur> start, std::chrono::duration<Rep, Period> ttl,
    const validity_options& opts) noexcept {
  return detail::valid_until_of_span(start, trusted_span(ttl, opts), Dur(1));
}

/// Returns the instant on the holder's clock at which a grant of `ttl` whose request left at
/// `start` is due for renewal: `fraction` of the TTL after `start` (default 1/2, validity.hpp), but
/// never later than one clock tick before valid_until(start, ttl, opts). The renewal instant thus
/// lies strictly inside validity, whatever the options: a renew() sent at that instant still finds
/// the lease valid (with TTL 10 s and margin 6 s validity is 3.9 s, so the renewal is due at
/// start + 3.9 s - 1 tick, not at 5 s; with a TTL of a few ms and the defaults, likewise). A grant
/// that gives no validity at all (valid_until == start) is due at `start`. A `fraction` outside
/// (0, 1) (or NaN) is treated as 1/2. Never overflows: instants saturate at the clock's range.
/// This is the one place the renewal instant is computed (lease::renew_due_at, keepalive).
template <class Clock, class Dur, class Rep, class Period>
[[nodiscard]] std::chrono::time_point<Clock, Dur> renew_due_at(
    std::chrono::time_point<Clock, Dur> start, std::chrono::duration<Rep, Period> ttl,
    const validity_options& opts, double fraction = 0.5) noexcept {
  using tp = std::chrono::time_point<Clock, Dur>;
  const tp until = holdfast::valid_until(start, ttl, opts);
  if (!(start < until)) return start;
  if (!(fraction > 0.0 && fraction < 1.0)) fraction = 0.5;
  const std::optional<std::chrono::nanoseconds> t =
      detail::checked_duration_cast<std::chrono::nanoseconds>(ttl);
  // until > start, so the TTL was positive; a TTL beyond the nanosecond range saturates.
  const std::int64_t ttl_ns = t ? t->count() : std::chrono::nanoseconds::max().count();
  // fraction * ttl rounded down, exactly (as trusted_span's drift allowance).
  const std::uint64_t part =
      detail::scale_by_fraction(static_cast<std::uint64_t>(ttl_ns), fraction).whole;
  const tp at =
      detail::saturating_add(start, std::chrono::nanoseconds(static_cast<std::int64_t>(part)));
  const tp last = until - Dur(1);  // until > start, so this cannot underflow
  return at < last ? at : last;
}

/// valid_until() for a holder whose clock has tick `tick` (clock_tick(), clock.hpp): a reading
/// may lag true time by almost a tick, so the holder stops trusting its grant when its clock reads
/// `valid_until(start, ttl, opts) - (tick - 1 unit)`, clamped to `start`. With that, "reading <
/// result" implies "true time < start + trusted_span" for every clock whose readings are true time
/// rounded down to its tick; a tick of one unit (a clock that declares none) or zero changes
/// nothing. Example: TTL 1 s, drift 1%, margin 2 ms, a 100 ms clock: valid for 888 ms + 1 ns of
/// readings, not 988 ms. The one place lease.hpp computes a holder's validity.
template <class Clock, class Dur, class Rep, class Period>
[[nodiscard]] std::chrono::time_point<Clock, Dur> valid_until(
    std::chrono::time_point<Clock, Dur> start, std::chrono::duration<Rep, Period> ttl,
    const validity_options& opts, Dur tick) noexcept {
  return detail::valid_until_of_span(start, trusted_span(ttl, opts), tick);
}

/// renew_due_at() for a holder whose clock has tick `tick`: the same instant, but never later
/// than one unit before valid_until(start, ttl, opts, tick), so a renewal sent then still finds
/// the lease valid on a coarse clock too. `start` if that validity is empty.
template <class Clock, class Dur, class Rep, class Period>
[[nodiscard]] std::chrono::time_point<Clock, Dur> renew_due_at(
    std::chrono::time_point<Clock, Dur> start, std::chrono::duration<Rep, Period> ttl,
    const validity_options& opts, double fraction, Dur tick) noexcept {
  using tp = std::chrono::time_point<Clock, Dur>;
  const tp until = holdfast::valid_until(start, ttl, opts, tick);
  if (!(start < until)) return start;
  const tp at = holdfast::renew_due_at(start, ttl, opts, fraction);
  const tp last = until - Dur(1);  // until > start, so this cannot underflow
  return at < last ? at : last;
}

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_VALIDITY_HPP
