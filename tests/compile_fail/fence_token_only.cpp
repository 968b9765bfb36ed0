// SPDX-License-Identifier: MIT
// Token-only admission is gone (issue 20): a fence admits by (token, owner), because a token alone
// cannot tell "its holder writes again" from "a second holder of a re-issued token". An old call
// admit(token) is refused, under C++20 by the fence_holder constraint, under C++17 by a
// static_assert saying a token alone is not enough.
// expect-error: a token alone is not enough|fence_holder
// holdfast: control
#include <holdfast/fence.hpp>

int main() {
  holdfast::fence_gate gate;
  const holdfast::fencing_token token(7);
#ifdef HOLDFAST_COMPILE_FAIL_CONTROL  // the control passes the owner, and then it compiles
  return gate.admit(token, "holder-A") ? 0 : 1;
#else
  return gate.admit(token) ? 0 : 1;
#endif
}
