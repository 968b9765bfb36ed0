// SPDX-License-Identifier: MIT
// holdfast/stores/redis_cluster.hpp - redis_cluster_store: a LeaseStore in a Redis Cluster (Redis
// 7), keys spread over the cluster's slots. Opt-in: needs hiredis (link -lhiredis).
//
// Every operation is ONE script on ONE primary, the same Lua scripts as redis_store's
// (stores/redis.hpp has the table), so check, grant and token stay one atomic step. What a script
// touches lives in one slot, the slot of the lease's key (detail/redis_slots.hpp names them):
//
//   key            | name (defaults)                   | what
//   ---------------+-----------------------------------+---------------------------------------
//   lease record   | holdfast:lease:{<key>}            | "<token>:<owner>" with PX ttl
//   token counter  | holdfast:token:{<tag of the slot>}| INCR'd by every new grant in the slot
//   its life       | holdfast:token:{<tag>}:life       | the server life that last issued from it
//
// so no script ever touches two slots and CROSSSLOT cannot happen. A key holding '{' or '}' gets
// a hashed tag instead of itself (its bytes stay in the name), so any byte string is a key.
//
// Tokens (T1 per key, bounded memory): one counter per slot, not per key: at most 16384 counters
// whatever the number of keys ever used, and every new grant of a key takes the next value of its
// slot's counter, so a key's tokens strictly increase. Tokens are NOT store-wide (two keys in two
// slots may get equal tokens): a fence must be per key (keyed_fence_gate, or one fence per
// resource), which is what a fence over one resource is anyway. The counter lives in the key's
// slot, so a slot migration (CLUSTER SETSLOT / MIGRATE, `redis-cli --cluster reshard`) moves it
// with the records: Redis refuses (TRYAGAIN) a multi-key script on a migrating slot unless every
// key it names is on the node, so no grant runs beside a counter that has moved away. The target
// node is another server life: its first grant in the slot raises the counter by 2^32 (the life
// check of redis_store), which keeps tokens increasing; the same rule covers a failover to a
// replica that lost the newest grants (DESIGN.md "Lost grants", issue #20). wait_replicas works as
// on redis_store: a grant is reported only once that many replicas of its primary acknowledged
// it (WAIT), else it is given back and reported as grant_not_durable.
//
// Routing: the slot map comes from CLUSTER SLOTS (asked of any node we know, seeds last), read at
// the first call and again after any failure that can mean the map changed (a dropped or refused
// connection, a timeout, CLUSTERDOWN, a node that is no longer a primary). A MOVED answer
// refreshes the map and the call is sent once more, to the node MOVED named; an ASK answer sends
// it once to the named node, after ASKING, without changing the map; TRYAGAIN (a migration in
// progress) sends it again every 10 ms until command_timeout has passed since the call began,
// then reports store_unavailable. All three mean the script did not run, so resending is safe;
// so does a release's failure on a connection dropped while idle, sent once more as redis_store's
// (detail/redis_link.hpp); no other failure is ever resent (a script that may have run is never
// retried, as in redis_store).
//
// Waiting (wait_for_release, watch_release): sharded pub/sub on a channel in the key's slot
// (detail/redis_cluster_waiting.hpp); the release script SPUBLISHes to it. try_acquire_all: one
// script when every key shares a slot (hash tags), refused otherwise. raise_token_floor: every
// slot's counter. Split send/receive (a quorum_store of cluster stores fans out on one thread):
// on the key's primary's connection, a redirection followed by the blocking path
// (detail/redis_cluster_split.hpp). Not here: fences in the cluster (use keyed_fence_gate).
#ifndef HOLDFAST_STORES_REDIS_CLUSTER_HPP
#define HOLDFAST_STORES_REDIS_CLUSTER_HPP

#include <hiredis/hiredis.h>

#include <array>
#include <chrono>
#include <condition_variable>
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
#include <vector>

#include "holdfast/cancel.hpp"
#include "holdfast/deployment.hpp"
#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/result.hpp"
#include "holdfast/send_receive.hpp"
#include "holdfast/store.hpp"
#include "holdfast/stores/detail/redis_cluster_multi.hpp"
#include "holdfast/stores/detail/redis_cluster_split.hpp"
#include "holdfast/stores/detail/redis_cluster_waiting.hpp"
#include "holdfast/stores/detail/redis_connection.hpp"
#include "holdfast/stores/detail/redis_link.hpp"
#include "holdfast/stores/detail/redis_requests.hpp"
#include "holdfast/stores/detail/redis_resp.hpp"
#include "holdfast/stores/detail/redis_scripts.hpp"
#include "holdfast/stores/detail/redis_slots.hpp"
#include "holdfast/stores/redis_cluster_options.hpp"
#include "holdfast/stores/redis_options.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

