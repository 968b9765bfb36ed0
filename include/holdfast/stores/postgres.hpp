// SPDX-License-Identifier: MIT
// holdfast/stores/postgres.hpp - postgres_store: a LeaseStore in a PostgreSQL table, and fenced
// writes (postgres_fenced_update/_upsert/_insert, postgres_fence): a user's data and its fence
// changed in ONE statement. Opt-in: needs libpq (link -lpq, include path from `pkg-config
// --cflags libpq`); nothing in the core includes it.
//
// Lease records live in a table (created on demand, name configurable, quoted safely), tokens come
// from one SEQUENCE (store-wide, durable: WAL-logged, so they keep increasing across restarts and
// crashes). Every operation is ONE prepared, parameterized statement, judged by the database's
// clock (clock_timestamp()), and atomic per key by PostgreSQL's row locking:
//
//   operation | statement (T = the table, S = the sequence)
//   ----------+-------------------------------------------------------------------------------
//   acquire   | INSERT INTO T ... VALUES (sha256(key), key, owner, nextval(S), now + ttl)
//             |   ON CONFLICT (key_hash) DO UPDATE SET owner, token = CASE same owner and live
//             |   THEN old token ELSE nextval(S) END, expires_at ... WHERE expired OR same owner
//             |   RETURNING token                      (no row back: busy)
//   renew     | UPDATE T SET expires_at = now + ttl WHERE key, owner, token match AND live
//   release   | UPDATE T SET owner = '', expires_at = -infinity WHERE key, owner, token match
//             |   (committed with synchronous_commit = local: it waits for no standby; a
//             |   release a failover loses leaves the key held until its expiry, never freed)
//   inspect   | SELECT owner, token, remaining ms WHERE key matches AND live
//
// The ON CONFLICT branch draws its token *after* it has locked the row, so two acquirers of one key
// get tokens in the order they were granted (T1). The row is the key's memory: release and expiry
// keep it (the token stays with it), so a key's next grant always comes through the locked branch.
// A row is needed only while a statement that started before its last grant could still be
// running; purge_expired() deletes rows expired longer ago than that (see its bounds).
//
// Table layout: key_hash bytea PRIMARY KEY (sha256 of the key: btree entries are limited to ~2.7
// kB, keys are not), key bytea, owner bytea, token bigint, expires_at timestamptz. Keys and owners
// are bytea parameters in binary format: any bytes, NUL included, up to 1 GB. Tokens: 1 .. 2^63-1
// (a bigint sequence); a sequence at its maximum makes acquire report token_exhausted. The sequence
// is also drawn (and the value dropped) by acquires that end busy or re-acquire: tokens have gaps.
// Lives: every session first checks the server's life ("<system_identifier>/<timeline>"): a
// new one (a promoted standby, a point-in-time recovery) raises the sequence by 2^32 before the
// session draws a token, so new holders pass every token the old life issued and lost
// (detail/postgres_deployment.hpp, postgres_life_sql, says why that suffices). The record is a
// row no lease can have (empty key_hash). A standby (in recovery) is misconfigured, never retried.
//
// Time (T2): a grant of ttl is held while clock_timestamp() < (its reading at the grant) + ttl +
// 1 us, the clock's tick, so it lasts at least ttl in real time (never truncated to a tick).
// Expiry uses clock_timestamp(), the database server's wall clock: a step of that clock
// (an operator's `date -s`, NTP stepping instead of slewing) moves every expiry with it. Run the
// database host with a slewing time daemon. TTLs are sent as durations, never as client instants.
//
// Deadlines (store_deadline.hpp): try_acquire_until bounds the acquire by the caller's deadline.
// An acquire still running at its bound (the deadline or command_timeout) is not abandoned, since
// PostgreSQL may apply it after the client gave up: with a synchronous standby that does not
// answer, the commit waits for it after committing locally, and the transaction becomes visible
// when the wait ends (a cancel: "canceling wait for synchronous replication ... the transaction
// has already committed locally"; or the standby's return), a grant nobody was told of. So the
// store cancels the statement through a second session (pg_cancel_backend), reads its outcome,
// and releases a grant it made (the release commits with synchronous_commit = local, so it
// succeeds while the standby is away), then answers grant_not_durable; each step within
// pg_settle_bound (250 ms). A call thus ends by its bound + 2 x 250 ms at worst, a few ms on a live
// server. Only where the server answers neither (stopped, unreachable) is the connection
// dropped with errc::timeout, and a grant then left lasts at most its TTL.
// Connection: libpq conninfo string or URI; connect and command timeouts enforced by holdfast on a
// non-blocking connection (poll), plus statement_timeout on the server. Authentication, TLS
// (sslmode=...), host lists and target_session_attrs are whatever libpq and the conninfo give.
// libpq resolves host names synchronously, outside the connect timeout (hostaddr= avoids DNS). Any
// transport failure, timeout or server error is an error, never a grant (T4): the connection is
// dropped and re-established by the next call, the failed call is not retried, and the server's
// message is kept in last_error_message(). Files: include this one (it brings postgres_options.hpp
// and postgres_fence.hpp); internals: detail/postgres_{link,sql,multi,batch,shared,listen}.hpp.
// Read-write grants (try_acquire_rw, renew_rw, release_rw: store.hpp RW1-RW4) live in a second
// table, one row per key and owner, tokens from the same sequence: detail/postgres_shared.hpp.
#ifndef HOLDFAST_STORES_POSTGRES_HPP
#define HOLDFAST_STORES_POSTGRES_HPP

