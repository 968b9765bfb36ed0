// holdfast/lease.hpp - lease<Store, Clock>: a held grant, its validity on the holder's clock, and
// the acquire / renew / release operations around it.
//
//   holdfast::memory_store<> store;
//   auto l = holdfast::try_acquire(store, "orders", std::chrono::seconds(10));
//   if (!l) return l.error();                 // errc::busy is contention, not a failure
//   db.write(l->token(), ...);                // downstream checks the fencing token
//   // l releases the key when it goes out of scope
//
// A lease handle moves through these states (state()):
//
//   state     | entered when                                         | valid() | destructor
//   ----------+------------------------------------------------------+---------+------------------
//   held      | acquire granted; renew succeeded                     | until   | releases
//             |                                                      | validity|
//   lost      | renew answered lease_lost; renew found validity gone;| false   | releases if the
//             | the clock went backwards; store answered garbage     |         | record may remain
//   released  | release() succeeded or the store said not_holder;   | false   | nothing
//             | moved-from                                           |         |
//
// `valid()` is the holder's belief (invariant S4): true only before `valid_until()`, which is
// `start + ttl*(1-drift) - margin` with `start` read before the request left (validity.hpp). It
// turns false by the holder's own clock, without hearing from the store. Safety never rests on it:
// a holder paused past its validity is stopped downstream by its fencing token (fence.hpp).
//
// Blocking acquire() retries contention and transient store errors with exponential backoff and
// full jitter (backoff.hpp) until a deadline, always as the same owner, so a retry after a lost
// reply gets the same grant back (store contract T1) instead of waiting for its own orphan.
#ifndef HOLDFAST_LEASE_HPP
#define HOLDFAST_LEASE_HPP

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include "holdfast/backoff.hpp"
#include "holdfast/clock.hpp"
#include "holdfast/detail/config.hpp"
#include "holdfast/detail/random.hpp"
#include "holdfast/detail/saturating.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/result.hpp"
#include "holdfast/store.hpp"
#include "holdfast/validity.hpp"

namespace holdfast {

/// Where a lease handle is in its life (see the table at the top of lease.hpp).
enum class lease_state {
  held,      ///< Granted and not known to be lost; valid() may still have turned false.
  lost,      ///< Known lost: renew refused, validity passed at renew, clock regressed, or garbage.
  released,  ///< Released (or moved-from); nothing left to do.
};

/// Options for try_acquire() and acquire().
template <class Clock = steady_clock>
struct acquire_options {
  /// The holder's clock: validity and backoff sleeps are measured on it. Default: steady_clock.
  Clock clock{};
  /// The owner id; empty (default) means a fresh random 128-bit id (32 hex digits). Give your own
  /// only if it is unique per acquirer (T3): two acquirers sharing an id share the lease.
  std::string owner{};
  /// Drift bound and margin of the validity math. Default: 1% and 2 ms (Redlock's).
  validity_options validity{};
  /// Spacing of attempts in the blocking acquire(). Default: 10 ms doubling to 1 s, full jitter.
  backoff_options backoff{};
};

template <class Store, class Clock>
class lease;

namespace detail {

template <class Rep, class Period>
std::optional<std::chrono::milliseconds> ttl_to_ms(std::chrono::duration<Rep, Period> ttl) {
  return checked_duration_cast<std::chrono::milliseconds>(ttl);
}

template <class Store, class Clock>
result<lease<Store, Clock>> acquire_once(Store& store, std::string_view key,
                                         std::chrono::milliseconds ttl,
                                         const acquire_options<Clock>& opts,
                                         const std::string& owner);

}  // namespace detail

/// A lease on one key of a LeaseStore, held by this handle: its key, owner id, fencing token, TTL
/// and validity. Move-only. Releases the key when destroyed (never throws from the destructor).
///
/// Thread-safety: one handle is used by one thread at a time (like std::unique_lock); distinct
/// handles, on the same store or not, may be used concurrently if the store allows it. The store
/// must outlive every lease on it.
template <class Store, class Clock = steady_clock>
class lease {
  static_assert(assert_lease_store<Store>(), "holdfast::lease<Store>: Store must model LeaseStore");
  static_assert(is_ttl_clock_v<Clock>, "holdfast::lease<Store, Clock>: Clock must model ttl_clock");

 public:
  using store_type = Store;
  using clock_type = Clock;
  using time_point = typename Clock::time_point;
  using duration = typename Clock::duration;

  lease(lease&& other) noexcept
      : store_(std::exchange(other.store_, nullptr)),
        clock_(other.clock_),
        key_(std::move(other.key_)),
        owner_(std::move(other.owner_)),
        token_(other.token_),
        ttl_(other.ttl_),
        validity_(other.validity_),
        acquired_at_(other.acquired_at_),
        valid_until_(other.valid_until_),
        last_seen_(other.last_seen_),
        state_(std::exchange(other.state_, lease_state::released)),
        needs_release_(std::exchange(other.needs_release_, false)) {}

