// SPDX-License-Identifier: MIT
// holdfast/stores/detail/redis_shared.hpp - redis_store's read-write grants (store.hpp's
// read-write capability, RW1-RW4; read_write_lease.hpp uses it): not public. redis_store derives
// from redis_shared, which reaches the store's link through friendship.
//
// One Redis hash per read-write key, at counter_key + ":rw:" + key: beside the counter and its
// life record (the acquire script draws tokens from the counter, so the record shares the
// counter's hash tag and slot), and in a name space of its own (a plain lease "k" and a
// read-write "k" are two locks, as in memory_store). Its fields, each with its own expiry
// instant in microseconds of the Redis server's clock (TIME, read inside the script, so expiry is
// judged by the store's clock, T2):
//
//   field       | value                          | what
//   ------------+--------------------------------+------------------------------------------
//   "w"         | "<token> <until_us> <owner>"   | the writer
//   "r:<owner>" | "<token> <until_us>"           | one reader
//   "i"         | "<until_us> <owner>"           | a writer's intent (RW4)
//
// A field is live while TIME reads less than its until_us; a grant of ttl ms lasts exactly ttl
// from the script's TIME (no rounding to Redis' millisecond clock). The hash itself carries a
// PEXPIRE past its latest field, so an abandoned record vanishes on its own. Three scripts, one
// round trip each, atomic as every script:
//   acquire_rw  drops expired fields, then judges the ask as memory_store does (the table in
//               stores/detail/memory_shared.hpp): free for it: INCR the store-wide counter (the
//               same life check and counter as try_acquire, so RW2 and T1 hold across plain and
//               read-write grants) and set the field; the owner's own live grant in the mode it
//               asks: the same token, its TTL extended (never shortened), so a retry after a lost
//               reply gets the grant it made back; an exclusive ask refused by live readers
//               records (or, for the same owner, extends) the intent, which keeps new readers out.
//   renew_rw    the owner's live field with that token: until = TIME + ttl; else lease_lost.
//   release_rw  the owner's field with that token (expired or not): HDEL; else not_holder.
// Writer preference (RW4): a writer refused because readers hold keeps new readers out for the
// TTL it asked, so the readers drain and its next ask wins; one intent at a time (a second
// writer is busy without one). Waiting (wait_for_release_rw, a fourth script, read only): a
// waiter reads how long the fields that keep its mode out can live and sleeps on the store's
// notification connection until then, unless release_rw's PUBLISH of the record's name on the
// release broadcast (wait_prefix + "released", the channel watch_release uses) wakes it first.
// With wait_replicas, a grant too few replicas acknowledged is given back (release_rw) and
// reported as grant_not_durable, as try_acquire's. Part of stores/redis.hpp; not for users.
#ifndef HOLDFAST_STORES_DETAIL_REDIS_SHARED_HPP
#define HOLDFAST_STORES_DETAIL_REDIS_SHARED_HPP

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
#include "holdfast/fencing_token.hpp"
#include "holdfast/result.hpp"
#include "holdfast/store.hpp"
#include "holdfast/stores/detail/redis_link.hpp"
#include "holdfast/stores/detail/redis_requests.hpp"
#include "holdfast/stores/detail/redis_resp.hpp"
#include "holdfast/stores/detail/redis_scripts.hpp"
#include "holdfast/stores/detail/redis_waiting.hpp"
#include "holdfast/stores/redis_options.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