/// A LeaseStore in a Redis Cluster (see the file overview for key placement, tokens, routing and
/// failover). Models LeaseStore with inspect(). Tokens increase per key, not store-wide.
/// Thread-safety: every member function may be called concurrently; one mutex serializes the
/// store (its connections to the primaries and its slot map), so concurrent callers take turns,
/// one round trip each. For parallel round trips, use one store per thread. Not fork-safe.
/// Connects lazily on first use (or connect()).
class redis_cluster_store {
 public:
  /// Makes a store for the cluster in `opts`; connects on first use. Never throws on its own.
  explicit redis_cluster_store(redis_cluster_options opts = {}) : opts_(std::move(opts)) {
    slots_.fill(-1);
  }
  redis_cluster_store(const redis_cluster_store&) = delete;
  redis_cluster_store& operator=(const redis_cluster_store&) = delete;

  /// Grants `key` to `owner` for `ttl` (ms) iff it has no unexpired lease, with the next token of
  /// its slot's counter, in one script on the key's primary. Same owner: same token, TTL extended
  /// (never shortened), as redis_store. \returns the grant; errc::busy; errc::invalid_argument
  ///   (bad arguments or options); errc::token_exhausted; errc::store_unavailable or errc::timeout
  ///   (unreachable, not serving, CLUSTERDOWN, a migration that outlasted command_timeout);
  ///   errc::grant_not_durable (wait_replicas, given back); errc::protocol_error.
  result<grant> try_acquire(std::string_view key, std::string_view owner,
                            std::chrono::milliseconds ttl) {
    if (std::error_code ec = check({store_op::try_acquire, key, owner, {}, {}, ttl})) return ec;
    auto lk = lock();
    name_keys(key);
    const std::string ttl_text = std::to_string(ttl.count());
    node* served = nullptr;
    const std::string_view keys[] = {lease_, counter_, life_};
    result<detail::redis_reply_ptr> r =
        call(detail::redis_script::acquire, keys, 3, {owner, ttl_text}, served);
    if (!r) return r.error();
    result<grant> g = detail::read_redis_acquire(served->conn, std::move(r), ttl);
    if (!g) return note(served, g.error());
    return acknowledge(*served, g, owner, true);
  }

  /// Extends the lease on `key` to `ttl` (ms) from now iff `owner` holds it with `token`.
  /// \returns the grant; errc::lease_lost; errc::grant_not_durable; other errors as try_acquire.
  result<grant> renew(std::string_view key, std::string_view owner, fencing_token token,
                      std::chrono::milliseconds ttl) {
    if (std::error_code ec = check({store_op::renew, key, owner, token, {}, ttl})) return ec;
    auto lk = lock();
    name_keys(key);
    const std::string t = std::to_string(token.value());
    const std::string ttl_text = std::to_string(ttl.count());
    node* served = nullptr;
    const std::string_view keys[] = {lease_};
    std::string_view args[] = {owner, t, ttl_text};
    result<detail::redis_reply_ptr> r =
        route(detail::redis_script::renew, keys, 1, args, 3, served);
    if (!r) return r.error();
    result<grant> g = detail::read_redis_renew(served->conn, std::move(r), token, ttl);
    if (!g) return note(served, g.error());
    return acknowledge(*served, g, owner, false);
  }

  /// Deletes the lease on `key` iff `owner` holds it with `token`, in one script; sent once more
  /// if the primary's connection (open since an earlier call) had dropped, as redis_store::release.
  /// \returns success; errc::not_holder; errc::invalid_argument; transport errors as try_acquire.
  result<void> release(std::string_view key, std::string_view owner, fencing_token token) {
    if (std::error_code ec = check({store_op::release, key, owner, token, {}, {}})) return ec;
    auto lk = lock();
    name_keys(key);
    return release_locked(owner, token);
  }