  lease& operator=(lease&& other) noexcept {
    if (this != &other) {
      release_quietly();
      store_ = std::exchange(other.store_, nullptr);
      clock_ = other.clock_;
      key_ = std::move(other.key_);
      owner_ = std::move(other.owner_);
      token_ = other.token_;
      ttl_ = other.ttl_;
      validity_ = other.validity_;
      acquired_at_ = other.acquired_at_;
      valid_until_ = other.valid_until_;
      last_seen_ = other.last_seen_;
      state_ = std::exchange(other.state_, lease_state::released);
      needs_release_ = std::exchange(other.needs_release_, false);
    }
    return *this;
  }

  lease(const lease&) = delete;
  lease& operator=(const lease&) = delete;

  /// Releases the key if this handle may still hold it. Errors and exceptions from the store or
  /// the clock are swallowed: a destructor must not throw, and the TTL frees the key regardless.
  ~lease() { release_quietly(); }

  /// Returns the key this lease is on.
  [[nodiscard]] const std::string& key() const noexcept { return key_; }
  /// Returns the owner id this lease was granted to.
  [[nodiscard]] const std::string& owner() const noexcept { return owner_; }
  /// Returns the fencing token of the grant; pass it with every write the lease protects.
  [[nodiscard]] fencing_token token() const noexcept { return token_; }
  /// Returns the TTL (ms) of the latest grant, as applied by the store.
  [[nodiscard]] std::chrono::milliseconds ttl() const noexcept { return ttl_; }
  /// Returns the holder-clock instant read before the request of the latest grant or renewal left.
  [[nodiscard]] time_point acquired_at() const noexcept { return acquired_at_; }
  /// Returns the holder-clock instant from which this lease no longer trusts itself.
  [[nodiscard]] time_point valid_until() const noexcept { return valid_until_; }
  /// Returns the holder-clock instant at which renewal is due: half the TTL after acquired_at()
  /// (DESIGN §4), never later than valid_until().
  [[nodiscard]] time_point renew_due_at() const noexcept {
    const time_point half = detail::saturating_add(acquired_at_, ttl_ / 2);
    return half < valid_until_ ? half : valid_until_;
  }
  /// Returns the current state (see the table at the top of lease.hpp).
  [[nodiscard]] lease_state state() const noexcept { return state_; }

  /// Returns true iff the lease is held and the holder's clock is before valid_until(). Reads the
  /// clock; if the clock has gone backwards since the lease last read it, the lease turns lost
  /// (it can no longer tell how much time really passed). Exceptions from Clock::now() propagate.
  [[nodiscard]] bool valid() {
    if (state_ != lease_state::held) return false;
    const time_point now = observe();
    return state_ == lease_state::held && now < valid_until_;
  }

  /// Returns the time left until valid_until() on the holder's clock, or zero if not valid().
  [[nodiscard]] duration remaining() {
    if (!valid()) return duration::zero();
    return detail::saturating_sub(valid_until_, last_seen_);
  }

  /// Extends the lease by its current TTL. See renew(ttl).
  result<void> renew() { return renew(ttl_); }

  /// Asks the store to extend the lease to `ttl` from now (ms, or any duration; it is truncated to
  /// whole milliseconds) and recomputes validity from the instant before the request left.
  ///
  /// A lease whose validity has already passed on the holder's clock is not sent to the store: it
  /// turns lost and renew reports lease_lost, so an expired lease is never silently revived.
  /// \returns success;
  ///   errc::lease_lost if the lease is not held, its validity passed, the clock went backwards,
  ///     or the store says it is no longer the holder (state() turns lost);
  ///   errc::invalid_argument if ttl is not in [1 ms, max_ttl] or too short to leave any validity
  ///     after drift and margin (nothing changes);
  ///   errc::protocol_error if the store's grant is malformed (other token, TTL <= 0; state()
  ///     turns lost since the store cannot be believed);
  ///   any transient store error (store_unavailable, timeout, ...): state() stays held and the
  ///     old validity still applies, so the caller may retry until valid_until().
  /// Exceptions from the store or clock propagate unchanged, with the lease unchanged.
  template <class Rep, class Period>
  result<void> renew(std::chrono::duration<Rep, Period> ttl) {
    const std::optional<std::chrono::milliseconds> ms = detail::ttl_to_ms(ttl);
    if (!ms || check_ttl(*ms) || trusted_span(*ms, validity_) <= std::chrono::nanoseconds::zero()) {
      return errc::invalid_argument;
    }
    if (state_ != lease_state::held) return errc::lease_lost;
    const time_point start = observe();
    if (state_ != lease_state::held) return errc::lease_lost;  // the clock went backwards
    if (!(start < valid_until_)) {
      state_ = lease_state::lost;
      return errc::lease_lost;
    }
    result<grant> g = store_->renew(key_, owner_, token_, *ms);
    if (!g) {
      if (g.error() == errc::lease_lost) state_ = lease_state::lost;
      return g.error();
    }
    if (g->token != token_ || g->ttl <= std::chrono::milliseconds::zero()) {
      state_ = lease_state::lost;
      return errc::protocol_error;
    }
    ttl_ = g->ttl < *ms ? g->ttl : *ms;  // never trust more than was asked for
    acquired_at_ = start;
    valid_until_ = holdfast::valid_until(start, ttl_, validity_);
    return {};
  }

