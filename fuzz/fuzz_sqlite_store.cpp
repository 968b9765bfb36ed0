// SPDX-License-Identifier: MIT
// libFuzzer harness for a store that is not ours: examples/sqlite_lease_store.hpp, a LeaseStore
// over SQLite (one fresh in-memory database per input), checked by holdfast::testing::fuzz_store
// exactly as a user's CI would check their own store (README, "Checking your own store").
//
// HOLDFAST_SQLITE_FLAW=<name> fuzzes a deliberately broken variant instead, and fuzz/CMakeLists.txt
// requires libFuzzer to catch each: token_second_statement (the grant committed, the token drawn
// in a second statement), no_owner_check (release frees anyone's lease), blind_cas (cas_store
// over a KV whose compare-and-swap ignores the version).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <holdfast/testing/conformance.hpp>
#include <memory>
#include <string_view>

#include "../examples/sqlite_lease_store.hpp"

namespace {
using holdfast::testing::sim_clock;
using sqlite_example::sqlite_flaw;
sqlite_flaw flaw = sqlite_flaw::none;
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* name = std::getenv("HOLDFAST_SQLITE_FLAW")) {
    const std::string_view n(name);
    if (n == "token_second_statement") {
      flaw = sqlite_flaw::token_second_statement;
    } else if (n == "no_owner_check") {
      flaw = sqlite_flaw::no_owner_check;
    } else if (n == "blind_cas") {
      flaw = sqlite_flaw::blind_cas;
    } else if (n != "none") {
      std::fprintf(stderr, "HOLDFAST_SQLITE_FLAW=%s: no such flaw\n", name);
      std::abort();
    }
    std::fprintf(stderr, "holdfast: fuzzing the SQLite store with the flaw %s\n", name);
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  sqlite_example::sqlite_options o;
  o.boot_id = "simulated";
  o.flaw = flaw;
  if (flaw == sqlite_flaw::blind_cas) {
    return holdfast::testing::fuzz_store(
        [&o](sim_clock c) {
          return std::make_unique<sqlite_example::sqlite_cas_store<sim_clock>>(o, c);
        },
        data, size);
  }
  return holdfast::testing::fuzz_store(
      [&o](sim_clock c) {
        return std::make_unique<sqlite_example::sqlite_lease_store<sim_clock>>(o, c);
      },
      data, size);
}
