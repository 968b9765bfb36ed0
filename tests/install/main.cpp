// SPDX-License-Identifier: MIT
// The smallest real use of an installed holdfast: acquire a lease from the in-process store and
// have a fence admit its token and owner. Exits non-zero if either fails.
#include <chrono>
#include <holdfast/holdfast.hpp>

int main() {
  holdfast::memory_store<> store;
  auto lease = holdfast::try_acquire(store, "orders", std::chrono::seconds(10));
  if (!lease) return 1;
  holdfast::fence_gate gate;
  return gate.admit(lease.value()) ? 0 : 2;
}
