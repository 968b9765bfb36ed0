// SPDX-License-Identifier: MIT
// holdfast/stores/detail/etcd_rw_wait.hpp - etcd_store's read-write wait (wait_for_release_rw,
// which read_write_lease.hpp's views offer as their wait_for_release, so acquire_read() and
// acquire_write() sleep instead of backing off): not public. Part of stores/etcd.hpp.
//
// A read-write key's grants are the keys of one range P (detail/etcd_rw.hpp: P + "w" the writer,
// P + "r/..." the readers, P + "i" a writer's intent), each bound to its own lease, so a release
// (lease/revoke) and an expiry (etcd revoking the lease) both delete a key of P. The wait starts
// from the read of this thread's last busy answer in the same mode (etcd_rw_sightings; else it
// reads P, one kv/range), and if something keeps the mode out (a shared waiter: the writer or an
// intent; an exclusive one: the writer or any reader), watches P for deletions (/v3/watch with a
// range end, filter NOPUT; detail/etcd_watch.hpp) from now (a watch from a revision etcd has
// passed gets its events from etcd's 100 ms sync loop), and if etcd created the watch past that
// read's revision, reads P once more: a blocking grant gone by then wakes it as a deletion does,
// so nothing deleted after the read (a release just after the busy answer included) is missed:
//
//   the watch ends as          | the waiter
//   ---------------------------+-----------------------------------------------------------
//   changed (a key of P gone)  | reads P again: returns if nothing keeps the mode out now,
//                              | else watches again from the new read (one range per wake-up)
//   dropped, compacted         | reads P again (once more on the next member if it fails)
//   quiet (the wake-up instant)| returns: a blocking grant can have expired (the caller asks)
//   refused                    | store_unavailable (the caller backs off)
//   cancelled                  | errc::cancelled
//
// The wake-up instant bounds a sleep whose notification was lost (a stream that stalls without
// ending): the greatest time left (lease/timetolive, whole seconds rounded down, 1 s if 0) of up
// to four of the blocking grants' leases, counted from before the read left. Any of them is at
// most the time until every blocking grant can have expired, so no sleep passes that; past four
// readers the wait may wake before the last reader's expiry and read again (latency, never a
// hang). An exclusive waiter with an intent in P wakes at the latest after half the intent's
// time left, so that its next ask renews the intent before it lapses (writers first, RW4).
//
// Requests per wait: up to five lease/timetolive (and a kv/range without a busy answer of this
// thread to start from; one more when the watch was created past the read), then one kv/range per
// deletion seen (plus the timetolives if still blocked); none while asleep. Every waiter of the
// key wakes on any deletion in P (a reader's release may free the key for a writer, a writer's
// for every reader); those still kept out read once and sleep again.
#ifndef HOLDFAST_STORES_DETAIL_ETCD_RW_WAIT_HPP
#define HOLDFAST_STORES_DETAIL_ETCD_RW_WAIT_HPP

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "holdfast/cancel.hpp"
#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/result.hpp"
#include "holdfast/store.hpp"
#include "holdfast/stores/detail/etcd_calls.hpp"
#include "holdfast/stores/detail/etcd_encoding.hpp"
#include "holdfast/stores/detail/etcd_json.hpp"
#include "holdfast/stores/detail/etcd_link.hpp"
#include "holdfast/stores/detail/etcd_watch.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

/// What one read of a read-write range shows a waiter in one mode.
struct etcd_rw_blockers {
  std::int64_t revision = 0;         // the read's
  std::vector<std::int64_t> leases;  // of the grants that keep the mode out, writer first
  std::int64_t intent_lease = 0;     // an exclusive waiter's view of the intent (0: none)
};

/// Each thread's last busy read-write answer on one store (the range, the mode, what kept it
/// out, the read's revision), which its next wait starts from instead of reading the range.
/// Guarded by the link's mutex.
class etcd_rw_sightings {
 public:
  void note(const std::string& prefix, bool ex, etcd_rw_blockers b) {
    if (seen_.size() >= 1024) seen_.clear();  // threads that never waited: forget them all
    entry& e = seen_[std::this_thread::get_id()];
    e.prefix = prefix;
    e.ex = ex;
    e.blockers = std::move(b);
  }
  /// This thread's sighting of range `prefix` in mode `ex`, taken (any other is dropped).
  std::optional<etcd_rw_blockers> take(const std::string& prefix, bool ex) {
    const auto it = seen_.find(std::this_thread::get_id());
    if (it == seen_.end()) return std::nullopt;
    std::optional<etcd_rw_blockers> out;
    if (it->second.prefix == prefix && it->second.ex == ex) out = std::move(it->second.blockers);
    seen_.erase(it);
    return out;
  }

 private:
  struct entry {
    std::string prefix;
    bool ex = false;
    etcd_rw_blockers blockers;
  };
  std::unordered_map<std::thread::id, entry> seen_;
};

