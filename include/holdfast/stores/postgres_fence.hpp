// SPDX-License-Identifier: MIT
// holdfast/stores/postgres_fence.hpp - fenced writes in the user's own PostgreSQL tables, the
// fence checked and the data written in ONE statement. Part of stores/postgres.hpp (include
// that). Opt-in: needs libpq.
//
// A fence holds the newest admitted token and the owner it was admitted for. Every statement here
// admits a write by (token, owner), the rule of every holdfast fence (fence.hpp; Kleppmann 2016):
//
//   the fence holds          | a write with (token, owner)     | outcome
//   -------------------------+---------------------------------+------------------------------
//   nothing (NULL, no row)   | any                             | admitted, fence := (t, owner)
//   (n, o), n < token        | any                             | admitted, fence := (t, owner)
//   (n, o), n == token       | owner == o                      | admitted (one holder, again)
//   (n, o), n == token       | owner != o                      | errc::token_reissued
//   (n, o), n > token        | any                             | errc::stale_token
//
// An equal token from another owner means the lease store lost a grant and issued its token
// again (a failover to a lagging replica, a restore): two holders under one token are never both
// admitted. There is no token-only path.
//
//   statement               | the fence lives            | the write
//   ------------------------+----------------------------+--------------------------------------
//   postgres_fenced_update  | in the row (two columns)   | UPDATE of one existing row
//   postgres_fenced_upsert  | in the row (two columns)   | INSERT of a new row, or UPDATE of it
//   postgres_fenced_insert  | in a fence row of its own  | INSERT into another table (a run log),
//                           |   (upserted: no seeding)   |   only if the fence row admitted it
//
// Each is one statement with data-modifying CTEs; PostgreSQL re-checks the admission on the newest
// row version after waiting for a concurrent writer (UPDATE's and ON CONFLICT's row locking), so
// racing writers are admitted in token order and an older token never lands after a newer one.
// Run a statement on your own connection (execute(PGconn*, ...): inside your transaction, if
// any) or through postgres_fence, which owns a connection, bounds every call by the
// postgres_options timeouts and reconnects after a failure. Every message names the fence.
#ifndef HOLDFAST_STORES_POSTGRES_FENCE_HPP
#define HOLDFAST_STORES_POSTGRES_FENCE_HPP

#include <libpq-fe.h>

#include <chrono>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/result.hpp"
#include "holdfast/stores/detail/link_client.hpp"
#include "holdfast/stores/detail/postgres_link.hpp"
#include "holdfast/stores/detail/postgres_sql.hpp"
#include "holdfast/stores/postgres_options.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

/// One parameter of a fenced statement: text (the server parses it as the column's type, so it
/// may not contain NUL), raw bytes (binary format, for a bytea column), or SQL NULL.
struct postgres_param {
  std::optional<std::string_view> value;  ///< nullopt is SQL NULL
  bool binary = false;                    ///< true: raw bytes for a bytea column

  /// A text parameter.
  postgres_param(std::string_view text) : value(text) {}  // NOLINT: implicit by design
  /// A text parameter.
  postgres_param(const char* text) : value(std::string_view(text)) {}  // NOLINT
  /// A text parameter.
  postgres_param(const std::string& text) : value(std::string_view(text)) {}  // NOLINT
  /// SQL NULL.
  static postgres_param null() { return postgres_param(std::nullopt, false); }
  /// Raw bytes, sent in binary format (for a bytea column; any bytes, NUL included).
  static postgres_param bytes(std::string_view raw) { return postgres_param(raw, true); }

 private:
  postgres_param(std::optional<std::string_view> v, bool b) : value(v), binary(b) {}
};

