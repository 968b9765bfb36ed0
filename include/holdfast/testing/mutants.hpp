// SPDX-License-Identifier: MIT
// holdfast/testing/mutants.hpp - deliberately broken variants, the negative controls that prove
// the checker can fail. None of them is on any default path: a run uses one only when asked.
//
//   mutant                       | layer    | the bug                                   | caught by
//   -----------------------------+----------+-------------------------------------------+----------
//   no_fence                     | resource | admits every write, no token check        | S1
//   check_then_write             | resource | reads the newest token, then writes in a  | S1
//                                |          | second step (a newer write slips between) |
//   token_only_fence             | resource | admits an equal token from any owner (the | S1
//                                |          | rule before issue 20): a store restarted  |
//                                |          | from a lagging copy re-issues a lost      |
//                                |          | grant's token to a second holder          |
//   token_after_grant            | store    | SET NX, then INCR: grants first, assigns  | S2
//                                |          | the token in a later step                 |
//   release_without_owner_check  | store    | releases whoever holds the key            | S5
//   renew_revives_expired        | store    | renews a lease that has already expired   | S5
//   counter_reset_on_release     | store    | per-key counter, reset when released      | S2
//   validity_from_reply          | holder   | trusts the lease from the reply's arrival | S4
//                                |          | instead of from before the request        |
//   no_drift_allowance           | holder   | validity allows no clock drift (drift 0)  | S4
//   racy_grant                   | store    | checks the key is free, then grants in a  | S3
//                                |          | second step (two grants overlap)          |
//   never_expires                | store    | ignores TTLs: a crashed holder blocks the | L1 (also
//                                |          | key forever                               | S5, S2)
//   expires_1ms_early            | store    | frees a lease 1 ms before its TTL ends    | S3
//   expires_1tick_early          | store    | frees a lease one clock tick (1 ns) before| S3
//                                |          | its TTL ends: `now + 1 >= expires`        |
//   keepalive_sleeps_through_    | holder   | its keepalive event loop polls only when  | L2
//     regression                 |          | woken for a renewal: after its clock jumps|
//                                |          | back it sleeps until the old instant      |
//   ignores_clock_tick           | store    | ends a grant at reading + TTL on a coarse | S3
//                                |          | clock (the tick elapsed at the read is    |
//                                |          | forgotten): frees keys up to a tick early |
//   holder_ignores_clock_tick    | holder   | its clock ticks coarsely (TTL/4) but says | S4
//                                |          | it is exact: it trusts its lease while its|
//                                |          | reading lags up to a tick behind          |
//
// Protocol controls (issue 22, "leave nothing behind") live beside their workloads, since the bug
// is in a multi-call protocol, and are caught by O1 in those schedules rather than in
// run_schedule's lease workload: recipe_mutant::forgets_lost_slot (testing/workload_recipes.hpp:
// a semaphore slot whose reply was lost is neither asked again nor given back) and
// quorum_mutant::keeps_unsure_member (testing/workload_quorum.hpp: quorum_options::
// give_back_unsure = false, a member whose reply was lost keeps the owner's lease). The lock
// shapes' controls are shape_mutant values (testing/shapes_workload.hpp), the read-write ones
// among them (rw_writer_while_reader, rw_upgrade_in_place: testing/rw_workload.hpp, caught by
// rw_checker.hpp's read-write exclusion and fenced write order; rw_admits_reissued, a resource
// admitting a re-issued token from another owner after lost grants, caught by S1).
//
// Hand-off queue controls (issue 22, O2: a caller that leaves a queue leaves it) are queue_mutant
// values below, built into testing/sim_queue.hpp's queue model and run by testing/
// workload_handoff.hpp:
//
//   queue_mutant        | the bug                                                   | caught by
//   --------------------+-----------------------------------------------------------+----------
//   gives_up_queued     | the store offers try_acquire_queued but no leave_queue: an | O2
//                       | attempt that queued and then ran out of budget during its |
//                       | round trip returns timeout still queued (Redisson #1104)  |
//   leave_not_retried   | a leave (wait exit, leave_queue) whose answer was an error | O2
//                       | (errc::timeout: the request, or only its reply, was lost) |
//                       | is not asked again: a lost request leaves the place there |
//
// Store mutants are mutant_store<Clock>, a small map-based store that is correct when built with
// mutant::none (the conformance kit checks that too, so the controls differ from a correct store
// by their one bug only). Resource mutants are sim_resource modes; holder mutants change how the
// simulated client uses the shipped lease (testing/workload.hpp).
#ifndef HOLDFAST_TESTING_MUTANTS_HPP
#define HOLDFAST_TESTING_MUTANTS_HPP

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "holdfast/clock.hpp"
#include "holdfast/detail/config.hpp"
#include "holdfast/detail/saturating.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/result.hpp"
#include "holdfast/step_point.hpp"
#include "holdfast/store.hpp"
#include "holdfast/testing/checker.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace testing {

