// SPDX-License-Identifier: MIT
// holdfast/stores/detail/redis_deployment.hpp - what redis_store reads about its deployment at
// connect time (INFO server, replication and persistence; CONFIG GET appendfsync) turned into a
// deployment_report: the server's life ("<run_id>/<master_replid>") and the ways it can lose
// grants. Part of stores/redis.hpp; not for users.
#ifndef HOLDFAST_STORES_DETAIL_REDIS_DEPLOYMENT_HPP
#define HOLDFAST_STORES_DETAIL_REDIS_DEPLOYMENT_HPP

#include <hiredis/hiredis.h>

#include <cstddef>
#include <cstdlib>
#include <string>
#include <string_view>

#include "holdfast/deployment.hpp"
#include "holdfast/detail/config.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

/// The value of `field` in an INFO reply ("field:value" lines), or "" if absent or `info` is no
/// bulk string.
inline std::string redis_info_field(const redisReply* info, std::string_view field) {
  if (info == nullptr || (info->type != REDIS_REPLY_STRING && info->type != REDIS_REPLY_STATUS)) {
    return {};
  }
  const std::string_view text(info->str, info->len);
  std::size_t at = 0;
  while (at < text.size()) {
    std::size_t end = text.find('\n', at);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(at, end - at);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.size() > field.size() && line.compare(0, field.size(), field) == 0 &&
        line[field.size()] == ':') {
      return std::string(line.substr(field.size() + 1));
    }
    at = end + 1;
  }
  return {};
}

/// The text of errc::misconfigured for a store or fence pointed, without Sentinel, at a replica
/// (`where`, "host:port"): names it and, from its INFO replication reply (may be null or an
/// error), its primary, and says what to change. `said` is the server's own answer, if any.
inline std::string redis_replica_text(const std::string& where, const redisReply* replication,
                                      const std::string& said) {
  const std::string host = redis_info_field(replication, "master_host");
  const std::string port = redis_info_field(replication, "master_port");
  const std::string primary = host.empty() ? "an unknown primary" : host + ":" + port;
  std::string text = "redis: redis_options::host/port " + where + " is a replica of " + primary +
                     " (INFO replication master_host:master_port), not the primary";
  if (!said.empty()) text += " (" + said + ")";
  return text + ": point host/port at the primary, or set redis_options::sentinels and " +
         "sentinel_master to follow failovers";
}

/// The report of a Redis deployment from its INFO server, replication and persistence replies
/// and its CONFIG GET appendfsync reply (any of them may be an error reply: then unknown).
inline deployment_report redis_deployment(const redisReply* server, const redisReply* replication,
                                          const redisReply* persistence, const redisReply* fsync,
                                          int wait_replicas) {
  deployment_report out;
  const std::string run_id = redis_info_field(server, "run_id");
  const std::string replid = redis_info_field(replication, "master_replid");
  if (!run_id.empty() && !replid.empty()) out.life = run_id + "/" + replid;
  const std::string role = redis_info_field(replication, "role");
  const std::string replicas = redis_info_field(replication, "connected_slaves");
  const std::string aof = redis_info_field(persistence, "aof_enabled");
  std::string appendfsync;
  if (fsync != nullptr && fsync->type == REDIS_REPLY_ARRAY && fsync->elements == 2 &&
      fsync->element[1]->type == REDIS_REPLY_STRING) {
    appendfsync.assign(fsync->element[1]->str, fsync->element[1]->len);
  }
  auto known = [](const std::string& v) { return v.empty() ? std::string("unknown") : v; };
  out.facts = "role=" + known(role) + " connected_slaves=" + known(replicas) +
              " aof_enabled=" + known(aof) + " appendfsync=" + known(appendfsync) +
              " wait_replicas=" + std::to_string(wait_replicas);
  if (aof == "0") {
    out.risks.push_back(
        "appendonly no: a restart loses every grant, the token counter and its life record; "
        "tokens start again at 1 and the fences refuse them (stale_token, token_reissued) until "
        "raise_token_floor(the newest token a fence admitted) (set appendonly yes, appendfsync "
        "always)");
  } else if (aof.empty()) {
    out.risks.push_back("INFO persistence could not be read: persistence unknown");
  } else if (appendfsync != "always") {
    out.risks.push_back("appendfsync " + known(appendfsync) +
                        ": a crash of the machine loses the grants of the last second (the next "
                        "life raises the counter past them) (set appendfsync always)");
  }
  if (!replicas.empty() && replicas != "0" && wait_replicas == 0) {
    out.risks.push_back(
        replicas +
        " asynchronous replica(s) and wait_replicas 0: a failover to a replica loses the grants "
        "it had not received (set redis_options::wait_replicas >= 1)");
  }
  if (wait_replicas > 0 && !replicas.empty() &&
      std::strtol(replicas.c_str(), nullptr, 10) < wait_replicas) {
    out.risks.push_back("wait_replicas " + std::to_string(wait_replicas) + " but " + replicas +
                        " replica(s) connected: every grant is refused as grant_not_durable");
  }
  return out;
}

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_DETAIL_REDIS_DEPLOYMENT_HPP
