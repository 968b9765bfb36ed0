// SPDX-License-Identifier: MIT
// holdfast/lease.hpp - lease<Store, Clock>: a held grant, its validity on the holder's clock, and
// the acquire / renew / release operations around it.
//
//   holdfast::memory_store<> store;
//   auto l = holdfast::try_acquire(store, "orders", std::chrono::seconds(10));
//   if (!l) return l.error();                 // errc::busy is contention, not a failure
//   db.write(l->token(), l->owner(), ...);    // downstream fences token and owner (fence.hpp)
//   // l releases the key when it goes out of scope
//
// A lease handle moves through these states (state()):
//
//   state     | entered when                                          | valid() | destructor
//   ----------+-------------------------------------------------------+---------+-----------------
//   held      | acquire granted; renew succeeded                      | until   | releases
//             |                                                       | validity|
//   lost      | validity passed (seen by valid(), renew() or a        | false   | releases if the
//             | keepalive); renew answered lease_lost or not_holder;  |         | record may remain
//             | the clock went backwards; the store answered garbage  |         |
//   releasing | release() was called and has not (yet) succeeded: a   | false   | retries release
//             | store error, or the store call is in flight or threw  |         | once, quietly
//   released  | release() succeeded or the store said not_holder;     | false   | nothing
//             | moved-from                                            |         |
//
// No transition leads back to held: a lost, releasing or released handle is never renewed back to
// life (renew() answers lease_lost without asking the store), so a holder must acquire anew.
//
// Loss detection. `valid()` is the holder's belief (invariant S4): true only before
// `valid_until()`, which is `start + ttl*(1-drift) - margin` with `start` read before the request
// left (validity.hpp). The lease notices loss on its own clock, without hearing from the store,
// the first time valid(), renew() or a keepalive (keepalive.hpp) looks after valid_until(). The
// on-loss callback (acquire_options::on_lost, or on_lost()) then runs exactly once, with the
// loss_cause. A store that can tell a session expiry from a refusal (zookeeper_store, through
// store_session_expired() in store.hpp) makes that cause session_expired rather than
// renew_refused or not_holder. Safety never rests on any of this: a holder paused past its
// validity is stopped downstream by its fencing token (fence.hpp).
//
// Release on error. release() first moves a held lease to `releasing`, so no renewal (manual or a
// keepalive's) reaches the store after it, whatever the store answers. If the store fails, the
// handle stays releasing: release() may be retried (the destructor retries once), and if it never
// succeeds the store's TTL frees the key, since nothing renews it any more.
//
// Sharing with a keepalive. A lease keeps its state inline and takes no lock: cheap, movable,
// used by one thread at a time. keepalive::add() moves the state into a shared control block
// (one allocation) that the keepalive thread also holds; from then on every store operation on the
// lease (renew, release) runs under a per-lease operation mutex, so a renewal and a release of one
// lease never overlap and after release() returns no renewal of that lease reaches the store. The
// handle stays movable; moving it moves the pointer to the block. The state and the block live in
// detail/lease_shared.hpp; the keepalive drives the block only through detail/keepalive_port.hpp.
// acquire_options (acquire_options.hpp) and the acquire machinery (detail/acquire.hpp) are
// included here; this file is the handle and the two acquire functions.
//
// Blocking acquire() retries contention and transient store errors with exponential backoff and
// full jitter (backoff.hpp) until a deadline; where the store can wait for a release
// (store.hpp's wait_for_release: memory_store on steady_clock, Redis, PostgreSQL) it sleeps there
// instead of polling while the key is busy. It always retries as the same owner, so a retry after a
// lost reply gets the same grant back (store contract T1) instead of waiting for its own orphan.
#ifndef HOLDFAST_LEASE_HPP
#define HOLDFAST_LEASE_HPP

#include <chrono>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include "holdfast/acquire_options.hpp"
#include "holdfast/backoff.hpp"
#include "holdfast/clock.hpp"
#include "holdfast/detail/config.hpp"
#include "holdfast/detail/owner_id.hpp"
#include "holdfast/detail/random.hpp"
#include "holdfast/detail/saturating.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/lease/detail/acquire.hpp"
#include "holdfast/lease/detail/keepalive_port.hpp"
#include "holdfast/lease/detail/lease_shared.hpp"
#include "holdfast/observer.hpp"
#include "holdfast/result.hpp"
#include "holdfast/store.hpp"
#include "holdfast/validity.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

