// holdfast/fence.hpp - downstream admission by fencing token: the half of fencing that lives at
// the resource, where a stale holder's write is finally refused.
//
// A resource admits a write iff its token is not older than the newest token it has admitted,
// and records that token (Kleppmann 2016; Chubby's sequencers). Equal tokens are admitted: one
// holder writes many times. The check, the record and the write must be ONE atomic step:
//
//   if (token < gate.newest()) reject;   // read the last fence ...
//   resource.write(data);                // ... then write: a newer holder can slip in between,
//                                        // and the stale write lands after it. The textbook bug.
//
//   type                | what it guards                      | atomic step
//   --------------------+-------------------------------------+---------------------------------
//   fence_gate          | one resource, admission only        | admit(): one compare-exchange
//   keyed_fence_gate    | many resources by name              | admit(resource, token) under a lock
//   fenced<T>           | a value in this process             | write(token, fn): admit + apply
//                       |                                     | under one lock
//
// fence_gate and keyed_fence_gate only *admit*: use them when admission itself is the effect you
// need (e.g. accepting a message), or when you hold a lock of your own around admit + write. For
// an external resource (a database row, a Redis key) the gate's state must live in the resource
// itself, checked and written in one statement or script (stores/postgres.hpp, stores/redis.hpp).
#ifndef HOLDFAST_FENCE_HPP
#define HOLDFAST_FENCE_HPP

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "holdfast/detail/config.hpp"
#include "holdfast/detail/string_key.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/result.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

/// Admission for one resource: admit(token) succeeds iff token >= the newest admitted token, and
/// records it, in one lock-free atomic step.
///
/// Thread-safety: every member may be called concurrently; admit() is lock-free where
/// std::atomic<std::uint64_t> is.
class fence_gate {
 public:
  /// Makes a gate that has admitted nothing yet.
  fence_gate() noexcept = default;
  /// Makes a gate that has already admitted `newest` (e.g. restored from durable storage).
  explicit fence_gate(fencing_token newest) noexcept : newest_(newest.value()) {}

  fence_gate(const fence_gate&) = delete;
  fence_gate& operator=(const fence_gate&) = delete;

  /// Admits `token` iff it is not older than the newest admitted token, and records it.
  /// \returns success; errc::stale_token if a newer token was admitted before (nothing changes);
  ///   errc::invalid_argument for the none token or fencing_token::max(), which no store issues.
  result<void> admit(fencing_token token) noexcept {
    if (!token.is_issuable()) return errc::invalid_argument;
    const std::uint64_t t = token.value();
    std::uint64_t seen = newest_.load(std::memory_order_acquire);
    while (seen < t) {
      if (newest_.compare_exchange_weak(seen, t, std::memory_order_acq_rel,
                                        std::memory_order_acquire)) {
        return {};
      }
    }
    if (t < seen) return errc::stale_token;
    return {};  // equal: the same holder again
  }

  /// Returns the newest admitted token (none if nothing was admitted). Only a snapshot: deciding
  /// on it and then writing is the check-then-write race; use admit() or fenced<T>.
  [[nodiscard]] fencing_token newest() const noexcept {
    return fencing_token(newest_.load(std::memory_order_acquire));
  }

 private:
  std::atomic<std::uint64_t> newest_{0};
};

/// Admission for many resources, each named by a string and fenced independently: admit(resource,
/// token) succeeds iff token >= the newest token admitted *for that resource*.
/// Memory: one entry per resource ever admitted (a fence must remember its newest token forever).
///
/// Thread-safety: every member may be called concurrently (one internal mutex).
class keyed_fence_gate {
 public:
  keyed_fence_gate() = default;
  keyed_fence_gate(const keyed_fence_gate&) = delete;
  keyed_fence_gate& operator=(const keyed_fence_gate&) = delete;

  /// Admits `token` for `resource` iff it is not older than the newest admitted for it, and
  /// records it, atomically. \returns success; errc::stale_token if a newer token was admitted
  /// for `resource`; errc::invalid_argument for an empty resource name or a token that no store
  /// issues (none, max). Exceptions: std::bad_alloc from a first admission may propagate, with
  /// nothing recorded.
  result<void> admit(std::string_view resource, fencing_token token) {
    if (resource.empty() || !token.is_issuable()) return errc::invalid_argument;
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = detail::find_string_key(newest_, resource);
    if (it == newest_.end()) {
      newest_.emplace(std::piecewise_construct, std::forward_as_tuple(resource),
                      std::forward_as_tuple(token));
      return {};
    }
    if (token < it->second) return errc::stale_token;
    it->second = token;
    return {};
  }

  /// Returns the newest token admitted for `resource` (none if none was). A snapshot only.
  [[nodiscard]] fencing_token newest(std::string_view resource) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = detail::find_string_key(newest_, resource);
    return it == newest_.end() ? fencing_token{} : it->second;
  }

 private:
  mutable std::mutex mutex_;
  detail::string_key_map<fencing_token> newest_;  // looked up without copying the name
};

/// A value of type T whose every write carries a fencing token: write(token, fn) admits the token
/// and applies fn to the value in ONE atomic step (one lock), so no newer holder can slip in
/// between the check and the write.
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

  /// Admits `token` and, only if admitted, calls fn(T&) on the value, both under one lock.
  /// Admission is the commit point: the token is recorded before fn runs, so if fn throws (the
  /// exception propagates, the value is as fn left it) no older token can be admitted on top of
  /// whatever fn changed before throwing. The same token may retry.
  /// \returns fn's result (result<void> for a void fn); errc::stale_token if a newer token was
  ///   admitted before (fn is not called); errc::invalid_argument for the none token or
  ///   fencing_token::max() (fn is not called).
  template <class F>
  auto write(fencing_token token, F&& fn) -> result<std::invoke_result_t<F, T&>> {
    using R = std::invoke_result_t<F, T&>;
    if (!token.is_issuable()) return errc::invalid_argument;
    std::lock_guard<std::mutex> lock(mutex_);
    if (token < newest_) return errc::stale_token;
    if constexpr (std::is_void_v<R>) {
      newest_ = token;
      std::invoke(std::forward<F>(fn), value_);
      return {};
    } else {
      newest_ = token;
      return std::invoke(std::forward<F>(fn), value_);
    }
  }

  /// Calls fn(const T&) under the lock and returns what it returns, without a token and without
  /// touching the newest token. Enough for a read that nothing is written from. A read that a
  /// later write depends on (read-modify-write) must go through write(token, fn) instead, so that
  /// it raises the gate: otherwise an older holder's write can be admitted between this read and
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
};

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_FENCE_HPP
