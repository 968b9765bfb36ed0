// SPDX-License-Identifier: MIT
// holdfast/stores/zookeeper.hpp - zookeeper_store: a LeaseStore in ZooKeeper (3.5 and later),
// the seeds' ephemeral-sequential lock, whose fencing token is the holder node's czxid. Opt-in:
// needs ZooKeeper's multi-threaded C client (Debian: libzookeeper-mt-dev; link
// -lzookeeper_mt); nothing in the core includes it.
//
// A lease on key K is an ephemeral sequential node under root/<K escaped> (a container node the
// server deletes once empty): "<16 hex of SHA-256(owner)>-<16 hex session id>-<8 hex count of
// the store's creates>-<10-digit sequence>", whose data is the owner's bytes. The contender with
// the lowest sequence holds the lease; the others queue behind it in sequence order (FIFO: the
// fairness a TTL lock lacks): the recipe of ZooKeeper's documentation and Curator's
// InterProcessMutex, with these differences:
//  - the fencing token is the holder node's czxid: the zxid of the transaction that created it,
//    committed through Zab, increasing across leader changes (the epoch is its high 32 bits)
//    and restarts (the transaction log), so per key every holder's token is greater than every
//    earlier holder's (a node created later has a higher sequence *and* a higher zxid). Tokens
//    are not store-wide: a contender queued early holds a lower czxid than a grant of another
//    key made meanwhile. Curator hands out no token at all.
//  - try_acquire does not wait: a contender that is not first deletes its node again (busy);
//    only try_acquire_queued (blocking acquire()) keeps it as a place in the queue.
//  - "protected" create (Curator's withProtection): a prefix no other create has lets a call
//    whose create lost its reply (ConnectionLoss after the server applied it) find its own node
//    in the same session, so no node is orphaned and no client queues twice; and release
//    deletes a grant's node by name without reading it (no other node ever has that name).
//  - no node outlives its caller: one whose caller left without it (a lost reply whose search
//    could not run, a failed delete, an exception) is deleted by the reaper (every 100 ms until
//    the server answers) and the store's next call. Left to the session: a place whose thread
//    ended without leave_queue or its next wait.
//
//   operation   | requests (round trips)                       | why
//   ------------+----------------------------------------------+--------------------------------
//   acquire     | create (ephemeral sequential), get_children  | a node's place shows only in
//               | pipelined: one round trip                (2) | the list of its siblings
//     lost reply| + sync, get of each own-prefixed node        | the list must see the create
//     busy      | + delete of the new node                 (3) | nothing is left behind
//     same owner| + get of the older node, delete of the new   | T1's retry rule: the older node
//               |                                          (4) | (its token) is kept
//   renew       | exists of the holder node                (1) | the session keeps it alive
//   release     | delete                                   (1) | the name is this grant's alone
//   inspect     | get_children, get of the lowest          (2) |
//   wait, queued| exists with a watch on the node ahead   (1) | woken: no request (below)
//   (a store that did not make the grant first finds the holder: get_children + get)
//
// TTL and validity. An ephemeral node lives as long as the session that created it, and the
// ZooKeeper leader ends a session (deleting its nodes) once it has heard nothing from the client
// for the session timeout, which the server negotiates (between minSessionTimeout and
// maxSessionTimeout: 2 and 20 ticks by default). There is no per-node TTL (TTL nodes are
// persistent, need extendedTypesEnabled and are reaped once a minute), so the mapping is:
//  - one session per store, shared by its leases; a grant reports TTL = the granted session
//    timeout (min_ttl(); at most the TTL asked; a woken grant less, below). The server cannot end
//    it earlier: it counts the timeout from the last request it received, which left the holder
//    after the holder's clock reading that starts its validity (DESIGN.md section 4). A holder that
//    lost contact for the session timeout must assume the lease lost, and lease<> does: its
//    validity is that TTL.
//  - a TTL shorter than the session timeout is refused with invalid_argument naming min_ttl:
//    the node would outlive what its holder trusts (a crashed holder would block others for the
//    session timeout, not its TTL), as etcd's minimum lease TTL.
//  - renew confirms the node still exists in this session (one exists request, which is also a
//    heartbeat) and moves the grant's end to the call's start + TTL. The session's pings keep the
//    node alive meanwhile, however long, so the store ends a grant that was not renewed itself
//    (T2): at its end (steady_clock, read when the acquire or renew call began: after the
//    holder's own reading) a reaper thread, and every call of the store first, deletes the node;
//    a renew or release after the end answers lease_lost / not_holder. A lease thus ends with its
//    release, its TTL, the session (expired, or the store destroyed: zookeeper_close deletes
//    the nodes at once) or its node deleted behind holdfast's back. A store cut off from the
//    server deletes late, but the server then ends the session after the session timeout. Session
//    expiry is a lost lease: renew answers lease_lost, last_error_message() says the session
//    expired, and session_expired() tells lease<>, whose on-loss callback gets
//    loss_cause::session_expired.
//  - a lost create reply's search for one's own node syncs the parent first (as Curator does):
//    a follower the client reconnected to may not have applied the create yet.
//  - a contender woken first in line (below) is granted with no request, TTL = the session
//    timeout less the time since its wait's last answered request (detail/zookeeper_ticket.hpp):
//    less than asked and than min_ttl(); lease<> renews with the TTL it asked for.
//
// Waiting (wait_for_release, try_acquire_queued, leave_queue) without polling and without a
// herd: a queued contender watches (zoo_wexists) only the node just ahead of it, so a release
// wakes exactly the next contender. If its list after its create named that node alone ahead,
// the deletion event is its grant (no request); else it lists again (one request).
// A waiter with no place (watch_release, or no queued attempt) watches the holder's node: every
// such watcher wakes. A dropped connection or an expired session wakes every waiter (it
// re-checks): a waiter never sleeps past the holder's node going away. An exception out of the
// wait (never holdfast's own) takes the caller's place out with it.
//
// Keys: any bytes, escaped or hashed into one node name (detail/zookeeper_names.hpp). Owners: any
// bytes up to zookeeper_options::max_owner_bytes. Failures (T4): no server in connect_timeout, a
// lost connection (ConnectionLoss) or an expired session is store_unavailable, an operation timeout
// timeout, a refused digest or ACL permission_denied, hosts the client cannot parse or resolve
// misconfigured (none retried by acquire()); the client's text in last_error_message().
//
// Files: this header; zookeeper_options.hpp; zookeeper_fence.hpp (fenced writes in ZooKeeper);
// detail/: zookeeper_link (the session, events, errors), _names, _nodes, _grants, _ticket.
#ifndef HOLDFAST_STORES_ZOOKEEPER_HPP
#define HOLDFAST_STORES_ZOOKEEPER_HPP

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "holdfast/cancel.hpp"
#include "holdfast/deployment.hpp"
#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/result.hpp"
#include "holdfast/store.hpp"
#include "holdfast/stores/detail/link_client.hpp"
#include "holdfast/stores/detail/zookeeper_deployment.hpp"
#include "holdfast/stores/detail/zookeeper_grants.hpp"
#include "holdfast/stores/detail/zookeeper_link.hpp"
#include "holdfast/stores/detail/zookeeper_names.hpp"
#include "holdfast/stores/detail/zookeeper_nodes.hpp"
#include "holdfast/stores/detail/zookeeper_reaper.hpp"
#include "holdfast/stores/detail/zookeeper_ticket.hpp"
#include "holdfast/stores/zookeeper_fence.hpp"
#include "holdfast/stores/zookeeper_options.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

