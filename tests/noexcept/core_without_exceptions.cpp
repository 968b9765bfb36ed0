// SPDX-License-Identifier: MIT
// Instantiates the core with -fno-exceptions -fno-rtti (the core builds without both): a header
// that merely parses could still hide a `throw` or a `typeid` in a template that only
// instantiation reaches.
// Catch2 needs exceptions, so this is a plain program: a failed check returns non-zero.
#include <chrono>
#include <cstdio>
#include <holdfast/holdfast.hpp>

using namespace std::chrono_literals;

namespace {

int failures = 0;

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "FAILED: %s\n", what);
    ++failures;
  }
}

}  // namespace

int main() {
  holdfast::manual_clock clock;
  holdfast::memory_store<holdfast::manual_clock> store(clock);
  holdfast::acquire_options<holdfast::manual_clock> opts;
  opts.clock = clock;

  auto held = holdfast::acquire(store, "orders", 10s, 0ms, opts);  // blocking path, one attempt
  check(held.has_value(), "acquire grants a free key");
  if (!held) return 1;
  holdfast::lease<holdfast::memory_store<holdfast::manual_clock>, holdfast::manual_clock>& l =
      held.value();

  check(!holdfast::try_acquire(store, "orders", 10s, opts), "a second owner is told busy");
  clock.advance(1s);
  check(l.valid(), "the lease is trusted within its TTL");
  check(static_cast<bool>(l.renew()), "the holder renews");

  holdfast::fenced<int> balance(std::in_place, 100);
  auto written = balance.write(l, [](int& b) { return b -= 30; });
  check(written.has_value() && written.value() == 70, "fenced write admits the holder's token");

  holdfast::keyed_fence_gate gates;
  check(static_cast<bool>(gates.admit("db", l.token(), l.owner())), "keyed gate admits the token");
  check(gates.admit("db", l.token(), "someone else").error() == holdfast::errc::token_reissued,
        "keyed gate refuses the token from another owner");
  holdfast::fence_gate gate;
  check(static_cast<bool>(gate.admit(l)), "gate admits the holder");
  check(static_cast<bool>(l.release()), "the holder releases");
  return failures == 0 ? 0 : 1;
}
