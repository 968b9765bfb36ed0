// SPDX-License-Identifier: MIT
// holdfast/stores/detail/postgres_deployment.hpp - what postgres_store reads about its
// deployment (deployment.hpp): fsync, synchronous_commit, synchronous_standby_names, the standbys
// in pg_stat_replication and their sync_state, whether the server is in recovery, and its life
// (system identifier and the timeline of its current WAL). One query, run when asked. And the
// life check every session runs once at connect (postgres_life_sql). Part of stores/postgres.hpp;
// not for users.
#ifndef HOLDFAST_STORES_DETAIL_POSTGRES_DEPLOYMENT_HPP
#define HOLDFAST_STORES_DETAIL_POSTGRES_DEPLOYMENT_HPP

#include <libpq-fe.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <string_view>

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

// The server's life, "<system_identifier>/<timeline of the current WAL>" (as deployment reports
// it). A promoted standby (pg_promote, pg_ctl promote) and a point-in-time recovery start a new
// timeline; a dump restored into another cluster has another system identifier.
inline constexpr const char* postgres_life_expr =
    "(SELECT system_identifier::text FROM pg_control_system()) || '/' || "
    "substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8)";

/// The life check a session of postgres_store runs once, at connect, before any statement of
/// that session can draw a token (issue 20, "recovery without an operator"). The life that last
/// drew tokens is recorded in the lease table itself, in a row no lease can have (key_hash = the
/// empty bytea: sha256 is always 32 bytes; expires_at = infinity, so purge_expired keeps it). A
/// life other than the recorded one (a promoted asynchronous standby, a point-in-time recovery, a
/// restore into another cluster) may have lost grants the old life made and so be behind tokens
/// fences admitted: the sequence is raised by 2^32 (capped at 2^63-1: then token_exhausted)
/// and the new life recorded, under the row's lock, so concurrent sessions raise once. A session
/// on the recorded life only reads the row (no lock, no write).
///
/// Why 2^32 suffices, and never goes below an admitted token: a fence admitted only tokens some
/// life drew from the sequence. The new life holds the sequence as of its copy of the old life's
/// WAL (nextval WAL-logs 32 values ahead, so it is at least every value drawn before that point),
/// and the old life drew one value per acquire statement after it: a token above the raised value
/// needs more than 2^32 acquires the copy never received (at ~0.2 ms a commit, ~10 days of lag).
/// The raise only adds (setval of last_value + 2^32), so it never lowers the sequence. No record
/// (a new table, or one made before lives were kept): on timeline 1 (a server never promoted nor
/// recovered to a point in time) the life is recorded without a raise; on a later timeline the
/// sequence is raised all the same, since the missing table or record may be exactly what the
/// promotion lost (a store whose first grants had not reached the standby).
///
/// On a server in recovery the check refuses the session (SQLSTATE 25006, misconfigured): a
/// session opened on a standby that is later promoted would otherwise draw tokens unchecked.
/// Not covered (same system identifier and timeline): a file-level copy of the data directory
/// put back, and a crash with fsync or synchronous_commit off; deployment() names the latter.
/// `t` and `s` are the quoted table and sequence names.
inline std::string postgres_life_sql(std::string_view t, std::string_view s) {
  std::string tag = "$holdfast_life$";
  while (t.find(tag) != std::string_view::npos || s.find(tag) != std::string_view::npos) {
    tag.insert(tag.size() - 1, "_");
  }
  std::string lit = "'";  // s as an SQL literal (quotes doubled) for regclass
  for (char c : s) {
    if (c == '\'') lit += '\'';
    lit += c;
  }
  lit += "'";
  std::string sql = "DO " + tag + " DECLARE now_life bytea; old_life bytea; BEGIN ";
  sql +=
      "IF pg_is_in_recovery() THEN RAISE EXCEPTION USING ERRCODE = '25006', MESSAGE = "
      "'holdfast: the server is a standby (in recovery): it grants nothing'; END IF; ";
  sql += "now_life := convert_to(" + std::string(postgres_life_expr) + ", 'UTF8'); ";
  // The common case reads the record without a lock or a write: same life, nothing to do. (owner
  // first: a table of another layout then fails as undefined_column, misconfigured.)
  sql += "IF EXISTS (SELECT 1 FROM " + std::string(t) +
         " WHERE owner = now_life AND key_hash = ''::bytea) THEN RETURN; END IF; ";
  // No record: on timeline 1 the life is recorded as is; on a later one (a promoted standby,
  // a point-in-time recovery) it is recorded as the empty life, so the raise below happens.
  sql += "INSERT INTO " + std::string(t) +
         " (key_hash, key, owner, token, expires_at) VALUES (''::bytea, ''::bytea, CASE WHEN "
         "substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8) = '00000001' THEN now_life ELSE "
         "''::bytea END, 0, 'infinity') ON CONFLICT (key_hash) DO NOTHING; ";
  sql += "SELECT owner INTO old_life FROM " + std::string(t) +
         " WHERE key_hash = ''::bytea FOR UPDATE; ";
  sql += "IF old_life IS DISTINCT FROM now_life THEN PERFORM setval(" + lit +
         "::regclass, LEAST(9223372036854775807::numeric, (SELECT last_value FROM " +
         std::string(s) + ")::numeric + 4294967296)::bigint, true); UPDATE " + std::string(t) +
         " SET owner = now_life WHERE key_hash = ''::bytea; END IF; END " + tag;
  return sql;
}

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
