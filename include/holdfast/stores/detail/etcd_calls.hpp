// SPDX-License-Identifier: MIT
// holdfast/stores/detail/etcd_calls.hpp - the single gateway requests etcd_store is built of
// (lease grant, keepalive, revoke, time-to-live, key range) with their answers shape-checked, and
// the reading of a transaction's responses, and what keeps a lost reply from leaving a lease
// behind (client-chosen lease IDs, etcd_orphans, the leased floor key of etcd_raise_floor). Each
// takes the link (held locked by the caller) and a scratch body. Not for users (stores/etcd.hpp
// is the public header).
#ifndef HOLDFAST_STORES_DETAIL_ETCD_CALLS_HPP
#define HOLDFAST_STORES_DETAIL_ETCD_CALLS_HPP

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <utility>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/detail/random.hpp"
#include "holdfast/error.hpp"
#include "holdfast/result.hpp"
#include "holdfast/stores/detail/call_bound.hpp"
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

/// A lease ID of the client's choosing, in [1, 2^63-1] (etcd takes LeaseGrantRequest.ID; 0 would
/// let it choose): a grant whose reply is lost can still be revoked by its ID (issue 22). 63
/// random bits from detail::thread_generator(), which reseeds in a fork()ed child: a generator of
/// its own that a child inherited would hand every child of one parent the same IDs, and a grant
/// refused as "lease already exists" is revoked as possibly ours (its reply may have been lost),
/// which would then end another process's live lease. With distinct streams a clash with a live
/// lease has odds of n / 2^63 for n live leases.
inline std::int64_t etcd_new_lease_id() {
  std::int64_t id = 0;
  while (id == 0) id = static_cast<std::int64_t>(thread_generator().next() >> 1);
  return id;
}

/// lease/grant of lease `id` (etcd_new_lease_id): {id, applied TTL in seconds}. On an error the
/// lease may exist all the same (a lost reply): the caller revokes `id`.
inline result<std::pair<std::int64_t, std::int64_t>> etcd_grant_lease(etcd_link& link,
                                                                      std::string& body,
                                                                      std::int64_t seconds,
                                                                      std::int64_t want) {
  etcd_number_body(body, "TTL", seconds);
  body.pop_back();
  body += R"(,"ID":")" + std::to_string(want) + R"("})";
  result<nlohmann::json> r = link.post("/lease/grant", body);
  if (!r) return r.error();
  std::int64_t id = 0;
  std::int64_t applied = 0;
  if (!json_int64(*r, "ID", id) || !json_int64(*r, "TTL", applied) || id != want || applied <= 0) {
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

/// Leases this store granted and must give back but could not (the revoke failed too: the member
/// is down, the reply lost): revoked at the store's next attempt, so a lease (and the key or
/// queue entry bound to it) outlives its failed caller only until the store is used again, or
/// its TTL. At most 256 (beyond that the oldest are left to their TTL). Guarded by the link's
/// mutex.
class etcd_orphans {
 public:
  /// Revokes lease `id`; if that fails, keeps it for settle(). Keeps the link's last error. The
  /// revoke gets store_call_floor of its own, not a command_timeout, past a call's deadline
  /// (call_bound) and after a request that timed out (a member that answers nothing), so a
  /// give-back adds at most store_call_floor to its caller's wait.
  void give_back(etcd_link& link, std::string& body, std::int64_t id) {
    const call_floor own_time(call_until() != std::chrono::steady_clock::time_point::max() ||
                              link.last_request_timed_out());
    const std::string why = link.last_error();
    if (etcd_revoke(link, body, id, nullptr)) keep(id);
    link.fail(errc::store_unavailable, why);  // the caller reports its own failure
  }
  /// One revoke of each kept lease; those that fail again stay. After a request that timed out
  /// each revoke is bounded by store_call_floor (and the caller's deadline), and the first that
  /// times out again ends the round, so it adds at most store_call_floor to its caller's wait.
  void settle(etcd_link& link, std::string& body) {
    if (ids_.empty()) return;
    const std::string why = link.last_error();
    std::vector<std::int64_t> left;
    for (std::int64_t id : ids_) {
      if (!left.empty() && link.last_request_timed_out()) {
        left.push_back(id);  // the member still answers nothing: the next attempt tries again
        continue;
      }
      const auto floor = std::chrono::steady_clock::now() + store_call_floor;
      const call_bound quick(link.last_request_timed_out() ? std::min(call_until(), floor)
                                                           : call_until());
      if (etcd_revoke(link, body, id, nullptr)) left.push_back(id);
    }
    ids_.swap(left);
    link.fail(errc::store_unavailable, why);
  }
  [[nodiscard]] std::size_t size() const noexcept { return ids_.size(); }

 private:
  void keep(std::int64_t id) {
    if (ids_.size() >= 256) ids_.erase(ids_.begin());
    ids_.push_back(id);
  }
  std::vector<std::int64_t> ids_;
};

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

/// Reads the first key of the range answer at index 0 of a transaction's `n` responses (its
/// failure branch): false for a bad shape.
inline bool etcd_txn_first_kv(const nlohmann::json& txn, std::optional<etcd_kv>& kv,
                              std::size_t n = 1) {
  const nlohmann::json* range = etcd_txn_range(txn, 0, n);
  return range != nullptr && etcd_first_kv(*range, kv);
}

/// The lease of each grant this store made (key -> owner, token, lease), for renew and release;
/// at most `cap` keys (the oldest forgotten first). Guarded by the link's mutex.
class etcd_remembered {
 public:
  /// The lease of grant (k, owner, token), or nullptr if not remembered.
  const std::int64_t* find(const std::string& k, std::string_view owner, std::int64_t token) const {
    const auto it = map_.find(k);
    if (it == map_.end() || it->second.token != token || it->second.owner != owner) return nullptr;
    return &it->second.lease;
  }
  void put(std::size_t cap, const std::string& k, std::string_view owner, std::int64_t token,
           std::int64_t lease) {
    if (cap == 0) return;
    if (map_.size() >= cap && map_.find(k) == map_.end()) {
      // Forget the oldest (a linear scan, only when full: renew and release stay O(1)).
      auto oldest = map_.begin();
      for (auto it = map_.begin(); it != map_.end(); ++it) {
        if (it->second.age < oldest->second.age) oldest = it;
      }
      map_.erase(oldest);
    }
    entry& r = map_[k];
    r.owner.assign(owner.data(), owner.size());
    r.token = token;
    r.lease = lease;
    r.age = ++clock_;
  }
  void erase(const std::string& k) { map_.erase(k); }

 private:
  struct entry {
    std::string owner;
    std::int64_t token = 0;
    std::int64_t lease = 0;
    std::uint64_t age = 0;
  };
  std::unordered_map<std::string, entry> map_;
  std::uint64_t clock_ = 0;
};

/// etcd's current revision (a count-only range under `prefix`).
inline result<std::int64_t> etcd_current_revision(etcd_link& link, std::string& body,
                                                  const std::string& prefix) {
  body.assign(R"({"key":")");
  base64_append(prefix, body);
  body += R"(","count_only":true})";
  result<nlohmann::json> r = link.post("/kv/range", body);
  if (!r) return r.error();
  const std::optional<std::int64_t> rev = etcd_revision(*r);
  if (!rev) return etcd_shape(link, "revision");
  return *rev;
}