#include <libpq-fe.h>

#include <chrono>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "holdfast/deployment.hpp"
#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/result.hpp"
#include "holdfast/store.hpp"
#include "holdfast/stores/detail/link_client.hpp"
#include "holdfast/stores/detail/postgres_batch.hpp"
#include "holdfast/stores/detail/postgres_deployment.hpp"
#include "holdfast/stores/detail/postgres_link.hpp"
#include "holdfast/stores/detail/postgres_listen.hpp"
#include "holdfast/stores/detail/postgres_multi.hpp"
#include "holdfast/stores/detail/postgres_shared.hpp"
#include "holdfast/stores/detail/postgres_sql.hpp"
#include "holdfast/stores/detail/postgres_statements.hpp"
#include "holdfast/stores/postgres_fence.hpp"
#include "holdfast/stores/postgres_options.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

/// A LeaseStore in a PostgreSQL table (see the file overview for the statements, durability and
/// failure behaviour). Models LeaseStore with inspect(), and has the read-write capability
/// (has_read_write_v; try_acquire_rw, renew_rw, release_rw and wait_for_release_rw:
/// detail/postgres_shared.hpp).
///
/// Tokens are store-wide (one sequence per table): every new grant of any key carries a token
/// greater than every token the sequence issued before, across restarts and crashes, in
/// 1 .. 2^63-1. Semantics match memory_store, including "release of an expired lease nobody took
/// over succeeds", except that expiry follows the database server's clock.
///
/// Thread-safety: every member function may be called concurrently; one mutex serializes the
/// connection (a PGconn is single-threaded), so callers take turns, one round trip each. For
/// parallel round trips use one postgres_store per thread. Not fork-safe: a child process makes
/// its own. Connects lazily on first use (or connect()).
class postgres_store : public detail::link_client<detail::pg_link>, public detail::pg_shared {
 public:
  // connect(), options(), last_error_message() (the latest call's failure): detail::link_client.

  /// Makes a store for the database in `opts`; connects on first use. Never throws (but bad_alloc).
  explicit postgres_store(const postgres_options& opts = {})
      : link_client(std::in_place, opts, setup_sql(opts), detail::pg_store_statements(opts)),
        pg_shared(link_, opts),
        multi_(opts) {}

  postgres_store(const postgres_store&) = delete;
  postgres_store& operator=(const postgres_store&) = delete;

  /// Returns the SQL that creates the tables and sequence (what create_schema runs), for a DBA
  /// to run ahead of time: the lease table, the sequence and the read-write table. Empty if the
  /// options name an invalid table or sequence.
  static std::string schema_sql(const postgres_options& o) {
    const std::optional<std::string> t = detail::pg_qualified(o.schema, o.table);
    const std::optional<std::string> s =
        detail::pg_qualified(o.schema, detail::pg_sequence_name(o));
    const std::string rw = detail::pg_rw_schema_sql(o);
    if (!t || !s || rw.empty()) return {};
    return "CREATE TABLE IF NOT EXISTS " + *t +
           " (key_hash bytea PRIMARY KEY, key bytea NOT NULL, owner bytea NOT NULL, "
           "token bigint NOT NULL, expires_at timestamptz NOT NULL);\n"
           "CREATE SEQUENCE IF NOT EXISTS " +
           *s + " AS bigint MINVALUE 1 NO CYCLE;\n" + rw;
  }

