// SPDX-License-Identifier: MIT
// holdfast/read_write_lease.hpp - read-write leases: many readers or one writer per key, each
// grant a lease (lease.hpp) with its own TTL and fencing token, over a store with the read-write
// capability (store.hpp, has_read_write_v, RW1-RW4).
//
//   holdfast::memory_store<> store;
//   holdfast::read_write_lease<holdfast::memory_store<>> doc(store, "doc/7");
//   auto r = doc.acquire_read(10s, 2s);              // shared: other readers may hold too
//   if (r) show(db.read(r->token()));                // the token says which write it may see
//   r = {};                                          // (released by its destructor)
//   auto w = doc.acquire_write(10s, 2s);             // exclusive: waits for every reader
//   if (w) db.write(w->token(), w->owner(), ...);    // fence: only the newest writer's token
//
// The pieces. read_write_view<Store, Mode> is a LeaseStore whose try_acquire/renew/release are
// Store's try_acquire_rw/renew_rw/release_rw in one mode, so a grant in either mode is an
// ordinary lease<view, Clock>: validity on the holder's clock, RAII release, lost-reply retries as
// the same owner (T1), keepalive.add(), the blocking acquire with backoff. read_write_lease is
// the named lock (one key, like Redisson's RReadWriteLock or Curator's InterProcessReadWriteLock)
// that owns one view per mode and hands out shared_lease and exclusive_lease handles; it must
// outlive them, as a store must outlive its leases.
//
//   handle          | while it is held                     | its token
//   ----------------+--------------------------------------+------------------------------------
//   shared_lease    | other shared leases may be held;     | greater than every writer's before
//                   | no exclusive one                     | it, less than the next writer's
//   exclusive_lease | no other lease of the key            | greater than every token before it
//
// Fencing. A resource that admits a write only with a token at least every token it has seen
// (fence.hpp) refuses a writer paused past its lease once a newer writer has written, and, if
// readers present their tokens when they read, once a newer reader has read: a reader's token
// was granted after every earlier writer's lease had ended (RW1, RW2), so a write under an older
// token arriving after that read is stale.
//
// Starvation (RW4): a writer refused because readers hold records a write intent in the store;
// while it is live no new reader is granted, so the readers drain and the writer's next ask wins.
// The intent lasts the TTL of the writer's latest refused ask, so acquire_write() caps its backoff
// at half the TTL to ask again before the intent lapses. A vanished writer blocks new readers for
// at most one TTL. Readers already holding keep renewing: a reader that never lets go delays the
// writer, as a writer that never lets go delays readers.
//
// Waiting. On a store with wait_for_release_rw (memory_store on steady_clock, Redis, PostgreSQL,
// etcd), acquire_read() and acquire_write() sleep in the store between asks, woken by a
// read-write release of the key or at the expiry of what keeps their mode out (a writer waits at
// most half its intent's time left); on the others (memory_store on another clock, a user's
// store without it) they back off (acquire_options::backoff).
//
// No upgrade in place. A reader asking to write is busy (RW3). Two readers that may each upgrade
// either wait for each other forever (each waits for the other reader to leave) or, if the store
// lets an upgrade through while other readers hold, become two writers. A reader releases its
// shared_lease and acquires an exclusive_lease (what it read may have changed in between: its
// new token says so). No downgrade in place either (a writer asking to read is busy).
//
// Compared with its peers:
//   - Redisson's RReadWriteLock (one Redis hash per lock with a mode field and per-thread counts;
//     the watchdog renews) is reentrant, lets the write holder also take the read lock, and gives
//     no fencing token; readers and writers are not queued by mode, so a steady stream of readers
//     can keep a writer waiting (the starvation asked about in redisson #1458).
//   - Curator's InterProcessReadWriteLock (sequential ZooKeeper nodes under one path) is "fair":
//     each user gets the lock in request order, so a reader queued behind a writer waits and
//     writers are not starved. A writer may take the read lock (downgrade: write, read, release
//     the write); "upgrading from a read lock to the write lock is not possible" (its wiki), and a
//     reader asking for the write lock never succeeds. No token beyond the node's sequence number.
//   - madelson/DistributedLock's DistributedReaderWriterLock types (SQL Server, Postgres, Redis,
//     ...) give writers priority so readers cannot starve them; for upgrades some back ends offer
//     a separate upgradeable read lock, held by one owner at a time, which is what keeps two
//     upgraders from deadlocking. No fencing token.
//   - etcd's recipe.RWMutex (its contrib/experimental recipes) puts one key per reader or writer
//     under a prefix, bound to the client's session lease (one lease and TTL for every lock the
//     session takes), and each waits for the older keys it conflicts with: fair like Curator's,
//     no upgrade, and no token beyond the key's revision. Over etcd_store here (stores/detail/
//     etcd_rw.hpp) every grant is a key with its own lease and the caller's TTL, its token that
//     key's create revision, and writers go first through an intent key as on the other stores.
// Here the preference is bounded in the store (RW4) rather than a client-side queue, no handle is
// upgradeable (one upgradeable reader would be a third mode with its own rules), and every grant
// carries a token from the key's one counter.
//
// Thread-safety: read_write_lease may be shared by threads (its members only read its state);
// each handle is a lease (one thread at a time, or given to a keepalive).
#ifndef HOLDFAST_READ_WRITE_LEASE_HPP
#define HOLDFAST_READ_WRITE_LEASE_HPP

