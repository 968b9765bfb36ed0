// SPDX-License-Identifier: MIT
// holdfast/stores/detail/redis_waiting.hpp - redis_waiting: the notification side of
// redis_store's wait_for_release and watch_release. A second connection, subscribed (pub/sub) to
// the store's own channel (hand-offs a release script chose for one of this store's waiters) and,
// once a watcher asked for it, to the release broadcast (every release, for watchers); one waiting
// thread at a time reads it and files what arrives for the others. A store whose threads only
// acquire never subscribes to the broadcast: else every release would wake every such store's
// sleeping waiter, a herd that, with 16 waiters on 2 vCPUs, doubled the hand-off's latency.
// Notifications are hints: the waiters bound every sleep by the holder's expiry, and the store
// stays the judge. A waiter's cancel_token wakes it through wake_on_stop(): the waiters on `cv`
// look again, and the reader's poll() ends on the self-pipe (wake_pipe.hpp); the wake-up never
// touches hiredis. Part of stores/redis.hpp; not for users.
#ifndef HOLDFAST_STORES_DETAIL_REDIS_WAITING_HPP
#define HOLDFAST_STORES_DETAIL_REDIS_WAITING_HPP

#include <hiredis/hiredis.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "holdfast/cancel.hpp"
#include "holdfast/detail/config.hpp"
#include "holdfast/detail/random.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/result.hpp"
#include "holdfast/store.hpp"
#include "holdfast/stores/detail/call_bound.hpp"
#include "holdfast/stores/detail/redis_link.hpp"
#include "holdfast/stores/detail/redis_requests.hpp"
#include "holdfast/stores/detail/redis_resp.hpp"
#include "holdfast/stores/detail/redis_scripts.hpp"
#include "holdfast/stores/detail/wake_pipe.hpp"
#include "holdfast/stores/redis_options.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

/// The notification connection of one redis_store, and the waiters' shared state: subscribed
/// to the store's channel, read by one waiting thread at a time (the others wait on `cv` for
/// their wait id or their watched key).
struct redis_waiting {
  explicit redis_waiting(const redis_options& o)
      : link(o, {}),
        channel(o.wait_prefix + "ch:" + random_owner_id()),
        broadcast(o.wait_prefix + "released") {}
  std::mutex mu;  // guards everything below; `link` only while no one is `reading`
  std::condition_variable cv;
  wake_pipe wake;  // (not guarded) ends the reader's poll: a waiter's token was stopped
  redis_link link;
  std::string channel;    // this store's own channel: hand-offs chosen by a release script
  std::string broadcast;  // every release of every key with this wait_prefix, for watchers
  bool reading = false;
  bool subscribed = false;
  // A watcher asked for the release broadcast (kept from then on, across reconnects), and whether
  // the live connection is subscribed to it.
  bool want_broadcast = false;
  bool broadcast_on = false;
  // How many times the notification connection died under a reader: a waiter that sees it
  // change returns early (its queue entry's hand-off may have gone to nobody), so its caller asks
  // again and queues anew on a fresh subscription, instead of sleeping until the holder's expiry.
  std::uint64_t dropped = 0;
  std::uint64_t seq = 0;
  std::set<std::uint64_t> active;   // wait ids of threads waiting now
  std::set<std::uint64_t> arrived;  // of those, the ones a release woke
  // A thread's place in a queue taken by try_acquire_queued, for its next wait_for_release.
  struct ticket {
    std::string key;
    std::string entry;
    std::uint64_t id = 0;
    std::chrono::steady_clock::time_point start{};
    long long pttl = 0;
  };
  std::map<std::thread::id, ticket> tickets;
  // Per key being watched: releases announced so far, and how many threads watch it.
  std::map<std::string, std::pair<std::uint64_t, int>, std::less<>> watched;

  /// [mu not held] While `guard` lives, a stop of `cancel` wakes every waiter and the reader.
  void wake_on_stop(cancel_token::waker& guard, const cancel_token& cancel) {
    detail::wake_on_stop(guard, cancel, mu, cv, wake);
  }

  /// [mu held] Ends wait `id`: no longer waiting, any wake-up for it dropped.
  void retire(std::uint64_t id) {
    active.erase(id);
    arrived.erase(id);
  }

  /// [mu held] Takes the calling thread's ticket out of `tickets`, if it has one.
  std::optional<ticket> take_ticket() {
    auto t = tickets.find(std::this_thread::get_id());
    if (t == tickets.end()) return std::nullopt;
    std::optional<ticket> mine = std::move(t->second);
    tickets.erase(t);
    return mine;
  }

