// SPDX-License-Identifier: MIT
// holdfast/testing/sim_queue.hpp - sim_queue_store: a hand-off wait queue on the simulated
// network, in front of a sim_store (whose lease calls keep their own faults and records). The
// queue is the shipped one, holdfast::detail::memory_wait_queues (memory_store's FIFO per key,
// stores/detail/memory_waiting.hpp); how a caller joins it is Redis's (stores/redis.hpp):
//
//   call                         | at the store                      | faults (each a decision)
//   -----------------------------+-----------------------------------+--------------------------
//   try_acquire_queued(k, o, t)  | try_acquire; busy also joins k's  | the sim_store's: a lost
//                                | queue in the same request (Redis's| reply leaves the caller
//                                | acquire_queued script); a caller  | queued, told timeout
//                                | holds one such place: queuing     |
//                                | again first leaves the old one    |
//   leave_queue(k)               | leaves that place, passing on a   | request lost / error
//                                | hand-off it was chosen for        | before; reply lost /
//                                |                                   | error after (retried
//                                |                                   | until heard)
//   wait_for_release(k, d)       | the place try_acquire_queued took | join: as leave; then the
//   wait_for_release_any(ks, d,  | (else a join, one place per key), | notification may be lost
//     cancel)                    | then sleep until a release hands  | (1 in 9), the session
//                                | off to it, the earliest holder's  | may die during the wait
//                                | expiry (+1 ms, by the caller's    | (1 in 13: it returns
//                                | clock), the deadline or a stop;   | early, unwoken)
//                                | unwoken, leave (as leave_queue)   |
//   release(k, o, tok)           | the sim_store's release; once it  | the notification (above)
//                                | freed the key, the first waiter is|
//                                | handed off to (wake_first)        |
//
// Joins, leaves and hand-offs are recorded where the queue is (event_kind::queue_join,
// queue_leave, queue_wake; outcome 0 when applied), so the checker's O2 (detail/queue_watch.hpp)
// judges what the store did, whatever the client heard. A join of try_acquire_queued is recorded
// once its reply is back (a release in between hands off to the others: a late wake-up, bounded
// by the holder's expiry). The controls queue_mutant::gives_up_queued (no leave_queue: the
// shipped acquire loop cannot leave) and leave_not_retried (mutants.hpp) break it.
//
// Thread-safety: the simulator's thread only.
#ifndef HOLDFAST_TESTING_SIM_QUEUE_HPP
#define HOLDFAST_TESTING_SIM_QUEUE_HPP

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "holdfast/cancel.hpp"
#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/result.hpp"
#include "holdfast/store.hpp"
#include "holdfast/stores/detail/memory_waiting.hpp"
#include "holdfast/testing/detail/sim_store_aim.hpp"
#include "holdfast/testing/history.hpp"
#include "holdfast/testing/mutants.hpp"
#include "holdfast/testing/simulator.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace testing {

/// A LeaseStore with a hand-off wait queue (see the table at the top of sim_queue.hpp) over
/// `Inner`, a sim_store whose wrapped store has inspect(). `Mutant` picks a negative control.
template <class Inner, queue_mutant Mutant = queue_mutant::none>
class sim_queue_store {
  using queues = holdfast::detail::memory_wait_queues;

 public:
  /// Puts a queue in front of `inner`; both must outlive it.
  sim_queue_store(simulator& sim, Inner& inner) : sim_(sim), s_(inner) {}

  sim_queue_store(const sim_queue_store&) = delete;
  sim_queue_store& operator=(const sim_queue_store&) = delete;

  /// LeaseStore try_acquire: the sim_store's.
  result<grant> try_acquire(std::string_view k, std::string_view o, std::chrono::milliseconds t) {
    return s_.try_acquire(k, o, t);
  }
  /// LeaseStore renew: the sim_store's.
  result<grant> renew(std::string_view k, std::string_view o, fencing_token tok,
                      std::chrono::milliseconds t) {
    return s_.renew(k, o, tok, t);
  }
  /// LeaseStore release: the sim_store's; once the key is free, its first waiter is handed off to.
  result<void> release(std::string_view k, std::string_view o, fencing_token tok) {
    const bool held = holds(k, o, tok);
    result<void> r = s_.release(k, o, tok);
    if (held && !holds(k, o, tok)) hand_off(k);
    return r;
  }
  /// inspect(): the sim_store's (no faults, not recorded).
  result<std::optional<lease_record>> inspect(std::string_view k) { return s_.inspect(k); }

