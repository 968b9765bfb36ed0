// holdfast/stores/redis.hpp - redis_store: a LeaseStore in Redis, and redis_fence: fenced writes
// that live in Redis. Opt-in: needs hiredis (link -lhiredis); nothing in the core includes it.
//
// Every operation is ONE round trip: a Lua script, loaded once per connection (SCRIPT LOAD),
// called by its SHA1 (EVALSHA), and loaded again if the server answers NOSCRIPT (after SCRIPT FLUSH
// or a failover). Redis runs a script atomically, so check, grant and token are one step:
//
//   script   | keys                  | does, atomically
//   ---------+-----------------------+---------------------------------------------------------
//   acquire  | lease key, counter    | free or expired: INCR the store-wide counter, SET the record
//            |                       |   "<token>:<owner>" with PX ttl, return the token;
//            |                       | same owner: keep the token, extend the TTL (never shorten);
//            |                       | other owner: busy
//   renew    | lease key             | record == "<token>:<owner>": PEXPIRE ttl, else lease_lost
//   release  | lease key             | record == "<token>:<owner>": DEL, else not_holder
//   inspect  | lease key             | GET + PTTL
//   fence    | fence key             | token >= fence: run the caller's command, then SET fence
//
// "SET NX PX, then INCR" in two round trips is the classic bug this avoids: a stalled acquirer
// can receive a newer token than a holder granted after it (store.hpp, T1).
//
// Keys, owners and values travel as binary-safe bulk arguments (redisFormatCommandArgv with
// lengths): any bytes, NUL included, up to Redis' 512 MB limit; nothing is ever spliced into a
// script. Tokens travel as decimal strings and never pass through a Lua number (a double) above
// 2^53, so they are exact across the usable range, which is Redis INCR's: 1 .. 2^63-1. A counter
// at 2^63-1 makes acquire report token_exhausted.
//
// Durability (T1 across restarts): the counter lives in Redis' memory. With `appendonly yes` and
// `appendfsync always` a restart keeps it; with `everysec` a crash may lose the last second of
// INCRs and re-issue tokens; with no persistence a restart resets it to 0. A reset counter is
// safe for fences (they reject every token below the newest they admitted, the old holders' among
// them) but not live: new holders are rejected too until the counter passes the fence. Recover
// with raise_token_floor(newest token any fence admitted), or keep the counter durable. The same
// holds for an asynchronous replica promoted by failover (see the Redlock debate, Kleppmann 2016).
//
// Expiry is judged by the Redis server's clock (T2), and a grant lasts at least its TTL in real
// time as T2 asks: TTLs go to Redis in whole milliseconds (PX / PEXPIRE, never rounded to
// seconds), Redis stores the expiry as its millisecond clock (read rounded down) + ttl, and treats
// a key as expired only once that clock is strictly *past* it (db.c keyIsExpired: now > when),
// i.e. at read + ttl + 1 ms, one whole tick later. Connection: TCP or a Unix socket, connect and
// command timeouts, AUTH (password or ACL user + password), SELECT, CLIENT SETNAME. No TLS: the
// hiredis 0.14 that Debian 12 ships has none; tunnel (stunnel, spiped) or use a newer hiredis with
// a socket you secure yourself. Standalone Redis only: keys are given a `{holdfast}` hash tag so
// they share one slot, but MOVED/ASK redirections are not followed.
//
// Commands are written with send(MSG_NOSIGNAL), so a connection the server has closed reports an
// error instead of raising SIGPIPE (hiredis 0.14's own write() would kill a process that does not
// ignore SIGPIPE).
//
// Split send/receive (send_receive.hpp): send(), interest(), progress() and receive() run the same
// scripts on the store's own connection without blocking, so one thread can have requests to many
// Redis servers in flight and poll() their sockets together (quorum_store does). The request is
// written with send(MSG_DONTWAIT) and the reply read with recv(MSG_DONTWAIT) into the context's
// hiredis reader (hiredis 0.14's own non-blocking calls need a context made non-blocking from the
// start); receive() waits at most command_timeout from send(). send() declines rather than block
// when the connection is not open (connecting blocks) or another split request is in flight; the
// store's blocking operations wait until the split request in flight has been received.
//
// Failures (T4): a dropped connection, a refused connect, a timeout or a server that is not serving
// (LOADING, BUSY, READONLY, ...) is an error, never a grant. The connection is dropped and
// re-established by the next call; the failed call itself is never retried (its script may or may
// not have run, so a retry could only guess). Every failure keeps the server's or hiredis' text in
// last_error_message().
#ifndef HOLDFAST_STORES_REDIS_HPP
#define HOLDFAST_STORES_REDIS_HPP

#include <hiredis/hiredis.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>

// send() without SIGPIPE on a connection the server closed: MSG_NOSIGNAL where the platform has it
// (Linux, the BSDs); elsewhere (macOS) the socket gets SO_NOSIGPIPE once connected, and the flag
// is 0.
#if defined(MSG_NOSIGNAL)
#define HOLDFAST_DETAIL_MSG_NOSIGNAL MSG_NOSIGNAL
#else
#define HOLDFAST_DETAIL_MSG_NOSIGNAL 0
#endif

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/detail/random.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/result.hpp"
#include "holdfast/send_receive.hpp"
#include "holdfast/store.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

/// The greatest token a Redis counter can issue: INCR works on signed 64-bit integers.
inline constexpr fencing_token redis_max_token{
    static_cast<fencing_token::rep>(std::numeric_limits<std::int64_t>::max())};

/// How to reach a Redis server and where holdfast keeps its keys there.
struct redis_options {
  /// Server host name or address (TCP). Default "127.0.0.1".
  std::string host = "127.0.0.1";
  /// Server TCP port, in [1, 65535]. Default 6379.
  int port = 6379;
  /// Path of a Unix socket; when non-empty it is used instead of host and port.
  std::string unix_socket{};
  /// ACL user name for AUTH (Redis 6+); empty means the legacy single-password AUTH.
  std::string username{};
  /// Password for AUTH; empty means no AUTH is sent.
  std::string password{};
  /// Database number for SELECT, >= 0; 0 (the default) sends no SELECT.
  int database = 0;
  /// Name for CLIENT SETNAME (shows in CLIENT LIST); empty sends none. No spaces (Redis' rule).
  std::string client_name{};
  /// Prefix of every lease key: lease "k" lives at key_prefix + "k". Must be non-empty, and the
  /// counter key must not start with it (a lease could otherwise overwrite the counter).
  /// The default's `{holdfast}` hash tag keeps all keys in one cluster slot.
  std::string key_prefix = "{holdfast}:lease:";
  /// The key of the store-wide token counter. Default "{holdfast}:token".
  std::string counter_key = "{holdfast}:token";
  /// Prefix of the wait queues (wait_for_release): the queue of lease "k" is wait_prefix + "k",
  /// and each store's notification channel is wait_prefix + "ch:" + a random id. Must be
  /// non-empty; neither it nor key_prefix may start with the other, and the counter key must not
  /// start with it. Keep the same hash tag as key_prefix (the release script touches both).
  std::string wait_prefix = "{holdfast}:wait:";
  /// Bound on establishing a connection (and its AUTH/SELECT/SCRIPT LOAD round trip), in ms, > 0.
  std::chrono::milliseconds connect_timeout{2000};
  /// Bound on each command's send and receive, in ms, > 0. A timeout reports errc::timeout and
  /// drops the connection (its reply could otherwise be mistaken for the next command's).
  std::chrono::milliseconds command_timeout{2000};
  /// Returns errc::invalid_argument if an option is out of range (see each field); a zero error
  /// code otherwise.
  [[nodiscard]] std::error_code check() const noexcept {
    if (unix_socket.empty() && (host.empty() || port < 1 || port > 65535)) {
      return errc::invalid_argument;
    }
    if (database < 0 || key_prefix.empty() || counter_key.empty()) return errc::invalid_argument;
    if (counter_key.compare(0, key_prefix.size(), key_prefix) == 0) return errc::invalid_argument;
    if (wait_prefix.empty() || wait_prefix.compare(0, key_prefix.size(), key_prefix) == 0 ||
        key_prefix.compare(0, wait_prefix.size(), wait_prefix) == 0 ||
        counter_key.compare(0, wait_prefix.size(), wait_prefix) == 0) {
      return errc::invalid_argument;
    }
    if (connect_timeout <= std::chrono::milliseconds::zero() ||
        command_timeout <= std::chrono::milliseconds::zero()) {
      return errc::invalid_argument;
    }
    if (client_name.find_first_of(" \n\r\t") != std::string::npos) return errc::invalid_argument;
    for (const std::string* s : {&host, &unix_socket}) {
      if (s->find('\0') != std::string::npos) return errc::invalid_argument;
    }
    return {};
  }
};

namespace detail {

struct redis_reply_deleter {
  void operator()(redisReply* r) const noexcept { freeReplyObject(r); }
};
/// An owned hiredis reply.
using redis_reply_ptr = std::unique_ptr<redisReply, redis_reply_deleter>;

struct redis_context_deleter {
  void operator()(redisContext* c) const noexcept { redisFree(c); }
};

/// Parses a canonical decimal token ("1" .. "18446744073709551615", no sign, no leading zero).
inline std::optional<fencing_token> parse_redis_token(const char* s, std::size_t n) noexcept {
  if (s == nullptr || n == 0 || n > 20 || (n > 1 && s[0] == '0')) return std::nullopt;
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (s[i] < '0' || s[i] > '9') return std::nullopt;
    const std::uint64_t digit = static_cast<std::uint64_t>(s[i] - '0');
    if (v > (std::numeric_limits<std::uint64_t>::max() - digit) / 10) return std::nullopt;
    v = v * 10 + digit;
  }
  return fencing_token(v);
}

/// Reads a token reply: a bulk string holding a canonical decimal token (parse_redis_token);
/// nullopt for any other reply. The one "read a token and parse it" of the Redis code.
inline std::optional<fencing_token> reply_token(const redisReply* reply) noexcept {
  if (reply == nullptr || reply->type != REDIS_REPLY_STRING) return std::nullopt;
  return parse_redis_token(reply->str, reply->len);
}

