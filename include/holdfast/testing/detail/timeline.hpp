// SPDX-License-Identifier: MIT
// holdfast/testing/detail/timeline.hpp - the checker's text timeline: the events around a
// violation, one line each in the notation of the README's timeline, e.g.
//
//   t=0.000s    C acquires "orders" ttl=1000ms                 -> token #1
//   t=0.000s    C pauses 5.000s (GC, swap, slow disk)
//   t=1.000s    the store's clock passes the expiry of C's lease #1
//   t=2.393s    B acquires "orders" ttl=1000ms [request in flight 0.020s] -> token #2
//   t=5.000s    C writes with token #1                         -> ADMITTED (newest seen: #2)
//
// and "   <- S1 violated" after the violating event's line.
//
//   step                 | what it does
//   ---------------------+------------------------------------------------------------------------
//   widen()              | adds to the events a property named the faults of the nodes involved
//                        | (crashes, restarts, clock jumps), the violator's stall right before it
//                        | and store outages; sorted, without repeats
//   step_lines()         | a store operation that stopped at one of the store's own step points
//                        | while a grant in the context applied (history::store_stalls): its
//                        | event, and a line where it stopped and where it went on (the harm a
//                        | store does between its steps, e.g. deleting what it listed before the
//                        | stall, shows nowhere else)
//   describe()           | one event as "<what happened> -> <result>", with its injected fault and
//                        | what the client was told when that differs
//   expiry_lines()       | a synthesized line where the store's clock passed the expiry of a lease
//                        | in the context, if that happened before the violation
//   format()             | "  t=<seconds> <text>", at most 16 lines (the first 3, "...", the last
//   13)
//
// Not a public header: check() (checker.hpp) puts the timeline into verdict::timeline.
#ifndef HOLDFAST_TESTING_DETAIL_TIMELINE_HPP
#define HOLDFAST_TESTING_DETAIL_TIMELINE_HPP

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/lease/detail/lease_shared.hpp"
#include "holdfast/testing/detail/event_text.hpp"
#include "holdfast/testing/detail/lease_book.hpp"
#include "holdfast/testing/history.hpp"
#include "holdfast/testing/verdict.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace testing {
namespace detail {

class timeline {
 public:
  timeline(const history& h, const lease_book& leases) : h_(h), leases_(leases) {}

  // The timeline of violation `violated` at event `at`, from the events `ctx` its property named
  // (no_event entries are ignored).
  std::string render(std::vector<std::size_t> ctx, std::size_t at, invariant violated) const {
    widen(ctx, at);
    std::vector<line> lines;
    step_lines(ctx, at, lines);
    for (std::size_t j : ctx) {
      const event& e = h_.events[j];
      std::string text = describe(e, j == at);
      if (j == at) text += "   <- " + std::string(tag(violated)) + " violated";
      lines.push_back({e.true_ns, j * 2 + 1, std::move(text)});
    }
    expiry_lines(ctx, at, lines);
    std::stable_sort(lines.begin(), lines.end(), [](const line& a, const line& b) {
      return a.order != b.order ? a.order < b.order : a.t < b.t;
    });
    return format(lines);
  }

  // Event `e` as one line: what happened, then " -> " and its result in a column, if it has one.
  std::string describe(const event& e, bool violating) const {
    line_text l = what(e, violating);
    annotate_steps(e, l.act);
    annotate_fault(e, l.act);
    if (e.seen != e.outcome && is_store_call(e.kind)) {
      l.res += std::string(" (client sees ") + outcome_name(e.seen) + ")";
    }
    std::string out = l.act;
    if (!l.res.empty()) {
      if (out.size() < 46) out.append(46 - out.size(), ' ');
      out += " -> " + l.res;
    }
    return out;
  }

 private:
  struct line {
    std::int64_t t;
    std::size_t order;
    std::string text;
  };

  struct line_text {
    std::string act;  // what happened
    std::string res;  // its result ("" if it has none)
  };

