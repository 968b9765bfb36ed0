// SPDX-License-Identifier: MIT
// examples/01_fenced_account.cpp - the demo (`bash .ci/demo`): why a lease needs a fencing token.
//
// Four workers, A to D, each make ten $10 deposits into one shared account. A deposit is a
// read-modify-write transaction (read the balance, add 10, write it back) done while holding a
// lease on "account" in a memory_store, with the real steady clock and a 100 ms TTL.
//
// In its first transaction worker A stalls after reading the balance, long enough for its lease
// to expire and for another worker to take the lease and commit a deposit: a stand-in for a GC
// pause, a swapped-out process or a slow disk. The stall is made deterministic, not left to timing
// luck: A waits until another worker has committed after A stalled, which the store only allows
// once A's TTL has run out. Then A wakes and writes what it computed from its stale read.
//
// The workload runs twice:
//   unfenced  the account accepts every write. A's stale write lands and overwrites the other
//             worker's deposit: a lost update, although every write was made "under the lease".
//   fenced    the account is a holdfast::fenced<long>; every access carries the lease's fencing
//             token and the account refuses a token older than one it has seen. A's stale write is
//             rejected; A notices, takes a new lease and redoes its deposit. The balance is exact.
//
// The exit status is 0 iff the fenced run ended exact with at least one stale write rejected AND
// the unfenced run showed the lost update (so the demo also proves its own point).
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "holdfast/holdfast.hpp"

namespace {

using namespace std::chrono_literals;
using clock_type = holdfast::steady_clock;
using store_type = holdfast::memory_store<clock_type>;

constexpr int kWorkers = 4;
constexpr int kDeposits = 10;  // per worker
constexpr long kAmount = 10;
constexpr long kOpening = 100;
constexpr std::chrono::milliseconds kTtl = 100ms;
constexpr std::chrono::seconds kAcquireTimeout = 10s;
constexpr std::chrono::seconds kStallLimit = 10s;  // a bound on the stall, should the demo break

/// The shared account: a plain value behind a mutex, or a fenced<long>. Both offer the same two
/// operations; only the fenced one looks at the token.
class account {
 public:
  explicit account(bool fenced) : fenced_(fenced), value_(std::in_place, kOpening) {}

  /// Reads the balance as the holder of `token` (owner id `owner`). For the fenced account the read
  /// also goes through the gate: a read that a later write depends on must raise the gate, or an
  /// older holder's write could land between this read and this holder's write and be overwritten.
  holdfast::result<long> read(holdfast::fencing_token token, std::string_view owner) {
    if (!fenced_) {
      std::lock_guard<std::mutex> lock(plain_mutex_);
      return plain_;
    }
    return value_.write(token, owner, [](long& v) { return v; });
  }

  /// Writes the balance as the holder of `token` (owner id `owner`): stale_token if the fenced
  /// account has seen a newer token; the unfenced account takes anything.
  holdfast::result<void> write(holdfast::fencing_token token, std::string_view owner,
                               long balance) {
    if (!fenced_) {
      std::lock_guard<std::mutex> lock(plain_mutex_);
      plain_ = balance;
      return {};
    }
    return value_.write(token, owner, [balance](long& v) { v = balance; });
  }

  /// Returns the balance now.
  long balance() {
    if (fenced_) return value_.snapshot();
    std::lock_guard<std::mutex> lock(plain_mutex_);
    return plain_;
  }

  /// Returns the newest token the fenced account has seen (none for the unfenced one).
  holdfast::fencing_token newest() const {
    return fenced_ ? value_.newest() : holdfast::fencing_token{};
  }

 private:
  const bool fenced_;
  std::mutex plain_mutex_;
  long plain_ = kOpening;
  holdfast::fenced<long> value_;
};

/// A timeline of the stall, in the notation of the README's timeline, with times since the run
/// started.
class timeline {
 public:
  explicit timeline(clock_type::time_point start) : start_(start) {}

