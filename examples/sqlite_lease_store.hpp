// SPDX-License-Identifier: MIT
// examples/sqlite_lease_store.hpp - a LeaseStore over SQLite, written the way a user with a
// SQLite-backed service would write one, and checked by holdfast's conformance kit
// (examples/08_sqlite_store.cpp, tests/unit/test_sqlite_store.cpp, fuzz/fuzz_sqlite_store.cpp).
// It is an example, not a shipped store: copy it and adapt it.
//
// Schema (one table of leases, one counter row, created on open):
//
//   holdfast_leases(key BLOB PRIMARY KEY, owner BLOB, token INTEGER, expires_ns INTEGER)
//   holdfast_counter(id = 0, last INTEGER)          the last token issued, store-wide
//   holdfast_meta(name TEXT PRIMARY KEY, value)     the boot the expiry instants belong to
//
// What makes it correct (the README's "Checking your own store" has the reasoning):
//   - The store is a template on its Clock and judges expiry by that clock alone (store.hpp, T2),
//   so
//     the kit can hand it the simulator's clock; in production it is holdfast::steady_clock.
//   - try_acquire is ONE transaction: it checks the key, draws the token from the counter and
//     writes the lease together (T1). renew and release are one statement each, and each checks
//     owner and token (T3).
//   - It marks no step points: each operation is one transaction, and SQLite runs transactions one
//     at a time. The deliberately broken variant below that takes two transactions marks the
//     point between them (holdfast::step_point), which is how the kit finds its race.
//   - Expiry instants are steady-clock readings, which mean nothing after a reboot (the steady
//     clock restarts near zero, so every old lease would look live for up to the old uptime). The
//     store records the boot id; opened after a reboot, it drops the leases of the earlier boot
//     (their holders died with the machine) and keeps the token counter, so tokens still grow.
//   - Thread-safety: one mutex per store around each operation (a keepalive thread and the caller
//     use a store concurrently); it is never held across a step point.
//
// Deliberately broken variants (sqlite_flaw), the negative controls the tests require the kit to
// catch: the grant committed first and the token drawn in a second transaction ("SET NX, then
// INCR"), a release that does not check the owner, and (for cas_store over sqlite_kv) a
// compare-and-swap that ignores the expected version.
#ifndef HOLDFAST_EXAMPLES_SQLITE_LEASE_STORE_HPP
#define HOLDFAST_EXAMPLES_SQLITE_LEASE_STORE_HPP

#include <sqlite3.h>

#include <chrono>
#include <cstdint>
#include <fstream>
#include <limits>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include "holdfast/clock.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/result.hpp"
#include "holdfast/step_point.hpp"
#include "holdfast/store.hpp"
#include "holdfast/stores/cas.hpp"

