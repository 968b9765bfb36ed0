// SPDX-License-Identifier: MIT
// holdfast/stores/detail/memory_shared.hpp - memory_store's read-write grants (store.hpp's
// read-write capability, RW1-RW4): not public; memory_store derives from memory_shared, which
// reaches the store's mutex, clock, expiry rule and store-wide token counter through friendship, so
// a shared or exclusive grant takes its token from the same counter, in the same critical section,
// as every plain grant (T1 and RW2 hold across both name spaces).
//
// One record per read-write key, judged by the store's clock at every call:
//
//   state              | shared ask              | exclusive ask
//   -------------------+-------------------------+-------------------------------------------
//   free               | grant, next token       | grant, next token
//   readers (no intent)| own live grant: same    | one of them: busy (no upgrade); else busy
//                      | token; else grant       | and the write intent is recorded
//   readers + intent   | own live grant: same    | intent's owner: busy, intent extended;
//                      | token; else busy        | another: busy
//   writer             | busy (no downgrade)     | own: same token; else busy
//
// Memory: a record is erased once it has no holder and no live intent (expired holders are
// dropped at the next call on the key; a released key's record at once unless an intent lives).
#ifndef HOLDFAST_STORES_DETAIL_MEMORY_SHARED_HPP
#define HOLDFAST_STORES_DETAIL_MEMORY_SHARED_HPP

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/result.hpp"
#include "holdfast/store.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

// The read-write half of memory_store<Clock> (Store), as a base it derives from (CRTP).
template <class Store, class Clock>
class memory_shared {
  using time_point = typename Clock::time_point;

 public:
  /// Grants `key`'s read-write lock to `owner` for `ttl` (ms) in `mode`, by store.hpp's RW1-RW4:
  /// a shared grant while no writer holds and no other writer's intent is live, an exclusive one
  /// while nobody holds; each new grant carries the store's next token. The same owner asking
  /// again in the mode it holds gets the same token and its TTL extended. \returns the grant;
  /// errc::busy (including an upgrade or downgrade ask, and a shared ask blocked by a write
  /// intent); errc::invalid_argument (check_acquire_args, check_lease_mode);
  /// errc::token_exhausted if the next token would be fencing_token::max().
  result<grant> try_acquire_rw(std::string_view key, std::string_view owner,
                               std::chrono::milliseconds ttl, lease_mode mode) {
    if (std::error_code ec = check_acquire_args(key, owner, ttl)) return ec;
    if (std::error_code ec = check_lease_mode(mode)) return ec;
    Store& s = self();
    std::lock_guard<std::mutex> lock(s.mutex_);
    const time_point now = s.clock_.now();
    const time_point until = s.expiry(now, ttl);
    auto it = rw_.find(key);
    if (it != rw_.end()) {
      prune(it->second, now);
      if (std::optional<result<grant>> r = judge(it->second, owner, ttl, mode, until)) return *r;
    }
    if (s.last_token_ >= fencing_token::max().value() - 1) return errc::token_exhausted;
    if (it == rw_.end()) it = rw_.emplace(std::string(key), rw_record{}).first;
    const fencing_token token(s.last_token_ + 1);
    rw_record& rec = it->second;
    if (mode == lease_mode::exclusive) {
      rec.writer = holder{std::string(owner), token, until};
      rec.intent_owner.clear();  // any exclusive grant ends the intent (RW4)
    } else {
      rec.readers.push_back(holder{std::string(owner), token, until});
    }
    s.last_token_ = token.value();  // only once the grant is in place (allocation may throw)
    return grant{token, ttl};
  }

  /// Extends `owner`'s live `mode` grant of `key` carrying `token` to now + `ttl` (ms); an expired
  /// grant is never revived. \returns the grant (same token); errc::lease_lost if no such live
  /// grant exists (another mode's token included); errc::invalid_argument for bad arguments.
  result<grant> renew_rw(std::string_view key, std::string_view owner, fencing_token token,
                         std::chrono::milliseconds ttl, lease_mode mode) {
    if (std::error_code ec = check_renew_args(key, owner, token, ttl)) return ec;
    if (std::error_code ec = check_lease_mode(mode)) return ec;
    Store& s = self();
    std::lock_guard<std::mutex> lock(s.mutex_);
    const time_point now = s.clock_.now();
    auto it = rw_.find(key);
    if (it == rw_.end()) return errc::lease_lost;
    holder* h = find_holder(it->second, owner, token, mode);
    if (h == nullptr || !(now < h->expires_at)) return errc::lease_lost;
    h->expires_at = s.expiry(now, ttl);
    return grant{token, ttl};
  }