  void add(clock_type::time_point at, std::string what) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(at - start_).count();
    lines_.push_back({ms, std::move(what)});
  }
  void print() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::stable_sort(lines_.begin(), lines_.end(),
                     [](const line& a, const line& b) { return a.ms < b.ms; });
    for (const line& l : lines_) {
      const std::string t = "t=" + std::to_string(l.ms) + "ms";
      std::printf("    %-8s %s\n", t.c_str(), l.what.c_str());
    }
  }

 private:
  struct line {
    long long ms;
    std::string what;
  };
  clock_type::time_point start_;
  std::mutex mutex_;
  std::vector<line> lines_;
};

struct outcome {
  long expected = 0;
  long final_balance = 0;
  int writes_admitted = 0;
  int stale_rejected = 0;
  bool stall_worked = false;  // A really stalled until another worker committed after it
  bool errors = false;        // an acquire or a read failed unexpectedly
};

/// Runs the workload once, fenced or not, and prints its timeline.
outcome run(bool fenced) {
  holdfast::memory_store_options store_opts;
  store_opts.last_issued =
      holdfast::fencing_token(32);  // so A's first token is 33, as in the README's timeline
  store_type store(clock_type{}, store_opts);
  account acct(fenced);
  const clock_type::time_point start = clock_type{}.now();
  timeline story(start);

  std::mutex m;
  std::condition_variable cv;
  bool a_holds_lease = false;    // A has its first lease: the others may start
  bool a_stalled = false;        // A is inside its stall
  bool committed_after = false;  // another worker committed after A stalled
  std::string newer_token;       // the token of that commit, the one the timeline shows
  int writes = 0, rejected = 0;
  bool stall_worked = false, errors = false;

  // A's stall: told on the timeline, then wait until another worker has committed since.
  auto stall = [&](holdfast::lease<store_type, clock_type>& lease, long seen) {
    const clock_type::time_point t = clock_type{}.now();
    story.add(lease.acquired_at(), "A acquires \"account\" ttl=" + std::to_string(kTtl.count()) +
                                       "ms  -> token " + std::to_string(lease.token().value()));
    story.add(t, "A reads $" + std::to_string(seen) + ", checks its lease: " +
                     (lease.valid() ? "valid" : "NOT valid") + "  (then A stalls: GC pause)");
    // The store started the TTL no earlier than the request left, so this is when it expires at
    // the earliest (inspect()'s `remaining` is rounded down to whole ms, and would show it early).
    story.add(lease.acquired_at() + kTtl, "the store expires A's lease");
    std::unique_lock<std::mutex> lock(m);
    a_holds_lease = a_stalled = true;
    cv.notify_all();
    stall_worked = cv.wait_for(lock, kStallLimit, [&] { return committed_after; });
  };

  // The admitted token A's rejection is told against: the one the timeline shows being written
  // (the fence has admitted later ones since, from writes the timeline leaves out, so its
  // newest() would name a token the reader has not seen).
  auto shown_newer = [&] {
    return newer_token.empty() ? std::to_string(acct.newest().value()) : newer_token;
  };

  auto worker = [&](int id) {
    const std::string name(1, static_cast<char>('A' + id));
    holdfast::acquire_options<clock_type> opts;
    opts.owner = "worker-" + name;
    opts.backoff.initial = 1ms;  // contenders poll the short lease quickly
    opts.backoff.max_delay = 10ms;
    bool stall_pending = (id == 0);
    for (int done = 0; done < kDeposits;) {
      auto lease = holdfast::acquire(store, "account", kTtl, kAcquireTimeout, opts);
      if (!lease) {
        std::lock_guard<std::mutex> lock(m);
        errors = true;
        std::printf("worker %s: acquire failed: %s\n", name.c_str(),
                    lease.error().message().c_str());
        return;
      }
      const holdfast::fencing_token token = lease->token();
      const std::string tok = std::to_string(token.value());
      const holdfast::result<long> seen = acct.read(token, lease->owner());
      if (!seen) {  // a newer holder has been here: redo the deposit under a new lease
        std::lock_guard<std::mutex> lock(m);
        ++rejected;
        continue;
      }
      const long balance = *seen + kAmount;
      const bool stalled_this_time = stall_pending;
      if (stall_pending) {
        stall_pending = false;
        stall(*lease, *seen);
      }
      const holdfast::result<void> w = acct.write(token, lease->owner(), balance);
      const clock_type::time_point wrote = clock_type{}.now();

      std::lock_guard<std::mutex> lock(m);
      if (stalled_this_time) {
        story.add(wrote,
                  "A wakes, writes $" + std::to_string(balance) + " with token " + tok +
                      (w ? "  -> written over the deposits made meanwhile"
                         : "  -> REJECTED: " + tok + " < " + shown_newer() + "; A redoes it"));
      } else if (w && a_stalled && !committed_after) {
        // The first commit by another worker after A stalled: the other half of the story.
        committed_after = true;
        newer_token = tok;
        story.add(lease->acquired_at(), name + " acquires \"account\"            -> token " + tok);
        story.add(wrote, name + " writes $" + std::to_string(balance) + " with token " + tok +
                             (fenced ? "     -> admitted (newest seen: " + tok + ")" : ""));
        cv.notify_all();
      }
      if (!w) {
        ++rejected;
        continue;  // a stale write: redo the deposit under a new lease
      }
      ++writes;
      ++done;
    }  // each lease is released here (RAII)
  };

  std::vector<std::thread> threads;
  threads.emplace_back(worker, 0);
  {
    // The others start once A holds its first lease, so the story starts with A.
    std::unique_lock<std::mutex> lock(m);
    if (!cv.wait_for(lock, kStallLimit, [&] { return a_holds_lease; })) errors = true;
  }
  for (int id = 1; id < kWorkers; ++id) threads.emplace_back(worker, id);
  for (std::thread& t : threads) t.join();

  std::printf("%s run:\n", fenced ? "fenced" : "unfenced");
  story.print();
  outcome out;
  out.expected = kOpening + static_cast<long>(kWorkers) * kDeposits * kAmount;
  out.final_balance = acct.balance();
  out.writes_admitted = writes;
  out.stale_rejected = rejected;
  out.stall_worked = stall_worked;
  out.errors = errors;
  return out;
}

}  // namespace

