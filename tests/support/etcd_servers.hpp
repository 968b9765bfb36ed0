// SPDX-License-Identifier: MIT
// tests/support/etcd_servers.hpp - etcd members and clusters the tests own, to kill -9, freeze,
// stop, restart from their data directories and restore from snapshots; and the shared ones
// .ci/servers starts (HOLDFAST_ETCD_ENDPOINTS, HOLDFAST_ETCD_CLUSTER_ENDPOINTS).
//
// Binaries: HOLDFAST_ETCD (default: etcd on PATH or /usr/bin), HOLDFAST_ETCDCTL likewise.
// A missing etcd fails in CI and is a loud skip elsewhere, as for Redis and PostgreSQL.
#ifndef HOLDFAST_TESTS_SUPPORT_ETCD_SERVERS_HPP
#define HOLDFAST_TESTS_SUPPORT_ETCD_SERVERS_HPP

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "real_servers.hpp"

namespace hf_test {

inline std::string etcd_binary() {
  return find_program("HOLDFAST_ETCD", "etcd", {"/usr/bin/etcd", "/usr/local/bin/etcd"});
}
inline std::string etcdctl_binary() {
  return find_program("HOLDFAST_ETCDCTL", "etcdctl",
                      {"/usr/bin/etcdctl", "/usr/local/bin/etcdctl"});
}

/// Splits "a,b,c".
inline std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= s.size()) {
    const std::size_t end = std::min(s.find(',', start), s.size());
    if (end > start) out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

/// One etcd member of a cluster the test owns. Its data directory survives stop/kill9/start, so
/// start after kill9() is a restart from its data (the member rejoins with its log). etcd is one
/// process, so signals go to it alone.
///
/// Not an owned_server: those wait for readiness inside start(), but a member of a multi-member
/// cluster is ready only once a quorum runs, so members are spawned first and waited for after,
/// all from the test's own thread (PR_SET_PDEATHSIG, which spawn() sets, fires when the *thread*
/// that forked the child ends).
class etcd_member {
 public:
  etcd_member(std::string name, std::string dir, int client_port, int peer_port)
      : name_(std::move(name)), dir_(std::move(dir)), port_(client_port), peer_port_(peer_port) {
    binary_ = etcd_binary();
  }
  ~etcd_member() { stop(); }
  etcd_member(const etcd_member&) = delete;
  etcd_member& operator=(const etcd_member&) = delete;

  [[nodiscard]] const std::string& name() const { return name_; }
  [[nodiscard]] int port() const { return port_; }
  [[nodiscard]] bool running() const { return pid_ > 0; }
  [[nodiscard]] const std::string& why() const { return why_; }
  [[nodiscard]] std::string client_url() const {
    return "http://127.0.0.1:" + std::to_string(port_);
  }
  [[nodiscard]] std::string peer_url() const {
    return "http://127.0.0.1:" + std::to_string(peer_port_);
  }
  [[nodiscard]] std::string data_dir() const { return dir_ + "/" + name_ + ".etcd"; }
  [[nodiscard]] std::string log() const { return dir_ + "/" + name_ + ".log"; }

  /// The --initial-cluster string of the whole cluster, and its token; set by the cluster.
  std::string initial_cluster;
  std::string cluster_token;
  /// More flags for the next start (e.g. {"--auth-token-ttl", "1"}).
  std::vector<std::string> extra;

  /// Starts the process (does not wait until it serves). False if it cannot be started.
  bool spawn_process() {
    if (pid_ > 0) return true;
    if (binary_.empty()) {
      why_ = "etcd not found (set HOLDFAST_ETCD)";
      return false;
    }
    std::vector<std::string> argv = {binary_,
                                     "--name",
                                     name_,
                                     "--data-dir",
                                     data_dir(),
                                     "--listen-client-urls",
                                     client_url(),
                                     "--advertise-client-urls",
                                     client_url(),
                                     "--listen-peer-urls",
                                     peer_url(),
                                     "--initial-advertise-peer-urls",
                                     peer_url(),
                                     "--initial-cluster",
                                     initial_cluster,
                                     "--initial-cluster-token",
                                     cluster_token,
                                     "--initial-cluster-state",
                                     "new"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    pid_ = spawn(argv, log(), {}, dir_);
    if (pid_ < 0) why_ = "fork failed";
    return pid_ > 0;
  }
  /// True once it serves with a leader (/health), polling for at most `bound`.
  bool wait_ready(std::chrono::milliseconds bound) {
    const bool ok = wait_until(
        [&] {
          int status = 0;
          if (pid_ > 0 && ::waitpid(pid_, &status, WNOHANG) == pid_) pid_ = -1;
          return pid_ < 0 || healthy();
        },
        bound);
    if (pid_ < 0 || !ok) {
      why_ = std::string(pid_ < 0 ? "exited" : "not ready in time") + "; log tail:\n" +
             tail(read_file(log()));
      return false;
    }
    return true;
  }
  [[nodiscard]] bool healthy() const {
    const std::string r = tcp_exchange(port_, "GET /health HTTP/1.0\r\n\r\n");
    return r.find("\"health\":\"true\"") != std::string::npos;
  }
  void kill9() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    wait_exit(pid_, std::chrono::seconds(10));
    pid_ = -1;
  }
  void stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGCONT);
    ::kill(pid_, SIGTERM);
    if (wait_exit(pid_, std::chrono::seconds(20)) == -1) {
      ::kill(pid_, SIGKILL);
      wait_exit(pid_, std::chrono::seconds(10));
    }
    pid_ = -1;
  }
  void pause() {
    if (pid_ > 0) ::kill(pid_, SIGSTOP);
  }
  void resume() {
    if (pid_ > 0) ::kill(pid_, SIGCONT);
  }

 private:
  static std::string tail(const std::string& s) {
    return s.size() > 2000 ? s.substr(s.size() - 2000) : s;
  }

  std::string name_;
  std::string dir_;
  int port_ = 0;
  int peer_port_ = 0;
  std::string binary_;
  std::string why_;
  pid_t pid_ = -1;
};

