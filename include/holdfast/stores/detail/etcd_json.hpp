// SPDX-License-Identifier: MIT
// holdfast/stores/detail/etcd_json.hpp - reading the etcd v3 JSON gateway's answers with shape
// checks: 64-bit integers sent as strings, base64 bytes, booleans and objects (a missing field is
// the zero value, as the gateway omits them; any other type is a bad shape), a range answer's
// first key-value, an answer header's revision, and a TTL in seconds as capped milliseconds.
// Not for users (stores/etcd.hpp is the public header).
#ifndef HOLDFAST_STORES_DETAIL_ETCD_JSON_HPP
#define HOLDFAST_STORES_DETAIL_ETCD_JSON_HPP

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>

#include "holdfast/detail/config.hpp"
#include "holdfast/stores/detail/etcd_encoding.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

/// Parses a JSON field holding a 64-bit integer (the gateway sends them as strings; plain JSON
/// numbers are accepted too). A missing field is 0 (the gateway omits zero values). Returns
/// false for any other type or text.
inline bool json_int64(const nlohmann::json& obj, const char* field, std::int64_t& out) {
  out = 0;
  const auto it = obj.find(field);
  if (it == obj.end()) return true;
  if (it->is_number_integer()) {
    if (it->is_number_unsigned() &&
        it->get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) {
      return false;
    }
    out = it->get<std::int64_t>();
    return true;
  }
  if (!it->is_string()) return false;
  const std::string& s = it->get_ref<const std::string&>();
  std::size_t i = 0;
  const bool negative = !s.empty() && s[0] == '-';
  if (negative) i = 1;
  if (i >= s.size() || s.size() - i > 19) return false;
  std::uint64_t v = 0;
  for (; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + static_cast<std::uint64_t>(s[i] - '0');
  }
  if (v > static_cast<std::uint64_t>(INT64_MAX)) return false;
  out = negative ? -static_cast<std::int64_t>(v) : static_cast<std::int64_t>(v);
  return true;
}

/// Parses a JSON field holding base64 bytes (missing: empty). Returns false for anything else.
inline bool json_bytes(const nlohmann::json& obj, const char* field, std::string& out) {
  out.clear();
  const auto it = obj.find(field);
  if (it == obj.end()) return true;
  if (!it->is_string()) return false;
  return base64_decode(it->get_ref<const std::string&>(), out);
}

/// Parses a JSON boolean field (missing: false).
inline bool json_bool(const nlohmann::json& obj, const char* field, bool& out) {
  out = false;
  const auto it = obj.find(field);
  if (it == obj.end()) return true;
  if (!it->is_boolean()) return false;
  out = it->get<bool>();
  return true;
}

/// Returns the object member `field` if it is an object, else nullptr.
inline const nlohmann::json* json_object(const nlohmann::json& obj, const char* field) {
  const auto it = obj.find(field);
  if (it == obj.end() || !it->is_object()) return nullptr;
  return &*it;
}

/// Returns min(`cap`, `seconds` s) in milliseconds, for a TTL etcd reported (never overflows).
inline std::chrono::milliseconds etcd_ttl_capped(std::int64_t seconds,
                                                 std::chrono::milliseconds cap) noexcept {
  if (seconds <= 0) return std::chrono::milliseconds::zero();
  if (seconds > cap.count() / 1000 + 1) return cap;
  const std::chrono::milliseconds ms(seconds * 1000);
  return ms < cap ? ms : cap;
}

/// The parts of a key-value a range answer carries.
struct etcd_kv {
  std::string value;
  std::int64_t create_revision = 0;
  std::int64_t lease = 0;
};

/// Reads the header's revision of an answer (> 0), or nullopt.
inline std::optional<std::int64_t> etcd_revision(const nlohmann::json& doc) {
  const nlohmann::json* header = json_object(doc, "header");
  std::int64_t rev = 0;
  if (header == nullptr || !json_int64(*header, "revision", rev) || rev <= 0) return std::nullopt;
  return rev;
}

/// Reads the first key of a range answer: true with `*found` set, or false for a bad shape.
inline bool etcd_first_kv(const nlohmann::json& range, std::optional<etcd_kv>& found) {
  found.reset();
  const auto kvs = range.find("kvs");
  if (kvs == range.end()) return true;  // the gateway omits an empty list
  if (!kvs->is_array() || kvs->size() > 1) return false;
  if (kvs->empty()) return true;
  const nlohmann::json& kv = (*kvs)[0];
  if (!kv.is_object()) return false;
  etcd_kv out;
  if (!json_bytes(kv, "value", out.value) ||
      !json_int64(kv, "create_revision", out.create_revision) ||
      !json_int64(kv, "lease", out.lease) || out.create_revision <= 0 || out.lease < 0) {
    return false;
  }
  found = std::move(out);
  return true;
}

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_DETAIL_ETCD_JSON_HPP
