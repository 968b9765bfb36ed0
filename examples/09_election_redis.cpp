// SPDX-License-Identifier: MIT
// examples/09_election_redis.cpp - leader election over Redis with three processes: a singleton
// job whose leader is frozen (SIGSTOP) past its TTL while it believes it leads; another process
// takes over with a higher term, and the frozen leader's write, when it wakes, is refused by the
// term (election.hpp: the term is the leadership lease's fencing token).
//
//   bash .ci/example-multiprocess        starts Redis and PostgreSQL, builds and runs 06 and this
//
// Or by hand, with a Redis of your own:  HOLDFAST_REDIS_PORT=6379 ./example_09_election_redis
//
// The story:
//   1. Worker w0 starts alone and campaigns for "nightly-job" (TTL 300 ms, renewed by the
//      election's keepalive). It leads with term T0 and writes its job's output through a fence
//      in Redis (redis_fence: admit the term and append to the output list, in one script). On
//      its third write it checks is_leader() - true - and is frozen by SIGSTOP before it writes:
//      a GC pause, a swapped-out process, a stopped VM. Its keepalive thread freezes with it.
//   2. The parent starts w1 and w2, which campaign. Redis expires w0's lease 300 ms after its
//      last renewal; one of them leads with a higher term (on_started_leading) and writes. The
//      parent watches without campaigning (election::next_leader, woken by Redis notifications).
//   3. Once the fence holds a newer term, the parent continues w0 (SIGCONT). w0 writes with T0:
//      the fence refuses it (stale_token). w0's keepalive finds the lease gone and tells it
//      (on_stopped_leading), and w0 stops.
//   4. Each of w1 and w2 leads once, makes its writes and resigns; the other takes over.
//   5. The parent checks the output: every write in term order, T0's refused write absent, and
//      the terms of the three leaderships strictly increasing.
// Exit status 0 iff all of that holds; 77 (skip) if no Redis is configured, unless
// HOLDFAST_REQUIRE_SERVERS or CI is set, which makes that a failure.
#include <hiredis/hiredis.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "holdfast/election.hpp"
#include "holdfast/stores/redis.hpp"

namespace {

using namespace std::chrono_literals;

constexpr auto kTtl = 300ms;
constexpr int kWritesPerLeadership = 5;

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
  if constexpr (sizeof...(Args) == 0) {  // a plain message: never a format string
    n += std::snprintf(line + n, sizeof line - static_cast<std::size_t>(n), "%s", fmt);
  } else {
    n += std::snprintf(line + n, sizeof line - static_cast<std::size_t>(n), fmt, args...);
  }
  if (n > static_cast<int>(sizeof line) - 2) n = static_cast<int>(sizeof line) - 2;
  line[n++] = '\n';
  (void)!::write(1, line, static_cast<std::size_t>(n));
}

struct config {
  holdfast::redis_options redis;
  std::string fence_key;
  std::string output_key;
};

unsigned long long u(holdfast::fencing_token t) {
  return static_cast<unsigned long long>(t.value());
}