inline struct timeval to_timeval(std::chrono::milliseconds ms) noexcept {
  struct timeval tv {};
  tv.tv_sec = static_cast<decltype(tv.tv_sec)>(ms.count() / 1000);
  tv.tv_usec = static_cast<decltype(tv.tv_usec)>((ms.count() % 1000) * 1000);
  return tv;
}

inline bool starts_with(const char* s, std::size_t n, std::string_view prefix) noexcept {
  return n >= prefix.size() && std::memcmp(s, prefix.data(), prefix.size()) == 0;
}

/// Maps an error reply from Redis (or from one of our scripts) to an errc.
inline errc classify_redis_error(const char* s, std::size_t n) noexcept {
  if (starts_with(s, n, "HOLDFAST_EXHAUSTED")) return errc::token_exhausted;
  if (starts_with(s, n, "HOLDFAST_CORRUPT")) return errc::protocol_error;
  if (starts_with(s, n, "HOLDFAST_COMMAND")) {
    // The caller's own command failed inside a fence script: their mistake, unless the server
    // was simply not serving.
    constexpr std::string_view tag = "HOLDFAST_COMMAND ";
    const std::size_t skip = n >= tag.size() ? tag.size() : n;
    const errc inner = classify_redis_error(s + skip, n - skip);
    return inner == errc::store_unavailable ? inner : errc::invalid_argument;
  }
  // The server is up but not serving this request now: loading, busy with a script, a replica,
  // out of memory, failing over, or not accepting our credentials.
  for (std::string_view code :
       {"LOADING", "BUSY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN", "READONLY", "NOREPLICAS", "OOM",
        "NOAUTH", "WRONGPASS", "NOPERM", "MISCONF", "UNBLOCKED"}) {
    if (starts_with(s, n, code) && (n == code.size() || s[code.size()] == ' ')) {
      return errc::store_unavailable;
    }
  }
  // WRONGTYPE, ERR ...: the store holds something our scripts did not write, or answered
  // something we do not understand.
  return errc::protocol_error;
}

/// One hiredis connection with its scripts: connects lazily, loads the scripts on every
/// (re)connect, drops the connection on any transport failure, and keeps the last failure's text.
/// Not thread-safe by itself: the owner holds lock() around every use.
class redis_link {
 public:
  redis_link(redis_options opts, std::vector<std::string> scripts)
      : opts_(std::move(opts)), scripts_(std::move(scripts)), shas_(scripts_.size()) {}

  /// Locks the connection for one blocking operation, first waiting until no split request is
  /// in flight (see "Split send/receive" below).
  [[nodiscard]] std::unique_lock<std::mutex> lock() const {
    std::unique_lock<std::mutex> l(mutex_);
    idle_.wait(l, [this] { return !in_flight_; });
    return l;
  }
  /// Locks the connection without waiting for a split request in flight (the split calls).
  [[nodiscard]] std::unique_lock<std::mutex> lock_raw() const {
    return std::unique_lock<std::mutex>(mutex_);
  }
  [[nodiscard]] const redis_options& options() const noexcept { return opts_; }
  [[nodiscard]] bool connected() const noexcept { return ctx_ != nullptr; }

  /// Records a failure's text and returns its code (so callers can `return fail(...)`).
  std::error_code fail(errc code, std::string message) {
    last_error_ = std::move(message);
    return code;
  }
  [[nodiscard]] const std::string& last_error() const noexcept { return last_error_; }

  /// GETs `key` as a token (the counter, a fence key): none if the key does not exist;
  /// protocol_error, recording `what`, if it holds anything but a token; transport errors as
  /// command() reports them. The caller holds lock().
  result<fencing_token> get_token(std::string_view key, const char* what) {
    result<redis_reply_ptr> r = command({"GET", key});
    if (!r) return r.error();
    if ((*r)->type == REDIS_REPLY_NIL) return fencing_token{};
    if (std::optional<fencing_token> t = reply_token(r->get())) return *t;
    return fail(errc::protocol_error, what);
  }

  void disconnect() noexcept { ctx_.reset(); }

  /// Connects if not connected: TCP/Unix connect within connect_timeout, then one pipelined round
  /// trip of AUTH, SELECT, CLIENT SETNAME and SCRIPT LOAD of every script.
  std::error_code ensure_connected() {
    if (ctx_) return {};
    if (std::error_code ec = opts_.check()) {
      return fail(errc::invalid_argument, "invalid redis_options");
    }
    const struct timeval ctv = to_timeval(opts_.connect_timeout);
    std::unique_ptr<redisContext, redis_context_deleter> c(
        opts_.unix_socket.empty() ? redisConnectWithTimeout(opts_.host.c_str(), opts_.port, ctv)
                                  : redisConnectUnixWithTimeout(opts_.unix_socket.c_str(), ctv));
    if (!c) return fail(errc::store_unavailable, "redis: cannot allocate a connection context");
    if (c->err != 0) {
      return fail(errc::store_unavailable, std::string("redis: connect: ") + c->errstr);
    }
#if !defined(MSG_NOSIGNAL) && defined(SO_NOSIGPIPE)
    const int one = 1;
    (void)::setsockopt(c->fd, SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof one);
#endif
    // The setup round trip is bounded by the connect timeout; commands after it by their own.
    if (redisSetTimeout(c.get(), ctv) != REDIS_OK) {
      return fail(errc::store_unavailable, std::string("redis: set timeout: ") + c->errstr);
    }
    // One pipelined round trip: every setup command is formatted into one buffer and sent.
    std::string pipeline;
    std::size_t sent = 0;
    if (!opts_.password.empty()) {
      if (opts_.username.empty()) {
        format(pipeline, {"AUTH", opts_.password});
      } else {
        format(pipeline, {"AUTH", opts_.username, opts_.password});
      }
      ++sent;
    }
    if (opts_.database != 0) {
      format(pipeline, {"SELECT", std::to_string(opts_.database)});
      ++sent;
    }
    if (!opts_.client_name.empty()) {
      format(pipeline, {"CLIENT", "SETNAME", opts_.client_name});
      ++sent;
    }
    for (const std::string& script : scripts_) format(pipeline, {"SCRIPT", "LOAD", script});
    const std::size_t setup = sent;
    sent += scripts_.size();
    if (std::error_code ec = send_all(c.get(), pipeline.data(), pipeline.size())) return ec;
    std::error_code first_error{};
    for (std::size_t i = 0; i < sent; ++i) {
      void* raw = nullptr;
      if (redisGetReply(c.get(), &raw) != REDIS_OK || raw == nullptr) {
        return fail(transport_code(c.get()), std::string("redis: setup: ") + c->errstr);
      }
      redis_reply_ptr r(static_cast<redisReply*>(raw));
      if (r->type == REDIS_REPLY_ERROR) {
        if (!first_error) {
          first_error =
              fail(classify_redis_error(r->str, r->len), "redis: setup: " + text_of(r.get()));
        }
        continue;
      }
      if (i >= setup) {
        if (r->type != REDIS_REPLY_STRING || r->len != 40) {
          if (!first_error) {
            first_error = fail(errc::protocol_error, "redis: SCRIPT LOAD answered no SHA1");
          }
          continue;
        }
        shas_[i - setup].assign(r->str, r->len);
      }
    }
    if (first_error) return first_error;
    const struct timeval tv = to_timeval(opts_.command_timeout);
    if (redisSetTimeout(c.get(), tv) != REDIS_OK) {
      return fail(errc::store_unavailable, std::string("redis: set timeout: ") + c->errstr);
    }
    ctx_ = std::move(c);
    return {};
  }

  /// Runs script `index` by EVALSHA with the given keys and arguments (binary-safe), loading it
  /// again once if the server answers NOSCRIPT (the script did not run, so that retry is safe).
  /// Returns the reply; an error reply becomes its classified error code, its text kept.
  result<redis_reply_ptr> eval(std::size_t index, const std::string_view* keys, std::size_t nkeys,
                               const std::string_view* args, std::size_t nargs) {
    if (std::error_code ec = ensure_connected()) return ec;
    numkeys_ = std::to_string(nkeys);
    argv_.clear();
    lens_.clear();
    push("EVALSHA");
    push(shas_[index]);
    push(numkeys_);
    for (std::size_t i = 0; i < nkeys; ++i) push(keys[i]);
    for (std::size_t i = 0; i < nargs; ++i) push(args[i]);
    for (int attempt = 0;; ++attempt) {
      result<redis_reply_ptr> r = command_locked();
      if (!r) return r.error();
      redisReply* reply = r->get();
      if (reply->type != REDIS_REPLY_ERROR) return r;
      // NOSCRIPT: the script did not run, so loading it and calling again is safe.
      if (attempt == 0 && starts_with(reply->str, reply->len, "NOSCRIPT")) {
        if (std::error_code ec = reload(index)) return ec;
        argv_[1] = shas_[index].data();
        lens_[1] = shas_[index].size();
        continue;
      }
      return fail(classify_redis_error(reply->str, reply->len), "redis: " + text_of(reply));
    }
  }

  /// Runs one plain command (binary-safe arguments). Error replies become error codes.
  result<redis_reply_ptr> command(std::initializer_list<std::string_view> args) {
    if (std::error_code ec = ensure_connected()) return ec;
    argv_.clear();
    lens_.clear();
    for (std::string_view a : args) push(a);
    result<redis_reply_ptr> r = command_locked();
    if (!r) return r.error();
    if ((*r)->type == REDIS_REPLY_ERROR) {
      return fail(classify_redis_error((*r)->str, (*r)->len), "redis: " + text_of(r->get()));
    }
    return r;
  }

