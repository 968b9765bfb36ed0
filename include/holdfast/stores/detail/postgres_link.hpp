// SPDX-License-Identifier: MIT
// holdfast/stores/detail/postgres_link.hpp - pg_link: the connection under postgres_store. One
// libpq connection driven in non-blocking mode with deadlines (poll), prepared statements made on
// every (re)connect, the mapping of SQLSTATEs to errc (classify_pg_error), and reading binary
// int8 columns. See the overview of stores/postgres.hpp for the failure behaviour. Not for users.
#ifndef HOLDFAST_STORES_DETAIL_POSTGRES_LINK_HPP
#define HOLDFAST_STORES_DETAIL_POSTGRES_LINK_HPP

#include <libpq-fe.h>
#include <poll.h>

#include <cerrno>
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

#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/result.hpp"
#include "holdfast/stores/detail/call_bound.hpp"
#include "holdfast/stores/detail/postgres_sql.hpp"
#include "holdfast/stores/detail/wake_pipe.hpp"
#include "holdfast/stores/postgres_options.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

namespace detail {

struct pg_conn_deleter {
  void operator()(PGconn* c) const noexcept { PQfinish(c); }
};
struct pg_result_deleter {
  void operator()(PGresult* r) const noexcept { PQclear(r); }
};
using pg_conn_ptr = std::unique_ptr<PGconn, pg_conn_deleter>;
/// An owned libpq result.
using pg_result_ptr = std::unique_ptr<PGresult, pg_result_deleter>;

inline constexpr unsigned int pg_bytea_oid = 17;
inline constexpr unsigned int pg_int8_oid = 20;

/// Maps a SQLSTATE (empty: a client-side failure such as a lost connection) to an errc.
/// `user_statement`: the statement is the caller's own (a fenced update), so data, integrity and
/// syntax errors (classes 22, 23, 42) are their invalid_argument rather than our protocol_error.
/// Permanent failures are never retried (is_permanent): credentials (28P01 invalid_password,
/// 28000 invalid_authorization_specification) and privileges (42501) are permission_denied; a
/// database (3D000), table (42P01), column (42703) or schema (3F000) that is not there is
/// misconfigured.
inline errc classify_pg_error(const char* sqlstate, bool user_statement) noexcept {
  const std::string_view s = sqlstate != nullptr ? sqlstate : "";
  if (s.size() != 5) return errc::store_unavailable;  // no SQLSTATE: the connection failed
  auto cls = [&](std::string_view c) { return s.compare(0, 2, c) == 0; };
  if (s == "2200H") return errc::token_exhausted;          // sequence_generator_limit_exceeded
  if (s == "57014" || s == "55P03") return errc::timeout;  // statement / lock timeout
  if (cls("28") || s == "42501") return errc::permission_denied;
  if (s == "3D000" || s == "42P01" || s == "42703" || s == "3F000") return errc::misconfigured;
  // read_only_sql_transaction: a standby (hot standby, in recovery) or a read-only session
  // (default_transaction_read_only): the store is pointed at a server that serves no writes.
  if (s == "25006") return errc::misconfigured;
  if (cls("08") || cls("53") || cls("57") || cls("58") || s == "40001" || s == "40P01") {
    // connection, resources, operator intervention (shutdown, crash), system,
    // serialization/deadlock
    return errc::store_unavailable;
  }
  if (user_statement && (cls("22") || cls("23") || cls("42"))) return errc::invalid_argument;
  return errc::protocol_error;
}

/// Maps the text of a failed connection attempt to an errc. libpq gives no SQLSTATE for a
/// connection that the server refused, so the server's FATAL text is matched (English, the
/// server's default lc_messages; other languages fall back to store_unavailable, retried).
inline errc classify_pg_connect_failure(std::string_view text) noexcept {
  auto has = [&](std::string_view w) { return text.find(w) != std::string_view::npos; };
  if (has("password authentication failed") || has("authentication failed for user") ||
      has("no pg_hba.conf entry") || has("password is required") ||
      has("no password supplied") ||  // libpq: the server asked for a password, none was given
      (has("role \"") && has("does not exist")) || has("permission denied for database") ||
      has("must be superuser")) {
    return errc::permission_denied;
  }
  if ((has("database \"") && has("does not exist")) || has("invalid port number") ||
      has("invalid integer value") || has("invalid connection option") ||
      has("missing \"=\" after") || has("invalid URI") || has("invalid sslmode value") ||
      has("Name or service not known") || has("invalid value for parameter")) {
    return errc::misconfigured;
  }
  return errc::store_unavailable;
}

/// Stores `text` (without trailing newlines and spaces) in `msg` and returns `e`.
inline std::error_code errc_with(errc e, std::string& msg, std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  msg = std::move(text);
  return e;
}

inline std::uint64_t pg_read_be64(const char* p) noexcept {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

/// Reads column `col` of row 0 as a binary int8.
inline std::optional<std::int64_t> pg_int8(const PGresult* r, int col) noexcept {
  if (PQnfields(r) <= col || PQftype(r, col) != pg_int8_oid || PQfformat(r, col) != 1 ||
      PQgetisnull(r, 0, col) || PQgetlength(r, 0, col) != 8) {
    return std::nullopt;
  }
  return static_cast<std::int64_t>(pg_read_be64(PQgetvalue(r, 0, col)));
}

/// Waits until `fd` is ready for `events`, `deadline` passes or `wake` (a wake_pipe's fd, -1:
/// none) is readable: 1 ready, 0 timed out, 2 woken, -1 error.
inline int pg_wait(int fd, short events, std::chrono::steady_clock::time_point deadline,
                   int wake = -1) {
  for (;;) {
    const auto left =
        std::chrono::ceil<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left <= std::chrono::milliseconds::zero()) return 0;
    const int ms = left.count() > INT_MAX ? INT_MAX : static_cast<int>(left.count());
    const int r = poll_or_woken(fd, events, wake, ms);
    if (r == 0) continue;  // EINTR, or re-check the deadline (poll may round)
    return r;
  }
}

inline void pg_ignore_notice(void*, const char*) {}

/// How long postgres_store waits, after a statement's deadline, to settle it (store_deadline.hpp,
/// D2): for the cancel through a second session and the statement's outcome, and again for the
/// release of a grant it made. On a live server both take a round trip or two (ms); the bound is
/// reached only when the server stopped answering.
inline constexpr std::chrono::milliseconds pg_settle_bound{250};

/// One libpq connection driven in non-blocking mode with deadlines: connects lazily, prepares the
/// given statements on every (re)connect, drops the connection on any failure that leaves its
/// state in doubt, and keeps the last failure's text. Not thread-safe: the owner holds lock().
class pg_link {
 public:
  struct statement {
    std::string name;
    std::string sql;
    std::vector<unsigned int> types;
  };

