// SPDX-License-Identifier: MIT
// holdfast/testing/rapidcheck.hpp - rapidcheck as the simulator's decision source: rapidcheck
// generates a decision tape, the simulator runs the schedule it encodes, and rapidcheck's
// shrinker shortens the tape and drives its bytes toward 0 (the benign answer) until only the
// decisions that make the failure remain, so the checker's timeline comes out minimal.
//
//   rc::prop("leases keep S1-S5", [] {
//     const holdfast::testing::decision_tape tape = *holdfast::testing::gen_decision_tape();
//     holdfast::testing::byte_source src = tape.source();
//     const auto r = holdfast::testing::run_schedule(src);
//     if (!r.result.ok()) RC_FAIL(r.result.report());
//   });
//
// A failure prints the timeline and rapidcheck's RC_PARAMS="reproduce=..." string, which replays
// the very same schedule. One tape is one value (printed as a one-line summary, not hundreds of
// numbers), and a tape is the same byte string a libFuzzer input or a corpus file is: every
// engine shares byte_source's decoding.
//
// Needs rapidcheck (not part of holdfast's dependencies): include this header only where
// rapidcheck is available. Not included by testing/testing.hpp.
#ifndef HOLDFAST_TESTING_RAPIDCHECK_HPP
#define HOLDFAST_TESTING_RAPIDCHECK_HPP

#include <rapidcheck.h>

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <utility>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/testing/decision.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace testing {

/// A whole schedule's decisions as bytes (see byte_source): what rapidcheck generates and
/// shrinks.
struct decision_tape {
  std::vector<std::uint8_t> bytes;

  /// Returns a byte_source reading this tape (the tape must outlive it).
  [[nodiscard]] byte_source source() const noexcept {
    return byte_source(bytes.data(), bytes.size());
  }
};

/// Prints a tape as a one-line summary for rapidcheck's counterexample output.
inline void showValue(const decision_tape& t, std::ostream& os) {
  std::size_t nonzero = 0;
  for (std::uint8_t b : t.bytes) nonzero += b != 0 ? 1 : 0;
  os << "decision tape of " << t.bytes.size() << " bytes, " << nonzero << " non-zero";
}

/// Returns a rapidcheck generator of decision tapes of 0 to `max_bytes` uniformly random bytes
/// (a 64-operation schedule reads about 700). Shrinking removes bytes and lowers them toward 0.
/// The bytes are drawn with gen::inRange, which is uniform: rapidcheck's arbitrary integers favour
/// small values, which here would mean "no fault" far more often than the weights intend.
inline rc::Gen<decision_tape> gen_decision_tape(int max_bytes = 4096) {
  return rc::gen::map(
      rc::gen::resize(max_bytes, rc::gen::container<std::vector<std::uint8_t>>(rc::gen::map(
                                     rc::gen::inRange<int>(0, 256),
                                     [](int b) { return static_cast<std::uint8_t>(b); }))),
      [](std::vector<std::uint8_t> v) { return decision_tape{std::move(v)}; });
}

}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_RAPIDCHECK_HPP
