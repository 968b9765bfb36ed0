// SPDX-License-Identifier: MIT
// holdfast/stores/detail/cas_record.hpp - cas_record: one key's lease record as cas_store
// (stores/cas.hpp) encodes it in the key-value store's value: "hf1" + state ('H' held, 'F' free)
// + counter, token, TTL (ms), RVN and owner length as 64-bit little-endian numbers + owner bytes.
// decode() refuses anything this adapter would not have written. Not for users.
#ifndef HOLDFAST_STORES_DETAIL_CAS_RECORD_HPP
#define HOLDFAST_STORES_DETAIL_CAS_RECORD_HPP

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "holdfast/detail/config.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/store.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

// One key's lease record as cas_store encodes it in the value.
struct cas_record {
  bool held = false;
  std::uint64_t counter = 0;  // the last token issued for this key
  fencing_token token;        // the holder's token (none when free)
  std::chrono::milliseconds ttl{0};
  std::uint64_t rvn = 0;  // record version number: random, new on every write (DynamoDB's RVN)
  std::string owner;

  static constexpr std::string_view magic{"hf1"};
  static constexpr std::size_t header = 3 + 1 + 8 * 5;

  std::string encode() const {
    std::string out;
    out.reserve(header + owner.size());
    out.append(magic.data(), magic.size());
    out.push_back(held ? 'H' : 'F');
    put(out, counter);
    put(out, token.value());
    put(out, static_cast<std::uint64_t>(ttl.count()));
    put(out, rvn);
    put(out, owner.size());
    out.append(owner);
    return out;
  }

  // Parses and validates; nullopt for anything this adapter would not have written.
  static std::optional<cas_record> decode(std::string_view v) {
    if (v.size() < header || v.substr(0, 3) != magic) return std::nullopt;
    cas_record r;
    const char state = v[3];
    if (state != 'H' && state != 'F') return std::nullopt;
    r.held = state == 'H';
    const std::uint64_t counter = get(v, 4), token = get(v, 12), ttl = get(v, 20), len = get(v, 36);
    r.rvn = get(v, 28);
    if (len != v.size() - header) return std::nullopt;
    constexpr std::uint64_t top = std::numeric_limits<std::uint64_t>::max();
    if (counter == 0 || counter == top) return std::nullopt;  // never issued
    r.counter = counter;
    r.token = fencing_token(token);
    if (r.held) {
      if (!r.token.is_issuable() || token > counter) return std::nullopt;
      if (ttl == 0 || ttl > static_cast<std::uint64_t>(max_ttl.count()) || len == 0) {
        return std::nullopt;
      }
      r.ttl = std::chrono::milliseconds(static_cast<std::int64_t>(ttl));
      r.owner.assign(v.data() + header, static_cast<std::size_t>(len));
    } else if (token != 0 || ttl != 0 || len != 0) {
      return std::nullopt;
    }
    return r;
  }

  static void put(std::string& out, std::uint64_t x) {
    for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((x >> (8 * i)) & 0xff));
  }
  static std::uint64_t get(std::string_view v, std::size_t at) {
    std::uint64_t x = 0;
    for (int i = 7; i >= 0; --i) {
      x = (x << 8) | static_cast<unsigned char>(v[at + static_cast<std::size_t>(i)]);
    }
    return x;
  }
};

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_DETAIL_CAS_RECORD_HPP