/// Where a fence lives: a table, the column that identifies a row, and the row's two fence
/// columns: the newest admitted token (bigint, NULL: none yet) and the owner it was admitted for
/// (text, NULL: none yet). For postgres_fenced_update/_upsert the table is the user's data table;
/// for postgres_fenced_insert it is a fence table of its own (postgres_fenced_insert::table_sql).
/// Names are quoted (1..63 bytes, no NUL).
struct postgres_fence_options {
  std::string schema{};                      ///< Empty: the search_path decides.
  std::string table;                         ///< The table holding the fence columns.
  std::string id_column = "id";              ///< The column that identifies a row (unique).
  std::string fence_column = "fence";        ///< bigint: the row's newest admitted token.
  std::string owner_column = "fence_owner";  ///< text: the owner admitted with that token.
};

namespace detail {

/// The quoted names of a fence, and its name in messages ("postgres fence \"t\".\"fence\"").
struct pg_fence_names {
  std::string table, id, fence, owner, label;
};

inline std::optional<pg_fence_names> pg_fence_names_of(const postgres_fence_options& o) {
  std::optional<std::string> t = pg_qualified(o.schema, o.table);
  std::optional<std::string> id = pg_quote_ident(o.id_column);
  std::optional<std::string> f = pg_quote_ident(o.fence_column);
  std::optional<std::string> w = pg_quote_ident(o.owner_column);
  if (!t || !id || !f || !w) return std::nullopt;
  std::string label = "postgres fence " + *t + "." + *f;
  return pg_fence_names{*t, *id, *f, *w, std::move(label)};
}

/// The admission predicate on the row `row` ($1 token, $3 owner): the fence's rule above.
inline std::string pg_fence_admits(const pg_fence_names& n, const std::string& row) {
  const std::string f = row + "." + n.fence;
  return "(" + f + " IS NULL OR " + f + " < $1 OR (" + f + " = $1 AND " + row + "." + n.owner +
         " = $3))";
}

/// Whether trusted SQL text from the caller can be placed in a statement (non-empty, no NUL).
inline bool pg_usable_sql(std::string_view sql) {
  return !sql.empty() && sql.find('\0') == std::string_view::npos;
}

/// The libpq parameter arrays of one call: $1 token, $2 id, $3 owner, $4... the caller's. Text
/// parameters are copied so that each is NUL-terminated.
struct pg_fence_params {
  std::vector<std::string> copies;
  std::vector<const char*> values;
  std::vector<int> lengths;
  std::vector<int> formats;

  bool add(const postgres_param& p) {
    if (!p.value) {
      values.push_back(nullptr);
      lengths.push_back(0);
      formats.push_back(0);
      return true;
    }
    if (p.value->size() > static_cast<std::size_t>(INT_MAX)) return false;
    if (!p.binary && p.value->find('\0') != std::string_view::npos) return false;
    values.push_back(p.value->data() != nullptr ? p.value->data() : "");
    lengths.push_back(static_cast<int>(p.value->size()));
    formats.push_back(p.binary ? 1 : 0);
    return true;
  }
  void terminate_texts() {
    copies.reserve(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (values[i] != nullptr && formats[i] == 0) {
        copies.emplace_back(values[i], static_cast<std::size_t>(lengths[i]));
        values[i] = copies.back().c_str();
      }
    }
  }
};

}  // namespace detail

/// A fenced write statement, made by postgres_fenced_update, _upsert or _insert: the admission by
/// (token, owner) and the caller's write in ONE statement. Parameters: $1 the token, $2 the row's
/// id, $3 the owner, $4, $5, ... the caller's (bound to `params` of execute()).
///
/// Thread-safety: immutable after make(); execute(PGconn*) uses the caller's connection, which the
/// caller must not use concurrently (libpq's rule).
class postgres_fenced_statement {
 public:
  /// Returns the statement text.
  [[nodiscard]] const std::string& sql() const noexcept { return sql_; }
  /// Returns the fence's name as messages give it, e.g. `postgres fence "accounts"."fence"`.
  [[nodiscard]] const std::string& fence_name() const noexcept { return label_; }