  /// Returns the live lease on `key` (owner, token, time left by its primary's clock), or nullopt.
  /// \returns errc::invalid_argument (empty key); transport errors; protocol_error.
  result<std::optional<lease_record>> inspect(std::string_view key) {
    if (std::error_code ec = check({store_op::inspect, key, {}, {}, {}, {}})) return ec;
    auto lk = lock();
    name_keys(key);
    node* served = nullptr;
    const std::string_view keys[] = {lease_};
    result<detail::redis_reply_ptr> r =
        route(detail::redis_script::inspect, keys, 1, nullptr, 0, served);
    if (!r) return r.error();
    return detail::read_redis_inspect(served->conn, std::move(r));
  }

  /// Blocks until `key` may be free, without polling (store.hpp's wait_for_release capability,
  /// used by blocking acquire()): SSUBSCRIBEs (sharded pub/sub, Redis >= 7.0) to the key's
  /// release channel on its slot's primary (following MOVED / ASK), then reads the holder's time
  /// left (inspect), then sleeps until the release script's SPUBLISH, until the holder's lease
  /// can have expired (time left + 1 ms after the inspect left, by this process's steady clock),
  /// until `deadline`, or until `cancel` is stopped (a self-pipe ends the poll), whichever comes
  /// first; at once if the key is free. Subscribing before reading means no release between the
  /// two is missed. A slot that leaves the primary meanwhile (migration, failover) makes the
  /// server drop the subscription, which wakes the waiter, and so does a dropped connection: its
  /// caller asks again, on the new primary. Every waiter of the key wakes on a release (Redisson's
  /// unlock channel, not redis_store's one-per-release queue: a queue would need a channel per
  /// waiter in the key's slot and a list to pop, one more request per wait; at N waiters a
  /// release costs N try_acquire calls instead of 1). Notifications are hints: a lost one costs
  /// the wait until the holder's expiry, never more, and the store stays the judge. Requests:
  /// SSUBSCRIBE and one inspect to start, none while asleep, SUNSUBSCRIBE to leave (the
  /// connection then waits in a pool of at most 8 for the next wait).
  /// Thread-safety: any number of threads may wait at once, each on its own connection; the
  /// store's lock is not held while asleep. \returns success (woken for any reason above);
  ///   errc::cancelled; errc::invalid_argument (empty key); store_unavailable, timeout,
  ///   protocol_error if subscribing or inspecting failed (the caller falls back to backoff).
  result<void> wait_for_release(std::string_view key,
                                const std::chrono::steady_clock::time_point& deadline,
                                const cancel_token& cancel = {}) {
    return detail::redis_cluster_waits::wait(*this, key, deadline, cancel, {});
  }

  /// wait_for_release for observers (election::next_leader); as the release wakes every waiter
  /// anyway, the same wait. With `known` (a holder's token read before) it returns at once unless
  /// the key is still held under `known`. \returns as wait_for_release.
  result<void> watch_release(std::string_view key,
                             const std::chrono::steady_clock::time_point& deadline,
                             const cancel_token& cancel = {}, fencing_token known = {}) {
    return detail::redis_cluster_waits::wait(*this, key, deadline, cancel, known);
  }

  /// Grants every key of `keys[0..count)` to `owner` for `ttl` (ms) in one script on one primary,
  /// or none (store.hpp's try_acquire_all; redis_store's script with the slot's counter), when
  /// every key hashes to one slot: give them one hash tag ("{order:7}:a", "{order:7}:b"; the
  /// store honours a key's own tag, detail/redis_slots.hpp). Keys in two slots are refused, not
  /// taken one by one: Redis runs a script over one slot only, and a store-side ordered take would
  /// hold some keys while asking for others and leave a partial set behind a lost reply, which is
  /// not what this capability promises (multi_lease.hpp picks the atomic path at compile time).
  /// Same owner: keys it holds keep their tokens (a retry after a lost reply gets the same grants).
  /// \returns success; errc::busy (nothing changed); errc::invalid_argument (count 0, a repeated
  ///   key, bad input, or keys in more than one slot: last_error_message() names two of them);
  ///   else as try_acquire (grant_not_durable: all given back).
  result<void> try_acquire_all(const std::string_view* keys, std::size_t count,
                               std::string_view owner, std::chrono::milliseconds ttl,
                               grant* grants) {
    const detail::redis_multi_request q{keys, count, owner, ttl, grants};
    const char* why = nullptr;
    auto lk = lock();
    if (std::error_code ec = detail::check_redis_multi(q, &why)) {
      return fail(ec, why != nullptr ? why : "redis cluster: try_acquire_all: bad arguments");
    }
    std::vector<std::string> names(count);
    for (std::size_t i = 0; i < count; ++i) {
      detail::redis_cluster_name(names[i], opts_.node.key_prefix, keys[i]);
      if (detail::redis_key_slot(names[i]) != detail::redis_key_slot(names[0])) {
        return fail(errc::invalid_argument, detail::redis_cross_slot(keys[0], keys[i]));
      }
    }
    name_keys(keys[0]);
    std::vector<std::string_view> all(names.begin(), names.end());
    all.push_back(counter_);
    all.push_back(life_);
    const std::string ttl_text = std::to_string(ttl.count());
    node* served = nullptr;
    result<detail::redis_reply_ptr> r =
        call(detail::redis_script::acquire_all, all.data(), all.size(), {owner, ttl_text}, served);
    if (!r) return r.error();
    if (std::error_code ec = detail::read_redis_cluster_all(served->conn, r->get(), q)) {
      return note(served, ec);
    }
    if (opts_.node.wait_replicas == 0) return {};
    result<grant> first = acknowledge(*served, grants[0], owner, false);
    if (first) return {};
    for (std::size_t i = 0; i < count; ++i) {
      name_keys(keys[i]);
      (void)release_locked(owner, grants[i].token);
    }
    return first.error();
  }

