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
//   c.sleep_until(tp)    | blocks the caller until now() >= tp (returns at once if it already is)
//   C c2 = c;            | copyable: clocks are cheap handles; copies share one time
//
// Clocks must be steady in intent: TTLs are durations, never wall-clock instants (DESIGN T2), so a
// wall-clock jump (NTP, an operator's `date -s`) changes nothing. A user clock that nevertheless
// goes backwards is detected by `lease`, which then stops trusting itself (see lease.hpp).
//
//   steady_clock   the default: std::chrono::steady_clock, real sleeping
//   manual_clock   for tests: time moves only when advance()/set() is called; sleep_until blocks
//                  until another thread moves time past the deadline
#ifndef HOLDFAST_CLOCK_HPP
#define HOLDFAST_CLOCK_HPP

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>

#include "holdfast/detail/config.hpp"
#include "holdfast/detail/saturating.hpp"

namespace holdfast {

namespace detail {

template <class C, class = void>
struct has_clock_types : std::false_type {};
template <class C>
struct has_clock_types<C, std::void_t<typename C::duration, typename C::time_point>>
    : std::true_type {};

template <class C, class = void>
struct has_now : std::false_type {};
template <class C>
struct has_now<C, std::void_t<decltype(std::declval<const C&>().now())>>
    : std::is_same<decltype(std::declval<const C&>().now()), typename C::time_point> {};

template <class C, class = void>
struct has_sleep_until : std::false_type {};
template <class C>
struct has_sleep_until<C, std::void_t<decltype(std::declval<C&>().sleep_until(
                              std::declval<const typename C::time_point&>()))>> : std::true_type {};

template <class C, bool = has_clock_types<C>::value>
struct is_ttl_clock : std::false_type {};
template <class C>
struct is_ttl_clock<C, true> : std::bool_constant<has_now<C>::value && has_sleep_until<C>::value &&
                                                  std::is_copy_constructible_v<C>> {};

}  // namespace detail

/// True iff C models the TTL clock requirements in the table above (C++17 spelling).
template <class C>
inline constexpr bool is_ttl_clock_v = detail::is_ttl_clock<C>::value;

#if HOLDFAST_HAS_CONCEPTS
/// The TTL clock requirements in the table above, as a C++20 concept.
template <class C>
concept ttl_clock = is_ttl_clock_v<C>;
#endif

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
/// backwards (set() or a negative advance()), to test code against clocks that jump.
/// sleep_until() blocks until another thread moves time to or past the deadline; it never waits
/// on the real clock, so a test that forgets to advance time hangs visibly instead of passing by
/// luck (pair it with wait_for_sleepers(), which has a real-time bound).
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
      state_->now = detail::saturating_add(state_->now, d);
    }
    state_->cv.notify_all();
  }

  /// Sets time to `t`, forwards or backwards. Wakes sleepers whose deadline has been reached.
  void set(time_point t) {
    {
      std::lock_guard<std::mutex> lock(state_->mutex);
      state_->now = t;
    }
    state_->cv.notify_all();
  }

  /// Blocks until another thread moves time to or past `deadline`; returns at once if it is
  /// already there.
  void sleep_until(time_point deadline) const {
    std::unique_lock<std::mutex> lock(state_->mutex);
    ++state_->sleepers;
    state_->cv.notify_all();  // wake wait_for_sleepers()
    state_->cv.wait(lock, [&] { return state_->now >= deadline; });
    --state_->sleepers;
  }

  /// Returns how many threads are blocked in sleep_until() right now.
  [[nodiscard]] std::size_t sleepers() const {
    std::lock_guard<std::mutex> lock(state_->mutex);
    return state_->sleepers;
  }

  /// Waits (in real time, at most `real_timeout`) until at least `n` threads are blocked in
  /// sleep_until(). Returns whether they are. Lets a test advance time only once the thread under
  /// test is really asleep, with a bound instead of a fixed sleep.
  template <class Rep, class Period>
  bool wait_for_sleepers(std::size_t n, std::chrono::duration<Rep, Period> real_timeout) const {
    std::unique_lock<std::mutex> lock(state_->mutex);
    return state_->cv.wait_for(lock, real_timeout, [&] { return state_->sleepers >= n; });
  }

 private:
  struct state {
    std::mutex mutex;
    std::condition_variable cv;
    time_point now{};
    std::size_t sleepers = 0;
  };
  std::shared_ptr<state> state_;
};

static_assert(is_ttl_clock_v<steady_clock>, "steady_clock must model ttl_clock");
static_assert(is_ttl_clock_v<manual_clock>, "manual_clock must model ttl_clock");

}  // namespace holdfast

#endif  // HOLDFAST_CLOCK_HPP