/// The negative controls (see the table at the top of mutants.hpp); none = the correct stack.
enum class mutant : std::uint8_t {
  none,
  no_fence,
  check_then_write,
  token_after_grant,
  release_without_owner_check,
  renew_revives_expired,
  counter_reset_on_release,
  validity_from_reply,
  no_drift_allowance,
  racy_grant,
  never_expires,
  expires_1ms_early,
  expires_1tick_early,
  ignores_clock_tick,
  keepalive_sleeps_through_regression,
  holder_ignores_clock_tick,
  token_only_fence,
};

/// The hand-off queue's negative controls (see the second table at the top of mutants.hpp).
enum class queue_mutant : std::uint8_t { none, gives_up_queued, leave_not_retried };

/// Every queue_mutant but none.
inline constexpr queue_mutant all_queue_mutants[] = {queue_mutant::gives_up_queued,
                                                     queue_mutant::leave_not_retried};

/// Returns the control's name ("none" for none).
inline const char* to_string(queue_mutant m) noexcept {
  switch (m) {
    case queue_mutant::none:
      return "none";
    case queue_mutant::gives_up_queued:
      return "gives_up_queued";
    case queue_mutant::leave_not_retried:
      return "leave_not_retried";
  }
  return "?";
}

/// Parses a queue_mutant's name ("none" included); nullopt for an unknown name.
inline std::optional<queue_mutant> queue_mutant_from_string(std::string_view name) noexcept {
  if (name == "none") return queue_mutant::none;
  for (queue_mutant m : all_queue_mutants) {
    if (name == to_string(m)) return m;
  }
  return std::nullopt;
}

/// Every mutant except none, in table order. token_only_fence bites only where a store loses its
/// newest grants: its runs restart the store from lagging copies (effective_run_options(),
/// workload_plan.hpp; issue 20, part 4).
inline constexpr mutant all_mutants[] = {
    mutant::no_fence,
    mutant::check_then_write,
    mutant::token_only_fence,
    mutant::token_after_grant,
    mutant::release_without_owner_check,
    mutant::renew_revives_expired,
    mutant::counter_reset_on_release,
    mutant::validity_from_reply,
    mutant::no_drift_allowance,
    mutant::racy_grant,
    mutant::never_expires,
    mutant::expires_1ms_early,
    mutant::expires_1tick_early,
    mutant::ignores_clock_tick,
    mutant::keepalive_sleeps_through_regression,
    mutant::holder_ignores_clock_tick,
};

/// Returns the mutant's name, e.g. "no_fence" ("none" for none).
inline const char* to_string(mutant m) noexcept {
  switch (m) {
    case mutant::none:
      return "none";
    case mutant::no_fence:
      return "no_fence";
    case mutant::check_then_write:
      return "check_then_write";
    case mutant::token_after_grant:
      return "token_after_grant";
    case mutant::release_without_owner_check:
      return "release_without_owner_check";
    case mutant::renew_revives_expired:
      return "renew_revives_expired";
    case mutant::counter_reset_on_release:
      return "counter_reset_on_release";
    case mutant::validity_from_reply:
      return "validity_from_reply";
    case mutant::no_drift_allowance:
      return "no_drift_allowance";
    case mutant::racy_grant:
      return "racy_grant";
    case mutant::never_expires:
      return "never_expires";
    case mutant::expires_1ms_early:
      return "expires_1ms_early";
    case mutant::expires_1tick_early:
      return "expires_1tick_early";
    case mutant::ignores_clock_tick:
      return "ignores_clock_tick";
    case mutant::keepalive_sleeps_through_regression:
      return "keepalive_sleeps_through_regression";
    case mutant::holder_ignores_clock_tick:
      return "holder_ignores_clock_tick";
    case mutant::token_only_fence:
      return "token_only_fence";
  }
  return "?";
}

