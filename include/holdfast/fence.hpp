// SPDX-License-Identifier: MIT
// holdfast/fence.hpp - downstream admission by fencing token: the half of fencing that lives at
// the resource, where a stale holder's write is finally refused.
//
// A resource admits a write by (token, owner): the fencing token of the holder's grant and the
// holder's owner id (lease::owner(), the identity the store knows the holder by, T3). It admits
// iff the token is newer than the newest it admitted, or equal to it AND from the owner it was
// admitted for (one holder writes many times), and records both (Kleppmann 2016; Chubby's
// sequencers). Decisions, for newest admitted (n, owner N):
//
//   token      | owner     | answer               | why
//   -----------+-----------+----------------------+--------------------------------------------
//   t > n      | any       | admitted, (t, owner) | a newer holder: the store granted it later
//   t == n     | N         | admitted             | the same holder again (a retry, a 2nd write)
//   t == n     | other     | errc::token_reissued | the store lost grants (failover to a lagging
//              |           |                      | replica, a crash in its fsync window, a
//              |           |                      | restore) and issued t again: two holders
//   t < n      | any       | errc::stale_token    | a newer holder was admitted: this one lost
//   none, max  | -         | errc::invalid_argument (also an empty owner): no store issues them
//
// A refusal changes nothing. Why the owner: a token alone cannot tell "the holder of t writes
// again" from "a second holder of t", and a store that loses its newest grant re-issues exactly
// the newest token a fence admitted (asynchronous replication loses the last write). The fence
// then refuses the second holder, whose lease looks valid to it, and the first keeps writing;
// the store's tokens pass t again with its next grants, or at once when it raises its floor after
// a new life (stores/*.hpp). T1 still does the ordering; the owner only settles ties.
//
// The check, the record and the write must be ONE atomic step:
//
//   if (token < gate.newest()) reject;   // read the last fence ...
//   resource.write(data);                // ... then write: a newer holder can slip in between,
//                                        // and the stale write lands after it. The textbook bug.
//
//   type                | what it guards                      | atomic step
//   --------------------+-------------------------------------+---------------------------------
//   fence_gate          | one resource, admission only        | admit(token, owner): a seqlock:
//                       |                                     | readers only for a repeat
//   keyed_fence_gate    | many resources by name              | admit(resource, token, owner)
//                       |                                     | under a lock
//   fenced<T>           | a value in this process             | write(token, owner, fn): admit
//                       |                                     | + apply under one lock
//
// Each takes the pair from anything that holds a lease (a fence_holder: token() and owner(), e.g.
// a lease or a distributed_mutex on the thread that locked it): gate.admit(*lease),
// value.write(*lease, fn). An election passes (job.term(), job.owner()).
//
// fence_gate and keyed_fence_gate only *admit*: use them when admission itself is the effect you
// need (e.g. accepting a message), or when you hold a lock of your own around admit + write. For
// an external resource (a database row, a Redis key) the gate's state (token AND owner) must live
// in the resource itself, checked and written in one statement or script (stores/*_fence.hpp).
#ifndef HOLDFAST_FENCE_HPP
#define HOLDFAST_FENCE_HPP

#include <atomic>
#include <cstdint>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>

#include "holdfast/detail/config.hpp"
#include "holdfast/detail/detect.hpp"
#include "holdfast/detail/string_key.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/result.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

