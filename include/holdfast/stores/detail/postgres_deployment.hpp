// SPDX-License-Identifier: MIT
// holdfast/stores/detail/postgres_deployment.hpp - what postgres_store reads about its
// deployment (deployment.hpp): fsync, synchronous_commit, synchronous_standby_names, the standbys
// in pg_stat_replication and their sync_state, whether the server is in recovery, and its life
// (system identifier and the timeline of its current WAL). One query, run when asked. Part of
// stores/postgres.hpp; not for users.
#ifndef HOLDFAST_STORES_DETAIL_POSTGRES_DEPLOYMENT_HPP
#define HOLDFAST_STORES_DETAIL_POSTGRES_DEPLOYMENT_HPP

#include <libpq-fe.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include "holdfast/deployment.hpp"
#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/result.hpp"
#include "holdfast/stores/detail/postgres_link.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

// Columns: fsync, synchronous_commit, synchronous_standby_names, standbys streaming, of them
// synchronous ('sync' or 'quorum': a role without pg_read_all_stats sees no sync_state, and so
// none), in recovery, system identifier, the current WAL's timeline (hex; NULL in recovery).
inline constexpr const char* postgres_deployment_sql =
    "SELECT current_setting('fsync'), current_setting('synchronous_commit'), "
    "current_setting('synchronous_standby_names'), "
    "(SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'), "
    "(SELECT count(*) FROM pg_stat_replication WHERE sync_state IN ('sync', 'quorum')), "
    "pg_is_in_recovery(), (SELECT system_identifier::text FROM pg_control_system()), "
    "CASE WHEN pg_is_in_recovery() THEN NULL "
    "ELSE substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) END";

/// The report of the PostgreSQL server `link` is connected to (connecting first).
/// \returns it; store_unavailable, timeout, protocol_error as the link reports them.
inline result<deployment_report> read_postgres_deployment(pg_link& link) {
  if (std::error_code ec = link.ensure_connected()) return ec;
  const auto deadline = std::chrono::steady_clock::now() + link.options().command_timeout;
  result<pg_result_ptr> r =
      link.run([](PGconn* c) { return PQsendQuery(c, postgres_deployment_sql); }, deadline, false);
  if (!r) return r.error();
  const PGresult* q = r->get();
  if (PQntuples(q) != 1 || PQnfields(q) != 8) {
    return link.fail(errc::protocol_error, "postgres: deployment: unexpected result shape");
  }
  auto col = [&](int i) {
    return PQgetisnull(q, 0, i) ? std::string() : std::string(PQgetvalue(q, 0, i));
  };
  const std::string fsync = col(0), commit = col(1), names = col(2), standbys = col(3);
  const long long sync = std::atoll(col(4).c_str());
  const bool recovery = col(5) == "t";
  deployment_report out;
  out.life = col(6) + "/" + col(7);
  out.facts = "fsync=" + fsync + " synchronous_commit=" + commit + " synchronous_standby_names='" +
              names + "' standbys=" + standbys + " synchronous_standbys=" + std::to_string(sync) +
              " in_recovery=" + (recovery ? "true" : "false");
  if (recovery) {
    out.risks.push_back("the server is a standby (in recovery): it grants nothing");
  }
  if (fsync == "off") {
    out.risks.push_back(
        "fsync off: a crash of the machine can lose any committed grant and sequence value (set "
        "fsync = on)");
  }
  if (commit == "off") {
    out.risks.push_back(
        "synchronous_commit off: a crash loses the last commits (up to 3 x wal_writer_delay), "
        "grants and sequence values among them (set synchronous_commit = on)");
  }
  const bool has_standbys = !standbys.empty() && standbys != "0";
  if (has_standbys && (names.empty() || commit == "local" || commit == "off")) {
    out.risks.push_back(standbys +
                        " asynchronous standby(s): a promotion loses the commits not yet streamed, "
                        "grants and sequence values among them (set synchronous_standby_names and "
                        "synchronous_commit = on or remote_apply)");
  } else if (has_standbys && sync == 0) {
    out.risks.push_back(
        "synchronous_standby_names is set but no standby is synchronous now: "
        "commits wait for one (grants time out) until it connects");
  }
  return out;
}

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_DETAIL_POSTGRES_DEPLOYMENT_HPP
