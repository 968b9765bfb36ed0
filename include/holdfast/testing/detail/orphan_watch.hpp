// SPDX-License-Identifier: MIT
// holdfast/testing/detail/orphan_watch.hpp - the checker's bookkeeping for O1, orphaned grants
// (checker.hpp; DESIGN.md, "Leave nothing behind"): when an acquire attempt ends (acquired or
// acquire_failed), no store may still hold a live grant to the attempt's owner that the caller
// neither reported nor went back for. A grant is *reported* if the attempt returned a lease and
// the client saw that grant (the lease itself, a quorum's members, a multi-key lease's keys), or
// it is the returned lease's key and token; the caller *went back* if it made any later call on
// that store and key with that owner (asked again, released, raised, renewed), whatever became of
// that call: a protocol that tries to give back cannot do more against a store that keeps failing,
// and one that never tries is what O1 catches (a lost reply that the caller walked away from). A
// grant made by a call that itself followed a transient error on the same store and key (the caller
// asking again after a lost request) is the protocol going back, not walking away.
//
//   event                               | what the watch does
//   ------------------------------------+-------------------------------------------------------
//   store_acquire applied, a new grant  | the (store, key) is held by its owner, not gone back to
//   any store call by the holder's owner| the holder went back (re-ask, renew, release, raise)
//   store_release applied by the holder | the (store, key) is free
//   store_down / store_up               | the store's holdings are forgotten (it may lose them)
//   acquired / acquire_failed           | O1 is judged (orphan())
//
// "Live" is judged by the store's clock with an upper bound on its reading at the client's event
// (its last reading plus twice the true time since, plus its tick), so a contract-abiding
// protocol is never reported because of clock rates. Not a public header.
#ifndef HOLDFAST_TESTING_DETAIL_ORPHAN_WATCH_HPP
#define HOLDFAST_TESTING_DETAIL_ORPHAN_WATCH_HPP

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/store.hpp"
#include "holdfast/testing/detail/regression_watch.hpp"
#include "holdfast/testing/history.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace testing {
namespace detail {

class orphan_watch {
 public:
  orphan_watch() {
    // A run's few stores, keys and owners fit without regrowing (one watch per checked history).
    held_.reserve(8);
    clocks_.reserve(8);
    last_.reserve(16);
    calls_.reserve(16);
  }

  /// Follows event i (every event, in order).
  void observe(const history& h, std::size_t i, const event& e) {
    switch (e.kind) {
      case event_kind::store_acquire:
      case event_kind::store_renew:
      case event_kind::store_release:
      case event_kind::store_raise:
        store_event(h, i, e);
        return;
      case event_kind::store_down:
      case event_kind::store_up:
        forget(e.node);
        return;
      case event_kind::pause:  // faults inside a client's call: no bound of an attempt
      case event_kind::clock_jump:
      case event_kind::clock_regress:
      case event_kind::heal:
      case event_kind::queue_join:  // a wait queue's bookkeeping (queue_watch.hpp)
      case event_kind::queue_leave:
      case event_kind::queue_wake:
        return;
      default:
        // A client's own outcome bounds the attempts of its owner (one node may run several).
        if (e.node != no_node) last_of(e.node, e.owner) = i;
        return;
    }
  }

  /// At an acquired/acquire_failed event `e` (asked before observe() sees it): the index of a
  /// grant to e.owner made during the attempt, by a call of e's node since its previous event of
  /// its own for that owner, that is orphaned (see the file comment), or no_event.
  [[nodiscard]] std::size_t orphan(const history& h, const event& e) const {
    if (e.owner.empty()) return no_event;
    const std::size_t* prev = find_last(e.node, e.owner);
    const std::size_t since = prev == nullptr ? 0 : *prev + 1;
    for (const auto& kv : held_) {  // in (store, key) order, as a std::map would give
      const holding& s = kv.second;
      if (s.owner != e.owner || s.went_back || s.grant < since) continue;
      if (s.after_error != no_event && s.after_error >= since) continue;  // a re-ask itself
      if (h.events[s.grant].peer != e.node) continue;
      // An attempt that returned a lease reports what it saw granted (the lease's key, a
      // quorum's members, a multi-key lease's other keys); a failed one reports nothing.
      if (e.kind == event_kind::acquired) {
        if (h.events[s.grant].seen == 0) continue;
        if (kv.first.second == e.key && s.token == e.token) continue;
      }
      if (!live_at(h, kv.first.first, s, e.true_ns)) continue;
      return s.grant;
    }
    return no_event;
  }

 private:
  struct holding {
    std::string owner;
    std::uint64_t token = 0;
    std::size_t grant = no_event;  // the store_acquire event that made it
    std::int64_t lo = 0;           // the earliest expiry, on the store's clock
    bool went_back = false;
    // The same owner's previous call on this store and key, if the client was told a transient
    // error there (no_event otherwise): the grant came from asking again, going back itself.
    std::size_t after_error = no_event;
  };
  struct last_call {
    std::size_t index = no_event;
    outcome_code seen = 0;
  };
  struct reading {
    std::int64_t true_ns = 0;
    std::int64_t local_ns = 0;
  };