  pg_link(postgres_options opts, std::vector<std::string> setup, std::vector<statement> prepared)
      : opts_(std::move(opts)), setup_(std::move(setup)), prepared_(std::move(prepared)) {}

  /// Locks the link for one call, which begins by forgetting the last failure's text.
  [[nodiscard]] std::unique_lock<std::mutex> lock() const {
    std::unique_lock<std::mutex> l(mutex_);
    last_error_.clear();
    return l;
  }
  /// Locks without beginning a call (last_error_message() reads the text under it).
  [[nodiscard]] std::unique_lock<std::mutex> lock_quiet() const {
    return std::unique_lock<std::mutex>(mutex_);
  }
  [[nodiscard]] const postgres_options& options() const noexcept { return opts_; }
  [[nodiscard]] const std::string& last_error() const noexcept { return last_error_; }

  std::error_code fail(errc code, std::string message) {
    while (!message.empty() && (message.back() == '\n' || message.back() == ' ')) {
      message.pop_back();
    }
    last_error_ = std::move(message);
    return code;
  }

  void disconnect() noexcept { conn_.reset(); }

  std::error_code ensure_connected() {
    if (conn_ && PQstatus(conn_.get()) == CONNECTION_OK) return {};
    conn_.reset();
    std::string why;
    if (const std::error_code ec = opts_.check(&why)) return fail(errc::invalid_argument, why);
    if (std::error_code ec = check_conninfo()) return ec;
    // connect_timeout, and no longer than the caller's time left (detail/call_bound.hpp).
    const auto start = std::chrono::steady_clock::now();
    const auto deadline = start + capped_by_call(opts_.connect_timeout);
    const char* keys[] = {"application_name", "dbname", nullptr};
    const char* values[] = {opts_.application_name.c_str(), opts_.conninfo.c_str(), nullptr};
    pg_conn_ptr c(PQconnectStartParams(keys, values, 1));
    if (!c) return fail(errc::store_unavailable, "postgres: cannot allocate a connection");
    if (PQstatus(c.get()) == CONNECTION_BAD) return connect_failed(c.get());
    PostgresPollingStatusType st = PGRES_POLLING_WRITING;
    while (st != PGRES_POLLING_OK) {
      if (st == PGRES_POLLING_FAILED) return connect_failed(c.get());
      const short events = st == PGRES_POLLING_READING ? POLLIN : POLLOUT;
      const int w = pg_wait(PQsocket(c.get()), events, deadline);
      if (w == 0) return connect_timed_out(c.get(), start);
      if (w < 0) return fail(errc::store_unavailable, "postgres: poll failed while connecting");
      st = PQconnectPoll(c.get());
    }
    PQsetNoticeProcessor(c.get(), pg_ignore_notice, nullptr);
    if (PQsetnonblocking(c.get(), 1) != 0) {
      return fail(errc::store_unavailable, std::string("postgres: ") + PQerrorMessage(c.get()));
    }
    conn_ = std::move(c);
    if (std::error_code ec = refuse_standby()) return ec;
    for (const std::string& sql : setup_) {
      result<pg_result_ptr> r =
          run([&](PGconn* pc) { return PQsendQuery(pc, sql.c_str()); }, deadline, false);
      if (!r) {
        conn_.reset();
        return r.error();
      }
    }
    for (const statement& s : prepared_) {
      result<pg_result_ptr> r = run(
          [&](PGconn* pc) {
            return PQsendPrepare(pc, s.name.c_str(), s.sql.c_str(),
                                 static_cast<int>(s.types.size()),
                                 reinterpret_cast<const Oid*>(s.types.data()));
          },
          deadline, false);
      if (!r) {
        conn_.reset();
        return r.error();
      }
    }
    return {};
  }

