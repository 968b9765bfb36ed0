// holdfast/stores/postgres_fence.hpp - postgres_fenced_update: fenced writes in the user's own
// PostgreSQL table, the data and the fence column changed in one statement (postgres_param,
// postgres_fence_options). Part of stores/postgres.hpp (include that). Opt-in: needs libpq.
#ifndef HOLDFAST_STORES_POSTGRES_FENCE_HPP
#define HOLDFAST_STORES_POSTGRES_FENCE_HPP

#include <libpq-fe.h>

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
#include "holdfast/stores/detail/postgres_link.hpp"
#include "holdfast/stores/detail/postgres_sql.hpp"

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

/// Where the fenced rows live: the user's table, its key column and its fence column (a bigint,
/// NULL or the newest token admitted for that row).
struct postgres_fence_options {
  std::string schema{};                ///< Empty: the search_path decides.
  std::string table;                   ///< The user's table (quoted: any name up to 63 bytes).
  std::string id_column = "id";        ///< The column that identifies a row.
  std::string fence_column = "fence";  ///< bigint column holding the row's newest admitted token.
};

/// A fenced UPDATE of one row of the user's table: the data columns and the fence change in ONE
/// statement, which admits the token iff it is not older than the row's fence (fence.hpp;
/// Kleppmann 2016). PostgreSQL re-checks the WHERE clause on the newest row version after waiting
/// for a concurrent writer, so two racing writers are admitted in token order and an older token
/// can never land after a newer one. No read-then-write, no transaction needed:
///
///   WITH holdfast_row AS (SELECT 1 FROM T WHERE id = $2),
///        holdfast_write AS (UPDATE T SET <set_sql>, fence = $1
///                           WHERE id = $2 AND (fence IS NULL OR fence <= $1) RETURNING 1)
///   SELECT (SELECT count(*) FROM holdfast_write), (SELECT count(*) FROM holdfast_row)
///
/// `set_sql` is the caller's own SQL (trusted, never user input), e.g. "balance = balance + $3",
/// with $3, $4, ... bound to the parameters passed to execute(); $1 is the token, $2 the id.
///
/// Thread-safety: immutable after make(); execute() uses the caller's connection, which the caller
/// must not use concurrently (libpq's rule).
class postgres_fenced_update {
 public:
  /// Builds the statement. \returns it; errc::invalid_argument for an invalid table/column name
  ///   or an empty set_sql.
  static result<postgres_fenced_update> make(const postgres_fence_options& opts,
                                             std::string_view set_sql) {
    const std::optional<std::string> t = detail::pg_qualified(opts.schema, opts.table);
    const std::optional<std::string> id = detail::pg_quote_ident(opts.id_column);
    const std::optional<std::string> f = detail::pg_quote_ident(opts.fence_column);
    if (!t || !id || !f || set_sql.empty() || set_sql.find('\0') != std::string_view::npos) {
      return errc::invalid_argument;
    }
    postgres_fenced_update u;
    u.sql_ = "WITH holdfast_row AS (SELECT 1 FROM " + *t + " WHERE " + *id +
             " = $2), holdfast_write AS (UPDATE " + *t + " SET " + std::string(set_sql) + ", " +
             *f + " = $1 WHERE " + *id + " = $2 AND (" + *f + " IS NULL OR " + *f +
             " <= $1) RETURNING 1) SELECT (SELECT count(*) FROM holdfast_write)::int8, "
             "(SELECT count(*) FROM holdfast_row)::int8";
    return u;
  }

  /// Returns the statement text ($1 token, $2 id, $3... the caller's parameters).
  [[nodiscard]] const std::string& sql() const noexcept { return sql_; }

  /// Runs the fenced update on `conn` (blocking, in the caller's session and transaction, if
  /// any): the row `id` gets `set_sql` applied and its fence set to `token` iff its fence is NULL
  /// or not newer than `token`.
  /// \returns success (the row was written);
  ///   errc::stale_token if the row's fence holds a newer token (nothing changes);
  ///   errc::invalid_argument for a token that no store issues (none, max, or above 2^63-1, the
  ///     bigint limit), a text parameter containing NUL, no row with that id, or an SQL error in
  ///     the caller's own statement (syntax, types, constraints);
  ///   errc::store_unavailable (no or a broken connection, server shutting down), errc::timeout
  ///     (statement_timeout), errc::protocol_error (anything else).
  /// The server's message, when there is one, is stored in `*error_message` if given.
  result<void> execute(PGconn* conn, fencing_token token, postgres_param id,
                       const std::vector<postgres_param>& params = {},
                       std::string* error_message = nullptr) const {
    auto say = [&](errc e, std::string msg) -> result<void> {
      if (error_message != nullptr) *error_message = std::move(msg);
      return e;
    };
    if (!token.is_issuable() || token > postgres_max_token) {
      return say(errc::invalid_argument, "token outside 1 .. 2^63-1");
    }
    if (conn == nullptr || PQstatus(conn) != CONNECTION_OK) {
      return say(errc::store_unavailable, "postgres: no open connection");
    }
    const std::string token_text = std::to_string(token.value());
    std::vector<const char*> values;
    std::vector<int> lengths;
    std::vector<int> formats;
    auto add = [&](const postgres_param& p) {
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
    };
    bool ok = add(postgres_param(std::string_view(token_text))) && add(id);
    for (const postgres_param& p : params) ok = ok && add(p);
    if (!ok) return say(errc::invalid_argument, "a text parameter contains NUL, or is > 2 GB");
    // Text parameters need 0-terminated strings: copy those that are not.
    std::vector<std::string> copies;
    copies.reserve(values.size());
    for (std::size_t i = 0; i < values.size(); ++i) {
      if (values[i] != nullptr && formats[i] == 0) {
        copies.emplace_back(values[i], static_cast<std::size_t>(lengths[i]));
        values[i] = copies.back().c_str();
      }
    }
    detail::pg_result_ptr r(PQexecParams(conn, sql_.c_str(), static_cast<int>(values.size()),
                                         nullptr, values.data(), lengths.data(), formats.data(),
                                         1));
    if (!r) return say(errc::store_unavailable, std::string("postgres: ") + PQerrorMessage(conn));
    if (PQresultStatus(r.get()) != PGRES_TUPLES_OK) {
      const char* state = PQresultErrorField(r.get(), PG_DIAG_SQLSTATE);
      std::string msg = "postgres: ";
      if (state != nullptr) msg += std::string(state) + ": ";
      msg += PQresultErrorMessage(r.get());
      const errc e = PQresultStatus(r.get()) == PGRES_FATAL_ERROR
                         ? detail::classify_pg_error(state, true)
                         : errc::protocol_error;
      return say(e, std::move(msg));
    }
    // Plain integers (-1: absent or malformed) rather than optionals: gcc 12 at -O1 and above
    // warns, falsely, that an optional compared here may be uninitialized (-Wmaybe-uninitialized).
    if (PQntuples(r.get()) != 1) return say(errc::protocol_error, "postgres: unexpected result");
    const std::int64_t written = detail::pg_int8(r.get(), 0).value_or(-1);
    const std::int64_t exists = detail::pg_int8(r.get(), 1).value_or(-1);
    if (written < 0 || exists < 0) return say(errc::protocol_error, "postgres: unexpected result");
    if (written == 1) return {};
    if (written == 0 && exists == 1) return errc::stale_token;
    if (written == 0 && exists == 0) return say(errc::invalid_argument, "no row with that id");
    return say(errc::protocol_error, "postgres: the id matched more than one row");
  }

 private:
  postgres_fenced_update() = default;
  std::string sql_;
};

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_POSTGRES_FENCE_HPP