  void store_event(const history& h, std::size_t i, const event& e) {
    clock_of(e.node) = reading{e.true_ns, e.local_ns};
    const auto at = std::make_pair(e.node, e.key);
    last_call& prev = call_of(e.node, e.key, e.owner);
    const bool after_error =
        prev.index != no_event && prev.seen != 0 && is_transient_seen(prev.seen);
    const std::size_t prev_index = prev.index;
    prev = last_call{i, e.seen};
    auto it = std::lower_bound(held_.begin(), held_.end(), at, held_before);
    if (it != held_.end() && it->first != at) it = held_.end();
    const bool holder = it != held_.end() && it->second.owner == e.owner;
    if (e.outcome != 0) {  // refused or never applied: still, the caller went back
      if (holder) it->second.went_back = true;
      return;
    }
    if (e.kind == event_kind::store_acquire && !(holder && it->second.token == e.token)) {
      // A TTL outside (0, max_ttl] is garbage, not a grant: the checker reports it (T4).
      if (e.ttl_ms <= 0 || e.ttl_ms > holdfast::max_ttl.count()) return;
      const std::int64_t begin =
          e.begin_local_ns != 0 && e.begin_local_ns < e.local_ns ? e.begin_local_ns : e.local_ns;
      holding fresh{e.owner, e.token,
                    i,       sat_add(begin, e.ttl_ms * 1000000),
                    false,   after_error ? prev_index : no_event};
      auto pos = std::lower_bound(held_.begin(), held_.end(), at, held_before);
      if (pos != held_.end() && pos->first == at) {
        pos->second = std::move(fresh);
      } else {
        held_.emplace(pos, at, std::move(fresh));
      }
      return;
    }
    if (!holder) return;
    holding& s = it->second;
    s.went_back = true;
    if (e.kind == event_kind::store_release && e.token == s.token) {
      held_.erase(it);
    } else if (e.kind == event_kind::store_raise && e.token == s.token) {
      s.token = static_cast<std::uint64_t>(e.value);
    }
    (void)h;
  }

  // Whether a client told `seen` was told a transient error other than busy (its call may have
  // been applied: the protocol should go back).
  static bool is_transient_seen(outcome_code seen) noexcept {
    if (seen == foreign_error) return true;
    const auto c = static_cast<errc>(seen);
    return c == errc::timeout || c == errc::store_unavailable;
  }

  void forget(node_id store) {
    held_.erase(std::remove_if(held_.begin(), held_.end(),
                               [store](const held_entry& h) { return h.first.first == store; }),
                held_.end());
  }

  // Whether `s` is live by `store`'s clock at true time `t` for certain.
  bool live_at(const history& h, node_id store, const holding& s, std::int64_t t) const {
    const reading* c = nullptr;
    for (const auto& kv : clocks_) {
      if (kv.first == store) c = &kv.second;
    }
    if (c == nullptr) return false;
    const std::int64_t since = t > c->true_ns ? t - c->true_ns : 0;
    const std::int64_t upper =
        sat_add(sat_add(c->local_ns, sat_add(since, since)), h.tick_of(store));
    return upper < s.lo;
  }

  // The four tables below hold a handful of entries each (stores x keys x owners of one run), and
  // the watch looks them up at every event: flat vectors searched in place, looked up with the
  // event's own owner (no key is built, nothing allocated once an entry exists), cost a fraction
  // of std::map's node per entry and string copy per lookup (perf: the std::map version was 8% of
  // fuzz_lease_schedule's CPU under ASan+UBSan).
  using held_key = std::pair<node_id, std::uint8_t>;  // (store, key)
  using held_entry = std::pair<held_key, holding>;
  static bool held_before(const held_entry& a, const held_key& b) noexcept { return a.first < b; }

  reading& clock_of(node_id store) {
    for (auto& kv : clocks_) {
      if (kv.first == store) return kv.second;
    }
    return clocks_.emplace_back(store, reading{}).second;
  }

  struct owner_last {
    node_id node = no_node;
    std::string owner;
    std::size_t index = no_event;
  };
  const std::size_t* find_last(node_id node, const std::string& owner) const noexcept {
    for (const owner_last& l : last_) {
      if (l.node == node && l.owner == owner) return &l.index;
    }
    return nullptr;
  }
  std::size_t& last_of(node_id node, const std::string& owner) {
    for (owner_last& l : last_) {
      if (l.node == node && l.owner == owner) return l.index;
    }
    last_.push_back(owner_last{node, owner, no_event});
    return last_.back().index;
  }

  struct owner_call {
    node_id store = no_node;
    std::uint8_t key = 0;
    std::string owner;
    last_call call;
  };
  last_call& call_of(node_id store, std::uint8_t key, const std::string& owner) {
    for (owner_call& c : calls_) {
      if (c.store == store && c.key == key && c.owner == owner) return c.call;
    }
    calls_.push_back(owner_call{store, key, owner, last_call{}});
    return calls_.back().call;
  }

  std::vector<held_entry> held_;  // sorted by (store, key), as orphan() reports the first
  std::vector<std::pair<node_id, reading>> clocks_;
  std::vector<owner_last> last_;   // (client, owner): latest event
  std::vector<owner_call> calls_;  // (store, key, owner): the owner's latest call there
};

}  // namespace detail
}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_DETAIL_ORPHAN_WATCH_HPP