  /// Waits at most `timeout` for one reply nobody asked for (a message on a subscribed
  /// connection). \returns it; errc::timeout if none came in time (the connection stays up);
  ///   another error, with the connection dropped, if it failed.
  result<redis_reply_ptr> receive(std::chrono::milliseconds timeout) {
    if (!ctx_) return fail(errc::store_unavailable, "redis: not connected");
    void* raw = nullptr;
    if (redisGetReplyFromReader(ctx_.get(), &raw) != REDIS_OK) return drop("redis: receive: ");
    if (raw != nullptr) return redis_reply_ptr(static_cast<redisReply*>(raw));
    struct pollfd p {};
    p.fd = ctx_->fd;
    p.events = POLLIN;
    const long long ms = timeout.count() < 0 ? 0 : timeout.count();
    const int n = ::poll(&p, 1, ms > 60000 ? 60000 : static_cast<int>(ms));
    if (n == 0 || (n < 0 && errno == EINTR)) return errc::timeout;
    if (n < 0) {
      disconnect();
      return fail(errc::store_unavailable,
                  "redis: poll: " + std::generic_category().message(errno));
    }
    if (redisBufferRead(ctx_.get()) != REDIS_OK) return drop("redis: receive: ");
    if (redisGetReplyFromReader(ctx_.get(), &raw) != REDIS_OK) return drop("redis: receive: ");
    if (raw == nullptr) return errc::timeout;  // part of a message; the rest comes later
    return redis_reply_ptr(static_cast<redisReply*>(raw));
  }

  static std::string text_of(const redisReply* r) {
    if (r->str == nullptr) return {};
    return std::string(r->str, r->len);
  }

  // ---- Split send/receive (send_receive.hpp). One request at a time; every member below is
  // called with lock_raw() held. The request is formatted into a buffer of our own (reused, no
  // allocation once warm) and written with send(MSG_DONTWAIT | MSG_NOSIGNAL); replies are read
  // with recv(MSG_DONTWAIT) and fed to the context's own hiredis reader, so the blocking path
  // and this one share the connection and its parser. The socket itself stays blocking (with
  // SO_SNDTIMEO/SO_RCVTIMEO) for the blocking path.

  /// True while a split request is in flight (accepted, not yet received).
  [[nodiscard]] bool in_flight() const noexcept {
    return in_flight_;
  }

  /// Accepts a request that fails at once (bad arguments): finish() reports `code`.
  void start_failed(std::error_code code) {
    in_flight_ = true;
    complete_ = true;
    error_ = code;
    reply_.reset();
  }

  /// Starts script `index` by EVALSHA on the open connection (precondition: connected(), no
  /// request in flight), writing what the socket takes now. A NOSCRIPT answer is followed, once,
  /// by the same call as EVAL with the script's text (the script did not run; EVAL caches it
  /// under the same SHA1).
  void start(std::size_t index, const std::string_view* keys, std::size_t nkeys,
             const std::string_view* args, std::size_t nargs) {
    in_flight_ = true;
    complete_ = false;
    error_ = {};
    reply_.reset();
    sent_body_ = false;
    pending_index_ = index;
    pending_keys_ = nkeys;
    parts_.resize(nkeys + nargs);
    for (std::size_t i = 0; i < nkeys; ++i) parts_[i].assign(keys[i].data(), keys[i].size());
    for (std::size_t i = 0; i < nargs; ++i) {
      parts_[nkeys + i].assign(args[i].data(), args[i].size());
    }
    deadline_ = detail_deadline(opts_.command_timeout);
    format_pending();
    (void)write_pending();  // no read yet: the reply cannot be there, a recv() would be wasted
  }

  /// Does the non-blocking I/O the request in flight allows; true once it is complete (a reply,
  /// or a failure that dropped the connection).
  bool pump() {
    if (complete_) return true;
    if (!write_pending()) return complete_;
    redisContext* c = ctx_.get();
    for (;;) {
      void* raw = nullptr;
      if (redisReaderGetReply(c->reader, &raw) != REDIS_OK) {
        return broken(errc::protocol_error, std::string("redis: ") + c->reader->errstr);
      }
      if (raw != nullptr) {
        redis_reply_ptr r(static_cast<redisReply*>(raw));
        if (r->type == REDIS_REPLY_ERROR && !sent_body_ &&
            starts_with(r->str, r->len, "NOSCRIPT")) {
          sent_body_ = true;
          format_pending();
          return pump();
        }
        reply_ = std::move(r);
        complete_ = true;
        return true;
      }
      char buf[16384];
      const ssize_t n = ::recv(c->fd, buf, sizeof buf, MSG_DONTWAIT);
      if (n > 0) {
        if (redisReaderFeed(c->reader, buf, static_cast<std::size_t>(n)) != REDIS_OK) {
          return broken(errc::protocol_error, std::string("redis: ") + c->reader->errstr);
        }
        continue;
      }
      if (n == 0) return broken(errc::store_unavailable, "redis: connection closed by the server");
      const int e = errno;
      if (e == EINTR) continue;
      if (e == EAGAIN || e == EWOULDBLOCK) return false;
      return broken(errc::store_unavailable, "redis: recv: " + std::generic_category().message(e));
    }
  }

  /// Writes what the socket takes of the request in flight; true once all of it is written,
  /// false if the socket is full or the request failed (then complete).
  bool write_pending() {
    if (complete_) return false;
    redisContext* c = ctx_.get();
    while (out_off_ < out_.size()) {
      const ssize_t n = ::send(c->fd, out_.data() + out_off_, out_.size() - out_off_,
                               HOLDFAST_DETAIL_MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        out_off_ += static_cast<std::size_t>(n);
        continue;
      }
      const int e = n < 0 ? errno : EPIPE;
      if (n < 0 && e == EINTR) continue;
      if (n < 0 && (e == EAGAIN || e == EWOULDBLOCK)) return false;
      (void)broken(errc::store_unavailable, "redis: send: " + std::generic_category().message(e));
      return false;
    }
    return true;
  }

  /// What the request in flight waits for (fd -1 once complete).
  [[nodiscard]] io_interest interest() const noexcept {
    if (!in_flight_ || complete_ || !ctx_) return {};
    const bool writing = out_off_ < out_.size();
    return io_interest{ctx_->fd, !writing, writing};
  }

  /// Completes the request in flight, waiting (poll) until its reply is in or command_timeout
  /// has passed since start() (then errc::timeout, connection dropped), and frees the connection
  /// for the next request. An error reply becomes its classified error code, as in eval().
  result<redis_reply_ptr> finish() {
    while (!pump()) {
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline_) {
        (void)broken(errc::timeout, "redis: no reply within command_timeout");
        break;
      }
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline_ - now);
      const io_interest want = interest();
      struct pollfd p {};
      p.fd = want.fd;
      p.events = static_cast<short>((want.read ? POLLIN : 0) | (want.write ? POLLOUT : 0));
      const int w = ::poll(&p, 1, static_cast<int>(std::min<std::int64_t>(left.count(), 1 << 30)));
      if (w < 0 && errno != EINTR) {
        (void)broken(errc::store_unavailable,
                     "redis: poll: " + std::generic_category().message(errno));
        break;
      }
    }
    in_flight_ = false;
    idle_.notify_all();
    if (error_) return error_;
    redis_reply_ptr r = std::move(reply_);
    if (!r) return fail(errc::protocol_error, "redis: no reply");
    if (r->type == REDIS_REPLY_ERROR) {
      return fail(classify_redis_error(r->str, r->len), "redis: " + text_of(r.get()));
    }
    return r;
  }

 private:
  static std::chrono::steady_clock::time_point detail_deadline(std::chrono::milliseconds d) {
    const auto now = std::chrono::steady_clock::now();
    return d < std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::steady_clock::time_point::max() - now)
               ? now + d
               : std::chrono::steady_clock::time_point::max();
  }

  // A split request that failed: keep the reason, drop the connection (a late reply could be
  // read as the next command's), report complete.
  bool broken(errc code, std::string message) {
    error_ = fail(code, std::move(message));
    disconnect();
    complete_ = true;
    return true;
  }

  static void append_bulk(std::string& out, std::string_view a) {
    out += '$';
    out += std::to_string(a.size());
    out += "\r\n";
    out.append(a.data(), a.size());
    out += "\r\n";
  }

  // Formats the pending call as EVALSHA (or, after NOSCRIPT, EVAL with the script's text).
  void format_pending() {
    out_.clear();
    out_off_ = 0;
    out_ += '*';
    out_ += std::to_string(3 + parts_.size());
    out_ += "\r\n";
    append_bulk(out_, sent_body_ ? "EVAL" : "EVALSHA");
    append_bulk(out_, sent_body_ ? scripts_[pending_index_] : shas_[pending_index_]);
    append_bulk(out_, std::to_string(pending_keys_));
    for (const std::string& p : parts_) append_bulk(out_, p);
  }

  void push(std::string_view s) {
    argv_.push_back(s.data() != nullptr ? s.data() : "");
    lens_.push_back(s.size());
  }

  // Appends one command in RESP, binary-safe, to `out`.
  static void format(std::string& out, std::initializer_list<std::string_view> args) {
    out += '*';
    out += std::to_string(args.size());
    out += "\r\n";
    for (std::string_view a : args) {
      out += '$';
      out += std::to_string(a.size());
      out += "\r\n";
      out.append(a.data(), a.size());
      out += "\r\n";
    }
  }

  // Writes the whole buffer with send(MSG_NOSIGNAL) rather than letting hiredis 0.14 write(): a
  // peer that closed the connection then yields EPIPE, not a SIGPIPE that kills the process.
  // hiredis only reads replies (its output buffer stays empty). SO_SNDTIMEO bounds each send.
  std::error_code send_all(redisContext* c, const char* data, std::size_t size) {
    std::size_t off = 0;
    while (off < size) {
      const ssize_t n = ::send(c->fd, data + off, size - off, HOLDFAST_DETAIL_MSG_NOSIGNAL);
      if (n > 0) {
        off += static_cast<std::size_t>(n);
        continue;
      }
      const int e = n < 0 ? errno : EPIPE;
      if (n < 0 && e == EINTR) continue;
      if (c == ctx_.get()) disconnect();
      return fail(e == EAGAIN || e == EWOULDBLOCK ? errc::timeout : errc::store_unavailable,
                  "redis: send: " + std::generic_category().message(e));
    }
    return {};
  }

  // A transport failure leaves the context unusable (a late reply would be read as the answer to
  // the next command), so it is always dropped. errno is read at once, before anything resets it.
  static errc transport_code(const redisContext* c) noexcept {
    if (c->err == REDIS_ERR_PROTOCOL) return errc::protocol_error;
    if (c->err == REDIS_ERR_IO) {
      const int e = errno;
      if (e == EAGAIN || e == EWOULDBLOCK || e == ETIMEDOUT) return errc::timeout;
      if (std::strstr(c->errstr, "temporarily unavailable") != nullptr) return errc::timeout;
    }
    return errc::store_unavailable;
  }

  result<redis_reply_ptr> command_locked() {
    char* cmd = nullptr;
    const int len =
        redisFormatCommandArgv(&cmd, static_cast<int>(argv_.size()), argv_.data(), lens_.data());
    if (len < 0 || cmd == nullptr) {
      return fail(errc::store_unavailable, "redis: cannot format a command (out of memory)");
    }
    const std::error_code sent = send_all(ctx_.get(), cmd, static_cast<std::size_t>(len));
    redisFreeCommand(cmd);
    if (sent) return sent;
    void* raw = nullptr;
    if (redisGetReply(ctx_.get(), &raw) != REDIS_OK || raw == nullptr) {
      const errc code = transport_code(ctx_.get());
      std::string msg = std::string("redis: ") + ctx_->errstr;
      disconnect();
      return fail(code, std::move(msg));
    }
    redis_reply_ptr r(static_cast<redisReply*>(raw));
    return r;
  }

  std::error_code drop(const char* what) {
    const errc code = transport_code(ctx_.get());
    std::string msg = what + std::string(ctx_->errstr);
    disconnect();
    return fail(code, std::move(msg));
  }

  std::error_code reload(std::size_t index) {
    const std::vector<const char*> saved_argv = argv_;
    const std::vector<std::size_t> saved_lens = lens_;
    argv_.clear();
    lens_.clear();
    push("SCRIPT");
    push("LOAD");
    push(scripts_[index]);
    result<redis_reply_ptr> r = command_locked();
    argv_ = saved_argv;
    lens_ = saved_lens;
    if (!r) return r.error();
    if ((*r)->type == REDIS_REPLY_ERROR) {
      return fail(classify_redis_error((*r)->str, (*r)->len), "redis: " + text_of(r->get()));
    }
    if ((*r)->type != REDIS_REPLY_STRING || (*r)->len != 40) {
      return fail(errc::protocol_error, "redis: SCRIPT LOAD answered no SHA1");
    }
    shas_[index].assign((*r)->str, (*r)->len);
    return {};
  }

  redis_options opts_;
  std::vector<std::string> scripts_;
  std::vector<std::string> shas_;
  std::unique_ptr<redisContext, redis_context_deleter> ctx_;
  std::vector<const char*> argv_;
  std::vector<std::size_t> lens_;
  std::string numkeys_;
  std::string last_error_;
  mutable std::mutex mutex_;
  // Split send/receive state, guarded by mutex_.
  mutable std::condition_variable idle_;  // signalled when a split request was received
  bool in_flight_ = false;
  bool complete_ = false;
  bool sent_body_ = false;
  std::size_t pending_index_ = 0;
  std::size_t pending_keys_ = 0;
  std::vector<std::string> parts_;  // the pending call's keys and arguments
  std::string out_;                 // the pending call in RESP
  std::size_t out_off_ = 0;         // bytes of out_ written
  redis_reply_ptr reply_;
  std::error_code error_;
  std::chrono::steady_clock::time_point deadline_{};
};

