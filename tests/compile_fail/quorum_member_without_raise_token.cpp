// SPDX-License-Identifier: MIT
// A LeaseStore without the token-floor capability cannot be a quorum member (its tokens could go
// backwards across majorities): quorum_store<Store> refuses it, under C++20 by the quorum_member
// constraint (naming raise_token), under C++17 by the static_assert naming
// `result<void> raise_token(...)`.
// expect-error: needs .result<void> raise_token\(|s\.raise_token\(key, owner, token, to\)
// holdfast: control
#include <chrono>
#include <holdfast/quorum.hpp>
#include <string_view>
#include <vector>

struct store_without_raise_token {
  holdfast::result<holdfast::grant> try_acquire(std::string_view, std::string_view,
                                                std::chrono::milliseconds) {
    return holdfast::errc::busy;
  }
  holdfast::result<holdfast::grant> renew(std::string_view, std::string_view,
                                          holdfast::fencing_token, std::chrono::milliseconds) {
    return holdfast::errc::lease_lost;
  }
  holdfast::result<void> release(std::string_view, std::string_view, holdfast::fencing_token) {
    return holdfast::errc::not_holder;
  }
#ifdef HOLDFAST_COMPILE_FAIL_CONTROL  // the control adds raise_token, and then it compiles
  holdfast::result<void> raise_token(std::string_view, std::string_view, holdfast::fencing_token,
                                     holdfast::fencing_token) {
    return holdfast::errc::lease_lost;
  }
#endif
};

int main() {
  store_without_raise_token a, b, c;
  holdfast::quorum_options opts;
  opts.dispatch = holdfast::quorum_dispatch::sequential;
  holdfast::quorum_store<store_without_raise_token> quorum({&a, &b, &c}, opts);
  return quorum.check() ? 1 : 0;
}
