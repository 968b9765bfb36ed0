// holdfast/stores/redis_fence.hpp - redis_fence: fenced writes whose fence lives in Redis next to
// the data, the token admitted and the write run in one script. Part of stores/redis.hpp (include
// that). Opt-in: needs hiredis.
#ifndef HOLDFAST_STORES_REDIS_FENCE_HPP
#define HOLDFAST_STORES_REDIS_FENCE_HPP

#include <hiredis/hiredis.h>

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/result.hpp"
#include "holdfast/stores/detail/link_client.hpp"
#include "holdfast/stores/detail/redis_link.hpp"
#include "holdfast/stores/detail/redis_resp.hpp"
#include "holdfast/stores/detail/redis_scripts.hpp"
#include "holdfast/stores/redis_options.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

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
class redis_fence : private detail::link_client<detail::redis_link> {
 public:
  /// Makes a fence client for the server in `opts` (only the connection fields are used).
  explicit redis_fence(redis_options opts = {})
      : link_client(std::in_place, std::move(opts),
                    std::vector<std::string>{detail::redis_fence_script()}) {}

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

  /// As redis_store::last_error_message() (detail::link_client).
  using link_client::last_error_message;

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
    result<bool> admitted =
        detail::read_redis_flag(link_, link_.eval(0, keys, 1, args_.data(), args_.size()), "fence");
    if (!admitted) return admitted.error();
    if (!*admitted) return errc::stale_token;
    return {};
  }

  std::string token_text_;
  std::vector<std::string_view> args_;
};

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_REDIS_FENCE_HPP
