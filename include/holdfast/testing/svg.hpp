// holdfast/testing/svg.hpp - a history as a picture: a self-contained SVG of who believed what,
// when (Jepsen's timeline pictures are the model), for reading a counterexample faster than its
// text timeline.
//
//   const run_result r = run_schedule(src, o);
//   if (!r.result.ok()) save_counterexample(svg_dir_from_env(), "my-test", r.log, r.result);
//
// One horizontal lane per client, per (store, key) and per resource, on a shared axis of simulated
// true time:
//
//   lane            | drawn
//   ----------------+--------------------------------------------------------------------------
//   client          | its belief (acquired ... the end of its validity, a release, a crash or a
//                   | check that said "not valid") labelled with the token; validity checks
//                   | (filled: valid, hollow: not); failed acquires and renewals; pauses (hatched);
//                   | crashes, restarts, clock jumps; requests and replies in flight (dotted);
//                   | lost replies and store errors after applying (red marks)
//   store "key"     | the store's grants as intervals with token and owner, from the grant to
//                   | the release (solid end) or the expiry by the store's clock (dashed end);
//                   | renewals as ticks; outages (store down) hatched grey
//   resource "key"  | each write with its token: admitted (green) or refused (red outline), joined
//                   | to the writer's lane
//
// The violated invariant, if any, is a red vertical line at the violating event, tagged ("S1
// violated") with the checker's sentence under the title; the violating element is ringed. The
// end of "faults stop" (the liveness check's heal) is a grey dashed line. Every mark carries a
// <title> (a tooltip in browsers) with the event's full description.
//
// The SVG uses no scripts, no external fonts or images and only ASCII text, so it renders the
// same in a browser, in librsvg (Debian's rsvg-convert, used by the tests) and as a CI artifact.
// Times are approximate by a node's clock rate (at most the drift bound): a store's expiry is
// placed at grant time + TTL by that store's clock.
//
// Thread-safety: pure functions of their arguments, except save_counterexample(), which writes
// files.
#ifndef HOLDFAST_TESTING_SVG_HPP
#define HOLDFAST_TESTING_SVG_HPP

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/testing/checker.hpp"
#include "holdfast/testing/history.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace testing {

/// How to_svg() draws a history.
struct svg_options {
  /// The heading; empty (default) means "holdfast history: <verdict>".
  std::string title{};
  /// Width of the picture in px; below 480 is taken as 480. Default 1200.
  int width = 1200;
  /// Draw refused store calls (busy, lease_lost, ...) as small ticks on the store's lane.
  /// Default on.
  bool refused_store_calls = true;
};

namespace detail {

class svg_writer {
 public:
  svg_writer(const history& h, const verdict& v, const svg_options& o)
      : h_(h), v_(v), o_(o), width_(std::max(o.width, 480)) {}

  std::string run() {
    classify();
    span();
    lanes();
    header();
    axis();
    draw_lanes_background();
    draw_outages();
    draw_grants();
    draw_client_events();
    draw_writes();
    draw_marks();
    legend();
    out_ += "</svg>\n";
    return std::move(out_);
  }

 private:
  enum class lane_kind { client, store, resource };
  struct lane_info {
    lane_kind kind;
    node_id node;
    std::uint8_t key;
    std::string label;
  };

  static constexpr int left_ = 190;
  static constexpr int right_ = 24;
  static constexpr int lane_h_ = 46;
  static constexpr double char_w_ = 6.2;  // width of one 11px sans-serif character, roughly

  // ---- model --------------------------------------------------------------------------------

  static bool is_store_kind(event_kind k) noexcept {
    return k == event_kind::store_acquire || k == event_kind::store_renew ||
           k == event_kind::store_release || k == event_kind::store_down ||
           k == event_kind::store_up || k == event_kind::store_raise;
  }

  bool is_store(node_id n) const noexcept { return n < store_.size() && store_[n]; }

  void classify() {
    const std::size_t n = h_.nodes.size();
    store_.assign(n, false);
    used_.assign(n, false);
    for (const event& e : h_.events) {
      if (e.node < n) {
        if (is_store_kind(e.kind)) store_[e.node] = true;
        used_[e.node] = true;
      }
      if (e.peer < n) used_[e.peer] = true;
    }
    if (h_.primary_store < n) store_[h_.primary_store] = true;
  }

  // The time axis is piecewise linear through every event: a quiet stretch longer than a tenth
  // of the run is shortened to that (and marked on the axis), and every event gets a few pixels
  // of its own, so the bursts where things happen stay readable and events at one instant are
  // drawn in the order they happened.
  void span() {
    std::int64_t last = 0;
    for (const event& e : h_.events) last = std::max(last, e.true_ns);
    if (last <= 0) last = 1000000000;
    end_ = last + last / 25 + 1;
    const double cap = static_cast<double>(end_) / 10.0;
    const double sep = static_cast<double>(end_) / 250.0;
    double u = 0;
    std::int64_t prev = 0;
    ev_u_.reserve(h_.events.size());
    for (const event& e : h_.events) {
      const std::int64_t t = std::min(std::max<std::int64_t>(e.true_ns, prev), end_);
      const double g = static_cast<double>(t - prev);
      if (g > cap) breaks_.push_back(prev + (t - prev) / 2);
      u += std::min(g, cap) + (ev_u_.empty() ? 0.0 : sep);
      knots_.push_back({t, u});
      ev_u_.push_back(u);
      prev = t;
    }
    u += std::min(static_cast<double>(end_ - prev), cap) + sep;
    knots_.push_back({end_, u});
    total_ = u;
  }