#include <chrono>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "holdfast/acquire_options.hpp"
#include "holdfast/cancel.hpp"
#include "holdfast/clock.hpp"
#include "holdfast/detail/config.hpp"
#include "holdfast/detail/detect.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/result.hpp"
#include "holdfast/store.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

namespace detail {
template <class S>
using wait_for_release_rw_call = decltype(std::declval<S&>().wait_for_release_rw(
    std::declval<std::string_view>(), std::declval<lease_mode>(),
    std::declval<const std::chrono::steady_clock::time_point&>(),
    std::declval<const cancel_token&>()));
}  // namespace detail

/// True iff S offers the optional read-write wait (store.hpp): `result<void>
/// wait_for_release_rw(std::string_view key, lease_mode mode, const
/// std::chrono::steady_clock::time_point& deadline, const cancel_token& cancel)`, which
/// read_write_view offers as its wait_for_release (memory_store<steady_clock>, redis_store,
/// postgres_store and etcd_store have it).
template <class S>
inline constexpr bool can_wait_for_release_rw_v =
    detail::is_detected_convertible<result<void>, detail::wait_for_release_rw_call, S>::value;

/// A LeaseStore over `Store`'s read-write grants in mode `Mode`: try_acquire, renew and release
/// are Store's try_acquire_rw, renew_rw and release_rw with `Mode` (and wait_for_release its
/// wait_for_release_rw, if it has one), so that lease.hpp, acquire(), keepalive.hpp and the
/// conformance kit work on either mode unchanged. min_ttl() is Store's
/// (store_min_ttl). It holds a pointer to the store, which must outlive it. Thread-safety: as
/// Store.
template <class Store, lease_mode Mode>
class read_write_view {
  static_assert(has_read_write_v<Store>,
                "holdfast::read_write_view<Store>: Store needs the read-write capability "
                "(try_acquire_rw, renew_rw and release_rw; store.hpp, has_read_write_v)");

 public:
  /// The mode of every grant through this view.
  static constexpr lease_mode mode = Mode;

  /// Makes a view of `store`'s grants in mode `Mode`.
  explicit read_write_view(Store& store) noexcept : store_(&store) {}

  /// Store::try_acquire_rw(key, owner, ttl, Mode): its outcomes unchanged (busy includes an ask
  /// in the other mode by an owner holding this one, and a shared ask blocked by a write intent).
  result<grant> try_acquire(std::string_view key, std::string_view owner,
                            std::chrono::milliseconds ttl) {
    return store_->try_acquire_rw(key, owner, ttl, Mode);
  }
  /// Store::renew_rw(key, owner, token, ttl, Mode): its outcomes unchanged.
  result<grant> renew(std::string_view key, std::string_view owner, fencing_token token,
                      std::chrono::milliseconds ttl) {
    return store_->renew_rw(key, owner, token, ttl, Mode);
  }
  /// Store::release_rw(key, owner, token, Mode): its outcomes unchanged.
  result<void> release(std::string_view key, std::string_view owner, fencing_token token) {
    return store_->release_rw(key, owner, token, Mode);
  }
  /// Store::wait_for_release_rw(key, Mode, deadline, cancel), where Store has it
  /// (can_wait_for_release_rw_v): blocking acquire() then sleeps until a release or the expiry
  /// of what keeps this mode out, instead of backing off. \returns its outcomes unchanged.
  template <class S = Store, std::enable_if_t<can_wait_for_release_rw_v<S>, int> = 0>
  result<void> wait_for_release(std::string_view key,
                                const std::chrono::steady_clock::time_point& deadline,
                                const cancel_token& cancel = {}) {
    return store_->wait_for_release_rw(key, Mode, deadline, cancel);
  }
  /// Returns store_min_ttl(store) (ms): the shortest TTL the store is asked for.
  [[nodiscard]] std::chrono::milliseconds min_ttl() const noexcept {
    return store_min_ttl(*store_);
  }
  /// Returns the store.
  [[nodiscard]] Store& store() const noexcept { return *store_; }

 private:
  Store* store_;
};

/// A reader's lease: held alongside other readers' shared leases, never with a writer's.
template <class Store, class Clock = steady_clock>
using shared_lease = lease<read_write_view<Store, lease_mode::shared>, Clock>;
/// A writer's lease: held by one owner, with no reader.
template <class Store, class Clock = steady_clock>
using exclusive_lease = lease<read_write_view<Store, lease_mode::exclusive>, Clock>;

