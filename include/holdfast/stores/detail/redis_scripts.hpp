// SPDX-License-Identifier: MIT
// holdfast/stores/detail/redis_scripts.hpp - the Lua scripts redis_store and redis_fence run in
// Redis (one atomic step each; the table in the overview of stores/redis.hpp says what each does),
// and the order in which redis_store loads them (redis_script). Keys and arguments always travel
// as separate bulk arguments, never spliced into a script's text, and tokens are compared as
// decimal strings, never as Lua numbers. Part of stores/redis.hpp; not for users.
#ifndef HOLDFAST_STORES_DETAIL_REDIS_SCRIPTS_HPP
#define HOLDFAST_STORES_DETAIL_REDIS_SCRIPTS_HPP

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "holdfast/detail/config.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

// Tokens compare as canonical decimal strings (shorter is smaller; equal length: byte order), so
// no token is ever turned into a Lua number (a double).
inline constexpr const char* redis_older_fn =
    "local function older(a, b)\n"
    "  if #a ~= #b then return #a < #b end\n"
    "  for i = 1, #a do\n"
    "    local x, y = string.byte(a, i), string.byte(b, i)\n"
    "    if x ~= y then return x < y end\n"
    "  end\n"
    "  return false\n"
    "end\n";

// The life check of a new grant (KEYS[2] counter, KEYS[3] its life record; ARGV[3] the life the
// client read at connect, "<run_id>/<master_replid>", or "" to skip). When the record names
// another life (a restart, a promoted replica, a restored file), the counter may be behind tokens
// the old life issued and lost: it is raised by 2^32 before this grant takes its token, and the
// new life recorded, in this same script. A counter without a record (a new store, or one made
// before records were kept) only gets its record, unless the server was promoted: a non-zero
// master_replid2 (the replication id it had as a replica) says it may have missed the grants,
// record and counter its old primary wrote last (the first grants of a store, lost to a failover
// before they replicated), so it is raised too. If the server's life is not the client's (it
// changed under an open connection), nothing is done and the client reconnects (HOLDFAST_LIFE).
// Tokens are compared as strings, the counter raised by INCRBY.
inline constexpr const char* redis_life_check =
    "if ARGV[3] ~= '' then\n"
    "  local life = redis.call('GET', KEYS[3])\n"
    "  if life ~= ARGV[3] then\n"
    "    local i = redis.call('INFO', 'server') .. redis.call('INFO', 'replication')\n"
    "    local now = (string.match(i, 'run_id:(%w+)') or '') .. '/' ..\n"
    "                (string.match(i, 'master_replid:(%w+)') or '')\n"
    "    if now ~= ARGV[3] then\n"
    "      return redis.error_reply('HOLDFAST_LIFE the server began a new life: ' .. now)\n"
    "    end\n"
    "    local was = string.match(i, 'master_replid2:(%w+)') or ''\n"
    "    if life or string.find(was, '[1-9a-fA-F]') then\n"
    "      local r = redis.pcall('INCRBY', KEYS[2], '4294967296')\n"
    "      if type(r) == 'table' and r.err then\n"
    "        if string.find(r.err, 'overflow', 1, true) then\n"
    "          return redis.error_reply('HOLDFAST_EXHAUSTED the token counter is near 2^63-1')\n"
    "        end\n"
    "        return redis.error_reply('HOLDFAST_CORRUPT token counter: ' .. r.err)\n"
    "      end\n"
    "    end\n"
    "    redis.call('SET', KEYS[3], ARGV[3])\n"
    "  end\n"
    "end\n";

// Draws the next token from the counter KEYS[2] into the Lua string `t` (after
// redis_life_check): INCR, refusing an exhausted or corrupt counter. Below 2^53 the Lua number is
// exact; above, the counter is read back as a string. Shared by every script that grants.
inline constexpr const char* redis_draw_token =
    "local n = redis.pcall('INCR', KEYS[2])\n"
    "if type(n) == 'table' and n.err then\n"
    "  if string.find(n.err, 'overflow', 1, true) then\n"
    "    return redis.error_reply('HOLDFAST_EXHAUSTED the token counter is at 2^63-1')\n"
    "  end\n"
    "  return redis.error_reply('HOLDFAST_CORRUPT token counter: ' .. n.err)\n"
    "end\n"
    "if n < 1 then\n"
    "  return redis.error_reply('HOLDFAST_CORRUPT token counter is not positive')\n"
    "end\n"
    "local t\n"
    "if n < 9007199254740992 then t = string.format('%d', n)\n"
    "else t = redis.call('GET', KEYS[2]) end\n";