  std::string key_name(std::uint8_t k) const {
    return k < h_.keys.size() ? h_.keys[k] : "key " + std::to_string(k);
  }

  void add_lane(lane_kind kind, node_id node, std::uint8_t key, std::string label) {
    for (const lane_info& l : lanes_) {
      if (l.kind == kind && l.node == node && l.key == key) return;
    }
    lanes_.push_back({kind, node, key, std::move(label)});
  }

  void lanes() {
    for (std::size_t i = 0; i < h_.nodes.size(); ++i) {
      const auto n = static_cast<node_id>(i);
      if (!store_[n] && used_[n]) add_lane(lane_kind::client, n, 0, h_.node_name(n));
    }
    for (std::size_t i = 0; i < h_.nodes.size(); ++i) {
      const auto n = static_cast<node_id>(i);
      if (!store_[n]) continue;
      bool any = false;
      for (const event& e : h_.events) {
        if (e.node == n && is_store_kind(e.kind) && e.kind != event_kind::store_down &&
            e.kind != event_kind::store_up) {
          add_lane(lane_kind::store, n, e.key, h_.node_name(n) + " \"" + key_name(e.key) + "\"");
          any = true;
        }
      }
      if (!any) add_lane(lane_kind::store, n, 255, h_.node_name(n));
    }
    for (const event& e : h_.events) {
      if (e.kind == event_kind::write) {
        add_lane(lane_kind::resource, no_node, e.key, "resource \"" + key_name(e.key) + "\"");
      }
    }
    // Stores after clients, resources last (add_lane keeps first-seen order within a kind).
    std::stable_sort(lanes_.begin(), lanes_.end(), [](const lane_info& a, const lane_info& b) {
      return static_cast<int>(a.kind) < static_cast<int>(b.kind);
    });
    top_ = 84 + 15 * static_cast<int>(what_lines().size());
    height_ = top_ + lane_h_ * static_cast<int>(lanes_.size()) + 78;
  }

  int lane_of(lane_kind kind, node_id node, std::uint8_t key) const {
    for (std::size_t i = 0; i < lanes_.size(); ++i) {
      const lane_info& l = lanes_[i];
      if (l.kind != kind) continue;
      if (kind == lane_kind::client && l.node == node) return static_cast<int>(i);
      if (kind == lane_kind::store && l.node == node && (l.key == key || l.key == 255))
        return static_cast<int>(i);
      if (kind == lane_kind::resource && l.key == key) return static_cast<int>(i);
    }
    return -1;
  }
  int client_lane(const event& e) const {
    const node_id n = e.peer != no_node && is_store(e.node) ? e.peer : e.node;
    return n < store_.size() && !store_[n] ? lane_of(lane_kind::client, n, 0) : -1;
  }
  double lane_y(int lane) const { return top_ + lane * lane_h_; }
  double mid(int lane) const { return lane_y(lane) + lane_h_ / 2.0; }

  // The x of true time `t`: at the first event at or after it, interpolated inside a gap.
  double x(std::int64_t t) const {
    const double w = width_ - left_ - right_;
    t = std::min(std::max<std::int64_t>(t, 0), end_);
    auto it = std::lower_bound(knots_.begin(), knots_.end(), t,
                               [](const knot& k, std::int64_t v) { return k.t < v; });
    double u = total_;
    if (it != knots_.end()) {
      u = it->u;
      if (it->t != t) {  // inside a gap: linear from the previous knot
        const double u0 = it == knots_.begin() ? 0.0 : (it - 1)->u;
        const std::int64_t t0 = it == knots_.begin() ? 0 : (it - 1)->t;
        u = u0 + (it->u - u0) * static_cast<double>(t - t0) / static_cast<double>(it->t - t0);
      }
    }
    return left_ + w * u / total_;
  }
  // The x of event `i` (events at one instant are spread in their order).
  double xe(std::size_t i) const {
    const double w = width_ - left_ - right_;
    return left_ + w * (i < ev_u_.size() ? ev_u_[i] : total_) / total_;
  }

  // The true time at which node `n`'s clock reads `local`, from the node's latest event at or
  // before `from` (clocks run at rate ~1 between events; an approximation within drift).
  std::int64_t true_of_local(std::size_t from, node_id n, std::int64_t local) const {
    for (std::size_t j = std::min(from + 1, h_.events.size()); j-- > 0;) {
      const event& e = h_.events[j];
      if (e.node == n) return e.true_ns + (local - e.local_ns);
    }
    return local;
  }

