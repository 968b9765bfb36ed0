// SPDX-License-Identifier: MIT
// holdfast/semaphore.hpp - semaphore<Store, Clock>: N permits for one name over any LeaseStore,
// each permit a lease of its own, with its own fencing token and its own TTL.
//
//   holdfast::semaphore<holdfast::redis_store> pool(store, "gpu", 4, 30s);  // 4 permits
//   auto permit = pool.acquire(10s);            // blocks until one of the 4 is free (or timeout)
//   if (!permit) return permit.error();
//   run_job(permit->key(), *permit);            // fence what it guards by token and owner
//   // the permit is released when it goes out of scope; a crashed holder's permit expires alone
//
// A permit is a `lease` on one of N slot keys, `<name>#0` .. `<name>#<N-1>`. Acquiring tries the
// slots once each, starting at a random one (so contenders spread out), and takes the first the
// store grants; every slot is exclusive by the store's contract (S3), so at most N permits are
// live at once by the store's clock, whatever pauses, lost replies or crashes do (the checker's
// S6, the generalisation of S3, verifies exactly that in the simulator). A permit is renewed,
// released, kept alive (keepalive.hpp) and lost exactly like any lease, and it expires on its
// own when its holder dies; the others are untouched.
//
// Renewal: by default (semaphore_options::renew) a permit keeps itself alive until released, as
// Redisson's lock watchdog and an election's leadership do: the semaphore adds every permit it
// grants to a keepalive of its own (one thread for all its permits, started at the first grant;
// one renew request per permit every half TTL), or to the one you give. A permit whose renewals
// fail turns lost no later than its validity's end and says so through acquire.on_lost.
//
// Waiting: a blocking acquire() on a full pool sleeps in the store until a release of *any* slot
// (store.hpp's wait_for_release_any: memory_store wakes one waiter per release, FIFO over all
// the slots it waits for), or until the earliest holder's expiry, and then asks the slot that
// came free, alone. No request is sent while it sleeps, and a release reaches a waiter at once.
// On a store that waits for one key only it waits for its first slot, bounded by its backoff; on
// one that cannot wait, it polls with backoff.
//
//   permit state | as lease.hpp's table: held -> lost / releasing -> released
//   semaphore    | free count = N - live slots (available(), needs the store's inspect())
//
// Fencing: a permit's token is the slot lease's token, so it orders the holders *of that slot*
// (T1). Fence what a permit guards per slot (keyed_fence_gate by permit.key(), or one fence
// column per slot), since two live permits on different slots are both legitimate. With a store
// whose counter is store-wide (memory, Redis, PostgreSQL, etcd) tokens are also unique across
// slots.
//
// Costs: try_acquire() takes 1 store request when a slot is free at its starting point and up to
// N when the pool is nearly full; a waiter woken by a release takes 1 more (and 1 wait);
// available() takes N inspects. For large N on a remote store,
// prefer a store-side counter (below) or fewer, larger permits.
//
// Compared with the two well-known designs:
//   - Redisson's RPermitExpirableSemaphore keeps one Redis sorted set of permit ids scored by
//     expiry and a counter of free permits, changed by Lua scripts: one round trip per acquire,
//     permits that expire one by one, release by permit id. It gives no fencing token, and it is
//     specific to Redis. Here each permit is a lease on any LeaseStore, with a token, renewal,
//     keepalive and loss detection like every other lease, at the price of up to N requests on a
//     full pool.
//   - Curator's InterProcessSemaphoreV2 (ZooKeeper) creates one ephemeral sequential "lease"
//     node per holder under a lock; a holder's permits vanish with its *session* (not per
//     permit), and the node's sequence number could serve as a token but is not exposed as one.
//     Here every permit has its own TTL and token, and there is no lock around acquiring.
//
// Sources: Dijkstra's counting semaphore; Redisson RPermitExpirableSemaphore; Curator
// InterProcessSemaphoreV2 and its Lease; fencing: Kleppmann 2016.
#ifndef HOLDFAST_SEMAPHORE_HPP
#define HOLDFAST_SEMAPHORE_HPP

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "holdfast/backoff.hpp"
#include "holdfast/cancel.hpp"
#include "holdfast/clock.hpp"
#include "holdfast/detail/config.hpp"
#include "holdfast/detail/random.hpp"
#include "holdfast/detail/saturating.hpp"
#include "holdfast/detail/unwind_guard.hpp"
#include "holdfast/error.hpp"
#include "holdfast/keepalive.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/recipes/detail/lease_recipe.hpp"
#include "holdfast/result.hpp"
#include "holdfast/store.hpp"
#include "holdfast/stores/detail/give_back.hpp"
#include "holdfast/validity.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

