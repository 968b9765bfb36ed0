// SPDX-License-Identifier: MIT
// examples/12_multiprocess_etcd.cpp - several OS processes share a lease in etcd and write one
// record in etcd under it; one of them is frozen (SIGSTOP) past its TTL while it believes it holds
// the lease, and etcd_fence refuses its late write by its fencing token (etcd's revision).
//
//   bash .ci/example-multiprocess etcd    starts etcd, builds and runs this
//
// Or by hand, with a cluster of your own:
//   HOLDFAST_ETCD_ENDPOINTS=http://127.0.0.1:2379 ./example_12_multiprocess_etcd
//
// The story (as example 06 tells it with Redis and PostgreSQL):
//   1. Worker w0 starts alone, acquires the lease "ledger" (etcd_store, TTL 2 s: etcd's minimum
//      with its default election timeout; token T0 = the key's create revision), checks that its
//      lease is valid, and is frozen by SIGSTOP before it writes.
//   2. The parent starts w1..w3. They wait on the lease; etcd's leader expires w0's lease after
//      2 s (plus up to 0.5 s: etcd looks for expired leases twice a second) and one of them gets
//      the key with a greater revision. Each worker makes three deposits into the record
//      "ledger", each a fenced etcd transaction (etcd_fence::write): the record and its fence key
//      change together, only if the fence is not newer than the token.
//   3. Once a newer token has been admitted, the parent continues w0 (SIGCONT). w0 writes with
//      T0: etcd_fence refuses it (stale_token). w0 notices, takes a new lease and makes its
//      deposits.
//   4. The parent checks the record: 4 x 3 deposits, in token order, T0 nowhere.
// Exit status 0 iff all of that holds. Exit 77 (skip) if no etcd is configured, unless
// HOLDFAST_REQUIRE_SERVERS or CI is set, which makes that a failure.
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "holdfast/holdfast.hpp"
#include "holdfast/stores/etcd.hpp"

