// SPDX-License-Identifier: MIT
// Fault tests of stores/etcd.hpp on etcd clusters the tests own:
//   - several processes loop acquire / renew / release (and sometimes die holding the lease) on
//     one key of a three-member cluster while the test kill -9s the leader and restarts it from
//     its data directory, SIGSTOPs the leader past the TTL, and stops and restarts the whole
//     cluster. Required: never two live grants of the key, tokens strictly increasing, and a dead
//     holder's key free again within its TTL plus etcd's expiry granularity (measured; across a
//     failover the new leader restarts every lease, and that figure is printed too).
//   - a snapshot restore rewinds etcd's revision: a store that saw the newer revisions raises
//     past them itself; a process started after the restore is handed a regressed token, which a
//     fence refuses, and raise_token_floor() is its recovery.
// Every process reads std::chrono::steady_clock (CLOCK_MONOTONIC: one clock for the whole
// machine), so the processes' events can be put on one timeline.
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "../support/etcd_servers.hpp"
#include "../support/fail_fast.hpp"
#include "../support/real_servers.hpp"
#include "holdfast/fence.hpp"
#include "holdfast/stores/checked.hpp"
#include "holdfast/stores/etcd.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_etcd_cluster {

using holdfast::errc;
using holdfast::etcd_options;
using holdfast::etcd_store;
using holdfast::fencing_token;
using std::chrono::milliseconds;
using namespace std::chrono_literals;

