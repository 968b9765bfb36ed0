// SPDX-License-Identifier: MIT
// holdfast/election_observer.hpp - election_observer<Store, Clock>: who leads an election and in
// which term, for a process that never campaigns (a dashboard, a router, a client that sends work
// to the leader). It needs no TTL, no keepalive and no owner id: it only reads the leadership
// lease with the store's inspect() and, to follow changes, waits in watch_release() where the
// store has it.
//
//   holdfast::election_observer<holdfast::redis_store> watch(store, "nightly-report");
//   auto now = watch.leader();                          // result<optional<leader_info>>
//   auto next = watch.next_leader(*now, std::chrono::minutes(1));   // blocks until it changes
//
// election<Store, Clock>::leader() and next_leader() are this class's, so a candidate observes
// exactly as an observer does.
//
// Terms. A leader's term is the fencing token of its leadership lease: terms strictly increase
// from one leader to the next, but are not consecutive. A store with one counter for all keys
// (Redis, PostgreSQL's sequence, memory_store) draws a token for every acquire attempt, also one
// that finds the key busy, and for every other key's grants, so successive terms jump (1, then 9);
// etcd's term is the key's create_revision, which every write to the cluster advances. Compare
// terms, never count with them.
//
// Sources: etcd's clientv3/concurrency Election.Leader / Observe (an observer need not campaign);
// client-go's leaderelection OnNewLeader; Curator's LeaderLatch.getLeader.
#ifndef HOLDFAST_ELECTION_OBSERVER_HPP
#define HOLDFAST_ELECTION_OBSERVER_HPP

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>

#include "holdfast/acquire_options.hpp"
#include "holdfast/cancel.hpp"
#include "holdfast/clock.hpp"
#include "holdfast/detail/config.hpp"
#include "holdfast/detail/saturating.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/lease/detail/acquire.hpp"
#include "holdfast/lease/detail/option_texts.hpp"
#include "holdfast/result.hpp"
#include "holdfast/store.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

// 0.1 spellings inside are [[deprecated]]: only their uses in callers' code warn.
HOLDFAST_DETAIL_ALLOW_DEPRECATED_BEGIN
/// Who leads an election now, as the store reports it (election_observer::leader()).
struct leader_info {
  /// The leader's readable label: label_of(owner), its owner id up to the last '/' (election
  /// owner ids are `<label>/<random>`), or the whole owner id if it has no '/'.
  std::string label;
  /// The leader's owner id, the one the leadership lease is granted to. Fences admit (term, owner).
  std::string owner;
  /// The leader's term: the fencing token of its leadership lease (see "Terms" above).
  fencing_token term;
  /// Time left on the leader's lease by the store's clock (ms, rounded down).
  std::chrono::milliseconds remaining{0};
  /// 0.1's name of `label` (the same text).
  [[deprecated("use label")]] std::string identity;

  /// Two answers name the same leadership iff owner and term agree (remaining is ignored).
  friend bool operator==(const leader_info& a, const leader_info& b) noexcept {
    return a.term == b.term && a.owner == b.owner;
  }
  friend bool operator!=(const leader_info& a, const leader_info& b) noexcept { return !(a == b); }
};
HOLDFAST_DETAIL_ALLOW_DEPRECATED_END

/// Returns the leader_info of a lease record: its label, owner, term and time left.
[[nodiscard]] inline leader_info to_leader_info(const lease_record& rec) {
  leader_info info;
  info.label = label_of(rec.owner);
  info.owner = rec.owner;
  info.term = rec.token;
  info.remaining = rec.remaining;
  HOLDFAST_DETAIL_ALLOW_DEPRECATED_BEGIN
  info.identity = info.label;
  HOLDFAST_DETAIL_ALLOW_DEPRECATED_END
  return info;
}

/// 0.1's name of label_of().
[[deprecated("use label_of")]] inline std::string identity_of(std::string_view owner) {
  return label_of(owner);
}

/// Options of an election_observer.
template <class Clock = steady_clock>
struct election_observer_options {
  /// The clock next_leader() measures its timeout and sleeps on. Default: steady_clock.
  Clock clock{};
  /// How often next_leader() asks the store when it cannot wait for a release (the store has no
  /// watch_release, or nobody leads). In (0, 1 h]; default 1 s.
  std::chrono::nanoseconds observe_interval = std::chrono::seconds(1);
  /// Stops a blocking next_leader() from another thread: errc::cancelled within one store round
  /// trip (cancel.hpp). Default: never cancelled.
  cancel_token cancel{};
};

/// Watches the election `name` on a LeaseStore with inspect() without taking part in it.
///
/// Thread-safety: const state only; leader() and next_leader() may be called from any thread
/// concurrently, as far as the store allows concurrent calls (every holdfast store does). The
/// store must outlive it. Copyable.
template <class Store, class Clock = steady_clock>
HOLDFAST_REQUIRES(lease_store<Store>&& ttl_clock<Clock>)
class election_observer {
  static_assert(has_inspect_v<Store>,
                "holdfast: election_observer needs a Store with inspect() (lease_record)");

