// SPDX-License-Identifier: MIT
// holdfast/testing/tape_source.hpp - a decision source for fuzzing long multi-process schedules
// from an empty corpus: the input bytes answer first, exactly as byte_source reads them; once
// they run out, a PRNG seeded with a hash of the whole input answers the rest.
//
// Why: byte_source answers 0 (the benign choice: no fault, no pause) once its bytes run out, so
// a short input runs the rest of its schedule without faults. That suits the lease workload,
// whose schedules read a few hundred bytes, but a recipe or quorum schedule reads thousands, and
// libFuzzer starts from empty and short inputs: from an empty corpus it needed 600-1,600
// executions (24-70 s under ASan at load 10) to reach a lost reply that a forgetful semaphore
// walks away from. With a seeded tail every input is a whole faulty schedule whose prefix
// libFuzzer steers; the run stays a pure function of the input bytes, so a crash file and a
// corpus entry replay exactly (fuzz/fuzz_recipes.cpp, fuzz/fuzz_quorum_schedule.cpp).
//
// Thread-safety: one source per run; it reads the input without copying it (the input must
// outlive the source).
#ifndef HOLDFAST_TESTING_TAPE_SOURCE_HPP
#define HOLDFAST_TESTING_TAPE_SOURCE_HPP

#include <cstddef>
#include <cstdint>

#include "holdfast/detail/config.hpp"
#include "holdfast/testing/decision.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace testing {

/// Answers from `size` bytes at `data` as byte_source does, then from a PRNG seeded with the
/// input's 64-bit FNV-1a hash. exhausted() is always false: the tail never runs out.
class tape_then_seeded_source final : public decision_source {
 public:
  /// Makes a source over the input (`data` may be null when `size` is 0).
  tape_then_seeded_source(const std::uint8_t* data, std::size_t size) noexcept
      : tape_(data, size), tail_(hash(data, size)) {}

  std::uint32_t choose(std::uint32_t n) override {
    if (n <= 1) return 0;
    std::uint32_t bytes = 1;
    for (std::uint64_t span = 256; span < n; span <<= 8) ++bytes;
    if (tape_.remaining() >= bytes) return tape_.choose(n);
    (void)tape_.choose(n);  // a partial last read is dropped, as byte_source drops it
    return tail_.choose(n);
  }

  /// Returns the 64-bit FNV-1a hash of the input, the tail's seed.
  static std::uint64_t hash(const std::uint8_t* data, std::size_t size) noexcept {
    std::uint64_t h = 14695981039346656037ULL;
    for (std::size_t i = 0; i < size; ++i) h = (h ^ data[i]) * 1099511628211ULL;
    return h;
  }

 private:
  byte_source tape_;
  seeded_source tail_;
};

}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_TAPE_SOURCE_HPP
