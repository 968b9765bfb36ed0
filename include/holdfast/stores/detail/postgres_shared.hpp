// SPDX-License-Identifier: MIT
// holdfast/stores/detail/postgres_shared.hpp - pg_shared: postgres_store's read-write grants
// (store.hpp's read-write capability, RW1-RW4; read_write_lease.hpp uses it). Not public:
// postgres_store derives from pg_shared, which keeps a pointer to the store's link.
//
// One table of read-write rows beside the lease table (postgres_options::rw_table, default
// table + "_rw"; made by the same schema setup, postgres_store::schema_sql), keyed by
// (key_hash, owner), in a name space of its own (a plain lease "k" and a read-write "k" are two
// locks, as in memory_store and Redis). Tokens come from the lease table's sequence, so RW2 and T1
// hold across plain and read-write grants. A row is live while clock_timestamp() < expires_at
// (the grant's reading + ttl + 1 us, as the plain lease's: T2):
//
//   owner     | mode | token | expires_at      | what
//   ----------+------+-------+-----------------+----------------------------------------------
//   '' (none) | 'k'  | 0     | -infinity       | the key's lock row: every operation on the key
//             |      |       |                 | locks it first, so the key's operations are
//             |      |       |                 | serialized (an owner is never empty)
//   a reader  | 's'  | its   | its expiry      | one shared grant
//   the writer| 'x'  | its   | its expiry      | the exclusive grant
//   a writer  | 'i'  | 0     | the intent's end| the write intent (RW4); at most one per key
//
// An owner has at most one row per key: a reader cannot record an intent (no upgrade) and a
// writer with a live intent gets no shared grant (the intent keeps new readers out), so the
// intent's row becomes its owner's exclusive grant in place. The operations:
//
//   operation  | SQL (R = the read-write table, S = the sequence)
//   -----------+----------------------------------------------------------------------------
//   acquire_rw | ONE simple Query message, so ONE implicit transaction and one round trip:
//              |   1. INSERT the lock row ON CONFLICT DO UPDATE (locks it; waits for any other
//              |      operation on the key to commit)
//              |   2. one statement, judged at one clock_timestamp() reading, its snapshot taken
//              |      after 1 held the lock: the live rows -> the verdict (memory_store's table in
//              |      detail/memory_shared.hpp); a new grant draws nextval(S) then, not before;
//              |      upsert the owner's row (new grant, re-ask: the same token, expiry never
//              |      shortened; intent: until now + ttl); delete other owners' expired rows (and,
//              |      on an exclusive grant, their intent)
//   renew_rw   | UPDATE R the owner's live row of that mode and token, after locking the lock row
//   release_rw | DELETE R the owner's row of that mode and token (expired or not), after locking
//              | the lock row; committed with synchronous_commit = local, as release; NOTIFY
//              | "rw:" + the key's hash (hex) on the table's channel (detail/postgres_listen.hpp)
//   wait_rw    | SELECT how long the live rows that keep a mode out last; then a sleep on the
//              | listening session until that NOTIFY or that time (wait_for_release_rw)
//
// Why the lock row, and why two statements for an acquire: in READ COMMITTED a statement's
// snapshot is taken when it begins, so a statement that waited for a lock still reads the rows as
// they were before the wait; only the next statement sees what the lock holder committed. renew_rw
// and release_rw change only their own row, which PostgreSQL re-reads after a wait, but they take
// the lock row too, so that an acquire never judges a row that a renewal is extending or a
// release is deleting: every change to a key's rows happens under its lock row. Under REPEATABLE
// READ or SERIALIZABLE (a default_transaction_isolation the DBA set), the lock row's update makes
// a concurrent operation fail with 40001 (store_unavailable, transient) instead of judging a
// stale snapshot. Keys and owners travel in the acquire's text as hex bytea literals
// ('\x..'::bytea, standard_conforming_strings is on in every session), never as SQL text; renew
// and release send them as binary parameters. The statements are not prepared (a store whose
// role does not create tables keeps working for plain leases without the read-write table).
// Lock rows stay (one per key ever used, as the lease table's rows); expired grant rows go at
// the key's next acquire, and postgres_store::purge_expired deletes every row of a key whose
// grants all expired more than its grace ago (purge_rw). Part of stores/postgres.hpp; not for
// users.
#ifndef HOLDFAST_STORES_DETAIL_POSTGRES_SHARED_HPP
#define HOLDFAST_STORES_DETAIL_POSTGRES_SHARED_HPP