  std::string who(const event& e) const { return actor(h_, e); }
  std::string key_of(const event& e) const { return "\"" + key_label(h_, e.key) + "\""; }

  // Nodes involved: whoever acted in the context. Their crashes, restarts and clock jumps in the
  // window matter; of the pauses, only the violator's stall right before the violation (its
  // other pauses, and everyone else's, only changed when things happened).
  void widen(std::vector<std::size_t>& ctx, std::size_t at) const {
    std::vector<node_id> involved;
    std::size_t first = at;
    const event& v = h_.events[at];
    const node_id violator = v.peer != no_node ? v.peer : v.node;
    std::size_t violator_last = no_event;
    for (std::size_t j : ctx) {
      if (j == no_event || j >= h_.events.size()) continue;
      const event& e = h_.events[j];
      const node_id n = e.peer != no_node ? e.peer : e.node;
      if (std::find(involved.begin(), involved.end(), n) == involved.end()) involved.push_back(n);
      first = std::min(first, j);
      if (n == violator && j < at && (violator_last == no_event || j > violator_last))
        violator_last = j;
    }
    for (std::size_t j = first; j < at; ++j) {
      const event& e = h_.events[j];
      const bool mine = std::find(involved.begin(), involved.end(), e.node) != involved.end();
      const bool fault = e.kind == event_kind::crash || e.kind == event_kind::restart ||
                         e.kind == event_kind::clock_jump;
      const bool stall = e.kind == event_kind::pause && e.node == violator &&
                         (violator_last == no_event || j > violator_last);
      if ((fault && mine) || stall) ctx.push_back(j);
      if (e.kind == event_kind::store_down || e.kind == event_kind::store_up) ctx.push_back(j);
    }
    ctx.erase(std::remove(ctx.begin(), ctx.end(), no_event), ctx.end());
    std::sort(ctx.begin(), ctx.end());
    ctx.erase(std::unique(ctx.begin(), ctx.end()), ctx.end());
  }

  // The stalls at step points (history::store_stalls) of operations in the context, and of any
  // operation on the same store that stopped before a grant in the context and went on after it:
  // its event joins the context, with a line where it stopped and one where it went on.
  void step_lines(std::vector<std::size_t>& ctx, std::size_t at, std::vector<line>& lines) const {
    std::vector<std::size_t> more;
    for (const store_stall& s : h_.store_stalls) {
      if (s.event > at || s.event >= h_.events.size()) continue;
      const event& op = h_.events[s.event];
      bool shown = std::find(ctx.begin(), ctx.end(), s.event) != ctx.end();
      for (std::size_t j : ctx) {
        const event& g = h_.events[j];
        shown =
            shown || (g.kind == event_kind::store_acquire && g.outcome == 0 && g.node == op.node &&
                      s.reached_ns < g.true_ns && g.true_ns < s.resumed_ns);
      }
      if (!shown) continue;
      more.push_back(s.event);
      const std::string what = who(op) + "'s " + verb(op.kind) + " " + key_of(op);
      lines.push_back({s.reached_ns, first_event_after(s.reached_ns, false) * 2,
                       what + " stops at a step point inside the store for " +
                           fmt_span(s.resumed_ns - s.reached_ns) + " (others run)"});
      lines.push_back({s.resumed_ns, first_event_after(s.resumed_ns, true) * 2,
                       what + " goes on past its step point, acting on what it read " +
                           fmt_span(s.resumed_ns - s.reached_ns) + " earlier"});
    }
    ctx.insert(ctx.end(), more.begin(), more.end());
    std::sort(ctx.begin(), ctx.end());
    ctx.erase(std::unique(ctx.begin(), ctx.end()), ctx.end());
  }

  // The index of the first event after true time `t` (at or after it, if `at_too`).
  std::size_t first_event_after(std::int64_t t, bool at_too) const {
    std::size_t i = 0;
    while (i < h_.events.size() &&
           (h_.events[i].true_ns < t || (!at_too && h_.events[i].true_ns == t)))
      ++i;
    return i;
  }