// Tokens compare as canonical decimal strings (shorter is smaller; equal length: byte order), so
// no token is ever turned into a Lua number (a double).
inline constexpr const char* redis_older_fn =
    "local function older(a, b)\n"
    "  if #a ~= #b then return #a < #b end\n"
    "  for i = 1, #a do\n"
    "    local x, y = string.byte(a, i), string.byte(b, i)\n"
    "    if x ~= y then return x < y end\n"
    "  end\n"
    "  return false\n"
    "end\n";

// KEYS[1] lease key, KEYS[2] counter; ARGV[1] owner, ARGV[2] ttl (ms).
// Returns the token (a bulk string) on a grant, integer 0 when busy.
inline constexpr const char* redis_acquire_script =
    "local v = redis.call('GET', KEYS[1])\n"
    "if v then\n"
    "  local p = string.find(v, ':', 1, true)\n"
    "  if not p or p == 1 then\n"
    "    return redis.error_reply('HOLDFAST_CORRUPT lease record is not <token>:<owner>')\n"
    "  end\n"
    "  if string.sub(v, p + 1) ~= ARGV[1] then return 0 end\n"
    "  if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then\n"
    "    redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
    "  end\n"
    "  return string.sub(v, 1, p - 1)\n"
    "end\n"
    "local n = redis.pcall('INCR', KEYS[2])\n"
    "if type(n) == 'table' and n.err then\n"
    "  if string.find(n.err, 'overflow', 1, true) then\n"
    "    return redis.error_reply('HOLDFAST_EXHAUSTED the token counter is at 2^63-1')\n"
    "  end\n"
    "  return redis.error_reply('HOLDFAST_CORRUPT token counter: ' .. n.err)\n"
    "end\n"
    "if n < 1 then\n"
    "  return redis.error_reply('HOLDFAST_CORRUPT token counter is not positive')\n"
    "end\n"
    // Below 2^53 the Lua number is exact; above, the counter is read back as a string.
    "local t\n"
    "if n < 9007199254740992 then t = string.format('%d', n)\n"
    "else t = redis.call('GET', KEYS[2]) end\n"
    "redis.call('SET', KEYS[1], t .. ':' .. ARGV[1], 'PX', ARGV[2])\n"
    "return t\n";

// KEYS[1] lease key; ARGV[1] owner, ARGV[2] token, ARGV[3] ttl (ms). 1 renewed, 0 lost.
inline constexpr const char* redis_renew_script =
    "if redis.call('GET', KEYS[1]) == ARGV[2] .. ':' .. ARGV[1] then\n"
    "  redis.call('PEXPIRE', KEYS[1], ARGV[3])\n"
    "  return 1\n"
    "end\n"
    "return 0\n";

// Pops waiters off the wait queue KEYS[n] ("<channel> <wait id>" entries) until one of them is
// listening, and publishes its wait id on its channel: one waiter woken per call. Entries of
// waiters whose connection is gone (PUBLISH reaches nobody) are dropped on the way.
inline constexpr const char* redis_wake_fn =
    "local function wake(q)\n"
    "  while true do\n"
    "    local w = redis.call('LPOP', q)\n"
    "    if not w then return end\n"
    "    local sp = string.find(w, ' ', 1, true)\n"
    "    if sp and redis.call('PUBLISH', string.sub(w, 1, sp - 1), string.sub(w, sp + 1)) > 0 "
    "then\n"
    "      return\n"
    "    end\n"
    "  end\n"
    "end\n";

// KEYS[1] lease key, KEYS[2] wait queue; ARGV[1] owner, ARGV[2] token, ARGV[3] the release
// broadcast channel, ARGV[4] the key. 1 released (the first listening waiter told, and the key
// announced to every watcher), 0 not the holder.
inline std::string redis_release_script() {
  return std::string(redis_wake_fn) +
         "if redis.call('GET', KEYS[1]) == ARGV[2] .. ':' .. ARGV[1] then\n"
         "  redis.call('DEL', KEYS[1])\n"
         "  wake(KEYS[2])\n"
         "  redis.call('PUBLISH', ARGV[3], ARGV[4])\n"
         "  return 1\n"
         "end\n"
         "return 0\n";
}

// KEYS[1] lease key, KEYS[2] wait queue; ARGV[1] "<channel> <wait id>", ARGV[2] grace (ms).
// -1 if the key is free (nothing queued); else queues the waiter and returns the holder's PTTL.
// The queue outlives its waiters by the grace, so abandoned queues vanish on their own.
inline constexpr const char* redis_wait_script =
    "local t = redis.call('PTTL', KEYS[1])\n"
    "if t < 0 then return -1 end\n"
    "redis.call('RPUSH', KEYS[2], ARGV[1])\n"
    "if redis.call('PTTL', KEYS[2]) < t + tonumber(ARGV[2]) then\n"
    "  redis.call('PEXPIRE', KEYS[2], t + tonumber(ARGV[2]))\n"
    "end\n"
    "return t\n";

// The acquire script whose busy answer also queues the caller, in the same step: KEYS[3] wait
// queue; ARGV[3] "<channel> <wait id>", ARGV[4] grace (ms). Busy and queued: -1 - holder's PTTL
// (<= -1); busy and not queued (a record without TTL): 0; a grant: the token, as acquire's.
inline std::string redis_acquire_queued_script() {
  std::string s = redis_acquire_script;
  const std::string busy = "  if string.sub(v, p + 1) ~= ARGV[1] then return 0 end\n";
  const std::string queued =
      "  if string.sub(v, p + 1) ~= ARGV[1] then\n"
      "    local t = redis.call('PTTL', KEYS[1])\n"
      "    if t < 0 then return 0 end\n"
      "    redis.call('RPUSH', KEYS[3], ARGV[3])\n"
      "    if redis.call('PTTL', KEYS[3]) < t + tonumber(ARGV[4]) then\n"
      "      redis.call('PEXPIRE', KEYS[3], t + tonumber(ARGV[4]))\n"
      "    end\n"
      "    return -1 - t\n"
      "  end\n";
  const std::size_t at = s.find(busy);
  if (at != std::string::npos) s.replace(at, busy.size(), queued);
  return s;
}

