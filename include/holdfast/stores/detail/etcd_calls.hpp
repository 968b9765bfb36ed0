// SPDX-License-Identifier: MIT
// holdfast/stores/detail/etcd_calls.hpp - the single gateway requests etcd_store is built of
// (lease grant, keepalive, revoke, time-to-live, key range) with their answers shape-checked, and
// the reading of a transaction's responses. Each takes the link (held locked by the caller) and a
// scratch body. Not for users (stores/etcd.hpp is the public header).
#ifndef HOLDFAST_STORES_DETAIL_ETCD_CALLS_HPP
#define HOLDFAST_STORES_DETAIL_ETCD_CALLS_HPP

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <system_error>
#include <utility>

#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/result.hpp"
#include "holdfast/stores/detail/etcd_encoding.hpp"
#include "holdfast/stores/detail/etcd_json.hpp"
#include "holdfast/stores/detail/etcd_link.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

/// Sets `body` to {"<field>":"<n>"}: the gateway takes 64-bit numbers as JSON strings.
inline void etcd_number_body(std::string& body, const char* field, std::int64_t n) {
  body.assign(R"({")");
  body += field;
  body += R"(":")";
  body += std::to_string(n);
  body += R"("})";
}

/// Records an answer of unexpected shape to `op` and returns protocol_error.
inline std::error_code etcd_shape(etcd_link& link, const char* op) {
  return link.fail(
      errc::protocol_error,
      std::string("etcd: ") + op + ": an answer of unexpected shape from " + link.endpoint());
}

/// lease/grant: {id, applied TTL in seconds}.
inline result<std::pair<std::int64_t, std::int64_t>> etcd_grant_lease(etcd_link& link,
                                                                      std::string& body,
                                                                      std::int64_t seconds) {
  etcd_number_body(body, "TTL", seconds);
  result<nlohmann::json> r = link.post("/lease/grant", body);
  if (!r) return r.error();
  std::int64_t id = 0;
  std::int64_t applied = 0;
  if (!json_int64(*r, "ID", id) || !json_int64(*r, "TTL", applied) || id == 0 || applied <= 0) {
    const auto e = r->find("error");  // LeaseGrantResponse has an "error" text field
    if (e != r->end() && e->is_string() && !e->get_ref<const std::string&>().empty()) {
      return link.fail(errc::store_unavailable, "etcd: lease grant: " + e->get<std::string>());
    }
    return etcd_shape(link, "lease grant");
  }
  return std::make_pair(id, applied);
}

/// lease/keepalive: the TTL etcd restarted (<= 0: the lease is gone).
inline result<std::int64_t> etcd_keepalive(etcd_link& link, std::string& body, std::int64_t id) {
  etcd_number_body(body, "ID", id);
  result<nlohmann::json> r = link.post("/lease/keepalive", body);
  if (!r) return r.error();
  std::int64_t left = 0;
  if (!json_int64(*r, "TTL", left)) return etcd_shape(link, "keepalive");
  return left;
}

/// lease/timetolive: whole seconds left, rounded down (-1: the lease is gone).
inline result<std::int64_t> etcd_time_to_live(etcd_link& link, std::string& body, std::int64_t id,
                                              std::int64_t max_seconds) {
  etcd_number_body(body, "ID", id);
  result<nlohmann::json> r = link.post("/lease/timetolive", body);
  if (!r) return r.error();
  std::int64_t left = 0;
  if (!json_int64(*r, "TTL", left) || left < -1 || left > max_seconds) {
    return etcd_shape(link, "timetolive");
  }
  return left;
}

/// lease/revoke; *found is false if etcd no longer had the lease.
inline std::error_code etcd_revoke(etcd_link& link, std::string& body, std::int64_t id,
                                   bool* found) {
  etcd_number_body(body, "ID", id);
  etcd_failure missing;
  result<nlohmann::json> r = link.post("/lease/revoke", body, 5 /* NotFound */, &missing);
  if (!r) return r.error();
  if (found != nullptr) *found = missing.code != 5;
  return {};
}

/// kv/range of `k`; *revision (if given) is the answer's.
inline result<std::optional<etcd_kv>> etcd_range(etcd_link& link, std::string& body,
                                                 const std::string& k,
                                                 std::int64_t* revision = nullptr) {
  body.assign(R"({"key":")");
  base64_append(k, body);
  body += R"("})";
  result<nlohmann::json> r = link.post("/kv/range", body);
  if (!r) return r.error();
  std::optional<etcd_kv> kv;
  if (!etcd_first_kv(*r, kv)) return etcd_shape(link, "range");
  if (revision != nullptr) *revision = etcd_revision(*r).value_or(0);
  return kv;
}

/// The range answer at `index` of a transaction's `n` responses, or nullptr for a bad shape.
inline const nlohmann::json* etcd_txn_range(const nlohmann::json& txn, std::size_t index,
                                            std::size_t n) {
  const auto responses = txn.find("responses");
  if (responses == txn.end() || !responses->is_array() || responses->size() != n ||
      !(*responses)[index].is_object()) {
    return nullptr;
  }
  return json_object((*responses)[index], "response_range");
}

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_DETAIL_ETCD_CALLS_HPP
