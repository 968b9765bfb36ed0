// SPDX-License-Identifier: MIT
// examples/06_multiprocess_redis_postgres.cpp - several OS processes share a lease in Redis and
// write to one PostgreSQL row under it; one of them is frozen (SIGSTOP) past its TTL while it
// believes it holds the lease, and the database refuses its late write by its fencing token.
//
//   bash .ci/example-multiprocess        starts Redis and PostgreSQL, builds and runs this
//
// Or by hand, with servers of your own:
//   HOLDFAST_REDIS_PORT=6379 HOLDFAST_PG_CONNINFO='dbname=app'
//   ./example_06_multiprocess_redis_postgres
//
// The story (the README's timeline, with real processes, a real lease store and a real database):
//   1. Worker w0 starts alone, acquires the lease "ledger" in Redis (redis_store, TTL 300 ms, token
//      T0), checks that its lease is valid, and is frozen by SIGSTOP before it writes: a GC pause,
//      a swapped-out process, a VM migration.
//   2. The parent starts w1..w3. They wait on the lease; Redis expires w0's record after 300 ms by
//      its own clock and grants the lease to one of them with a greater token. Each worker makes
//      five deposits into the row `ledger`, each a fenced UPDATE (postgres_fenced_update): the
//      row's data and its fence column change in one statement, only if the fence is not newer.
//   3. Once a newer token has been written, the parent continues w0 (SIGCONT). w0 goes on where it
//      stopped and writes with T0: PostgreSQL refuses it (0 rows: stale_token). w0 notices, takes
//      a new lease and makes its own five deposits.
//   4. The parent checks the row: value == 20 (4 workers x 5), the history lists exactly the 20
//      admitted deposits in token order, and T0 appears nowhere.
// Exit status 0 iff all of that holds. Exit 77 (skip) if no servers are configured, unless
// HOLDFAST_REQUIRE_SERVERS or CI is set, which makes that a failure.
#include <hiredis/hiredis.h>
#include <libpq-fe.h>
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
#include "holdfast/stores/postgres.hpp"
#include "holdfast/stores/redis.hpp"

