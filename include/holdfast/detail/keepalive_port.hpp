// SPDX-License-Identifier: MIT
// holdfast/detail/keepalive_port.hpp - moved to holdfast/lease/detail/keepalive_port.hpp, beside
// the layer it serves (include/holdfast/detail/ keeps the ground floor only); this path keeps
// working. Not for users.
#ifndef HOLDFAST_DETAIL_KEEPALIVE_PORT_HPP_FORWARD
#define HOLDFAST_DETAIL_KEEPALIVE_PORT_HPP_FORWARD
#include "holdfast/lease/detail/keepalive_port.hpp"
#endif  // HOLDFAST_DETAIL_KEEPALIVE_PORT_HPP_FORWARD
