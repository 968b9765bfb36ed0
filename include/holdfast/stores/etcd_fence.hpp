// holdfast/stores/etcd_fence.hpp - etcd_fence: fenced writes inside etcd, the fence key and the
// caller's data changed in one transaction. Part of stores/etcd.hpp (include that; its overview
// describes the transport, failures and etcd_options). Opt-in: needs libcurl and nlohmann/json.
#ifndef HOLDFAST_STORES_ETCD_FENCE_HPP
#define HOLDFAST_STORES_ETCD_FENCE_HPP

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/result.hpp"
#include "holdfast/stores/detail/etcd_encoding.hpp"
#include "holdfast/stores/detail/etcd_json.hpp"
#include "holdfast/stores/detail/etcd_link.hpp"
#include "holdfast/stores/detail/link_client.hpp"
#include "holdfast/stores/etcd_options.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

/// One write an etcd_fence applies when it admits a token: put `value` at `key`, or delete `key`.
struct etcd_write {
  std::string key;                   ///< The key, any bytes, used exactly as given (no prefix).
  std::optional<std::string> value;  ///< The value to put; nullopt deletes the key.
};

/// Fenced writes whose fence lives in etcd next to the data: one transaction compares the fence
/// key's value with the token and, only if the fence is not newer, puts the caller's data and the
/// fence together (fence.hpp; Kleppmann 2016), so no newer holder can slip in between. A fence
/// key holds the newest admitted token as 20 decimal digits, zero-padded (etcd compares values as
/// bytes, so equal width makes byte order numeric order); a write with an older token is refused
/// with stale_token and changes nothing. Equal tokens are admitted (one holder writes many
/// times). A fence value holdfast did not write is refused as protocol_error (nothing changes)
/// when it sorts above the token or below the least token "00000000000000000001" in byte order;
/// one that sorts between two tokens (a token with bytes appended, say) cannot be told from a
/// token by etcd's comparisons and is overwritten.
///
/// Fence and data keys are used exactly as given (no prefix). Tokens may come from any store.
/// Thread-safety: as etcd_store (one mutex around one connection).
class etcd_fence : private detail::link_client<detail::etcd_link> {
 public:
  /// Makes a fence client for the cluster in `opts` (connection fields only).
  explicit etcd_fence(etcd_options opts = {}) : link_client(std::in_place, std::move(opts)) {}

  etcd_fence(const etcd_fence&) = delete;
  etcd_fence& operator=(const etcd_fence&) = delete;

  /// Admits `token` at `fence_key` iff it is not older than the newest admitted there, and
  /// records it, atomically. \returns success; errc::stale_token if a newer token was admitted
  ///   (nothing changes); errc::invalid_argument for an empty key or a token no store issues
  ///   (none, max); store_unavailable, timeout; protocol_error if the key holds no token.
  result<void> admit(std::string_view fence_key, fencing_token token) {
    return execute(fence_key, token, {});
  }

  /// Admits `token` at `fence_key` and, only if admitted, puts `value` at `data_key`, in one
  /// transaction. \returns as admit().
  result<void> write(std::string_view fence_key, fencing_token token, std::string_view data_key,
                     std::string_view value) {
    std::vector<etcd_write> w(1);
    w[0].key.assign(data_key.data(), data_key.size());
    w[0].value = std::string(value);
    return execute(fence_key, token, w);
  }

