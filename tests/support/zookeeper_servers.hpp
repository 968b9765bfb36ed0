// SPDX-License-Identifier: MIT
// tests/support/zookeeper_servers.hpp - ZooKeeper for the zookeeper_store tests: the standalone
// server .ci/servers starts (HOLDFAST_ZK_HOSTS), else one of our own (zookeeper_server: the JVM
// running ZooKeeperServerMain on a private zoo.cfg, tickTime 500 ms, so sessions last 1 to 10 s).
#ifndef HOLDFAST_TESTS_SUPPORT_ZOOKEEPER_SERVERS_HPP
#define HOLDFAST_TESTS_SUPPORT_ZOOKEEPER_SERVERS_HPP

#include <dirent.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "real_servers.hpp"

namespace hf_test {

/// A ZooKeeper server of our own, for tests that kill it: standalone (ZooKeeperServerMain), or
/// member `myid` of an ensemble (QuorumPeerMain) whose "server.N=..." lines are `peers`.
class zookeeper_server final : public owned_server {
 public:
  explicit zookeeper_server(int myid = 0, std::string peers = {})
      : myid_(myid), peers_(std::move(peers)) {
    java_ = find_program("HOLDFAST_JAVA", "java", {"/usr/bin/java"});
    dir_ = make_temp_dir("zookeeper");
    port_ = free_port();
  }
  ~zookeeper_server() override { stop(); }

  /// "127.0.0.1:<port>".
  [[nodiscard]] std::string hosts() const { return "127.0.0.1:" + std::to_string(port_); }
  /// The answer to the four-letter word `word` ("srvr": "Mode: leader" or "Mode: follower" once
  /// it serves).
  [[nodiscard]] std::string ask(const std::string& word) const { return tcp_exchange(port_, word); }
  [[nodiscard]] bool serving() const { return ask("srvr").find("Mode: ") != std::string::npos; }
  [[nodiscard]] bool leads() const { return ask("srvr").find("Mode: leader") != std::string::npos; }

 protected:
  bool prepare() override {
    if (java_.empty() || ::access("/usr/share/java/zookeeper.jar", R_OK) != 0) {
      why_ = "ZooKeeper not installed (java, /usr/share/java/zookeeper.jar; .ci/deps installs it)";
      return false;
    }
    if (dir_.empty() || port_ == 0) {
      why_ = "no temporary directory or free port";
      return false;
    }
    ::mkdir((dir_ + "/data").c_str(), 0700);
    if (myid_ > 0) std::ofstream(dir_ + "/data/myid") << myid_ << "\n";
    std::ofstream cfg(dir_ + "/zoo.cfg");
    cfg << "tickTime=500\ndataDir=" << dir_ << "/data\nclientPort=" << port_
        << "\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\nforceSync=no\n"
        << "4lw.commands.whitelist=ruok,srvr\n";
    if (myid_ > 0) cfg << "initLimit=10\nsyncLimit=5\n" << peers_;
    return static_cast<bool>(cfg);
  }
  std::vector<std::string> command() override {
    // Debian's own classpath (as .ci/servers): zookeeper.jar's manifest names its dependencies.
    // Every jar in /usr/share/java would put jcl-over-slf4j and slf4j-jcl together on a fresh
    // Debian 12, and SLF4J then aborts the server; slf4j-simple is the one logger binding.
    const std::string cp =
        "/etc/zookeeper/conf:/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar";
    return {java_,
            "-Xmx256m",
            "-Djute.maxbuffer=4194304",
            "-Dzookeeper.log.dir=" + dir_,
            "-cp",
            cp,
            myid_ > 0 ? "org.apache.zookeeper.server.quorum.QuorumPeerMain"
                      : "org.apache.zookeeper.server.ZooKeeperServerMain",
            dir_ + "/zoo.cfg"};
  }
  // A member answers ruok before its ensemble has a quorum: start() returns once the JVM runs,
  // and zookeeper_ensemble waits for every member to serve.
  bool ready() override { return ask("ruok").find("imok") != std::string::npos; }

 private:
  std::string java_;
  int myid_;
  std::string peers_;
};

/// Three members on 127.0.0.1, each with its own client, quorum and election port.
class zookeeper_ensemble {
 public:
  explicit zookeeper_ensemble(int n = 3) {
    std::string peers;
    for (int i = 1; i <= n; ++i) {
      peers += "server." + std::to_string(i) + "=127.0.0.1:" + std::to_string(free_port()) + ":" +
               std::to_string(free_port()) + "\n";
    }
    for (int i = 1; i <= n; ++i) members_.push_back(std::make_unique<zookeeper_server>(i, peers));
  }
  /// Starts every member and waits until all serve (one leads). False, with why(), if not.
  bool start(std::chrono::milliseconds bound = std::chrono::seconds(60)) {
    for (auto& m : members_) {
      if (!m->start()) {
        why_ = m->why();
        return false;
      }
    }
    if (!wait_until([&] { return serving() == members_.size(); }, bound)) {
      why_ = "the ensemble did not serve within the bound";
      return false;
    }
    return true;
  }
  /// How many members serve now.
  std::size_t serving() const {
    std::size_t k = 0;
    for (const auto& m : members_) k += m->running() && m->serving() ? 1 : 0;
    return k;
  }
  /// The index of the leader, or -1.
  int leader() const {
    for (std::size_t i = 0; i < members_.size(); ++i) {
      if (members_[i]->running() && members_[i]->leads()) return static_cast<int>(i);
    }
    return -1;
  }
  zookeeper_server& member(std::size_t i) { return *members_[i]; }
  /// The client's connect string: every member.
  std::string hosts() const {
    std::string h;
    for (const auto& m : members_) h += (h.empty() ? "" : ",") + m->hosts();
    return h;
  }
  const std::string& why() const { return why_; }

 private:
  std::vector<std::unique_ptr<zookeeper_server>> members_;
  std::string why_;
};

/// The server for tests that do not hurt it: .ci/servers' (HOLDFAST_ZK_HOSTS), else one of our
/// own, started once. nullopt (after a loud skip) only outside CI; a FAIL in CI.
inline std::optional<std::string> shared_zookeeper(std::string& why) {
  if (std::optional<std::string> h = env("HOLDFAST_ZK_HOSTS")) return h;
  static std::unique_ptr<zookeeper_server> own;
  if (!own) {
    own = std::make_unique<zookeeper_server>();
    if (!own->start()) {
      why = "no ZooKeeper: HOLDFAST_ZK_HOSTS unset and " + own->why();
      own.reset();
      return std::nullopt;
    }
  }
  return own->hosts();
}

}  // namespace hf_test

#endif  // HOLDFAST_TESTS_SUPPORT_ZOOKEEPER_SERVERS_HPP
