// SPDX-License-Identifier: MIT
// holdfast/detail/saturating.hpp - overflow-free duration and time_point arithmetic.
//
// Not a public header. TTLs come from users (and from stores that may answer garbage), so every
// conversion between duration types and every "start + ttl" is checked: a conversion that cannot
// be represented is reported, and an addition clamps at the clock's range instead of wrapping.
#ifndef HOLDFAST_DETAIL_SATURATING_HPP
#define HOLDFAST_DETAIL_SATURATING_HPP

#include <chrono>
#include <cstdint>
#include <limits>
#include <optional>
#include <ratio>
#include <type_traits>

#include "holdfast/detail/config.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

// checked_duration_cast() for the other reps and ratios (floating point, unsigned, wider than
// intmax_t, or a ratio with both parts above 1): the arithmetic in long double.
template <class To, class Rep, class Period>
constexpr std::optional<To> checked_duration_cast_wide(
    std::chrono::duration<Rep, Period> d) noexcept {
  using to_rep = typename To::rep;
  using ratio = std::ratio_divide<Period, typename To::period>;
  // Do the arithmetic in long double: it has a 64-bit mantissa on the platforms we build on and
  // a range far beyond int64, so the range test below is exact enough and never overflows.
  const long double value = static_cast<long double>(d.count()) *
                            static_cast<long double>(ratio::num) /
                            static_cast<long double>(ratio::den);
  if (!(value == value)) return std::nullopt;  // NaN
  // 2^63 is exactly representable; anything at or beyond it does not fit in int64.
  constexpr long double hi = static_cast<long double>(std::numeric_limits<to_rep>::max()) + 1.0L;
  constexpr long double lo = static_cast<long double>(std::numeric_limits<to_rep>::min());
  if (!(value < hi) || value < lo) return std::nullopt;
  if constexpr (std::is_integral_v<Rep> && ratio::den == 1) {
    // Exact integer path (no long double rounding) once the range is known to be safe.
    return To(static_cast<to_rep>(d.count()) * static_cast<to_rep>(ratio::num));
  } else if constexpr (std::is_integral_v<Rep> && ratio::num == 1) {
    return To(static_cast<to_rep>(d.count() / static_cast<Rep>(ratio::den)));
  } else {
    return To(static_cast<to_rep>(value));
  }
}

/// Converts `d` to `To`, truncating toward zero, or returns nullopt if the value does not fit.
/// Works for integral and floating-point reps (NaN and infinities do not fit).
template <class To, class Rep, class Period>
constexpr std::optional<To> checked_duration_cast(std::chrono::duration<Rep, Period> d) noexcept {
  using to_rep = typename To::rep;
  static_assert(std::is_integral_v<to_rep>, "checked_duration_cast targets integral durations");
  using ratio = std::ratio_divide<Period, typename To::period>;
  if constexpr (std::is_integral_v<Rep> && std::is_signed_v<Rep> && std::is_signed_v<to_rep> &&
                sizeof(Rep) <= sizeof(std::intmax_t) && sizeof(to_rep) <= sizeof(std::intmax_t) &&
                (ratio::den == 1 || (ratio::num == 1 && sizeof(Rep) <= sizeof(to_rep)))) {
    // The common conversions between signed integer durations (the same unit, ms to ns, ns to
    // a coarser unit of a rep at least as wide) in exact integer arithmetic: the same answers as
    // checked_duration_cast_wide (above), without its x87 loads, multiply, divide and compares,
    // which cost several ns each time a lease computes its validity (tests/benchmarks/README.md).
    const std::intmax_t c = d.count();
    if constexpr (ratio::den == 1) {
      // c * num fits iff min / num <= c <= max / num (num > 0; the quotients truncate toward
      // zero, which is the floor of the upper bound and the ceiling of the lower one).
      constexpr std::intmax_t num = ratio::num;
      constexpr std::intmax_t hi = std::numeric_limits<to_rep>::max() / num;
      constexpr std::intmax_t lo = std::numeric_limits<to_rep>::min() / num;
      if (c > hi || c < lo) return std::nullopt;
      return To(static_cast<to_rep>(c * num));
    } else {
      // Dividing by den > 1 into a rep at least as wide always fits.
      return To(static_cast<to_rep>(c / static_cast<std::intmax_t>(ratio::den)));
    }
  } else {
    return checked_duration_cast_wide<To>(d);
  }
}

/// Returns `t + d`, clamped to the time_point's representable range.
template <class Clock, class Dur, class Rep, class Period>
constexpr std::chrono::time_point<Clock, Dur> saturating_add(
    std::chrono::time_point<Clock, Dur> t, std::chrono::duration<Rep, Period> d) noexcept {
  using tp = std::chrono::time_point<Clock, Dur>;
  const std::optional<Dur> dd = checked_duration_cast<Dur>(d);
  if (!dd) return d.count() > 0 ? tp::max() : tp::min();
  const auto a = t.time_since_epoch().count();
  const auto b = dd->count();
  using r = decltype(a + b);
  if (b > 0 && a > std::numeric_limits<r>::max() - b) return tp::max();
  if (b < 0 && a < std::numeric_limits<r>::min() - b) return tp::min();
  return tp(Dur(a + b));
}

/// Returns `a - b` for two time_points as a duration, clamped to the duration's range.
template <class Clock, class Dur>
constexpr Dur saturating_sub(std::chrono::time_point<Clock, Dur> a,
                             std::chrono::time_point<Clock, Dur> b) noexcept {
  const auto x = a.time_since_epoch().count();
  const auto y = b.time_since_epoch().count();
  using r = decltype(x - y);
  if (y < 0 && x > std::numeric_limits<r>::max() + y) return Dur::max();
  if (y > 0 && x < std::numeric_limits<r>::min() + y) return Dur::min();
  return Dur(x - y);
}

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_DETAIL_SATURATING_HPP
