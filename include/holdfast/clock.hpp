// SPDX-License-Identifier: MIT
// holdfast/clock.hpp - the TTL clock: where holdfast reads time and sleeps.
//
// All time in holdfast goes through a clock object, so a test or the simulator can make time
// virtual and nothing ever sleeps for real in a test. A clock models `ttl_clock`:
//
//   expression           | type / effect
//   ---------------------+------------------------------------------------------------------
//   C::duration          | a std::chrono::duration
//   C::time_point        | a std::chrono::time_point whose duration is C::duration
//   c.now()              | C::time_point; callable on a const clock
//   c.sleep_until(tp)    | blocks the caller until now() >= tp (returns at once if it already is);
//                        | may return earlier, e.g. when the clock went backwards meanwhile
//                        | (callers re-read the clock: holdfast's always do)
//   C c2 = c;            | copyable: clocks are cheap handles; copies share one time
//
// A clock may also be *interruptible* (optional; is_interruptible_clock_v), which lets a background
// thread that sleeps on it (keepalive.hpp) be stopped or re-scheduled at once instead of when its
// deadline comes:
//
//   expression              | effect
//   ------------------------+---------------------------------------------------------------------
//   c.sleep_until(tp, stop) | blocks until now() >= tp (returns true) or until stop() is true after
//                           | a wake_sleepers() call (returns false); stop() is also checked on
//                           | entry. Should also return false once the clock went backwards (below
//                           | its reading at entry): the deadline then no longer measures a wait
//   c.wake_sleepers()       | makes every sleep_until(tp, stop) re-check its stop()
//
// A clock may also declare its *tick* (optional): how far behind true time a reading may lag.
//
//   expression   | type / meaning
//   -------------+--------------------------------------------------------------------------------
//   c.tick()     | a std::chrono::duration q >= 0: every reading t of now() satisfies
//                | t <= true time < t + q (a clock that reads true time rounded *down* to q)
//
// clock_tick(c) returns it, or one unit of C::duration for a clock that does not declare it (a
// clock that reads in whole units may lag by up to one). manual_clock declares 0: its time is
// exactly what was set. A store that judges expiry by its own clock uses the tick to hold every
// grant for at least the TTL it reports in real time (store.hpp, T2; store_hold_until() in
// store.hpp).
//
// manual_clock is interruptible. steady_clock needs no such support: code that must interrupt a
// sleep on it waits on its own condition variable, which runs on the same steady time. A clock that
// is neither (a user's or a simulator's) still works everywhere; a background thread then notices a
// stop request at its next wake-up, which keepalive.hpp bounds with a polling interval.
//
// Clocks must be steady in intent: TTLs are durations, never wall-clock instants (store.hpp, T2),
// so a wall-clock jump (NTP, an operator's `date -s`) changes nothing. A user clock that
// nevertheless goes backwards is detected by `lease`, which then stops trusting itself (see
// lease.hpp), and nothing in holdfast that waits for an instant of a user clock waits longer
// because of it: a sleep on a clock that went backwards ends (manual_clock; an interruptible clock
// should do the same), the keepalive then finds the regression and reports clock_regressed on its
// leases, and a blocking acquire counts only the time the clock moved forwards against its timeout.
//
//   steady_clock   the default: std::chrono::steady_clock, real sleeping
//   manual_clock   for tests: time moves only when advance()/set() is called; sleep_until blocks
//                  until another thread moves time past the deadline
//   self_advancing_clock  for single-threaded tests: sleep_until moves time to the deadline
//                  itself, so blocking acquire() and a poll()-driven keepalive run on one thread
#ifndef HOLDFAST_CLOCK_HPP
#define HOLDFAST_CLOCK_HPP

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/detail/detect.hpp"
#include "holdfast/detail/saturating.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

