// SPDX-License-Identifier: MIT
// holdfast/stores/detail/etcd_rw.hpp - etcd_store's read-write grants (store.hpp's read-write
// capability, RW1-RW4; read_write_lease.hpp uses it): not public. etcd_store derives from
// etcd_rw<etcd_store>, which reaches the store's link and orphaned leases through friendship.
//
// One range of keys per read-write key K, at P = key_prefix + "#sha256/" + hex(SHA-256(K)) +
// "/rw/": a name space of its own (a plain lease "K" and a read-write "K" are two locks, as in
// memory_store, Redis and PostgreSQL). No plain key can fall in it (a plain key starting with
// "#sha256/" is stored as "#sha256/" and exactly 64 hex digits), nor can a wait queue
// ("#sha256/<64 hex>/w/"), nor another read-write key's range (the hash has a fixed length):
//
//   key                       | value   | bound to                    | what
//   --------------------------+---------+-----------------------------+--------------------------
//   P + "w"                   | owner   | its own lease (caller's TTL)| the writer
//   P + "r/" + hex(SHA(owner))| owner   | its own lease (caller's TTL)| one reader
//   P + "i"                   | owner   | its own lease (the TTL of   | a writer's intent (RW4)
//                             |         | the latest refused ask)     |
//
// A grant is live while its key exists: etcd deletes it with its lease, by the leader's clock
// (expiry, TTLs and their rounding exactly as a plain grant's: stores/etcd.hpp; the grant reports
// min(asked, applied)). The token is the grant key's create_revision: store-wide, so a writer's
// token is greater than every token (plain or read-write) granted before it, and a reader's lies
// between the writer whose data it may have seen and the next writer (RW2).
//
//   operation  | requests (round trips)                                  | why
//   -----------+---------------------------------------------------------+----------------------
//   acquire_rw | lease/grant                                         (1) | a key is bound to a
//              |                                                         | lease that exists
//              | kv/txn: w, i absent, and (shared) the owner's reader    | a free key, a reader
//              |   key absent / (exclusive) no reader key ? put the      | joining readers, a
//              |   owner's key : range P                             (1) | writer on a free key:
//              |                                                         | one txn, as plain
//              | else judge the range read (memory_store's table,        | one atomic step per
//              |   detail/memory_shared.hpp); a verdict that writes (an  | decision: the guard
//              |   intent; a grant once the first read is stale) sends   | fails if anything was
//              |   kv/txn: no key of P has a mod_revision above the      | put since the read
//              |   read's ? write : range P, judged again (16 at most,   |
//              |   then busy)                                      (1 each)|
//     busy     | + lease/revoke of the unused lease                  (1) | nothing left behind
//     re-ask   | + lease/keepalive of the grant's own lease, revoke of   | RW3: same token, its
//              |   the unused one                                    (2) | lease restarted
//     intent   | the guarded txn puts P + "i" bound to the ask's lease;  | the intent lasts the
//              |   the intent's earlier lease (its owner's) is revoked(1)| latest refused ask
//     writer   | with an intent: the guarded txn also deletes P + "i";   | nothing keyless left
//     after one|   its lease is revoked                              (1) |
//   renew_rw   | lease/keepalive of the grant's lease (+ kv/range if not | T3: owner, token and
//              | remembered: the key must carry owner and token)         | mode (the key) checked
//   release_rw | lease/revoke of the grant's lease (+ kv/range likewise) | deletes the key
//
// Why comparing mod revisions suffices: a put after the read (a new reader, a writer, an intent,
// a re-bound intent) raises its key's mod_revision past the read's revision, so the guarded write
// fails and the ask is judged again on what is there now. A key deleted since the read is not
// seen by the guard, but a deletion only removes a holder or an intent, which never turns a
// correct verdict into a wrong one (a grant the read allowed is still allowed).
//
// Writers first (RW4): an exclusive ask refused because readers hold records its owner's intent,
// bound to a lease with the TTL it asked; while the intent's key exists no new reader is granted
// (a live reader's re-ask and renew_rw still succeed), so the readers drain and the writer's next
// ask wins. Any exclusive grant deletes the intent in its transaction (and then revokes the
// intent's lease: nothing keyless is left). One intent per key: a second writer is busy without
// one. A writer that vanishes keeps new readers out for at most the TTL it asked (etcd's
// rounding up to whole seconds, at least 2 s, included). A waiter watches the range for the
// deletion of what keeps it out (wait_for_release_rw, detail/etcd_rw_wait.hpp).
//
// Lost replies: every lease an ask granted and nobody was told of is revoked at once (with the
// key or intent a lost transaction may have put), or at the store's next attempt
// (detail/etcd_calls.hpp, etcd_orphans); a transaction the transport repeated finds its own key
// (its lease is the ask's) and reports that grant. A restore (a new life) is handled as for
// plain grants: the revision is raised before a token is drawn, and the ask's lease taken again
// after the raise (detail/etcd_calls.hpp, etcd_attempt_lease). Part of stores/etcd.hpp.
#ifndef HOLDFAST_STORES_DETAIL_ETCD_RW_HPP
#define HOLDFAST_STORES_DETAIL_ETCD_RW_HPP

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "holdfast/cancel.hpp"
#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/result.hpp"
#include "holdfast/store.hpp"
#include "holdfast/stores/detail/etcd_calls.hpp"
#include "holdfast/stores/detail/etcd_encoding.hpp"
#include "holdfast/stores/detail/etcd_json.hpp"
#include "holdfast/stores/detail/etcd_link.hpp"
#include "holdfast/stores/detail/etcd_rw_wait.hpp"
#include "holdfast/stores/etcd_options.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