namespace {

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// One event of a worker process, written to a pipe in one write() (atomic below PIPE_BUF).
struct event {
  enum kind_t : std::int32_t { grant, renew, release, abandon } kind;
  std::int32_t worker;
  std::int64_t token;
  std::int64_t sent;   // steady clock, ns, just before the request
  std::int64_t reply;  // steady clock, ns, just after the answer
  std::int64_t ttl_ms;
  std::int32_t ok;
};

/// A worker: until `until_ns`, contends for "k", holds each grant ~150 ms with one renewal and
/// releases it, except that every third grant it dies holding it (no renew, no release) and goes
/// on under a new owner id.
[[noreturn]] void worker(const etcd_options& o, int id, std::int64_t until_ns, int fd) {
  etcd_store s(o);
  int generation = 0;
  int grants = 0;
  auto owner = [&] { return "w" + std::to_string(id) + "." + std::to_string(generation); };
  auto emit = [&](event e) {
    e.worker = id;
    (void)!::write(fd, &e, sizeof e);
  };
  const milliseconds ttl = 2s;
  while (now_ns() < until_ns) {
    const std::int64_t sent = now_ns();
    auto g = s.try_acquire("k", owner(), ttl);
    const std::int64_t reply = now_ns();
    if (!g) {
      std::this_thread::sleep_for(g.error() == errc::busy ? 20ms : 50ms);
      continue;
    }
    emit({event::grant, 0, static_cast<std::int64_t>(g->token.value()), sent, reply, g->ttl.count(),
          1});
    if (++grants % 3 == 0) {
      emit({event::abandon, 0, static_cast<std::int64_t>(g->token.value()), sent, reply,
            g->ttl.count(), 1});
      ++generation;  // a new process, as far as etcd can tell
      continue;
    }
    std::this_thread::sleep_for(100ms);
    const std::int64_t rs = now_ns();
    auto r = s.renew("k", owner(), g->token, ttl);
    emit({event::renew, 0, static_cast<std::int64_t>(g->token.value()), rs, now_ns(),
          r ? r->ttl.count() : 0, r ? 1 : 0});
    std::this_thread::sleep_for(50ms);
    const std::int64_t ls = now_ns();
    auto rel = s.release("k", owner(), g->token);
    emit({event::release, 0, static_cast<std::int64_t>(g->token.value()), ls, now_ns(), 0,
          rel ? 1 : 0});
    if (!rel) ++generation;  // unsure whether it was released: never reuse that owner id
  }
  ::_exit(0);
}

struct grant_life {
  std::int64_t token = 0;
  int worker = 0;
  std::int64_t sent = 0;
  std::int64_t reply = 0;
  std::int64_t belief_end = 0;  // when the holder stops trusting it
  bool abandoned = false;
};

struct fault_window {
  std::string what;
  std::int64_t from = 0;
  std::int64_t to = 0;
};

double ms_between(std::int64_t a, std::int64_t b) {
  return static_cast<double>(b - a) / 1e6;
}

struct history_check {
  std::vector<std::string> violations;
  std::size_t grants = 0;
  int quiet_deaths = 0;
  double quiet_worst_ms = 0;
  double fault_worst_ms = 0;
};

/// Checks the processes' events: every token granted once, tokens strictly increasing in grant
/// order, no grant while an earlier holder of the key still believed in its own (from the reply
/// until its release request, or its last successful grant/renewal request + TTL), and a dead
/// holder's key granted again within TTL + 1 s unless a fault was near.
history_check check_history(const std::vector<event>& events,
                            const std::vector<fault_window>& faults) {
  history_check out;
  std::map<std::int64_t, grant_life> lives;
  std::map<std::int64_t, int> grants_of_token;
  for (const event& e : events) {
    grant_life& l = lives[e.token];
    switch (e.kind) {
      case event::grant:
        if (++grants_of_token[e.token] > 1) {
          out.violations.push_back("token " + std::to_string(e.token) + " granted twice");
        }
        l = {e.token, e.worker, e.sent, e.reply, e.sent + e.ttl_ms * 1000000, false};
        break;
      case event::renew:
        if (e.ok) l.belief_end = std::max(l.belief_end, e.sent + e.ttl_ms * 1000000);
        break;
      case event::release:
        l.belief_end = std::min(l.belief_end, e.sent);
        break;
      case event::abandon:
        l.abandoned = true;
        break;
    }
  }
  std::vector<grant_life> order;
  for (const auto& [token, l] : lives) order.push_back(l);
  std::sort(order.begin(), order.end(),
            [](const grant_life& a, const grant_life& b) { return a.reply < b.reply; });
  out.grants = order.size();
  for (std::size_t i = 1; i < order.size(); ++i) {
    const grant_life& a = order[i - 1];
    const grant_life& b = order[i];
    const std::string pair = "grant " + std::to_string(a.token) + " (w" + std::to_string(a.worker) +
                             ") then " + std::to_string(b.token) + " (w" +
                             std::to_string(b.worker) + ")";
    if (!(a.token < b.token)) out.violations.push_back(pair + ": tokens do not increase");
    if (!(b.reply > a.belief_end)) {
      out.violations.push_back(pair + ": two live grants, the later one " +
                               std::to_string(ms_between(b.reply, a.belief_end)) +
                               " ms before the earlier holder stopped believing");
    }
    if (a.abandoned) {
      const double late = ms_between(a.belief_end, b.reply);
      bool near_fault = false;
      for (const fault_window& f : faults) {
        near_fault =
            near_fault || (a.sent < f.to + 1'000'000'000 && a.belief_end + 1'500'000'000 > f.from);
      }
      if (near_fault) {
        out.fault_worst_ms = std::max(out.fault_worst_ms, late);
      } else {
        out.quiet_worst_ms = std::max(out.quiet_worst_ms, late);
        ++out.quiet_deaths;
        // TTL + etcd's 500 ms expiry loop + a Raft commit + the contenders' 20 ms poll.
        if (late > 1000.0) {
          out.violations.push_back(pair + ": the dead holder's key was free only " +
                                   std::to_string(late) + " ms after its TTL");
        }
      }
    }
  }
  return out;
}

}  // namespace