/// A LeaseStore in ZooKeeper (see the file overview for the nodes, the requests, the TTL
/// mapping and waiting). Models LeaseStore with inspect(), wait_for_release(), watch_release(),
/// try_acquire_queued() and leave_queue().
///
/// Differences from memory_store: a grant's TTL is the session timeout the server granted
/// (min_ttl()), or less for a queued grant woken with no request (see the file overview: renew
/// with the TTL asked, as lease<> does), and a TTL under min_ttl() is invalid_argument; a lease
/// also ends with its session (session_expired() says so); tokens are per key (czxids), not
/// store-wide. Only the session that made a grant renews it (another process with the same owner
/// gets lease_lost from renew and busy from try_acquire: it cannot keep that session alive).
///
/// Thread-safety: every member function may be called concurrently; one mutex serializes the
/// store's requests (waits sleep without it) and its reaper thread's deletes of grants past
/// their end. Not fork-safe: a child process makes its own store.
class zookeeper_store : public detail::link_client<detail::zookeeper_link> {
 public:
  // options(), last_error_message() (the latest call's failure): detail::link_client.

  /// Makes a store for the ensemble in `opts`; opens its session on first use (or connect()).
  explicit zookeeper_store(zookeeper_options opts = {})
      : link_client(std::in_place, std::move(opts)) {}

