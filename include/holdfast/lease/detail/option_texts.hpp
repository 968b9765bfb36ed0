// SPDX-License-Identifier: MIT
// holdfast/lease/detail/option_texts.hpp - what is wrong with an option value, in words: the
// field, its value and the limit it broke ("drift of 1.5 is not in [0, 1)"), for the refusals of
// the recipes' and the keepalive's constructors (error_message()) and of acquire's input
// (acquire_report::last_store_message). One function per options struct, each returning "" when
// the struct's check() passes, so the text and the check cannot disagree on what is valid. Not
// for users.
#ifndef HOLDFAST_LEASE_DETAIL_OPTION_TEXTS_HPP
#define HOLDFAST_LEASE_DETAIL_OPTION_TEXTS_HPP

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "holdfast/backoff.hpp"
#include "holdfast/detail/config.hpp"
#include "holdfast/validity.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

// A double as the shortest text that reads back the same ("1.5", "nan", "-inf").
inline std::string number_text(double v) {
  char buf[32];
  for (int digits = 1; digits <= 17; ++digits) {
    (void)std::snprintf(buf, sizeof buf, "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  return buf;
}

// A duration in whole nanoseconds, with its unit.
inline std::string ns_text(std::chrono::nanoseconds d) {
  return std::to_string(d.count()) + " ns";
}

// What backoff_options::check() refuses in `b`, the fields named under `field` ("" if none).
inline std::string backoff_problem(const backoff_options& b, const std::string& field) {
  if (b.initial <= std::chrono::nanoseconds::zero()) {
    return field + ".initial of " + ns_text(b.initial) + " is not positive";
  }
  if (b.max_delay < b.initial) {
    return field + ".max_delay of " + ns_text(b.max_delay) + " is under initial (" +
           ns_text(b.initial) + ")";
  }
  if (!(b.multiplier >= 1.0)) {
    return field + ".multiplier of " + number_text(b.multiplier) + " is not >= 1";
  }
  return {};
}

// What validity_options::check() refuses in `v`, the fields named under `field` ("" if none).
inline std::string validity_problem(const validity_options& v, const std::string& field) {
  if (!(v.drift >= 0.0 && v.drift < 1.0)) {
    return field + ".drift of " + number_text(v.drift) + " is not in [0, 1)";
  }
  if (v.margin < std::chrono::nanoseconds::zero()) {
    return field + ".margin of " + ns_text(v.margin) + " is negative";
  }
  return {};
}

// An interval that must lie in (0, 1 h] (observe_interval, poll_interval): "" if it does.
inline std::string interval_problem(std::chrono::nanoseconds d, const std::string& field) {
  if (d > std::chrono::nanoseconds::zero() && d <= std::chrono::hours(1)) return {};
  return field + " of " + ns_text(d) + " is not in (0, 1 h]";
}

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_LEASE_DETAIL_OPTION_TEXTS_HPP
