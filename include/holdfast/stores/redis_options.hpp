// holdfast/stores/redis_options.hpp - redis_options: how redis_store and redis_fence reach a
// Redis server (TCP or Unix socket, AUTH, SELECT, timeouts) and where holdfast keeps its keys
// there (lease keys, the token counter, the wait queues); and redis_max_token, the greatest token
// a Redis counter can issue. Part of stores/redis.hpp (include that); on its own it needs no
// hiredis.
#ifndef HOLDFAST_STORES_REDIS_OPTIONS_HPP
#define HOLDFAST_STORES_REDIS_OPTIONS_HPP

#include <chrono>
#include <cstdint>
#include <limits>
#include <string>
#include <system_error>

#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"

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

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_REDIS_OPTIONS_HPP
