// SPDX-License-Identifier: MIT
// holdfast/quorum/detail/quorum_acquire.hpp - quorum_acquisition: one quorum_store::try_acquire
// (quorum.hpp) from its first round to its outcome, in named steps:
//
//   step          | what it does
//   --------------+--------------------------------------------------------------------------
//   tally         | round 1: try_acquire on every member; counts grants, failures, exhaustion
//   raise         | round 2 (once W granted): makes W members hold the lease under the top
//                 | token, raising the lagging ones (the token floor; skipped under naive_max)
//   refusal       | why the attempt fails if it does (busy, token_exhausted, store_unavailable)
//   applied_ttl   | the TTL the members holding the top token applied (validity is judged by it)
//   join_late     | after a reported grant: late grants join the lease or are given back
//   give_back     | after a failed attempt: every grant, on time or late, is released, and
//                 | every member whose answer was an error that may hide a grant (a lost
//                 | reply) is asked again with the same owner and released; except the owner's
//                 | live grant on the members known to hold it (`keep`, quorum_book.hpp): the
//                 | attempt did not make it, it at most extended it, and releasing it would
//                 | end a lease its owner still holds by its validity (T1 says a re-acquire
//                 | extends one's live lease, never ends it)
//
// The attempt holds the executor, the options and W by reference and its rounds' state, so the
// steps pass nothing between them. Not for users.
#ifndef HOLDFAST_QUORUM_DETAIL_QUORUM_ACQUIRE_HPP
#define HOLDFAST_QUORUM_DETAIL_QUORUM_ACQUIRE_HPP

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/observer.hpp"
#include "holdfast/quorum/detail/fan_out.hpp"
#include "holdfast/quorum/detail/quorum_book.hpp"
#include "holdfast/quorum/detail/quorum_round.hpp"
#include "holdfast/quorum_options.hpp"
#include "holdfast/result.hpp"
#include "holdfast/send_receive.hpp"
#include "holdfast/store.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

template <class Store, class Clock>
class quorum_acquisition {
 public:
  quorum_acquisition(const fan_out<Store, Clock>& exec, const quorum_options& opts,
                     std::size_t write_quorum, quorum_args_ptr args, std::chrono::nanoseconds wait)
      : exec_(exec), opts_(opts), w_(write_quorum), args_(std::move(args)), wait_(wait) {}

  // Round 1: asks every member and counts the answers. As in Redlock, every member's reply is
  // awaited (up to the per-member wait), not just the first W: the token is then the max over
  // every member that granted, and all of them get raised to it, so the members' counters
  // converge and a slower member with a higher counter is not left out for good. Only a certain
  // failure ends the wait early.
  void tally() {
    const std::size_t n = exec_.size();
    const std::size_t w = w_;
    const quorum_args_ptr& args = args_;
    r1_ = exec_.template run_round<result<grant>>(
        exec_.all_members(), true, wait_,
        make_split_call(
            [args](std::size_t) -> std::optional<store_request> {
              return store_request{
                  store_op::try_acquire, args->key, args->owner, {}, {}, args->ttl};
            },
            [args](std::size_t, Store& s) {
              return s.try_acquire(args->key, args->owner, args->ttl);
            }),
        [w](const std::vector<std::optional<result<grant>>>& on_time, std::size_t outstanding) {
          std::size_t granted = 0;
          for (const auto& r : on_time) granted += (r && *r && usable_grant(**r)) ? 1 : 0;
          return granted + outstanding < w;
        });
    report_members(opts_.observer, lease_operation::acquire, *args_, r1_.on_time);
    held_.resize(n);
    holds_top_.assign(n, 0);
    unsure_.assign(n, 0);
    failed_ = r1_.unanswered;
    for (std::size_t i = 0; i < n; ++i) count(i, r1_.on_time[i]);
  }

