// SPDX-License-Identifier: MIT
// holdfast/testing/detail/event_text.hpp - the small text forms the checker's timeline and the
// SVG's tooltips share: durations, fencing tokens, and who acted in an event.
//
// Not a public header (checker.hpp and svg.hpp use it).
#ifndef HOLDFAST_TESTING_DETAIL_EVENT_TEXT_HPP
#define HOLDFAST_TESTING_DETAIL_EVENT_TEXT_HPP

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "holdfast/detail/config.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/testing/history.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace testing {
namespace detail {

// A duration in seconds with three decimals, e.g. "1.250s".
inline std::string fmt_seconds(std::int64_t ns) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.3fs", static_cast<double>(ns) / 1e9);
  return buf;
}

// A time in seconds with `decimals` decimals (3, 6 or 9): a timeline whose events are 1 ns apart
// prints them 1 ns apart.
inline std::string fmt_seconds(std::int64_t ns, int decimals) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*fs", decimals, static_cast<double>(ns) / 1e9);
  return buf;
}

// The decimals a list of times needs so that no two different ones print alike: 3 when they are
// at least 1 ms apart, 6 for 1 us, else 9.
template <class Times>
int decimals_for(const Times& sorted) {
  std::int64_t gap = 1000000;
  for (std::size_t k = 1; k < sorted.size(); ++k) {
    const std::int64_t d = sorted[k] - sorted[k - 1];
    if (d > 0 && d < gap) gap = d;
  }
  return gap >= 1000000 ? 3 : gap >= 1000 ? 6 : 9;
}

// A span that may be as short as one clock tick: seconds, or ns/us when under a millisecond (a
// lease ended one tick early must not read "live for another 0.000s").
inline std::string fmt_span(std::int64_t ns) {
  const std::int64_t a = ns < 0 ? -ns : ns;
  if (a >= 1000000) return fmt_seconds(ns);
  char buf[48];
  if (a < 1000) {
    std::snprintf(buf, sizeof buf, "%lldns", static_cast<long long>(ns));
  } else {
    std::snprintf(buf, sizeof buf, "%.3fus", static_cast<double>(ns) / 1e3);
  }
  return buf;
}

// Why a grant overlapped a live lease (S3's message): an operation that began before the lease it
// overrode was granted acted on what it read before a stall (the harm is that earlier read); else
// the store ended the lease before the TTL it reported, a T2 matter.
inline std::string overlap_cause(const history& h, std::size_t victim_grant, const event& e) {
  if (victim_grant < h.events.size() && e.begin_local_ns != 0 &&
      e.begin_local_ns < h.events[victim_grant].local_ns) {
    return ": this operation began " + fmt_span(e.local_ns - e.begin_local_ns) +
           " earlier, before that lease was granted, and acted on what it read then (a step that "
           "frees a key must re-check, in that step, that the key is still expired)";
  }
  return ": the store ended that lease before the TTL it reported (store.hpp, T2)";
}

inline std::string fmt_token(std::uint64_t t) {
  return holdfast::to_string(fencing_token{t});  // fencing_token.hpp's one text form
}

// Who acted in `e`: its owner id, else the calling client of a store event, else the node.
inline std::string actor(const history& h, const event& e) {
  if (!e.owner.empty()) return e.owner;
  return h.node_name(e.peer != no_node ? e.peer : e.node);
}

// The name of key index `k` ("?" if the history names no such key), as messages quote it.
inline const std::string& key_label(const history& h, std::uint8_t k) {
  static const std::string unknown = "?";
  return k < h.keys.size() ? h.keys[k] : unknown;
}

// True for the store events that apply an operation a client asked for (not down/up/raise).
inline bool is_store_call(event_kind k) noexcept {
  return k == event_kind::store_acquire || k == event_kind::store_renew ||
         k == event_kind::store_release;
}

}  // namespace detail
}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_DETAIL_EVENT_TEXT_HPP
