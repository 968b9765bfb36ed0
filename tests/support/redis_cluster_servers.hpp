// SPDX-License-Identifier: MIT
// tests/support/redis_cluster_servers.hpp - a Redis Cluster of our own for the cluster store's
// tests: N primaries (and R replicas each) as redis-server processes with --cluster-enabled yes on
// 127.0.0.1 (unused client and bus ports, a temporary directory each), joined by
// `redis-cli --cluster create ... --cluster-yes`, and the raw commands the tests send behind the
// store's back (CLUSTER SLOTS/NODES/SETSLOT, MIGRATE, CLUSTER FAILOVER). Binaries:
// HOLDFAST_REDIS_SERVER and HOLDFAST_REDIS_CLI (default: on PATH or /usr/bin). Also the seeds of
// the shared cluster .ci/servers starts (HOLDFAST_REDIS_CLUSTER_SEEDS), for the tests that only
// need a serving cluster (serving_redis_cluster), and options for a test's keys there
// (redis_cluster_test_options).
#ifndef HOLDFAST_TESTS_SUPPORT_REDIS_CLUSTER_SERVERS_HPP
#define HOLDFAST_TESTS_SUPPORT_REDIS_CLUSTER_SERVERS_HPP

#include <hiredis/hiredis.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "holdfast/stores/redis_cluster_options.hpp"
#include "holdfast/stores/redis_options.hpp"
#include "real_servers.hpp"