  static const char* verb(event_kind k) {
    switch (k) {
      case event_kind::store_acquire:
        return "acquire of";
      case event_kind::store_renew:
        return "renew of";
      case event_kind::store_release:
        return "release of";
      default:
        return "raise of";
    }
  }

  // Synthesized expiry lines for the leases in the context that expired before the violation,
  // or within 1 ms after it (a lease freed a tick early: the line 1 ns after the violation is
  // what makes the times print to the nanosecond).
  void expiry_lines(const std::vector<std::size_t>& ctx, std::size_t at,
                    std::vector<line>& lines) const {
    constexpr std::int64_t just_after = 1000000;
    const std::int64_t t_at = h_.events[at].true_ns;
    for (std::size_t j : ctx) {
      const event& e = h_.events[j];
      if (e.kind != event_kind::store_acquire || e.outcome != 0) continue;
      const granted_lease* r = leases_.find(e.node, e.key, e.token);
      if (r == nullptr || r->grant != j) continue;
      const std::int64_t t = true_time_of(r->store, r->hi);
      if (t < 0 || t > t_at + just_after) continue;
      if (r->end != no_event && h_.events[r->end].true_ns <= t) continue;  // released before
      std::size_t order = 0;  // place it among the events by time
      for (const line& l : lines) {
        if (l.t <= t) order = std::max(order, l.order + 1);
      }
      lines.push_back({t, order,
                       "the store's clock passes the expiry of " + e.owner + "'s lease " +
                           fmt_token(e.token) + (t > t_at ? " (after the violation)" : "")});
    }
  }

  // At most 16 lines: the first 3, a "... (N more)" line, and the last 13.
  static std::string format(const std::vector<line>& lines) {
    constexpr std::size_t max_lines = 16;
    std::vector<std::int64_t> times;
    times.reserve(lines.size());
    for (const line& l : lines) times.push_back(l.t);
    std::sort(times.begin(), times.end());
    const int decimals = decimals_for(times);  // 1 ns apart prints 1 ns apart
    std::string out;
    std::size_t skipped = 0;
    for (std::size_t k = 0; k < lines.size(); ++k) {
      if (lines.size() > max_lines && k >= 3 && k < lines.size() - (max_lines - 3)) {
        ++skipped;
        continue;
      }
      if (skipped != 0) {
        out += "  ...    (" + std::to_string(skipped) + " more)\n";
        skipped = 0;
      }
      char buf[48];
      std::snprintf(buf, sizeof buf, "  t=%-*s ", decimals + 6,
                    fmt_seconds(lines[k].t, decimals).c_str());
      out += buf;
      out += lines[k].text;
      out += '\n';
    }
    return out;
  }

  // Approximate true time at which `store`'s clock read `x` (clocks are linear between events).
  std::int64_t true_time_of(node_id store, std::int64_t x) const {
    std::int64_t best = -1;
    for (const event& e : h_.events) {
      std::int64_t clk;
      if (e.node == store && is_store_call(e.kind)) {
        clk = e.local_ns;
      } else if (store == h_.primary_store) {
        clk = e.store_ns;
      } else {
        continue;
      }
      if (clk <= x) best = e.true_ns + (x - clk);
    }
    return best;
  }

  // ---- one event's text, a step per family of events ----------------------------------------

  line_text what(const event& e, bool violating) const {
    switch (e.kind) {
      case event_kind::store_acquire:
      case event_kind::store_renew:
      case event_kind::store_release:
      case event_kind::store_raise:
        return store_call(e);
      case event_kind::queue_join:
      case event_kind::queue_leave:
      case event_kind::queue_wake:
        return queue_call(e);
      case event_kind::acquired:
      case event_kind::acquire_failed:
      case event_kind::renewed:
      case event_kind::renew_failed:
      case event_kind::released:
      case event_kind::release_failed:
      case event_kind::lease_lost:
        return client_return(e);
      case event_kind::validity:
      case event_kind::write:
        return client_use(e, violating);
      case event_kind::store_down:
      case event_kind::store_up:
      case event_kind::pause:
      case event_kind::crash:
      case event_kind::restart:
      case event_kind::clock_jump:
      case event_kind::clock_regress:
        return fault(e);
      case event_kind::heal:
      case event_kind::liveness_acquired:
      case event_kind::liveness_failed:
        return liveness(e);
    }
    return {};
  }