  /// Grants `key` to `owner` for `ttl` (ms) iff it has no unexpired lease (by the database's
  /// clock), with the next value of the sequence, in one statement. The same owner re-acquiring
  /// its live lease gets the same token back and its expiry moved to at least now + ttl.
  /// \returns the grant {token, ttl}; errc::busy if another owner holds a live lease;
  ///   errc::invalid_argument for an empty key/owner or ttl not in (0, max_ttl];
  ///   errc::token_exhausted if the sequence is at 2^63-1; errc::store_unavailable or
  ///   errc::timeout if the database is unreachable, not serving or too slow (no grant is
  ///   reported; a statement still running at command_timeout is settled as try_acquire_until
  ///   settles it, and where the server does not answer one may remain until its TTL);
  ///   errc::grant_not_durable if the grant was made after command_timeout and given back;
  ///   errc::protocol_error for a result of the wrong shape or an unexpected SQL error.
  result<grant> try_acquire(std::string_view key, std::string_view owner,
                            std::chrono::milliseconds ttl) {
    return acquire_until(key, owner, ttl, std::chrono::steady_clock::time_point::max());
  }

  /// try_acquire, answered by `deadline` (store_deadline.hpp, D1-D2): a connect is bounded by the
  /// earlier of `deadline` and connect_timeout, the statement by the earlier of it and
  /// command_timeout; one still running then (most often a commit
  /// waiting for a synchronous standby that does not answer) is cancelled through a second
  /// session and its outcome read, and a grant it made is released (synchronous_commit = local:
  /// the release waits for no standby), each step within pg_settle_bound (250 ms; a round trip or
  /// two on a live server). try_acquire does the same at command_timeout.
  /// \returns as try_acquire; errc::grant_not_durable if the grant was made only after the bound
  ///   and was given back (nothing is held); errc::timeout if the statement was cancelled before
  ///   it applied, or if the server did not answer the cancel or the release in time (then a
  ///   grant may remain until its TTL: callers give back as after a lost reply).
  result<grant> try_acquire_until(std::string_view key, std::string_view owner,
                                  std::chrono::milliseconds ttl,
                                  const std::chrono::steady_clock::time_point& deadline) {
    const detail::call_bound bound(deadline);  // the connect too (detail/postgres_link.hpp)
    return acquire_until(key, owner, ttl, deadline);
  }

  /// Grants all of `keys[0..count)` to `owner` for `ttl` (ms) in one transaction, or none
  /// (store.hpp's try_acquire_all; detail/postgres_multi.hpp says how, and what it returns).
  result<void> try_acquire_all(const std::string_view* keys, std::size_t count,
                               std::string_view owner, std::chrono::milliseconds ttl,
                               grant* grants) {
    return multi_.acquire_all(link_, keys, count, owner, ttl, grants, stmt_release);
  }

  /// Moves the expiry of the lease on `key` to now + `ttl` (ms) iff `owner` holds it with `token`
  /// and it has not expired, in one statement. \returns the grant (same token); errc::lease_lost
  ///   otherwise; errc::invalid_argument (see check_renew_args); store_unavailable, timeout,
  ///   protocol_error as for try_acquire.
  result<grant> renew(std::string_view key, std::string_view owner, fencing_token token,
                      std::chrono::milliseconds ttl) {
    if (std::error_code ec = check_renew_args(key, owner, token, ttl)) return refused(ec);
    if (token > postgres_max_token) return errc::lease_lost;  // no sequence issues it
    auto guard = link_.lock();
    ttl_text_ = std::to_string(ttl.count());
    token_text_ = std::to_string(token.value());
    const char* values[] = {key.data(), owner.data(), token_text_.c_str(), ttl_text_.c_str()};
    const int lengths[] = {length(key), length(owner), 0, 0};
    const int formats[] = {1, 1, 0, 0};
    if (lengths[0] < 0 || lengths[1] < 0) return too_large();
    result<detail::pg_result_ptr> r = link_.exec(stmt_renew, 4, values, lengths, formats);
    if (!r) return r.error();
    const PGresult* res = r->get();
    if (PQntuples(res) == 0 && PQnfields(res) == 1) return errc::lease_lost;
    if (PQntuples(res) == 1 &&
        detail::pg_int8(res, 0) == static_cast<std::int64_t>(token.value())) {
      return grant{token, ttl};
    }
    return link_.fail(errc::protocol_error, "postgres: renew: unexpected result shape");
  }
  /// renew() of q[0..n) in ONE statement, each lease its own outcome (detail/postgres_batch.hpp).
  void renew_batch(const store_request* q, std::size_t n, result<grant>* out) {
    detail::pg_renew_batch(link_, *this, q, n, out);
  }