  /// Runs the statement on `conn` (blocking, unbounded but by the session's statement_timeout, in
  /// the caller's session and transaction, if any): admits (token, owner) at row `id` and, only
  /// if admitted, writes, as the table in the file overview says.
  /// \returns success (admitted and written);
  ///   errc::stale_token if the fence holds a newer token; errc::token_reissued if it holds this
  ///     token for another owner (nothing changes in either case);
  ///   errc::invalid_argument for a token that no store issues (none, max, or above 2^63-1, the
  ///     bigint limit), an empty owner, a text parameter containing NUL, no row with that id
  ///     (postgres_fenced_update), or an SQL error in the caller's own SQL (classes 22, 23, 42);
  ///   errc::permission_denied (42501: no privilege on the table), errc::misconfigured (42P01,
  ///     42703: no such table or column: the fence options name something that is not there);
  ///   errc::store_unavailable (no or a broken connection, server shutting down), errc::timeout
  ///     (statement_timeout), errc::protocol_error (anything else).
  /// `*error_message`, if given, gets the outcome's text, naming the fence, with the server's
  /// message and SQLSTATE when there is one.
  result<void> execute(PGconn* conn, fencing_token token, std::string_view owner, postgres_param id,
                       const std::vector<postgres_param>& params = {},
                       std::string* error_message = nullptr) const {
    std::string msg;
    auto run = [&](const std::string& sql, int n,
                   detail::pg_fence_params& p) -> result<detail::pg_result_ptr> {
      detail::pg_result_ptr r(PQexecParams(conn, sql.c_str(), n, nullptr, p.values.data(),
                                           p.lengths.data(), p.formats.data(), 1));
      if (!r) return detail::errc_with(errc::store_unavailable, msg, PQerrorMessage(conn));
      if (PQresultStatus(r.get()) == PGRES_TUPLES_OK) return r;
      const char* state = PQresultErrorField(r.get(), PG_DIAG_SQLSTATE);
      const errc e = PQresultStatus(r.get()) == PGRES_FATAL_ERROR
                         ? detail::classify_pg_error(state, true)
                         : errc::protocol_error;
      std::string text = state != nullptr ? std::string(state) + ": " : std::string();
      return detail::errc_with(e, msg, text + PQresultErrorMessage(r.get()));
    };
    result<void> out =
        (conn == nullptr || PQstatus(conn) != CONNECTION_OK)
            ? result<void>(detail::errc_with(errc::store_unavailable, msg, "no open connection"))
            : run_fenced(run, token, owner, id, params, msg);
    if (error_message != nullptr) *error_message = out ? std::string() : label_ + ": " + msg;
    return out;
  }

 protected:
  postgres_fenced_statement() = default;

  std::string sql_;      // one row, one int8 column: how many writes the fence admitted (0, 1)
  std::string verdict_;  // on 0: why (1 stale, 2 reissued, 0 neither; no row: no such id)
  std::string label_;
  bool row_must_exist_ = false;  // an UPDATE: no row is the caller's invalid_argument

  void set_verdict_sql(const detail::pg_fence_names& n) {
    label_ = n.label;
    verdict_ = "SELECT (CASE WHEN " + n.fence + " > $1::int8 THEN 1 WHEN " + n.fence +
               " = $1::int8 AND " + n.owner + " IS DISTINCT FROM $3::text THEN 2 ELSE 0 END)" +
               "::int8 FROM " + n.table + " WHERE " + n.id + " = $2";
  }

 private:
  friend class postgres_fence;