namespace sqlite_example {

/// The negative controls (none: the correct store).
enum class sqlite_flaw {
  none,
  token_second_statement,  ///< grant committed, then the token drawn in a second transaction
  no_owner_check,          ///< release deletes the key's lease whoever holds it
  blind_cas,               ///< sqlite_kv only: compare_and_swap writes whatever the version is
};

/// How to open a store.
struct sqlite_options {
  std::string path = ":memory:";  ///< A database file, or ":memory:" (a fresh private database).
  /// The boot the clock's readings belong to (see the top of this file); empty: read Linux's
  /// /proc/sys/kernel/random/boot_id. Give a fixed one to a simulated clock.
  std::string boot_id;
  /// Wait for each commit to reach the disk (PRAGMA synchronous=FULL). A test that reopens the
  /// file only after a clean close may turn it off (synchronous=OFF) to skip the fsyncs.
  bool sync_commits = true;
  sqlite_flaw flaw = sqlite_flaw::none;
};

namespace detail {

inline std::string read_boot_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  return id.empty() ? std::string("unknown-boot") : id;
}

// One open connection with its prepared statements; not thread-safe (the stores lock around it).
class connection {
 public:
  explicit connection(const std::string& path) {
    if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) !=
        SQLITE_OK) {
      error_ = db_ != nullptr ? sqlite3_errmsg(db_) : "out of memory";
      return;
    }
    sqlite3_busy_timeout(db_, 10000);  // another process holding the write lock: wait up to 10 s
  }
  ~connection() {
    for (sqlite3_stmt* s : stmts_) sqlite3_finalize(s);
    sqlite3_close(db_);
  }
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  [[nodiscard]] bool ok() const { return error_.empty(); }
  [[nodiscard]] const std::string& error() const { return error_; }

  bool exec(const char* sql) {
    char* msg = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &msg) == SQLITE_OK) return true;
    error_ = msg != nullptr ? msg : sqlite3_errmsg(db_);
    sqlite3_free(msg);
    return false;
  }

  // Prepares `sql` once; returns its index for stmt().
  int prepare(const char* sql) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, nullptr) != SQLITE_OK) {
      error_ = sqlite3_errmsg(db_);
      return -1;
    }
    stmts_[count_] = s;
    return count_++;
  }

  // Returns statement `i`, reset, with its bindings cleared.
  sqlite3_stmt* stmt(int i) {
    sqlite3_stmt* s = stmts_[i];
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
    return s;
  }

  [[nodiscard]] sqlite3* db() const { return db_; }

  // A failed call: remember SQLite's message; a lock wait that ran out is a timeout, anything
  // else means the store is not serving.
  std::error_code fail() {
    error_ = sqlite3_errmsg(db_);
    const int rc = sqlite3_errcode(db_);
    if (sqlite3_get_autocommit(db_) == 0) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    return rc == SQLITE_BUSY || rc == SQLITE_LOCKED ? holdfast::errc::timeout
                                                    : holdfast::errc::store_unavailable;
  }

 private:
  sqlite3* db_ = nullptr;
  sqlite3_stmt* stmts_[16] = {};
  int count_ = 0;
  std::string error_;
};

inline void bind_bytes(sqlite3_stmt* s, int i, std::string_view v) {
  sqlite3_bind_blob(s, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
}

inline std::string_view column_bytes(sqlite3_stmt* s, int i) {
  const void* p = sqlite3_column_blob(s, i);
  return {static_cast<const char*>(p), static_cast<std::size_t>(sqlite3_column_bytes(s, i))};
}

}  // namespace detail

