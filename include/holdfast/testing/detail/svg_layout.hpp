// SPDX-License-Identifier: MIT
// holdfast/testing/detail/svg_layout.hpp - where things go in the picture of a history (svg.hpp):
// the lanes, the time axis, the owners' colours and the verdict's sentence broken into lines.
// Computed once from the history; the drawing (svg_frame.hpp, svg_lanes.hpp) only reads it.
//
//   piece        | how it is laid out
//   -------------+--------------------------------------------------------------------------------
//   lanes        | one per client, per (store, key) and per resource; clients first, then stores,
//                | then resources, each kind in the order first seen; lane_h px high each
//   time axis    | piecewise linear through every event: a quiet stretch longer than a tenth of
//                | the run is shortened to that (a "break"), and every event gets a few units of
//                | its own, so bursts stay readable and events at one instant keep their order
//   x            | left px of labels, then the axis, then right px of margin
//   colours      | by owner: the node of that name's palette entry, so an owner has one colour in
//                | its own lane and the store's
//
// Not a public header.
#ifndef HOLDFAST_TESTING_DETAIL_SVG_LAYOUT_HPP
#define HOLDFAST_TESTING_DETAIL_SVG_LAYOUT_HPP

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/testing/history.hpp"
#include "holdfast/testing/verdict.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace testing {
namespace detail {
namespace svg {

enum class lane_kind { client, store, resource };

struct lane_info {
  lane_kind kind;
  node_id node;
  std::uint8_t key;
  std::string label;
};

// The events drawn on a store's lane (and which make their node a store).
inline bool is_store_kind(event_kind k) noexcept {
  return k == event_kind::store_acquire || k == event_kind::store_renew ||
         k == event_kind::store_release || k == event_kind::store_down ||
         k == event_kind::store_up || k == event_kind::store_raise;
}

class layout {
 public:
  static constexpr int left = 190;
  static constexpr int right = 24;
  static constexpr int lane_h = 46;
  static constexpr double char_w = 6.2;  // width of one 11px sans-serif character, roughly

  layout(const history& h, const verdict& v, int width)
      : h_(h), v_(v), width_(std::max(width, 480)) {
    classify();
    span();
    place_lanes();
  }

  int width() const noexcept { return width_; }
  int height() const noexcept { return height_; }
  int top() const noexcept { return top_; }           // y of the first lane
  std::int64_t end() const noexcept { return end_; }  // the axis ends here (true ns)
  const std::vector<lane_info>& all_lanes() const noexcept { return lanes_; }
  const std::vector<std::int64_t>& breaks() const noexcept { return breaks_; }

  bool is_store(node_id n) const noexcept { return n < store_.size() && store_[n]; }

  std::string key_name(std::uint8_t k) const {
    return k < h_.keys.size() ? h_.keys[k] : "key " + std::to_string(k);
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
  double lane_y(int lane) const { return top_ + lane * lane_h; }
  double mid(int lane) const { return lane_y(lane) + lane_h / 2.0; }

  // The x of true time `t`: at the first event at or after it, interpolated inside a gap.
  double x(std::int64_t t) const {
    const double w = width_ - left - right;
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
    return left + w * u / total_;
  }
  // The x of event `i` (events at one instant are spread in their order).
  double xe(std::size_t i) const {
    const double w = width_ - left - right;
    return left + w * (i < ev_u_.size() ? ev_u_[i] : total_) / total_;
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

  // The verdict's sentence, broken into at most 4 lines that fit the width (none if ok).
  std::vector<std::string> what_lines() const {
    std::vector<std::string> lines;
    if (v_.ok()) return lines;
    const std::size_t per = static_cast<std::size_t>((width_ - 40) / char_w);
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

 private:
  struct knot {
    std::int64_t t;
    double u;
  };

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

  // The time axis (see the table at the top).
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

  void add_lane(lane_kind kind, node_id node, std::uint8_t key, std::string label) {
    for (const lane_info& l : lanes_) {
      if (l.kind == kind && l.node == node && l.key == key) return;
    }
    lanes_.push_back({kind, node, key, std::move(label)});
  }

  void place_lanes() {
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
    height_ = top_ + lane_h * static_cast<int>(lanes_.size()) + 78;
  }

  const history& h_;
  const verdict& v_;
  int width_;
  int height_ = 0;
  int top_ = 0;
  std::int64_t end_ = 1;
  std::vector<knot> knots_;           // the axis: true time -> display units
  std::vector<double> ev_u_;          // each event's display unit
  std::vector<std::int64_t> breaks_;  // quiet stretches that were shortened
  double total_ = 1;
  std::vector<bool> store_;
  std::vector<bool> used_;
  std::vector<lane_info> lanes_;
};

}  // namespace svg
}  // namespace detail
}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_DETAIL_SVG_LAYOUT_HPP
