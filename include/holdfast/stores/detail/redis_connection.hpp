// SPDX-License-Identifier: MIT
// holdfast/stores/detail/redis_connection.hpp - redis_connection: one hiredis connection with
// its Lua scripts, the blocking transport under redis_store and redis_fence. Connects lazily
// (TCP or Unix socket, connect timeout, then AUTH, SELECT, CLIENT SETNAME and SCRIPT LOAD of every
// script in one pipelined round trip), runs scripts by EVALSHA (loading one again after NOSCRIPT),
// writes with send(MSG_NOSIGNAL) so a closed connection reports an error instead of SIGPIPE, drops
// the connection on any transport failure, and keeps the last failure's text. The split
// (non-blocking) path over the same connection is detail/redis_link.hpp. See the overview of
// stores/redis.hpp for the failure behaviour. Part of stores/redis.hpp; not for users.
#ifndef HOLDFAST_STORES_DETAIL_REDIS_CONNECTION_HPP
#define HOLDFAST_STORES_DETAIL_REDIS_CONNECTION_HPP

#include <hiredis/hiredis.h>
#include <poll.h>
#include <sys/socket.h>

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
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <memory>
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
#include "holdfast/stores/detail/redis_deployment.hpp"
#include "holdfast/stores/detail/redis_resp.hpp"
#include "holdfast/stores/detail/redis_sentinel.hpp"
#include "holdfast/stores/detail/redis_setup.hpp"
#include "holdfast/stores/detail/wake_pipe.hpp"
#include "holdfast/stores/redis_options.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

/// One hiredis connection with its scripts: connects lazily, loads the scripts on every
/// (re)connect, drops the connection on any transport failure, and keeps the last failure's text.
/// Not thread-safe: redis_link adds the lock (and the split send/receive path).
class redis_connection {
 public:
  redis_connection(redis_options opts, std::vector<std::string> scripts)
      : opts_(std::move(opts)), scripts_(std::move(scripts)), shas_(scripts_.size()) {}

  [[nodiscard]] const redis_options& options() const noexcept { return opts_; }
  [[nodiscard]] bool connected() const noexcept { return ctx_ != nullptr; }

  /// Records a failure's text and returns its code (so callers can `return fail(...)`).
  std::error_code fail(errc code, std::string message) {
    last_error_ = std::move(message);
    return code;
  }
  [[nodiscard]] const std::string& last_error() const noexcept { return last_error_; }
  void forget_error() const noexcept { last_error_.clear(); }  // a call begins (redis_link::lock)

  /// GETs `key` as a token (the counter, a fence key): none if the key does not exist;
  /// protocol_error, recording `what`, if it holds anything but a token; transport errors as
  /// command() reports them.
  result<fencing_token> get_token(std::string_view key, const char* what) {
    result<redis_reply_ptr> r = command({"GET", key});
    if (!r) return r.error();
    if ((*r)->type == REDIS_REPLY_NIL) return fencing_token{};
    if (std::optional<fencing_token> t = reply_token(r->get())) return *t;
    return fail(errc::protocol_error, what);
  }

  void disconnect() noexcept { ctx_.reset(); }

  /// Connects if not connected: TCP/Unix connect within connect_timeout, then one pipelined round
  /// trip of AUTH, SELECT, CLIENT SETNAME and SCRIPT LOAD of every script (and, for a store's
  /// link or through Sentinel, ROLE and the deployment probe). Through Sentinel: asks each
  /// sentinel in turn for the primary's address and keeps the first that ROLE confirms; a
  /// connection sentinel_recheck old is dropped first if the sentinels name another primary.
  std::error_code ensure_connected() {
    if (ctx_ && primary_.due(opts_)) {
      const std::string kept = last_error_;  // a call's text, not the question's
      const bool moved = primary_.moved(opts_, [this](auto&... a) { return ask_sentinel(a...); });
      last_error_ = kept;
      if (moved) disconnect();
    }
    if (ctx_) return {};
    std::string why;
    if (std::error_code ec = opts_.check(&why)) return fail(errc::invalid_argument, why);
    if (opts_.sentinels.empty()) return connect_to(opts_.host, opts_.port, opts_.unix_socket);
    std::error_code last{};
    std::size_t unknown = 0;  // sentinels that answered they know no primary by that name
    std::string asked;
    for (const redis_endpoint& sentinel : opts_.sentinels) {
      std::string host;
      int port = 0;
      bool knows = true;
      last = ask_sentinel(sentinel, host, port, knows);
      if (!knows) ++unknown;
      asked += (asked.empty() ? "" : ", ") + sentinel.host + ":" + std::to_string(sentinel.port);
      if (!last) last = connect_to(host, port, {});
      if (!last) return {};
    }
    // Every sentinel answered and none knows the name: the name is wrong (permanent). Some did
    // not answer: the ones that would know it may be among them (transient).
    if (unknown != opts_.sentinels.size()) return last;
    return fail(errc::misconfigured,
                "redis: redis_options::sentinel_master \"" + opts_.sentinel_master +
                    "\": no sentinel knows a primary by that name (asked " + asked +
                    "); check the name their `sentinel monitor` gives");
  }