// The record's fields, read into Lua locals: w/wt/wu the writer, mt/mu this owner's read grant,
// readers the live readers, io/iu the intent, far the latest live instant. Expired fields go.
inline constexpr const char* redis_rw_scan =
    "local tm = redis.call('TIME')\n"
    "local now = tonumber(tm[1]) * 1000000 + tonumber(tm[2])\n"
    "local owner = ARGV[1]\n"
    "local till = now + tonumber(ARGV[2]) * 1000\n"
    "local w, wt, wu, mt, mu, io, iu = nil, nil, nil, nil, nil, nil, nil\n"
    "local readers, far = 0, now\n"
    "local h = redis.call('HGETALL', KEYS[1])\n"
    "local bad = 'HOLDFAST_CORRUPT read-write record field '\n"
    "for i = 1, #h, 2 do\n"
    "  local f, v = h[i], h[i + 1]\n"
    "  local a, b, o\n"
    "  if f == 'w' then a, b, o = string.match(v, '^(%d+) (%d+) (.*)$')\n"
    "  elseif f == 'i' then b, o = string.match(v, '^(%d+) (.*)$'); a = b\n"
    "  elseif string.sub(f, 1, 2) == 'r:' then a, b = string.match(v, '^(%d+) (%d+)$')\n"
    "  end\n"
    "  if not a then return redis.error_reply(bad .. 'is not holdfast\\'s') end\n"
    "  local u = tonumber(b)\n"
    "  if u <= now then redis.call('HDEL', KEYS[1], f)\n"
    "  else\n"
    "    if u > far then far = u end\n"
    "    if f == 'w' then w, wt, wu = o, a, u\n"
    "    elseif f == 'i' then io, iu = o, u\n"
    "    else\n"
    "      readers = readers + 1\n"
    "      if string.sub(f, 3) == owner then mt, mu = a, u end\n"
    "    end\n"
    "  end\n"
    "end\n"
    "local function us(x) return string.format('%d', x) end\n"
    "local function touch()\n"
    "  if till > far then far = till end\n"
    "  redis.call('PEXPIRE', KEYS[1], math.floor((far - now) / 1000) + 2)\n"
    "end\n";

// acquire_rw: KEYS[1] the record, KEYS[2] counter, KEYS[3] its life record; ARGV[1] owner,
// ARGV[2] ttl (ms), ARGV[3] the client's life (redis_life_check), ARGV[4] "s" or "x". Returns
// the token (a bulk string) on a grant, integer 0 when busy.
inline std::string redis_acquire_rw_script() {
  return std::string(redis_rw_scan) +
         "if ARGV[4] == 's' then\n"
         "  if w then return 0 end\n"
         "  if mt then\n"
         "    if mu < till then redis.call('HSET', KEYS[1], 'r:' .. owner, mt .. ' ' .. us(till))\n"
         "      touch() end\n"
         "    return mt\n"
         "  end\n"
         "  if io then return 0 end\n"
         "else\n"
         "  if w then\n"
         "    if w ~= owner then return 0 end\n"
         "    if wu < till then\n"
         "      redis.call('HSET', KEYS[1], 'w', wt .. ' ' .. us(till) .. ' ' .. owner)\n"
         "      touch()\n"
         "    end\n"
         "    return wt\n"
         "  end\n"
         "  if readers > 0 then\n"
         "    if mt then return 0 end\n"
         "    if not io or io == owner then\n"
         "      redis.call('HSET', KEYS[1], 'i', us(till) .. ' ' .. owner)\n"
         "      touch()\n"
         "    end\n"
         "    return 0\n"
         "  end\n"
         "end\n" +
         redis_life_check + redis_draw_token +
         "if ARGV[4] == 's' then\n"
         "  redis.call('HSET', KEYS[1], 'r:' .. owner, t .. ' ' .. us(till))\n"
         "else\n"
         "  redis.call('HSET', KEYS[1], 'w', t .. ' ' .. us(till) .. ' ' .. owner)\n"
         "  redis.call('HDEL', KEYS[1], 'i')\n"
         "end\n"
         "touch()\n"
         "return t\n";
}

// The holder's field and its parts: KEYS[1] the record; ARGV[1] owner, ARGV[2] token, ARGV[3]
// "s" or "x". Sets f (the field), ok (the field holds that owner's grant with that token), u.
inline constexpr const char* redis_rw_find =
    "local f = ARGV[3] == 's' and ('r:' .. ARGV[1]) or 'w'\n"
    "local v = redis.call('HGET', KEYS[1], f)\n"
    "local ok, u = false, 0\n"
    "if v then\n"
    "  local a, b, o\n"
    "  if ARGV[3] == 's' then a, b = string.match(v, '^(%d+) (%d+)$'); o = ARGV[1]\n"
    "  else a, b, o = string.match(v, '^(%d+) (%d+) (.*)$') end\n"
    "  ok = a == ARGV[2] and o == ARGV[1]\n"
    "  u = tonumber(b) or 0\n"
    "end\n";