#include <libpq-fe.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

#include "holdfast/cancel.hpp"
#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/result.hpp"
#include "holdfast/store.hpp"
#include "holdfast/stores/detail/postgres_link.hpp"
#include "holdfast/stores/detail/postgres_listen.hpp"
#include "holdfast/stores/detail/postgres_sql.hpp"
#include "holdfast/stores/postgres_options.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

/// The CREATE statement of the read-write table named by `o` (schema_sql appends it); empty if
/// the options name an invalid table.
inline std::string pg_rw_schema_sql(const postgres_options& o) {
  const std::optional<std::string> r = pg_qualified(o.schema, pg_rw_table_name(o));
  if (!r) return {};
  return "CREATE TABLE IF NOT EXISTS " + *r +
         " (key_hash bytea NOT NULL, owner bytea NOT NULL, key bytea NOT NULL, mode text NOT "
         "NULL, token bigint NOT NULL, expires_at timestamptz NOT NULL, "
         "PRIMARY KEY (key_hash, owner));\n";
}

/// The read-write half of postgres_store: its SQL (built once from the options) and the three
/// operations. Thread-safety: as postgres_store's (every operation takes the link's lock; the
/// scratch strings are guarded by it).
class pg_shared {
 public:
  pg_shared(const pg_shared&) = delete;
  pg_shared& operator=(const pg_shared&) = delete;

  /// Grants `key`'s read-write lock to `owner` for `ttl` (ms) in `mode` (store.hpp RW1-RW4) in
  /// one transaction and one round trip, judged by the database's clock (clock_timestamp()): a
  /// shared grant while no writer holds and no other writer's intent is live, an exclusive one
  /// while nobody holds; a new grant takes the sequence's next value. The same owner asking again
  /// in the mode it holds live gets the same token, its expiry moved to at least now + ttl (a
  /// retry after a lost reply gets the grant it made back). An exclusive ask refused because
  /// readers hold records its owner's write intent for `ttl`, which keeps new readers out
  /// (writers first: detail/postgres_shared.hpp). \returns the grant; errc::busy (an upgrade or
  ///   downgrade ask included, and a shared ask blocked by an intent); errc::invalid_argument
  ///   (check_acquire_args, check_lease_mode, or a key and owner too large for one statement);
  ///   errc::token_exhausted if the sequence is at 2^63-1; errc::misconfigured if the read-write
  ///   table is missing (create_schema off: run schema_sql()); store_unavailable, timeout,
  ///   protocol_error, and grant_not_durable (a grant made after command_timeout, settled and
  ///   given back) as postgres_store::try_acquire.
  result<grant> try_acquire_rw(std::string_view key, std::string_view owner,
                               std::chrono::milliseconds ttl, lease_mode mode) {
    if (std::error_code ec = check_acquire_args(key, owner, ttl)) return rw_refused(ec);
    if (std::error_code ec = check_lease_mode(mode)) return rw_refused(ec);
    auto guard = rw_link_->lock();
    // The key twice and the owner once, each doubled by hex: within PostgreSQL's 1 GiB message.
    if ((key.size() * 2 + owner.size()) >= (std::size_t{1} << 28)) {
      return rw_link_->fail(errc::invalid_argument,
                            "postgres: try_acquire_rw: twice the key plus the owner is 256 MiB or "
                            "more: too large for one statement (1 GiB message limit)");
    }
    if (std::error_code ec = rw_link_->ensure_connected()) return ec;
    build_acquire(key, owner, ttl, mode);
    const auto deadline = std::chrono::steady_clock::now() + rw_link_->options().command_timeout;
    // Settled at its bound, as postgres_store::try_acquire: a commit still waiting for a
    // synchronous standby then is cancelled, and a grant it made is given back (below).
    result<pg_result_ptr> r =
        rw_link_->run_settled([&](PGconn* c) { return PQsendQuery(c, sql_.c_str()); }, deadline);
    if (!r && rw_link_->cut_short() && r.error() == errc::timeout) {
      return rw_link_->fail(errc::timeout,
                            "postgres: try_acquire_rw: cancelled at its deadline before it "
                            "applied (nothing was granted); " +
                                rw_link_->last_error());
    }
    if (!r) return r.error();
    const PGresult* res = r->get();
    if (PQntuples(res) == 1 && PQnfields(res) == 2 && PQgetlength(res, 0, 0) == 1) {
      const char verdict = PQgetvalue(res, 0, 0)[0];
      if (verdict == 'b' || verdict == 'i') return errc::busy;
      const std::optional<std::int64_t> t = text_int8(res, 1);
      if ((verdict == 'g' || verdict == 'r') && t && *t > 0) {
        const fencing_token token(static_cast<std::uint64_t>(*t));
        if (rw_link_->cut_short()) return give_back_late(key, owner, token, mode);
        return grant{token, ttl};
      }
    }
    return rw_link_->fail(errc::protocol_error,
                          "postgres: try_acquire_rw: unexpected result shape");
  }

