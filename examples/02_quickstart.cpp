// SPDX-License-Identifier: MIT
// examples/02_quickstart.cpp - the README's quickstart, compiled and run so it cannot rot: take a
// lease, write to a resource with the lease's fencing token, release the lease on scope exit.
// Keep everything from the first #include on identical to the code block in README.md.
#include <chrono>
#include <cstdio>
#include <holdfast/holdfast.hpp>

int main() {
  using namespace std::chrono_literals;
  holdfast::memory_store<> store;  // in-process; any LeaseStore works the same way
  holdfast::fenced<long> balance;  // a resource that refuses stale fencing tokens
  auto lease = holdfast::acquire(store, "account", 10s, 1s);  // TTL 10 s, wait at most 1 s
  if (!lease) return 1;  // lease.error() says why: timeout, store_unavailable, ...
  auto w = balance.write(*lease, [](long& b) { b += 10; });  // admit token+owner, apply: atomic
  std::printf("token %s, write %s\n", to_string(lease->token()).c_str(), w ? "ok" : "stale");
  return w ? 0 : 1;
}  // the lease is released here