  zookeeper_store(const zookeeper_store&) = delete;
  zookeeper_store& operator=(const zookeeper_store&) = delete;

  /// Returns the shortest TTL this store grants, in ms: the session timeout the server granted
  /// (options().session_timeout until the first session). See holdfast::store_min_ttl().
  /// Thread-safe.
  [[nodiscard]] std::chrono::milliseconds min_ttl() const noexcept {
    return link_.granted_timeout();
  }

  /// Grants `key` to `owner` iff no other contender is ahead: creates the owner's ephemeral
  /// sequential node and lists its siblings; first in line is a grant, else the node is deleted.
  /// The same owner re-acquiring its live lease (in this session) gets the same token back.
  /// \returns the grant {token = the holder node's czxid, ttl = the session timeout};
  ///   errc::busy if another contender is ahead (or this owner's node of another session);
  ///   errc::invalid_argument for an empty key/owner, a TTL not in [min_ttl(), max_ttl], an
  ///   owner over options().max_owner_bytes; store_unavailable (no server, a lost connection: a
  ///   node whose create applied is found and deleted or kept, never orphaned), timeout,
  ///   permission_denied (ACL, digest), misconfigured (hosts), protocol_error (a node under the
  ///   key that holdfast did not make).
  result<grant> try_acquire(std::string_view key, std::string_view owner,
                            std::chrono::milliseconds ttl) {
    return acquire_as(key, owner, ttl, false);
  }

  /// try_acquire that, when `key` is busy, keeps the calling thread's node as its place in the
  /// queue for its next wait_for_release on `key` (store.hpp's try_acquire_queued); a later
  /// attempt finds it again (its token is that node's czxid). A place in another key's queue is
  /// left. \returns as try_acquire, but a grant woken with no request (second in line, its node
  ///   ahead deleted) reports the session timeout less the time since its wait's exists.
  result<grant> try_acquire_queued(std::string_view key, std::string_view owner,
                                   std::chrono::milliseconds ttl) {
    return acquire_as(key, owner, ttl, true);
  }

  /// Confirms that `owner` holds `key` with `token` in this store's session: one exists request
  /// (two more if this store did not make the grant).
  /// \returns the grant {token, the session timeout}; errc::lease_lost if the node is gone (its
  ///   session expired: last_error_message() says so; released; deleted), another contender
  ///   holds the key, or the node belongs to another session; invalid_argument
  ///   (check_renew_args, an owner over max_owner_bytes, or a TTL under min_ttl());
  ///   store_unavailable, timeout as try_acquire.
  result<grant> renew(std::string_view key, std::string_view owner, fencing_token token,
                      std::chrono::milliseconds ttl) {
    if (std::error_code ec = check_renew_args(key, owner, token, ttl)) return ec;
    if (std::error_code ec = detail::zookeeper_check_args(link_, {}, owner)) return ec;
    if (token > zookeeper_max_token) return errc::lease_lost;
    const time_point start = std::chrono::steady_clock::now();
    auto guard = link_.lock();
    if (std::error_code ec = ready(ttl)) return ec;
    result<std::optional<held>> h = holder_of(key, owner, token);
    if (!h) return h.error();
    if (!*h && grants_.lost(parent_of(key), owner, token)) {
      return link_.fail(errc::lease_lost, link_.lost_session());
    }
    if (!*h) return errc::lease_lost;
    if ((*h)->session != link_.session_id()) {
      grants_.forget((*h)->parent);
      return link_.fail(errc::lease_lost, "zookeeper: renew: the node is held by session " +
                                              detail::zookeeper_session_text((*h)->session) +
                                              ", not this store's");
    }
    const grant g{token, std::min(ttl, link_.granted_timeout())};
    (*h)->ends = start + g.ttl;
    grants_.keep(std::move(**h));
    return g;
  }

