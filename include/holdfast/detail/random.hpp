// SPDX-License-Identifier: MIT
// holdfast/detail/random.hpp - small, fast, seedable randomness for owner ids and jitter.
//
// Not a public header. Owner ids must be unique per acquirer (T3), so they take 128 bits from a
// per-thread xoshiro256** generator whose whole 256-bit state comes from std::random_device.
// After fork() a child would replay its parent's stream (and hand out the parent's next owner
// ids), so on POSIX a pthread_atfork handler bumps a generation counter that makes every thread's
// generator reseed in the child. Backoff jitter can instead run from a caller-given seed, so the
// simulator replays it.
//
// What a generated owner id promises (README, acquire_options::label): 128 bits drawn for every
// id, so ids do not repeat across threads, processes and hosts (each generator's 256-bit state
// comes from the OS; two generators meeting is a 2^-128 event per pair of ids). It does not
// promise secrecy: xoshiro256** is not a cryptographic generator (its outputs reveal its state),
// so an owner id is not a capability. A store or fence admits a write by token and owner id
// together, and the store grants a key to one owner at a time whatever the owner guesses.
#ifndef HOLDFAST_DETAIL_RANDOM_HPP
#define HOLDFAST_DETAIL_RANDOM_HPP

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>

#include "holdfast/detail/config.hpp"

// hex_digits32's SSE2 path; -DHOLDFAST_DETAIL_HAS_SSE2=0 builds the portable one (test_owner_id
// checks the SSE2 path against hex_digits8, the portable one's step; no CI build compiles the
// portable one).
#ifndef HOLDFAST_DETAIL_HAS_SSE2
#if defined(__SSE2__) || defined(_M_X64) || (defined(_M_IX86_FP) && _M_IX86_FP >= 2)
#define HOLDFAST_DETAIL_HAS_SSE2 1
#else
#define HOLDFAST_DETAIL_HAS_SSE2 0
#endif
#endif
#if HOLDFAST_DETAIL_HAS_SSE2
#include <emmintrin.h>
#endif

