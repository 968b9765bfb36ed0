// SPDX-License-Identifier: MIT
// holdfast/stores/detail/redis_cluster_waiting.hpp - the notification side of
// redis_cluster_store's wait_for_release and watch_release: sharded pub/sub (SSUBSCRIBE,
// SPUBLISH; Redis >= 7.0) on a channel in the lease's own slot, so the release script, which runs
// on the slot's primary, can SPUBLISH to it (a script may touch only its own slot, channels
// included) and the message stays within that primary's shard instead of crossing the cluster
// bus as PUBLISH does. Each waiting call takes a subscriber connection to the slot's primary from
// a small pool, subscribes, sleeps on it, unsubscribes and gives it back. When the slot leaves
// the primary (a migration, a failover) the server drops the subscription itself and says so
// (a "sunsubscribe" message): the waiter wakes and its caller asks again, on the new primary.
// Part of stores/redis_cluster.hpp; not for users.
#ifndef HOLDFAST_STORES_DETAIL_REDIS_CLUSTER_WAITING_HPP
#define HOLDFAST_STORES_DETAIL_REDIS_CLUSTER_WAITING_HPP

#include <hiredis/hiredis.h>

#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "holdfast/cancel.hpp"
#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/result.hpp"
#include "holdfast/store.hpp"
#include "holdfast/stores/detail/redis_connection.hpp"
#include "holdfast/stores/detail/redis_requests.hpp"
#include "holdfast/stores/detail/redis_resp.hpp"
#include "holdfast/stores/detail/redis_slots.hpp"
#include "holdfast/stores/detail/wake_pipe.hpp"
#include "holdfast/stores/redis_options.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

/// How a sleep on a shard channel ended.
enum class redis_shard_wake {
  released,   ///< an SPUBLISH on the channel: the holder released
  moved,      ///< the server dropped the subscription (the slot left it): ask again elsewhere
  timed_out,  ///< `until` came (the holder's lease can have expired, or the caller's deadline)
  dropped,    ///< the connection failed (notifications may be lost): ask again
  cancelled   ///< the caller's cancel_token was stopped
};

/// Idle subscriber connections (no scripts, no probe) of one redis_cluster_store, any node's.
/// Thread-safety: take() and give() may be called concurrently.
class redis_cluster_subscribers {
 public:
  /// An idle connection to host:port, or a new one (connected on first command).
  std::unique_ptr<redis_connection> take(const redis_options& base, const std::string& host,
                                         int port) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      for (auto it = idle_.begin(); it != idle_.end(); ++it) {
        if ((*it)->options().host == host && (*it)->options().port == port) {
          std::unique_ptr<redis_connection> c = std::move(*it);
          idle_.erase(it);
          return c;
        }
      }
    }
    redis_options o = base;
    o.host = host;
    o.port = port;
    o.wait_replicas = 0;
    return std::make_unique<redis_connection>(std::move(o), std::vector<std::string>{});
  }
  /// Keeps `c` for a later wait if it is connected and subscribed to nothing (at most 8 kept).
  void give(std::unique_ptr<redis_connection> c) {
    std::lock_guard<std::mutex> lk(mu_);
    if (c && c->connected() && idle_.size() < 8) idle_.push_back(std::move(c));
  }

 private:
  std::mutex mu_;
  std::vector<std::unique_ptr<redis_connection>> idle_;
};

/// Whether `m` is a pub/sub push ["<kind>", channel, ...] of `kind` for `channel`.
inline bool redis_is_push(const redisReply* m, std::string_view kind, std::string_view channel) {
  if (m == nullptr || m->type != REDIS_REPLY_ARRAY || m->elements < 3) return false;
  const redisReply* k = m->element[0];
  const redisReply* c = m->element[1];
  return k->type == REDIS_REPLY_STRING && c->type == REDIS_REPLY_STRING &&
         std::string_view(k->str, k->len) == kind && std::string_view(c->str, c->len) == channel;
}

/// SSUBSCRIBE `channel` on `c` (connecting it if needed). \returns a zero code once the server
///   confirmed; else the error (a MOVED / ASK text stays in c.last_error()).
inline std::error_code redis_ssubscribe(redis_connection& c, std::string_view channel) {
  result<redis_reply_ptr> r = c.command({"SSUBSCRIBE", channel});
  if (!r) return r.error();
  if (!redis_is_push(r->get(), "ssubscribe", channel)) {
    c.disconnect();
    return c.fail(errc::protocol_error, "redis: SSUBSCRIBE: unexpected reply");
  }
  return {};
}

/// Sleeps on `c` (subscribed to `channel`) until a message on it, the server dropping the
/// subscription, `until`, or a stop of `cancel` (which notifies `pipe`, ending the poll; without
/// a pipe each poll lasts at most cancel_wait_slice).
inline redis_shard_wake redis_shard_sleep(redis_connection& c, std::string_view channel,
                                          std::chrono::steady_clock::time_point until,
                                          const cancel_token& cancel, const wake_pipe* pipe) {
  for (;;) {
    if (cancel.stop_requested()) return redis_shard_wake::cancelled;
    const auto now = std::chrono::steady_clock::now();
    if (!(now < until)) return redis_shard_wake::timed_out;
    auto left = std::chrono::ceil<std::chrono::milliseconds>(until - now);
    const bool piped = pipe != nullptr && pipe->ok();
    if (!piped && cancel.stop_possible() && cancel_wait_slice < left) left = cancel_wait_slice;
    result<redis_reply_ptr> r = c.receive(left, piped ? pipe->fd() : -1);
    if (piped) pipe->drain();
    if (!r) {
      if (r.error() == errc::timeout) continue;
      return redis_shard_wake::dropped;
    }
    if (redis_is_push(r->get(), "smessage", channel)) return redis_shard_wake::released;
    if (redis_is_push(r->get(), "sunsubscribe", channel)) return redis_shard_wake::moved;
  }
}