  /// try_acquire that, on busy, also queues the caller for its next wait (Redis's
  /// try_acquire_queued). \returns as try_acquire.
  result<grant> try_acquire_queued(std::string_view k, std::string_view o,
                                   std::chrono::milliseconds t) {
    const node_id me = sim_.current_node();
    if (waiter* old = take_ticket(me)) leave(*old);
    const std::size_t from = sim_.log().events.size();
    result<grant> g = s_.try_acquire(k, o, t);
    if (sim_.current_crashed() || !answered_busy(from, me, k, o)) return g;
    waiter& w = make_waiter(std::string(o), {std::string(k)});
    queues_.join(w.keys, &w.q);
    w.in[0] = 1;
    note(event_kind::queue_join, w, 0, 0);
    live_.push_back(&w);
    tickets_[me] = &w;
    return g;
  }

  /// Leaves the place try_acquire_queued took (store.hpp's leave_queue), if any. Absent in the
  /// gives_up_queued control. \returns success.
  template <queue_mutant M = Mutant, std::enable_if_t<M != queue_mutant::gives_up_queued, int> = 0>
  result<void> leave_queue(std::string_view) {
    if (waiter* old = take_ticket(sim_.current_node())) leave(*old);
    return {};
  }

  /// Blocks until `k` may be free (store.hpp's wait_for_release; see the table).
  result<void> wait_for_release(std::string_view k, const sim_clock::time_point& deadline) {
    waiter* w = take_ticket(sim_.current_node());
    if (w != nullptr && w->keys.front() != k) {
      leave(*w);
      w = nullptr;
    }
    result<std::size_t> r = wait({std::string(k)}, deadline, nullptr, w);
    if (!r) return r.error();
    return {};
  }

  /// Blocks until any of `keys` may be free (store.hpp's wait_for_release_any; see the table).
  /// \returns the index of a key to try first, keys.size() at the deadline; errc::cancelled;
  ///   a failed join's error.
  result<std::size_t> wait_for_release_any(const std::vector<std::string>& keys,
                                           const sim_clock::time_point& deadline,
                                           const cancel_token& cancel) {
    if (waiter* old = take_ticket(sim_.current_node())) leave(*old);
    return wait(keys, deadline, &cancel, nullptr);
  }

 private:
  struct waiter {
    waiter(node_id n, std::string o, std::vector<std::string> k)
        : node(n), owner(std::move(o)), keys(std::move(k)), in(keys.size(), 0) {}
    node_id node;
    std::string owner;
    std::vector<std::string> keys;
    std::vector<char> in;  // a place in keys[i]'s queue (the store's truth, for the records)
    queues::waiter q;
    bool deaf = false;  // its notification was lost
  };

  static constexpr std::uint32_t lost_notification_weight = 1;  // of 9
  static constexpr std::uint32_t session_death_weight = 1;      // of 13

  bool faulty() const { return sim_.current_node() != no_node && !sim_.healed(); }

  bool holds(std::string_view k, std::string_view o, fencing_token tok) {
    auto r = s_.inner().inspect(k);
    return r && *r && (*r)->owner == o && (*r)->token == tok;
  }

  waiter* take_ticket(node_id n) {
    auto it = tickets_.find(n);
    if (it == tickets_.end()) return nullptr;
    waiter* w = it->second;
    tickets_.erase(it);
    return w;
  }

  // A waiter of the calling client, kept until the store goes (a place left behind may be
  // handed off to long after its client stopped waiting).
  waiter& make_waiter(std::string owner, std::vector<std::string> keys) {
    all_.push_back(
        std::make_unique<waiter>(sim_.current_node(), std::move(owner), std::move(keys)));
    return *all_.back();
  }

