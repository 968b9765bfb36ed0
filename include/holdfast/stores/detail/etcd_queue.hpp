// SPDX-License-Identifier: MIT
// holdfast/stores/detail/etcd_queue.hpp - etcd_store's wait queue (try_acquire_queued and
// wait_for_release), after etcd's own lock (clientv3/concurrency.Mutex): a busy attempt keeps the
// lease it granted and puts a queue entry bound to it, in the same transaction, so the entry goes
// when the waiter's lease does; waiters are ordered by their entries' create_revision, and each
// watches only the entry ahead of it (the first watches the lease key itself), so a release
// wakes one waiter, not all. The woken waiter's next attempt binds the key to that same lease
// (refreshed first by a keepalive) and deletes its entry in the granting transaction, which
// wakes the next. Not for users (stores/etcd.hpp is the public header).
//
// Names: the queue of lease key K is key_prefix + "#sha256/" + hex(SHA-256(K)) + "/w/", an entry
// is that + the lease ID in 16 hex digits. No lease key can have such a name: a key starting with
// "#sha256/" is always stored hashed, as "#sha256/" and exactly 64 hex digits.
#ifndef HOLDFAST_STORES_DETAIL_ETCD_QUEUE_HPP
#define HOLDFAST_STORES_DETAIL_ETCD_QUEUE_HPP

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>

#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/result.hpp"
#include "holdfast/stores/detail/etcd_calls.hpp"
#include "holdfast/stores/detail/etcd_encoding.hpp"
#include "holdfast/stores/detail/etcd_json.hpp"
#include "holdfast/stores/detail/etcd_link.hpp"
#include "holdfast/stores/detail/etcd_watch.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

/// A thread's place in the wait queue of one lease key, and what its last busy answer saw.
struct etcd_ticket {
  std::string key;    // the lease key (etcd name)
  std::string entry;  // its queue entry's etcd name
  std::int64_t lease = 0;
  std::int64_t seconds = 0;  // the TTL the lease was asked with
  std::int64_t entry_revision = 0;
  // The TTL etcd applied (s) at the lease's last grant or keepalive, and the instant read before
  // that request left: etcd holds the lease at least until refreshed_at + applied_s.
  std::int64_t applied_s = 0;
  std::chrono::steady_clock::time_point refreshed_at{};
  // The last busy answer (revision 0: used up): its revision, the holder's lease, and the entry
  // ahead (empty: none, the lease key is next).
  std::int64_t seen_revision = 0;
  std::int64_t holder_lease = 0;
  std::string ahead;

  static etcd_ticket of(std::string key, std::string entry, std::int64_t lease,
                        std::int64_t seconds, std::int64_t entry_revision) {
    etcd_ticket t;
    t.key = std::move(key);
    t.entry = std::move(entry);
    t.lease = lease;
    t.seconds = seconds;
    t.entry_revision = entry_revision;
    return t;
  }
};

/// Each thread's ticket on one store. Guarded by the link's mutex.
class etcd_tickets {
 public:
  /// This thread's ticket, taken; nullopt if it has none.
  std::optional<etcd_ticket> take() {
    const auto it = tickets_.find(std::this_thread::get_id());
    if (it == tickets_.end()) return std::nullopt;
    std::optional<etcd_ticket> out(std::move(it->second));
    tickets_.erase(it);
    return out;
  }
  /// This thread's ticket on `key`, or nullptr.
  etcd_ticket* find(const std::string& key) {
    const auto it = tickets_.find(std::this_thread::get_id());
    return it != tickets_.end() && it->second.key == key ? &it->second : nullptr;
  }
  void put(etcd_ticket t) {
    if (tickets_.size() >= 4096) tickets_.clear();  // threads that died queued: their leases end
    tickets_[std::this_thread::get_id()] = std::move(t);
  }

 private:
  std::unordered_map<std::thread::id, etcd_ticket> tickets_;
};

