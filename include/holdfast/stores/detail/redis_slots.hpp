// SPDX-License-Identifier: MIT
// holdfast/stores/detail/redis_slots.hpp - Redis Cluster's key-to-slot mapping as
// redis_cluster_store uses it: CRC16 (XMODEM) of a key's hash tag mod 16384, the key names that
// keep a lease's record, its slot's token counter and the counter's life record in one slot, the
// slot map read from CLUSTER SLOTS, and the MOVED / ASK redirections parsed. Part of
// stores/redis_cluster.hpp; not for users.
//
// Key names (key_prefix "holdfast:lease:", counter_key "holdfast:token:" by default):
//   lease "k" (no '{' or '}' in it)   holdfast:lease:{k}
//   lease "x{t}y" (a hash tag t)      holdfast:lease:{t}x{t}y
//   lease "a{}b", "}{" (braces, no    holdfast:lease:{#<16 hex digits of FNV-1a 64 of the key>}a{}b
//     hash tag)
//   the counter of slot s             holdfast:token:{<tag of s>}      (+ ":life": its life record)
//   the release channel of lease k    holdfast:wait:<the name of k's record after the prefix>
// The first form keeps names readable (Redisson's `{name}`); the second honours a key's own hash
// tag as Redis does (the key's slot is the slot Redis gives the key itself, so keys sharing a tag
// share a slot: what try_acquire_all needs); the third keeps any other byte string a key. Redis
// hashes only what lies between the first '{' and the first '}' after it, so putting the tag in
// front keeps record, counter and channel in one slot (never CROSSSLOT). The forms never name the
// same key: the first has no bytes after its '}', the second a key whose tag is the name's, the
// third a key without a tag. "<tag of s>" is the shortest base-36 string whose CRC16 lands in
// slot s, found once per process.
#ifndef HOLDFAST_STORES_DETAIL_REDIS_SLOTS_HPP
#define HOLDFAST_STORES_DETAIL_REDIS_SLOTS_HPP

#include <hiredis/hiredis.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "holdfast/detail/config.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

/// The number of slots of a Redis Cluster.
inline constexpr std::size_t redis_cluster_slots = 16384;

/// CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0), Redis Cluster's key hash
/// (cluster.c keyHashSlot; crc16("123456789") == 0x31C3).
inline std::uint16_t redis_crc16(std::string_view s) noexcept {
  std::uint16_t crc = 0;
  for (const char ch : s) {
    crc = static_cast<std::uint16_t>(
        crc ^ (static_cast<std::uint16_t>(static_cast<unsigned char>(ch)) << 8));
    for (int i = 0; i < 8; ++i) {
      crc = (crc & 0x8000U) != 0 ? static_cast<std::uint16_t>((crc << 1) ^ 0x1021U)
                                 : static_cast<std::uint16_t>(crc << 1);
    }
  }
  return crc;
}

/// The slot of a full key name, as Redis computes it: the hash tag (between the first '{' and
/// the first '}' after it, if non-empty) or else the whole name.
inline std::size_t redis_key_slot(std::string_view name) noexcept {
  const std::size_t open = name.find('{');
  if (open != std::string_view::npos) {
    const std::size_t close = name.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) {
      name = name.substr(open + 1, close - open - 1);
    }
  }
  return redis_crc16(name) % redis_cluster_slots;
}

/// The hash tag of a key as Redis finds it (between the first '{' and the first '}' after it,
/// non-empty), or an empty view if it has none.
inline std::string_view redis_hash_tag(std::string_view key) noexcept {
  const std::size_t open = key.find('{');
  if (open == std::string_view::npos) return {};
  const std::size_t close = key.find('}', open + 1);
  if (close == std::string_view::npos || close == open + 1) return {};
  return key.substr(open + 1, close - open - 1);
}

/// Appends the hash tag of lease `key` (without braces) to `out`: the key itself, the key's own
/// hash tag, or "#" and the FNV-1a 64 hash of the key in 16 hex digits (file overview).
inline void redis_append_tag(std::string& out, std::string_view key) {
  if (key.find_first_of("{}") == std::string_view::npos) {
    out.append(key.data(), key.size());
    return;
  }
  const std::string_view tag = redis_hash_tag(key);
  if (!tag.empty()) {
    out.append(tag.data(), tag.size());
    return;
  }
  std::uint64_t h = 14695981039346656037ULL;
  for (const char ch : key) {
    h ^= static_cast<unsigned char>(ch);
    h *= 1099511628211ULL;
  }
  out += '#';
  static constexpr char hex[] = "0123456789abcdef";
  for (int shift = 60; shift >= 0; shift -= 4) out += hex[(h >> shift) & 0xF];
}