/// One key of a read-write range as a read shows it.
struct etcd_rw_kv {
  std::string value;  // the owner
  std::int64_t create_revision = 0;
  std::int64_t lease = 0;
};

/// What one read of a read-write range shows (for one asking owner).
struct etcd_rw_seen {
  std::int64_t revision = 0;  // the read's
  std::optional<etcd_rw_kv> writer;
  std::optional<etcd_rw_kv> intent;
  std::optional<etcd_rw_kv> mine;  // the asking owner's reader key
  std::size_t readers = 0;
  std::vector<std::int64_t> reader_leases;  // of the first four readers (a wait's bound)
};

/// The verdict on an ask (memory_store's table): a new grant, the owner's live grant again, an
/// intent recorded (busy), or busy.
enum class etcd_rw_act { grant, again, intent, busy };

/// Judges an ask of `owner` (exclusive iff `ex`) against what `s` shows (store.hpp RW1-RW4).
inline etcd_rw_act etcd_rw_judge(const etcd_rw_seen& s, std::string_view owner, bool ex) {
  if (!ex) {
    if (s.writer) return etcd_rw_act::busy;  // no downgrade in place either
    if (s.mine) return etcd_rw_act::again;   // a live reader's re-ask, intent or not
    return s.intent ? etcd_rw_act::busy : etcd_rw_act::grant;
  }
  if (s.writer) return s.writer->value == owner ? etcd_rw_act::again : etcd_rw_act::busy;
  if (s.readers == 0) return etcd_rw_act::grant;  // any intent ends with it
  if (s.mine) return etcd_rw_act::busy;           // no upgrade in place
  if (!s.intent || s.intent->value == owner) return etcd_rw_act::intent;
  return etcd_rw_act::busy;  // one intent per key
}

/// The names of one ask: the range P, its end, the writer, intent and owner's reader keys.
struct etcd_rw_names {
  std::string prefix, end, writer, intent, reader, readers, readers_end;

  void set(std::string_view key_prefix, std::string_view key, std::string_view owner) {
    static constexpr char hex[] = "0123456789abcdef";
    prefix.assign(key_prefix.data(), key_prefix.size());
    prefix += etcd_hashed_marker;
    for (unsigned char c : sha256(key)) {
      prefix += hex[c >> 4];
      prefix += hex[c & 15];
    }
    prefix += "/rw/";
    end = prefix;
    end.back() = static_cast<char>(end.back() + 1);
    writer = prefix + "w";
    intent = prefix + "i";
    readers = prefix + "r/";
    readers_end = prefix + "r0";
    reader = readers;
    for (unsigned char c : sha256(owner)) {
      reader += hex[c >> 4];
      reader += hex[c & 15];
    }
  }
  [[nodiscard]] const std::string& grant_key(bool ex) const { return ex ? writer : reader; }
};