  /// Moves the expiry of `owner`'s live `mode` grant of `key` carrying `token` to now + `ttl`
  /// (ms) by the database's clock, in one statement; an expired grant is never revived.
  /// \returns the grant (same token); errc::lease_lost if there is no such live grant (another
  ///   mode's included); errc::invalid_argument (check_renew_args, check_lease_mode);
  ///   store_unavailable, timeout, protocol_error as postgres_store::renew.
  result<grant> renew_rw(std::string_view key, std::string_view owner, fencing_token token,
                         std::chrono::milliseconds ttl, lease_mode mode) {
    if (std::error_code ec = check_renew_args(key, owner, token, ttl)) return rw_refused(ec);
    if (std::error_code ec = check_lease_mode(mode)) return rw_refused(ec);
    if (token > postgres_max_token) return rw_refused(errc::lease_lost);  // no sequence issues it
    auto guard = rw_link_->lock();
    result<pg_result_ptr> r = own_row(renew_sql_, key, owner, token, ttl, mode);
    if (!r) return r.error();
    const PGresult* res = r->get();
    if (PQntuples(res) == 0 && PQnfields(res) == 1) return errc::lease_lost;
    if (PQntuples(res) == 1 && pg_int8(res, 0) == static_cast<std::int64_t>(token.value())) {
      return grant{token, ttl};
    }
    return rw_link_->fail(errc::protocol_error, "postgres: renew_rw: unexpected result shape");
  }

  /// Ends `owner`'s `mode` grant of `key` carrying `token` (expired or not, as memory_store),
  /// in one statement. If the session (open since an earlier call) turns out to be broken, it
  /// reconnects and sends the release once more, as release() does.
  /// \returns success; errc::not_holder if there is no such grant;
  ///   errc::invalid_argument (check_release_args, check_lease_mode); store_unavailable,
  ///   timeout, protocol_error as postgres_store::release.
  result<void> release_rw(std::string_view key, std::string_view owner, fencing_token token,
                          lease_mode mode) {
    if (std::error_code ec = check_release_args(key, owner, token)) return rw_refused(ec);
    if (std::error_code ec = check_lease_mode(mode)) return rw_refused(ec);
    if (token > postgres_max_token) return rw_refused(errc::not_holder);
    auto guard = rw_link_->lock();
    const bool reused = rw_link_->connection() != nullptr;
    result<pg_result_ptr> r =
        own_row(release_sql_, key, owner, token, std::chrono::milliseconds(0), mode);
    if (!r && r.error() == errc::store_unavailable && reused && rw_link_->connection() == nullptr) {
      // As postgres_store::release: the session, open since an earlier call, broke under this one
      // (most often ended while idle: the statement never ran). A holder's last call: send it
      // once more rather than leave the grant to its TTL; if the first did run, this one answers
      // not_holder. (A client-side timeout is not retried: its statement may still be running.)
      r = own_row(release_sql_, key, owner, token, std::chrono::milliseconds(0), mode);
    }
    if (!r) return r.error();
    const PGresult* res = r->get();
    if (PQntuples(res) == 1 && PQnfields(res) == 1) return {};
    if (PQntuples(res) == 0 && PQnfields(res) == 1) return errc::not_holder;
    return rw_link_->fail(errc::protocol_error, "postgres: release_rw: unexpected result shape");
  }