// KEYS[1] lease key, KEYS[2] counter, KEYS[3] the counter's life record; ARGV[1] owner, ARGV[2]
// ttl (ms), ARGV[3] the client's life (redis_life_check). Returns the token (a bulk string) on a
// grant, integer 0 when busy.
inline std::string redis_acquire_script() {
  return std::string(
             "local v = redis.call('GET', KEYS[1])\n"
             "if v then\n"
             "  local p = string.find(v, ':', 1, true)\n"
             "  if not p or p == 1 then\n"
             "    return redis.error_reply('HOLDFAST_CORRUPT lease record is not "
             "<token>:<owner>')\n"
             "  end\n"
             "  if string.sub(v, p + 1) ~= ARGV[1] then return 0 end\n"
             "  if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[2]) then\n"
             "    redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
             "  end\n"
             "  return string.sub(v, 1, p - 1)\n"
             "end\n") +
         redis_life_check + redis_draw_token +
         "redis.call('SET', KEYS[1], t .. ':' .. ARGV[1], 'PX', ARGV[2])\n"
         "return t\n";
}

// KEYS[1] lease key; ARGV[1] owner, ARGV[2] token, ARGV[3] ttl (ms). 1 renewed, 0 lost.
inline constexpr const char* redis_renew_script =
    "if redis.call('GET', KEYS[1]) == ARGV[2] .. ':' .. ARGV[1] then\n"
    "  redis.call('PEXPIRE', KEYS[1], ARGV[3])\n"
    "  return 1\n"
    "end\n"
    "return 0\n";

// Pops waiters off the wait queue KEYS[n] ("<channel> <wait id>" entries) until one of them is
// listening, and publishes its wait id on its channel: one waiter woken per call. Entries of
// waiters whose connection is gone (PUBLISH reaches nobody) are dropped on the way.
inline constexpr const char* redis_wake_fn =
    "local function wake(q)\n"
    "  while true do\n"
    "    local w = redis.call('LPOP', q)\n"
    "    if not w then return end\n"
    "    local sp = string.find(w, ' ', 1, true)\n"
    "    if sp and redis.call('PUBLISH', string.sub(w, 1, sp - 1), string.sub(w, sp + 1)) > 0 "
    "then\n"
    "      return\n"
    "    end\n"
    "  end\n"
    "end\n";

// KEYS[1] lease key, KEYS[2] wait queue; ARGV[1] owner, ARGV[2] token, ARGV[3] the release
// broadcast channel, ARGV[4] the key. 1 released (the first listening waiter told, and the key
// announced to every watcher), 0 not the holder.
inline std::string redis_release_script() {
  return std::string(redis_wake_fn) +
         "if redis.call('GET', KEYS[1]) == ARGV[2] .. ':' .. ARGV[1] then\n"
         "  redis.call('DEL', KEYS[1])\n"
         "  wake(KEYS[2])\n"
         "  redis.call('PUBLISH', ARGV[3], ARGV[4])\n"
         "  return 1\n"
         "end\n"
         "return 0\n";
}

// KEYS[1] lease key, KEYS[2] wait queue; ARGV[1] "<channel> <wait id>", ARGV[2] grace (ms).
// -1 if the key is free (nothing queued); else queues the waiter and returns the holder's PTTL.
// The queue outlives its waiters by the grace, so abandoned queues vanish on their own.
inline constexpr const char* redis_wait_script =
    "local t = redis.call('PTTL', KEYS[1])\n"
    "if t < 0 then return -1 end\n"
    "redis.call('RPUSH', KEYS[2], ARGV[1])\n"
    "if redis.call('PTTL', KEYS[2]) < t + tonumber(ARGV[2]) then\n"
    "  redis.call('PEXPIRE', KEYS[2], t + tonumber(ARGV[2]))\n"
    "end\n"
    "return t\n";

