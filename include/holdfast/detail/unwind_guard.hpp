// SPDX-License-Identifier: MIT
// holdfast/detail/unwind_guard.hpp - on_unwind: a clean-up that runs only when the scope it guards
// is left by an exception, never on a normal return. A protocol that makes several store calls
// keeps what it holds in a store between them (a wait-queue place, a grant a lost reply may hide);
// every normal way out settles those itself, and an exception thrown between the calls (by the
// user's clock, a store call, allocation) settles them here, best effort: whatever the clean-up
// throws is swallowed, so the first exception reaches the caller unchanged ("leave nothing
// behind", DESIGN.md section 6). Under -fno-exceptions nothing can be thrown and the guard does
// nothing. Not for users.
#ifndef HOLDFAST_DETAIL_UNWIND_GUARD_HPP
#define HOLDFAST_DETAIL_UNWIND_GUARD_HPP

#include <exception>
#include <utility>

#include "holdfast/detail/config.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

/// Runs `fn` from its destructor iff that destructor runs during stack unwinding begun after the
/// guard was made (std::uncaught_exceptions() grew); an exception from `fn` is swallowed.
/// Thread-safety: a local of one call, never shared.
template <class Fn>
class on_unwind {
 public:
  explicit on_unwind(Fn fn) : fn_(std::move(fn)) {}
  on_unwind(const on_unwind&) = delete;
  on_unwind& operator=(const on_unwind&) = delete;
  ~on_unwind() {
#if HOLDFAST_HAS_EXCEPTIONS
    if (std::uncaught_exceptions() > entered_) {
      try {
        fn_();
      } catch (...) {
        // Swallowed: the exception already on its way is the caller's.
      }
    }
#else
    (void)fn_;
#endif
  }

 private:
  Fn fn_;
#if HOLDFAST_HAS_EXCEPTIONS
  int entered_ = std::uncaught_exceptions();
#endif
};

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_DETAIL_UNWIND_GUARD_HPP
