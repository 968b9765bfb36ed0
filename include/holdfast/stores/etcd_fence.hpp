// SPDX-License-Identifier: MIT
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
/// key's value with the token and owner and, only if admitted, puts the caller's data and the
/// fence together (fence.hpp; Kleppmann 2016), so no newer holder can slip in between. A fence
/// key holds "<token>:<owner>", the token as 20 decimal digits, zero-padded (etcd compares values
/// as bytes, so equal width makes byte order numeric order), and the owner it was admitted for
/// (the holder's lease::owner()). A write is admitted iff its token is newer, or equal and from
/// the same owner (one holder writes many times). An older token is refused with stale_token; an
/// equal token from another owner with token_reissued: the store that issued it lost grants (a
/// restore, a failover to a lagging copy) and issued it again, and admitting it would let a
/// second holder through (DESIGN.md, section 5). Neither changes anything. A bare 20-digit value
/// (the format before owners were kept) admits no equal token.
///
/// A fence value holdfast did not write is refused as protocol_error (nothing changes) when it
/// sorts above every value of the token or below the least token "00000000000000000001" in byte
/// order, or when it sorts among the values of the token without being one; one that sorts between
/// two tokens (a token with bytes appended, say) cannot be told from a token by etcd's comparisons
/// and is overwritten.
///
/// Fence and data keys are used exactly as given (no prefix). Tokens may come from any store.
/// Thread-safety: as etcd_store (one mutex around one connection).
class etcd_fence : private detail::link_client<detail::etcd_link> {
 public:
  /// Makes a fence client for the cluster in `opts` (connection fields only).
  explicit etcd_fence(etcd_options opts = {}) : link_client(std::in_place, std::move(opts)) {}

  etcd_fence(const etcd_fence&) = delete;
  etcd_fence& operator=(const etcd_fence&) = delete;

  /// Admits (`token`, `owner`) at `fence_key` iff `token` is newer than the newest admitted
  /// there, or equal to it and admitted for `owner`, and records both, atomically.
  /// \returns success; errc::stale_token if a newer token was admitted; errc::token_reissued if
  ///   this token was admitted for another owner (nothing changes either way);
  ///   errc::invalid_argument for an empty key or owner or a token no store issues (none, max);
  ///   store_unavailable, timeout; protocol_error if the key holds no token.
  result<void> admit(std::string_view fence_key, fencing_token token, std::string_view owner) {
    return execute(fence_key, token, owner, {});
  }

  /// Admits (`token`, `owner`) at `fence_key` and, only if admitted, puts `value` at `data_key`,
  /// in one transaction. \returns as admit().
  result<void> write(std::string_view fence_key, fencing_token token, std::string_view owner,
                     std::string_view data_key, std::string_view value) {
    std::vector<etcd_write> w(1);
    w[0].key.assign(data_key.data(), data_key.size());
    w[0].value = std::string(value);
    return execute(fence_key, token, owner, w);
  }

  /// Admits (`token`, `owner`) at `fence_key` and, only if admitted, applies `writes` (puts and
  /// deletes, none of them on `fence_key`), all in one transaction. \returns as admit(); also
  ///   errc::invalid_argument for a write with an empty key or on the fence key, and for a
  ///   transaction etcd refuses as too large.
  result<void> execute(std::string_view fence_key, fencing_token token, std::string_view owner,
                       const std::vector<etcd_write>& writes) {
    if (fence_key.empty() || owner.empty() || !token.is_issuable()) return errc::invalid_argument;
    if (std::error_code ec = detail::etcd_check_args(link_, fence_key, owner)) return ec;
    for (const etcd_write& w : writes) {
      if (w.key.empty() || w.key == fence_key) return errc::invalid_argument;
    }
    auto guard = link_.lock();
    build_txn(fence_key, text(token), owner, writes);
    result<nlohmann::json> r = link_.post("/kv/txn", body_);
    if (!r) return r.error();
    return outcome(*r);
  }