  // Runs the statement with `run(sql, nparams, params)` and, if the fence refused, the verdict
  // query that says why. `msg` gets the failure's text (without the fence's name).
  template <class Run>
  result<void> run_fenced(Run& run, fencing_token token, std::string_view owner,
                          const postgres_param& id, const std::vector<postgres_param>& params,
                          std::string& msg) const {
    if (!token.is_issuable() || token > postgres_max_token) {
      return detail::errc_with(errc::invalid_argument, msg,
                               "token " + std::to_string(token.value()) +
                                   " is outside 1 .. 2^63-1 (the fence column is a bigint)");
    }
    if (owner.empty() || owner.find('\0') != std::string_view::npos) {
      return detail::errc_with(errc::invalid_argument, msg, "owner is empty or contains NUL");
    }
    const std::string token_text = std::to_string(token.value());
    detail::pg_fence_params p;
    bool ok = p.add(postgres_param(std::string_view(token_text))) && p.add(id) &&
              p.add(postgres_param(owner));
    for (const postgres_param& q : params) ok = ok && p.add(q);
    if (!ok) {
      return detail::errc_with(errc::invalid_argument, msg,
                               "a text parameter contains NUL, or a parameter is over 2 GiB");
    }
    p.terminate_texts();
    result<detail::pg_result_ptr> r = run(sql_, static_cast<int>(p.values.size()), p);
    if (!r) return r.error();
    const std::int64_t written = rows_of(r->get());
    if (written == 1) return {};
    if (written != 0) return detail::errc_with(errc::protocol_error, msg, "unexpected result");
    result<detail::pg_result_ptr> v = run(verdict_, 3, p);
    if (!v) return v.error();
    if (PQntuples(v->get()) == 0) {
      return detail::errc_with(row_must_exist_ ? errc::invalid_argument : errc::protocol_error, msg,
                               "no row with that id");
    }
    const std::int64_t why = rows_of(v->get());
    if (why == 1) {
      return detail::errc_with(errc::stale_token, msg,
                               "token " + token_text + " is older than the newest admitted");
    }
    if (why == 2) {
      return detail::errc_with(errc::token_reissued, msg,
                               "token " + token_text + " was admitted for another owner");
    }
    return detail::errc_with(errc::protocol_error, msg,
                             "the write was refused but the fence admits it now (was the fence "
                             "lowered or the row replaced concurrently?)");
  }

  // Column 0 of the one row of `r` as int8; -1 if absent or malformed. (A plain integer: gcc 12
  // warns, falsely, that an optional compared here may be uninitialized.)
  static std::int64_t rows_of(const PGresult* r) noexcept {
    if (PQntuples(r) != 1) return -1;
    return detail::pg_int8(r, 0).value_or(-1);
  }
};

/// A fenced UPDATE of one existing row of the user's table: `set_sql` and the fence columns change
/// in ONE statement, iff the row's fence admits (token, owner):
///
///   WITH holdfast_write AS (UPDATE T SET <set_sql>, fence = $1, fence_owner = $3
///     WHERE id = $2 AND (fence IS NULL OR fence < $1 OR (fence = $1 AND fence_owner = $3))
///     RETURNING 1) SELECT count(*) FROM holdfast_write
///
/// `set_sql` is the caller's own SQL (trusted, never user input), e.g. "balance = balance + $4",
/// with $4, $5, ... bound to execute()'s `params`.
class postgres_fenced_update : public postgres_fenced_statement {
 public:
  /// Builds the statement. \returns it; errc::invalid_argument for an invalid table or column
  ///   name (empty, over 63 bytes, NUL) or an empty set_sql.
  static result<postgres_fenced_update> make(const postgres_fence_options& opts,
                                             std::string_view set_sql) {
    const std::optional<detail::pg_fence_names> n = detail::pg_fence_names_of(opts);
    if (!n || !detail::pg_usable_sql(set_sql)) return errc::invalid_argument;
    postgres_fenced_update u;
    u.sql_ = "WITH holdfast_write AS (UPDATE " + n->table + " SET " + std::string(set_sql) + ", " +
             n->fence + " = $1, " + n->owner + " = $3 WHERE " + n->table + "." + n->id +
             " = $2 AND " + detail::pg_fence_admits(*n, n->table) +
             " RETURNING 1) SELECT count(*)::int8 FROM holdfast_write";
    u.set_verdict_sql(*n);
    u.row_must_exist_ = true;
    return u;
  }

 private:
  postgres_fenced_update() = default;
};