  // Round 2 (once W granted, see granted_by_quorum): makes W members hold the lease under
  // `top`. Members that issued `top` themselves already do; if they are W, the rest are raised
  // in the background (fast path), otherwise the lagging members are raised now, decided once W
  // hold `top`. When `exceed` is issuable and `top` is not above it (a grant of this owner that
  // may have ended carried it: quorum_book.hpp), `top` becomes exceed + 1 and every granting
  // member lags. Under naive_max nothing is raised (the negative control).
  void raise(fencing_token exceed = {}) {
    const std::size_t n = exec_.size();
    if (opts_.token_mode == quorum_token_mode::naive_max) {
      for (std::size_t i = 0; i < n; ++i) holds_top_[i] = held_[i] ? 1 : 0;
      holding_ = granted_;
      return;
    }
    if (exceed.is_issuable() && top_ <= exceed) {
      const fencing_token fresh(exceed.value() + 1);
      if (!fresh.is_issuable()) {  // no token left above it: nobody holds one (refusal)
        exhausted_ = n;
        return;
      }
      top_ = fresh;
    }
    std::vector<std::size_t> lagging;
    for (std::size_t i = 0; i < n; ++i) {
      if (!held_[i]) continue;
      if (*held_[i] == top_) {
        holds_top_[i] = 1;
        ++holding_;
      } else {
        lagging.push_back(i);
      }
    }
    if (holding_ >= w_) {
      for (std::size_t i : lagging) raise_in_background(exec_, i, args_, *held_[i], top_);
      return;
    }
    raise_now(lagging);
  }

  // Whether W members granted (round 2 may run).
  [[nodiscard]] bool granted_by_quorum() const noexcept { return granted_ >= w_; }
  // Whether W members granted and W hold the lease under top() (the grant may be reported).
  [[nodiscard]] bool held_by_quorum() const noexcept { return granted_ >= w_ && holding_ >= w_; }
  // The operation's arguments.
  [[nodiscard]] const quorum_args& args() const noexcept { return *args_; }
  // The quorum's token: the max of the granted tokens.
  [[nodiscard]] fencing_token top() const noexcept { return top_; }
  // Which members hold the lease under top() (granted it, or were raised to it, on time).
  [[nodiscard]] const std::vector<char>& holds_top() const noexcept { return holds_top_; }
  // The token each member granted on time (none where it did not).
  [[nodiscard]] const std::vector<std::optional<fencing_token>>& held() const noexcept {
    return held_;
  }
  [[nodiscard]] const std::shared_ptr<fan_out_round<result<grant>>>& first_round() const {
    return r1_.round;
  }

  // Why try_acquire fails if it does: too few grants are contention (busy) while no more than
  // N - W members failed, exhaustion when too many counters ran out, store_unavailable otherwise
  // (also when W granted but the raise left fewer than W holding `top`).
  [[nodiscard]] errc refusal() const {
    const std::size_t n = exec_.size();
    if (granted_ >= w_)
      return exhausted_ > n - w_ ? errc::token_exhausted : errc::store_unavailable;
    if (exhausted_ > n - w_) return errc::token_exhausted;
    if (failed_ <= n - w_) return errc::busy;  // enough members answered (or may yet)
    return errc::store_unavailable;
  }

  // The TTL the members holding `top` applied: the smallest, never more than asked. Validity is
  // judged by it (a member may grant less than was asked): judging by the requested TTL could
  // report a grant that already expired there.
  [[nodiscard]] std::chrono::milliseconds applied_ttl() const {
    std::chrono::milliseconds applied = args_->ttl;
    for (std::size_t i = 0; i < exec_.size(); ++i) {
      if (holds_top_[i] && r1_.on_time[i] && (*r1_.on_time[i])->ttl < applied) {
        applied = (*r1_.on_time[i])->ttl;
      }
    }
    return applied;
  }