// KEYS[1] wait queue; ARGV[1] "<channel> <wait id>". Takes the entry out of the queue: 1 (it
// was still queued), or 0, in which case a release already chose this waiter, and the hand-off it
// is abandoning goes to the next listening waiter instead.
inline std::string redis_unwait_script() {
  return std::string(redis_wake_fn) +
         "if redis.call('LREM', KEYS[1], 1, ARGV[1]) == 1 then return 1 end\n"
         "wake(KEYS[1])\n"
         "return 0\n";
}

// KEYS[1] lease key. 0 when free, else {record, pttl}.
inline constexpr const char* redis_inspect_script =
    "local v = redis.call('GET', KEYS[1])\n"
    "if not v then return 0 end\n"
    "return {v, redis.call('PTTL', KEYS[1])}\n";

// KEYS[1] lease key, KEYS[2] counter; ARGV[1] owner, ARGV[2] token, ARGV[3] to. If the live record
// is <token>:<owner> (or already <to>:<owner>), re-labels it <to>:<owner> keeping its TTL and lifts
// the counter to >= to: 1. Otherwise 0 (lost).
inline std::string redis_raise_script() {
  return std::string(redis_older_fn) +
         "local v = redis.call('GET', KEYS[1])\n"
         "if v ~= ARGV[2] .. ':' .. ARGV[1] and v ~= ARGV[3] .. ':' .. ARGV[1] then return 0 end\n"
         "local c = redis.call('GET', KEYS[2])\n"
         "if c and not string.find(c, '^[1-9][0-9]*$') and c ~= '0' then\n"
         "  return redis.error_reply('HOLDFAST_CORRUPT token counter is not a token')\n"
         "end\n"
         "redis.call('SET', KEYS[1], ARGV[3] .. ':' .. ARGV[1], 'KEEPTTL')\n"
         "if not c or older(c, ARGV[3]) then redis.call('SET', KEYS[2], ARGV[3]) end\n"
         "return 1\n";
}

// KEYS[1] counter; ARGV[1] floor. Raises the counter to at least the floor; returns the counter.
inline std::string redis_advance_script() {
  return std::string(redis_older_fn) +
         "local c = redis.call('GET', KEYS[1])\n"
         "if c and not string.find(c, '^[1-9][0-9]*$') and c ~= '0' then\n"
         "  return redis.error_reply('HOLDFAST_CORRUPT token counter is not a token')\n"
         "end\n"
         "if not c or older(c, ARGV[1]) then redis.call('SET', KEYS[1], ARGV[1]) end\n"
         "return redis.call('GET', KEYS[1])\n";
}

// KEYS[1] fence key; ARGV[1] token, ARGV[2..] an optional command run only when admitted.
// 1 admitted (and the command ran), 0 stale. The command runs before the fence is raised, so a
// failing command leaves the fence as it was (a script's writes are not rolled back on error).
inline std::string redis_fence_script() {
  return std::string(redis_older_fn) +
         "local t = ARGV[1]\n"
         "local f = redis.call('GET', KEYS[1])\n"
         "if f then\n"
         "  if not string.find(f, '^[1-9][0-9]*$') then\n"
         "    return redis.error_reply('HOLDFAST_CORRUPT fence key does not hold a token')\n"
         "  end\n"
         "  if older(t, f) then return 0 end\n"
         "end\n"
         "if #ARGV > 1 then\n"
         "  local r = redis.pcall(unpack(ARGV, 2))\n"
         "  if type(r) == 'table' and r.err then\n"
         "    return redis.error_reply('HOLDFAST_COMMAND ' .. r.err)\n"
         "  end\n"
         "end\n"
         "if f ~= t then redis.call('SET', KEYS[1], t) end\n"
         "return 1\n";
}

}  // namespace detail

/// A LeaseStore in a Redis server, over one hiredis connection (see the file overview for the
/// scripts, durability and failure behaviour). Models LeaseStore with inspect(), the token floor
/// (raise_token, raise_token_floor) and the send/receive capability (send_receive.hpp).
///
/// Tokens are store-wide (one INCR counter per store configuration): every new grant of any key
/// carries a token greater than every token the counter issued before, in 1 .. 2^63-1.
///
/// Differences from memory_store: releasing a lease that has already expired reports not_holder
/// (Redis deleted the record at expiry); the granted TTL is exactly the one asked for.
///
/// Thread-safety: every member function may be called concurrently; one mutex serializes the
/// connection (a hiredis context is single-threaded), so concurrent callers take turns, one round
/// trip each. For parallel round trips, use one redis_store per thread. Not fork-safe: a child
/// process makes its own store. Connects lazily on first use (or connect()).
class redis_store {
 public:
  /// Makes a store for the server in `opts`; connects on first use. Never throws on its own.
  explicit redis_store(const redis_options& opts = {})
      : link_(opts, {detail::redis_acquire_script, detail::redis_renew_script,
                     detail::redis_release_script(), detail::redis_inspect_script,
                     detail::redis_advance_script(), detail::redis_raise_script(),
                     detail::redis_wait_script, detail::redis_unwait_script(),
                     detail::redis_acquire_queued_script()}),
        wait_(std::make_unique<waiting>(opts)) {}

  redis_store(const redis_store&) = delete;
  redis_store& operator=(const redis_store&) = delete;

  /// Connects now (and loads the scripts) if not connected, instead of on first use.
  /// \returns success; errc::invalid_argument for bad options; errc::store_unavailable if the
  ///   server cannot be reached or refuses AUTH/SELECT; errc::timeout; errc::protocol_error.
  result<void> connect() {
    auto guard = link_.lock();
    if (std::error_code ec = link_.ensure_connected()) return ec;
    return {};
  }

  /// Grants `key` to `owner` for `ttl` (ms) iff it has no unexpired lease, with the next token of
  /// the store-wide counter, in one round trip. The same owner re-acquiring its live lease gets the
  /// same token back and its TTL extended to at least `ttl` from now (never shortened).
  /// \returns the grant {token, ttl}; errc::busy if another owner holds a live lease;
  ///   errc::invalid_argument for an empty key/owner or ttl not in (0, max_ttl];
  ///   errc::token_exhausted if the counter is at 2^63-1; errc::store_unavailable or
  ///   errc::timeout if the server is unreachable, not serving, or too slow (no grant is
  ///   reported; one may exist in Redis and simply expires); errc::protocol_error for a reply
  ///   of the wrong shape or a key holding something holdfast did not write.
  result<grant> try_acquire(std::string_view key, std::string_view owner,
                            std::chrono::milliseconds ttl) {
    if (std::error_code ec = check_acquire_args(key, owner, ttl)) return ec;
    auto guard = link_.lock();
    const std::string_view keys[] = {lease_key(key), link_.options().counter_key};
    ttl_text_ = std::to_string(ttl.count());
    const std::string_view args[] = {owner, ttl_text_};
    return read_acquire(link_.eval(script_acquire, keys, 2, args, 2), ttl);
  }

  /// Extends the lease on `key` to `ttl` (ms) from now iff `owner` holds it with `token` and it
  /// has not expired, in one round trip. \returns the grant (same token); errc::lease_lost if the
  ///   key is free, expired or held by another owner or token; errc::invalid_argument (see
  ///   check_renew_args); store_unavailable, timeout, protocol_error as for try_acquire.
  result<grant> renew(std::string_view key, std::string_view owner, fencing_token token,
                      std::chrono::milliseconds ttl) {
    if (std::error_code ec = check_renew_args(key, owner, token, ttl)) return ec;
    auto guard = link_.lock();
    const std::string_view keys[] = {lease_key(key)};
    token_text_ = std::to_string(token.value());
    ttl_text_ = std::to_string(ttl.count());
    const std::string_view args[] = {owner, token_text_, ttl_text_};
    return read_renew(link_.eval(script_renew, keys, 1, args, 3), token, ttl);
  }

  /// Deletes the lease on `key` iff `owner` holds it with `token`, in one round trip. If the
  /// connection (open since an earlier call) turns out to have been dropped, it reconnects and
  /// sends the release once more (two round trips and a connect).
  /// \returns success; errc::not_holder if the key is free, expired, or held by another owner or
  ///   token; errc::invalid_argument (see check_release_args); store_unavailable, timeout,
  ///   protocol_error as for try_acquire.
  result<void> release(std::string_view key, std::string_view owner, fencing_token token) {
    if (std::error_code ec = check_release_args(key, owner, token)) return ec;
    auto guard = link_.lock();
    const std::string_view keys[] = {lease_key(key), queue_key(key)};
    token_text_ = std::to_string(token.value());
    const std::string_view args[] = {owner, token_text_, wait_->broadcast, key};
    const bool reused = link_.connected();
    result<detail::redis_reply_ptr> r = link_.eval(script_release, keys, 2, args, 4);
    if (!r && r.error() == errc::store_unavailable && reused && !link_.connected()) {
      // The connection, open since an earlier call, failed under this one: most often the
      // server or a proxy dropped it while idle, and the request never got through. A release
      // is the one call a holder makes on its way out (a lease's destructor tries it once more
      // at most), so reconnect and send it once more rather than leave the key to its TTL. If
      // the first attempt did land, this one answers not_holder.
      r = link_.eval(script_release, keys, 2, args, 4);
    }
    return read_release(std::move(r));
  }

  /// Returns the live lease on `key` (owner, token, time left by Redis' clock in ms), or nullopt.
  /// \returns errc::invalid_argument for an empty key; store_unavailable, timeout; protocol_error
  ///   for a record holdfast did not write (or one without a TTL).
  result<std::optional<lease_record>> inspect(std::string_view key) {
    if (key.empty()) return errc::invalid_argument;
    auto guard = link_.lock();
    const std::string_view keys[] = {lease_key(key)};
    return read_inspect(link_.eval(script_inspect, keys, 1, nullptr, 0));
  }

  /// Returns the newest token the counter has issued (none if it has issued none).
  /// \returns store_unavailable, timeout; protocol_error if the counter holds no token.
  result<fencing_token> last_token() {
    auto guard = link_.lock();
    return link_.get_token(link_.options().counter_key, "redis: the token counter holds no token");
  }

