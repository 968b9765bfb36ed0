// SPDX-License-Identifier: MIT
// holdfast/stores/detail/etcd_encoding.hpp - the bytes etcd_store puts on the wire and the names
// it gives keys: base64 (RFC 4648; the JSON gateway carries keys and values base64-encoded),
// SHA-256 (FIPS 180-4; the names of long keys) and etcd_key_name (a lease key's etcd key, raw or
// hashed). Plain C++: no libcurl, no JSON. Not for users (stores/etcd.hpp is the public header).
#ifndef HOLDFAST_STORES_DETAIL_ETCD_ENCODING_HPP
#define HOLDFAST_STORES_DETAIL_ETCD_ENCODING_HPP

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "holdfast/detail/config.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

/// Appends the standard base64 encoding (RFC 4648, with padding) of `in` to `out`.
inline void base64_append(std::string_view in, std::string& out) {
  static constexpr char digits[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const auto* p = reinterpret_cast<const unsigned char*>(in.data());
  std::size_t n = in.size();
  out.reserve(out.size() + (n + 2) / 3 * 4);
  for (; n >= 3; n -= 3, p += 3) {
    const std::uint32_t v = (std::uint32_t{p[0]} << 16) | (std::uint32_t{p[1]} << 8) | p[2];
    out += digits[v >> 18];
    out += digits[(v >> 12) & 63];
    out += digits[(v >> 6) & 63];
    out += digits[v & 63];
  }
  if (n > 0) {
    const std::uint32_t v = (std::uint32_t{p[0]} << 16) | (n == 2 ? std::uint32_t{p[1]} << 8 : 0);
    out += digits[v >> 18];
    out += digits[(v >> 12) & 63];
    out += n == 2 ? digits[(v >> 6) & 63] : '=';
    out += '=';
  }
}

/// Decodes standard base64 (padding optional) into `out`. Returns false for anything else.
inline bool base64_decode(std::string_view in, std::string& out) {
  out.clear();
  while (!in.empty() && in.back() == '=') in.remove_suffix(1);
  if (in.size() % 4 == 1) return false;
  out.reserve(in.size() / 4 * 3 + 2);
  std::uint32_t acc = 0;
  int bits = 0;
  for (char ch : in) {
    int v;
    if (ch >= 'A' && ch <= 'Z') {
      v = ch - 'A';
    } else if (ch >= 'a' && ch <= 'z') {
      v = ch - 'a' + 26;
    } else if (ch >= '0' && ch <= '9') {
      v = ch - '0' + 52;
    } else if (ch == '+') {
      v = 62;
    } else if (ch == '/') {
      v = 63;
    } else {
      return false;
    }
    acc = (acc << 6) | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  return true;
}

/// SHA-256 (FIPS 180-4) of `in`. Written out here rather than taken from a crypto library
/// because it only names long keys: one function is not worth a new link dependency.
inline std::array<unsigned char, 32> sha256(std::string_view in) {
  static constexpr std::uint32_t k[64] = {
      0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
      0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
      0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
      0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
      0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
      0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
      0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
      0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
      0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
      0xc67178f2};
  std::uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                        0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  auto rotr = [](std::uint32_t x, int n) { return (x >> n) | (x << (32 - n)); };
  auto block = [&](const unsigned char* b) {
    std::uint32_t w[64];
    for (std::size_t i = 0; i < 16; ++i) {
      w[i] = (std::uint32_t{b[4 * i]} << 24) | (std::uint32_t{b[4 * i + 1]} << 16) |
             (std::uint32_t{b[4 * i + 2]} << 8) | std::uint32_t{b[4 * i + 3]};
    }
    for (int i = 16; i < 64; ++i) {
      const std::uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      const std::uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    std::uint32_t a = h[0], bb = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int i = 0; i < 64; ++i) {
      const std::uint32_t t1 =
          hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + k[i] + w[i];
      const std::uint32_t t2 =
          (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & bb) ^ (a & c) ^ (bb & c));
      hh = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = bb;
      bb = a;
      a = t1 + t2;
    }
    h[0] += a;
    h[1] += bb;
    h[2] += c;
    h[3] += d;
    h[4] += e;
    h[5] += f;
    h[6] += g;
    h[7] += hh;
  };
  const auto* p = reinterpret_cast<const unsigned char*>(in.data());
  std::size_t n = in.size();
  for (; n >= 64; n -= 64, p += 64) block(p);
  unsigned char tail[128] = {};
  if (n > 0) std::memcpy(tail, p, n);  // p is null for an empty std::string_view{}
  tail[n] = 0x80;
  const std::size_t len = n < 56 ? 64 : 128;
  const std::uint64_t message_bits = static_cast<std::uint64_t>(in.size()) * 8;
  for (int i = 0; i < 8; ++i) {
    tail[len - 1 - static_cast<std::size_t>(i)] =
        static_cast<unsigned char>(message_bits >> (8 * i));
  }
  block(tail);
  if (len == 128) block(tail + 64);
  std::array<unsigned char, 32> out{};
  for (int i = 0; i < 8; ++i) {
    for (int j = 0; j < 4; ++j) {
      out[static_cast<std::size_t>(4 * i) + static_cast<std::size_t>(j)] =
          static_cast<unsigned char>(h[i] >> (24 - 8 * j));
    }
  }
  return out;
}

/// Keys longer than this, or starting with etcd_hashed_marker, are stored by their SHA-256.
inline constexpr std::size_t etcd_raw_key_max = 256;
inline constexpr std::string_view etcd_hashed_marker = "#sha256/";

/// Appends the etcd key of lease key `key` (without the prefix) to `out`: the key itself, or
/// "#sha256/" + 64 hex digits for a long key or one that starts with that marker (so that the
/// two forms can never meet).
inline void etcd_key_name(std::string_view key, std::string& out) {
  if (key.size() <= etcd_raw_key_max &&
      key.substr(0, etcd_hashed_marker.size()) != etcd_hashed_marker) {
    out.append(key.data(), key.size());
    return;
  }
  static constexpr char hex[] = "0123456789abcdef";
  out += etcd_hashed_marker;
  for (unsigned char c : sha256(key)) {
    out += hex[c >> 4];
    out += hex[c & 15];
  }
}

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_DETAIL_ETCD_ENCODING_HPP
