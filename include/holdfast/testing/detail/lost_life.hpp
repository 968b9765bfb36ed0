// SPDX-License-Identifier: MIT
// holdfast/testing/detail/lost_life.hpp - how the checker follows a store that came back from a
// lagging copy (sim_store's lagging restart: its store_up event has value = operations lost > 0
// and token = the number of history events before the copy was taken).
//
// From there on the store's records are the copy's: S2 and S3 are judged within each life of its
// state ("before" is what the copy holds, so a lost grant's token may be issued again), and a
// holder whose grant or renewal was lost may go on believing it holds (S4 is not promised for
// it). S1 is untouched: the resources remember what they admitted, whatever the store lost.
//
// Not a public header (checker.hpp uses it).
#ifndef HOLDFAST_TESTING_DETAIL_LOST_LIFE_HPP
#define HOLDFAST_TESTING_DETAIL_LOST_LIFE_HPP

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <set>
#include <string>
#include <tuple>

#include "holdfast/detail/config.hpp"
#include "holdfast/testing/history.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace testing {
namespace detail {

// Grants and renewals a store lost: (store, key, token, owner).
using lost_grants = std::set<std::tuple<node_id, std::uint8_t, std::uint64_t, std::string>>;

// At the lossy store_up event `i`: replays the history before the copy with a fresh Checker and
// takes its records of that store as the store's; notes the grants and renewals lost.
template <class Checker, class Keys>
void lost_life(const history& h, std::size_t i, Keys& keys, lost_grants& lost) {
  const event& e = h.events[i];
  const std::size_t copy = std::min<std::size_t>(static_cast<std::size_t>(e.token), i);
  history prefix = h;
  prefix.events.resize(copy);
  Checker before(prefix);
  (void)before.run();
  for (auto it = keys.begin(); it != keys.end();) {
    it = it->first.first == e.node ? keys.erase(it) : std::next(it);
  }
  for (const auto& kv : before.keys()) {
    if (kv.first.first == e.node) keys[kv.first] = kv.second;
  }
  for (std::size_t j = copy; j < i; ++j) {
    const event& a = h.events[j];
    if (a.node != e.node || a.outcome != 0) continue;
    if (a.kind == event_kind::store_acquire || a.kind == event_kind::store_renew) {
      lost.insert({a.node, a.key, a.token, a.owner});
    }
  }
}

// At a store_up event `i`: a lagging restart's (value > 0) rewinds the store's records as above;
// a machine reboot's (note machine_rebooted) ends every lease on that store (their holders
// crashed with the machine, and the clock their expiry was on started over) and keeps each key's
// highest token, so S2 is judged across the reboot (a counter wiped by it is caught there).
template <class Checker, class Keys>
void came_back(const history& h, std::size_t i, Keys& keys, lost_grants& lost) {
  const event& e = h.events[i];
  if (e.value > 0) lost_life<Checker>(h, i, keys, lost);
  if (e.note != fault_note::machine_rebooted) return;
  for (auto& kv : keys) {
    if (kv.first.first == e.node) kv.second.held = false;
  }
}

}  // namespace detail
}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_DETAIL_LOST_LIFE_HPP
