// SPDX-License-Identifier: MIT
// tests/support/real_servers.hpp - real Redis and PostgreSQL servers for the store tests.
//
// Two ways to get a server:
//   shared   started once by `.ci/servers start` (CI, `bash .ci/test`) and found through
//            environment variables: HOLDFAST_REDIS_PORT (and HOLDFAST_REDIS_HOST), and
//            HOLDFAST_PG_CONNINFO (a libpq connection string).
//   owned    started by the test itself (redis_server / postgres_server below) on 127.0.0.1, an
//            unused port and a temporary directory, for tests that kill -9, stop or restart it.
//
// A server that cannot be had is a FAILURE when CI (or HOLDFAST_REQUIRE_SERVERS, which .ci/servers
// exports) is set, and a loudly printed skip otherwise (a developer without redis-server installed
// can still run the rest). Binaries: HOLDFAST_REDIS_SERVER (default: redis-server on PATH or
// /usr/bin), HOLDFAST_PG_BINDIR (default: the newest /usr/lib/postgresql/*/bin). PostgreSQL refuses
// to run as root, so when the tests run as root its processes run as HOLDFAST_PG_USER (default
// "nobody").
#ifndef HOLDFAST_TESTS_SUPPORT_REAL_SERVERS_HPP
#define HOLDFAST_TESTS_SUPPORT_REAL_SERVERS_HPP

#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace hf_test {

/// True when a missing server must fail the test rather than skip it: in CI (the CI variable is
/// set to anything but "", "0" or "false"), or under `.ci/servers` (HOLDFAST_REQUIRE_SERVERS=1).
inline bool in_ci() {
  for (const char* name : {"CI", "HOLDFAST_REQUIRE_SERVERS"}) {
    const char* v = std::getenv(name);
    if (v == nullptr) continue;
    const std::string s(v);
    if (!s.empty() && s != "0" && s != "false") return true;
  }
  return false;
}

inline std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

/// Prints a skip so that nobody mistakes it for a pass.
inline void loud_skip(const std::string& what) {
  std::fprintf(stderr,
               "\n**********************************************************************\n"
               "** SKIPPED: %s\n"
               "** (set CI=1 to make this a failure; `bash .ci/test` starts the servers)\n"
               "**********************************************************************\n\n",
               what.c_str());
}

/// A random lowercase hex string, to keep keys of concurrent and repeated runs apart.
inline std::string random_tag(std::size_t n = 12) {
  static thread_local std::mt19937_64 gen{std::random_device{}()};
  static constexpr char digits[] = "0123456789abcdef";
  std::string s(n, '0');
  for (char& c : s) c = digits[gen() % 16];
  return s;
}

/// Returns a TCP port on 127.0.0.1 that was free a moment ago (bind to port 0, read, close).
// The lowest port of the kernel's ephemeral range (ip_local_port_range; 32768 if unreadable).
// A client's connect() takes its local port from that range, so a server restarted on such a
// port (a killed leader, a failed-over primary) can find it taken by somebody's connection.
inline int ephemeral_port_floor() {
  int low = 32768;
  int high = 0;
  if (FILE* f = std::fopen("/proc/sys/net/ipv4/ip_local_port_range", "r")) {
    if (std::fscanf(f, "%d %d", &low, &high) != 2) low = 32768;
    std::fclose(f);
  }
  return low;
}

// True iff nothing on 127.0.0.1 holds TCP port `port` (bound, listening or in TIME_WAIT).
inline bool port_is_free(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

// Reserves `port` for this process's lifetime among the test processes of this machine: an
// exclusive flock on /tmp/holdfast-ports/<port>, whose descriptor stays open until the process
// ends (the kernel then drops the lock, so a crashed test leaves nothing held). Why: ctest runs
// several suites at once, each starting servers of its own, and a port is free only until its
// server binds it, and again while that server is down for a restart. Seen in CI: a ZooKeeper
// member killed -9 could not restart because another suite's server had meanwhile been given one
// of its ports (a member's ports are fixed in every member's configuration). False if another
// process holds it, or if the lock cannot be taken at all.
inline bool reserve_port(int port) {
  static const bool dir = ::mkdir("/tmp/holdfast-ports", 01777) == 0 || errno == EEXIST;
  if (!dir) return false;
  const std::string path = "/tmp/holdfast-ports/" + std::to_string(port);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) return false;
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    return false;
  }
  return true;  // fd stays open, and locked, until this process ends
}

