// SPDX-License-Identifier: MIT
// holdfast/stores/etcd.hpp - etcd_store: a LeaseStore in etcd (v3 API, server 3.4 and later),
// whose fencing token is etcd's own revision, and etcd_fence: fenced writes inside etcd. Opt-in:
// needs libcurl and nlohmann/json (Debian: libcurl4-openssl-dev, nlohmann-json3-dev; -lcurl).
//
// Transport: etcd's v3 HTTP/JSON gateway (the client URL, under /v3/), one kept-alive libcurl
// connection per store. Keys and values travel base64-encoded, 64-bit numbers as JSON strings.
// TLS and client certificates go through libcurl; etcd users through an auth token fetched on
// first use and again when etcd says it expired (the request refused for it is sent once more:
// it was refused before anything happened). The gateway turns each request into the same gRPC
// call etcd's own clients make, costs a read ~0.25 ms more than bare HTTP against >= 0.7 ms of
// Raft commit per write (tests/benchmarks/README.md), and needs no gRPC runtime or .proto files.
//
// A grant is an etcd lease plus one transaction that puts the key, bound to that lease, only if
// the key does not exist (Chubby-style: the lease ends, etcd deletes the key). The fencing token
// is the key's create_revision: store-wide, committed through Raft, and monotonic across
// release, expiry, leader changes and restarts, with no counter of holdfast's own (Kleppmann
// 2016: "etcd revision, ZK zxid"). The record is the key's value: the owner's bytes.
//
//   operation   | requests (round trips)                      | why
//   ------------+---------------------------------------------+----------------------------------
//   acquire     | lease/grant, kv/txn                     (2) | a key can only be bound to a
//               |   txn: create_revision(k) == 0 ?            | lease that exists, and etcd has
//               |        put(k, owner, lease) : range(k)      | no call that does both
//     busy      | + lease/revoke of the unused lease      (3) | no lease is left behind
//     same owner| + lease/keepalive of the holder's lease,    | T1's retry rule: the same token,
//     (retry)   |   lease/revoke of the unused one        (4) | the holder's lease refreshed
//   renew       | lease/keepalive of the grant's lease    (1) | the lease is the grant's own
//   release     | lease/revoke of the grant's lease       (1) | etcd deletes the key with it, in
//               |                                             | the same Raft entry
//   inspect     | kv/range, lease/timetolive              (2) | the lease's time left is not in
//               |                                             | the key's record
//
// renew and release need the grant's lease ID. The store remembers it for each grant it made (key,
// owner, token -> lease; at most etcd_options::remembered_grants entries); for a grant it did not
// make (another process, or one it forgot) it first reads the key with kv/range (one more round
// trip) and proceeds only if the key carries the caller's owner *and* token. Either way the request
// names a lease that only that grant ever had, so renew and release touch only the caller's own
// grant (T3): the lease lives exactly as long as the key bound to it (revoke and expiry delete both
// in one step), so keeping it alive keeps alive the key that still carries the caller's owner and
// token. A key written behind holdfast's back (etcdctl put under the prefix) is outside this.
//
// TTLs and validity (store.hpp, T2). etcd counts lease TTLs in whole seconds on the leader's clock,
// rounds the asked TTL up, and applies a minimum (ceil(1.5 x election timeout): 2 s with the
// defaults). holdfast asks for ceil(ttl / 1 s) and reads the TTL etcd applied from its answer.
// A grant reports min(asked, applied) (store.hpp: a grant never reports more than was asked;
// lease<> would not trust more anyway): etcd holds the key at least that long after the request
// left the client, since the leader starts the lease when it applies the grant. So a holder trusts
// the TTL it asked for while the key stays taken for the applied one (asking 300 ms holds the key
// 2 s): ask whole seconds of at least the minimum and the two agree.
//
// Expiry granularity, measured (tests/unit/test_etcd_store.cpp prints it): etcd 3.4's leader
// looks for expired leases every 500 ms and then revokes them through Raft, so a dead holder's
// key is free again between the applied TTL and about TTL + 0.6 s after its last grant or
// renewal request (measured on this project's 2-vCPU VM under load: 26 to 530 ms after the TTL,
// in every run of the expiry and cluster tests). Expiry is never *early*: the granularity only
// lengthens a hold. A leader change lengthens it too: the new leader restarts every lease's full
// TTL (plus an election timeout) when it takes over, so across a failover a dead holder's key can
// stay taken for up to about twice its TTL. The cluster fault tests measure both.
//
// Durability and restore: revisions live in etcd's Raft log and bolt database (fsync'd on every
// commit), so tokens keep increasing across member crashes, leader changes and full-cluster
// restarts. A snapshot restore (etcdctl snapshot restore) rewinds the revision to the snapshot's,
// so new grants can carry tokens *lower* than ones already issued: fences refuse them
// (stale_token; S1 holds) and checked_store reports them as protocol_error, but new holders are
// locked out until the revision passes the newest token a fence admitted. Recover with
// raise_token_floor(newest admitted token) on etcd 3.4 (one small write per revision skipped),
// or restore with `etcdutl snapshot restore --bump-revision N --mark-compacted` on etcd 3.5+.
// A store that sees the revision go back (or another cluster ID) raises it past the highest one
// it saw before its next grant (detail/etcd_calls.hpp, etcd_before_attempt; the attempt's lease
// is taken again after the raise, which can outlast it: etcd_attempt_lease): its own tokens are
// covered without an operator; a process gone since is not. deployment() reports the cluster.
//
// Keys: up to 256 bytes live at key_prefix + key, readable with etcdctl; longer keys (etcd takes
// a request of at most 1.5 MiB by default, and a transaction names its key three times) and keys
// starting with "#sha256/" live at key_prefix + "#sha256/" + hex(SHA-256(key)). Any bytes, NUL
// included. Owners are stored as the value, any bytes, up to etcd's request limit (~1.4 MiB).
// Read-write grants: keys under key_prefix + "#sha256/" + hex(SHA-256(key)) + "/rw/" (etcd_rw.hpp).
//
// Waiting (wait_for_release, try_acquire_queued; detail/etcd_queue.hpp), as etcd's own lock: a
// busy attempt of blocking acquire() keeps its lease as a queue entry, and the waiter watches
// (/v3/watch, a connection of its own) the deletion of the entry ahead, or of the key once first.
// A release or an expiry wakes the first waiter only; its grant (kv/txn alone while its lease
// has half its TTL left, else a keepalive first) deletes its entry, waking the next (to watch
// the key). Notifications are hints: a lost stream re-reads; after 1 s quiet, the holder's
// time left bounds the sleep.
// A blocked read-write ask (wait_for_release_rw, detail/etcd_rw_wait.hpp) watches the key's
// rw/ range for the deletion of what keeps its mode out, bounded likewise.
//
// Never an implicit lease: every grant has its own lease with the caller's TTL (etcd's own lock
// service once made a 60 s lease for callers that passed none: locks vanished unrenewed).
// try_acquire_until (store_deadline.hpp): libcurl's timeouts capped by the deadline; an unheard
// grant's lease is revoked before it answers, or at the next attempt.
//
// Failures (T4): a member that is down, frozen, slow, without a leader, or answering something
// that is not the gateway's JSON is an error, never a grant: store_unavailable, timeout or
// protocol_error, with etcd's or libcurl's text in last_error_message(). A refused connection
// moves on to the next endpoint at once (nothing was sent); a timeout, a broken connection or an
// unavailable member moves the next call to the next endpoint, and the failed request is not
// retried (it may or may not have happened). Every request holdfast sends is safe to repeat: a
// repeated grant transaction finds its own key and returns its token, a repeated keepalive or
// revoke changes nothing more.
//
// Files: this header (etcd_store) is the one to include; it brings etcd_options.hpp
// (etcd_options, etcd_max_token) and etcd_fence.hpp (etcd_fence, etcd_write). Internals:
// detail/etcd_link.hpp (transport, failover, auth, errors), detail/etcd_json.hpp (answers),
// detail/etcd_encoding.hpp (base64, SHA-256, key names), detail/etcd_calls.hpp (requests),
// detail/etcd_{watch,queue,rw_wait}.hpp (waiting), detail/etcd_{multi,rw}.hpp (multi-key,
// read-write).
#ifndef HOLDFAST_STORES_ETCD_HPP
#define HOLDFAST_STORES_ETCD_HPP

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "holdfast/deployment.hpp"
#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/result.hpp"
#include "holdfast/store.hpp"
#include "holdfast/stores/detail/call_bound.hpp"
#include "holdfast/stores/detail/etcd_calls.hpp"
#include "holdfast/stores/detail/etcd_deployment.hpp"
#include "holdfast/stores/detail/etcd_encoding.hpp"
#include "holdfast/stores/detail/etcd_json.hpp"
#include "holdfast/stores/detail/etcd_link.hpp"
#include "holdfast/stores/detail/etcd_multi.hpp"
#include "holdfast/stores/detail/etcd_queue.hpp"
#include "holdfast/stores/detail/etcd_rw.hpp"
#include "holdfast/stores/detail/etcd_watch.hpp"
#include "holdfast/stores/detail/link_client.hpp"
#include "holdfast/stores/etcd_fence.hpp"
#include "holdfast/stores/etcd_options.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

