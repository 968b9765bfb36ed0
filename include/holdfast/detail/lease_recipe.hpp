// SPDX-License-Identifier: MIT
// holdfast/detail/lease_recipe.hpp - moved to holdfast/recipes/detail/lease_recipe.hpp, beside the
// layer it serves (include/holdfast/detail/ keeps the ground floor only); this path keeps working.
// Not for users.
#ifndef HOLDFAST_DETAIL_LEASE_RECIPE_HPP_FORWARD
#define HOLDFAST_DETAIL_LEASE_RECIPE_HPP_FORWARD
#include "holdfast/recipes/detail/lease_recipe.hpp"
#endif  // HOLDFAST_DETAIL_LEASE_RECIPE_HPP_FORWARD