  /// Blocks until `key`'s read-write lock may be free for `mode`, without polling (store.hpp's
  /// wait_for_release_rw; read_write_view offers it as wait_for_release, so acquire_read() and
  /// acquire_write() use it): asks the database in one statement how long the rows that keep
  /// `mode` out can live by its clock (a writer or an intent keeps readers out; a writer or a
  /// reader keeps writers out; a writer waits at most half its intent's time left, so its next
  /// ask renews the intent), then sleeps on the listening session (as wait_for_release) until
  /// release_rw's NOTIFY for the key, until that time (+ 1 ms after the request left, by this
  /// process's steady clock), until `deadline`, or until `cancel` is stopped. Returns at once if
  /// nothing keeps `mode` out. Every waiter of the key wakes on a read-write release. A lost
  /// notification costs the wait until those rows' expiry, never more; a listening session that
  /// dies ends the wait at once. Thread-safety: as wait_for_release. \returns success (woken
  ///   for any of those reasons); errc::cancelled once `cancel` was stopped;
  ///   errc::invalid_argument for an empty key or a bad mode; errc::misconfigured without the
  ///   read-write table; store_unavailable, timeout, protocol_error.
  result<void> wait_for_release_rw(std::string_view key, lease_mode mode,
                                   const std::chrono::steady_clock::time_point& deadline,
                                   const cancel_token& cancel = {}) {
    if (key.empty()) return rw_refused(errc::invalid_argument);
    if (length(key) < 0) return refused_too_large();
    if (std::error_code ec = check_lease_mode(mode)) return rw_refused(ec);
    pg_listening& l = *listen_;
    cancel_token::waker stop;  // before any lock: the wake-up takes l.mu
    wake_on_stop(stop, cancel, l.mu, l.cv, l.wake);
    if (std::error_code ec = pg_listen_ready(l)) return ec;  // LISTENs on connect
    const auto start = std::chrono::steady_clock::now();     // before the request leaves
    std::string payload;
    std::optional<std::int64_t> left;
    {
      auto guard = rw_link_->lock();
      if (std::error_code ec = rw_link_->ensure_connected()) return ec;
      static constexpr Oid types[] = {pg_bytea_oid, 25};
      const char* values[] = {key.data(), mode_text(mode)};
      const int lengths[] = {length(key), 0};
      const int formats[] = {1, 0};
      const auto until = start + rw_link_->options().command_timeout;
      result<pg_result_ptr> r = rw_link_->run(
          [&](PGconn* c) {
            return PQsendQueryParams(c, wait_sql_.c_str(), 2, types, values, lengths, formats, 1);
          },
          until, false);
      if (!r) return r.error();
      const PGresult* res = r->get();
      if (PQntuples(res) != 1 || PQnfields(res) != 2 || PQgetisnull(res, 0, 0)) {
        return rw_link_->fail(errc::protocol_error, "postgres: wait_rw: unexpected result shape");
      }
      payload.assign(PQgetvalue(res, 0, 0), static_cast<std::size_t>(PQgetlength(res, 0, 0)));
      if (!PQgetisnull(res, 0, 1)) {
        left = pg_int8(res, 1);
        if (!left || *left < 0) {
          return rw_link_->fail(errc::protocol_error, "postgres: wait_rw: unexpected result");
        }
      }
    }
    if (!left) return {};  // nothing keeps this mode out
    auto wake = start + std::chrono::milliseconds(*left + 1);
    if (deadline < wake) wake = deadline;
    pg_sleep_until_notified(l, payload, wake, cancel);
    if (cancel.stop_requested()) return errc::cancelled;
    return {};
  }

