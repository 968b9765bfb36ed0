// SPDX-License-Identifier: MIT
// holdfast/deployment.hpp - deployment_report: what a real store found out about its deployment
// when it connected, and whether that deployment can lose grants the store has reported.
//
// A store can lose its newest grants (DESIGN.md, "Lost grants"): a failover to an asynchronous
// replica or standby, a crash inside an fsync window, a restart without persistence, a restore.
// Fences stay safe whatever is lost (they admit by token and owner), but a lost grant can give a
// lease to a second holder while the first still believes it holds it, and it costs the fences'
// liveness until the store's tokens pass what they admitted. The real stores say so in one
// shape, `store.deployment()`: redis_store returns the report it read at its most recent
// (re)connect (in the setup round trip); postgres_store reads it when asked (one query):
//
//   store       | reads                                         | can lose grants when
//   ------------+-----------------------------------------------+------------------------------
//   redis_store | ROLE, INFO server/replication/persistence,    | no AOF, or appendfsync not
//               | CONFIG GET appendfsync                        | always; replicas (failover)
//               |                                               | and wait_replicas == 0
//   postgres    | synchronous_commit, synchronous_standby_names,| synchronous_commit off/local;
//               | pg_stat_replication, fsync                    | standbys but none synchronous
//   etcd_store  | cluster/member/list, maintenance/status       | a single member; a restored
//               |                                               | snapshot (revisions go back)
//   zookeeper   | zoo_getconfig (members), "srvr" of the       | a standalone server (a crash
//               | connected server (mode, version, zxid)        | with forceSync=no); a restore
//
// The report is advice to an operator (log it, export it as a metric): nothing in holdfast
// changes its behaviour because of it.
#ifndef HOLDFAST_DEPLOYMENT_HPP
#define HOLDFAST_DEPLOYMENT_HPP

#include <string>
#include <vector>

#include "holdfast/detail/config.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

/// What a store read about its deployment when it connected (see the file overview). A value
/// type; thread-safety as any std::string holder.
struct deployment_report {
  /// One sentence per way the deployment can lose a grant the store reported, each naming the
  /// setting and what to configure instead, e.g. "appendonly no: a restart loses every grant and
  /// the token counter (set appendonly yes, appendfsync always)". Empty: none found.
  std::vector<std::string> risks;
  /// What the store read, as "name=value" pairs separated by spaces (for logs), e.g.
  /// "role=master connected_slaves=1 aof_enabled=0 appendfsync=everysec wait_replicas=0".
  std::string facts;
  /// The identity of the server's current life, which changes on a restart, a promotion or a
  /// restore (Redis: "<run_id>/<master_replid>"; PostgreSQL: "<system_identifier>/<timeline>";
  /// etcd: "<cluster_id>"). Empty if the store could not read it.
  std::string life;

  /// True iff the deployment can lose grants the store reported (risks is not empty).
  [[nodiscard]] bool can_lose_grants() const noexcept { return !risks.empty(); }
};

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_DEPLOYMENT_HPP