/// A LeaseStore in etcd, over its v3 JSON gateway (see the file overview for the requests, the
/// TTL rounding, durability, restores and failure behaviour). Models LeaseStore with inspect(),
/// raise_token_floor(), wait_for_release(), watch_release() and read-write grants with their
/// wait (etcd_rw.hpp: try_acquire_rw, renew_rw, release_rw, wait_for_release_rw).
///
/// Tokens are etcd revisions: every new grant of any key carries a token greater than every
/// token etcd issued before (until a snapshot restore rewinds them), in 1 .. 2^63-1.
///
/// Differences from memory_store: the TTL is counted by etcd in whole seconds (the grant reports
/// min(asked, applied)); renew keeps the grant's lease alive for that lease's TTL whatever TTL it
/// is asked for (etcd cannot change a lease's TTL), reporting min(asked, that TTL); releasing a
/// lease that has already expired reports not_holder (etcd deleted the key with the lease).
///
/// Thread-safety: every member function may be called concurrently; one mutex serializes the
/// connection, so concurrent callers take turns. For parallel requests use one etcd_store per
/// thread. Not fork-safe: a child process makes its own store.
class etcd_store : public detail::link_client<detail::etcd_link>,
                   public detail::etcd_rw<etcd_store> {
 public:
  // options(), last_error_message() (the latest call's failure): detail::link_client.

  /// Makes a store for the cluster in `opts`; connects on first use. Throws only bad_alloc.
  explicit etcd_store(etcd_options opts = {}) : link_client(std::in_place, std::move(opts)) {}

  etcd_store(const etcd_store&) = delete;
  etcd_store& operator=(const etcd_store&) = delete;

  /// Grants `key` to `owner` for `ttl` (ms, asked of etcd rounded up to whole seconds) iff it has
  /// no live lease: one etcd lease and one put-if-absent transaction bound to it. The same owner
  /// re-acquiring its live lease gets the same token back and that lease refreshed to its TTL.
  /// \returns the grant {token = the key's create_revision, ttl = min(ttl, etcd's applied TTL)};
  ///   errc::busy if another owner holds the key; errc::invalid_argument for an empty key/owner
  ///   or ttl not in (0, max_ttl], or an owner larger than etcd accepts in one request;
  ///   errc::store_unavailable or errc::timeout if no member answers in time, has no leader or
  ///   refuses (no grant is reported; the unused lease is revoked at once if a member answers,
  ///   else a grant the transaction may have made ends with its TTL); errc::misconfigured for
  ///   an endpoint that is not etcd's gateway (an HTTP status etcd does not use, https:// to
  ///   plain HTTP); errc::protocol_error for an answer that is not the gateway's JSON, or a key
  ///   holdfast did not write. Against a member that answers nothing it returns within one
  ///   connect_timeout + one command_timeout at most: the grant's command_timeout (libcurl
  ///   counts the connect inside it) and store_call_floor for each revoke after it timed out.
  result<grant> try_acquire(std::string_view key, std::string_view owner,
                            std::chrono::milliseconds ttl) {
    return acquire_as(key, owner, ttl, false);
  }

  /// Grants all of `keys[0..count)` to `owner` for `ttl` (ms) in one kv/txn, or none (store.hpp's
  /// try_acquire_all; detail/etcd_multi.hpp says how, and what it returns).
  result<void> try_acquire_all(const std::string_view* keys, std::size_t count,
                               std::string_view owner, std::chrono::milliseconds ttl,
                               grant* grants) {
    return detail::etcd_multi::acquire_all(*this, keys, count, owner, ttl, grants);
  }

  /// try_acquire (_queued) answered by `deadline` (see the overview; the revoke of an unheard
  /// grant gets store_call_floor of its own). \returns as try_acquire (_queued).
  result<grant> try_acquire_until(std::string_view key, std::string_view owner,
                                  std::chrono::milliseconds ttl,
                                  const std::chrono::steady_clock::time_point& deadline) {
    const detail::call_bound bound(deadline);
    return acquire_as(key, owner, ttl, false);
  }
  result<grant> try_acquire_queued_until(std::string_view key, std::string_view owner,
                                         std::chrono::milliseconds ttl,
                                         const std::chrono::steady_clock::time_point& deadline) {
    const detail::call_bound bound(deadline);
    return acquire_as(key, owner, ttl, true);
  }

  /// try_acquire that, when `key` is busy, also queues the calling thread for its next
  /// wait_for_release on `key` (store.hpp's try_acquire_queued, used by blocking acquire()) at no
  /// extra request: the attempt's lease is kept, bound to a queue entry put in the same
  /// transaction (detail/etcd_queue.hpp). The thread's next attempt on `key` reuses that lease:
  /// no lease/grant, and no keepalive either while half the lease's TTL is left (the grant then
  /// reports the time left, at least half the TTL etcd applied, measured from before the lease's
  /// last grant or keepalive was sent); a grant deletes the entry, a busy attempt that is not
  /// queued revokes it. An entry never tried again lasts until its lease expires. \returns as
  /// try_acquire.
  result<grant> try_acquire_queued(std::string_view key, std::string_view owner,
                                   std::chrono::milliseconds ttl) {
    return acquire_as(key, owner, ttl, true);
  }

  /// Keeps the lease on `key` alive iff `owner` holds it with `token`: one keepalive of the
  /// grant's own etcd lease (two round trips if this store did not make the grant). etcd restarts
  /// the lease's full TTL; `ttl` is checked but cannot change it.
  /// \returns the grant {token, min(ttl, the lease's TTL)}; errc::lease_lost if the key is free,
  ///   expired, or held by another owner or token; errc::invalid_argument (check_renew_args);
  ///   store_unavailable, timeout, protocol_error as for try_acquire.
  result<grant> renew(std::string_view key, std::string_view owner, fencing_token token,
                      std::chrono::milliseconds ttl) {
    if (std::error_code ec = check_renew_args(key, owner, token, ttl)) return ec;
    if (std::error_code ec = detail::etcd_check_args(link_, key, owner)) return ec;
    if (token > etcd_max_token) return errc::lease_lost;  // no revision is that large
    auto guard = link_.lock();
    const std::string& k = lease_key(key);
    result<std::int64_t> id = lease_of(k, owner, token);
    if (!id) return id.error();
    if (*id == 0) return errc::lease_lost;
    result<std::int64_t> left = detail::etcd_keepalive(link_, body_, *id);
    if (!left) return left.error();
    if (*left <= 0) {
      forget(k);
      return errc::lease_lost;
    }
    return grant{token, detail::etcd_ttl_capped(*left, ttl)};
  }

  /// Frees `key` iff `owner` holds it with `token`: one revoke of the grant's own etcd lease,
  /// which deletes the key in the same step (two round trips if this store did not make the
  /// grant). \returns success; errc::not_holder if the key is free, expired, or held by another
  ///   owner or token; errc::invalid_argument (check_release_args); store_unavailable, timeout,
  ///   protocol_error as for try_acquire.
  result<void> release(std::string_view key, std::string_view owner, fencing_token token) {
    if (std::error_code ec = check_release_args(key, owner, token)) return ec;
    if (std::error_code ec = detail::etcd_check_args(link_, key, owner)) return ec;
    if (token > etcd_max_token) return errc::not_holder;
    auto guard = link_.lock();
    const std::string& k = lease_key(key);
    result<std::int64_t> id = lease_of(k, owner, token);
    if (!id) return id.error();
    if (*id == 0) return errc::not_holder;
    bool found = false;
    if (std::error_code ec = detail::etcd_revoke(link_, body_, *id, &found)) return ec;
    forget(k);
    if (!found) return errc::not_holder;  // expired: etcd deleted the key with the lease
    return {};
  }

  /// Returns the live lease on `key` (owner, token, time left by the etcd leader's clock in whole
  /// seconds, rounded down), or nullopt; two round trips (range, timetolive).
  /// \returns errc::invalid_argument for an empty key; store_unavailable, timeout;
  ///   protocol_error for a key holdfast did not write.
  result<std::optional<lease_record>> inspect(std::string_view key) {
    if (std::error_code ec = detail::etcd_check_args(link_, key, {})) return ec;
    auto guard = link_.lock();
    const std::string& k = lease_key(key);
    result<std::optional<detail::etcd_kv>> kv = detail::etcd_range(link_, body_, k);
    if (!kv) return kv.error();
    if (!*kv) return std::optional<lease_record>{};
    if ((*kv)->lease == 0) {
      return link_.fail(errc::protocol_error, "etcd: inspect: the key has no lease");
    }
    result<std::int64_t> left =
        detail::etcd_time_to_live(link_, body_, (*kv)->lease, max_ttl.count() / 1000);
    if (!left) return left.error();
    if (*left < 0) return std::optional<lease_record>{};  // revoked since: the key went with it
    return std::optional<lease_record>{lease_record{
        std::move((*kv)->value), fencing_token(static_cast<std::uint64_t>((*kv)->create_revision)),
        std::chrono::milliseconds(*left * 1000)}};
  }

  /// Returns what this store reads about its cluster now, in two requests (deployment.hpp,
  /// detail/etcd_deployment.hpp): members, version, leader, revision, and its life (the cluster
  /// ID). Risks: a revision that went back since this store started (a restore), an even member
  /// count. \returns the report; store_unavailable, timeout, protocol_error.
  result<deployment_report> deployment() {
    auto guard = link_.lock();
    return detail::read_etcd_deployment(link_);
  }

  /// Returns etcd's current revision (every token issued so far is at most this): one round trip.
  /// \returns store_unavailable, timeout, protocol_error.
  result<fencing_token> revision() {
    auto guard = link_.lock();
    result<std::int64_t> rev =
        detail::etcd_current_revision(link_, body_, link_.options().key_prefix);
    if (!rev) return rev.error();
    return fencing_token(static_cast<std::uint64_t>(*rev));
  }

  /// Raises etcd's revision to at least `floor`, so that every later grant carries a token above
  /// `floor`; live leases keep theirs. For recovery after a snapshot restore rewound the revision
  /// (see the overview): pass the newest token any fence admitted. etcd 3.4 has no way to set a
  /// revision, so this writes one small key (key_prefix + "#sha256/floor", no lease key's name)
  /// once per revision to skip, bound to a lease of its own (a failed step leaves nothing past
  /// the next attempt): it refuses gaps above `max_steps`. Also the token-floor
  /// capability quorum_store uses (see quorum.hpp).
  /// \returns success; errc::invalid_argument unless `floor` is in [1, 2^63-1] and within
  ///   max_steps of the current revision; store_unavailable, timeout, protocol_error.
  result<void> raise_token_floor(fencing_token floor, std::uint64_t max_steps = 100000) {
    if (!floor.is_issuable() || floor > etcd_max_token) return errc::invalid_argument;
    auto guard = link_.lock();
    return detail::etcd_raise_token_floor(link_, body_, orphans_, floor.value(), max_steps);
  }

  /// Takes the calling thread's place in a wait queue (taken by try_acquire_queued) out again,
  /// for a caller that will not wait after all (store.hpp's leave_queue capability): one revoke
  /// of the place's lease, which deletes its entry, so the waiter behind it watches the next one
  /// at once (none if it holds no place); a place in another key's queue is left too; a failed
  /// revoke is retried at the next attempt (else the entry lasts until its lease's TTL). \returns
  ///   success; errc::invalid_argument for an empty or over-limit key (etcd_check_args).
  result<void> leave_queue(std::string_view key) {
    if (std::error_code ec = detail::etcd_check_args(link_, key, {})) return ec;
    auto guard = link_.lock_quiet();  // a failed call's cleanup: keeps that call's text
    if (std::optional<detail::etcd_ticket> t = tickets_.take()) give_back(t->lease);
    return {};
  }

  /// Blocks until `key` may be free, without polling (store.hpp's wait_for_release capability,
  /// used by blocking acquire()), on a /v3/watch stream of its own from the revision this thread's
  /// last busy attempt on `key` saw (else a read now). Queued by try_acquire_queued, it watches the
  /// entry ahead, then the key once first; else the key (every such waiter wakes). Returns when
  /// the key is deleted (released, or the holder's lease expired), when the holder's lease can
  /// have expired (after 1 s without news, lease/timetolive's whole seconds left, from before that
  /// read; 1 s if 0), at `deadline`, or when `cancel` is stopped (curl_multi_wakeup ends the poll
  /// from the stopping thread); at once if the key is free or `deadline` has passed. A dropped
  /// stream or a compacted revision re-reads (once more on the next member): never a sleep past
  /// the holder's expiry. Requests: the watch (+ timetolive); when the entry ahead goes, a watch
  /// of the key (+ a range read if writes came since); a two-range read if the stream drops.
  /// Thread-safe: each waiting thread has its own watch. \returns success (woken as above);
  ///   errc::cancelled once `cancel` was stopped; errc::invalid_argument for an empty key;
  ///   store_unavailable, timeout, protocol_error if a read fails or the watch is refused.
  result<void> wait_for_release(std::string_view key,
                                const std::chrono::steady_clock::time_point& deadline,
                                const cancel_token& cancel = {}) {
    return wait_deleted(key, deadline, true, cancel, fencing_token{});
  }

  /// For observers (election::next_leader): wait_for_release's wait on the key, in no queue:
  /// every watcher wakes on a release; at once if the key is not held under `known` (if given:
  /// the holder read before is gone). \returns as wait_for_release.
  result<void> watch_release(std::string_view key,
                             const std::chrono::steady_clock::time_point& deadline,
                             const cancel_token& cancel = {}, fencing_token known = {}) {
    return wait_deleted(key, deadline, false, cancel, known);
  }

 private:
  friend struct detail::etcd_multi;          // try_acquire_all
  friend class detail::etcd_rw<etcd_store>;  // try_acquire_rw, renew_rw, release_rw
  // try_acquire (see there), queued (try_acquire_queued) or not.
  result<grant> acquire_as(std::string_view key, std::string_view owner,
                           std::chrono::milliseconds ttl, bool queue) {
    if (std::error_code ec = check_acquire_args(key, owner, ttl)) return ec;
    if (std::error_code ec = detail::etcd_check_args(link_, key, owner)) return ec;
    auto guard = link_.lock();
    const std::int64_t seconds = (ttl.count() + 999) / 1000;
    const std::string k = lease_key(key);
    detail::etcd_before_attempt(link_, body_, orphans_);  // orphans; a new life
    std::optional<detail::etcd_ticket> t = tickets_.take();
    if (t && (t->key != k || t->seconds != seconds)) {  // a place in another queue: left
      give_back(t->lease);
      t.reset();
    }
    return attempt(k, owner, ttl, seconds, queue, t);
  }

  // One attempt of acquire_as with this thread's queue ticket `t` (if any), whose lease it binds
  // the key to: as it is while etcd holds it for at least half its TTL more
  // (detail::etcd_fresh_left; if etcd no longer has it after all, once more with a new lease),
  // else refreshed first by a keepalive; without a ticket, with a new lease.
  result<grant> attempt(const std::string& k, std::string_view owner, std::chrono::milliseconds ttl,
                        std::int64_t seconds, bool queue, std::optional<detail::etcd_ticket>& t) {
    std::chrono::milliseconds held{0};  // etcd holds the lease at least this long from now
    bool fresh = false;
    if (t) {  // the lease of this thread's queue entry (detail::etcd_ticket_held)
      result<std::chrono::milliseconds> h = detail::etcd_ticket_held(link_, body_, *t, fresh);
      if (!h) {
        tickets_.put(std::move(*t));  // kept: the next attempt reuses or revokes it
        return h.error();
      }
      held = *h;
      if (held.count() <= 0) t.reset();  // expired while queued, and the entry with it
    }
    if (!t) {
      const auto sent = std::chrono::steady_clock::now();
      result<std::pair<std::int64_t, std::int64_t>> lease = grant_lease(seconds);
      if (!lease) return lease.error();
      t = detail::etcd_ticket::of(k, {}, lease->first, seconds, -1);
      t->applied_s = lease->second;
      t->refreshed_at = sent;
      held = std::chrono::milliseconds(lease->second * 1000);
    }
    const std::int64_t id = t->lease;
    // Its answer showed a new life: raise past this store's tokens before drawing one.
    if (link_.new_life()) detail::etcd_before_attempt(link_, body_, orphans_);
    if (t->entry_revision < 0 && queue) {
      t->entry =
          detail::etcd_queue_entry(detail::etcd_queue_prefix(link_.options().key_prefix, k), id);
    }
    detail::etcd_acquire_body(body_, k, owner, id, t->entry_revision, t->entry, queue);
    detail::etcd_failure missing;  // an unrefreshed lease etcd no longer has: NotFound (5)
    result<nlohmann::json> r =
        fresh ? link_.post("/kv/txn", body_, 5, &missing) : link_.post("/kv/txn", body_);
    if (r && fresh && missing.code == 5) {  // nothing applied (a restore took the lease)
      t.reset();
      return attempt(k, owner, ttl, seconds, queue, t);
    }
    if (!r) {
      // Nobody was told of a grant, so the lease goes back at once (with the key, if the
      // transaction applied); one attempt, on the next member; the caller hears of the failure.
      give_back(id);
      return r.error();
    }
    detail::etcd_ticket next = std::move(*t);
    if (next.entry_revision < 0) next.entry_revision = 0;
    return acquire_answer(*r, k, owner, ttl, held, queue, std::move(next));
  }

  // Judges an attempt's transaction answer; `next` is the thread's ticket if it stays queued.
  result<grant> acquire_answer(const nlohmann::json& r, const std::string& k,
                               std::string_view owner, std::chrono::milliseconds ttl,
                               std::chrono::milliseconds held, bool queue,
                               detail::etcd_ticket next) {
    const std::int64_t id = next.lease;
    bool succeeded = false;
    if (!detail::json_bool(r, "succeeded", succeeded)) return shape("acquire");
    const std::chrono::milliseconds reported = held < ttl ? held : ttl;
    const std::optional<std::int64_t> rev = detail::etcd_revision(r);
    if (succeeded) {
      // The transaction's revision is the key's create_revision (its one put of the key).
      if (!rev) return shape("acquire");
      remember(k, owner, *rev, id);
      return grant{fencing_token(static_cast<std::uint64_t>(*rev)), reported};
    }
    const bool queued_before = next.entry_revision > 0;
    const std::size_t n = !queue ? 1 : queued_before ? 2 : 3;
    std::optional<detail::etcd_kv> kv;
    if (!detail::etcd_txn_first_kv(r, kv, n)) return shape("acquire");
    if (kv && kv->lease == id) {
      // Our own transaction, repeated by the transport: the grant is ours.
      remember(k, owner, kv->create_revision, id);
      return grant{fencing_token(static_cast<std::uint64_t>(kv->create_revision)), reported};
    }
    if (kv && kv->lease == 0) {
      give_back(id);
      return link_.fail(errc::protocol_error,
                        "etcd: acquire: the key has no lease (not written by holdfast)");
    }
    if (kv && kv->value == owner) {
      // The holder itself asks again (a retry after a lost reply): same token, its own lease
      // refreshed, and the lease granted above (and any queue entry on it) given back.
      result<std::int64_t> left = detail::etcd_keepalive(link_, body_, kv->lease);
      give_back(id);
      if (!left) return left.error();
      if (*left <= 0) return errc::busy;  // expired, not yet deleted: etcd still has the key
      remember(k, owner, kv->create_revision, kv->lease);
      return grant{fencing_token(static_cast<std::uint64_t>(kv->create_revision)),
                   detail::etcd_ttl_capped(*left, ttl)};
    }
    // Another owner holds it (a vanished key is impossible in one transaction: busy too): the
    // thread stays queued on the lease, or gives it back; its wait starts from this answer.
    if (!queue) {
      give_back(id);
      if (kv) sightings_.note(k, rev.value_or(0), kv->lease);
      return errc::busy;
    }
    const nlohmann::json* ahead = detail::etcd_txn_range(r, n - 1, n);
    if (!rev || ahead == nullptr || !detail::etcd_read_ahead(*ahead, next.entry, next.ahead)) {
      give_back(id);
      return shape("acquire");
    }
    if (!queued_before) next.entry_revision = *rev;  // the entry was put by this transaction
    next.seen_revision = kv ? *rev : 0;
    next.holder_lease = kv ? kv->lease : 0;
    tickets_.put(std::move(next));
    return errc::busy;
  }

  const std::string& lease_key(std::string_view key) {
    key_.assign(link_.options().key_prefix);
    detail::etcd_key_name(key, key_);
    return key_;
  }

  std::error_code shape(const char* op) { return detail::etcd_shape(link_, op); }
  // An attempt's lease, raised past a new life first (detail::etcd_attempt_lease).
  result<std::pair<std::int64_t, std::int64_t>> grant_lease(std::int64_t seconds) {
    return detail::etcd_attempt_lease(link_, body_, seconds, orphans_);
  }
  // Revokes a lease nobody was told of, now or at the next attempt (detail::etcd_orphans).
  void give_back(std::int64_t id) { orphans_.give_back(link_, body_, id); }

  // The lease of the grant (k, owner, token): remembered, or read from the key. 0: not held.
  result<std::int64_t> lease_of(const std::string& k, std::string_view owner, fencing_token token) {
    const auto t = static_cast<std::int64_t>(token.value());
    if (const std::int64_t* id = remembered_.find(k, owner, t)) return *id;
    result<std::optional<detail::etcd_kv>> kv = detail::etcd_range(link_, body_, k);
    if (!kv) return kv.error();
    if (!*kv || (*kv)->create_revision != t || (*kv)->value != owner) return std::int64_t{0};
    return (*kv)->lease;
  }

  // The wait of wait_for_release and watch_release (see there). Queued (this thread's ticket from
  // try_acquire_queued), it watches the entry ahead, or the key once none is; else the key. One
  // watch per round; a dropped or compacted watch, or the entry ahead leaving, re-reads.
  result<void> wait_deleted(std::string_view key, std::chrono::steady_clock::time_point deadline,
                            bool from_busy, const cancel_token& cancel, fencing_token known) {
    if (std::error_code ec = detail::etcd_check_args(link_, key, {})) return ec;
    detail::etcd_watch watch(cancel);  // a stop ends its wait (curl_multi_wakeup)
    std::optional<detail::etcd_sighting> seen;
    std::string k;
    detail::etcd_ticket q;  // entry_revision 0: not queued
    {
      auto guard = link_.lock();
      k = lease_key(key);
      if (detail::etcd_ticket* t = from_busy ? tickets_.find(k) : nullptr) {
        q = *t;
        if (t->seen_revision > 0)
          seen = detail::etcd_sighting{k, t->seen_revision, t->holder_lease};
        t->seen_revision = 0;  // used up
      } else if (from_busy) {
        seen = sightings_.take(k);
      }
    }
    using end = detail::etcd_watch::end;
    for (int round = 0, drops = 0; round < 64 && drops < 4; ++round) {
      if (cancel.stop_requested()) return errc::cancelled;
      if (std::chrono::steady_clock::now() >= deadline) return {};
      auto guard = link_.lock();
      const std::int64_t before = seen ? seen->lease : -1;
      if (!seen || seen->revision <= 0) {
        // After a drop, once more if it fails: the next request goes to the next member.
        result<std::optional<detail::etcd_sighting>> now = detail::etcd_read_queue(
            link_, body_, k, q.entry_revision, q.entry, q.ahead, drops > 0 ? 2 : 1);
        if (!now) return now.error();
        if (!*now) return {};  // free
        if ((q.entry_revision == 0 && before >= 0 && (*now)->lease != before) ||
            (!known.is_none() && static_cast<std::uint64_t>((*now)->token) != known.value()))
          return {};  // new holder
        seen = std::move(*now);
      }
      // A watch from now, the holder's time left, the sleep (detail/etcd_queue.hpp).
      const result<end> e =
          detail::etcd_watch_round(link_, guard, body_, watch, q.ahead.empty() ? k : q.ahead,
                                   q.ahead.empty(), *seen, deadline, max_ttl.count() / 1000);
      if (!e) return e.error();
      if (*e == end::cancelled) return errc::cancelled;
      if (*e == end::changed && detail::etcd_key_next(watch, k, q, *seen)) continue;
      if (*e == end::quiet || (*e == end::changed && q.ahead.empty())) return {};
      if (*e != end::changed) ++drops;
      seen->revision = 0;  // re-read: who holds it, and who is ahead now
    }
    return {};
  }

  void remember(const std::string& k, std::string_view owner, std::int64_t token, std::int64_t l) {
    remembered_.put(link_.options().remembered_grants, k, owner, token, l);
  }
  void forget(const std::string& k) { remembered_.erase(k); }
  detail::etcd_remembered remembered_;  // guarded by the link's mutex
  detail::etcd_sightings sightings_;    // guarded by the link's mutex
  detail::etcd_tickets tickets_;        // guarded by the link's mutex
  detail::etcd_orphans orphans_;        // guarded by the link's mutex
  std::string key_;                     // scratch buffers, guarded by the link's mutex
  std::string body_;
};

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_ETCD_HPP
