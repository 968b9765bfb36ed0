// SPDX-License-Identifier: MIT
// holdfast/stores/detail/postgres_multi.hpp - pg_multi: postgres_store's atomic multi-key grant
// (store.hpp's try_acquire_all capability; multi_lease.hpp uses it) as ONE transaction.
//
//   step   | statement (T = the table, S = the sequence; $1 the keys as bytea[])
//   -------+--------------------------------------------------------------------------------
//   BEGIN  |
//   lock   | INSERT INTO T SELECT sha256(k), k, '', 0, -infinity FROM unnest($1) ORDER BY sha256(k)
//          |   ON CONFLICT (key_hash) DO UPDATE SET owner = l.owner   (locks an existing row)
//          |   RETURNING held by another and live                      (any true: busy)
//   grant  | UPDATE T SET owner, token = CASE same owner and live THEN token ELSE nextval(S),
//          |   expires_at ... FROM unnest($1) WITH ORDINALITY RETURNING ordinality, token
//   COMMIT | (busy: ROLLBACK, which also drops the rows the lock step inserted); settled at
//          | command_timeout as try_acquire's statement: a commit still waiting for a
//          | synchronous standby is cancelled through a second session, and grants it committed
//          | locally are released (the release statement: synchronous_commit = local), so the
//          | caller told of a failure holds nothing (grant_not_durable; store_deadline.hpp, D2)
//
// Deadlocks: every multi-key transaction locks its rows in one order (key_hash ascending, in the
// one lock statement), and every other statement of the store locks one row, so no two holdfast
// transactions wait for each other in a cycle. (purge_expired() deletes rows in scan order; should
// it meet a multi-key grant on the same long-expired rows, PostgreSQL's deadlock detector ends one
// of them: 40P01, a transient error.) The grant step draws each new token after the lock step
// locked its row, as try_acquire's ON CONFLICT branch does, so tokens follow grant order (T1); a
// same-owner live key keeps its token, so a retry after a lost COMMIT reply gets the same grants.
// Judged by one clock_timestamp() reading per statement; held for ttl + 1 us as try_acquire's.
// Any failure inside the transaction drops the session (PostgreSQL rolls the transaction back).
// Four round trips (three when busy). Part of stores/postgres.hpp; not for users.
#ifndef HOLDFAST_STORES_DETAIL_POSTGRES_MULTI_HPP
#define HOLDFAST_STORES_DETAIL_POSTGRES_MULTI_HPP

#include <libpq-fe.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>

#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/result.hpp"
#include "holdfast/store.hpp"
#include "holdfast/stores/detail/postgres_link.hpp"
#include "holdfast/stores/detail/postgres_sql.hpp"
#include "holdfast/stores/postgres_options.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

/// The multi-key transaction of one postgres_store (its SQL, built once from the options).
/// acquire_all takes the link's lock; its scratch buffers are guarded by it.
class pg_multi {
 public:
  explicit pg_multi(const postgres_options& o) {
    const std::string t = pg_qualified(o.schema, o.table).value_or("\"invalid\"");
    const std::string s = pg_qualified(o.schema, pg_sequence_name(o)).value_or("\"invalid\"");
    const std::string next = "nextval(" + pg_literal(s) + "::regclass)";
    const std::string hold = "($3::int8 * interval '1 millisecond' + interval '1 microsecond')";
    const std::string live_same = "(l.owner = $2::bytea AND l.expires_at > n.now)";
    lock_sql_ = "INSERT INTO " + t +
                " AS l (key_hash, key, owner, token, expires_at) SELECT sha256(u.k), u.k, "
                "''::bytea, 0, '-infinity' FROM unnest($1::bytea[]) AS u(k) ORDER BY 1 "
                "ON CONFLICT (key_hash) DO UPDATE SET owner = l.owner "
                "RETURNING (l.owner <> $2::bytea AND l.expires_at > clock_timestamp())";
    grant_sql_ = "WITH n AS MATERIALIZED (SELECT clock_timestamp() AS now) UPDATE " + t +
                 " AS l SET owner = $2::bytea, token = CASE WHEN " + live_same +
                 " THEN l.token ELSE " + next + " END, expires_at = CASE WHEN " + live_same +
                 " THEN GREATEST(l.expires_at, n.now + " + hold + ") ELSE n.now + " + hold +
                 " END FROM n, unnest($1::bytea[]) WITH ORDINALITY AS u(k, i) "
                 "WHERE l.key_hash = sha256(u.k) RETURNING u.i, l.token";
  }