/// A fenced upsert into the user's table: a new row is inserted with its fence set to (token,
/// owner); an existing row is updated with `set_sql` iff its fence admits (token, owner), in ONE
/// statement (INSERT ... ON CONFLICT (id) DO UPDATE ... WHERE admits). Needs a unique index on the
/// id column.
///
///   INSERT INTO T (id, fence, fence_owner, <columns>) VALUES ($2, $1, $3, <values_sql>)
///     ON CONFLICT (id) DO UPDATE SET <set_sql>, fence = $1, fence_owner = $3 WHERE <admits>
///
/// `columns` ("balance, note") and `values_sql` ("$4, $5") give the new row's other columns (both
/// empty: none); `set_sql` the update of an existing one ("balance = T.balance +
/// EXCLUDED.balance", where T is the table's name as given). All trusted SQL, never user input.
class postgres_fenced_upsert : public postgres_fenced_statement {
 public:
  /// Builds the statement. \returns it; errc::invalid_argument for an invalid table or column
  ///   name, an empty set_sql, or only one of columns and values_sql given.
  static result<postgres_fenced_upsert> make(const postgres_fence_options& opts,
                                             std::string_view columns, std::string_view values_sql,
                                             std::string_view set_sql) {
    const std::optional<detail::pg_fence_names> n = detail::pg_fence_names_of(opts);
    if (!n || !detail::pg_usable_sql(set_sql) || columns.empty() != values_sql.empty() ||
        (!columns.empty() &&
         (!detail::pg_usable_sql(columns) || !detail::pg_usable_sql(values_sql)))) {
      return errc::invalid_argument;
    }
    const bool more = !columns.empty();
    postgres_fenced_upsert u;
    u.sql_ = "WITH holdfast_write AS (INSERT INTO " + n->table + " (" + n->id + ", " + n->fence +
             ", " + n->owner + (more ? ", " + std::string(columns) : std::string()) +
             ") VALUES ($2, $1, $3" + (more ? ", " + std::string(values_sql) : std::string()) +
             ") ON CONFLICT (" + n->id + ") DO UPDATE SET " + std::string(set_sql) + ", " +
             n->fence + " = $1, " + n->owner + " = $3 WHERE " +
             detail::pg_fence_admits(*n, n->table) +
             " RETURNING 1) SELECT count(*)::int8 FROM holdfast_write";
    u.set_verdict_sql(*n);
    return u;
  }

 private:
  postgres_fenced_upsert() = default;
};

/// A fenced INSERT into another table (a run log, an outbox): the fence row `id` of the fence
/// table in `fence` admits (token, owner) (the row is created on first use: no seeding) and, only
/// if it did, one row is inserted, in ONE statement:
///
///   WITH holdfast_admit AS (INSERT INTO F (id, fence, fence_owner) VALUES ($2, $1, $3)
///          ON CONFLICT (id) DO UPDATE SET fence = $1, fence_owner = $3 WHERE <admits>
///          RETURNING 1),
///        holdfast_write AS (INSERT INTO <table> (<columns>) SELECT <values_sql>
///          FROM holdfast_admit RETURNING 1)
///   SELECT count(*) FROM holdfast_admit
///
/// `table` is in the fence's schema; `columns` ("job, started_at") and `values_sql` ("$4, now()")
/// are trusted SQL, never user input.
class postgres_fenced_insert : public postgres_fenced_statement {
 public:
  /// Builds the statement. \returns it; errc::invalid_argument for an invalid table or column
  ///   name, or an empty columns or values_sql.
  static result<postgres_fenced_insert> make(const postgres_fence_options& fence,
                                             std::string_view table, std::string_view columns,
                                             std::string_view values_sql) {
    const std::optional<detail::pg_fence_names> n = detail::pg_fence_names_of(fence);
    const std::optional<std::string> target = detail::pg_qualified(fence.schema, table);
    if (!n || !target || !detail::pg_usable_sql(columns) || !detail::pg_usable_sql(values_sql)) {
      return errc::invalid_argument;
    }
    postgres_fenced_insert s;
    s.sql_ = "WITH holdfast_admit AS (INSERT INTO " + n->table + " (" + n->id + ", " + n->fence +
             ", " + n->owner + ") VALUES ($2, $1, $3) ON CONFLICT (" + n->id + ") DO UPDATE SET " +
             n->fence + " = $1, " + n->owner + " = $3 WHERE " +
             detail::pg_fence_admits(*n, n->table) + " RETURNING 1 AS holdfast_admitted), " +
             "holdfast_write AS (INSERT INTO " + *target + " (" + std::string(columns) +
             ") SELECT " + std::string(values_sql) +
             " FROM holdfast_admit RETURNING 1) SELECT count(*)::int8 FROM holdfast_admit";
    s.set_verdict_sql(*n);
    return s;
  }