namespace detail {

template <class C, class = void>
struct has_clock_types : std::false_type {};
template <class C>
struct has_clock_types<C, std::void_t<typename C::duration, typename C::time_point>>
    : std::true_type {};

// The clock operations as expressions (detail/detect.hpp), each written once.
template <class C>
using now_call = decltype(std::declval<const C&>().now());
template <class C>  // well-formed iff now() returns exactly the clock's time_point
using now_returns_time_point =
    std::enable_if_t<std::is_same_v<now_call<C>, typename C::time_point>>;
template <class C>
using sleep_until_call =
    decltype(std::declval<C&>().sleep_until(std::declval<const typename C::time_point&>()));

template <class C>
struct has_now : is_detected<now_returns_time_point, C> {};
template <class C>
struct has_sleep_until : is_detected<sleep_until_call, C> {};

template <class C, bool = has_clock_types<C>::value>
struct is_ttl_clock : std::false_type {};
template <class C>
struct is_ttl_clock<C, true> : std::bool_constant<has_now<C>::value && has_sleep_until<C>::value &&
                                                  std::is_copy_constructible_v<C>> {};

struct never_stop {
  bool operator()() const noexcept { return false; }
};

template <class C>
using interruptible_sleep_call = decltype(std::declval<C&>().sleep_until(
    std::declval<const typename C::time_point&>(), never_stop{}));
template <class C>
using wake_sleepers_call = decltype(std::declval<C&>().wake_sleepers());

template <class C>
struct is_interruptible_clock
    : std::conjunction<is_detected_convertible<bool, interruptible_sleep_call, C>,
                       is_detected<wake_sleepers_call, C>> {};

}  // namespace detail

#if HOLDFAST_HAS_CONCEPTS
/// The TTL clock requirements in the table above, as a requires-expression: it constrains lease,
/// try_acquire, acquire, keepalive, distributed_mutex, quorum_store and cas_store.
template <class C>
concept ttl_clock = std::copy_constructible<C>&& requires(C& c, const C& cc,
                                                          const typename C::time_point& tp) {
  typename C::duration;
  { cc.now() } -> std::same_as<typename C::time_point>;
  c.sleep_until(tp);
};
/// True iff C models the TTL clock requirements in the table above (the C++17 spelling; under
/// C++20 it is the concept ttl_clock).
template <class C>
inline constexpr bool is_ttl_clock_v = ttl_clock<C>;
#else
/// True iff C models the TTL clock requirements in the table above (C++17 spelling).
template <class C>
inline constexpr bool is_ttl_clock_v = detail::is_ttl_clock<C>::value;
#endif

/// Fails to compile, with a message naming the requirement C does not meet, unless C models
/// ttl_clock. Returns true, so it can sit in a static_assert. The C++17 diagnostic (under C++20
/// the ttl_clock constraint refuses C first).
template <class C>
constexpr bool assert_ttl_clock() noexcept {
  static_assert(detail::has_clock_types<C>::value,
                "holdfast: a ttl_clock needs the member types `duration` and `time_point`");
  static_assert(std::conjunction<detail::has_clock_types<C>, detail::has_now<C>>::value,
                "holdfast: a ttl_clock needs `time_point now() const`; the clock has no now() "
                "callable on a const clock and returning its time_point");
  static_assert(std::conjunction<detail::has_clock_types<C>, detail::has_sleep_until<C>>::value,
                "holdfast: a ttl_clock needs `sleep_until(const time_point&)`; the clock has no "
                "sleep_until callable with its time_point");
  static_assert(std::is_copy_constructible_v<C>,
                "holdfast: a ttl_clock must be copyable (clocks are cheap handles)");
  return true;
}

/// True iff C is a TTL clock that is also interruptible: `sleep_until(tp, stop)` and
/// `wake_sleepers()` as in the second table above.
template <class C>
inline constexpr bool is_interruptible_clock_v =
    is_ttl_clock_v<C>&& detail::is_interruptible_clock<C>::value;

namespace detail {
template <class C>
using tick_call = decltype(std::declval<const C&>().tick());
template <class C>
struct has_tick : is_detected<tick_call, C> {};
}  // namespace detail

