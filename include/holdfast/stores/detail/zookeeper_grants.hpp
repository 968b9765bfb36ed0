// SPDX-License-Identifier: MIT
// holdfast/stores/detail/zookeeper_grants.hpp - zookeeper_grants: the book of the grants a
// zookeeper_store holds in its session (the key's parent, the node, owner, token, session, end),
// the grants an expired session took (for session_expired()), and the deletion of the nodes of
// grants past their end, which the store's reaper thread (zookeeper_reaper.hpp) and the store's
// own calls run; and the nodes of this store that no caller holds any more (a create whose
// reply was lost and whose search could not run, a delete that failed, a caller that left by an
// exception), deleted by the same reaper and calls, so that no such node blocks a key's queue
// while the session lives on. Part of stores/zookeeper.hpp; not for users. Every member runs under
// the link's lock().
#ifndef HOLDFAST_STORES_DETAIL_ZOOKEEPER_GRANTS_HPP
#define HOLDFAST_STORES_DETAIL_ZOOKEEPER_GRANTS_HPP

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/stores/detail/zookeeper_link.hpp"
#include "holdfast/stores/detail/zookeeper_names.hpp"
#include "holdfast/stores/detail/zookeeper_nodes.hpp"
#include "holdfast/stores/detail/zookeeper_reaper.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

/// A grant a zookeeper_store made (or found): the key's parent node, the holder node's name,
/// owner, token, the session that created it, and its end (steady_clock: its node is deleted
/// then unless a renew moved it).
struct zookeeper_held {
  std::string parent;
  std::string name;
  std::string owner;
  fencing_token token;
  std::int64_t session = 0;
  std::chrono::steady_clock::time_point ends{};
};

/// The grants of one store (see the file overview).
class zookeeper_grants {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  using map = std::unordered_map<std::string, zookeeper_held>;

  zookeeper_grants(zookeeper_link& link, zookeeper_nodes& nodes, zookeeper_reaper& reaper)
      : link_(link), nodes_(nodes), reaper_(reaper) {}

  /// The grant on the key whose parent node is `parent`, or end().
  map::iterator find(const std::string& parent) { return held_.find(parent); }
  map::iterator end() { return held_.end(); }
  void forget(const std::string& parent) { held_.erase(parent); }

  /// Keeps `h` (every grant the store holds: its end must be kept) and schedules its end.
  void keep(zookeeper_held h) {
    if (h.ends < next_due_) next_due_ = h.ends;
    reaper_.schedule(h.ends);
    std::string parent = h.parent;
    held_[std::move(parent)] = std::move(h);
  }

  /// Moves the grant at `it` (of a session the server expired) to the lost ones.
  void lose(map::iterator it) {
    if (lost_.size() >= 4096) lost_.clear();  // session_expired() remembers the last 4096
    lost_[it->first] = std::move(it->second);
    held_.erase(it);
  }
  /// After the link opened a session: the grants of sessions the server expired are lost.
  void sweep() {
    if (link_.expiries() == expiries_seen_) return;
    expiries_seen_ = link_.expiries();
    for (auto it = held_.begin(); it != held_.end();) {
      auto next = std::next(it);
      if (it->second.session != link_.session_id()) lose(it);
      it = next;
    }
  }
  /// True iff the grant (parent, owner, token) went with an expired session.
  bool lost(const std::string& parent, std::string_view owner, fencing_token token) const {
    auto it = lost_.find(parent);
    return it != lost_.end() && it->second.owner == owner && it->second.token == token;
  }

  /// Marks a node of session `session` for deletion: `name` under `parent`, or (`by_prefix`)
  /// every node under `parent` whose name starts with `name` (a create whose reply was lost: its
  /// prefix is that create's own, zookeeper_node_prefix). The reaper deletes it soon (purge()).
  /// Never throws: out of memory, the node is left to its session.
  void doom(const std::string& parent, const std::string& name, std::int64_t session,
            bool by_prefix) noexcept {
    HOLDFAST_TRY {
      doomed_.push_back(doomed{parent, name, session, by_prefix});
      reaper_.schedule(std::chrono::steady_clock::now());
    }
    HOLDFAST_CATCH_ALL {}
  }
  /// True iff nodes wait for deletion.
  [[nodiscard]] bool doomed_left() const noexcept { return !doomed_.empty(); }
  /// Deletes the doomed nodes of the current session (those of an ended session went with it);
  /// returns when to try again (time_point::max(): nothing left). Requests: one delete per node,
  /// one list per lost create.
  time_point purge() {
    for (std::size_t i = 0; i < doomed_.size();) {
      const doomed& d = doomed_[i];
      if (d.session != link_.session_id() || link_.handle() == nullptr || purge_one(d)) {
        doomed_.erase(doomed_.begin() + static_cast<std::ptrdiff_t>(i));
        continue;
      }
      ++i;
    }
    if (doomed_.empty()) return time_point::max();
    return std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
  }

