// SPDX-License-Identifier: MIT
// holdfast/stores/redis_cluster_options.hpp - redis_cluster_options: the seed nodes of a Redis
// Cluster and the per-node settings (AUTH, timeouts, wait_replicas, key prefixes) with which
// redis_cluster_store talks to each primary. Part of stores/redis_cluster.hpp (include that); on
// its own it needs no hiredis.
#ifndef HOLDFAST_STORES_REDIS_CLUSTER_OPTIONS_HPP
#define HOLDFAST_STORES_REDIS_CLUSTER_OPTIONS_HPP

#include <string>
#include <system_error>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/stores/redis_options.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

/// How redis_cluster_store reaches a Redis Cluster and where it keeps its keys there.
struct redis_cluster_options {
  /// Nodes to ask for the slot map (CLUSTER SLOTS), in turn; any node of the cluster will do,
  /// primary or replica. At least one. The store learns every primary from the map.
  std::vector<redis_endpoint> nodes{};
  /// The settings of every connection to a primary: username/password (AUTH), client_name,
  /// connect_timeout, command_timeout (which also bounds the retries after TRYAGAIN, see
  /// redis_cluster_store), wait_replicas/wait_timeout, min_ttl, and the key names: key_prefix
  /// (lease records) and counter_key (the prefix of the per-slot token counters). host, port,
  /// unix_socket and sentinels are not used (the slot map gives the addresses); database must be
  /// 0 (a cluster has only database 0). The prefixes must hold no '{' or '}': the store puts each
  /// key's own hash tag after them (detail/redis_slots.hpp), and a brace in a prefix would put
  /// every key in one slot.
  redis_options node = cluster_defaults();

  /// Returns errc::invalid_argument if an option is out of range; `why` gets what is wrong,
  /// naming the field ("invalid redis_cluster_options: nodes is empty").
  [[nodiscard]] std::error_code check(std::string* why = nullptr) const {
    auto bad = [&](const std::string& what) -> std::error_code {
      if (why != nullptr) *why = "invalid redis_cluster_options: " + what;
      return errc::invalid_argument;
    };
    if (nodes.empty()) return bad("nodes is empty (give at least one node of the cluster)");
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      const redis_endpoint& e = nodes[i];
      const std::string name = "nodes[" + std::to_string(i) + "]";
      if (e.host.empty() || e.host.find('\0') != std::string::npos) {
        return bad(name + ".host is empty or contains NUL");
      }
      if (e.port < 1 || e.port > 65535) {
        return bad(name + ".port " + std::to_string(e.port) + " is out of range 1 .. 65535");
      }
    }
    if (!node.sentinels.empty()) return bad("node.sentinels is set (a cluster has no Sentinel)");
    if (!node.unix_socket.empty()) return bad("node.unix_socket is set (the map gives addresses)");
    if (node.database != 0) return bad("node.database is not 0 (a cluster has only database 0)");
    for (const std::string* p : {&node.key_prefix, &node.counter_key}) {
      if (p->find_first_of("{}") != std::string::npos) {
        return bad("node.key_prefix or node.counter_key \"" + *p +
                   "\" holds a brace (it would put every key in one slot)");
      }
    }
    std::string inner;
    if (node.check(&inner)) return bad("node: " + inner);
    return {};
  }

  /// The node settings' defaults, with key names that carry no hash tag of their own.
  static redis_options cluster_defaults() {
    redis_options o;
    o.key_prefix = "holdfast:lease:";
    o.counter_key = "holdfast:token:";
    o.wait_prefix = "holdfast:wait:";
    return o;
  }
};

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_REDIS_CLUSTER_OPTIONS_HPP
