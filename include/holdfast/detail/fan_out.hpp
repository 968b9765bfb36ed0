// SPDX-License-Identifier: MIT
// holdfast/detail/fan_out.hpp - moved to holdfast/quorum/detail/fan_out.hpp, beside the layer it
// serves (include/holdfast/detail/ keeps the ground floor only); this path keeps working. Not for
// users.
#ifndef HOLDFAST_DETAIL_FAN_OUT_HPP_FORWARD
#define HOLDFAST_DETAIL_FAN_OUT_HPP_FORWARD
#include "holdfast/quorum/detail/fan_out.hpp"
#endif  // HOLDFAST_DETAIL_FAN_OUT_HPP_FORWARD