/// A named read-write lock on one key of `Store` (see the overview): acquire_read() and
/// try_acquire_read() hand out shared_lease handles, acquire_write() and try_acquire_write()
/// exclusive_lease handles, each a lease with its own owner id (opts.owner if set, else a fresh
/// random one per acquire, labelled with opts.label), TTL and token. Neither copyable nor movable:
/// its handles point at its views. The store must outlive it, and it must outlive its handles.
///
/// Thread-safety: every member may be called concurrently (they only read the lock's state).
template <class Store, class Clock = steady_clock>
class read_write_lease {
 public:
  using reader_store = read_write_view<Store, lease_mode::shared>;
  using writer_store = read_write_view<Store, lease_mode::exclusive>;
  using shared_type = lease<reader_store, Clock>;
  using exclusive_type = lease<writer_store, Clock>;

  /// Makes the lock on `key` of `store`; `opts` apply to every acquire (clock, owner or label,
  /// validity, backoff). An empty key is refused by each acquire with invalid_argument.
  read_write_lease(Store& store, std::string key, acquire_options<Clock> opts = {})
      : readers_(store), writers_(store), key_(std::move(key)), opts_(std::move(opts)) {}
  read_write_lease(const read_write_lease&) = delete;
  read_write_lease& operator=(const read_write_lease&) = delete;

  /// Tries once to take a shared lease of `ttl` (holdfast::try_acquire on the shared view).
  /// \returns the lease; errc::busy while a writer holds or a writer's intent blocks new readers
  ///   (RW4), or if this owner holds the write lease (no downgrade); every error try_acquire()
  ///   reports (invalid_argument, timeout, store_unavailable, token_exhausted, ...).
  template <class Rep, class Period>
  [[nodiscard]] result<shared_type> try_acquire_read(std::chrono::duration<Rep, Period> ttl) const {
    return holdfast::try_acquire(readers_, key_, ttl, opts_);
  }

  /// Takes a shared lease of `ttl`, retrying busy and transient errors with backoff until
  /// `timeout` (holdfast::acquire). \returns as try_acquire_read, with errc::timeout when the
  ///   deadline passed.
  template <class Rep, class Period, class TRep, class TPeriod>
  [[nodiscard]] result<shared_type> acquire_read(
      std::chrono::duration<Rep, Period> ttl, std::chrono::duration<TRep, TPeriod> timeout) const {
    return holdfast::acquire(readers_, key_, ttl, timeout, opts_);
  }

  /// Tries once to take the exclusive lease of `ttl`. A refusal because readers hold records this
  /// owner's write intent in the store (RW4; with a fresh owner id per call, only a fixed
  /// opts.owner makes later tries the same writer). \returns the lease; errc::busy while any
  ///   other lease of the key is held, or if this owner holds a shared lease (no upgrade: release
  ///   it first); every error try_acquire() reports.
  template <class Rep, class Period>
  [[nodiscard]] result<exclusive_type> try_acquire_write(
      std::chrono::duration<Rep, Period> ttl) const {
    return holdfast::try_acquire(writers_, key_, ttl, opts_);
  }

  /// Takes the exclusive lease of `ttl`, waiting up to `timeout`, as one writer (one owner id for
  /// every attempt), so its intent keeps new readers out while it waits (RW4); its backoff is
  /// capped at half the TTL so that each ask renews the intent before it lapses. \returns as
  ///   try_acquire_write, with errc::timeout when the deadline passed.
  template <class Rep, class Period, class TRep, class TPeriod>
  [[nodiscard]] result<exclusive_type> acquire_write(
      std::chrono::duration<Rep, Period> ttl, std::chrono::duration<TRep, TPeriod> timeout) const {
    acquire_options<Clock> o = opts_;
    const auto half = std::chrono::duration_cast<std::chrono::nanoseconds>(ttl) / 2;
    if (half > std::chrono::nanoseconds::zero() && o.backoff.max_delay > half) {
      o.backoff.max_delay = half;
      if (o.backoff.initial > half) o.backoff.initial = half;
    }
    return holdfast::acquire(writers_, key_, ttl, timeout, o);
  }

  /// Returns the key.
  [[nodiscard]] const std::string& key() const noexcept { return key_; }
  /// Returns the options every acquire uses.
  [[nodiscard]] const acquire_options<Clock>& options() const noexcept { return opts_; }

 private:
  // mutable: lease<View> keeps a View* and try_acquire takes View&; the views themselves hold
  // only the store pointer and never change.
  mutable reader_store readers_;
  mutable writer_store writers_;
  std::string key_;
  acquire_options<Clock> opts_;
};

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_READ_WRITE_LEASE_HPP