namespace detail {

template <class H>
using holder_token_call = decltype(std::declval<const H&>().token());
template <class H>
using holder_owner_call = decltype(std::declval<const H&>().owner());

template <class H>
struct is_fence_holder
    : std::conjunction<is_detected_convertible<fencing_token, holder_token_call, H>,
                       is_detected_convertible<std::string_view, holder_owner_call, H>> {};

// SplitMix64's finalizer (Steele, Lea and Flood 2014): a bijection of 64-bit words that spreads
// every input bit over the output.
constexpr std::uint64_t mix64(std::uint64_t x) noexcept {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

// The 64-bit digest fence_gate keeps of an owner id: 8 bytes per step, each step a bijection of
// the state (odd multiply, xorshift), so owners of one length that differ inside one 8-byte block
// never share a state; the length is folded in. Never 0 or 1: 0 is the empty owner's digest and
// 1 fence_gate's mark for "no owner known" (fence_gate::admit relies on neither being a digest).
// Not a cryptographic hash, and machine-dependent (byte order): never store a digest, store the
// owner.
inline std::uint64_t owner_hash(std::string_view owner) noexcept {
  constexpr std::uint64_t k = 0x9e3779b97f4a7c15ULL;  // 2^64 / golden ratio, odd
  std::uint64_t h = 0x6a09e667f3bcc909ULL ^ owner.size();
  const char* p = owner.data();
  std::size_t n = owner.size();
  auto step = [&](std::uint64_t w) {
    h = (h ^ w) * k;
    h ^= h >> 32;
  };
  for (; n >= 8; p += 8, n -= 8) {
    std::uint64_t w;
    std::memcpy(&w, p, 8);
    step(w);
  }
  if (n > 0) {
    std::uint64_t w = 0;
    std::memcpy(&w, p, n);
    step(w);
  }
  h = mix64(h);
  return h < 2 ? h + 2 : h;
}

// The digest fence_gate keeps when it knows no owner for its newest token: a fresh gate, or one
// restored without an owner or with a token no store issues. No owner_hash() is ever 1.
inline constexpr std::uint64_t unknown_owner_digest = 1;

// Asks the compiler to inline fence_gate::admit into every caller: it is a few loads and
// compares on its hot path (a repeat of the newest pair), and a call around it costs more than
// it does; left to its heuristics, GCC 12 -O2 stops inlining it once a program calls it from a
// handful of places (tests/benchmarks/bench_fence.cpp: a repeat then cost 2-3x a bare atomic
// load, inlined 1.0x).
// HOLDFAST_DETAIL_FENCE_EXPECT(c, v) tells it which way its branches usually go, so that the
// hot path runs straight through, without a taken jump.
#if defined(__GNUC__) || defined(__clang__)
#define HOLDFAST_DETAIL_FENCE_HOT_INLINE [[gnu::always_inline]] inline
#define HOLDFAST_DETAIL_FENCE_EXPECT(c, v) __builtin_expect(static_cast<long>(c), (v))
#else
#define HOLDFAST_DETAIL_FENCE_HOT_INLINE inline
#define HOLDFAST_DETAIL_FENCE_EXPECT(c, v) (c)
#endif

// What an admit() that found nothing to decide on its snapshot does while a writer is between its
// two stores (nanoseconds, unless the writer was preempted: then give it the CPU).
inline void fence_gate_wait(unsigned& spins) noexcept {
  if (++spins < 64) return;
  spins = 0;
  std::this_thread::yield();
}

}  // namespace detail

#if HOLDFAST_HAS_CONCEPTS
/// What holds a fencing token for an owner: `h.token()` converts to fencing_token and `h.owner()`
/// to std::string_view (the owner id the store granted the token to). A lease, a semaphore permit
/// and a distributed_mutex (for the calling thread) are fence holders.
template <class H>
concept fence_holder = requires(const H& h) {
  { h.token() } -> std::convertible_to<fencing_token>;
  { h.owner() } -> std::convertible_to<std::string_view>;
};
/// True iff H is a fence_holder (the C++17 spelling; under C++20 it is the concept).
template <class H>
inline constexpr bool is_fence_holder_v = fence_holder<H>;
#else
/// True iff H holds a fencing token for an owner: `h.token()` converts to fencing_token and
/// `h.owner()` to std::string_view (C++17 spelling of the concept fence_holder).
template <class H>
inline constexpr bool is_fence_holder_v = detail::is_fence_holder<H>::value;
#endif

/// Admission for one resource by (token, owner), as the table at the top of fence.hpp says; it
/// keeps the newest admitted token and a 64-bit digest of its owner.
///
/// How: a sequence lock (seqlock: Lameter 2005, Boehm 2012). Three atomics (a sequence, the
/// token, the digest); a writer makes the sequence odd with a compare-exchange from the even value
/// its decision was read under, stores the pair, and makes it even again. An admit() that changes
/// nothing (a repeat of the newest pair, a stale token, a re-issued one) only reads: four loads
/// and no store when no writer is active; a repeat is decided by two compares before anything
/// else. A newer token costs one compare-exchange and three stores. Not lock-free: while a writer
/// is between its stores (two stores; longer only if it is preempted there) other admits of this
/// gate wait for it, spinning, then yielding.
///
/// The digest: a second owner is refused iff its digest differs from the first's. Two distinct
/// owners share a digest with probability about 2^-64 when owner ids are not chosen to collide
/// (holdfast's are random: 128 bits); both that AND the store re-issuing the very token the first
/// was admitted under must happen to let a second holder in. The hash is not cryptographic: if
/// an adversary picks owner ids, use keyed_fence_gate or fenced<T>, which compare the whole id.
///
/// Thread-safety: every member may be called concurrently. TSan-clean (atomics only).
class fence_gate {
 public:
  /// An owner id's 64-bit digest, for admitting one holder many times without hashing its id each
  /// time: `fence_gate::owner_digest me(lease.owner()); ... gate.admit(lease.token(), me);`.
  /// Process-local (machine byte order): store the owner id, never its digest.
  class owner_digest {
   public:
    /// Makes the digest of `owner` (hashing it: a few ns for a 32-byte id). An empty owner gives
    /// the digest that every admit() refuses with errc::invalid_argument.
    explicit owner_digest(std::string_view owner) noexcept
        : value_(owner.empty() ? 0 : detail::owner_hash(owner)) {}
    /// Returns the digest; 0 for the empty owner, never 0 or 1 otherwise.
    [[nodiscard]] std::uint64_t value() const noexcept { return value_; }
    /// Digests are equal iff their values are.
    friend bool operator==(owner_digest a, owner_digest b) noexcept { return a.value_ == b.value_; }
    friend bool operator!=(owner_digest a, owner_digest b) noexcept { return !(a == b); }