/// A TCP port on 127.0.0.1 that nothing holds now, below the ephemeral range (so no client's
/// outgoing connection takes it while its server is down for a restart), and that no other test
/// process of this machine was given (reserve_port), or 0.
inline int free_port() {
  const int high = ephemeral_port_floor();
  const int low = high > 12000 ? high - 10000 : 1024;
  static thread_local std::mt19937 gen(std::random_device{}() ^ static_cast<unsigned>(::getpid()));
  std::uniform_int_distribution<int> pick(low, high - 1);
  for (int i = 0; i < 256 && high > low; ++i) {
    const int port = pick(gen);
    if (port_is_free(port) && reserve_port(port)) return port;
  }
  return 0;
}

/// Removes a directory tree (best effort; test scratch only).
inline void remove_tree(const std::string& path) {
  if (path.empty() || path.rfind("/tmp/holdfast-", 0) != 0) return;  // never anything else
  DIR* d = ::opendir(path.c_str());
  if (d != nullptr) {
    while (dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      const std::string child = path + "/" + name;
      struct stat st {};
      if (::lstat(child.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
        remove_tree(child);
      } else {
        ::unlink(child.c_str());
      }
    }
    ::closedir(d);
  }
  ::rmdir(path.c_str());
}

/// Removes the directories /tmp/holdfast-<tag>-<pid>-XXXXXX (make_temp_dir's) whose process is
/// gone: a test process that ended without its destructors (killed by a timeout, a sanitizer's
/// _exit, a crash) left them, while its servers died with it (spawn: PR_SET_PDEATHSIG). A
/// directory of a process still running (another suite's, at the same time) is never touched.
inline void remove_orphan_dirs(const std::string& tag) {
  const std::string prefix = "holdfast-" + tag + "-";
  DIR* d = ::opendir("/tmp");
  if (d == nullptr) return;
  std::vector<std::string> orphans;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string rest = name.substr(prefix.size());  // <pid>-XXXXXX
    const std::size_t dash = rest.find('-');
    if (dash == 0 || dash == std::string::npos || dash > 9 || rest.size() != dash + 7 ||
        rest.find_first_not_of("0123456789") != dash) {
      continue;  // another tag ("rcluster-cli" for "rcluster"), or an older name without a pid
    }
    const pid_t pid = static_cast<pid_t>(std::atol(rest.substr(0, dash).c_str()));
    if (pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH) orphans.push_back("/tmp/" + name);
  }
  ::closedir(d);
  for (const std::string& dir : orphans) remove_tree(dir);
}

/// Makes a fresh temporary directory (mode 0700), /tmp/holdfast-<tag>-<pid>-XXXXXX, and returns
/// its path, or "" on failure. The owner removes it when its server stops for good (owned_server's
/// destructor); those of a process that ended without that are removed here first
/// (remove_orphan_dirs).
inline std::string make_temp_dir(const char* tag) {
  remove_orphan_dirs(tag);
  std::string tmpl =
      std::string("/tmp/holdfast-") + tag + "-" + std::to_string(::getpid()) + "-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) return {};
  return std::string(buf.data());
}

inline bool is_executable(const std::string& path) {
  return ::access(path.c_str(), X_OK) == 0;
}

/// Finds a program: `override` if given, else the first of `candidates` that is executable, else
/// `name` on PATH. Returns "" if none is found.
inline std::string find_program(const char* override_var, const std::string& name,
                                const std::vector<std::string>& candidates) {
  if (std::optional<std::string> o = env(override_var)) return is_executable(*o) ? *o : "";
  for (const std::string& c : candidates) {
    if (is_executable(c)) return c;
  }
  if (std::optional<std::string> path = env("PATH")) {
    std::size_t start = 0;
    while (start <= path->size()) {
      const std::size_t end = std::min(path->find(':', start), path->size());
      const std::string p = path->substr(start, end - start) + "/" + name;
      if (is_executable(p)) return p;
      start = end + 1;
    }
  }
  return {};
}

/// The unprivileged account PostgreSQL runs as when the tests run as root.
struct run_as {
  bool drop = false;
  uid_t uid = 0;
  gid_t gid = 0;
};

