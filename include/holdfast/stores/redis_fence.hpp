// SPDX-License-Identifier: MIT
// holdfast/stores/redis_fence.hpp - redis_fence: fenced writes whose fence lives in Redis next to
// the data, the token admitted and the write run in one script. Part of stores/redis.hpp (include
// that). Opt-in: needs hiredis.
#ifndef HOLDFAST_STORES_REDIS_FENCE_HPP
#define HOLDFAST_STORES_REDIS_FENCE_HPP

#include <hiredis/hiredis.h>

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/result.hpp"
#include "holdfast/stores/detail/link_client.hpp"
#include "holdfast/stores/detail/redis_link.hpp"
#include "holdfast/stores/detail/redis_requests.hpp"
#include "holdfast/stores/detail/redis_resp.hpp"
#include "holdfast/stores/detail/redis_scripts.hpp"
#include "holdfast/stores/redis_options.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

/// Fenced writes whose fence lives in Redis next to the data: one script admits the token and
/// runs the write together, so no newer holder can slip in between (fence.hpp; Kleppmann 2016).
/// A fence key holds "<token>:<owner>": the newest admitted token and the owner it was admitted
/// for (the holder's lease::owner()). A write is admitted iff its token is newer than that, or
/// equal to it with the same owner (one holder writes many times). An older token is refused
/// with stale_token; an equal token from another owner with token_reissued: the store that issued
/// it lost grants (a failover to a lagging replica, a crash inside its fsync window, a restore)
/// and issued it again, and admitting it would let a second holder through (DESIGN.md, section
/// 5). Neither changes anything. A fence key holding a bare "<token>" (no owner) admits no equal
/// token.
///
/// Fence keys and the keys a command touches are used exactly as given (no prefix). They are
/// independent of any lease store: tokens from a redis_store, postgres_store or memory_store work
/// alike. Keep fence keys as durable as the data they guard (same server, same persistence).
///
/// Replicas: an admitted write on a primary with asynchronous replicas can be lost in a failover,
/// the fence's record with it, and a primary Sentinel replaced but has not demoted yet keeps
/// admitting its old holders meanwhile. With redis_options::wait_replicas > 0 an admitted write
/// is reported only once that many replicas acknowledged it (WAIT, one more round trip); one they
/// did not acknowledge within wait_timeout is errc::grant_not_durable (it was applied on the
/// primary and may or may not survive: treat the write as not made), and through Sentinel the
/// connection is dropped so the next call asks the sentinels again, as redis_store does.
///
/// Thread-safety: as redis_store (one mutex around one connection).
class redis_fence : private detail::link_client<detail::redis_link> {
 public:
  /// Makes a fence client for the server in `opts` (the connection fields, and wait_replicas /
  /// wait_timeout; the key names are a store's and are not used).
  explicit redis_fence(redis_options opts = {})
      : link_client(std::in_place, std::move(opts),
                    std::vector<std::string>{detail::redis_fence_script()}) {
    link_.refuse_replicas();  // without Sentinel a replica is the wrong address: misconfigured
  }

  redis_fence(const redis_fence&) = delete;
  redis_fence& operator=(const redis_fence&) = delete;

  /// Admits (`token`, `owner`) at `fence_key` iff `token` is newer than the newest admitted
  /// there, or equal to it and admitted for `owner`, and records both, atomically.
  /// \returns success; errc::stale_token if a newer token was admitted; errc::token_reissued if
  ///   this token was admitted for another owner (nothing changes either way);
  ///   errc::invalid_argument for an empty key or owner, one over Redis' size limit (named), or a
  ///   token no store issues (none, max);
  ///   store_unavailable, timeout; protocol_error if the key holds no token;
  ///   errc::grant_not_durable if wait_replicas > 0 and too few replicas acknowledged the
  ///   admission in time (see the class comment).
  result<void> admit(std::string_view fence_key, fencing_token token, std::string_view owner) {
    return run(fence_key, token, owner, nullptr, 0);
  }

  /// Admits (`token`, `owner`) at `fence_key` and, only if admitted, SETs `data_key` to `value`,
  /// in one atomic script. \returns as admit().
  result<void> write(std::string_view fence_key, fencing_token token, std::string_view owner,
                     std::string_view data_key, std::string_view value) {
    const std::string_view cmd[] = {"SET", data_key, value};
    return run(fence_key, token, owner, cmd, 3);
  }