namespace detail {

// Lets a keepalive reach a lease's shared block (the keepalive_target port) without widening
// lease's public interface.
struct lease_access {
  template <class Store, class Clock>
  static std::shared_ptr<keepalive_target<Clock>> share(lease<Store, Clock>& l) {
    return l.share();
  }
  template <class Store, class Clock>
  static std::shared_ptr<keepalive_target<Clock>> shared_block(const lease<Store, Clock>& l) {
    return l.shared_;
  }
  // A lease from a grant made by a store call other than try_acquire (multi_lease.hpp's atomic
  // multi-key grant) that asked for `asked` (ms), validity counted from `start`; arm() then sets
  // the options' callbacks, as acquire_once does once the lease is known valid.
  template <class Store, class Clock>
  static lease<Store, Clock> from_grant(Store& store, const acquire_options<Clock>& opts,
                                        std::string key, std::string_view owner, grant g,
                                        std::chrono::milliseconds asked,
                                        typename Clock::time_point start) {
    const auto until = lease_body<Store, Clock>::valid_until_for(
        opts.clock, start, trusted_span(g.ttl, opts.validity));
    return lease<Store, Clock>(lease_key{}, store, opts.clock, std::move(key), owner_id(owner), g,
                               asked, opts.validity, start, until, start, loss_callback{}, nullptr);
  }
  template <class Store, class Clock>
  static void arm(lease<Store, Clock>& l, const acquire_options<Clock>& opts) {
    if (opts.on_lost) l.inline_.on_lost = opts.on_lost;
    l.inline_.observer = opts.observer;
  }
};

}  // namespace detail

/// A lease on one key of a LeaseStore, held by this handle: its key, owner id, fencing token, TTL
/// and validity. Move-only. Releases the key when destroyed (never throws from the destructor).
///
/// Thread-safety: one handle is used by one thread at a time (like std::unique_lock); distinct
/// handles, on the same store or not, may be used concurrently if the store allows it. A keepalive
/// (keepalive.hpp) may renew the lease concurrently with its holder: that is synchronized inside.
/// The store must outlive every lease on it.
template <class Store, class Clock = steady_clock>
HOLDFAST_REQUIRES(lease_store<Store>&& ttl_clock<Clock>)
class lease {
  static_assert(assert_lease_store<Store>(), "holdfast::lease<Store>: Store must model LeaseStore");
  static_assert(assert_ttl_clock<Clock>(),
                "holdfast::lease<Store, Clock>: Clock must model ttl_clock");

  using body_type = detail::lease_body<Store, Clock>;
  using shared_type = detail::lease_shared<Store, Clock>;

 public:
  using store_type = Store;
  using clock_type = Clock;
  using time_point = typename Clock::time_point;
  using duration = typename Clock::duration;

  lease(lease&& other) noexcept
      : inline_(std::move(other.inline_)), shared_(std::move(other.shared_)) {
    other.inline_.clear();
  }

  lease& operator=(lease&& other) noexcept {
    if (this != &other) {
      release_quietly();
      inline_ = std::move(other.inline_);
      shared_ = std::move(other.shared_);
      other.inline_.clear();
    }
    return *this;
  }

  lease(const lease&) = delete;
  lease& operator=(const lease&) = delete;

  /// Not for users (its key is in holdfast::detail): a held lease on grant `g` of `key` to
  /// `owner` from a request that asked for `asked` (ms), which left at `start` on the holder's
  /// clock; valid until `until`, the clock last read at `seen`, armed with the on-loss callback
  /// `lost` and the observer `obs`.
  lease(detail::lease_key, Store& store, Clock clock, std::string&& key, detail::owner_id&& owner,
        grant g, std::chrono::milliseconds asked, validity_options validity, time_point start,
        time_point until, time_point seen, const loss_callback& lost, lease_observer* obs)
      : inline_(&store, std::move(clock), std::move(key), std::move(owner), g, asked, validity,
                start, until, seen, lost, obs) {}
  /// Not for users: a lease with the state `body`.
  lease(detail::lease_key, body_type&& body) : inline_(std::move(body)) {}

