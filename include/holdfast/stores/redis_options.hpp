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
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

/// The greatest token a Redis counter can issue: INCR works on signed 64-bit integers.
inline constexpr fencing_token redis_max_token{
    static_cast<fencing_token::rep>(std::numeric_limits<std::int64_t>::max())};

/// The address of a Redis Sentinel (redis_options::sentinels).
struct redis_endpoint {
  std::string host = "127.0.0.1";  ///< Host name or address.
  int port = 26379;                ///< TCP port, in [1, 65535].
};

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
  /// Sentinels to ask for the primary (Redis Sentinel). When non-empty, host/port/unix_socket are
  /// not used: every (re)connect asks the sentinels in turn `SENTINEL get-master-addr-by-name
  /// sentinel_master`, connects to the address the first one that knows names, and checks with
  /// ROLE that it is the primary (a sentinel may not have noticed a failover yet: then the next
  /// sentinel is asked). Sentinels get connect_timeout and command_timeout, and no AUTH.
  std::vector<redis_endpoint> sentinels{};
  /// The name the sentinels monitor the primary under (`sentinel monitor <name> ...`); required
  /// when sentinels is non-empty.
  std::string sentinel_master{};
  /// Replicas that must acknowledge a grant before redis_store reports it, >= 0 (0, the default:
  /// none asked). After an acquire or renew that changed something, redis_store sends `WAIT
  /// wait_replicas wait_timeout` in the same round trip; a grant fewer replicas acknowledged in
  /// time is given back (released) and reported as errc::grant_not_durable, never as a grant a
  /// failover can lose. Redis' WAIT makes no grant durable on its own (an acknowledged write lives
  /// in the replicas' memory; Sentinel promotes the most advanced replica): with failover by
  /// Sentinel and wait_replicas >= 1 a failover keeps every grant reported, unless the primary and
  /// every acknowledging replica are lost at once.
  int wait_replicas = 0;
  /// How long WAIT waits for the acknowledgements, in ms, > 0. Default 1000.
  std::chrono::milliseconds wait_timeout{1000};
  /// Bound on establishing a connection (and its AUTH/SELECT/SCRIPT LOAD round trip), in ms, > 0.
  std::chrono::milliseconds connect_timeout{2000};
  /// Bound on each command's send and receive, in ms, > 0. A timeout reports errc::timeout and
  /// drops the connection (its reply could otherwise be mistaken for the next command's).
  std::chrono::milliseconds command_timeout{2000};
  /// Returns errc::invalid_argument if an option is out of range (see each field); a zero error
  /// code otherwise.
  [[nodiscard]] std::error_code check() const noexcept {
    if (sentinels.empty() && unix_socket.empty() && (host.empty() || port < 1 || port > 65535)) {
      return errc::invalid_argument;
    }
    for (const redis_endpoint& e : sentinels) {
      if (e.host.empty() || e.port < 1 || e.port > 65535 ||
          e.host.find('\0') != std::string::npos) {
        return errc::invalid_argument;
      }
    }
    if (!sentinels.empty() && sentinel_master.empty()) return errc::invalid_argument;
    if (wait_replicas < 0 || wait_timeout <= std::chrono::milliseconds::zero()) {
      return errc::invalid_argument;
    }
    // The life record (life_key()) must not be a lease's key or a wait queue's.
    const std::string life = life_key();
    if (life.compare(0, key_prefix.size(), key_prefix) == 0 ||
        life.compare(0, wait_prefix.size(), wait_prefix) == 0) {
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

  /// The key of the counter's life record: counter_key + ":life". redis_store keeps there the
  /// identity of the server life (run_id and replication id) that last issued tokens from the
  /// counter; a grant by a new life first raises the counter by 2^32 (see stores/redis.hpp,
  /// "Lost grants"). Must not start with key_prefix or wait_prefix.
  [[nodiscard]] std::string life_key() const { return counter_key + ":life"; }
};

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_REDIS_OPTIONS_HPP