/// How long etcd still holds a queued lease at `now` (ms, rounded down), if at least half the
/// TTL it applied (`applied_s`, s) at its last grant or keepalive, sent after `refreshed_at`
/// (steady clock, read before the request left: etcd starts the TTL when it applies it, later),
/// is left; nullopt if less (the woken grant refreshes it first). So a waiter woken soon after
/// it queued binds the key to its lease with no keepalive (one request saved per hand-off), and
/// its grant reports at least half the TTL, as ZooKeeper's woken grant does (zookeeper.hpp).
/// Exactly half left counts as enough; a `now` before `refreshed_at` counts as no time passed.
inline std::optional<std::chrono::milliseconds> etcd_fresh_left(
    std::int64_t applied_s, std::chrono::steady_clock::time_point refreshed_at,
    std::chrono::steady_clock::time_point now) {
  using std::chrono::milliseconds;
  if (applied_s <= 0) return std::nullopt;
  const milliseconds total(applied_s * 1000);
  const milliseconds passed =
      now > refreshed_at ? std::chrono::ceil<milliseconds>(now - refreshed_at) : milliseconds(0);
  if (passed >= total) return std::nullopt;
  const milliseconds left = total - passed;
  if (left * 2 < total) return std::nullopt;
  return left;
}

/// How long etcd holds the lease of queue ticket `t` from now at least (ms), for an attempt that
/// binds the key to it: as it is if etcd_fresh_left allows (`fresh` set: no request), else
/// refreshed to its full TTL by a keepalive first (noted in `t`). \returns that time; 0 if the
/// lease expired while queued (its entry went with it); the keepalive's error.
inline result<std::chrono::milliseconds> etcd_ticket_held(etcd_link& link, std::string& body,
                                                          etcd_ticket& t, bool& fresh) {
  using std::chrono::milliseconds;
  const auto sent = std::chrono::steady_clock::now();
  const std::optional<milliseconds> left = etcd_fresh_left(t.applied_s, t.refreshed_at, sent);
  fresh = left.has_value();
  if (fresh) return *left;
  result<std::int64_t> ttl = etcd_keepalive(link, body, t.lease);
  if (!ttl) return ttl.error();
  if (*ttl <= 0) return milliseconds(0);
  t.applied_s = *ttl;
  t.refreshed_at = sent;
  return milliseconds(*ttl * 1000);
}

/// The queue of lease key `k` (see the overview).
inline std::string etcd_queue_prefix(std::string_view key_prefix, std::string_view k) {
  std::string q(key_prefix);
  q += etcd_hashed_marker;
  static constexpr char hex[] = "0123456789abcdef";
  for (unsigned char c : sha256(k)) {
    q += hex[c >> 4];
    q += hex[c & 15];
  }
  q += "/w/";
  return q;
}

/// The entry of lease `lease` in queue `prefix`.
inline std::string etcd_queue_entry(const std::string& prefix, std::int64_t lease) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string e = prefix;
  const auto u = static_cast<std::uint64_t>(lease);
  for (int shift = 60; shift >= 0; shift -= 4) e += hex[(u >> shift) & 15];
  return e;
}

/// The lease of queue entry `entry` (its name's last 16 hex digits), or `otherwise`.
inline std::int64_t etcd_entry_lease(const std::string& entry, std::int64_t otherwise) {
  if (entry.size() < 16) return otherwise;
  std::uint64_t u = 0;
  for (std::size_t i = entry.size() - 16; i < entry.size(); ++i) {
    const char c = entry[i];
    const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return otherwise;
    u = u << 4 | static_cast<std::uint64_t>(d);
  }
  return static_cast<std::int64_t>(u);
}

/// Appends a request_range op for the entry ahead in queue `prefix`: the newest entry created
/// before `before` (0: no bound, and two entries, since the caller's own put is the newest).
inline void etcd_append_ahead_range(const std::string& prefix, std::int64_t before,
                                    std::string& body) {
  std::string end = prefix;
  end.back() = static_cast<char>(end.back() + 1);  // '/' + 1: every name under the prefix
  body += R"({"request_range":{"key":")";
  base64_append(prefix, body);
  body += R"(","range_end":")";
  base64_append(end, body);
  body += R"(","sort_order":"DESCEND","sort_target":"CREATE","keys_only":true,"limit":")";
  body += before > 0 ? "1" : "2";
  if (before > 0) body += R"(","max_create_revision":")" + std::to_string(before - 1);
  body += R"("}})";
}

