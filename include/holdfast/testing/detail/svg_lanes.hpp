// SPDX-License-Identifier: MIT
// holdfast/testing/detail/svg_lanes.hpp - what the picture of a history (svg.hpp) draws on its
// lanes, a step per kind of mark: store outages and grants on the store lanes, beliefs and the
// client's events (checks, failed acquires, renewals, releases, crashes, restarts, clock jumps,
// store calls in flight or lost) on the client lanes, fenced writes on the resource lanes. The
// table at the top of svg.hpp says what each looks like.
//
// Not a public header.
#ifndef HOLDFAST_TESTING_DETAIL_SVG_LANES_HPP
#define HOLDFAST_TESTING_DETAIL_SVG_LANES_HPP

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/testing/detail/event_text.hpp"
#include "holdfast/testing/detail/svg_canvas.hpp"
#include "holdfast/testing/detail/svg_layout.hpp"
#include "holdfast/testing/history.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace testing {
namespace detail {
namespace svg {

// Store outages (store_down .. store_up), hatched grey on each of that store's lanes.
inline void draw_outages(canvas& c) {
  for (std::size_t i = 0; i < c.h.events.size(); ++i) {
    const event& e = c.h.events[i];
    if (e.kind != event_kind::store_down) continue;
    double x1 = c.lay.x(c.lay.end());
    for (std::size_t j = i + 1; j < c.h.events.size(); ++j) {
      if (c.h.events[j].kind == event_kind::store_up && c.h.events[j].node == e.node) {
        x1 = c.lay.xe(j);
        break;
      }
    }
    const double x0 = c.lay.xe(i);
    for (std::size_t l = 0; l < c.lay.all_lanes().size(); ++l) {
      const lane_info& lane = c.lay.all_lanes()[l];
      if (lane.kind != lane_kind::store || lane.node != e.node) continue;
      c.group("outage", i);
      c.out += "<rect x=\"" + num(x0) + "\" y=\"" + num(c.lay.lane_y(int(l)) + 3) + "\" width=\"" +
               num(std::max(2.0, x1 - x0)) + "\" height=\"" + std::to_string(layout::lane_h - 6) +
               "\" fill=\"url(#down)\" opacity=\"0.8\"/>";
      c.label_if_fits(x0 + 3, c.lay.lane_y(int(l)) + layout::lane_h - 6, "store down", x1 - x0,
                      "sm");
      c.out += "</g>\n";
    }
  }
}

// A store's grant being drawn: opened at its grant, extended by renewals, closed at its release
// or expiry.
struct open_grant {
  bool open = false;
  std::size_t at = 0;
  std::string owner;
  std::uint64_t token = 0;
  std::int64_t expiry = 0;  // true time (approximate, see the file comment)
  std::vector<std::size_t> renewals;
};

// Ends grant `g` at event `at` (npos: the end of the picture), or at its expiry if earlier.
inline void close_grant(canvas& c, open_grant& g, int lane, std::size_t at, bool released) {
  if (!g.open) return;
  g.open = false;
  const std::int64_t at_t = at < c.h.events.size() ? c.h.events[at].true_ns : c.lay.end();
  const bool expired = !released || g.expiry < at_t;
  const double x0 = c.lay.xe(g.at);
  const double x1 = std::max(g.expiry < at_t          ? c.lay.x(g.expiry)
                             : at < c.h.events.size() ? c.lay.xe(at)
                                                      : c.lay.x(c.lay.end()),
                             x0 + 3);
  const double y = c.lay.lane_y(lane) + 8;
  const double hgt = layout::lane_h - 16;
  const std::string col = c.lay.colour(g.owner);
  c.group("grant", g.at);
  c.out += "<rect x=\"" + num(x0) + "\" y=\"" + num(y) + "\" width=\"" + num(x1 - x0) +
           "\" height=\"" + num(hgt) + "\" rx=\"3\" fill=\"" + col + "\" stroke=\"" + col +
           "\" stroke-width=\"1\"/>";
  if (expired) {  // dashed end: the store's clock ran out (or the picture did)
    c.out += "<line x1=\"" + num(x1) + "\" y1=\"" + num(y - 4) + "\" x2=\"" + num(x1) + "\" y2=\"" +
             num(y + hgt + 4) +
             "\" stroke=\"#333\" stroke-width=\"1.5\" stroke-dasharray=\"3,2\"/>";
  } else {
    c.out += "<rect x=\"" + num(x1 - 2) + "\" y=\"" + num(y - 3) + "\" width=\"3\" height=\"" +
             num(hgt + 6) + "\" fill=\"#333\"/>";
  }
  for (std::size_t r : g.renewals) {
    c.out += "<line x1=\"" + num(c.lay.xe(r)) + "\" y1=\"" + num(y) + "\" x2=\"" +
             num(c.lay.xe(r)) + "\" y2=\"" + num(y + hgt) +
             "\" stroke=\"#ffffff\" stroke-width=\"1.5\"/>";
  }
  const std::string lbl = fmt_token(g.token) + " " + g.owner;
  if (static_cast<double>(lbl.size()) * layout::char_w + 6 <= x1 - x0) {
    c.text(x0 + 4, y + hgt / 2 + 4, lbl, "tk");
  } else {
    c.label_if_fits(x0 + 4, y + hgt / 2 + 4, fmt_token(g.token), x1 - x0 - 4, "tk");
  }
  c.out += "</g>\n";
}

// The store lanes: each grant from the grant to its release or expiry, renewals as ticks, refused
// calls as small marks (svg_options::refused_store_calls).
inline void draw_grants(canvas& c) {
  std::vector<open_grant> g(c.lay.all_lanes().size());
  for (std::size_t i = 0; i < c.h.events.size(); ++i) {
    const event& e = c.h.events[i];
    if (!is_store_kind(e.kind) || e.kind == event_kind::store_down ||
        e.kind == event_kind::store_up) {
      continue;
    }
    const int lane = c.lay.lane_of(lane_kind::store, e.node, e.key);
    if (lane < 0 || e.outcome == not_applied) continue;
    open_grant& cur = g[static_cast<std::size_t>(lane)];
    if (e.outcome != 0) {
      if (c.o.refused_store_calls) {
        c.group("refused", i);
        const double y = c.lay.lane_y(lane) + layout::lane_h - 7;
        c.out += "<line x1=\"" + num(c.lay.xe(i)) + "\" y1=\"" + num(y) + "\" x2=\"" +
                 num(c.lay.xe(i)) + "\" y2=\"" + num(y + 5) +
                 "\" stroke=\"#888\" stroke-width=\"1\"/></g>\n";
      }
      continue;
    }
    const std::int64_t until = c.lay.true_of_local(i, e.node, e.local_ns + e.ttl_ms * 1000000);
    if (cur.open && cur.expiry <= e.true_ns) close_grant(c, cur, lane, i, false);
    switch (e.kind) {
      case event_kind::store_acquire:
        if (cur.open && cur.owner == e.owner && cur.token == e.token) {
          cur.renewals.push_back(i);
          cur.expiry = std::max(cur.expiry, until);
          break;
        }
        close_grant(c, cur, lane, i, false);
        cur = open_grant{true, i, e.owner, e.token, until, {}};
        break;
      case event_kind::store_renew:
        if (cur.open && cur.token == e.token) {
          cur.renewals.push_back(i);
          cur.expiry = std::max(cur.expiry, until);
        }
        break;
      case event_kind::store_release:
        if (cur.open && cur.token == e.token) close_grant(c, cur, lane, i, true);
        break;
      case event_kind::store_raise:
        if (cur.open) cur.token = static_cast<std::uint64_t>(e.value);
        break;
      default:
        break;
    }
  }
  for (std::size_t l = 0; l < g.size(); ++l) {
    close_grant(c, g[l], static_cast<int>(l), static_cast<std::size_t>(-1), false);
  }
}

// The x where the belief that client event `i` (acquired / liveness_acquired) starts ends: its
// validity's end, or the event that ended it first.
inline double belief_end(const canvas& c, std::size_t i) {
  const event& a = c.h.events[i];
  std::int64_t until = a.value > 0 ? c.lay.true_of_local(i, a.node, a.value) : c.lay.end();
  for (std::size_t j = i + 1; j < c.h.events.size(); ++j) {
    const event& e = c.h.events[j];
    if (e.node != a.node || c.lay.is_store(e.node)) continue;
    if (e.true_ns >= until) break;
    switch (e.kind) {
      case event_kind::renewed:
        if (e.value > 0) until = std::max(until, c.lay.true_of_local(j, e.node, e.value));
        break;
      case event_kind::validity:
        if (e.value == 0) return c.lay.xe(j);
        break;
      case event_kind::renew_failed:
        if (e.outcome == static_cast<outcome_code>(errc::lease_lost)) return c.lay.xe(j);
        break;
      case event_kind::released:
      case event_kind::release_failed:
      case event_kind::crash:
      case event_kind::acquired:
        return c.lay.xe(j);
      default:
        break;
    }
  }
  return c.lay.x(until);
}

// Store calls seen from the caller's lane: time in flight, a lost reply, an error after applying.
inline void draw_fault(canvas& c, std::size_t i, int lane) {
  const event& e = c.h.events[i];
  const double cx = c.lay.xe(i);
  const double y = c.lay.lane_y(lane) + layout::lane_h - 9;
  switch (e.note) {
    case fault_note::none:
    case fault_note::machine_rebooted:  // store_down / store_up: drawn as the outage
      return;
    case fault_note::request_delayed:
    case fault_note::reply_delayed: {
      const bool req = e.note == fault_note::request_delayed;
      const double a = req ? c.lay.x(e.true_ns - e.value) : cx;
      const double b = req ? cx : c.lay.x(e.true_ns + e.value);
      c.group(req ? "request-delayed" : "reply-delayed", i);
      c.out += "<line x1=\"" + num(a) + "\" y1=\"" + num(y) + "\" x2=\"" + num(b) + "\" y2=\"" +
               num(y) + "\" stroke=\"#555\" stroke-width=\"1.5\" stroke-dasharray=\"1,2\"/>";
      c.out += "<circle cx=\"" + num(cx) + "\" cy=\"" + num(y) + "\" r=\"2\" fill=\"#555\"/>";
      c.out += "</g>\n";
      return;
    }
    case fault_note::reply_lost:
      c.group("reply-lost", i);
      c.out += "<path d=\"M" + num(cx - 4) + " " + num(y - 4) + " l8 8 M" + num(cx + 4) + " " +
               num(y - 4) + " l-8 8\" stroke=\"#c62828\" stroke-width=\"2\"/>";
      c.lane_label(lane, cx + 6, "reply lost", "sm");
      c.out += "</g>\n";
      return;
    case fault_note::error_after:
    case fault_note::store_crashed:
      c.group(e.note == fault_note::error_after ? "error-after" : "store-crashed", i);
      c.out += "<path d=\"M" + num(cx) + " " + num(y - 5) + " l5 9 l-10 0 z\" fill=\"#e65100\"/>";
      c.lane_label(
          lane, cx + 6,
          e.note == fault_note::error_after ? "error after applying" : "store crashed inside",
          "sm");
      c.out += "</g>\n";
      return;
  }
}

// A client's belief that it holds a lease: from the acquire that returned it to belief_end(),
// labelled with its token.
inline void draw_belief(canvas& c, std::size_t i, int lane) {
  const event& e = c.h.events[i];
  const double x0 = c.lay.xe(i);
  const double x1 = std::max(belief_end(c, i), x0 + 3);
  const double y = c.lay.lane_y(lane) + 14;
  const std::string col = c.lay.colour(actor(c.h, e));
  c.group("belief", i);
  c.out += "<rect x=\"" + num(x0) + "\" y=\"" + num(y) + "\" width=\"" + num(x1 - x0);
  c.out += "\" height=\"18\" rx=\"3\" fill=\"" + col + "\" fill-opacity=\"0.28\" stroke=\"";
  c.out += col + "\"/>";
  c.label_if_fits(x0 + 4, y + 13, "believes " + fmt_token(e.token), x1 - x0 - 6, "sm");
  c.out += "</g>\n";
}

// A stall, hatched for as long as it lasted.
inline void draw_pause(canvas& c, std::size_t i, int lane) {
  const event& e = c.h.events[i];
  const double cx = c.lay.xe(i);
  c.group("pause", i);
  const double w = std::max(2.0, c.lay.x(e.true_ns + e.value) - cx);
  c.out += "<rect x=\"" + num(cx) + "\" y=\"" + num(c.lay.lane_y(lane) + 2) + "\" width=\"" +
           num(w) + "\" height=\"10\" fill=\"url(#hatch)\" stroke=\"#d9a400\"/>";
  if (w > 30) c.lane_label(lane, cx + 2, "pause " + secs(e.value), "sm");
  c.out += "</g>\n";
}

// A validity check: filled if it said valid, hollow if not.
inline void draw_check(canvas& c, std::size_t i, int lane) {
  const event& e = c.h.events[i];
  c.group(e.value == 1 ? "check-valid" : "check-invalid", i);
  c.circle(c.lay.xe(i), c.lay.mid(lane) + 1, 4, e.value == 1 ? "#2e7d32" : "#ffffff",
           e.value == 1 ? "#1b5e20" : "#777777");
  c.out += "</g>\n";
}

// A failed acquire (the liveness contender's too): a hollow diamond and the error.
inline void draw_acquire_failed(canvas& c, std::size_t i, int lane) {
  const event& e = c.h.events[i];
  const double cx = c.lay.xe(i);
  const double ym = c.lay.mid(lane);
  c.group("acquire-failed", i);
  c.out += "<path d=\"M" + num(cx) + " " + num(ym - 5) + " l5 5 l-5 5 l-5 -5 z\" " +
           "fill=\"#ffffff\" stroke=\"#e65100\" stroke-width=\"1.5\"/>";
  c.lane_label(lane, cx + 6, outcome_name(e.outcome), "sm");
  c.out += "</g>\n";
}

// A renewal: a green triangle, or a red one with the error.
inline void draw_renewal(canvas& c, std::size_t i, int lane) {
  const event& e = c.h.events[i];
  const double cx = c.lay.xe(i);
  const double ym = c.lay.mid(lane);
  if (e.kind == event_kind::renewed) {
    c.group("renewed", i);
    c.out += "<path d=\"M" + num(cx - 4) + " " + num(ym + 10) + " l4 -6 l4 6 z\" " +
             "fill=\"#2e7d32\"/></g>\n";
    return;
  }
  c.group("renew-failed", i);
  c.out +=
      "<path d=\"M" + num(cx - 4) + " " + num(ym + 10) + " l4 -6 l4 6 z\" " + "fill=\"#c62828\"/>";
  c.lane_label(lane, cx + 5, std::string("renew: ") + outcome_name(e.outcome), "sm");
  c.out += "</g>\n";
}

// A release: a grey square, red if it failed.
inline void draw_release(canvas& c, std::size_t i, int lane) {
  const event& e = c.h.events[i];
  const double cx = c.lay.xe(i);
  const double ym = c.lay.mid(lane);
  c.group(e.kind == event_kind::released ? "released" : "release-failed", i);
  c.out += "<rect x=\"" + num(cx - 3) + "\" y=\"" + num(ym - 3) +
           "\" width=\"6\" height=\"6\" fill=\"" +
           (e.kind == event_kind::released ? "#555555" : "#c62828") + "\"/></g>\n";
}

// A crash (a red cross) or a restart (a green bar, with the new owner id).
inline void draw_crash_or_restart(canvas& c, std::size_t i, int lane) {
  const event& e = c.h.events[i];
  const double cx = c.lay.xe(i);
  const double ym = c.lay.mid(lane);
  if (e.kind == event_kind::crash) {
    c.group("crash", i);
    c.out += "<path d=\"M" + num(cx - 6) + " " + num(ym - 6) + " l12 12 M" + num(cx + 6) + " " +
             num(ym - 6) + " l-12 12\" stroke=\"#c62828\" stroke-width=\"3\"/>";
    c.lane_label(lane, cx + 8, "crash", "bad");
    c.out += "</g>\n";
    return;
  }
  c.group("restart", i);
  c.out += "<path d=\"M" + num(cx) + " " + num(ym - 6) + " l0 12\" stroke=\"#2e7d32\" " +
           "stroke-width=\"3\"/>";
  c.lane_label(lane, cx + 4, "restart" + (e.owner.empty() ? std::string() : " as " + e.owner),
               "sm");
  c.out += "</g>\n";
}

// A clock jump: a purple arrowhead pointing the way it jumped, and by how much.
inline void draw_clock_jump(canvas& c, std::size_t i, int lane) {
  const event& e = c.h.events[i];
  const double cx = c.lay.xe(i);
  const double ym = c.lay.mid(lane);
  c.group("clock-jump", i);
  c.out += "<path d=\"M" + num(cx) + " " + num(ym + 8) + " l" + (e.value >= 0 ? "8" : "-8") +
           " -4 l" + (e.value >= 0 ? "-8" : "8") + " -4 z\" fill=\"#6a1b9a\"/>";
  c.lane_label(lane, cx + 10, std::string("clock ") + (e.value >= 0 ? "+" : "") + secs(e.value),
               "sm");
  c.out += "</g>\n";
}

// Event `i`'s mark on client lane `lane`, a step per kind of event (none for the rest).
inline void draw_client_mark(canvas& c, std::size_t i, int lane) {
  switch (c.h.events[i].kind) {
    case event_kind::pause:
      draw_pause(c, i, lane);
      break;
    case event_kind::validity:
      draw_check(c, i, lane);
      break;
    case event_kind::acquire_failed:
    case event_kind::liveness_failed:
      draw_acquire_failed(c, i, lane);
      break;
    case event_kind::renewed:
    case event_kind::renew_failed:
      draw_renewal(c, i, lane);
      break;
    case event_kind::released:
    case event_kind::release_failed:
      draw_release(c, i, lane);
      break;
    case event_kind::crash:
    case event_kind::restart:
      draw_crash_or_restart(c, i, lane);
      break;
    case event_kind::clock_jump:
      draw_clock_jump(c, i, lane);
      break;
    case event_kind::store_acquire:
    case event_kind::store_renew:
    case event_kind::store_release:
    case event_kind::store_raise:
      draw_fault(c, i, lane);
      break;
    default:
      break;
  }
}

// The client lanes: beliefs first (underneath), then the marks on top.
inline void draw_client_events(canvas& c) {
  for (std::size_t i = 0; i < c.h.events.size(); ++i) {
    const event& e = c.h.events[i];
    if (e.kind != event_kind::acquired && e.kind != event_kind::liveness_acquired) continue;
    const int lane = c.lay.client_lane(e);
    if (lane >= 0) draw_belief(c, i, lane);
  }
  for (std::size_t i = 0; i < c.h.events.size(); ++i) {
    const int lane = c.lay.client_lane(c.h.events[i]);
    if (lane >= 0) draw_client_mark(c, i, lane);
  }
}

// The resource lanes: each write with its token, admitted or refused, joined to the writer's lane.
inline void draw_writes(canvas& c) {
  for (std::size_t i = 0; i < c.h.events.size(); ++i) {
    const event& e = c.h.events[i];
    if (e.kind != event_kind::write) continue;
    const int lane = c.lay.lane_of(lane_kind::resource, no_node, e.key);
    if (lane < 0) continue;
    const double cx = c.lay.xe(i);
    const double cy = c.lay.mid(lane);
    const bool admitted = e.outcome == 0;
    const bool violating = !c.v.ok() && c.v.at == i;
    c.group(admitted ? "write-admitted" : "write-refused", i);
    const int from = c.lay.client_lane(e);
    if (from >= 0) {
      c.out += "<line x1=\"" + num(cx) + "\" y1=\"" + num(c.lay.mid(from)) + "\" x2=\"" + num(cx) +
               "\" y2=\"" + num(cy) + "\" stroke=\"" + c.lay.colour(actor(c.h, e)) +
               "\" stroke-width=\"1\" stroke-dasharray=\"2,2\" opacity=\"0.7\"/>";
    }
    if (admitted) {
      c.circle(cx, cy, 6, "#2e7d32", "#1b5e20");
    } else {
      c.circle(cx, cy, 6, "#ffffff", "#c62828");
      c.out += "<path d=\"M" + num(cx - 3) + " " + num(cy - 3) + " l6 6 M" + num(cx + 3) + " " +
               num(cy - 3) + " l-6 6\" stroke=\"#c62828\" stroke-width=\"1.5\"/>";
    }
    c.lane_label(lane, cx + 8, fmt_token(e.token) + (admitted ? "" : " refused"),
                 violating ? "bad" : "sm");
    c.out += "</g>\n";
  }
}

}  // namespace svg
}  // namespace detail
}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_DETAIL_SVG_LANES_HPP
