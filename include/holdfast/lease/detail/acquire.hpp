// SPDX-License-Identifier: MIT
// holdfast/lease/detail/acquire.hpp - the machinery behind try_acquire() and acquire() (lease.hpp):
// one store call turned into a lease handle (acquire_once), the observer's reports of each attempt
// and of the outcome (their events: acquire_events.hpp), and the blocking acquire's loop
// (acquire_retrying): backoff with full jitter, or a wait in the store for a release where it
// offers one, against a timeout counted only while the clock moves forwards. lease.hpp includes it
// before the lease class, whose constructors acquire_once reaches with a lease_key (defined here),
// building the lease in place in its result. Not for users.
#ifndef HOLDFAST_LEASE_DETAIL_ACQUIRE_HPP
#define HOLDFAST_LEASE_DETAIL_ACQUIRE_HPP

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "holdfast/acquire_options.hpp"
#include "holdfast/backoff.hpp"
#include "holdfast/cancel.hpp"
#include "holdfast/clock.hpp"
#include "holdfast/detail/call_until.hpp"
#include "holdfast/detail/config.hpp"
#include "holdfast/detail/detect.hpp"
#include "holdfast/detail/owner_id.hpp"
#include "holdfast/detail/saturating.hpp"
#include "holdfast/detail/unwind_guard.hpp"
#include "holdfast/error.hpp"
#include "holdfast/lease/detail/acquire_events.hpp"
#include "holdfast/lease/detail/lease_shared.hpp"
#include "holdfast/observer.hpp"
#include "holdfast/result.hpp"
#include "holdfast/store.hpp"
#include "holdfast/store_deadline.hpp"
#include "holdfast/stores/detail/give_back.hpp"
#include "holdfast/validity.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

template <class Store, class Clock>
HOLDFAST_REQUIRES(lease_store<Store>&& ttl_clock<Clock>)
class lease;