namespace hf_test {

/// One reply of a command sent to 127.0.0.1:`port` on a connection of its own: the reply's text
/// (status, bulk or error), its integer as decimal, or "" (no answer; arrays: "<array>").
inline std::string redis_cmd(int port, const std::vector<std::string>& args) {
  const struct timeval tv { 2, 0 };
  redisContext* c = redisConnectWithTimeout("127.0.0.1", port, tv);
  if (c == nullptr) return {};
  std::string out;
  if (c->err == 0) {
    (void)redisSetTimeout(c, tv);
    std::vector<const char*> argv;
    std::vector<std::size_t> lens;
    for (const std::string& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    auto* r = static_cast<redisReply*>(
        redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data()));
    if (r != nullptr) {
      if (r->type == REDIS_REPLY_INTEGER)
        out = std::to_string(r->integer);
      else if (r->type == REDIS_REPLY_ARRAY)
        out = "<array>";
      else if (r->str != nullptr)
        out.assign(r->str, r->len);
      freeReplyObject(r);
    }
  }
  redisFree(c);
  return out;
}

/// The flags of the node at `port` by its own CLUSTER NODES ("myself,master", "myself,slave").
inline std::string nodes_flags_myself(int port) {
  std::istringstream in(redis_cmd(port, {"CLUSTER", "NODES"}));
  for (std::string line; std::getline(in, line);) {
    std::istringstream f(line);
    std::string id, addr, flags;
    f >> id >> addr >> flags;
    if (flags.find("myself") != std::string::npos) return flags;
  }
  return {};
}

/// The nodes named by HOLDFAST_REDIS_CLUSTER_SEEDS ("host:port,host:port,..."; .ci/servers sets
/// it to its three-primary cluster), or none when it is unset or empty.
inline std::vector<holdfast::redis_endpoint> redis_cluster_seeds_from_env() {
  std::vector<holdfast::redis_endpoint> out;
  const std::string all = env("HOLDFAST_REDIS_CLUSTER_SEEDS").value_or("");
  std::istringstream in(all);
  for (std::string one; std::getline(in, one, ',');) {
    const std::size_t colon = one.rfind(':');
    if (colon != std::string::npos) {
      out.push_back({one.substr(0, colon), std::atoi(one.c_str() + colon + 1)});
    }
  }
  return out;
}

/// Options for the cluster of `nodes`, every key under the prefix "hf-" + `tag` (lease, token and
/// wait keys apart: pass a random tag so that runs never meet), connect and command timeouts of
/// 1 s.
inline holdfast::redis_cluster_options redis_cluster_test_options(
    const std::vector<holdfast::redis_endpoint>& nodes, const std::string& tag) {
  holdfast::redis_cluster_options o;
  o.nodes = nodes;
  o.node.key_prefix = "hf-" + tag + ":lease:";
  o.node.counter_key = "hf-" + tag + ":token:";
  o.node.wait_prefix = "hf-" + tag + ":wait:";
  o.node.connect_timeout = std::chrono::milliseconds(1000);
  o.node.command_timeout = std::chrono::milliseconds(1000);
  return o;
}

/// The address ("host:port") of the primary serving `slot`, by the CLUSTER NODES of the node at
/// `port`; "" if none.
inline std::string redis_cluster_primary_at(std::size_t slot, int port) {
  std::istringstream in(redis_cmd(port, {"CLUSTER", "NODES"}));
  for (std::string line; std::getline(in, line);) {
    std::istringstream f(line);
    std::string id, addr, flags, master, ping, pong, epoch, state;
    f >> id >> addr >> flags >> master >> ping >> pong >> epoch >> state;
    if (flags.find("master") == std::string::npos || flags.find("fail") != std::string::npos) {
      continue;
    }
    for (std::string range; f >> range;) {
      if (range[0] == '[') continue;
      const std::size_t dash = range.find('-');
      const std::size_t a = std::stoul(range.substr(0, dash));
      const std::size_t b = dash == std::string::npos ? a : std::stoul(range.substr(dash + 1));
      if (slot >= a && slot <= b) return addr.substr(0, addr.find('@'));
    }
  }
  return {};
}

/// A cluster-enabled redis-server: no persistence, a short node timeout (failure detection in
/// about a second), its node table in its directory (a restart rejoins the cluster).
class redis_cluster_node final : public owned_server {
 public:
  explicit redis_cluster_node(int node_timeout_ms) : timeout_(node_timeout_ms) {
    binary_ = find_program("HOLDFAST_REDIS_SERVER", "redis-server",
                           {"/usr/bin/redis-server", "/usr/local/bin/redis-server"});
    dir_ = make_temp_dir("rcluster");
    port_ = free_port();
    bus_ = free_port();
  }
  ~redis_cluster_node() override { stop(); }
  [[nodiscard]] bool available() const { return !binary_.empty(); }
  [[nodiscard]] std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 protected:
  bool prepare() override {
    if (binary_.empty() || dir_.empty() || port_ == 0 || bus_ == 0) {
      why_ = "redis-server not found, or no temporary directory or free port";
      return false;
    }
    return true;
  }
  std::vector<std::string> command() override {
    return {binary_,
            "--port",
            std::to_string(port_),
            "--cluster-port",
            std::to_string(bus_),
            "--bind",
            "127.0.0.1",
            "--dir",
            dir_,
            "--save",
            "",
            "--appendonly",
            "no",
            "--daemonize",
            "no",
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            dir_ + "/nodes.conf",
            "--cluster-node-timeout",
            std::to_string(timeout_),
            "--repl-diskless-sync-delay",
            "0",
            "--cluster-replica-validity-factor",
            "0"};
  }
  bool ready() override { return redis_cmd(port_, {"PING"}) == "PONG"; }

 private:
  int timeout_;
  int bus_ = 0;
  std::string binary_;
};

/// A cluster of `primaries` primaries with `replicas` replicas each, started together.
class redis_cluster {
 public:
  redis_cluster(int primaries, int replicas, int node_timeout_ms = 1000)
      : primaries_(primaries), replicas_(replicas) {
    for (int i = 0; i < primaries * (1 + replicas); ++i) {
      nodes_.push_back(std::make_unique<redis_cluster_node>(node_timeout_ms));
    }
    cli_ = find_program("HOLDFAST_REDIS_CLI", "redis-cli", {"/usr/bin/redis-cli"});
    dir_ = make_temp_dir("rcluster-cli");
  }
  ~redis_cluster() { remove_tree(dir_); }
  redis_cluster(const redis_cluster&) = delete;
  redis_cluster& operator=(const redis_cluster&) = delete;

  [[nodiscard]] bool available() const { return !cli_.empty() && nodes_[0]->available(); }
  [[nodiscard]] const std::string& why() const { return why_; }
  [[nodiscard]] std::size_t size() const { return nodes_.size(); }
  /// How many primaries it was made with (nodes 0 .. size()-1 are these and their replicas).
  [[nodiscard]] int primaries() const { return primaries_; }
  redis_cluster_node& node(std::size_t i) { return *nodes_[i]; }