// renew_rw: KEYS[1] the record; ARGV[1] owner, ARGV[2] token, ARGV[3] mode, ARGV[4] ttl (ms).
// 1 renewed, 0 lost (no such live grant).
inline std::string redis_renew_rw_script() {
  return std::string(redis_rw_find) +
         "if not ok then return 0 end\n"
         "local tm = redis.call('TIME')\n"
         "local now = tonumber(tm[1]) * 1000000 + tonumber(tm[2])\n"
         "if u <= now then return 0 end\n"
         "local till = string.format('%d', now + tonumber(ARGV[4]) * 1000)\n"
         "if ARGV[3] == 's' then redis.call('HSET', KEYS[1], f, ARGV[2] .. ' ' .. till)\n"
         "else redis.call('HSET', KEYS[1], f, ARGV[2] .. ' ' .. till .. ' ' .. ARGV[1]) end\n"
         "local need = tonumber(ARGV[4]) + 2\n"
         "if redis.call('PTTL', KEYS[1]) < need then redis.call('PEXPIRE', KEYS[1], need) end\n"
         "return 1\n";
}

// release_rw: KEYS[1] the record; ARGV[1] owner, ARGV[2] token, ARGV[3] mode, ARGV[4] the release
// broadcast channel. 1 released (the record's name announced there, which wakes the store's
// waiters of the key: wait_for_release_rw), 0 not the holder. The hash goes with its last field
// (Redis deletes an empty hash).
inline std::string redis_release_rw_script() {
  return std::string(redis_rw_find) +
         "if not ok then return 0 end\n"
         "redis.call('HDEL', KEYS[1], f)\n"
         "redis.call('PUBLISH', ARGV[4], KEYS[1])\n"
         "return 1\n";
}

// wait_rw: KEYS[1] the record; ARGV[1] the waiter's mode. Read only: -1 if no live field keeps
// that mode out, else the ms (rounded up) until the last such field's instant by the server's
// clock (a writer or an intent keeps readers out; a writer or any reader keeps writers out),
// for a writer at most half the live intent's time left, so that it asks again (renewing its
// intent, RW4) before the intent lapses. Fields that do not parse are skipped (the acquire
// script reports them).
inline constexpr const char* redis_wait_rw_script =
    "local tm = redis.call('TIME')\n"
    "local now = tonumber(tm[1]) * 1000000 + tonumber(tm[2])\n"
    "local h = redis.call('HGETALL', KEYS[1])\n"
    "local free, intent = now, nil\n"
    "for i = 1, #h, 2 do\n"
    "  local f, v, u = h[i], h[i + 1], nil\n"
    "  if f == 'w' then u = string.match(v, '^%d+ (%d+) ')\n"
    "  elseif f == 'i' then u = string.match(v, '^(%d+) ')\n"
    "  elseif string.sub(f, 1, 2) == 'r:' then u = string.match(v, '^%d+ (%d+)$') end\n"
    "  u = tonumber(u)\n"
    "  if u and u > now then\n"
    "    if f == 'i' then intent = u end\n"
    "    local blocks = f == 'w' or (ARGV[1] == 's' and f == 'i') or (ARGV[1] == 'x' and f ~= "
    "'i')\n"
    "    if blocks and u > free then free = u end\n"
    "  end\n"
    "end\n"
    "if free <= now then return -1 end\n"
    "if ARGV[1] == 'x' and intent then\n"
    "  local half = now + math.floor((intent - now) / 2)\n"
    "  if half < free then free = half end\n"
    "end\n"
    "return math.floor((free - now + 999) / 1000)\n";

/// The read-write scripts' indices on a redis_store connection: after every script of
/// redis_store_scripts(), however many there are.
struct redis_rw_script {
  static std::size_t base() {
    static const std::size_t n = redis_store_scripts().size();
    return n;
  }
  static std::size_t acquire() { return base(); }
  static std::size_t renew() { return base() + 1; }
  static std::size_t release() { return base() + 2; }
  static std::size_t wait() { return base() + 3; }
};