namespace {

using namespace std::chrono_literals;

constexpr int kWorkers = 4;
constexpr int kDepositsEach = 3;
constexpr auto kTtl = 2s;

bool required() {
  for (const char* name : {"HOLDFAST_REQUIRE_SERVERS", "CI"}) {
    const char* v = std::getenv(name);
    if (v != nullptr && *v != '\0' && std::strcmp(v, "0") != 0 && std::strcmp(v, "false") != 0) {
      return true;
    }
  }
  return false;
}

double since_start() {
  static const auto t0 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// One line per event, written with a single write() so lines from processes do not interleave.
template <class... Args>
void say(const char* fmt, Args... args) {
  char line[512];
  int n = std::snprintf(line, sizeof line, "[%7.1f ms pid %6d] ", since_start(),
                        static_cast<int>(::getpid()));
  n += std::snprintf(line + n, sizeof line - static_cast<std::size_t>(n), fmt, args...);
  if (n > static_cast<int>(sizeof line) - 2) n = static_cast<int>(sizeof line) - 2;
  line[n++] = '\n';
  (void)!::write(1, line, static_cast<std::size_t>(n));
}

struct keys {
  std::string fence;   // the record's fence: the newest admitted token
  std::string record;  // the record: one " w<id>#<token>" entry per deposit
};

// Appends one entry to the record under `token`. The record is read, then written through the
// fence: if a newer holder wrote in between, its token is in the fence and this write is refused,
// so no deposit is lost to an interleaving (a stale holder's read may be old; its write never
// lands).
holdfast::result<void> deposit(holdfast::etcd_fence& fence, const keys& k,
                               holdfast::fencing_token token, const std::string& owner,
                               const std::string& entry) {
  auto current = fence.get(k.record);
  if (!current) return current.error();
  return fence.write(k.fence, token, owner, k.record, current->value_or("") + entry);
}

// A worker process: kDepositsEach admitted deposits, each under its own grant of the lease. The
// victim freezes itself once, after it acquired and checked its lease and before it wrote.
int worker(const holdfast::etcd_options& o, const keys& k, int id, bool victim, int report_fd) {
  holdfast::etcd_store leases(o);
  holdfast::etcd_fence fence(o);
  holdfast::acquire_options<> opts;
  opts.owner = "w" + std::to_string(id) + "-" + std::to_string(::getpid());
  opts.backoff.initial = 5ms;
  opts.backoff.max_delay = 100ms;
  int admitted = 0;
  int stale = 0;
  bool froze = false;
  while (admitted < kDepositsEach) {
    auto lease = holdfast::acquire(leases, "ledger", kTtl, 60s, opts);
    if (!lease) {
      say("w%d: acquire failed: %s (%s)", id, lease.error().message().c_str(),
          leases.last_error_message().c_str());
      return 1;
    }
    if (!lease->valid()) continue;  // check, then act: the textbook pattern that pauses break
    const holdfast::fencing_token token = lease->token();
    if (victim && !froze) {
      froze = true;
      say("w%d: holds the lease with token %llu (etcd revision), valid for %lld ms more; about "
          "to write... (SIGSTOP)",
          id, static_cast<unsigned long long>(token.value()),
          static_cast<long long>(
              std::chrono::duration_cast<std::chrono::milliseconds>(lease->remaining()).count()));
      const std::string t = std::to_string(token.value()) + "\n";
      (void)!::write(report_fd, t.data(), t.size());
      ::raise(SIGSTOP);  // frozen here until the parent sends SIGCONT
      say("w%d: continued (SIGCONT); its lease says valid() == %s, but it already checked", id,
          lease->valid() ? "true" : "false");
    }
    const std::string entry = " w" + std::to_string(id) + "#" + std::to_string(token.value());
    auto w = deposit(fence, k, token, lease->owner(), entry);
    if (w) {
      ++admitted;
      say("w%d: deposit with token %llu admitted", id,
          static_cast<unsigned long long>(token.value()));
    } else if (w.error() == holdfast::errc::stale_token) {
      ++stale;
      say("w%d: deposit with token %llu REJECTED by etcd_fence: %s (the fence is newer)", id,
          static_cast<unsigned long long>(token.value()), w.error().message().c_str());
    } else {
      say("w%d: deposit failed: %s (%s)", id, w.error().message().c_str(),
          fence.last_error_message().c_str());
      return 1;
    }
    (void)lease->release();  // not_holder for the victim: etcd expired its lease long ago
  }
  const bool as_told = victim ? stale == 1 : stale == 0;
  return as_told ? 0 : 1;
}

std::uint64_t current_fence(holdfast::etcd_fence& f, const keys& k) {
  auto t = f.newest(k.fence);
  return t ? t->value() : 0;
}

}  // namespace

int main() {
  since_start();
  const char* endpoints = std::getenv("HOLDFAST_ETCD_ENDPOINTS");
  if (endpoints == nullptr || *endpoints == '\0') {
    std::fprintf(
        stderr,
        "example 12 needs etcd: set HOLDFAST_ETCD_ENDPOINTS (comma-separated client URLs), "
        "or run `bash .ci/example-multiprocess etcd`, which starts one.\n");
    return required() ? 1 : 77;
  }
  holdfast::etcd_options o;
  o.endpoints.clear();
  for (const char *p = endpoints, *comma; *p != '\0'; p = *comma ? comma + 1 : comma) {
    comma = std::strchr(p, ',');
    if (comma == nullptr) comma = p + std::strlen(p);
    if (comma > p) o.endpoints.emplace_back(p, comma);
  }
  // Keys of this run only, so runs never see each other's leases or records.
  const std::string run = std::to_string(::getpid());
  o.key_prefix = "holdfast-example-" + run + "/lease/";
  const keys k{"holdfast-example-" + run + "/fence/ledger", "holdfast-example-" + run + "/ledger"};
  holdfast::etcd_fence fence(o);
  say("parent: lease \"ledger\" and record %s in etcd at %s, TTL %lld ms", k.record.c_str(),
      o.endpoints.front().c_str(), static_cast<long long>(std::chrono::milliseconds(kTtl).count()));

  int report[2];
  if (::pipe(report) != 0) return 1;
  std::vector<pid_t> pids;
  auto spawn = [&](int id, bool victim) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(report[0]);
      ::_exit(worker(o, k, id, victim, report[1]));
    }
    pids.push_back(pid);
    return pid;
  };
  auto give_up = [&](const char* why) {
    say("parent: %s", why);
    for (pid_t p : pids) {
      ::kill(p, SIGKILL);
      ::waitpid(p, nullptr, 0);
    }
    return 1;
  };

  // 1. The victim alone: it acquires and freezes itself while holding the lease.
  const pid_t victim = spawn(0, true);
  int status = 0;
  if (::waitpid(victim, &status, WUNTRACED) != victim || !WIFSTOPPED(status)) {
    return give_up("w0 did not stop as planned");
  }
  char buf[32] = {};
  if (::read(report[0], buf, sizeof buf - 1) <= 0) return give_up("w0 sent no token");
  const std::uint64_t victim_token = std::strtoull(buf, nullptr, 10);
  say("parent: w0 is frozen holding token %llu; starting w1..w3",
      static_cast<unsigned long long>(victim_token));

  // 2. The others contend; one gets the lease once etcd has expired w0's.
  for (int id = 1; id < kWorkers; ++id) spawn(id, false);
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (current_fence(fence, k) <= victim_token) {
    if (std::chrono::steady_clock::now() > deadline) return give_up("no newer write in 60 s");
    std::this_thread::sleep_for(10ms);
  }
  say("parent: the fence is now %llu > %llu; continuing w0 (SIGCONT)",
      static_cast<unsigned long long>(current_fence(fence, k)),
      static_cast<unsigned long long>(victim_token));
  ::kill(victim, SIGCONT);

  // 3. Everyone finishes.
  bool ok = true;
  for (pid_t p : pids) {
    if (::waitpid(p, &status, 0) != p || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      say("parent: worker pid %d did not finish as told", static_cast<int>(p));
      ok = false;
    }
  }

  // 4. The record must be exact.
  auto read = fence.get(k.record);
  if (!read || !*read) return give_up("cannot read the record");
  const std::string record = **read;
  std::printf("\nfinal record: fence=%llu\nentries (worker#token, in order):%s\n",
              static_cast<unsigned long long>(current_fence(fence, k)), record.c_str());
  int entries = 0;
  std::uint64_t previous = 0;
  bool ordered = true;
  bool victim_token_absent = true;
  for (std::size_t at = record.find('#'); at != std::string::npos; at = record.find('#', at + 1)) {
    const std::uint64_t t = std::strtoull(record.c_str() + at + 1, nullptr, 10);
    ordered = ordered && previous <= t;
    previous = t;
    victim_token_absent = victim_token_absent && t != victim_token;
    ++entries;
  }
  const int expected = kWorkers * kDepositsEach;
  ok = ok && entries == expected && ordered && victim_token_absent &&
       previous == current_fence(fence, k);
  std::printf("\n%d entries: %s; tokens non-decreasing: %s; frozen token %llu never written: %s\n",
              entries, entries == expected ? "exact" : "WRONG", ordered ? "yes" : "NO",
              static_cast<unsigned long long>(victim_token), victim_token_absent ? "yes" : "NO");

  // This run's keys (the lease key expired or was released): a range delete, outside holdfast.
  {
    holdfast::detail::etcd_link admin(o);
    std::string from;
    std::string to;
    holdfast::detail::base64_append("holdfast-example-" + run + "/", from);
    holdfast::detail::base64_append("holdfast-example-" + run + "0", to);  // '0' follows '/'
    auto guard = admin.lock();
    (void)admin.post("/kv/deleterange", R"({"key":")" + from + R"(","range_end":")" + to + R"("})");
  }
  std::printf("%s\n", ok ? "OK: the stale write was refused by etcd_fence and the record is exact"
                         : "FAILED");
  return ok ? 0 : 1;
}