  /// Returns the newest token admitted at `fence_key` (none if none was). A snapshot only:
  /// deciding on it and then writing is the check-then-write race; use write() or execute().
  result<fencing_token> newest(std::string_view fence_key) {
    if (std::error_code ec = detail::etcd_check_args(link_, fence_key, {})) return ec;
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
    if (std::error_code ec = detail::etcd_check_args(link_, data_key, {})) return ec;
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
  // The transaction of execute(), in body_. Let T be the token's 20 digits; every value of the
  // token sorts in [T, T + ";"] (':' is 0x3A, ';' 0x3B), every newer token's above, every older
  // one's below. Nested, each level one comparison:
  //   absent (create_revision 0)        -> admit: the writes and the fence
  //   else value > T;                   -> range (stale, or corrupt above)
  //   else value < T:  value < "0..01"  -> range (corrupt below)
  //                    else             -> admit: the writes and the fence
  //   else value == T:<owner>           -> the writes (the same holder; the fence stays)
  //   else                              -> range (re-issued, or corrupt among the token's values)
  void build_txn(std::string_view fence_key, const std::string& t, std::string_view owner,
                 const std::vector<etcd_write>& writes) {
    std::string mine = t + ":";
    mine.append(owner.data(), owner.size());
    body_.assign(R"({"compare":[{"key":")");
    b64(fence_key);
    body_ += R"(","target":"CREATE","result":"EQUAL","create_revision":"0"}],"success":[)";
    puts(writes, fence_key, &mine);
    body_ += R"(],"failure":[{"request_txn":{)";
    compare(fence_key, "GREATER", t + ";");
    body_ += R"(,"success":[)";
    range(fence_key);
    body_ += R"(],"failure":[{"request_txn":{)";
    compare(fence_key, "LESS", t);
    body_ += R"(,"success":[{"request_txn":{)";
    compare(fence_key, "LESS", text(fencing_token(1)));
    body_ += R"(,"success":[)";
    range(fence_key);
    body_ += R"(],"failure":[)";
    puts(writes, fence_key, &mine);
    body_ += R"(]}}],"failure":[{"request_txn":{)";
    compare(fence_key, "EQUAL", mine);
    body_ += R"(,"success":[)";
    puts(writes, fence_key, nullptr);
    body_ += R"(],"failure":[)";
    range(fence_key);
    body_ += R"(]}}]}}]}}]})";
  }

  void compare(std::string_view key, const char* result, const std::string& value) {
    body_ += R"("compare":[{"key":")";
    b64(key);
    body_ += R"(","target":"VALUE","result":")";
    body_ += result;
    body_ += R"(","value":")";
    b64(value);
    body_ += R"("}])";
  }

  void range(std::string_view key) {
    body_ += R"({"request_range":{"key":")";
    b64(key);
    body_ += R"("}})";
  }

  // The caller's writes and, if `fence` is given, the put of the fence, comma-separated.
  void puts(const std::vector<etcd_write>& writes, std::string_view fence_key,
            const std::string* fence) {
    bool first = true;
    auto put = [&](std::string_view key, const std::string* value) {
      if (!first) body_ += ',';
      first = false;
      body_ += value ? R"({"request_put":{"key":")" : R"({"request_delete_range":{"key":")";
      b64(key);
      if (value) {
        body_ += R"(","value":")";
        b64(*value);
      }
      body_ += R"("}})";
    };
    for (const etcd_write& w : writes) put(w.key, w.value ? &*w.value : nullptr);
    if (fence) put(fence_key, fence);
  }

  // Reads the answer to build_txn's transaction: which branch ran says the outcome.
  result<void> outcome(const nlohmann::json& r) {
    bool absent = false;
    if (!detail::json_bool(r, "succeeded", absent)) return shape();
    if (absent) return {};
    const nlohmann::json* level = &r;
    bool taken[3] = {false, false, false};  // newer-or-corrupt, older, corrupt-low / same owner
    for (int depth = 0; depth < 2; ++depth) {
      level = inner_txn(*level);
      if (level == nullptr || !detail::json_bool(*level, "succeeded", taken[depth])) {
        return shape();
      }
      if (depth == 0 && taken[0]) return refused(*level, errc::stale_token);
    }
    // taken[1]: older than the token (then a corrupt-low check); else the token's own values.
    level = inner_txn(*level);
    if (level == nullptr || !detail::json_bool(*level, "succeeded", taken[2])) return shape();
    if (taken[1]) {
      if (taken[2])
        return link_.fail(errc::protocol_error, "etcd: fence key does not hold a token");
      return {};
    }
    if (taken[2]) return {};
    return refused(*level, errc::token_reissued);
  }

  // The one nested transaction's answer among `txn`'s responses, or nullptr.
  static const nlohmann::json* inner_txn(const nlohmann::json& txn) {
    const auto responses = txn.find("responses");
    if (responses == txn.end() || !responses->is_array() || responses->size() != 1) return nullptr;
    return detail::json_object((*responses)[0], "response_txn");
  }

  // A refusal whose branch read the fence: `code` if it holds a token, else protocol_error.
  std::error_code refused(const nlohmann::json& txn, errc code) {
    std::string v;
    if (!first_value(txn, v)) return shape();
    if (!parse(v)) return link_.fail(errc::protocol_error, "etcd: fence key does not hold a token");
    return code;
  }

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

  // The token of a fence value, "<20 digits>:<owner>" or a bare "<20 digits>"; nullopt if it
  // holds none.
  static std::optional<fencing_token> parse(std::string_view v) {
    if (v.size() > 20 && (v[20] != ':' || v.size() == 21)) return std::nullopt;
    v = v.substr(0, 20);
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