/// The most permits a semaphore may have: bounds the store requests of one acquire pass.
inline constexpr std::uint32_t max_permits = 4096;

/// Options for a semaphore.
template <class Clock = steady_clock>
struct semaphore_options {
  /// Clock, validity, backoff and on-loss callback of every permit. `acquire.label`, if set, is the
  /// readable part of the owner ids: each acquire gets a fresh one (`<label>/<32 random hex>`).
  acquire_options<Clock> acquire{};
  /// If set, every permit this semaphore grants is kept alive by this keepalive until released
  /// (whatever `renew` says). It must outlive the permits. Default: none.
  holdfast::keepalive<Clock>* keepalive = nullptr;
  /// true (default): with no `keepalive` given, the semaphore renews every permit it grants with
  /// a keepalive of its own, as an election renews its leadership (keepalive.hpp: one thread for
  /// all the semaphore's permits, started at its first grant, sleeping until a renewal is due;
  /// a renewal is one store request per permit every renewal.renew_fraction of the TTL). A permit
  /// is then held until released, and one whose renewals fail turns lost no later than the end
  /// of its validity, told through acquire.on_lost, as any kept-alive lease. The semaphore must
  /// outlive such permits: once it is destroyed they are no longer renewed (each lasts its TTL).
  /// false: a permit lasts one TTL unless renewed by hand (renew(), or a keepalive of yours).
  bool renew = true;
  /// Options of the semaphore's own keepalive (with `renew` and no `keepalive`). Default: renew
  /// at half the TTL, retry transient errors until the validity ends.
  keepalive_options renewal{};
  /// true (default): every acquire gets a fresh owner id, `<acquire.label>/<32 random hex>` (a
  /// set acquire.owner is taken as the label, as 0.1 did: prefer acquire.label).
  /// false: acquire.owner is used as it is; it must then be non-empty and unique per acquirer
  /// (T3). For deterministic replays (the simulator), where the first slot asked is derived from
  /// the owner id.
  bool unique_owner = true;
};

/// N permits named `name` on a LeaseStore, each permit a lease on its own slot key (see the
/// overview at the top of semaphore.hpp).
///
/// Thread-safety: every member may be called concurrently (it keeps no state besides its
/// configuration); each permit is a lease handle, used by one thread at a time. The store (and a
/// given keepalive) must outlive the semaphore's permits.
template <class Store, class Clock = steady_clock>
HOLDFAST_REQUIRES(lease_store<Store>&& ttl_clock<Clock>)
class semaphore : public detail::lease_recipe<Store, Clock, semaphore_options<Clock>> {
  using recipe = detail::lease_recipe<Store, Clock, semaphore_options<Clock>>;

 public:
  /// A permit is a lease on one slot key: token(), valid(), renew(), release(), RAII.
  using permit = lease<Store, Clock>;
  using typename recipe::time_point;
  // store_type, clock_type, lease_type, time_point and error() come from detail::lease_recipe,
  // as do the members store_, key_ (the semaphore's name: the prefix of its slot keys), opts_ and
  // ttl_.