   private:
    std::uint64_t value_;
  };

  /// Makes a gate that has admitted nothing yet.
  fence_gate() noexcept = default;
  /// Makes a gate that has already admitted `newest` for `owner` (restored from durable storage:
  /// store both when you make an admission durable). An empty `owner` means "not known" (e.g.
  /// state saved by a version that kept only the token): then only tokens newer than `newest`
  /// are admitted, an equal one is refused with errc::token_reissued. A none `newest` makes a
  /// fresh gate.
  fence_gate(fencing_token newest, std::string_view owner) noexcept
      : token_(newest.value()),
        digest_(!newest.is_issuable() || owner.empty() ? detail::unknown_owner_digest
                                                       : owner_digest(owner).value()) {}

  fence_gate(const fence_gate&) = delete;
  fence_gate& operator=(const fence_gate&) = delete;

  /// Admits (`token`, `owner`) iff token is newer than the newest admitted token, or equal to it
  /// and `owner`'s digest is the one it was admitted for; records a newer pair. Hashes `owner`
  /// (see owner_digest to do that once).
  /// \returns success; errc::stale_token if a newer token was admitted before; errc::
  ///   token_reissued if `token` was admitted for another owner (the store lost grants and
  ///   issued it again); errc::invalid_argument for the none token, fencing_token::max() (no
  ///   store issues them) or an empty owner. A refusal changes nothing.
  result<void> admit(fencing_token token, std::string_view owner) noexcept {
    return admit(token, owner_digest(owner));
  }

  /// As admit(token, owner), with the owner's digest made beforehand.
  HOLDFAST_DETAIL_FENCE_HOT_INLINE result<void> admit(fencing_token token,
                                                      owner_digest owner) noexcept {
    const std::uint64_t t = token.value();
    const std::uint64_t d = owner.value();
    unsigned spins = 0;
    for (;;) {
      // The snapshot: acquire loads, so the re-read of seq_ cannot move above them, and a pair
      // stored by a writer that began after `s` makes that re-read see its odd sequence (or
      // later). Loaded even while a writer is active (atomics: no race), then thrown away.
      const std::uint64_t s = seq_.load(std::memory_order_acquire);
      const std::uint64_t newest = token_.load(std::memory_order_acquire);
      const std::uint64_t digest = digest_.load(std::memory_order_acquire);
      const std::uint64_t again = seq_.load(std::memory_order_relaxed);
      // One test for "a writer was active, or one came": s odd, or the sequence moved.
      if (HOLDFAST_DETAIL_FENCE_EXPECT(((s & 1U) | (s ^ again)) != 0, 0)) {
        if ((s & 1U) != 0) detail::fence_gate_wait(spins);
        continue;  // torn: read again
      }
      // The repeat of the newest pair (one holder writing again), decided first and before the
      // input is checked: the stored pair always has an issuable token and a digest >= 2, or the
      // digest unknown_owner_digest (1), which no owner_digest has, so an invalid pair (none,
      // max, the empty owner's 0) never matches it and goes on to refuse().
      if (HOLDFAST_DETAIL_FENCE_EXPECT(t == newest && d == digest, 1)) return {};
      // t > newest >= 0 rules out the none token, so max and the empty owner are what is left
      // of the invalid input. refuse() is a function of its own: the cold path out of the
      // caller's loop.
      if (t <= newest || t == fencing_token::max().value() || d == 0) {
        return refuse(token, d, newest);
      }
      // Newer: write iff nothing changed since the snapshot the decision was made on.
      std::uint64_t expected = s;
      if (!seq_.compare_exchange_weak(expected, s + 1, std::memory_order_acquire,
                                      std::memory_order_relaxed)) {
        continue;
      }
      token_.store(t, std::memory_order_release);
      digest_.store(d, std::memory_order_release);
      seq_.store(s + 2, std::memory_order_release);
      return {};
    }
  }

