// SPDX-License-Identifier: MIT
// holdfast/detail/quorum_round.hpp - moved to holdfast/quorum/detail/quorum_round.hpp, beside the
// layer it serves (include/holdfast/detail/ keeps the ground floor only); this path keeps working.
// Not for users.
#ifndef HOLDFAST_DETAIL_QUORUM_ROUND_HPP_FORWARD
#define HOLDFAST_DETAIL_QUORUM_ROUND_HPP_FORWARD
#include "holdfast/quorum/detail/quorum_round.hpp"
#endif  // HOLDFAST_DETAIL_QUORUM_ROUND_HPP_FORWARD
