// SPDX-License-Identifier: MIT
// tests/support/zookeeper_servers.hpp - ZooKeeper for the zookeeper_store tests: the standalone
// server .ci/servers starts (HOLDFAST_ZK_HOSTS), else one of our own (zookeeper_server: the JVM
// running ZooKeeperServerMain on a private zoo.cfg, tickTime 500 ms, so sessions last 1 to 10 s).
#ifndef HOLDFAST_TESTS_SUPPORT_ZOOKEEPER_SERVERS_HPP
#define HOLDFAST_TESTS_SUPPORT_ZOOKEEPER_SERVERS_HPP

#include <dirent.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "real_servers.hpp"

namespace hf_test {

/// A standalone ZooKeeper server of our own (ZooKeeperServerMain), for tests that kill it.
class zookeeper_server final : public owned_server {
 public:
  zookeeper_server() {
    java_ = find_program("HOLDFAST_JAVA", "java", {"/usr/bin/java"});
    dir_ = make_temp_dir("zookeeper");
    port_ = free_port();
  }
  ~zookeeper_server() override { stop(); }

  /// "127.0.0.1:<port>".
  [[nodiscard]] std::string hosts() const { return "127.0.0.1:" + std::to_string(port_); }

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
    std::ofstream cfg(dir_ + "/zoo.cfg");
    cfg << "tickTime=500\ndataDir=" << dir_ << "/data\nclientPort=" << port_
        << "\nclientPortAddress=127.0.0.1\nadmin.enableServer=false\nforceSync=no\n"
        << "4lw.commands.whitelist=ruok,srvr\n";
    return static_cast<bool>(cfg);
  }
  std::vector<std::string> command() override {
    std::string cp = "/etc/zookeeper/conf";
    std::vector<std::string> jars;
    if (DIR* d = ::opendir("/usr/share/java")) {
      while (dirent* e = ::readdir(d)) {
        const std::string n = e->d_name;
        if (n.size() > 4 && n.compare(n.size() - 4, 4, ".jar") == 0) jars.push_back(n);
      }
      ::closedir(d);
    }
    std::sort(jars.begin(), jars.end());
    for (const std::string& j : jars) cp += ":/usr/share/java/" + j;
    return {java_,
            "-Xmx256m",
            "-Djute.maxbuffer=4194304",
            "-Dzookeeper.log.dir=" + dir_,
            "-cp",
            cp,
            "org.apache.zookeeper.server.ZooKeeperServerMain",
            dir_ + "/zoo.cfg"};
  }
  bool ready() override { return tcp_exchange(port_, "ruok").find("imok") != std::string::npos; }

 private:
  std::string java_;
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