  /// Makes a semaphore of `permits` permits named `name` in `store`, each granted for `ttl` (ms,
  /// or any duration; truncated to whole ms). Never fails: bad arguments (empty name, permits not
  /// in [1, max_permits], a TTL not in [1 ms, max_ttl] or too short for any validity on the clock,
  /// bad validity/backoff options, a keepalive or `renewal` with bad options) are reported by
  /// error(), and every acquire then fails with it.
  template <class Rep, class Period>
  semaphore(Store& store, std::string name, std::uint32_t permits,
            std::chrono::duration<Rep, Period> ttl, semaphore_options<Clock> opts = {})
      : recipe(store, std::move(name), ttl, std::move(opts), "semaphore", "name"),
        permits_(permits) {
    // The recipe checked the name (the slot keys' prefix), TTL, options and a given keepalive.
    if (permits_ == 0 || permits_ > max_permits) {
      this->refuse("permits of " + std::to_string(permits_) + " is not in [1, max_permits (" +
                   std::to_string(max_permits) + ")]");
    } else if (!this->opts_.unique_owner && this->opts_.acquire.owner.empty()) {
      this->refuse("acquire.owner is empty, and unique_owner is false (a shared owner needs one)");
    } else if (this->opts_.keepalive == nullptr && this->opts_.renew &&
               this->opts_.renewal.check()) {
      this->refuse("renewal (keepalive_options) is invalid, and renew is true with no keepalive");
    }
    if (this->config_error_) return;
    for (std::uint32_t i = 0; i < permits_; ++i) slot_keys_.push_back(slot_key(i));
  }

  /// Stops the semaphore's own keepalive, if it started one: its permits are no longer renewed.
  ~semaphore() = default;

  /// Tries once to take a permit: asks the N slots in turn, from a random one, and returns the
  /// first the store grants. Makes at most N store requests and does not wait.
  /// \returns the permit (a held lease on a slot key);
  ///   errc::busy if every slot is held (all N permits are out);
  ///   errc::invalid_argument for bad constructor arguments;
  ///   if no slot was granted and a slot failed otherwise (store_unavailable, timeout, ...), that
  ///     error instead of busy, so a caller can tell a full pool from a failing store. A slot
  ///     whose call failed may have been granted without the reply arriving (a lost reply): it
  ///     is asked again with the same owner (which returns that grant) and released, before
  ///     this returns a permit on another slot or an error. Nothing is kept from a failed try:
  ///     only a slot whose store still fails when asked again is left to its TTL.
  /// Exceptions from the store or clock propagate.
  result<permit> try_acquire() {
    if (this->config_error_) return this->config_error_;
    const acquire_options<Clock> o = attempt_options();
    std::vector<std::uint32_t> unsure;
    const detail::on_unwind unwind([&] { give_back(o, unsure); });  // an exception: as a failure
    result<permit> p = pass(o, first_slot(o.owner), unsure, permits_);
    if (!p) give_back(o, unsure);
    return p;
  }