  /// Grants every key of `keys[0..count)` to `owner` for `ttl` (ms) in one transaction, or none;
  /// see postgres_store::try_acquire_all. `release` is the link's prepared release statement
  /// (key, owner, token), for grants committed after the bound. [link not locked]
  result<void> acquire_all(pg_link& link, const std::string_view* keys, std::size_t count,
                           std::string_view owner, std::chrono::milliseconds ttl, grant* grants,
                           std::size_t release) {
    if (std::error_code ec = check(keys, count, owner, ttl)) return ec;
    auto guard = link.lock();
    if (!build_array(keys, count) || owner.size() >= (std::size_t{1} << 30)) {
      return link.fail(errc::invalid_argument,
                       "postgres: try_acquire_all: the keys or the owner exceed PostgreSQL's 1 GiB "
                       "field limit");
    }
    if (std::error_code ec = link.ensure_connected()) return ec;
    ttl_text_ = std::to_string(ttl.count());
    const auto deadline = std::chrono::steady_clock::now() + link.options().command_timeout;
    if (result<pg_result_ptr> b = simple(link, "BEGIN", deadline); !b) return b.error();
    result<pg_result_ptr> locked = params(link, lock_sql_, 2, owner, deadline);
    if (!locked) return abandon(link, locked.error());
    const PGresult* lr = locked->get();
    if (PQntuples(lr) != static_cast<int>(count) || PQnfields(lr) != 1) {
      return abandon(link, link.fail(errc::protocol_error,
                                     "postgres: try_acquire_all: unexpected lock result shape"));
    }
    for (int row = 0; row < PQntuples(lr); ++row) {
      if (PQgetlength(lr, row, 0) == 1 && PQgetvalue(lr, row, 0)[0] != 0) {
        if (result<pg_result_ptr> rb = simple(link, "ROLLBACK", deadline); !rb) return rb.error();
        return errc::busy;
      }
    }
    result<pg_result_ptr> granted = params(link, grant_sql_, 3, owner, deadline);
    if (!granted) return abandon(link, granted.error());
    if (std::error_code ec = read_grants(link, granted->get(), count, ttl, grants)) {
      return abandon(link, ec);
    }
    result<pg_result_ptr> c =
        link.run_settled([](PGconn* pc) { return PQsendQuery(pc, "COMMIT"); }, deadline);
    if (!c && link.cut_short() && c.error() == errc::timeout) {
      return link.fail(errc::timeout,
                       "postgres: try_acquire_all: COMMIT cancelled at its deadline before it "
                       "applied (nothing was granted); " +
                           link.last_error());
    }
    if (!c) return c.error();
    if (link.cut_short()) return give_back_late(link, keys, count, owner, grants, release);
    return {};
  }

 private:
  static std::error_code check(const std::string_view* keys, std::size_t count,
                               std::string_view owner, std::chrono::milliseconds ttl) {
    if (keys == nullptr || count == 0 || count > 100000) return errc::invalid_argument;
    for (std::size_t i = 0; i < count; ++i) {
      if (std::error_code ec = check_acquire_args(keys[i], owner, ttl)) return ec;
      for (std::size_t j = 0; j < i; ++j) {
        if (keys[j] == keys[i]) return errc::invalid_argument;
      }
    }
    return {};
  }

  // $1 in text form: {"\\x<hex>",...} (an array literal of bytea in hex input format). False if
  // it would exceed PostgreSQL's 1 GiB field limit.
  bool build_array(const std::string_view* keys, std::size_t count) {
    static constexpr char hex[] = "0123456789abcdef";
    std::size_t size = 2;
    for (std::size_t i = 0; i < count; ++i) size += 2 * keys[i].size() + 6;
    if (size >= (std::size_t{1} << 30)) return false;
    array_.clear();
    array_.reserve(size);
    array_ += '{';
    for (std::size_t i = 0; i < count; ++i) {
      if (i > 0) array_ += ',';
      array_ += "\"\\\\x";
      for (unsigned char c : keys[i]) {
        array_ += hex[c >> 4];
        array_ += hex[c & 15];
      }
      array_ += '"';
    }
    array_ += '}';
    return true;
  }

