// SPDX-License-Identifier: MIT
// holdfast/testing/verdict.hpp - what the checker answers: the invariants it knows (the table at
// the top of checker.hpp) and its verdict on one history, the first violated invariant with a
// sentence and a timeline, or "all hold".
//
//   type / function        | what it is
//   -----------------------+------------------------------------------------------------------
//   invariant              | S1-S6, L1, L2, T4, or none
//   tag(i), to_string(i)   | "S1"; "S1 fenced writes" (one table below holds both)
//   verdict                | ok(), or the violated invariant, the event index, a sentence
//                          | (what) and the timeline; report() joins them for printing
//
// check() (checker.hpp) produces a verdict; to_svg() (svg.hpp) draws one; mutants.hpp names the
// verdict each negative control must produce.
//
// Thread-safety: values; the functions are pure.
#ifndef HOLDFAST_TESTING_VERDICT_HPP
#define HOLDFAST_TESTING_VERDICT_HPP

#include <cstddef>
#include <cstdint>
#include <string>

#include "holdfast/detail/config.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace testing {

/// The invariants in the table at the top of checker.hpp (none = all hold).
enum class invariant : std::uint8_t {
  none,
  s1_fenced_writes,
  s2_token_order,
  s3_exclusive_grants,
  s4_holder_belief,
  s5_ownership,
  l1_liveness,
  s6_permit_bound,
  t4_store_answers,  ///< The store reported a grant no store can make (TTL <= 0 or > max_ttl).
  l2_regression,  ///< A kept-alive holder whose clock went back heard nothing in a renew interval.
  o1_orphaned_grant,   ///< An attempt ended leaving a grant it neither reported nor went back for.
  o2_abandoned_place,  ///< An attempt ended with its caller still queued for a hand-off.
};

namespace detail {

// An invariant's two text forms, from one table: its tag ("S1") and its name ("S1 fenced writes").
struct invariant_text {
  const char* tag;
  const char* name;
};

inline invariant_text text_of(invariant i) noexcept {
  switch (i) {
    case invariant::none:
      return {"-", "no violation"};
    case invariant::s1_fenced_writes:
      return {"S1", "S1 fenced writes"};
    case invariant::s2_token_order:
      return {"S2", "S2 token order"};
    case invariant::s3_exclusive_grants:
      return {"S3", "S3 exclusive grants"};
    case invariant::s4_holder_belief:
      return {"S4", "S4 holder belief"};
    case invariant::s5_ownership:
      return {"S5", "S5 ownership"};
    case invariant::l1_liveness:
      return {"L1", "L1 liveness"};
    case invariant::s6_permit_bound:
      return {"S6", "S6 permit bound"};
    case invariant::t4_store_answers:
      return {"T4", "T4 store answers"};
    case invariant::l2_regression:
      return {"L2", "L2 clock regression noticed"};
    case invariant::o1_orphaned_grant:
      return {"O1", "O1 no orphaned grants"};
    case invariant::o2_abandoned_place:
      return {"O2", "O2 no abandoned queue places"};
  }
  return {"?", "?"};
}

}  // namespace detail

/// Returns the invariant's tag: "S1" .. "S6", "L1", "L2", "T4", "O1", "O2", or "-" for none ("?"
/// for a value outside the enumeration).
inline const char* tag(invariant i) noexcept {
  return detail::text_of(i).tag;
}

/// Returns the invariant's name as in the table at the top of checker.hpp, e.g. "S1 fenced writes"
/// ("no violation" for none, "?" for a value outside the enumeration).
inline const char* to_string(invariant i) noexcept {
  return detail::text_of(i).name;
}

/// The checker's answer: ok, or the first violated invariant with an explanation and a timeline.
struct verdict {
  invariant violated = invariant::none;  ///< The first violated invariant (none: all hold).
  std::size_t at = 0;                    ///< Index of the violating event in history::events.
  std::string what;                      ///< One sentence: what went wrong.
  std::string timeline;  ///< The events that matter, one per line (the README's timeline).

  /// Returns true iff no invariant was violated.
  [[nodiscard]] bool ok() const noexcept { return violated == invariant::none; }
  /// Returns true iff no invariant was violated.
  explicit operator bool() const noexcept { return ok(); }

  /// Returns "<invariant> violated: <what>" followed by the timeline, or "all invariants hold".
  [[nodiscard]] std::string report() const {
    if (ok()) return "all invariants hold (S1-S6, L1)\n";
    return std::string(to_string(violated)) + " violated: " + what + "\n" + timeline;
  }
};

}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_VERDICT_HPP