/// Parses a mutant's name (as to_string prints it); nullopt for an unknown name.
inline std::optional<mutant> mutant_from_string(std::string_view name) noexcept {
  if (name == "none") return mutant::none;
  for (mutant m : all_mutants) {
    if (name == to_string(m)) return m;
  }
  return std::nullopt;
}

/// The invariant a mutant is meant to break (see the table). never_expires breaks L1 when a holder
/// crashes, but a schedule may first show its other faces: renewing an expired lease (S5) or
/// re-granting an expired lease's token to its owner (S2); see is_expected_violation().
inline invariant expected_violation(mutant m) noexcept {
  switch (m) {
    case mutant::none:
      return invariant::none;
    case mutant::no_fence:
    case mutant::check_then_write:
    case mutant::token_only_fence:
      return invariant::s1_fenced_writes;
    case mutant::token_after_grant:
    case mutant::counter_reset_on_release:
      return invariant::s2_token_order;
    case mutant::racy_grant:
    case mutant::expires_1ms_early:
    case mutant::expires_1tick_early:
    case mutant::ignores_clock_tick:
      return invariant::s3_exclusive_grants;
    case mutant::validity_from_reply:
    case mutant::no_drift_allowance:
    case mutant::holder_ignores_clock_tick:
      return invariant::s4_holder_belief;
    case mutant::release_without_owner_check:
    case mutant::renew_revives_expired:
      return invariant::s5_ownership;
    case mutant::never_expires:
      return invariant::l1_liveness;
    case mutant::keepalive_sleeps_through_regression:
      return invariant::l2_regression;
  }
  return invariant::none;
}

/// True iff `i` is a violation mutant `m` can be caught by: expected_violation(m), and for
/// never_expires also S5 and S2 (it renews and re-grants leases the contract says expired).
inline bool is_expected_violation(mutant m, invariant i) noexcept {
  if (i == expected_violation(m)) return true;
  return m == mutant::never_expires &&
         (i == invariant::s5_ownership || i == invariant::s2_token_order);
}

/// True iff the mutant lives in the store (so a run needs mutant_store).
inline bool is_store_mutant(mutant m) noexcept {
  return m == mutant::token_after_grant || m == mutant::release_without_owner_check ||
         m == mutant::renew_revives_expired || m == mutant::counter_reset_on_release ||
         m == mutant::racy_grant || m == mutant::never_expires || m == mutant::expires_1ms_early ||
         m == mutant::expires_1tick_early || m == mutant::ignores_clock_tick;
}

/// A small map-based LeaseStore with expiry by `Clock`, correct when built with mutant::none and
/// broken in exactly one way otherwise (store mutants only; others behave as none). Multi-step
/// mutants mark their steps with the public holdfast::step_point (step_point.hpp), exactly as a
/// user's store would: step_kind::between between their steps and step_kind::takes_effect where
/// their grant takes effect, so the simulator (through sim_clock) can stall a client in the middle.
///
/// Thread-safety: none (single-threaded simulations only).
template <class Clock>
class mutant_store {
 public:
  /// Makes an empty store with expiry by `clock`, broken as `m` says.
  explicit mutant_store(Clock clock, mutant m = mutant::none)
      : clock_(std::move(clock)), tick_(clock_tick(clock_)), m_(m) {}