/// A LeaseStore over one SQLite database (see the top of sqlite_lease_store.hpp). Models
/// LeaseStore with inspect(). Tokens are store-wide, durable with the database file.
///
/// Errors: errc::invalid_argument for bad arguments (holdfast's check_*_args), errc::busy,
/// errc::lease_lost, errc::not_holder as the contract says, errc::token_exhausted when the
/// counter would reach INT64_MAX, errc::timeout when another connection held the write
/// lock for over 10 s, errc::store_unavailable for any other SQLite failure
/// (last_error_message() has SQLite's text).
/// Thread-safety: every member may be called concurrently.
template <class Clock = holdfast::steady_clock>
class sqlite_lease_store {
 public:
  /// Opens (and creates, if needed) the database `o.path`, judging expiry by `clock`. A store
  /// that could not be opened answers every call with errc::store_unavailable.
  explicit sqlite_lease_store(sqlite_options o = {}, Clock clock = Clock{})
      : db_(o.path), flaw_(o.flaw), clock_(std::move(clock)) {
    if (!db_.ok()) return;
    db_.exec(o.sync_commits ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = OFF");
    const bool schema = db_.exec(
        "BEGIN IMMEDIATE;"
        "CREATE TABLE IF NOT EXISTS holdfast_leases(key BLOB PRIMARY KEY, owner BLOB NOT NULL,"
        " token INTEGER NOT NULL, expires_ns INTEGER NOT NULL);"
        "CREATE TABLE IF NOT EXISTS holdfast_counter(id INTEGER PRIMARY KEY CHECK (id = 0),"
        " last INTEGER NOT NULL);"
        "INSERT OR IGNORE INTO holdfast_counter VALUES (0, 0);"
        "CREATE TABLE IF NOT EXISTS holdfast_meta(name TEXT PRIMARY KEY, value BLOB);"
        "COMMIT;");
    find_ = db_.prepare("SELECT owner, token, expires_ns FROM holdfast_leases WHERE key = ?1");
    extend_ =
        db_.prepare("UPDATE holdfast_leases SET expires_ns = max(expires_ns, ?2) WHERE key = ?1");
    draw_ = db_.prepare("UPDATE holdfast_counter SET last = last + 1 WHERE id = 0 RETURNING last");
    put_ = db_.prepare(
        "INSERT OR REPLACE INTO holdfast_leases(key, owner, token, expires_ns)"
        " VALUES (?1, ?2, ?3, ?4)");
    set_token_ = db_.prepare(
        "UPDATE holdfast_leases SET token = ?3 WHERE key = ?1 AND owner = ?2 AND token = 0");
    renew_ = db_.prepare(
        "UPDATE holdfast_leases SET expires_ns = ?4"
        " WHERE key = ?1 AND owner = ?2 AND token = ?3 AND expires_ns > ?5");
    release_ =
        db_.prepare("DELETE FROM holdfast_leases WHERE key = ?1 AND owner = ?2 AND token = ?3");
    release_any_ = db_.prepare("DELETE FROM holdfast_leases WHERE key = ?1");
    if (!schema || release_any_ < 0) return;
    forget_other_boots(o.boot_id.empty() ? detail::read_boot_id() : o.boot_id);
  }

  sqlite_lease_store(const sqlite_lease_store&) = delete;
  sqlite_lease_store& operator=(const sqlite_lease_store&) = delete;

  /// LeaseStore try_acquire: one transaction checks the key, draws the token and writes the lease
  /// (in the token_second_statement variant: two, with a step point between them).
  holdfast::result<holdfast::grant> try_acquire(std::string_view key, std::string_view owner,
                                                std::chrono::milliseconds ttl) {
    if (std::error_code ec = holdfast::check_acquire_args(key, owner, ttl)) return ec;
    std::unique_lock<std::mutex> lock(mutex_);
    if (!ready()) return holdfast::errc::store_unavailable;
    const std::int64_t now = now_ns();
    const std::int64_t expires = hold_until(now, ttl);
    if (!db_.exec("BEGIN IMMEDIATE")) return db_.fail();
    sqlite3_stmt* s = db_.stmt(find_);
    detail::bind_bytes(s, 1, key);
    int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW && now < sqlite3_column_int64(s, 2)) {
      const bool mine = detail::column_bytes(s, 0) == owner && sqlite3_column_int64(s, 1) != 0;
      const std::int64_t token = sqlite3_column_int64(s, 1);
      sqlite3_reset(s);
      if (!mine) {
        db_.exec("ROLLBACK");
        return holdfast::errc::busy;
      }
      sqlite3_stmt* x = db_.stmt(extend_);  // the holder again: same token, never shortened
      detail::bind_bytes(x, 1, key);
      sqlite3_bind_int64(x, 2, expires);
      if (sqlite3_step(x) != SQLITE_DONE || !db_.exec("COMMIT")) return db_.fail();
      return holdfast::grant{holdfast::fencing_token(static_cast<std::uint64_t>(token)), ttl};
    }
    sqlite3_reset(s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) return db_.fail();
    if (flaw_ == sqlite_flaw::token_second_statement) {
      return grant_then_token(key, owner, ttl, expires, lock);
    }
    std::int64_t token = 0;
    if (std::error_code ec = draw_token(token)) return ec;
    sqlite3_stmt* p = db_.stmt(put_);
    detail::bind_bytes(p, 1, key);
    detail::bind_bytes(p, 2, owner);
    sqlite3_bind_int64(p, 3, token);
    sqlite3_bind_int64(p, 4, expires);
    if (sqlite3_step(p) != SQLITE_DONE || !db_.exec("COMMIT")) return db_.fail();
    return holdfast::grant{holdfast::fencing_token(static_cast<std::uint64_t>(token)), ttl};
  }

  /// LeaseStore renew: one conditional UPDATE (holder, token, not expired by this store's clock).
  holdfast::result<holdfast::grant> renew(std::string_view key, std::string_view owner,
                                          holdfast::fencing_token token,
                                          std::chrono::milliseconds ttl) {
    if (std::error_code ec = holdfast::check_renew_args(key, owner, token, ttl)) return ec;
    std::lock_guard<std::mutex> lock(mutex_);
    if (!ready()) return holdfast::errc::store_unavailable;
    if (token.value() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      return holdfast::errc::lease_lost;  // never issued here
    }
    const std::int64_t now = now_ns();
    sqlite3_stmt* s = db_.stmt(renew_);
    detail::bind_bytes(s, 1, key);
    detail::bind_bytes(s, 2, owner);
    sqlite3_bind_int64(s, 3, static_cast<std::int64_t>(token.value()));
    sqlite3_bind_int64(s, 4, hold_until(now, ttl));
    sqlite3_bind_int64(s, 5, now);
    if (sqlite3_step(s) != SQLITE_DONE) return db_.fail();
    if (sqlite3_changes(db_.db()) != 1) return holdfast::errc::lease_lost;
    return holdfast::grant{token, ttl};
  }

