// SPDX-License-Identifier: MIT
// holdfast/stores/detail/redis_resp.hpp - RESP, the Redis protocol, as the Redis store speaks it:
// owned hiredis replies, tokens read from replies (the one "read a token and parse it"), error
// replies mapped to errc, and commands formatted binary-safe into a buffer of our own. Part of
// stores/redis.hpp; not for users.
#ifndef HOLDFAST_STORES_DETAIL_REDIS_RESP_HPP
#define HOLDFAST_STORES_DETAIL_REDIS_RESP_HPP

#include <hiredis/hiredis.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

struct redis_reply_deleter {
  void operator()(redisReply* r) const noexcept { freeReplyObject(r); }
};
/// An owned hiredis reply.
using redis_reply_ptr = std::unique_ptr<redisReply, redis_reply_deleter>;

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

inline bool starts_with(const char* s, std::size_t n, std::string_view prefix) noexcept {
  return n >= prefix.size() && std::memcmp(s, prefix.data(), prefix.size()) == 0;
}

/// Maps an error reply from Redis (or from one of our scripts) to an errc.
inline errc classify_redis_error(const char* s, std::size_t n) noexcept {
  if (starts_with(s, n, "HOLDFAST_EXHAUSTED")) return errc::token_exhausted;
  if (starts_with(s, n, "HOLDFAST_CORRUPT")) return errc::protocol_error;
  if (starts_with(s, n, "HOLDFAST_LIFE")) return errc::store_unavailable;
  if (starts_with(s, n, "HOLDFAST_COMMAND")) {
    // The caller's own command failed inside a fence script: their mistake, unless the server
    // was simply not serving.
    constexpr std::string_view tag = "HOLDFAST_COMMAND ";
    const std::size_t skip = n >= tag.size() ? tag.size() : n;
    const errc inner = classify_redis_error(s + skip, n - skip);
    return inner == errc::store_unavailable || inner == errc::permission_denied
               ? inner
               : errc::invalid_argument;
  }
  auto is = [&](std::string_view code) {
    return starts_with(s, n, code) && (n == code.size() || s[code.size()] == ' ');
  };
  // Credentials and ACLs: permanent, never retried (is_permanent). NOAUTH: a password is needed
  // and none was sent; WRONGPASS: the user or password is wrong; NOPERM: the ACL user may not
  // run a command or touch a key.
  for (std::string_view code : {"NOAUTH", "WRONGPASS", "NOPERM"}) {
    if (is(code)) return errc::permission_denied;
  }
  // The server is up but not serving this request now: loading, busy with a script, a replica,
  // out of memory, failing over.
  for (std::string_view code : {"LOADING", "BUSY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN",
                                "READONLY", "NOREPLICAS", "OOM", "MISCONF", "UNBLOCKED"}) {
    if (is(code)) return errc::store_unavailable;
  }
  // WRONGTYPE, ERR ...: the store holds something our scripts did not write, or answered
  // something we do not understand.
  return errc::protocol_error;
}

/// Appends the header of a RESP array of `n` elements ("*<n>\r\n") to `out`.
inline void resp_append_array(std::string& out, std::size_t n) {
  out += '*';
  out += std::to_string(n);
  out += "\r\n";
}

/// Appends `a` as a RESP bulk string ("$<length>\r\n<bytes>\r\n"): binary-safe, NUL included.
inline void resp_append_bulk(std::string& out, std::string_view a) {
  out += '$';
  out += std::to_string(a.size());
  out += "\r\n";
  out.append(a.data(), a.size());
  out += "\r\n";
}

/// Appends one command, an array of bulk strings, to `out`.
inline void resp_append_command(std::string& out, std::initializer_list<std::string_view> args) {
  resp_append_array(out, args.size());
  for (std::string_view a : args) resp_append_bulk(out, a);
}

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_DETAIL_REDIS_RESP_HPP