/// etcd_store::raise_token_floor's writes, from revision `now` to at least `floor`: puts of key
/// `k` (no lease key's name), bound to a lease of its own (`lease_s` seconds, kept alive every
/// third of that: one write per revision skipped can take minutes), until the revision reaches
/// `floor`, then the lease is revoked, which deletes the key (one more revision). A step that
/// fails leaves nothing for longer than that lease: it is revoked at once, or by `orphans`.
inline std::error_code etcd_raise_floor(etcd_link& link, std::string& body, const std::string& k,
                                        std::int64_t now, std::int64_t floor, etcd_orphans& orphans,
                                        std::int64_t lease_s = 60) {
  const std::int64_t id = etcd_new_lease_id();
  result<std::pair<std::int64_t, std::int64_t>> lease = etcd_grant_lease(link, body, lease_s, id);
  if (!lease) {
    orphans.give_back(link, body, id);  // the grant may have applied
    return lease.error();
  }
  body.assign(R"({"key":")");
  base64_append(k, body);
  body += R"(","value":"","lease":")" + std::to_string(id) + R"("})";
  const std::string put = body;
  // At least one put: the revoke adds a revision only if it deletes the key.
  auto renewed = std::chrono::steady_clock::now();
  for (std::int64_t rev = now; rev == now || rev + 1 < floor;) {  // the revoke makes one more
    if (std::chrono::steady_clock::now() - renewed >= std::chrono::milliseconds(lease_s * 333)) {
      result<std::int64_t> left = etcd_keepalive(link, body, id);
      if (!left || *left <= 0) {
        orphans.give_back(link, body, id);
        if (!left) return left.error();
        return link.fail(errc::store_unavailable,
                         "etcd: raise_token_floor: the floor key's lease ended before the floor");
      }
      renewed = std::chrono::steady_clock::now();
    }
    result<nlohmann::json> r = link.post("/kv/put", put);
    if (!r) {
      orphans.give_back(link, body, id);
      return r.error();
    }
    const std::optional<std::int64_t> got = etcd_revision(*r);
    if (!got) {
      orphans.give_back(link, body, id);
      return etcd_shape(link, "raise_token_floor");
    }
    rev = *got;
  }
  bool found = false;
  if (std::error_code ec = etcd_revoke(link, body, id, &found)) {
    orphans.give_back(link, body, id);
    return ec;
  }
  return {};
}