  /// Takes a permit, waiting while every slot is held, until `timeout` has passed on the clock
  /// (<= 0: one pass). Where the store can wait for a release of any of several keys (store.hpp's
  /// wait_for_release_any: memory_store), the waiter sleeps in the store until a release of any
  /// slot wakes it (one waiter per release, in the order they began waiting) or a holder's permit
  /// can have expired, and then asks the slot that came free first, alone: no rescan, and no
  /// request while asleep. Where the store can wait for one key only (wait_for_release: Redis,
  /// PostgreSQL, etcd), the pause between passes is spent waiting for this acquirer's first slot,
  /// bounded by the backoff delay (another slot may free first). Otherwise, and after a transient
  /// store error, it retries with exponential backoff and full jitter (acquire.backoff).
  /// Every pass uses the same owner id and asks first the slots whose calls failed before
  /// (their replies may have been lost), so a pass after a lost reply gets its own grant back
  /// instead of taking a second slot; a pass that wins another slot, and an acquire that ends
  /// without a permit, give such slots back (ask again, release). \returns the permit (renewed
  /// by default: semaphore_options::renew); errc::timeout if the deadline passed with no slot
  /// granted; errc::busy (or the last transient error) if acquire.backoff.max_attempts passes ran
  /// out; at once, any non-transient error (invalid_argument, protocol_error, token_exhausted,
  ///   misconfigured, permission_denied);
  ///   errc::cancelled within one store round trip of acquire.cancel's stop (cancel.hpp), with no
  ///     permit held (a grant whose round trip saw the stop is given back).
  /// acquire.report, if set, gets every slot's attempt and the last store error with its text.
  /// Exceptions from the store or clock propagate.
  template <class Rep, class Period>
  result<permit> acquire(std::chrono::duration<Rep, Period> timeout) {
    if (this->config_error_) return this->config_error_;
    const acquire_options<Clock> o = attempt_options();
    Clock clock = o.clock;
    const time_point deadline = detail::saturating_add(
        clock.now(), timeout > decltype(timeout)::zero() ? timeout : decltype(timeout)::zero());
    backoff delays(o.backoff);
    // Start every full pass at the same slot: a retry after a lost reply asks its own slot first.
    const std::uint32_t start = first_slot(o.owner);
    // Slots whose grant may have been made without this acquirer hearing of it (a lost reply):
    // asked first by the next pass (the same owner gets its own grant back) and given back when
    // the acquire ends without them.
    std::vector<std::uint32_t> unsure;
    // An exception between store calls (the clock's, a store call's) ends it as a failure does,
    // best effort (detail/unwind_guard.hpp), and then reaches the caller unchanged.
    const detail::on_unwind unwind([&] { give_back(o, unsure); });
    const auto fail = [&](std::error_code ec) -> result<permit> {
      give_back(o, unsure);
      return ec;
    };
    // After a wake-up: the one slot that may be free, or permits_ for none. (Not an optional:
    // g++ 12 -O2 warns maybe-uninitialized on one here, a false positive that -Werror makes fatal.)
    std::uint32_t only = permits_;
    for (std::uint32_t made = 1;; ++made) {
      const std::optional<std::chrono::steady_clock::time_point> until =
          pass_deadline(clock, deadline);
      const std::chrono::steady_clock::time_point* bound = until ? &*until : nullptr;
      result<permit> p = only < permits_ ? pass(o, only, unsure, 1, bound)
                                         : pass(o, start, unsure, permits_, bound);
      only = permits_;
      if (p) return p;
      // errc::cancelled too (not transient)
      if (!is_transient(p.error()) || delays.exhausted(made)) return fail(p.error());
      const time_point now = clock.now();
      if (!(now < deadline)) return fail(errc::timeout);
      time_point wake = detail::saturating_add(now, delays.next_delay());
      if (deadline < wake) wake = deadline;
      result<bool> woken = false;
      if (p.error() == errc::busy) woken = wait(o, clock, now, deadline, wake, start, only);
      if (!woken) return fail(woken.error());
      if (*woken) continue;
      if (!detail::sleep_until_or_cancelled(clock, wake, o.cancel)) return fail(errc::cancelled);
    }
  }

  /// Returns how many permits are free now by the store's view: N minus the live slot leases
  /// (requires the store's inspect(); N requests). A snapshot: acquiring after it may still find
  /// the pool full. \returns the count; errc::invalid_argument for bad constructor arguments;
  ///   the first error inspect() reports.
  template <class S = Store, class = std::enable_if_t<has_inspect_v<S>>>
  result<std::uint32_t> available() {
    if (this->config_error_) return this->config_error_;
    std::uint32_t free = 0;
    for (std::uint32_t i = 0; i < permits_; ++i) {
      result<std::optional<lease_record>> r = this->store_.inspect(slot_key(i));
      if (!r) return r.error();
      if (!*r) ++free;
    }
    return free;
  }

