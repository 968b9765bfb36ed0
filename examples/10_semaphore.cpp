// SPDX-License-Identifier: MIT
// examples/10_semaphore.cpp - a lease semaphore: N permits for one name, each permit a lease with
// its own fencing token and its own TTL (semaphore.hpp).
//
// Six worker threads share three permits of "renderer" (say, three GPU slots). Each takes a permit
// (blocking, with a deadline), fences its writes to its slot by the permit's token, and releases
// it. Permits renew themselves while held (the semaphore's keepalive; semaphore_options::renew).
// One worker dies while holding its permit: it never releases, and nothing renews the permit (a
// crashed process's keepalive dies with it: here the dying worker's semaphore renews nothing).
// Its permit alone expires after the TTL; the two other slots never stop serving. At the end the
// program takes all three permits at once, which it can only once the dead permit has expired,
// and the dead slot's new token is greater, so a late write by the dead worker is refused there.
//
// It prints what happens and checks: never more than 3 permits held at once, every worker but the
// dead one served, the dead slot taken over with a greater token, and a stale write refused.
// Exit status 0 iff all of that holds. Runs in about half a second, on memory_store.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "holdfast/holdfast.hpp"

namespace {

using namespace std::chrono_literals;

constexpr std::uint32_t kPermits = 3;
constexpr int kWorkers = 6;
constexpr auto kTtl = 200ms;

std::mutex print_mu;
const auto t0 = std::chrono::steady_clock::now();

template <class... Args>
void say(const char* fmt, Args... args) {
  std::lock_guard<std::mutex> lock(print_mu);
  std::printf(
      "[%6.1f ms] ",
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  std::printf(fmt, args...);
  std::printf("\n");
}

}  // namespace

int main() {
  holdfast::memory_store<> store;
  holdfast::semaphore<holdfast::memory_store<>> renderer(store, "renderer", kPermits, kTtl);
  // The dying worker's process: the same semaphore, whose permits nothing renews once it dies.
  holdfast::semaphore_options<> dying_options;
  dying_options.renew = false;
  holdfast::semaphore<holdfast::memory_store<>> dying(store, "renderer", kPermits, kTtl,
                                                      dying_options);
  holdfast::keyed_fence_gate slots;  // one fence per slot: what a permit's token orders
  std::atomic<int> held{0};
  std::atomic<int> most_held{0};
  std::atomic<int> served{0};
  std::atomic<bool> ok{true};
  std::string dead_slot;
  holdfast::fencing_token dead_token;
  std::string dead_owner;
  std::mutex dead_mu;
  // Where the dead worker's permit lies while it is dead: nothing releases or renews it until the
  // program ends (a crashed process's lease, as the store sees it).
  std::optional<decltype(renderer)::permit> corpse;

  auto work = [&](int id) {
    const bool dies = id == 0;
    auto permit = (dies ? dying : renderer).acquire(2s);
    if (!permit) {
      say("worker %d: no permit: %s", id, permit.error().message().c_str());
      ok = false;
      return;
    }
    {
      // The dead worker's permit counted as held until its slot is taken over.
      std::lock_guard<std::mutex> lock(dead_mu);
      if (!dies && permit->key() == dead_slot) --held;
    }
    const int now_held = ++held;
    for (int m = most_held.load(); now_held > m && !most_held.compare_exchange_weak(m, now_held);) {
    }
    say("worker %d: permit %s, token %llu (%d of %u held)", id, permit->key().c_str(),
        static_cast<unsigned long long>(permit->token().value()), now_held, kPermits);
    if (!slots.admit(permit->key(), *permit)) ok = false;
    if (dies) {
      std::lock_guard<std::mutex> lock(dead_mu);
      dead_slot = permit->key();
      dead_token = permit->token();
      dead_owner = permit->owner();
      say("worker %d: dies holding %s (no release, no renewal)", id, dead_slot.c_str());
      corpse.emplace(std::move(*permit));
      return;
    }
    std::this_thread::sleep_for(60ms);  // the work under the permit
    if (!permit->valid()) {
      say("worker %d: permit lost before the work ended", id);
      ok = false;
    }
    --held;
    (void)permit->release();
    ++served;
  };

  std::vector<std::thread> threads;
  threads.emplace_back(work, 0);
  std::this_thread::sleep_for(10ms);  // the dying worker takes its permit first
  for (int id = 1; id < kWorkers; ++id) threads.emplace_back(work, id);
  for (std::thread& t : threads) t.join();

  // Finally take all N permits at once: possible only once the dead worker's permit has expired
  // on its own. The dead slot's new token is greater, so its late write is refused there.
  std::lock_guard<std::mutex> lock(dead_mu);
  std::vector<decltype(renderer)::permit> every;
  for (std::uint32_t n = 0; n < kPermits; ++n) {
    auto p = renderer.acquire(2s);
    if (!p) break;
    every.push_back(std::move(*p));
  }
  holdfast::fencing_token retaken;
  for (auto& p : every) {
    if (p.key() == dead_slot) retaken = p.token();
    (void)slots.admit(p.key(), p);
  }
  const bool taken_over = every.size() == kPermits && retaken > dead_token;
  const bool refused =
      slots.admit(dead_slot, dead_token, dead_owner).error() == holdfast::errc::stale_token;
  say("all %zu permits taken at once; slot %s retaken with token %llu > the dead worker's %llu: "
      "%s; its late write refused: %s",
      every.size(), dead_slot.c_str(), static_cast<unsigned long long>(retaken.value()),
      static_cast<unsigned long long>(dead_token.value()), taken_over ? "yes" : "NO",
      refused ? "yes" : "NO");
  every.clear();  // released
  auto free_now = renderer.available();
  say("most permits held at once: %d (bound %u); workers served: %d of %d; free now: %u",
      most_held.load(), kPermits, served.load(), kWorkers - 1, free_now ? *free_now : 0u);
  const bool all = ok && most_held.load() <= static_cast<int>(kPermits) &&
                   served.load() == kWorkers - 1 && taken_over && refused && free_now &&
                   *free_now == kPermits;
  std::printf("%s\n", all ? "OK" : "FAILED");
  return all ? 0 : 1;
}