  // Whether the store applied the caller's try_acquire (made since event `from`) and said busy.
  bool answered_busy(std::size_t from, node_id me, std::string_view k, std::string_view o) const {
    const history& h = sim_.log();
    for (std::size_t i = h.events.size(); i-- > from;) {
      const event& e = h.events[i];
      if (e.kind != event_kind::store_acquire || e.peer != me || e.owner != o) continue;
      if (h.keys[e.key] != k) continue;
      return e.outcome == to_outcome(make_error_code(errc::busy));
    }
    return false;
  }

  std::uint8_t key_index(const std::string& k) {
    std::vector<std::string>& keys = sim_.log().keys;
    auto it = std::find(keys.begin(), keys.end(), k);
    if (it != keys.end()) return static_cast<std::uint8_t>(it - keys.begin());
    if (keys.size() >= 255) return 255;
    keys.push_back(k);
    return static_cast<std::uint8_t>(keys.size() - 1);
  }

  void note(event_kind kind, const waiter& w, std::size_t i, outcome_code outcome) {
    event e = sim_.make_event(kind, s_.node());
    e.peer = w.node;
    e.owner = w.owner;
    e.key = key_index(w.keys[i]);
    e.outcome = outcome;
    sim_.log().add(std::move(e));
  }

  // A request's fate: delivered (nullopt, perhaps late) or lost / refused (the client's error).
  std::optional<errc> request() {
    if (!faulty()) return std::nullopt;
    switch (sim_.weighted({40, 3, 2, 1})) {
      case 0:
        return std::nullopt;
      case 1:
        sim_.wait_true(detail::network_delay(sim_));
        return std::nullopt;
      case 2:
        sim_.wait_true(detail::network_delay(sim_));
        return errc::timeout;
      default:
        return errc::store_unavailable;
    }
  }

  // A reply's fate: delivered (nullopt, perhaps late), lost (timeout) or an error after applying.
  std::optional<errc> reply() {
    if (!faulty() || sim_.current_crashed()) return std::nullopt;
    switch (sim_.weighted({40, 3, 3, 1})) {
      case 0:
        return std::nullopt;
      case 1:
        sim_.wait_true(detail::network_delay(sim_));
        return std::nullopt;
      case 2:
        sim_.wait_true(detail::network_delay(sim_));
        return errc::timeout;
      default:
        return errc::store_unavailable;
    }
  }

  // Joins every key's queue in one request. \returns the client's error (the join may have
  // applied: then the caller must leave).
  std::error_code join(waiter& w) {
    if (std::optional<errc> lost = request()) {
      for (std::size_t i = 0; i < w.keys.size(); ++i)
        note(event_kind::queue_join, w, i, not_applied);
      return *lost;
    }
    queues_.join(w.keys, &w.q);
    for (std::size_t i = 0; i < w.keys.size(); ++i) {
      w.in[i] = 1;
      note(event_kind::queue_join, w, i, 0);
    }
    live_.push_back(&w);
    if (std::optional<errc> lost = reply()) return *lost;
    return {};
  }

  // Leaves every place of `w`, in one request, asked again until an answer is heard (not in the
  // leave_not_retried control) or the caller crashed. At the store: a hand-off `w` was chosen
  // for and never used goes on to the next waiter (memory_store's rule).
  void leave(waiter& w) {
    for (;;) {
      if (sim_.current_crashed()) return;
      if (std::optional<errc> lost = request()) {
        for (std::size_t i = 0; i < w.keys.size(); ++i) {
          if (w.in[i]) note(event_kind::queue_leave, w, i, not_applied);
        }
        if (Mutant == queue_mutant::leave_not_retried) return;
        continue;
      }
      queues_.leave(w.keys, &w.q);
      for (std::size_t i = 0; i < w.keys.size(); ++i) {
        if (std::exchange(w.in[i], char{0})) note(event_kind::queue_leave, w, i, 0);
      }
      live_.erase(std::remove(live_.begin(), live_.end(), &w), live_.end());
      if (std::exchange(w.q.woken, false)) hand_off(w.keys[w.q.by]);
      if (!reply() || Mutant == queue_mutant::leave_not_retried) return;
    }
  }