  /// Frees `key` iff `owner` holds it with `token` (expired or not, as memory_store), in one
  /// statement; the row stays, emptied, to carry the key's history. \returns success;
  ///   errc::not_holder otherwise; errc::invalid_argument (see check_release_args);
  ///   store_unavailable, timeout, protocol_error as for try_acquire. If the session (open since
  ///   an earlier call) turns out to be broken, it reconnects and sends the release once more.
  result<void> release(std::string_view key, std::string_view owner, fencing_token token) {
    if (std::error_code ec = check_release_args(key, owner, token)) return refused(ec);
    if (token > postgres_max_token) return errc::not_holder;
    auto guard = link_.lock();
    token_text_ = std::to_string(token.value());
    const char* values[] = {key.data(), owner.data(), token_text_.c_str()};
    const int lengths[] = {length(key), length(owner), 0};
    const int formats[] = {1, 1, 0};
    if (lengths[0] < 0 || lengths[1] < 0) return too_large();
    const bool reused = link_.connection() != nullptr;
    result<detail::pg_result_ptr> r = link_.exec(stmt_release, 3, values, lengths, formats);
    if (!r && r.error() == errc::store_unavailable && reused && link_.connection() == nullptr) {
      // The session, open since an earlier call, broke under this one: most often the server
      // ended it while idle (a restart, pg_terminate_backend, an idle timeout) and the statement
      // never ran. A release is the one call a holder makes on its way out, so reconnect and send
      // it once more rather than leave the key to its TTL; if the first did run, this one
      // answers not_holder. (A client-side timeout is not retried: that session was dropped
      // while its statement might still be running.)
      r = link_.exec(stmt_release, 3, values, lengths, formats);
    }
    if (!r) return r.error();
    const PGresult* res = r->get();
    if (PQntuples(res) == 1 && PQnfields(res) == 1) return {};
    if (PQntuples(res) == 0 && PQnfields(res) == 1) return errc::not_holder;
    return link_.fail(errc::protocol_error, "postgres: release: unexpected result shape");
  }

  /// Returns the live lease on `key` (owner, token, time left by the database's clock in ms,
  /// rounded down), or nullopt. \returns errc::invalid_argument for an empty key;
  ///   store_unavailable, timeout, protocol_error.
  result<std::optional<lease_record>> inspect(std::string_view key) {
    if (key.empty()) return refused(errc::invalid_argument);
    auto guard = link_.lock();
    const char* values[] = {key.data()};
    const int lengths[] = {length(key)};
    const int formats[] = {1};
    if (lengths[0] < 0) return too_large();
    result<detail::pg_result_ptr> r = link_.exec(stmt_inspect, 1, values, lengths, formats);
    if (!r) return r.error();
    const PGresult* res = r->get();
    if (PQntuples(res) == 0 && PQnfields(res) == 3) return std::optional<lease_record>{};
    if (PQntuples(res) == 1 && PQnfields(res) == 3 && PQftype(res, 0) == detail::pg_bytea_oid &&
        PQfformat(res, 0) == 1 && !PQgetisnull(res, 0, 0)) {
      const std::optional<std::int64_t> t = detail::pg_int8(res, 1);
      const std::optional<std::int64_t> left = detail::pg_int8(res, 2);
      if (t && *t > 0 && left && *left >= 0) {
        return std::optional<lease_record>{lease_record{
            std::string(PQgetvalue(res, 0, 0), static_cast<std::size_t>(PQgetlength(res, 0, 0))),
            fencing_token(static_cast<std::uint64_t>(*t)), std::chrono::milliseconds(*left)}};
      }
    }
    return link_.fail(errc::protocol_error, "postgres: inspect: unexpected result shape");
  }