  /// LeaseStore try_acquire (store.hpp), broken as the mutant says.
  result<grant> try_acquire(std::string_view key, std::string_view owner,
                            std::chrono::milliseconds ttl) {
    if (std::error_code ec = check_acquire_args(key, owner, ttl)) return ec;
    const std::string k(key);
    auto now = clock_.now();
    auto it = map_.find(k);
    if (it != map_.end() && live(it->second, now)) {
      if (it->second.owner != owner || it->second.token == 0) return errc::busy;
      it->second.expires = later(it->second.expires, until(now, ttl));
      return grant{fencing_token(it->second.token), ttl};
    }
    if (m_ == mutant::racy_grant) {
      step();  // the key looked free; by now someone else may have taken it
      now = clock_.now();
      const std::uint64_t t = ++counter_;
      map_[k] = record{std::string(owner), t, until(now, ttl)};
      linearized();
      return grant{fencing_token(t), ttl};
    }
    if (m_ == mutant::token_after_grant) {
      // SET NX: the grant, without a token yet ...
      map_[k] = record{std::string(owner), 0, until(now, ttl)};
      linearized();
      step();
      // ... INCR, later: a stalled acquirer gets a token newer than a later holder's.
      const std::uint64_t t = ++counter_;
      auto again = map_.find(k);
      if (again != map_.end() && again->second.owner == owner && again->second.token == 0) {
        again->second.token = t;
      }
      return grant{fencing_token(t), ttl};
    }
    std::uint64_t t;
    if (m_ == mutant::counter_reset_on_release) {
      t = ++per_key_[k];
    } else {
      t = ++counter_;
    }
    map_[k] = record{std::string(owner), t, until(now, ttl)};
    return grant{fencing_token(t), ttl};
  }

  /// LeaseStore renew (store.hpp), broken as the mutant says.
  result<grant> renew(std::string_view key, std::string_view owner, fencing_token token,
                      std::chrono::milliseconds ttl) {
    if (std::error_code ec = check_renew_args(key, owner, token, ttl)) return ec;
    const auto now = clock_.now();
    auto it = map_.find(std::string(key));
    if (it == map_.end() || it->second.owner != owner || it->second.token != token.value()) {
      return errc::lease_lost;
    }
    if (!live(it->second, now) && m_ != mutant::renew_revives_expired) return errc::lease_lost;
    it->second.expires = until(now, ttl);
    return grant{token, ttl};
  }

  /// LeaseStore release (store.hpp), broken as the mutant says.
  result<void> release(std::string_view key, std::string_view owner, fencing_token token) {
    if (std::error_code ec = check_release_args(key, owner, token)) return ec;
    const std::string k(key);
    auto it = map_.find(k);
    if (it == map_.end()) return errc::not_holder;
    if (m_ != mutant::release_without_owner_check &&
        (it->second.owner != owner || it->second.token != token.value())) {
      return errc::not_holder;
    }
    map_.erase(it);
    if (m_ == mutant::counter_reset_on_release) per_key_.erase(k);
    return {};
  }

 private:
  using time_point = typename Clock::time_point;
  struct record {
    std::string owner;
    std::uint64_t token = 0;  // 0 while token_after_grant has not assigned it yet
    time_point expires{};
  };

  // When a grant made at reading `now` may end (store.hpp, T2): the correct store counts the tick
  // its clock may lag; ignores_clock_tick ends it at now + ttl, up to a tick early in real time.
  time_point until(time_point now, std::chrono::milliseconds ttl) const noexcept {
    if (m_ == mutant::ignores_clock_tick) return holdfast::detail::saturating_add(now, ttl);
    return store_hold_until(now, ttl, tick_);
  }

  bool live(const record& r, time_point now) const noexcept {
    if (m_ == mutant::never_expires) return true;
    if (m_ == mutant::expires_1ms_early) return now + std::chrono::milliseconds(1) < r.expires;
    if (m_ == mutant::expires_1tick_early) return now + typename Clock::duration(1) < r.expires;
    return now < r.expires;
  }
  static time_point later(time_point a, time_point b) noexcept { return a < b ? b : a; }
  void step() { holdfast::step_point(clock_, step_kind::between); }
  void linearized() { holdfast::step_point(clock_, step_kind::takes_effect); }

  Clock clock_;
  typename Clock::duration tick_;
  mutant m_;
  std::map<std::string, record> map_;
  std::map<std::string, std::uint64_t> per_key_;
  std::uint64_t counter_ = 0;
};

}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_MUTANTS_HPP
