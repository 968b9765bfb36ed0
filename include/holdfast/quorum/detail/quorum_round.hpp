// SPDX-License-Identifier: MIT
// holdfast/quorum/detail/quorum_round.hpp - what every quorum_store operation (quorum.hpp) does
// around a round of member requests, in one place:
//
//   piece                  | what it is
//   -----------------------+-----------------------------------------------------------------
//   quorum_args            | the operation's arguments, copied so that a late reply can use them
//   usable_grant,          | whether a member's grant counts, whether two members report the
//   best_agreement         | same holder, and the holder most members report (inspect)
//   member_wait            | the per-member wait of an acquire or renew
//   quorum_validity_left   | Redlock's validity rule, shared by try_acquire and renew
//   report_members         | each member's answer told to the observer
//   raise_in_background,   | a clean-up sent where the member may be called, not waited for
//   release_in_background  |
//   naive_max_book         | the negative control's memory of each grant's member tokens
//
// Not for users.
#ifndef HOLDFAST_QUORUM_DETAIL_QUORUM_ROUND_HPP
#define HOLDFAST_QUORUM_DETAIL_QUORUM_ROUND_HPP

#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "holdfast/clock.hpp"
#include "holdfast/detail/config.hpp"
#include "holdfast/detail/saturating.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/observer.hpp"
#include "holdfast/quorum/detail/fan_out.hpp"
#include "holdfast/quorum_options.hpp"
#include "holdfast/result.hpp"
#include "holdfast/store.hpp"
#include "holdfast/stores/detail/give_back.hpp"
#include "holdfast/validity.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

// Copies of an operation's arguments that outlive the caller (a late reply may need them).
struct quorum_args {
  std::string key;
  std::string owner;
  fencing_token token;
  std::chrono::milliseconds ttl{0};
  // naive_max only: each member's own token for this grant (none where it granted nothing).
  // Empty otherwise: every member is sent `token`, with nothing to allocate per operation.
  std::vector<fencing_token> member_tokens{};

  // The token member i is sent.
  [[nodiscard]] fencing_token token_for(std::size_t i) const noexcept {
    return member_tokens.empty() ? token : member_tokens[i];
  }
};

using quorum_args_ptr = std::shared_ptr<const quorum_args>;

inline quorum_args_ptr make_quorum_args(std::string_view key, std::string_view owner,
                                        fencing_token token, std::chrono::milliseconds ttl,
                                        std::vector<fencing_token> member_tokens = {}) {
  return std::make_shared<const quorum_args>(
      quorum_args{std::string(key), std::string(owner), token, ttl, std::move(member_tokens)});
}

// A member's grant counts only with an issuable token and a positive TTL.
inline bool usable_grant(const grant& g) noexcept {
  return g.token.is_issuable() && g.ttl > std::chrono::milliseconds::zero();
}

inline bool same_holder(const lease_record& a, const lease_record& b) {
  return a.token == b.token && a.owner == b.owner;
}

// Returns {votes, index} of the holder most members report (0 votes if none reports one).
template <class R>
std::pair<std::size_t, std::size_t> best_agreement(const std::vector<std::optional<R>>& v) {
  std::pair<std::size_t, std::size_t> best{0, 0};
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (!v[i] || !*v[i] || !v[i]->value()) continue;
    std::size_t votes = 0;
    for (const auto& x : v) {
      votes += (x && *x && x->value() && same_holder(*x->value(), *v[i]->value())) ? 1 : 0;
    }
    if (votes > best.first) best = {votes, i};
  }
  return best;
}

// The per-member wait of an acquire or renew of `ttl`: min(member_timeout, share * ttl).
inline std::chrono::nanoseconds member_wait(const quorum_options& opts,
                                            std::chrono::milliseconds ttl) {
  const auto cap = std::chrono::duration_cast<std::chrono::nanoseconds>(opts.member_timeout);
  const auto share = std::chrono::nanoseconds(static_cast<std::int64_t>(
      static_cast<long double>(std::chrono::nanoseconds(ttl).count()) * opts.member_timeout_share));
  const auto wait = share < cap ? share : cap;
  return wait > std::chrono::nanoseconds::zero() ? wait : std::chrono::nanoseconds(1);
}

// Redlock's validity rule, shared by try_acquire and renew: some validity is left of a grant of
// `applied` whose requests left at `start` (time elapsed on the quorum's clock, less drift and
// margin). A clock that went backwards leaves none: elapsed time is then unknown.
// The quorum's clock may read up to one tick behind true time (clock_tick), so elapsed time is
// counted a tick longer (store.hpp, T2): now - start + tick < trusted_span(applied).
template <class Clock>
bool quorum_validity_left(const Clock& clock, const validity_options& validity,
                          typename Clock::time_point start, std::chrono::milliseconds applied) {
  const typename Clock::time_point now = clock.now();
  if (now < start) return false;
  const auto span =
      std::chrono::duration_cast<typename Clock::duration>(trusted_span(applied, validity));
  const auto elapsed = saturating_sub(now, start);
  const auto tick = clock_tick(clock);
  return elapsed < span && tick < span - elapsed;
}