  /// Runs prepared statement `index` with binary-or-text parameters; results in binary format.
  /// Bounded by command_timeout and by `until` if that comes first. With `settle`, a statement
  /// still running at that bound is not abandoned: it is cancelled through a second session
  /// (pg_cancel_backend) and its outcome read for up to pg_settle_bound more (a commit that waits
  /// for a synchronous standby ends, committed locally, and returns its rows); cut_short() then
  /// says so. Without an outcome by then the connection is dropped: errc::timeout.
  result<pg_result_ptr> exec(
      std::size_t index, int n, const char* const* values, const int* lengths, const int* formats,
      std::chrono::steady_clock::time_point until = std::chrono::steady_clock::time_point::max(),
      bool settle = false) {
    cut_short_ = false;
    if (std::error_code ec = ensure_connected()) return ec;
    auto deadline = std::chrono::steady_clock::now() + opts_.command_timeout;
    if (until < deadline) deadline = until;
    const std::string& name = prepared_[index].name;
    settle_ = settle;
    result<pg_result_ptr> r = run(
        [&](PGconn* pc) {
          return PQsendQueryPrepared(pc, name.c_str(), n, values, lengths, formats, 1);
        },
        deadline, false);
    settle_ = false;
    return r;
  }
  /// Whether the last exec() (or run_settled()) reached its bound and settled the statement
  /// (cancelled it and read its outcome): rows it returned were applied after the bound, an
  /// error means nothing was.
  [[nodiscard]] bool cut_short() const noexcept { return cut_short_; }

  /// run() with exec()'s settling, for statements that are not prepared (try_acquire_all's
  /// COMMIT, the read-write acquire): one still running at `deadline` (a commit waiting for a
  /// synchronous standby) is cancelled through a second session and its outcome read for up to
  /// pg_settle_bound more; cut_short() then says so. Without an outcome: errc::timeout.
  template <class Send>
  result<pg_result_ptr> run_settled(Send send, std::chrono::steady_clock::time_point deadline) {
    cut_short_ = false;
    settle_ = true;
    result<pg_result_ptr> r = run(std::move(send), deadline, false);
    settle_ = false;
    return r;
  }

