// SPDX-License-Identifier: MIT
// holdfast/stores/detail/etcd_multi.hpp - etcd_multi: etcd_store's atomic multi-key grant
// (store.hpp's try_acquire_all capability; multi_lease.hpp uses it) as ONE kv/txn.
//
//   step          | requests (round trips)                          | why
//   --------------+-------------------------------------------------+-----------------------------
//   leases        | lease/grant per key                         (n) | each key keeps its own lease:
//                 |                                                 | renew and release (revoke)
//                 |                                                 | touch that key alone
//   txn           | kv/txn: every create_revision(k) == 0 ?     (1) | all or none in one Raft entry
//                 |   put every k (owner, its lease) : range every k|
//     busy        | + lease/revoke of each unused lease         (n) | no lease is left behind
//     same owner  | + kv/txn: the owner's keys unchanged (same      | T1's retry rule: a held key
//     (retry)     |   create_revision) and the rest free ? put the  | keeps its token; the keys
//                 |   rest : busy                               (1) | the first txn saw free are
//                 |   + keepalive of each held key's lease,         | taken only if still free
//                 |   revoke of its unused one                 (2h) |
//
// Tokens follow the single acquire's rule: a key's token is its create_revision. Keys put by one
// transaction share its revision, so the grants of one call carry equal tokens (each its own
// key's, greater than every earlier token of every key, T1): a fence per resource, or one fence
// fed the tokens of one owner, admits them as it admits one grant. A key written by someone else
// (no lease) is protocol_error, as for try_acquire. etcd takes at most --max-txn-ops (128 by
// default) operations per branch: at most that many keys. Part of stores/etcd.hpp; not for users.
#ifndef HOLDFAST_STORES_DETAIL_ETCD_MULTI_HPP
#define HOLDFAST_STORES_DETAIL_ETCD_MULTI_HPP

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/result.hpp"
#include "holdfast/store.hpp"
#include "holdfast/stores/detail/etcd_calls.hpp"
#include "holdfast/stores/detail/etcd_encoding.hpp"
#include "holdfast/stores/detail/etcd_json.hpp"
#include "holdfast/stores/detail/etcd_link.hpp"
#include "holdfast/stores/etcd_options.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

/// etcd_store's try_acquire_all; a friend of etcd_store (it uses the store's link, scratch body,
/// orphaned leases and remembered grants, all under the link's lock).
struct etcd_multi {
  // One key of the call: its etcd key, the lease granted for it, what the first txn saw.
  struct slot {
    std::string k;
    std::int64_t lease = 0;
    std::int64_t applied_s = 0;
    std::optional<etcd_kv> held;  // the owner's live key, seen by the first txn
  };

  static std::error_code check(const std::string_view* keys, std::size_t count,
                               std::string_view owner, std::chrono::milliseconds ttl) {
    if (keys == nullptr || count == 0 || count > 128) return errc::invalid_argument;
    for (std::size_t i = 0; i < count; ++i) {
      if (std::error_code ec = check_acquire_args(keys[i], owner, ttl)) return ec;
      for (std::size_t j = 0; j < i; ++j) {
        if (keys[j] == keys[i]) return errc::invalid_argument;
      }
    }
    return {};
  }

  /// Grants every key of `keys[0..count)` to `owner` for `ttl` (ms), or none; see
  /// etcd_store::try_acquire_all. [link not locked]
  template <class Store>
  static result<void> acquire_all(Store& s, const std::string_view* keys, std::size_t count,
                                  std::string_view owner, std::chrono::milliseconds ttl,
                                  grant* grants) {
    if (std::error_code ec = check(keys, count, owner, ttl)) return ec;
    for (std::size_t i = 0; i < count; ++i) {
      if (std::error_code ec = etcd_check_args(s.link_, keys[i], owner)) return ec;
    }
    auto guard = s.link_.lock();
    const std::int64_t seconds = (ttl.count() + 999) / 1000;
    etcd_before_attempt(s.link_, s.body_, s.orphans_);  // orphans; a new life
    std::vector<slot> slots(count);
    for (std::size_t i = 0; i < count; ++i) {
      slots[i].k = s.lease_key(keys[i]);
      result<std::pair<std::int64_t, std::int64_t>> l =
          etcd_attempt_lease(s.link_, s.body_, seconds, s.orphans_);  // raised past a new life
      if (!l) return give_back_all(s, slots, i, l.error());
      std::tie(slots[i].lease, slots[i].applied_s) = *l;
    }
    if (s.link_.new_life()) etcd_before_attempt(s.link_, s.body_, s.orphans_);
    txn_body(s.body_, slots, owner, false);
    result<nlohmann::json> r = s.link_.post("/kv/txn", s.body_);
    if (!r) return give_back_all(s, slots, count, r.error());  // with the keys, if it applied
    bool succeeded = false;
    const std::optional<std::int64_t> rev = etcd_revision(*r);
    if (!json_bool(*r, "succeeded", succeeded) || !rev) return bad_shape(s, slots);
    if (succeeded) return granted(s, slots, owner, ttl, *rev, grants);
    return retry_as_owner(s, slots, *r, owner, ttl, grants);
  }