  /// Raises the token counter to at least `floor` (never lowers it), atomically, so every later
  /// grant carries a token above `floor`; live leases keep theirs. Use it after a restart that
  /// lost the counter (no persistence, or a failover to a lagging replica): pass the newest token
  /// any fence downstream admitted, and new holders get past the fences again. It is also the
  /// token-floor capability quorum_store uses for recovery (see quorum.hpp).
  /// \returns success; errc::invalid_argument unless `floor` is in [1, 2^63-1];
  ///   store_unavailable, timeout, protocol_error.
  result<void> raise_token_floor(fencing_token floor) {
    if (!floor.is_issuable() || floor > redis_max_token) return errc::invalid_argument;
    auto guard = link_.lock();
    const std::string_view keys[] = {link_.options().counter_key};
    token_text_ = std::to_string(floor.value());
    const std::string_view args[] = {token_text_};
    return read_raise_token_floor(link_.eval(script_advance, keys, 1, args, 1));
  }

  /// Re-labels the live lease `owner` holds on `key` with `token` (or already with `to`) with the
  /// greater token `to`, keeping its TTL, and lifts the counter to at least `to`, in one script:
  /// the token-floor capability quorum_store needs from its members, so that a quorum of Redis
  /// servers hands out strictly increasing tokens (quorum.hpp has the argument).
  /// \returns success; errc::lease_lost if the key is free, expired, or held by another owner or
  ///   token; errc::invalid_argument for an empty key or owner, `token` or `to` not issuable,
  ///   `to` < `token` or `to` > 2^63-1; store_unavailable, timeout, protocol_error.
  result<void> raise_token(std::string_view key, std::string_view owner, fencing_token token,
                           fencing_token to) {
    if (std::error_code ec = check_release_args(key, owner, token)) return ec;
    if (!to.is_issuable() || to < token || to > redis_max_token) return errc::invalid_argument;
    auto guard = link_.lock();
    const std::string_view keys[] = {lease_key(key), link_.options().counter_key};
    token_text_ = std::to_string(token.value());
    to_text_ = std::to_string(to.value());
    const std::string_view args[] = {owner, token_text_, to_text_};
    return read_raise_token(link_.eval(script_raise, keys, 2, args, 3));
  }

  // ---- Split send/receive (send_receive.hpp): requests in flight from one thread --------------

  /// Starts `request` on this store's own connection without blocking (the send half of the
  /// send/receive capability; see send_receive.hpp): formats it and writes what the socket takes.
  /// Bad arguments are accepted and reported by receive(), as the blocking operation would.
  /// \returns a zero code once accepted: exactly one receive() must follow (until then the
  ///   blocking operations of this store wait); send_would_block() if the store cannot start it
  ///   without blocking: not connected yet (connecting blocks; call connect() or any blocking
  ///   operation first) or another split request in flight. Never blocks.
  /// Thread-safety: as the other operations; the calls of one request may come from different
  /// threads, one at a time.
  std::error_code send(const store_request& request) {
    auto guard = link_.lock_raw();
    if (link_.in_flight() || !link_.connected()) return send_would_block();
    pending_op_ = request.op;
    pending_token_ = request.token;
    pending_ttl_ = request.ttl;
    std::error_code bad;
    switch (request.op) {
      case store_op::try_acquire:
        bad = check_acquire_args(request.key, request.owner, request.ttl);
        break;
      case store_op::renew:
        bad = check_renew_args(request.key, request.owner, request.token, request.ttl);
        break;
      case store_op::release:
        bad = check_release_args(request.key, request.owner, request.token);
        break;
      case store_op::inspect:
        if (request.key.empty()) bad = errc::invalid_argument;
        break;
      case store_op::raise_token:
        bad = check_release_args(request.key, request.owner, request.token);
        if (!request.to.is_issuable() || request.to < request.token ||
            request.to > redis_max_token) {
          bad = errc::invalid_argument;
        }
        break;
      case store_op::raise_token_floor:
        if (!request.token.is_issuable() || request.token > redis_max_token) {
          bad = errc::invalid_argument;
        }
        break;
    }
    if (bad) {
      link_.start_failed(bad);
      return {};
    }
    const std::string_view owner = request.owner;
    token_text_ = std::to_string(request.token.value());
    switch (request.op) {
      case store_op::try_acquire: {
        const std::string_view keys[] = {lease_key(request.key), link_.options().counter_key};
        ttl_text_ = std::to_string(request.ttl.count());
        const std::string_view args[] = {owner, ttl_text_};
        link_.start(script_acquire, keys, 2, args, 2);
        break;
      }
      case store_op::renew: {
        const std::string_view keys[] = {lease_key(request.key)};
        ttl_text_ = std::to_string(request.ttl.count());
        const std::string_view args[] = {owner, token_text_, ttl_text_};
        link_.start(script_renew, keys, 1, args, 3);
        break;
      }
      case store_op::release: {
        const std::string_view keys[] = {lease_key(request.key), queue_key(request.key)};
        const std::string_view args[] = {owner, token_text_, wait_->broadcast, request.key};
        link_.start(script_release, keys, 2, args, 4);
        break;
      }
      case store_op::inspect: {
        const std::string_view keys[] = {lease_key(request.key)};
        link_.start(script_inspect, keys, 1, nullptr, 0);
        break;
      }
      case store_op::raise_token: {
        const std::string_view keys[] = {lease_key(request.key), link_.options().counter_key};
        to_text_ = std::to_string(request.to.value());
        const std::string_view args[] = {owner, token_text_, to_text_};
        link_.start(script_raise, keys, 2, args, 3);
        break;
      }
      case store_op::raise_token_floor: {
        const std::string_view keys[] = {link_.options().counter_key};
        const std::string_view args[] = {token_text_};
        link_.start(script_advance, keys, 1, args, 1);
        break;
      }
    }
    return {};
  }

  /// Returns what the request in flight waits for: the connection's socket, to be polled for
  /// reading or writing; fd -1 if none is in flight or its reply is complete. Never blocks.
  [[nodiscard]] io_interest interest() const {
    auto guard = link_.lock_raw();
    return link_.interest();
  }

  /// Writes the rest of the request in flight and reads what has arrived, without blocking.
  /// \returns true once receive() will not block (the reply is in, or the request failed).
  bool progress() {
    auto guard = link_.lock_raw();
    return !link_.in_flight() || link_.pump();
  }

  /// Returns the reply to the request in flight, in the field its operation names (see
  /// store_reply), exactly as the blocking operation reports it; waits for it, if it is not in
  /// yet, until command_timeout has passed since send() (then errc::timeout and the connection
  /// is dropped). Frees the connection. Without a request in flight every field holds
  /// errc::invalid_argument.
  store_reply receive() {
    auto guard = link_.lock_raw();
    store_reply out;
    if (!link_.in_flight()) {
      out.granted = errc::invalid_argument;
      out.done = errc::invalid_argument;
      out.record = errc::invalid_argument;
      return out;
    }
    result<detail::redis_reply_ptr> r = link_.finish();
    switch (pending_op_) {
      case store_op::try_acquire:
        out.granted = read_acquire(std::move(r), pending_ttl_);
        break;
      case store_op::renew:
        out.granted = read_renew(std::move(r), pending_token_, pending_ttl_);
        break;
      case store_op::release:
        out.done = read_release(std::move(r));
        break;
      case store_op::inspect:
        out.record = read_inspect(std::move(r));
        break;
      case store_op::raise_token:
        out.done = read_raise_token(std::move(r));
        break;
      case store_op::raise_token_floor:
        out.done = read_raise_token_floor(std::move(r));
        break;
    }
    return out;
  }

  /// try_acquire, and when the key is busy, also queues the calling thread for its next
  /// wait_for_release(key, ...) on this store, in the same script and round trip (store.hpp's
  /// try_acquire_queued capability; blocking acquire() uses it, so joining the queue costs no
  /// request of its own). A thread holds at most one such place: queuing again first takes the
  /// old place out (and passes on a hand-off it was chosen for). If the notification connection
  /// cannot be set up, it answers as try_acquire does and queues nothing.
  /// \returns as try_acquire().
  result<grant> try_acquire_queued(std::string_view key, std::string_view owner,
                                   std::chrono::milliseconds ttl) {
    if (std::error_code ec = check_acquire_args(key, owner, ttl)) return ec;
    waiting& w = *wait_;
    std::uint64_t id;
    std::optional<waiting::ticket> stale;
    {
      std::lock_guard<std::mutex> lk(w.mu);
      if (!w.reading && subscribe(w)) return try_acquire(key, owner, ttl);
      auto t = w.tickets.find(std::this_thread::get_id());
      if (t != w.tickets.end()) {
        stale = std::move(t->second);
        w.active.erase(stale->id);
        w.arrived.erase(stale->id);
        w.tickets.erase(t);
      }
      id = ++w.seq;
      w.active.insert(id);
    }
    if (stale) dequeue(stale->key, stale->entry);
    waiting::ticket mine;
    mine.key.assign(key.data(), key.size());
    mine.entry = w.channel + " " + std::to_string(id);
    mine.id = id;
    mine.start = std::chrono::steady_clock::now();  // before the request leaves
    result<detail::redis_reply_ptr> r = [&] {
      auto guard = link_.lock();
      const std::string_view keys[] = {lease_key(key), link_.options().counter_key, queue_key(key)};
      ttl_text_ = std::to_string(ttl.count());
      const std::string_view args[] = {owner, ttl_text_, mine.entry, "60000"};
      return link_.eval(script_acquire_queued, keys, 3, args, 4);
    }();
    if (r && (*r)->type == REDIS_REPLY_INTEGER && (*r)->integer < 0) {
      mine.pttl = -1 - (*r)->integer;
      std::lock_guard<std::mutex> lk(w.mu);
      w.tickets[std::this_thread::get_id()] = std::move(mine);
      return errc::busy;
    }
    {
      std::lock_guard<std::mutex> lk(w.mu);
      w.active.erase(id);
      w.arrived.erase(id);
    }
    auto guard = link_.lock();
    return read_acquire(std::move(r), ttl);
  }