namespace detail {

template <class S>
using last_error_message_call =
    decltype(std::string(std::declval<const S&>().last_error_message()));

// Notes an attempt's error in opts.report (busy is contention, not an error): the store's own
// text where the store keeps one (the real stores' last_error_message()), else `note`.
template <class Store, class Clock>
void note_failure(const Store& store, const acquire_options<Clock>& opts, std::error_code ec,
                  const char* note) {
  if (opts.report == nullptr || ec == errc::busy) return;
  opts.report->last_store_error = ec;
  if constexpr (is_detected<last_error_message_call, Store>::value) {
    if (note == nullptr) {
      opts.report->last_store_message = store.last_error_message();
      return;
    }
  }
  opts.report->last_store_message = note != nullptr ? note : ec.message();
}

// One store call for acquire_once: queued (try_acquire_queued) or not, bounded by `deadline`
// (if given) where the store offers the deadline capability (store_deadline.hpp).
template <class Store>
result<grant> ask_store(Store& store, std::string_view key, std::string_view owner,
                        std::chrono::milliseconds ttl, bool queue_if_busy,
                        const std::chrono::steady_clock::time_point* deadline) {
  if constexpr (has_try_acquire_queued_v<Store>) {
    if (queue_if_busy) {
      if constexpr (has_try_acquire_queued_until_v<Store>) {
        if (deadline != nullptr) {
          return store.try_acquire_queued_until(
              key, owner, ttl, store_call_deadline(std::chrono::steady_clock::now(), *deadline));
        }
      }
      // Without the capability, the steps the store bounds by the thread's call bound (its
      // connect: zookeeper_store) still end by the deadline (detail/call_until.hpp).
      std::optional<call_bound> bound;
      if (deadline != nullptr) {
        bound.emplace(store_call_deadline(std::chrono::steady_clock::now(), *deadline));
      }
      return store.try_acquire_queued(key, owner, ttl);
    }
  }
  (void)queue_if_busy;
  if (deadline != nullptr) return store_try_acquire_until(store, key, owner, ttl, *deadline);
  return store.try_acquire(key, owner, ttl);
}

// A lease TTL as an attempt asks for it: whole milliseconds, and its trusted_span() under the
// acquire's validity options where the input check already computed it (prepare_acquire's
// acquire_request::span), so that the lease granted that TTL does not compute it again. From a
// bare TTL the span is computed on a grant. (A span is never negative, so -1 ns says "none": two
// integers travel in registers, where a std::optional member sent it through memory.)
struct asked_ttl {
  asked_ttl(std::chrono::milliseconds t) noexcept : ms(t) {}  // NOLINT: implicit by design
  asked_ttl(std::chrono::milliseconds t, std::chrono::nanoseconds s) noexcept : ms(t), span(s) {}
  // The span of a grant of `granted` (ms, at most ms): the one computed, or computed now.
  std::chrono::nanoseconds span_of(std::chrono::milliseconds granted,
                                   const validity_options& validity) const noexcept {
    if (granted == ms && span >= std::chrono::nanoseconds::zero()) return span;
    return trusted_span(granted, validity);
  }
  std::chrono::milliseconds ms;
  std::chrono::nanoseconds span{-1};
};

// The pass to lease's constructors that the acquire machinery uses: a result can then build a
// lease in place (result's in_place constructor) through a public constructor, which users, who
// do not reach into detail, do not call.
struct lease_key {
  explicit lease_key() = default;
};

// acquire_once's way out for a grant that arrived too late (its reading `now` is not before the
// validity the grant gives, or is before `start`): the lease is made unarmed, turns lost as
// valid() would turn it, and is released (the destructor retries once if that fails); the
// caller hears only errc::timeout. Apart from acquire_once, whose path for a grant kept stays
// short.
template <class Store, class Clock>
result<lease<Store, Clock>> grant_too_late(Store& store, std::string_view key,
                                           const acquire_options<Clock>& opts,
                                           std::string_view owner, owner_id* take_owner,
                                           grant applied, std::chrono::milliseconds asked,
                                           typename Clock::time_point start,
                                           typename Clock::time_point until,
                                           typename Clock::time_point now) {
  lease_body<Store, Clock> b(&store, opts.clock, std::string(key),
                             take_owner != nullptr ? std::move(*take_owner) : owner_id(owner),
                             applied, asked, opts.validity, start, until, start, loss_callback{},
                             nullptr);
  (void)b.valid_at(now);
  lease<Store, Clock> l(lease_key{}, std::move(b));
  (void)l.release();
  note_failure(store, opts, errc::timeout,
               "the grant arrived after the validity it gives had passed: the round trip took "
               "longer than the TTL leaves after drift and margin (a longer TTL is needed)");
  return errc::timeout;
}

// One store call turned into a lease handle, as `owner`. `deadline` (if given) bounds the store
// call where the store can (ask_store). `take_owner`, if given, holds that same id, which the
// caller no longer needs once the store granted (unsure is then false): it is moved into the
// lease, not copied. Before a grant (busy, an error, a malformed grant) it is left as it was.
template <class Store, class Clock>
result<lease<Store, Clock>> acquire_once(
    Store& store, std::string_view key, asked_ttl ttl, const acquire_options<Clock>& opts,
    std::string_view owner, bool queue_if_busy = false, bool* unsure = nullptr,
    const std::chrono::steady_clock::time_point* deadline = nullptr,
    owner_id* take_owner = nullptr) {
  const typename Clock::time_point start = opts.clock.now();  // before the request leaves
  result<grant> g = ask_store(store, key, owner, ttl.ms, queue_if_busy, deadline);
  if (opts.report != nullptr) ++opts.report->attempts;
  if (!g) {
    // The store's error may hide a grant (a lost reply): the caller should go back for it.
    if (unsure != nullptr) *unsure = may_hide_grant(g.error());
    note_failure(store, opts, g.error(), nullptr);
    return g.error();
  }
  if (unsure != nullptr) *unsure = false;
  if (!g->token.is_issuable() || g->ttl <= std::chrono::milliseconds::zero()) {
    // A grant we cannot use: give it back if the store will take it, and report the store.
    if (g->token.is_issuable()) (void)store.release(key, owner, g->token);
    note_failure(store, opts, errc::protocol_error,
                 "the store granted no token or a TTL <= 0 (a contract violation)");
    return errc::protocol_error;
  }
  grant applied = *g;
  if (applied.ttl > ttl.ms) applied.ttl = ttl.ms;  // never trust more than was asked for
  using body = lease_body<Store, Clock>;
  const typename Clock::time_point until =
      body::valid_until_for(opts.clock, start, ttl.span_of(applied.ttl, opts.validity));
  // A reply that arrives after the validity it would give is worthless to the holder (Redlock's
  // rule): hand the key back at once rather than hold a lease it must not use. The lease's own
  // check (valid_at) of a reading taken now, asked before the lease exists, so that a lease kept
  // is built once, in the caller's result.
  const typename Clock::time_point now = opts.clock.now();
  if (!body::fresh_valid_at(start, until, now)) {
    return grant_too_late(store, key, opts, owner, take_owner, applied, ttl.ms, start, until, now);
  }
  // One move of the owner id, into the lease (a conditional would move a temporary twice).
  owner_id spelled;
  if (take_owner == nullptr) spelled = owner_id(owner);
  owner_id& id = take_owner != nullptr ? *take_owner : spelled;
  return result<lease<Store, Clock>>(std::in_place, lease_key{}, store, opts.clock,
                                     std::string(key), std::move(id), applied, ttl.ms,
                                     opts.validity, start, until, now, opts.on_lost, opts.observer);
}

// acquire_once() told to opts.observer as an acquire_attempt (attempt `n`, 1-based). Only an
// observed attempt reads the clock around the store call.
// `take_owner` as for acquire_once, unobserved only (an observer's event names the owner after
// the attempt).
template <class Store, class Clock>
result<lease<Store, Clock>> attempt(Store& store, std::string_view key, asked_ttl ttl,
                                    const acquire_options<Clock>& opts, std::string_view owner,
                                    std::uint32_t n, bool queue_if_busy = false,
                                    bool* unsure = nullptr,
                                    const std::chrono::steady_clock::time_point* deadline = nullptr,
                                    owner_id* take_owner = nullptr) {
  if (opts.observer == nullptr) {
    return acquire_once(store, key, ttl, opts, owner, queue_if_busy, unsure, deadline, take_owner);
  }
  const typename Clock::time_point t0 = opts.clock.now();
  result<lease<Store, Clock>> l =
      acquire_once(store, key, ttl, opts, owner, queue_if_busy, unsure, deadline);
  lease_event e = outcome_event(lease_event_kind::acquire_attempt, key, owner, l);
  e.store_latency = elapsed_ns(t0, opts.clock.now());
  e.attempt = n;
  notify(opts.observer, e);
  return l;
}

// One try as try_acquire() makes it: an attempt, and when its error may hide a grant (a lost
// reply), one more with the same owner, which returns that very grant (store.hpp, T1) instead of
// leaving it held, unheard, for its TTL. `unsure` (if given) tells whether the last answer may
// still hide one. Attempts are numbered from `n` for an observer. `deadline` (if given) bounds
// each store call where the store can (store_deadline.hpp). `take_owner` as for attempt(): moved
// into the lease, if one is made.
template <class Store, class Clock>
result<lease<Store, Clock>> attempt_asking_again(
    Store& store, std::string_view key, asked_ttl ttl, const acquire_options<Clock>& opts,
    std::string_view owner, std::uint32_t n, bool* unsure = nullptr,
    std::uint32_t* attempts = nullptr,
    const std::chrono::steady_clock::time_point* deadline = nullptr,
    owner_id* take_owner = nullptr) {
  bool maybe = false;
  // An unobserved first attempt is acquire_once itself (attempt() would only pass it on): one
  // call layer fewer on the path of every try_acquire().
  result<lease<Store, Clock>> l =
      opts.observer == nullptr
          ? acquire_once(store, key, ttl, opts, owner, false, &maybe, deadline, take_owner)
          : attempt(store, key, ttl, opts, owner, n, false, &maybe, deadline, take_owner);
  std::uint32_t made = 1;
  if (maybe) {
    l = attempt(store, key, ttl, opts, owner, n + 1, false, &maybe, deadline, take_owner);
    ++made;
  }
  if (unsure != nullptr) *unsure = maybe;
  if (attempts != nullptr) *attempts = made;
  return l;
}

// try_acquire() with an observer: the attempt and the outcome are reported.
template <class Store, class Clock>
result<lease<Store, Clock>> observed_try_acquire(Store& store, std::string_view key,
                                                 const result<acquire_request>& req,
                                                 const acquire_options<Clock>& opts) {
  const typename Clock::time_point t0 = opts.clock.now();
  std::uint32_t made = 0;
  result<lease<Store, Clock>> l =
      req ? attempt_asking_again(store, key, asked_ttl(req->ttl, req->span), opts, req->owner, 1,
                                 nullptr, &made)
          : result<lease<Store, Clock>>(req.error());
  report_acquire(l, opts, key, req ? req->owner.view() : std::string_view(opts.owner), t0, made);
  return l;
}

// The end of one slice of a wait inside a store that cannot be woken by a cancel: `deadline`, or
// with a token that can be cancelled at most cancel_wait_slice after `now` (the fallback of
// wait_in_store, below; cancel.hpp).
template <class TimePoint>
TimePoint cancellable_wait_end(const cancel_token& cancel, TimePoint now, TimePoint deadline) {
  if (!cancel.stop_possible()) return deadline;
  const TimePoint slice = saturating_add(now, cancel_wait_slice);
  return slice < deadline ? slice : deadline;
}

// One call of the store's wait (Watch: watch_release, else wait_for_release) until `end`.
template <bool Watch, class Store, class TimePoint>
result<void> store_wait_until(Store& store, std::string_view key, const TimePoint& end) {
  if constexpr (Watch) {
    return store.watch_release(key, end);
  } else {
    return store.wait_for_release(key, end);
  }
}

// Waits in the store until `key` may be free (Watch: may have changed hands; watch_release) or
// `deadline` on `clock` (read `now` just before), or until `cancel` is stopped: errc::cancelled.
// A store with the cancellable form (store.hpp's can_cancel_wait_for_release_v) is woken by the
// stop itself: the wait costs what it costs without a token, not one request more. Any other
// store's wait is cut, for a token that can be stopped, into cancel_wait_slice pieces with the
// token checked between them (the fallback for users' stores; they should offer the form): a
// wait_for_release piece that ran out is resumed at once, with no acquire attempt between (the
// store answers at once if the key came free meanwhile), while a watch_release piece returns (a
// new watch would watch whoever holds the key by then: the caller reads the holder again).
// \returns the store's answer; errc::cancelled once `cancel` was stopped.
template <bool Watch, class Store, class Clock>
result<void> wait_in_store(Store& store, std::string_view key, Clock& clock,
                           typename Clock::time_point now, typename Clock::time_point deadline,
                           const cancel_token& cancel) {
  constexpr bool cancellable = Watch ? can_cancel_watch_release_v<Store, Clock>
                                     : can_cancel_wait_for_release_v<Store, Clock>;
  if constexpr (cancellable) {
    (void)clock;
    (void)now;
    result<void> r = [&] {
      if constexpr (Watch) {
        return store.watch_release(key, deadline, cancel);
      } else {
        return store.wait_for_release(key, deadline, cancel);
      }
    }();
    if (!r && cancel.stop_requested()) return errc::cancelled;
    return r;
  } else {
    if (!cancel.stop_possible()) return store_wait_until<Watch>(store, key, deadline);
    for (;;) {
      const typename Clock::time_point end = cancellable_wait_end(cancel, now, deadline);
      result<void> r = store_wait_until<Watch>(store, key, end);
      if (cancel.stop_requested()) return errc::cancelled;
      if (!r || Watch || !(end < deadline)) return r;
      now = clock.now();
      if (now < end) return r;  // woken before the slice ran out: by the key, not the slice
    }
  }
}

// A timeout as a budget of the clock's duration (<= 0: none; too long: the maximum).
template <class Clock, class Rep, class Period>
typename Clock::duration budget_of(std::chrono::duration<Rep, Period> timeout) {
  using d = typename Clock::duration;
  const std::optional<d> limit = checked_duration_cast<d>(timeout);
  if (!limit) return timeout > decltype(timeout)::zero() ? d::max() : d::zero();
  return *limit > d::zero() ? *limit : d::zero();
}

// Time spent, counted only while the clock moves *forwards* since the first reading, not as an
// instant to reach: a clock that jumps back by 100 s does not make a wait 100 s longer (a sleep
// the jump cut short, clock.hpp, just leads to an earlier attempt). acquire() and acquire_all()
// share it; it reads no clock itself, so callers keep their readings (and the simulator's
// schedules) as they are.
template <class Clock>
class forward_budget {
 public:
  using duration = typename Clock::duration;
  using time_point = typename Clock::time_point;

