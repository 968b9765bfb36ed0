// SPDX-License-Identifier: MIT
// holdfast/testing/detail/quorum_member_store.hpp - quorum_member_store: the store each simulated
// quorum member runs (workload_quorum.hpp), a memory_store that also tells the recorder which
// records of an owner it still carries and until when. Split from workload_quorum.hpp (one idea
// per file); the name stays holdfast::testing::quorum_member_store.
// Thread-safety: as memory_store; the simulator calls it from its one thread.
#ifndef HOLDFAST_TESTING_DETAIL_QUORUM_MEMBER_STORE_HPP
#define HOLDFAST_TESTING_DETAIL_QUORUM_MEMBER_STORE_HPP

#include <chrono>
#include <map>
#include <string>
#include <string_view>

#include "holdfast/detail/config.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/result.hpp"
#include "holdfast/store.hpp"
#include "holdfast/stores/memory.hpp"
#include "holdfast/testing/simulator.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace testing {

/// A quorum member's store: a memory_store that also knows what inspect() cannot tell, whether
/// it still carries `owner`'s record of a key under a token, live or expired. memory_store
/// releases its holder's record after expiry too (stores/memory.hpp: a record still carrying the
/// token was never granted to anyone else), so a quorum release may succeed on W members whose
/// leases all expired; and a member holding the owner's record under another token (a grant whose
/// reply was lost, a lagging token) will not release it for this token.
class quorum_member_store : public memory_store<sim_clock> {
  using base = memory_store<sim_clock>;

 public:
  using base::base;

  /// memory_store::try_acquire, remembering the record it made.
  result<grant> try_acquire(std::string_view key, std::string_view owner,
                            std::chrono::milliseconds ttl) {
    const sim_clock::time_point t = clock().now();
    result<grant> g = base::try_acquire(key, owner, ttl);
    if (g) carried_[std::string(key)] = {std::string(owner), g->token, t + g->ttl};  // replaces
    return g;
  }

  /// memory_store::renew, remembering the record's new expiry.
  result<grant> renew(std::string_view key, std::string_view owner, fencing_token token,
                      std::chrono::milliseconds ttl) {
    const sim_clock::time_point t = clock().now();
    result<grant> g = base::renew(key, owner, token, ttl);
    if (g) carried_[std::string(key)].until = t + g->ttl;
    return g;
  }

  /// memory_store::raise_token, remembering the token it raised the record to.
  result<void> raise_token(std::string_view key, std::string_view owner, fencing_token token,
                           fencing_token to) {
    result<void> r = base::raise_token(key, owner, token, to);
    if (r) carried_[std::string(key)].token = to;
    return r;
  }

  /// memory_store::release, forgetting the record it freed.
  result<void> release(std::string_view key, std::string_view owner, fencing_token token) {
    result<void> r = base::release(key, owner, token);
    if (r) carried_.erase(std::string(key));
    return r;
  }

  /// How long from `from` (this member's clock) `owner`'s record of `key` with `token` keeps the
  /// key from anyone else: its expiry's lower bound (the clock before the grant or renewal, plus
  /// the TTL) minus `from`; zero or less if it ends by then or is not here.
  [[nodiscard]] sim_clock::duration held_for(std::string_view key, std::string_view owner,
                                             fencing_token token,
                                             sim_clock::time_point from) const {
    const auto it = carried_.find(std::string(key));
    if (it == carried_.end() || it->second.owner != owner || it->second.token != token) {
      return sim_clock::duration::zero();
    }
    return it->second.until - from;
  }

  /// True iff a record of `owner` on `key` with `token` may still be here, live or expired (one
  /// the store swept away counts: an over-count, rare, never an under-count).
  [[nodiscard]] bool carries(std::string_view key, std::string_view owner,
                             fencing_token token) const {
    const auto it = carried_.find(std::string(key));
    return it != carried_.end() && it->second.owner == owner && it->second.token == token;
  }

 private:
  struct record {
    std::string owner;
    fencing_token token;
    sim_clock::time_point until;  // the expiry's lower bound, on this member's clock
  };
  std::map<std::string, record> carried_;  // key -> newest record
};

}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_DETAIL_QUORUM_MEMBER_STORE_HPP