 private:
  // The txn: every key absent, or (second) the owner's held keys unchanged and the rest absent;
  // puts every key not held; on failure ranges every key.
  static void txn_body(std::string& body, const std::vector<slot>& slots, std::string_view owner,
                       bool second) {
    body.assign(R"({"compare":[)");
    for (std::size_t i = 0; i < slots.size(); ++i) {
      if (i > 0) body += ',';
      body += R"({"key":")";
      base64_append(slots[i].k, body);
      const std::int64_t rev = second && slots[i].held ? slots[i].held->create_revision : 0;
      body += R"(","target":"CREATE","result":"EQUAL","create_revision":")" + std::to_string(rev) +
              R"("})";
    }
    body += R"(],"success":[)";
    bool first = true;
    for (const slot& x : slots) {
      if (second && x.held) continue;
      if (!first) body += ',';
      first = false;
      body += R"({"request_put":{"key":")";
      base64_append(x.k, body);
      body += R"(","value":")";
      base64_append(owner, body);
      body += R"(","lease":")" + std::to_string(x.lease) + R"("}})";
    }
    body += R"(],"failure":[)";
    for (std::size_t i = 0; i < slots.size(); ++i) {
      if (i > 0) body += ',';
      body += R"({"request_range":{"key":")";
      base64_append(slots[i].k, body);
      body += R"("}})";
    }
    body += "]}";
  }

  // Every key put by the txn at `rev` (the held ones keep their own token and lease).
  template <class Store>
  static result<void> granted(Store& s, std::vector<slot>& slots, std::string_view owner,
                              std::chrono::milliseconds ttl, std::int64_t rev, grant* grants) {
    for (std::size_t i = 0; i < slots.size(); ++i) {
      const slot& x = slots[i];
      if (x.held) {
        grants[i] = grant{fencing_token(static_cast<std::uint64_t>(x.held->create_revision)),
                          etcd_ttl_capped(x.applied_s, ttl)};
        s.remember(x.k, owner, x.held->create_revision, x.held->lease);
      } else {
        grants[i] = grant{fencing_token(static_cast<std::uint64_t>(rev)),
                          etcd_ttl_capped(x.applied_s, ttl)};
        s.remember(x.k, owner, rev, x.lease);
      }
    }
    return {};
  }

  // The first txn failed: busy unless every key that exists is the owner's (a retry), in which
  // case the keys it saw free are put by a second txn that also checks the held ones.
  template <class Store>
  static result<void> retry_as_owner(Store& s, std::vector<slot>& slots, const nlohmann::json& r,
                                     std::string_view owner, std::chrono::milliseconds ttl,
                                     grant* grants) {
    const std::size_t n = slots.size();
    bool ours = true;  // every existing key was put by this very txn (a transport repeat)
    for (std::size_t i = 0; i < n; ++i) {
      const nlohmann::json* range = etcd_txn_range(r, i, n);
      std::optional<etcd_kv> kv;
      if (range == nullptr || !etcd_first_kv(*range, kv)) return bad_shape(s, slots);
      ours = ours && kv && kv->lease == slots[i].lease;
      if (!kv || kv->lease == slots[i].lease) continue;
      if (kv->lease == 0) {
        give_back_all(s, slots, n, {});
        return s.link_.fail(errc::protocol_error,
                            "etcd: try_acquire_all: a key has no lease (not written by holdfast)");
      }
      if (kv->value != owner) return give_back_all(s, slots, n, make_error_code(errc::busy));
      slots[i].held = std::move(kv);
    }
    if (ours) {
      const std::optional<std::int64_t> rev = etcd_revision(r);
      for (slot& x : slots) x.held.reset();
      return granted(s, slots, owner, ttl, rev.value_or(0), grants);
    }
    // Refresh each held key's own lease (its TTL restarts) and give back the one granted for it.
    for (slot& x : slots) {
      if (!x.held) continue;
      result<std::int64_t> left = etcd_keepalive(s.link_, s.body_, x.held->lease);
      if (!left) return give_back_all(s, slots, n, left.error());
      if (*left <= 0) return give_back_all(s, slots, n, make_error_code(errc::busy));
      x.applied_s = *left;
      s.orphans_.give_back(s.link_, s.body_, x.lease);
      x.lease = 0;
    }
    txn_body(s.body_, slots, owner, true);
    result<nlohmann::json> again = s.link_.post("/kv/txn", s.body_);
    if (!again) return give_back_all(s, slots, n, again.error());
    bool succeeded = false;
    const std::optional<std::int64_t> rev = etcd_revision(*again);
    if (!json_bool(*again, "succeeded", succeeded) || !rev) return bad_shape(s, slots);
    if (!succeeded) return give_back_all(s, slots, n, make_error_code(errc::busy));  // raced
    return granted(s, slots, owner, ttl, *rev, grants);
  }

  // Revokes the leases granted for the first `upto` slots (a lease not revoked now is revoked at
  // the next attempt); returns `ec`.
  template <class Store>
  static std::error_code give_back_all(Store& s, const std::vector<slot>& slots, std::size_t upto,
                                       std::error_code ec) {
    for (std::size_t i = 0; i < upto && i < slots.size(); ++i) {
      if (slots[i].lease != 0) s.orphans_.give_back(s.link_, s.body_, slots[i].lease);
    }
    return ec;
  }

  template <class Store>
  static std::error_code bad_shape(Store& s, const std::vector<slot>& slots) {
    give_back_all(s, slots, slots.size(), {});
    return etcd_shape(s.link_, "try_acquire_all");
  }
};

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_DETAIL_ETCD_MULTI_HPP
