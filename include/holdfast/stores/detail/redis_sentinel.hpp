// SPDX-License-Identifier: MIT
// holdfast/stores/detail/redis_sentinel.hpp - redis_primary_watch: what a connection through
// Redis Sentinel remembers of the primary it is on, and when to ask the sentinels again
// (redis_options::sentinel_recheck).
//
// Why ask again while the connection works: Sentinel promotes a replica first and demotes the
// old primary only later (seconds after a SENTINEL FAILOVER, and not at all while the old primary
// is cut off from the sentinels or frozen). Until then the old primary still answers as the
// primary, and a client that asks the sentinels only at (re)connect keeps taking grants there,
// which the demotion loses (the fences refuse their tokens, so this is liveness, not safety).
// Redisson and Lettuce follow +switch-master on the sentinels' pub/sub; a periodic question is the
// same bound without a second long-lived connection: a store moves to the new primary within
// about one sentinel_recheck of the sentinels naming it. Part of stores/redis.hpp; not for users.
#ifndef HOLDFAST_STORES_DETAIL_REDIS_SENTINEL_HPP
#define HOLDFAST_STORES_DETAIL_REDIS_SENTINEL_HPP

#include <chrono>
#include <cstddef>
#include <string>

#include "holdfast/detail/config.hpp"
#include "holdfast/stores/redis_options.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

/// The primary a connection through Sentinel is on, and when the sentinels last named it. Not
/// thread-safe (its connection's lock covers it).
class redis_primary_watch {
 public:
  using clock = std::chrono::steady_clock;

  /// A connection to host:port was made (the sentinels named it just now).
  void connected(const std::string& host, int port) {
    host_ = host;
    port_ = port;
    asked_ = clock::now();
  }

  /// Whether to ask the sentinels again before the next command (at `now`): through Sentinel,
  /// with sentinel_recheck > 0, once sentinel_recheck has passed since they were last asked (at
  /// asked() + sentinel_recheck exactly, and after).
  [[nodiscard]] bool due(const redis_options& o, clock::time_point now = clock::now()) const {
    return !o.sentinels.empty() && o.sentinel_recheck.count() > 0 &&
           now - asked_ >= o.sentinel_recheck;
  }
  /// When the sentinels were last asked (or the connection made).
  [[nodiscard]] clock::time_point asked() const noexcept { return asked_; }

  /// Asks one sentinel, `ask(sentinel, host, port, knows)` returning a zero error code with the
  /// address it names as the primary (redis_connection's ask_sentinel): the one asked last, or
  /// the next after one that did not answer, so a silent sentinel costs one call up to
  /// connect_timeout once per sentinel_recheck, never a wait for each. \returns true iff it names
  /// another server than the one connected to (drop the connection: the next connect follows
  /// the sentinels); no answer keeps the connection. Precondition: o.sentinels is not empty.
  template <class Ask>
  bool moved(const redis_options& o, Ask&& ask) {
    const redis_endpoint& sentinel = o.sentinels[next_ % o.sentinels.size()];
    std::string host;
    int port = 0;
    bool knows = true;
    const bool answered = !ask(sentinel, host, port, knows);
    asked_ = clock::now();  // the period runs from the answer (or the silence) on
    if (!answered) {
      ++next_;
      return false;
    }
    return host != host_ || port != port_;
  }

 private:
  std::string host_;
  int port_ = 0;
  clock::time_point asked_{};
  std::size_t next_ = 0;  // the sentinel to ask (rotates past one that does not answer)
};

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_DETAIL_REDIS_SENTINEL_HPP
