// SPDX-License-Identifier: MIT
// tests/support/failover_load.hpp - multi-process fenced workloads while a store fails over
// (issue #20 part 5), shared by tests/unit/test_failover_load_redis.cpp and _postgres.cpp.
//
// The parent test starts K worker PROCESSES: each re-executes the test binary (/proc/self/exe)
// with the name of a hidden test case, which reads its settings from the file named by
// HOLDFAST_FAILOVER_WORKER and runs run_worker(): blocking acquire -> fenced write -> a pause
// (now and then longer than the TTL, as a holder stalled by a GC pause or a swap) -> a second
// fenced write -> release, until the parent creates the stop file. The fence lives on a server
// that does not fail over with the lease store; each admitted write appends "<token> <owner>" to
// a log there IN THE SAME atomic step (a Redis script, one SQL statement), so that log is the
// ground truth of what the resource admitted, in admission order. Every worker writes what it
// was told to a file of its own (one write() per line): grants with their validity, each
// write's outcome, each release, each failed acquire. Times are CLOCK_MONOTONIC (steady_clock),
// which all processes of one machine share.
//
// check() then decides, from the fence's log and the workers' files:
//   S1       the fence admitted tokens in non-decreasing order, and each token for one owner
//            only (never two holders under one token); every admitted write came from a holder
//            the store granted that token to; every write a worker was told was admitted is in
//            the log.
//   lost     two holders believed at one instant that they held the key (each told of its
//            grant, neither validity ended nor release asked): the store lost the one with the
//            lower token (check_lost_grants says why). With acknowledgement (wait_replicas >= 1,
//            synchronous_commit on) no such grant may be lost; without, they are counted.
//   liveness the first admitted write under a token of the store's next life (> 2^32: the
//            raise of issue #20 part 3), counted from the fault; no operator acts.
#ifndef HOLDFAST_TESTS_SUPPORT_FAILOVER_LOAD_HPP
#define HOLDFAST_TESTS_SUPPORT_FAILOVER_LOAD_HPP

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/lease.hpp"
#include "real_servers.hpp"

namespace failover_load {

using ns = std::int64_t;
/// Tokens of a store's next life are raised past this (2^32; stores/redis.hpp, postgres.hpp).
constexpr std::uint64_t life_gap = std::uint64_t{1} << 32;

inline ns now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// A worker's settings: "name value" lines (the value is the rest of the line).
class settings {
 public:
  settings() = default;
  explicit settings(const std::string& text) {
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
      const std::size_t sp = line.find(' ');
      if (sp != std::string::npos) values_[line.substr(0, sp)] = line.substr(sp + 1);
    }
  }
  void set(const std::string& name, const std::string& value) { values_[name] = value; }
  void set(const std::string& name, long long value) { values_[name] = std::to_string(value); }
  [[nodiscard]] std::string get(const std::string& name) const {
    auto it = values_.find(name);
    return it == values_.end() ? std::string() : it->second;
  }
  [[nodiscard]] long long num(const std::string& name) const {
    return std::atoll(get(name).c_str());
  }
  [[nodiscard]] std::string text() const {
    std::string out;
    for (const auto& [k, v] : values_) out += k + " " + v + "\n";
    return out;
  }

 private:
  std::map<std::string, std::string> values_;
};

/// The settings of the worker this process is, or nullopt when it is no worker.
inline std::optional<settings> worker_settings() {
  std::optional<std::string> path = hf_test::env("HOLDFAST_FAILOVER_WORKER");
  if (!path) return std::nullopt;
  return settings(hf_test::read_file(*path));
}

/// A worker's record file: one write() per line, so a worker killed mid-run leaves whole lines.
class record_file {
 public:
  explicit record_file(const std::string& path)
      : fd_(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644)) {}
  record_file(const record_file&) = delete;
  record_file& operator=(const record_file&) = delete;
  ~record_file() {
    if (fd_ >= 0) ::close(fd_);
  }
  void line(const std::string& s) {
    const std::string l = s + "\n";
    if (fd_ >= 0 && ::write(fd_, l.data(), l.size()) < 0) fd_ = -1;
  }

 private:
  int fd_;
};

