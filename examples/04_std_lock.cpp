// SPDX-License-Identifier: MIT
// examples/04_std_lock.cpp - the standard locking vocabulary over leases: std::unique_lock,
// std::scoped_lock and timed locking on holdfast::distributed_mutex.
//
// Two accounts, each guarded by a distributed mutex on its own key of one memory_store. Four
// threads move money between them, in both directions, taking both locks with std::scoped_lock
// (which orders nothing itself: std::lock's try-and-back-off algorithm avoids the deadlock).
// Every write carries the lock's fencing token and owner into a fenced<long>, because a lock is a
// lease and could be lost while held: the fence, not the lock, is what keeps a stale holder's write
// out. Finally std::unique_lock with a timeout shows the TimedLockable side: it gives up while
// another holder has the key, and succeeds once that holder's lease has expired.
//
// Exits 0 iff the total is conserved, every fenced write was admitted, and the timed lock behaved.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

#include "holdfast/holdfast.hpp"
#include "holdfast/mutex.hpp"

namespace {

using namespace std::chrono_literals;
using store_type = holdfast::memory_store<>;
using mutex_type = holdfast::distributed_mutex<store_type>;

holdfast::mutex_options<> options() {
  holdfast::mutex_options<> o;
  o.acquire.backoff.initial = 50us;  // in-process contention: retry quickly
  o.acquire.backoff.max_delay = 1ms;
  return o;
}

}  // namespace

int main() {
  store_type store;
  mutex_type lock_a(store, "account/a", 10s, options());
  mutex_type lock_b(store, "account/b", 10s, options());
  holdfast::fenced<long> a(std::in_place, 1000);
  holdfast::fenced<long> b(std::in_place, 1000);

  std::atomic<int> refused{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        // Opposite orders on purpose: std::scoped_lock must not deadlock.
        std::scoped_lock both =
            t % 2 == 0 ? std::scoped_lock(lock_a, lock_b) : std::scoped_lock(lock_b, lock_a);
        const long amount = t % 2 == 0 ? 7 : -3;
        if (!a.write(lock_a, [&](long& v) { v -= amount; })) ++refused;  // its token and owner
        if (!b.write(lock_b, [&](long& v) { v += amount; })) ++refused;
      }
    });
  }
  for (auto& t : threads) t.join();
  const long total = a.snapshot() + b.snapshot();
  std::printf("balances: a=%ld b=%ld total=%ld (expected 2000), refused writes: %d\n", a.snapshot(),
              b.snapshot(), total, refused.load());
  std::printf("tokens issued: %llu (one per lock taken)\n",
              static_cast<unsigned long long>(store.last_token().value()));

  // TimedLockable: another process holds account/a for 200 ms.
  auto other = holdfast::try_acquire(store, "account/a", 200ms);
  bool timed_ok = other.has_value();
  {
    std::unique_lock<mutex_type> quick(lock_a, 20ms);  // try_lock_for: gives up
    std::printf("try for 20 ms while held elsewhere: %s (%s)\n",
                quick.owns_lock() ? "locked" : "gave up", lock_a.last_error().message().c_str());
    timed_ok = timed_ok && !quick.owns_lock();
  }
  {
    std::unique_lock<mutex_type> patient(lock_a, 2s);  // succeeds once the other TTL runs out
    std::printf("try for 2 s: %s, token %s, valid: %s\n",
                patient.owns_lock() ? "locked" : "gave up",
                holdfast::to_string(lock_a.token()).c_str(), lock_a.valid() ? "yes" : "no");
    timed_ok = timed_ok && patient.owns_lock() && lock_a.token() > other->token();
  }

  const bool ok = total == 2000 && refused == 0 && timed_ok;
  std::printf("%s\n", ok ? "OK" : "FAILED");
  return ok ? 0 : 1;
}
