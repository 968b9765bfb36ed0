// SPDX-License-Identifier: MIT
// Unit tests for holdfast/validity.hpp: how long a holder trusts a grant, on its own clock:
// start + ttl*(1-drift) - margin, rounded toward trusting less, saturating, never overflowing.
#include <rapidcheck.h>
#include <rapidcheck/catch.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <ratio>

#include "holdfast/clock.hpp"
#include "holdfast/validity.hpp"
#include "test_support.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_validity {

using holdfast::trusted_span;
using holdfast::validity_options;
using namespace std::chrono_literals;
using ns = std::chrono::nanoseconds;

namespace {

validity_options opts(double drift, ns margin) {
  validity_options o;
  o.drift = drift;
  o.margin = margin;
  return o;
}

struct tag_clock {};  // only names time_point types below; never asked for the time
using coarse_tp = std::chrono::time_point<tag_clock, std::chrono::seconds>;
using pico_tp = std::chrono::time_point<tag_clock, std::chrono::duration<long long, std::pico>>;
using manual_tp = holdfast::manual_clock::time_point;

}  // namespace

TEST_CASE("validity_options::check accepts drift in [0, 1) and margin >= 0", "[validity]") {
  CHECK_FALSE(validity_options{}.check());
  CHECK(validity_options{}.drift == 0.01);
  CHECK(validity_options{}.margin == 2ms);
  CHECK_FALSE(opts(0.0, 0ns).check());
  CHECK_FALSE(opts(-0.0, 0ns).check());
  CHECK_FALSE(opts(0.999, 2ms).check());
  CHECK_FALSE(opts(std::nextafter(1.0, 0.0), 0ns).check());

  const std::error_code bad = holdfast::errc::invalid_argument;
  CHECK(opts(1.0, 0ns).check() == bad);
  CHECK(opts(1.5, 0ns).check() == bad);
  CHECK(opts(-0.01, 0ns).check() == bad);
  CHECK(opts(std::numeric_limits<double>::quiet_NaN(), 0ns).check() == bad);
  CHECK(opts(std::numeric_limits<double>::infinity(), 0ns).check() == bad);
  CHECK(opts(-std::numeric_limits<double>::infinity(), 0ns).check() == bad);
  CHECK(opts(0.01, -1ns).check() == bad);
}

TEST_CASE("trusted_span is ttl*(1-drift) - margin", "[validity]") {
  // Exactly representable drifts give exact results.
  CHECK(trusted_span(10s, opts(0.0, 0ns)) == 10s);
  CHECK(trusted_span(10s, opts(0.5, 0ns)) == 5s);
  CHECK(trusted_span(10s, opts(0.25, 1s)) == 6500ms);
  CHECK(trusted_span(1ns, opts(0.0, 0ns)) == 1ns);
  // The Redlock defaults on 10 s: 9.898 s, give or take the 1 ns by which the double 0.01 exceeds
  // one hundredth (the allowance is rounded up).
  const ns span = trusted_span(10s, validity_options{});
  CHECK(span <= 9898ms);
  CHECK(span >= 9898ms - 1ns);
  // drift 0.999 leaves a thousandth: 10 ms of 10 s, minus the 2 ms margin.
  CHECK(trusted_span(10s, opts(0.999, 2ms)) == 8ms);
  CHECK(trusted_span(1s, opts(0.999, 0ns)) == 1ms);
}

TEST_CASE("trusted_span rounds toward trusting less", "[validity]") {
  // 3 ns at 50%: the allowance 1.5 ns rounds up to 2, leaving 1 ns (not 2).
  CHECK(trusted_span(3ns, opts(0.5, 0ns)) == 1ns);
  // 1 ns at 1%: the 0.01 ns allowance rounds up to a whole nanosecond: nothing left.
  CHECK(trusted_span(1ns, opts(0.01, 0ns)) == 0ns);
  // A fractional TTL truncates toward zero before anything else.
  CHECK(trusted_span(std::chrono::duration<double>(1.5e-9), opts(0.0, 0ns)) == 1ns);
}