  /// Admits holder.token() for holder.owner(), as admit(token, owner); e.g. gate.admit(*lease).
  /// Exceptions: whatever holder.token() or holder.owner() throw.
  template <class Holder>
  HOLDFAST_REQUIRES(fence_holder<Holder>)
  result<void> admit(const Holder& holder) {
    static_assert(detail::is_fence_holder<Holder>::value,
                  "fence_gate::admit(holder) needs holder.token() and holder.owner(); a token "
                  "alone is not enough: pass admit(token, owner)");
    return admit(fencing_token(holder.token()), std::string_view(holder.owner()));
  }

  /// Returns the newest admitted token (none if nothing was admitted). Only a snapshot: deciding
  /// on it and then writing is the check-then-write race; use admit() or fenced<T>.
  [[nodiscard]] fencing_token newest() const noexcept {
    return fencing_token(token_.load(std::memory_order_acquire));
  }

 private:
  // Why admit() refuses `token` for digest `d` on a snapshot whose newest token is `newest` (the
  // pair is not the newest one, or the input is invalid): in the order the table at the top of
  // fence.hpp gives.
  static result<void> refuse(fencing_token token, std::uint64_t d, std::uint64_t newest) noexcept {
    if (!token.is_issuable() || d == 0) return errc::invalid_argument;
    if (token.value() < newest) return errc::stale_token;
    return errc::token_reissued;  // the newest token, another owner's digest (or none known)
  }

  std::atomic<std::uint64_t> seq_{0};    // even: the pair is stable; odd: a writer is storing it
  std::atomic<std::uint64_t> token_{0};  // the newest admitted token (0: none)
  // Its owner's digest, or detail::unknown_owner_digest (a fresh gate, or an owner not known).
  std::atomic<std::uint64_t> digest_{detail::unknown_owner_digest};
};

/// Admission for many resources, each named by a string and fenced independently by (token,
/// owner) as the table at the top of fence.hpp says. Keeps each resource's newest token and its
/// owner id in full (no digest): memory is one entry per resource ever admitted (a fence must
/// remember forever), with its name and its newest owner id.
///
/// Thread-safety: every member may be called concurrently (one internal mutex).
class keyed_fence_gate {
 public:
  keyed_fence_gate() = default;
  keyed_fence_gate(const keyed_fence_gate&) = delete;
  keyed_fence_gate& operator=(const keyed_fence_gate&) = delete;

  /// Admits (`token`, `owner`) for `resource` iff token is newer than the newest admitted for it,
  /// or equal to it and admitted for `owner`; records a newer pair, atomically.
  /// \returns success; errc::stale_token if a newer token was admitted for `resource`;
  ///   errc::token_reissued if `token` was admitted for another owner (the store lost grants);
  ///   errc::invalid_argument for an empty resource name, an empty owner or a token that no store
  ///   issues (none, max). A refusal changes nothing. Exceptions: std::bad_alloc from recording a
  ///   new resource or a longer owner id may propagate, with nothing recorded.
  result<void> admit(std::string_view resource, fencing_token token, std::string_view owner) {
    if (resource.empty() || owner.empty() || !token.is_issuable()) return errc::invalid_argument;
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = detail::find_string_key(newest_, resource);
    if (it == newest_.end()) {
      newest_.emplace(std::piecewise_construct, std::forward_as_tuple(resource),
                      std::forward_as_tuple(admitted{token, std::string(owner)}));
      return {};
    }
    admitted& a = it->second;
    if (token < a.token) return errc::stale_token;
    if (token == a.token) {
      if (owner == a.owner) return {};
      return errc::token_reissued;
    }
    a.owner.assign(owner.data(), owner.size());  // strong guarantee: throws with nothing changed
    a.token = token;
    return {};
  }

  /// Admits holder.token() for holder.owner() at `resource`, as admit(resource, token, owner);
  /// e.g. slots.admit(permit->key(), *permit).
  template <class Holder>
  HOLDFAST_REQUIRES(fence_holder<Holder>)
  result<void> admit(std::string_view resource, const Holder& holder) {
    static_assert(detail::is_fence_holder<Holder>::value,
                  "keyed_fence_gate::admit(resource, holder) needs holder.token() and "
                  "holder.owner(); a token alone is not enough: pass admit(resource, token, "
                  "owner)");
    return admit(resource, fencing_token(holder.token()), std::string_view(holder.owner()));
  }