  /// Releases the key if this handle may still hold it, first noticing on its own clock whether
  /// the lease was lost (the on-loss callback then runs). Never throws: errors and exceptions from
  /// the store, the clock or the callback are swallowed, and the TTL frees the key regardless. A
  /// lease in `releasing` gets one more release attempt.
  ~lease() { release_quietly(); }

  /// Returns the key this lease is on.
  [[nodiscard]] const std::string& key() const noexcept { return b().key; }
  /// Returns the owner id this lease was granted to. The lease keeps an id of up to 47
  /// characters (every generated one with a label of up to 14) inline, without an allocation;
  /// the std::string returned is made on the first call (which may throw std::bad_alloc) and
  /// lives as long as the lease, unmoved. Concurrent calls on one lease are safe.
  [[nodiscard]] const std::string& owner() const { return b().owner.str(); }
  /// Returns the fencing token of the grant; pass it with every write the lease protects. It never
  /// changes: a renewal keeps the token. A moved-from handle returns the none token, which every
  /// fence rejects.
  [[nodiscard]] fencing_token token() const noexcept { return b().token; }
  /// Returns the TTL (ms) of the latest grant or renewal, as the store reported it: at most
  /// asked_ttl(), and less when the store granted less (validity and renew_due_at() follow it).
  [[nodiscard]] std::chrono::milliseconds ttl() const {
    detail::maybe_lock lock(data_mutex());
    return b().ttl;
  }
  /// Returns the TTL (ms) the latest acquire or renew(ttl) asked for: what renew() and a
  /// keepalive ask for next, whatever the store granted (so a short grant, such as a ZooKeeper
  /// grant woken with no request, does not shrink the lease, nor ask under the store's min_ttl).
  [[nodiscard]] std::chrono::milliseconds asked_ttl() const {
    detail::maybe_lock lock(data_mutex());
    return b().asked;
  }
  /// Returns the holder-clock instant read before the request of the latest grant or renewal left.
  [[nodiscard]] time_point acquired_at() const {
    detail::maybe_lock lock(data_mutex());
    return b().acquired_at;
  }
  /// Returns the holder-clock instant from which this lease no longer trusts itself: validity.hpp's
  /// valid_until() less the holder clock's tick (clock_tick(), less one unit), since a reading of a
  /// coarse clock may lag true time by almost a tick.
  [[nodiscard]] time_point valid_until() const {
    detail::maybe_lock lock(data_mutex());
    return b().valid_until;
  }
  /// Returns the holder-clock instant at which renewal is due: half the TTL after acquired_at()
  /// (validity.hpp), and strictly before valid_until() (at least one clock tick earlier), so a
  /// renew() at that instant still finds the lease valid (see holdfast::renew_due_at in
  /// validity.hpp). A lease with no validity left returns acquired_at().
  [[nodiscard]] time_point renew_due_at() const {
    detail::maybe_lock lock(data_mutex());
    return b().due(0.5);
  }
  /// Returns the current state (see the table at the top of lease.hpp). Reads no clock: a held
  /// lease whose validity passed unnoticed is still `held` until valid() or renew() looks.
  [[nodiscard]] lease_state state() const {
    detail::maybe_lock lock(data_mutex());
    return b().state;
  }
  /// Returns why the lease was lost, or loss_cause::none. Set once and never changed.
  [[nodiscard]] loss_cause loss() const {
    detail::maybe_lock lock(data_mutex());
    return b().loss;
  }
  /// Returns the error of the most recent failed store operation on this lease, whoever ran it
  /// (renew, release, a keepalive's renewal), or errc::caught_exception if a store, clock or
  /// callback threw where it could not propagate; zero if none failed. Later successes do not
  /// clear it.
  [[nodiscard]] std::error_code last_error() const {
    detail::maybe_lock lock(data_mutex());
    return b().last_error.error();
  }
#if HOLDFAST_HAS_EXCEPTIONS
  /// Returns the exception behind the latest errc::caught_exception (null if none), so that it
  /// can be rethrown or logged. Only in builds with exceptions.
  [[nodiscard]] std::exception_ptr last_exception() const {
    detail::maybe_lock lock(data_mutex());
    return b().last_exception;
  }
#endif

