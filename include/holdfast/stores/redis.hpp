// SPDX-License-Identifier: MIT
// holdfast/stores/redis.hpp - redis_store: a LeaseStore in Redis, and redis_fence: fenced writes
// that live in Redis. Opt-in: needs hiredis (link -lhiredis); nothing in the core includes it.
//
// Every operation is ONE round trip: a Lua script, loaded once per connection (SCRIPT LOAD),
// called by its SHA1 (EVALSHA), and loaded again if the server answers NOSCRIPT (after SCRIPT FLUSH
// or a failover). Redis runs a script atomically, so check, grant and token are one step:
//
//   script   | keys                  | does, atomically
//   ---------+-----------------------+---------------------------------------------------------
//   acquire  | lease key, counter    | free or expired: INCR the store-wide counter, SET the record
//            |                       |   "<token>:<owner>" with PX ttl, return the token;
//            |                       | same owner: keep the token, extend the TTL (never shorten);
//            |                       | other owner: busy
//   renew    | lease key             | record == "<token>:<owner>": PEXPIRE ttl, else lease_lost
//   release  | lease key             | record == "<token>:<owner>": DEL, else not_holder
//   inspect  | lease key             | GET + PTTL
//   fence    | fence key             | token > newest, or == newest and the same owner: run the
//            |                       |   caller's command, then SET "<token>:<owner>";
//            |                       |   older: stale_token; equal, other owner: token_reissued
// It avoids "SET NX PX, then INCR" (two round trips: a stalled acquirer gets a newer token than a
// holder granted after it; store.hpp, T1).
// Keys, owners and values are binary-safe bulk arguments (any bytes, NUL included, up to 512 MB),
// never spliced into a script. Tokens are decimal strings, never a Lua double, so exact over INCR's
// range 1 .. 2^63-1; a counter at 2^63-1 makes acquire report token_exhausted. Lost grants
// (DESIGN.md, "Lost grants"). The counter and the leases live in Redis' memory: with no persistence
// a restart loses them all; with `appendfsync everysec` a machine crash loses up to a second of
// them; a failover to an asynchronous replica loses what it had not received. A store that lost
// grants re-issues tokens, most likely the very token a fence admitted last, so safety never rests
// on it not happening: the fences admit by (token, owner) and refuse an equal token from another
// owner (token_reissued). Two things make it rarer and recover from it:
//   - wait_replicas (redis_options): a grant is reported only once that many replicas
//     acknowledged it (WAIT, one more round trip); one not acknowledged within wait_timeout (or
//     the deadline of try_acquire_until: store_deadline.hpp) is given back and reported as
//     grant_not_durable (timeout, an error that may hide a grant, if the release failed). With
//     Sentinel, which promotes the most advanced replica, a failover then keeps every grant
//     reported.
//   - Lives: every connect reads the server's life, "<run_id>/<master_replid>" (new on a restart
//     or a promotion); a grant by a life other than the one recorded beside the counter
//     (redis_options::life_key()) first raises the counter by 2^32 in the same script, so its
//     tokens pass all the old life issued (unless it lost over 2^32 grants) and fences admit new
//     holders without an operator; so does a promoted replica without a record (master_replid2
//     set). A restart without persistence cannot tell: tokens restart at 1, raise_token_floor().
// deployment() reports what the server runs with (deployment.hpp). Through Sentinel
// (redis_options::sentinels) every (re)connect asks the sentinels for the primary and checks ROLE;
// READONLY (a demoted primary) and, with wait_replicas, a WAIT shortfall drop the connection, so
// the next call asks again; and every sentinel_recheck (1 s) a call asks whether the sentinels
// still name this primary (a replaced one serves until demoted; its grants are lost, refused).
// Expiry is judged by the Redis server's clock (T2), and a grant lasts at least its TTL in real
// time as T2 asks: TTLs go to Redis in whole milliseconds (PX / PEXPIRE, never rounded to seconds),
// Redis stores the expiry as its millisecond clock (read rounded down) + ttl, and treats a key as
// expired only once that clock is strictly *past* it (db.c keyIsExpired: now > when), i.e. at read
// + ttl + 1 ms, one whole tick later. Connection: TCP or a Unix socket, connect and command
// timeouts, AUTH (password or ACL user + password), SELECT, CLIENT SETNAME. No TLS: the hiredis
// 0.14 that Debian 12 ships has none; tunnel (stunnel, spiped) or use a newer hiredis with a socket
// you secure yourself. Standalone Redis (or a Sentinel-managed primary) only: keys share one slot
// (a `{holdfast}` hash tag); Redis Cluster is redis_cluster_store (redis_cluster.hpp). Writes use
// send(MSG_NOSIGNAL): a closed connection is an error, never SIGPIPE (as hiredis' write() is).
// Split send/receive (send_receive.hpp): send(), interest(), progress() and receive() run the same
// scripts on the store's own connection without blocking, so one thread can have requests to many
// Redis servers in flight and poll() their sockets together (quorum_store does). The request is
// written with send(MSG_DONTWAIT) and the reply read with recv(MSG_DONTWAIT) into the context's
// hiredis reader; receive() waits at most command_timeout from send(). send() declines rather than
// block when the connection is not open (connecting blocks) or another split request is in flight;
// the store's blocking operations wait until the split request in flight has been received.
// Failures (T4): a dropped connection, a refused connect, a timeout or a server that is not serving
// (LOADING, BUSY, through Sentinel READONLY or ROLE not primary, ...) is an error, never a grant;
// without Sentinel a replica at host/port is misconfigured (redis_options::host). The connection
// is dropped and re-established by the next call; the failed call itself is never retried (its
// script may or may not have run, so a retry could only guess). Texts: last_error_message().
// renew_batch() renews many leases in one pipelined round trip (the keepalive's batch path).
// Include this header; internals: detail/redis_*.hpp, each opening with what it holds.
#ifndef HOLDFAST_STORES_REDIS_HPP
#define HOLDFAST_STORES_REDIS_HPP