  /// Returns what this store reads about its deployment now, in one query on its connection
  /// (deployment.hpp): fsync, synchronous_commit, synchronous_standby_names, the streaming
  /// standbys and which are synchronous (pg_stat_replication; its sync_state needs superuser or
  /// pg_read_all_stats), whether the server is in recovery, and its life
  /// "<system_identifier>/<timeline>". \returns the report; store_unavailable, timeout,
  ///   protocol_error.
  result<deployment_report> deployment() {
    auto guard = link_.lock();
    return detail::read_postgres_deployment(link_);
  }

  /// Returns the newest token the sequence has issued (none if it has issued none). Values drawn
  /// by statements that ended busy count too. \returns store_unavailable, timeout, protocol_error.
  result<fencing_token> last_token() {
    auto guard = link_.lock();
    result<detail::pg_result_ptr> r = link_.exec(stmt_last_token, 0, nullptr, nullptr, nullptr);
    if (!r) return r.error();
    const PGresult* res = r->get();
    if (PQntuples(res) == 1) {
      const std::optional<std::int64_t> t = detail::pg_int8(res, 0);
      if (t && *t >= 0) return fencing_token(static_cast<std::uint64_t>(*t));
    }
    return link_.fail(errc::protocol_error, "postgres: last_token: unexpected result shape");
  }

  /// Blocks until `key` may be free, without polling (store.hpp's wait_for_release capability,
  /// used by blocking acquire()): a second session LISTENs on the table's channel, and the release
  /// statement NOTIFYs it (pg_notify in the same statement, delivered when it commits) with the
  /// key's hash. The waiter asks the database for the holder's time left in one statement, then
  /// sleeps until a release of its key is announced, until the holder's lease can have expired
  /// (that time, rounded up, after the request left, on this process's steady clock), until
  /// `deadline`, or until `cancel` is stopped (its wake-up ends the poll through a self-pipe,
  /// never calling libpq), whichever comes first. Returns at once if the key is free.
  ///
  /// Notifications are hints: one that is lost (a release written by hand) costs the wait until
  /// the holder's expiry, never more; the store stays the judge. A listening session that dies
  /// ends the wait at once (success, unwoken): the caller asks again and its next wait LISTENs on
  /// a fresh session, so the next release still wakes it.
  /// PostgreSQL delivers a notification to every listener, so every waiter of the key wakes on a
  /// release (one of them gets it; the others find it busy and wait again), unlike Redis' queue.
  ///
  /// Thread-safety: any number of threads may wait on one store; one reads the session at a time.
  /// \returns success (woken for any of the reasons above); errc::cancelled once `cancel` was
  ///   stopped; errc::invalid_argument for an empty key; store_unavailable, timeout,
  ///   protocol_error if the session or the statement failed.
  result<void> wait_for_release(std::string_view key,
                                const std::chrono::steady_clock::time_point& deadline,
                                const cancel_token& cancel = {}) {
    return wait_released(key, deadline, cancel, fencing_token{});
  }

  /// For observers (election::next_leader): the same as wait_for_release, which here takes no
  /// place in any queue (PostgreSQL announces every release to every listener), so watching
  /// never takes a release away from a waiting acquirer; at once if the key is not held under
  /// `known` (if given: the holder read before is gone). \returns as wait_for_release.
  result<void> watch_release(std::string_view key,
                             const std::chrono::steady_clock::time_point& deadline,
                             const cancel_token& cancel = {}, fencing_token known = {}) {
    return wait_released(key, deadline, cancel, known);
  }