  // At the store, after `k` was freed: the first live waiter of k's queue is handed off to.
  void hand_off(std::string_view k) {
    std::vector<char> before;
    for (waiter* w : live_) before.push_back(w->q.woken);
    queues_.wake_first(k);
    for (std::size_t i = 0; i < live_.size(); ++i) {
      waiter& w = *live_[i];
      if (before[i] || !w.q.woken) continue;
      for (std::size_t j = 0; j < w.keys.size(); ++j) {
        if (w.keys[j] == k && std::exchange(w.in[j], char{0}))
          note(event_kind::queue_wake, w, j, 0);
      }
      w.deaf = faulty() && sim_.weighted({8, lost_notification_weight}) == 1;
      return;
    }
  }

  // The true time at which the caller should stop waiting unwoken: the earliest holder's expiry
  // among `keys` (+1 ms, by the caller's clock) or `deadline`; nullopt if a key is free (its
  // index in `free`).
  std::optional<std::int64_t> wake_at(const std::vector<std::string>& keys,
                                      const sim_clock::time_point& deadline, std::size_t& free) {
    const node_id me = sim_.current_node();
    const std::int64_t now_local = sim_.local_ns(me);
    std::int64_t local = std::chrono::nanoseconds(deadline.time_since_epoch()).count();
    for (std::size_t i = 0; i < keys.size(); ++i) {
      auto r = s_.inner().inspect(keys[i]);
      if (!r || !*r) {
        free = i;
        return std::nullopt;
      }
      const std::int64_t expiry =
          now_local + std::chrono::nanoseconds((*r)->remaining).count() + 1000000;
      local = std::min(local, expiry);
    }
    return sim_.true_time_reading(me, local);  // a coarse clock reads it a tick late
  }

  result<std::size_t> wait(const std::vector<std::string>& keys,
                           const sim_clock::time_point& deadline, const cancel_token* cancel,
                           waiter* w) {
    std::size_t free = keys.size();
    const std::optional<std::int64_t> until = wake_at(keys, deadline, free);
    if (!until) {
      if (w != nullptr) leave(*w);
      return free;
    }
    if (w == nullptr) {
      w = &make_waiter(std::string(), keys);
      if (std::error_code ec = join(*w)) {
        leave(*w);  // the join may have applied (its reply lost)
        return ec;
      }
    }
    // The notification session may die during the wait: it ends early, unwoken.
    std::int64_t end = *until;
    if (faulty() && sim_.weighted({12, session_death_weight}) == 1) {
      end = std::min(end, sim_.now_ns() + detail::network_delay(sim_));
    }
    const std::int64_t step = std::max<std::int64_t>(sim_.scale_ns() / 200, 1000);
    while (sim_.now_ns() < end && !(w->q.woken && !w->deaf) && !sim_.current_crashed() &&
           !(cancel != nullptr && cancel->stop_requested())) {
      sim_.wait_true(std::min(step, end - sim_.now_ns()));
    }
    if (w->q.woken && !w->deaf) {
      live_.erase(std::remove(live_.begin(), live_.end(), w), live_.end());
      const std::size_t by = w->q.by;
      if (std::find(w->in.begin(), w->in.end(), char{1}) != w->in.end()) {
        w->q.woken = false;  // used: not passed on
        leave(*w);           // its places in the other keys' queues
      }
      return by;
    }
    leave(*w);
    if (cancel != nullptr && cancel->stop_requested()) return errc::cancelled;
    const std::int64_t at = std::chrono::nanoseconds(deadline.time_since_epoch()).count();
    return sim_.now_ns() >= sim_.true_time_reading(sim_.current_node(), at) ? keys.size()
                                                                            : std::size_t{0};
  }

  simulator& sim_;
  Inner& s_;
  queues queues_;
  std::vector<std::unique_ptr<waiter>> all_;  // every waiter so far
  std::vector<waiter*> live_;                 // waiters that may be handed off to
  std::map<node_id, waiter*> tickets_;        // try_acquire_queued's places
};

}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_SIM_QUEUE_HPP