/// Reads a read-write range answer (`range`, read at `revision`) for the ask of `owner`: false for
/// a bad shape, a key holdfast does not write there, or one without a lease.
inline bool etcd_rw_read(const nlohmann::json& range, std::int64_t revision, const etcd_rw_names& n,
                         std::string_view owner, etcd_rw_seen& out) {
  out = etcd_rw_seen{};
  out.revision = revision;
  const auto kvs = range.find("kvs");
  if (kvs == range.end()) return true;  // the gateway omits an empty list
  if (!kvs->is_array()) return false;
  std::string k;
  for (const nlohmann::json& kv : *kvs) {
    etcd_rw_kv x;
    if (!kv.is_object() || !json_bytes(kv, "key", k) || !json_bytes(kv, "value", x.value) ||
        !json_int64(kv, "create_revision", x.create_revision) ||
        !json_int64(kv, "lease", x.lease) || x.create_revision <= 0 || x.lease <= 0 ||
        k.compare(0, n.prefix.size(), n.prefix) != 0) {
      return false;
    }
    if (k == n.writer) {
      out.writer = std::move(x);
    } else if (k == n.intent) {
      out.intent = std::move(x);
    } else if (k.size() == n.reader.size() &&
               k.compare(0, n.prefix.size() + 2, n.reader, 0, n.prefix.size() + 2) == 0) {
      ++out.readers;
      if (out.reader_leases.size() < 4) out.reader_leases.push_back(x.lease);
      if (k == n.reader) {
        if (x.value != owner) return false;  // a reader key names its owner's hash
        out.mine = std::move(x);
      }
    } else {
      return false;
    }
  }
  return true;
}

/// Appends a compare of `target` ("CREATE" or "MOD") of key `k` (of every key in [k, end) if
/// `end` is given) LESS or EQUAL (`result`) to `n`.
inline void etcd_rw_compare(std::string& body, const std::string& k, const std::string* end,
                            const char* target, const char* result, std::int64_t n) {
  if (body.back() == '}') body += ',';
  body += R"({"key":")";
  base64_append(k, body);
  if (end != nullptr) {
    body += R"(","range_end":")";
    base64_append(*end, body);
  }
  body += R"(","target":")";
  body += target;
  body += R"(","result":")";
  body += result;
  body += target[0] == 'C' ? R"(","create_revision":")" : R"(","mod_revision":")";
  body += std::to_string(n);
  body += R"("})";
}

/// The body of an ask's kv/txn. Its guard: before any read (`seen` 0), exactly the state in which
/// the ask is a new grant (shared: no writer, no intent, no grant of the owner's; exclusive: no
/// writer, no intent, no reader), so a free key, a reader joining readers and a writer on a free
/// key take one transaction; after a read at revision `seen`, that no key of the range has a
/// mod_revision above it. If it holds: put the owner's key (exclusive iff `ex`; the intent if
/// `intent`), bound to `lease`, and, if `drop_intent`, delete the intent; else read the range.
inline void etcd_rw_txn_body(std::string& body, const etcd_rw_names& n, std::int64_t seen, bool ex,
                             bool intent, std::string_view owner, std::int64_t lease,
                             bool drop_intent) {
  body.assign(R"({"compare":[)");
  if (seen == 0) {
    etcd_rw_compare(body, n.writer, nullptr, "CREATE", "EQUAL", 0);
    etcd_rw_compare(body, n.intent, nullptr, "CREATE", "EQUAL", 0);
    if (ex) {  // no reader: every create_revision in the readers' range is below 1
      etcd_rw_compare(body, n.readers, &n.readers_end, "CREATE", "LESS", 1);
    } else {
      etcd_rw_compare(body, n.reader, nullptr, "CREATE", "EQUAL", 0);
    }
  } else {
    etcd_rw_compare(body, n.prefix, &n.end, "MOD", "LESS", seen + 1);
  }
  body += R"(],"success":[{"request_put":{"key":")";
  base64_append(intent ? n.intent : n.grant_key(ex), body);
  body += R"(","value":")";
  base64_append(owner, body);
  body += R"(","lease":")" + std::to_string(lease) + R"("}})";
  if (drop_intent) {
    body += R"(,{"request_delete_range":{"key":")";
    base64_append(n.intent, body);
    body += R"("}})";
  }
  body += R"(],"failure":[{"request_range":{"key":")";
  base64_append(n.prefix, body);
  body += R"(","range_end":")";
  base64_append(n.end, body);
  body += R"("}}]})";
}

