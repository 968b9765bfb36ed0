// SPDX-License-Identifier: MIT
// holdfast/testing/detail/queue_watch.hpp - the checker's bookkeeping for O2, abandoned queue
// places (checker.hpp; DESIGN.md, "Leave nothing behind"): when an acquire attempt ends (acquired
// or acquire_failed), the client whose attempt it was holds no place in any store's hand-off
// queue. A place a client holds after it stopped waiting is one the next release hands the key
// to, for nobody: the live waiters sleep until the holder's expiry (Redisson #1104's kind). The
// queue events are written by the store that keeps the queue (testing/sim_queue.hpp), where the
// queue is, so lost replies and lost requests of join and leave are judged by what the store
// did, not by what the client heard.
//
//   event        | what the watch does
//   -------------+-----------------------------------------------------------------------
//   queue_join   | (store, key, client) holds a place (outcome 0 only)
//   queue_leave  | its place is out (outcome 0 only: a leave that never arrived left it there)
//   queue_wake   | its place is out (a release handed off to it)
//   crash        | the client's places are forgotten (a store's queue TTL cleans up a dead
//                | process's places: that is not a caller leaving)
//   acquired /   | O2 is judged (abandoned()): a place held by the event's node
//   acquire_failed|
//
// Places are per client node, not per owner: a wait for any of several keys (a semaphore's) does
// not name an owner, and a client runs one attempt at a time. Not a public header.
#ifndef HOLDFAST_TESTING_DETAIL_QUEUE_WATCH_HPP
#define HOLDFAST_TESTING_DETAIL_QUEUE_WATCH_HPP

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <string>
#include <tuple>

#include "holdfast/detail/config.hpp"
#include "holdfast/testing/detail/event_text.hpp"
#include "holdfast/testing/detail/regression_watch.hpp"
#include "holdfast/testing/history.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace testing {
namespace detail {

class queue_watch {
 public:
  /// Follows event i (every event, in order).
  void observe(const event& e, std::size_t i) {
    switch (e.kind) {
      case event_kind::queue_join:
        if (e.outcome == 0) places_[std::make_tuple(e.node, e.key, e.peer)] = i;
        return;
      case event_kind::queue_leave:
      case event_kind::queue_wake:
        if (e.outcome == 0) places_.erase(std::make_tuple(e.node, e.key, e.peer));
        return;
      case event_kind::crash:
        for (auto it = places_.begin(); it != places_.end();) {
          it = std::get<2>(it->first) == e.node ? places_.erase(it) : std::next(it);
        }
        return;
      default:
        return;
    }
  }

  /// "while <client> still held the place in <key>'s hand-off queue ..." for join event `q`.
  static std::string what(const history& h, std::size_t q) {
    const event& j = h.events[q];
    return "while " + h.node_name(j.peer) + " still held the place in \"" + key_label(h, j.key) +
           "\"'s hand-off queue that " + h.node_name(j.node) +
           " gave it: the next release hands the key to nobody";
  }

  /// At an acquired/acquire_failed event `e` (asked before observe() sees it): the queue_join
  /// event of a place e's node still holds, or no_event.
  [[nodiscard]] std::size_t abandoned(const event& e) const {
    for (const auto& kv : places_) {
      if (std::get<2>(kv.first) == e.node) return kv.second;
    }
    return no_event;
  }

 private:
  std::map<std::tuple<node_id, std::uint8_t, node_id>, std::size_t> places_;  // -> its join
};

}  // namespace detail
}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_DETAIL_QUEUE_WATCH_HPP