  /// Admits (`token`, `owner`) at `fence_key` and, only if admitted, runs the Redis `command`
  /// (e.g. {"HSET", "account:7", "balance", "120"}), in one atomic script; the command's reply is
  /// not returned. If the command fails, the fence is not raised. An empty command only admits.
  /// \returns as admit(), and errc::invalid_argument (with the server's text in
  ///   last_error_message()) if the command itself fails, e.g. WRONGTYPE or an unknown command.
  result<void> execute(std::string_view fence_key, fencing_token token, std::string_view owner,
                       const std::vector<std::string_view>& command) {
    return run(fence_key, token, owner, command.data(), command.size());
  }

  /// Returns the newest token admitted at `fence_key` (none if none was). A snapshot only:
  /// deciding on it and then writing is the check-then-write race; use write() or execute().
  /// \returns errc::invalid_argument for an empty key; store_unavailable, timeout;
  ///   protocol_error if the key holds no token.
  result<fencing_token> newest(std::string_view fence_key) {
    if (std::error_code ec = check(fence_key, {}, fencing_token{1})) return ec;
    auto guard = link_.lock();
    result<detail::redis_reply_ptr> r = link_.command({"GET", fence_key});
    if (!r) return r.error();
    const redisReply* reply = r->get();
    if (reply->type == REDIS_REPLY_NIL) return fencing_token{};
    if (reply->type == REDIS_REPLY_STRING) {
      const std::string_view v(reply->str, reply->len);
      const std::string_view t = v.substr(0, v.find(':'));
      std::optional<fencing_token> token = detail::parse_redis_token(t.data(), t.size());
      if (token && token->is_issuable()) return *token;
    }
    return link_.fail(errc::protocol_error, "redis: fence key holds no token");
  }

  /// As redis_store::last_error_message() (detail::link_client).
  using link_client::last_error_message;

 private:
  result<void> run(std::string_view fence_key, fencing_token token, std::string_view owner,
                   const std::string_view* command, std::size_t n) {
    if (owner.empty()) return refused(errc::invalid_argument);
    if (std::error_code ec = check(fence_key, owner, token)) return ec;
    auto guard = link_.lock();
    token_text_ = std::to_string(token.value());
    args_.clear();
    args_.push_back(token_text_);
    args_.push_back(owner);
    if (n != 0) args_.insert(args_.end(), command, command + n);
    const std::string_view keys[] = {fence_key};
    result<detail::redis_reply_ptr> r = link_.eval(0, keys, 1, args_.data(), args_.size());
    if (!r) return r.error();
    const redisReply* reply = r->get();
    if (reply->type == REDIS_REPLY_INTEGER) {
      if (reply->integer == 1) return acknowledged();
      if (reply->integer == 0) return errc::stale_token;
      if (reply->integer == 2) return errc::token_reissued;
    }
    return link_.fail(errc::protocol_error, "redis: fence: unexpected reply");
  }

  // The argument check of every entry point: an empty key or an unissuable token, and Redis' size
  // limit (redis_args_problem, redis_store's one size check, named), before anything is sent.
  std::error_code check(std::string_view fence_key, std::string_view owner, fencing_token token) {
    if (fence_key.empty() || !token.is_issuable()) return refused(errc::invalid_argument);
    const char* why = detail::redis_args_problem(fence_key, owner);
    if (why == nullptr) return {};
    auto guard = link_.lock();  // a call, refused: clears an older call's text
    return link_.fail(errc::invalid_argument, why);
  }

  // [link locked] After an admitted write: with wait_replicas > 0, WAIT until that many replicas
  // acknowledged it; a shortfall is grant_not_durable and, through Sentinel, drops the connection.
  result<void> acknowledged() {
    const std::string why = link_.replica_shortfall("fence: ", "the admitted write");
    if (why.empty()) return {};
    return link_.not_durable(why + "; a failover may lose it");
  }

  std::string token_text_;
  std::vector<std::string_view> args_;
};

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_REDIS_FENCE_HPP