/// The read-write half of etcd_store (Store), as a base it derives from (CRTP); Store befriends
/// it and holds an etcd_link `link_` and etcd_orphans `orphans_`. Thread-safety: as etcd_store's
/// (every operation holds the link's lock; the scratch members are guarded by it).
template <class Store>
class etcd_rw {
 public:
  /// Grants `key`'s read-write lock to `owner` for `ttl` (ms, asked of etcd rounded up to whole
  /// seconds) in `mode` (store.hpp RW1-RW4): a shared grant while no writer holds and no other
  /// writer's intent lives, an exclusive one while nobody holds; each grant its own etcd lease
  /// and key, its token the key's create_revision (detail/etcd_rw.hpp: the keys, the requests,
  /// the policy). The same owner asking again in the mode it holds live gets the same token, its
  /// lease restarted (a retry after a lost reply gets the grant it made back). An exclusive ask
  /// refused because readers hold records its owner's intent for `ttl` (writers first).
  /// \returns the grant {token, min(ttl, the lease's applied TTL)}; errc::busy (an upgrade or
  ///   downgrade ask included, a shared ask kept out by an intent, and 16 lost compares in a
  ///   row); errc::invalid_argument (check_acquire_args, check_lease_mode, an owner larger than
  ///   etcd takes); store_unavailable, timeout (no grant is reported: the ask's lease is revoked,
  ///   with anything its transaction put), protocol_error (an answer of bad shape, or a key under
  ///   the read-write range that holdfast did not write).
  result<grant> try_acquire_rw(std::string_view key, std::string_view owner,
                               std::chrono::milliseconds ttl, lease_mode mode) {
    if (std::error_code ec = check_acquire_args(key, owner, ttl)) return ec;
    if (std::error_code ec = check_lease_mode(mode)) return ec;
    etcd_link& l = link();
    if (std::error_code ec = etcd_check_args(l, key, owner)) return ec;
    auto guard = l.lock();
    names_.set(l.options().key_prefix, key, owner);
    etcd_before_attempt(l, body_, orphans());  // orphans; a new life
    const std::int64_t seconds = (ttl.count() + 999) / 1000;
    result<std::pair<std::int64_t, std::int64_t>> lease =
        etcd_attempt_lease(l, body_, seconds, orphans());  // raised past a new life first
    if (!lease) return lease.error();
    return ask(owner, ttl, mode == lease_mode::exclusive, lease->first, lease->second);
  }

  /// Keeps `owner`'s live `mode` grant of `key` carrying `token` alive: one keepalive of the
  /// grant's own etcd lease (two round trips if this store did not make the grant: a read that
  /// checks the key carries owner and token). etcd restarts the lease's full TTL; `ttl` is
  /// checked but cannot change it. An expired grant is never revived.
  /// \returns the grant {token, min(ttl, the lease's TTL)}; errc::lease_lost if there is no such
  ///   live grant (another mode's included); errc::invalid_argument (check_renew_args,
  ///   check_lease_mode); store_unavailable, timeout, protocol_error as try_acquire_rw.
  result<grant> renew_rw(std::string_view key, std::string_view owner, fencing_token token,
                         std::chrono::milliseconds ttl, lease_mode mode) {
    if (std::error_code ec = check_renew_args(key, owner, token, ttl)) return ec;
    if (std::error_code ec = check_lease_mode(mode)) return ec;
    if (std::error_code ec = etcd_check_args(link(), key, owner)) return ec;
    if (token > etcd_max_token) return errc::lease_lost;  // no revision is that large
    auto guard = link().lock();
    names_.set(link().options().key_prefix, key, owner);
    const std::string& k = names_.grant_key(mode == lease_mode::exclusive);
    result<std::int64_t> id = lease_of(k, owner, token);
    if (!id) return id.error();
    if (*id == 0) return errc::lease_lost;
    result<std::int64_t> left = etcd_keepalive(link(), body_, *id);
    if (!left) return left.error();
    if (*left <= 0) {
      remembered_.erase(k);
      return errc::lease_lost;
    }
    return grant{token, etcd_ttl_capped(*left, ttl)};
  }

  /// Ends `owner`'s `mode` grant of `key` carrying `token`: one revoke of the grant's own etcd
  /// lease, which deletes its key in the same step (two round trips if this store did not make
  /// the grant). \returns success; errc::not_holder if there is no such grant (expired, another
  ///   mode's, owner's or token's); errc::invalid_argument (check_release_args,
  ///   check_lease_mode); store_unavailable, timeout, protocol_error as try_acquire_rw.
  result<void> release_rw(std::string_view key, std::string_view owner, fencing_token token,
                          lease_mode mode) {
    if (std::error_code ec = check_release_args(key, owner, token)) return ec;
    if (std::error_code ec = check_lease_mode(mode)) return ec;
    if (std::error_code ec = etcd_check_args(link(), key, owner)) return ec;
    if (token > etcd_max_token) return errc::not_holder;
    auto guard = link().lock();
    names_.set(link().options().key_prefix, key, owner);
    const std::string& k = names_.grant_key(mode == lease_mode::exclusive);
    result<std::int64_t> id = lease_of(k, owner, token);
    if (!id) return id.error();
    if (*id == 0) return errc::not_holder;
    bool found = false;
    if (std::error_code ec = etcd_revoke(link(), body_, *id, &found)) return ec;
    remembered_.erase(k);
    if (!found) return errc::not_holder;  // expired: etcd deleted the key with the lease
    return {};
  }