  /// [mu held, nobody reading] Connects and subscribes the notification connection to this
  /// store's channel, and to the release broadcast if a watcher asked for it (want_broadcast).
  std::error_code subscribe() {
    if (subscribed && link.connected()) {
      return want_broadcast && !broadcast_on ? subscribe_broadcast() : std::error_code{};
    }
    subscribed = false;
    broadcast_on = false;
    auto guard = link.lock();
    result<redis_reply_ptr> r = want_broadcast ? link.command({"SUBSCRIBE", channel, broadcast})
                                               : link.command({"SUBSCRIBE", channel});
    if (!r) return r.error();
    if ((*r)->type != REDIS_REPLY_ARRAY) {  // (a second channel's confirmation comes later)
      link.disconnect();
      return link.fail(errc::protocol_error, "redis: SUBSCRIBE: unexpected reply");
    }
    subscribed = true;
    broadcast_on = want_broadcast;
    return {};
  }

  /// [mu held, nobody reading, subscribed] Adds the release broadcast to the live subscription
  /// and waits (at most command_timeout) for its confirmation, filing every message that comes
  /// before it as the reader does, so no hand-off is lost; the caller's read of the holder then
  /// follows the subscription. A failure drops the connection (`dropped`: the sleepers ask again).
  std::error_code subscribe_broadcast() {
    auto guard = link.lock();
    std::string wire;
    resp_append_command(wire, {"SUBSCRIBE", broadcast});
    std::error_code ec = link.send_wire(wire);
    const auto until = std::chrono::steady_clock::now() + link.options().command_timeout;
    while (!ec) {
      const auto now = std::chrono::steady_clock::now();
      if (!(now < until)) {
        ec = link.fail(errc::timeout, "redis: SUBSCRIBE: no confirmation in time");
        break;
      }
      result<redis_reply_ptr> r =
          link.receive(std::chrono::ceil<std::chrono::milliseconds>(until - now));
      if (!r) {
        if (r.error() == errc::timeout) continue;  // (part of a message; the rest comes later)
        ec = r.error();
        break;
      }
      const redisReply* m = r->get();
      if (m->type == REDIS_REPLY_ARRAY && m->elements == 3 &&
          m->element[0]->type == REDIS_REPLY_STRING &&
          std::string_view(m->element[0]->str, m->element[0]->len) == "subscribe" &&
          m->element[1]->type == REDIS_REPLY_STRING &&
          std::string_view(m->element[1]->str, m->element[1]->len) == broadcast) {
        broadcast_on = true;
        return {};
      }
      std::set<std::uint64_t> ids;
      std::vector<std::string> keys;
      file(m, ids, keys);
      deliver(ids, keys);
    }
    link.disconnect();
    subscribed = false;
    ++dropped;
    cv.notify_all();
    return ec;
  }

  /// [lk holds mu] Makes sure the notification connection carries the release broadcast before
  /// a watcher reads the holder (so a release after that read is announced to it): subscribes
  /// itself if nobody is reading, else asks the reader (through `wake`), which subscribes it
  /// before its next read. \returns the subscription's error.
  std::error_code await_broadcast(std::unique_lock<std::mutex>& lk) {
    want_broadcast = true;
    for (;;) {
      if (!reading) return subscribe();  // (also when the reader's connection died meanwhile)
      if (broadcast_on) return {};
      wake.notify();
      cv.wait_for(lk, cancel_wait_slice);
    }
  }

  /// [mu held] Files what a reader received: wake-ups for waits still active, releases for the
  /// keys being watched; wakes everyone to look.
  void deliver(const std::set<std::uint64_t>& ids, const std::vector<std::string>& keys) {
    for (std::uint64_t g : ids) {
      if (active.count(g) != 0) arrived.insert(g);
    }
    for (const std::string& k : keys) {
      auto it = watched.find(k);
      if (it != watched.end()) ++it->second.first;
    }
    cv.notify_all();
  }

  /// Sorts one message of the subscription into a wait id (own channel) or a released key
  /// (broadcast); anything else (a subscription's confirmation) is ignored.
  void file(const redisReply* m, std::set<std::uint64_t>& ids,
            std::vector<std::string>& keys) const {
    if (m->type == REDIS_REPLY_ARRAY && m->elements == 3 &&
        m->element[1]->type == REDIS_REPLY_STRING && m->element[2]->type == REDIS_REPLY_STRING) {
      const std::string_view from(m->element[1]->str, m->element[1]->len);
      const std::string_view payload(m->element[2]->str, m->element[2]->len);
      if (from == broadcast) {
        keys.emplace_back(payload);
      } else if (std::optional<fencing_token> id =
                     parse_redis_token(payload.data(), payload.size())) {
        ids.insert(id->value());
      }
    }
  }

  /// [mu not held, reading set by the caller] Reads one message for at most `timeout` (less if
  /// `wake` is notified) and files it: a wait id (own channel) or a released key (broadcast).
  /// false if the connection failed
  /// (notifications are lost until the next wait resubscribes).
  bool read_one(std::chrono::milliseconds timeout, std::set<std::uint64_t>& ids,
                std::vector<std::string>& keys) {
    auto guard = link.lock();
    // Without a self-pipe (no file descriptor left) a stop is seen at least every slice.
    if (!wake.ok() && cancel_wait_slice < timeout) timeout = cancel_wait_slice;
    result<redis_reply_ptr> r = link.receive(timeout, wake.fd());
    wake.drain();
    if (!r) return r.error() == errc::timeout;
    file(r->get(), ids, keys);
    return true;
  }