#include <hiredis/hiredis.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>

#include "holdfast/deployment.hpp"
#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/result.hpp"
#include "holdfast/send_receive.hpp"
#include "holdfast/store.hpp"
#include "holdfast/stores/detail/link_client.hpp"
#include "holdfast/stores/detail/redis_batch.hpp"
#include "holdfast/stores/detail/redis_link.hpp"
#include "holdfast/stores/detail/redis_multi.hpp"
#include "holdfast/stores/detail/redis_requests.hpp"
#include "holdfast/stores/detail/redis_resp.hpp"
#include "holdfast/stores/detail/redis_scripts.hpp"
#include "holdfast/stores/detail/redis_shared.hpp"
#include "holdfast/stores/detail/redis_wait_any.hpp"
#include "holdfast/stores/redis_fence.hpp"
#include "holdfast/stores/redis_options.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

/// A LeaseStore in a Redis server, over one hiredis connection (file overview: scripts,
/// durability, failures), with inspect(), the token floor, send/receive, renew_batch,
/// try_acquire_all and read-write grants (try_acquire_rw etc.: detail/redis_shared.hpp).
/// Tokens are store-wide (one INCR counter per store configuration): every new grant of any key
/// carries a token greater than every token the counter issued before, in 1 .. 2^63-1.
/// Differences from memory_store: releasing a lease that has already expired reports not_holder
/// (Redis deleted the record at expiry); the granted TTL is exactly the one asked for.
/// Thread-safety: every member function may be called concurrently; one mutex serializes the
/// connection (a hiredis context is single-threaded), so concurrent callers take turns, one round
/// trip each. For parallel round trips, use one redis_store per thread. Not fork-safe: a child
/// process makes its own store. Connects lazily on first use (or connect()).
class redis_store : public detail::link_client<detail::redis_link>,
                    public detail::redis_shared<redis_store> {
 public:
  // connect(), options(), last_error_message() (the latest call's failure): detail::link_client.

  /// Makes a store for the server in `opts`; connects on first use. Never throws on its own.
  explicit redis_store(const redis_options& opts = {})
      : link_client(std::in_place, opts, detail::redis_scripts_with_rw()),
        wait_(std::make_unique<detail::redis_waiting>(opts)) {
    link_.enable_probe();
    link_.refuse_replicas();
  }

  redis_store(const redis_store&) = delete;
  redis_store& operator=(const redis_store&) = delete;

  /// Grants `key` to `owner` for `ttl` (ms) iff it has no unexpired lease, with the next token of
  /// the store-wide counter, in one round trip. The same owner re-acquiring its live lease gets the
  /// same token back and its TTL extended to at least `ttl` from now (never shortened).
  /// \returns the grant {token, ttl}; errc::busy if another owner holds a live lease;
  ///   errc::invalid_argument for an empty key/owner or ttl not in (0, max_ttl];
  ///   errc::token_exhausted if the counter is at 2^63-1; errc::store_unavailable or
  ///   errc::timeout if the server is unreachable, not serving, or too slow (no grant is
  ///   reported; one may exist in Redis and simply expires), also when the server is not the
  ///   primary (ROLE, READONLY) or began a new life under the connection (the next call
  ///   reconnects); errc::grant_not_durable if wait_replicas > 0 and fewer replicas acknowledged
  ///   the grant within wait_timeout (it was given back); errc::protocol_error for a reply
  ///   of the wrong shape or a key holding something holdfast did not write.
  result<grant> try_acquire(std::string_view key, std::string_view owner,
                            std::chrono::milliseconds ttl) {
    return run({store_op::try_acquire, key, owner, {}, {}, ttl}).granted;
  }

  /// try_acquire, answered by `deadline` (store_deadline.hpp, D1-D2): the connect, the script's
  /// round trip and WAIT (wait_timeout) are each capped by the time left, so a shortfall shows
  /// by the deadline and its grant is given back (grant_not_durable), the release bounded by
  /// store_call_floor. A script whose reply did not come by the deadline drops the connection:
  /// errc::timeout, which may hide a grant (the caller gives back, T1). \returns as try_acquire.
  result<grant> try_acquire_until(std::string_view key, std::string_view owner,
                                  std::chrono::milliseconds ttl,
                                  const std::chrono::steady_clock::time_point& deadline) {
    const detail::call_bound bound(deadline);
    return try_acquire(key, owner, ttl);
  }

  /// Extends the lease on `key` to `ttl` (ms) from now iff `owner` holds it with `token` and it
  /// has not expired, in one round trip. \returns the grant (same token); errc::lease_lost if the
  ///   key is free, expired or held by another owner or token; errc::grant_not_durable if
  ///   wait_replicas > 0 and too few replicas acknowledged the extension in time (the lease
  ///   stays, its holder trusts only the last acknowledged grant); errc::invalid_argument (see
  ///   check_renew_args); store_unavailable, timeout, protocol_error as for try_acquire.
  result<grant> renew(std::string_view key, std::string_view owner, fencing_token token,
                      std::chrono::milliseconds ttl) {
    return run({store_op::renew, key, owner, token, {}, ttl}).granted;
  }

  /// Renews q[0..n) (renew requests), out[i] as renew() would answer q[i], in ONE pipelined round
  /// trip (keepalive's batch path; detail/redis_batch.hpp). Thread-safety: as renew().
  void renew_batch(const store_request* q, std::size_t n, result<grant>* out) {
    const bool each = link_.options().wait_replicas > 0;  // WAIT after each grant
    for (std::size_t i = 0; each && i < n; ++i) out[i] = run(q[i]).granted;
    if (each) return;
    auto guard = link_.lock();
    detail::redis_renew_batch(link_, requests_, q, n, out);
  }

  /// Deletes the lease on `key` iff `owner` holds it with `token`, in one round trip. If the
  /// connection (open since an earlier call) turns out to have been dropped, it reconnects and
  /// sends the release once more (two round trips and a connect).
  /// \returns success; errc::not_holder if the key is free, expired, or held by another owner or
  ///   token; invalid_argument (check_release_args); store_unavailable, timeout, protocol_error.
  result<void> release(std::string_view key, std::string_view owner, fencing_token token) {
    const store_request q{store_op::release, key, owner, token, {}, {}};
    if (std::error_code ec = check(q)) return ec;
    auto guard = link_.lock();
    const detail::redis_call call = prepare(q);
    // A holder's last call: sent once more after an idle drop (detail/redis_link.hpp).
    result<detail::redis_reply_ptr> r =
        detail::redis_send_last_call(link_, [&] { return eval(call); });
    return detail::read_redis_release(link_, std::move(r));
  }

  /// Grants every key of `keys[0..count)` to `owner` for `ttl` (ms) in one script, or none
  /// (store.hpp's try_acquire_all; detail/redis_multi.hpp). \returns success; errc::busy if any
  /// key is held by another (nothing changed); errc::invalid_argument for count 0, a repeated key
  /// or input try_acquire refuses; else as try_acquire (grant_not_durable: all given back).
  result<void> try_acquire_all(const std::string_view* keys, std::size_t count,
                               std::string_view owner, std::chrono::milliseconds ttl,
                               grant* grants) {
    return detail::redis_acquire_all(link_, requests_, wait_->broadcast,
                                     {keys, count, owner, ttl, grants});
  }

  /// Returns the live lease on `key` (owner, token, time left by Redis' clock in ms), or nullopt.
  /// \returns errc::invalid_argument for an empty key; store_unavailable, timeout; protocol_error
  ///   for a record holdfast did not write (or one without a TTL).
  result<std::optional<lease_record>> inspect(std::string_view key) {
    return run({store_op::inspect, key, {}, {}, {}, {}}).record;
  }

  /// Returns what this store read about its deployment at its most recent (re)connect
  /// (deployment.hpp): the ways it can lose grants (no AOF, appendfsync not always, replicas
  /// without wait_replicas), the facts read (ROLE, INFO, CONFIG GET appendfsync) and the
  /// server's life "<run_id>/<master_replid>". Connects first if not connected.
  /// \returns the report; store_unavailable (also: the server is not the primary), timeout.
  result<deployment_report> deployment() {
    auto guard = link_.lock();
    if (std::error_code ec = link_.ensure_connected()) return ec;
    return link_.report();
  }

  /// Returns the newest token the counter has issued (none if it has issued none).
  /// \returns store_unavailable, timeout; protocol_error if the counter holds no token.
  result<fencing_token> last_token() {
    auto guard = link_.lock();
    return link_.get_token(link_.options().counter_key, "redis: the token counter holds no token");
  }

  /// Raises the token counter to at least `floor` (never lowers it), atomically, so every later
  /// grant carries a token above `floor`; live leases keep theirs. Use it after a restart that
  /// lost the counter and its life record (no persistence): pass the newest token any fence
  /// downstream admitted, and new holders get past the fences again (a failover to a lagging
  /// replica or a crash inside the fsync window needs no operator: the new life raises the
  /// counter itself, see the file overview). It is also the token-floor capability quorum_store
  /// uses for recovery (see quorum.hpp).
  /// \returns success; errc::invalid_argument unless `floor` is in [1, 2^63-1];
  ///   store_unavailable, timeout, protocol_error.
  result<void> raise_token_floor(fencing_token floor) {
    return run({store_op::raise_token_floor, {}, {}, floor, {}, {}}).done;
  }

  /// Re-labels the live lease `owner` holds on `key` with `token` (or already with `to`) with the
  /// greater token `to`, keeping its TTL, and lifts the counter to at least `to`, in one script:
  /// the token-floor capability quorum_store needs from its members, so that a quorum of Redis
  /// servers hands out strictly increasing tokens (quorum.hpp has the argument).
  /// \returns success; errc::lease_lost if the key is free, expired, or held by another owner or
  ///   token; errc::invalid_argument for an empty key or owner, `token` or `to` not issuable,
  ///   `to` < `token` or `to` > 2^63-1; store_unavailable, timeout, protocol_error.
  result<void> raise_token(std::string_view key, std::string_view owner, fencing_token token,
                           fencing_token to) {
    return run({store_op::raise_token, key, owner, token, to, {}}).done;
  }

  // ---- Split send/receive (send_receive.hpp): requests in flight from one thread --------------

  /// Starts `request` on this store's own connection without blocking (the send half of the
  /// send/receive capability; see send_receive.hpp): formats it and writes what the socket takes.
  /// Bad arguments are accepted and reported by receive(), as the blocking operation would.
  /// \returns a zero code once accepted: exactly one receive() must follow (until then the
  ///   blocking operations of this store wait); send_would_block() if the store cannot start it
  ///   without blocking: not connected yet (connecting blocks; call connect() or any blocking
  ///   operation first) or another split request in flight. Never blocks.
  /// Thread-safety: as the other operations; the calls of one request may come from different
  /// threads, one at a time.
  std::error_code send(const store_request& request) {
    auto guard = link_.lock_raw();
    if (link_.in_flight() || !link_.connected()) return send_would_block();
    // Only what reading the reply needs: the request's key and owner may be gone by receive().
    pending_ = store_request{request.op, {}, {}, request.token, request.to, request.ttl};
    // By name: a grant WAIT finds short is given back; a release met by an idle drop is resent.
    if (link_.options().wait_replicas > 0 || request.op == store_op::release) {
      pending_key_.assign(request.key.data(), request.key.size());
      pending_owner_.assign(request.owner.data(), request.owner.size());
    }
    if (std::error_code bad = detail::check_redis_request(request)) {
      link_.start_failed(bad);
      return {};
    }
    const detail::redis_call c = prepare(request);
    link_.start(c.script, c.keys, c.nkeys, c.args, c.nargs);
    return {};
  }

  /// Returns what the request in flight waits for: the connection's socket, to be polled for
  /// reading or writing; fd -1 if none is in flight or its reply is complete. Never blocks.
  [[nodiscard]] io_interest interest() const {
    auto guard = link_.lock_raw();
    return link_.interest();
  }

  /// Writes the rest of the request in flight and reads what has arrived, without blocking.
  /// \returns true once receive() will not block (the reply is in, or the request failed).
  bool progress() {
    auto guard = link_.lock_raw();
    return !link_.in_flight() || link_.pump();
  }

  /// Returns the reply to the request in flight, in the field its operation names (see
  /// store_reply), exactly as the blocking operation reports it; waits for it, if it is not in
  /// yet, until command_timeout has passed since send() (then errc::timeout and the connection
  /// is dropped). Frees the connection. No request in flight: every field is invalid_argument.
  /// A release that met a connection dropped while idle is sent once more, as release() does.
  store_reply receive() {
    auto guard = link_.lock_raw();
    store_reply out;
    if (!link_.in_flight()) {
      out.granted = errc::invalid_argument;
      out.done = errc::invalid_argument;
      out.record = errc::invalid_argument;
      return out;
    }
    result<detail::redis_reply_ptr> r = link_.finish();
    if (detail::redis_split_resend_last_call(pending_.op, r, link_)) {
      // A release on a connection dropped while idle never got through: sent once more, as
      // release() does (detail/redis_link.hpp), rather than leave the grant to its TTL.
      r = eval(prepare({store_op::release, pending_key_, pending_owner_, pending_.token, {}, {}}));
    }
    detail::read_redis_reply(link_, pending_, std::move(r), out);
    acknowledge(pending_.op, pending_key_, pending_owner_, out.granted);  // blocks for WAIT
    return out;
  }

  /// try_acquire, and when the key is busy, also queues the calling thread for its next
  /// wait_for_release(key, ...) on this store, in the same script and round trip (store.hpp's
  /// try_acquire_queued capability; blocking acquire() uses it, so joining the queue costs no
  /// request of its own). A thread holds at most one such place: queuing again first takes the
  /// old place out (and passes on a hand-off it was chosen for). If the notification connection
  /// cannot be set up, it answers as try_acquire does and queues nothing.
  /// \returns as try_acquire().
  result<grant> try_acquire_queued(std::string_view key, std::string_view owner,
                                   std::chrono::milliseconds ttl) {
    if (std::error_code ec = check({store_op::try_acquire, key, owner, {}, {}, ttl})) return ec;
    detail::redis_waiting& w = *wait_;
    std::uint64_t id;
    std::optional<detail::redis_waiting::ticket> stale;
    {
      std::lock_guard<std::mutex> lk(w.mu);
      if (!w.reading && w.subscribe()) return try_acquire(key, owner, ttl);
      stale = w.take_ticket();
      if (stale) w.retire(stale->id);
      id = ++w.seq;
      w.active.insert(id);
    }
    if (stale) dequeue(stale->key, stale->entry);
    detail::redis_waiting::ticket mine;
    mine.key.assign(key.data(), key.size());
    mine.entry = w.channel + " " + std::to_string(id);
    mine.id = id;
    mine.start = std::chrono::steady_clock::now();  // before the request leaves
    result<detail::redis_reply_ptr> r = [&] {
      auto guard = link_.lock();
      const redis_options& o = link_.options();
      if (std::error_code ec = link_.ensure_connected()) {
        return result<detail::redis_reply_ptr>(ec);  // life() is read at connect
      }
      const std::string_view keys[] = {requests_.lease_key(o, key), o.counter_key,
                                       requests_.life_key(o), requests_.queue_key(o, key)};
      const std::string_view args[] = {owner, requests_.ttl(ttl), link_.life(), mine.entry,
                                       "60000"};
      return link_.eval(detail::redis_script::acquire_queued, keys, 4, args, 5);
    }();
    if (r && (*r)->type == REDIS_REPLY_INTEGER && (*r)->integer < 0) {
      mine.pttl = -1 - (*r)->integer;
      std::lock_guard<std::mutex> lk(w.mu);
      w.tickets[std::this_thread::get_id()] = std::move(mine);
      return errc::busy;
    }
    {
      std::lock_guard<std::mutex> lk(w.mu);
      w.retire(id);
    }
    // The script may have queued this thread although its reply was lost (a timeout, a dropped
    // connection): take the entry out, so no release hands the key to a waiter that is not there.
    if (!r) dequeue(key, mine.entry);
    auto guard = link_.lock_quiet();  // the same call: keeps its text
    result<grant> granted = detail::read_redis_acquire(link_, std::move(r), ttl);
    acknowledge(store_op::try_acquire, key, owner, granted);
    return granted;
  }

  /// try_acquire_queued, answered by `deadline` as try_acquire_until is (store_deadline.hpp).
  result<grant> try_acquire_queued_until(std::string_view key, std::string_view owner,
                                         std::chrono::milliseconds ttl,
                                         const std::chrono::steady_clock::time_point& deadline) {
    const detail::call_bound bound(deadline);
    return try_acquire_queued(key, owner, ttl);
  }

  /// Takes the calling thread's place in a wait queue (taken by try_acquire_queued) out again,
  /// for a caller that will not wait after all (store.hpp's leave_queue capability): one request
  /// if it holds a place, none otherwise. If a release already chose it, that hand-off goes to
  /// the next listening waiter. `key` names the queue the caller meant to wait in; a place in
  /// another key's queue is left too. Best effort: the queue's TTL cleans up what a lost request
  /// leaves. \returns success; errc::invalid_argument for an empty key.
  result<void> leave_queue(std::string_view key) {
    if (std::error_code ec = check({store_op::inspect, key, {}, {}, {}, {}})) return ec;
    detail::redis_waiting& w = *wait_;
    std::optional<detail::redis_waiting::ticket> mine;
    {
      std::lock_guard<std::mutex> lk(w.mu);
      mine = w.take_ticket();
      if (mine) w.retire(mine->id);
    }
    if (mine) dequeue(mine->key, mine->entry);
    return {};
  }

  /// Blocks until `key` may be free, without polling (store.hpp's wait_for_release capability,
  /// used by blocking acquire()): queues this waiter behind the holder in one script (which also
  /// reads the holder's PTTL), then sleeps on this store's notification connection until a
  /// release chooses it (the release script pops the first listening waiter and PUBLISHes to its
  /// channel: one waiter woken per release, in the order they queued), until the holder's lease
  /// can have expired (PTTL + 1 ms after the request left, by this process's steady clock),
  /// until `deadline`, or until `cancel` is stopped (its wake-up ends the poll through a
  /// self-pipe, never calling hiredis), whichever comes first. Returns at once if the key is free.
  ///
  /// Notifications are hints: a lost message (an expiry, a release by a script that does not
  /// notify) costs the wait until the holder's expiry, never more; the store stays the judge (the
  /// waiter asks try_acquire next). A notification connection that dies under a waiter ends its
  /// wait at once (it returns success, unwoken): its caller asks again and queues on a fresh
  /// subscription, so the next release still wakes it. A waiter that leaves unwoken or cancelled
  /// takes its entry out of the queue, and if a release had already chosen it, passes that
  /// hand-off on to the next waiter. Requests: one to queue, none while asleep, one more to leave.
  /// The queue key expires 60 s after the holder's PTTL at queueing time, so abandoned queues
  /// vanish on their own.
  ///
  /// Thread-safety: any number of threads may wait on one store at once; one of them reads the
  /// notification connection at a time and files what arrives for the others.
  /// \returns success (woken for any of the reasons above); errc::cancelled once `cancel` was
  ///   stopped; errc::invalid_argument for an empty key; store_unavailable, timeout,
  ///   protocol_error if queueing or subscribing failed (the caller falls back to backoff).
  result<void> wait_for_release(std::string_view key,
                                const std::chrono::steady_clock::time_point& deadline,
                                const cancel_token& cancel = {}) {
    if (std::error_code ec = check({store_op::inspect, key, {}, {}, {}, {}})) return ec;
    detail::redis_waiting& w = *wait_;
    cancel_token::waker stop;  // before any lock: the wake-up takes w.mu
    w.wake_on_stop(stop, cancel);
    std::uint64_t id = 0;
    std::string entry;
    std::chrono::steady_clock::time_point start{};
    std::optional<result<long long>> queued;  // set when try_acquire_queued queued this thread
    std::optional<detail::redis_waiting::ticket> stale;
    {
      std::unique_lock<std::mutex> lk(w.mu);
      if (std::optional<detail::redis_waiting::ticket> t = w.take_ticket()) {
        if (t->key == key) {
          id = t->id;
          entry = std::move(t->entry);
          start = t->start;
          queued = t->pttl;
        } else {
          stale = std::move(t);
          w.retire(stale->id);
        }
      }
      if (!queued) {
        if (!w.reading) {
          if (std::error_code ec = w.subscribe()) return ec;
        }
        id = ++w.seq;
        w.active.insert(id);
      }
    }
    if (stale) dequeue(stale->key, stale->entry);
    if (!queued) {
      entry = w.channel + " " + std::to_string(id);
      start = std::chrono::steady_clock::now();  // before the request leaves
    }
    result<long long> pttl = queued ? *queued : enqueue(key, entry);
    bool woken = false;
    if (pttl && *pttl >= 0) {
      auto wake = start + std::chrono::milliseconds(*pttl + 1);
      if (deadline < wake) wake = deadline;
      std::unique_lock<std::mutex> lk(w.mu);
      // A dead notification connection ends the wait early (false): the caller asks again and
      // queues on a fresh subscription, so the next release still wakes it at once.
      (void)w.sleep_on(
          lk, wake, [&] { return (woken = w.arrived.erase(id) != 0) || cancel.stop_requested(); });
    }
    {
      std::lock_guard<std::mutex> lk(w.mu);
      w.retire(id);
    }
    if (!pttl) return pttl.error();
    const bool cancelled = cancel.stop_requested();
    if (*pttl >= 0 && (!woken || cancelled)) dequeue(key, entry);  // passes on a hand-off
    if (cancelled) return errc::cancelled;
    return {};
  }

  /// Blocks until `key` may have changed hands, for observers (election::next_leader): like
  /// wait_for_release, but takes no place in the hand-off queue, so it never takes a release away
  /// from a waiting acquirer. Every release script also PUBLISHes the key on the broadcast channel
  /// wait_prefix + "released", to which the first watch subscribes this store's notification
  /// connection (before its inspect; a store that only acquires never hears every release);
  /// every watcher of the key wakes. Sleeps until such an announcement, the holder's expiry (its
  /// time left, read by inspect(), + 1 ms after the request left), or `deadline`; at once if the
  /// key is free or not held under `known` (if given: the holder read before is gone). One
  /// inspect. A lost announcement costs the wait until the holder's expiry, never more. A stop of
  /// `cancel` ends it as it ends wait_for_release. Thread-safety as wait_for_release. \returns
  ///   success; errc::cancelled; invalid_argument (empty key); errors of inspect(), SUBSCRIBE.
  result<void> watch_release(std::string_view key,
                             const std::chrono::steady_clock::time_point& deadline,
                             const cancel_token& cancel = {}, fencing_token known = {}) {
    if (std::error_code ec = check({store_op::inspect, key, {}, {}, {}, {}})) return ec;
    return detail::redis_watch_release(*this, *wait_, key, deadline, cancel, known);
  }

  /// Waits for a release of any of `keys` (store.hpp's wait_for_release_any; semaphore.hpp): one
  /// script queues, one leaves (detail/redis_wait_any.hpp). \returns as store.hpp says.
  result<std::size_t> wait_for_release_any(const std::vector<std::string>& keys,
                                           const std::chrono::steady_clock::time_point& deadline,
                                           const cancel_token& cancel = {}) {
    return detail::redis_wait_any(link_, *wait_, keys, deadline, cancel);
  }

 private:
  // The whole of each one-round-trip operation: checks `q` (check(): every entry point's check,
  // detail::refuse_redis_request), runs it as one script call under the link's lock, and reads
  // the reply into the field of the store_reply its operation names (as send() and receive()).
  store_reply run(const store_request& q) {
    store_reply out;
    if (std::error_code bad = check(q)) {
      out.granted = bad;
      out.done = bad;
      out.record = bad;
      return out;
    }
    auto guard = link_.lock();
    // Connected before the call is prepared: an acquire carries the life read at connect.
    if (std::error_code ec = link_.ensure_connected()) {
      out.granted = ec;
      out.done = ec;
      out.record = ec;
      return out;
    }
    detail::read_redis_reply(link_, q, eval(prepare(q)), out);
    acknowledge(q.op, q.key, q.owner, out.granted);
    return out;
  }

  std::error_code check(const store_request& q) { return detail::refuse_redis_request(link_, q); }

  // [link locked] With wait_replicas > 0, WAIT for the replicas after a granting acquire or
  // renew; a grant too few acknowledged is given back (detail/redis_multi.hpp, which says how).
  void acknowledge(store_op op, std::string_view key, std::string_view owner,
                   result<grant>& granted) {
    if (!granted || (op != store_op::try_acquire && op != store_op::renew)) return;
    if (std::error_code ec =
            detail::redis_acknowledge(link_, requests_, wait_->broadcast,
                                      op == store_op::try_acquire, &key, 1, owner, &*granted)) {
      granted = ec;
    }
  }

  // [link locked] The script call that performs `q`; valid until the next prepare.
  detail::redis_call prepare(const store_request& q) {
    return requests_.prepare(link_.options(), wait_->broadcast, link_.life(), q);
  }

  // [link locked]
  result<detail::redis_reply_ptr> eval(const detail::redis_call& c) {
    return link_.eval(c.script, c.keys, c.nkeys, c.args, c.nargs);
  }

  // Queues `entry` behind `key`'s holder; takes it out (detail/redis_waiting.hpp).
  result<long long> enqueue(std::string_view key, const std::string& entry) {
    return detail::redis_enqueue(link_, requests_, key, entry);
  }
  void dequeue(std::string_view key, const std::string& entry) {
    detail::redis_dequeue(link_, requests_, key, entry);
  }

  friend class detail::redis_shared<redis_store>;  // try_acquire_rw, renew_rw, release_rw
  std::unique_ptr<detail::redis_waiting> wait_;
  detail::redis_requests requests_;  // guarded by the link's mutex
  // What receive() needs of the split request in flight (guarded by the link's mutex); its key
  // and owner only with wait_replicas > 0.
  store_request pending_{};
  std::string pending_key_;
  std::string pending_owner_;
};

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_REDIS_HPP
