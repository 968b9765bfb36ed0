// SPDX-License-Identifier: MIT
// holdfast/detail/give_back.hpp - moved to holdfast/stores/detail/give_back.hpp, beside the layer
// it serves (include/holdfast/detail/ keeps the ground floor only); this path keeps working. Not
// for users.
#ifndef HOLDFAST_DETAIL_GIVE_BACK_HPP_FORWARD
#define HOLDFAST_DETAIL_GIVE_BACK_HPP_FORWARD
#include "holdfast/stores/detail/give_back.hpp"
#endif  // HOLDFAST_DETAIL_GIVE_BACK_HPP_FORWARD
