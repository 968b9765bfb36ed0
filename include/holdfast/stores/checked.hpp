// SPDX-License-Identifier: MIT
// holdfast/stores/checked.hpp - checked_store<Store>: a LeaseStore decorator that checks every
// answer of the store it wraps against the store contract, and reports errc::protocol_error for
// any that breaks it instead of passing it on.
//
// A lease can check one answer on its own (a token of none or max, a TTL <= 0), but not a token
// that goes *backwards*: that takes memory of what the store granted before, across lease
// handles. checked_store keeps that memory, per key, and refuses:
//
//   answer                                               | contract rule      | reported as
//   -----------------------------------------------------+--------------------+---------------
//   grant with token none or fencing_token::max()        | issuable tokens    | protocol_error
//   grant with a TTL <= 0, or longer than was asked      | T4 / store.hpp     | protocol_error
//   new grant whose token is not above every token this  | T1                 | protocol_error
//   wrapper saw granted for the key (a same-owner        |                    |
//   re-acquire may return the holder's own token)        |                    |
//   renew answering another token than the one presented | T1                 | protocol_error
//   inspect record with an unissuable token, no owner,   | T4                 | protocol_error
//   or a remaining time outside [0, max_ttl]             |                    |
//
// A refused grant is handed back to the store (a release with its token, whose outcome is
// ignored) so it does not hold the key until its TTL. Arguments are checked before the store is
// called (check_*_args), so bad input never reaches it. Errors the store reports pass through.
//
// Where it belongs: in front of a store you do not control (a third-party backend, a new
// implementation, a store behind a proxy), and in tests, where it turns a store's silent
// contract breach into a failing error code. It costs a hash-map lookup and a mutex per grant.
//
// Limits: it sees only what passes through it, so it catches a store that goes backwards
// relative to grants made through this wrapper (one process), not a breach visible only across
// processes (the conformance kit and the simulator check those). Memory grows with the number of
// distinct keys ever granted through it (one token and owner each), since T1 holds across release:
// forgetting a released key would miss the classic "counter reset on release" bug.
// Concurrency: a grant whose reply is processed after a newer grant of the same key (possible only
// if the holder stalled until its lease had ended) is refused too; that lease was dead already.
#ifndef HOLDFAST_STORES_CHECKED_HPP
#define HOLDFAST_STORES_CHECKED_HPP

#include <chrono>
#include <cstddef>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <unordered_map>
#include <utility>

#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/result.hpp"
#include "holdfast/store.hpp"
#include "holdfast/store_deadline.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

/// Wraps a LeaseStore and checks each of its answers against the store contract (see the table at
/// the top of checked.hpp); itself a LeaseStore, with inspect() if the wrapped store has it.
///
/// Thread-safety: every member may be called concurrently if the wrapped store allows it.
/// Exceptions: one thrown by the wrapped store (or std::bad_alloc) propagates unchanged; the
/// wrapper's memory is then unchanged.
template <class Store>
class checked_store {
  static_assert(assert_lease_store<Store>(),
                "holdfast::checked_store<Store>: Store must model LeaseStore");

 public:
  using inner_type = Store;

  /// Wraps `inner`, which must outlive the wrapper.
  explicit checked_store(Store& inner) : inner_(inner) {}

  checked_store(const checked_store&) = delete;
  checked_store& operator=(const checked_store&) = delete;

  /// The wrapped store's try_acquire(), checked. \returns its grant; errc::protocol_error if the
  ///   grant breaks the contract (see the table; the grant is released back);
  ///   errc::invalid_argument for bad arguments (the store is not called); any error the store
  ///   reports.
  result<grant> try_acquire(std::string_view key, std::string_view owner,
                            std::chrono::milliseconds ttl) {
    if (std::error_code ec = check_acquire_args(key, owner, ttl)) return ec;
    return checked(key, owner, ttl, inner_.try_acquire(key, owner, ttl));
  }

