// SPDX-License-Identifier: MIT
// examples/03_keepalive.cpp - a long task under a lease that a keepalive renews, until the lease
// is lost; the task notices and stops before it could write as a stale holder.
//
// Worker A takes a 300 ms lease on "report" and appends to a fenced journal in small steps,
// far longer than one TTL: a holdfast::keepalive renews the lease every 150 ms in the background.
// After two renewals the store "fails over" and loses A's record (a stand-in for a Redis failover
// without replication, a partition, an operator's FLUSHALL): it answers A's next renewal with
// lease_lost. The keepalive turns the lease lost and runs A's on-loss callback; A checks before
// every step and stops (its handle still releases the record on the way out, which frees the key
// early). Worker B then acquires "report" with a newer token and appends too.
//
// Two layers of protection, both shown:
//   1. A noticed the loss itself and stopped: the journal's fence never had to refuse A.
//   2. Had A not noticed (a pause at the wrong moment), its write would carry the old token,
//      and the fence refuses it: the last line tries exactly that write, after B's.
//
// Real time, steady clock, well under a second. The outcome does not depend on timing: B starts
// only after A has stopped. (Normally the cause is renew_refused; on a machine so loaded that the
// keepalive wakes after A's validity has passed, it is validity_passed: A stops either way.)
// Exits 0 iff A stopped on a loss it was told about, the fence refused nothing during the run,
// and refused the stale write at the end.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "holdfast/holdfast.hpp"

namespace {

using namespace std::chrono_literals;

/// A memory_store that can be told to "lose" its records on renew, like a store failing over to
/// a replica that never saw them. Counts renewals.
class failing_over_store {
 public:
  holdfast::result<holdfast::grant> try_acquire(std::string_view k, std::string_view o,
                                                std::chrono::milliseconds ttl) {
    return inner_.try_acquire(k, o, ttl);
  }
  holdfast::result<holdfast::grant> renew(std::string_view k, std::string_view o,
                                          holdfast::fencing_token t,
                                          std::chrono::milliseconds ttl) {
    if (failed_over_) return holdfast::errc::lease_lost;
    auto g = inner_.renew(k, o, t, ttl);
    if (g) ++renewals_;
    return g;
  }
  holdfast::result<void> release(std::string_view k, std::string_view o,
                                 holdfast::fencing_token t) {
    return inner_.release(k, o, t);
  }
  void fail_over() { failed_over_ = true; }
  int renewals() const { return renewals_; }

 private:
  holdfast::memory_store<> inner_;
  std::atomic<bool> failed_over_{false};
  std::atomic<int> renewals_{0};
};

struct entry {
  holdfast::fencing_token token;
  std::string what;
};

}  // namespace

int main() {
  failing_over_store store;
  holdfast::keepalive<> keepalive;  // one thread; renews at half the TTL
  holdfast::fenced<std::vector<entry>> journal;

  std::mutex mu;
  std::condition_variable cv;
  bool lost = false, a_stopped = false;
  holdfast::loss_cause cause = holdfast::loss_cause::none;
  int a_steps = 0, refused_during_run = 0;

  std::thread worker_a([&] {
    holdfast::acquire_options<> opts;
    opts.owner = "worker-A";
    opts.on_lost = [&](holdfast::loss_cause why) {  // runs on the keepalive's thread
      std::lock_guard<std::mutex> lock(mu);
      lost = true;
      cause = why;
      cv.notify_all();
    };
    auto lease = holdfast::try_acquire(store, "report", 300ms, opts);
    if (!lease || !keepalive.add(*lease)) return;
    std::printf("A: acquired %s, TTL 300 ms, kept alive in the background\n",
                holdfast::to_string(lease->token()).c_str());
    for (int step = 0;; ++step) {
      {
        std::unique_lock<std::mutex> lock(mu);
        // A step of work takes 20 ms; the loss callback cuts it short.
        cv.wait_for(lock, 20ms, [&] { return lost; });
        if (lost) break;
      }
      if (!lease->valid()) break;  // the holder's own clock says stop (belt and braces)
      const auto w = journal.write(*lease, [&](std::vector<entry>& j) {
        j.push_back({lease->token(), "A step " + std::to_string(step)});
      });
      if (!w) ++refused_during_run;
      ++a_steps;
      if (store.renewals() >= 2) store.fail_over();  // after two renewals
    }
    std::printf(
        "A: lease lost (%s) after %d renewals; stopped after %d steps, "
        "before its next write\n",
        holdfast::to_string(lease->loss()), store.renewals(), a_steps);
    std::lock_guard<std::mutex> lock(mu);
    a_stopped = true;
    cv.notify_all();
    // The lease is released when it goes out of scope (the store may refuse: it is lost).
  });

  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, 5s, [&] { return a_stopped; });
  }
  worker_a.join();

  // B takes over (at once here: A's handle released the record; else after its TTL).
  holdfast::acquire_options<> b_opts;
  b_opts.owner = "worker-B";
  auto b = holdfast::acquire(store, "report", 300ms, 2s, b_opts);
  if (b) {
    std::printf("B: acquired %s\n", holdfast::to_string(b->token()).c_str());
    (void)journal.write(*b, [&](std::vector<entry>& j) { j.push_back({b->token(), "B step 0"}); });
  }

  // What the fence would have done had A not noticed: A's next write, with its old token.
  const holdfast::fencing_token stale_token(1);
  const auto stale = journal.write(stale_token, "worker-A", [](std::vector<entry>& j) {
    j.push_back({holdfast::fencing_token(1), "A, stale"});
  });
  std::printf("A's write with %s after B's: %s\n", holdfast::to_string(stale_token).c_str(),
              stale ? "ADMITTED (bug!)" : stale.error().message().c_str());

  const auto entries = journal.snapshot();
  std::printf("journal: %zu entries, last \"%s\" with %s; fence refusals during the run: %d\n",
              entries.size(), entries.empty() ? "" : entries.back().what.c_str(),
              entries.empty() ? "-" : holdfast::to_string(entries.back().token).c_str(),
              refused_during_run);

  const bool ok = lost && cause != holdfast::loss_cause::none && a_steps > 0 && b &&
                  b->token() > stale_token && refused_during_run == 0 &&
                  stale.error() == holdfast::errc::stale_token;
  std::printf("%s\n", ok ? "OK" : "FAILED");
  return ok ? 0 : 1;
}