  forward_budget(duration budget, time_point start) : budget_(budget), last_(start) {}
  // Whether budget is left at `t` (forward clock time only); changes nothing.
  [[nodiscard]] bool left_at(time_point t) const { return remaining_at(t) > duration::zero(); }
  // The budget left at `t` (forward clock time only; zero once spent); changes nothing.
  [[nodiscard]] duration remaining_at(time_point t) const {
    const duration left = budget_ - spent_;
    if (!(last_ < t)) return left;
    const duration step = saturating_sub(t, last_);
    return step < left ? left - step : duration::zero();
  }
  // Counts the forward movement up to `now` and returns the budget left (zero once spent).
  duration advance(time_point now) {
    if (last_ < now) {
      const duration step = saturating_sub(now, last_);
      spent_ = budget_ - spent_ < step ? budget_ : spent_ + step;
    }
    last_ = now;
    return budget_ - spent_;
  }

 private:
  duration budget_;
  duration spent_ = duration::zero();
  time_point last_;
};

// The instant on steady_clock at which `left` of a budget counted on Clock runs out: now + left
// (a budget on another clock, a manual one included, taken as a duration from now).
template <class Clock>
std::chrono::steady_clock::time_point steady_deadline(typename Clock::duration left) {
  return saturating_add(std::chrono::steady_clock::now(), left);
}

// One attempt of acquire()'s loop, the `made`-th, reported to the observer when Observed; the
// store call bounded by the budget `left()` gives where the store can (store_deadline.hpp), and
// on the real steady_clock also where it cannot: the steps such a store bounds by the thread's
// call bound (zookeeper_store's connect) end by the budget too (detail/call_until.hpp). The clock
// is not read otherwise (a simulated clock schedules at every read).
template <bool Observed, class Store, class Clock, class Left>
result<lease<Store, Clock>> loop_attempt(Store& store, std::string_view key,
                                         const acquire_request& req,
                                         const acquire_options<Clock>& opts, std::uint32_t made,
                                         bool queue, bool* unsure, const Left& left) {
  std::optional<std::chrono::steady_clock::time_point> deadline;
  if constexpr (has_try_acquire_until_v<Store> || has_try_acquire_queued_until_v<Store> ||
                std::is_same_v<Clock, steady_clock>) {
    deadline = steady_deadline<Clock>(left());
  } else {
    (void)left;
  }
  const std::chrono::steady_clock::time_point* until = deadline ? &*deadline : nullptr;
  if constexpr (Observed) {
    return attempt(store, key, asked_ttl(req.ttl, req.span), opts, req.owner, made, queue, unsure,
                   until);
  } else {
    (void)made;
    return acquire_once(store, key, asked_ttl(req.ttl, req.span), opts, req.owner, queue, unsure,
                        until);
  }
}

// The budget left now, read from the clock at most once and only when asked: the simulator
// schedules at every clock read, so a store that has no use for it changes no schedule.
template <class Clock>
class budget_left {
 public:
  budget_left(const forward_budget<Clock>& budget, Clock& clock) : budget_(budget), clock_(clock) {}
  typename Clock::duration operator()() const {
    if (!left_) left_ = budget_.remaining_at(clock_.now());
    return *left_;
  }