  /// Blocks until `key` may be free, without polling (store.hpp's wait_for_release capability,
  /// used by blocking acquire()): queues this waiter behind the holder in one script (which also
  /// reads the holder's PTTL), then sleeps on this store's notification connection until a
  /// release chooses it (the release script pops the first listening waiter and PUBLISHes to its
  /// channel: one waiter woken per release, in the order they queued), until the holder's lease
  /// can have expired (PTTL + 1 ms after the request left, by this process's steady clock), or
  /// until `deadline`, whichever comes first. Returns at once if the key is free.
  ///
  /// Notifications are hints: a lost message (a dropped notification connection, an expiry, a
  /// release by a script that does not notify) costs the wait until the holder's expiry, never
  /// more; the store stays the judge (the waiter asks try_acquire next). A waiter that leaves
  /// without its notification takes its entry out of the queue, and if a release had already
  /// chosen it, passes that hand-off on to the next waiter. Requests: one to queue, none while
  /// asleep, and one more only when leaving unwoken. The queue key expires 60 s after the
  /// holder's PTTL at queueing time, so abandoned queues vanish on their own.
  ///
  /// Thread-safety: any number of threads may wait on one store at once; one of them reads the
  /// notification connection at a time and files what arrives for the others.
  /// \returns success (woken for any of the reasons above); errc::invalid_argument for an empty
  ///   key; store_unavailable, timeout, protocol_error if queueing or subscribing failed (the
  ///   caller falls back to backoff).
  result<void> wait_for_release(std::string_view key,
                                const std::chrono::steady_clock::time_point& deadline) {
    if (key.empty()) return errc::invalid_argument;
    waiting& w = *wait_;
    std::uint64_t id = 0;
    std::string entry;
    std::chrono::steady_clock::time_point start{};
    std::optional<result<long long>> queued;  // set when try_acquire_queued queued this thread
    std::optional<waiting::ticket> stale;
    {
      std::unique_lock<std::mutex> lk(w.mu);
      auto t = w.tickets.find(std::this_thread::get_id());
      if (t != w.tickets.end()) {
        if (t->second.key == key) {
          id = t->second.id;
          entry = std::move(t->second.entry);
          start = t->second.start;
          queued = t->second.pttl;
        } else {
          stale = std::move(t->second);
          w.active.erase(stale->id);
          w.arrived.erase(stale->id);
        }
        w.tickets.erase(t);
      }
      if (!queued) {
        if (!w.reading) {
          if (std::error_code ec = subscribe(w)) return ec;
        }
        id = ++w.seq;
        w.active.insert(id);
      }
    }
    if (stale) dequeue(stale->key, stale->entry);
    if (!queued) {
      entry = w.channel + " " + std::to_string(id);
      start = std::chrono::steady_clock::now();  // before the request leaves
    }
    result<long long> pttl = queued ? *queued : enqueue(key, entry);
    bool woken = false;
    if (pttl && *pttl >= 0) {
      auto wake = start + std::chrono::milliseconds(*pttl + 1);
      if (deadline < wake) wake = deadline;
      std::unique_lock<std::mutex> lk(w.mu);
      sleep_on(w, lk, wake, [&] { return woken = w.arrived.erase(id) != 0; });
    }
    {
      std::lock_guard<std::mutex> lk(w.mu);
      w.active.erase(id);
      w.arrived.erase(id);
    }
    if (!pttl) return pttl.error();
    if (*pttl >= 0 && !woken) dequeue(key, entry);
    return {};
  }

  /// Blocks until `key` may have changed hands, for observers (election::next_leader): like
  /// wait_for_release, but takes no place in the hand-off queue, so it never takes a release away
  /// from a waiting acquirer. Every release script also PUBLISHes the key on the broadcast channel
  /// wait_prefix + "released", to which this store's notification connection is subscribed;
  /// every watcher of the key wakes. Sleeps until such an announcement, the holder's expiry (its
  /// time left, read by inspect(), + 1 ms after the request left), or `deadline`; returns at
  /// once if the key is free. Requests: one inspect. Lost announcements cost the wait until the
  /// holder's expiry, never more. Thread-safety as wait_for_release.
  /// \returns success; errc::invalid_argument for an empty key; errors of inspect() or SUBSCRIBE.
  result<void> watch_release(std::string_view key,
                             const std::chrono::steady_clock::time_point& deadline) {
    if (key.empty()) return errc::invalid_argument;
    waiting& w = *wait_;
    std::uint64_t base;
    {
      std::lock_guard<std::mutex> lk(w.mu);
      if (!w.reading) {
        if (std::error_code ec = subscribe(w)) return ec;
      }
      auto& entry = w.watched[std::string(key)];
      base = entry.first;
      ++entry.second;
    }
    const auto start = std::chrono::steady_clock::now();  // before the request leaves
    result<std::optional<lease_record>> held = inspect(key);
    std::unique_lock<std::mutex> lk(w.mu);
    auto it = w.watched.find(key);
    if (held && *held) {
      auto wake = start + (*held)->remaining + std::chrono::milliseconds(1);
      if (deadline < wake) wake = deadline;
      sleep_on(w, lk, wake, [&] { return it->second.first != base; });
    }
    if (--it->second.second == 0) w.watched.erase(it);
    if (!held) return held.error();
    return {};
  }

  /// Returns the text of the most recent failure of any operation on this store: the server's
  /// error reply (e.g. "NOAUTH Authentication required."), hiredis' transport error (e.g.
  /// "Connection refused"), or holdfast's own note on a malformed reply. Empty if nothing failed.
  /// Under concurrent use it may belong to another thread's call. Contention (busy, lease_lost,
  /// not_holder) is not a failure and does not change it.
  [[nodiscard]] std::string last_error_message() const {
    auto guard = link_.lock();
    return link_.last_error();
  }

  /// Returns the options the store was made with.
  [[nodiscard]] const redis_options& options() const noexcept { return link_.options(); }

 private:
  static constexpr std::size_t script_acquire = 0;
  static constexpr std::size_t script_renew = 1;
  static constexpr std::size_t script_release = 2;
  static constexpr std::size_t script_inspect = 3;
  static constexpr std::size_t script_advance = 4;
  static constexpr std::size_t script_raise = 5;
  static constexpr std::size_t script_wait = 6;
  static constexpr std::size_t script_unwait = 7;
  static constexpr std::size_t script_acquire_queued = 8;

  std::string_view lease_key(std::string_view key) {
    key_.assign(link_.options().key_prefix);
    key_.append(key.data(), key.size());
    return key_;
  }
  std::string_view queue_key(std::string_view key) {
    queue_.assign(link_.options().wait_prefix);
    queue_.append(key.data(), key.size());
    return queue_;
  }

  // Queues `entry` behind `key`'s holder: the holder's PTTL (ms), or -1 if the key is free.
  result<long long> enqueue(std::string_view key, const std::string& entry) {
    auto guard = link_.lock();
    const std::string_view keys[] = {lease_key(key), queue_key(key)};
    const std::string_view args[] = {entry, "60000"};
    result<detail::redis_reply_ptr> r = link_.eval(script_wait, keys, 2, args, 2);
    if (!r) return r.error();
    if ((*r)->type == REDIS_REPLY_INTEGER && (*r)->integer >= -1) return (*r)->integer;
    return link_.fail(errc::protocol_error, "redis: wait: unexpected reply");
  }

  // Takes `entry` out of `key`'s queue, passing a hand-off it was chosen for to the next waiter.
  void dequeue(std::string_view key, const std::string& entry) {
    auto guard = link_.lock();
    const std::string_view keys[] = {queue_key(key)};
    const std::string_view args[] = {entry};
    (void)link_.eval(script_unwait, keys, 1, args,
                     1);  // best effort: the queue's TTL cleans up too
  }

  // The notification side of wait_for_release: a second connection, subscribed to this store's
  // channel, read by one waiting thread at a time (the others wait on `cv` for their wait id).
  struct waiting {
    explicit waiting(const redis_options& o)
        : link(o, {}),
          channel(o.wait_prefix + "ch:" + detail::random_owner_id()),
          broadcast(o.wait_prefix + "released") {}
    std::mutex mu;  // guards everything below; `link` only while no one is `reading`
    std::condition_variable cv;
    detail::redis_link link;
    std::string channel;    // this store's own channel: hand-offs chosen by a release script
    std::string broadcast;  // every release of every key with this wait_prefix, for watchers
    bool reading = false;
    bool subscribed = false;
    std::uint64_t seq = 0;
    std::set<std::uint64_t> active;   // wait ids of threads waiting now
    std::set<std::uint64_t> arrived;  // of those, the ones a release woke
    // A thread's place in a queue taken by try_acquire_queued, for its next wait_for_release.
    struct ticket {
      std::string key;
      std::string entry;
      std::uint64_t id = 0;
      std::chrono::steady_clock::time_point start{};
      long long pttl = 0;
    };
    std::map<std::thread::id, ticket> tickets;
    // Per key being watched: releases announced so far, and how many threads watch it.
    std::map<std::string, std::pair<std::uint64_t, int>, std::less<>> watched;
  };

  // [w.mu held, nobody reading] Connects and subscribes the notification connection to this
  // store's channel and the release broadcast.
  std::error_code subscribe(waiting& w) {
    if (w.subscribed && w.link.connected()) return {};
    w.subscribed = false;
    auto guard = w.link.lock();
    result<detail::redis_reply_ptr> r = w.link.command({"SUBSCRIBE", w.channel, w.broadcast});
    if (!r) return r.error();
    if ((*r)->type != REDIS_REPLY_ARRAY) {  // (the second channel's confirmation comes later)
      w.link.disconnect();
      return w.link.fail(errc::protocol_error, "redis: SUBSCRIBE: unexpected reply");
    }
    w.subscribed = true;
    return {};
  }

