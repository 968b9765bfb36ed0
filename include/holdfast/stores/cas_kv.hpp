// SPDX-License-Identifier: MIT
// holdfast/stores/cas_kv.hpp - what cas_store (stores/cas.hpp) needs of a key-value store: the
// cas_kv requirement (get and compare_and_swap, linearizable, per key; the table at the top of
// stores/cas.hpp), cas_entry (what get returns), and memory_cas_kv, an in-process cas_kv for
// tests, examples and single-process use. stores/cas.hpp includes it.
#ifndef HOLDFAST_STORES_CAS_KV_HPP
#define HOLDFAST_STORES_CAS_KV_HPP

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>

#include "holdfast/detail/config.hpp"
#include "holdfast/detail/detect.hpp"
#include "holdfast/result.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

/// What a cas_kv's get() returns: the value and its version; version 0 means the key is absent.
struct cas_entry {
  std::string value;          ///< The stored bytes (binary-safe); empty when absent.
  std::uint64_t version = 0;  ///< Changes on every write, never repeats for a key; 0: absent.
};

namespace detail {

template <class KV>
using cas_get_call = decltype(std::declval<KV&>().get(std::declval<std::string_view>()));
template <class KV>
using cas_swap_call = decltype(std::declval<KV&>().compare_and_swap(
    std::declval<std::string_view>(), std::declval<std::uint64_t>(),
    std::declval<std::string_view>()));

template <class KV>
struct has_cas_get : is_detected_convertible<result<cas_entry>, cas_get_call, KV> {};
template <class KV>
struct has_cas_swap : is_detected_convertible<result<bool>, cas_swap_call, KV> {};

}  // namespace detail

#if HOLDFAST_HAS_CONCEPTS
/// A linearizable compare-and-swap key-value store (see the table at the top of cas.hpp), as a
/// requires-expression: it constrains cas_store.
template <class KV>
concept cas_kv = requires(KV& kv, std::string_view key, std::uint64_t expected,
                          std::string_view value) {
  { kv.get(key) } -> std::convertible_to<result<cas_entry>>;
  { kv.compare_and_swap(key, expected, value) } -> std::convertible_to<result<bool>>;
};
/// True iff KV provides get() and compare_and_swap() as in the table at the top of cas.hpp (the
/// C++17 spelling; under C++20 it is the concept cas_kv).
template <class KV>
inline constexpr bool is_cas_kv_v = cas_kv<KV>;
#else
/// True iff KV provides get() and compare_and_swap() as in the table at the top of cas.hpp
/// (C++17 spelling; under C++20 use the concept cas_kv).
template <class KV>
inline constexpr bool is_cas_kv_v =
    detail::has_cas_get<KV>::value&& detail::has_cas_swap<KV>::value;
#endif

/// An in-process cas_kv over a hash map: versions come from one counter, so they never repeat.
/// For tests, examples and single-process use. Thread-safety: every member may be called
/// concurrently. Exceptions: only std::bad_alloc.
class memory_cas_kv {
 public:
  memory_cas_kv() = default;
  memory_cas_kv(const memory_cas_kv&) = delete;
  memory_cas_kv& operator=(const memory_cas_kv&) = delete;

  /// Returns the key's value and version ({"", 0} if absent). Never fails.
  result<cas_entry> get(std::string_view key) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = map_.find(std::string(key));
    if (it == map_.end()) return cas_entry{};
    return it->second;
  }

  /// Writes `value` iff the key's version is `expected` (0: the key is absent), giving it a new
  /// version. \returns true iff written. Never fails.
  result<bool> compare_and_swap(std::string_view key, std::uint64_t expected,
                                std::string_view value) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::string k(key);
    auto it = map_.find(k);
    const std::uint64_t current = it == map_.end() ? 0 : it->second.version;
    if (current != expected) return false;
    cas_entry e{std::string(value), ++last_version_};
    if (it == map_.end()) {
      map_.emplace(std::move(k), std::move(e));
    } else {
      it->second = std::move(e);
    }
    return true;
  }

  /// Returns how many keys have a value.
  [[nodiscard]] std::size_t size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return map_.size();
  }

 private:
  mutable std::mutex mutex_;
  std::unordered_map<std::string, cas_entry> map_;
  std::uint64_t last_version_ = 0;
};

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_CAS_KV_HPP