// The acquire script whose busy answer also queues the caller, in the same step: KEYS[4] wait
// queue; ARGV[4] "<channel> <wait id>", ARGV[5] grace (ms). Busy and queued: -1 - holder's PTTL
// (<= -1); busy and not queued (a record without TTL): 0; a grant: the token, as acquire's.
inline std::string redis_acquire_queued_script() {
  std::string s = redis_acquire_script();
  const std::string busy = "  if string.sub(v, p + 1) ~= ARGV[1] then return 0 end\n";
  const std::string queued =
      "  if string.sub(v, p + 1) ~= ARGV[1] then\n"
      "    local t = redis.call('PTTL', KEYS[1])\n"
      "    if t < 0 then return 0 end\n"
      "    redis.call('RPUSH', KEYS[4], ARGV[4])\n"
      "    if redis.call('PTTL', KEYS[4]) < t + tonumber(ARGV[5]) then\n"
      "      redis.call('PEXPIRE', KEYS[4], t + tonumber(ARGV[5]))\n"
      "    end\n"
      "    return -1 - t\n"
      "  end\n";
  const std::size_t at = s.find(busy);
  if (at != std::string::npos) s.replace(at, busy.size(), queued);
  return s;
}

// KEYS[1] wait queue; ARGV[1] "<channel> <wait id>". Takes the entry out of the queue: 1 (it
// was still queued), or 0, in which case a release already chose this waiter, and the hand-off it
// is abandoning goes to the next listening waiter instead.
inline std::string redis_unwait_script() {
  return std::string(redis_wake_fn) +
         "if redis.call('LREM', KEYS[1], 1, ARGV[1]) == 1 then return 1 end\n"
         "wake(KEYS[1])\n"
         "return 0\n";
}

// KEYS[1] lease key. 0 when free, else {record, pttl}.
inline constexpr const char* redis_inspect_script =
    "local v = redis.call('GET', KEYS[1])\n"
    "if not v then return 0 end\n"
    "return {v, redis.call('PTTL', KEYS[1])}\n";

// KEYS[1] lease key, KEYS[2] counter; ARGV[1] owner, ARGV[2] token, ARGV[3] to. If the live record
// is <token>:<owner> (or already <to>:<owner>), re-labels it <to>:<owner> keeping its TTL and lifts
// the counter to >= to: 1. Otherwise 0 (lost).
inline std::string redis_raise_script() {
  return std::string(redis_older_fn) +
         "local v = redis.call('GET', KEYS[1])\n"
         "if v ~= ARGV[2] .. ':' .. ARGV[1] and v ~= ARGV[3] .. ':' .. ARGV[1] then return 0 end\n"
         "local c = redis.call('GET', KEYS[2])\n"
         "if c and not string.find(c, '^[1-9][0-9]*$') and c ~= '0' then\n"
         "  return redis.error_reply('HOLDFAST_CORRUPT token counter is not a token')\n"
         "end\n"
         "redis.call('SET', KEYS[1], ARGV[3] .. ':' .. ARGV[1], 'KEEPTTL')\n"
         "if not c or older(c, ARGV[3]) then redis.call('SET', KEYS[2], ARGV[3]) end\n"
         "return 1\n";
}

// KEYS[1] counter; ARGV[1] floor. Raises the counter to at least the floor; returns the counter.
inline std::string redis_advance_script() {
  return std::string(redis_older_fn) +
         "local c = redis.call('GET', KEYS[1])\n"
         "if c and not string.find(c, '^[1-9][0-9]*$') and c ~= '0' then\n"
         "  return redis.error_reply('HOLDFAST_CORRUPT token counter is not a token')\n"
         "end\n"
         "if not c or older(c, ARGV[1]) then redis.call('SET', KEYS[1], ARGV[1]) end\n"
         "return redis.call('GET', KEYS[1])\n";
}