#if defined(__unix__) || defined(__APPLE__)
#include <pthread.h>
#define HOLDFAST_DETAIL_HAS_PTHREAD_ATFORK 1
#else
#define HOLDFAST_DETAIL_HAS_PTHREAD_ATFORK 0
#endif

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

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
  /// The all-zero state, which xoshiro never leaves: only for a generator that seed_words() sets
  /// before its first draw (a constant-initialized thread_local, see thread_generator()).
  constexpr xoshiro256() noexcept = default;

  void reseed(std::uint64_t seed) noexcept {
    for (std::uint64_t& word : s_) word = splitmix64(seed);
  }

  /// Sets the whole 256-bit state from four words (e.g. of OS entropy). An all-zero state is the
  /// one state xoshiro cannot leave, so it is replaced by a SplitMix64-derived one.
  void seed_words(std::uint64_t a, std::uint64_t b, std::uint64_t c, std::uint64_t d) noexcept {
    s_[0] = a;
    s_[1] = b;
    s_[2] = c;
    s_[3] = d;
    if ((a | b | c | d) == 0) reseed(0);
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

#if HOLDFAST_DETAIL_HAS_PTHREAD_ATFORK
/// Counts fork()s in this process's ancestry, as seen by the child: a thread's generator that was
/// seeded under another count belongs to the parent and must not be reused. Reading it costs one
/// relaxed load, where getpid() costs a system call (~300 ns on a VM) per owner id.
inline std::atomic<std::uint64_t>& fork_generation() noexcept {
  static std::atomic<std::uint64_t> generation{0};
  return generation;
}

inline void bump_fork_generation() noexcept {
  fork_generation().fetch_add(1, std::memory_order_relaxed);
}

/// Registers the fork handler once per process; returns whether it is in place.
inline bool fork_handler_registered() noexcept {
  static const bool registered = ::pthread_atfork(nullptr, nullptr, &bump_fork_generation) == 0;
  return registered;
}
#endif

/// This thread's generator and the fork generation it was seeded under. Constant-initialized
/// (all zero, trivially destructible), so a thread_local one needs no first-use guard: reading it
/// is one thread-pointer-relative access, where a dynamic initializer costs a call to the TLS
/// wrapper on every owner id.
struct thread_generator_state {
  xoshiro256 gen{};
  std::uint64_t generation = 0;
  bool seeded = false;
};

/// Seeds `h` with 256 bits of entropy under fork generation `now` (the rare path, kept out of
/// line so that thread_generator()'s check stays small enough to inline).
#if defined(__GNUC__)
__attribute__((noinline, cold))
#endif
inline void
seed_thread_generator(thread_generator_state& h, std::uint64_t now) {
  h.gen.seed_words(entropy64(), entropy64(), entropy64(), entropy64());
  h.generation = now;
  h.seeded = true;
}

/// Returns this thread's generator, seeded with 256 bits of entropy on first use and again in the
/// child after a fork(), so a parent and its children never share owner ids. (A child created by a
/// raw clone() without fork handlers is not detected; such a child must not acquire leases before
/// it execs, which is what posix_spawn and vfork children do anyway.)
inline xoshiro256& thread_generator() {
  thread_local thread_generator_state h;
#if HOLDFAST_DETAIL_HAS_PTHREAD_ATFORK
  // Without the handler (pthread_atfork failed), fall back to one generation per call: reseeding
  // every time is slow but never shares a stream with a parent.
  const std::uint64_t now = fork_handler_registered()
                                ? fork_generation().load(std::memory_order_relaxed)
                                : h.generation + 1;
#else
  const std::uint64_t now = 0;
#endif
  if (!h.seeded || now != h.generation) seed_thread_generator(h, now);
  return h.gen;
}

/// Writes the 8 nibbles of `v` as 8 lowercase hex digits to `out`, the lowest nibble first, all
/// at once (SWAR): each nibble spread into a byte of its own, then '0' + n, plus 39 more for n
/// >= 10 (which lands on 'a'). The same digits as a loop over a table, in a few instructions.
inline void hex_digits8(std::uint32_t v, char* out) noexcept {
  std::uint64_t x = v;
  x = (x | (x << 16)) & 0x0000ffff0000ffffULL;
  x = (x | (x << 8)) & 0x00ff00ff00ff00ffULL;
  x = (x | (x << 4)) & 0x0f0f0f0f0f0f0f0fULL;  // byte k holds nibble k
  const std::uint64_t letters = ((x + 0x0606060606060606ULL) >> 4) & 0x0101010101010101ULL;
  x += 0x3030303030303030ULL + letters * 39;  // no byte carries into the next: each stays < 128
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  std::memcpy(out, &x, sizeof x);  // byte k to out[k]: one store
#else
  for (int k = 0; k < 8; ++k) out[k] = static_cast<char>((x >> (8 * k)) & 0xff);
#endif
}

/// Writes the 32 nibbles of `lo` and `hi` as 32 lowercase hex digits to `out`: those of `lo`
/// first, each word's lowest nibble first (the digits of hex_digits8 on its four halves, in
/// order). With SSE2, all 32 at once: the bytes' low and high nibbles split into two vectors,
/// interleaved back into digit order, then '0' + n plus 39 where n > 9.
inline void hex_digits32(std::uint64_t lo, std::uint64_t hi, char* out) noexcept {
#if HOLDFAST_DETAIL_HAS_SSE2 && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  const __m128i bytes = _mm_set_epi64x(static_cast<long long>(hi), static_cast<long long>(lo));
  const __m128i nibble = _mm_set1_epi8(0x0f);
  const __m128i low = _mm_and_si128(bytes, nibble);
  const __m128i high = _mm_and_si128(_mm_srli_epi16(bytes, 4), nibble);
  const __m128i first = _mm_unpacklo_epi8(low, high);   // lo's nibbles 0..15
  const __m128i second = _mm_unpackhi_epi8(low, high);  // hi's nibbles 0..15
  const __m128i nine = _mm_set1_epi8(9);
  const __m128i letter = _mm_set1_epi8(39);  // 'a' - '0' - 10
  const __m128i zero = _mm_set1_epi8('0');
  const __m128i d1 =
      _mm_add_epi8(_mm_add_epi8(first, zero), _mm_and_si128(_mm_cmpgt_epi8(first, nine), letter));
  const __m128i d2 =
      _mm_add_epi8(_mm_add_epi8(second, zero), _mm_and_si128(_mm_cmpgt_epi8(second, nine), letter));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), d1);       // NOLINT: unaligned store
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 16), d2);  // NOLINT: unaligned store
#else
  hex_digits8(static_cast<std::uint32_t>(lo), out);
  hex_digits8(static_cast<std::uint32_t>(lo >> 32), out + 8);
  hex_digits8(static_cast<std::uint32_t>(hi), out + 16);
  hex_digits8(static_cast<std::uint32_t>(hi >> 32), out + 24);
#endif
}

/// Writes 128 fresh random bits as 32 lowercase hex digits to `out` (each 64-bit draw lowest
/// nibble first, hex_digits32): the random part of every generated owner id.
inline void random_owner_digits(char* out) {
  xoshiro256& gen = thread_generator();
  const std::uint64_t lo = gen.next();
  const std::uint64_t hi = gen.next();
  hex_digits32(lo, hi, out);
}

/// Returns a fresh owner id: 128 random bits as 32 lowercase hex digits (random_owner_digits).
inline std::string random_owner_id() {
  char id[32];
  random_owner_digits(id);
  return std::string(id, sizeof id);
}

/// The one separator between a label and the random part of a generated owner id.
inline constexpr char owner_separator = '/';

/// Returns a fresh owner id: `<label>/<32 random hex digits>`, or the random digits alone for an
/// empty label. Every generated owner id (leases, mutexes, election, semaphore) takes this form.
inline std::string labelled_owner_id(const std::string& label) {
  if (label.empty()) return random_owner_id();
  std::string id = label;
  id += owner_separator;
  id += random_owner_id();
  return id;
}

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_DETAIL_RANDOM_HPP