  /// Starts every node, creates the cluster and waits (bounded) until every node says
  /// cluster_state:ok and every replica is in sync. False, with why(), otherwise.
  bool start() {
    std::vector<std::string> create = {cli_, "--cluster", "create"};
    for (auto& n : nodes_) {
      if (!n->start()) {
        why_ = "cannot start a cluster node: " + n->why();
        return false;
      }
      create.push_back(n->address());
    }
    create.insert(create.end(), {"--cluster-replicas", std::to_string(replicas_), "--cluster-yes"});
    if (!run_program(create, dir_ + "/create.log", {}, "/", std::chrono::seconds(60))) {
      why_ = "redis-cli --cluster create failed:\n" + read_file(dir_ + "/create.log");
      return false;
    }
    if (!wait_ok(std::chrono::seconds(30))) {
      why_ = "the cluster did not reach cluster_state:ok in 30 s";
      return false;
    }
    return true;
  }

  /// Waits until every running node says cluster_state:ok, sees the same primaries, and every
  /// running replica's link to its primary is up.
  bool wait_ok(std::chrono::milliseconds bound) {
    return wait_until(
        [&] {
          for (auto& n : nodes_) {
            if (!n->running()) continue;
            if (redis_cmd(n->port(), {"CLUSTER", "INFO"}).find("cluster_state:ok") ==
                std::string::npos) {
              return false;
            }
            const std::string repl = redis_cmd(n->port(), {"INFO", "replication"});
            if (repl.find("role:slave") != std::string::npos &&
                repl.find("master_link_status:up") == std::string::npos) {
              return false;
            }
          }
          return true;
        },
        bound);
  }

  /// The node addresses as a store's seeds.
  std::vector<holdfast::redis_endpoint> seeds() const {
    std::vector<holdfast::redis_endpoint> out;
    for (const auto& n : nodes_) out.push_back({"127.0.0.1", n->port()});
    return out;
  }

  /// CLUSTER NODES as seen by `port`: one line per node.
  static std::vector<std::string> nodes_lines(int port) {
    std::vector<std::string> out;
    std::istringstream in(redis_cmd(port, {"CLUSTER", "NODES"}));
    for (std::string line; std::getline(in, line);) {
      if (!line.empty()) out.push_back(line);
    }
    return out;
  }
  /// The node id of the node at `port` (CLUSTER MYID).
  static std::string id_of(int port) { return redis_cmd(port, {"CLUSTER", "MYID"}); }

  /// The index of the node that serves `slot` as primary, by `port`'s view (-1 if none).
  int primary_of(std::size_t slot, int port) {
    const std::string addr = redis_cluster_primary_at(slot, port);
    return addr.empty() ? -1 : index_of_address(addr);
  }
  /// The index of a running replica of node `primary` (-1 if none).
  int replica_of(std::size_t primary) {
    const std::string id = id_of(nodes_[primary]->port());
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      if (i == primary || !nodes_[i]->running()) continue;
      for (auto& line : nodes_lines(nodes_[i]->port())) {
        if (line.find("myself") != std::string::npos &&
            line.find(" " + id + " ") != std::string::npos) {
          return static_cast<int>(i);
        }
      }
    }
    return -1;
  }

  /// Moves `slot` from node `from` to node `to` by hand, as redis-cli --cluster reshard does:
  /// SETSLOT IMPORTING on the target, MIGRATING on the source, MIGRATE its keys in batches of
  /// `batch` (calling `between` after each batch), then SETSLOT NODE on both. True on success.
  template <class F>
  bool migrate_slot(std::size_t slot, std::size_t from, std::size_t to, int batch, F between) {
    const int src = nodes_[from]->port();
    const int dst = nodes_[to]->port();
    const std::string s = std::to_string(slot);
    if (redis_cmd(dst, {"CLUSTER", "SETSLOT", s, "IMPORTING", id_of(src)}) != "OK") return false;
    if (redis_cmd(src, {"CLUSTER", "SETSLOT", s, "MIGRATING", id_of(dst)}) != "OK") return false;
    for (;;) {
      std::vector<std::string> keys = keys_in_slot(src, s, batch);
      if (keys.empty()) break;
      std::vector<std::string> cmd = {"MIGRATE", "127.0.0.1", std::to_string(dst), "", "0",
                                      "5000",    "KEYS"};
      cmd.insert(cmd.end(), keys.begin(), keys.end());
      // NOKEY: the listed keys were deleted meanwhile (a holder released its lease between
      // GETKEYSINSLOT and MIGRATE), so there is nothing of them to move: list again.
      const std::string said = redis_cmd(src, cmd);
      if (said != "OK" && said != "NOKEY") {
        why_ = "MIGRATE of slot " + s + " answered '" + said + "'";
        return false;
      }
      between();
    }
    const std::string dst_id = id_of(dst);
    for (auto& n : nodes_) {
      if (n->running()) (void)redis_cmd(n->port(), {"CLUSTER", "SETSLOT", s, "NODE", dst_id});
    }
    return true;
  }