inline run_as unprivileged_user() {
  run_as r;
  if (::geteuid() != 0) return r;
  const std::string name = env("HOLDFAST_PG_USER").value_or("nobody");
  if (const passwd* pw = ::getpwnam(name.c_str())) {
    r.drop = true;
    r.uid = pw->pw_uid;
    r.gid = pw->pw_gid;
  }
  return r;
}

/// Starts `argv` as a child in its own process group (so kill9 reaches every process it forks),
/// with stdout and stderr appended to `log`, optionally as another user, in directory `cwd`.
/// Returns the pid, or -1.
inline pid_t spawn(const std::vector<std::string>& argv, const std::string& log,
                   const run_as& user = {}, const std::string& cwd = "/") {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    ::setpgid(0, 0);
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::close(fd);
    }
    const int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    if (user.drop) {
      if (::setgid(user.gid) != 0 || ::setuid(user.uid) != 0) ::_exit(126);
    }
    // The server dies with the test process, however that ends (a sanitizer's _exit skips our
    // destructors). Set after setuid, which clears it.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(126);
    if (::chdir(cwd.c_str()) != 0) ::_exit(126);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  return pid;
}

/// Waits for `pid` to exit, at most `bound` of real time. Returns its wait status, or -1.
inline int wait_exit(pid_t pid, std::chrono::milliseconds bound) {
  const auto deadline = std::chrono::steady_clock::now() + bound;
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return status;
    if (r < 0) return -1;
    if (std::chrono::steady_clock::now() > deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

/// Runs `argv` to completion (bounded), returns true iff it exited 0.
inline bool run_program(const std::vector<std::string>& argv, const std::string& log,
                        const run_as& user = {}, const std::string& cwd = "/",
                        std::chrono::milliseconds bound = std::chrono::seconds(120)) {
  const pid_t pid = spawn(argv, log, user, cwd);
  if (pid < 0) return false;
  const int status = wait_exit(pid, bound);
  if (status == -1) {
    ::kill(-pid, SIGKILL);
    wait_exit(pid, std::chrono::seconds(5));
    return false;
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/// Polls `ready()` every few milliseconds until it returns true or `bound` of real time passes.
template <class F>
bool wait_until(F ready, std::chrono::milliseconds bound) {
  const auto deadline = std::chrono::steady_clock::now() + bound;
  for (;;) {
    if (ready()) return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

inline std::string read_file(const std::string& path) {
  std::string out;
  if (FILE* f = std::fopen(path.c_str(), "rb")) {
    char buf[4096];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
    std::fclose(f);
  }
  return out;
}

/// Sends `request` to 127.0.0.1:`port` and returns what arrives within ~1 s (for readiness
/// probes that must not depend on a client library).
inline std::string tcp_exchange(int port, const std::string& request) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return {};
  struct timeval tv {};
  tv.tv_sec = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  std::string out;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
          static_cast<ssize_t>(request.size())) {
    char buf[512];
    for (int i = 0; i < 4 && out.find("PONG") == std::string::npos; ++i) {
      const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
      if (n <= 0) break;
      out.append(buf, static_cast<std::size_t>(n));
    }
  }
  ::close(fd);
  return out;
}

/// A server process the test owns: started, stopped, paused, killed -9 and restarted at will.
/// Subclasses say how to start it and how to tell it is ready.
class owned_server {
 public:
  owned_server() = default;
  owned_server(const owned_server&) = delete;
  owned_server& operator=(const owned_server&) = delete;
  virtual ~owned_server() {
    stop();
    remove_tree(dir_);
  }

  /// The port it listens on (fixed for its life, so restarts keep addresses valid).
  [[nodiscard]] int port() const { return port_; }
  [[nodiscard]] const std::string& dir() const { return dir_; }
  [[nodiscard]] bool running() const { return pid_ > 0; }
  /// Why the last start failed, or the server's log tail.
  [[nodiscard]] const std::string& why() const { return why_; }

  /// Kills the whole server with SIGKILL, every process of it at once, and reaps it.
  void kill9() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGSTOP);  // no new children while we collect them
    signal_all(SIGKILL);
    wait_exit(pid_, std::chrono::seconds(10));
    pid_ = -1;
  }
  /// Stops the server cleanly (bounded; SIGKILL if it does not stop in time).
  void stop() {
    if (pid_ <= 0) return;
    signal_all(SIGCONT);
    ::kill(pid_, stop_signal());
    if (wait_exit(pid_, std::chrono::seconds(20)) == -1) {
      signal_all(SIGKILL);
      wait_exit(pid_, std::chrono::seconds(10));
    }
    pid_ = -1;
  }
  /// Freezes every process of the server (SIGSTOP): connections stay open, nothing answers.
  void pause() {
    if (pid_ > 0) signal_all(SIGSTOP);
  }
  /// Undoes pause().
  void resume() {
    if (pid_ > 0) signal_all(SIGCONT);
  }

  /// Sends `sig` to the server and all its descendants. A process group is not enough:
  /// PostgreSQL's backends call setsid(), so they leave the postmaster's group.
  void signal_all(int sig) {
    std::vector<pid_t> all = {pid_};
    for (std::size_t i = 0; i < all.size(); ++i) {
      for (pid_t child : children_of(all[i])) all.push_back(child);
    }
    ::kill(-pid_, sig);
    for (pid_t p : all) ::kill(p, sig);
  }

  /// The processes whose parent is `parent` (from /proc/<pid>/stat).
  static std::vector<pid_t> children_of(pid_t parent) {
    std::vector<pid_t> out;
    DIR* d = ::opendir("/proc");
    if (d == nullptr) return out;
    while (dirent* e = ::readdir(d)) {
      const int pid = std::atoi(e->d_name);
      if (pid <= 0) continue;
      const std::string stat = read_file("/proc/" + std::string(e->d_name) + "/stat");
      const std::size_t close = stat.rfind(')');  // the command name may contain anything
      if (close == std::string::npos || close + 4 > stat.size()) continue;
      // after ")": " <state> <ppid> ..."
      const int ppid = std::atoi(stat.c_str() + close + 4);
      if (ppid == parent) out.push_back(pid);
    }
    ::closedir(d);
    return out;
  }

  /// Starts (or restarts) the server and waits until it serves. Returns false, with why() set,
  /// if it does not within the bound.
  bool start() {
    if (pid_ > 0) return true;
    if (!prepare()) return false;
    pid_ = spawn(command(), dir_ + "/server.log", user(), dir_);
    if (pid_ < 0) {
      why_ = "fork failed";
      return false;
    }
    bool died = false;
    const bool ok = wait_until(
        [&] {
          int status = 0;
          if (::waitpid(pid_, &status, WNOHANG) == pid_) died = true;  // stop polling
          return died || ready();
        },
        std::chrono::seconds(60));
    if (died) {
      pid_ = -1;
      why_ = "server exited at start; log:\n" + read_file(dir_ + "/server.log");
      return false;
    }
    if (!ok) {
      why_ = "server not ready in 60 s; log:\n" + read_file(dir_ + "/server.log");
      kill9();
      return false;
    }
    return true;
  }

 protected:
  virtual bool prepare() = 0;  // create directories etc. (once or per start)
  virtual std::vector<std::string> command() = 0;
  virtual bool ready() = 0;
  virtual run_as user() { return {}; }
  virtual int stop_signal() { return SIGTERM; }

  std::string dir_;
  std::string why_;
  int port_ = 0;
  pid_t pid_ = -1;
};

/// How an owned redis-server runs.
struct redis_server_config {
  bool persistent = false;  ///< appendonly yes + appendfsync (below); else no persistence at all
  std::string password{};   ///< requirepass, when non-empty
  std::string appendfsync = "always";  ///< with persistent: always, everysec or no
  int replica_of = 0;                  ///< a port on 127.0.0.1: start as its replica (--replicaof)
};

/// A redis-server of our own: optional persistence (AOF, fsync on every write) and password.
class redis_server final : public owned_server {
 public:
  using config = redis_server_config;

  explicit redis_server(config cfg = {}) : cfg_(std::move(cfg)) {
    binary_ = find_program("HOLDFAST_REDIS_SERVER", "redis-server",
                           {"/usr/bin/redis-server", "/usr/local/bin/redis-server"});
    dir_ = make_temp_dir("redis");
    port_ = free_port();
  }
  ~redis_server() override { stop(); }

  /// True iff a redis-server binary was found.
  [[nodiscard]] bool available() const { return !binary_.empty(); }

 protected:
  bool prepare() override {
    if (binary_.empty()) {
      why_ = "redis-server not found (set HOLDFAST_REDIS_SERVER)";
      return false;
    }
    if (dir_.empty() || port_ == 0) {
      why_ = "no temporary directory or free port";
      return false;
    }
    return true;
  }
  std::vector<std::string> command() override {
    std::vector<std::string> c = {binary_, "--port", std::to_string(port_), "--bind", "127.0.0.1",
                                  "--dir", dir_, "--save", "", "--daemonize", "no", "--appendonly",
                                  cfg_.persistent ? "yes" : "no",
                                  // A replica's first sync starts at once, not after 5 s.
                                  "--repl-diskless-sync-delay", "0"};
    if (cfg_.persistent) {
      c.insert(c.end(), {"--appendfsync", cfg_.appendfsync});
    }
    if (cfg_.replica_of != 0) {
      c.insert(c.end(), {"--replicaof", "127.0.0.1", std::to_string(cfg_.replica_of)});
      // A replica Sentinel may promote: announce the address clients reach it at.
      c.insert(c.end(), {"--replica-announce-ip", "127.0.0.1"});
    }
    if (!cfg_.password.empty()) c.insert(c.end(), {"--requirepass", cfg_.password});
    return c;
  }
  bool ready() override {
    std::string cmd;
    if (!cfg_.password.empty()) {
      cmd += "*2\r\n$4\r\nAUTH\r\n$" + std::to_string(cfg_.password.size()) + "\r\n" +
             cfg_.password + "\r\n";
    }
    cmd += "*1\r\n$4\r\nPING\r\n";
    return tcp_exchange(port_, cmd).find("+PONG") != std::string::npos;
  }

 private:
  config cfg_;
  std::string binary_;

 public:
  [[nodiscard]] const config& cfg() const { return cfg_; }
};

/// A Redis Sentinel of our own (`redis-server <file> --sentinel`) monitoring the primary at
/// 127.0.0.1:`primary_port` as "mymaster" with `quorum`, down after `down_after_ms`.
class redis_sentinel final : public owned_server {
 public:
  redis_sentinel(int primary_port, int quorum, int down_after_ms = 1000)
      : primary_(primary_port), quorum_(quorum), down_after_(down_after_ms) {
    binary_ = find_program("HOLDFAST_REDIS_SERVER", "redis-server",
                           {"/usr/bin/redis-server", "/usr/local/bin/redis-server"});
    dir_ = make_temp_dir("sentinel");
    port_ = free_port();
  }
  ~redis_sentinel() override { stop(); }

 protected:
  bool prepare() override {
    if (binary_.empty() || dir_.empty() || port_ == 0) {
      why_ = "redis-server not found, or no temporary directory or free port";
      return false;
    }
    if (FILE* f = std::fopen((dir_ + "/sentinel.conf").c_str(), "w")) {
      std::fprintf(f,
                   "port %d\nbind 127.0.0.1\ndir %s\nsentinel announce-ip 127.0.0.1\n"
                   "sentinel monitor mymaster 127.0.0.1 %d %d\n"
                   "sentinel down-after-milliseconds mymaster %d\n"
                   "sentinel failover-timeout mymaster 10000\n"
                   "sentinel parallel-syncs mymaster 1\n",
                   port_, dir_.c_str(), primary_, quorum_, down_after_);
      std::fclose(f);
      return true;
    }
    why_ = "cannot write sentinel.conf";
    return false;
  }
  std::vector<std::string> command() override {
    return {binary_, dir_ + "/sentinel.conf", "--sentinel"};
  }
  bool ready() override {
    return tcp_exchange(port_, "*1\r\n$4\r\nPING\r\n").find("+PONG") != std::string::npos;
  }

 private:
  int primary_;
  int quorum_;
  int down_after_;
  std::string binary_;
};

/// A PostgreSQL server of our own: initdb into a temporary directory (as an unprivileged user
/// when root), then postgres on 127.0.0.1:<port>, TCP only, trust authentication for user
/// "holdfast", fsync off (kill -9 does not lose the OS page cache; synchronous_commit stays on, so
/// a committed statement survives a kill -9 of every server process).
class postgres_server final : public owned_server {
 public:
  /// A primary (standby_of == 0) or a streaming standby of the primary on 127.0.0.1:standby_of,
  /// made by pg_basebackup -R (its primary_conninfo names application_name `name`), with
  /// `settings` ("name=value") passed as -c options.
  explicit postgres_server(int standby_of = 0, std::vector<std::string> settings = {},
                           std::string name = "s1")
      : standby_of_(standby_of), settings_(std::move(settings)), name_(std::move(name)) {
    bindir_ = env("HOLDFAST_PG_BINDIR").value_or(newest_pg_bindir());
    dir_ = make_temp_dir("pg");
    port_ = free_port();
  }
  ~postgres_server() override { stop(); }

  [[nodiscard]] bool available() const { return is_executable(bindir_ + "/postgres"); }

  /// A libpq connection string for this server.
  [[nodiscard]] std::string conninfo() const {
    return "host=127.0.0.1 port=" + std::to_string(port_) + " dbname=postgres user=holdfast";
  }

 protected:
  bool prepare() override {
    if (!available()) {
      why_ = "postgres binaries not found (set HOLDFAST_PG_BINDIR)";
      return false;
    }
    if (dir_.empty() || port_ == 0) {
      why_ = "no temporary directory or free port";
      return false;
    }
    if (initialized_) return true;
    const run_as u = user();
    if (u.drop && ::chown(dir_.c_str(), u.uid, u.gid) != 0) {
      why_ = "cannot chown the data directory to the unprivileged user";
      return false;
    }
    if (standby_of_ != 0) {
      if (!run_program(
              {bindir_ + "/pg_basebackup", "-h", "127.0.0.1", "-p", std::to_string(standby_of_),
               "-U", "holdfast", "-D", dir_ + "/data", "-R", "-X", "stream", "--no-sync",
               "--checkpoint=fast", "-d", "application_name=" + name_ + " user=holdfast"},
              dir_ + "/basebackup.log", u, dir_)) {
        why_ = "pg_basebackup failed; log:\n" + read_file(dir_ + "/basebackup.log");
        return false;
      }
      initialized_ = true;
      return true;
    }
    if (!run_program({bindir_ + "/initdb", "-D", dir_ + "/data", "-U", "holdfast", "--auth=trust",
                      "-E", "UTF8", "--locale=C", "--no-sync"},
                     dir_ + "/initdb.log", u, dir_)) {
      why_ = "initdb failed; log:\n" + read_file(dir_ + "/initdb.log");
      return false;
    }
    initialized_ = true;
    return true;
  }
  std::vector<std::string> command() override {
    std::vector<std::string> c = {bindir_ + "/postgres",
                                  "-D",
                                  dir_ + "/data",
                                  "-p",
                                  std::to_string(port_),
                                  "-k",
                                  "",
                                  "-c",
                                  "listen_addresses=127.0.0.1",
                                  "-c",
                                  "fsync=off",
                                  "-c",
                                  "full_page_writes=off",
                                  "-c",
                                  "max_connections=50",
                                  "-c",
                                  "shared_buffers=16MB"};
    for (const std::string& setting : settings_) c.insert(c.end(), {"-c", setting});
    return c;
  }
  bool ready() override {
    return run_program({bindir_ + "/pg_isready", "-q", "-h", "127.0.0.1", "-p",
                        std::to_string(port_), "-U", "holdfast", "-d", "postgres", "-t", "2"},
                       "/dev/null", {}, "/", std::chrono::seconds(10));
  }
  run_as user() override { return unprivileged_user(); }
  int stop_signal() override { return SIGINT; }  // "fast" shutdown

 private:
  static std::string newest_pg_bindir() {
    std::string best;
    int best_version = 0;
    if (DIR* d = ::opendir("/usr/lib/postgresql")) {
      while (dirent* e = ::readdir(d)) {
        const int v = std::atoi(e->d_name);
        if (v > best_version) {
          best_version = v;
          best = std::string("/usr/lib/postgresql/") + e->d_name + "/bin";
        }
      }
      ::closedir(d);
    }
    return best;
  }

  std::string bindir_;
  bool initialized_ = false;
  int standby_of_ = 0;
  std::vector<std::string> settings_;
  std::string name_;
};

}  // namespace hf_test

#endif  // HOLDFAST_TESTS_SUPPORT_REAL_SERVERS_HPP
