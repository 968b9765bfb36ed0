// SPDX-License-Identifier: MIT
// Half of the mixed-mode link test (see tests/abi/CMakeLists.txt): built with -fno-exceptions
// -fno-rtti. It instantiates the same holdfast templates as mixed_mode_exc.cpp, whose layouts
// depend on HOLDFAST_HAS_EXCEPTIONS (the lease's shared state, the keepalive, the quorum's rounds).
#include "mixed_mode.hpp"

namespace holdfast_abi_test {

const char* abi_name_noexc() {
  return HOLDFAST_ABI_TEST_STRINGIFY(HOLDFAST_ABI_NAMESPACE);
}
int exercise_noexc() {
  return exercise();
}

}  // namespace holdfast_abi_test