 protected:
  // `link` is the store's, which outlives this base.
  pg_shared(pg_link& link, const postgres_options& o)
      : listen_(std::make_unique<pg_listening>(o)),
        rw_link_(&link),
        table_(pg_qualified(o.schema, pg_rw_table_name(o)).value_or("\"invalid\"")),
        next_("nextval(" +
              pg_literal(pg_qualified(o.schema, pg_sequence_name(o)).value_or("\"invalid\"")) +
              "::regclass)") {
    const std::string lock = "WITH lk AS MATERIALIZED (SELECT 1 FROM " + table_ +
                             " WHERE key_hash = sha256($1) AND owner = ''::bytea FOR UPDATE) ";
    const std::string mine =
        " WHERE key_hash = sha256($1) AND owner = $2 AND owner <> ''::bytea AND token = $3 AND "
        "mode = $5 AND EXISTS (SELECT 1 FROM lk)";
    renew_sql_ = lock + "UPDATE " + table_ +
                 " SET expires_at = clock_timestamp() + $4 * interval '1 millisecond' + "
                 "interval '1 microsecond'" +
                 mine + " AND expires_at > clock_timestamp() RETURNING token";
    // $4 unused by the release; typed so that both statements take the same parameters.
    // It NOTIFYs the listening sessions (wait_for_release_rw), as the plain release does, with
    // "rw:" + the key's hash: the read-write name space's.
    release_sql_ =
        lock +
        ", c AS MATERIALIZED (SELECT set_config('synchronous_commit', CASE WHEN "
        "current_setting('synchronous_commit') = 'off' THEN 'off' ELSE 'local' END, true) "
        "WHERE $4 >= 0), d AS (DELETE FROM " +
        table_ + mine +
        " RETURNING token, key_hash) SELECT d.token FROM c, d CROSS JOIN LATERAL (SELECT "
        "pg_notify(" +
        pg_literal(pg_channel_name(o)) + ", 'rw:' || encode(d.key_hash, 'hex'))) AS n";
    // wait_for_release_rw: the payload its key's releases carry, and the ms (rounded up) until
    // the last live row that keeps mode $2 out ends (a writer or an intent keeps readers out; a
    // writer or a reader keeps writers out), for a writer at most half the live intent's time
    // left (RW4: it asks again before the intent lapses); NULL if none keeps it out.
    wait_sql_ =
        "WITH v AS MATERIALIZED (SELECT clock_timestamp() AS now, sha256($1) AS h), b AS (SELECT "
        "max(r.expires_at) FILTER (WHERE r.mode = 'x' OR r.mode = CASE $2 WHEN 's' THEN 'i' ELSE "
        "'s' END) AS free, max(r.expires_at) FILTER (WHERE r.mode = 'i' AND $2 = 'x') AS intent "
        "FROM v JOIN " +
        table_ +
        " AS r ON r.key_hash = v.h AND r.owner <> ''::bytea AND r.expires_at > v.now) SELECT "
        "'rw:' || encode(v.h, 'hex'), CASE WHEN b.free IS NOT NULL THEN GREATEST(0, ceil(EXTRACT("
        "EPOCH FROM (LEAST(b.free, v.now + (b.intent - v.now) / 2) - v.now)) * 1000))::int8 END "
        "FROM v, b";
  }
  ~pg_shared() = default;

  // The listening session of every wait of the store (detail/postgres_listen.hpp).
  std::unique_ptr<pg_listening> listen_;

