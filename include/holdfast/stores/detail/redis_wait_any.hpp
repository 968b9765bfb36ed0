// SPDX-License-Identifier: MIT
// holdfast/stores/detail/redis_wait_any.hpp - redis_wait_any(): redis_store's wait for a release
// of any of several keys (store.hpp's wait_for_release_any; semaphore.hpp's waiting).
//
// One script checks every key and, if all are held, queues this waiter's entry ("<channel> <wait
// id>", as wait_for_release's) in the wait queue of every key, returning the earliest holder's
// PTTL; the waiter sleeps on the store's notification connection (redis_waiting) until a release
// script pops its entry from one of the queues and PUBLISHes its wait id, until that earliest
// expiry, or until the deadline. A second script then takes the entry out of every queue: the
// first queue it had already left is the key that was released (tried first by the caller); any
// other queue it had left (two releases chose it) has its hand-off passed on to that queue's next
// waiter, as is every hand-off when it leaves unwoken, so no release wakes nobody. Requests: two
// per wait, none while asleep. A lost notification costs at most the wait until the earliest
// expiry; a notification connection that dies ends the wait at once, and so does a stop of the
// cancel_token (redis_waiting's wake-up). Part of stores/redis.hpp; not for users.
#ifndef HOLDFAST_STORES_DETAIL_REDIS_WAIT_ANY_HPP
#define HOLDFAST_STORES_DETAIL_REDIS_WAIT_ANY_HPP

#include <hiredis/hiredis.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
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
#include "holdfast/result.hpp"
#include "holdfast/stores/detail/redis_link.hpp"
#include "holdfast/stores/detail/redis_requests.hpp"
#include "holdfast/stores/detail/redis_resp.hpp"
#include "holdfast/stores/detail/redis_scripts.hpp"
#include "holdfast/stores/detail/redis_waiting.hpp"
#include "holdfast/stores/redis_options.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

// [link locked] Takes `entry` out of the queues `keys` (queue keys); the hand-offs of queues it
// had already left go to their next waiters, except, with `keep`, the first one's, whose index it
// returns (the key released for this waiter). -1 if none is kept, or the request failed (the
// queues' own TTL cleans up then).
inline long long redis_unwait_any(redis_link& link, const std::vector<std::string_view>& keys,
                                  const std::string& entry, bool keep) {
  const std::string_view args[] = {entry, keep ? "1" : "0"};
  result<redis_reply_ptr> r =
      link.eval(redis_script::unwait_any, keys.data(), keys.size(), args, 2);
  if (r && (*r)->type == REDIS_REPLY_INTEGER) return (*r)->integer;
  return -1;
}

// [link not locked] Takes out the place `stale` (try_acquire_queued's, never waited on), then
// queues `entry` behind every key of `views` (lease keys, then queue keys) unless one is free.
// \returns {index, PTTL} as the wait_any script answers; an error, having left every queue (the
//   script may have run although its reply was lost).
inline result<std::pair<long long, long long>> redis_queue_any(
    redis_link& link, const std::vector<std::string_view>& views, std::size_t n,
    const std::string& entry, const std::optional<redis_waiting::ticket>& stale) {
  auto guard = link.lock();
  if (stale) {
    const std::string q = link.options().wait_prefix + stale->key;
    const std::string_view qk[] = {q};
    const std::string_view qa[] = {stale->entry};
    (void)link.eval(redis_script::unwait, qk, 1, qa, 1);
  }
  const std::string_view args[] = {entry, "60000"};
  result<redis_reply_ptr> r =
      link.eval(redis_script::wait_any, views.data(), views.size(), args, 2);
  if (r && (*r)->type == REDIS_REPLY_ARRAY && (*r)->elements == 2 &&
      (*r)->element[0]->type == REDIS_REPLY_INTEGER &&
      (*r)->element[1]->type == REDIS_REPLY_INTEGER && (*r)->element[0]->integer >= 0 &&
      static_cast<std::size_t>((*r)->element[0]->integer) < n) {
    return std::make_pair((*r)->element[0]->integer, (*r)->element[1]->integer);
  }
  const std::error_code ec =
      r ? link.fail(errc::protocol_error, "redis: wait_any: unexpected reply") : r.error();
  const std::vector<std::string_view> queues(views.begin() + static_cast<std::ptrdiff_t>(n),
                                             views.end());
  (void)redis_unwait_any(link, queues, entry, false);
  return ec;
}