/// redis_store's scripts: redis_store_scripts(), then the read-write ones (redis_rw_script).
inline std::vector<std::string> redis_scripts_with_rw() {
  std::vector<std::string> s = redis_store_scripts();
  s.push_back(redis_acquire_rw_script());
  s.push_back(redis_renew_rw_script());
  s.push_back(redis_release_rw_script());
  s.push_back(redis_wait_rw_script);
  return s;
}

/// The read-write half of redis_store (Store), as a base it derives from (CRTP); Store befriends
/// it and holds a redis_link `link_`. Thread-safety: as redis_store's (the link's lock).
template <class Store>
class redis_shared {
 public:
  /// Grants `key`'s read-write lock to `owner` for `ttl` (ms) in `mode` (store.hpp RW1-RW4) in
  /// one script and one round trip; see detail/redis_shared.hpp for the record and the policy
  /// (writers first: a refused writer's intent keeps new readers out for its TTL). The same owner
  /// asking again in the mode it holds live gets the same token, its TTL extended (never
  /// shortened). \returns the grant; errc::busy (an upgrade or downgrade ask included);
  /// errc::invalid_argument (check_acquire_args, check_lease_mode, Redis' size limit, or
  /// options whose key_prefix or wait_prefix would hold the record's name); errc::token_exhausted;
  /// store_unavailable, timeout, grant_not_durable, protocol_error as redis_store::try_acquire.
  result<grant> try_acquire_rw(std::string_view key, std::string_view owner,
                               std::chrono::milliseconds ttl, lease_mode mode) {
    if (std::error_code ec = check_acquire_args(key, owner, ttl)) return ec;
    if (std::error_code ec = check_rw(key, owner, mode)) return ec;
    auto guard = link().lock();
    if (std::error_code ec = named(key)) return ec;
    if (std::error_code ec = link().ensure_connected()) return ec;  // the life, read at connect
    const std::string ttl_text = std::to_string(ttl.count());
    const std::string_view keys[] = {name_, link().options().counter_key, life()};
    const std::string_view args[] = {owner, ttl_text, link().life(), mode_text(mode)};
    result<redis_reply_ptr> r = link().eval(redis_rw_script::acquire(), keys, 3, args, 4);
    if (!r) return r.error();
    const redisReply* reply = r->get();
    if (reply->type == REDIS_REPLY_INTEGER && reply->integer == 0) return errc::busy;
    const std::optional<fencing_token> t = reply_token(reply);
    if (!t || !t->is_issuable()) {
      return link().fail(errc::protocol_error, "redis: try_acquire_rw: unexpected reply");
    }
    const std::string tok = std::to_string(t->value());
    const std::string_view back[] = {owner, tok, mode_text(mode), waiting().broadcast};
    if (!durable(keys, back)) return errc::grant_not_durable;  // given back
    return grant{*t, ttl};
  }

  /// Extends `owner`'s live `mode` grant of `key` carrying `token` to `ttl` (ms) from the
  /// server's now, in one round trip; an expired grant is never revived. \returns the grant (same
  /// token); errc::lease_lost if there is no such live grant (another mode's included);
  /// errc::invalid_argument; grant_not_durable (the grant stays) and the errors of
  /// redis_store::renew.
  result<grant> renew_rw(std::string_view key, std::string_view owner, fencing_token token,
                         std::chrono::milliseconds ttl, lease_mode mode) {
    if (std::error_code ec = check_renew_args(key, owner, token, ttl)) return ec;
    if (std::error_code ec = check_rw(key, owner, mode)) return ec;
    auto guard = link().lock();
    if (std::error_code ec = named(key)) return ec;
    const std::string tok = std::to_string(token.value());
    const std::string ttl_text = std::to_string(ttl.count());
    const std::string_view keys[] = {name_};
    const std::string_view args[] = {owner, tok, mode_text(mode), ttl_text};
    result<long long> n = answer(link().eval(redis_rw_script::renew(), keys, 1, args, 4));
    if (!n) return n.error();
    if (*n == 0) return errc::lease_lost;
    if (!durable(nullptr, nullptr)) return errc::grant_not_durable;
    return grant{token, ttl};
  }