  /// Sets the on-loss callback (see loss_callback), replacing any earlier one. If the lease is
  /// already lost and no callback has been told yet, `fn` runs at once, on this thread.
  void on_lost(loss_callback fn) {  // NOLINT(performance-unnecessary-value-param): moved in
    detail::pending_loss loss;
    {
      detail::maybe_lock lock(data_mutex());
      body_type& x = b();
      x.on_lost = std::move(fn);
      x.collect(loss);
    }
    loss.fire();
  }

  /// Returns true iff the lease is held and the holder's clock is before valid_until(). Reads the
  /// clock. If validity has passed, or the clock went backwards since the lease last read it (it
  /// can then no longer tell how much time really passed), the lease turns lost and the on-loss
  /// callback runs. Exceptions from Clock::now() or the callback propagate.
  [[nodiscard]] bool valid() {
    detail::pending_loss loss;
    bool ok;
    {
      detail::maybe_lock lock(data_mutex());
      body_type& x = b();
      ok = x.check_valid();
      x.collect(loss);
    }
    loss.fire();
    return ok;
  }

  /// Returns the time left until valid_until() on the holder's clock, or zero if not valid().
  [[nodiscard]] duration remaining() {
    if (!valid()) return duration::zero();
    detail::maybe_lock lock(data_mutex());
    const body_type& x = b();
    return detail::saturating_sub(x.valid_until, x.last_seen);
  }

  /// Extends the lease by the TTL it last asked for (asked_ttl(), not the possibly shorter
  /// ttl() the store granted). See renew(ttl).
  result<void> renew() {
    return renew(asked_ttl());
  }

  /// Asks the store to extend the lease to `ttl` from now (ms, or any duration; it is truncated to
  /// whole milliseconds) and recomputes validity from the instant before the request left.
  ///
  /// A lease whose validity has already passed on the holder's clock is not sent to the store: it
  /// turns lost and renew reports lease_lost, so an expired lease is never silently revived.
  /// Nor is a lost, releasing or released one.
  /// \returns success;
  ///   errc::lease_lost if the lease is not held, its validity passed, the clock went backwards,
  ///     or the store says it is no longer the holder (lease_lost or not_holder; state() turns
  ///     lost and the on-loss callback runs);
  ///   errc::invalid_argument if ttl is not in [1 ms, max_ttl], under the store's min_ttl
  ///     (store_min_ttl: as acquire refuses it) or too short to leave any validity after drift,
  ///     margin and the holder clock's tick (nothing is sent, nothing changes);
  ///   errc::protocol_error if the store's grant is malformed (other token, TTL <= 0; state()
  ///     turns lost since the store cannot be believed);
  ///   any transient store error (store_unavailable, timeout, ...): state() stays held and the
  ///     old validity still applies, so the caller may retry until valid_until().
  /// Exceptions from the store or clock propagate unchanged, with the lease unchanged.
  /// Thread-safety: serialized with a keepalive's renewals of the same lease.
  template <class Rep, class Period>
  result<void> renew(std::chrono::duration<Rep, Period> ttl) {
    const result<std::chrono::milliseconds> ms =
        detail::checked_lease_ttl(ttl, b().validity, b().tick);
    if (!ms) return ms.error();
    if (*ms < store_min_ttl(*b().store)) return errc::invalid_argument;
    detail::pending_loss loss;
    result<void> r;
    {
      detail::maybe_lock op(op_mutex());
      r = b().renew(data_mutex(), *ms, loss);
    }
    loss.fire();
    return r;
  }