  /// Makes every (re)connect also read the deployment (ROLE, INFO server, replication and
  /// persistence, CONFIG GET appendfsync) into report() and the server's life into life(), and
  /// refuse a server that is not the primary. redis_store's own link does; fences do not.
  void enable_probe() noexcept { probe_ = true; }
  /// Makes a replica at the configured address (ROLE at connect, or READONLY) misconfigured
  /// (permanent) instead of store_unavailable, unless through Sentinel (where it means a failover
  /// is under way). redis_store and redis_fence do; a Cluster node's connection does not.
  void refuse_replicas() noexcept { refuse_replicas_ = true; }
  /// The deployment read at the last connect (probe only).
  [[nodiscard]] const deployment_report& report() const noexcept { return report_; }
  /// The server's life read at the last connect, "<run_id>/<master_replid>" (probe only; empty
  /// if INFO was refused).
  [[nodiscard]] const std::string& life() const noexcept { return report_.life; }

  /// Sends WAIT `wait_replicas` `wait_timeout` (capped by a call's deadline) on the open
  /// connection: the number of replicas that acknowledged every write of this connection so far.
  result<long long> wait_for_replicas() {
    const std::string n = std::to_string(opts_.wait_replicas);
    std::optional<call_bound> reply_by;  // under a deadline: the socket outlasts WAIT
    const std::string t = std::to_string(redis_wait_timeout(opts_.wait_timeout, reply_by).count());
    result<redis_reply_ptr> r = command({"WAIT", n, t});
    if (!r) return r.error();
    if ((*r)->type != REDIS_REPLY_INTEGER)
      return fail(errc::protocol_error, "redis: WAIT: unexpected reply");
    return (*r)->integer;
  }

  /// With wait_replicas > 0, after a write (a grant, a fenced write): WAITs for the replicas.
  /// \returns "" if enough acknowledged in time (or wait_replicas is 0); else the shortfall,
  ///   "redis: <what>WAIT: <n> of <wait_replicas> replicas acknowledged <subject> within
  ///   wait_timeout", or WAIT's own failure. The caller undoes what it can, then not_durable().
  std::string replica_shortfall(const char* what, const char* subject) {
    if (opts_.wait_replicas == 0) return {};
    result<long long> acks = wait_for_replicas();
    if (acks && *acks >= opts_.wait_replicas) return {};
    if (!acks) return last_error_ + " (WAIT for " + subject + "'s acknowledgement)";
    return std::string("redis: ") + what + "WAIT: " + std::to_string(*acks) + " of " +
           std::to_string(opts_.wait_replicas) + " replicas acknowledged " + subject +
           " within wait_timeout";
  }
  /// Reports a replica_shortfall(): grant_not_durable with `why`; through Sentinel it also drops
  /// the connection (the primary may be failing over: the next call asks the sentinels again).
  std::error_code not_durable(std::string why) {
    if (!opts_.sentinels.empty()) disconnect();
    return fail(errc::grant_not_durable, std::move(why));
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
      return error_reply(reply);
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
    if ((*r)->type == REDIS_REPLY_ERROR) return error_reply(r->get());
    return r;
  }

  /// Classifies an error reply and keeps its text. READONLY (through Sentinel: a failover demoted
  /// this server; else misconfigured, replica_refused) and HOLDFAST_LIFE (a new life under this
  /// connection) also drop the connection: the next call connects afresh, the new life read.
  std::error_code error_reply(const redisReply* reply) {
    const errc code = classify_redis_error(reply->str, reply->len);
    if (starts_with(reply->str, reply->len, "READONLY") && standalone()) {
      return replica_refused(text_of(reply));
    }
    if (starts_with(reply->str, reply->len, "READONLY") ||
        starts_with(reply->str, reply->len, "HOLDFAST_LIFE")) {
      disconnect();
      return fail(code,
                  "redis: " + text_of(reply) + " (not the primary, or a new life: reconnecting)");
    }
    return fail(code, "redis: " + text_of(reply));
  }