inline std::string outcome(std::error_code ec) {
  if (!ec) return "ok";
  if (ec.category() == holdfast::error_category()) {
    if (const char* name = holdfast::to_string(static_cast<holdfast::errc>(ec.value()))) {
      return name;
    }
  }
  return "error:" + std::to_string(ec.value());
}

template <class TimePoint>
ns ns_of(TimePoint tp) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(tp.time_since_epoch()).count();
}

/// The loop of one worker process. `fence(token, owner, tag)` is the fenced write (returns
/// result<void>); records go to the file `s.get("records")`. Runs until the stop file exists or
/// `hard_stop_ns` passes.
template <class Store, class Fence>
void run_worker(Store& store, Fence&& fence, const settings& s) {
  using namespace std::chrono;
  record_file out(s.get("records"));
  const std::string key = s.get("key"), stop = s.get("stop_file");
  const milliseconds ttl(s.num("ttl_ms"));
  const ns hard_stop = s.num("hard_stop_ns");
  const long long id = s.num("id");
  std::mt19937_64 rng(std::random_device{}() ^ static_cast<std::uint64_t>(id));
  holdfast::acquire_options<> opts;
  opts.label = "w" + std::to_string(id);
  opts.backoff.max_delay = milliseconds(200);  // a failover is seconds: ask often
  for (long long i = 0; ::access(stop.c_str(), F_OK) != 0 && now_ns() < hard_stop; ++i) {
    auto l = holdfast::acquire(store, key, ttl, milliseconds(1500), opts);
    const ns told = now_ns();
    if (!l) {
      out.line("F " + std::to_string(told) + " " + outcome(l.error()));
      std::this_thread::sleep_for(milliseconds(20));
      continue;
    }
    const std::string token = std::to_string(l->token().value());
    out.line("G " + token + " " + l->owner() + " " + std::to_string(ns_of(l->acquired_at())) + " " +
             std::to_string(told) + " " + std::to_string(ns_of(l->valid_until())));
    for (int n = 0; n < 2; ++n) {
      const std::string tag =
          std::to_string(id) + "/" + std::to_string(i) + "/" + std::to_string(n);
      auto w = fence(l->token(), l->owner(), tag);
      out.line("W " + token + " " + l->owner() + " " + std::to_string(now_ns()) + " " +
               outcome(w ? std::error_code() : w.error()));
      if (n == 0) {  // one hold in 16 outlasts the TTL: the holder's second write comes late
        const bool stall = rng() % 16 == 0;
        std::this_thread::sleep_for(stall ? ttl + ttl / 4 : milliseconds(15));
      }
    }
    const ns release_sent = now_ns();
    auto r = l->release();
    out.line("X " + token + " " + l->owner() + " " + std::to_string(release_sent) + " " +
             outcome(r ? std::error_code() : r.error()));
  }
}

/// What the workers were told (parsed from their record files).
struct grant_told {
  int worker = 0;
  bool acked = false;  // the worker's store reports only acknowledged grants
  std::uint64_t token = 0;
  std::string owner;
  ns asked = 0, told = 0, valid_until = 0, release_sent = 0;  // release_sent 0: never
};
struct write_told {
  int worker = 0;
  std::uint64_t token = 0;
  std::string owner;
  ns at = 0;
  std::string outcome;
};
struct records {
  std::vector<grant_told> grants;
  std::vector<write_told> writes;
  std::map<std::string, int> acquire_failures;  // by errc name
};