int main() {
  std::printf(
      "%d workers x %d deposits of $%ld into one account opened with $%ld; leases on a\n"
      "memory_store, TTL %lld ms, real steady clock. Worker A stalls mid-transaction.\n\n",
      kWorkers, kDeposits, kAmount, kOpening, static_cast<long long>(kTtl.count()));
  const outcome unfenced = run(false);
  std::printf("\n");
  const outcome fenced = run(true);

  const auto report = [](const char* name, const outcome& o) {
    const std::string verdict =
        o.final_balance == o.expected
            ? std::string("exact")
            : "LOST UPDATE: $" + std::to_string(o.expected - o.final_balance) + " of deposits gone";
    std::printf("  %-9s expected $%ld, final $%ld: %s\n", name, o.expected, o.final_balance,
                verdict.c_str());
    std::printf("  %-9s writes admitted %d, stale writes rejected %d\n", "", o.writes_admitted,
                o.stale_rejected);
  };
  std::printf("\nsummary:\n");
  report("unfenced", unfenced);
  report("fenced", fenced);

  const bool ok = !unfenced.errors && !fenced.errors && unfenced.stall_worked &&
                  fenced.stall_worked && unfenced.final_balance != unfenced.expected &&
                  fenced.final_balance == fenced.expected && fenced.stale_rejected >= 1;
  std::printf("\n%s\n", ok ? "OK: the lease alone lost an update; the fencing token prevented it."
                           : "FAILED: the demo did not show what it should (see above).");
  return ok ? 0 : 1;
}