/// Reads the entry ahead from such a range's answer into `ahead` (empty: none): false for a bad
/// shape. `own` is the caller's entry, skipped.
inline bool etcd_read_ahead(const nlohmann::json& range, const std::string& own,
                            std::string& ahead) {
  ahead.clear();
  const auto kvs = range.find("kvs");
  if (kvs == range.end()) return true;
  if (!kvs->is_array()) return false;
  for (const nlohmann::json& kv : *kvs) {
    std::string name;
    if (!kv.is_object() || !json_bytes(kv, "key", name)) return false;
    if (name != own) {
      ahead = std::move(name);
      return true;
    }
  }
  return true;
}

// The put-if-absent transaction of an attempt with lease `id`: on success it also deletes the
// queue entry it reuses the lease of (entry_revision >= 0); on failure, if queued, it also
// puts a new entry (entry_revision < 0) and reads the entry ahead.
inline void etcd_acquire_body(std::string& body, const std::string& k, std::string_view owner,
                              std::int64_t id, std::int64_t entry_revision,
                              const std::string& entry, bool queue) {
  const std::string lease = R"(","lease":")" + std::to_string(id) + R"("}})";
  body.assign(R"({"compare":[{"key":")");
  base64_append(k, body);
  body += R"(","target":"CREATE","result":"EQUAL","create_revision":"0"}],)"
          R"("success":[{"request_put":{"key":")";
  base64_append(k, body);
  body += R"(","value":")";
  base64_append(owner, body);
  body += lease;
  if (entry_revision >= 0) {
    body += R"(,{"request_delete_range":{"key":")";
    base64_append(entry, body);
    body += R"("}})";
  }
  body += R"(],"failure":[{"request_range":{"key":")";
  base64_append(k, body);
  body += R"("}})";
  if (queue) {
    if (entry_revision < 0) {
      body += R"(,{"request_put":{"key":")";
      base64_append(entry, body);
      body += lease;
    }
    body += ',';
    etcd_append_ahead_range(entry.substr(0, entry.size() - 16), entry_revision, body);
  }
  body += "]}";
}

// One try of etcd_read_queue.
inline result<std::optional<etcd_sighting>> etcd_read_queue_once(etcd_link& link, std::string& body,
                                                                 const std::string& k,
                                                                 std::int64_t entry_revision,
                                                                 const std::string& entry,
                                                                 std::string& ahead) {
  if (entry_revision <= 0) {
    std::int64_t rev = 0;
    result<std::optional<etcd_kv>> kv = etcd_range(link, body, k, &rev);
    if (!kv) return kv.error();
    if (!*kv) return std::optional<etcd_sighting>{};
    return std::optional<etcd_sighting>{
        etcd_sighting{k, rev, (*kv)->lease, (*kv)->create_revision}};
  }
  body.assign(R"({"success":[{"request_range":{"key":")");
  base64_append(k, body);
  body += R"("}},)";
  etcd_append_ahead_range(entry.substr(0, entry.size() - 16), entry_revision, body);
  body += "]}";
  result<nlohmann::json> r = link.post("/kv/txn", body);
  if (!r) return r.error();
  const nlohmann::json* range = etcd_txn_range(*r, 0, 2);
  const nlohmann::json* queue = etcd_txn_range(*r, 1, 2);
  const std::optional<std::int64_t> rev = etcd_revision(*r);
  std::optional<etcd_kv> kv;
  if (range == nullptr || queue == nullptr || !rev || !etcd_first_kv(*range, kv) ||
      !etcd_read_ahead(*queue, entry, ahead)) {
    return etcd_shape(link, "wait");
  }
  if (!kv) return std::optional<etcd_sighting>{};
  return std::optional<etcd_sighting>{etcd_sighting{k, *rev, kv->lease, kv->create_revision}};
}

/// Reads the holder of lease key `k` (nullopt: free) and, if queued (entry_revision > 0), the
/// entry ahead of `entry` into `ahead`, in one transaction of two ranges; up to `tries` times
/// while it fails.
inline result<std::optional<etcd_sighting>> etcd_read_queue(etcd_link& link, std::string& body,
                                                            const std::string& k,
                                                            std::int64_t entry_revision,
                                                            const std::string& entry,
                                                            std::string& ahead, int tries) {
  result<std::optional<etcd_sighting>> r =
      etcd_read_queue_once(link, body, k, entry_revision, entry, ahead);
  for (int i = 1; i < tries && !r; ++i) {
    r = etcd_read_queue_once(link, body, k, entry_revision, entry, ahead);
  }
  return r;
}