  /// Raises every slot's token counter (16384 of them) to at least `floor`, never lowering one,
  /// so every later grant of every key carries a token above `floor`; live leases keep theirs.
  /// The fence-safety step after the cluster lost its counters (a full restart without
  /// persistence, a restore): pass the newest token any fence downstream admitted (DESIGN.md
  /// "Lost grants"); also quorum_store's token-floor capability. One script per slot, pipelined
  /// per primary (on localhost about 30 ms); a slot in migration is retried as try_acquire is.
  /// Not atomic across slots: if it fails part way, call it again (raising is idempotent).
  /// \returns success; errc::invalid_argument unless `floor` is in [1, 2^63-1];
  ///   store_unavailable, timeout, protocol_error (the first slot that failed).
  result<void> raise_token_floor(fencing_token floor) {
    if (!floor.is_issuable() || floor.value() > 9223372036854775807ULL) {
      return errc::invalid_argument;
    }
    auto lk = lock();
    if (!mapped_) {
      if (std::error_code ec = refresh(nullptr)) return ec;
    }
    const std::string f = std::to_string(floor.value());
    const std::vector<std::size_t> left = detail::redis_raise_all(
        nodes_.size(), slots_, opts_.node.counter_key, f,
        [this](std::size_t i) -> detail::redis_connection& { return nodes_[i]->conn; });
    for (const std::size_t slot : left) {  // one by one, routed: MOVED, ASK, TRYAGAIN, failures
      slot_ = slot;
      detail::redis_counter_name(counter_, opts_.node.counter_key, slot);
      node* served = nullptr;
      const std::string_view keys[] = {counter_};
      std::string_view args[] = {f};
      result<detail::redis_reply_ptr> r =
          route(detail::redis_script::advance, keys, 1, args, 1, served);
      if (!r) return r.error();
    }
    return {};
  }

  /// Re-labels the live lease `owner` holds on `key` with `token` (or already with `to`) with
  /// the greater token `to`, keeping its TTL, and lifts the key's slot counter to at least `to`,
  /// in one script (redis_store::raise_token; quorum_store's per-key token floor).
  /// \returns success; errc::lease_lost; errc::invalid_argument (empty key or owner, tokens not
  ///   issuable, `to` < `token`, `to` > 2^63-1); store_unavailable, timeout, protocol_error.
  result<void> raise_token(std::string_view key, std::string_view owner, fencing_token token,
                           fencing_token to) {
    if (std::error_code ec = check({store_op::raise_token, key, owner, token, to, {}})) return ec;
    auto lk = lock();
    name_keys(key);
    const std::string t = std::to_string(token.value());
    const std::string v = std::to_string(to.value());
    node* served = nullptr;
    const std::string_view keys[] = {lease_, counter_};
    std::string_view args[] = {owner, t, v};
    result<detail::redis_reply_ptr> r =
        route(detail::redis_script::raise, keys, 2, args, 3, served);
    if (!r) return r.error();
    result<bool> ok = detail::read_redis_flag(served->conn, std::move(r), "raise_token");
    if (!ok) return note(served, ok.error());
    if (!*ok) return errc::lease_lost;
    return {};
  }