  /// True iff a grant may be past its end.
  [[nodiscard]] bool due() const { return !(std::chrono::steady_clock::now() < next_due_); }
  /// Deletes the nodes of this session's grants past their end (a delete that fails is tried
  /// again 100 ms later; a grant whose session the server ended first is lost with it);
  /// returns the next end.
  time_point reap_due() {
    const time_point now = std::chrono::steady_clock::now();
    time_point next = time_point::max();
    for (auto it = held_.begin(); it != held_.end();) {
      const zookeeper_held& h = it->second;
      const bool mine = h.session == link_.session_id();
      if (now < h.ends || !mine || link_.handle() == nullptr) {
        if (mine && h.ends < next) next = h.ends;
        ++it;
        continue;
      }
      const int rc = nodes_.remove(zookeeper_path(h.parent, h.name));
      if (rc == ZOK || rc == ZNONODE) {
        it = held_.erase(it);
        continue;
      }
      if (rc == ZSESSIONEXPIRED || rc == ZINVALIDSTATE) {  // the session's end took it first
        auto next_it = std::next(it);
        lose(it);
        it = next_it;
        continue;
      }
      next = std::min(next, now + std::chrono::milliseconds(100));
      ++it;
    }
    next_due_ = next;
    return next;
  }

 private:
  struct doomed {
    std::string parent;
    std::string name;
    std::int64_t session = 0;
    bool by_prefix = false;
  };
  static bool gone(int rc) noexcept {
    return rc == ZOK || rc == ZNONODE || rc == ZSESSIONEXPIRED || rc == ZINVALIDSTATE;
  }
  // Deletes what `d` names; true iff nothing of it is left.
  bool purge_one(const doomed& d) {
    if (!d.by_prefix) return gone(nodes_.remove(zookeeper_path(d.parent, d.name)));
    String_vector v{};
    link_.count_request();
    const int rc = zoo_get_children(link_.handle(), d.parent.c_str(), 0, &v);
    if (rc != ZOK) return gone(rc);
    bool done = true;
    for (int i = 0; i < v.count; ++i) {
      const std::string_view n(v.data[i]);
      if (n.compare(0, d.name.size(), d.name) != 0) continue;
      done = gone(nodes_.remove(zookeeper_path(d.parent, std::string(n)))) && done;
    }
    deallocate_String_vector(&v);
    return done;
  }

  zookeeper_link& link_;
  zookeeper_nodes& nodes_;
  zookeeper_reaper& reaper_;
  map held_;
  map lost_;
  std::vector<doomed> doomed_;
  std::uint64_t expiries_seen_ = 0;
  time_point next_due_ = time_point::max();
};

/// The text of a TTL refused for being under the session timeout `floor` (ms).
inline std::string zookeeper_short_ttl(std::chrono::milliseconds ttl,
                                       std::chrono::milliseconds floor) {
  return "zookeeper: the TTL of " + std::to_string(ttl.count()) +
         " ms is under the store's min_ttl of " + std::to_string(floor.count()) +
         " ms (the session timeout the server granted: a lease lives as long as its session, so "
         "a shorter TTL would outlive its holder's trust)";
}
/// Dooms (zookeeper_grants::doom) the node of one create unless disarmed: by name once known
/// (`made`), else by the create's own prefix. zookeeper_store arms one per create, so that a
/// call leaving by an error or an exception leaves no node behind.
struct zookeeper_doom_guard {
  zookeeper_grants& grants;
  const std::string& parent;
  const std::string& prefix;
  const std::string& made;
  std::int64_t session;
  bool armed;
  ~zookeeper_doom_guard() {
    if (armed) grants.doom(parent, made.empty() ? prefix : made, session, made.empty());
  }
};

/// Calls `f` (noexcept) when destroyed unless disarmed: what a call undoes when it leaves by an
/// exception.
template <class F>
struct zookeeper_on_unwind {
  F f;
  bool armed = true;
  ~zookeeper_on_unwind() {
    if (armed) f();
  }
};
template <class F>
zookeeper_on_unwind(F) -> zookeeper_on_unwind<F>;

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_DETAIL_ZOOKEEPER_GRANTS_HPP
