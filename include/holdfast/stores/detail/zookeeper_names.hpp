// SPDX-License-Identifier: MIT
// holdfast/stores/detail/zookeeper_names.hpp - the names zookeeper_store gives its nodes: a
// lease key's parent node (escaped, or hashed when long), the prefix of a contender's ephemeral
// sequential node (owner, session and attempt: Curator's "protected" names), and the sequence
// number ZooKeeper appends. Plain C++: no ZooKeeper client. Not for users.
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

/// The part of a node name that names its owner: 16 hex digits of SHA-256(owner) and a '-'.
/// The retry rule (the same owner asking again in its session gets its older node back) finds
/// that owner's nodes by it (and then by the node's data, the owner's bytes, and its session).
inline std::string zookeeper_owner_prefix(std::string_view owner) {
  std::string out;
  const std::array<unsigned char, 32> h = sha256(owner);
  zookeeper_hex_append(h.data(), 8, out);
  out += '-';
  return out;
}

/// The prefix of one create: the owner part, the session's id (16 hex digits), a '-', the
/// store's count of its creates in that session (8 hex digits) and a '-', to which ZooKeeper
/// appends a 10-digit sequence number. No two creates ever share it (Curator's protected names
/// use a UUID per attempt), so a lost reply's node is found, and a node deleted, by name alone:
/// a name can never come back as another contender's node (not even after the key's container
/// node was removed and made again, which restarts the sequence).
inline std::string zookeeper_node_prefix(const std::string& owner_prefix, std::int64_t session,
                                         std::uint32_t attempt) {
  std::string out = owner_prefix;
  unsigned char b[12];
  const auto s = static_cast<std::uint64_t>(session);
  for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(s >> (56 - 8 * i));
  for (int i = 0; i < 4; ++i) b[8 + i] = static_cast<unsigned char>(attempt >> (24 - 8 * i));
  zookeeper_hex_append(b, 8, out);
  out += '-';
  zookeeper_hex_append(b + 8, 4, out);
  out += '-';
  return out;
}

/// The length of a contender node's name: "<16 hex>-<16 hex>-<8 hex>-<10 digits>".
inline constexpr std::size_t zookeeper_name_size = 53;

/// The sequence number of a contender node's name (see zookeeper_node_prefix), or nullopt for a
/// name holdfast does not make.
inline std::optional<std::int64_t> zookeeper_sequence(std::string_view name) {
  if (name.size() != zookeeper_name_size || name[16] != '-' || name[33] != '-' || name[42] != '-') {
    return std::nullopt;
  }
  std::int64_t n = 0;
  for (std::size_t i = 43; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return std::nullopt;
    n = n * 10 + (name[i] - '0');
  }
  return n;
}

/// True iff `name` (a contender node's) was made in session `session` (its id in the name).
inline bool zookeeper_name_of_session(std::string_view name, std::int64_t session) {
  std::string want;
  unsigned char b[8];
  const auto s = static_cast<std::uint64_t>(session);
  for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(s >> (56 - 8 * i));
  zookeeper_hex_append(b, 8, want);
  return name.size() == zookeeper_name_size && name.substr(17, 16) == want;
}

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_DETAIL_ZOOKEEPER_NAMES_HPP