  /// Sends with `send`, then reads every result until the deadline. Returns the last result, or
  /// the error of the first failed one (classified; `user_statement` as for classify_pg_error).
  template <class Send>
  result<pg_result_ptr> run(Send send, std::chrono::steady_clock::time_point deadline,
                            bool user_statement) {
    PGconn* c = conn_.get();
    if (!send(c)) return broken("postgres: send: ");
    for (;;) {
      const int f = PQflush(c);
      if (f == 0) break;
      if (f < 0) return broken("postgres: send: ");
      const int w = pg_wait(PQsocket(c), POLLIN | POLLOUT, deadline);
      if (w == 0) return timed_out();
      if (w < 0 || !PQconsumeInput(c)) return broken("postgres: ");
    }
    pg_result_ptr last;
    pg_result_ptr first_error;
    for (;;) {
      while (PQisBusy(c)) {
        const int w = pg_wait(PQsocket(c), POLLIN, deadline);
        if (w == 0 && settle_ && !cut_short_ && cancel_running(c)) {
          cut_short_ = true;  // cancelled: read what it did, for pg_settle_bound more
          deadline = std::chrono::steady_clock::now() + pg_settle_bound;
          continue;
        }
        if (w == 0) return timed_out();
        if (w < 0 || !PQconsumeInput(c)) return broken("postgres: ");
      }
      pg_result_ptr r(PQgetResult(c));
      if (!r) break;
      const ExecStatusType st = PQresultStatus(r.get());
      if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) {
        last = std::move(r);
      } else if (!first_error) {
        first_error = std::move(r);
      }
    }
    if (first_error) {
      const char* state = PQresultErrorField(first_error.get(), PG_DIAG_SQLSTATE);
      const errc code = PQresultStatus(first_error.get()) == PGRES_FATAL_ERROR
                            ? classify_pg_error(state, user_statement)
                            : errc::protocol_error;
      std::string msg = "postgres: ";
      if (state != nullptr) msg += std::string(state) + ": ";
      msg += PQresultErrorMessage(first_error.get());
      if (code == errc::misconfigured && state != nullptr && std::strcmp(state, "25006") == 0) {
        msg = read_only_text(msg);
      }
      if (PQstatus(c) != CONNECTION_OK || PQtransactionStatus(c) != PQTRANS_IDLE) {
        conn_.reset();  // a session in doubt (or inside a failed setup transaction) is not reused
      }
      return fail(code, std::move(msg));
    }
    if (PQstatus(c) != CONNECTION_OK) return broken("postgres: ");
    if (!last) return fail(errc::protocol_error, "postgres: no result");
    return last;
  }

  [[nodiscard]] PGconn* connection() const noexcept { return conn_.get(); }

