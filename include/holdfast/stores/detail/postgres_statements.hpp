// SPDX-License-Identifier: MIT
// holdfast/stores/detail/postgres_statements.hpp - the prepared statements of postgres_store (the
// table in the overview of stores/postgres.hpp: acquire, renew, release, inspect, last token,
// wait, purge) and the name of its notification channel. Not for users.
#ifndef HOLDFAST_STORES_DETAIL_POSTGRES_STATEMENTS_HPP
#define HOLDFAST_STORES_DETAIL_POSTGRES_STATEMENTS_HPP

#include <string>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/stores/detail/postgres_link.hpp"
#include "holdfast/stores/detail/postgres_sql.hpp"
#include "holdfast/stores/postgres_options.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

/// The notification channel of a table: "<schema>.<table>.released" (or without the schema), at
/// most 63 bytes (PostgreSQL truncates identifiers there; a LISTEN of the longer name would miss).
/// postgres_listen.hpp LISTENs on it; the release statements NOTIFY it.
inline std::string pg_channel_name(const postgres_options& o) {
  std::string c = o.schema.empty() ? o.table : o.schema + "." + o.table;
  c += ".released";
  if (c.size() > 63) c.resize(63);
  return c;
}

// postgres_store's statements, in the order of its stmt_* indices (acquire, renew, release,
// inspect, last token, wait, purge).
inline std::vector<pg_link::statement> pg_store_statements(const postgres_options& o) {
  const std::string t = pg_qualified(o.schema, o.table).value_or("\"invalid\"");
  const std::string s = pg_qualified(o.schema, pg_sequence_name(o)).value_or("\"invalid\"");
  const std::string next = "nextval(" + pg_literal(s) + "::regclass)";
  // "now" is read once, when the proposed row is built; EXCLUDED.expires_at - ttl gives it back
  // inside ON CONFLICT. A statement that waited for the row lock judges expiry by that earlier
  // instant: it may answer busy a little longer, never grant early.
  // A grant is held while clock_timestamp() < read + ttl + 1 us: the clock reads in whole
  // microseconds (rounded down), so the tick already elapsed at the read counts against the
  // grant and the lease lasts at least its TTL in real time (store.hpp, T2).
  const std::string hold = "($3 * interval '1 millisecond' + interval '1 microsecond')";
  const std::string now = "(EXCLUDED.expires_at - " + hold + ")";
  const std::string live_same_owner = "(l.owner = EXCLUDED.owner AND l.expires_at > " + now + ")";
  return {
      {"holdfast_acquire",
       "INSERT INTO " + t +
           " AS l (key_hash, key, owner, token, expires_at) VALUES (sha256($1), $1, $2, " + next +
           ", clock_timestamp() + " + hold +
           ") ON CONFLICT (key_hash) DO "
           "UPDATE "
           "SET owner = EXCLUDED.owner, token = CASE WHEN " +
           live_same_owner + " THEN l.token ELSE " + next + " END, expires_at = CASE WHEN " +
           live_same_owner +
           " THEN GREATEST(l.expires_at, EXCLUDED.expires_at) ELSE EXCLUDED.expires_at END "
           "WHERE l.expires_at <= " +
           now + " OR l.owner = EXCLUDED.owner RETURNING token",
       {pg_bytea_oid, pg_bytea_oid, pg_int8_oid}},
      {"holdfast_renew",
       "UPDATE " + t +
           " SET expires_at = clock_timestamp() + $4 * interval '1 millisecond' + "
           "interval '1 microsecond' "
           "WHERE key_hash = sha256($1) AND owner = $2 AND token = $3 "
           "AND expires_at > clock_timestamp() RETURNING token",
       {pg_bytea_oid, pg_bytea_oid, pg_int8_oid, pg_int8_oid}},
      // A release lost in a failover only keeps the key held until its expiry, so its commit
      // waits for no standby (synchronous_commit = local for this transaction, never raised).
      {"holdfast_release",
       "WITH c AS MATERIALIZED (SELECT set_config('synchronous_commit', CASE WHEN "
       "current_setting('synchronous_commit') = 'off' THEN 'off' ELSE 'local' END, true)), "
       "r AS (UPDATE " +
           t +
           " SET owner = ''::bytea, expires_at = '-infinity' "
           "WHERE key_hash = sha256($1) AND owner = $2 AND token = $3 "
           "RETURNING token, key_hash) "
           "SELECT r.token FROM c, r CROSS JOIN LATERAL (SELECT pg_notify(" +
           pg_literal(pg_channel_name(o)) + ", encode(r.key_hash, 'hex'))) AS n",
       {pg_bytea_oid, pg_bytea_oid, pg_int8_oid}},
      {"holdfast_inspect",
       "WITH n AS MATERIALIZED (SELECT clock_timestamp() AS now) "
       "SELECT owner, token, GREATEST(0, floor(EXTRACT(EPOCH FROM (expires_at - n.now)) * 1000))"
       "::int8 FROM " +
           t + ", n WHERE key_hash = sha256($1) AND expires_at > n.now",
       {pg_bytea_oid}},
      {"holdfast_last_token",
       "SELECT CASE WHEN is_called THEN last_value ELSE 0 END::int8 FROM " + s,
       {}},
      {"holdfast_wait",
       "SELECT encode(sha256($1), 'hex'), l.left_ms, l.token FROM (SELECT 1) AS one LEFT JOIN "
       "(SELECT GREATEST(0, ceil(EXTRACT(EPOCH FROM (expires_at - clock_timestamp())) * "
       "1000))::int8 AS left_ms, token FROM " +
           t + " WHERE key_hash = sha256($1) AND expires_at > clock_timestamp()) AS l ON true",
       {pg_bytea_oid}},
      {"holdfast_purge",
       "WITH d AS (DELETE FROM " + t +
           " WHERE expires_at < clock_timestamp() - $1 * interval '1 millisecond' RETURNING 1) "
           "SELECT count(*)::int8 FROM d",
       {pg_int8_oid}},
  };
}

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_DETAIL_POSTGRES_STATEMENTS_HPP