/// Returns the tick of `clock` (see the table at the top of clock.hpp): the most by which a
/// reading of clock.now() may lag true time, in the clock's own duration (rounded up). It is
/// `clock.tick()` if the clock declares one (a negative tick counts as zero), else one unit of
/// Clock::duration. Exceptions from clock.tick() propagate.
template <class Clock>
[[nodiscard]] typename Clock::duration clock_tick(const Clock& clock) {
  using D = typename Clock::duration;
  if constexpr (detail::has_tick<Clock>::value) {
    const auto q = clock.tick();
    if (q <= decltype(q)::zero()) return D::zero();
    const std::optional<D> t = detail::checked_duration_cast<D>(q);
    if (!t) return D::max();
    return *t < q ? *t + D(1) : *t;  // rounded up: never declare a finer tick than the clock's
  } else {
    return D(1);
  }
}

/// The default clock: std::chrono::steady_clock, which never jumps and never goes backwards.
/// Sleeping is real (std::this_thread::sleep_until). Stateless; thread-safe.
struct steady_clock {
  using duration = std::chrono::steady_clock::duration;
  using time_point = std::chrono::steady_clock::time_point;

  /// Returns the current steady time.
  [[nodiscard]] time_point now() const noexcept { return std::chrono::steady_clock::now(); }
  /// Blocks the calling thread until `deadline`; returns at once if it has passed.
  void sleep_until(time_point deadline) const { std::this_thread::sleep_until(deadline); }
};

/// A clock for tests whose time moves only when told to. Copies are handles to one shared time,
/// so a test can hand copies to a store, leases and helper threads and move them all at once.
///
/// Time starts at the epoch (now().time_since_epoch() == 0) and may be moved forwards or
/// backwards (set() or a negative advance()), to test code against clocks that jump. A move
/// backwards ends every sleep in progress (sleep_until(tp, stop) then returns false): a sleeper
/// waiting for an instant must re-read the clock rather than wait for the lost time again.
/// sleep_until() blocks until another thread moves time to or past the deadline; it never waits
/// on the real clock, so a test that forgets to advance time hangs visibly instead of passing by
/// luck (pair it with wait_for_sleepers(), which has a real-time bound). It is interruptible
/// (is_interruptible_clock_v): sleep_until(tp, stop) also returns once stop() holds after a
/// wake_sleepers() call, so a background thread sleeping on it can be stopped at once.
///
/// Thread-safety: every member may be called concurrently from any thread.
class manual_clock {
 public:
  using duration = std::chrono::nanoseconds;
  using rep = duration::rep;
  using period = duration::period;
  using time_point = std::chrono::time_point<manual_clock, duration>;
  static constexpr bool is_steady = false;  // it may be set backwards on purpose

  /// Makes a new, independent time starting at the epoch.
  manual_clock() : state_(std::make_shared<state>()) {}

  /// Returns the tick, zero: a manual clock reads exactly the time that was set.
  [[nodiscard]] static constexpr duration tick() noexcept { return duration::zero(); }

  /// Returns the current manual time.
  [[nodiscard]] time_point now() const {
    std::lock_guard<std::mutex> lock(state_->mutex);
    return state_->now;
  }

  /// Moves time by `d` (nanoseconds, or any duration convertible to them); a negative `d` moves
  /// it backwards. Time saturates at time_point::min() and time_point::max() instead of
  /// overflowing. Wakes sleepers whose deadline has been reached.
  void advance(duration d) {
    {
      std::lock_guard<std::mutex> lock(state_->mutex);
      move_to(detail::saturating_add(state_->now, d));
    }
    state_->cv.notify_all();
  }

  /// Sets time to `t`, forwards or backwards. Wakes sleepers whose deadline has been reached, and
  /// on a move backwards every sleeper.
  void set(time_point t) {
    {
      std::lock_guard<std::mutex> lock(state_->mutex);
      move_to(t);
    }
    state_->cv.notify_all();
  }