  /// Blocks until `key`'s read-write lock may be free for `mode`, without polling (store.hpp's
  /// wait_for_release_rw; read_write_view offers it as wait_for_release, so acquire_read() and
  /// acquire_write() use it): reads the key's range (a writer or an intent keeps readers out; a
  /// writer or a reader keeps writers out) and watches it (/v3/watch, a connection of its own)
  /// from the revision after that read, for the deletion of a grant or the intent (a release or
  /// an expiry). Returns when one was deleted and nothing keeps `mode` out any more, when a
  /// blocking grant can have expired (the greatest lease/timetolive of up to four of them; an
  /// exclusive waiter at the latest after half the intent's time left, so its next ask renews
  /// it), at `deadline`, or when `cancel` is stopped; at once if nothing keeps `mode` out or
  /// `deadline` has passed. A dropped stream or a compacted revision reads the range again: a
  /// lost notification costs latency, never a sleep past the blocking grants' expiry
  /// (detail/etcd_rw_wait.hpp). Thread-safety: as wait_for_release (any number of waiters, each
  /// on its own watch; the store's connection is held for the reads, never while asleep).
  /// \returns success (woken for any reason above); errc::cancelled once `cancel` was stopped;
  ///   errc::invalid_argument for an empty key or a bad mode; store_unavailable, timeout,
  ///   protocol_error if a read fails or the watch is refused (the caller backs off).
  result<void> wait_for_release_rw(std::string_view key, lease_mode mode,
                                   const std::chrono::steady_clock::time_point& deadline,
                                   const cancel_token& cancel = {}) {
    if (std::error_code ec = etcd_check_args(link(), key, {})) return ec;
    if (std::error_code ec = check_lease_mode(mode)) return ec;
    etcd_rw_names n;  // the wait's own: names_ is guarded by the lock the wait lets go of
    n.set(link().options().key_prefix, key, {});
    const bool ex = mode == lease_mode::exclusive;
    std::optional<etcd_rw_blockers> first;  // this thread's busy answer
    {
      auto guard = link().lock();
      first = sightings_.take(n.prefix, ex);
    }
    return etcd_rw_wait(link(), n, ex, deadline, cancel, std::move(first));
  }

 protected:
  etcd_rw() = default;
  ~etcd_rw() = default;

 private:
  etcd_link& link() { return static_cast<Store&>(*this).link_; }
  etcd_orphans& orphans() { return static_cast<Store&>(*this).orphans_; }
  void give_back(std::int64_t id) { orphans().give_back(link(), body_, id); }

  // [locked] The ask's rounds, holding lease `id` (applied_s seconds): a transaction guarded by
  // the grant's own condition (first) or by what the last read showed, judged again when its
  // compare fails.
  result<grant> ask(std::string_view owner, std::chrono::milliseconds ttl, bool ex, std::int64_t id,
                    std::int64_t applied_s) {
    etcd_rw_seen seen;  // first: nothing read (revision 0: the grant's own condition)
    etcd_rw_act act = etcd_rw_act::grant;
    for (int round = 0; round < 16; ++round) {
      const bool intent = act == etcd_rw_act::intent;
      // The intent's earlier lease (its owner's: replaced), or the one a grant deletes.
      const std::int64_t old = seen.intent ? seen.intent->lease : 0;
      const bool own_old = seen.intent && seen.intent->value == owner;
      etcd_rw_txn_body(body_, names_, seen.revision, ex, intent, owner, id,
                       ex && !intent && seen.intent);
      result<nlohmann::json> r = link().post("/kv/txn", body_);
      if (!r) {  // nobody was told: the lease goes back, with what the txn may have put
        give_back(id);
        if (own_old) give_back(old);
        return r.error();
      }
      bool succeeded = false;
      const std::optional<std::int64_t> rev = etcd_revision(*r);
      if (!json_bool(*r, "succeeded", succeeded) || !rev) return bad_shape(id);
      if (succeeded) {
        if (old != 0) give_back(old);           // replaced, or deleted with the grant: keyless now
        if (intent) return busy(seen, ex, id);  // the read was before our intent
        remember(names_.grant_key(ex), owner, *rev, id);
        return grant{fencing_token(static_cast<std::uint64_t>(*rev)),
                     etcd_ttl_capped(applied_s, ttl)};
      }
      const nlohmann::json* range = etcd_txn_range(*r, 0, 1);
      if (range == nullptr || !etcd_rw_read(*range, *rev, names_, owner, seen)) {
        return bad_shape(id);
      }
      const std::optional<etcd_rw_kv>& held = ex ? seen.writer : seen.mine;
      if (held && held->lease == id) return ours(owner, ttl, ex, *held, applied_s);
      if (seen.intent && seen.intent->lease == id) return busy(seen, ex);  // our intent, again
      act = etcd_rw_judge(seen, owner, ex);
      if (act == etcd_rw_act::again) return again(owner, ttl, ex, *held, id);
      if (act == etcd_rw_act::busy) break;
    }
    give_back(id);
    return busy(seen, ex);
  }

