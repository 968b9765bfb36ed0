// SPDX-License-Identifier: MIT
// holdfast/detail/lease_shared.hpp - moved to holdfast/lease/detail/lease_shared.hpp, beside the
// layer it serves (include/holdfast/detail/ keeps the ground floor only); this path keeps working.
// Not for users.
#ifndef HOLDFAST_DETAIL_LEASE_SHARED_HPP_FORWARD
#define HOLDFAST_DETAIL_LEASE_SHARED_HPP_FORWARD
#include "holdfast/lease/detail/lease_shared.hpp"
#endif  // HOLDFAST_DETAIL_LEASE_SHARED_HPP_FORWARD
