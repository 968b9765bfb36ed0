// SPDX-License-Identifier: MIT
// holdfast/stores/detail/redis_setup.hpp - what redis_connection's connect handshake needs
// besides the connection: the hiredis context's deleter, timeouts as timevals (capped by the
// deadline of the call running on the thread: call_bound), the handshake's commands, and the code
// and text of a failed setup command (AUTH, SELECT, CLIENT SETNAME, SCRIPT LOAD), naming the
// option it comes from.
// Part of stores/redis.hpp; not for users.
#ifndef HOLDFAST_STORES_DETAIL_REDIS_SETUP_HPP
#define HOLDFAST_STORES_DETAIL_REDIS_SETUP_HPP

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/store_deadline.hpp"
#include "holdfast/stores/detail/call_bound.hpp"
#include "holdfast/stores/detail/redis_resp.hpp"
#include "holdfast/stores/redis_options.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

/// WAIT's timeout (ms) for `wait_timeout` under a call's deadline: capped by it (capped_by_call);
/// `reply_by` is then set so that the socket waits store_call_floor longer than WAIT does for its
/// answer (the answer comes when WAIT's own timeout ends). Without a deadline, `wait_timeout`
/// and the socket's command_timeout as they are.
inline std::chrono::milliseconds redis_wait_timeout(std::chrono::milliseconds wait_timeout,
                                                    std::optional<call_bound>& reply_by) {
  if (call_until() == std::chrono::steady_clock::time_point::max()) return wait_timeout;
  const std::chrono::milliseconds wait = capped_by_call(wait_timeout);
  reply_by.emplace(std::chrono::steady_clock::now() + wait + store_call_floor);
  return wait;
}

struct redis_context_deleter {
  void operator()(redisContext* c) const noexcept { redisFree(c); }
};

inline struct timeval to_timeval(std::chrono::milliseconds ms) noexcept {
  struct timeval tv {};
  tv.tv_sec = static_cast<decltype(tv.tv_sec)>(ms.count() / 1000);
  tv.tv_usec = static_cast<decltype(tv.tv_usec)>((ms.count() % 1000) * 1000);
  return tv;
}

/// Under a call's deadline (call_bound), caps the socket timeouts of `ctx` by it for one
/// command, and puts `command_timeout` back after (if the context is still there: a timeout drops
/// it, as any transport failure does).
class redis_socket_bound {
 public:
  redis_socket_bound(const std::unique_ptr<redisContext, redis_context_deleter>& ctx,
                     std::chrono::milliseconds command_timeout)
      : ctx_(ctx), command_timeout_(command_timeout) {
    const std::chrono::milliseconds bound = capped_by_call(command_timeout);
    capped_ = ctx_ && bound < command_timeout;
    if (capped_) (void)redisSetTimeout(ctx_.get(), to_timeval(bound));
  }
  ~redis_socket_bound() {
    if (capped_ && ctx_) (void)redisSetTimeout(ctx_.get(), to_timeval(command_timeout_));
  }
  redis_socket_bound(const redis_socket_bound&) = delete;
  redis_socket_bound& operator=(const redis_socket_bound&) = delete;

 private:
  const std::unique_ptr<redisContext, redis_context_deleter>& ctx_;
  std::chrono::milliseconds command_timeout_;
  bool capped_ = false;
};

/// Which option a setup command comes from, so that its error names that option.
enum class redis_setup_field { auth, database, client_name, script };

/// The server a connection goes to, as its errors name it: "host:port", or the Unix socket's path.
inline std::string redis_where(const std::string& host, int port, const std::string& unix_socket) {
  return unix_socket.empty() ? host + ":" + std::to_string(port) : unix_socket;
}

/// The connect handshake's commands, appended to `pipeline`: AUTH, SELECT and CLIENT SETNAME as
/// `o` asks, then SCRIPT LOAD of each of `scripts`. `fields` is set to the option each setup
/// command comes from, in order. Returns how many commands come before the scripts.
inline std::size_t redis_format_setup(std::string& pipeline, const redis_options& o,
                                      const std::vector<std::string>& scripts,
                                      std::vector<redis_setup_field>& fields) {
  fields.clear();
  if (!o.password.empty()) {
    if (o.username.empty()) {
      resp_append_command(pipeline, {"AUTH", o.password});
    } else {
      resp_append_command(pipeline, {"AUTH", o.username, o.password});
    }
    fields.push_back(redis_setup_field::auth);
  }
  if (o.database != 0) {
    resp_append_command(pipeline, {"SELECT", std::to_string(o.database)});
    fields.push_back(redis_setup_field::database);
  }
  if (!o.client_name.empty()) {
    resp_append_command(pipeline, {"CLIENT", "SETNAME", o.client_name});
    fields.push_back(redis_setup_field::client_name);
  }
  for (const std::string& script : scripts)
    resp_append_command(pipeline, {"SCRIPT", "LOAD", script});
  return fields.size();
}

/// A setup command's error reply `r` (its text `text`): its code and a text naming the option and
/// carrying the server's. Every answer to AUTH is about the credentials (permission_denied), to
/// SELECT about the database number (misconfigured: out of range), to CLIENT SETNAME about the
/// name; a script load that meets NOAUTH means a password is needed and none was given, and one
/// that meets "unknown command 'SCRIPT'" a Sentinel's port (or scripting disabled): misconfigured.
inline std::pair<errc, std::string> redis_setup_failure(redis_setup_field f, const redis_options& o,
                                                        const redisReply* r,
                                                        const std::string& text) {
  switch (f) {
    case redis_setup_field::auth:
      return {errc::permission_denied,
              "redis: setup: AUTH with redis_options::username/password refused: " + text};
    case redis_setup_field::database:
      return {errc::misconfigured, "redis: setup: SELECT redis_options::database " +
                                       std::to_string(o.database) + ": " + text};
    case redis_setup_field::client_name:
      return {errc::misconfigured,
              "redis: setup: CLIENT SETNAME redis_options::client_name: " + text};
    case redis_setup_field::script:
      break;
  }
  // A server without SCRIPT cannot run holdfast's scripts however long one waits: most often a
  // Redis Sentinel's port given as the server's (Sentinel knows no SCRIPT), else scripting
  // renamed away. The setup's own answer tells, so no request more is made.
  if (text.rfind("ERR unknown command 'SCRIPT'", 0) == 0) {
    const std::string where = !o.sentinels.empty() ? "the primary the sentinels named"
                                                   : redis_where(o.host, o.port, o.unix_socket);
    return {errc::misconfigured,
            "redis: " + where +
                " knows no SCRIPT command: a Redis Sentinel? give it in "
                "redis_options::sentinels (with sentinel_master), not as the server; else "
                "scripting is disabled there (" +
                text.substr(0, 28) + ")"};
  }
  const errc e = classify_redis_error(r->str, r->len);
  if (e == errc::permission_denied && o.password.empty()) {
    return {e, "redis: setup: the server needs AUTH and redis_options::password is empty: " + text};
  }
  return {e, "redis: setup: " + text};
}

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_DETAIL_REDIS_SETUP_HPP