// KEYS[1] fence key; ARGV[1] token, ARGV[2] owner, ARGV[3..] an optional command run only when
// admitted. The fence key holds "<token>:<owner>", the newest token admitted and the owner it was
// admitted for (a bare "<token>", the format before owners were kept, has none: an equal token is
// then refused, which is safe). Admits iff token > newest, or token == newest and owner is the one
// recorded: 1 admitted (and the command ran), 0 stale (older), 2 re-issued (equal token, another
// owner: the store lost grants and issued the token again). The command runs before the fence is
// raised, so a failing command leaves the fence as it was (a script's writes are not rolled back on
// error).
inline std::string redis_fence_script() {
  return std::string(redis_older_fn) +
         "local t, o = ARGV[1], ARGV[2]\n"
         "local f = redis.call('GET', KEYS[1])\n"
         "local same = false\n"
         "if f then\n"
         "  local ft, fo = f, nil\n"
         "  local p = string.find(f, ':', 1, true)\n"
         "  if p then ft, fo = string.sub(f, 1, p - 1), string.sub(f, p + 1) end\n"
         "  if not string.find(ft, '^[1-9][0-9]*$') then\n"
         "    return redis.error_reply('HOLDFAST_CORRUPT fence key does not hold a token')\n"
         "  end\n"
         "  if older(t, ft) then return 0 end\n"
         "  if ft == t then\n"
         "    if fo ~= o then return 2 end\n"
         "    same = true\n"
         "  end\n"
         "end\n"
         "if #ARGV > 2 then\n"
         "  local r = redis.pcall(unpack(ARGV, 3))\n"
         "  if type(r) == 'table' and r.err then\n"
         "    return redis.error_reply('HOLDFAST_COMMAND ' .. r.err)\n"
         "  end\n"
         "end\n"
         "if not same then redis.call('SET', KEYS[1], t .. ':' .. o) end\n"
         "return 1\n";
}

// wait_for_release_any (detail/redis_wait_any.hpp): KEYS[1..n] lease keys, KEYS[n+1..2n] their
// wait queues; ARGV[1] "<channel> <wait id>", ARGV[2] grace (ms). {i, -1} if key i (from 0) is
// free (nothing queued); else queues the waiter in every queue and returns {i, PTTL} of the key
// whose holder's lease ends first.
inline constexpr const char* redis_wait_any_script =
    "local n = #KEYS / 2\n"
    "local ts, m, mi = {}, -1, 0\n"
    "for i = 1, n do\n"
    "  local t = redis.call('PTTL', KEYS[i])\n"
    "  if t < 0 then return {i - 1, -1} end\n"
    "  ts[i] = t\n"
    "  if m < 0 or t < m then m, mi = t, i - 1 end\n"
    "end\n"
    "for i = 1, n do\n"
    "  local q, e = KEYS[n + i], ts[i] + tonumber(ARGV[2])\n"
    "  redis.call('RPUSH', q, ARGV[1])\n"
    "  if redis.call('PTTL', q) < e then redis.call('PEXPIRE', q, e) end\n"
    "end\n"
    "return {mi, m}\n";

// KEYS: wait queues; ARGV[1] "<channel> <wait id>", ARGV[2] "1" to keep one hand-off. Takes the
// entry out of every queue. A queue it had already left chose this waiter: with ARGV[2] = "1"
// the first such queue's index (from 0) is returned and its hand-off kept; every other one's goes
// to its next listening waiter. -1 if none was kept.
inline std::string redis_unwait_any_script() {
  return std::string(redis_wake_fn) +
         "local keep, got = ARGV[2] == '1', -1\n"
         "for i = 1, #KEYS do\n"
         "  if redis.call('LREM', KEYS[i], 1, ARGV[1]) == 0 then\n"
         "    if keep and got < 0 then got = i - 1 else wake(KEYS[i]) end\n"
         "  end\n"
         "end\n"
         "return got\n";
}