TEST_CASE("trusted_span is zero for worthless or bad TTLs", "[validity]") {
  const validity_options d{};
  CHECK(trusted_span(0ns, d) == 0ns);
  CHECK(trusted_span(-1ns, d) == 0ns);
  CHECK(trusted_span(-10s, d) == 0ns);
  CHECK(trusted_span(std::chrono::hours::min(), d) == 0ns);
  // TTL at or under the margin (after drift): the grant is worthless to the holder.
  CHECK(trusted_span(1ms, d) == 0ns);
  CHECK(trusted_span(2ms, opts(0.0, 2ms)) == 0ns);
  CHECK(trusted_span(2ms + 1ns, opts(0.0, 2ms)) == 1ns);
  // NaN is not a duration.
  CHECK(trusted_span(std::chrono::duration<double>(std::nan("")), opts(0.0, 0ns)) == 0ns);
}

TEST_CASE("trusted_span treats bad options as 100% drift", "[validity]") {
  CHECK(trusted_span(10s, opts(1.0, 0ns)) == 0ns);
  CHECK(trusted_span(10s, opts(std::numeric_limits<double>::quiet_NaN(), 0ns)) == 0ns);
  CHECK(trusted_span(10s, opts(0.01, -1ms)) == 0ns);
}

TEST_CASE("checked_trusted_span is trusted_span once the options are checked", "[validity]") {
  // An acquire checks its validity options once and then takes the span without checking them
  // again (issue 26 item 3): the two must agree on every good option, at the edges of the drift
  // and margin ranges and of the TTL range.
  for (const double drift : {0.0, 0.01, 0.5, std::nextafter(1.0, 0.0)}) {
    for (const ns margin : {ns(0), ns(1), ns(2'000'000), ns(9'999'999'999)}) {
      const validity_options v{drift, margin};
      REQUIRE_FALSE(v.check());
      for (const ns ttl : {ns(1), ns(2'000'001), ns(10'000'000'000), ns::max()}) {
        INFO("drift " << drift << " margin " << margin.count() << " ttl " << ttl.count());
        CHECK(holdfast::detail::checked_trusted_span(ttl, v) == trusted_span(ttl, v));
      }
      CHECK(holdfast::detail::checked_trusted_span(std::chrono::hours(1), v) ==
            trusted_span(std::chrono::hours(1), v));
    }
  }
}

TEST_CASE("trusted_span saturates for TTLs beyond the nanosecond range", "[validity]") {
  // hours::max() is ~2^63 hours: far beyond int64 nanoseconds.
  CHECK(trusted_span(std::chrono::hours::max(), opts(0.0, 0ns)) == ns::max());
  const ns big = trusted_span(std::chrono::hours::max(), validity_options{});
  CHECK(big > 0ns);
  CHECK(big < ns::max());
  CHECK(trusted_span(ns::max(), opts(0.0, 0ns)) == ns::max());
  CHECK(trusted_span(std::chrono::duration<double>(std::numeric_limits<double>::infinity()),
                     opts(0.0, 0ns)) == ns::max());
  // drift 0.999 on the largest TTL still leaves a positive, finite span.
  const ns tiny_share = trusted_span(ns::max(), opts(0.999, 0ns));
  CHECK(tiny_share > 0ns);
  CHECK(tiny_share < ns::max() / 999);
}

TEST_CASE("trusted_span never exceeds the TTL and is monotone in TTL, drift and margin",
          "[validity]") {
  const ns ttls[] = {1ns, 2ns, 999ns, 1ms, 2ms, 3ms, 10ms, 1s, 10s, 1h, ns::max() / 3, ns::max()};
  const double drifts[] = {0.0, 1e-9, 0.01, 0.1, 0.5, 0.9, 0.999};
  const ns margins[] = {0ns, 1ns, 2ms, 1s};
  for (double drift : drifts) {
    for (ns margin : margins) {
      ns previous = 0ns;
      for (ns ttl : ttls) {
        const ns span = trusted_span(ttl, opts(drift, margin));
        INFO("ttl " << ttl.count() << "ns drift " << drift << " margin " << margin.count());
        CHECK(span >= 0ns);
        CHECK(span <= ttl);
        CHECK(span >= previous);  // more TTL never means less trust
        previous = span;
        CHECK(trusted_span(ttl, opts(drift, margin + 1ns)) <= span);
        CHECK(trusted_span(ttl, opts(std::min(0.999, drift + 0.001), margin)) <= span);
      }
    }
  }
}

TEST_CASE("valid_until is start + trusted_span", "[validity]") {
  const manual_tp start(123s);
  CHECK(holdfast::valid_until(start, 10s, opts(0.0, 0ns)) == start + 10s);
  CHECK(holdfast::valid_until(start, 10s, validity_options{}) ==
        start + trusted_span(10s, validity_options{}));
  // A worthless grant: valid_until == start, i.e. never valid.
  CHECK(holdfast::valid_until(start, 1ms, validity_options{}) == start);
  CHECK(holdfast::valid_until(start, -5s, validity_options{}) == start);
  // Before the epoch works the same.
  CHECK(holdfast::valid_until(manual_tp(-5s), 10s, opts(0.5, 0ns)) == manual_tp(0s));
}

TEST_CASE("valid_until rounds the span down to a coarse clock's tick", "[validity]") {
  const coarse_tp start(100s);
  // 9.898 s of trust on a 1 s clock is 9 s, never 10.
  CHECK(holdfast::valid_until(start, 10s, validity_options{}) == coarse_tp(109s));
  CHECK(holdfast::valid_until(start, 1500ms, opts(0.0, 0ns)) == coarse_tp(101s));
  // Less than one tick of trust: never valid on that clock.
  CHECK(holdfast::valid_until(start, 999ms, opts(0.0, 0ns)) == start);
}

TEST_CASE("valid_until with a holder clock's tick ends validity almost a tick earlier",
          "[validity]") {
  // Input (coarse holder clocks): a reading of a clock with a 100 ms tick lags true time by up
  // to 100 ms - 1 ns, so with TTL 1 s and no allowances the holder trusts readings below
  // 900 ms + 1 ns (i.e. up to 900 ms, true time < 1 s), not below 1 s (up to 999.9 ms: true time
  // up to 1.1 s).
  const manual_tp start(0s);
  const validity_options none = opts(0.0, 0ns);
  CHECK(holdfast::valid_until(start, 1s, none, ns(100ms)) == manual_tp(900ms + 1ns));
  // With the defaults (1%, 2 ms): 988 ms - 1 ns less 100 ms - 1 ns.
  CHECK(holdfast::valid_until(start, 1s, validity_options{}, ns(100ms)) == manual_tp(888ms));
  // A tick of zero (exact) or one unit (a clock that declares none) changes nothing.
  CHECK(holdfast::valid_until(start, 1s, none, ns(0)) == manual_tp(1s));
  CHECK(holdfast::valid_until(start, 1s, none, ns(1)) == manual_tp(1s));
  CHECK(holdfast::valid_until(start, 1s, none, ns(2)) == manual_tp(1s - 1ns));
  // Around a tick as long as the whole validity: one tick before, at, after.
  CHECK(holdfast::valid_until(start, 1s, none, ns(1s) - 1ns) == manual_tp(2ns));
  CHECK(holdfast::valid_until(start, 1s, none, ns(1s)) == manual_tp(1ns));
  CHECK(holdfast::valid_until(start, 1s, none, ns(1s) + 1ns) == start);
  CHECK(holdfast::valid_until(start, 1s, none, ns(10s)) == start);
  // A worthless grant stays worthless; saturation still holds.
  CHECK(holdfast::valid_until(start, 1ms, validity_options{}, ns(100ms)) == start);
  CHECK(holdfast::valid_until(manual_tp::max() - 1s, 10s, none, ns(100ms)) ==
        manual_tp::max() - ns(100ms) + 1ns);
  // renew_due_at with the tick: the same instant, but strictly before that validity.
  CHECK(holdfast::renew_due_at(start, 1s, none, 0.5, ns(100ms)) == manual_tp(500ms));
  CHECK(holdfast::renew_due_at(start, 1s, none, 0.95, ns(100ms)) == manual_tp(900ms));
  CHECK(holdfast::renew_due_at(start, 1s, none, 0.95, ns(1s)) == start);
  CHECK(holdfast::renew_due_at(start, 1s, none, 0.75, ns(1)) == manual_tp(750ms));
}

TEST_CASE("valid_until saturates at the clock's time_point::max", "[validity]") {
  const validity_options d{};
  CHECK(holdfast::valid_until(manual_tp::max() - 1s, 10s, d) == manual_tp::max());
  CHECK(holdfast::valid_until(manual_tp::max(), 10s, d) == manual_tp::max());
  CHECK(holdfast::valid_until(manual_tp::max() - 1ms, std::chrono::hours::max(), d) ==
        manual_tp::max());
  CHECK(holdfast::valid_until(manual_tp(0s), std::chrono::hours::max(), opts(0.0, 0ns)) ==
        manual_tp::max());
  // Just below the edge nothing saturates.
  CHECK(holdfast::valid_until(manual_tp::max() - 20s, 10s, opts(0.0, 0ns)) ==
        manual_tp::max() - 10s);
  // A clock finer than a nanosecond: a span it cannot represent (10000 h is 3.6e19 ps, beyond
  // int64) saturates, a small one does not.
  CHECK(holdfast::valid_until(pico_tp(0s), 10s, opts(0.0, 0ns)) == pico_tp(10s));
  CHECK(holdfast::valid_until(pico_tp(0s), std::chrono::hours(10000), opts(0.0, 0ns)) ==
        pico_tp::max());
  CHECK(holdfast::valid_until(coarse_tp::max() - 1s, 10s, d) == coarse_tp::max());
}

TEST_CASE("renew_due_at is half the TTL after start when validity lasts longer", "[validity]") {
  const manual_tp start(5s);
  CHECK(holdfast::renew_due_at(start, 10s, validity_options{}) == manual_tp(10s));
  CHECK(holdfast::renew_due_at(start, 10s, validity_options{}, 0.25) == manual_tp(7500ms));
  // A fraction outside (0, 1) is treated as 1/2.
  CHECK(holdfast::renew_due_at(start, 10s, validity_options{}, 0.0) == manual_tp(10s));
  CHECK(holdfast::renew_due_at(start, 10s, validity_options{}, 1.0) == manual_tp(10s));
  CHECK(holdfast::renew_due_at(start, 10s, validity_options{}, std::nan("")) == manual_tp(10s));
}

TEST_CASE("renew_due_at lies strictly inside validity, one tick before its end", "[validity]") {
  // Review input: TTL 10 s with margin 6 s gives 3.9 s of validity; half the TTL (5 s) would be
  // after it. Expected: valid_until 3.9 s - 1 ns (the 1% allowance, 0.01 * 1e10 ns in floating
  // point, rounds up to 100000001 ns: toward trusting less) and due one tick before that.
  const manual_tp start(0s);
  const validity_options wide = opts(0.01, 6s);
  CHECK(holdfast::valid_until(start, 10s, wide) == manual_tp(3900ms - 1ns));
  CHECK(holdfast::renew_due_at(start, 10s, wide) == manual_tp(3900ms - 2ns));
  // Review input: a TTL of a few ms with the defaults (1%, 2 ms): 3 ms gives 970 us - 1 ns.
  CHECK(holdfast::valid_until(start, 3ms, validity_options{}) == manual_tp(970us - 1ns));
  CHECK(holdfast::renew_due_at(start, 3ms, validity_options{}) == manual_tp(970us - 2ns));
  // The shortest TTL that gives any validity with the defaults: 3 ms (2 ms gives none).
  CHECK(holdfast::renew_due_at(start, 2ms, validity_options{}) == start);
  // On a coarse clock the tick is a whole second: due one second before the end.
  CHECK(holdfast::valid_until(coarse_tp(0s), 10s, wide) == coarse_tp(3s));
  CHECK(holdfast::renew_due_at(coarse_tp(0s), 10s, wide) == coarse_tp(2s));
  // Saturated validity: one tick before time_point::max.
  const manual_tp near_end = manual_tp::max() - 1s;
  CHECK(holdfast::valid_until(near_end, 10s, validity_options{}) == manual_tp::max());
  CHECK(holdfast::renew_due_at(near_end, 10s, validity_options{}) == manual_tp::max() - 1ns);
}

// --- Exact integer arithmetic: trusted_span and renew_due_at compute ttl * drift (ttl *
// fraction) from the double's exact value, in integers, then round the drift allowance up and the
// span down. Expected values below are worked out with exact fractions (Python's Fraction).

TEST_CASE("trusted_span one nanosecond before, at and after a whole drift allowance",
          "[validity]") {
  // drift 2^-7 is exact: 128 ns gives an allowance of exactly 1 ns.
  const validity_options d7 = opts(0.0078125, 0ns);
  CHECK(trusted_span(127ns, d7) == 126ns);  // 0.99 ns rounds up to 1
  CHECK(trusted_span(128ns, d7) == 127ns);  // exactly 1 ns: nothing to round
  CHECK(trusted_span(129ns, d7) == 127ns);  // 1.008 ns rounds up to 2
  // The double 0.01 is 0.01000000000000000020816...: at 100 ns the allowance is
  // 1.0000000000000000208 ns, which rounds up to 2: the double's exact value counts, however small
  // the excess.
  const validity_options d1 = opts(0.01, 0ns);
  CHECK(trusted_span(99ns, d1) == 98ns);
  CHECK(trusted_span(100ns, d1) == 98ns);
  CHECK(trusted_span(101ns, d1) == 99ns);
  // 10 s: 1e8 ns plus 2.08e-9 ns of allowance, rounded up to 1e8 + 1.
  CHECK(trusted_span(10s, d1) == 9900ms - 1ns);
}

TEST_CASE("trusted_span one nanosecond before, at and after the margin", "[validity]") {
  const validity_options m = opts(0.0, 2ms);
  CHECK(trusted_span(2ms - 1ns, m) == 0ns);
  CHECK(trusted_span(2ms, m) == 0ns);
  CHECK(trusted_span(2ms + 1ns, m) == 1ns);
  // With drift 2^-7: 2015749 ns loses ceil(15747.9) = 15748 ns to drift, leaving the margin
  // exactly.
  const validity_options dm = opts(0.0078125, 2ms);
  CHECK(trusted_span(2015748ns, dm) == 0ns);
  CHECK(trusted_span(2015749ns, dm) == 0ns);
  CHECK(trusted_span(2015750ns, dm) == 1ns);
}

TEST_CASE("trusted_span is exact on huge TTLs and at drift 0 and near 1", "[validity]") {
  constexpr std::int64_t top = std::numeric_limits<std::int64_t>::max();  // ns::max()
  CHECK(trusted_span(ns::max(), opts(0.0, 0ns)) == ns::max());
  CHECK(trusted_span(ns::max(), opts(0.5, 0ns)) == ns(4611686018427387903));  // (2^63 - 1) / 2
  CHECK(trusted_span(ns::max(), opts(0.01, 0ns)) == ns(9131138316486228047));
  CHECK(trusted_span(ns::max(), opts(0.999, 0ns)) == ns(9223372036854783));
  // The largest drift below 1 (1 - 2^-53): (2^63 - 1) * 2^-53 is just over 1023 ns.
  CHECK(trusted_span(ns::max(), opts(std::nextafter(1.0, 0.0), 0ns)) == 1023ns);
  CHECK(trusted_span(1s, opts(std::nextafter(1.0, 0.0), 0ns)) == 0ns);
  // The smallest drifts above 0 still cost a whole nanosecond (rounded up), never more.
  CHECK(trusted_span(ns::max(), opts(std::numeric_limits<double>::denorm_min(), 0ns)) ==
        ns(top - 1));
  CHECK(trusted_span(ns::max(), opts(std::ldexp(1.0, -62), 0ns)) == ns(top - 2));  // 1.99.. ns
  CHECK(trusted_span(1ns, opts(std::numeric_limits<double>::denorm_min(), 0ns)) == 0ns);
  CHECK(trusted_span(2ns, opts(std::numeric_limits<double>::min(), 0ns)) == 1ns);
  // 10000 h (3.6e16 ns) at the Redlock 1%.
  CHECK(trusted_span(std::chrono::hours(10000), validity_options{}) == ns(35639999999999999) - 2ms);
}

TEST_CASE("renew_due_at takes the fraction of the TTL exactly, rounded down", "[validity]") {
  const manual_tp start(0s);
  const validity_options none = opts(0.0, 0ns);
  // 0.3 is 0.29999999999999998889...: 3e9 - 1.1e-7 ns rounds down to 2999999999 ns.
  CHECK(holdfast::renew_due_at(start, 10s, none, 0.3) == manual_tp(3s - 1ns));
  CHECK(holdfast::renew_due_at(start, 3ns, none, 0.5) == manual_tp(1ns));
  CHECK(holdfast::renew_due_at(start, 4ns, none, 0.5) == manual_tp(2ns));
  // The largest TTL: half of 2^63 - 1, rounded down; well inside validity.
  CHECK(holdfast::renew_due_at(start, ns::max(), none) == manual_tp(ns(4611686018427387903)));
  CHECK(holdfast::renew_due_at(start, std::chrono::hours::max(), none) ==
        manual_tp(ns(4611686018427387903)));
}

#if defined(__SIZEOF_INT128__)
namespace {

__extension__ typedef unsigned __int128 u128;

// The reference: drift = M / 2^shift exactly (frexp's mantissa times 2^53 is a whole number
// below 2^53), the allowance ceil(ttl * M / 2^shift) in 128-bit integers, the span what is left
// after it and the margin. Another route to the same number than validity.hpp's bit fields.
std::int64_t reference_span(std::int64_t ttl, double drift, std::int64_t margin) {
  if (ttl <= 0) return 0;
  int exp = 0;
  const double mant = std::frexp(drift, &exp);
  const auto m = static_cast<std::uint64_t>(std::ldexp(mant, 53));
  const int shift = 53 - exp;
  u128 allowance = 0;
  if (m != 0) {
    const u128 product = static_cast<u128>(ttl) * m;  // < 2^116
    if (shift >= 127) {
      allowance = 1;  // a positive product far below one nanosecond
    } else {
      const u128 unit = static_cast<u128>(1) << shift;
      allowance = (product + unit - 1) / unit;
    }
  }
  const u128 left = static_cast<u128>(ttl) - allowance;
  if (left <= static_cast<u128>(margin)) return 0;
  return static_cast<std::int64_t>(left - static_cast<u128>(margin));
}

rc::Gen<std::int64_t> gen_ttl_ns() {
  return rc::gen::oneOf(rc::gen::inRange<std::int64_t>(0, 10000),
                        rc::gen::inRange<std::int64_t>(0, std::int64_t{1} << 44),
                        rc::gen::inRange<std::int64_t>(0, std::numeric_limits<std::int64_t>::max()),
                        rc::gen::element<std::int64_t>(std::numeric_limits<std::int64_t>::max(),
                                                       std::numeric_limits<std::int64_t>::max() - 1,
                                                       1, 2, 100, 128, 1000000000));
}

// Drifts in [0, 1): uniform multiples of 2^-53, tiny ones down to the subnormals, and the values
// that matter (0, Redlock's 1%, 1/2, the largest below 1, the smallest above 0).
rc::Gen<double> gen_drift() {
  return rc::gen::oneOf(
      rc::gen::map(rc::gen::inRange<std::uint64_t>(0, std::uint64_t{1} << 53),
                   [](std::uint64_t u) { return std::ldexp(static_cast<double>(u), -53); }),
      rc::gen::map(rc::gen::pair(rc::gen::inRange<std::uint64_t>(1, std::uint64_t{1} << 53),
                                 rc::gen::inRange(0, 1030)),
                   [](const std::pair<std::uint64_t, int>& p) {
                     return std::ldexp(static_cast<double>(p.first), -53 - p.second);
                   }),
      rc::gen::element(0.0, 0.01, 0.001, 0.5, std::nextafter(1.0, 0.0),
                       std::numeric_limits<double>::denorm_min(),
                       std::numeric_limits<double>::min()));
}

}  // namespace

TEST_CASE("trusted_span is never more trusting than exact arithmetic, and at most 1 ns less",
          "[validity]") {
  rc::prop("against 128-bit integers", [] {
    const std::int64_t ttl = *gen_ttl_ns();
    const double drift = *gen_drift();
    // Margins up to the TTL itself (inRange's bound is exclusive; ns::max() has no successor).
    const std::int64_t margin_bound =
        ttl < std::numeric_limits<std::int64_t>::max() ? ttl + 1 : ttl;
    const std::int64_t margin = *rc::gen::oneOf(rc::gen::inRange<std::int64_t>(0, 10000000),
                                                rc::gen::inRange<std::int64_t>(0, margin_bound));
    RC_PRE(!opts(drift, ns(margin)).check());
    const std::int64_t got = trusted_span(ns(ttl), opts(drift, ns(margin))).count();
    const std::int64_t want = reference_span(ttl, drift, margin);
    RC_ASSERT(got <= want);      // never more trusting
    RC_ASSERT(want - got <= 1);  // and never more than 1 ns less
    RC_ASSERT(got == want);      // in fact exact: integer arithmetic loses nothing
  });
  if (std::numeric_limits<long double>::digits >= 64) {
    rc::prop("within 1 ns of long double (the former arithmetic)", [] {
      const std::int64_t ttl = *gen_ttl_ns();
      const double drift = *gen_drift();
      RC_PRE(ttl > 0 && !opts(drift, 0ns).check());
      const long double allowance =
          std::ceil(static_cast<long double>(ttl) * static_cast<long double>(drift));
      const long double want = static_cast<long double>(ttl) - allowance;
      const long double got =
          static_cast<long double>(trusted_span(ns(ttl), opts(drift, 0ns)).count());
      RC_ASSERT(std::fabs(got - (want > 0 ? want : 0)) <= 1.0L);
    });
  }
}

TEST_CASE("scale_by_fraction is n * f exactly: whole part and whether a fraction was cut",
          "[validity]") {
  rc::prop("against 128-bit integers", [] {
    const auto n = static_cast<std::uint64_t>(*gen_ttl_ns());
    const double f = *rc::gen::oneOf(gen_drift(), rc::gen::just(1.0));
    int exp = 0;
    const auto m = static_cast<std::uint64_t>(std::ldexp(std::frexp(f, &exp), 53));
    const int shift = 53 - exp;
    const u128 product = static_cast<u128>(n) * m;
    const u128 whole = shift >= 127 ? 0 : product >> shift;
    const bool cut =
        shift >= 127 ? product != 0 : (product & ((static_cast<u128>(1) << shift) - 1)) != 0;
    const holdfast::detail::scaled_count got = holdfast::detail::scale_by_fraction(n, f);
    RC_ASSERT(static_cast<u128>(got.whole) == whole);
    RC_ASSERT(got.cut == cut);
  });
  rc::prop("the portable 64x64 multiplication agrees with the compiler's", [] {
    const auto a = *rc::gen::arbitrary<std::uint64_t>();
    const auto b = *rc::gen::oneOf(rc::gen::arbitrary<std::uint64_t>(),
                                   rc::gen::just(std::numeric_limits<std::uint64_t>::max()));
    const holdfast::detail::wide_product p = holdfast::detail::multiply_wide_portable(a, b);
    const u128 want = static_cast<u128>(a) * b;
    RC_ASSERT(p.hi == static_cast<std::uint64_t>(want >> 64));
    RC_ASSERT(p.lo == static_cast<std::uint64_t>(want));
  });
  const holdfast::detail::wide_product top =
      holdfast::detail::multiply_wide_portable(~std::uint64_t{0}, ~std::uint64_t{0});
  CHECK(top.hi == ~std::uint64_t{0} - 1);  // (2^64 - 1)^2 = 2^128 - 2^65 + 1
  CHECK(top.lo == 1);
}
#endif

// checked_duration_cast (detail/saturating.hpp) converts signed integer durations in integers and
// everything else in long double; the two must give the same answer for every input the integer
// path takes, above all one unit before, at and after the edge of the target's range.
template <class To, class From>
bool cast_agrees(From d) {
  const std::optional<To> fast = holdfast::detail::checked_duration_cast<To>(d);
  const std::optional<To> wide = holdfast::detail::checked_duration_cast_wide<To>(d);
  if (fast.has_value() != wide.has_value()) return false;
  return !fast || fast->count() == wide->count();
}

template <class To, class From>
void check_cast_agrees(From d) {
  INFO("count " << d.count());
  CHECK(cast_agrees<To>(d));
}

template <class To, class From>
void check_cast_edges() {
  using rep = typename From::rep;
  using ratio = std::ratio_divide<typename From::period, typename To::period>;
  constexpr rep top = std::numeric_limits<rep>::max();
  constexpr rep bottom = std::numeric_limits<rep>::min();
  const rep edges[] = {0, 1, -1, top, bottom, top - 1, bottom + 1};
  for (const rep e : edges) check_cast_agrees<To>(From(e));
  constexpr std::intmax_t wide_hi = std::numeric_limits<typename To::rep>::max() / ratio::num;
  // Where the target's edge lies inside the source's range (else every count fits).
  if constexpr (ratio::den == 1 && ratio::num > 1 && wide_hi < std::intmax_t{top}) {
    constexpr rep hi = static_cast<rep>(wide_hi);
    constexpr rep lo = static_cast<rep>(std::numeric_limits<typename To::rep>::min() / ratio::num);
    for (const rep e : {hi - 1, hi, hi + 1, lo - 1, lo, lo + 1}) check_cast_agrees<To>(From(e));
    // The edges are the edges: the last count that fits and the first that does not.
    CHECK(holdfast::detail::checked_duration_cast<To>(From(hi)).has_value());
    CHECK_FALSE(holdfast::detail::checked_duration_cast<To>(From(hi + 1)).has_value());
    CHECK(holdfast::detail::checked_duration_cast<To>(From(lo)).has_value());
    CHECK_FALSE(holdfast::detail::checked_duration_cast<To>(From(lo - 1)).has_value());
  }
}

TEST_CASE("checked_duration_cast in integers agrees with long double at the range's edges",
          "[validity]") {
  using ms = std::chrono::milliseconds;
  using s = std::chrono::seconds;
  using ms32 = std::chrono::duration<std::int32_t, std::milli>;
  using us32 = std::chrono::duration<std::int32_t, std::micro>;
  check_cast_edges<ns, ms>();
  check_cast_edges<ns, s>();
  check_cast_edges<ns, ns>();
  check_cast_edges<ms, ns>();
  check_cast_edges<s, ns>();
  check_cast_edges<ms, ms32>();
  check_cast_edges<ns, ms32>();
  check_cast_edges<us32, ms32>();  // into a narrower rep: 32-bit overflow at 2147483 ms
  check_cast_edges<std::chrono::duration<std::int64_t, std::pico>, ns>();
  rc::prop("any count, ms to ns, ns to ms, s to ns", [] {
    const auto c = *rc::gen::arbitrary<std::int64_t>();
    RC_ASSERT(cast_agrees<ns>(ms(c)));
    RC_ASSERT(cast_agrees<ms>(ns(c)));
    RC_ASSERT(cast_agrees<ns>(s(c)));
  });
}

}  // namespace test_validity