  // [locked] postgres_store::purge_expired's read-write half: deletes every row of each key whose
  // grant rows all expired more than `grace` ago (its lock row included), in one transaction of
  // two statements, and returns how many rows went; 0 without a read-write table (a store whose
  // role made only the lease table: 42P01). Why two: in READ COMMITTED a statement that waited
  // for a row judges the other rows by its older snapshot, so the first statement only marks (and
  // so locks) the idle keys' lock rows, and the second, with a fresh snapshot that holds what
  // every operation on those keys committed before the marks (none can commit after them: every
  // change to a key's rows happens under its lock row), deletes the keys still idle and unmarks
  // the rest. Lock rows carry no token otherwise (token 0, never read), so -1 marks nothing else.
  result<std::uint64_t> purge_rw(std::chrono::milliseconds grace) {
    if (std::error_code ec = rw_link_->ensure_connected()) return ec;
    const std::string idle = "NOT EXISTS (SELECT 1 FROM " + table_ +
                             " AS x WHERE x.key_hash = l.key_hash AND x.owner <> ''::bytea AND "
                             "x.expires_at >= clock_timestamp() - " +
                             std::to_string(grace.count()) + " * interval '1 millisecond')";
    sql_ = "UPDATE " + table_ + " AS l SET token = -1 WHERE l.owner = ''::bytea AND " + idle +
           ";\nWITH d AS (DELETE FROM " + table_ + " AS r USING " + table_ +
           " AS l WHERE l.owner = ''::bytea AND l.token = -1 AND r.key_hash = l.key_hash AND " +
           idle + " RETURNING r.key_hash), k AS (UPDATE " + table_ +
           " AS l SET token = 0 WHERE l.owner = ''::bytea AND l.token = -1 AND l.key_hash NOT IN "
           "(SELECT key_hash FROM d)) SELECT count(*)::text, 0 FROM d";
    const auto deadline = std::chrono::steady_clock::now() + rw_link_->options().command_timeout;
    result<pg_result_ptr> r =
        rw_link_->run([&](PGconn* c) { return PQsendQuery(c, sql_.c_str()); }, deadline, false);
    if (!r) {
      if (r.error() == errc::misconfigured &&
          rw_link_->last_error().find("42P01") != std::string::npos) {
        (void)rw_link_->fail(errc::misconfigured, {});  // no read-write table: nothing to purge
        return std::uint64_t{0};
      }
      return r.error();
    }
    const PGresult* res = r->get();
    if (PQntuples(res) == 1 && PQnfields(res) == 2) {
      if (const std::optional<std::int64_t> n = text_int8(res, 0)) {
        return static_cast<std::uint64_t>(*n);
      }
    }
    return rw_link_->fail(errc::protocol_error, "postgres: purge: unexpected result shape");
  }

  // A bytea value is at most 1 GiB - 1 (PostgreSQL's field limit): larger is -1, refused with
  // invalid_argument before anything is sent (too_large()). postgres_store's statements use these.
  static int length(std::string_view s) noexcept {
    return s.size() >= (std::size_t{1} << 30) ? -1 : static_cast<int>(s.size());
  }
  std::error_code too_large() {
    return rw_link_->fail(errc::invalid_argument,
                          "postgres: a key or owner of 1 GiB or more: over PostgreSQL's 1 GiB "
                          "field limit (bytea)");
  }
  // too_large() for a call that does not hold the link: a refused call of its own.
  std::error_code refused_too_large() {
    auto guard = rw_link_->lock();
    return too_large();
  }

 private:
  std::error_code rw_refused(std::error_code ec) const {
    auto guard = rw_link_->lock();
    return ec;
  }

