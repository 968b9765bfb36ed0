// SPDX-License-Identifier: MIT
// keepalive::add under allocation failure: "std::bad_alloc may propagate, with nothing changed".
// Fails each allocation add() makes in turn; after every failure a retried add() must schedule
// the lease for real, so it is still renewed. Replaces the global operator new, so it needs a
// process of its own.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <new>

#include "holdfast/keepalive.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/stores/memory.hpp"

namespace {
int fail_after = -1;  // -1: never fail; n: the (n+1)-th allocation from now throws
}

// The replacements are kept out of line: once g++ 12 inlines them at -O2 it sees std::free() called
// on a pointer from operator new and reports -Werror=mismatched-new-delete, although replacing
// both halves of the pair this way is what the standard allows ([new.delete.single]).
[[gnu::noinline]] void* operator new(std::size_t n) {
  if (fail_after == 0) {
    fail_after = -1;
    throw std::bad_alloc();
  }
  if (fail_after > 0) --fail_after;
  if (void* p = std::malloc(n != 0 ? n : 1)) return p;
  throw std::bad_alloc();
}
[[gnu::noinline]] void operator delete(void* p) noexcept {
  std::free(p);
}
[[gnu::noinline]] void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}

int main() {
  using namespace std::chrono_literals;
  int failures = 0;
  for (int nth = 0; nth < 8; ++nth) {
    holdfast::manual_clock clock;
    holdfast::memory_store<holdfast::manual_clock> store(clock);
    holdfast::keepalive_options ko;
    ko.start_thread = false;  // poll() by hand: deterministic
    holdfast::keepalive<holdfast::manual_clock> ka(clock, ko);
    holdfast::acquire_options<holdfast::manual_clock> ao;
    ao.clock = clock;
    auto l = holdfast::try_acquire(store, "orders", 1000ms, ao);
    if (!l) return 2;
    fail_after = nth;
    bool threw = false;
    try {
      (void)ka.add(*l);
    } catch (const std::bad_alloc&) {
      threw = true;
    }
    fail_after = -1;
    if (!threw) break;  // add() makes fewer than nth + 1 allocations: every one was covered
    auto again = ka.add(*l);
    for (int i = 0; i < 20; ++i) {  // two TTLs
      clock.advance(100ms);
      (void)ka.poll();
    }
    if (!again || ka.stats().renewals == 0 || !l->valid()) {
      std::printf("allocation %d of add() failed; the retried add() %s, renewals=%llu, valid=%d\n",
                  nth + 1, again ? "succeeded" : again.error().message().c_str(),
                  static_cast<unsigned long long>(ka.stats().renewals),
                  static_cast<int>(l->valid()));
      ++failures;
    }
  }
  std::printf("keepalive::add under allocation failure: %s\n", failures == 0 ? "ok" : "FAILED");
  return failures == 0 ? 0 : 1;
}