  /// Frees `key` iff `owner` holds it with `token`: deletes the holder node (the next contender's
  /// watch fires). \returns success; errc::not_holder if the key is free or held by another
  ///   owner or token; invalid_argument (check_release_args, an owner over max_owner_bytes);
  ///   store_unavailable, timeout.
  result<void> release(std::string_view key, std::string_view owner, fencing_token token) {
    if (std::error_code ec = check_release_args(key, owner, token)) return ec;
    if (std::error_code ec = detail::zookeeper_check_args(link_, {}, owner)) return ec;
    if (token > zookeeper_max_token) return errc::not_holder;
    auto guard = link_.lock();
    if (std::error_code ec = ready(std::chrono::milliseconds::max())) return ec;
    // A grant of this store's session is deleted by name without reading it first: no other
    // node can ever have that name (zookeeper_node_prefix), so the delete is the check.
    result<std::optional<held>> h = holder_of(key, owner, token, false);
    if (!h) return h.error();
    if (!*h) return errc::not_holder;
    grants_.forget((*h)->parent);
    const std::string path = (*h)->parent + "/" + (*h)->name;
    const int rc = nodes_.remove(path);
    if (rc == ZNONODE) return errc::not_holder;
    if (rc != ZOK) return link_.fail_rc(rc, "delete", path);
    return {};
  }

  /// Reports the holder of `key`: its owner, token (czxid) and, as time left, the session
  /// timeout (the least it stays after its holder's last contact). Two requests.
  /// \returns the record, or nullopt if no contender holds it; invalid_argument for an empty
  ///   key; store_unavailable, timeout, protocol_error as try_acquire.
  result<std::optional<lease_record>> inspect(std::string_view key) {
    if (key.empty()) return errc::invalid_argument;
    auto guard = link_.lock();
    if (std::error_code ec = ready(std::chrono::milliseconds::max())) return ec;
    result<std::optional<detail::zookeeper_node>> first = nodes_.first(parent_of(key));
    if (!first) return first.error();
    if (!*first) return std::optional<lease_record>();
    return std::optional<lease_record>(lease_record{
        std::move((*first)->data), fencing_token(static_cast<std::uint64_t>((*first)->stat.czxid)),
        link_.granted_timeout()});
  }

  /// Takes the calling thread's place in a queue (try_acquire_queued) out: deletes its node, so
  /// the contender behind it watches the one ahead at once. \returns success (also with no
  ///   place); invalid_argument for an empty key; store_unavailable if the delete failed (the
  ///   store's reaper deletes the node once the server answers again, every 100 ms).
  result<void> leave_queue(std::string_view key) {
    if (key.empty()) return errc::invalid_argument;
    auto guard = link_.lock_quiet();  // a failed call's cleanup: keeps that call's text
    auto it = tickets_.find(std::this_thread::get_id());
    if (it == tickets_.end()) return {};
    const ticket t = std::move(it->second);
    tickets_.erase(it);
    if (t.session != link_.session_id()) return {};
    const std::string path = t.parent + "/" + t.name;
    const int rc = nodes_.remove(path);
    if (rc == ZOK || rc == ZNONODE) return {};
    grants_.doom(t.parent, t.name, t.session, false);  // the reaper tries again
    return link_.fail_rc(rc, "delete", path);
  }