/// The name of lease `key`'s record (or channel): prefix + "{" + tag + "}" (+ the key if it holds
/// a brace).
inline void redis_cluster_name(std::string& out, std::string_view prefix, std::string_view key) {
  out.assign(prefix.data(), prefix.size());
  out += '{';
  redis_append_tag(out, key);
  out += '}';
  if (key.find_first_of("{}") != std::string_view::npos) out.append(key.data(), key.size());
}

/// For each slot, the number whose base-36 text is the shortest hash tag landing in that slot
/// (found once per process: about 170,000 CRC16s of short strings, under a few ms).
inline const std::array<std::uint32_t, redis_cluster_slots>& redis_slot_tag_numbers() {
  static const std::array<std::uint32_t, redis_cluster_slots> table = [] {
    std::array<std::uint32_t, redis_cluster_slots> t{};
    std::array<bool, redis_cluster_slots> seen{};
    std::size_t left = redis_cluster_slots;
    std::string s;
    for (std::uint32_t n = 0; left > 0; ++n) {
      s.clear();
      std::uint32_t v = n;
      do {
        s += "0123456789abcdefghijklmnopqrstuvwxyz"[v % 36];
        v /= 36;
      } while (v != 0);
      const std::size_t slot = redis_crc16(s) % redis_cluster_slots;
      if (!seen[slot]) {
        seen[slot] = true;
        t[slot] = n;
        --left;
      }
    }
    return t;
  }();
  return table;
}

/// The name of slot `slot`'s token counter: counter_key + "{" + tag of the slot + "}".
inline void redis_counter_name(std::string& out, std::string_view counter_key, std::size_t slot) {
  out.assign(counter_key.data(), counter_key.size());
  out += '{';
  std::uint32_t v = redis_slot_tag_numbers()[slot % redis_cluster_slots];
  do {
    out += "0123456789abcdefghijklmnopqrstuvwxyz"[v % 36];
    v /= 36;
  } while (v != 0);
  out += '}';
}

/// A redirection in an error reply: "MOVED <slot> <host>:<port>" or "ASK <slot> <host>:<port>".
struct redis_redirect {
  bool ask = false;  ///< ASK (one retry there after ASKING, no map update); else MOVED
  std::size_t slot = 0;
  std::string host;
  int port = 0;
};

/// Parses a redirection from an error text (with or without a "redis: " prefix); false if the
/// text is not one.
inline bool parse_redis_redirect(std::string_view text, redis_redirect& out) {
  if (text.compare(0, 7, "redis: ") == 0) text.remove_prefix(7);
  if (text.compare(0, 6, "MOVED ") == 0) {
    out.ask = false;
    text.remove_prefix(6);
  } else if (text.compare(0, 4, "ASK ") == 0) {
    out.ask = true;
    text.remove_prefix(4);
  } else {
    return false;
  }
  const std::size_t sp = text.find(' ');
  const std::size_t colon = text.rfind(':');
  if (sp == std::string_view::npos || colon == std::string_view::npos || colon < sp) return false;
  const std::string slot(text.substr(0, sp));
  const std::string port(text.substr(colon + 1));
  out.slot = static_cast<std::size_t>(std::strtoul(slot.c_str(), nullptr, 10));
  out.host.assign(text.substr(sp + 1, colon - sp - 1));
  out.port = std::atoi(port.c_str());
  return out.slot < redis_cluster_slots && out.port > 0 && out.port <= 65535;
}

/// One range of a CLUSTER SLOTS answer: slots [first, last] served by the primary host:port.
struct redis_slot_range {
  std::size_t first = 0;
  std::size_t last = 0;
  std::string host;
  int port = 0;
};

/// Reads one element of a CLUSTER SLOTS answer ([first, last, [host, port, id, ...], replicas
/// ...]); false if it has another shape. An empty host (a node that does not know its address)
/// is left empty: the caller uses the address it asked.
inline bool read_redis_slot_range(const redisReply* e, redis_slot_range& out) {
  if (e == nullptr || e->type != REDIS_REPLY_ARRAY || e->elements < 3) return false;
  const redisReply* a = e->element[0];
  const redisReply* b = e->element[1];
  const redisReply* m = e->element[2];
  if (a->type != REDIS_REPLY_INTEGER || b->type != REDIS_REPLY_INTEGER || a->integer < 0 ||
      b->integer < a->integer || b->integer >= static_cast<long long>(redis_cluster_slots)) {
    return false;
  }
  if (m->type != REDIS_REPLY_ARRAY || m->elements < 2 ||
      m->element[0]->type != REDIS_REPLY_STRING || m->element[1]->type != REDIS_REPLY_INTEGER) {
    return false;
  }
  out.first = static_cast<std::size_t>(a->integer);
  out.last = static_cast<std::size_t>(b->integer);
  out.host.assign(m->element[0]->str, m->element[0]->len);
  out.port = static_cast<int>(m->element[1]->integer);
  return out.port > 0 && out.port <= 65535;
}

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_DETAIL_REDIS_SLOTS_HPP