  /// Ends `owner`'s `mode` grant of `key` carrying `token` (expired or not: no one else was given
  /// that token). \returns success; errc::not_holder if there is no such grant;
  /// errc::invalid_argument for bad arguments. Reads no clock.
  result<void> release_rw(std::string_view key, std::string_view owner, fencing_token token,
                          lease_mode mode) {
    if (std::error_code ec = check_release_args(key, owner, token)) return ec;
    if (std::error_code ec = check_lease_mode(mode)) return ec;
    Store& s = self();
    std::lock_guard<std::mutex> lock(s.mutex_);
    auto it = rw_.find(key);
    if (it == rw_.end()) return errc::not_holder;
    rw_record& rec = it->second;
    holder* h = find_holder(rec, owner, token, mode);
    if (h == nullptr) return errc::not_holder;
    if (mode == lease_mode::exclusive) {
      rec.writer.token = fencing_token{};
    } else {
      rec.readers.erase(rec.readers.begin() + (h - rec.readers.data()));
    }
    if (rec.readers.empty() && rec.writer.token.is_none() && rec.intent_owner.empty()) {
      rw_.erase(it);
    }
    return {};
  }

  /// Makes this store's read-write records and token counter copies of `from`'s (plain leases
  /// are not copied): the simulator's lagging copy of a store that loses its newest grants
  /// (testing/rw_workload.hpp). Both stores must run on one clock. Thread-safety: locks both.
  void copy_read_write_state(Store& from) {
    Store& s = self();
    if (&s == &from) return;
    std::scoped_lock lock(s.mutex_, from.mutex_);
    rw_ = static_cast<memory_shared&>(from).rw_;
    s.last_token_ = from.last_token_;
  }

 protected:
  memory_shared() = default;
  ~memory_shared() = default;

 private:
  struct holder {
    std::string owner;
    fencing_token token;  // none: no holder
    time_point expires_at{};
  };
  struct rw_record {
    std::vector<holder> readers;
    holder writer;              // token none while no writer holds
    std::string intent_owner;   // empty while no write intent is recorded
    time_point intent_until{};  // the intent is live while the clock reads less
  };

  Store& self() noexcept { return static_cast<Store&>(*this); }

  // Drops expired holders and an expired intent (the store's clock reads `now`).
  static void prune(rw_record& rec, time_point now) {
    rec.readers.erase(std::remove_if(rec.readers.begin(), rec.readers.end(),
                                     [now](const holder& h) { return !(now < h.expires_at); }),
                      rec.readers.end());
    if (!rec.writer.token.is_none() && !(now < rec.writer.expires_at)) {
      rec.writer.token = fencing_token{};
    }
    if (!rec.intent_owner.empty() && !(now < rec.intent_until)) rec.intent_owner.clear();
  }

  static holder* find_holder(rw_record& rec, std::string_view owner, fencing_token token,
                             lease_mode mode) noexcept {
    if (mode == lease_mode::exclusive) {
      holder& w = rec.writer;
      return !w.token.is_none() && w.token == token && w.owner == owner ? &w : nullptr;
    }
    for (holder& r : rec.readers) {
      if (r.token == token && r.owner == owner) return &r;
    }
    return nullptr;
  }

  static holder* live_reader(rw_record& rec, std::string_view owner) noexcept {
    for (holder& r : rec.readers) {
      if (r.owner == owner) return &r;
    }
    return nullptr;
  }

  // Judges an ask on a pruned record: the same grant for a re-ask, busy, or nullopt for "free for
  // this ask: make a new grant" (the caller checks the counter).
  static std::optional<result<grant>> judge(rw_record& rec, std::string_view owner,
                                            std::chrono::milliseconds ttl, lease_mode mode,
                                            time_point until) {
    const bool writer = !rec.writer.token.is_none();
    if (mode == lease_mode::shared) {
      if (writer) return busy();  // another's write, or our own: no downgrade in place
      if (holder* r = live_reader(rec, owner)) {
        r->expires_at = std::max(r->expires_at, until);
        return result<grant>(grant{r->token, ttl});
      }
      if (!rec.intent_owner.empty()) return busy();  // a writer waits: no new readers (RW4)
      return std::nullopt;
    }
    if (writer) {
      if (rec.writer.owner != owner) return busy();
      rec.writer.expires_at = std::max(rec.writer.expires_at, until);
      return result<grant>(grant{rec.writer.token, ttl});
    }
    if (rec.readers.empty()) return std::nullopt;
    if (live_reader(rec, owner) != nullptr) return busy();  // no upgrade in place (RW3)
    if (rec.intent_owner.empty() || rec.intent_owner == owner) {
      if (rec.intent_owner.empty()) rec.intent_owner.assign(owner.data(), owner.size());
      rec.intent_until = until;  // the latest refused ask's TTL (RW4)
    }
    return busy();
  }

  static std::optional<result<grant>> busy() { return result<grant>(errc::busy); }

  std::map<std::string, rw_record, std::less<>> rw_;
};

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_DETAIL_MEMORY_SHARED_HPP
