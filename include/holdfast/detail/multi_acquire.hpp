// SPDX-License-Identifier: MIT
// holdfast/detail/multi_acquire.hpp - moved to holdfast/lease/detail/multi_acquire.hpp, beside the
// layer it serves (include/holdfast/detail/ keeps the ground floor only); this path keeps working.
// Not for users.
#ifndef HOLDFAST_DETAIL_MULTI_ACQUIRE_HPP_FORWARD
#define HOLDFAST_DETAIL_MULTI_ACQUIRE_HPP_FORWARD
#include "holdfast/lease/detail/multi_acquire.hpp"
#endif  // HOLDFAST_DETAIL_MULTI_ACQUIRE_HPP_FORWARD