  /// Blocks until `key` may be free or `deadline`, without polling (store.hpp's
  /// wait_for_release). Queued (try_acquire_queued left this thread a place), it watches the node
  /// just ahead of its own: a release wakes only the next contender. Else it watches the
  /// holder's node. Returns at once if that node is gone; wakes when it is deleted (released, or
  /// its session ended), on any session event (connection lost or regained, expiry), or at
  /// `deadline`. Requests: one exists with a watch (get_children + exists without a place).
  /// A stop of `cancel` ends the wait at once (cancel.hpp), its place kept for the caller's
  /// leave_queue. Thread-safety: any number of threads may wait at once; the store's mutex is not
  /// held while asleep. \returns success (woken for any reason above); errc::cancelled once
  ///   `cancel` was stopped; invalid_argument for an empty key; store_unavailable, timeout if a
  ///   read fails (the caller falls back to backoff).
  result<void> wait_for_release(std::string_view key,
                                const std::chrono::steady_clock::time_point& deadline,
                                const cancel_token& cancel = {}) {
    if (key.empty()) return errc::invalid_argument;
    return wait_gone(key, deadline, true, cancel);
  }

  /// Returns what this store reads about its ensemble now (deployment.hpp,
  /// detail/zookeeper_deployment.hpp): one getconfig request (the members) and the connected
  /// server's answer to "srvr" (mode standalone/leader/follower, version, last zxid), each
  /// bounded by connect_timeout; life is the zxid's epoch (new with every leader). Risks: a
  /// standalone server, an even member count. \returns the report; store_unavailable,
  /// timeout, permission_denied as try_acquire. Thread-safe.
  result<deployment_report> deployment() {
    auto guard = link_.lock();
    return detail::read_zookeeper_deployment(link_);
  }

  /// Returns true iff the lease (`key`, `owner`, `token`) this store granted was lost with an
  /// expired session (holdfast::store_session_expired(): lease<> then reports
  /// loss_cause::session_expired). Remembers the last 4096 such leases. Thread-safe.
  bool session_expired(std::string_view key, std::string_view owner, fencing_token token) {
    if (key.empty()) return false;
    auto guard = link_.lock();
    return grants_.lost(parent_of(key), owner, token);
  }

  /// For observers (election::next_leader): waits for the holder's node to go, in no queue:
  /// every watcher wakes on a release. \returns as wait_for_release.
  result<void> watch_release(std::string_view key,
                             const std::chrono::steady_clock::time_point& deadline,
                             const cancel_token& cancel = {}) {
    if (key.empty()) return errc::invalid_argument;
    return wait_gone(key, deadline, false, cancel);
  }

 private:
  using time_point = std::chrono::steady_clock::time_point;
  using held = detail::zookeeper_held;
  using ticket = detail::zookeeper_ticket;  // a thread's place in a queue (try_acquire_queued)

  std::string parent_of(std::string_view key) const {
    std::string p = link_.options().root;
    p += '/';
    detail::zookeeper_key_name(key, p);
    return p;
  }

  // A session, and a TTL this store can grant (ttl >= min_ttl()).
  // Also sets aside the grants an expired session took (session_expired()) and deletes the
  // nodes of this store's grants past their end.
  std::error_code ready(std::chrono::milliseconds ttl) {
    if (std::error_code ec = link_.ensure_connected()) return ec;
    grants_.sweep();
    if (grants_.due()) (void)grants_.reap_due();
    if (grants_.doomed_left()) (void)grants_.purge();
    const std::chrono::milliseconds floor = link_.granted_timeout();
    if (!(ttl < floor)) return {};
    return link_.fail(errc::invalid_argument, detail::zookeeper_short_ttl(ttl, floor));
  }