  /// LeaseStore release: one DELETE of the holder's own lease (an expired one too: the contract
  /// allows success then).
  holdfast::result<void> release(std::string_view key, std::string_view owner,
                                 holdfast::fencing_token token) {
    if (std::error_code ec = holdfast::check_release_args(key, owner, token)) return ec;
    std::lock_guard<std::mutex> lock(mutex_);
    if (!ready()) return holdfast::errc::store_unavailable;
    if (token.value() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      return holdfast::errc::not_holder;
    }
    sqlite3_stmt* s;
    if (flaw_ == sqlite_flaw::no_owner_check) {
      s = db_.stmt(release_any_);  // the bug: whoever holds the key loses it
      detail::bind_bytes(s, 1, key);
    } else {
      s = db_.stmt(release_);
      detail::bind_bytes(s, 1, key);
      detail::bind_bytes(s, 2, owner);
      sqlite3_bind_int64(s, 3, static_cast<std::int64_t>(token.value()));
    }
    if (sqlite3_step(s) != SQLITE_DONE) return db_.fail();
    if (sqlite3_changes(db_.db()) != 1) return holdfast::errc::not_holder;
    return {};
  }

  /// Optional inspect(): the live lease on `key` (remaining TTL by this store's clock), or none.
  holdfast::result<std::optional<holdfast::lease_record>> inspect(std::string_view key) {
    if (key.empty()) return holdfast::errc::invalid_argument;
    std::lock_guard<std::mutex> lock(mutex_);
    if (!ready()) return holdfast::errc::store_unavailable;
    const std::int64_t now = now_ns();
    sqlite3_stmt* s = db_.stmt(find_);
    detail::bind_bytes(s, 1, key);
    const int rc = sqlite3_step(s);
    if (rc == SQLITE_DONE) return std::optional<holdfast::lease_record>{};
    if (rc != SQLITE_ROW) return db_.fail();
    const std::int64_t expires = sqlite3_column_int64(s, 2);
    const std::int64_t token = sqlite3_column_int64(s, 1);
    std::string holder(detail::column_bytes(s, 0));
    sqlite3_reset(s);
    if (!(now < expires) || token == 0) return std::optional<holdfast::lease_record>{};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::nanoseconds(expires - now));
    return std::optional<holdfast::lease_record>{holdfast::lease_record{
        std::move(holder), holdfast::fencing_token(static_cast<std::uint64_t>(token)), left}};
  }

  /// Returns SQLite's message for the last failure ("" if none).
  std::string last_error_message() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return db_.error();
  }

 private:
  bool ready() const { return db_.ok() && release_any_ >= 0; }

  // The reading from which a grant of `ttl` made at reading `now` may end: the tick the reading
  // may lag true time counts too, so the grant lasts its TTL in real time even on a coarse clock
  // (store.hpp, T2; holdfast::store_hold_until, clock_tick).
  std::int64_t hold_until(std::int64_t now, std::chrono::milliseconds ttl) const {
    const std::int64_t tick =
        std::chrono::duration_cast<std::chrono::nanoseconds>(holdfast::clock_tick(clock_)).count();
    return now + std::chrono::nanoseconds(ttl).count() + tick;
  }

  std::int64_t now_ns() const {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(clock_.now().time_since_epoch())
        .count();
  }

  // Inside the open transaction: the next token from the store-wide counter.
  std::error_code draw_token(std::int64_t& token) {
    sqlite3_stmt* d = db_.stmt(draw_);
    if (sqlite3_step(d) != SQLITE_ROW) return db_.fail();
    token = sqlite3_column_int64(d, 0);
    sqlite3_reset(d);
    if (token >= std::numeric_limits<std::int64_t>::max()) {
      db_.exec("ROLLBACK");
      return holdfast::errc::token_exhausted;
    }
    return {};
  }

  // The token_second_statement flaw: commit the grant without a token, then draw the token in a
  // second transaction. The lock is released in between (never hold a lock across a step point).
  holdfast::result<holdfast::grant> grant_then_token(std::string_view key, std::string_view owner,
                                                     std::chrono::milliseconds ttl,
                                                     std::int64_t expires,
                                                     std::unique_lock<std::mutex>& lock) {
    sqlite3_stmt* p = db_.stmt(put_);
    detail::bind_bytes(p, 1, key);
    detail::bind_bytes(p, 2, owner);
    sqlite3_bind_int64(p, 3, 0);
    sqlite3_bind_int64(p, 4, expires);
    if (sqlite3_step(p) != SQLITE_DONE || !db_.exec("COMMIT")) return db_.fail();
    lock.unlock();
    holdfast::step_point(clock_, holdfast::step_kind::takes_effect);  // the grant is visible
    holdfast::step_point(clock_, holdfast::step_kind::between);       // another statement next
    lock.lock();
    if (!db_.exec("BEGIN IMMEDIATE")) return db_.fail();
    std::int64_t token = 0;
    if (std::error_code ec = draw_token(token)) return ec;
    sqlite3_stmt* t = db_.stmt(set_token_);
    detail::bind_bytes(t, 1, key);
    detail::bind_bytes(t, 2, owner);
    sqlite3_bind_int64(t, 3, token);
    if (sqlite3_step(t) != SQLITE_DONE || !db_.exec("COMMIT")) return db_.fail();
    return holdfast::grant{holdfast::fencing_token(static_cast<std::uint64_t>(token)), ttl};
  }

  // Leases written under another boot hold instants of a steady clock that has since restarted:
  // drop them (their holders are gone) and keep the counter.
  void forget_other_boots(const std::string& boot) {
    if (!db_.exec("BEGIN IMMEDIATE")) return;
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db_.db(), "SELECT value FROM holdfast_meta WHERE name = 'boot'", -1, &s,
                           nullptr) == SQLITE_OK) {
      const bool same =
          sqlite3_step(s) == SQLITE_ROW && detail::column_bytes(s, 0) == std::string_view(boot);
      sqlite3_finalize(s);
      s = nullptr;
      if (!same &&
          sqlite3_prepare_v2(db_.db(), "INSERT OR REPLACE INTO holdfast_meta VALUES ('boot', ?1)",
                             -1, &s, nullptr) == SQLITE_OK) {
        detail::bind_bytes(s, 1, boot);
        db_.exec("DELETE FROM holdfast_leases");
        sqlite3_step(s);
        sqlite3_finalize(s);
      }
    }
    db_.exec("COMMIT");
  }

  detail::connection db_;
  sqlite_flaw flaw_;
  Clock clock_;
  mutable std::mutex mutex_;
  int find_ = -1, extend_ = -1, draw_ = -1, put_ = -1, set_token_ = -1, renew_ = -1, release_ = -1,
      release_any_ = -1;
};