 private:
  const forward_budget<Clock>& budget_;
  Clock& clock_;
  mutable std::optional<typename Clock::duration> left_;
};

// Whether acquire()'s next attempt also joins the store's wait queue where the store can, so that
// the wait after a busy answer costs no request of its own: not before a backoff round (one in
// eight), and not for the last attempt (deadline reached, attempts used up): nobody would wait.
// `left()` gives the budget left (read last: only when the rest holds).
template <class Store, class Clock, class Left>
bool queue_attempt(std::uint32_t fruitless_waits, const backoff& delays, std::uint32_t made,
                   const Left& left) {
  return can_wait_for_release_v<Store, Clock> && has_try_acquire_queued_v<Store> &&
         (fruitless_waits + 1) % 8 != 0 && !delays.exhausted(made) &&
         left() > Clock::duration::zero();
}

// Takes out the place an attempt took in `store`'s wait queue (`in_queue`), where the store can.
template <class Store>
void leave_place(Store& store, std::string_view key, bool in_queue) {
  if constexpr (has_leave_queue_v<Store>) {
    if (in_queue) (void)store.leave_queue(key);
  } else {
    (void)store, (void)key, (void)in_queue;
  }
}

// What acquire()'s loop holds in the store between its calls. Every way out without a lease
// (timeout, cancel, an error that is not contention) takes out a place an attempt took in the
// store's wait queue, where the store can, so the next release hands the key to a waiter that is
// still there (issue 22; Redisson #1104's kind), and gives back a grant the last attempt may have
// made unheard (a lost reply): the same owner asks again and releases (detail/give_back.hpp). An
// exception between store calls (the clock's, a store call's, an allocation's) does both on
// unwinding, best effort (detail/unwind_guard.hpp), and then reaches the caller unchanged.
template <class Store>
struct loop_holdings {
  Store& store;
  std::string_view key;
  const acquire_request& req;
  bool in_queue = false;  // an attempt took a place in the key's wait queue
  bool hidden = false;    // the last attempt may have made a grant unheard (a lost reply, a throw)
  bool queuing = false;   // a queued attempt is in hand: if it throws, it may have taken a place

