// SPDX-License-Identifier: MIT
// examples/15_read_write.cpp - read-write leases (read_write_lease.hpp).
//
// A price list is read by four reader threads and rewritten by one writer thread. Readers take a
// shared lease (several read at once), the writer an exclusive one (nobody reads while it writes
// the list in two steps). Each write goes through a fenced<long> version admitting only the newest
// writer's token; each reader checks that both halves it read belong to the same version, and
// that the token of its lease is newer than the writer token of the version it saw (a reader's
// token says which writer's data it may have seen). A writer waiting for readers keeps new
// readers out (the write intent), so the writer finishes its rounds however busy the readers are.
//
// It prints what happens (how many readers held at once, too) and checks: no torn read, no reader
// token older than the data it saw, every write made. Exit status 0 iff all of that holds. Runs in
// well under a second.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "holdfast/fence.hpp"
#include "holdfast/read_write_lease.hpp"
#include "holdfast/stores/memory.hpp"

namespace {

using namespace std::chrono_literals;

constexpr int kReaders = 4;
constexpr int kReads = 200;
constexpr int kWrites = 20;

struct price_list {
  std::atomic<long> first{0};   // written first
  std::atomic<long> second{0};  // written second: a reader seeing them differ saw a torn write
  std::atomic<unsigned long long> writer_token{0};
};

}  // namespace

int main() {
  holdfast::memory_store<> store;
  holdfast::read_write_lease<holdfast::memory_store<>> prices(store, "prices");
  price_list list;
  holdfast::fenced<long> version(std::in_place, 0);
  std::atomic<int> torn{0}, stale{0}, reading{0}, most_at_once{0}, writes{0};

  std::thread writer([&] {
    for (int i = 1; i <= kWrites; ++i) {
      auto w = prices.acquire_write(2s, 5s);
      if (!w) {
        std::printf("writer: %s\n", w.error().message().c_str());
        continue;
      }
      auto ok = version.write(*w, [&](long& v) {
        v = i;
        list.first.store(i);
        std::this_thread::yield();  // a reader here would see a torn list
        list.second.store(i);
        list.writer_token.store(w->token().value());
      });
      if (ok) ++writes;
    }
  });
  std::vector<std::thread> readers;
  for (int t = 0; t < kReaders; ++t) {
    readers.emplace_back([&] {
      for (int i = 0; i < kReads; ++i) {
        auto r = prices.acquire_read(2s, 5s);
        if (!r) continue;
        const int now = ++reading;
        int seen = most_at_once.load();
        while (now > seen && !most_at_once.compare_exchange_weak(seen, now)) {
        }
        const long first = list.first.load();
        std::this_thread::yield();  // reading takes a while: other readers may join meanwhile
        if (first != list.second.load()) ++torn;
        if (r->token().value() <= list.writer_token.load()) ++stale;
        --reading;
      }  // r releases its shared lease here
    });
  }
  writer.join();
  for (auto& th : readers) th.join();

  std::printf("%d writes made (expected %d), last version %ld\n", writes.load(), kWrites,
              version.snapshot());
  std::printf("torn reads %d, readers older than the data they saw %d, most readers at once %d\n",
              torn.load(), stale.load(), most_at_once.load());
  const bool ok = writes.load() == kWrites && torn.load() == 0 && stale.load() == 0;
  std::printf("%s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