 private:
  // A connect that did not complete by its deadline: timeout, naming the server and the bound.
  std::error_code connect_timed_out(PGconn* c, std::chrono::steady_clock::time_point start) {
    const char* host = PQhost(c);
    const char* port = PQport(c);
    const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - start);
    return fail(errc::timeout, std::string("postgres: connect to ") + (host ? host : "?") + ":" +
                                   (port ? port : "?") + " timed out after " +
                                   std::to_string(took.count()) +
                                   " ms (postgres_options::connect_timeout, or the caller's time "
                                   "left)");
  }

  // A conninfo that libpq cannot parse is the caller's configuration: misconfigured, at once.
  std::error_code check_conninfo() {
    char* err = nullptr;
    PQconninfoOption* parsed = PQconninfoParse(opts_.conninfo.c_str(), &err);
    if (parsed != nullptr) {
      PQconninfoFree(parsed);
      return {};
    }
    std::string text = err != nullptr ? err : "out of memory";
    PQfreemem(err);
    return fail(errc::misconfigured, "postgres: postgres_options::conninfo: " + text);
  }
  // A standby (hot standby: in recovery, read-only) serves no write: the store or fence is
  // pointed at the wrong server, a misconfiguration (permanent). PostgreSQL 14+ reports
  // in_hot_standby at connect, so this costs no round trip; older servers are caught by the
  // first write's 25006 (read_only_text).
  std::error_code refuse_standby() {
    const char* hs = PQparameterStatus(conn_.get(), "in_hot_standby");
    if (hs == nullptr || std::strcmp(hs, "on") != 0) return {};
    std::string msg = read_only_text({});
    conn_.reset();
    return fail(errc::misconfigured, std::move(msg));
  }
  // The text of a read-only server's misconfiguration: where it is, why it is read-only, what to
  // change, and what the server said (if anything).
  [[nodiscard]] std::string read_only_text(std::string said) const {
    PGconn* c = conn_.get();
    const char* host = PQhost(c);
    const char* port = PQport(c);
    const char* hs = PQparameterStatus(c, "in_hot_standby");
    std::string text = "postgres: the server at " + std::string(host ? host : "?") + ":" +
                       (port ? port : "?") + " (postgres_options::conninfo)";
    if (hs != nullptr && std::strcmp(hs, "on") == 0) {
      text +=
          " is a standby (in recovery: pg_is_in_recovery() is true; it reports "
          "in_hot_standby=on) and takes no writes: point the store at the primary (with a "
          "multi-host conninfo, add target_session_attrs=read-write)";
    } else {
      text +=
          " runs this session read-only (a standby, or default_transaction_read_only=on): "
          "point the store at the primary, with a read-write session";
    }
    while (!said.empty() && (said.back() == '\n' || said.back() == ' ')) said.pop_back();
    if (!said.empty()) text += "; the server said: " + said;
    return text;
  }
  std::error_code connect_failed(PGconn* c) {
    const std::string text = PQerrorMessage(c);
    const errc e = classify_pg_connect_failure(text);
    const char* where = e == errc::store_unavailable ? "postgres: "
                                                     : "postgres: connecting with "
                                                       "postgres_options::conninfo: ";
    return fail(e, where + text);
  }
  std::error_code broken(const char* what) {
    std::string msg = std::string(what) + PQerrorMessage(conn_.get());
    conn_.reset();
    return fail(errc::store_unavailable, std::move(msg));
  }
  // Asks the server, through a second session (connected for this, bounded by pg_settle_bound,
  // closed after), to cancel the statement running on `c`. A live server answers at once; its
  // backend then ends the statement (an error, nothing applied) or, in a commit waiting for a
  // synchronous standby, stops waiting and returns the rows of a transaction that committed
  // locally. PQcancel is not used: it blocks without a bound on a server that stopped answering.
  // \returns true iff the server signalled the backend.
  bool cancel_running(PGconn* c) {
    if (!canceller_) {
      postgres_options o = opts_;
      o.connect_timeout = pg_settle_bound;
      o.command_timeout = pg_settle_bound;
      canceller_ = std::make_unique<pg_link>(std::move(o), std::vector<std::string>{},
                                             std::vector<statement>{});
    }
    pg_link& k = *canceller_;
    const std::string kept = last_error_;
    bool signalled = false;
    // Settling comes after the caller's deadline by design (D2): its own bound, not the call's.
    const call_bound settling(std::chrono::steady_clock::now() + pg_settle_bound);
    if (!k.ensure_connected()) {
      const std::string pid = std::to_string(PQbackendPID(c));
      const char* values[] = {pid.c_str()};
      result<pg_result_ptr> r = k.run(
          [&](PGconn* pc) {
            return PQsendQueryParams(pc, "SELECT pg_cancel_backend($1::int)", 1, nullptr, values,
                                     nullptr, nullptr, 0);
          },
          std::chrono::steady_clock::now() + pg_settle_bound, false);
      signalled = r && PQntuples(r->get()) == 1 && PQgetisnull(r->get(), 0, 0) == 0 &&
                  std::strcmp(PQgetvalue(r->get(), 0, 0), "t") == 0;
    }
    k.disconnect();  // no idle session kept for a rare event
    last_error_ = kept;
    return signalled;
  }
  std::error_code timed_out() {
    cut_short_ = false;  // not settled: its outcome was not read (a cancel may have been sent)
    // The statement may still run on the server (a grant may be made that nobody is told about:
    // it expires). The session's state is unknown, so it is dropped rather than reused.
    conn_.reset();
    return fail(errc::timeout, "postgres: statement timed out (client deadline)");
  }

  postgres_options opts_;
  std::vector<std::string> setup_;
  std::vector<statement> prepared_;
  pg_conn_ptr conn_;
  bool settle_ = false;                 // the statement in run() is settled at its deadline (exec)
  bool cut_short_ = false;              // the last exec() settled its statement
  std::unique_ptr<pg_link> canceller_;  // the second session of cancel_running(), made on need
  mutable std::string last_error_;      // the most recent call's failure (cleared by lock())
  mutable std::mutex mutex_;
};

}  // namespace detail

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_DETAIL_POSTGRES_LINK_HPP
