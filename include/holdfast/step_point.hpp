// SPDX-License-Identifier: MIT
// holdfast/step_point.hpp - step points: how a store that takes more than one step per operation
// tells a checker where those steps are, at no cost in production.
//
// A LeaseStore operation must be atomic per key (store.hpp). A store that does it in one step (one
// SQL statement, one Lua script, one compare-and-swap, one critical section) has nothing to mark.
// A store that takes several steps (two statements, a read and then a write, a get and then a
// compare-and-swap) is atomic only if its steps are arranged so; whether they are is exactly what
// the conformance kit (testing/conformance.hpp) must find out, and it can only do that if it can
// run other clients *between* the steps. A step point is where the store says so:
//
//   holdfast::step_point(clock_, holdfast::step_kind::between);       // others may act here
//   holdfast::step_point(clock_, holdfast::step_kind::takes_effect);   // my operation commits here
//
//   kind          | mark it                                  | what a checker does there
//   --------------+------------------------------------------+-----------------------------------
//   between       | between two of the store's own steps     | may run other clients, stall this
//                 | (after one statement, before the next)   | one (a pause of any length), or
//                 |                                          | crash it
//   takes_effect  | right after the step at which the grant, | places the operation at this
//                 | renewal or release becomes visible to    | instant in the history, so the
//                 | others (the commit)                      | checker judges token order and
//                 |                                          | overlap where it really happened
//
// An operation with no takes_effect mark is placed where it returns, which is right for a store
// whose commit is its last step. A store with a `between` point *after* its commit must mark the
// commit with takes_effect, or its operations would appear later than they happened.
//
// Zero cost. `clock` is the store's own clock object (the `Clock` the store is templated on, the
// one it judges expiry by). step_point() calls `clock.step_point(kind)` only if that clock type
// has such a member, detected at compile time; otherwise it compiles to nothing.
// holdfast::steady_clock and manual_clock have none, so a store built on them pays nothing and
// depends on nothing; the simulator's clock (testing::sim_clock) has one, so the same store,
// built on it by the conformance kit, is interleaved at every point. A user's clock may define the
// member to observe the points.
//
// Rules for store authors (the kit cannot check them for you):
//   - Never hold a lock of your own (a mutex, an open transaction) across a step point: the
//     simulator runs another client there, on the same thread, and it would block on your lock.
//   - The token counter moves in the same atomic step as the grant; a step point between them is
//     the "SET NX, then INCR" bug, and the kit reports it as a broken token order (S2).
//
// Thread-safety: step_point() adds none of its own; it is as thread-safe as the clock's member.
#ifndef HOLDFAST_STEP_POINT_HPP
#define HOLDFAST_STEP_POINT_HPP

#include <cstdint>
#include <type_traits>
#include <utility>

#include "holdfast/detail/config.hpp"
#include "holdfast/detail/detect.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

/// Where in a multi-step store operation a step point is (see the table in step_point.hpp).
enum class step_kind : std::uint8_t {
  between,       ///< Between two of the store's own steps: other clients may act here.
  takes_effect,  ///< Right after the step at which the operation became visible (its commit).
};

namespace detail {

template <class Clock>
using step_point_call =
    decltype(std::declval<const Clock&>().step_point(std::declval<step_kind>()));
template <class Clock>
struct has_step_point : is_detected<step_point_call, Clock> {};

}  // namespace detail

/// True iff `Clock` observes step points: `clock.step_point(step_kind)` is callable on a const
/// clock (testing::sim_clock does; steady_clock and manual_clock do not).
template <class Clock>
inline constexpr bool has_step_point_v = detail::has_step_point<Clock>::value;

/// Marks a step point of a store operation (see step_point.hpp): calls `clock.step_point(kind)` if
/// `Clock` has that member, and does nothing otherwise (no code at all for steady_clock).
/// `clock` is the clock the store judges expiry by. An exception thrown by the clock's member
/// propagates unchanged (the simulator's does not throw).
///
/// Thread-safety: as the clock's step_point member; none needed for clocks without one.
template <class Clock>
inline void step_point(const Clock& clock, step_kind kind) {
  if constexpr (has_step_point_v<Clock>) {
    clock.step_point(kind);
  } else {
    (void)clock;
    (void)kind;
  }
}

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STEP_POINT_HPP
