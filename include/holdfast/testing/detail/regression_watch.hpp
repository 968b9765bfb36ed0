// SPDX-License-Identifier: MIT
// holdfast/testing/detail/regression_watch.hpp - the checker's bookkeeping for L2 (checker.hpp):
// a holder whose lease a keepalive keeps alive and whose clock regresses (clock_regress: a jump
// back right after its keepalive read the clock) must learn it (its lease turns lost, a validity
// check says no, a renewal fails) or renew, within history::regression_bound_ns of true time, its
// own stalls not counted, unless by then its clock has run past where it was before the jump.
//
//   event of a client node               | what the watch does
//   -------------------------------------+-------------------------------------------------------
//   acquired                             | the node keeps a lease (nothing pending)
//   clock_regress while keeping a lease  | a regression is pending, due at true time + the bound
//   pause                                | moves what is pending later by the stall
//   renewed; renew_failed; a validity    | answers what is pending
//   check that said "not valid"          |
//   lease_lost, released, release_failed,| the node keeps no lease any more
//   crash, restart                       |
//
// Not a public header: the checker asks first_overdue() before each event and words the failure.
#ifndef HOLDFAST_TESTING_DETAIL_REGRESSION_WATCH_HPP
#define HOLDFAST_TESTING_DETAIL_REGRESSION_WATCH_HPP

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/testing/detail/lease_book.hpp"
#include "holdfast/testing/history.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace testing {
namespace detail {

// a + b, clamped to the range of int64 (instants and spans in ns from a history).
inline std::int64_t sat_add(std::int64_t a, std::int64_t b) noexcept {
  if (b > 0 && a > std::numeric_limits<std::int64_t>::max() - b) {
    return std::numeric_limits<std::int64_t>::max();
  }
  if (b < 0 && a < std::numeric_limits<std::int64_t>::min() - b) {
    return std::numeric_limits<std::int64_t>::min();
  }
  return a + b;
}

class regression_watch {
 public:
  // A regression still unanswered past its bound: the client node and its clock_regress event.
  struct overdue {
    node_id node = no_node;
    std::size_t event = no_event;  // no_event: none is overdue
  };

  // The events a report of `late` (found at event i) shows: the regression, the grant of the
  // lease its node held, event i.
  static std::vector<std::size_t> context(const history& h, const overdue& late, std::size_t i) {
    std::vector<std::size_t> ctx = {late.event};
    for (std::size_t k = late.event; k-- > 0;) {
      const event& a = h.events[k];
      if (a.node == late.node && a.kind == event_kind::acquired) {
        ctx.push_back(k);
        break;
      }
    }
    ctx.push_back(i);
    return ctx;
  }

  // Follows event `i` (`e`) of history `h` (the table at the top).
  void observe(const history& h, std::size_t i, const event& e) {
    if (h.regression_bound_ns <= 0 || e.node == no_node) return;
    if (e.node >= kept_.size()) {
      kept_.resize(e.node + 1, false);
      pending_.resize(e.node + 1, no_event);
      due_.resize(e.node + 1, 0);
    }
    switch (e.kind) {
      case event_kind::acquired:
        kept_[e.node] = true;
        pending_[e.node] = no_event;
        return;
      case event_kind::clock_regress:
        if (kept_[e.node] && pending_[e.node] == no_event) {
          pending_[e.node] = i;
          due_[e.node] = sat_add(e.true_ns, h.regression_bound_ns);
        }
        return;
      case event_kind::pause:  // a stalled process cannot react: the stall does not count
        if (pending_[e.node] != no_event) due_[e.node] = sat_add(due_[e.node], e.value);
        return;
      case event_kind::renewed:
        pending_[e.node] = no_event;
        return;
      case event_kind::validity:
      case event_kind::renew_failed:
        if (e.kind == event_kind::renew_failed || e.value == 0) pending_[e.node] = no_event;
        return;
      case event_kind::lease_lost:
      case event_kind::released:
      case event_kind::release_failed:
      case event_kind::crash:
      case event_kind::restart:
        kept_[e.node] = false;
        pending_[e.node] = no_event;
        return;
      default:
        return;
    }
  }

  // The first node (by index) whose regression is still unanswered once true time `now` passed
  // its bound. Regressions made moot by then, on nodes before it, are dropped.
  overdue first_overdue(const history& h, std::int64_t now) {
    for (std::size_t n = 0; n < pending_.size(); ++n) {
      const std::size_t j = pending_[n];
      if (j == no_event) continue;
      if (now <= due_[n]) continue;
      // Moot once the holder's clock has surely read past where it was before the jump (it runs
      // during stalls too, at up to 5% slow): nothing is left to notice.
      if ((now - h.events[j].true_ns) / 100 * 95 >= -h.events[j].value) {
        pending_[n] = no_event;
        continue;
      }
      return {static_cast<node_id>(n), j};
    }
    return {};
  }

 private:
  std::vector<bool> kept_;            // by client node: holds a kept-alive lease
  std::vector<std::size_t> pending_;  // by client node: an unanswered regression (event)
  std::vector<std::int64_t> due_;     // by client node: when it must have heard (true ns)
};

}  // namespace detail
}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_DETAIL_REGRESSION_WATCH_HPP