/// Reads range `n.prefix` (one kv/range; Names is etcd_rw.hpp's etcd_rw_names, which includes
/// this header) and lists what keeps mode `ex` out. \returns the blockers; store_unavailable,
/// timeout, protocol_error (a bad answer, a key holdfast does not write there).
template <class Names>
result<etcd_rw_blockers> etcd_rw_read_blockers(etcd_link& link, std::string& body, const Names& n,
                                               bool ex) {
  body.assign(R"({"key":")");
  base64_append(n.prefix, body);
  body += R"(","range_end":")";
  base64_append(n.end, body);
  body += R"("})";
  result<nlohmann::json> r = link.post("/kv/range", body);
  if (!r) return r.error();
  etcd_rw_blockers b;
  const std::optional<std::int64_t> rev = etcd_revision(*r);
  if (!rev) return etcd_shape(link, "wait_for_release_rw");
  b.revision = *rev;
  const auto kvs = r->find("kvs");
  if (kvs == r->end()) return b;  // the gateway omits an empty list
  if (!kvs->is_array()) return etcd_shape(link, "wait_for_release_rw");
  std::string k;
  for (const nlohmann::json& kv : *kvs) {
    std::int64_t lease = 0;
    if (!kv.is_object() || !json_bytes(kv, "key", k) || !json_int64(kv, "lease", lease) ||
        lease <= 0) {
      return etcd_shape(link, "wait_for_release_rw");
    }
    const bool reader =
        k.size() == n.reader.size() && k.compare(0, n.readers.size(), n.readers) == 0;
    if (k == n.writer) {
      b.leases.insert(b.leases.begin(), lease);
    } else if (k == n.intent) {
      if (ex)
        b.intent_lease = lease;
      else
        b.leases.push_back(lease);
    } else if (reader) {
      if (ex) b.leases.push_back(lease);
    } else {
      return etcd_shape(link, "wait_for_release_rw");
    }
  }
  return b;
}

/// How long (from before the read of `b` left) the waiter may sleep: the greatest time left of
/// up to four blocking leases (1 s for one with under a second left), at most half the intent's
/// time left for an exclusive waiter; zero if one of them is gone already.
inline result<std::chrono::milliseconds> etcd_rw_sleep_bound(etcd_link& link, std::string& body,
                                                             const etcd_rw_blockers& b) {
  constexpr std::int64_t most_s = max_ttl.count() / 1000;  // timetolive's sanity bound
  std::int64_t longest = 0;
  const std::size_t n = std::min<std::size_t>(b.leases.size(), 4);
  for (std::size_t i = 0; i < n; ++i) {
    result<std::int64_t> left = etcd_time_to_live(link, body, b.leases[i], most_s);
    if (!left) return left.error();
    if (*left < 0) return std::chrono::milliseconds(0);  // gone: its key with it (ask now)
    longest = std::max<std::int64_t>(longest, *left > 0 ? *left : 1);
  }
  std::chrono::milliseconds bound(longest * 1000);
  if (b.intent_lease != 0) {
    result<std::int64_t> left = etcd_time_to_live(link, body, b.intent_lease, most_s);
    if (!left) return left.error();
    if (*left >= 0) bound = std::min(bound, std::chrono::milliseconds(*left * 500));
  }
  return bound;
}

/// The wait of etcd_store::wait_for_release_rw on the range of names `n` in mode `ex` (see the
/// overview), from `first` (this thread's busy answer, if any) instead of a first read. Holds the
/// link's lock for its requests, never while asleep. \returns success
/// (woken, free, or `deadline` passed); errc::cancelled; the errors of a failed read or a refused
/// watch (store_unavailable, timeout, protocol_error; text in the link's last error).
template <class Names>
result<void> etcd_rw_wait(etcd_link& link, const Names& n, bool ex,
                          std::chrono::steady_clock::time_point deadline,
                          const cancel_token& cancel, std::optional<etcd_rw_blockers> first) {
  etcd_watch watch(cancel);  // a stop ends its wait (curl_multi_wakeup)
  std::string body;
  using end = etcd_watch::end;
  for (int round = 0, drops = 0; round < 64 && drops < 4; ++round) {
    if (cancel.stop_requested()) return errc::cancelled;
    const auto start = std::chrono::steady_clock::now();  // before the read leaves
    if (start >= deadline) return {};
    auto guard = link.lock();
    result<etcd_rw_blockers> b = first ? result<etcd_rw_blockers>(std::move(*first))
                                       : etcd_rw_read_blockers(link, body, n, ex);
    first.reset();
    if (!b && drops > 0) b = etcd_rw_read_blockers(link, body, n, ex);  // the next member
    if (!b) return b.error();
    if (b->leases.empty()) return {};  // nothing keeps the mode out
    // From now: a watch from the revision after the read would be served by etcd's 100 ms sync
    // loop whenever anything was written in between (etcd_watch::open).
    if (!watch.open(link.options(), link.endpoint(), link.auth_token(), n.prefix, 0, &n.end)) {
      return link.fail(errc::store_unavailable, watch.why());
    }
    result<std::chrono::milliseconds> bound = etcd_rw_sleep_bound(link, body, *b);
    if (!bound) return bound.error();
    guard.unlock();
    const auto wake = std::min(deadline, start + *bound);
    std::optional<end> created = watch.wait_created(wake);
    if (!created && watch.created_revision() > b->revision) {
      // Writes came between the read and the watch: read P again; a grant that kept the mode out
      // and is gone now counts as the deletion the watch would have seen.
      guard.lock();
      result<etcd_rw_blockers> now = etcd_rw_read_blockers(link, body, n, ex);
      if (!now) return now.error();
      if (now->leases != b->leases || now->intent_lease != b->intent_lease) created = end::changed;
      guard.unlock();
    }
    const end e = created ? *created : watch.wait(wake);
    if (e == end::cancelled) return errc::cancelled;
    if (e == end::refused) {
      guard.lock();
      return link.fail(errc::store_unavailable, watch.why());
    }
    if (e == end::quiet) return {};
    if (e != end::changed) ++drops;  // dropped or compacted: read again
  }
  return {};
}

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_DETAIL_ETCD_RW_WAIT_HPP