  /// Starts `request` on its key's primary without blocking (send_receive.hpp; the table in
  /// detail/redis_cluster_split.hpp). Bad arguments are reported by receive(). \returns zero once
  ///   accepted (one receive() must follow; blocking operations wait for it); send_would_block()
  ///   when it would need a wait: no slot map (yet, or since a failure), the primary not yet
  ///   connected (a blocking operation connects both), a request in flight, or
  ///   raise_token_floor (every primary). Thread-safety: as the other operations.
  std::error_code send(const store_request& request) {
    return detail::redis_cluster_split::send(*this, request);
  }
  /// The socket of the request in flight and its direction; fd -1 if none or complete.
  [[nodiscard]] io_interest interest() const {
    return detail::redis_cluster_split::interest(*this);
  }
  /// Writes and reads what the socket allows; true once receive() will not wait on I/O.
  bool progress() { return detail::redis_cluster_split::progress(*this); }
  /// Returns the reply, as the blocking operation reports it, waiting at most command_timeout
  /// from send() (then errc::timeout). MOVED, ASK or TRYAGAIN in it (the script did not run):
  /// the blocking operation runs from the start, which may take another command_timeout. No
  /// request in flight: every field errc::invalid_argument.
  store_reply receive() { return detail::redis_cluster_split::receive(*this); }

  /// Reads the slot map now (CLUSTER SLOTS) instead of on first use. \returns success;
  ///   invalid_argument (bad options); store_unavailable or timeout if no node answered.
  result<void> connect() {
    auto lk = lock();
    if (std::error_code ec = refresh(nullptr)) return ec;
    return {};
  }

  /// Returns the deployment of every primary serving slots (deployment.hpp): risks prefixed by
  /// the primary's address, facts joined by " | ", life empty (each primary has its own).
  /// Connects to each. \returns the report; store_unavailable, timeout.
  result<deployment_report> deployment() {
    auto lk = lock();
    if (!mapped_) {
      if (std::error_code ec = refresh(nullptr)) return ec;
    }
    return detail::redis_cluster_deployment(  // (detail/redis_cluster_multi.hpp)
        nodes_, slots_, [this](node* n, std::error_code ec) { return note(n, ec); });
  }

  /// The slot (0 .. 16383) of lease `key`: the slot of its record, counter and life record.
  [[nodiscard]] static std::size_t slot_of(std::string_view key) {
    std::string name;
    detail::redis_cluster_name(name, "", key);
    return detail::redis_key_slot(name);
  }
  /// The Redis key that holds lease `key`'s record (for operators and tests).
  [[nodiscard]] std::string record_key(std::string_view key) const {
    std::string name;
    detail::redis_cluster_name(name, opts_.node.key_prefix, key);
    return name;
  }

  /// The text of the most recent failure (the server's error or the transport's), as
  /// redis_store::last_error_message(). Thread-safety: takes the store's lock.
  [[nodiscard]] std::string last_error_message() const {
    std::lock_guard<std::mutex> lk(mu_);
    return last_error_;
  }
  [[nodiscard]] const redis_cluster_options& options() const noexcept { return opts_; }
  /// The shortest lease TTL this store is asked for: options().node.min_ttl.
  [[nodiscard]] std::chrono::milliseconds min_ttl() const noexcept { return opts_.node.min_ttl; }

 private:
  friend struct detail::redis_cluster_waits;
  friend struct detail::redis_cluster_split;
  struct node {
    node(redis_options o, std::string w)
        : where(std::move(w)), conn(std::move(o), detail::redis_cluster_scripts()) {
      conn.enable_probe();  // ROLE (a primary only), the life, the deployment
    }
    std::string where;        // "host:port"
    detail::redis_link conn;  // its split half: send/receive (detail/redis_cluster_split.hpp)
  };

  // Locks the store for one blocking operation, first waiting until no split request is in
  // flight (send_receive.hpp: the blocking operations wait for its receive()).
  std::unique_lock<std::mutex> lock() const {
    std::unique_lock<std::mutex> l(mu_);
    idle_.wait(l, [this] { return !in_flight_; });
    return l;
  }