  /// Releases the key in the store (owner- and token-checked there), ending this handle's claim.
  /// A held lease turns `releasing` before the store is asked, so no renewal reaches the store
  /// after this call, whatever the outcome. Releasing a released handle does nothing and succeeds.
  /// A lost lease is released too, since its record may still be in the store and freeing it
  /// early helps the next holder.
  /// \returns success (state() turns released);
  ///   errc::not_holder if the store no longer holds this grant (state() turns released: there is
  ///     nothing left to free). On the first attempt of a lease not known lost, loss() turns
  ///     not_holder and the on-loss callback runs: the holder had lost it without noticing. On a
  ///     retry after a failed attempt it is not reported (that attempt may have landed);
  ///   any other store error: state() is releasing (or stays lost) and release() may be retried;
  ///     if it never is, the TTL frees the key, since nothing renews it any more.
  /// Exceptions from the store propagate unchanged; the lease is then releasing (or lost).
  /// Thread-safety: serialized with a keepalive's renewals of the same lease; once it returns, no
  /// renewal of this lease reaches the store.
  result<void> release() {
    detail::pending_loss loss;
    result<void> r;
    {
      detail::maybe_lock op(op_mutex());
      r = b().release(data_mutex(), loss);
    }
    loss.fire();
    return r;
  }

 private:
  friend struct detail::lease_access;

  const body_type& b() const noexcept {
    return shared_ ? shared_->body : inline_;
  }
  body_type& b() noexcept {
    return shared_ ? shared_->body : inline_;
  }
  std::mutex* data_mutex() const noexcept {
    return shared_ ? &shared_->data : nullptr;
  }
  std::mutex* op_mutex() const noexcept {
    return shared_ ? &shared_->op : nullptr;
  }

  // Moves the state into a shared block (once) for a keepalive. May throw std::bad_alloc, with
  // the lease unchanged.
  std::shared_ptr<detail::keepalive_target<Clock>> share() {
    if (!shared_) {
      shared_ = std::make_shared<shared_type>(std::move(inline_));
      inline_.clear();
    }
    return shared_;
  }

  void release_quietly() noexcept {
    bool needed;
    {
      detail::maybe_lock lock(data_mutex());
      needed = b().needs_release && b().store != nullptr;
    }
    if (!needed) return;
    // Notice a loss on our own clock first, so that it is reported through the callback.
    HOLDFAST_TRY {
      (void)valid();
    }
    HOLDFAST_CATCH_ALL {
      detail::maybe_lock lock(data_mutex());
      detail::record_caught_exception(b());
    }
    HOLDFAST_TRY {
      (void)release();
    }
    HOLDFAST_CATCH_ALL {
      detail::maybe_lock lock(data_mutex());
      detail::record_caught_exception(b());
    }
    detail::maybe_lock lock(data_mutex());
    body_type& x = b();
    x.needs_release = false;
    if (x.state != lease_state::lost) x.state = lease_state::released;
  }

  body_type inline_;
  std::shared_ptr<shared_type> shared_;
};

namespace detail {

// Hands `l` to a keepalive through its port: keepalive::add() and distributed_mutex both come
// here, so a mutex needs no keepalive.hpp. May throw std::bad_alloc (sharing the lease's state).
template <class Store, class Clock>
result<void> keep_alive(lease_renewer<Clock>& renewer, lease<Store, Clock>& l) {
  if (std::error_code ec = renewer.admission()) return ec;
  return renewer.add_shared(lease_access::share(l));
}

}  // namespace detail