  /// Waits at most `timeout` for one reply nobody asked for (a message on a subscribed
  /// connection), or until `wake` (a wake_pipe's fd, -1: none) is readable. \returns it;
  ///   errc::timeout if none came in time or `wake` woke it (the connection stays up);
  ///   another error, with the connection dropped, if it failed.
  result<redis_reply_ptr> receive(std::chrono::milliseconds timeout, int wake = -1) {
    if (!ctx_) return fail(errc::store_unavailable, "redis: not connected");
    void* raw = nullptr;
    if (redisGetReplyFromReader(ctx_.get(), &raw) != REDIS_OK) return drop("redis: receive: ");
    if (raw != nullptr) return redis_reply_ptr(static_cast<redisReply*>(raw));
    const long long ms = timeout.count() < 0 ? 0 : timeout.count();
    const int n = poll_or_woken(ctx_->fd, POLLIN, wake, ms > 60000 ? 60000 : static_cast<int>(ms));
    if (n == 0 || n == 2) return errc::timeout;
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

  // ---- Pipelining (redis_store::renew_batch, detail/redis_batch.hpp), on the open connection.

  /// Appends script `index`'s EVALSHA call with these keys and arguments to `wire`, in RESP.
  void append_eval(std::string& wire, std::size_t index, const std::string_view* keys,
                   std::size_t nkeys, const std::string_view* args, std::size_t nargs) const {
    resp_append_array(wire, 3 + nkeys + nargs);
    resp_append_bulk(wire, "EVALSHA");
    resp_append_bulk(wire, shas_[index]);
    resp_append_bulk(wire, std::to_string(nkeys));
    for (std::size_t i = 0; i < nkeys; ++i) resp_append_bulk(wire, keys[i]);
    for (std::size_t i = 0; i < nargs; ++i) resp_append_bulk(wire, args[i]);
  }
  /// Writes `wire` whole (each send bounded by command_timeout); a failure drops the connection.
  std::error_code send_wire(const std::string& wire) {
    if (!ctx_) return fail(errc::store_unavailable, "redis: not connected");
    return send_all(ctx_.get(), wire.data(), wire.size());
  }
  /// Reads the next reply (waiting at most command_timeout); a failure drops the connection.
  result<redis_reply_ptr> read_reply() {
    if (!ctx_) return fail(errc::store_unavailable, "redis: not connected");
    void* raw = nullptr;
    if (redisGetReply(ctx_.get(), &raw) != REDIS_OK || raw == nullptr) {
      const errc code = transport_code(ctx_.get());
      std::string msg = std::string("redis: ") + ctx_->errstr;
      disconnect();
      return fail(code, std::move(msg));
    }
    return redis_reply_ptr(static_cast<redisReply*>(raw));
  }

  static std::string text_of(const redisReply* r) {
    if (r->str == nullptr) return {};
    return std::string(r->str, r->len);
  }

 protected:
  // For the split path (redis_link), which drives the same context with its own I/O.
  [[nodiscard]] redisContext* context() const noexcept { return ctx_.get(); }
  [[nodiscard]] const std::string& script(std::size_t index) const { return scripts_[index]; }
  [[nodiscard]] const std::string& sha(std::size_t index) const { return shas_[index]; }

 private:
  using context_ptr = std::unique_ptr<redisContext, redis_context_deleter>;

  // ensure_connected, step 1: the TCP or Unix connection, made within connect_timeout, which
  // also bounds the setup round trip (commands after it get command_timeout).
  std::error_code open(context_ptr& c, const std::string& host, int port,
                       const std::string& unix_socket) {
    const struct timeval ctv = to_timeval(capped_by_call(opts_.connect_timeout));
    c.reset(unix_socket.empty() ? redisConnectWithTimeout(host.c_str(), port, ctv)
                                : redisConnectUnixWithTimeout(unix_socket.c_str(), ctv));
    if (!c) return fail(errc::store_unavailable, "redis: cannot allocate a connection context");
    if (c->err != 0) {
      // A name that does not resolve is the configuration (misconfigured, not retried); a
      // refused or unreachable server is not.
      const bool unknown_host = std::strstr(c->errstr, "Name or service not known") != nullptr ||
                                std::strstr(c->errstr, "nodename nor servname") != nullptr;
      if (unknown_host) {
        const char* field = opts_.sentinels.empty() ? "redis_options::host" : "a sentinel's host";
        return fail(errc::misconfigured,
                    "redis: connect: " + std::string(field) + " \"" + host + "\": " + c->errstr);
      }
      return fail(errc::store_unavailable,
                  "redis: connect to " + redis_where(host, port, unix_socket) + ": " + c->errstr);
    }
#if !defined(MSG_NOSIGNAL) && defined(SO_NOSIGPIPE)
    const int one = 1;
    (void)::setsockopt(c->fd, SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof one);
#endif
    if (redisSetTimeout(c.get(), ctv) != REDIS_OK) {
      return fail(
          errc::store_unavailable,
          "redis: set timeout on " + redis_where(host, port, unix_socket) + ": " + c->errstr);
    }
    return {};
  }

  // ensure_connected for one address: open, one pipelined setup round trip, the ROLE check and
  // the probe's reading.
  std::error_code connect_to(const std::string& host, int port, const std::string& unix_socket) {
    context_ptr c;
    if (std::error_code ec = open(c, host, port, unix_socket)) return ec;
    std::string pipeline;
    const std::size_t setup = redis_format_setup(pipeline, opts_, scripts_, setup_fields_);
    const bool probing = probe_ || !opts_.sentinels.empty();
    if (probing) {
      resp_append_command(pipeline, {"ROLE"});
      resp_append_command(pipeline, {"INFO", "server"});
      resp_append_command(pipeline, {"INFO", "replication"});
      resp_append_command(pipeline, {"INFO", "persistence"});
      resp_append_command(pipeline, {"CONFIG", "GET", "appendfsync"});
    }
    if (std::error_code ec = send_all(c.get(), pipeline.data(), pipeline.size())) return ec;
    const std::string where = redis_where(host, port, unix_socket);
    if (std::error_code ec = read_setup(c.get(), setup, where)) return ec;
    if (probing) {
      if (std::error_code ec = read_probe(c.get(), host, port, where)) return ec;
    }
    const struct timeval tv = to_timeval(opts_.command_timeout);
    if (redisSetTimeout(c.get(), tv) != REDIS_OK) {
      return fail(errc::store_unavailable, "redis: set timeout on " + where + ": " + c->errstr);
    }
    ctx_ = std::move(c);
    primary_.connected(host, port);
    return {};
  }

  // Asks one sentinel for the primary's address (SENTINEL get-master-addr-by-name).
  // `knows` turns false iff the sentinel answered that it knows no primary by that name (nil).
  std::error_code ask_sentinel(const redis_endpoint& sentinel, std::string& host, int& port,
                               bool& knows) {
    context_ptr c;
    if (std::error_code ec = open(c, sentinel.host, sentinel.port, {})) return ec;
    std::string cmd;
    resp_append_command(cmd, {"SENTINEL", "get-master-addr-by-name", opts_.sentinel_master});
    if (std::error_code ec = send_all(c.get(), cmd.data(), cmd.size())) return ec;
    void* raw = nullptr;
    const std::string where = sentinel.host + ":" + std::to_string(sentinel.port);
    if (redisGetReply(c.get(), &raw) != REDIS_OK || raw == nullptr) {
      return fail(transport_code(c.get()), "redis: sentinel " + where + ": " + c->errstr);
    }
    redis_reply_ptr r(static_cast<redisReply*>(raw));
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[0]->type == REDIS_REPLY_STRING && r->element[1]->type == REDIS_REPLY_STRING) {
      host.assign(r->element[0]->str, r->element[0]->len);
      port = std::atoi(std::string(r->element[1]->str, r->element[1]->len).c_str());
      if (!host.empty() && port > 0 && port <= 65535) return {};
    }
    if (r->type == REDIS_REPLY_ERROR) {
      return fail(classify_redis_error(r->str, r->len),
                  "redis: sentinel " + where + ": " + text_of(r.get()));
    }
    knows = r->type != REDIS_REPLY_NIL;
    return fail(errc::store_unavailable, "redis: sentinel " + where + " knows no primary named '" +
                                             opts_.sentinel_master + "'");
  }