  // What a store applied, and what it answered.
  line_text store_call(const event& e) const {
    const bool ok = e.outcome == 0;
    switch (e.kind) {
      case event_kind::store_acquire:
        return {who(e) + " acquires " + key_of(e) + " ttl=" + std::to_string(e.ttl_ms) + "ms",
                ok ? "token " + fmt_token(e.token) : outcome_name(e.outcome)};
      case event_kind::store_renew:
        return {who(e) + " renews " + key_of(e) + " " + fmt_token(e.token),
                ok ? "extended ttl=" + std::to_string(e.ttl_ms) + "ms" : outcome_name(e.outcome)};
      case event_kind::store_release:
        return {who(e) + " releases " + key_of(e) + " " + fmt_token(e.token),
                ok ? "released" : outcome_name(e.outcome)};
      default:  // store_raise
        return {who(e) + " raises " + key_of(e) + " " + fmt_token(e.token) + " to " +
                    fmt_token(static_cast<std::uint64_t>(e.value)),
                ok ? "raised" : outcome_name(e.outcome)};
    }
  }

  // A wait queue's join, leave or hand-off (sim_queue.hpp), by the waiting client.
  line_text queue_call(const event& e) const {
    const std::string by = h_.node_name(e.peer) + (e.owner.empty() ? "" : " (" + e.owner + ")");
    if (e.kind == event_kind::queue_wake) return {"release hands " + key_of(e) + " to " + by, ""};
    const bool join = e.kind == event_kind::queue_join;
    return {by + (join ? " joins " : " leaves ") + key_of(e) + "'s queue",
            e.outcome == 0 ? (join ? "queued" : "left") : outcome_name(e.outcome)};
  }

  // What a client's lease call returned, or that it was told its lease is lost.
  line_text client_return(const event& e) const {
    switch (e.kind) {
      case event_kind::acquired:
        return {who(e) + "'s acquire returns", "token " + fmt_token(e.token)};
      case event_kind::acquire_failed:
        return {who(e) + "'s acquire returns", outcome_name(e.outcome)};
      case event_kind::renewed:
      case event_kind::renew_failed:
        return {who(e) + "'s renew returns", outcome_name(e.outcome)};
      case event_kind::released:
      case event_kind::release_failed:
        return {who(e) + "'s release returns", outcome_name(e.outcome)};
      default:  // lease_lost
        return {who(e) + " is told its lease " + fmt_token(e.token) + " is lost",
                loss_cause_name(e.value)};
    }
  }

  // holdfast::loss_cause's own name (detail/lease_shared.hpp), "?" for a value it does not name.
  static const char* loss_cause_name(std::int64_t v) {
    if (v < 0 || v > 255) return "?";
    const char* name = holdfast::to_string(static_cast<loss_cause>(v));
    return std::string_view(name) == "unknown" ? "?" : name;
  }

  // A client using its lease: a validity check, or a write at the resource.
  line_text client_use(const event& e, bool violating) const {
    if (e.kind == event_kind::validity) {
      return {who(e) + " checks its lease " + fmt_token(e.token),
              e.value == 1 ? "valid" : "not valid"};
    }
    line_text l{who(e) + " writes with token " + fmt_token(e.token), {}};
    if (e.outcome == 0) {
      l.res = std::string(violating ? "ADMITTED" : "admitted") +
              " (newest seen: " + fmt_token(static_cast<std::uint64_t>(e.value)) + ")";
    } else {
      l.res = "rejected (" + std::string(outcome_name(e.outcome)) + ")";
    }
    return l;
  }