TEST_CASE(
    "etcd_store on a three-member cluster: kill -9 the leader, SIGSTOP it past the TTL, "
    "restart the cluster; grants stay exclusive, tokens increase, dead holders' keys free up",
    "[etcd][faults]") {
  hf_test::etcd_cluster cluster(3, "etcd-faults");
  if (!cluster.start()) {
    if (hf_test::in_ci() || !hf_test::etcd_binary().empty()) FAIL(cluster.why());
    hf_test::loud_skip("cannot start etcd: " + cluster.why());
    return;
  }
  etcd_options o;
  o.endpoints = cluster.endpoints();
  o.key_prefix = "hf-faults/" + hf_test::random_tag() + "/";
  o.connect_timeout = 500ms;
  o.command_timeout = 1000ms;

  int pipefd[2];
  REQUIRE(::pipe(pipefd) == 0);
  constexpr int kWorkers = 4;
  const std::int64_t start = now_ns();
  const std::int64_t until = start + std::chrono::nanoseconds(26s).count();
  std::vector<pid_t> pids;
  for (int i = 0; i < kWorkers; ++i) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::close(pipefd[0]);
      worker(o, i, until, pipefd[1]);
    }
    pids.push_back(pid);
  }
  ::close(pipefd[1]);
  std::vector<event> events;
  std::thread reader([&] {
    event e{};
    while (::read(pipefd[0], &e, sizeof e) == static_cast<ssize_t>(sizeof e)) events.push_back(e);
  });

  std::vector<fault_window> faults;
  auto fault = [&](const std::string& what, auto&& act) {
    fault_window w{what, now_ns(), 0};
    act();
    w.to = now_ns();
    std::printf("  fault: %s (%.0f ms)\n", what.c_str(), ms_between(w.from, w.to));
    faults.push_back(w);
  };
  std::this_thread::sleep_for(7s);  // quiet: dead holders' keys must free up within TTL + 1 s
  // 1. kill -9 the leader; restart it from its data directory 1.5 s later.
  int leader = cluster.leader();
  CHECK(leader >= 0);
  if (leader >= 0) {
    fault("kill -9 the leader m" + std::to_string(leader) + ", restart it from its data", [&] {
      cluster[static_cast<std::size_t>(leader)].kill9();
      std::this_thread::sleep_for(1500ms);
      CHECK(cluster.start());
    });
  }
  std::this_thread::sleep_for(2s);
  // 2. SIGSTOP the leader for longer than the TTL (2 s), then SIGCONT.
  leader = cluster.leader();
  CHECK(leader >= 0);
  if (leader >= 0) {
    fault("SIGSTOP the leader m" + std::to_string(leader) + " for 3 s", [&] {
      cluster[static_cast<std::size_t>(leader)].pause();
      std::this_thread::sleep_for(3s);
      cluster[static_cast<std::size_t>(leader)].resume();
    });
  }
  std::this_thread::sleep_for(2s);
  // 3. Stop the whole cluster and start it again.
  fault("stop all three members, start them again", [&] {
    for (std::size_t i = 0; i < cluster.size(); ++i) cluster[i].stop();
    std::this_thread::sleep_for(500ms);
    CHECK(cluster.start());
  });
  for (pid_t p : pids) {
    int status = 0;
    CHECK(::waitpid(p, &status, 0) == p);
    CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  }
  reader.join();
  ::close(pipefd[0]);

  const history_check h = check_history(events, faults);
  std::printf("etcd cluster faults: %zu grants by %d processes in %.1f s\n", h.grants, kWorkers,
              ms_between(start, now_ns()) / 1000);
  std::printf(
      "  dead holders: %d away from faults, their key free again at most %.0f ms after "
      "the TTL; near a fault at most %.0f ms after\n",
      h.quiet_deaths, h.quiet_worst_ms, h.fault_worst_ms);
  std::string text;
  for (const std::string& v : h.violations) text += v + "\n";
  INFO(text);
  CHECK(h.violations.empty());
  CHECK(h.grants >= 10);
  CHECK(h.quiet_deaths >= 1);
}

