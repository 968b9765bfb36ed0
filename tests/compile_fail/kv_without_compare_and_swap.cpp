// SPDX-License-Identifier: MIT
// A key-value store with get() but no compare_and_swap() cannot carry leases: cas_store<KV>
// refuses it, under C++20 by the cas_kv constraint (naming the compare_and_swap requirement),
// under C++17 by the static_assert naming `result<bool> compare_and_swap(...)`.
// expect-error: needs .result<bool> compare_and_swap\(|kv\.compare_and_swap\(key, expected, value\)
// holdfast: control
#include <cstdint>
#include <holdfast/stores/cas.hpp>
#include <string_view>

struct kv_without_compare_and_swap {
  holdfast::result<holdfast::cas_entry> get(std::string_view) { return holdfast::cas_entry{}; }
#ifdef HOLDFAST_COMPILE_FAIL_CONTROL  // the control adds compare_and_swap, and then it compiles
  holdfast::result<bool> compare_and_swap(std::string_view, std::uint64_t, std::string_view) {
    return false;
  }
#endif
};

int main() {
  kv_without_compare_and_swap kv;
  holdfast::cas_store<kv_without_compare_and_swap> store(kv);
  return store.watching() == 0 ? 0 : 1;
}