// Whether the members may still hold a grant of `ttl` whose requests left at `start`, as far as
// the quorum's clock can tell: its TTL (T2: a store holds a grant at least the TTL it reports)
// plus the drift bound and a tick of the clock has not passed; a clock that went backwards
// cannot tell, so yes. A failed re-acquire keeps the owner's grant while this holds
// (quorum_book.hpp): ending it sooner would end a grant before the TTL the quorum reported.
template <class Clock>
bool quorum_grant_may_be_held(const Clock& clock, const validity_options& validity,
                              typename Clock::time_point start, std::chrono::milliseconds ttl) {
  const typename Clock::time_point now = clock.now();
  if (now < start) return true;
  const auto ttl_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(ttl);
  const auto slack = std::chrono::nanoseconds(static_cast<std::int64_t>(
      std::ceil(static_cast<long double>(ttl_ns.count()) * validity.drift)));
  const auto elapsed = std::chrono::duration_cast<std::chrono::nanoseconds>(now - start);
  return elapsed + std::chrono::duration_cast<std::chrono::nanoseconds>(clock_tick(clock)) <
         ttl_ns + slack;
}

// Tells `observer` member i's answer in a round of `op`.
template <class R>
void report_member(lease_observer* observer, lease_operation op, const quorum_args& a,
                   std::size_t i, const std::optional<R>& x) {
  lease_event e;
  e.kind = lease_event_kind::quorum_member;
  e.key = a.key;
  e.owner = a.owner;
  e.token = a.token;
  e.operation = op;
  e.member = i;
  e.answered = x.has_value();
  if (!x) {
    // Not answered before the round was decided or its wait ran out: error stays zero.
  } else if (!*x) {
    e.error = x->error();
  } else if constexpr (std::is_same_v<R, result<grant>>) {
    e.token = (*x)->token;
  }
  notify(observer, e);
}

// Tells `observer` each target's answer in a round of `op` (no-op without an observer).
// Called on the caller's thread after the round, with no lock held.
template <class R>
void report_members(lease_observer* observer, lease_operation op, const quorum_args& a,
                    const std::vector<std::size_t>& targets,
                    const std::vector<std::optional<R>>& on_time) {
  if (observer == nullptr) return;
  for (std::size_t i : targets) report_member(observer, op, a, i, on_time[i]);
}

// The same for a round sent to every member (no list of targets to build).
template <class R>
void report_members(lease_observer* observer, lease_operation op, const quorum_args& a,
                    const std::vector<std::optional<R>>& on_time) {
  if (observer == nullptr) return;
  for (std::size_t i = 0; i < on_time.size(); ++i) report_member(observer, op, a, i, on_time[i]);
}

// Raises member i's lease from `from` to `to`, where the member may be called (its worker, or
// inline when sequential), without waiting; a failure only leaves the member below `to`.
template <class Store, class Clock>
void raise_in_background(const fan_out<Store, Clock>& exec, std::size_t i,
                         const quorum_args_ptr& args, fencing_token from, fencing_token to) {
  Store* member = &exec.member(i);
  exec.in_member_context(i, [member, args, from, to] {
    HOLDFAST_TRY {
      (void)member->raise_token(args->key, args->owner, from, to);
    }
    HOLDFAST_CATCH_ALL {}
  });
}

// Releases member i's lease under `token` likewise; a failure leaves it for its TTL to free.
template <class Store, class Clock>
void release_in_background(const fan_out<Store, Clock>& exec, std::size_t i,
                           const quorum_args_ptr& args, fencing_token token) {
  Store* member = &exec.member(i);
  exec.in_member_context(i, [member, args, token] {
    HOLDFAST_TRY {
      (void)member->release(args->key, args->owner, token);
    }
    HOLDFAST_CATCH_ALL {}
  });
}

// Member `m` (called where it may be: its worker, or inline) may hold args.owner's lease on
// args.key under a token nobody heard of: detail/give_back.hpp's give_back with the operation's
// arguments, keeping only a grant under `keep`.
template <class Store>
void reclaim(Store& m, const quorum_args& args, fencing_token keep) {
  (void)give_back(m, args.key, args.owner, args.ttl, keep);
}

// reclaim() for member i, where it may be called, without waiting.
template <class Store, class Clock>
void reclaim_in_background(const fan_out<Store, Clock>& exec, std::size_t i,
                           const quorum_args_ptr& args, fencing_token keep) {
  Store* member = &exec.member(i);
  exec.in_member_context(i, [member, args, keep] {
    HOLDFAST_TRY {
      reclaim(*member, *args, keep);
    }
    HOLDFAST_CATCH_ALL {}
  });
}

// quorum_token_mode::naive_max only: (key, owner) -> (quorum token, each member's own token),
// from a reported grant until its release (renew and release send each member its own token).
// Thread-safe.
class naive_max_book {
 public:
  // The tokens to send each member for an operation on (key, owner, token): that grant's member
  // tokens if the book holds them, else empty (`token` everywhere; quorum_args::token_for).
  std::vector<fencing_token> member_tokens(std::string_view key, std::string_view owner,
                                           fencing_token token) const {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = book_.find(std::make_pair(std::string(key), std::string(owner)));
    if (it == book_.end() || it->second.first != token) return {};
    return it->second.second;
  }

  void remember(const quorum_args& a, fencing_token top,
                const std::vector<std::optional<fencing_token>>& held) {
    std::vector<fencing_token> v(held.size());
    for (std::size_t i = 0; i < held.size(); ++i) v[i] = held[i] ? *held[i] : fencing_token{};
    std::lock_guard<std::mutex> lock(mutex_);
    book_[std::make_pair(a.key, a.owner)] = std::make_pair(top, std::move(v));
  }

  void forget(const quorum_args& a) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = book_.find(std::make_pair(a.key, a.owner));
    if (it != book_.end() && it->second.first == a.token) book_.erase(it);
  }

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, std::string>,
           std::pair<fencing_token, std::vector<fencing_token>>>
      book_;
};

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_QUORUM_DETAIL_QUORUM_ROUND_HPP