  // [locked] Runs renew_sql_ or release_sql_: $1 key, $2 owner (bytea, binary), $3 token, $4 ttl
  // (int8), $5 mode (text).
  result<pg_result_ptr> own_row(const std::string& sql, std::string_view key,
                                std::string_view owner, fencing_token token,
                                std::chrono::milliseconds ttl, lease_mode mode,
                                bool settling = false) {
    if (length(key) < 0 || length(owner) < 0) return too_large();
    if (std::error_code ec = rw_link_->ensure_connected()) return ec;
    token_text_ = std::to_string(token.value());
    ttl_text_ = std::to_string(ttl.count());
    static constexpr Oid types[] = {pg_bytea_oid, pg_bytea_oid, pg_int8_oid, pg_int8_oid, 25};
    const char* values[] = {key.data(), owner.data(), token_text_.c_str(), ttl_text_.c_str(),
                            mode_text(mode)};
    const int lengths[] = {length(key), length(owner), 0, 0, 0};
    const int formats[] = {1, 1, 0, 0, 0};
    const auto deadline = std::chrono::steady_clock::now() +
                          (settling ? pg_settle_bound : rw_link_->options().command_timeout);
    return rw_link_->run(
        [&](PGconn* c) {
          return PQsendQueryParams(c, sql.c_str(), 5, types, values, lengths, formats, 1);
        },
        deadline, false);
  }

  // [link locked] A read-write grant made only after command_timeout (the cancel ended its
  // commit's wait for a synchronous standby; it had committed locally): the caller is told it
  // failed, so it is released now (release_sql_ commits with synchronous_commit = local), within
  // pg_settle_bound (store_deadline.hpp, D2, as postgres_store::give_back_late).
  result<grant> give_back_late(std::string_view key, std::string_view owner, fencing_token token,
                               lease_mode mode) {
    result<pg_result_ptr> r =
        own_row(release_sql_, key, owner, token, std::chrono::milliseconds(0), mode, true);
    const std::string late = "postgres: try_acquire_rw: the grant (token " +
                             std::to_string(token.value()) +
                             ") was made after command_timeout (a commit waiting for a "
                             "synchronous standby, cancelled: it committed locally)";
    if (r && PQntuples(r->get()) <= 1) {
      return rw_link_->fail(errc::grant_not_durable, late + "; it was given back");
    }
    return rw_link_->fail(errc::timeout, late + "; giving it back failed (" +
                                             rw_link_->last_error() + "): it lasts until its TTL");
  }

  static const char* mode_text(lease_mode m) noexcept {
    return m == lease_mode::shared ? "s" : "x";
  }

  // Appends '\x<hex>'::bytea.
  static void append_bytea(std::string& out, std::string_view bytes) {
    static constexpr char hex[] = "0123456789abcdef";
    out += "'\\x";
    for (unsigned char c : bytes) {
      out += hex[c >> 4];
      out += hex[c & 15];
    }
    out += "'::bytea";
  }

