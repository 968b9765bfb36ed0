// SPDX-License-Identifier: MIT
// holdfast/stores/detail/redis_requests.hpp - redis_store's operations as script calls, one
// mapping for the blocking path and the split send/receive path (send_receive.hpp): a
// store_request's arguments checked (check_redis_request), turned into a call of one of the
// scripts with its keys and arguments (redis_requests::prepare), and the script's reply read back
// into what the operation returns (read_redis_reply and the read_redis_* for each script).
// Part of stores/redis.hpp; not for users.
#ifndef HOLDFAST_STORES_DETAIL_REDIS_REQUESTS_HPP
#define HOLDFAST_STORES_DETAIL_REDIS_REQUESTS_HPP

#include <hiredis/hiredis.h>

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/result.hpp"
#include "holdfast/send_receive.hpp"
#include "holdfast/store.hpp"
#include "holdfast/stores/detail/redis_connection.hpp"
#include "holdfast/stores/detail/redis_resp.hpp"
#include "holdfast/stores/detail/redis_scripts.hpp"
#include "holdfast/stores/redis_options.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

/// Reads a script's yes/no answer: true for integer 1, false for integer 0; an error as `r`
/// holds it; errc::protocol_error for any other reply, noting "redis: <what>: unexpected reply".
inline result<bool> read_redis_flag(redis_connection& link, result<redis_reply_ptr> r,
                                    const char* what) {
  if (!r) return r.error();
  const redisReply* reply = r->get();
  if (reply->type == REDIS_REPLY_INTEGER && (reply->integer == 0 || reply->integer == 1)) {
    return reply->integer == 1;
  }
  return link.fail(errc::protocol_error, std::string("redis: ") + what + ": unexpected reply");
}

/// One call of one of redis_store's scripts (an index of redis_script) with its keys and
/// arguments: views into the request and into the redis_requests that prepared it.
struct redis_call {
  std::size_t script = 0;
  std::string_view keys[4]{};
  std::size_t nkeys = 0;
  std::string_view args[5]{};
  std::size_t nargs = 0;
};

/// The longest string Redis takes in one argument: 512 MiB (proto-max-bulk-len's default). A
/// lease key (with its key_prefix, taken here as under 1 MiB) and an owner must each fit.
inline constexpr std::size_t redis_max_bulk_bytes = std::size_t{512} << 20;

/// Returns what makes `key` or `owner` too large for Redis (naming the limit), or nullptr. The
/// one size check of every Redis entry point that takes a key or an owner (redis_store,
/// redis_cluster_store, redis_fence; the wait, queue and read-write paths too), run before
/// anything is sent, a connect included. Pass an empty owner where there is none.
inline const char* redis_args_problem(std::string_view key, std::string_view owner) noexcept {
  if (key.size() > redis_max_bulk_bytes - (std::size_t{1} << 20)) {
    return "redis: the key is over 511 MiB: with its key_prefix it would exceed Redis' 512 MiB "
           "bulk-string limit (proto-max-bulk-len)";
  }
  if (owner.size() > redis_max_bulk_bytes) {
    return "redis: the owner is over Redis' 512 MiB bulk-string limit (proto-max-bulk-len)";
  }
  return nullptr;
}

/// Returns what makes `q` too large for Redis (redis_args_problem of its key and owner), or
/// nullptr.
inline const char* redis_size_problem(const store_request& q) noexcept {
  return redis_args_problem(q.key, q.owner);
}

/// Checks a request's arguments exactly as the blocking operation of its op does, and their sizes
/// against Redis' limit (redis_size_problem), before anything is sent.
/// \returns errc::invalid_argument (see store.hpp's check_*_args) or a zero code.
inline std::error_code check_redis_request(const store_request& q) noexcept {
  if (redis_size_problem(q) != nullptr) return errc::invalid_argument;
  switch (q.op) {
    case store_op::try_acquire:
      return check_acquire_args(q.key, q.owner, q.ttl);
    case store_op::renew:
      return check_renew_args(q.key, q.owner, q.token, q.ttl);
    case store_op::release:
      return check_release_args(q.key, q.owner, q.token);
    case store_op::inspect:
      return q.key.empty() ? make_error_code(errc::invalid_argument) : std::error_code{};
    case store_op::raise_token:
      if (std::error_code ec = check_release_args(q.key, q.owner, q.token)) return ec;
      if (!q.to.is_issuable() || q.to < q.token || q.to > redis_max_token) {
        return errc::invalid_argument;
      }
      return {};
    case store_op::raise_token_floor:
      if (!q.token.is_issuable() || q.token > redis_max_token) return errc::invalid_argument;
      return {};
  }
  return errc::invalid_argument;
}

/// check_redis_request at an entry point of a store over `link` (a redis_link or a cluster store:
/// lock() and fail(errc, text)), before anything is sent or connected: a refusal ends as a call
/// (it clears the last call's text), naming a size problem. The one check of every Redis entry
/// point that takes a key or an owner. \returns its code.
template <class Link>
std::error_code refuse_redis_request(Link& link, const store_request& q) {
  const std::error_code bad = check_redis_request(q);
  if (!bad) return bad;
  auto guard = link.lock();
  if (const char* why = redis_size_problem(q)) (void)link.fail(errc::invalid_argument, why);
  return bad;
}

