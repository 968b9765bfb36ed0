// SPDX-License-Identifier: MIT
// holdfast/testing/svg_options.hpp - how to_svg() (svg.hpp) draws a history: title, width, and
// whether refused store calls are drawn.
//
// Thread-safety: a value type.
#ifndef HOLDFAST_TESTING_SVG_OPTIONS_HPP
#define HOLDFAST_TESTING_SVG_OPTIONS_HPP

#include <string>

#include "holdfast/detail/config.hpp"

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

}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_SVG_OPTIONS_HPP
