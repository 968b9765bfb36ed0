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
//
// Waiting (wait_for_release_rw, only on steady_clock as memory_store's plain waits): a waiter
// sleeps on its own condition variable (memory_waiting.hpp's memory_rw_waiters) until the latest
// expiry of what keeps its mode out, read in the same critical section as the judgement (a
// writer or an intent keeps readers out; a writer or a reader keeps writers out; a writer waits
// at most half the intent's time left, so that its next ask renews the intent), or until a
// release wakes it:
//
//   release of   | wakes
//   -------------+--------------------------------------------------------------------------
//   a writer     | every waiting reader of the key (free for them unless an intent lives) and
//                | its first waiting writer (one writer can get in: a hand-off, FIFO, as the
//                | plain wait's; a woken writer that is cancelled passes it on)
//   a reader     | the first waiting writer once no live reader is left; never a reader (a
//                | reader's release lets no reader in: only a writer or an intent keeps one out)
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
#include <type_traits>
#include <utility>
#include <vector>

#include "holdfast/cancel.hpp"
#include "holdfast/clock.hpp"
#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/result.hpp"
#include "holdfast/store.hpp"
#include "holdfast/stores/detail/memory_waiting.hpp"

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
  /// that token), and wakes the waiters it may let in (wait_for_release_rw: a writer's release
  /// wakes every waiting reader of the key and its first waiting writer, a reader's release the
  /// first waiting writer once no live reader is left).
  /// \returns success; errc::not_holder if there is no such grant; errc::invalid_argument for
  /// bad arguments. Reads the clock only for a reader's release while a writer waits for the key.
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
    // Whom this release wakes, judged before the change (reading the clock may throw).
    const bool wake = rw_waiters_.places() != 0 && wakes_waiters(key, rec, h, mode);
    if (mode == lease_mode::exclusive) {
      rec.writer.token = fencing_token{};
    } else {
      rec.readers.erase(rec.readers.begin() + (h - rec.readers.data()));
    }
    if (rec.readers.empty() && rec.writer.token.is_none() && rec.intent_owner.empty()) {
      rw_.erase(it);
    }
    if (wake) rw_waiters_.wake(key, mode == lease_mode::exclusive);
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
    rw_waiters_.wake_all();  // what they waited for is gone: they judge the new records
  }

  /// Blocks until `key`'s read-write lock may be free for `mode`, without polling (store.hpp's
  /// wait_for_release_rw; read_write_view offers it as wait_for_release, so acquire_read() and
  /// acquire_write() sleep in the store instead of backing off): sleeps on its own condition
  /// variable until the instant wait_until_rw(key, mode) reads (the latest expiry, by the store's
  /// clock, of what keeps `mode` out; for a writer at most half the live intent's time left, so
  /// that its next ask renews the intent, RW4), until a read-write release of the key that may
  /// let `mode` in wakes it (see release_rw: every waiting reader, one waiting writer per
  /// release, in the order they came), until `deadline`, or until `cancel` is stopped (the stop
  /// wakes it from the cancelling thread; a woken writer that is cancelled passes the wake-up
  /// on to the next waiting writer). Returns at once if nothing keeps `mode` out now
  /// or the deadline has passed. Waking says nothing about the key: the store stays the judge,
  /// and a woken writer may find another writer first. Offered only when Clock is steady_clock,
  /// the one clock a condition variable can wait on (as wait_for_release). Thread-safety: may be
  /// called concurrently with every member. \returns success (woken for any of those reasons);
  ///   errc::cancelled once `cancel` was stopped (at once if it already was);
  ///   errc::invalid_argument for an empty key or a mode outside the enum (check_lease_mode).
  ///   Exceptions: std::bad_alloc may propagate, the store as it was.
  template <class C = Clock, class = std::enable_if_t<std::is_same_v<C, steady_clock>>>
  result<void> wait_for_release_rw(std::string_view key, lease_mode mode,
                                   const time_point& deadline, const cancel_token& cancel = {}) {
    if (key.empty()) return errc::invalid_argument;
    if (std::error_code ec = check_lease_mode(mode)) return ec;
    Store& s = self();
    // Before the lock: the stop's wake-up takes the store's mutex on the cancelling thread, so it
    // is unregistered only after the lock is given back (as memory_waits.hpp's wait_any).
    waiter w;
    cancel_token::waker guard;
    if (cancel.stop_possible()) cancel.on_stop(guard, [this, &w] { wake_cancelled(w); });
    std::unique_lock<std::mutex> lock(s.mutex_);
    if (cancel.stop_requested()) return errc::cancelled;
    const time_point now = s.clock_.now();
    std::optional<time_point> until = kept_out_until(key, mode, now);
    if (!until) return {};
    if (deadline < *until) until = deadline;
    if (!(now < *until)) return {};
    rw_waiters_.join(key, mode, &w);
    w.cv.wait_until(lock, *until, [&w] { return w.woken || w.cancelled; });
    rw_waiters_.leave(key, &w);
    if (!w.cancelled) return {};
    if (w.woken && mode == lease_mode::exclusive) rw_waiters_.wake(key, false);  // pass it on
    return errc::cancelled;
  }

  /// Returns the instant, by the store's clock, until which a wait_for_release_rw(key, mode)
  /// begun now sleeps unless a release wakes it: the latest expiry of the live grants that keep
  /// `mode` out (a writer or a write intent keeps readers out; a writer or readers keep writers
  /// out), for a writer at most half the live intent's time left; nullopt if nothing keeps
  /// `mode` out now. A grant is live while the clock reads less than its expiry, so at the
  /// instant itself the answer is nullopt. On any clock (tests, metrics). Thread-safety: as
  /// every member. \returns that instant or nullopt; errc::invalid_argument for an empty key or
  ///   a mode outside the enum.
  result<std::optional<time_point>> wait_until_rw(std::string_view key, lease_mode mode) const {
    if (key.empty()) return errc::invalid_argument;
    if (std::error_code ec = check_lease_mode(mode)) return ec;
    const Store& s = static_cast<const Store&>(*this);
    std::lock_guard<std::mutex> lock(s.mutex_);
    return kept_out_until(key, mode, s.clock_.now());
  }

  /// Returns how many threads are asleep in wait_for_release_rw() now, not yet woken by a release
  /// (a woken one counts no more, even before it runs): for tests and metrics.
  [[nodiscard]] std::size_t waiting_rw() const {
    std::lock_guard<std::mutex> lock(static_cast<const Store&>(*this).mutex_);
    return rw_waiters_.asleep();
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

  using waiter = memory_wait_queues::waiter;

  // The stop of a waiter's cancel_token (on the cancelling thread): wakes that waiter.
  void wake_cancelled(waiter& w) {
    std::lock_guard<std::mutex> lock(self().mutex_);
    w.cancelled = true;
    w.cv.notify_all();
  }

  // Whether the release of `h` (mode `mode`) from `rec` may let a waiter of `key` in (the
  // store's mutex held, nothing changed yet): a writer's always; a reader's iff a writer waits
  // and no other reader is live by the store's clock (read only then).
  bool wakes_waiters(std::string_view key, const rw_record& rec, const holder* h,
                     lease_mode mode) const {
    if (mode == lease_mode::exclusive) return true;
    if (!rw_waiters_.waits(key, lease_mode::exclusive)) return false;
    const time_point now = static_cast<const Store&>(*this).clock_.now();
    return std::none_of(rec.readers.begin(), rec.readers.end(),
                        [&](const holder& r) { return &r != h && now < r.expires_at; });
  }

  // See wait_until_rw (the store's mutex held; `now` read under it).
  std::optional<time_point> kept_out_until(std::string_view key, lease_mode mode,
                                           time_point now) const {
    auto it = rw_.find(key);
    if (it == rw_.end()) return std::nullopt;
    const rw_record& rec = it->second;
    std::optional<time_point> until;
    const auto later = [&](time_point t) {
      if (now < t && (!until || *until < t)) until = t;
    };
    if (!rec.writer.token.is_none()) later(rec.writer.expires_at);
    const bool intent = !rec.intent_owner.empty() && now < rec.intent_until;
    if (mode == lease_mode::shared) {
      if (intent) later(rec.intent_until);
      return until;
    }
    for (const holder& r : rec.readers) later(r.expires_at);
    if (until && intent) {
      const time_point half = now + (rec.intent_until - now) / 2;  // RW4: ask again before
      if (half < *until) until = half;
    }
    return until;
  }

  std::map<std::string, rw_record, std::less<>> rw_;
  memory_rw_waiters rw_waiters_;  // wait_for_release_rw: per key, every waiter and its mode
};

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_DETAIL_MEMORY_SHARED_HPP
