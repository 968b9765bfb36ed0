// SPDX-License-Identifier: MIT
// holdfast/detail/string_key.hpp - string-keyed hash maps that look a key up without copying it.
//
// Not a public header. memory_store (keys of leases) and keyed_fence_gate (names of resources)
// sit on a std::unordered_map keyed by strings, and look keys up on every operation. C++17's
// unordered_map has no heterogeneous lookup, so a std::string key would force a copy of the
// caller's std::string_view per lookup. A string_key instead owns its bytes inside the map and,
// for the length of one lookup, borrows the caller's:
//
//   string_key_map<T> map;
//   auto it = find_string_key(map, key);   // no copy, no allocation
//   map.emplace(std::piecewise_construct, std::forward_as_tuple(key), std::forward_as_tuple(...));
#ifndef HOLDFAST_DETAIL_STRING_KEY_HPP
#define HOLDFAST_DETAIL_STRING_KEY_HPP

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "holdfast/detail/config.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

/// A map key that owns a copy of its bytes or, only while a lookup runs, borrows the caller's.
/// Never copied or moved: map nodes stay where they were built, and a node handle reuses one by
/// assign().
class string_key {
 public:
  struct borrow_tag {};
  /// An owning key holding a copy of `key`.
  explicit string_key(std::string_view key) : owned_(key.data(), key.size()) {}
  /// A borrowing key for one lookup: `key` must outlive it.
  string_key(borrow_tag, const std::string_view& key) noexcept : borrowed_(&key) {}
  string_key(const string_key&) = delete;
  string_key& operator=(const string_key&) = delete;

  /// Replaces the bytes of an owning key (e.g. of a node taken out of the map for reuse).
  void assign(std::string_view key) { owned_.assign(key.data(), key.size()); }
  /// Returns the key's bytes.
  std::string_view view() const noexcept {
    return borrowed_ != nullptr ? *borrowed_ : std::string_view(owned_);
  }

 private:
  std::string owned_;
  const std::string_view* borrowed_ = nullptr;
};

/// Hashes a string_key's bytes as std::hash<std::string_view> does.
/// Deliberately not noexcept: libstdc++ then caches each key's hash in its node, as it does for
/// std::hash<std::string>, so a lookup compares hashes before bytes and never rehashes the keys
/// it walks past (a noexcept hasher counts as "fast", and is called again per node visited).
struct string_key_hash {
  std::size_t operator()(const string_key& k) const {
    return std::hash<std::string_view>{}(k.view());
  }
};

/// Compares two string_keys' bytes.
struct string_key_equal {
  bool operator()(const string_key& a, const string_key& b) const noexcept {
    return a.view() == b.view();
  }
};

/// An unordered_map from string keys to T.
template <class T>
using string_key_map = std::unordered_map<string_key, T, string_key_hash, string_key_equal>;

/// Maps with at most this many entries are scanned rather than hashed (see find_string_key).
inline constexpr std::size_t string_key_scan_at_most = 8;

/// Returns the entry of `map` whose key is `key`, or map.end(). A map of a few entries (the common
/// case: a handful of keys in use) is scanned comparing bytes, which costs less than hashing the
/// key and dividing by the prime bucket count; a larger one is hashed. libstdc++ does the same
/// for std::string keys, and would not for string_key, whose hasher it cannot know is slow.
template <class Map>
auto find_string_key(Map& map, const std::string_view& key) -> decltype(map.begin()) {
  if (map.size() <= string_key_scan_at_most) {
    auto it = map.begin();
    while (it != map.end() && it->first.view() != key) ++it;
    return it;
  }
  return map.find(string_key(string_key::borrow_tag{}, key));
}

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_DETAIL_STRING_KEY_HPP
