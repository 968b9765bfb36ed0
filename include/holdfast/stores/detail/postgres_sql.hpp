// SPDX-License-Identifier: MIT
// holdfast/stores/detail/postgres_sql.hpp - writing SQL text safely: quoted identifiers
// (pg_quote_ident, pg_qualified: names PostgreSQL would truncate or cannot hold are refused) and
// string literals (pg_literal). Plain C++: no libpq. Not for users (stores/postgres.hpp is the
// public header).
#ifndef HOLDFAST_STORES_DETAIL_POSTGRES_SQL_HPP
#define HOLDFAST_STORES_DETAIL_POSTGRES_SQL_HPP

#include <optional>
#include <string>
#include <string_view>

#include "holdfast/detail/config.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

namespace detail {

/// Quotes an SQL identifier ("a""b" for a"b). nullopt for an empty name, one longer than 63 bytes
/// (PostgreSQL would silently truncate it) or one containing NUL.
inline std::optional<std::string> pg_quote_ident(std::string_view name) {
  if (name.empty() || name.size() > 63 || name.find('\0') != std::string_view::npos) {
    return std::nullopt;
  }
  std::string out = "\"";
  for (char c : name) {
    if (c == '"') out += '"';
    out += c;
  }
  out += '"';
  return out;
}

/// Quotes a (possibly schema-qualified) name: "schema"."name", or "name".
inline std::optional<std::string> pg_qualified(std::string_view schema, std::string_view name) {
  std::optional<std::string> n = pg_quote_ident(name);
  if (!n) return std::nullopt;
  if (schema.empty()) return n;
  std::optional<std::string> s = pg_quote_ident(schema);
  if (!s) return std::nullopt;
  return *s + "." + *n;
}

/// Makes an SQL string literal ('...' with quotes doubled; the session runs with
/// standard_conforming_strings on, so backslashes are ordinary characters).
inline std::string pg_literal(std::string_view text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'') out += '\'';
    out += c;
  }
  out += '\'';
  return out;
}

}  // namespace detail

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_DETAIL_POSTGRES_SQL_HPP