  // [locked] Busy, after the read `s`: notes what keeps mode `ex` out, for this thread's wait
  // (with `intent`, the lease of the intent this ask put since that read).
  std::error_code busy(const etcd_rw_seen& s, bool ex, std::int64_t intent = 0) {
    if (s.revision <= 0) return errc::busy;
    etcd_rw_blockers b;
    b.revision = s.revision;
    if (s.writer) b.leases.push_back(s.writer->lease);
    if (ex) {
      b.leases.insert(b.leases.end(), s.reader_leases.begin(), s.reader_leases.end());
      b.intent_lease = intent != 0 ? intent : s.intent ? s.intent->lease : 0;
    } else if (s.intent) {
      b.leases.push_back(s.intent->lease);
    }
    sightings_.note(names_.prefix, ex, std::move(b));
    return errc::busy;
  }

  // Our own transaction, repeated by the transport: the grant is ours.
  result<grant> ours(std::string_view owner, std::chrono::milliseconds ttl, bool ex,
                     const etcd_rw_kv& held, std::int64_t applied_s) {
    remember(names_.grant_key(ex), owner, held.create_revision, held.lease);
    return grant{fencing_token(static_cast<std::uint64_t>(held.create_revision)),
                 etcd_ttl_capped(applied_s, ttl)};
  }

  // The owner's live grant `held`, asked for again (a retry after a lost reply): the same token,
  // its own lease restarted, and the lease `id` granted for the ask given back.
  result<grant> again(std::string_view owner, std::chrono::milliseconds ttl, bool ex,
                      const etcd_rw_kv& held, std::int64_t id) {
    result<std::int64_t> left = etcd_keepalive(link(), body_, held.lease);
    give_back(id);
    if (!left) return left.error();
    if (*left <= 0) return errc::busy;  // expired, not yet deleted: etcd still has the key
    remember(names_.grant_key(ex), owner, held.create_revision, held.lease);
    return grant{fencing_token(static_cast<std::uint64_t>(held.create_revision)),
                 etcd_ttl_capped(*left, ttl)};
  }

  std::error_code bad_shape(std::int64_t id) {
    give_back(id);
    return etcd_shape(link(), "try_acquire_rw");
  }

  // [locked] The lease of the grant (k, owner, token): remembered, or read from its key (0: no
  // such grant).
  result<std::int64_t> lease_of(const std::string& k, std::string_view owner, fencing_token token) {
    const auto t = static_cast<std::int64_t>(token.value());
    if (const std::int64_t* id = remembered_.find(k, owner, t)) return *id;
    result<std::optional<etcd_kv>> kv = etcd_range(link(), body_, k);
    if (!kv) return kv.error();
    if (!*kv || (*kv)->create_revision != t || (*kv)->value != owner) return std::int64_t{0};
    return (*kv)->lease;
  }

  void remember(const std::string& k, std::string_view owner, std::int64_t token,
                std::int64_t lease) {
    remembered_.put(link().options().remembered_grants, k, owner, token, lease);
  }

  etcd_rw_names names_;          // the current call's names; guarded by the link's lock
  etcd_remembered remembered_;   // grant key -> owner, token, lease; guarded likewise
  etcd_rw_sightings sightings_;  // each thread's last busy answer; guarded likewise
  std::string body_;             // scratch, guarded likewise
};

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_DETAIL_ETCD_RW_HPP