/// A cluster of `n` members on 127.0.0.1 in one temporary directory.
class etcd_cluster {
 public:
  explicit etcd_cluster(int n, const std::string& tag = "etcd") {
    dir_ = make_temp_dir(tag.c_str());
    std::string initial;
    std::vector<std::pair<int, int>> ports;
    for (int i = 0; i < n; ++i) {
      ports.emplace_back(free_port(), free_port());
      initial += (i ? "," : "") + std::string("m") + std::to_string(i) +
                 "=http://127.0.0.1:" + std::to_string(ports.back().second);
    }
    const std::string token = "hf-" + random_tag(8);
    for (int i = 0; i < n; ++i) {
      members_.push_back(std::make_unique<etcd_member>("m" + std::to_string(i), dir_,
                                                       ports[static_cast<std::size_t>(i)].first,
                                                       ports[static_cast<std::size_t>(i)].second));
      members_.back()->initial_cluster = initial;
      members_.back()->cluster_token = token;
    }
  }
  ~etcd_cluster() {
    members_.clear();
    remove_tree(dir_);
  }
  etcd_cluster(const etcd_cluster&) = delete;
  etcd_cluster& operator=(const etcd_cluster&) = delete;

  /// Starts every member that is not running, all at once (a member of a cluster is ready only
  /// once a quorum runs), and waits until each serves. Members keep their data directories.
  bool start() {
    bool ok = !dir_.empty();
    for (auto& m : members_) ok = m->spawn_process() && ok;
    for (auto& m : members_) ok = ok && m->wait_ready(std::chrono::seconds(30));
    return ok;
  }

  [[nodiscard]] std::size_t size() const { return members_.size(); }
  etcd_member& operator[](std::size_t i) { return *members_[i]; }
  [[nodiscard]] const std::string& dir() const { return dir_; }
  [[nodiscard]] std::vector<std::string> endpoints() const {
    std::vector<std::string> out;
    for (const auto& m : members_) out.push_back(m->client_url());
    return out;
  }
  /// Why a start failed: every member's reason.
  [[nodiscard]] std::string why() const {
    std::string out;
    for (const auto& m : members_) out += m->name() + ": " + m->why() + "\n";
    return out;
  }

  /// Index of the current leader (asked of each running member's /v3/maintenance/status), or -1.
  int leader() {
    for (std::size_t i = 0; i < members_.size(); ++i) {
      if (!members_[i]->running()) continue;
      const std::string r = http_post(members_[i]->port(), "/v3/maintenance/status", "{}");
      const std::string leader = json_field(r, "leader");
      const std::string self = json_field(json_object_text(r, "header"), "member_id");
      if (!leader.empty() && leader == self) return static_cast<int>(i);
    }
    return -1;
  }

  /// A plain HTTP/1.0 POST on 127.0.0.1 (no client library), returning the raw answer.
  static std::string http_post(int port, const std::string& path, const std::string& body) {
    const std::string req = "POST " + path +
                            " HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: " +
                            std::to_string(body.size()) + "\r\n\r\n" + body;
    return tcp_exchange(port, req);
  }

 private:
  static std::string json_object_text(const std::string& doc, const std::string& field) {
    const std::size_t at = doc.find("\"" + field + "\":{");
    if (at == std::string::npos) return {};
    const std::size_t end = doc.find('}', at);
    return doc.substr(at, end == std::string::npos ? std::string::npos : end - at);
  }
  static std::string json_field(const std::string& doc, const std::string& field) {
    const std::string pat = "\"" + field + "\":\"";
    const std::size_t at = doc.find(pat);
    if (at == std::string::npos) return {};
    const std::size_t end = doc.find('"', at + pat.size());
    return doc.substr(at + pat.size(), end - at - pat.size());
  }

  std::string dir_;
  std::vector<std::unique_ptr<etcd_member>> members_;
};

}  // namespace hf_test

#endif  // HOLDFAST_TESTS_SUPPORT_ETCD_SERVERS_HPP