  // [locked] The names of the lease record, its slot's counter and life record, and the slot.
  void name_keys(std::string_view key) {
    detail::redis_cluster_name(lease_, opts_.node.key_prefix, key);
    slot_ = detail::redis_key_slot(lease_);
    detail::redis_counter_name(counter_, opts_.node.counter_key, slot_);
    life_ = counter_ + ":life";
  }

  // [locked] The acquire call: ARGV owner, ttl, and the serving primary's life, known only once
  // routed, so route() fills it in.
  result<detail::redis_reply_ptr> call(std::size_t script, const std::string_view* keys,
                                       std::size_t nkeys, std::array<std::string_view, 2> a,
                                       node*& served) {
    std::string_view args[] = {a[0], a[1], {}};
    life_arg_ = 2;
    result<detail::redis_reply_ptr> r = route(script, keys, nkeys, args, 3, served);
    life_arg_ = -1;
    return r;
  }

  // [locked] Runs `script` on the primary of slot_, following MOVED / ASK / TRYAGAIN (overview).
  result<detail::redis_reply_ptr> route(std::size_t script, const std::string_view* keys,
                                        std::size_t nkeys, std::string_view* args,
                                        std::size_t nargs, node*& served) {
    const auto began = std::chrono::steady_clock::now();
    if (!mapped_ || slots_[slot_] < 0) {
      if (std::error_code ec = refresh(nullptr)) return ec;
    }
    if (slots_[slot_] < 0) {
      return fail(errc::store_unavailable, "redis cluster: slot " + std::to_string(slot_) +
                                               " is served by no primary (CLUSTER SLOTS)");
    }
    node* n = nodes_[static_cast<std::size_t>(slots_[slot_])].get();
    bool asking = false;
    bool moved = false;
    for (;;) {
      auto once = [&] { return send_to(*n, asking, script, keys, nkeys, args, nargs); };
      result<detail::redis_reply_ptr> r =
          last_call_ ? detail::redis_send_last_call(n->conn, once) : once();
      if (r) {
        served = n;
        return r;
      }
      detail::redis_redirect to;
      if (detail::parse_redis_redirect(n->conn.last_error(), to)) {
        if (asking || (moved && !to.ask)) {
          return fail(errc::store_unavailable, n->conn.last_error() + " (after a redirection)");
        }
        asking = to.ask;
        moved = moved || !to.ask;
        node& next = node_at(to.host, to.port);
        if (!to.ask) (void)refresh(&next);
        n = &next;
        continue;
      }
      const bool tryagain = n->conn.last_error().compare(0, 15, "redis: TRYAGAIN") == 0;
      if (tryagain && std::chrono::steady_clock::now() - began < opts_.node.command_timeout) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        n = slots_[slot_] >= 0 ? nodes_[static_cast<std::size_t>(slots_[slot_])].get() : n;
        asking = false;
        continue;
      }
      return note(n, r.error());
    }
  }

  // [locked] One attempt on one primary: connect if needed, ASKING if asked, the script.
  result<detail::redis_reply_ptr> send_to(node& n, bool asking, std::size_t script,
                                          const std::string_view* keys, std::size_t nkeys,
                                          std::string_view* args, std::size_t nargs) {
    if (std::error_code ec = n.conn.ensure_connected()) return ec;
    if (life_arg_ >= 0) args[life_arg_] = n.conn.life();
    if (asking) {
      result<detail::redis_reply_ptr> a = n.conn.command({"ASKING"});
      if (!a) return a.error();
    }
    return n.conn.eval(script, keys, nkeys, args, nargs);
  }

  // [locked] Releases lease_ (named) held by owner with token.
  result<void> release_locked(std::string_view owner, fencing_token token) {
    const std::string t = std::to_string(token.value());
    node* served = nullptr;
    const std::string_view keys[] = {lease_};
    channel_.assign(opts_.node.wait_prefix).append(lease_, opts_.node.key_prefix.size());
    std::string_view args[] = {owner, t, channel_};
    last_call_ = true;
    result<detail::redis_reply_ptr> r =
        route(detail::redis_cluster_release_script(), keys, 1, args, 3, served);
    last_call_ = false;
    if (!r) return r.error();
    result<void> done = detail::read_redis_release(served->conn, std::move(r));
    if (!done) return note(served, done.error());
    return done;
  }

  // [locked] With wait_replicas > 0, after a grant: WAIT on its primary. Too few
  // acknowledgements: an acquired grant is given back, both become grant_not_durable.
  result<grant> acknowledge(node& n, result<grant> g, std::string_view owner, bool acquired) {
    if (opts_.node.wait_replicas == 0) return g;
    result<long long> acks = n.conn.wait_for_replicas();
    if (acks && *acks >= opts_.node.wait_replicas) return g;
    const std::string why =
        acks ? "redis: WAIT: " + std::to_string(*acks) + " of " +
                   std::to_string(opts_.node.wait_replicas) +
                   " replicas acknowledged the grant within wait_timeout; it was given back"
             : n.conn.last_error() + " (WAIT for the grant's acknowledgement; it was given back)";
    if (acquired) (void)release_locked(owner, g->token);
    return fail(errc::grant_not_durable, why);
  }

  // [locked] Reads the slot map from `first` (if given), then every known node, then the seeds.
  std::error_code refresh(node* first) {
    std::string why;
    if (opts_.check(&why)) return fail(errc::invalid_argument, why);
    std::vector<std::pair<std::string, int>> ask;
    if (first != nullptr) ask.emplace_back(first->conn.options().host, first->conn.options().port);
    for (const auto& n : nodes_) ask.emplace_back(n->conn.options().host, n->conn.options().port);
    for (const redis_endpoint& e : opts_.nodes) ask.emplace_back(e.host, e.port);
    std::error_code last = errc::store_unavailable;
    for (const auto& [host, port] : ask) {
      last = read_map(host, port);
      if (!last) return {};
    }
    mapped_ = false;
    return last;
  }

  // [locked] The slot map from host:port (detail/redis_cluster_multi.hpp).
  std::error_code read_map(const std::string& host, int port) {
    std::string why;
    const std::error_code ec = detail::read_redis_slot_map(
        opts_.node, host, port, slots_,
        [this](const std::string& h, int p) { return index_of(node_at(h, p)); }, why);
    if (ec) return fail(ec, why);
    mapped_ = true;
    return {};
  }

  // [locked] The node at host:port, made (not connected) if new.
  node& node_at(const std::string& host, int port) {
    const std::string where = host + ":" + std::to_string(port);
    for (const auto& n : nodes_) {
      if (n->where == where) return *n;
    }
    redis_options o = opts_.node;
    o.host = host;
    o.port = port;
    nodes_.push_back(std::make_unique<node>(std::move(o), where));
    return *nodes_.back();
  }
  std::int32_t index_of(const node& n) const {
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      if (nodes_[i].get() == &n) return static_cast<std::int32_t>(i);
    }
    return -1;
  }

  // redis_store's argument check (size included), before anything is sent (redis_cluster_waits).
  std::error_code check(const store_request& q) {
    return detail::redis_cluster_waits::check(*this, q);
  }
  // [locked] A failure through `n`: keep its text; a transport or serving failure may mean the
  // map changed (a failover, a node gone), so the next call reads it again.
  std::error_code note(node* n, std::error_code ec) {
    if (n != nullptr) last_error_ = n->where + ": " + n->conn.last_error();
    if (ec == errc::store_unavailable || ec == errc::timeout) mapped_ = false;
    return ec;
  }
  std::error_code fail(std::error_code ec, std::string why) {
    last_error_ = std::move(why);
    if (ec == errc::store_unavailable || ec == errc::timeout) mapped_ = false;
    return ec;
  }

  redis_cluster_options opts_;
  mutable std::mutex mu_;  // guards everything below
  std::vector<std::unique_ptr<node>> nodes_;
  std::array<std::int32_t, detail::redis_cluster_slots> slots_{};  // index into nodes_, or -1
  bool mapped_ = false;
  std::string last_error_;
  detail::redis_cluster_subscribers subs_;  // (guarded by its own lock)
  // Scratch for the call being made.
  std::string lease_, counter_, life_, channel_;
  std::size_t slot_ = 0;
  int life_arg_ = -1;
  bool last_call_ = false;  // a release: sent once more after an idle drop (route)
  // The split request in flight (detail/redis_cluster_split.hpp), guarded by mu_.
  mutable std::condition_variable idle_;  // signalled when it was received
  bool in_flight_ = false;
  node* pending_node_ = nullptr;  // nullptr: refused at send(), pending_failed_ says why
  std::error_code pending_failed_;
  store_request pending_{};  // its key and owner view the two strings below
  std::string pending_key_, pending_owner_, token_text_, to_text_, ttl_text_;
};

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_REDIS_CLUSTER_HPP