  /// Admits `token` at `fence_key` and, only if admitted, applies `writes` (puts and deletes,
  /// none of them on `fence_key`), all in one transaction. \returns as admit(); also
  ///   errc::invalid_argument for a write with an empty key or on the fence key, and for a
  ///   transaction etcd refuses as too large.
  result<void> execute(std::string_view fence_key, fencing_token token,
                       const std::vector<etcd_write>& writes) {
    if (fence_key.empty() || !token.is_issuable()) return errc::invalid_argument;
    for (const etcd_write& w : writes) {
      if (w.key.empty() || w.key == fence_key) return errc::invalid_argument;
    }
    auto guard = link_.lock();
    const std::string t = text(token);
    // compare: the fence sorts above the token (stale, or corrupt), else: the fence sorts below
    // the least token (corrupt), else admit. A missing fence fails every value comparison
    // (etcd's rule), so it reaches the admitting branch.
    body_.assign(R"({"compare":[{"key":")");
    b64(fence_key);
    body_ += R"(","target":"VALUE","result":"GREATER","value":")";
    b64(t);
    body_ += R"("}],"success":[{"request_range":{"key":")";
    b64(fence_key);
    body_ += R"("}}],"failure":[{"request_txn":{"compare":[{"key":")";
    b64(fence_key);
    body_ += R"(","target":"VALUE","result":"LESS","value":")";
    b64(text(fencing_token(1)));
    body_ += R"("}],"success":[{"request_range":{"key":")";
    b64(fence_key);
    body_ += R"("}}],"failure":[)";
    for (const etcd_write& w : writes) {
      if (w.value) {
        body_ += R"({"request_put":{"key":")";
        b64(w.key);
        body_ += R"(","value":")";
        b64(*w.value);
        body_ += R"("}},)";
      } else {
        body_ += R"({"request_delete_range":{"key":")";
        b64(w.key);
        body_ += R"("}},)";
      }
    }
    body_ += R"({"request_put":{"key":")";
    b64(fence_key);
    body_ += R"(","value":")";
    b64(t);
    body_ += R"("}}]}}]})";
    result<nlohmann::json> r = link_.post("/kv/txn", body_);
    if (!r) return r.error();
    bool stale = false;
    if (!detail::json_bool(*r, "succeeded", stale)) return shape();
    if (stale) {
      std::string v;
      if (!first_value(*r, v)) return shape();
      if (!parse(v)) {
        return link_.fail(errc::protocol_error, "etcd: fence key does not hold a token");
      }
      return errc::stale_token;
    }
    // The nested transaction: succeeded there means the fence sorted below every token.
    const auto responses = r->find("responses");
    if (responses == r->end() || !responses->is_array() || responses->size() != 1) return shape();
    const nlohmann::json* inner = detail::json_object((*responses)[0], "response_txn");
    bool corrupt = false;
    if (inner == nullptr || !detail::json_bool(*inner, "succeeded", corrupt)) return shape();
    if (corrupt) return link_.fail(errc::protocol_error, "etcd: fence key does not hold a token");
    return {};
  }

  /// Returns the newest token admitted at `fence_key` (none if none was). A snapshot only:
  /// deciding on it and then writing is the check-then-write race; use write() or execute().
  result<fencing_token> newest(std::string_view fence_key) {
    if (fence_key.empty()) return errc::invalid_argument;
    auto guard = link_.lock();
    std::optional<std::string> v;
    if (std::error_code ec = read(fence_key, v)) return ec;
    if (!v) return fencing_token{};
    std::optional<fencing_token> t = parse(*v);
    if (!t) return link_.fail(errc::protocol_error, "etcd: fence key does not hold a token");
    return *t;
  }

  /// Reads the value of `data_key` (nullopt if absent), linearizably. A write computed from it is
  /// safe only through write()/execute() with the reader's token: if a newer holder wrote in
  /// between, its token is in the fence and the write is refused (fence.hpp).
  /// \returns errc::invalid_argument for an empty key; store_unavailable, timeout, protocol_error.
  result<std::optional<std::string>> get(std::string_view data_key) {
    if (data_key.empty()) return errc::invalid_argument;
    auto guard = link_.lock();
    std::optional<std::string> v;
    if (std::error_code ec = read(data_key, v)) return ec;
    return v;
  }

  /// As etcd_store::last_error_message() (detail::link_client).
  using link_client::last_error_message;

  /// Returns `token` as a fence key holds it: 20 decimal digits, zero-padded.
  static std::string text(fencing_token token) {
    std::string s = std::to_string(token.value());
    return std::string(20 - s.size(), '0') + s;
  }

 private:
  // kv/range of `key`: its value in `value`, nullopt if the key is absent. The caller holds the
  // link's lock.
  std::error_code read(std::string_view key, std::optional<std::string>& value) {
    value.reset();
    body_.assign(R"({"key":")");
    b64(key);
    body_ += R"("})";
    result<nlohmann::json> r = link_.post("/kv/range", body_);
    if (!r) return r.error();
    const auto kvs = r->find("kvs");
    if (kvs == r->end()) return {};
    std::string v;
    if (!kvs->is_array() || kvs->size() != 1 || !(*kvs)[0].is_object() ||
        !detail::json_bytes((*kvs)[0], "value", v)) {
      return shape();
    }
    value = std::move(v);
    return {};
  }

  static std::optional<fencing_token> parse(std::string_view v) {
    if (v.size() != 20) return std::nullopt;
    std::uint64_t x = 0;
    for (char c : v) {
      if (c < '0' || c > '9') return std::nullopt;
      const auto d = static_cast<std::uint64_t>(c - '0');
      if (x > (std::numeric_limits<std::uint64_t>::max() - d) / 10) return std::nullopt;
      x = x * 10 + d;
    }
    if (x == 0) return std::nullopt;
    return fencing_token(x);
  }

  static bool first_value(const nlohmann::json& txn, std::string& v) {
    const auto responses = txn.find("responses");
    if (responses == txn.end() || !responses->is_array() || responses->size() != 1) return false;
    const nlohmann::json* range = detail::json_object((*responses)[0], "response_range");
    if (range == nullptr) return false;
    const auto kvs = range->find("kvs");
    if (kvs == range->end() || !kvs->is_array() || kvs->size() != 1 || !(*kvs)[0].is_object()) {
      return false;
    }
    return detail::json_bytes((*kvs)[0], "value", v);
  }

  void b64(std::string_view bytes) { detail::base64_append(bytes, body_); }

  std::error_code shape() {
    return link_.fail(errc::protocol_error,
                      "etcd: fence: an answer of unexpected shape from " + link_.endpoint());
  }

  std::string body_;  // scratch, guarded by the link's mutex
};

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_ETCD_FENCE_HPP
