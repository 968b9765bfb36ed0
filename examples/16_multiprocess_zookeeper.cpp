// SPDX-License-Identifier: MIT
// examples/16_multiprocess_zookeeper.cpp - several OS processes share a lease in ZooKeeper (an
// ephemeral sequential node; token = its czxid) and write one record in ZooKeeper under it; one
// of them is frozen (SIGSTOP) past its session timeout while it believes it holds the lease, and
// zookeeper_fence refuses its late write by its fencing token.
//
//   HOLDFAST_ZK_HOSTS=127.0.0.1:2181 ./example_16_multiprocess_zookeeper
//
// (.ci/servers start exports HOLDFAST_ZK_HOSTS; the tests run this when ZooKeeper is on.)
//
// The story (as examples 06 and 12 tell it with Redis, PostgreSQL and etcd):
//   1. Worker w0 starts alone, acquires the lease "ledger" (zookeeper_store; TTL = the session
//      timeout the server granted, 2 s asked), checks that its lease is valid, and is frozen by
//      SIGSTOP before it writes.
//   2. The parent starts w1..w3. They queue on the lease (each watches the node ahead of its
//      own); the server ends w0's session once it has heard nothing from it for the session
//      timeout, deletes its node, and the next in line holds the lease with a greater czxid. Each
//      worker makes three deposits into the record, each a fenced ZooKeeper multi
//      (zookeeper_fence::write: the fence node's version checked and the record set in one
//      request).
//   3. Once a newer token has been admitted, the parent continues w0 (SIGCONT). w0 writes with
//      its old token: zookeeper_fence refuses it (stale_token). w0 notices, takes a new lease
//      (its store opens a new session) and makes its deposits.
//   4. The parent checks the record: 4 x 3 deposits, in token order, the frozen token nowhere:
//      the fence never admitted two holders.
// Exit status 0 iff all of that holds. Exit 77 (skip) if no ZooKeeper is configured, unless
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
#include "holdfast/stores/zookeeper.hpp"

namespace {

using namespace std::chrono_literals;

constexpr int kWorkers = 4;
constexpr int kDepositsEach = 3;
constexpr auto kSession = 2s;  // asked; the lease TTL is what the server grants

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
holdfast::result<void> deposit(holdfast::zookeeper_fence& fence, const keys& k,
                               holdfast::fencing_token token, const std::string& owner,
                               const std::string& entry) {
  auto current = fence.get(k.record);
  if (!current) return current.error();
  return fence.write(k.fence, token, owner, k.record, current->value_or("") + entry);
}

// A worker process: kDepositsEach admitted deposits, each under its own grant of the lease. The
// victim freezes itself once, after it acquired and checked its lease and before it wrote.
int worker(const holdfast::zookeeper_options& o, const keys& k, int id, bool victim,
           int report_fd) {
  holdfast::zookeeper_store leases(o);
  holdfast::zookeeper_fence fence(o);
  if (auto up = leases.inspect("ledger"); !up) {  // opens the session: min_ttl() is the granted one
    say("w%d: no session: %s", id, leases.last_error_message().c_str());
    return 1;
  }
  const auto ttl = leases.min_ttl();
  holdfast::acquire_options<> opts;
  opts.owner = "w" + std::to_string(id) + "-" + std::to_string(::getpid());
  opts.backoff.initial = 5ms;
  opts.backoff.max_delay = 100ms;
  int admitted = 0;
  int stale = 0;
  bool froze = false;
  while (admitted < kDepositsEach) {
    auto lease = holdfast::acquire(leases, "ledger", ttl, 60s, opts);
    if (!lease) {
      say("w%d: acquire failed: %s (%s)", id, lease.error().message().c_str(),
          leases.last_error_message().c_str());
      return 1;
    }
    if (!lease->valid()) continue;  // check, then act: the textbook pattern that pauses break
    const holdfast::fencing_token token = lease->token();
    if (victim && !froze) {
      froze = true;
      say("w%d: holds the lease with token %llu (the node's czxid), valid for %lld ms more; about "
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
      say("w%d: deposit with token %llu REJECTED by zookeeper_fence: %s (the fence is newer)", id,
          static_cast<unsigned long long>(token.value()), w.error().message().c_str());
    } else {
      say("w%d: deposit failed: %s (%s)", id, w.error().message().c_str(),
          fence.last_error_message().c_str());
      return 1;
    }
    (void)lease->release();  // not_holder for the victim: its session expired long ago
  }
  const bool as_told = victim ? stale == 1 : stale == 0;
  return as_told ? 0 : 1;
}

std::uint64_t current_fence(holdfast::zookeeper_fence& f, const keys& k) {
  auto t = f.newest(k.fence);
  return t ? t->value() : 0;
}

}  // namespace

int main() {
  since_start();
  const char* hosts = std::getenv("HOLDFAST_ZK_HOSTS");
  if (hosts == nullptr || *hosts == '\0') {
    std::fprintf(stderr,
                 "example 16 needs ZooKeeper: set HOLDFAST_ZK_HOSTS (host:port[,host:port...]), "
                 "or run `bash .ci/servers start`, which starts one.\n");
    return required() ? 1 : 77;
  }
  holdfast::zookeeper_options o;
  o.hosts = hosts;
  o.session_timeout = kSession;
  // Nodes of this run only, so runs never see each other's leases or records.
  const std::string run = "/holdfast-example-" + std::to_string(::getpid());
  o.root = run + "/lease";
  const keys k{run + "/fence-ledger", run + "/ledger"};
  holdfast::zookeeper_fence fence(o);
  say("parent: lease \"ledger\" and record %s in ZooKeeper at %s, session %lld ms asked",
      k.record.c_str(), o.hosts.c_str(),
      static_cast<long long>(std::chrono::milliseconds(kSession).count()));

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
  say("parent: w0 is frozen holding token %llu; starting w1..w3 (its session ends at the server)",
      static_cast<unsigned long long>(victim_token));

  // 2. The others queue; the next in line holds the lease once the server ended w0's session.
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

  // This run's nodes (the lease's parent is a container the server deletes once empty).
  {
    holdfast::detail::zookeeper_link admin(o);
    auto guard = admin.lock();
    if (!admin.ensure_connected()) {
      for (const std::string& p : {k.record, k.fence, o.root, run}) {
        (void)zoo_delete(admin.handle(), p.c_str(), -1);
      }
    }
  }
  std::printf(
      "%s\n",
      ok ? "OK: the stale write was refused by zookeeper_fence and the record is exact" : "FAILED");
  return ok ? 0 : 1;
}
