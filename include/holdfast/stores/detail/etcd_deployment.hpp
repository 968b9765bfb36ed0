// SPDX-License-Identifier: MIT
// holdfast/stores/detail/etcd_deployment.hpp - what etcd_store reads about its deployment
// (deployment.hpp): the members (cluster/member/list), the answering member's status
// (maintenance/status: version, leader, Raft term, database size) and the cluster ID, its life.
// Part of stores/etcd.hpp; not for users.
//
// What an etcd deployment can lose: nothing it reported, short of a restore. Every grant is a
// Raft commit fsync'd on a majority before etcd answers, so member crashes, leader changes and
// full-cluster restarts keep every revision. What loses grants: a snapshot restore (etcdctl
// snapshot restore; it rewinds the revision to the snapshot's, so tokens come again), the loss
// of a majority's disks, and --unsafe-no-fsync (etcd 3.5+; not visible over the API). The report
// names a rewind this store saw (etcd_link::new_life); the rest it cannot see.
#ifndef HOLDFAST_STORES_DETAIL_ETCD_DEPLOYMENT_HPP
#define HOLDFAST_STORES_DETAIL_ETCD_DEPLOYMENT_HPP

#include <nlohmann/json.hpp>
#include <string>

#include "holdfast/deployment.hpp"
#include "holdfast/detail/config.hpp"
#include "holdfast/result.hpp"
#include "holdfast/stores/detail/etcd_calls.hpp"
#include "holdfast/stores/detail/etcd_link.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

/// The report of the etcd cluster `link` talks to: two requests (member list, status).
/// \returns it; store_unavailable, timeout, protocol_error as the link reports them.
inline result<deployment_report> read_etcd_deployment(etcd_link& link) {
  // Before these answers, which may note one too. A life already settled (raised past) is still
  // reported: the grants it lost are gone whether or not this store has recovered since.
  const bool unsettled = link.new_life();
  const std::uint64_t lives = link.lives_seen();
  const std::int64_t below = link.rewound_below();
  result<nlohmann::json> members = link.post("/cluster/member/list", "{}");
  if (!members) return members.error();
  result<nlohmann::json> status = link.post("/maintenance/status", "{}");
  if (!status) return status.error();
  const auto list = members->find("members");
  const std::size_t n = list != members->end() && list->is_array() ? list->size() : 0;
  const nlohmann::json* header = json_object(*status, "header");
  if (n == 0 || header == nullptr) return etcd_shape(link, "deployment");
  deployment_report out;
  out.life = header->value("cluster_id", std::string());
  out.facts = "members=" + std::to_string(n) + " version=" + status->value("version", "") +
              " leader=" + status->value("leader", "") +
              " member=" + header->value("member_id", std::string()) +
              " raft_term=" + status->value("raftTerm", "") +
              " revision=" + header->value("revision", "") +
              " db_size=" + status->value("dbSize", "");
  if (lives > 0) {
    out.risks.push_back("the revision went back (or the cluster ID changed) " +
                        std::to_string(lives) + (lives == 1 ? " time" : " times") +
                        " since this store started, the latest below " + std::to_string(below) +
                        ": a snapshot restore; tokens up to that come again, refused by fences, " +
                        (unsettled ? "raised past on this store's next attempt"
                                   : "already raised past by this store") +
                        " (restore with etcdutl snapshot restore --bump-revision)");
  }
  if (n % 2 == 0) {
    out.risks.push_back(std::to_string(n) +
                        " members: an even count tolerates no more failures than one fewer; "
                        "a partition in halves stops every grant (run 3 or 5)");
  }
  return out;
}

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_DETAIL_ETCD_DEPLOYMENT_HPP
