// SPDX-License-Identifier: MIT
// holdfast/stores/detail/redis_cluster_multi.hpp - the parts of redis_cluster_store's multi-key
// and multi-slot calls that need no routing: the try_acquire_all reply read, the error text for
// keys in two slots, the slot map read from CLUSTER SLOTS, raise_token_floor's pipelined pass over
// every slot's counter (one EVALSHA per slot, written in batches per primary, replies read in
// order) and the deployment of every primary. Part of stores/redis_cluster.hpp; not for users.
#ifndef HOLDFAST_STORES_DETAIL_REDIS_CLUSTER_MULTI_HPP
#define HOLDFAST_STORES_DETAIL_REDIS_CLUSTER_MULTI_HPP

#include <hiredis/hiredis.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "holdfast/deployment.hpp"
#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/result.hpp"
#include "holdfast/stores/detail/redis_connection.hpp"
#include "holdfast/stores/detail/redis_multi.hpp"
#include "holdfast/stores/detail/redis_resp.hpp"
#include "holdfast/stores/detail/redis_scripts.hpp"
#include "holdfast/stores/detail/redis_slots.hpp"
#include "holdfast/stores/redis_options.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

/// Reads CLUSTER SLOTS from host:port on a connection of its own (options `base`, no scripts, no
/// ROLE check: a replica's map is as good) into `slots`: each slot the index `index_of(host,
/// port)` returns for its primary, -1 for an unserved slot. \returns a zero code; else the
/// failure (store_unavailable, timeout: unreachable, or no map; protocol_error), its text in `why`.
template <class IndexOf>
std::error_code read_redis_slot_map(redis_options base, const std::string& host, int port,
                                    std::array<std::int32_t, redis_cluster_slots>& slots,
                                    IndexOf&& index_of, std::string& why) {
  base.host = host;
  base.port = port;
  redis_connection c(base, {});
  result<redis_reply_ptr> r = c.command({"CLUSTER", "SLOTS"});
  if (!r) {
    why = c.last_error();
    return r.error();
  }
  const redisReply* m = r->get();
  if (m->type != REDIS_REPLY_ARRAY || m->elements == 0) {
    why = "redis cluster: " + host + ":" + std::to_string(port) +
          " has no slot map (not a cluster node, or empty)";
    return errc::store_unavailable;
  }
  slots.fill(-1);
  for (std::size_t i = 0; i < m->elements; ++i) {
    redis_slot_range range;
    if (!read_redis_slot_range(m->element[i], range)) {
      why = "redis cluster: CLUSTER SLOTS: unexpected reply";
      return errc::protocol_error;
    }
    if (range.host.empty()) range.host = host;
    const std::int32_t at = index_of(range.host, range.port);
    for (std::size_t s = range.first; s <= range.last; ++s) slots[s] = at;
  }
  return {};
}

/// The refusal of a try_acquire_all over two slots, naming two of the keys and their slots.
inline std::string redis_cross_slot(std::string_view a, std::string_view b) {
  std::string na, nb;
  redis_cluster_name(na, "", a);
  redis_cluster_name(nb, "", b);
  return "redis cluster: try_acquire_all: keys \"" + std::string(a) + "\" (slot " +
         std::to_string(redis_key_slot(na)) + ") and \"" + std::string(b) + "\" (slot " +
         std::to_string(redis_key_slot(nb)) +
         ") are in different slots; give every key one hash tag, e.g. \"{order:7}:a\"";
}

/// Reads the acquire_all script's reply into q.grants: busy (integer 0), or `count` tokens.
inline std::error_code read_redis_cluster_all(redis_connection& c, const redisReply* reply,
                                              const redis_multi_request& q) {
  if (reply->type == REDIS_REPLY_INTEGER && reply->integer == 0) return errc::busy;
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements != q.count) {
    return c.fail(errc::protocol_error, "redis: try_acquire_all: unexpected reply");
  }
  for (std::size_t i = 0; i < q.count; ++i) {
    const std::optional<fencing_token> t = reply_token(reply->element[i]);
    if (!t || !t->is_issuable()) {
      return c.fail(errc::protocol_error, "redis: try_acquire_all: unexpected token");
    }
    q.grants[i] = grant{*t, q.ttl};
  }
  return {};
}

/// Raises the counter of every slot `slots` maps to a node (0 .. nodes - 1) to at least `floor`
/// (the advance script), pipelined per node in batches of 512. \returns the slots not done: an
/// error reply (MOVED, ASK, TRYAGAIN, NOSCRIPT, ...), a node that could not be reached, a
/// connection that failed mid-batch; the caller routes those one by one.
template <class ConnOf>
std::vector<std::size_t> redis_raise_all(std::size_t nodes,
                                         const std::array<std::int32_t, redis_cluster_slots>& slots,
                                         const std::string& counter_key, const std::string& floor,
                                         ConnOf conn_of) {
  std::vector<std::size_t> left;
  std::vector<std::string> names;
  std::string wire;
  for (std::size_t n = 0; n < nodes; ++n) {
    std::vector<std::size_t> mine;
    for (std::size_t s = 0; s < redis_cluster_slots; ++s) {
      if (slots[s] == static_cast<std::int32_t>(n)) mine.push_back(s);
    }
    if (mine.empty()) continue;
    redis_connection& c = conn_of(n);
    if (c.ensure_connected()) {
      left.insert(left.end(), mine.begin(), mine.end());
      continue;
    }
    for (std::size_t at = 0; at < mine.size(); at += 512) {
      const std::size_t end = std::min(mine.size(), at + 512);
      wire.clear();
      names.assign(end - at, std::string());
      for (std::size_t i = at; i < end; ++i) {
        redis_counter_name(names[i - at], counter_key, mine[i]);
        const std::string_view key = names[i - at];
        const std::string_view arg = floor;
        c.append_eval(wire, redis_script::advance, &key, 1, &arg, 1);
      }
      std::size_t done = at;
      if (!c.send_wire(wire)) {
        for (; done < end; ++done) {
          result<redis_reply_ptr> r = c.read_reply();
          if (!r) break;
          if ((*r)->type == REDIS_REPLY_ERROR) left.push_back(mine[done]);
        }
      }
      if (done < end) {  // the connection failed: the rest of this node's slots, routed
        left.insert(left.end(), mine.begin() + static_cast<std::ptrdiff_t>(done), mine.end());
        break;
      }
    }
  }
  return left;
}

/// redis_cluster_store::deployment: the report of every primary serving slots (`slots` indexes
/// `nodes`, -1 unserved), each connected first and read once, risks prefixed by its address
/// (`where`), facts joined by " | ", life empty. `note(node*, code)` records a failure and returns
/// the code. \returns the report; the first failure (store_unavailable, timeout) as noted.
template <class Nodes, class Note>
result<deployment_report> redis_cluster_deployment(
    Nodes& nodes, const std::array<std::int32_t, redis_cluster_slots>& slots, Note&& note) {
  deployment_report all;
  std::vector<bool> seen(nodes.size(), false);
  for (const std::int32_t i : slots) {
    if (i < 0 || seen[static_cast<std::size_t>(i)]) continue;
    seen[static_cast<std::size_t>(i)] = true;
    auto& n = *nodes[static_cast<std::size_t>(i)];
    if (std::error_code ec = n.conn.ensure_connected()) return note(&n, ec);
    const deployment_report& r = n.conn.report();
    for (const std::string& risk : r.risks) all.risks.push_back(n.where + ": " + risk);
    all.facts += (all.facts.empty() ? "" : " | ") + r.facts;
  }
  return all;
}

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_DETAIL_REDIS_CLUSTER_MULTI_HPP