  /// Releases the key in the store (owner- and token-checked there), ending this handle's claim.
  /// Releasing a released handle does nothing and succeeds. A lost lease is released too, since
  /// its record may still be in the store and freeing it early helps the next holder.
  /// \returns success (state() turns released);
  ///   errc::not_holder if the store no longer holds this grant (state() turns released: there is
  ///     nothing left to free);
  ///   any other store error: state() is unchanged and release() may be retried; if it never is,
  ///     the TTL frees the key.
  /// Exceptions from the store propagate unchanged, with the lease unchanged.
  result<void> release() {
    if (!needs_release_) {
      state_ = lease_state::released;
      return {};
    }
    result<void> r = store_->release(key_, owner_, token_);
    if (r || r.error() == errc::not_holder) {
      needs_release_ = false;
      state_ = lease_state::released;
    }
    return r;
  }

 private:
  template <class S, class C>
  friend result<lease<S, C>> detail::acquire_once(S&, std::string_view, std::chrono::milliseconds,
                                                  const acquire_options<C>&, const std::string&);

  lease(Store& store, Clock clock, std::string key, std::string owner, grant g,
        validity_options validity, time_point start)
      : store_(&store),
        clock_(std::move(clock)),
        key_(std::move(key)),
        owner_(std::move(owner)),
        token_(g.token),
        ttl_(g.ttl),
        validity_(validity),
        acquired_at_(start),
        valid_until_(holdfast::valid_until(start, g.ttl, validity)),
        last_seen_(start),
        state_(lease_state::held),
        needs_release_(true) {}

  // Reads the clock, remembering the latest reading; a reading earlier than the latest one means
  // the clock went backwards, and a lease that cannot measure time must not trust itself.
  time_point observe() {
    const time_point now = clock_.now();
    if (now < last_seen_) {
      if (state_ == lease_state::held) state_ = lease_state::lost;
    } else {
      last_seen_ = now;
    }
    return now;
  }

  void release_quietly() noexcept {
    if (!needs_release_ || store_ == nullptr) return;
    HOLDFAST_TRY {
      (void)release();
    }
    HOLDFAST_CATCH_ALL {}
    needs_release_ = false;
    state_ = lease_state::released;
  }

