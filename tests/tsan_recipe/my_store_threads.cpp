// SPDX-License-Identifier: MIT
// The README's TSan recipe ("Checking your own store", step 4) as a user writes it: one store
// shared by threads, checked by check_exclusive_grants with o.threads = 4, built with the
// README's command line exactly (tests/tsan_recipe/run_recipe.sh reads it from README.md).
//
// The store is tests/support/example_stores.hpp's locked_store on steady_clock; with
// EXAMPLE_STORE_FLAW=unlocked_renew its renew and inspect skip the store's mutex, and the test
// requires ThreadSanitizer to report that data race (issue 21); without it, the run must be clean.
#include <cstdlib>
#include <cstring>
#include <holdfast/testing/conformance_threads.hpp>
#include <iostream>
#include <memory>

#include "../support/example_stores.hpp"

int main() {
  const char* f = std::getenv("EXAMPLE_STORE_FLAW");
  const bool unlocked = f != nullptr && std::strcmp(f, "unlocked_renew") == 0;
  auto shared_store = std::make_shared<example_stores::locked_store<holdfast::steady_clock>>(
      holdfast::steady_clock{},
      unlocked ? example_stores::flaw::unlocked_renew : example_stores::flaw::none);
  holdfast::testing::conformance_options o;
  o.threads = 4;
  const holdfast::testing::conformance_report report =
      holdfast::testing::check_exclusive_grants([&] { return shared_store; }, o);
  std::cout << report;
  return report.ok() ? 0 : 1;
}