namespace {

using namespace std::chrono_literals;

constexpr int kWorkers = 4;
constexpr int kDepositsEach = 5;
constexpr auto kTtl = 300ms;

struct config {
  holdfast::redis_options redis;
  std::string conninfo;
  std::string table;
};

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

PGconn* connect_pg(const std::string& conninfo) {
  PGconn* c = PQconnectdb(conninfo.c_str());
  if (PQstatus(c) != CONNECTION_OK) {
    say("cannot connect to PostgreSQL: %s", PQerrorMessage(c));
    PQfinish(c);
    return nullptr;
  }
  return c;
}

bool exec(PGconn* c, const std::string& sql) {
  PGresult* r = PQexec(c, sql.c_str());
  const bool ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;
  if (!ok) say("SQL failed: %s: %s", sql.c_str(), PQresultErrorMessage(r));
  PQclear(r);
  return ok;
}

// A worker process. Makes kDepositsEach admitted deposits, each under its own grant of the lease.
// The victim freezes itself (SIGSTOP) once, after it acquired and checked its lease and before it
// wrote; the parent continues it later. Exit status: 0 if all went as the story says, else 1.
int worker(const config& cfg, int id, bool victim, int report_fd) {
  holdfast::redis_store leases(cfg.redis);
  PGconn* db = connect_pg(cfg.conninfo);
  if (db == nullptr) return 1;
  holdfast::postgres_fence_options fo;
  fo.table = cfg.table;
  auto deposit =
      holdfast::postgres_fenced_update::make(fo, "value = value + 1, history = history || $4");
  if (!deposit) return 1;

  holdfast::acquire_options<> opts;
  opts.owner = "w" + std::to_string(id) + "-" + std::to_string(::getpid());
  opts.backoff.initial = 2ms;
  opts.backoff.max_delay = 40ms;
  int admitted = 0;
  int stale = 0;
  bool froze = false;
  while (admitted < kDepositsEach) {
    auto lease = holdfast::acquire(leases, "ledger", kTtl, 20s, opts);
    if (!lease) {
      say("w%d: acquire failed: %s (%s)", id, lease.error().message().c_str(),
          leases.last_error_message().c_str());
      return 1;
    }
    if (!lease->valid()) continue;  // check, then act: the textbook pattern that pauses break
    const holdfast::fencing_token token = lease->token();
    if (victim && !froze) {
      froze = true;
      say("w%d: holds the lease with token %llu, valid for %lld ms more; about to write... "
          "(SIGSTOP)",
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
    std::string why;
    auto w = deposit->execute(db, token, lease->owner(), "ledger", {entry}, &why);
    if (w) {
      ++admitted;
      say("w%d: deposit with token %llu admitted", id,
          static_cast<unsigned long long>(token.value()));
    } else if (w.error() == holdfast::errc::stale_token) {
      ++stale;
      say("w%d: deposit with token %llu REJECTED by PostgreSQL: %s (the row's fence is newer)", id,
          static_cast<unsigned long long>(token.value()), w.error().message().c_str());
    } else {
      say("w%d: deposit failed: %s (%s)", id, w.error().message().c_str(), why.c_str());
      return 1;
    }
    (void)lease->release();  // not_holder for the victim: Redis expired its record long ago
  }
  PQfinish(db);
  const bool as_told = victim ? stale == 1 : stale == 0;
  return as_told ? 0 : 1;
}

// Reads the row's fence (the newest admitted token), or 0.
std::uint64_t current_fence(PGconn* c, const std::string& table) {
  PGresult* r =
      PQexec(c, ("SELECT coalesce(fence, 0) FROM " + table + " WHERE id = 'ledger'").c_str());
  std::uint64_t v = 0;
  if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1) {
    v = std::strtoull(PQgetvalue(r, 0, 0), nullptr, 10);
  }
  PQclear(r);
  return v;
}

}  // namespace

int main() {
  since_start();
  const char* port = std::getenv("HOLDFAST_REDIS_PORT");
  const char* conninfo = std::getenv("HOLDFAST_PG_CONNINFO");
  if (port == nullptr || conninfo == nullptr) {
    std::fprintf(
        stderr,
        "example 06 needs Redis and PostgreSQL: set HOLDFAST_REDIS_PORT and "
        "HOLDFAST_PG_CONNINFO, or run `bash .ci/example-multiprocess`, which starts both.\n");
    return required() ? 1 : 77;
  }
  config cfg;
  cfg.redis.port = std::atoi(port);
  if (const char* host = std::getenv("HOLDFAST_REDIS_HOST")) cfg.redis.host = host;
  if (const char* pw = std::getenv("HOLDFAST_REDIS_PASSWORD")) cfg.redis.password = pw;
  // Keys and table of this run only, so runs never see each other's leases or rows.
  const std::string run = std::to_string(::getpid());
  cfg.redis.key_prefix = "{holdfast-example-" + run + "}:lease:";
  cfg.redis.counter_key = "{holdfast-example-" + run + "}:token";
  cfg.conninfo = conninfo;
  cfg.table = "holdfast_example_ledger_" + run;

  PGconn* db = connect_pg(cfg.conninfo);
  if (db == nullptr) return 1;
  if (!exec(db, "SET client_min_messages = warning") ||
      !exec(db, "CREATE TABLE " + cfg.table +
                    " (id text PRIMARY KEY, value bigint NOT NULL, history text NOT NULL, "
                    "fence bigint, fence_owner text)") ||
      !exec(db, "INSERT INTO " + cfg.table + " VALUES ('ledger', 0, '', NULL, NULL)")) {
    return 1;
  }
  say("parent: table %s ready; lease \"ledger\" in Redis at port %s, TTL %lld ms",
      cfg.table.c_str(), port, static_cast<long long>(kTtl.count()));

  int report[2];
  if (::pipe(report) != 0) return 1;
  std::vector<pid_t> pids;
  auto spawn = [&](int id, bool victim) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(report[0]);
      // The parent's connection is not the child's: leave it alone (PQfinish would send the
      // server a Terminate over the shared socket and end the parent's session). _exit below
      // closes the descriptor without a word.
      ::_exit(worker(cfg, id, victim, report[1]));
    }
    pids.push_back(pid);
    return pid;
  };
  bool ok = true;
  auto give_up = [&](const char* why) {
    say("parent: %s", why);
    for (pid_t p : pids) {
      ::kill(p, SIGKILL);
      ::waitpid(p, nullptr, 0);
    }
    PQfinish(db);
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

  // 2. The others contend; one gets the lease once Redis has expired w0's record.
  for (int id = 1; id < kWorkers; ++id) spawn(id, false);
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while (current_fence(db, cfg.table) <= victim_token) {
    if (std::chrono::steady_clock::now() > deadline) return give_up("no newer write in 30 s");
    std::this_thread::sleep_for(5ms);
  }
  say("parent: the row's fence is now %llu > %llu; continuing w0 (SIGCONT)",
      static_cast<unsigned long long>(current_fence(db, cfg.table)),
      static_cast<unsigned long long>(victim_token));
  ::kill(victim, SIGCONT);

  // 3. Everyone finishes.
  for (pid_t p : pids) {
    if (::waitpid(p, &status, 0) != p || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      say("parent: worker pid %d did not finish as told", static_cast<int>(p));
      ok = false;
    }
  }

  // 4. The row must be exact.
  PGresult* r = PQexec(
      db, ("SELECT value, history, fence FROM " + cfg.table + " WHERE id = 'ledger'").c_str());
  if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
    PQclear(r);
    return give_up("cannot read the final row");
  }
  const long long value = std::atoll(PQgetvalue(r, 0, 0));
  const std::string history = PQgetvalue(r, 0, 1);
  const std::string fence = PQgetvalue(r, 0, 2);
  PQclear(r);
  std::printf("\nfinal row: id=ledger value=%lld fence=%s\nhistory (worker#token, in order):%s\n",
              value, fence.c_str(), history.c_str());

  int entries = 0;
  std::uint64_t previous = 0;
  bool ordered = true;
  bool victim_token_absent = true;
  for (std::size_t at = history.find('#'); at != std::string::npos;
       at = history.find('#', at + 1)) {
    const std::uint64_t t = std::strtoull(history.c_str() + at + 1, nullptr, 10);
    ordered = ordered && previous <= t;
    previous = t;
    victim_token_absent = victim_token_absent && t != victim_token;
    ++entries;
  }
  const int expected = kWorkers * kDepositsEach;
  ok = ok && value == expected && entries == expected && ordered && victim_token_absent &&
       std::to_string(previous) == fence;
  std::printf(
      "\nvalue %lld == %d: %s; %d history entries: %s; tokens non-decreasing: %s; "
      "frozen token %llu never written: %s\n",
      value, expected, value == expected ? "yes" : "NO", entries,
      entries == expected ? "exact" : "WRONG", ordered ? "yes" : "NO",
      static_cast<unsigned long long>(victim_token), victim_token_absent ? "yes" : "NO");

  exec(db, "DROP TABLE " + cfg.table);
  PQfinish(db);
  if (redisContext* rc = redisConnect(cfg.redis.host.c_str(), cfg.redis.port)) {
    if (rc->err == 0 && !cfg.redis.password.empty()) {
      freeReplyObject(redisCommand(rc, "AUTH %s", cfg.redis.password.c_str()));
    }
    if (rc->err == 0) {  // this run's token counter; the lease key expired or was released
      freeReplyObject(
          redisCommand(rc, "DEL %b", cfg.redis.counter_key.data(), cfg.redis.counter_key.size()));
    }
    redisFree(rc);
  }
  std::printf("%s\n", ok ? "OK: the stale write was rejected by the database and the row is exact"
                         : "FAILED");
  return ok ? 0 : 1;
}
