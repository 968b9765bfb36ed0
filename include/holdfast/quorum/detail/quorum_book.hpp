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
//          | the owner's records back (only when no live  | its token + 1)
//          | grant had validity left); or validity passed |
//
// A failed try_acquire by the owner of a live grant with validity left (live_token()) leaves that
// grant live: its give-back keeps every member record under the grant's token (those members
// held the lease before the attempt, which at most extended it, as a single store's re-acquire
// does), and releases only what the attempt added (other tokens). The entry keeps the grant's
// start and TTL: the owner's validity is what it was told, however long the members now hold it.
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

#include "holdfast/detail/config.hpp"
#include "holdfast/fencing_token.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

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

  // The token of the grant of (key, owner) this quorum reported and may still be live (not
  // released, not lost) with validity left (`valid(start, ttl)`, as in must_exceed); none
  // otherwise. A failed try_acquire or a release of another token keeps the owner's records under
  // it: the owner holds that lease, and a single store never ends it on a failed re-acquire
  // (store.hpp, T1: re-acquiring one's own live lease extends it).
  template <class Valid>
  fencing_token live_token(std::string_view key, std::string_view owner, const Valid& valid) const {
    entry e;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const auto it = book_.find(id(key, owner));
      if (it == book_.end() || !it->second.live) return {};
      e = it->second;
    }
    return valid(e.start, e.ttl) ? e.token : fencing_token{};
  }

  // Records a grant of (key, owner) with `token` made at `start` with `ttl`; sweeps first when
  // the book has doubled since the last sweep.
  void granted(std::string_view key, std::string_view owner, fencing_token token, TimePoint start,
               std::chrono::milliseconds ttl) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (book_.size() >= 2 * swept_size_ && book_.size() >= 64) sweep(start);
    book_[id(key, owner)] = entry{token, start, ttl, true};
  }

  // Records a renewal of the live grant (key, owner, token) made at `start` with `ttl`.
  void renewed(std::string_view key, std::string_view owner, fencing_token token, TimePoint start,
               std::chrono::milliseconds ttl) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = book_.find(id(key, owner));
    if (it == book_.end() || it->second.token != token || !it->second.live) return;
    it->second.start = start;
    it->second.ttl = ttl;
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