  // Reads the probe's five replies (ROLE, INFO server/replication/persistence, CONFIG GET
  // appendfsync) into report_. A server whose ROLE is not "master" is refused (store_unavailable):
  // a replica answers every write with READONLY. INFO and CONFIG may be refused (renamed commands,
  // ACLs): the report then says what it could not read.
  std::error_code read_probe(redisContext* c, const std::string& host, int port,
                             const std::string& where) {
    redis_reply_ptr replies[5];
    for (redis_reply_ptr& r : replies) {
      void* raw = nullptr;
      if (redisGetReply(c, &raw) != REDIS_OK || raw == nullptr) {
        return fail(transport_code(c), "redis: setup with " + where + ": " + c->errstr);
      }
      r.reset(static_cast<redisReply*>(raw));
    }
    const redisReply* role = replies[0].get();
    if (role->type == REDIS_REPLY_ARRAY && role->elements >= 1 &&
        role->element[0]->type == REDIS_REPLY_STRING) {
      const std::string name(role->element[0]->str, role->element[0]->len);
      if (name != "master" && standalone()) {  // the configured address names a replica
        return fail(errc::misconfigured, redis_replica_text(host + ":" + std::to_string(port),
                                                            replies[2].get(), "ROLE: " + name));
      }
      if (name != "master") {  // through Sentinel: a failover under way, ask again
        return fail(errc::store_unavailable, "redis: " + host + ":" + std::to_string(port) +
                                                 " is not the primary (ROLE: " + name + ")");
      }
    }
    report_ = redis_deployment(replies[1].get(), replies[2].get(), replies[3].get(),
                               replies[4].get(), opts_.wait_replicas);
    report_.facts = "address=" + host + ":" + std::to_string(port) + " " + report_.facts;
    return {};
  }