// try_acquire_all (detail/redis_multi.hpp): KEYS[1..n] lease keys, KEYS[n+1] counter, KEYS[n+2]
// its life record; ARGV as acquire's. Judges every key first and writes nothing unless all are
// free, expired or the owner's (a script's writes are not rolled back on error): integer 0 when
// busy; else the owner's keep their tokens and have their TTLs extended, the others get the next
// tokens (drawn by one INCRBY, which fails with nothing changed if they do not all fit), and the
// reply is the n tokens in key order. All keys must be in one slot (Redis Cluster): it is per slot.
inline std::string redis_acquire_all_script() {
  std::string life = redis_life_check;
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"KEYS[2]", "KEYS[n + 1]"},
                                 {"KEYS[3]", "KEYS[n + 2]"}}) {
    for (std::size_t at = life.find(from); at != std::string::npos; at = life.find(from, at)) {
      life.replace(at, from.size(), to);
    }
  }
  return "local n = #KEYS - 2\n"
         "local tok, fresh = {}, 0\n"
         "for i = 1, n do\n"
         "  local v = redis.call('GET', KEYS[i])\n"
         "  if v then\n"
         "    local p = string.find(v, ':', 1, true)\n"
         "    if not p or p == 1 then\n"
         "      return redis.error_reply('HOLDFAST_CORRUPT lease record is not <token>:<owner>')\n"
         "    end\n"
         "    if string.sub(v, p + 1) ~= ARGV[1] then return 0 end\n"
         "    tok[i] = string.sub(v, 1, p - 1)\n"
         "  else\n"
         "    fresh = fresh + 1\n"
         "  end\n"
         "end\n"
         "if fresh > 0 then\n" +
         life +
         "  local c = redis.pcall('INCRBY', KEYS[n + 1], fresh)\n"
         "  if type(c) == 'table' and c.err then\n"
         "    if string.find(c.err, 'overflow', 1, true) then\n"
         "      return redis.error_reply('HOLDFAST_EXHAUSTED the token counter is near 2^63-1')\n"
         "    end\n"
         "    return redis.error_reply('HOLDFAST_CORRUPT token counter: ' .. c.err)\n"
         "  end\n"
         "  if c < fresh then\n"
         "    return redis.error_reply('HOLDFAST_CORRUPT token counter is not positive')\n"
         "  end\n"
         // Below 2^53 the Lua number is exact: the tokens are c - fresh + 1 .. c. Above, the
         // counter goes back and each token is drawn by INCR and read back as a string.
         "  local big = c >= 9007199254740992\n"
         "  if big then redis.call('DECRBY', KEYS[n + 1], fresh) end\n"
         "  local last = c - fresh\n"
         "  for i = 1, n do\n"
         "    if not tok[i] then\n"
         "      local t\n"
         "      if big then\n"
         "        redis.call('INCR', KEYS[n + 1])\n"
         "        t = redis.call('GET', KEYS[n + 1])\n"
         "      else\n"
         "        last = last + 1\n"
         "        t = string.format('%d', last)\n"
         "      end\n"
         "      redis.call('SET', KEYS[i], t .. ':' .. ARGV[1], 'PX', ARGV[2])\n"
         "      tok[i] = t\n"
         "    elseif redis.call('PTTL', KEYS[i]) < tonumber(ARGV[2]) then\n"
         "      redis.call('PEXPIRE', KEYS[i], ARGV[2])\n"
         "    end\n"
         "  end\n"
         "else\n"
         "  for i = 1, n do\n"
         "    if redis.call('PTTL', KEYS[i]) < tonumber(ARGV[2]) then\n"
         "      redis.call('PEXPIRE', KEYS[i], ARGV[2])\n"
         "    end\n"
         "  end\n"
         "end\n"
         "return tok\n";
}

/// The index of each of redis_store's scripts on its connection, in the order
/// redis_store_scripts() lists them.
struct redis_script {
  enum : std::size_t {
    acquire,
    renew,
    release,
    inspect,
    advance,
    raise,
    wait,
    unwait,
    acquire_queued,
    wait_any,
    unwait_any,
    acquire_all
  };
};

/// redis_store's scripts, at the indices redis_script names.
inline std::vector<std::string> redis_store_scripts() {
  return {redis_acquire_script(), redis_renew_script,        redis_release_script(),
          redis_inspect_script,   redis_advance_script(),    redis_raise_script(),
          redis_wait_script,      redis_unwait_script(),     redis_acquire_queued_script(),
          redis_wait_any_script,  redis_unwait_any_script(), redis_acquire_all_script()};
}

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_DETAIL_REDIS_SCRIPTS_HPP