  /// Ends `owner`'s `mode` grant of `key` carrying `token`, expired or not, in one round trip.
  /// If the connection (open since an earlier call) turns out to have been dropped, it
  /// reconnects and sends the release once more, as release() does. \returns success;
  /// errc::not_holder if there is no such grant; errc::invalid_argument; store_unavailable,
  /// timeout, protocol_error.
  result<void> release_rw(std::string_view key, std::string_view owner, fencing_token token,
                          lease_mode mode) {
    if (std::error_code ec = check_release_args(key, owner, token)) return ec;
    if (std::error_code ec = check_rw(key, owner, mode)) return ec;
    auto guard = link().lock();
    if (std::error_code ec = named(key)) return ec;
    const std::string tok = std::to_string(token.value());
    const std::string_view keys[] = {name_};
    const std::string_view args[] = {owner, tok, mode_text(mode), waiting().broadcast};
    // A holder's last call: sent once more after an idle drop (redis_link.hpp), rather than
    // leave the grant to its TTL (a writer's keeps every reader out).
    result<redis_reply_ptr> r = redis_send_last_call(
        link(), [&] { return link().eval(redis_rw_script::release(), keys, 1, args, 4); });
    result<long long> n = answer(std::move(r));
    if (!n) return n.error();
    if (*n == 0) return errc::not_holder;
    return {};
  }

  /// Blocks until `key`'s read-write lock may be free for `mode`, without polling (store.hpp's
  /// wait_for_release_rw; read_write_view offers it as wait_for_release, so acquire_read() and
  /// acquire_write() use it): registers with this store's notification connection (subscribed
  /// to the release broadcast, on which release_rw announces the record), reads in one script
  /// (read only) how long the fields that keep `mode` out can live by the server's clock (a
  /// writer or an intent keeps readers out; a writer or a reader keeps writers out; a writer
  /// waits at most half its intent's time left, so its next ask renews the intent), then sleeps
  /// until a read-write release of the key is announced, until that time (+ 1 ms after the
  /// request left, by this process's steady clock), until `deadline`, or until `cancel` is
  /// stopped. Returns at once if nothing keeps `mode` out. Every waiter of the key wakes on a
  /// release (a reader's release may free the key for one writer, a writer's for every reader).
  /// Notifications are hints, as wait_for_release's: a lost one costs the wait until those
  /// fields' expiry, never more; a notification connection that dies ends the wait at once.
  /// Thread-safety: as wait_for_release. \returns success (woken for any of those reasons);
  ///   errc::cancelled once `cancel` was stopped; errc::invalid_argument for an empty key, a bad
  ///   mode or a key Redis cannot hold; store_unavailable, timeout, protocol_error if the script
  ///   or SUBSCRIBE failed (the caller falls back to backoff).
  result<void> wait_for_release_rw(std::string_view key, lease_mode mode,
                                   const std::chrono::steady_clock::time_point& deadline,
                                   const cancel_token& cancel = {}) {
    if (key.empty()) return errc::invalid_argument;
    if (std::error_code ec = check_rw(key, "w", mode)) return ec;
    redis_waiting& w = waiting();
    cancel_token::waker stop;  // before any lock: the wake-up takes w.mu
    w.wake_on_stop(stop, cancel);
    std::string record;
    {
      auto guard = link().lock();
      if (std::error_code ec = named(key)) return ec;
      record = name_;
    }
    std::uint64_t base;
    {
      std::unique_lock<std::mutex> lk(w.mu);
      if (std::error_code ec = w.await_broadcast(lk)) return ec;
      auto& entry = w.watched[record];  // before the read: a release after it counts
      base = entry.first;
      ++entry.second;
    }
    const auto start = std::chrono::steady_clock::now();  // before the request leaves
    result<long long> left = [&] {
      auto guard = link().lock();
      const std::string_view keys[] = {record};
      const std::string_view args[] = {mode_text(mode)};
      return answer(link().eval(redis_rw_script::wait(), keys, 1, args, 1));
    }();
    std::unique_lock<std::mutex> lk(w.mu);
    auto it = w.watched.find(record);
    if (left && *left >= 0) {
      auto wake = start + std::chrono::milliseconds(*left + 1);
      if (deadline < wake) wake = deadline;
      (void)w.sleep_on(lk, wake,
                       [&] { return it->second.first != base || cancel.stop_requested(); });
    }
    if (--it->second.second == 0) w.watched.erase(it);
    if (!left) return left.error();
    if (cancel.stop_requested()) return errc::cancelled;
    return {};
  }