  // [w.mu not held, w.reading set by the caller] Reads one message for at most `timeout` and
  // files it: a wait id (own channel) or a released key (broadcast). false if the connection
  // failed (notifications are lost until the next wait resubscribes).
  bool read_one(waiting& w, std::chrono::milliseconds timeout, std::set<std::uint64_t>& ids,
                std::vector<std::string>& keys) {
    auto guard = w.link.lock();
    result<detail::redis_reply_ptr> r = w.link.receive(timeout);
    if (!r) return r.error() == errc::timeout;
    const redisReply* m = r->get();
    if (m->type == REDIS_REPLY_ARRAY && m->elements == 3 &&
        m->element[1]->type == REDIS_REPLY_STRING && m->element[2]->type == REDIS_REPLY_STRING) {
      const std::string_view channel(m->element[1]->str, m->element[1]->len);
      const std::string_view payload(m->element[2]->str, m->element[2]->len);
      if (channel == w.broadcast) {
        keys.emplace_back(payload);
      } else if (std::optional<fencing_token> id =
                     detail::parse_redis_token(payload.data(), payload.size())) {
        ids.insert(id->value());
      }
    }
    return true;
  }

  // [lk holds w.mu] Sleeps until done() or `wake`, reading the notification connection whenever
  // no other thread does, and filing what arrives for everyone.
  template <class Done>
  void sleep_on(waiting& w, std::unique_lock<std::mutex>& lk,
                std::chrono::steady_clock::time_point wake, Done done) {
    for (;;) {
      if (done()) return;
      const auto now = std::chrono::steady_clock::now();
      if (!(now < wake)) return;
      if (!w.reading && w.subscribed) {
        w.reading = true;
        lk.unlock();
        std::set<std::uint64_t> ids;
        std::vector<std::string> keys;
        const bool alive =
            read_one(w, std::chrono::ceil<std::chrono::milliseconds>(wake - now), ids, keys);
        lk.lock();
        w.reading = false;
        if (!alive) w.subscribed = false;
        for (std::uint64_t g : ids) {
          if (w.active.count(g) != 0) w.arrived.insert(g);
        }
        for (const std::string& k : keys) {
          auto it = w.watched.find(k);
          if (it != w.watched.end()) ++it->second.first;
        }
        w.cv.notify_all();
      } else {
        w.cv.wait_until(lk, wake);
      }
    }
  }

  // Reading each script's reply: one place for the blocking and the split path.
  result<grant> read_acquire(result<detail::redis_reply_ptr> r, std::chrono::milliseconds ttl) {
    if (!r) return r.error();
    const redisReply* reply = r->get();
    if (reply->type == REDIS_REPLY_INTEGER && reply->integer == 0) return errc::busy;
    const std::optional<fencing_token> t = detail::reply_token(reply);
    if (t && t->is_issuable()) return grant{*t, ttl};
    return link_.fail(errc::protocol_error, "redis: acquire: unexpected reply");
  }

  result<grant> read_renew(result<detail::redis_reply_ptr> r, fencing_token token,
                           std::chrono::milliseconds ttl) {
    if (!r) return r.error();
    const redisReply* reply = r->get();
    if (reply->type == REDIS_REPLY_INTEGER && reply->integer == 1) return grant{token, ttl};
    if (reply->type == REDIS_REPLY_INTEGER && reply->integer == 0) return errc::lease_lost;
    return link_.fail(errc::protocol_error, "redis: renew: unexpected reply");
  }

  result<void> read_release(result<detail::redis_reply_ptr> r) {
    if (!r) return r.error();
    const redisReply* reply = r->get();
    if (reply->type == REDIS_REPLY_INTEGER && reply->integer == 1) return {};
    if (reply->type == REDIS_REPLY_INTEGER && reply->integer == 0) return errc::not_holder;
    return link_.fail(errc::protocol_error, "redis: release: unexpected reply");
  }

  result<std::optional<lease_record>> read_inspect(result<detail::redis_reply_ptr> r) {
    if (!r) return r.error();
    const redisReply* reply = r->get();
    if (reply->type == REDIS_REPLY_INTEGER && reply->integer == 0) {
      return std::optional<lease_record>{};
    }
    if (reply->type == REDIS_REPLY_ARRAY && reply->elements == 2 &&
        reply->element[0]->type == REDIS_REPLY_STRING &&
        reply->element[1]->type == REDIS_REPLY_INTEGER && reply->element[1]->integer >= 0) {
      const std::string_view v(reply->element[0]->str, reply->element[0]->len);
      const std::size_t colon = v.find(':');
      if (colon != std::string_view::npos) {
        const std::optional<fencing_token> t = detail::parse_redis_token(v.data(), colon);
        if (t && t->is_issuable()) {
          return std::optional<lease_record>{
              lease_record{std::string(v.substr(colon + 1)), *t,
                           std::chrono::milliseconds(reply->element[1]->integer)}};
        }
      }
    }
    return link_.fail(errc::protocol_error, "redis: inspect: unexpected reply");
  }

  result<void> read_raise_token_floor(result<detail::redis_reply_ptr> r) {
    if (!r) return r.error();
    const redisReply* reply = r->get();
    if (detail::reply_token(reply)) return {};
    return link_.fail(errc::protocol_error, "redis: raise_token_floor: unexpected reply");
  }

  result<void> read_raise_token(result<detail::redis_reply_ptr> r) {
    if (!r) return r.error();
    const redisReply* reply = r->get();
    if (reply->type == REDIS_REPLY_INTEGER && reply->integer == 1) return {};
    if (reply->type == REDIS_REPLY_INTEGER && reply->integer == 0) return errc::lease_lost;
    return link_.fail(errc::protocol_error, "redis: raise_token: unexpected reply");
  }

  detail::redis_link link_;
  std::unique_ptr<waiting> wait_;
  std::string key_;  // scratch buffers, guarded by the link's mutex
  std::string queue_;
  std::string ttl_text_;
  std::string token_text_;
  std::string to_text_;
  // The split request in flight (guarded by the link's mutex).
  store_op pending_op_ = store_op::try_acquire;
  fencing_token pending_token_{};
  std::chrono::milliseconds pending_ttl_{0};
};

/// Fenced writes whose fence lives in Redis next to the data: one script admits the token and
/// runs the write together, so no newer holder can slip in between (fence.hpp; Kleppmann 2016).
/// A fence key holds the newest admitted token as a decimal string; a write with an older token
/// is refused with stale_token and changes nothing. Equal tokens are admitted (one holder writes
/// many times).
///
/// Fence keys and the keys a command touches are used exactly as given (no prefix). They are
/// independent of any lease store: tokens from a redis_store, postgres_store or memory_store work
/// alike. Keep fence keys as durable as the data they guard (same server, same persistence).
///
/// Thread-safety: as redis_store (one mutex around one connection).
class redis_fence {
 public:
  /// Makes a fence client for the server in `opts` (only the connection fields are used).
  explicit redis_fence(redis_options opts = {})
      : link_(std::move(opts), {detail::redis_fence_script()}) {}

  redis_fence(const redis_fence&) = delete;
  redis_fence& operator=(const redis_fence&) = delete;

  /// Admits `token` at `fence_key` iff it is not older than the newest admitted there, and
  /// records it, atomically. \returns success; errc::stale_token if a newer token was admitted
  ///   (nothing changes); errc::invalid_argument for an empty key or a token no store issues
  ///   (none, max); store_unavailable, timeout; protocol_error if the key holds no token.
  result<void> admit(std::string_view fence_key, fencing_token token) {
    return execute(fence_key, token, {});
  }

  /// Admits `token` at `fence_key` and, only if admitted, SETs `data_key` to `value`, in one
  /// atomic script. \returns as admit().
  result<void> write(std::string_view fence_key, fencing_token token, std::string_view data_key,
                     std::string_view value) {
    const std::string_view cmd[] = {"SET", data_key, value};
    return run(fence_key, token, cmd, 3);
  }

  /// Admits `token` at `fence_key` and, only if admitted, runs the Redis `command` (e.g.
  /// {"HSET", "account:7", "balance", "120"}), in one atomic script; the command's reply is not
  /// returned. If the command fails, the fence is not raised. An empty command only admits.
  /// \returns as admit(), and errc::invalid_argument (with the server's text in
  ///   last_error_message()) if the command itself fails, e.g. WRONGTYPE or an unknown command.
  result<void> execute(std::string_view fence_key, fencing_token token,
                       const std::vector<std::string_view>& command) {
    return run(fence_key, token, command.data(), command.size());
  }

  /// Returns the newest token admitted at `fence_key` (none if none was). A snapshot only:
  /// deciding on it and then writing is the check-then-write race; use write() or execute().
  result<fencing_token> newest(std::string_view fence_key) {
    if (fence_key.empty()) return errc::invalid_argument;
    auto guard = link_.lock();
    return link_.get_token(fence_key, "redis: fence key holds no token");
  }

  /// As redis_store::last_error_message().
  [[nodiscard]] std::string last_error_message() const {
    auto guard = link_.lock();
    return link_.last_error();
  }

 private:
  result<void> run(std::string_view fence_key, fencing_token token, const std::string_view* command,
                   std::size_t n) {
    if (fence_key.empty() || !token.is_issuable()) return errc::invalid_argument;
    auto guard = link_.lock();
    token_text_ = std::to_string(token.value());
    args_.clear();
    args_.push_back(token_text_);
    args_.insert(args_.end(), command, command + n);
    const std::string_view keys[] = {fence_key};
    result<detail::redis_reply_ptr> r = link_.eval(0, keys, 1, args_.data(), args_.size());
    if (!r) return r.error();
    const redisReply* reply = r->get();
    if (reply->type == REDIS_REPLY_INTEGER && reply->integer == 1) return {};
    if (reply->type == REDIS_REPLY_INTEGER && reply->integer == 0) return errc::stale_token;
    return link_.fail(errc::protocol_error, "redis: fence: unexpected reply");
  }

  detail::redis_link link_;
  std::string token_text_;
  std::vector<std::string_view> args_;
};

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_REDIS_HPP