  // An injected fault: outages, stalls, crashes and restarts, clock jumps.
  line_text fault(const event& e) const {
    const std::string& node = h_.node_name(e.node);
    switch (e.kind) {
      case event_kind::store_down:
        if (e.note == fault_note::machine_rebooted) {
          return {node + "'s machine reboots: every client on it crashes at this instant", {}};
        }
        if (e.value == 1) {
          return {node + " crashes between two steps of " + h_.node_name(e.peer) +
                      "'s operation and goes down (restart)",
                  {}};
        }
        return {node + " goes down (restart)", {}};
      case event_kind::store_up:
        if (e.note == fault_note::machine_rebooted) {
          return {node +
                      " is back after the reboot (a new boot identity; its clock started over "
                      "at " +
                      fmt_seconds(e.local_ns) + ")",
                  {}};
        }
        if (e.value > 0) {
          return {node + " is back from a lagging copy: it lost its last " +
                      std::to_string(e.value) + " operation(s) (grants, renewals, releases; " +
                      "its token counter is the copy's)",
                  {}};
        }
        return {node + " is back", {}};
      case event_kind::pause:
        return {node + " pauses " + fmt_seconds(e.value) + " (GC, swap, slow disk)", {}};
      case event_kind::crash:
        return {node + " crashes", {}};
      case event_kind::restart:
        return {node + " restarts" +
                    (e.owner.empty() ? std::string() : " (new owner id " + e.owner + ")"),
                {}};
      case event_kind::clock_jump:
        return {node + "'s clock jumps " + (e.value >= 0 ? "+" : "") + fmt_seconds(e.value), {}};
      default:  // clock_regress
        return {node + "'s clock goes back " + fmt_seconds(-e.value) +
                    " (right after its keepalive read it)",
                {}};
    }
  }

  // The liveness check: faults stop, then the contender acquires or gives up.
  line_text liveness(const event& e) const {
    switch (e.kind) {
      case event_kind::heal:
        return {"faults stop; a contender must acquire within " + fmt_seconds(e.value), {}};
      case event_kind::liveness_acquired:
        return {h_.node_name(e.node) + " (contender) acquires " + key_of(e),
                "token " + fmt_token(e.token)};
      default:  // liveness_failed
        return {h_.node_name(e.node) + " (contender) gives up on " + key_of(e),
                outcome_name(e.outcome)};
    }
  }

  // A multi-step store's operation: where it stalled between its steps, and when it returned
  // after taking effect (a token drawn in a later step is the classic bug, store.hpp T1).
  static void annotate_steps(const event& e, std::string& act) {
    if (!is_store_call(e.kind)) return;
    if (e.begin_local_ns != 0 && e.local_ns > e.begin_local_ns) {
      act += " [began " + fmt_span(e.local_ns - e.begin_local_ns) +
             " earlier; others ran between its steps]";
    }
    if (e.end_local_ns > e.local_ns) {
      act += " [took effect here; its last step ran " + fmt_span(e.end_local_ns - e.local_ns) +
             " later]";
    }
  }

  // The fault injected around a store call.
  static void annotate_fault(const event& e, std::string& act) {
    switch (e.note) {
      case fault_note::none:
      case fault_note::machine_rebooted:  // store_down / store_up: said by fault()
        break;
      case fault_note::request_delayed:
        act += " [request in flight " + fmt_seconds(e.value) + "]";
        break;
      case fault_note::reply_delayed:
        act += " [reply in flight " + fmt_seconds(e.value) + "]";
        break;
      case fault_note::reply_lost:
        act += " [reply lost]";
        break;
      case fault_note::error_after:
        act += " [store errs after applying]";
        break;
      case fault_note::store_crashed:
        act +=
            " [the store crashed inside it: ended there, or, once it had taken effect, its reply "
            "was lost]";
        break;
    }
  }

  const history& h_;
  const lease_book& leases_;
};

}  // namespace detail
}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_DETAIL_TIMELINE_HPP
