// SPDX-License-Identifier: MIT
// holdfast/quorum/detail/quorum_book.hpp - reported_book: the last grant one quorum_store reported
// per (key, owner), and whether it may have ended, so that a later grant to the same owner never
// carries the token of a grant that ended (quorum.hpp, "The same owner again").
//
//   state  | entered by                                   | a new grant of (key, owner) with top
//          |                                              | token T of the members' answers
//   -------+----------------------------------------------+-------------------------------------
//   (none) | nothing reported yet, or swept               | reports T
//   live   | try_acquire reported it; renew extended it   | T == its token and its validity is
//          |                                              | left: the same grant (reports T)
//   ended  | release sent (whatever the answer), renew    | T <= its token: the token must
//          | said lease_lost, a failed try_acquire gave   | exceed it (the members are raised to
//          | the owner's records back (only once the live | its token + 1)
//          | grant's TTL may have run out); or validity   |
//          | passed                                       |
//
// A failed try_acquire by the owner of a live grant whose TTL may not have run out (live(), with
// quorum_grant_may_be_held: T2, a store holds a grant the TTL it reported) leaves that grant live:
// its give-back keeps the record under the grant's token on the members known to hold it (those
// that held it when it was reported or last renewed: the attempt at most extended their records, as
// a single store's re-acquire does), and releases what the attempt added: other tokens, and the
// token on any other member (a lagging counter may issue it fresh there). The entry keeps the
// grant's start and TTL: the owner's validity is what it was told, however long the members now
// hold it.
//
// Why a memory and not a rule over the members' answers: a member answers a same-owner
// re-acquire of its live record with the record's token, and another member whose counter lags
// may issue that very token fresh (counters move together), so W equal answers do not tell the
// grant that never ended from a stale record on a minority beside a fresh one. The quorum_store
// that reported the grant knows whether it sent a release, saw it lost, or let its validity pass.
//
// Memory: one entry per (key, owner) this quorum_store reported a grant of; try_acquire sweeps,
// when the book has doubled since the last sweep, the entries no member can still hold a record of
// (see stale()). Thread-safety: every member function may be called concurrently. Not for users.
#ifndef HOLDFAST_QUORUM_DETAIL_QUORUM_BOOK_HPP
#define HOLDFAST_QUORUM_DETAIL_QUORUM_BOOK_HPP

#include <chrono>
#include <cstddef>
#include <iterator>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/fencing_token.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

// A grant a failed operation must keep: its token (none: keep nothing) and the members known to
// hold it.
struct kept_grant {
  fencing_token token{};
  std::vector<char> holders{};

  // The token to keep at member i: the grant's where it is known to be held, none elsewhere.
  [[nodiscard]] fencing_token at(std::size_t i) const noexcept {
    return i < holders.size() && holders[i] != 0 ? token : fencing_token{};
  }
};

template <class TimePoint>
class reported_book {
 public:
  // `member_timeout` bounds how long after it was sent a member applies a request (sweeping).
  explicit reported_book(std::chrono::milliseconds member_timeout)
      : member_timeout_(member_timeout) {}

  // The token a grant of (key, owner) whose members' top token is `top` must exceed: the last
  // reported grant's token if `top` is not above it and that grant may have ended; none
  // otherwise. `valid(start, ttl)` tells whether a grant made at `start` (the quorum's clock)
  // with `ttl` still has validity left; it is asked only for the same live grant.
  template <class Valid>
  fencing_token must_exceed(std::string_view key, std::string_view owner, fencing_token top,
                            const Valid& valid) const {
    entry e;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const auto it = book_.find(id(key, owner));
      if (it == book_.end() || it->second.token < top) return {};
      e = it->second;
    }
    if (e.live && e.token == top && valid(e.start, e.ttl)) return {};  // the same grant again
    return e.token;
  }

  // The grant of (key, owner) this quorum reported and that may still be live (not released, not
  // lost, `valid(start, ttl)`: its TTL has not run out, say): its token and the members
  // known to hold it; token none otherwise. A failed try_acquire or a release of another token
  // keeps the owner's records under it there: the owner holds that lease, and a single store never
  // ends it on a failed re-acquire (store.hpp, T1: re-acquiring one's own live lease extends it).
  template <class Valid>
  kept_grant live(std::string_view key, std::string_view owner, const Valid& valid) const {
    kept_grant k;
    TimePoint start{};
    std::chrono::milliseconds ttl{};
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const auto it = book_.find(id(key, owner));
      if (it == book_.end() || !it->second.live) return {};
      k = kept_grant{it->second.token, it->second.holders};
      start = it->second.start;
      ttl = it->second.ttl;
    }
    return valid(start, ttl) ? k : kept_grant{};
  }

  // Records a grant of (key, owner) with `token` made at `start` with `ttl`, held under `token`
  // by the members i with holders[i] != 0; sweeps first when the book has doubled since the last
  // sweep.
  void granted(std::string_view key, std::string_view owner, fencing_token token, TimePoint start,
               std::chrono::milliseconds ttl, std::vector<char> holders) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (book_.size() >= 2 * swept_size_ && book_.size() >= 64) sweep(start);
    book_[id(key, owner)] = entry{token, start, ttl, true, std::move(holders)};
  }

  // Records a renewal of the live grant (key, owner, token) made at `start` with `ttl`, by the
  // members i with holders[i] != 0 (empty: not known; the last ones stay).
  void renewed(std::string_view key, std::string_view owner, fencing_token token, TimePoint start,
               std::chrono::milliseconds ttl, const std::vector<char>& holders = {}) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = book_.find(id(key, owner));
    if (it == book_.end() || it->second.token != token || !it->second.live) return;
    it->second.start = start;
    it->second.ttl = ttl;
    if (!holders.empty()) it->second.holders = holders;
  }

  // Records that the grant (key, owner, token) may have ended (any token if `token` is none).
  void ended(std::string_view key, std::string_view owner, fencing_token token) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = book_.find(id(key, owner));
    if (it != book_.end() && (token.is_none() || it->second.token == token)) {
      it->second.live = false;
    }
  }

 private:
  struct entry {
    fencing_token token{};
    TimePoint start{};  // when the last grant or renewal of it began, on the quorum's clock
    std::chrono::milliseconds ttl{};
    bool live = false;
    std::vector<char> holders{};  // the members that held it then (reported or renewed there)
  };
  using id_t = std::pair<std::string, std::string>;
  static id_t id(std::string_view key, std::string_view owner) {
    return {std::string(key), std::string(owner)};
  }

  // Whether no member can still hold a record of the grant at `now`: a member applies the last
  // request for it (sent after `start`, or a 1 ms give-back) within member_timeout or never, and
  // holds a record at most its TTL plus two ticks of its clock past that (store.hpp, T2); twice
  // that, with ticks up to a second, leaves room for drift.
  bool stale(const entry& e, TimePoint now) const {
    const auto keep = 2 * (e.ttl + member_timeout_) + std::chrono::seconds(2);
    return e.start < now && now - e.start > keep;
  }

  void sweep(TimePoint now) {
    for (auto it = book_.begin(); it != book_.end();) {
      it = stale(it->second, now) ? book_.erase(it) : std::next(it);
    }
    swept_size_ = book_.size();
  }

  std::chrono::milliseconds member_timeout_;
  mutable std::mutex mutex_;
  std::map<id_t, entry> book_;
  std::size_t swept_size_ = 0;
};

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_QUORUM_DETAIL_QUORUM_BOOK_HPP