  /// Blocks until another thread moves time to or past `deadline`, or moves it backwards (the
  /// caller re-reads the clock); returns at once if time is already there.
  void sleep_until(time_point deadline) const { (void)sleep_until(deadline, detail::never_stop{}); }

  /// Blocks until time reaches `deadline` (returns true), until `stop()` returns true (returns
  /// false), or until time moves backwards (returns false). `stop` is called on entry and again
  /// after every wake_sleepers() call, under the clock's internal lock: it must be cheap (e.g.
  /// read an atomic flag) and must not call into this clock.
  template <class Stop>
  bool sleep_until(time_point deadline, Stop stop) const {
    std::unique_lock<std::mutex> lock(state_->mutex);
    const std::uint64_t regressions = state_->regressions;
    sleeper me{deadline, state_->wake_epoch, regressions};
    state_->sleeping.push_back(&me);
    struct unregister {
      state* st;
      sleeper* me;
      ~unregister() {
        for (std::size_t i = 0; i < st->sleeping.size(); ++i) {
          if (st->sleeping[i] == me) {
            st->sleeping[i] = st->sleeping.back();
            st->sleeping.pop_back();
            break;
          }
        }
      }
    } guard{state_.get(), &me};
    bool checked = false;
    for (;;) {
      if (state_->now >= deadline) return true;
      if (state_->regressions != regressions) return false;  // the deadline means nothing now
      if (!checked || me.epoch != state_->wake_epoch) {
        // Stop not counting as blocked while stop() runs: a wake_sleepers() caller that then
        // waits for sleepers must see this thread either stopped or asleep again.
        me.epoch = state_->wake_epoch;
        checked = true;
        if (stop()) return false;
        state_->cv.notify_all();  // wake wait_for_sleepers(): this thread is (again) asleep
      }
      state_->cv.wait(lock);
    }
  }

  /// Makes every sleep_until(tp, stop) call re-check its stop(). Sleepers whose stop() is false
  /// go back to sleep.
  void wake_sleepers() {
    {
      std::lock_guard<std::mutex> lock(state_->mutex);
      ++state_->wake_epoch;
    }
    state_->cv.notify_all();
  }

  /// Returns how many threads are blocked in sleep_until() right now: those whose deadline is
  /// still ahead and that have no pending wake_sleepers() to answer. A sleeper whose deadline time
  /// has reached is runnable, not blocked, even before it has returned.
  [[nodiscard]] std::size_t sleepers() const {
    std::lock_guard<std::mutex> lock(state_->mutex);
    return blocked();
  }

  /// Waits (in real time, at most `real_timeout`) until at least `n` threads are blocked in
  /// sleep_until() (as counted by sleepers()). Returns whether they are. Lets a test advance time
  /// only once the thread under test is really asleep, with a bound instead of a fixed sleep; and
  /// since a sleeper stops counting the moment time passes its deadline, `advance();
  /// wait_for_sleepers(n)` waits until the woken thread has done its work and is asleep again.
  template <class Rep, class Period>
  bool wait_for_sleepers(std::size_t n, std::chrono::duration<Rep, Period> real_timeout) const {
    std::unique_lock<std::mutex> lock(state_->mutex);
    return state_->cv.wait_for(lock, real_timeout, [&] { return blocked() >= n; });
  }

 private:
  struct sleeper {
    time_point deadline;
    std::uint64_t epoch;
    std::uint64_t regressions;  // state::regressions when it fell asleep
  };
  struct state {
    std::mutex mutex;
    std::condition_variable cv;
    time_point now{};
    std::uint64_t wake_epoch = 0;
    std::uint64_t regressions = 0;   // how many times time moved backwards
    std::vector<sleeper*> sleeping;  // every thread inside sleep_until (few: a vector suffices)
  };

  void move_to(time_point t) {  // caller holds state_->mutex
    if (t < state_->now) ++state_->regressions;
    state_->now = t;
  }

