// Unit tests for holdfast/validity.hpp: how long a holder trusts a grant, on its own clock:
// start + ttl*(1-drift) - margin, rounded toward trusting less, saturating, never overflowing.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <limits>
#include <ratio>

#include "holdfast/clock.hpp"
#include "holdfast/validity.hpp"
#include "test_support.hpp"

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
