// SPDX-License-Identifier: MIT
// libFuzzer harness for the example stores of tests/support/example_stores.hpp, written exactly as
// the README's "Checking your own store" tells a user to write one: holdfast::testing::fuzz_store
// over a factory taking a store_env, in the durable form (durable_store_run_options(): restarts
// through the factory, crashes between the store's steps, lagging copies, machine reboots) for
// file_store, in the in-memory form (store_run_options()) for locked_store.
//
//   HOLDFAST_EXAMPLE_STORE = file (default) | locked
//   HOLDFAST_EXAMPLE_FLAW  = none (default) | real_clock_tokens | counter_32bit | stalled_cleanup
//                            | reboot_wipes_counter (file only)
//
// fuzz/CMakeLists.txt requires libFuzzer, from an empty corpus, to name each broken variant
// (fuzzcatch_example_<store>_<flaw>; the times are in fuzz/README.md, issue 21). unlocked_renew is
// a data race, for TSan (tests/tsan_recipe/), not for this target.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <holdfast/testing/conformance.hpp>
#include <string_view>

#include "../tests/support/example_stores.hpp"

namespace {
using example_stores::flaw;
using holdfast::testing::sim_clock;
using holdfast::testing::store_env;

flaw chosen = flaw::none;
bool durable = true;

flaw flaw_named(std::string_view n) {
  if (n == "none") return flaw::none;
  if (n == "real_clock_tokens") return flaw::real_clock_tokens;
  if (n == "counter_32bit") return flaw::counter_32bit;
  if (n == "stalled_cleanup") return flaw::stalled_cleanup;
  if (n == "reboot_wipes_counter") return flaw::reboot_wipes_counter;
  std::fprintf(stderr, "HOLDFAST_EXAMPLE_FLAW=%.*s: no such flaw for this target\n",
               static_cast<int>(n.size()), n.data());
  std::abort();
}
}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  if (const char* s = std::getenv("HOLDFAST_EXAMPLE_STORE")) {
    const std::string_view n(s);
    if (n != "file" && n != "locked") {
      std::fprintf(stderr, "HOLDFAST_EXAMPLE_STORE=%s: file or locked\n", s);
      std::abort();
    }
    durable = n == "file";
  }
  if (const char* f = std::getenv("HOLDFAST_EXAMPLE_FLAW")) chosen = flaw_named(f);
  std::fprintf(
      stderr, "holdfast: fuzzing %s with the flaw %s\n",
      durable ? "file_store (durable form)" : "locked_store",
      std::getenv("HOLDFAST_EXAMPLE_FLAW") ? std::getenv("HOLDFAST_EXAMPLE_FLAW") : "none");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (durable) {
    return holdfast::testing::fuzz_store(
        [](sim_clock c, const store_env& env) {
          return example_stores::file_store<sim_clock>(c, env, chosen);
        },
        data, size, holdfast::testing::durable_store_run_options());
  }
  return holdfast::testing::fuzz_store(
      [](sim_clock c, const store_env& env) {
        return example_stores::locked_store<sim_clock>(c, chosen, env.counter_start);
      },
      data, size);
}