/// A holdfast::cas_kv over SQLite, for holdfast::cas_store: get() is one SELECT, and
/// compare_and_swap() one transaction that writes iff the version matches, giving the key a
/// version from a counter (never reused). The blind_cas flaw writes whatever the version is.
/// Thread-safety: every member may be called concurrently.
class sqlite_kv {
 public:
  /// Opens (and creates) the database `o.path`; only o.flaw == blind_cas changes anything here.
  explicit sqlite_kv(const sqlite_options& o = {})
      : db_(o.path), blind_(o.flaw == sqlite_flaw::blind_cas) {
    if (!db_.ok()) return;
    const bool schema = db_.exec(
        "BEGIN IMMEDIATE;"
        "CREATE TABLE IF NOT EXISTS holdfast_kv(key BLOB PRIMARY KEY, value BLOB NOT NULL,"
        " version INTEGER NOT NULL);"
        "CREATE TABLE IF NOT EXISTS holdfast_kv_version(id INTEGER PRIMARY KEY CHECK (id = 0),"
        " last INTEGER NOT NULL);"
        "INSERT OR IGNORE INTO holdfast_kv_version VALUES (0, 0);"
        "COMMIT;");
    get_ = db_.prepare("SELECT value, version FROM holdfast_kv WHERE key = ?1");
    next_ =
        db_.prepare("UPDATE holdfast_kv_version SET last = last + 1 WHERE id = 0 RETURNING last");
    insert_ =
        db_.prepare("INSERT INTO holdfast_kv VALUES (?1, ?2, ?3) ON CONFLICT(key) DO NOTHING");
    update_ = db_.prepare(
        "UPDATE holdfast_kv SET value = ?2, version = ?3 WHERE key = ?1 AND version = ?4");
    blind_write_ = db_.prepare("INSERT OR REPLACE INTO holdfast_kv VALUES (?1, ?2, ?3)");
    ready_ = schema && blind_write_ >= 0;
  }

