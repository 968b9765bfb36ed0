// SPDX-License-Identifier: MIT
// examples/14_reentrant.cpp - re-entry (reentrant.hpp, recursive_mutex.hpp).
//
// transfer() locks "ledger" and calls debit() and credit(), which lock it too: with
// recursive_distributed_mutex the inner locks are re-entries of the same hold (no store call,
// the same fencing token, counted), and the lease is released when the outermost lock_guard
// ends. Then reentrant_holder shows the same rule for one owner across calls, with a request id
// that a retrying caller sends twice and that counts once.
//
// It prints what happens and checks: one token for the whole hold, the key held until the last
// unlock and free after it, the retried request counted once. Exit status 0 iff all of that holds.
#include <chrono>
#include <cstdio>
#include <mutex>

#include "holdfast/holdfast.hpp"

namespace {

using namespace std::chrono_literals;
using store_t = holdfast::memory_store<>;

bool held(store_t& s, const char* key) {
  auto r = s.inspect(key);
  return r && r->has_value();
}

}  // namespace

int main() {
  store_t store;
  holdfast::recursive_distributed_mutex<store_t> ledger(store, "ledger", 10s);
  holdfast::fenced<long> balance(std::in_place, 100);
  bool same_token = true;
  auto debit = [&](long n) {
    std::lock_guard<decltype(ledger)> g(ledger);  // a re-entry: count 2
    return balance.write(ledger, [n](long& v) { v -= n; }).has_value();
  };
  auto credit = [&](long n) {
    std::unique_lock<decltype(ledger)> g(ledger);  // a re-entry: count 2
    return balance.write(ledger, [n](long& v) { v += n; }).has_value();
  };
  bool wrote = false;
  {
    std::lock_guard<decltype(ledger)> g(ledger);  // the one store call: count 1
    const holdfast::fencing_token t = ledger.token();
    wrote = debit(30) && credit(30);
    same_token = ledger.token() == t && ledger.lock_count() == 1;
    std::printf("transfer under token %s: %s\n", holdfast::to_string(t).c_str(),
                wrote ? "written" : "REFUSED");
  }
  const bool freed = !held(store, "ledger");
  std::printf("after the outermost unlock the ledger is %s\n", freed ? "free" : "STILL HELD");

  holdfast::reentrant_holder<store_t> me(store);
  auto a = me.try_acquire("orders", 10s, "request-1");
  auto again = me.try_acquire("orders", 10s, "request-1");  // the caller's retry: counted once
  auto b = me.try_acquire("orders", 10s, "request-2");
  const bool counted = a && again && b && *a == *b && me.hold_count("orders") == 2;
  (void)me.release("orders", "request-2");
  const bool still = held(store, "orders");
  (void)me.release("orders", "request-1");
  const bool gone = !held(store, "orders");
  std::printf(
      "orders: %zu entries after a retried request, held after one exit: %s, free after "
      "the last: %s\n",
      static_cast<std::size_t>(counted ? 2 : 0), still ? "yes" : "NO", gone ? "yes" : "NO");
  const bool ok = wrote && same_token && freed && counted && still && gone;
  std::printf("%s\n", ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
