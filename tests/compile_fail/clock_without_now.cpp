// SPDX-License-Identifier: MIT
// A clock with its types and sleep_until() but no now() is not a ttl_clock: keepalive<Clock>
// refuses it, under C++20 by the ttl_clock constraint (naming the now() requirement), under C++17
// by the static_assert naming `time_point now() const`.
// expect-error: needs .time_point now\(\) const.|cc\.now\(\)
// holdfast: control
#include <chrono>
#include <holdfast/clock.hpp>
#include <holdfast/keepalive.hpp>

struct clock_without_now {
  using duration = std::chrono::nanoseconds;
  using time_point = std::chrono::time_point<clock_without_now, duration>;
#ifdef HOLDFAST_COMPILE_FAIL_CONTROL  // the control adds now(), and then it compiles
  time_point now() const {
    return time_point{};
  }
#endif
  void sleep_until(const time_point&) {}
};

int main() {
  holdfast::keepalive_options opts;
  opts.start_thread = false;
  holdfast::keepalive<clock_without_now> keepalive(clock_without_now{}, opts);
  return keepalive.error() ? 1 : 0;
}