  // Sequential dispatch, before the validity check of a grant W hold: late grants are given
  // back now, inline, so that no member call (and no time) passes between the check and the
  // report. (Threads: they join in join_late, on their workers, without delaying the caller.)
  // The owner's live grant `keep` stays where it is known to be held (see give_back).
  void give_back_late_now(const kept_grant& keep) {
    const quorum_args_ptr args = args_;
    const fan_out<Store, Clock>* exec = &exec_;  // outlives every clean-up (quorum.hpp)
    const bool give = opts_.give_back_unsure;
    exec_.finalize(r1_.round, [exec, args, give, keep](std::size_t i, result<grant>& r) {
      if (r && r->token.is_issuable() && r->token != keep.at(i)) {
        (void)exec->member(i).release(args->key, args->owner, r->token);
      } else if (!r && may_hide_grant(r.error()) && give) {
        reclaim(exec->member(i), *args, fencing_token{});
      }
    });
    reclaim_unsure(top_);
  }

  // After a reported grant: a late grant joins the lease (raised to `top`) or is given back, and
  // so is whatever a member whose on-time answer was an error may hold (its reply may have been
  // lost after it granted): asked again with the same owner, kept only under `top`.
  void join_late() {
    if (!exec_.sequential()) reclaim_unsure(top_);  // (sequential: give_back_late_now did)
    const quorum_args_ptr args = args_;
    const fan_out<Store, Clock>* exec = &exec_;  // outlives every clean-up (quorum.hpp)
    const bool floor = opts_.token_mode == quorum_token_mode::floor;
    const bool give = opts_.give_back_unsure;
    exec_.finalize(r1_.round,
                   [exec, args, top = top_, floor, give](std::size_t i, result<grant>& r) {
                     if (!r && give && may_hide_grant(r.error()))
                       reclaim(exec->member(i), *args, top);
                     if (!r || !r->token.is_issuable() || r->token == top) return;
                     if (floor && r->token < top) {
                       (void)exec->member(i).raise_token(args->key, args->owner, r->token, top);
                     } else {
                       (void)exec->member(i).release(args->key, args->owner, r->token);
                     }
                   });
  }

  // After a failed attempt: gives back every grant, on time or late, under whichever token it
  // carries now (`top` where a raise landed, the member's own otherwise), then rethrows the
  // first exception a member threw. Redlock's rule: nothing is kept from a failed attempt.
  // Except the owner's live grant `keep` (token none if it has none; quorum_book.hpp, live()) on
  // the members known to hold it: such a member answering with its token held that lease before
  // the attempt (a same-owner re-acquire returns the live record's token) and the attempt at most
  // extended it, so it stays, and the owner's lease with it. What the attempt added goes: other
  // tokens; the token where a raise put it; the token on any other member (its lagging counter
  // may have issued it fresh).
  void give_back(const kept_grant& keep) {
    const quorum_args_ptr args = args_;
    const fan_out<Store, Clock>* exec = &exec_;  // outlives every clean-up (quorum.hpp)
    const bool give = opts_.give_back_unsure;
    exec_.finalize(
        r1_.round,
        [exec, args, give, keep](std::size_t i, result<grant>& r) {
          if (r && r->token.is_issuable() && r->token != keep.at(i)) {
            (void)exec->member(i).release(args->key, args->owner, r->token);
          } else if (!r && give && may_hide_grant(r.error())) {
            reclaim(exec->member(i), *args, keep.at(i));
          }
        },
        true);
    // Members whose on-time answer was an error may have granted anyway (a lost reply): ask
    // them again with the same owner and release what they hold (redlock-rb #76's kind).
    if (opts_.give_back_unsure) {
      for (std::size_t i = 0; i < exec_.size(); ++i) {
        if (unsure_[i]) reclaim_in_background(exec_, i, args_, keep.at(i));
      }
    }
    std::vector<std::size_t> to_release;
    for (std::size_t i = 0; i < exec_.size(); ++i) {
      if (held_[i] && *held_[i] != keep.at(i)) to_release.push_back(i);
    }
    if (!to_release.empty()) {
      auto cleanup = exec_.template run_round<result<void>>(
          to_release, false,
          std::chrono::duration_cast<std::chrono::nanoseconds>(opts_.member_timeout),
          [args, held = held_, top = top_](std::size_t i, Store& s) -> result<void> {
            result<void> r = s.release(args->key, args->owner, top);
            if (!r && r.error() == errc::not_holder && *held[i] != top) {
              r = s.release(args->key, args->owner, *held[i]);
            }
            return r;
          },
          nullptr);
      exec_.finalize(cleanup.round, nullptr);
    }
    rethrow_member_exception(r1_.round);
    if (r2_) rethrow_member_exception(r2_);
  }