  // Owner colours: the same owner gets the same colour in its own lane and the store's.
  std::string colour(const std::string& owner) const {
    static const char* const palette[] = {"#3b73b9", "#e08a1e", "#2e9a5b", "#8e5bb5",
                                          "#c2477a", "#2a9bb0", "#8a7a2e", "#5b6b8a"};
    std::string base = owner.substr(0, owner.find('#'));  // restarts keep their client's colour
    std::uint32_t hsh = 2166136261u;
    for (char c : base) hsh = (hsh ^ static_cast<unsigned char>(c)) * 16777619u;
    for (std::size_t n = 0; n < h_.nodes.size(); ++n) {
      if (h_.nodes[n] == base) return palette[n % 8];  // by node: stable and distinct
    }
    return palette[hsh % 8];
  }

  // ---- text ---------------------------------------------------------------------------------

  static std::string esc(const std::string& s) {
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

  static std::string num(double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.1f", v);
    return b;
  }

  static std::string secs(std::int64_t ns) {
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

  static std::string tok(std::uint64_t t) { return holdfast::to_string(fencing_token{t}); }

  std::string who(const event& e) const {
    if (!e.owner.empty()) return e.owner;
    return h_.node_name(e.peer != no_node ? e.peer : e.node);
  }

  std::string describe(std::size_t i) const {
    const event& e = h_.events[i];
    std::string s = "t=" + secs(e.true_ns) + " " + to_string(e.kind) + " by " + who(e);
    if (e.key < h_.keys.size()) s += " key=\"" + h_.keys[e.key] + "\"";
    if (e.token != 0) s += " token=" + tok(e.token);
    if (e.ttl_ms != 0 && is_store_kind(e.kind)) s += " ttl=" + std::to_string(e.ttl_ms) + "ms";
    s += std::string(" outcome=") + outcome_name(e.outcome);
    if (e.seen != e.outcome && is_store_kind(e.kind)) {
      s += std::string(" (client sees ") + outcome_name(e.seen) + ")";
    }
    if (e.note != fault_note::none) s += std::string(" [") + to_string(e.note) + "]";
    if (i == v_.at && !v_.ok()) s += std::string("  <- ") + tag(v_.violated) + " violated";
    return s;
  }

  void text(double px, double py, const std::string& s, const char* cls, const char* extra = "") {
    out_ += "<text x=\"" + num(px) + "\" y=\"" + num(py) + "\" class=\"" + cls + "\"" + extra +
            ">" + esc(s) + "</text>\n";
  }

  // Opens a group for event `i` (class `cls`) with its tooltip.
  void group(const char* cls, std::size_t i) {
    out_ += std::string("<g class=\"") + cls + "\" data-event=\"" + std::to_string(i) +
            "\"><title>" + esc(describe(i)) + "</title>";
  }

  // A label placed only if it fits into `room` px (a crowded picture drops labels, not marks).
  void label_if_fits(double px, double py, const std::string& s, double room, const char* cls) {
    if (static_cast<double>(s.size()) * char_w_ <= room) text(px, py, s, cls);
  }

  // Places a label of `s` at x `px` in lane `lane`: in the top text row if free there, else the
  // bottom one, else not at all (a crowded picture drops labels, never marks).
  void lane_label(int lane, double px, const std::string& s, const char* cls) {
    if (lane < 0) return;
    if (rows_.size() < lanes_.size()) rows_.resize(lanes_.size(), {-1e9, -1e9});
    std::pair<double, double>& r = rows_[static_cast<std::size_t>(lane)];
    const double w = static_cast<double>(s.size()) * (std::string(cls) == "sm" ? 5.2 : char_w_);
    if (px + w > width_ - 2) px = width_ - 2 - w;
    if (px >= r.first) {
      r.first = px + w + 4;
      text(px, lane_y(lane) + 10, s, cls);
    } else if (px >= r.second) {
      r.second = px + w + 4;
      text(px, lane_y(lane) + lane_h_ - 3, s, cls);
    }
  }

  std::vector<std::string> what_lines() const {
    std::vector<std::string> lines;
    if (v_.ok()) return lines;
    const std::size_t per = static_cast<std::size_t>((width_ - 40) / char_w_);
    std::string rest = std::string(to_string(v_.violated)) + " violated: " + v_.what;
    while (!rest.empty() && lines.size() < 4) {
      if (rest.size() <= per) {
        lines.push_back(rest);
        break;
      }
      std::size_t cut = rest.rfind(' ', per);
      if (cut == std::string::npos || cut == 0) cut = per;
      lines.push_back(rest.substr(0, cut));
      rest.erase(0, cut + (cut < rest.size() && rest[cut] == ' ' ? 1 : 0));
    }
    return lines;
  }

  // ---- drawing ------------------------------------------------------------------------------

  void header() {
    out_ += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
    out_ += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + std::to_string(width_) +
            "\" height=\"" + std::to_string(height_) + "\" viewBox=\"0 0 " +
            std::to_string(width_) + " " + std::to_string(height_) +
            "\" font-family=\"DejaVu Sans, Verdana, Arial, sans-serif\" font-size=\"11\">\n";
    out_ +=
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
    out_ +=
        "<style>"
        ".lbl{font-weight:bold;fill:#222}.sub{fill:#555;font-size:10px}.tk{fill:#fff;"
        "font-size:10px;font-weight:bold}.sm{font-size:9px;fill:#333}.bad{fill:#c62828;"
        "font-weight:bold}.what{fill:#c62828}.ttl{font-size:14px;font-weight:bold;fill:#111}"
        "</style>\n";
    out_ += "<rect class=\"background\" width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";
    std::string title = o_.title;
    if (title.empty()) {
      title = "holdfast history: " +
              (v_.ok() ? std::string("all invariants hold")
                       : std::string(to_string(v_.violated)) + " violated at t=" +
                             secs(v_.at < h_.events.size() ? h_.events[v_.at].true_ns : 0));
    }
    text(12, 22, title, "ttl");
    text(12, 38,
         std::to_string(h_.events.size()) + " events, simulated true time 0 .. " + secs(end_) +
             "; quiet stretches shortened (//), bursts widened: read order and overlap, not length",
         "sub");
    double y = 56;
    for (const std::string& l : what_lines()) {
      text(12, y, l, "what");
      y += 15;
    }
  }

  void axis() {
    const double y0 = top_ - 8;
    const double y1 = top_ + lane_h_ * static_cast<double>(lanes_.size());
    // Candidate ticks at a fine "nice" step; a label is drawn only where there is room.
    const std::int64_t target = std::max<std::int64_t>(end_ / 60, 1);
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
    out_ += "<g class=\"axis\">";
    double last = -1e9;
    for (std::int64_t t = 0; t <= end_; t += step) {
      const double px = x(t);
      if (px - last < 70) continue;
      last = px;
      out_ += "<line x1=\"" + num(px) + "\" y1=\"" + num(y0) + "\" x2=\"" + num(px) + "\" y2=\"" +
              num(y1) + "\" stroke=\"#e4e4e4\"/>";
      text(px + 2, y0 - 2, secs(t), "sub");
    }
    for (std::int64_t b : breaks_) {  // a shortened quiet stretch: not to scale here
      const double px = x(b);
      out_ += "<path class=\"axis-break\" d=\"M" + num(px - 5) + " " + num(y0 + 4) + " l4 -8 M" +
              num(px + 1) + " " + num(y0 + 4) + " l4 -8\" stroke=\"#999\" stroke-width=\"1.5\"/>";
    }
    out_ += "</g>\n";
  }

  void draw_lanes_background() {
    for (std::size_t i = 0; i < lanes_.size(); ++i) {
      const lane_info& l = lanes_[i];
      const double y = lane_y(static_cast<int>(i));
      const char* fill = l.kind == lane_kind::client  ? "#fafcff"
                         : l.kind == lane_kind::store ? "#f7f7f7"
                                                      : "#fbfff8";
      out_ += std::string("<g class=\"lane\" data-lane=\"") +
              (l.kind == lane_kind::client  ? "client"
               : l.kind == lane_kind::store ? "store"
                                            : "resource") +
              "\"><rect x=\"0\" y=\"" + num(y) + "\" width=\"" + std::to_string(width_) +
              "\" height=\"" + std::to_string(lane_h_) + "\" fill=\"" + fill +
              "\" stroke=\"#dddddd\"/>";
      text(10, y + 18, l.label, "lbl");
      text(10, y + 32,
           l.kind == lane_kind::client  ? "client: belief, checks"
           : l.kind == lane_kind::store ? "store: grants (its clock)"
                                        : "resource: fenced writes",
           "sub");
      out_ += "</g>\n";
    }
  }

  void draw_outages() {
    for (std::size_t i = 0; i < h_.events.size(); ++i) {
      const event& e = h_.events[i];
      if (e.kind != event_kind::store_down) continue;
      double x1 = x(end_);
      for (std::size_t j = i + 1; j < h_.events.size(); ++j) {
        if (h_.events[j].kind == event_kind::store_up && h_.events[j].node == e.node) {
          x1 = xe(j);
          break;
        }
      }
      const double x0 = xe(i);
      for (std::size_t l = 0; l < lanes_.size(); ++l) {
        if (lanes_[l].kind != lane_kind::store || lanes_[l].node != e.node) continue;
        group("outage", i);
        out_ += "<rect x=\"" + num(x0) + "\" y=\"" + num(lane_y(int(l)) + 3) + "\" width=\"" +
                num(std::max(2.0, x1 - x0)) + "\" height=\"" + std::to_string(lane_h_ - 6) +
                "\" fill=\"url(#down)\" opacity=\"0.8\"/>";
        label_if_fits(x0 + 3, lane_y(int(l)) + lane_h_ - 6, "store down", x1 - x0, "sm");
        out_ += "</g>\n";
      }
    }
  }

  struct open_grant {
    bool open = false;
    std::size_t at = 0;
    std::string owner;
    std::uint64_t token = 0;
    std::int64_t expiry = 0;  // true time (approximate, see the file comment)
    std::vector<std::size_t> renewals;
  };

  // Ends grant `g` at event `at` (npos: the end of the picture), or at its expiry if earlier.
  void close_grant(open_grant& g, int lane, std::size_t at, bool released) {
    if (!g.open) return;
    g.open = false;
    const std::int64_t at_t = at < h_.events.size() ? h_.events[at].true_ns : end_;
    const bool expired = !released || g.expiry < at_t;
    const double x0 = xe(g.at);
    const double x1 = std::max(g.expiry < at_t         ? x(g.expiry)
                               : at < h_.events.size() ? xe(at)
                                                       : x(end_),
                               x0 + 3);
    const double y = lane_y(lane) + 8;
    const double hgt = lane_h_ - 16;
    const std::string c = colour(g.owner);
    group("grant", g.at);
    out_ += "<rect x=\"" + num(x0) + "\" y=\"" + num(y) + "\" width=\"" + num(x1 - x0) +
            "\" height=\"" + num(hgt) + "\" rx=\"3\" fill=\"" + c + "\" stroke=\"" + c +
            "\" stroke-width=\"1\"/>";
    if (expired) {  // dashed end: the store's clock ran out (or the picture did)
      out_ += "<line x1=\"" + num(x1) + "\" y1=\"" + num(y - 4) + "\" x2=\"" + num(x1) +
              "\" y2=\"" + num(y + hgt + 4) +
              "\" stroke=\"#333\" stroke-width=\"1.5\" stroke-dasharray=\"3,2\"/>";
    } else {
      out_ += "<rect x=\"" + num(x1 - 2) + "\" y=\"" + num(y - 3) + "\" width=\"3\" height=\"" +
              num(hgt + 6) + "\" fill=\"#333\"/>";
    }
    for (std::size_t r : g.renewals) {
      out_ += "<line x1=\"" + num(xe(r)) + "\" y1=\"" + num(y) + "\" x2=\"" + num(xe(r)) +
              "\" y2=\"" + num(y + hgt) + "\" stroke=\"#ffffff\" stroke-width=\"1.5\"/>";
    }
    const std::string lbl = tok(g.token) + " " + g.owner;
    if (static_cast<double>(lbl.size()) * char_w_ + 6 <= x1 - x0) {
      text(x0 + 4, y + hgt / 2 + 4, lbl, "tk");
    } else {
      label_if_fits(x0 + 4, y + hgt / 2 + 4, tok(g.token), x1 - x0 - 4, "tk");
    }
    out_ += "</g>\n";
  }

  void draw_grants() {
    std::vector<open_grant> g(lanes_.size());
    for (std::size_t i = 0; i < h_.events.size(); ++i) {
      const event& e = h_.events[i];
      if (!is_store_kind(e.kind) || e.kind == event_kind::store_down ||
          e.kind == event_kind::store_up) {
        continue;
      }
      const int lane = lane_of(lane_kind::store, e.node, e.key);
      if (lane < 0 || e.outcome == not_applied) continue;
      open_grant& cur = g[static_cast<std::size_t>(lane)];
      if (e.outcome != 0) {
        if (o_.refused_store_calls) {
          group("refused", i);
          const double y = lane_y(lane) + lane_h_ - 7;
          out_ += "<line x1=\"" + num(xe(i)) + "\" y1=\"" + num(y) + "\" x2=\"" + num(xe(i)) +
                  "\" y2=\"" + num(y + 5) + "\" stroke=\"#888\" stroke-width=\"1\"/></g>\n";
        }
        continue;
      }
      const std::int64_t until = true_of_local(i, e.node, e.local_ns + e.ttl_ms * 1000000);
      if (cur.open && cur.expiry <= e.true_ns) close_grant(cur, lane, i, false);
      switch (e.kind) {
        case event_kind::store_acquire:
          if (cur.open && cur.owner == e.owner && cur.token == e.token) {
            cur.renewals.push_back(i);
            cur.expiry = std::max(cur.expiry, until);
            break;
          }
          close_grant(cur, lane, i, false);
          cur = open_grant{true, i, e.owner, e.token, until, {}};
          break;
        case event_kind::store_renew:
          if (cur.open && cur.token == e.token) {
            cur.renewals.push_back(i);
            cur.expiry = std::max(cur.expiry, until);
          }
          break;
        case event_kind::store_release:
          if (cur.open && cur.token == e.token) close_grant(cur, lane, i, true);
          break;
        case event_kind::store_raise:
          if (cur.open) cur.token = static_cast<std::uint64_t>(e.value);
          break;
        default:
          break;
      }
    }
    for (std::size_t l = 0; l < g.size(); ++l) {
      close_grant(g[l], static_cast<int>(l), static_cast<std::size_t>(-1), false);
    }
  }

  // The x where the belief that client event `i` (acquired / liveness_acquired) starts ends: its
  // validity's end, or the event that ended it first.
  double belief_end(std::size_t i) const {
    const event& a = h_.events[i];
    std::int64_t until = a.value > 0 ? true_of_local(i, a.node, a.value) : end_;
    for (std::size_t j = i + 1; j < h_.events.size(); ++j) {
      const event& e = h_.events[j];
      if (e.node != a.node || is_store(e.node)) continue;
      if (e.true_ns >= until) break;
      switch (e.kind) {
        case event_kind::renewed:
          if (e.value > 0) until = std::max(until, true_of_local(j, e.node, e.value));
          break;
        case event_kind::validity:
          if (e.value == 0) return xe(j);
          break;
        case event_kind::renew_failed:
          if (e.outcome == static_cast<outcome_code>(errc::lease_lost)) return xe(j);
          break;
        case event_kind::released:
        case event_kind::release_failed:
        case event_kind::crash:
        case event_kind::acquired:
          return xe(j);
        default:
          break;
      }
    }
    return x(until);
  }

  void mark_circle(double cx, double cy, double r, const char* fill, const char* stroke) {
    out_ += "<circle cx=\"" + num(cx) + "\" cy=\"" + num(cy) + "\" r=\"" + num(r) + "\" fill=\"" +
            fill + "\" stroke=\"" + stroke + "\" stroke-width=\"1.5\"/>";
  }

  void draw_client_events() {
    // Beliefs first (underneath), then the marks on top.
    for (std::size_t i = 0; i < h_.events.size(); ++i) {
      const event& e = h_.events[i];
      if (e.kind != event_kind::acquired && e.kind != event_kind::liveness_acquired) continue;
      const int lane = client_lane(e);
      if (lane < 0) continue;
      const double x0 = xe(i);
      const double x1 = std::max(belief_end(i), x0 + 3);
      const double y = lane_y(lane) + 14;
      const std::string c = colour(who(e));
      group("belief", i);
      out_ += "<rect x=\"" + num(x0) + "\" y=\"" + num(y) + "\" width=\"" + num(x1 - x0);
      out_ += "\" height=\"18\" rx=\"3\" fill=\"" + c + "\" fill-opacity=\"0.28\" stroke=\"";
      out_ += c + "\"/>";
      label_if_fits(x0 + 4, y + 13, "believes " + tok(e.token), x1 - x0 - 6, "sm");
      out_ += "</g>\n";
    }
    for (std::size_t i = 0; i < h_.events.size(); ++i) {
      const event& e = h_.events[i];
      const int lane = client_lane(e);
      if (lane < 0) continue;
      const double cx = xe(i);
      const double ym = mid(lane);
      switch (e.kind) {
        case event_kind::pause: {
          group("pause", i);
          const double w = std::max(2.0, x(e.true_ns + e.value) - cx);
          out_ += "<rect x=\"" + num(cx) + "\" y=\"" + num(lane_y(lane) + 2) + "\" width=\"" +
                  num(w) + "\" height=\"10\" fill=\"url(#hatch)\" stroke=\"#d9a400\"/>";
          if (w > 30) lane_label(lane, cx + 2, "pause " + secs(e.value), "sm");
          out_ += "</g>\n";
          break;
        }
        case event_kind::validity:
          group(e.value == 1 ? "check-valid" : "check-invalid", i);
          mark_circle(cx, ym + 1, 4, e.value == 1 ? "#2e7d32" : "#ffffff",
                      e.value == 1 ? "#1b5e20" : "#777777");
          out_ += "</g>\n";
          break;
        case event_kind::acquire_failed:
        case event_kind::liveness_failed:
          group("acquire-failed", i);
          out_ += "<path d=\"M" + num(cx) + " " + num(ym - 5) + " l5 5 l-5 5 l-5 -5 z\" " +
                  "fill=\"#ffffff\" stroke=\"#e65100\" stroke-width=\"1.5\"/>";
          lane_label(lane, cx + 6, outcome_name(e.outcome), "sm");
          out_ += "</g>\n";
          break;
        case event_kind::renewed:
          group("renewed", i);
          out_ += "<path d=\"M" + num(cx - 4) + " " + num(ym + 10) + " l4 -6 l4 6 z\" " +
                  "fill=\"#2e7d32\"/></g>\n";
          break;
        case event_kind::renew_failed:
          group("renew-failed", i);
          out_ += "<path d=\"M" + num(cx - 4) + " " + num(ym + 10) + " l4 -6 l4 6 z\" " +
                  "fill=\"#c62828\"/>";
          lane_label(lane, cx + 5, std::string("renew: ") + outcome_name(e.outcome), "sm");
          out_ += "</g>\n";
          break;
        case event_kind::released:
        case event_kind::release_failed:
          group(e.kind == event_kind::released ? "released" : "release-failed", i);
          out_ += "<rect x=\"" + num(cx - 3) + "\" y=\"" + num(ym - 3) +
                  "\" width=\"6\" height=\"6\" fill=\"" +
                  (e.kind == event_kind::released ? "#555555" : "#c62828") + "\"/></g>\n";
          break;
        case event_kind::crash:
          group("crash", i);
          out_ += "<path d=\"M" + num(cx - 6) + " " + num(ym - 6) + " l12 12 M" + num(cx + 6) +
                  " " + num(ym - 6) + " l-12 12\" stroke=\"#c62828\" stroke-width=\"3\"/>";
          lane_label(lane, cx + 8, "crash", "bad");
          out_ += "</g>\n";
          break;
        case event_kind::restart:
          group("restart", i);
          out_ += "<path d=\"M" + num(cx) + " " + num(ym - 6) + " l0 12\" stroke=\"#2e7d32\" " +
                  "stroke-width=\"3\"/>";
          lane_label(lane, cx + 4, "restart" + (e.owner.empty() ? std::string() : " as " + e.owner),
                     "sm");
          out_ += "</g>\n";
          break;
        case event_kind::clock_jump:
          group("clock-jump", i);
          out_ += "<path d=\"M" + num(cx) + " " + num(ym + 8) + " l" + (e.value >= 0 ? "8" : "-8") +
                  " -4 l" + (e.value >= 0 ? "-8" : "8") + " -4 z\" fill=\"#6a1b9a\"/>";
          lane_label(lane, cx + 10,
                     std::string("clock ") + (e.value >= 0 ? "+" : "") + secs(e.value), "sm");
          out_ += "</g>\n";
          break;
        case event_kind::store_acquire:
        case event_kind::store_renew:
        case event_kind::store_release:
        case event_kind::store_raise:
          draw_fault(i, lane);
          break;
        default:
          break;
      }
    }
  }

  // Store calls seen from the caller's lane: time in flight, a lost reply, an error after applying.
  void draw_fault(std::size_t i, int lane) {
    const event& e = h_.events[i];
    const double cx = xe(i);
    const double y = lane_y(lane) + lane_h_ - 9;
    switch (e.note) {
      case fault_note::none:
        return;
      case fault_note::request_delayed:
      case fault_note::reply_delayed: {
        const bool req = e.note == fault_note::request_delayed;
        const double a = req ? x(e.true_ns - e.value) : cx;
        const double b = req ? cx : x(e.true_ns + e.value);
        group(req ? "request-delayed" : "reply-delayed", i);
        out_ += "<line x1=\"" + num(a) + "\" y1=\"" + num(y) + "\" x2=\"" + num(b) + "\" y2=\"" +
                num(y) + "\" stroke=\"#555\" stroke-width=\"1.5\" stroke-dasharray=\"1,2\"/>";
        out_ += "<circle cx=\"" + num(cx) + "\" cy=\"" + num(y) + "\" r=\"2\" fill=\"#555\"/>";
        out_ += "</g>\n";
        return;
      }
      case fault_note::reply_lost:
        group("reply-lost", i);
        out_ += "<path d=\"M" + num(cx - 4) + " " + num(y - 4) + " l8 8 M" + num(cx + 4) + " " +
                num(y - 4) + " l-8 8\" stroke=\"#c62828\" stroke-width=\"2\"/>";
        lane_label(lane, cx + 6, "reply lost", "sm");
        out_ += "</g>\n";
        return;
      case fault_note::error_after:
        group("error-after", i);
        out_ += "<path d=\"M" + num(cx) + " " + num(y - 5) + " l5 9 l-10 0 z\" fill=\"#e65100\"/>";
        lane_label(lane, cx + 6, "error after applying", "sm");
        out_ += "</g>\n";
        return;
    }
  }

  void draw_writes() {
    for (std::size_t i = 0; i < h_.events.size(); ++i) {
      const event& e = h_.events[i];
      if (e.kind != event_kind::write) continue;
      const int lane = lane_of(lane_kind::resource, no_node, e.key);
      if (lane < 0) continue;
      const double cx = xe(i);
      const double cy = mid(lane);
      const bool admitted = e.outcome == 0;
      const bool violating = !v_.ok() && v_.at == i;
      group(admitted ? "write-admitted" : "write-refused", i);
      const int from = client_lane(e);
      if (from >= 0) {
        out_ += "<line x1=\"" + num(cx) + "\" y1=\"" + num(mid(from)) + "\" x2=\"" + num(cx) +
                "\" y2=\"" + num(cy) + "\" stroke=\"" + colour(who(e)) +
                "\" stroke-width=\"1\" stroke-dasharray=\"2,2\" opacity=\"0.7\"/>";
      }
      if (admitted) {
        mark_circle(cx, cy, 6, "#2e7d32", "#1b5e20");
      } else {
        mark_circle(cx, cy, 6, "#ffffff", "#c62828");
        out_ += "<path d=\"M" + num(cx - 3) + " " + num(cy - 3) + " l6 6 M" + num(cx + 3) + " " +
                num(cy - 3) + " l-6 6\" stroke=\"#c62828\" stroke-width=\"1.5\"/>";
      }
      lane_label(lane, cx + 8, tok(e.token) + (admitted ? "" : " refused"),
                 violating ? "bad" : "sm");
      out_ += "</g>\n";
    }
  }

  void draw_marks() {
    const double y0 = top_ - 4;
    const double y1 = top_ + lane_h_ * static_cast<double>(lanes_.size());
    for (std::size_t i = 0; i < h_.events.size(); ++i) {
      if (h_.events[i].kind != event_kind::heal) continue;
      const double hx = xe(i);
      group("heal", i);
      out_ += "<line x1=\"" + num(hx) + "\" y1=\"" + num(y0) + "\" x2=\"" + num(hx) + "\" y2=\"" +
              num(y1) + "\" stroke=\"#777\" stroke-width=\"1\" stroke-dasharray=\"6,4\"/>";
      text(hx + 130 > width_ ? hx - 128 : hx + 3, y1 + 12, "faults stop (L1 check)", "sub");
      out_ += "</g>\n";
    }
    if (v_.ok() || v_.at >= h_.events.size()) return;
    const event& e = h_.events[v_.at];
    const double vx = xe(v_.at);
    group("violation", v_.at);
    out_ += "<line x1=\"" + num(vx) + "\" y1=\"" + num(y0) + "\" x2=\"" + num(vx) + "\" y2=\"" +
            num(y1) + "\" stroke=\"#c62828\" stroke-width=\"2\" stroke-dasharray=\"5,3\"/>";
    // Ring what violated: the write, the grant, the renewal or the check, on its own lane.
    int lane = -1;
    if (e.kind == event_kind::write) {
      lane = lane_of(lane_kind::resource, no_node, e.key);
    } else if (is_store_kind(e.kind)) {
      lane = lane_of(lane_kind::store, e.node, e.key);
    } else {
      lane = client_lane(e);
    }
    if (lane >= 0) {
      out_ += "<circle cx=\"" + num(vx) + "\" cy=\"" + num(mid(lane)) +
              "\" r=\"13\" fill=\"none\" stroke=\"#c62828\" stroke-width=\"3\"/>";
    }
    const std::string t = std::string(tag(v_.violated)) + " violated";
    const double tx = vx + 6 + static_cast<double>(t.size()) * char_w_ > width_
                          ? vx - 6 - static_cast<double>(t.size()) * char_w_
                          : vx + 6;
    text(tx, y0 + 9, t, "bad");
    out_ += "</g>\n";
  }

  void legend() {
    double y = top_ + lane_h_ * static_cast<double>(lanes_.size()) + 30;
    double lx = 12;
    const auto item = [&](const std::string& shape, const char* what) {
      out_ +=
          "<g class=\"legend\" transform=\"translate(" + num(lx) + "," + num(y) + ")\">" + shape;
      text(18, 4, what, "sm");
      out_ += "</g>";
      lx += 26 + static_cast<double>(std::string(what).size()) * 5.4;
      if (lx > width_ - 140) {
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
    out_ += "\n";
  }

  const history& h_;
  const verdict& v_;
  const svg_options& o_;
  int width_;
  int height_ = 0;
  int top_ = 0;
  std::int64_t end_ = 1;
  struct knot {
    std::int64_t t;
    double u;
  };
  std::vector<std::pair<double, double>> rows_;  // per lane: where each label row is free
  std::vector<knot> knots_;                      // the axis: true time -> display units
  std::vector<double> ev_u_;                     // each event's display unit
  std::vector<std::int64_t> breaks_;             // quiet stretches that were shortened
  double total_ = 1;
  std::vector<bool> store_;
  std::vector<bool> used_;
  std::vector<lane_info> lanes_;
  std::string out_;
};

}  // namespace detail

/// Returns history `h` drawn as a self-contained SVG document (see the table at the top of
/// svg.hpp), with verdict `v` (from check(h)) marked where it happened. Any history is accepted,
/// including an empty one and events naming unknown nodes or keys (drawn as far as they can be);
/// owner ids and keys are escaped, and bytes outside printable ASCII are shown as '?'.
/// Thread-safety: a pure function of its arguments.
[[nodiscard]] inline std::string to_svg(const history& h, const verdict& v,
                                        const svg_options& o = {}) {
  return detail::svg_writer(h, v, o).run();
}

/// As to_svg(h, check(h), o): checks the history first, so a violation is marked.
[[nodiscard]] inline std::string to_svg(const history& h, const svg_options& o = {}) {
  const verdict v = check(h);
  return detail::svg_writer(h, v, o).run();
}

/// Returns the directory named by the environment variable HOLDFAST_SVG_DIR, or "" if it is unset
/// or empty. check_store(), fuzz_store() and the simulator tests write counterexample pictures
/// there (save_counterexample()).
[[nodiscard]] inline std::string svg_dir_from_env() {
  // NOLINTNEXTLINE(concurrency-mt-unsafe): holdfast never sets the environment.
  const char* d = std::getenv("HOLDFAST_SVG_DIR");
  return d != nullptr ? std::string(d) : std::string();
}

/// Writes `<dir>/<name>.svg` (the picture of `h`, with `v` marked) and `<dir>/<name>.txt` (the
/// verdict's report and the full history as text, the same timeline the checker prints), if
/// `dir` is not empty. The directory must exist (CI creates it; nothing is created here). Names
/// are used as given: pass something filesystem-safe (letters, digits, '-', '_', '.').
/// \returns the path of the SVG written, or "" if `dir` is empty or a file could not be written
///   (no exception: a picture is a diagnostic and must not turn one failure into another).
/// Thread-safety: concurrent calls must use distinct names.
inline std::string save_counterexample(const std::string& dir, const std::string& name,
                                       const history& h, const verdict& v) {
  if (dir.empty()) return {};
  const std::string base = dir + (dir.back() == '/' ? "" : "/") + name;
  const auto write = [](const std::string& path, const std::string& text) {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr) return false;
    const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
    return std::fclose(f) == 0 && ok;
  };
  svg_options o;
  o.title = name + ": " +
            (v.ok() ? std::string("all invariants hold")
                    : std::string(to_string(v.violated)) + " violated");
  const bool svg_ok = write(base + ".svg", to_svg(h, v, o));
  (void)write(base + ".txt", v.report() + "\nfull history:\n" + to_string(h));
  return svg_ok ? base + ".svg" : std::string();
}

}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_SVG_HPP