  /// Deletes lease rows that expired (or were released) more than `grace` (ms) ago, and every
  /// read-write row of a key whose grants all did, to bound both tables to the keys in recent use.
  /// Safe iff no acquire statement on this table can run longer than `grace`: a statement that drew
  /// its token before a row's last grant must be gone before the row is, or it could insert that
  /// older token afresh (T1). holdfast bounds its own statements by command_timeout
  /// (statement_timeout), so `grace` must exceed the command_timeout of every store on the table.
  /// \returns how many rows were deleted (both tables; a missing
  ///   read-write table counts none); errc::invalid_argument if
  ///   `grace` <= this store's command_timeout or > max_ttl; store_unavailable, timeout,
  ///   protocol_error.
  result<std::uint64_t> purge_expired(std::chrono::milliseconds grace) {
    if (grace <= link_.options().command_timeout || grace > max_ttl) {
      return refused(errc::invalid_argument);
    }
    auto guard = link_.lock();
    ttl_text_ = std::to_string(grace.count());
    const char* values[] = {ttl_text_.c_str()};
    const int lengths[] = {0};
    const int formats[] = {0};
    result<detail::pg_result_ptr> r = link_.exec(stmt_purge, 1, values, lengths, formats);
    if (!r) return r.error();
    const std::optional<std::int64_t> n =
        PQntuples(r->get()) == 1 ? detail::pg_int8(r->get(), 0) : std::nullopt;
    if (!n || *n < 0) return link_.fail(errc::protocol_error, "postgres: purge: unexpected result");
    result<std::uint64_t> rw = purge_rw(grace);  // the read-write table (detail/postgres_shared)
    if (!rw) return rw.error();
    return static_cast<std::uint64_t>(*n) + *rw;
  }

 private:
  // try_acquire and try_acquire_until (see there): one statement, settled at its bound.
  result<grant> acquire_until(std::string_view key, std::string_view owner,
                              std::chrono::milliseconds ttl,
                              std::chrono::steady_clock::time_point until) {
    if (std::error_code ec = check_acquire_args(key, owner, ttl)) return refused(ec);
    auto guard = link_.lock();
    ttl_text_ = std::to_string(ttl.count());
    const char* values[] = {key.data(), owner.data(), ttl_text_.c_str()};
    const int lengths[] = {length(key), length(owner), 0};
    const int formats[] = {1, 1, 0};
    if (lengths[0] < 0 || lengths[1] < 0) return too_large();
    result<detail::pg_result_ptr> r =
        link_.exec(stmt_acquire, 3, values, lengths, formats, until, true);
    if (!r && link_.cut_short() && r.error() == errc::timeout) {
      return link_.fail(errc::timeout,
                        "postgres: acquire: cancelled at its deadline before it applied "
                        "(nothing was granted); " +
                            link_.last_error());
    }
    if (!r) return r.error();
    const PGresult* res = r->get();
    if (PQntuples(res) == 0 && PQnfields(res) == 1) return errc::busy;
    if (PQntuples(res) == 1 && PQnfields(res) == 1) {
      const std::optional<std::int64_t> t = detail::pg_int8(res, 0);
      if (t && *t > 0) {
        const fencing_token token(static_cast<std::uint64_t>(*t));
        if (link_.cut_short()) return give_back_late(key, owner, token);
        return grant{token, ttl};
      }
    }
    return link_.fail(errc::protocol_error, "postgres: acquire: unexpected result shape");
  }

  // [link locked] An acquire made `token` only after its bound (the cancel ended its wait for a
  // synchronous standby; the transaction had committed locally): the caller is told it failed,
  // so the grant is released now, within pg_settle_bound (store_deadline.hpp, D2).
  result<grant> give_back_late(std::string_view key, std::string_view owner, fencing_token token) {
    const detail::call_bound settling(std::chrono::steady_clock::now() + detail::pg_settle_bound);
    token_text_ = std::to_string(token.value());
    const char* values[] = {key.data(), owner.data(), token_text_.c_str()};
    const int lengths[] = {length(key), length(owner), 0};
    const int formats[] = {1, 1, 0};
    result<detail::pg_result_ptr> r =
        link_.exec(stmt_release, 3, values, lengths, formats,
                   std::chrono::steady_clock::now() + detail::pg_settle_bound);
    const std::string late =
        "postgres: acquire: the grant (token " + token_text_ +
        ") was made after the call's deadline (a commit waiting for a synchronous standby, "
        "cancelled: it committed locally)";
    if (r && PQntuples(r->get()) <= 1) {
      return link_.fail(errc::grant_not_durable, late + "; it was given back");
    }
    return link_.fail(errc::timeout, late + "; giving it back failed (" + link_.last_error() +
                                         "): it lasts until its TTL");
  }

