// SPDX-License-Identifier: MIT
// holdfast/testing/detail/svg_frame.hpp - the frame of the picture of a history (svg.hpp): the
// document's header and title, the time axis, the lane bands, the lines across all lanes (heal,
// violation) and the legend. What is drawn on the lanes is in svg_lanes.hpp.
//
// Not a public header.
#ifndef HOLDFAST_TESTING_DETAIL_SVG_FRAME_HPP
#define HOLDFAST_TESTING_DETAIL_SVG_FRAME_HPP

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "holdfast/detail/config.hpp"
#include "holdfast/testing/detail/svg_canvas.hpp"
#include "holdfast/testing/detail/svg_layout.hpp"
#include "holdfast/testing/history.hpp"
#include "holdfast/testing/verdict.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace testing {
namespace detail {
namespace svg {

// The XML prologue, patterns and styles, the title and the verdict's sentence.
inline void draw_header(canvas& c) {
  c.out += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  c.out += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(c.lay.width()) +
           "\" height=\"" + std::to_string(c.lay.height()) + "\" viewBox=\"0 0 " +
           std::to_string(c.lay.width()) + " " + std::to_string(c.lay.height()) +
           "\" font-family=\"DejaVu Sans, Verdana, Arial, sans-serif\" font-size=\"11\">\n";
  c.out +=
      "<defs>"
      "<pattern id=\"hatch\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
      "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#fff4d6\"/>"
      "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#d9a400\" stroke-width=\"2\"/>"
      "</pattern>"
      "<pattern id=\"down\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
      "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#eeeeee\"/>"
      "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#999999\" stroke-width=\"2\"/>"
      "</pattern>"
      "</defs>\n";
  c.out +=
      "<style>"
      ".lbl{font-weight:bold;fill:#222}.sub{fill:#555;font-size:10px}.tk{fill:#fff;"
      "font-size:10px;font-weight:bold}.sm{font-size:9px;fill:#333}.bad{fill:#c62828;"
      "font-weight:bold}.what{fill:#c62828}.ttl{font-size:14px;font-weight:bold;fill:#111}"
      "</style>\n";
  c.out += "<rect class=\"background\" width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
  std::string title = c.o.title;
  if (title.empty()) {
    title = "holdfast history: " +
            (c.v.ok() ? std::string("all invariants hold")
                      : std::string(to_string(c.v.violated)) + " violated at t=" +
                            secs(c.v.at < c.h.events.size() ? c.h.events[c.v.at].true_ns : 0));
  }
  c.text(12, 22, title, "ttl");
  c.text(12, 38,
         std::to_string(c.h.events.size()) + " events, simulated true time 0 .. " +
             secs(c.lay.end()) +
             "; quiet stretches shortened (//), bursts widened: read order and overlap, not length",
         "sub");
  double y = 56;
  for (const std::string& l : c.lay.what_lines()) {
    c.text(12, y, l, "what");
    y += 15;
  }
}

// The time axis: ticks where there is room, and a mark on each shortened quiet stretch.
inline void draw_axis(canvas& c) {
  const double y0 = c.lay.top() - 8;
  const double y1 = c.lay.top() + layout::lane_h * static_cast<double>(c.lay.all_lanes().size());
  // Candidate ticks at a fine "nice" step; a label is drawn only where there is room.
  const std::int64_t target = std::max<std::int64_t>(c.lay.end() / 60, 1);
  std::int64_t step = 1000;  // 1 us
  for (int guard = 0; guard < 40 && step < target; ++guard) {
    if (step * 2 >= target) {
      step *= 2;
    } else if (step * 5 >= target) {
      step *= 5;
    } else {
      step *= 10;
    }
  }
  c.out += "<g class=\"axis\">";
  double last = -1e9;
  for (std::int64_t t = 0; t <= c.lay.end(); t += step) {
    const double px = c.lay.x(t);
    if (px - last < 70) continue;
    last = px;
    c.out += "<line x1=\"" + num(px) + "\" y1=\"" + num(y0) + "\" x2=\"" + num(px) + "\" y2=\"" +
             num(y1) + "\" stroke=\"#e4e4e4\"/>";
    c.text(px + 2, y0 - 2, secs(t), "sub");
  }
  for (std::int64_t b : c.lay.breaks()) {  // a shortened quiet stretch: not to scale here
    const double px = c.lay.x(b);
    c.out += "<path class=\"axis-break\" d=\"M" + num(px - 5) + " " + num(y0 + 4) + " l4 -8 M" +
             num(px + 1) + " " + num(y0 + 4) + " l4 -8\" stroke=\"#999\" stroke-width=\"1.5\"/>";
  }
  c.out += "</g>\n";
}

// Each lane's band, with its name and what it shows.
inline void draw_lanes_background(canvas& c) {
  for (std::size_t i = 0; i < c.lay.all_lanes().size(); ++i) {
    const lane_info& l = c.lay.all_lanes()[i];
    const double y = c.lay.lane_y(static_cast<int>(i));
    const char* fill = l.kind == lane_kind::client  ? "#fafcff"
                       : l.kind == lane_kind::store ? "#f7f7f7"
                                                    : "#fbfff8";
    c.out += std::string("<g class=\"lane\" data-lane=\"") +
             (l.kind == lane_kind::client  ? "client"
              : l.kind == lane_kind::store ? "store"
                                           : "resource") +
             "\"><rect x=\"0\" y=\"" + num(y) + "\" width=\"" + std::to_string(c.lay.width()) +
             "\" height=\"" + std::to_string(layout::lane_h) + "\" fill=\"" + fill +
             "\" stroke=\"#dddddd\"/>";
    c.text(10, y + 18, l.label, "lbl");
    c.text(10, y + 32,
           l.kind == lane_kind::client  ? "client: belief, checks"
           : l.kind == lane_kind::store ? "store: grants (its clock)"
                                        : "resource: fenced writes",
           "sub");
    c.out += "</g>\n";
  }
}

// Across all lanes: the heal (faults stop) and the violation, with the violating mark ringed.
inline void draw_marks(canvas& c) {
  const double y0 = c.lay.top() - 4;
  const double y1 = c.lay.top() + layout::lane_h * static_cast<double>(c.lay.all_lanes().size());
  for (std::size_t i = 0; i < c.h.events.size(); ++i) {
    if (c.h.events[i].kind != event_kind::heal) continue;
    const double hx = c.lay.xe(i);
    c.group("heal", i);
    c.out += "<line x1=\"" + num(hx) + "\" y1=\"" + num(y0) + "\" x2=\"" + num(hx) + "\" y2=\"" +
             num(y1) + "\" stroke=\"#777\" stroke-width=\"1\" stroke-dasharray=\"6,4\"/>";
    c.text(hx + 130 > c.lay.width() ? hx - 128 : hx + 3, y1 + 12, "faults stop (L1 check)", "sub");
    c.out += "</g>\n";
  }
  if (c.v.ok() || c.v.at >= c.h.events.size()) return;
  const event& e = c.h.events[c.v.at];
  const double vx = c.lay.xe(c.v.at);
  c.group("violation", c.v.at);
  c.out += "<line x1=\"" + num(vx) + "\" y1=\"" + num(y0) + "\" x2=\"" + num(vx) + "\" y2=\"" +
           num(y1) + "\" stroke=\"#c62828\" stroke-width=\"2\" stroke-dasharray=\"5,3\"/>";
  // Ring what violated: the write, the grant, the renewal or the check, on its own lane.
  int lane = -1;
  if (e.kind == event_kind::write) {
    lane = c.lay.lane_of(lane_kind::resource, no_node, e.key);
  } else if (is_store_kind(e.kind)) {
    lane = c.lay.lane_of(lane_kind::store, e.node, e.key);
  } else {
    lane = c.lay.client_lane(e);
  }
  if (lane >= 0) {
    c.out += "<circle cx=\"" + num(vx) + "\" cy=\"" + num(c.lay.mid(lane)) +
             "\" r=\"13\" fill=\"none\" stroke=\"#c62828\" stroke-width=\"3\"/>";
  }
  const std::string t = std::string(tag(c.v.violated)) + " violated";
  const double tx = vx + 6 + static_cast<double>(t.size()) * layout::char_w > c.lay.width()
                        ? vx - 6 - static_cast<double>(t.size()) * layout::char_w
                        : vx + 6;
  c.text(tx, y0 + 9, t, "bad");
  c.out += "</g>\n";
}

// The legend under the lanes.
inline void draw_legend(canvas& c) {
  double y = c.lay.top() + layout::lane_h * static_cast<double>(c.lay.all_lanes().size()) + 30;
  double lx = 12;
  const auto item = [&](const std::string& shape, const char* what) {
    c.out += "<g class=\"legend\" transform=\"translate(" + num(lx) + "," + num(y) + ")\">" + shape;
    c.text(18, 4, what, "sm");
    c.out += "</g>";
    lx += 26 + static_cast<double>(std::string(what).size()) * 5.4;
    if (lx > c.lay.width() - 140) {
      lx = 12;
      y += 18;
    }
  };
  item("<rect x=\"0\" y=\"-5\" width=\"14\" height=\"10\" fill=\"#3b73b9\"/>",
       "store's grant (dashed end: expired)");
  item(
      "<rect x=\"0\" y=\"-5\" width=\"14\" height=\"10\" fill=\"#3b73b9\" fill-opacity=\"0.28\" "
      "stroke=\"#3b73b9\"/>",
      "holder's belief");
  item("<circle cx=\"7\" cy=\"0\" r=\"4\" fill=\"#2e7d32\"/>", "check: valid");
  item("<circle cx=\"7\" cy=\"0\" r=\"4\" fill=\"#fff\" stroke=\"#777\"/>", "not valid");
  item("<circle cx=\"7\" cy=\"0\" r=\"5\" fill=\"#2e7d32\"/>", "write admitted");
  item("<circle cx=\"7\" cy=\"0\" r=\"5\" fill=\"#fff\" stroke=\"#c62828\"/>", "write refused");
  item("<rect x=\"0\" y=\"-5\" width=\"14\" height=\"10\" fill=\"url(#hatch)\"/>", "pause");
  item("<path d=\"M3 -4 l8 8 M11 -4 l-8 8\" stroke=\"#c62828\" stroke-width=\"2\"/>",
       "crash / reply lost");
  item(
      "<line x1=\"7\" y1=\"-7\" x2=\"7\" y2=\"7\" stroke=\"#c62828\" stroke-width=\"2\" "
      "stroke-dasharray=\"3,2\"/>",
      "violation");
  c.out += "\n";
}

}  // namespace svg
}  // namespace detail
}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_DETAIL_SVG_FRAME_HPP