  Store* store_ = nullptr;
  Clock clock_;
  std::string key_;
  std::string owner_;
  fencing_token token_;
  std::chrono::milliseconds ttl_{0};
  validity_options validity_;
  time_point acquired_at_{};
  time_point valid_until_{};
  time_point last_seen_{};
  lease_state state_ = lease_state::released;
  bool needs_release_ = false;
};

namespace detail {

template <class Store, class Clock>
result<lease<Store, Clock>> acquire_once(Store& store, std::string_view key,
                                         std::chrono::milliseconds ttl,
                                         const acquire_options<Clock>& opts,
                                         const std::string& owner) {
  const typename Clock::time_point start = opts.clock.now();  // before the request leaves
  result<grant> g = store.try_acquire(key, owner, ttl);
  if (!g) return g.error();
  if (!g->token.is_issuable() || g->ttl <= std::chrono::milliseconds::zero()) {
    // A grant we cannot use: give it back if the store will take it, and report the store.
    if (g->token.is_issuable()) (void)store.release(key, owner, g->token);
    return errc::protocol_error;
  }
  grant applied = *g;
  if (applied.ttl > ttl) applied.ttl = ttl;  // never trust more than was asked for
  lease<Store, Clock> l(store, opts.clock, std::string(key), owner, applied, opts.validity, start);
  // A reply that arrives after the validity it would give is worthless to the holder (Redlock's
  // rule): hand the key back at once rather than hold a lease it must not use.
  if (!l.valid()) {
    (void)l.release();
    return errc::timeout;
  }
  return l;
}

template <class Clock>
std::error_code check_acquire_options(const acquire_options<Clock>& opts) {
  if (std::error_code ec = opts.validity.check()) return ec;
  if (std::error_code ec = opts.backoff.check()) return ec;
  return {};
}

}  // namespace detail

/// Tries once to acquire `key` in `store` for `ttl` (ms, or any duration; truncated to whole
/// milliseconds) as `opts.owner` (a fresh random id by default).
///
/// \returns the lease (state held, valid());
///   errc::busy if another owner holds a live lease (contention: retry later, or use acquire());
///   errc::invalid_argument for an empty key or owner, a TTL not in [1 ms, max_ttl] (1 ns and
///     negative TTLs included), a TTL too short to leave any validity after drift and margin,
///     or bad validity/backoff options; nothing reaches the store;
///   errc::timeout if the grant arrived after the validity it gives had passed (it is released);
///   errc::protocol_error if the store's grant is malformed (token none/max, TTL <= 0);
///   errc::token_exhausted, store_unavailable, or any error the store reports.
/// Exceptions thrown by the store or clock propagate unchanged.
/// Thread-safety: as safe as the store; the options are only read.
template <class Store, class Rep, class Period, class Clock = steady_clock>
result<lease<Store, Clock>> try_acquire(Store& store, std::string_view key,
                                        std::chrono::duration<Rep, Period> ttl,
                                        const acquire_options<Clock>& opts = {}) {
  static_assert(assert_lease_store<Store>(), "holdfast::try_acquire: Store must model LeaseStore");
  const std::optional<std::chrono::milliseconds> ms = detail::ttl_to_ms(ttl);
  if (!ms) return errc::invalid_argument;
  const std::string owner = opts.owner.empty() ? detail::random_owner_id() : opts.owner;
  if (std::error_code ec = check_acquire_args(key, owner, *ms)) return ec;
  if (std::error_code ec = detail::check_acquire_options(opts)) return ec;
  if (trusted_span(*ms, opts.validity) <= std::chrono::nanoseconds::zero()) {
    return errc::invalid_argument;
  }
  return detail::acquire_once(store, key, *ms, opts, owner);
}

/// Acquires `key`, retrying contention (busy) and transient store errors with exponential backoff
/// and full jitter (opts.backoff), until `timeout` has passed on opts.clock. Every attempt uses the
/// same owner id, so a retry after a lost reply gets the same grant back. A timeout <= 0 makes
/// exactly one attempt (a try, not an error).
///
/// Blocks the calling thread in opts.clock.sleep_until() between attempts, for at most `timeout`
/// in all (plus the duration of the last store call).
/// \returns the lease;
///   errc::timeout if the deadline passed while the key stayed busy or the store kept failing
///     transiently;
///   errc::busy (or the last transient error) if opts.backoff.max_attempts ran out first;
///   at once, any non-transient error try_acquire() reports (invalid_argument, protocol_error,
///     token_exhausted, ...).
/// Exceptions thrown by the store or clock propagate unchanged.
template <class Store, class Rep, class Period, class TRep, class TPeriod,
          class Clock = steady_clock>
result<lease<Store, Clock>> acquire(Store& store, std::string_view key,
                                    std::chrono::duration<Rep, Period> ttl,
                                    std::chrono::duration<TRep, TPeriod> timeout,
                                    const acquire_options<Clock>& opts = {}) {
  static_assert(assert_lease_store<Store>(), "holdfast::acquire: Store must model LeaseStore");
  const std::optional<std::chrono::milliseconds> ms = detail::ttl_to_ms(ttl);
  if (!ms) return errc::invalid_argument;
  const std::string owner = opts.owner.empty() ? detail::random_owner_id() : opts.owner;
  if (std::error_code ec = check_acquire_args(key, owner, *ms)) return ec;
  if (std::error_code ec = detail::check_acquire_options(opts)) return ec;
  if (trusted_span(*ms, opts.validity) <= std::chrono::nanoseconds::zero()) {
    return errc::invalid_argument;
  }
  Clock clock = opts.clock;
  const typename Clock::time_point deadline = detail::saturating_add(
      clock.now(), timeout > decltype(timeout)::zero() ? timeout : decltype(timeout)::zero());
  backoff delays(opts.backoff);
  for (std::uint32_t made = 1;; ++made) {
    result<lease<Store, Clock>> l = detail::acquire_once(store, key, *ms, opts, owner);
    if (l || !is_transient(l.error())) return l;
    if (delays.exhausted(made)) return l.error();
    const typename Clock::time_point now = clock.now();
    if (!(now < deadline)) return errc::timeout;
    typename Clock::time_point wake = detail::saturating_add(now, delays.next_delay());
    if (deadline < wake) wake = deadline;  // one last attempt at the deadline itself
    clock.sleep_until(wake);
  }
}

}  // namespace holdfast

#endif  // HOLDFAST_LEASE_HPP
