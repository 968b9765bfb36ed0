// SPDX-License-Identifier: MIT
// holdfast/stores/detail/postgres_batch.hpp - pg_renew_batch: many renewals in ONE statement
// (postgres_store::renew_batch; the keepalive's batch path, lease/detail/batch_renew.hpp).
//
//   UPDATE T AS l SET expires_at = clock_timestamp() + u.ttl ms + 1 us
//     FROM unnest($1::bytea[], $2::bytea[], $3::int8[], $4::int8[]) WITH ORDINALITY
//          AS u(k, o, t, ttl, i)
//    WHERE l.key_hash = sha256(u.k) AND l.owner = u.o AND l.token = u.t
//      AND l.expires_at > clock_timestamp()
//   RETURNING u.i, l.token
//
// Each lease is owner- and token-checked on its own row, exactly as renew()'s statement checks
// it; a returned ordinal is a renewal, a missing one is lease_lost for that lease only. One
// statement is one transaction: a failed statement (or a lost reply) leaves every lease of it
// unknown, reported with the link's error (store_unavailable, timeout): renew is idempotent for
// the same owner and token, so the holder's retry leaves nothing wrong. A key that appears twice
// in one batch would match one row twice, which an UPDATE ... FROM applies once and reports once:
// a repeat is renewed alone, by renew(), after the batch. Requests that are not valid renewals
// are answered invalid_argument and not sent; a token above postgres_max_token is lease_lost
// (no sequence issues it), as in renew(). Part of stores/postgres.hpp; not for users.
#ifndef HOLDFAST_STORES_DETAIL_POSTGRES_BATCH_HPP
#define HOLDFAST_STORES_DETAIL_POSTGRES_BATCH_HPP

#include <libpq-fe.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_set>
#include <utility>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/result.hpp"
#include "holdfast/send_receive.hpp"
#include "holdfast/store.hpp"
#include "holdfast/stores/detail/postgres_link.hpp"
#include "holdfast/stores/detail/postgres_sql.hpp"
#include "holdfast/stores/postgres_options.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

// The batch statement for the table of `o`.
inline std::string pg_renew_batch_sql(const postgres_options& o) {
  const std::string t = pg_qualified(o.schema, o.table).value_or("\"invalid\"");
  return "UPDATE " + t +
         " AS l SET expires_at = clock_timestamp() + u.ttl * interval '1 millisecond' + "
         "interval '1 microsecond' FROM unnest($1::bytea[], $2::bytea[], $3::int8[], $4::int8[]) "
         "WITH ORDINALITY AS u(k, o, t, ttl, i) WHERE l.key_hash = sha256(u.k) AND l.owner = u.o "
         "AND l.token = u.t AND l.expires_at > clock_timestamp() RETURNING u.i, l.token";
}

// Appends `bytes` to an array literal as a bytea element in hex input format ("\\x<hex>").
inline void pg_append_bytea(std::string& out, std::string_view bytes) {
  static constexpr char hex[] = "0123456789abcdef";
  out += out.size() > 1 ? ",\"\\\\x" : "\"\\\\x";
  for (unsigned char c : bytes) {
    out += hex[c >> 4];
    out += hex[c & 15];
  }
  out += '"';
}

// Reads the batch statement's rows into out: ordinal i (1-based over `sent`) renewed.
inline std::error_code pg_read_batch(pg_link& link, const PGresult* r,
                                     const std::vector<std::size_t>& sent, const store_request* q,
                                     result<grant>* out) {
  if (PQnfields(r) != 2) return link.fail(errc::protocol_error, "postgres: renew_batch: shape");
  for (std::size_t i : sent) out[i] = errc::lease_lost;  // not returned: not renewed
  for (int row = 0; row < PQntuples(r); ++row) {
    bool ok = true;
    std::int64_t v[2] = {0, 0};
    for (int col = 0; col < 2; ++col) {
      ok = ok && PQftype(r, col) == pg_int8_oid && PQfformat(r, col) == 1 &&
           !PQgetisnull(r, row, col) && PQgetlength(r, row, col) == 8;
      if (ok) v[col] = static_cast<std::int64_t>(pg_read_be64(PQgetvalue(r, row, col)));
    }
    if (!ok || v[0] < 1 || v[0] > static_cast<std::int64_t>(sent.size())) {
      return link.fail(errc::protocol_error, "postgres: renew_batch: unexpected row");
    }
    const std::size_t i = sent[static_cast<std::size_t>(v[0] - 1)];
    if (v[1] != static_cast<std::int64_t>(q[i].token.value())) {
      return link.fail(errc::protocol_error, "postgres: renew_batch: unexpected token");
    }
    out[i] = grant{q[i].token, q[i].ttl};
  }
  return {};
}

// [link not locked] Renews q[0..n) (each q[i].op == store_op::renew) in one statement; out[i] as
// postgres_store::renew would return it. A repeated key is renewed alone by store.renew().
template <class Store>
void pg_renew_batch(pg_link& link, Store& store, const store_request* q, std::size_t n,
                    result<grant>* out) {
  std::vector<std::size_t> sent, repeats;
  std::unordered_set<std::string_view> keys;
  std::string k = "{", o = "{", t = "{", ttl = "{";
  for (std::size_t i = 0; i < n; ++i) {
    std::error_code bad = check_renew_args(q[i].key, q[i].owner, q[i].token, q[i].ttl);
    if (!bad && q[i].op != store_op::renew) bad = make_error_code(errc::invalid_argument);
    if (bad) {
      out[i] = bad;
    } else if (q[i].token > postgres_max_token) {
      out[i] = errc::lease_lost;
    } else if (!keys.insert(q[i].key).second) {
      repeats.push_back(i);
    } else {
      sent.push_back(i);
      pg_append_bytea(k, q[i].key);
      pg_append_bytea(o, q[i].owner);
      t += (t.size() > 1 ? "," : "") + std::to_string(q[i].token.value());
      ttl += (ttl.size() > 1 ? "," : "") + std::to_string(q[i].ttl.count());
    }
  }
  if (!sent.empty()) {
    for (std::string* s : {&k, &o, &t, &ttl}) *s += '}';
    auto guard = link.lock();
    std::error_code ec;
    if (k.size() >= (std::size_t{1} << 30) || o.size() >= (std::size_t{1} << 30)) {
      ec = link.fail(errc::invalid_argument,
                     "postgres: renew_batch: the keys or owners exceed the 1 GiB field limit");
    } else if (!(ec = link.ensure_connected())) {
      const std::string sql = pg_renew_batch_sql(link.options());
      const char* values[] = {k.c_str(), o.c_str(), t.c_str(), ttl.c_str()};
      const int lengths[] = {0, 0, 0, 0};
      const int formats[] = {0, 0, 0, 0};
      const auto deadline = std::chrono::steady_clock::now() + link.options().command_timeout;
      result<pg_result_ptr> r = link.run(
          [&](PGconn* c) {
            return PQsendQueryParams(c, sql.c_str(), 4, nullptr, values, lengths, formats, 1);
          },
          deadline, false);
      ec = r ? pg_read_batch(link, r->get(), sent, q, out) : r.error();
    }
    if (ec) {
      for (std::size_t i : sent) out[i] = ec;  // outcome unknown: the holder retries
    }
  }
  for (std::size_t i : repeats) {
    out[i] = store.renew(q[i].key, q[i].owner, q[i].token, q[i].ttl);
  }
}

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_DETAIL_POSTGRES_BATCH_HPP
