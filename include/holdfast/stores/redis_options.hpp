// SPDX-License-Identifier: MIT
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
#include "holdfast/store.hpp"

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
  /// Server host name or address (TCP). Default "127.0.0.1". Without sentinels it must be the
  /// primary: a replica there (ROLE at connect, READONLY) is errc::misconfigured, naming it and
  /// its primary (INFO replication), never retried.
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
  /// The key of the store-wide token counter. Default "{holdfast}:token". Read-write records
  /// (try_acquire_rw) live at counter_key + ":rw:" + key: neither key_prefix nor wait_prefix may
  /// start with counter_key + ":rw:", nor it with them.
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
  /// when sentinels is non-empty. If every sentinel answers and none knows the name (nil), a call
  /// fails at once with errc::misconfigured naming the name and each sentinel asked; if some
  /// did not answer, store_unavailable (transient: the silent ones may know it).
  std::string sentinel_master{};
  /// Through Sentinel: how often, in ms, an open connection asks the sentinels again which
  /// server is the primary, >= 0 (0: only at (re)connect). Default 1000. Sentinel demotes a
  /// replaced primary only after the promotion (seconds later, or not while it is cut off), and
  /// grants it takes until then are lost; with this, a call made sentinel_recheck after the last
  /// question asks one sentinel (one short connection) and, if it names another server,
  /// reconnects there. A sentinel that does not answer keeps the connection and costs that call
  /// up to connect_timeout; the next question goes to the next sentinel.
  std::chrono::milliseconds sentinel_recheck{1000};
  /// Replicas that must acknowledge a grant before redis_store reports it, >= 0 (0, the default:
  /// none asked). After an acquire or renew that changed something, redis_store sends `WAIT
  /// wait_replicas wait_timeout` in the same round trip; a grant fewer replicas acknowledged in
  /// time is given back (released) and reported as errc::grant_not_durable, never as a grant a
  /// failover can lose. Redis' WAIT makes no grant durable on its own (an acknowledged write lives
  /// in the replicas' memory; Sentinel promotes the most advanced replica). With failover by
  /// Sentinel, wait_replicas = the number of replicas keeps every grant reported unless the
  /// primary and every replica are lost at once. A smaller count does not when the old primary
  /// keeps serving during the failover: a replica not yet re-pointed can acknowledge a grant and
  /// then drop it when it resyncs from the promoted one (tests/unit/test_failover_load_redis.cpp
  /// shows it); the fences still admit no second holder.
  int wait_replicas = 0;
  /// How long WAIT waits for the acknowledgements, in ms, > 0. Default 1000.
  std::chrono::milliseconds wait_timeout{1000};
  /// Bound on establishing a connection (and its AUTH/SELECT/SCRIPT LOAD round trip), in ms, > 0.
  std::chrono::milliseconds connect_timeout{2000};
  /// Bound on each command's send and receive, in ms, > 0. A timeout reports errc::timeout and
  /// drops the connection (its reply could otherwise be mistaken for the next command's).
  std::chrono::milliseconds command_timeout{2000};
  /// The shortest lease TTL (ms) this store is asked for: try_acquire(), acquire(), acquire_all()
  /// and the recipes' constructors (mutex, election, semaphore) refuse a shorter one with
  /// errc::invalid_argument, naming this limit, before anything is sent
  /// (holdfast::store_min_ttl()). A TTL must outlast one round trip plus the holder's drift and
  /// margin, or every grant arrives with no validity left and a blocking acquire answers
  /// errc::timeout however long it may wait. The bound comes from this option, not from a measured
  /// round trip (one slow reply would make a TTL valid one moment and refused the next). Default 10
  /// ms: 7.9 ms of validity after the default drift and margin (1%, 2 ms), many round trips to a
  /// local or LAN server; for a distant server set it to (p99 round trip + margin) / (1 - drift).
  /// In [0, max_ttl]; 0 turns the check off.
  std::chrono::milliseconds min_ttl{10};
  /// Returns errc::invalid_argument if an option is out of range (see each field); a zero error
  /// code otherwise. `why`, if given, gets what is wrong, naming the field: "invalid
  /// redis_options: port 70000 is out of range 1 .. 65535".
  [[nodiscard]] std::error_code check(std::string* why = nullptr) const {
    auto bad = [&](const std::string& what) -> std::error_code {
      if (why != nullptr) *why = "invalid redis_options: " + what;
      return errc::invalid_argument;
    };
    auto starts = [](const std::string& s, const std::string& p) {
      return s.compare(0, p.size(), p) == 0;
    };
    const bool direct = sentinels.empty() && unix_socket.empty();
    if (direct && host.empty()) return bad("host is empty (and no unix_socket or sentinels)");
    if (direct && (port < 1 || port > 65535)) {
      return bad("port " + std::to_string(port) + " is out of range 1 .. 65535");
    }
    for (std::size_t i = 0; i < sentinels.size(); ++i) {
      const redis_endpoint& e = sentinels[i];
      const std::string name = "sentinels[" + std::to_string(i) + "]";
      if (e.host.empty() || e.host.find('\0') != std::string::npos) {
        return bad(name + ".host is empty or contains NUL");
      }
      if (e.port < 1 || e.port > 65535) {
        return bad(name + ".port " + std::to_string(e.port) + " is out of range 1 .. 65535");
      }
    }
    if (!sentinels.empty() && sentinel_master.empty()) {
      return bad("sentinel_master is empty (sentinels are set)");
    }
    if (sentinel_recheck < std::chrono::milliseconds::zero()) {
      return bad("sentinel_recheck " + std::to_string(sentinel_recheck.count()) + " ms is < 0");
    }
    if (wait_replicas < 0) return bad("wait_replicas " + std::to_string(wait_replicas) + " < 0");
    if (wait_timeout <= std::chrono::milliseconds::zero()) {
      return bad("wait_timeout " + std::to_string(wait_timeout.count()) + " ms is not > 0");
    }
    if (min_ttl < std::chrono::milliseconds::zero() || min_ttl > max_ttl) {
      return bad("min_ttl " + std::to_string(min_ttl.count()) + " ms is not in 0 .. max_ttl");
    }
    if (database < 0) return bad("database " + std::to_string(database) + " is negative");
    if (key_prefix.empty()) return bad("key_prefix is empty");
    if (counter_key.empty()) return bad("counter_key is empty");
    if (wait_prefix.empty()) return bad("wait_prefix is empty");
    // The life record (life_key()) must not be a lease's key or a wait queue's.
    if (starts(life_key(), key_prefix) || starts(life_key(), wait_prefix)) {
      return bad("counter_key \"" + counter_key +
                 "\" + \":life\" starts with key_prefix or "
                 "wait_prefix");
    }
    if (starts(counter_key, key_prefix)) {
      return bad("counter_key \"" + counter_key + "\" starts with key_prefix");
    }
    if (starts(wait_prefix, key_prefix) || starts(key_prefix, wait_prefix)) {
      return bad("wait_prefix and key_prefix start with one another");
    }
    if (starts(counter_key, wait_prefix)) {
      return bad("counter_key \"" + counter_key + "\" starts with wait_prefix");
    }
    // The read-write records live at counter_key + ":rw:" + key (detail/redis_shared.hpp): no
    // lease key or wait queue may be one, else every read-write call on some keys is refused.
    const std::string rw = counter_key + ":rw:";
    if (starts(rw, key_prefix) || starts(key_prefix, rw)) {
      return bad("key_prefix \"" + key_prefix + "\" and counter_key + \":rw:\" (\"" + rw +
                 "\", where read-write records live) start with one another");
    }
    if (starts(rw, wait_prefix) || starts(wait_prefix, rw)) {
      return bad("wait_prefix \"" + wait_prefix + "\" and counter_key + \":rw:\" (\"" + rw +
                 "\", where read-write records live) start with one another");
    }
    if (connect_timeout <= std::chrono::milliseconds::zero()) {
      return bad("connect_timeout " + std::to_string(connect_timeout.count()) + " ms is not > 0");
    }
    if (command_timeout <= std::chrono::milliseconds::zero()) {
      return bad("command_timeout " + std::to_string(command_timeout.count()) + " ms is not > 0");
    }
    if (client_name.find_first_of(" \n\r\t") != std::string::npos) {
      return bad("client_name contains a space (Redis refuses it)");
    }
    if (host.find('\0') != std::string::npos) return bad("host contains NUL");
    if (unix_socket.find('\0') != std::string::npos) return bad("unix_socket contains NUL");
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