  /// Returns the key of slot `i` (`<name>#<i>`), i in [0, permits()).
  [[nodiscard]] std::string slot_key(std::uint32_t i) const {
    return this->key_ + "#" + std::to_string(i);
  }
  /// Returns the semaphore's name.
  [[nodiscard]] const std::string& name() const noexcept { return this->key_; }
  /// Returns N, the number of permits.
  [[nodiscard]] std::uint32_t permits() const noexcept { return permits_; }
  /// Returns the TTL (ms) of every permit.
  [[nodiscard]] std::chrono::milliseconds ttl() const noexcept { return this->ttl_; }

 private:
  // Between two passes of acquire(), with every slot busy: waits in the store where it can (see
  // acquire()). \returns true if woken (the next pass starts at once; `only` is set to the slot to
  //   ask alone when the store named one, else left at permits_), false to sleep the backoff delay
  //   until `wake` first (the store cannot wait, or its wait failed), errc::cancelled.
  result<bool> wait(const acquire_options<Clock>& o, Clock& clock, time_point now,
                    time_point deadline, time_point wake, std::uint32_t start,
                    std::uint32_t& only) {
    if constexpr (can_wait_for_release_any_v<Store, Clock>) {
      (void)clock, (void)now, (void)wake, (void)start;
      result<std::size_t> r = this->store_.wait_for_release_any(slot_keys_, deadline, o.cancel);
      if (o.cancel.stop_requested()) return errc::cancelled;
      if (!r) return false;
      if (*r < permits_) only = static_cast<std::uint32_t>(*r);
      return true;  // at the deadline (r = N) the next pass is the last
    } else if constexpr (can_wait_for_release_v<Store, Clock>) {
      // For one slot: until it is released or its holder's permit can have expired, bounded by
      // the backoff delay (another slot may free first). Woken by a stop where the store can be.
      (void)deadline, (void)only;
      result<void> r =
          detail::wait_in_store<false>(this->store_, slot_key(start), clock, now, wake, o.cancel);
      if (o.cancel.stop_requested()) return errc::cancelled;
      return static_cast<bool>(r);
    } else {
      (void)o, (void)clock, (void)now, (void)deadline, (void)wake, (void)start, (void)only;
      return false;
    }
  }

  // The keepalive that renews this semaphore's permits: the given one, else (with renew) its
  // own, started at the first grant; null if permits are not renewed.
  holdfast::keepalive<Clock>* renewer() {
    if (this->opts_.keepalive != nullptr || !this->opts_.renew) return this->opts_.keepalive;
    std::lock_guard<std::mutex> lock(own_mu_);
    if (!own_keepalive_) {
      own_keepalive_ = std::make_unique<holdfast::keepalive<Clock>>(this->opts_.acquire.clock,
                                                                    this->opts_.renewal);
    }
    return own_keepalive_.get();
  }

  acquire_options<Clock> attempt_options() const {
    acquire_options<Clock> o = this->opts_.acquire;
    if (!this->opts_.unique_owner) return o;
    o.owner = detail::fresh_owner_id(o);
    return o;
  }

  // The slot a pass starts at: spread over the slots by the (random) owner id, so contenders do
  // not all queue on slot 0, and reproducible from the owner id alone. FNV-1a.
  std::uint32_t first_slot(std::string_view owner) const noexcept {
    std::uint64_t h = 14695981039346656037ull;
    for (const char c : owner) {
      h ^= static_cast<unsigned char>(c);
      h *= 1099511628211ull;
    }
    return static_cast<std::uint32_t>(h % permits_);
  }

