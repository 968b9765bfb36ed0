// SPDX-License-Identifier: MIT
// holdfast/testing/detail/lease_book.hpp - the leases the checker has seen stores grant, by
// (store, key, token): which events granted, last extended and released each one, and its latest
// possible expiry by the store's clock. The checker's properties write it as they replay a
// history; its timeline reads it to pick the events that matter and to place expiries.
//
// Not a public header (checker.hpp uses it).
#ifndef HOLDFAST_TESTING_DETAIL_LEASE_BOOK_HPP
#define HOLDFAST_TESTING_DETAIL_LEASE_BOOK_HPP

#include <cstddef>
#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/testing/history.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace testing {
namespace detail {

// "No event" as an index into history::events.
inline constexpr std::size_t no_event = static_cast<std::size_t>(-1);

// One lease a store granted.
struct granted_lease {
  std::size_t grant = no_event;  // the store event that granted it
  std::size_t last = no_event;   // the latest store event that extended it
  std::size_t end = no_event;    // the store event that released it
  std::int64_t hi = 0;           // latest possible expiry, store clock
  node_id store = no_node;
  std::uint8_t key = 0;
};

class lease_book {
 public:
  // The lease granted with `token` on `key` by `store`, made empty if there is none yet.
  granted_lease& at(node_id store, std::uint8_t key, std::uint64_t token) {
    return leases_[{store, key, token}];
  }

  // The lease granted with `token` on `key` by `store`, or null.
  granted_lease* find_exact(node_id store, std::uint8_t key, std::uint64_t token) {
    auto it = leases_.find({store, key, token});
    return it == leases_.end() ? nullptr : &it->second;
  }

  // The lease granted with `token` on `key` by `store` (any store if no_node), or null.
  const granted_lease* find(node_id store, std::uint8_t key, std::uint64_t token) const {
    if (store != no_node) {
      auto it = leases_.find({store, key, token});
      return it == leases_.end() ? nullptr : &it->second;
    }
    for (const auto& kv : leases_) {
      if (std::get<1>(kv.first) == key && std::get<2>(kv.first) == token) return &kv.second;
    }
    return nullptr;
  }

  // The grant, latest extension and release of the lease carrying `token` on `key`.
  std::vector<std::size_t> events(node_id store, std::uint8_t key, std::uint64_t token) const {
    std::vector<std::size_t> out;
    const granted_lease* r = find(store, key, token);
    if (r == nullptr) return out;
    out.push_back(r->grant);
    if (r->last != r->grant) out.push_back(r->last);
    if (r->end != no_event) out.push_back(r->end);
    return out;
  }

 private:
  std::map<std::tuple<node_id, std::uint8_t, std::uint64_t>, granted_lease> leases_;
};

}  // namespace detail
}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_DETAIL_LEASE_BOOK_HPP