/// SUNSUBSCRIBE `channel` on `c`, reading past messages that were already on their way.
/// \returns true if `c` is left subscribed to nothing (fit for the pool); else it is dropped.
inline bool redis_sunsubscribe(redis_connection& c, std::string_view channel) {
  if (!c.connected()) return false;
  result<redis_reply_ptr> r = c.command({"SUNSUBSCRIBE", channel});
  for (int i = 0; r && i < 16; ++i) {
    const redisReply* m = r->get();
    if (redis_is_push(m, "sunsubscribe", channel)) {
      if (m->element[2]->type == REDIS_REPLY_INTEGER && m->element[2]->integer == 0) return true;
      break;
    }
    r = c.read_reply();
  }
  c.disconnect();
  return false;
}

/// redis_cluster_store's waits, which read its slot map and lock (a friend of the store).
struct redis_cluster_waits {
  /// The argument check of every entry point of `s` that takes a key or an owner: redis_store's
  /// (refuse_redis_request), run before anything is sent or connected. \returns its code.
  template <class S>
  static std::error_code check(S& s, const store_request& q) {
    struct as_link {  // the store's lock and fail, as refuse_redis_request takes them
      S& s;
      auto lock() const { return s.lock(); }
      std::error_code fail(errc code, const char* why) const { return s.fail(code, why); }
    };
    as_link link{s};
    return refuse_redis_request(link, q);
  }

  /// wait_for_release / watch_release on `s` (redis_cluster_store::wait_for_release says how).
  template <class S>
  static result<void> wait(S& s, std::string_view key,
                           std::chrono::steady_clock::time_point deadline,
                           const cancel_token& cancel, fencing_token known) {
    if (std::error_code ec = check(s, {store_op::inspect, key, {}, {}, {}, {}})) return ec;
    std::optional<wake_pipe> pipe;
    if (cancel.stop_possible()) pipe.emplace();
    cancel_token::waker stop;
    if (pipe) cancel.on_stop(stop, [&pipe] { pipe->notify(); });
    if (cancel.stop_requested()) return errc::cancelled;
    std::string channel;
    redis_cluster_name(channel, s.opts_.node.wait_prefix, key);
    std::unique_ptr<redis_connection> sub;
    if (std::error_code ec = subscribe(s, key, channel, sub)) return ec;
    const auto start = std::chrono::steady_clock::now();  // before the inspect leaves
    result<std::optional<lease_record>> held = s.inspect(key);
    if (held && *held && (known.is_none() || (*held)->token == known)) {
      auto wake = start + (*held)->remaining + std::chrono::milliseconds(1);
      if (deadline < wake) wake = deadline;
      if (redis_shard_sleep(*sub, channel, wake, cancel, pipe ? &*pipe : nullptr) ==
          redis_shard_wake::dropped) {
        sub.reset();
      }
    }
    if (sub && redis_sunsubscribe(*sub, channel)) s.subs_.give(std::move(sub));
    if (!held) return held.error();
    if (cancel.stop_requested()) return errc::cancelled;
    return {};
  }

  /// SSUBSCRIBEs `channel` (key's) on the primary of key's slot, following one MOVED or ASK.
  template <class S>
  static std::error_code subscribe(S& s, std::string_view key, const std::string& channel,
                                   std::unique_ptr<redis_connection>& sub) {
    std::string host;
    int port = 0;
    {
      std::lock_guard<std::mutex> lk(s.mu_);
      s.name_keys(key);
      if (!s.mapped_ || s.slots_[s.slot_] < 0) {
        if (std::error_code ec = s.refresh(nullptr)) return ec;
      }
      if (s.slots_[s.slot_] < 0)
        return s.fail(errc::store_unavailable, "redis cluster: slot unserved");
      const auto& n = *s.nodes_[static_cast<std::size_t>(s.slots_[s.slot_])];
      host = n.conn.options().host;
      port = n.conn.options().port;
    }
    for (int attempt = 0;; ++attempt) {
      sub = s.subs_.take(s.opts_.node, host, port);
      const std::error_code ec = redis_ssubscribe(*sub, channel);
      if (!ec) return {};
      const std::string text = sub->last_error();
      sub.reset();
      redis_redirect to;
      std::lock_guard<std::mutex> lk(s.mu_);
      if (attempt > 0 || !parse_redis_redirect(text, to)) {
        std::string why = host;
        why += ':';
        why += std::to_string(port);
        why += ": ";
        why += text;
        why += " (SSUBSCRIBE)";
        return s.fail(ec, why);
      }
      if (!to.ask) (void)s.refresh(&s.node_at(to.host, to.port));
      host = to.host;
      port = to.port;
    }
  }
};

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_DETAIL_REDIS_CLUSTER_WAITING_HPP