  static result<pg_result_ptr> simple(pg_link& link, const char* sql,
                                      std::chrono::steady_clock::time_point deadline) {
    return link.run([&](PGconn* c) { return PQsendQuery(c, sql); }, deadline, false);
  }

  // Runs `sql` with the first `n` of ($1 keys, $2 owner, $3 ttl).
  result<pg_result_ptr> params(pg_link& link, const std::string& sql, int n, std::string_view owner,
                               std::chrono::steady_clock::time_point deadline) {
    const char* values[] = {array_.c_str(), owner.data(), ttl_text_.c_str()};
    const int lengths[] = {0, static_cast<int>(owner.size()), 0};
    const int formats[] = {0, 1, 0};
    return link.run(
        [&](PGconn* c) {
          return PQsendQueryParams(c, sql.c_str(), n, nullptr, values, lengths, formats, 1);
        },
        deadline, false);
  }

  // The COMMIT ended only when the cancel cut its wait for a synchronous standby (it had
  // committed locally): the caller is told it failed, so every grant is released now, each
  // within pg_settle_bound (store_deadline.hpp, D2, as postgres_store::give_back_late).
  static std::error_code give_back_late(pg_link& link, const std::string_view* keys,
                                        std::size_t count, std::string_view owner, grant* grants,
                                        std::size_t release) {
    std::size_t kept = 0;
    for (std::size_t i = 0; i < count; ++i) {
      const std::string token = std::to_string(grants[i].token.value());
      const char* values[] = {keys[i].data(), owner.data(), token.c_str()};
      const int lengths[] = {static_cast<int>(keys[i].size()), static_cast<int>(owner.size()), 0};
      const int formats[] = {1, 1, 0};
      result<pg_result_ptr> r = link.exec(release, 3, values, lengths, formats,
                                          std::chrono::steady_clock::now() + pg_settle_bound);
      if (!r || PQntuples(r->get()) > 1) ++kept;
      grants[i] = grant{};
    }
    const std::string late =
        "postgres: try_acquire_all: the grants were committed after command_timeout (a COMMIT "
        "waiting for a synchronous standby, cancelled: it committed locally)";
    if (kept == 0) return link.fail(errc::grant_not_durable, late + "; they were given back");
    return link.fail(errc::timeout, late + "; giving " + std::to_string(kept) +
                                        " back failed: they last until their TTL");
  }

  // A failure inside the transaction: the session is dropped (the server rolls back).
  static std::error_code abandon(pg_link& link, std::error_code ec) {
    link.disconnect();
    return ec;
  }

  static std::error_code read_grants(pg_link& link, const PGresult* r, std::size_t count,
                                     std::chrono::milliseconds ttl, grant* grants) {
    const auto int8 = [r](int row, int col, std::int64_t& out) {
      if (PQftype(r, col) != pg_int8_oid || PQfformat(r, col) != 1 || PQgetisnull(r, row, col) ||
          PQgetlength(r, row, col) != 8) {
        return false;
      }
      const auto* p = reinterpret_cast<const unsigned char*>(PQgetvalue(r, row, col));
      std::uint64_t v = 0;
      for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
      out = static_cast<std::int64_t>(v);
      return true;
    };
    if (PQntuples(r) != static_cast<int>(count) || PQnfields(r) != 2) {
      return link.fail(errc::protocol_error, "postgres: try_acquire_all: unexpected result shape");
    }
    for (std::size_t i = 0; i < count; ++i) grants[i] = grant{};
    for (int row = 0; row < PQntuples(r); ++row) {
      std::int64_t at = 0;
      std::int64_t token = 0;
      if (!int8(row, 0, at) || !int8(row, 1, token) || at < 1 ||
          at > static_cast<std::int64_t>(count) || token < 1 ||
          !grants[static_cast<std::size_t>(at - 1)].token.is_none()) {
        return link.fail(errc::protocol_error, "postgres: try_acquire_all: unexpected grant");
      }
      grants[static_cast<std::size_t>(at - 1)] =
          grant{fencing_token(static_cast<std::uint64_t>(token)), ttl};
    }
    return {};
  }

  std::string lock_sql_;
  std::string grant_sql_;
  std::string array_;  // scratch, guarded by the link's mutex
  std::string ttl_text_;
};

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_DETAIL_POSTGRES_MULTI_HPP