  // [locked] The acquire's two statements for these arguments in sql_ (see the overview).
  void build_acquire(std::string_view key, std::string_view owner, std::chrono::milliseconds ttl,
                     lease_mode mode) {
    const bool ex = mode == lease_mode::exclusive;
    sql_.clear();
    sql_.reserve(4 * key.size() + 2 * owner.size() + 2600);
    sql_ += "INSERT INTO " + table_ +
            " AS l (key_hash, owner, key, mode, token, expires_at) SELECT sha256(a.k), ''::bytea, "
            "a.k, 'k', 0, '-infinity' FROM (SELECT ";
    append_bytea(sql_, key);
    sql_ +=
        " AS k) AS a ON CONFLICT (key_hash, owner) DO UPDATE SET token = l.token;\n"
        "WITH a AS MATERIALIZED (SELECT ";
    append_bytea(sql_, key);
    sql_ += " AS k, ";
    append_bytea(sql_, owner);
    sql_ +=
        " AS o), v AS MATERIALIZED (SELECT clock_timestamp() AS now, sha256(a.k) AS h, a.k, a.o "
        "FROM a), "
        // The live rows of the key, as seen once the lock row is ours.
        "s AS MATERIALIZED (SELECT coalesce(bool_or(r.mode = 'x'), false) AS writer, "
        "coalesce(bool_or(r.mode = 'x' AND r.owner = v.o), false) AS my_writer, "
        "count(*) FILTER (WHERE r.mode = 's') AS readers, "
        "coalesce(bool_or(r.mode = 's' AND r.owner = v.o), false) AS my_reader, "
        "coalesce(bool_or(r.mode = 'i'), false) AS intent, "
        "coalesce(bool_or(r.mode = 'i' AND r.owner = v.o), false) AS my_intent, "
        "max(r.token) FILTER (WHERE r.owner = v.o AND r.mode <> 'i') AS my_token FROM v JOIN " +
        table_ +
        " AS r ON r.key_hash = v.h AND r.owner <> ''::bytea AND r.expires_at > v.now), "
        // The verdict: g a new grant, r the same grant again, i busy and an intent, b busy.
        "d AS MATERIALIZED (SELECT CASE ";
    sql_ += ex ? "WHEN writer THEN CASE WHEN my_writer THEN 'r' ELSE 'b' END "
                 "WHEN readers = 0 THEN 'g' WHEN my_reader THEN 'b' "
                 "WHEN NOT intent OR my_intent THEN 'i' ELSE 'b' END"
               : "WHEN writer THEN 'b' WHEN my_reader THEN 'r' WHEN intent THEN 'b' ELSE 'g' END";
    sql_ += " AS act, my_token FROM s), u AS (INSERT INTO " + table_ +
            " AS l (key_hash, owner, key, mode, token, expires_at) SELECT v.h, v.o, v.k, CASE WHEN "
            "d.act = 'i' THEN 'i' ELSE '";
    sql_ += mode_text(mode);
    sql_ += "' END, CASE d.act WHEN 'g' THEN " + next_ +
            " WHEN 'r' THEN d.my_token ELSE 0 END, v.now + " + std::to_string(ttl.count()) +
            " * interval '1 millisecond' + interval '1 microsecond' FROM v, d WHERE d.act <> 'b' "
            // The re-ask keeps the later expiry; a new grant or an intent replaces the row.
            "ON CONFLICT (key_hash, owner) DO UPDATE SET key = EXCLUDED.key, mode = EXCLUDED.mode, "
            "token = EXCLUDED.token, expires_at = CASE WHEN EXCLUDED.mode <> 'i' AND l.mode = "
            "EXCLUDED.mode AND l.token = EXCLUDED.token THEN GREATEST(l.expires_at, "
            "EXCLUDED.expires_at) ELSE EXCLUDED.expires_at END RETURNING l.token), "
            "x AS (DELETE FROM " +
            table_ +
            " AS r USING v, d WHERE r.key_hash = v.h AND r.owner <> ''::bytea AND r.owner <> v.o "
            "AND (r.expires_at <= v.now";
    sql_ += ex ? " OR (d.act = 'g' AND r.mode = 'i'))) " : ")) ";
    sql_ += "SELECT d.act, u.token FROM d LEFT JOIN u ON true";
  }

  // Column `col` of row 0 as a text-format integer (a simple query's result).
  static std::optional<std::int64_t> text_int8(const PGresult* r, int col) {
    if (PQgetisnull(r, 0, col) || PQfformat(r, col) != 0) return std::nullopt;
    const char* p = PQgetvalue(r, 0, col);
    const int n = PQgetlength(r, 0, col);
    if (n < 1 || n > 19) return std::nullopt;
    std::int64_t v = 0;
    for (int i = 0; i < n; ++i) {
      if (p[i] < '0' || p[i] > '9') return std::nullopt;
      const std::int64_t digit = p[i] - '0';
      if (v > (INT64_MAX - digit) / 10) return std::nullopt;
      v = v * 10 + digit;
    }
    return v;
  }

  pg_link* rw_link_;   // (not link_: postgres_store has one from link_client)
  std::string table_;  // the read-write table, quoted
  std::string next_;   // nextval of the lease table's sequence
  std::string renew_sql_;
  std::string release_sql_;
  std::string wait_sql_;
  std::string sql_;  // scratch, guarded by the link's lock
  std::string token_text_;
  std::string ttl_text_;
};

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_DETAIL_POSTGRES_SHARED_HPP