/// After a wait's watch of the entry ahead `q.ahead` ended as changed: if the watch read the
/// deletion's revision, makes the key `k` the next thing watched, from that revision on, its
/// holder taken to be the one ahead (as a rule it was granted: its grant deleted the entry),
/// with no re-read (etcd_watch_round reads the key if writes came since; a holder other than
/// the one ahead, or none, ends that round at once, and the waiter asks again). \returns
/// whether it did (else the wait re-reads the key and the queue).
inline bool etcd_key_next(const etcd_watch& watch, const std::string& k, etcd_ticket& q,
                          etcd_sighting& seen) {
  if (q.ahead.empty() || watch.event_revision() <= 0) return false;
  seen = etcd_sighting{k, watch.event_revision(), etcd_entry_lease(q.ahead, seen.lease), 0};
  q.ahead.clear();
  return true;
}

/// How long a wait sleeps on its watch before it asks the holder's time left (lease/timetolive):
/// the granularity that answer already had (whole seconds, a 0 slept as 1 s), so asking later
/// never wakes a waiter later than asking first did, and a hand-off within it costs no request.
inline constexpr std::chrono::seconds etcd_first_watch_window{1};

/// One watch round of etcd_store's wait, `guard` holding the link (held again on return):
/// watches `watched` (the lease key when `is_key`, else the queue entry ahead) for its deletion
/// and sleeps until the watch ends or `deadline`, and for at most etcd_first_watch_window; if
/// nothing came by then, reads the holder's time left (`seen.lease`: whole seconds, from before
/// the read) and sleeps at most that long more (1 s if 0). So a sick watch (a frozen member)
/// never keeps a waiter past the holder's expiry by more than timetolive's rounding did before,
/// and a hand-off within the first window costs no timetolive. The watch is opened from now, not
/// from the revision after `seen`: etcd serves a watch from a revision it has passed out of a
/// sync loop that runs every 100 ms, which held a release's event back by up to 100 ms whenever
/// any write came between the read and the watch (with 16 waiters, most hand-offs). If the watch
/// was created past `seen.revision`, one range read (no Raft write) tells whether `watched` went,
/// or the lease key changed holder, in between: end::changed then. \returns how the watch ended
/// (quiet also when the holder's lease is gone); the reads' error, or store_unavailable with the
/// watch's text if it was refused.
inline result<etcd_watch::end> etcd_watch_round(
    etcd_link& link, std::unique_lock<std::mutex>& guard, std::string& body, etcd_watch& watch,
    const std::string& watched, bool is_key, const etcd_sighting& seen,
    std::chrono::steady_clock::time_point deadline, std::int64_t max_ttl_s) {
  using end = etcd_watch::end;
  if (!watch.open(link.options(), link.endpoint(), link.auth_token(), watched, 0)) {
    return link.fail(errc::store_unavailable, watch.why());
  }
  auto wake = std::chrono::steady_clock::now() + etcd_first_watch_window;
  if (deadline < wake) wake = deadline;
  guard.unlock();
  std::optional<end> e = watch.wait_created(wake);
  guard.lock();
  if (!e && watch.created_revision() > seen.revision) {  // writes came after the read
    result<std::optional<etcd_kv>> kv = etcd_range(link, body, watched);
    if (!kv) return kv.error();
    if (!*kv || (is_key && (*kv)->lease != seen.lease)) e = end::changed;
  }
  for (bool asked = false; !e; asked = true) {
    guard.unlock();
    e = watch.wait(wake);
    guard.lock();
    if (*e != end::quiet || asked || wake >= deadline) break;
    // Quiet for the first window: the holder's time left bounds the rest of the sleep.
    const auto start = std::chrono::steady_clock::now();  // before the read leaves
    result<std::int64_t> left = etcd_time_to_live(link, body, seen.lease, max_ttl_s);
    if (!left) return left.error();
    if (*left < 0) return end::quiet;  // the holder's lease is gone, and the key with it
    wake = start + std::chrono::seconds(*left > 0 ? *left : 1);
    if (deadline < wake) wake = deadline;
    e.reset();
  }
  if (*e == end::refused) return link.fail(errc::store_unavailable, watch.why());
  return *e;
}

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_DETAIL_ETCD_QUEUE_HPP
