// SPDX-License-Identifier: MIT
// holdfast/stores/detail/zookeeper_ticket.hpp - zookeeper_ticket: a calling thread's place in a
// key's queue (zookeeper_store::try_acquire_queued), and the rule by which a contender woken by
// the deletion of the only node that was ahead of it is granted the lease without a request of
// its own. Plain C++: no ZooKeeper client. Part of stores/zookeeper.hpp; not for users.
//
// Why no request is needed then. The list a contender read after its create (same session, so
// after the create in the server's order) named every node under the key with a lower sequence
// that still existed; none with a lower sequence can be created later (a parent's sequence only
// grows, and the parent, a container, stays while the contender's own node is in it). If that
// list named exactly one node ahead and ZooKeeper then reported that node deleted, no node is
// ahead any more: the contender's node is the lowest, so it holds the lease (ZooKeeper's lock
// recipe; a second list would only confirm it). Its node lives as long as its session, and the
// server ends a session no earlier than the session timeout after the last request it heard from
// it. The last request known heard is the wait's exists (answered), sent at `heard`: so the grant
// reports the session timeout less the time since `heard`, and asks again (a list, whose request
// restarts the timeout) when less than half of it is left.
//
// Such a grant reports less than the TTL asked, and less than the store's min_ttl() (the session
// timeout): its holder renews with the TTL it asked for, not the one granted (lease<> keeps it:
// lease::asked_ttl()), which renew accepts; validity follows the shorter grant.
#ifndef HOLDFAST_STORES_DETAIL_ZOOKEEPER_TICKET_HPP
#define HOLDFAST_STORES_DETAIL_ZOOKEEPER_TICKET_HPP

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/store.hpp"
#include "holdfast/stores/detail/zookeeper_grants.hpp"
#include "holdfast/stores/detail/zookeeper_nodes.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

/// A calling thread's place in a key's queue: its node, the node just ahead of it, and what its
/// wait learnt (see the file overview).
struct zookeeper_ticket {
  std::string parent;
  std::string name;
  std::string ahead;         ///< the node just ahead (the one its wait watches)
  std::int64_t session = 0;  ///< the session that created `name`
  std::int64_t czxid = 0;    ///< `name`'s czxid: the token of its grant
  bool alone = false;        ///< the list after the create named `ahead` alone ahead of it
  bool ahead_gone = false;   ///< a wait saw `ahead` deleted (an event, or exists: no node)
  std::chrono::steady_clock::time_point heard{};  ///< sent: the wait's answered exists
};

/// The place of this owner's node `keep`, not first among `kids` (its list after its create, in
/// sequence order): the node just ahead of it, and whether that node is the only one ahead.
inline zookeeper_ticket zookeeper_place(const std::vector<zookeeper_child>& kids,
                                        const zookeeper_held& keep) {
  zookeeper_ticket t{
      keep.parent, keep.name, {}, keep.session, static_cast<std::int64_t>(keep.token.value())};
  for (const zookeeper_child& c : kids) {
    if (c.name == keep.name) break;
    t.ahead = c.name;
  }
  t.alone = kids.size() > 1 && kids[1].name == keep.name;
  return t;
}

/// Returns the TTL (ms) of a grant with no request for `t` in a call that began at `start`, on
/// a session whose timeout is `granted` (ms): `granted` less the time since `t.heard`, rounded
/// down to whole ms; nullopt if `t` did not see its only node ahead deleted, or if less than
/// half of `granted` is left (exactly half still grants). See the file overview.
inline std::optional<std::chrono::milliseconds> zookeeper_woken_ttl(
    const zookeeper_ticket& t, std::chrono::steady_clock::time_point start,
    std::chrono::milliseconds granted) {
  if (!t.alone || !t.ahead_gone || granted <= std::chrono::milliseconds::zero()) {
    return std::nullopt;
  }
  const std::chrono::nanoseconds since =
      t.heard < start ? std::chrono::nanoseconds(start - t.heard) : std::chrono::nanoseconds(0);
  const std::chrono::nanoseconds left = std::chrono::nanoseconds(granted) - since;
  if (left * 2 < std::chrono::nanoseconds(granted)) return std::nullopt;
  return std::chrono::duration_cast<std::chrono::milliseconds>(left);
}

/// The grant {token, TTL} and its record for `t` if its wait saw it first in line
/// (zookeeper_woken_ttl; `prefix`: the owner part of `owner`'s node names, so a place of
/// another owner is never granted), asked with `ttl` at `start` on a session of timeout
/// `granted`; nullopt: a list must decide.
inline std::optional<std::pair<grant, zookeeper_held>> zookeeper_woken(
    const zookeeper_ticket& t, const std::string& prefix, std::string_view owner,
    std::chrono::steady_clock::time_point start, std::chrono::milliseconds ttl,
    std::chrono::milliseconds granted) {
  if (t.name.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
  const std::optional<std::chrono::milliseconds> left = zookeeper_woken_ttl(t, start, granted);
  if (!left) return std::nullopt;
  const grant g{fencing_token(static_cast<std::uint64_t>(t.czxid)), std::min(ttl, *left)};
  zookeeper_held h{t.parent, t.name, std::string(owner), g.token, t.session, start + g.ttl};
  return std::make_pair(g, std::move(h));
}

/// Notes in the calling thread's ticket among `tickets` that the node at `path` ahead of it was
/// deleted (a wait's event). Under the store's lock.
inline void zookeeper_note_gone(std::unordered_map<std::thread::id, zookeeper_ticket>& tickets,
                                const std::string& path) {
  auto it = tickets.find(std::this_thread::get_id());
  if (it == tickets.end()) return;
  zookeeper_ticket& t = it->second;
  if (path.size() == t.parent.size() + 1 + t.ahead.size() &&
      path.compare(0, t.parent.size(), t.parent) == 0 &&
      path.compare(t.parent.size() + 1, std::string::npos, t.ahead) == 0) {
    t.ahead_gone = true;
  }
}

/// Takes the calling thread's place among `tickets` out, leaving its node to `grants`' reaper
/// (zookeeper_grants::doom). Under the store's lock.
inline void zookeeper_doom_place(std::unordered_map<std::thread::id, zookeeper_ticket>& tickets,
                                 zookeeper_grants& grants) {
  auto it = tickets.find(std::this_thread::get_id());
  if (it == tickets.end()) return;
  grants.doom(it->second.parent, it->second.name, it->second.session, false);
  tickets.erase(it);
}

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_DETAIL_ZOOKEEPER_TICKET_HPP