  // wait_for_release and watch_release (see there); `known` none: whoever holds the key.
  result<void> wait_released(std::string_view key, std::chrono::steady_clock::time_point deadline,
                             const cancel_token& cancel, fencing_token known) {
    if (key.empty()) return refused(errc::invalid_argument);
    if (length(key) < 0) return refused_too_large();
    const detail::call_bound bound(deadline);  // a connect (LISTEN's, the read's) ends by it too
    detail::pg_listening& l = *listen_;
    cancel_token::waker stop;  // before any lock: the wake-up takes l.mu
    detail::wake_on_stop(stop, cancel, l.mu, l.cv, l.wake);
    if (std::error_code ec = detail::pg_listen_ready(l)) return ec;  // LISTENs on connect
    const auto start = std::chrono::steady_clock::now();             // before the request leaves
    std::string hash;
    std::optional<std::int64_t> left;
    {
      auto guard = link_.lock();
      const char* values[] = {key.data()};
      const int lengths[] = {length(key)};
      const int formats[] = {1};
      result<detail::pg_result_ptr> r = link_.exec(stmt_wait, 1, values, lengths, formats);
      if (!r) return r.error();
      const PGresult* res = r->get();
      if (PQntuples(res) != 1 || PQnfields(res) != 3 || PQgetisnull(res, 0, 0)) {
        return link_.fail(errc::protocol_error, "postgres: wait: unexpected result shape");
      }
      // Column 0 is text (hex) in binary format: the bytes as they are.
      hash.assign(PQgetvalue(res, 0, 0), static_cast<std::size_t>(PQgetlength(res, 0, 0)));
      if (!PQgetisnull(res, 0, 1)) {
        left = detail::pg_int8(res, 1);
        const std::optional<std::int64_t> token = detail::pg_int8(res, 2);
        if (!left || *left < 0 || !token) {
          return link_.fail(errc::protocol_error, "postgres: wait: unexpected result shape");
        }
        if (!known.is_none() && static_cast<std::uint64_t>(*token) != known.value()) return {};
      }
    }
    if (!left) return {};  // free now
    auto wake = start + std::chrono::milliseconds(*left + 1);
    if (deadline < wake) wake = deadline;
    detail::pg_sleep_until_notified(l, hash, wake, cancel);  // detail/postgres_listen.hpp
    if (cancel.stop_requested()) return errc::cancelled;
    return {};
  }

  static constexpr std::size_t stmt_acquire = 0;
  static constexpr std::size_t stmt_renew = 1;
  static constexpr std::size_t stmt_release = 2;
  static constexpr std::size_t stmt_inspect = 3;
  static constexpr std::size_t stmt_last_token = 4;
  static constexpr std::size_t stmt_wait = 5;
  static constexpr std::size_t stmt_purge = 6;

  // length() and too_large(): detail::pg_shared.

  static std::vector<std::string> setup_sql(const postgres_options& o) {
    std::vector<std::string> out;
    out.push_back("SET statement_timeout = " + std::to_string(o.command_timeout.count()) +
                  "; SET client_min_messages = warning; SET standard_conforming_strings = on");
    if (o.create_schema && !schema_sql(o).empty()) {
      // One transaction under an advisory lock: CREATE ... IF NOT EXISTS alone still races
      // (two sessions can both see "absent" and one fails on the catalog's unique index).
      out.push_back("BEGIN; SELECT pg_advisory_xact_lock(4684075206217541709); " + schema_sql(o) +
                    "COMMIT");
    }
    const std::optional<std::string> t = detail::pg_qualified(o.schema, o.table);
    const std::optional<std::string> s =
        detail::pg_qualified(o.schema, detail::pg_sequence_name(o));
    if (t && s) out.push_back(detail::postgres_life_sql(*t, *s));  // detail/postgres_deployment
    return out;
  }

  detail::pg_multi multi_;  // try_acquire_all's SQL and scratch
  std::string ttl_text_;    // scratch, guarded by the link's mutex
  std::string token_text_;
};

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_POSTGRES_HPP