// [mu not held] Sleeps until wait `id` is woken (true), `wake`, the notification connection dies
// or `cancel` is stopped (its wake-up, registered by the caller, ends the sleep at once).
inline bool redis_sleep_any(redis_waiting& w, std::uint64_t id,
                            std::chrono::steady_clock::time_point wake,
                            const cancel_token& cancel) {
  bool woken = false;
  std::unique_lock<std::mutex> lk(w.mu);
  // A dead notification connection ends the wait early: the caller asks again.
  (void)w.sleep_on(lk, wake,
                   [&] { return (woken = w.arrived.erase(id) != 0) || cancel.stop_requested(); });
  w.retire(id);
  return woken;
}

/// Waits for a release of any of `keys` on the store whose main connection is `link` and whose
/// notification side is `w` (see the file overview). \returns the index of a key to try first
///   (released, free, or whose holder's lease can have expired), keys.size() at the deadline;
///   errc::cancelled; errc::invalid_argument for no keys, an empty one or one over
///   Redis' size limit (named); store_unavailable,
///   timeout, protocol_error if queueing or subscribing failed (the caller falls back to backoff).
inline result<std::size_t> redis_wait_any(redis_link& link, redis_waiting& w,
                                          const std::vector<std::string>& keys,
                                          std::chrono::steady_clock::time_point deadline,
                                          const cancel_token& cancel) {
  if (keys.empty()) return errc::invalid_argument;
  for (const std::string& k : keys) {
    if (std::error_code ec = refuse_redis_request(link, {store_op::inspect, k, {}, {}, {}, {}})) {
      return ec;  // the entry points' one check
    }
  }
  cancel_token::waker stop;  // before any lock: the wake-up takes w.mu
  w.wake_on_stop(stop, cancel);
  if (cancel.stop_requested()) return errc::cancelled;
  const redis_options& o = link.options();
  std::vector<std::string> names;  // the lease keys, then the queue keys
  names.reserve(2 * keys.size());
  for (const std::string& k : keys) names.push_back(o.key_prefix + k);
  for (const std::string& k : keys) names.push_back(o.wait_prefix + k);
  const std::vector<std::string_view> views(names.begin(), names.end());
  std::uint64_t id = 0;
  std::optional<redis_waiting::ticket> stale;
  {
    std::lock_guard<std::mutex> lk(w.mu);
    stale = w.take_ticket();
    if (stale) w.retire(stale->id);
    if (!w.reading) {
      if (std::error_code ec = w.subscribe()) return ec;
    }
    id = ++w.seq;
    w.active.insert(id);
  }
  const std::string entry = w.channel + " " + std::to_string(id);
  const auto start = std::chrono::steady_clock::now();  // before the request leaves
  const result<std::pair<long long, long long>> q =
      redis_queue_any(link, views, keys.size(), entry, stale);
  if (!q || q->second < 0) {  // failed, or a key is free (nothing was queued)
    std::lock_guard<std::mutex> lk(w.mu);
    w.retire(id);
    if (!q) return q.error();
    return static_cast<std::size_t>(q->first);
  }
  auto wake = start + std::chrono::milliseconds(q->second + 1);
  if (deadline < wake) wake = deadline;
  const bool woken = redis_sleep_any(w, id, wake, cancel);
  const bool stopped = cancel.stop_requested();
  long long released = -1;
  {
    auto guard = link.lock();
    const std::vector<std::string_view> queues(
        views.begin() + static_cast<std::ptrdiff_t>(keys.size()), views.end());
    released = redis_unwait_any(link, queues, entry, woken && !stopped);
  }
  if (stopped) return errc::cancelled;
  if (released >= 0 && static_cast<std::size_t>(released) < keys.size()) {
    return static_cast<std::size_t>(released);
  }
  if (!(std::chrono::steady_clock::now() < deadline)) return keys.size();
  return static_cast<std::size_t>(q->first);  // the earliest holder's expiry (or a lost wake-up)
}

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_DETAIL_REDIS_WAIT_ANY_HPP
