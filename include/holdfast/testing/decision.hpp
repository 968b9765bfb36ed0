// SPDX-License-Identifier: MIT
// holdfast/testing/decision.hpp - where the simulator's choices come from.
//
// Every choice the simulator makes (which client runs next, whether a request is delayed, how
// long a pause lasts, which operation a schedule holds next) is one call to
// decision_source::choose(n). Three engines drive the same simulator through it:
//
//   source              | decisions from                  | replay a failure with
//   --------------------+---------------------------------+-------------------------------------
//   seeded_source       | a seeded PRNG (xoshiro256**)    | the seed
//   byte_source         | bytes, e.g. libFuzzer's input   | the crash file
//   rc_source           | rapidcheck (testing/rapidcheck) | rapidcheck's RC_PARAMS reproduce string
//   recording_source    | wraps one of the above and      | to_bytes(): a byte file that replays
//                       | remembers every answer          | the run through byte_source
//
// The convention that makes shrinking and exhausted inputs harmless: 0 is always the benign or
// simplest answer (no fault, keep running the same client, the shortest schedule). A finite
// source that runs out answers 0 from then on, so any prefix of a failing input is a valid input
// and a shrinker that drives answers toward 0 drives the schedule toward "nothing goes wrong".
// Same answers, same schedule, same history, byte for byte (the simulator reads no real clock and
// no other randomness).
#ifndef HOLDFAST_TESTING_DECISION_HPP
#define HOLDFAST_TESTING_DECISION_HPP

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/detail/random.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace testing {

/// The interface every engine implements: a stream of bounded choices.
///
/// Thread-safety: none; one simulation reads one source from one thread.
class decision_source {
 public:
  virtual ~decision_source() = default;

  /// Returns a choice in [0, n). n == 0 or 1 returns 0 without consuming anything, so a choice
  /// with a single option costs no input. 0 is the benign/simplest answer by convention.
  virtual std::uint32_t choose(std::uint32_t n) = 0;

  /// Returns true once a finite source has run out of input (it then answers 0 forever).
  [[nodiscard]] virtual bool exhausted() const noexcept { return false; }
};

/// Answers from a seeded xoshiro256** generator: uniform in [0, n). Infinite; never exhausted.
/// The same seed gives the same answers on every platform.
class seeded_source final : public decision_source {
 public:
  /// Makes a source whose answers are a function of `seed` only.
  explicit seeded_source(std::uint64_t seed) noexcept : gen_(seed), seed_(seed) {}

  std::uint32_t choose(std::uint32_t n) override {
    if (n <= 1) return 0;
    // Multiply-shift (Lemire): unbiased enough for scheduling, one multiplication, no division.
    const std::uint64_t x = gen_.next() >> 32;
    return static_cast<std::uint32_t>((x * n) >> 32);
  }

  /// Returns the seed this source was made with.
  [[nodiscard]] std::uint64_t seed() const noexcept { return seed_; }

 private:
  holdfast::detail::xoshiro256 gen_;
  std::uint64_t seed_;
};

/// Answers from a byte string (libFuzzer's input, a corpus file, a recording): each choice with
/// n <= 256 reads one byte, larger n read as many bytes as n needs (little-endian), and the
/// answer is the value modulo n. Once the bytes run out every answer is 0 (benign), so truncating
/// an input never makes it invalid. The bytes are not copied: they must outlive the source.
class byte_source final : public decision_source {
 public:
  /// Makes a source reading `size` bytes at `data` (may be null when size is 0).
  byte_source(const std::uint8_t* data, std::size_t size) noexcept : data_(data), left_(size) {}

  std::uint32_t choose(std::uint32_t n) override {
    if (n <= 1) return 0;
    std::uint32_t bytes = 1;
    for (std::uint64_t span = 256; span < n; span <<= 8) ++bytes;
    if (left_ < bytes) {
      left_ = 0;
      return 0;
    }
    std::uint64_t v = 0;
    for (std::uint32_t i = 0; i < bytes; ++i) v |= static_cast<std::uint64_t>(data_[i]) << (8 * i);
    data_ += bytes;
    left_ -= bytes;
    return static_cast<std::uint32_t>(v % n);
  }

  [[nodiscard]] bool exhausted() const noexcept override { return left_ == 0; }

  /// Returns how many input bytes are still unread.
  [[nodiscard]] std::size_t remaining() const noexcept { return left_; }

 private:
  const std::uint8_t* data_;
  std::size_t left_;
};

/// Forwards to another source and remembers every (n, answer) pair, so a run found by any engine
/// can be written out as bytes that byte_source replays exactly (e.g. into a fuzz corpus).
class recording_source final : public decision_source {
 public:
  /// Records the answers of `inner`, which must outlive this source.
  explicit recording_source(decision_source& inner) noexcept : inner_(inner) {}

  std::uint32_t choose(std::uint32_t n) override {
    const std::uint32_t v = inner_.choose(n);
    if (n > 1) record_.push_back({n, v});
    return v;
  }

  [[nodiscard]] bool exhausted() const noexcept override { return inner_.exhausted(); }

  /// Returns how many non-trivial choices were made.
  [[nodiscard]] std::size_t size() const noexcept { return record_.size(); }

  /// Returns the bytes that make byte_source give the same answers, every one of them: trailing
  /// zero answers are kept, since a run may tell an answer of 0 from a source that has run out
  /// (store_fault_options::stall_when_exhausted).
  [[nodiscard]] std::vector<std::uint8_t> to_bytes() const {
    std::vector<std::uint8_t> out;
    for (const entry& e : record_) {
      std::uint32_t bytes = 1;
      for (std::uint64_t span = 256; span < e.n; span <<= 8) ++bytes;
      std::uint32_t v = e.value;
      for (std::uint32_t i = 0; i < bytes; ++i, v >>= 8)
        out.push_back(static_cast<std::uint8_t>(v));
    }
    return out;
  }

 private:
  struct entry {
    std::uint32_t n;
    std::uint32_t value;
  };
  decision_source& inner_;
  std::vector<entry> record_;
};

/// Picks an index into `weights` with probability proportional to its weight, from one choice of
/// `src`. Zero weights are never picked (unless every weight is zero: then 0). Answer 0 of the
/// source maps to the first non-zero weight, so put the benign option first.
inline std::size_t pick(decision_source& src, std::initializer_list<std::uint32_t> weights) {
  std::uint32_t total = 0;
  for (std::uint32_t w : weights) total += w;
  if (total == 0) return 0;
  std::uint32_t x = src.choose(total);
  std::size_t i = 0;
  for (std::uint32_t w : weights) {
    if (x < w) return i;
    x -= w;
    ++i;
  }
  return weights.size() - 1;  // unreachable: x < total
}

}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_DECISION_HPP