TEST_CASE("the cluster history check catches overlapping grants, regressing tokens, slow expiry",
          "[etcd]") {
  // Negative controls for check_history: each history breaks one rule and must be reported.
  const std::int64_t s = 1'000'000'000;  // 1 s in ns
  auto grant = [](std::int64_t token, int w, std::int64_t sent, std::int64_t reply) {
    return event{event::grant, w, token, sent, reply, 2000, 1};
  };
  auto release = [](std::int64_t token, int w, std::int64_t sent) {
    return event{event::release, w, token, sent, sent + 1000, 0, 1};
  };
  auto abandon = [](std::int64_t token, int w) {
    return event{event::abandon, w, token, 0, 0, 0, 1};
  };
  // A correct history passes.
  const std::vector<event> good = {grant(10, 0, 1 * s, 1 * s + 5), release(10, 0, 2 * s),
                                   grant(12, 1, 2 * s, 2 * s + 5), abandon(12, 1),
                                   grant(14, 2, 3 * s, 4 * s + s / 2)};
  CHECK(check_history(good, {}).violations.empty());
  CHECK(check_history(good, {}).quiet_deaths == 1);
  // Two live grants: the second granted while the first holder still believes (no release).
  CHECK_FALSE(check_history({grant(10, 0, 1 * s, 1 * s + 5), grant(12, 1, 2 * s, 2 * s + 5)}, {})
                  .violations.empty());
  // Tokens going backwards in grant order.
  CHECK_FALSE(check_history({grant(12, 0, 1 * s, 1 * s + 5), release(12, 0, 2 * s),
                             grant(10, 1, 2 * s, 2 * s + 5)},
                            {})
                  .violations.empty());
  // A token granted twice.
  CHECK_FALSE(check_history({grant(10, 0, 1 * s, 1 * s + 5), release(10, 0, 2 * s),
                             grant(10, 1, 3 * s, 3 * s + 5)},
                            {})
                  .violations.empty());
  // A dead holder's key free only 1.5 s after its TTL, away from faults.
  CHECK_FALSE(check_history({grant(10, 0, 1 * s, 1 * s + 5), abandon(10, 0),
                             grant(12, 1, 4 * s + s / 2, 4 * s + s / 2 + 5)},
                            {})
                  .violations.empty());
  // ...which is allowed near a fault (a new leader restarts every lease).
  CHECK(check_history({grant(10, 0, 1 * s, 1 * s + 5), abandon(10, 0),
                       grant(12, 1, 4 * s + s / 2, 4 * s + s / 2 + 5)},
                      {{"leader killed", 2 * s, 3 * s}})
            .violations.empty());
}

TEST_CASE(
    "etcd snapshot restore rewinds revisions: a store that saw the newer ones raises past them "
    "itself; a new process's regressed token is refused by the fence; raise_token_floor recovers",
    "[etcd][faults][restore]") {
  const std::string etcdctl = hf_test::etcdctl_binary();
  hf_test::etcd_cluster cluster(1, "etcd-restore");
  if (etcdctl.empty() || !cluster.start()) {
    if (hf_test::in_ci() || !hf_test::etcd_binary().empty()) FAIL(cluster.why() + " / etcdctl");
    hf_test::loud_skip("cannot start etcd: " + cluster.why());
    return;
  }
  hf_test::etcd_member& m = cluster[0];
  etcd_options o;
  o.endpoints = cluster.endpoints();
  etcd_store raw(o);
  holdfast::checked_store<etcd_store> s(raw);
  holdfast::fence_gate gate;  // a resource outside etcd (a database, a file service)

  auto write = [&](const char* owner) -> std::pair<fencing_token, std::error_code> {
    auto g = s.try_acquire("orders", owner, 3s);
    if (!g) return {fencing_token{}, g.error()};
    auto admitted = gate.admit(g->token, owner);
    (void)s.release("orders", owner, g->token);
    return {g->token, admitted ? std::error_code{} : admitted.error()};
  };
  {
    auto [t, ec] = write("a");
    INFO(raw.last_error_message());
    REQUIRE_FALSE(ec);
  }
  const std::string snap = cluster.dir() + "/snap.db";
  REQUIRE(hf_test::run_program({etcdctl, "--endpoints", m.client_url(), "snapshot", "save", snap},
                               cluster.dir() + "/etcdctl.log"));
  fencing_token newest;
  for (const char* owner : {"b", "c", "d"}) {
    auto [t, ec] = write(owner);
    REQUIRE_FALSE(ec);
    newest = t;
  }
  // Restore: stop, replace the data directory with the snapshot's, start.
  const auto restore = [&] {
    m.stop();
    hf_test::remove_tree(m.data_dir());
    REQUIRE(hf_test::run_program(
        {etcdctl, "snapshot", "restore", snap, "--name", m.name(), "--data-dir", m.data_dir(),
         "--initial-cluster", m.initial_cluster, "--initial-cluster-token", m.cluster_token,
         "--initial-advertise-peer-urls", m.peer_url()},
        cluster.dir() + "/etcdctl.log"));
    REQUIRE(cluster.start());
  };
  restore();
  auto rev = raw.revision();
  REQUIRE(rev);
  std::printf("etcd restore: revision %llu after the restore, newest token admitted %llu\n",
              static_cast<unsigned long long>(rev->value()),
              static_cast<unsigned long long>(newest.value()));
  CHECK(*rev < newest);  // rewound
  // The store that saw the newer revisions notices the rewind (issue 20 part 3) and raises the
  // revision past the highest it saw before its next grant draws a token: expected, a token above
  // `newest`, admitted by the fence with no operator.
  {
    auto [t, ec] = write("e");
    INFO(raw.last_error_message());
    CHECK_FALSE(ec);
    CHECK(t > newest);
    newest = t;
  }
  // A process that starts after a second restore saw none of them: it is handed a regressed
  // token...
  restore();
  etcd_store fresh(o);
  auto bare = fresh.try_acquire("orders", "g", 3s);
  REQUIRE(bare);
  CHECK(bare->token < newest);
  // ...which the fence refuses: expected stale_token.
  CHECK(gate.admit(bare->token, "g").error() == errc::stale_token);
  REQUIRE(fresh.release("orders", "g", bare->token));
  // Recovery for that process: lift the revision past the newest token any fence admitted.
  REQUIRE(fresh.raise_token_floor(newest));
  auto g = fresh.try_acquire("orders", "f", 3s);
  INFO(fresh.last_error_message());
  REQUIRE(g);
  CHECK(g->token > newest);
  CHECK(gate.admit(g->token, "f"));
  REQUIRE(fresh.release("orders", "f", g->token));
}