  /// cas_kv get: the key's value and version ({"", 0} if absent).
  holdfast::result<holdfast::cas_entry> get(std::string_view key) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!ready_) return holdfast::errc::store_unavailable;
    sqlite3_stmt* s = db_.stmt(get_);
    detail::bind_bytes(s, 1, key);
    const int rc = sqlite3_step(s);
    if (rc == SQLITE_DONE) return holdfast::cas_entry{};
    if (rc != SQLITE_ROW) return db_.fail();
    holdfast::cas_entry e{std::string(detail::column_bytes(s, 0)),
                          static_cast<std::uint64_t>(sqlite3_column_int64(s, 1))};
    sqlite3_reset(s);
    return e;
  }

  /// cas_kv compare_and_swap: writes `value` iff the key's version is `expected` (0: absent).
  holdfast::result<bool> compare_and_swap(std::string_view key, std::uint64_t expected,
                                          std::string_view value) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!ready_) return holdfast::errc::store_unavailable;
    if (!db_.exec("BEGIN IMMEDIATE")) return db_.fail();
    sqlite3_stmt* n = db_.stmt(next_);
    if (sqlite3_step(n) != SQLITE_ROW) return db_.fail();
    const std::int64_t version = sqlite3_column_int64(n, 0);
    sqlite3_reset(n);
    sqlite3_stmt* w = db_.stmt(blind_ ? blind_write_ : expected == 0 ? insert_ : update_);
    detail::bind_bytes(w, 1, key);
    detail::bind_bytes(w, 2, value);
    sqlite3_bind_int64(w, 3, version);
    if (!blind_ && expected != 0) sqlite3_bind_int64(w, 4, static_cast<std::int64_t>(expected));
    if (sqlite3_step(w) != SQLITE_DONE) return db_.fail();
    const bool wrote = sqlite3_changes(db_.db()) == 1;
    if (!db_.exec("COMMIT")) return db_.fail();
    return wrote;
  }

 private:
  detail::connection db_;
  bool blind_;
  bool ready_ = false;
  std::mutex mutex_;
  int get_ = -1, next_ = -1, insert_ = -1, update_ = -1, blind_write_ = -1;
};

/// cas_store over a sqlite_kv of its own: what one factory call of the conformance kit makes (the
/// adapter keeps a reference to its KV, so the two live and die together).
template <class Clock = holdfast::steady_clock>
class sqlite_cas_store {
 public:
  explicit sqlite_cas_store(const sqlite_options& o = {}, Clock clock = Clock{})
      : kv_(o), store_(kv_, std::move(clock)) {}

  holdfast::result<holdfast::grant> try_acquire(std::string_view key, std::string_view owner,
                                                std::chrono::milliseconds ttl) {
    return store_.try_acquire(key, owner, ttl);
  }
  holdfast::result<holdfast::grant> renew(std::string_view key, std::string_view owner,
                                          holdfast::fencing_token token,
                                          std::chrono::milliseconds ttl) {
    return store_.renew(key, owner, token, ttl);
  }
  holdfast::result<void> release(std::string_view key, std::string_view owner,
                                 holdfast::fencing_token token) {
    return store_.release(key, owner, token);
  }

 private:
  sqlite_kv kv_;
  holdfast::cas_store<sqlite_kv, Clock> store_;
};

}  // namespace sqlite_example

#endif  // HOLDFAST_EXAMPLES_SQLITE_LEASE_STORE_HPP