  /// [lk holds mu] Sleeps until done() or `wake`, reading the notification connection whenever
  /// no other thread does, and filing what arrives for everyone.
  /// Returns early, false, if the notification connection dies meanwhile (or is dead and nobody
  /// reads it): notifications may have been lost, so the caller should ask again rather than
  /// sleep until `wake` (issue 22). true otherwise.
  template <class Done>
  bool sleep_on(std::unique_lock<std::mutex>& lk, std::chrono::steady_clock::time_point wake,
                Done done) {
    const std::uint64_t seen_dropped = dropped;
    for (;;) {
      if (done()) return true;
      if (dropped != seen_dropped || (!reading && !subscribed)) return false;
      const auto now = std::chrono::steady_clock::now();
      if (!(now < wake)) return true;
      if (!reading && subscribed) {
        // A watcher asked for the broadcast while another thread read (await_broadcast).
        if (want_broadcast && !broadcast_on && subscribe_broadcast()) continue;
        reading = true;
        lk.unlock();
        std::set<std::uint64_t> ids;
        std::vector<std::string> keys;
        const bool alive =
            read_one(std::chrono::ceil<std::chrono::milliseconds>(wake - now), ids, keys);
        lk.lock();
        reading = false;
        if (!alive) {
          subscribed = false;
          ++dropped;
        }
        deliver(ids, keys);
      } else {
        cv.wait_until(lk, wake);
      }
    }
  }
};

/// Queues `entry` behind `key`'s holder: the holder's PTTL (ms), or -1 if the key is free.
inline result<long long> redis_enqueue(redis_link& link, redis_requests& requests,
                                       std::string_view key, const std::string& entry) {
  auto guard = link.lock();
  const redis_options& o = link.options();
  const std::string_view keys[] = {requests.lease_key(o, key), requests.queue_key(o, key)};
  const std::string_view args[] = {entry, "60000"};
  result<redis_reply_ptr> r = link.eval(redis_script::wait, keys, 2, args, 2);
  if (!r) return r.error();
  if ((*r)->type == REDIS_REPLY_INTEGER && (*r)->integer >= -1) return (*r)->integer;
  return link.fail(errc::protocol_error, "redis: wait: unexpected reply");
}

/// Takes `entry` out of `key`'s queue, passing a hand-off it was chosen for to the next waiter.
/// Best effort: the queue's TTL cleans up too.
inline void redis_dequeue(redis_link& link, redis_requests& requests, std::string_view key,
                          const std::string& entry) {
  auto guard = link.lock_quiet();  // a failed call's cleanup: keeps that call's text
  const call_floor own_time;       // past a call's deadline (call_bound): store_call_floor for it
  const std::string_view keys[] = {requests.queue_key(link.options(), key)};
  const std::string_view args[] = {entry};
  (void)link.eval(redis_script::unwait, keys, 1, args, 1);
}

/// redis_store::watch_release (see there) for a non-empty `key`: files the watch in `w`, reads the
/// holder with `store`'s inspect(), and sleeps until the key's release is announced, the holder's
/// expiry, `deadline` or a stop of `cancel`.
template <class Store>
result<void> redis_watch_release(Store& store, redis_waiting& w, std::string_view key,
                                 const std::chrono::steady_clock::time_point& deadline,
                                 const cancel_token& cancel, fencing_token known) {
  cancel_token::waker stop;  // before any lock: the wake-up takes w.mu
  w.wake_on_stop(stop, cancel);
  std::uint64_t base;
  {
    std::unique_lock<std::mutex> lk(w.mu);
    if (std::error_code ec = w.await_broadcast(lk)) return ec;
    auto& entry = w.watched[std::string(key)];
    base = entry.first;
    ++entry.second;
  }
  const auto start = std::chrono::steady_clock::now();  // before the request leaves
  result<std::optional<lease_record>> held = store.inspect(key);
  std::unique_lock<std::mutex> lk(w.mu);
  auto it = w.watched.find(key);
  if (held && *held && (known.is_none() || (*held)->token == known)) {  // else: gone already
    auto wake = start + (*held)->remaining + std::chrono::milliseconds(1);
    if (deadline < wake) wake = deadline;
    (void)w.sleep_on(lk, wake, [&] { return it->second.first != base || cancel.stop_requested(); });
  }
  if (--it->second.second == 0) w.watched.erase(it);
  if (!held) return held.error();
  if (cancel.stop_requested()) return errc::cancelled;
  return {};
}

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_DETAIL_REDIS_WAITING_HPP
