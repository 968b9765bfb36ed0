// SPDX-License-Identifier: MIT
// holdfast/stores/postgres_options.hpp - postgres_options: how postgres_store reaches PostgreSQL
// (conninfo, timeouts) and where it keeps its lease records (schema, table, sequence, rw_table);
// and postgres_max_token, the greatest token its sequence can issue. Part of stores/postgres.hpp
// (include that); on its own it needs no libpq.
#ifndef HOLDFAST_STORES_POSTGRES_OPTIONS_HPP
#define HOLDFAST_STORES_POSTGRES_OPTIONS_HPP

#include <chrono>
#include <climits>
#include <cstdint>
#include <limits>
#include <string>
#include <system_error>

#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/store.hpp"
#include "holdfast/stores/detail/postgres_sql.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

/// The greatest token a PostgreSQL bigint sequence can issue.
inline constexpr fencing_token postgres_max_token{
    static_cast<fencing_token::rep>(std::numeric_limits<std::int64_t>::max())};

/// How to reach PostgreSQL and where holdfast keeps its lease records there.
struct postgres_options {
  /// A libpq connection string ("host=10.0.0.5 dbname=app user=leases") or URI
  /// ("postgresql://..."); empty uses libpq's defaults and PG* environment variables.
  std::string conninfo{};
  /// Schema of the table and sequence; empty means the first schema on the search_path.
  std::string schema{};
  /// Table of lease records, 1..63 bytes, no NUL; quoted, so any other bytes are fine.
  /// Default "holdfast_leases".
  std::string table = "holdfast_leases";
  /// The token sequence; empty (default) means table + "_token_seq". Same rules as table.
  std::string sequence{};
  /// The table of read-write grants (postgres_store::try_acquire_rw; one row per key and owner,
  /// detail/postgres_shared.hpp); empty (default) means table + "_rw". Same rules as table.
  std::string rw_table{};
  /// Creates the tables and sequence (IF NOT EXISTS, under an advisory lock so that concurrent
  /// first connections do not race) on every (re)connect. Turn off where the role may not create
  /// tables; then create them from postgres_store::schema_sql(). Default true.
  bool create_schema = true;
  /// application_name reported to the server (unless conninfo sets one). Default "holdfast".
  std::string application_name = "holdfast";
  /// Bound on connecting and the session setup (SET, CREATE, PREPARE), in ms, > 0.
  std::chrono::milliseconds connect_timeout{5000};
  /// Bound on each statement, in ms, > 0: enforced by the client (the connection is dropped and
  /// errc::timeout reported) and by the server (statement_timeout, errc::timeout).
  std::chrono::milliseconds command_timeout{5000};
  /// The shortest lease TTL (ms) this store is asked for: try_acquire(), acquire(), acquire_all()
  /// and the recipes' constructors (mutex, election, semaphore) refuse a shorter one with
  /// errc::invalid_argument, naming this limit, before anything is sent
  /// (holdfast::store_min_ttl()). A TTL must outlast one round trip plus the holder's drift and
  /// margin, or every grant arrives with no validity left and a blocking acquire answers
  /// errc::timeout however long it may wait. The bound comes from this option, not from a measured
  /// round trip (one slow reply would make a TTL valid one moment and refused the next). Default 10
  /// ms: 7.9 ms of validity after the default drift and margin (1%, 2 ms), many round trips to a
  /// local or LAN server; for a distant server set it to (p99 round trip + margin) / (1 - drift).
  /// In [0, max_ttl]; 0 turns the check off.
  std::chrono::milliseconds min_ttl{10};

  /// Returns errc::invalid_argument if a name or timeout is out of range; a zero code otherwise.
  /// `why`, if given, gets what is wrong, naming the field ("invalid postgres_options:
  /// command_timeout 0 ms is not in 1 .. 2147483647 ms").
  [[nodiscard]] std::error_code check(std::string* why = nullptr) const;
};

namespace detail {

inline std::string pg_sequence_name(const postgres_options& o) {
  return o.sequence.empty() ? o.table + "_token_seq" : o.sequence;
}
inline std::string pg_rw_table_name(const postgres_options& o) {
  return o.rw_table.empty() ? o.table + "_rw" : o.rw_table;
}

}  // namespace detail

inline std::error_code postgres_options::check(std::string* why) const {
  auto bad = [&](const std::string& what) -> std::error_code {
    if (why != nullptr) *why = "invalid postgres_options: " + what;
    return errc::invalid_argument;
  };
  if (connect_timeout <= std::chrono::milliseconds::zero()) {
    return bad("connect_timeout " + std::to_string(connect_timeout.count()) + " ms is not > 0");
  }
  if (command_timeout <= std::chrono::milliseconds::zero() || command_timeout.count() > INT_MAX) {
    return bad("command_timeout " + std::to_string(command_timeout.count()) +
               " ms is not in 1 .. 2147483647 ms");
  }
  if (min_ttl < std::chrono::milliseconds::zero() || min_ttl > max_ttl) {
    return bad("min_ttl " + std::to_string(min_ttl.count()) + " ms is not in 0 .. max_ttl");
  }
  if (conninfo.find('\0') != std::string::npos) return bad("conninfo contains NUL");
  if (application_name.find('\0') != std::string::npos) {
    return bad("application_name contains NUL");
  }
  if (!detail::pg_qualified(schema, table)) {
    return bad("schema or table \"" + table + "\" is empty, over 63 bytes or contains NUL");
  }
  if (!detail::pg_qualified(schema, detail::pg_sequence_name(*this))) {
    return bad("sequence \"" + detail::pg_sequence_name(*this) +
               "\" is empty, over 63 bytes or contains NUL");
  }
  if (!detail::pg_qualified(schema, detail::pg_rw_table_name(*this))) {
    return bad("rw_table \"" + detail::pg_rw_table_name(*this) +
               "\" is empty, over 63 bytes or contains NUL (empty: table + \"_rw\")");
  }
  return {};
}

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_POSTGRES_OPTIONS_HPP