// A worker process: campaigns, leads once (kWritesPerLeadership fenced writes), resigns. The
// victim freezes itself once, after is_leader() said yes and before it writes. Exit status 0 if
// all went as the story says.
int worker(const config& cfg, int id, bool victim) {
  holdfast::redis_store store(cfg.redis);
  holdfast::redis_fence fence(cfg.redis);
  const std::string me = "w" + std::to_string(id);
  std::atomic<bool> stopped{false};
  holdfast::election_options<> o;
  o.label = me + "-pid" + std::to_string(::getpid());
  o.acquire.backoff.initial = 2ms;
  o.acquire.backoff.max_delay = 40ms;
  o.on_started_leading = [&](holdfast::fencing_token term) {
    say("%s: started leading, term %llu", me.c_str(), u(term));
  };
  o.on_stopped_leading = [&](holdfast::loss_cause why) {
    say("%s: stopped leading (%s)", me.c_str(), holdfast::to_string(why));
    stopped = true;
  };
  holdfast::election<holdfast::redis_store> job(store, "nightly-job", kTtl, o);

  auto term = job.campaign(30s);
  if (!term) {
    say("%s: campaign failed: %s (%s)", me.c_str(), term.error().message().c_str(),
        store.last_error_message().c_str());
    return 1;
  }
  int refused = 0;
  for (int n = 1; n <= kWritesPerLeadership; ++n) {
    if (!job.is_leader()) break;  // check, then act: the textbook pattern that pauses break
    if (victim && n == 3) {
      say("%s: is_leader() == true with term %llu; about to write... (SIGSTOP)", me.c_str(),
          u(*term));
      ::raise(SIGSTOP);  // frozen here until the parent sends SIGCONT
      say("%s: continued (SIGCONT); it already checked, so it writes with term %llu", me.c_str(),
          u(*term));
    }
    const std::string entry = me + "#" + std::to_string(term->value());
    auto w = fence.execute(cfg.fence_key, *term, job.owner(), {"RPUSH", cfg.output_key, entry});
    if (w) {
      say("%s: write %d with term %llu admitted", me.c_str(), n, u(*term));
    } else if (w.error() == holdfast::errc::stale_token) {
      ++refused;
      say("%s: write with term %llu REFUSED by the fence: a newer term has written", me.c_str(),
          u(*term));
      break;
    } else {
      say("%s: write failed: %s (%s)", me.c_str(), w.error().message().c_str(),
          fence.last_error_message().c_str());
      return 1;
    }
    std::this_thread::sleep_for(20ms);  // the job's work between writes
  }
  if (victim) {
    // Told by the keepalive (its renewal was refused), or noticed by the next is_leader().
    const auto limit = std::chrono::steady_clock::now() + 5s;
    while (!stopped && job.is_leader() && std::chrono::steady_clock::now() < limit) {
      std::this_thread::sleep_for(5ms);
    }
  }
  const bool told_or_noticed = stopped || !job.is_leader();
  (void)job.resign();
  if (victim) return refused == 1 && told_or_noticed ? 0 : 1;
  return refused == 0 ? 0 : 1;
}

}  // namespace