 protected:
  redis_shared() = default;
  ~redis_shared() = default;

 private:
  redis_link& link() { return static_cast<Store&>(*this).link_; }
  redis_waiting& waiting() { return *static_cast<Store&>(*this).wait_; }

  static std::string_view mode_text(lease_mode m) noexcept {
    return m == lease_mode::shared ? "s" : "x";
  }

  // The mode and Redis' size limit (the same as try_acquire's).
  static std::error_code check_rw(std::string_view key, std::string_view owner, lease_mode mode) {
    if (std::error_code ec = check_lease_mode(mode)) return ec;
    const store_request q{store_op::try_acquire, key, owner, {}, {}, std::chrono::milliseconds(1)};
    if (redis_size_problem(q) != nullptr) return errc::invalid_argument;
    return {};
  }

  // [locked] Names the record in name_ (counter_key + ":rw:" + key): invalid_argument if that
  // name starts with key_prefix or wait_prefix (it would be a lease's or a queue's).
  std::error_code named(std::string_view key) {
    const redis_options& o = link().options();
    name_.assign(o.counter_key).append(":rw:").append(key.data(), key.size());
    const std::string_view n = name_;
    if (n.substr(0, o.key_prefix.size()) == o.key_prefix ||
        n.substr(0, o.wait_prefix.size()) == o.wait_prefix) {
      return link().fail(errc::invalid_argument,
                         "redis: counter_key + \":rw:\" + key starts with key_prefix or "
                         "wait_prefix: the read-write record would be a lease's or a queue's");
    }
    return {};
  }
  std::string_view life() {
    if (life_.empty()) life_ = link().options().life_key();
    return life_;
  }

  // An integer reply (renew_rw, release_rw).
  result<long long> answer(result<redis_reply_ptr> r) {
    if (!r) return r.error();
    if ((*r)->type != REDIS_REPLY_INTEGER) {
      return link().fail(errc::protocol_error, "redis: read-write script: unexpected reply");
    }
    return (*r)->integer;
  }

  // [locked] With wait_replicas > 0: did enough replicas acknowledge the write just made? If
  // not, a new grant (its record key and release_rw arguments in `keys`, `back`; null for a
  // renewal) is given back, the link's error says why, and through Sentinel the connection is
  // dropped (the primary may be failing over), as redis_acknowledge does for plain grants.
  bool durable(const std::string_view* keys, const std::string_view* back) {
    const redis_options& o = link().options();
    if (o.wait_replicas == 0) return true;
    result<long long> acks = link().wait_for_replicas();
    if (acks && *acks >= o.wait_replicas) return true;
    const std::string why =
        acks ? "redis: WAIT: " + std::to_string(*acks) + " of " + std::to_string(o.wait_replicas) +
                   " replicas acknowledged the read-write grant"
             : link().last_error() + " (WAIT for the read-write grant's acknowledgement)";
    if (keys != nullptr) (void)link().eval(redis_rw_script::release(), keys, 1, back, 4);
    if (!o.sentinels.empty()) link().disconnect();
    (void)link().fail(errc::grant_not_durable, why);
    return false;
  }

  std::string name_;  // the record's name (named()); guarded by the link's lock
  std::string life_;  // the life record's name, computed once under the lock
};

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_DETAIL_REDIS_SHARED_HPP