  /// Returns CREATE TABLE IF NOT EXISTS for the fence table of `fence`: id text PRIMARY KEY, the
  /// fence bigint, the owner text. Any table with a unique id column and those two columns works.
  /// \returns errc::invalid_argument for an invalid table or column name.
  static result<std::string> table_sql(const postgres_fence_options& fence) {
    const std::optional<detail::pg_fence_names> n = detail::pg_fence_names_of(fence);
    if (!n) return errc::invalid_argument;
    return "CREATE TABLE IF NOT EXISTS " + n->table + " (" + n->id + " text PRIMARY KEY, " +
           n->fence + " bigint, " + n->owner + " text)";
  }

 private:
  postgres_fenced_insert() = default;
};

/// A client that runs fenced statements on a connection of its own: connected on first use (or
/// connect()), every call bounded by `command_timeout` (client deadline), and reconnected by the
/// next call after any failure. A failed call is not retried: a write whose reply was lost may
/// have been applied, and running it again under the same (token, owner) would apply it twice.
/// Only the connection fields of postgres_options are used (conninfo, application_name,
/// connect_timeout, command_timeout).
///
/// Thread-safety: every member may be called concurrently (one mutex around one connection).
class postgres_fence : private detail::link_client<detail::pg_link> {
 public:
  /// Makes a client for the server in `opts`; connects on first use.
  explicit postgres_fence(postgres_options opts = {})
      : link_client(std::in_place, std::move(opts), std::vector<std::string>{},
                    std::vector<detail::pg_link::statement>{}) {}

  postgres_fence(const postgres_fence&) = delete;
  postgres_fence& operator=(const postgres_fence&) = delete;

  using link_client::connect;
  using link_client::last_error_message;
  using link_client::options;

  /// Runs `s` with (token, owner) at row `id` and `params` for $4, $5, ...
  /// \returns as postgres_fenced_statement::execute, and errc::timeout when `command_timeout`
  ///   passes (the connection is dropped: the write may or may not have happened), the failure's
  ///   text, naming the fence, in last_error_message() (stale_token and token_reissued are
  ///   outcomes and leave it unchanged).
  result<void> execute(const postgres_fenced_statement& s, fencing_token token,
                       std::string_view owner, postgres_param id,
                       const std::vector<postgres_param>& params = {}) {
    auto guard = link_.lock();
    if (std::error_code ec = link_.ensure_connected()) return ec;
    const auto deadline = std::chrono::steady_clock::now() + link_.options().command_timeout;
    auto run = [&](const std::string& sql, int n,
                   detail::pg_fence_params& p) -> result<detail::pg_result_ptr> {
      return link_.run(
          [&](PGconn* c) {
            return PQsendQueryParams(c, sql.c_str(), n, nullptr, p.values.data(), p.lengths.data(),
                                     p.formats.data(), 1);
          },
          deadline, true);
    };
    std::string msg;
    result<void> out = s.run_fenced(run, token, owner, id, params, msg);
    if (!out && out.error() != errc::stale_token && out.error() != errc::token_reissued) {
      link_.fail(errc{}, s.fence_name() + ": " + (msg.empty() ? link_.last_error() : msg));
    }
    return out;
  }
};

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_POSTGRES_FENCE_HPP