/// Turns one store's requests into script calls, and keeps the key names and decimal texts the
/// calls point into (scratch buffers, reused: a call is valid until the next prepare). Not
/// thread-safe: the store uses it under its link's lock.
class redis_requests {
 public:
  /// The call that performs `q` (checked by check_redis_request) on a store with options `o`
  /// whose release broadcast channel is `broadcast`, over a connection that read the server's
  /// life `life` (redis_life_check).
  redis_call prepare(const redis_options& o, std::string_view broadcast, std::string_view life,
                     const store_request& q) {
    redis_call c;
    token_text_ = std::to_string(q.token.value());
    switch (q.op) {
      case store_op::try_acquire:
        c = {redis_script::acquire,
             {lease_key(o, q.key), o.counter_key, life_key(o)},
             3,
             {q.owner, ttl(q.ttl), life},
             3};
        break;
      case store_op::renew:
        c = {redis_script::renew, {lease_key(o, q.key)}, 1, {q.owner, token_text_, ttl(q.ttl)}, 3};
        break;
      case store_op::release:
        c = {redis_script::release,
             {lease_key(o, q.key), queue_key(o, q.key)},
             2,
             {q.owner, token_text_, broadcast, q.key},
             4};
        break;
      case store_op::inspect:
        c = {redis_script::inspect, {lease_key(o, q.key)}, 1, {}, 0};
        break;
      case store_op::raise_token:
        to_text_ = std::to_string(q.to.value());
        c = {redis_script::raise,
             {lease_key(o, q.key), o.counter_key},
             2,
             {q.owner, token_text_, to_text_},
             3};
        break;
      case store_op::raise_token_floor:
        c = {redis_script::advance, {o.counter_key}, 1, {token_text_}, 1};
        break;
    }
    return c;
  }

  /// The key of lease `key`: key_prefix + key.
  std::string_view lease_key(const redis_options& o, std::string_view key) {
    key_.assign(o.key_prefix);
    key_.append(key.data(), key.size());
    return key_;
  }
  /// The counter's life record (redis_options::life_key()).
  std::string_view life_key(const redis_options& o) {
    if (life_key_.empty()) life_key_ = o.life_key();
    return life_key_;
  }
  /// The wait queue of lease `key`: wait_prefix + key.
  std::string_view queue_key(const redis_options& o, std::string_view key) {
    queue_.assign(o.wait_prefix);
    queue_.append(key.data(), key.size());
    return queue_;
  }
  /// `ttl` as decimal milliseconds.
  std::string_view ttl(std::chrono::milliseconds ttl) {
    ttl_text_ = std::to_string(ttl.count());
    return ttl_text_;
  }

 private:
  std::string key_;
  std::string queue_;
  std::string life_key_;  // options never change, so computed once
  std::string ttl_text_;
  std::string token_text_;
  std::string to_text_;
};

// Reading each script's reply: one place for the blocking and the split path. A reply of an
// unexpected shape is errc::protocol_error, its note kept by the connection.

inline result<grant> read_redis_acquire(redis_connection& link, result<redis_reply_ptr> r,
                                        std::chrono::milliseconds ttl) {
  if (!r) return r.error();
  const redisReply* reply = r->get();
  if (reply->type == REDIS_REPLY_INTEGER && reply->integer == 0) return errc::busy;
  const std::optional<fencing_token> t = reply_token(reply);
  if (t && t->is_issuable()) return grant{*t, ttl};
  return link.fail(errc::protocol_error, "redis: acquire: unexpected reply");
}

inline result<grant> read_redis_renew(redis_connection& link, result<redis_reply_ptr> r,
                                      fencing_token token, std::chrono::milliseconds ttl) {
  result<bool> renewed = read_redis_flag(link, std::move(r), "renew");
  if (!renewed) return renewed.error();
  if (!*renewed) return errc::lease_lost;
  return grant{token, ttl};
}

inline result<void> read_redis_release(redis_connection& link, result<redis_reply_ptr> r) {
  result<bool> released = read_redis_flag(link, std::move(r), "release");
  if (!released) return released.error();
  if (!*released) return errc::not_holder;
  return {};
}

inline result<std::optional<lease_record>> read_redis_inspect(redis_connection& link,
                                                              result<redis_reply_ptr> r) {
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
      const std::optional<fencing_token> t = parse_redis_token(v.data(), colon);
      if (t && t->is_issuable()) {
        return std::optional<lease_record>{
            lease_record{std::string(v.substr(colon + 1)), *t,
                         std::chrono::milliseconds(reply->element[1]->integer)}};
      }
    }
  }
  return link.fail(errc::protocol_error, "redis: inspect: unexpected reply");
}

inline result<void> read_redis_raise_token_floor(redis_connection& link,
                                                 result<redis_reply_ptr> r) {
  if (!r) return r.error();
  const redisReply* reply = r->get();
  if (reply_token(reply)) return {};
  return link.fail(errc::protocol_error, "redis: raise_token_floor: unexpected reply");
}

inline result<void> read_redis_raise_token(redis_connection& link, result<redis_reply_ptr> r) {
  result<bool> raised = read_redis_flag(link, std::move(r), "raise_token");
  if (!raised) return raised.error();
  if (!*raised) return errc::lease_lost;
  return {};
}

/// Reads the reply `r` to request `q` into the field of `out` that q's operation names
/// (store_reply), exactly as the blocking operation returns it.
inline void read_redis_reply(redis_connection& link, const store_request& q,
                             result<redis_reply_ptr> r, store_reply& out) {
  switch (q.op) {
    case store_op::try_acquire:
      out.granted = read_redis_acquire(link, std::move(r), q.ttl);
      break;
    case store_op::renew:
      out.granted = read_redis_renew(link, std::move(r), q.token, q.ttl);
      break;
    case store_op::release:
      out.done = read_redis_release(link, std::move(r));
      break;
    case store_op::inspect:
      out.record = read_redis_inspect(link, std::move(r));
      break;
    case store_op::raise_token:
      out.done = read_redis_raise_token(link, std::move(r));
      break;
    case store_op::raise_token_floor:
      out.done = read_redis_raise_token_floor(link, std::move(r));
      break;
  }
}

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_DETAIL_REDIS_REQUESTS_HPP