 public:
  using store_type = Store;
  using clock_type = Clock;
  using time_point = typename Clock::time_point;

  /// Observes the election `name` of `store`. Never fails: an empty name or an observe_interval
  /// not in (0, 1 h] is reported by error(), and every call then fails with it.
  election_observer(Store& store, std::string name, election_observer_options<Clock> opts = {})
      : store_(&store), name_(std::move(name)), opts_(std::move(opts)) {
    const std::string why =
        name_.empty() ? std::string("the name is empty")
                      : detail::interval_problem(opts_.observe_interval, "observe_interval");
    if (why.empty()) return;
    config_error_ = make_error_code(errc::invalid_argument);
    config_message_ = "holdfast: election_observer: invalid argument: " + why;
  }

  /// Returns errc::invalid_argument if the constructor's arguments were bad; zero otherwise.
  [[nodiscard]] std::error_code error() const noexcept { return config_error_; }

  /// Returns what error() refers to, naming the argument, its value and the limit ("holdfast:
  /// election_observer: invalid argument: observe_interval of 0 ns is not in (0, 1 h]"); empty
  /// when error() is zero.
  [[nodiscard]] const std::string& error_message() const noexcept { return config_message_; }

  /// Asks the store who leads now (one inspect() call).
  /// \returns the leader, or nullopt if nobody leads (the key is free or its lease expired);
  ///   errc::invalid_argument for bad constructor arguments; any error inspect() reports.
  result<std::optional<leader_info>> leader() const {
    if (config_error_) return config_error_;
    result<std::optional<lease_record>> r = store_->inspect(name_);
    if (!r) return r.error();
    if (!*r) return std::optional<leader_info>{};
    return std::optional<leader_info>{to_leader_info(**r)};
  }

  /// Blocks until the store's answer to leader() differs from `known` (another leader or term,
  /// a leader where there was none, none where there was one) or `timeout` passes on the clock.
  /// While someone leads, it sleeps at most until that leader's lease can have expired and at
  /// most observe_interval, in the store's watch_release() where the store has it (woken by the
  /// leader's release; a watcher never takes a release away from a campaigning candidate, see
  /// store.hpp), on the clock otherwise; while nobody leads, it asks every observe_interval.
  /// \returns the new answer; errc::timeout if it did not change in time; errc::cancelled within
  ///   one store round trip of a stop of opts.cancel (cancel.hpp); errors of inspect().
  /// Exceptions from the store or clock propagate.
  template <class Rep, class Period>
  result<std::optional<leader_info>> next_leader(const std::optional<leader_info>& known,
                                                 std::chrono::duration<Rep, Period> timeout) const {
    if (config_error_) return config_error_;
    Clock clock = opts_.clock;
    const time_point deadline = detail::saturating_add(
        clock.now(), timeout > decltype(timeout)::zero() ? timeout : decltype(timeout)::zero());
    const cancel_token& cancel = opts_.cancel;
    for (;;) {
      if (cancel.stop_requested()) return errc::cancelled;
      result<std::optional<leader_info>> now_leads = leader();
      if (!now_leads) return now_leads;
      if (now_leads->has_value() != known.has_value() || (known && **now_leads != *known)) {
        return now_leads;
      }
      const time_point now = clock.now();
      if (!(now < deadline)) return errc::timeout;
      time_point wake = detail::saturating_add(now, opts_.observe_interval);
      if (deadline < wake) wake = deadline;
      if (*now_leads) {
        // The leader changes only by a release or an expiry: never sleep past its expiry (its
        // time left by the store's clock, 1 ms more for rounding).
        const time_point expiry =
            detail::saturating_add(now, (**now_leads).remaining + std::chrono::milliseconds(1));
        if (expiry < wake) wake = expiry;
        if constexpr (can_watch_release_v<Store, Clock>) {
          // Woken by a stop of `cancel` where the store's watch can be (store.hpp). Given the
          // term just read, the watch returns at once if a hand-off came in between, instead of
          // watching the new leader's lease as if it were the one that was read.
          const result<void> watched = [&] {
            if constexpr (can_watch_known_holder_v<Store, Clock>) {
              return store_->watch_release(name_, wake, cancel, (**now_leads).term);
            } else {
              return detail::wait_in_store<true>(*store_, name_, clock, now, wake, cancel);
            }
          }();
          if (watched) continue;
          if (cancel.stop_requested()) return errc::cancelled;
          // A failed watch is only a lost hint: fall back to sleeping out the interval.
        }
      }
      if (!detail::sleep_until_or_cancelled(clock, wake, cancel)) return errc::cancelled;
    }
  }

  /// Returns the election's name (the key of the leadership lease).
  [[nodiscard]] const std::string& name() const noexcept { return name_; }

 private:
  Store* store_;
  std::string name_;
  election_observer_options<Clock> opts_;
  std::error_code config_error_{};
  std::string config_message_{};
};

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_ELECTION_OBSERVER_HPP