  std::size_t blocked() const {  // caller holds state_->mutex
    std::size_t n = 0;
    for (const sleeper* s : state_->sleeping) {
      if (state_->now < s->deadline && s->epoch == state_->wake_epoch &&
          s->regressions == state_->regressions) {
        ++n;
      }
    }
    return n;
  }

  std::shared_ptr<state> state_;
};

/// A clock for single-threaded tests whose sleep_until() moves its time forwards to the deadline
/// itself, in the spirit of abseil's SimulatedClock: code that sleeps on its clock (a blocking
/// acquire() backing off, a keepalive driven by poll()) runs to completion on the test's one
/// thread, in virtual time, where manual_clock::sleep_until would wait forever for another thread
/// to move time. Copies share one time.
///
///   holdfast::self_advancing_clock clock;
///   holdfast::memory_store<holdfast::self_advancing_clock> store(clock);
///   auto l = holdfast::acquire(store, "k", 10s, 1min, opts);   // backs off in virtual time
///   holdfast::keepalive<holdfast::self_advancing_clock> ka(clock, {.start_thread = false});
///   while (auto next = ka.poll()) clock.sleep_until(*next);    // an event loop, one thread
///
/// With a keepalive thread (start_thread = true) it works too: the clock is neither steady nor
/// interruptible, so the thread reads it every poll_interval of real time and renews whatever is
/// due; time still moves only when the test sleeps, advances or sets it.
///
/// Time starts at the epoch and may also be moved by hand, forwards or backwards (advance(),
/// set()). A sleep never moves time backwards: sleeping until an instant already passed returns
/// at once. Its tick is zero (reads are exact). Thread-safety: every member may be called
/// concurrently from any thread.
class self_advancing_clock {
 public:
  using duration = std::chrono::nanoseconds;
  using rep = duration::rep;
  using period = duration::period;
  using time_point = std::chrono::time_point<self_advancing_clock, duration>;
  static constexpr bool is_steady = false;  // it may be set backwards on purpose

  /// Makes a new, independent time starting at the epoch.
  self_advancing_clock() : state_(std::make_shared<state>()) {}

  /// Returns the current time.
  [[nodiscard]] time_point now() const {
    std::lock_guard<std::mutex> lock(state_->mutex);
    return state_->now;
  }
  /// Moves time forwards to `deadline` if it is earlier, and returns at once. Counted by sleeps().
  void sleep_until(time_point deadline) const {
    std::lock_guard<std::mutex> lock(state_->mutex);
    ++state_->sleeps;
    if (state_->now < deadline) state_->now = deadline;
  }
  /// Moves time by `d` (negative: backwards), saturating at the time_point's range.
  void advance(duration d) {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->now = detail::saturating_add(state_->now, d);
  }
  /// Sets time to `t`, forwards or backwards.
  void set(time_point t) {
    std::lock_guard<std::mutex> lock(state_->mutex);
    state_->now = t;
  }
  /// Returns the tick, zero: reads are exact.
  [[nodiscard]] static constexpr duration tick() noexcept { return duration::zero(); }
  /// Returns how many times sleep_until() was called (on any copy).
  [[nodiscard]] std::uint64_t sleeps() const {
    std::lock_guard<std::mutex> lock(state_->mutex);
    return state_->sleeps;
  }

 private:
  struct state {
    std::mutex mutex;
    time_point now{};
    std::uint64_t sleeps = 0;
  };
  std::shared_ptr<state> state_;
};

static_assert(is_ttl_clock_v<steady_clock>, "steady_clock must model ttl_clock");
static_assert(is_ttl_clock_v<self_advancing_clock>, "self_advancing_clock must model ttl_clock");
static_assert(is_ttl_clock_v<manual_clock>, "manual_clock must model ttl_clock");
static_assert(is_interruptible_clock_v<manual_clock>, "manual_clock must be interruptible");
static_assert(!is_interruptible_clock_v<steady_clock>, "steady_clock has no interruptible sleep");

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_CLOCK_HPP
