// holdfast/detail/random.hpp - small, fast, seedable randomness for owner ids and jitter.
//
// Not a public header. Owner ids must be unique per acquirer (T3), so they take 128 bits from a
// per-thread xoshiro256** generator seeded from std::random_device; after fork() a child would
// share its parent's generator state, so on POSIX the generator is reseeded when the process id
// changes. Backoff jitter can instead run from a caller-given seed, so the simulator replays it.
#ifndef HOLDFAST_DETAIL_RANDOM_HPP
#define HOLDFAST_DETAIL_RANDOM_HPP

#include <cstdint>
#include <random>
#include <string>

#if defined(__unix__) || defined(__APPLE__)
#include <unistd.h>
#define HOLDFAST_DETAIL_HAS_GETPID 1
#else
#define HOLDFAST_DETAIL_HAS_GETPID 0
#endif

namespace holdfast::detail {

/// SplitMix64 step: turns any 64-bit state into well-mixed output (Steele, Lea, Flood 2014).
inline std::uint64_t splitmix64(std::uint64_t& state) noexcept {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/// xoshiro256** (Blackman and Vigna 2018): 256-bit state, seeded through SplitMix64.
class xoshiro256 {
 public:
  explicit xoshiro256(std::uint64_t seed) noexcept { reseed(seed); }

  void reseed(std::uint64_t seed) noexcept {
    for (std::uint64_t& word : s_) word = splitmix64(seed);
  }

  std::uint64_t next() noexcept {
    const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const std::uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  /// Returns a value in [0, bound] (inclusive). Plain modulo: its bias is below bound / 2^64,
  /// far under anything jitter can notice, and it needs no 128-bit arithmetic.
  std::uint64_t uniform_inclusive(std::uint64_t bound) noexcept {
    if (bound == UINT64_MAX) return next();
    return next() % (bound + 1);
  }

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) noexcept { return (x << k) | (x >> (64 - k)); }
  std::uint64_t s_[4]{};
};

/// Returns 64 bits from the operating system's entropy source.
inline std::uint64_t entropy64() {
  std::random_device rd;
  return (static_cast<std::uint64_t>(rd()) << 32) ^ static_cast<std::uint64_t>(rd());
}

/// Returns this thread's generator, reseeded from entropy on first use and after a fork.
inline xoshiro256& thread_generator() {
  struct holder {
    xoshiro256 gen{entropy64() ^ (entropy64() << 1)};
#if HOLDFAST_DETAIL_HAS_GETPID
    ::pid_t pid = ::getpid();
#endif
  };
  thread_local holder h;
#if HOLDFAST_DETAIL_HAS_GETPID
  const ::pid_t now = ::getpid();
  if (now != h.pid) {
    h.gen.reseed(entropy64() ^ (entropy64() << 1));
    h.pid = now;
  }
#endif
  return h.gen;
}

/// Returns a fresh owner id: 128 random bits as 32 lowercase hex digits.
inline std::string random_owner_id() {
  xoshiro256& gen = thread_generator();
  static constexpr char digits[] = "0123456789abcdef";
  std::string id(32, '0');
  for (int half = 0; half < 2; ++half) {
    std::uint64_t bits = gen.next();
    for (int i = 0; i < 16; ++i) {
      id[static_cast<std::size_t>(half * 16 + i)] = digits[bits & 0xf];
      bits >>= 4;
    }
  }
  return id;
}

}  // namespace holdfast::detail

#endif  // HOLDFAST_DETAIL_RANDOM_HPP