  result<grant> acquire_as(std::string_view key, std::string_view owner,
                           std::chrono::milliseconds ttl, bool queue) {
    if (std::error_code ec = check_acquire_args(key, owner, ttl)) return ec;
    if (std::error_code ec = detail::zookeeper_check_args(link_, {}, owner)) return ec;
    const time_point start = std::chrono::steady_clock::now();
    auto guard = link_.lock();
    if (std::error_code ec = ready(ttl)) return ec;
    const std::string parent = parent_of(key);
    leave_other_queue(parent);
    const std::string mine_prefix = detail::zookeeper_owner_prefix(owner);
    for (int round = 0;; ++round) {
      const std::int64_t sid = link_.session_id();
      const std::string prefix = detail::zookeeper_node_prefix(mine_prefix, sid, ++creates_);
      std::string made;
      Stat st{};
      auto t = tickets_.find(std::this_thread::get_id());
      // This thread's place in this queue: no new node, one list (a hand-off's only request).
      const bool placed = round == 0 && t != tickets_.end() && t->second.session == sid;
      // A node this call made and did not hand on (grant, place, deleted) is doomed as it leaves.
      detail::zookeeper_doom_guard guard{grants_, parent, prefix, made, sid, !placed};
      result<std::vector<detail::zookeeper_child>> kids = std::vector<detail::zookeeper_child>();
      if (placed) {
        made = t->second.name;
        st.czxid = t->second.czxid;
        // Woken first in line: no list (zookeeper_ticket.hpp), or else the list decides.
        if (auto w = detail::zookeeper_woken(t->second, mine_prefix, owner, start, ttl,
                                             link_.granted_timeout())) {
          tickets_.erase(t);
          grants_.keep(std::move(w->second));
          return w->first;
        }
        kids = nodes_.children(parent);
      } else if (std::error_code ec = enter(parent, prefix, owner, made, st, kids)) {
        if (link_.session_id() != sid) guard.armed = false;  // the node went with its session
        return ec;
      }
      if (!kids) return kids.error();
      result<std::vector<held>> mine = own_nodes(parent, mine_prefix, owner, made, st, *kids);
      if (!mine) return mine.error();
      guard.armed = false;  // judge() hands every node on; with none, none was left
      if (!mine->empty()) return judge(*kids, std::move(mine->front()), start, ttl, queue);
      tickets_.erase(std::this_thread::get_id());
      if (!placed) {
        return link_.fail(errc::store_unavailable,
                          "zookeeper: create under " + parent +
                              ": the connection was lost and the node is not there (not "
                              "applied, or deleted since): nothing was left behind");
      }
      // The place went (deleted behind holdfast's back): queue anew, once.
    }
  }

  // Creates this attempt's node (`made`, its Stat in `st`) and lists its siblings into `kids`
  // (pipelined: one round trip). A create whose reply was lost leaves `made` empty: once the
  // session is back, own_nodes() finds the node if the create applied (by its prefix, this
  // create's own), so it is neither orphaned nor doubled. A session that expired meanwhile took
  // the node with it.
  std::error_code enter(const std::string& parent, const std::string& prefix,
                        std::string_view owner, std::string& made, Stat& st,
                        result<std::vector<detail::zookeeper_child>>& kids) {
    const std::int64_t sid = link_.session_id();
    const int rc = nodes_.create_listed(parent, prefix, owner, made, st, kids);
    if (rc == ZOK) return {};
    made.clear();
    if (rc != ZCONNECTIONLOSS) return link_.fail_rc(rc, "create", parent + "/" + prefix);
    if (std::error_code ec = link_.ensure_connected()) return ec;
    if (link_.session_id() != sid) return link_.fail(errc::store_unavailable, link_.lost_session());
    const int synced = nodes_.sync(parent);  // the list below must see the create if it applied
    if (synced != ZOK) return link_.fail_rc(synced, "sync", parent);
    kids = nodes_.children(parent);
    return {};
  }