/// etcd_store::raise_token_floor (see there) for an issuable `floor`, the link locked: the
/// current revision, then etcd_raise_floor's writes of the floor key if it is below `floor`.
inline result<void> etcd_raise_token_floor(etcd_link& link, std::string& body,
                                           etcd_orphans& orphans, std::uint64_t floor,
                                           std::uint64_t max_steps) {
  result<std::int64_t> now = etcd_current_revision(link, body, link.options().key_prefix);
  if (!now) return now.error();
  const auto at = static_cast<std::uint64_t>(*now);
  if (at >= floor) return {};
  if (floor - at > max_steps) {
    return link.fail(errc::invalid_argument,
                     "etcd: raise_token_floor: " + std::to_string(floor - at) +
                         " revisions to skip is more than max_steps");
  }
  const std::string k = link.options().key_prefix + std::string(etcd_hashed_marker) + "floor";
  if (std::error_code ec =
          etcd_raise_floor(link, body, k, *now, static_cast<std::int64_t>(floor), orphans)) {
    return ec;
  }
  return {};
}

/// What every attempt of etcd_store does first: revokes the leases earlier failures could not
/// give back (etcd_orphans), and, after the link saw a new life (etcd_link::new_life: a snapshot
/// restore rewound the revision, or another cluster ID), raises the revision to the highest one
/// this store ever saw, so that its next grant's token passes every token etcd issued to it
/// (issue 20 part 3). Why that suffices for this store's tokens and never goes below an admitted
/// one: a fence admitted only tokens some grant reported, every grant to this store is a revision
/// an answer showed it (<= highest_revision), and the raise only writes while etcd's revision is
/// below that (raise_token_floor's writes: never lowers, a repeated raise is one read). Tokens
/// other processes got from the lost revisions are theirs to cover: their stores raise on their
/// next attempt the same way; a process gone since needs raise_token_floor(newest admitted) or
/// `etcdutl snapshot restore --bump-revision`. A gap of more than 100000 revisions is left to
/// the operator (one write per revision), reported in last_error_message() when it happens.
inline void etcd_before_attempt(etcd_link& link, std::string& body, etcd_orphans& orphans) {
  orphans.settle(link, body);
  if (!link.new_life()) return;
  const std::string why = link.last_error();
  const std::int64_t floor = link.highest_revision();
  result<std::int64_t> now = etcd_current_revision(link, body, link.options().key_prefix);
  if (!now) return;  // the next attempt tries again
  if (*now >= floor) {
    link.settle_life();
    link.fail(errc::store_unavailable, why);
    return;
  }
  if (floor - *now > 100000) {
    link.settle_life();
    link.fail(errc::store_unavailable,
              "etcd: the revision went back by " + std::to_string(floor - *now) +
                  " (a restore?): too far to raise on its own; raise_token_floor(newest token a "
                  "fence admitted)");
    return;
  }
  const std::string k = link.options().key_prefix + std::string(etcd_hashed_marker) + "floor";
  if (!etcd_raise_floor(link, body, k, *now, floor, orphans)) {
    link.settle_life();
    link.fail(errc::store_unavailable, why);
  }
}

/// The lease of an attempt (lease/grant of `seconds`, an ID of the store's choosing, so that a
/// lost reply can still be revoked): {ID, applied TTL in seconds}, or the error once it is given
/// back. If its answer showed a new life, the revision is raised first (etcd_before_attempt) and
/// the lease given back for a fresh one: the raise writes once per revision skipped, which can
/// outlast the lease's TTL (a transaction naming the expired lease would fail).
inline result<std::pair<std::int64_t, std::int64_t>> etcd_attempt_lease(etcd_link& link,
                                                                        std::string& body,
                                                                        std::int64_t seconds,
                                                                        etcd_orphans& orphans) {
  for (int round = 0;; ++round) {
    const std::int64_t id = etcd_new_lease_id();
    result<std::pair<std::int64_t, std::int64_t>> r = etcd_grant_lease(link, body, seconds, id);
    if (!r || (round == 0 && link.new_life())) orphans.give_back(link, body, id);
    if (!r || round > 0 || !link.new_life()) return r;
    etcd_before_attempt(link, body, orphans);
  }
}

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_DETAIL_ETCD_CALLS_HPP