/// Reads the record files of workers `files[i]`, `acked[i]` telling whether worker i asked for
/// acknowledgement.
inline records read_records(const std::vector<std::string>& files, const std::vector<bool>& acked) {
  records r;
  for (std::size_t w = 0; w < files.size(); ++w) {
    std::istringstream in(hf_test::read_file(files[w]));
    std::string line;
    std::map<std::string, std::size_t> by_owner;  // owner -> index in r.grants
    while (std::getline(in, line)) {
      std::istringstream f(line);
      std::string kind;
      f >> kind;
      if (kind == "G") {
        grant_told g;
        g.worker = static_cast<int>(w);
        g.acked = acked[w];
        f >> g.token >> g.owner >> g.asked >> g.told >> g.valid_until;
        by_owner[g.owner] = r.grants.size();
        r.grants.push_back(g);
      } else if (kind == "W") {
        write_told x;
        x.worker = static_cast<int>(w);
        f >> x.token >> x.owner >> x.at >> x.outcome;
        r.writes.push_back(x);
      } else if (kind == "X") {
        std::uint64_t token = 0;
        std::string owner;
        ns at = 0;
        f >> token >> owner >> at;
        auto it = by_owner.find(owner);
        if (it != by_owner.end()) r.grants[it->second].release_sent = at;
      } else if (kind == "F") {
        ns at = 0;
        std::string what;
        f >> at >> what;
        ++r.acquire_failures[what];
      }
    }
  }
  return r;
}

/// One entry of the fence's own log: a write it admitted, in admission order.
struct admitted {
  std::uint64_t token = 0;
  std::string owner;
};

/// What check() found.
struct verdict {
  std::vector<std::string> violations;  // S1, or a lost acknowledged grant: the test fails
  std::size_t grants = 0, grants_new_life = 0, admitted = 0;
  std::map<std::string, int> write_outcomes;     // by outcome name, as the workers were told
  std::size_t reissued_tokens = 0;               // tokens the store told two owners
  std::size_t lost_acked = 0, lost_unacked = 0;  // distinct grants lost (check_lost_grants)
  std::size_t admitted_unreported = 0;           // in the fence's log, the worker's reply lost
  std::optional<double> liveness_s;              // fault -> first admitted write of the next life
  std::uint64_t newest_before_fault = 0, first_after = 0;
};

inline void check_fence_log(const std::vector<admitted>& log, const records& r, verdict& v) {
  std::map<std::uint64_t, std::string> owner_of;
  std::set<std::pair<std::uint64_t, std::string>> granted;
  for (const grant_told& g : r.grants) granted.insert({g.token, g.owner});
  std::uint64_t newest = 0;
  for (std::size_t i = 0; i < log.size(); ++i) {
    const admitted& a = log[i];
    const std::string at = "fence log entry " + std::to_string(i) + " (token " +
                           std::to_string(a.token) + ", owner " + a.owner + "): ";
    if (a.token < newest) {
      v.violations.push_back(at + "admitted after the newer " + std::to_string(newest));
    }
    newest = std::max(newest, a.token);
    auto [it, fresh] = owner_of.emplace(a.token, a.owner);
    if (!fresh && it->second != a.owner) {
      v.violations.push_back(at + "a second holder under one token (first: " + it->second + ")");
    }
    if (granted.count({a.token, a.owner}) == 0) {
      v.violations.push_back(at + "no worker was granted this token");
    }
  }
  std::map<std::pair<std::uint64_t, std::string>, long> in_log, told_ok;
  for (const admitted& a : log) ++in_log[{a.token, a.owner}];
  for (const write_told& w : r.writes) {
    if (w.outcome == "ok") ++told_ok[{w.token, w.owner}];
  }
  for (const auto& [k, n] : told_ok) {
    const long logged = in_log.count(k) != 0 ? in_log[k] : 0;
    if (logged < n) {
      v.violations.push_back("token " + std::to_string(k.first) + " of " + k.second + ": " +
                             std::to_string(n) + " writes told admitted, " +
                             std::to_string(logged) + " in the fence's log");
    }
  }
  long told_total = 0;
  for (const auto& [k, n] : told_ok) told_total += n;
  v.admitted_unreported =
      log.size() > static_cast<std::size_t>(told_total) ? log.size() - told_total : 0;
}

