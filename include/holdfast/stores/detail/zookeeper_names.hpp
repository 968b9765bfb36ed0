// SPDX-License-Identifier: MIT
// holdfast/stores/detail/zookeeper_names.hpp - the names zookeeper_store gives its nodes: a
// lease key's parent node (escaped, or hashed when long), the owner-derived prefix of a
// contender's ephemeral sequential node (Curator's "protected" names), and the sequence number
// ZooKeeper appends. Plain C++: no ZooKeeper client. Not for users.
//
// ZooKeeper path components may not contain '/', NUL, control characters, some Unicode ranges,
// or be "." or ".."; they must be valid UTF-8. So a key is escaped: bytes in [A-Za-z0-9_-] stay,
// every other byte becomes %XX (two upper-case hex digits), and "." and ".." cannot arise. An
// escaped key longer than 240 bytes (and only such) is named "~" + hex(SHA-256(key)) instead:
// '~' never starts an escaped name ('~' escapes to %7E), so the two forms never meet.
#ifndef HOLDFAST_STORES_DETAIL_ZOOKEEPER_NAMES_HPP
#define HOLDFAST_STORES_DETAIL_ZOOKEEPER_NAMES_HPP

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "holdfast/detail/config.hpp"
#include "holdfast/stores/detail/etcd_encoding.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

/// Returns `parent` + "/" + `name`: the path of a child node.
inline std::string zookeeper_path(const std::string& parent, const std::string& name) {
  std::string p;
  p.reserve(parent.size() + 1 + name.size());
  p += parent;
  p += '/';
  p += name;
  return p;
}

/// The longest escaped key used as a node name; longer ones are hashed.
inline constexpr std::size_t zookeeper_max_escaped = 240;

inline void zookeeper_hex_append(const unsigned char* p, std::size_t n, std::string& out) {
  static constexpr char digits[] = "0123456789abcdef";
  for (std::size_t i = 0; i < n; ++i) {
    out += digits[p[i] >> 4];
    out += digits[p[i] & 15];
  }
}

/// Appends the node name of lease key `key` (see the file overview) to `out`.
inline void zookeeper_key_name(std::string_view key, std::string& out) {
  static constexpr char digits[] = "0123456789ABCDEF";
  const std::size_t start = out.size();
  for (const char ch : key) {
    const auto c = static_cast<unsigned char>(ch);
    const bool plain = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                       c == '_' || c == '-';
    if (plain) {
      out += ch;
    } else {
      out += '%';
      out += digits[c >> 4];
      out += digits[c & 15];
    }
    if (out.size() - start > zookeeper_max_escaped) break;
  }
  if (out.size() - start <= zookeeper_max_escaped) return;
  out.resize(start);
  out += '~';
  const std::array<unsigned char, 32> h = sha256(key);
  zookeeper_hex_append(h.data(), h.size(), out);
}

/// The prefix of the nodes `owner` creates: 16 hex digits of SHA-256(owner) and a '-', to which
/// ZooKeeper appends a 10-digit sequence number. A retry after a lost reply finds its own node
/// by it (and then by the node's data, the owner's bytes, and its session).
inline std::string zookeeper_owner_prefix(std::string_view owner) {
  std::string out;
  const std::array<unsigned char, 32> h = sha256(owner);
  zookeeper_hex_append(h.data(), 8, out);
  out += '-';
  return out;
}

/// The sequence number of a contender node's name ("<16 hex>-<10 digits>"), or nullopt for a
/// name holdfast does not make.
inline std::optional<std::int64_t> zookeeper_sequence(std::string_view name) {
  if (name.size() != 27 || name[16] != '-') return std::nullopt;
  std::int64_t n = 0;
  for (std::size_t i = 17; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return std::nullopt;
    n = n * 10 + (name[i] - '0');
  }
  return n;
}

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_DETAIL_ZOOKEEPER_NAMES_HPP
