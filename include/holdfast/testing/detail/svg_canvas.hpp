// SPDX-License-Identifier: MIT
// holdfast/testing/detail/svg_canvas.hpp - the XML writer of the picture of a history (svg.hpp):
// escaping, numbers, text elements, the group around each event's marks with its tooltip, and
// label placement that drops a label rather than overlap another.
//
//   piece              | what it writes
//   -------------------+--------------------------------------------------------------------------
//   esc(), num()       | text safe in XML (ASCII only, control bytes as '?'); a number as "%.1f"
//   secs()             | a time for the axis and tooltips: "250us", "12ms", "1.5s"
//   canvas::text()     | <text x= y= class=>
//   canvas::group()    | <g class= data-event=><title>the event's full description</title>
//   canvas::lane_label | a label in a lane's top text row if free there, else the bottom one, else
//                      | none (a crowded picture drops labels, never marks)
//
// Not a public header.
#ifndef HOLDFAST_TESTING_DETAIL_SVG_CANVAS_HPP
#define HOLDFAST_TESTING_DETAIL_SVG_CANVAS_HPP

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/testing/detail/event_text.hpp"
#include "holdfast/testing/detail/svg_layout.hpp"
#include "holdfast/testing/history.hpp"
#include "holdfast/testing/svg_options.hpp"
#include "holdfast/testing/verdict.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace testing {
namespace detail {
namespace svg {

inline std::string esc(const std::string& s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    const unsigned char u = static_cast<unsigned char>(c);
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      case '\'':
        o += "&apos;";
        break;
      default:
        // XML 1.0 forbids most control characters; anything non-ASCII becomes '?' so that the
        // file is valid whatever bytes an owner id or key holds.
        o += (u < 0x20 && c != '\t') || u >= 0x7f ? '?' : c;
    }
  }
  return o;
}

inline std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", v);
  return b;
}

inline std::string secs(std::int64_t ns) {
  char b[40];
  const double s = static_cast<double>(ns) / 1e9;
  const double a = s < 0 ? -s : s;
  if (a != 0 && a < 0.001) {
    std::snprintf(b, sizeof b, "%.0fus", s * 1e6);
  } else if (a < 1) {
    std::snprintf(b, sizeof b, "%.0fms", s * 1e3);
  } else {
    std::snprintf(b, sizeof b, "%.3gs", s);
  }
  return b;
}

// The document being written, with what the drawing steps read: the history, the verdict, the
// options and the layout.
struct canvas {
  canvas(const history& hist, const verdict& verd, const svg_options& opts)
      : h(hist), v(verd), o(opts), lay(hist, verd, opts.width) {}

  const history& h;
  const verdict& v;
  const svg_options& o;
  const layout lay;
  std::string out;

  void text(double px, double py, const std::string& s, const char* cls, const char* extra = "") {
    out += "<text x=\"" + num(px) + "\" y=\"" + num(py) + "\" class=\"" + cls + "\"" + extra + ">" +
           esc(s) + "</text>\n";
  }

  // Opens a group for event `i` (class `cls`) with its tooltip.
  void group(const char* cls, std::size_t i) {
    out += std::string("<g class=\"") + cls + "\" data-event=\"" + std::to_string(i) +
           "\"><title>" + esc(describe(i)) + "</title>";
  }

  void circle(double cx, double cy, double r, const char* fill, const char* stroke) {
    out += "<circle cx=\"" + num(cx) + "\" cy=\"" + num(cy) + "\" r=\"" + num(r) + "\" fill=\"" +
           fill + "\" stroke=\"" + stroke + "\" stroke-width=\"1.5\"/>";
  }

  // A label placed only if it fits into `room` px (a crowded picture drops labels, not marks).
  void label_if_fits(double px, double py, const std::string& s, double room, const char* cls) {
    if (static_cast<double>(s.size()) * layout::char_w <= room) text(px, py, s, cls);
  }

  // Places a label of `s` at x `px` in lane `lane`: in the top text row if free there, else the
  // bottom one, else not at all (a crowded picture drops labels, never marks).
  void lane_label(int lane, double px, const std::string& s, const char* cls) {
    if (lane < 0) return;
    if (rows_.size() < lay.all_lanes().size()) rows_.resize(lay.all_lanes().size(), {-1e9, -1e9});
    std::pair<double, double>& r = rows_[static_cast<std::size_t>(lane)];
    const double w =
        static_cast<double>(s.size()) * (std::string(cls) == "sm" ? 5.2 : layout::char_w);
    if (px + w > lay.width() - 2) px = lay.width() - 2 - w;
    if (px >= r.first) {
      r.first = px + w + 4;
      text(px, lay.lane_y(lane) + 10, s, cls);
    } else if (px >= r.second) {
      r.second = px + w + 4;
      text(px, lay.lane_y(lane) + layout::lane_h - 3, s, cls);
    }
  }

  // Event `i` in full, for its tooltip.
  std::string describe(std::size_t i) const {
    const event& e = h.events[i];
    std::string s = "t=" + secs(e.true_ns) + " " + to_string(e.kind) + " by " + actor(h, e);
    if (e.key < h.keys.size()) s += " key=\"" + h.keys[e.key] + "\"";
    if (e.token != 0) s += " token=" + fmt_token(e.token);
    if (e.ttl_ms != 0 && is_store_kind(e.kind)) s += " ttl=" + std::to_string(e.ttl_ms) + "ms";
    s += std::string(" outcome=") + outcome_name(e.outcome);
    if (e.seen != e.outcome && is_store_kind(e.kind)) {
      s += std::string(" (client sees ") + outcome_name(e.seen) + ")";
    }
    if (e.note != fault_note::none) s += std::string(" [") + to_string(e.note) + "]";
    if (i == v.at && !v.ok()) s += std::string("  <- ") + tag(v.violated) + " violated";
    return s;
  }

 private:
  std::vector<std::pair<double, double>> rows_;  // per lane: where each label row is free
};

}  // namespace svg
}  // namespace detail
}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_DETAIL_SVG_CANVAS_HPP