  // This owner's nodes of this session among `kids`, first in line first; all but the first (a
  // doubled create, a place a lost reply hid) are deleted.
  result<std::vector<held>> own_nodes(const std::string& parent, const std::string& prefix,
                                      std::string_view owner, const std::string& made,
                                      const Stat& st,
                                      const std::vector<detail::zookeeper_child>& kids) {
    const std::int64_t sid = link_.session_id();
    std::vector<held> mine;
    for (const detail::zookeeper_child& c : kids) {
      if (c.name.compare(0, prefix.size(), prefix) != 0) continue;
      if (!detail::zookeeper_name_of_session(c.name, sid)) continue;  // another session's
      std::int64_t czxid = st.czxid;
      if (c.name != made) {
        result<std::optional<detail::zookeeper_node>> n = nodes_.get(parent, c.name);
        if (!n) return n.error();
        if (!*n || (*n)->data != owner || (*n)->stat.ephemeralOwner != sid) continue;
        czxid = (*n)->stat.czxid;
      }
      mine.push_back(held{parent, c.name, std::string(owner),
                          fencing_token(static_cast<std::uint64_t>(czxid)), sid});
    }
    for (std::size_t i = 1; i < mine.size(); ++i) remove_or_doom(parent, mine[i].name, sid);
    return mine;
  }

  // Deletes parent/name, or leaves it to the reaper (zookeeper_grants::doom) if that fails.
  void remove_or_doom(const std::string& parent, const std::string& name, std::int64_t session) {
    const int rc = nodes_.remove(detail::zookeeper_path(parent, name));
    if (rc != ZOK && rc != ZNONODE) grants_.doom(parent, name, session, false);
  }

  // The answer for this owner's node `keep` among `kids`: a grant if first in line, else busy,
  // keeping it as the calling thread's place if `queue`, deleting it if not.
  result<grant> judge(const std::vector<detail::zookeeper_child>& kids, held keep, time_point start,
                      std::chrono::milliseconds ttl, bool queue) {
    const std::thread::id me = std::this_thread::get_id();
    if (keep.name == kids.front().name) {
      tickets_.erase(me);
      const grant g{keep.token, std::min(ttl, link_.granted_timeout())};
      keep.ends = start + g.ttl;
      grants_.keep(std::move(keep));
      return g;
    }
    if (!queue) {
      tickets_.erase(me);
      remove_or_doom(keep.parent, keep.name, keep.session);
      return errc::busy;
    }
    tickets_[me] = detail::zookeeper_place(kids, keep);
    return errc::busy;
  }

  // The holder of `key` if it is `owner` with `token` (remembered, else found: the first node
  // under the key's parent); nullopt if another or none holds it. A remembered grant is read
  // (exists: still there, still that czxid) only if `confirm`.
  result<std::optional<held>> holder_of(std::string_view key, std::string_view owner,
                                        fencing_token token, bool confirm = true) {
    const std::string parent = parent_of(key);
    auto it = grants_.find(parent);
    if (it != grants_.end() && it->second.owner == owner && it->second.token == token) {
      if (it->second.session != link_.session_id()) {
        grants_.lose(it);
        link_.fail(errc::lease_lost, link_.lost_session());
        return std::optional<held>();
      }
      if (!(std::chrono::steady_clock::now() < it->second.ends)) {
        (void)grants_.reap_due();  // past its end: deleted (or left to the reaper), not renewed
        return std::optional<held>();
      }
      if (!confirm) return std::optional<held>(it->second);
      Stat st{};
      const std::string path = parent + "/" + it->second.name;
      const int rc = nodes_.exists(path, st, false);
      if (rc == ZNONODE) {
        grants_.forget(parent);
        return std::optional<held>();
      }
      if (rc != ZOK) return link_.fail_rc(rc, "exists", path);
      if (static_cast<std::uint64_t>(st.czxid) != token.value()) return std::optional<held>();
      it->second.session = st.ephemeralOwner;
      return std::optional<held>(it->second);
    }
    result<std::optional<detail::zookeeper_node>> first = nodes_.first(parent);
    if (!first) return first.error();
    if (!*first || (*first)->data != owner ||
        static_cast<std::uint64_t>((*first)->stat.czxid) != token.value()) {
      return std::optional<held>();
    }
    held h{parent, (*first)->name, std::string(owner), token, (*first)->stat.ephemeralOwner};
    return std::optional<held>(std::move(h));
  }