/// Grants whose holders both believed they held the key at one instant: the store lost one of
/// them, the one with the lower token. Within one server's history a higher token was applied
/// later (the counter's order), over a grant that should still have been live; across lives the
/// higher token is the next life's (raised by 2^32), which is the history that survives: a lower
/// token granted while it was held came from a server about to be demoted (an old primary
/// frozen or not yet told), and one granted before it was missing on the promoted replica.
/// Either way the lower-token grant is gone from what survives. Equal tokens (a re-issue): the
/// one told first.
inline void check_lost_grants(const records& r, verdict& v) {
  std::map<std::uint64_t, std::set<std::string>> owners;
  for (const grant_told& g : r.grants) owners[g.token].insert(g.owner);
  for (const auto& [t, o] : owners) v.reissued_tokens += o.size() > 1 ? 1 : 0;
  auto held_until = [](const grant_told& g) {
    return g.release_sent == 0 ? g.valid_until : std::min(g.valid_until, g.release_sent);
  };
  std::set<std::size_t> lost;
  for (std::size_t i = 0; i < r.grants.size(); ++i) {
    for (std::size_t j = i + 1; j < r.grants.size(); ++j) {
      const grant_told& a = r.grants[i];
      const grant_told& b = r.grants[j];
      if (a.owner == b.owner ||
          std::max(a.told, b.told) >= std::min(held_until(a), held_until(b))) {
        continue;
      }
      const bool a_lost = a.token != b.token ? a.token < b.token : a.told < b.told;
      const grant_told& gone = a_lost ? a : b;
      const grant_told& over = a_lost ? b : a;
      if (!lost.insert(a_lost ? i : j).second) continue;
      if (!gone.acked) {
        ++v.lost_unacked;
        continue;
      }
      ++v.lost_acked;
      v.violations.push_back("acknowledged grant " + std::to_string(gone.token) + " (" +
                             gone.owner + ") lost: " + std::to_string(over.token) + " (" +
                             over.owner + ") was told while both held the key");
    }
  }
}

/// Checks a run whose fault was injected at `fault` (ns, steady clock).
inline verdict check(const std::vector<admitted>& log, const records& r, ns fault) {
  verdict v;
  v.grants = r.grants.size();
  v.admitted = log.size();
  for (const grant_told& g : r.grants) {
    if (g.token > life_gap) ++v.grants_new_life;
    if (g.told < fault) v.newest_before_fault = std::max(v.newest_before_fault, g.token);
  }
  for (const write_told& w : r.writes) {
    ++v.write_outcomes[w.outcome];
    if (w.outcome == "ok" && w.token > life_gap && w.at > fault &&
        (!v.liveness_s || (w.at - fault) / 1e9 < *v.liveness_s)) {
      v.liveness_s = static_cast<double>(w.at - fault) / 1e9;
      v.first_after = w.token;
    }
  }
  check_fence_log(log, r, v);
  check_lost_grants(r, v);
  return v;
}

/// One line for the CI log: what the run showed.
inline std::string summary(const std::string& name, const verdict& v, const records& r,
                           double seconds) {
  std::ostringstream o;
  o << "failover load [" << name << "]: " << seconds << " s; " << v.grants << " grants ("
    << v.grants_new_life << " of the next life), " << v.admitted << " writes admitted by the fence";
  o << "; writes told:";
  for (const auto& [k, n] : v.write_outcomes) o << " " << k << "=" << n;
  o << "; acquire failures:";
  for (const auto& [k, n] : r.acquire_failures) o << " " << k << "=" << n;
  o << "; tokens told to two owners " << v.reissued_tokens << "; lost grants: acknowledged "
    << v.lost_acked << ", unacknowledged " << v.lost_unacked << "; admitted but unreported "
    << v.admitted_unreported << "; newest token before the fault " << v.newest_before_fault
    << "; liveness ";
  if (v.liveness_s) {
    o << *v.liveness_s << " s after the fault (first token " << v.first_after << ")";
  } else {
    o << "never";
  }
  return o.str();
}