  // An attempt is in hand (`queue`: it joins the wait queue if busy). Until it answers, a store
  // call that throws may have granted, or queued.
  void asking(bool queue) noexcept {
    hidden = true;
    queuing = queue;
  }
  // It answered; `unsure`: its error may hide a grant.
  void answered(bool unsure) noexcept {
    hidden = unsure;
    queuing = false;
  }
  void leave_queue() { leave_place(store, key, std::exchange(in_queue, false) || queuing); }
  void give_back_hidden() {
    if (std::exchange(hidden, false)) (void)give_back(store, key, req.owner.view(), req.ttl);
  }
  void settle() {  // on unwinding
    leave_queue();
    give_back_hidden();
  }
};

// acquire()'s loop (see acquire()); Observed adds the reports: every attempt, then the outcome
// with its wait.
template <bool Observed, class Store, class Rep, class Period, class TRep, class TPeriod,
          class Clock>
result<lease<Store, Clock>> acquire_retrying(Store& store, std::string_view key,
                                             std::chrono::duration<Rep, Period> ttl,
                                             std::chrono::duration<TRep, TPeriod> timeout,
                                             const acquire_options<Clock>& opts) {
  using result_type = result<lease<Store, Clock>>;
  result<acquire_request> req = prepare_acquire(key, ttl, opts, store_min_ttl(store));
  Clock clock = opts.clock;
  if (!req) {
    if constexpr (Observed) {
      report_outcome(fencing_token{}, req.error(), opts, key, opts.owner, clock.now(), 0);
    }
    return req.error();
  }
  const typename Clock::time_point started = clock.now();
  using clock_duration = typename Clock::duration;
  forward_budget<Clock> budget(budget_of<Clock>(timeout), started);
  backoff delays(opts.backoff);
  std::uint32_t fruitless_waits = 0;
  std::uint32_t made = 1;
  // Every way out goes through one of these two, so that an observer hears how the call ended.
  const auto done = [&](result_type&& r) -> result_type {
    if constexpr (Observed) report_acquire(r, opts, key, req->owner.view(), started, made);
    return std::move(r);
  };
  const auto fail = [&](std::error_code ec) -> result_type {
    if constexpr (Observed)
      report_outcome(fencing_token{}, ec, opts, key, req->owner.view(), started, made);
    return ec;
  };
  const cancel_token& cancel = opts.cancel;
  loop_holdings<Store> held{store, key, *req};
  const on_unwind unwind([&] { held.settle(); });  // an exception between store calls
  const auto leave = [&](std::error_code ec) -> result_type {
    held.leave_queue();
    return fail(ec);
  };
  for (;; ++made) {
    if (cancel.stop_requested()) return leave(errc::cancelled);
    const budget_left<Clock> before(budget, clock);  // read only if used
    const bool queue = queue_attempt<Store, Clock>(fruitless_waits, delays, made, before);
    bool unsure = false;  // the attempt's error may hide a grant (a lost reply)
    held.asking(queue);
    // The store call ends by the budget's end (at least store_call_floor), where the store can.
    result_type l = loop_attempt<Observed>(store, key, *req, opts, made, queue, &unsure, before);
    held.answered(unsure);
    // A place an earlier attempt took unheard (its reply lost) is left too, once an attempt that
    // did not queue gets the key: else the next release hands off to nobody (O2).
    if (l) held.leave_queue();
    if (l && cancel.stop_requested()) {
      // The stop came while the grant was on its way: give it back, hold nothing.
      (void)l->release();
      return fail(errc::cancelled);
    }
    if (l) return done(std::move(l));
    held.in_queue = held.in_queue || (queue && (l.error() == errc::busy || unsure));
    if (!is_transient(l.error())) return leave(l.error());
    const auto give_up = [&](std::error_code ec) -> result_type {
      held.give_back_hidden();
      return leave(ec);
    };
    if (delays.exhausted(made)) return give_up(l.error());
    const typename Clock::time_point now = clock.now();
    const clock_duration left = budget.advance(now);
    if (left == clock_duration::zero()) return give_up(errc::timeout);
    const typename Clock::time_point deadline = saturating_add(now, left);
    if constexpr (can_wait_for_release_v<Store, Clock>) {
      // Waiting without polling: sleep in the store until the key is released or its holder's
      // lease can have expired (or the deadline), then ask again. A failed wait, or a run of
      // wake-ups that keep finding the key taken, falls back to one backoff sleep below, so a
      // store whose hints are wrong costs latency, never a busy loop.
      if (l.error() == errc::busy && (++fruitless_waits % 8) != 0) {
        if (wait_in_store<false>(store, key, clock, now, deadline, cancel)) continue;
        if (cancel.stop_requested()) return give_up(errc::cancelled);
      }
    }
    const std::optional<clock_duration> next =
        checked_duration_cast<clock_duration>(delays.next_delay());
    // One last attempt when the budget runs out (at the deadline itself).
    const clock_duration pause = next && *next < left ? *next : left;
    if (!sleep_until_or_cancelled(clock, saturating_add(now, pause), cancel)) {
      return give_up(errc::cancelled);
    }
  }
}

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_LEASE_DETAIL_ACQUIRE_HPP