 private:
  // Asks every unsure member again with the same owner and releases what it holds unless it
  // carries `keep` (quorum_round.hpp, reclaim), without waiting.
  void reclaim_unsure(fencing_token keep) {
    if (!opts_.give_back_unsure) return;  // the negative control
    for (std::size_t i = 0; i < exec_.size(); ++i) {
      if (unsure_[i]) reclaim_in_background(exec_, i, args_, keep);
    }
  }

  // Counts member i's round-1 answer.
  void count(std::size_t i, const std::optional<result<grant>>& r) {
    if (!r) return;
    if (*r && usable_grant(**r)) {
      held_[i] = (*r)->token;
      ++granted_;
      if (top_ < (*r)->token) top_ = (*r)->token;
    } else if (*r) {
      // A malformed grant (token none/max, TTL <= 0): the member is failed; give back what it
      // may hold.
      if ((*r)->token.is_issuable()) release_in_background(exec_, i, args_, (*r)->token);
      ++failed_;
    } else if (r->error() == errc::busy) {
      // Contention: neither granted nor failed.
    } else if (r->error() == errc::token_exhausted) {
      ++exhausted_;
      ++failed_;
    } else {
      if (may_hide_grant(r->error())) unsure_[i] = 1;
      ++failed_;
    }
  }

  // Round 2 proper: raises the `lagging` members to `top`, decided once W hold it.
  void raise_now(const std::vector<std::size_t>& lagging) {
    const std::size_t already = holding_;
    const std::size_t w = w_;
    const quorum_args_ptr& args = args_;
    auto round2 = exec_.template run_round<result<void>>(
        lagging, true, wait_,
        make_split_call(
            [args, held = held_, top = top_](std::size_t i) -> std::optional<store_request> {
              return store_request{
                  store_op::raise_token, args->key, args->owner, *held[i], top, {}};
            },
            [args, held = held_, top = top_](std::size_t i, Store& s) {
              return s.raise_token(args->key, args->owner, *held[i], top);
            }),
        [already, w](const std::vector<std::optional<result<void>>>& on_time,
                     std::size_t outstanding) {
          std::size_t ok = already;
          for (const auto& r : on_time) ok += (r && *r) ? 1 : 0;
          return ok >= w || ok + outstanding < w;
        });
    report_members(opts_.observer, lease_operation::raise, *args_, lagging, round2.on_time);
    for (std::size_t i : lagging) {
      if (round2.on_time[i] && *round2.on_time[i]) {
        holds_top_[i] = 1;
        ++holding_;
      }
    }
    r2_ = round2.round;
    exec_.finalize(r2_, nullptr);  // a late raise only adds a member holding `top`
  }

  const fan_out<Store, Clock>& exec_;
  const quorum_options& opts_;
  std::size_t w_;
  quorum_args_ptr args_;
  std::chrono::nanoseconds wait_;
  fan_out_reply<result<grant>> r1_;                       // round 1: try_acquire everywhere
  std::vector<std::optional<fencing_token>> held_;        // the token each member granted on time
  std::size_t granted_ = 0, exhausted_ = 0, failed_ = 0;  // of round 1's replies
  fencing_token top_{};                                   // the max of the granted tokens
  std::vector<char> holds_top_;                           // members holding the lease under top_
  std::vector<char> unsure_;  // members whose on-time error may hide a grant (a lost reply)
  std::size_t holding_ = 0;   // how many
  std::shared_ptr<fan_out_round<result<void>>> r2_;  // round 2 (raise), if it ran
};

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_QUORUM_DETAIL_QUORUM_ACQUIRE_HPP