  // One pass over the slots: first those in `unsure` (whose earlier call may have granted
  // them to this owner: asking again returns that grant), then `count` others from `start`; the
  // first grant wins and every other unsure slot is given back. Busy slots are skipped; a failing
  // slot is remembered (reported if no slot is granted) and added to `unsure`, since its call
  // may have applied; a non-transient error ends the pass at once. `until` (if given) bounds
  // each store call where the store can (store_deadline.hpp).
  result<permit> pass(const acquire_options<Clock>& o, std::uint32_t start,
                      std::vector<std::uint32_t>& unsure, std::uint32_t count,
                      const std::chrono::steady_clock::time_point* until = nullptr) {
    std::error_code failure{};
    const std::vector<std::uint32_t> first = unsure;  // (no allocation while nothing failed)
    std::uint32_t asking = permits_;       // the slot whose store call is in hand (permits_: none)
    const detail::on_unwind in_hand([&] {  // a call that threw may have granted: give it back too
      if (asking < permits_ && std::find(unsure.begin(), unsure.end(), asking) == unsure.end()) {
        unsure.push_back(asking);
      }
    });
    for (std::size_t k = 0; k < first.size() + count; ++k) {
      if (o.cancel.stop_requested()) return errc::cancelled;  // before each round trip
      std::uint32_t slot = 0;
      if (k < first.size()) {
        slot = first[k];
      } else {
        slot = static_cast<std::uint32_t>((start + (k - first.size())) % permits_);
        if (std::find(first.begin(), first.end(), slot) != first.end()) continue;  // asked
      }
      bool maybe = false;  // the slot's last answer may hide a grant (two lost replies)
      asking = slot;
      result<permit> p = detail::attempt_asking_again(this->store_, slot_key(slot), this->ttl_, o,
                                                      o.owner, 1, &maybe, nullptr, until);
      asking = permits_;
      if (p && o.cancel.stop_requested()) {
        (void)p->release();  // the stop came while the grant was on its way: hold nothing
        return errc::cancelled;
      }
      if (p) {
        forget(unsure, slot);
        give_back(o, unsure);
        if (holdfast::keepalive<Clock>* k = renewer()) (void)k->add(*p);
        return p;
      }
      if (p.error() == errc::busy) {
        forget(unsure, slot);  // held by another: nothing of this owner's is there
        continue;
      }
      if (maybe && std::find(unsure.begin(), unsure.end(), slot) == unsure.end()) {
        unsure.push_back(slot);
      }
      if (!is_transient(p.error())) return p.error();
      if (!failure) failure = p.error();
    }
    if (failure) return failure;
    return errc::busy;
  }

  // The instant on steady_clock at which `deadline` on `clock` comes, where the store can bound
  // its calls by it (store_deadline.hpp); else none, and the clock is not read (the simulator
  // schedules at every read).
  static std::optional<std::chrono::steady_clock::time_point> pass_deadline(Clock& clock,
                                                                            time_point deadline) {
    if constexpr (has_try_acquire_until_v<Store>) {
      const auto left = detail::saturating_sub(deadline, clock.now());
      return detail::saturating_add(std::chrono::steady_clock::now(),
                                    left > left.zero() ? left : left.zero());
    } else {
      (void)clock, (void)deadline;
      return std::nullopt;
    }
  }

  static void forget(std::vector<std::uint32_t>& unsure, std::uint32_t slot) {
    unsure.erase(std::remove(unsure.begin(), unsure.end(), slot), unsure.end());
  }

  // Gives back whatever this owner may hold on the `unsure` slots: asks each again with the same
  // owner (a store returns a live lease's own grant, T1) and releases what it grants. Best
  // effort: a slot whose store keeps failing is left to its TTL (it is not kept alive).
  void give_back(const acquire_options<Clock>& o, std::vector<std::uint32_t>& unsure) {
    for (const std::uint32_t slot : unsure) {
      (void)detail::give_back(this->store_, slot_key(slot), o.owner, this->ttl_);
    }
    unsure.clear();
  }

  std::uint32_t permits_;
  std::vector<std::string> slot_keys_;  // slot_key(0..N-1), for the store's wait
  std::mutex own_mu_;                   // guards own_keepalive_'s start
  std::unique_ptr<holdfast::keepalive<Clock>> own_keepalive_;
};

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_SEMAPHORE_HPP
