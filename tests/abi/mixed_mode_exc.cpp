// SPDX-License-Identifier: MIT
// The other half of the mixed-mode link test, built with exceptions, and its main(): both halves
// must run correctly in one program, and must have been compiled in different ABI namespaces.
#include <cstdio>
#include <cstring>

#include "mixed_mode.hpp"

namespace holdfast_abi_test {

const char* abi_name_exc() {
  return HOLDFAST_ABI_TEST_STRINGIFY(HOLDFAST_ABI_NAMESPACE);
}
int exercise_exc() {
  return exercise();
}

}  // namespace holdfast_abi_test

int main() {
  using namespace holdfast_abi_test;
  if (std::strcmp(abi_name_exc(), abi_name_noexc()) == 0) {
    std::fprintf(stderr, "both modes compiled into the same ABI namespace %s\n", abi_name_exc());
    return 1;
  }
  const int a = exercise_exc();
  const int b = exercise_noexc();
  if (a != 0 || b != 0) {
    std::fprintf(stderr, "exercise failed: with exceptions %d, without %d\n", a, b);
    return 1;
  }
  std::printf("mixed-mode link: %s and %s run together\n", abi_name_exc(), abi_name_noexc());
  return 0;
}
