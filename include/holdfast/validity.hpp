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
#include <cmath>
#include <cstdint>
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

/// Returns for how long (in nanoseconds) a holder may trust a grant of `ttl`:
/// `ttl * (1 - drift) - margin`, rounded down, and zero when that is not positive (the grant is
/// then worthless to the holder). Never overflows: a TTL beyond the nanosecond range saturates.
/// Precondition: `opts.check()` is clean (a bad drift is treated as 100%, i.e. zero validity).
template <class Rep, class Period>
[[nodiscard]] std::chrono::nanoseconds trusted_span(std::chrono::duration<Rep, Period> ttl,
                                                    const validity_options& opts) noexcept {
  using ns = std::chrono::nanoseconds;
  if (opts.check()) return ns::zero();
  const std::optional<ns> t = detail::checked_duration_cast<ns>(ttl);
  const std::int64_t ttl_ns = t ? t->count() : (ttl.count() > 0 ? ns::max().count() : 0);
  if (ttl_ns <= 0) return ns::zero();
  // Round the drift allowance *up* and the result *down*: both err toward trusting less.
  const long double allowance_ld =
      std::ceil(static_cast<long double>(ttl_ns) * static_cast<long double>(opts.drift));
  const std::int64_t allowance = allowance_ld >= static_cast<long double>(ttl_ns)
                                     ? ttl_ns
                                     : static_cast<std::int64_t>(allowance_ld);
  const std::int64_t after_drift = ttl_ns - allowance;  // >= 0
  const std::int64_t margin = opts.margin.count();
  if (after_drift <= margin) return ns::zero();
  return ns(after_drift - margin);
}

/// Returns the instant on the holder's clock after which it must stop trusting a grant of `ttl`
/// whose request left at `start`: `start + trusted_span(ttl, opts)`, clamped to the clock's range.
/// `start` must be read *before* the request was sent (validity.hpp). A result equal to `start`
/// means the grant is never valid.
template <class Clock, class Dur, class Rep, class Period>
[[nodiscard]] std::chrono::time_point<Clock, Dur> valid_until(
    std::chrono::time_point<Clock, Dur> start, std::chrono::duration<Rep, Period> ttl,
    const validity_options& opts) noexcept {
  const std::chrono::nanoseconds span = trusted_span(ttl, opts);
  // Round down to the clock's tick so a coarse clock never extends validity.
  const std::optional<Dur> span_ticks = detail::checked_duration_cast<Dur>(span);
  if (!span_ticks) return std::chrono::time_point<Clock, Dur>::max();
  return detail::saturating_add(start, *span_ticks);
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
  const long double ttl_ns = t ? static_cast<long double>(t->count())
                               : static_cast<long double>(std::chrono::nanoseconds::max().count());
  const long double part = ttl_ns * static_cast<long double>(fraction);
  const tp at = detail::saturating_add(
      start, std::chrono::nanoseconds(static_cast<std::int64_t>(part > 0 ? part : 0.0L)));
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
  const std::chrono::time_point<Clock, Dur> until = holdfast::valid_until(start, ttl, opts);
  if (!(tick > Dur(1))) return until;
  const Dur lag = tick - Dur(1);
  return until - start > lag ? until - lag : start;
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