  /// Returns the newest token admitted for `resource` (none if none was). A snapshot only.
  [[nodiscard]] fencing_token newest(std::string_view resource) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = detail::find_string_key(newest_, resource);
    return it == newest_.end() ? fencing_token{} : it->second.token;
  }

 private:
  struct admitted {
    fencing_token token;
    std::string owner;
  };
  mutable std::mutex mutex_;
  detail::string_key_map<admitted> newest_;  // looked up without copying the name
};

/// A value of type T whose every write carries a fencing token and its owner: write(token, owner,
/// fn) admits the pair (the table at the top of fence.hpp) and applies fn to the value in ONE
/// atomic step (one lock), so no newer holder can slip in between the check and the write. Keeps
/// the newest owner id in full.
///
/// Thread-safety: every member may be called concurrently. `fn` runs under the internal lock:
/// keep it short and never call back into the same fenced<T> from it (that deadlocks).
template <class T>
class fenced {
 public:
  /// Makes a value-initialized T that has admitted no token.
  fenced() = default;
  /// Makes the guarded value from `args...`.
  template <class... Args>
  explicit fenced(std::in_place_t, Args&&... args) : value_(std::forward<Args>(args)...) {}

  fenced(const fenced&) = delete;
  fenced& operator=(const fenced&) = delete;

  /// Admits (`token`, `owner`) and, only if admitted, calls fn(T&) on the value, both under one
  /// lock. Admission is the commit point: the pair is recorded before fn runs, so if fn throws
  /// (the exception propagates, the value is as fn left it) no older token, and no other owner
  /// under this token, can be admitted on top of whatever fn changed before throwing. The same
  /// holder may retry.
  /// \returns fn's result (result<void> for a void fn); errc::stale_token if a newer token was
  ///   admitted before; errc::token_reissued if `token` was admitted for another owner (the store
  ///   lost grants and issued it again); errc::invalid_argument for the none token,
  ///   fencing_token::max() or an empty owner. fn is not called on any refusal, and nothing
  ///   changes. Exceptions: fn's; std::bad_alloc from recording a longer owner id (fn not called).
  template <class F>
  auto write(fencing_token token, std::string_view owner, F&& fn)
      -> result<std::invoke_result_t<F, T&>> {
    using R = std::invoke_result_t<F, T&>;
    if (!token.is_issuable() || owner.empty()) return errc::invalid_argument;
    std::lock_guard<std::mutex> lock(mutex_);
    if (token < newest_) return errc::stale_token;
    if (token == newest_) {
      if (owner != owner_) return errc::token_reissued;
    } else {
      owner_.assign(owner.data(), owner.size());  // strong guarantee: throws with nothing changed
      newest_ = token;
    }
    if constexpr (std::is_void_v<R>) {
      std::invoke(std::forward<F>(fn), value_);
      return {};
    } else {
      return std::invoke(std::forward<F>(fn), value_);
    }
  }

  /// As write(holder.token(), holder.owner(), fn); e.g. balance.write(*lease, fn).
  template <class Holder, class F>
  HOLDFAST_REQUIRES(fence_holder<Holder>)
  auto write(const Holder& holder, F&& fn) -> result<std::invoke_result_t<F, T&>> {
    static_assert(detail::is_fence_holder<Holder>::value,
                  "fenced<T>::write(holder, fn) needs holder.token() and holder.owner(); a token "
                  "alone is not enough: pass write(token, owner, fn)");
    return write(fencing_token(holder.token()), std::string_view(holder.owner()),
                 std::forward<F>(fn));
  }

  /// Calls fn(const T&) under the lock and returns what it returns, without a token and without
  /// touching the newest token. Enough for a read that nothing is written from. A read that a
  /// later write depends on (read-modify-write) must go through write() instead, so that it
  /// raises the gate: otherwise an older holder's write can be admitted between this read and
  /// this holder's write (token order alone allows it) and then be overwritten by it, a lost
  /// update that S1 does not forbid.
  template <class F>
  auto read(F&& fn) const -> std::invoke_result_t<F, const T&> {
    std::lock_guard<std::mutex> lock(mutex_);
    return std::invoke(std::forward<F>(fn), static_cast<const T&>(value_));
  }

  /// Returns a copy of the value.
  [[nodiscard]] T snapshot() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return value_;
  }

  /// Returns the newest admitted token (none if no write was admitted). A snapshot only.
  [[nodiscard]] fencing_token newest() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return newest_;
  }

 private:
  mutable std::mutex mutex_;
  T value_{};
  fencing_token newest_{};
  std::string owner_;  // the owner newest_ was admitted for (empty: none)
};

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_FENCE_HPP