int main() {
  since_start();
  const char* port = std::getenv("HOLDFAST_REDIS_PORT");
  if (port == nullptr) {
    std::fprintf(stderr,
                 "example 09 needs Redis: set HOLDFAST_REDIS_PORT, or run "
                 "`bash .ci/example-multiprocess`, which starts one.\n");
    return required() ? 1 : 77;
  }
  config cfg;
  cfg.redis.port = std::atoi(port);
  if (const char* host = std::getenv("HOLDFAST_REDIS_HOST")) cfg.redis.host = host;
  if (const char* pw = std::getenv("HOLDFAST_REDIS_PASSWORD")) cfg.redis.password = pw;
  // Keys of this run only, so runs never see each other's leases, fences or output.
  const std::string tag = "{holdfast-example09-" + std::to_string(::getpid()) + "}";
  cfg.redis.key_prefix = tag + ":lease:";
  cfg.redis.counter_key = tag + ":token";
  cfg.redis.wait_prefix = tag + ":wait:";
  cfg.fence_key = tag + ":job:fence";
  cfg.output_key = tag + ":job:output";

  std::vector<pid_t> pids;
  auto spawn = [&](int id, bool victim) {
    const pid_t pid = ::fork();
    if (pid == 0) ::_exit(worker(cfg, id, victim));
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

  // The parent observes the election without campaigning.
  holdfast::redis_store observer_store(cfg.redis);
  holdfast::election_observer_options<> oo;
  oo.observe_interval = 5ms;
  holdfast::election_observer<holdfast::redis_store> observer(observer_store, "nightly-job", oo);

  // 1. w0 alone: it leads and freezes itself on its third write.
  const pid_t victim = spawn(0, true);
  int status = 0;
  if (::waitpid(victim, &status, WUNTRACED) != victim || !WIFSTOPPED(status)) {
    return give_up("w0 did not stop as planned");
  }
  auto first = observer.leader();
  if (!first || !*first) return give_up("no leader while w0 is frozen holding the lease");
  const holdfast::leader_info frozen = **first;
  say("parent: w0 is frozen; the store still names %s (term %llu) leader; starting w1, w2",
      frozen.label.c_str(), u(frozen.term));

  // 2. w1 and w2 campaign; one takes over once Redis has expired w0's lease.
  spawn(1, false);
  spawn(2, false);
  std::optional<holdfast::leader_info> known = frozen;
  std::vector<holdfast::fencing_token> terms{frozen.term};
  holdfast::redis_fence fence(cfg.redis);
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  for (;;) {
    if (std::chrono::steady_clock::now() > deadline) return give_up("no takeover in 30 s");
    auto next = observer.next_leader(known, 1s);
    if (next && *next && (**next).term > terms.back()) {
      say("parent: new leader %s with term %llu > %llu", (**next).label.c_str(), u((**next).term),
          u(terms.back()));
      terms.push_back((**next).term);
    }
    if (next) known = *next;
    auto newest = fence.newest(cfg.fence_key);
    if (newest && *newest > frozen.term) break;
  }
  say("parent: the fence has admitted a newer term; continuing w0 (SIGCONT)");
  ::kill(victim, SIGCONT);

  // 3-4. Everyone finishes; the parent keeps noting new terms meanwhile.
  bool ok = true;
  std::vector<pid_t> waiting = pids;
  while (!waiting.empty()) {
    auto next = observer.next_leader(known, 50ms);
    if (next) {
      if (*next && (**next).term > terms.back()) {
        say("parent: new leader %s with term %llu", (**next).label.c_str(), u((**next).term));
        terms.push_back((**next).term);
      }
      known = *next;
    }
    for (auto it = waiting.begin(); it != waiting.end();) {
      const pid_t r = ::waitpid(*it, &status, WNOHANG);
      if (r == 0) {
        ++it;
        continue;
      }
      if (r != *it || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        say("parent: worker pid %d did not finish as told", static_cast<int>(*it));
        ok = false;
      }
      it = waiting.erase(it);
    }
    if (std::chrono::steady_clock::now() > deadline) return give_up("workers did not finish");
  }

  // 5. The output must be in term order, without the frozen leader's refused write.
  redisContext* rc = redisConnect(cfg.redis.host.c_str(), cfg.redis.port);
  if (rc == nullptr || rc->err != 0) return give_up("cannot read the output");
  if (!cfg.redis.password.empty()) {
    freeReplyObject(redisCommand(rc, "AUTH %s", cfg.redis.password.c_str()));
  }
  auto* out = static_cast<redisReply*>(
      redisCommand(rc, "LRANGE %b 0 -1", cfg.output_key.data(), cfg.output_key.size()));
  std::vector<std::string> entries;
  if (out != nullptr && out->type == REDIS_REPLY_ARRAY) {
    for (std::size_t i = 0; i < out->elements; ++i) {
      entries.emplace_back(out->element[i]->str, out->element[i]->len);
    }
  }
  freeReplyObject(out);
  std::printf("\noutput (worker#term, in order):");
  std::uint64_t previous = 0;
  bool ordered = true;
  int frozen_writes = 0;
  std::vector<std::uint64_t> leaderships;
  for (const std::string& e : entries) {
    std::printf(" %s", e.c_str());
    const std::uint64_t t = std::strtoull(e.c_str() + e.find('#') + 1, nullptr, 10);
    ordered = ordered && previous <= t;
    if (t != previous) leaderships.push_back(t);
    previous = t;
    if (t == frozen.term.value()) ++frozen_writes;
  }
  std::printf("\n");
  // w0 wrote twice before it froze; its third write was refused. w1 and w2 wrote in full.
  const bool exact = frozen_writes == 2 &&
                     static_cast<int>(entries.size()) == 2 + 2 * kWritesPerLeadership &&
                     leaderships.size() == 3;
  ok = ok && ordered && exact;
  std::printf("terms in order: %s; three leaderships, the frozen one's refused write absent: %s\n",
              ordered ? "yes" : "NO", exact ? "yes" : "NO");
  for (const std::string& k : {cfg.output_key, cfg.fence_key, cfg.redis.counter_key}) {
    freeReplyObject(redisCommand(rc, "DEL %b", k.data(), k.size()));
  }
  redisFree(rc);
  std::printf("%s\n", ok ? "OK: the deposed leader's write was refused by its term" : "FAILED");
  return ok ? 0 : 1;
}