  // ensure_connected, step 3 (step 2 is redis_format_setup): reads the answers to the `setup`
  // commands and the SCRIPT LOADs, keeping each script's SHA1. Every answer is read (the
  // connection stays in step); the first error is the one reported. `where` names the server.
  std::error_code read_setup(redisContext* c, std::size_t setup, const std::string& where) {
    const std::size_t sent = setup + scripts_.size();
    std::error_code first_error{};
    for (std::size_t i = 0; i < sent; ++i) {
      void* raw = nullptr;
      if (redisGetReply(c, &raw) != REDIS_OK || raw == nullptr) {
        return fail(transport_code(c), "redis: setup with " + where + ": " + c->errstr);
      }
      redis_reply_ptr r(static_cast<redisReply*>(raw));
      if (r->type == REDIS_REPLY_ERROR) {
        if (!first_error)
          first_error =
              setup_failed(i < setup ? setup_fields_[i] : redis_setup_field::script, r.get());
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
    return first_error;
  }

  std::error_code setup_failed(redis_setup_field f, const redisReply* r) {
    std::pair<errc, std::string> e = redis_setup_failure(f, opts_, r, text_of(r));
    return fail(e.first, std::move(e.second));
  }

  // Whether a replica at the configured address is a misconfiguration (refuse_replicas()).
  bool standalone() const noexcept {
    return refuse_replicas_ && opts_.sentinels.empty();
  }

  // error_reply for READONLY without Sentinel: the configured address is a replica, a
  // misconfiguration (permanent). Its INFO replication names the primary; then disconnects.
  std::error_code replica_refused(const std::string& said) {
    result<redis_reply_ptr> info = command({"INFO", "replication"});
    disconnect();
    return fail(errc::misconfigured,
                redis_replica_text(redis_where(opts_.host, opts_.port, opts_.unix_socket),
                                   info ? info->get() : nullptr, "redis: " + said));
  }

  void push(std::string_view s) {
    argv_.push_back(s.data() != nullptr ? s.data() : "");
    lens_.push_back(s.size());
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
    const redis_socket_bound bound(ctx_, opts_.command_timeout);  // by a call's deadline
    const std::error_code sent = send_all(ctx_.get(), cmd, static_cast<std::size_t>(len));
    redisFreeCommand(cmd);
    if (sent) return sent;
    return read_reply();
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
  context_ptr ctx_;
  std::vector<const char*> argv_;
  std::vector<std::size_t> lens_;
  std::string numkeys_;
  mutable std::string last_error_;  // the most recent call's failure (forget_error)
  bool probe_ = false;
  bool refuse_replicas_ = false;
  deployment_report report_;
  std::vector<redis_setup_field> setup_fields_;
  redis_primary_watch primary_;  // through Sentinel: the primary connected to, when last asked
};

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_DETAIL_REDIS_CONNECTION_HPP