  // The wait of wait_for_release and watch_release (see there).
  result<void> wait_gone(std::string_view key, std::chrono::steady_clock::time_point deadline,
                         bool from_busy, const cancel_token& cancel) {
    if (cancel.stop_requested()) return errc::cancelled;
    std::string path;
    std::uint64_t seen = 0;
    ticket* mine = nullptr;  // the calling thread's place, if it waits from one (under the lock)
    {
      auto guard = link_.lock();
      if (std::chrono::steady_clock::now() >= deadline) return {};
      if (std::error_code ec = link_.ensure_connected()) return ec;
      const std::string parent = parent_of(key);
      auto it = tickets_.find(std::this_thread::get_id());
      if (from_busy && it != tickets_.end() && it->second.parent == parent &&
          it->second.session == link_.session_id()) {
        if (it->second.ahead.empty()) return {};  // first in line: ask again
        path = parent + "/" + it->second.ahead;
        mine = &it->second;
      } else {
        result<std::vector<detail::zookeeper_child>> kids = nodes_.children(parent);
        if (!kids) return kids.error();
        if (kids->empty()) return {};  // free
        path = parent + "/" + kids->front().name;
      }
      seen = link_.watch_interest(path);
      Stat st{};
      const time_point sent = std::chrono::steady_clock::now();
      const int rc = nodes_.exists(path, st, true);
      if (mine != nullptr && (rc == ZOK || rc == ZNONODE)) mine->heard = sent;  // answered
      if (rc != ZOK) {
        link_.forget_watch(path);
        if (rc != ZNONODE) return link_.fail_rc(rc, "exists", path);
        if (mine != nullptr) mine->ahead_gone = true;
        return {};  // gone already
      }
    }
    // An exception out of the sleep (a user's cancel wake-up, the tests' fault hook) takes this
    // thread's place out: its caller leaves, and no node may outlive it.
    detail::zookeeper_on_unwind guard{[&]() noexcept { leave_watch(path); }};
    if (link_.fault) (void)link_.fault("wait");
    link_.wait_event(path, seen, deadline, cancel);
    guard.armed = false;
    const bool gone = mine != nullptr && link_.deleted(path);
    link_.forget_watch(path);
    if (gone) {  // the node ahead is gone for good: the next attempt may need no list
      auto again = link_.lock_quiet();
      detail::zookeeper_note_gone(tickets_, path);
    }
    if (cancel.stop_requested()) return errc::cancelled;
    return {};
  }
  // Forgets the watch on `path`, dooms the calling thread's place (out of memory, it stays).
  void leave_watch(const std::string& path) noexcept {
    HOLDFAST_TRY {
      link_.forget_watch(path);
      auto guard = link_.lock();
      detail::zookeeper_doom_place(tickets_, grants_);
    }
    HOLDFAST_CATCH_ALL {}
  }
  // Deletes the calling thread's place in a queue other than `parent`'s, or of an old session.
  void leave_other_queue(const std::string& parent) {
    auto it = tickets_.find(std::this_thread::get_id());
    if (it == tickets_.end() || it->second.parent == parent) return;
    const ticket t = std::move(it->second);
    tickets_.erase(it);
    if (t.session == link_.session_id()) remove_or_doom(t.parent, t.name, t.session);
  }
  detail::zookeeper_nodes nodes_{link_};
  detail::zookeeper_grants grants_{link_, nodes_, reaper_};  // guarded by the link's mutex
  std::unordered_map<std::thread::id, ticket> tickets_;      // guarded by the link's mutex
  std::uint32_t creates_ = 0;  // this store's creates (node names: zookeeper_node_prefix)
  // Last: destroyed (its thread joined) before what its reap function uses.
  detail::zookeeper_reaper reaper_{[this] {
    auto guard = link_.lock_quiet();  // not a caller's call: leaves last_error_message()
    const time_point next = grants_.reap_due();
    return std::min(next, grants_.purge());
  }};
};

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_ZOOKEEPER_HPP