/// The worker processes of one run, and where their records go.
class workers {
 public:
  /// `dir`: a scratch directory of the test's. Each worker i gets settings `base` plus id,
  /// records, stop_file, hard_stop_ns, and runs `exe_test_name` (a hidden test case of this
  /// executable).
  workers(std::string dir, std::string test_name)
      : dir_(std::move(dir)), name_(std::move(test_name)) {}
  workers(const workers&) = delete;
  workers& operator=(const workers&) = delete;
  ~workers() { stop(); }

  void start(int id, settings s, bool acked) {
    const std::string base = dir_ + "/worker-" + std::to_string(id);
    s.set("id", id);
    s.set("records", base + ".records");
    s.set("stop_file", dir_ + "/stop");
    s.set("hard_stop_ns", now_ns() + 120LL * 1000000000LL);
    if (FILE* f = std::fopen((base + ".settings").c_str(), "w")) {
      std::fputs(s.text().c_str(), f);
      std::fclose(f);
    }
    ::setenv("HOLDFAST_FAILOVER_WORKER", (base + ".settings").c_str(), 1);
    pids_.push_back(hf_test::spawn({"/proc/self/exe", name_}, base + ".out"));
    ::unsetenv("HOLDFAST_FAILOVER_WORKER");
    files_.push_back(base + ".records");
    acked_.push_back(acked);
  }

  /// Creates the stop file and waits for every worker (bounded: 15 s, then SIGKILL).
  void stop() {
    if (FILE* f = std::fopen((dir_ + "/stop").c_str(), "w")) std::fclose(f);
    for (pid_t& p : pids_) {
      if (p <= 0) continue;
      const int status = hf_test::wait_exit(p, std::chrono::seconds(15));
      if (status == -1) {
        ::kill(-p, SIGKILL);
        hf_test::wait_exit(p, std::chrono::seconds(5));
      } else if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        ++clean_exits_;
      }
      p = -1;
    }
  }

  /// Workers that exited by themselves with status 0 (no crash, no sanitizer report, no Catch2
  /// failure), once stop() returned.
  [[nodiscard]] int clean_exits() const { return clean_exits_; }

  [[nodiscard]] records read() const { return read_records(files_, acked_); }
  /// The workers' own output (a crash, a sanitizer report), for a failure message.
  [[nodiscard]] std::string output() const {
    std::string out;
    for (std::size_t i = 0; i < files_.size(); ++i) {
      const std::string o = hf_test::read_file(dir_ + "/worker-" + std::to_string(i) + ".out");
      if (!o.empty()) out += "worker " + std::to_string(i) + ":\n" + o.substr(0, 4000) + "\n";
    }
    return out;
  }

 private:
  std::string dir_, name_;
  std::vector<pid_t> pids_;
  std::vector<std::string> files_;
  std::vector<bool> acked_;
  int clean_exits_ = 0;
};

/// The expectations every load case shares (see the file's comment): no violation, every worker
/// exited cleanly, the next life's tokens got through the fence (`live`: seen by the parent's
/// poll) within 30 s of the fault, and no token was told to two owners (the next life's tokens
/// are raised past the old ones).
inline void expect(const verdict& v, const workers& w, bool live) {
  for (const std::string& violation : v.violations) FAIL_CHECK(violation);
  CHECK(w.clean_exits() == 4);
  CHECK(live);
  REQUIRE(v.liveness_s);
  CHECK(*v.liveness_s < 30.0);
  CHECK(v.newest_before_fault > 0);
  CHECK(v.newest_before_fault < life_gap);
  CHECK(v.reissued_tokens == 0);
}

}  // namespace failover_load

#endif  // HOLDFAST_TESTS_SUPPORT_FAILOVER_LOAD_HPP