  static std::vector<std::string> keys_in_slot(int port, const std::string& slot, int count) {
    std::vector<std::string> out;
    const struct timeval tv { 2, 0 };
    redisContext* c = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (c == nullptr) return out;
    auto* r = static_cast<redisReply*>(
        redisCommand(c, "CLUSTER GETKEYSINSLOT %s %d", slot.c_str(), count));
    if (r != nullptr && r->type == REDIS_REPLY_ARRAY) {
      for (std::size_t i = 0; i < r->elements; ++i) {
        out.emplace_back(r->element[i]->str, r->element[i]->len);
      }
    }
    if (r != nullptr) freeReplyObject(r);
    redisFree(c);
    return out;
  }

 private:
  int index_of_address(const std::string& addr) {
    const std::string hostport = addr.substr(0, addr.find('@'));
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      if (nodes_[i]->address() == hostport) return static_cast<int>(i);
    }
    return -1;
  }

  int primaries_;
  int replicas_;
  std::vector<std::unique_ptr<redis_cluster_node>> nodes_;
  std::string cli_;
  std::string dir_;
  std::string why_;
};

/// The cluster of the test executable's own (3 primaries with one replica each), for the cases
/// that move slots, kill or fail over a primary: started on first use (about 5 s), shared by
/// every test file of the executable, and waited for (cluster_state:ok, replicas in sync) on
/// every use, so a case that failed a primary over leaves it usable (three tries, on fresh ports,
/// to start it). nullptr, after a loud skip,
/// only outside CI when redis-server is missing; in CI a failure.
inline redis_cluster* own_redis_cluster() {
  static std::unique_ptr<redis_cluster> c;
  static bool tried = false;
  if (!tried) {
    tried = true;
    std::string why;
    bool must = in_ci();
    // Three tries, each on fresh ports: another process may take a port between free_port()
    // and the server's bind (other suites start servers on this machine at the same time).
    for (int attempt = 0; attempt < 3 && !c; ++attempt) {
      c = std::make_unique<redis_cluster>(3, 1);
      must = must || c->available();
      if (!c->start()) {
        why += (why.empty() ? "" : "\n") + c->why();
        c.reset();
      }
    }
    if (!c) {
      if (must) FAIL("no Redis Cluster: " + why);
      loud_skip("no Redis Cluster: " + why);
    }
  }
  if (c) REQUIRE(c->wait_ok(std::chrono::seconds(30)));
  return c.get();
}

/// The index of a node of `c` that is a primary now, other than `other`, or -1.
inline int redis_cluster_other_primary(redis_cluster& c, int other) {
  for (std::size_t i = 0; i < c.size(); ++i) {
    if (static_cast<int>(i) != other && c.node(i).running() &&
        nodes_flags_myself(c.node(i).port()).find("master") != std::string::npos) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

/// The nodes of a serving cluster, for the cases that neither move slots nor stop nodes: the
/// shared cluster of .ci/servers (HOLDFAST_REDIS_CLUSTER_SEEDS) if set, else the executable's own
/// (own_redis_cluster). Empty (after a loud skip) only outside CI.
inline std::vector<holdfast::redis_endpoint> serving_redis_cluster() {
  std::vector<holdfast::redis_endpoint> shared = redis_cluster_seeds_from_env();
  if (!shared.empty()) return shared;
  redis_cluster* c = own_redis_cluster();
  return c == nullptr ? std::vector<holdfast::redis_endpoint>{} : c->seeds();
}

}  // namespace hf_test

#endif  // HOLDFAST_TESTS_SUPPORT_REDIS_CLUSTER_SERVERS_HPP