/// Tries once to acquire `key` in `store` for `ttl` (ms, or any duration; truncated to whole
/// milliseconds) as `opts.owner` (a fresh random id by default). One store request, two when the
/// first answer is a transient error other than busy (timeout, store_unavailable, a foreign
/// error): its reply may have been lost after the store granted, so the same owner asks once
/// more, which returns that very grant (T1) instead of leaving it held, unheard, for its TTL.
///
/// \returns the lease (state held, valid());
///   errc::busy if another owner holds a live lease (contention: retry later, or use acquire());
///   errc::invalid_argument for an empty key or owner, a TTL not in [1 ms, max_ttl] (1 ns and
///     negative TTLs included), a TTL too short to leave any validity after drift, margin and
///     the tick of opts.clock, or bad validity/backoff options; nothing reaches the store;
///   errc::timeout if the grant arrived after the validity it gives had passed (it is released);
///   errc::protocol_error if the store's grant is malformed (token none/max, TTL <= 0);
///   errc::token_exhausted, store_unavailable, or any error the store reports.
/// Exceptions thrown by the store or clock propagate unchanged.
/// Thread-safety: as safe as the store; the options are only read.
///
/// Returns result<lease<Store, Clock>>. (Spelled `auto` so that, under C++20, a Store that is not
/// a LeaseStore is refused by the lease_store constraint, which names the missing operation,
/// before any compiler forms the return type: clang 14 forms it first and says only that
/// lease<Store> is not satisfied.)
template <class Store, class Rep, class Period, class Clock = steady_clock>
HOLDFAST_REQUIRES(lease_store<Store>&& ttl_clock<Clock>)
auto try_acquire(Store& store, std::string_view key, std::chrono::duration<Rep, Period> ttl,
                 const acquire_options<Clock>& opts = {}) {
  static_assert(assert_lease_store<Store>(), "holdfast::try_acquire: Store must model LeaseStore");
  using lease_result = result<lease<Store, Clock>>;
  result<detail::acquire_request> req =
      detail::prepare_acquire(key, ttl, opts, store_min_ttl(store));
  if (opts.observer != nullptr) return detail::observed_try_acquire(store, key, req, opts);
  if (!req) return lease_result(req.error());
  // A transient error may hide a grant (the reply was lost after the store applied it), under
  // an owner id nobody would use again: it asks once more with the same owner, which returns
  // that very grant (T1), so a failed try leaves nothing behind (detail/give_back.hpp).
  // The request's owner id is moved into the lease (no second copy of it), and every return is
  // of a temporary, so the lease is built in the caller's result, not moved there.
  return detail::attempt_asking_again(store, key, detail::asked_ttl(req->ttl, req->span), opts,
                                      req->owner, 1, nullptr, nullptr, nullptr, &req->owner);
}

/// Acquires `key`, retrying contention (busy) and transient store errors with exponential backoff
/// and full jitter (opts.backoff), until `timeout` has passed on opts.clock. Every attempt uses the
/// same owner id, so a retry after a lost reply gets the same grant back. A timeout <= 0 is not
/// bad input: it makes exactly one attempt, and if that finds the key busy the deadline has passed,
/// so the answer is errc::timeout like any other expired wait (use try_acquire() to get busy).
///
/// Blocks the calling thread between attempts, for at most `timeout` in all (plus the duration of
/// the last store call): while the key is busy, in the store's wait_for_release() if the store
/// offers it for this Clock (store.hpp: woken by the holder's release, or at the latest when its
/// lease can have expired), otherwise, and after a store error, in opts.clock.sleep_until().
/// The timeout counts only the time the clock moves forwards: if it goes backwards (a user clock;
/// steady_clock never does), the wait does not grow by the jump, and a sleep the jump ends
/// (manual_clock) leads to an earlier attempt.
/// \returns the lease;
///   errc::timeout if the deadline passed while the key stayed busy or the store kept failing
///     transiently;
///   errc::busy (or the last transient error) if opts.backoff.max_attempts ran out first;
///   at once, any non-transient error try_acquire() reports (invalid_argument, protocol_error,
///     token_exhausted, ...).
/// Exceptions thrown by the store or clock propagate unchanged.
/// Returns result<lease<Store, Clock>> (spelled `auto` as for try_acquire()).
template <class Store, class Rep, class Period, class TRep, class TPeriod,
          class Clock = steady_clock>
HOLDFAST_REQUIRES(lease_store<Store>&& ttl_clock<Clock>)
auto acquire(Store& store, std::string_view key, std::chrono::duration<Rep, Period> ttl,
             std::chrono::duration<TRep, TPeriod> timeout,
             const acquire_options<Clock>& opts = {}) {
  static_assert(assert_lease_store<Store>(), "holdfast::acquire: Store must model LeaseStore");
  // Two instantiations, so that the unobserved one is exactly the loop without any reporting.
  if (opts.observer != nullptr) {
    return detail::acquire_retrying<true>(store, key, ttl, timeout, opts);
  }
  return detail::acquire_retrying<false>(store, key, ttl, timeout, opts);
}

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_LEASE_HPP