  /// The wrapped store's try_acquire_until() (store_deadline.hpp), checked as try_acquire();
  /// offered iff the wrapped store offers it, so a blocking call keeps its deadline through the
  /// wrapper. \returns as try_acquire().
  template <class S = Store, class = std::enable_if_t<has_try_acquire_until_v<S>>>
  result<grant> try_acquire_until(std::string_view key, std::string_view owner,
                                  std::chrono::milliseconds ttl,
                                  const std::chrono::steady_clock::time_point& deadline) {
    if (std::error_code ec = check_acquire_args(key, owner, ttl)) return ec;
    return checked(key, owner, ttl, inner_.try_acquire_until(key, owner, ttl, deadline));
  }

  /// The wrapped store's renew(), checked. \returns its grant; errc::protocol_error if it carries
  ///   another token than `token`, or a TTL <= 0 or above `ttl`; errc::invalid_argument for bad
  ///   arguments (the store is not called); any error the store reports.
  result<grant> renew(std::string_view key, std::string_view owner, fencing_token token,
                      std::chrono::milliseconds ttl) {
    if (std::error_code ec = check_renew_args(key, owner, token, ttl)) return ec;
    result<grant> g = inner_.renew(key, owner, token, ttl);
    if (!g) return g;
    if (!well_formed(*g, ttl) || g->token != token) return errc::protocol_error;
    return g;
  }

  /// The wrapped store's release(). \returns its answer; errc::invalid_argument for bad arguments
  ///   (the store is not called).
  result<void> release(std::string_view key, std::string_view owner, fencing_token token) {
    if (std::error_code ec = check_release_args(key, owner, token)) return ec;
    return inner_.release(key, owner, token);
  }

  /// The wrapped store's inspect(), checked (only if the wrapped store has inspect()).
  /// \returns its record; errc::protocol_error for a record with an unissuable token, an empty
  ///   owner or a remaining time outside [0, max_ttl]; errc::invalid_argument for an empty key.
  template <class S = Store, class = std::enable_if_t<has_inspect_v<S>>>
  result<std::optional<lease_record>> inspect(std::string_view key) const {
    if (key.empty()) return errc::invalid_argument;
    result<std::optional<lease_record>> r = inner_.inspect(key);
    if (!r || !*r) return r;
    const lease_record& rec = **r;
    if (!rec.token.is_issuable() || rec.owner.empty() ||
        rec.remaining < std::chrono::milliseconds::zero() || rec.remaining > max_ttl) {
      return errc::protocol_error;
    }
    return r;
  }

  /// Returns the newest token this wrapper saw granted for `key` (none if none).
  [[nodiscard]] fencing_token newest(std::string_view key) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = newest_.find(std::string(key));
    return it == newest_.end() ? fencing_token{} : it->second.token;
  }

  /// Returns how many keys the wrapper remembers (every key ever granted through it).
  [[nodiscard]] std::size_t tracked_keys() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return newest_.size();
  }

  /// Returns the wrapped store.
  [[nodiscard]] Store& inner() noexcept { return inner_; }

 private:
  // An acquire's answer `g`, checked: a grant that breaks the contract is released back and
  // reported as protocol_error; errors pass through.
  result<grant> checked(std::string_view key, std::string_view owner, std::chrono::milliseconds ttl,
                        result<grant> g) {
    if (!g) return g;
    if (!well_formed(*g, ttl) || !admit(key, owner, g->token)) {
      if (g->token.is_issuable()) (void)inner_.release(key, owner, g->token);
      return errc::protocol_error;
    }
    return g;
  }
  struct seen {
    fencing_token token;
    std::string owner;
  };

  static bool well_formed(const grant& g, std::chrono::milliseconds asked) noexcept {
    return g.token.is_issuable() && g.ttl > std::chrono::milliseconds::zero() && g.ttl <= asked;
  }

  // T1: a new grant's token must be above every token seen for the key; an equal one is the
  // holder's own re-acquire only if it goes to the same owner.
  bool admit(std::string_view key, std::string_view owner, fencing_token token) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto [it, inserted] = newest_.try_emplace(std::string(key), seen{token, std::string(owner)});
    if (inserted) return true;
    seen& s = it->second;
    if (token > s.token) {
      s.token = token;
      s.owner.assign(owner.data(), owner.size());
      return true;
    }
    return token == s.token && owner == s.owner;
  }

  Store& inner_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, seen> newest_;
};

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_CHECKED_HPP