TEST_CASE(
    "etcd_store with etcd authentication: a token on first use, a new one when it expires; "
    "refused or missing credentials are errors with etcd's text",
    "[etcd][auth]") {
  const std::string etcdctl = hf_test::etcdctl_binary();
  hf_test::etcd_cluster cluster(1, "etcd-auth");
  cluster[0].extra = {"--auth-token-ttl", "1"};  // simple tokens expire after 1 s idle
  if (etcdctl.empty() || !cluster.start()) {
    if (hf_test::in_ci() || !hf_test::etcd_binary().empty()) FAIL(cluster.why() + " / etcdctl");
    hf_test::loud_skip("cannot start etcd: " + cluster.why());
    return;
  }
  const std::string url = cluster[0].client_url();
  const std::string log = cluster.dir() + "/etcdctl.log";
  REQUIRE(hf_test::run_program({etcdctl, "--endpoints", url, "user", "add", "root:pw"}, log));
  REQUIRE(hf_test::run_program({etcdctl, "--endpoints", url, "user", "grant-role", "root", "root"},
                               log));
  REQUIRE(hf_test::run_program({etcdctl, "--endpoints", url, "auth", "enable"}, log));

  etcd_options o;
  o.endpoints = cluster.endpoints();
  {
    etcd_store anonymous(o);  // no credentials: refused, with etcd's reason, not retried
    hf_test::check_fails_fast(anonymous, errc::permission_denied);
    CHECK(anonymous.last_error_message().find("user name is empty") != std::string::npos);
  }
  {
    etcd_options wrong = o;
    wrong.username = "root";
    wrong.password = "nope";
    etcd_store s(wrong);
    hf_test::check_fails_fast(s, errc::permission_denied);
    CHECK(s.last_error_message().find("authentication failed") != std::string::npos);
  }
  {
    // A user with no role: authenticated, but etcd refuses the key (gRPC PermissionDenied).
    REQUIRE(hf_test::run_program(
        {etcdctl, "--endpoints", url, "--user", "root:pw", "user", "add", "norole:pw"}, log));
    etcd_options limited = o;
    limited.username = "norole";
    limited.password = "pw";
    etcd_store s(limited);
    hf_test::check_fails_fast(s, errc::permission_denied);
    CHECK(s.last_error_message().find("permission denied") != std::string::npos);
  }
  o.username = "root";
  o.password = "pw";
  etcd_store s(o);
  auto g = s.try_acquire("k", "a", 3s);
  INFO(s.last_error_message());
  REQUIRE(g);
  std::this_thread::sleep_for(2500ms);  // the token expires; the lease (3 s) does not
  auto r = s.renew("k", "a", g->token, 3s);
  INFO(s.last_error_message());
  REQUIRE(r);
  auto rec = s.inspect("k");
  REQUIRE(rec);
  REQUIRE(rec->has_value());
  CHECK((*rec)->owner == "a");
  REQUIRE(s.release("k", "a", g->token));
  holdfast::etcd_fence f(o);
  REQUIRE(f.write("fence", g->token, "a", "data", "v"));
}

}  // namespace test_etcd_cluster
