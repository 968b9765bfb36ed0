// SPDX-License-Identifier: MIT
// holdfast/testing/resource.hpp - sim_resource: the downstream resource a lease protects, guarded
// by the shipped fences, on the simulated network.
//
// A client's write first reaches an interposition point (the client may stall there, between
// its validity check and the write: the README timeline's "A stalls"), then the resource admits or
// rejects it by (token, owner) and records the outcome in the history. The mode says which guard
// runs:
//
//   mode               | guard                                                | shipped?
//   -------------------+------------------------------------------------------+-----------------
//   fenced             | fenced<T>::write(token, owner, fn): admit + apply,    | yes (fence.hpp)
//                      | one lock                                             |
//   gate               | fence_gate::admit(token, owner): a seqlock           | yes (fence.hpp)
//   unfenced           | admits every write (no token check)                  | no: a mutant
//   check_then_write   | reads the newest token, then writes in a second step | no: a mutant
//                      | (the interposition point falls between the two)      |
//   token_only         | admits iff token >= the newest, whoever the owner:   | no: a mutant
//                      | the rule before issue 20, which lets a second holder |
//                      | of a re-issued token through                         |
//
// The last three are negative controls (testing/mutants.hpp): the checker must catch them (S1;
// token_only only where a store loses grants and re-issues a token, e.g. a lagging restart).
//
// Thread-safety: the simulator's thread only.
#ifndef HOLDFAST_TESTING_RESOURCE_HPP
#define HOLDFAST_TESTING_RESOURCE_HPP

#include <cstdint>
#include <string_view>

#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fence.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/result.hpp"
#include "holdfast/testing/history.hpp"
#include "holdfast/testing/simulator.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace testing {

/// Which guard a sim_resource runs (see the table at the top of resource.hpp).
enum class resource_mode : std::uint8_t {
  fenced,            ///< fenced<T>::write (shipped).
  gate,              ///< fence_gate::admit (shipped).
  unfenced,          ///< Mutant: no token check at all.
  check_then_write,  ///< Mutant: "read the last fence, then write", in two steps.
  token_only,        ///< Mutant: equal tokens admitted from any owner (the old rule).
};

/// Returns the mode's name, e.g. "fenced".
inline const char* to_string(resource_mode m) noexcept {
  switch (m) {
    case resource_mode::fenced:
      return "fenced";
    case resource_mode::gate:
      return "gate";
    case resource_mode::unfenced:
      return "unfenced";
    case resource_mode::check_then_write:
      return "check_then_write";
    case resource_mode::token_only:
      return "token_only";
  }
  return "?";
}

/// A resource written with fencing tokens, for the lease on key index `key`.
class sim_resource {
 public:
  /// Makes the resource of key index `key` in `sim`, guarded as `mode` says.
  sim_resource(simulator& sim, std::uint8_t key, resource_mode mode = resource_mode::fenced)
      : sim_(sim), key_(key), mode_(mode) {}

  sim_resource(const sim_resource&) = delete;
  sim_resource& operator=(const sim_resource&) = delete;

  /// Writes on behalf of the running client with `token` and its lease's owner id `owner` (both
  /// go to the guard and into the history): an interposition point, then the guard. Records a
  /// `write` event. \returns success if admitted; errc::stale_token if a newer token was
  /// admitted before; errc::token_reissued if `token` was admitted for another owner;
  /// errc::invalid_argument for an unissuable token or an empty owner; errc::store_unavailable
  /// if the client has crashed (nothing is written or recorded).
  result<void> write(fencing_token token, std::string_view owner) {
    sim_.point(simulator::point_kind::resource_write);
    if (sim_.current_crashed()) return errc::store_unavailable;
    std::uint64_t before = newest_.value();
    result<void> r = errc::invalid_argument;
    switch (mode_) {
      case resource_mode::fenced:
        before = value_.newest().value();
        r = value_.write(token, owner, [](std::uint64_t& writes) { ++writes; });
        break;
      case resource_mode::gate:
        before = gate_.newest().value();
        r = gate_.admit(token, owner);
        break;
      case resource_mode::token_only:
        if (!token.is_issuable() || owner.empty()) break;  // invalid_argument, as the fences
        if (token < newest_) {
          r = errc::stale_token;
          break;
        }
        newest_ = token;  // equal: admitted whoever wrote under it before
        r = result<void>{};
        break;
      case resource_mode::unfenced:
        r = result<void>{};
        if (token > newest_) newest_ = token;
        break;
      case resource_mode::check_then_write:
        if (token < newest_) {
          r = errc::stale_token;
          break;
        }
        sim_.point(simulator::point_kind::store_step);  // between the read and the write
        if (sim_.current_crashed()) return errc::store_unavailable;
        before = newest_.value();
        newest_ = token;  // the write lands, whatever was admitted meanwhile
        r = result<void>{};
        break;
    }
    event e = sim_.make_event(event_kind::write, sim_.current_node());
    e.key = key_;
    e.token = token.value();
    e.outcome = to_outcome(r.error());
    e.value = static_cast<std::int64_t>(before);
    e.owner.assign(owner.data(), owner.size());
    sim_.log().add(std::move(e));
    if (r) ++admitted_;
    return r;
  }

  /// Returns how many writes were admitted.
  [[nodiscard]] std::uint64_t admitted() const noexcept { return admitted_; }
  /// Returns the guard mode.
  [[nodiscard]] resource_mode mode() const noexcept { return mode_; }

 private:
  simulator& sim_;
  std::uint8_t key_;
  resource_mode mode_;
  fenced<std::uint64_t> value_;
  fence_gate gate_;
  fencing_token newest_{};
  std::uint64_t admitted_ = 0;
};

}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_RESOURCE_HPP
