// SPDX-License-Identifier: MIT
// holdfast/quorum.hpp - quorum_store<Store>: one lease over N independent stores, granted by a
// majority of them, with a fencing token that stays strictly monotonic. Itself a LeaseStore, so
// lease<quorum_store<...>>, fences and the conformance kit work on it unchanged.
//
// Majority acquisition is Redlock (Sanfilippo, "Distributed locks with Redis", redis.io): ask every
// member, succeed on a strict majority within a validity window, release everything otherwise.
// Redlock gives no fencing token; this file adds one (Kleppmann, "How to do distributed locking",
// 2016, asks for exactly that and explains why it is hard).
//
// ## Why the max of the members' tokens is not a fencing token
// Each member has its own counter. Take members A, B, C with counters 0, 100, 0:
//
//   grant 1 on {A, B} (C down):  A issues 1, B issues 101   -> max 101
//   grant 2 on {A, C} (B down):  A issues 2, C issues 1     -> max 2      < 101: backwards
//
// The two majorities intersect (in A), but A's own counter never saw 101. (quorum_token_mode::
// naive_max does exactly this; it exists only as the negative control the tests catch.)
//
// ## The token floor (the fix)
// After a majority grants with member tokens t_i whose maximum is T, every granting member whose
// t_i < T is asked to *raise* its lease to T: member.raise_token(key, owner, t_i, T) re-labels the
// member's live lease with T and lifts the member's counter to >= T, atomically and only while that
// member still holds this very lease. The quorum grant is reported with token T only once W members
// (the write quorum, a majority by default) hold the lease under T. So:
//
//   Claim. For two reported grants G1, G2 of one key (an owner re-acquiring its own live lease
//   gets the same grant again), T1 != T2, and the later one (at any member both use) carries the
//   greater token.
//   Proof. The sets R1, R2 of members holding G1 resp. G2 under its token each have >= W members,
//   and 2W > N, so they share a member m. m held G1 and G2 at different times, say G1 first. While
//   it still held G1, m's counter was >= T1 (it issued T1 itself, or raise_token lifted it). It
//   granted G2 later, so t_m(G2) > T1, and T2 >= t_m(G2) > T1. Unless m's record of G2 *is* its
//   record of G1: the same owner re-acquiring after G1 ended (a release freed other members, its
//   validity passed) while m still held it. So the quorum remembers the last grant it reported
//   per (key, owner) (detail/quorum_book.hpp) and gives it again only while it may still be live
//   (not released or lost, validity left); otherwise, when the top token is not above it, every
//   granting member is raised to its token + 1, and T2 > T1 again. The members' answers cannot
//   tell: a lagging counter issues the stale record's token fresh. An owner id serves one
//   quorum_store (one process), as any holder's id serves one holder.
//
// No clock, pause, delay or lost reply enters the argument, only that a member's counter never
// goes back. That is why raise_token is *conditional*: an unconditional raise delayed past the
// lease's expiry at m could land after m granted G2, and a client with a bad clock could then
// report T1 > T2 after G2 was reported. Two grants that do not overlap in real time are ordered
// across keys too (the later one starts after every raise of the earlier one), but two concurrent
// grants of different keys may carry equal tokens: the promise is per key (T1), like any store's.
//
// ## Round trips and the protocol
//
//   operation     | requests (all members, concurrently)        | succeeds when
//   --------------+---------------------------------------------+---------------------------------
//   try_acquire   | 1: try_acquire;  2 (only if the tokens of   | >= W members hold the lease
//                 | the granting members disagree): raise_token | under T, and validity > 0
//                 | to the members below T                      |
//   renew         | renew(key, owner, T, ttl)                   | >= W renewed, validity > 0
//   release       | release(key, owner, T)                      | >= W released
//   inspect       | inspect(key)                                | >= W agree on one holder
//
// Round 2 is skipped when W granting members already issued T themselves: members' counters move
// together once they have been raised, so a steady stream of grants costs one round trip. Members
// below T are then raised in the background, without waiting. On failure, or when the validity
// left is not positive, whatever was granted is released (to T or to t_i, whichever it carries)
// and the operation reports busy, store_unavailable, token_exhausted or timeout.
//
// A client that stalls or crashes between the rounds reported nothing: members hold its lease
// under their own t_i (or T, where the raise landed) until the TTL frees it. The raised counters
// are harmless (floors only go up). A raise that arrives after the member's lease expired is
// refused, so the member does not count towards W and the grant fails.
//
// ## Validity
// `start` is read on the quorum's clock before the first request. A grant is reported only if
// `ttl - elapsed - ceil(ttl * drift) - margin > 0` when the last needed reply arrived (Redlock's
// rule; options.validity, default 1% + 2 ms); otherwise everything is released and try_acquire
// reports timeout. The grant's `ttl` field is the TTL every member applied (the smallest among
// them), *not* the remainder: the lease layer (lease.hpp) reads its own start before calling
// try_acquire, hence before the first member request, and trusts the lease until
// `start + ttl*(1-drift) - margin`, which is the same Redlock validity counted from the start
// instead of from the end (the remainder would count the round's time twice, the lease counting
// from its start). Raw users do the same with valid_until().
//
// ## Member restarts
// A member restarted *empty* has lost its counter and its lease records. Whether tokens stay
// monotonic (S2) and grants exclusive (S3) depends on the restart and on W; fenced writes (S1)
// hold in every row, because the gate refuses a token below the newest it admitted:
//
//   members                                            | S2 tokens   | S3 exclusive | S1
//   ---------------------------------------------------+-------------+--------------+-----
//   persist counter and records (Redis: appendonly yes,| monotonic   | holds        | holds
//   appendfsync always; memory_store: last_issued)     |             |              |
//   persist the counter only                           | monotonic   | holds if the | holds
//                                                      |             | restart waits|
//                                                      |             | out max TTL  |
//   empty, empty_restarts = f >= number of members     | monotonic   | holds        | holds
//   restarted empty between two grants of a key        |             |              |
//   (W = floor((N+f)/2)+1; e.g. N=5, f=2 -> W=4)       |             |              |
//   empty, W = majority, restart delayed past max TTL  | may regress | holds        | holds
//   (Redlock's delayed restart)                        |             | (Redlock)    |
//   empty, W = majority, restarted at once             | may regress | may overlap  | holds
//
// Why `f`: two W-sets share >= 2W - N members; with W = floor((N+f)/2)+1 that is > f, so at least
// one shared member kept its counter (the proof above needs only one). A delayed restart does not
// help S2: the counter does not come back by waiting. The price of W > majority is availability:
// only N - W members may be down (N=5, W=4 tolerates one member down, not two).
//
// The cost of a regression is liveness, not safety: the new holder's writes are refused as stale
// until a grant carries a token above the gate's newest, and each grant lifts counters by one. To
// recover at once, pass the gate's newest token to raise_token_floor() and acquire again. The
// limits (Kleppmann 2016): counters on several nodes cannot be kept monotonic against arbitrary
// restarts without durable state; empty_restarts only moves the bound, and appendfsync everysec
// can lose the last second of counter increments, which is a partial empty restart. The safe
// configuration is the default one (W = majority) *with members that persist their counters*.
//
// ## Dispatch
// How requests reach the members (threads, split send/receive, sequential) and what each costs:
// quorum_options.hpp, "Dispatch", beside quorum_dispatch.
//
// ## Files
// This file is the protocol. The configuration (quorum_options, quorum_dispatch, the
// quorum_member requirement) is quorum_options.hpp, included here; try_acquire's steps (tally,
// raise, give back) are detail/quorum_acquire.hpp, and what every operation does around a round
// (its arguments, the validity rule, the observer, clean-ups in the background)
// detail/quorum_round.hpp. The last grant reported per (key, owner) is detail/quorum_book.hpp.
// The workers, rounds and late-reply handling are the fan-out executor, detail/fan_out.hpp.
#ifndef HOLDFAST_QUORUM_HPP
#define HOLDFAST_QUORUM_HPP

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include "holdfast/clock.hpp"
#include "holdfast/detail/config.hpp"
#include "holdfast/detail/saturating.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/observer.hpp"
#include "holdfast/quorum/detail/fan_out.hpp"
#include "holdfast/quorum/detail/quorum_acquire.hpp"
#include "holdfast/quorum/detail/quorum_batch.hpp"
#include "holdfast/quorum/detail/quorum_book.hpp"
#include "holdfast/quorum/detail/quorum_round.hpp"
#include "holdfast/quorum_options.hpp"
#include "holdfast/result.hpp"
#include "holdfast/send_receive.hpp"
#include "holdfast/store.hpp"
#include "holdfast/validity.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

/// A LeaseStore over N independent member stores (N odd, 3 or 5 typical): a lease is granted when
/// W of them grant it (W = a strict majority by default), within a validity window, with a fencing
/// token that strictly increases per key across grants, whichever majorities grant them (the token
/// floor; see the overview of quorum.hpp for the protocol, the proof and the restart rules).
///
/// `Store` must model LeaseStore and provide the token-floor capability raise_token()
/// (has_raise_token_v); memory_store does. With raise_token_floor() on the members, the quorum
/// offers it too; with inspect(), the quorum offers inspect(). Members are held by pointer and
/// must outlive the quorum_store; they must be distinct.
///
/// Errors common to every operation: errc::invalid_argument, with nothing sent, for bad arguments
/// or a bad configuration (see check()). A member that reports an error, times out or throws
/// counts as failed for that request; a member's exception reaches the caller (after clean-up)
/// only when the operation as a whole fails, since masking a minority's faults is the quorum's
/// job. Exceptions from the quorum's clock propagate; grants already made then expire by TTL.
///
/// Thread-safety: every member function may be called concurrently. Under
/// quorum_dispatch::threads each member store is called only from its own worker thread, or (split
/// dispatch) from one caller's thread at a time; under sequential, and for in-process members
/// under automatic, the members are called from the callers' threads and must be thread-safe if
/// the quorum is shared (memory_store is). The destructor waits for queued clean-ups (releases) to
/// finish.
template <class Store, class Clock = steady_clock>
HOLDFAST_REQUIRES(quorum_member<Store>&& ttl_clock<Clock>)
class quorum_store {
  static_assert(assert_lease_store<Store>(),
                "holdfast::quorum_store<Store>: Store must model LeaseStore");
  static_assert(has_raise_token_v<Store>,
                "holdfast::quorum_store<Store>: a member needs `result<void> raise_token("
                "std::string_view key, std::string_view owner, fencing_token token, fencing_token "
                "to)`, the token-floor capability that keeps quorum tokens monotonic (see "
                "quorum.hpp); Store has no raise_token callable with these arguments and "
                "returning that");
  static_assert(assert_ttl_clock<Clock>(),
                "holdfast::quorum_store<Store, Clock>: Clock must model ttl_clock");

 public:
  using store_type = Store;
  using clock_type = Clock;

  /// Makes a quorum over `members` (not owned; distinct, non-null, an odd number of them) with
  /// `opts`, measuring validity on `clock`. It starts one worker thread per member unless the
  /// dispatch is sequential, or automatic over in-process members. A bad configuration is not an
  /// exception: check() reports it and every operation returns errc::invalid_argument.
  /// std::thread's own failure to start propagates (std::system_error; it aborts under
  /// -fno-exceptions).
  explicit quorum_store(std::vector<Store*> members, quorum_options opts = {},
                        Clock clock = Clock{})
      : opts_(opts), exec_(std::move(members), std::move(clock)) {
    const std::vector<Store*>& m = exec_.members();
    config_error_ = opts_.check(m.size());
    if (!config_error_ && !detail::members_problem(m).empty()) {
      config_error_ = errc::invalid_argument;
    }
    write_quorum_ = write_quorum(m.size(), opts_.empty_restarts);
    const bool inline_members =
        opts_.dispatch == quorum_dispatch::automatic && completes_inline_v<Store>;
    if (!config_error_ && opts_.dispatch != quorum_dispatch::sequential && !inline_members) {
      exec_.start_workers(opts_.max_queued);
      if (opts_.dispatch == quorum_dispatch::automatic) exec_.enable_split();
    }
  }

  quorum_store(const quorum_store&) = delete;
  quorum_store& operator=(const quorum_store&) = delete;

  /// Waits for every member's queued requests (late clean-ups, background raises) and stops the
  /// workers.
  ~quorum_store() = default;

  /// Returns errc::invalid_argument if the configuration is bad (see quorum_options::check; also
  /// a null or repeated member), a zero error code otherwise.
  [[nodiscard]] std::error_code check() const noexcept { return config_error_; }
  /// Returns what check() refuses, naming the field or member, its value and the limit
  /// ("holdfast: quorum_store: invalid argument: quorum of 4 members: the number must be odd
  /// (1, 3, 5, ...)"), or "" if the configuration is good.
  [[nodiscard]] std::string error_message() const {
    if (!config_error_) return {};
    std::string why = opts_.problem(exec_.members().size());
    if (why.empty()) why = detail::members_problem(exec_.members());
    return "holdfast: quorum_store: invalid argument: " + why;
  }
  /// Returns the number of members N.
  [[nodiscard]] std::size_t size() const noexcept { return exec_.size(); }
  /// Returns W, how many members must grant, renew or have released a lease (see empty_restarts).
  [[nodiscard]] std::size_t quorum() const noexcept { return write_quorum_; }
  /// Returns the options in use.
  [[nodiscard]] const quorum_options& options() const noexcept { return opts_; }
  /// Returns the shortest TTL (ms) every member can honour: the largest of the members'
  /// store_min_ttl (0 for members without one, such as memory_store). try_acquire(), acquire()
  /// and the recipes refuse a TTL under it, as they do for one store (acquire_options.hpp).
  [[nodiscard]] std::chrono::milliseconds min_ttl() const noexcept {
    std::chrono::milliseconds floor{0};
    for (const Store* m : exec_.members()) {
      if (m != nullptr && floor < store_min_ttl(*m)) floor = store_min_ttl(*m);
    }
    return floor;
  }

  /// Acquires `key` for `owner` for `ttl` (ms) on W members with one fencing token (the token
  /// floor), asking every member concurrently. Re-acquiring one's own live lease returns the same
  /// token while this quorum_store reported it, neither released it nor saw it lost, validity is
  /// left and W members still hold it under that token; otherwise it returns a greater one (never
  /// the token of a grant that may have ended), which only fences this owner's own older writes.
  /// \returns the grant {T, the smallest TTL the W members applied};
  ///   errc::busy if fewer than W granted and no more than N - W members failed (contention);
  ///   errc::store_unavailable if more than N - W members failed (an error, or no reply within
  ///     the per-member timeout), or the raise round left fewer than W members holding T;
  ///   errc::token_exhausted if too many members' counters are exhausted to form W;
  ///   errc::timeout if W granted but no validity was left (or the quorum's clock went backwards);
  ///   errc::invalid_argument (see check_acquire_args and check()).
  /// In every failure case whatever the attempt granted is released (Redlock's rule), but not the
  /// owner's live lease: a failed re-acquire of a grant reported here, neither released nor lost,
  /// within its TTL, leaves it held under its token on its members, as on a single store (T1).
  result<grant> try_acquire(std::string_view key, std::string_view owner,
                            std::chrono::milliseconds ttl) {
    if (std::error_code ec = check_acquire_args(key, owner, ttl)) return ec;
    if (config_error_) return config_error_;
    const time_point start = exec_.clock().now();
    detail::quorum_acquisition<Store, Clock> a(exec_, opts_, write_quorum_,
                                               detail::make_quorum_args(key, owner, {}, ttl),
                                               detail::member_wait(opts_, ttl));
    a.tally();
    if (a.granted_by_quorum()) {
      a.raise(book_.must_exceed(
          key, owner, a.top(),
          [this](time_point s, std::chrono::milliseconds t) { return validity_left(s, t); }));
    }
    errc failure = a.refusal();
    // The owner's grant while members may hold it: a failure keeps it (quorum_book.hpp, live()).
    const auto live = [&] {
      if (!opts_.keep_live_grant) return detail::kept_grant{};  // the negative control
      return book_.live(key, owner, [this](time_point s, std::chrono::milliseconds t) {
        return detail::quorum_grant_may_be_held(exec_.clock(), opts_.validity, s, t);
      });
    };
    if (a.held_by_quorum()) {
      if (exec_.sequential()) a.give_back_late_now(live());
      const std::chrono::milliseconds applied = a.applied_ttl();
      if (!validity_left(start, applied)) {
        failure = errc::timeout;
      } else {
        if (opts_.token_mode == quorum_token_mode::naive_max) {
          naive_.remember(a.args(), a.top(), a.held());
        }
        a.join_late();
        book_.granted(key, owner, a.top(), start, applied, a.holds_top());
        return grant{a.top(), applied};
      }
    }
    const detail::kept_grant keep = live();
    if (!keep.token.is_issuable()) book_.ended(key, owner, fencing_token{});  // records given back
    a.give_back(keep);  // rethrows a member's exception, if one threw
    return failure;
  }

  /// Extends the lease on `key` to `ttl` (ms) on every member that holds it as `owner` with
  /// `token`. \returns the grant {token, the smallest TTL the renewing members applied} once W
  /// renewed with validity left; errc::lease_lost if more than N - W members said lease_lost (W can
  /// no longer be reached: the lease is gone); errc::timeout if W renewed but no validity was left;
  /// errc::store_unavailable otherwise (transient: the caller may retry within its validity);
  /// errc::invalid_argument (see check_renew_args and check()). An expired lease is never revived.
  result<grant> renew(std::string_view key, std::string_view owner, fencing_token token,
                      std::chrono::milliseconds ttl) {
    if (std::error_code ec = check_renew_args(key, owner, token, ttl)) return ec;
    if (config_error_) return config_error_;
    const time_point start = exec_.clock().now();
    auto args =
        detail::make_quorum_args(key, owner, token, ttl, naive_member_tokens(key, owner, token));
    const std::size_t w = write_quorum_;
    auto r = exec_.template run_round<result<grant>>(
        exec_.all_members(), true, detail::member_wait(opts_, ttl),
        detail::make_split_call(
            [args](std::size_t i) -> std::optional<store_request> {
              if (!args->token_for(i).is_issuable()) return std::nullopt;
              return store_request{store_op::renew,    args->key, args->owner,
                                   args->token_for(i), {},        args->ttl};
            },
            [args](std::size_t i, Store& s) -> result<grant> {
              if (!args->token_for(i).is_issuable()) return errc::lease_lost;
              return s.renew(args->key, args->owner, args->token_for(i), args->ttl);
            }),
        [w](const std::vector<std::optional<result<grant>>>& on_time, std::size_t outstanding) {
          std::size_t ok = 0;
          for (const auto& x : on_time) ok += (x && *x) ? 1 : 0;
          return ok >= w || ok + outstanding < w;
        });
    exec_.finalize(r.round, nullptr);
    detail::report_members(opts_.observer, lease_operation::renew, *args, r.on_time);
    std::size_t renewed = 0, lost = 0;
    std::vector<char> by(r.on_time.size(), 0);  // the members that renewed: they hold it now
    std::chrono::milliseconds applied = ttl;
    for (std::size_t i = 0; i < r.on_time.size(); ++i) {
      const auto& x = r.on_time[i];
      if (!x) continue;
      // A renewal counts only if it carries the token it was asked to extend (T4: a member that
      // answers with another token is garbage, not a renewal) and a positive TTL.
      if (*x && (*x)->token == args->token_for(i) &&
          (*x)->ttl > std::chrono::milliseconds::zero()) {
        ++renewed;
        by[i] = 1;
        if ((*x)->ttl < applied) applied = (*x)->ttl;
      } else if (!*x && x->error() == errc::lease_lost) {
        ++lost;
      }
    }
    if (renewed >= w) {
      if (!validity_left(start, applied)) return errc::timeout;
      book_.renewed(key, owner, token, start, applied, std::move(by));
      return grant{token, applied};
    }
    exec_.rethrow_member_exception(r.round);
    if (lost > exec_.size() - w) {
      book_.ended(key, owner, token);
      return errc::lease_lost;
    }
    return errc::store_unavailable;
  }

  /// Renews q[0..n) (each q[i].op == store_op::renew; key, owner, token, ttl as renew() takes
  /// them) in ONE round: each member is sent the whole batch (its renew_batch, one pipelined
  /// exchange, when it has one; else its renew() per lease), and out[i] is what renew() would
  /// return for q[i] (detail/quorum_batch.hpp): each lease's outcome its own, a lease lost on the
  /// members says lease_lost for it only. For keepalive's batch path (max_batch).
  /// Thread-safety: as renew(). Exceptions: a member's, only when no lease was renewed.
  void renew_batch(const store_request* q, std::size_t n, result<grant>* out) {
    if (config_error_) {
      for (std::size_t i = 0; i < n; ++i) out[i] = config_error_;
      return;
    }
    const time_point start = exec_.clock().now();
    detail::quorum_renew_batch(
        exec_, opts_, write_quorum_, q, n, out,
        [this](std::string_view k, std::string_view o, fencing_token t) {
          return naive_member_tokens(k, o, t);
        },
        [this, start](std::chrono::milliseconds applied) { return validity_left(start, applied); });
    for (std::size_t i = 0; i < n; ++i) {  // as renew() keeps the book
      if (out[i]) book_.renewed(q[i].key, q[i].owner, q[i].token, start, out[i]->ttl);
      if (!out[i] && out[i].error() == errc::lease_lost)
        book_.ended(q[i].key, q[i].owner, q[i].token);
    }
  }

  /// Releases the lease on `key` held by `owner` with `token` on every member.
  /// Once one member released it, a member that did not (not_holder, an error) is asked again
  /// with the same owner and released, in the background: it may hold this owner's lease under a
  /// token of its own (an acquire whose reply was lost there). \returns success once W members
  /// released it;
  ///   errc::not_holder if it cannot be held under `owner` and `token` on W members any more (it
  ///     expired and was taken over, was released already, or never granted): the caller is not
  ///     the quorum's holder, and whatever it still had on a minority has been removed;
  ///   errc::store_unavailable if too few members answered to tell (retry; the TTL frees the key
  ///     regardless); errc::invalid_argument (see check_release_args and check()). Reads no
  ///     clock. (Releasing on W, not on one member, is what makes the answer mean "you held it":
  ///     a holder whose lease was taken over may still find its stale record on a minority.)
  result<void> release(std::string_view key, std::string_view owner, fencing_token token) {
    if (std::error_code ec = check_release_args(key, owner, token)) return ec;
    if (config_error_) return config_error_;
    auto args = detail::make_quorum_args(key, owner, token, std::chrono::milliseconds::zero(),
                                         naive_member_tokens(key, owner, token));
    book_.ended(key, owner, token);  // whatever the members answer: it may end with any of them
    const std::size_t w = write_quorum_;
    auto r = exec_.template run_round<result<void>>(
        exec_.all_members(), false,
        std::chrono::duration_cast<std::chrono::nanoseconds>(opts_.member_timeout),
        detail::make_split_call(
            [args](std::size_t i) -> std::optional<store_request> {
              if (!args->token_for(i).is_issuable()) return std::nullopt;
              return store_request{store_op::release,  args->key, args->owner,
                                   args->token_for(i), {},        {}};
            },
            [args](std::size_t i, Store& s) -> result<void> {
              if (!args->token_for(i).is_issuable()) return errc::not_holder;
              return s.release(args->key, args->owner, args->token_for(i));
            }),
        [w](const std::vector<std::optional<result<void>>>& on_time, std::size_t) {
          std::size_t released = 0;
          for (const auto& x : on_time) released += (x && *x) ? 1 : 0;
          return released >= w;
        });
    detail::report_members(opts_.observer, lease_operation::release, *args, r.on_time);
    std::size_t released = 0, not_holder = 0;
    for (const auto& x : r.on_time) {
      if (!x) continue;
      if (*x) {
        ++released;
      } else if (x->error() == errc::not_holder) {
        ++not_holder;
      }
    }
    // Once some member released (owner, token), the quorum grant existed: a member that did not
    // release it may still hold this owner's lease under a token of its own (its acquire reply
    // was lost, its raise failed). Ask it again with the same owner and release what it holds,
    // so that releasing leaves nothing of the caller's behind (issue 22). Not when nobody
    // released: a release with a wrong token must change nothing (T3), nor the owner's live grant.
    const detail::fan_out<Store, Clock>* exec = &exec_;  // outlives every clean-up
    const detail::kept_grant keep =
        book_.live(key, owner, [](time_point, std::chrono::milliseconds) { return true; });
    if (released > 0 && opts_.give_back_unsure) {
      exec_.finalize(r.round, [exec, args, keep](std::size_t i, result<void>& x) {
        if (!x && x.error() != errc::invalid_argument) {
          detail::reclaim(exec->member(i), *args, keep.at(i));
        }
      });
      for (std::size_t i = 0; i < r.on_time.size(); ++i) {
        const auto& x = r.on_time[i];
        if (x && !*x && x->error() != errc::invalid_argument) {
          detail::reclaim_in_background(exec_, i, args, keep.at(i));
        }
      }
    } else {
      exec_.finalize(r.round, nullptr);
    }
    const std::size_t unknown = exec_.size() - released - not_holder;
    if (released >= w) {
      forget_naive(*args);
      return {};
    }
    if (released + unknown < w) {
      forget_naive(*args);
      return errc::not_holder;
    }
    exec_.rethrow_member_exception(r.round);
    return errc::store_unavailable;
  }

  /// Returns the lease W members agree on for `key` (owner and token), with `remaining` the time
  /// until fewer than W of them still hold it; nullopt if no holder can have W members.
  /// \returns errc::store_unavailable if too few members answered to tell;
  ///   errc::invalid_argument for an empty key or a bad configuration.
  /// Available only when Store has inspect().
  template <class S = Store, std::enable_if_t<has_inspect_v<S>, int> = 0>
  result<std::optional<lease_record>> inspect(std::string_view key) const {
    if (key.empty()) return errc::invalid_argument;
    if (config_error_) return config_error_;
    auto args = detail::make_quorum_args(key, std::string_view{}, fencing_token{},
                                         std::chrono::milliseconds::zero());
    using R = result<std::optional<lease_record>>;
    const std::size_t w = write_quorum_;
    auto r = exec_.template run_round<R>(
        exec_.all_members(), false,
        std::chrono::duration_cast<std::chrono::nanoseconds>(opts_.member_timeout),
        detail::make_split_call(
            [args](std::size_t) -> std::optional<store_request> {
              return store_request{store_op::inspect, args->key, {}, {}, {}, {}};
            },
            [args](std::size_t, Store& s) -> R { return s.inspect(args->key); }),
        [w](const std::vector<std::optional<R>>& on_time, std::size_t outstanding) {
          const std::pair<std::size_t, std::size_t> top = detail::best_agreement(on_time);
          return top.first >= w || top.first + outstanding < w;
        });
    exec_.finalize(r.round, nullptr);
    const std::pair<std::size_t, std::size_t> top = detail::best_agreement(r.on_time);
    if (top.first >= w) {
      const lease_record& rec = *r.on_time[top.second]->value();
      std::vector<std::chrono::milliseconds> left;
      for (const auto& x : r.on_time) {
        if (x && *x && x->value() && detail::same_holder(*x->value(), rec)) {
          left.push_back(x->value()->remaining);
        }
      }
      std::sort(left.begin(), left.end(), std::greater<>());
      lease_record out = rec;
      out.remaining = left[w - 1];
      return std::optional<lease_record>{std::move(out)};
    }
    std::size_t answered = 0;
    for (const auto& x : r.on_time) answered += (x && *x) ? 1 : 0;
    if (top.first + (exec_.size() - answered) >= w) {
      exec_.rethrow_member_exception(r.round);
      return errc::store_unavailable;
    }
    return std::optional<lease_record>{};
  }

  /// Lifts every member's counter to at least `floor`, so every later grant of any key carries a
  /// token greater than `floor`. Use it after tokens regressed (a member restarted empty): pass
  /// the newest token your fence admitted, then acquire again. Available only when Store has
  /// raise_token_floor(). \returns success once W members raised; errc::invalid_argument if
  /// `floor` is not issuable or the configuration is bad; errc::store_unavailable otherwise.
  template <class S = Store, std::enable_if_t<has_raise_token_floor_v<S>, int> = 0>
  result<void> raise_token_floor(fencing_token floor) {
    if (!floor.is_issuable()) return errc::invalid_argument;
    if (config_error_) return config_error_;
    const std::size_t w = write_quorum_;
    auto r = exec_.template run_round<result<void>>(
        exec_.all_members(), false,
        std::chrono::duration_cast<std::chrono::nanoseconds>(opts_.member_timeout),
        detail::make_split_call(
            [floor](std::size_t) -> std::optional<store_request> {
              return store_request{store_op::raise_token_floor, {}, {}, floor, {}, {}};
            },
            [floor](std::size_t, Store& s) { return s.raise_token_floor(floor); }),
        [w](const std::vector<std::optional<result<void>>>& on_time, std::size_t outstanding) {
          std::size_t ok = 0;
          for (const auto& x : on_time) ok += (x && *x) ? 1 : 0;
          return outstanding == 0 || ok + outstanding < w;
        });
    exec_.finalize(r.round, nullptr);
    std::size_t ok = 0;
    for (const auto& x : r.on_time) ok += (x && *x) ? 1 : 0;
    if (ok >= w) return {};
    exec_.rethrow_member_exception(r.round);
    return errc::store_unavailable;
  }

 private:
  using time_point = typename Clock::time_point;

  // Redlock's validity rule on the quorum's clock (detail/quorum_round.hpp).
  bool validity_left(time_point start, std::chrono::milliseconds applied) const {
    return detail::quorum_validity_left(exec_.clock(), opts_.validity, start, applied);
  }

  // The tokens to send each member for an operation on (key, owner, token): none to remember
  // (empty: `token` everywhere), except under naive_max, where each member holds its own token.
  std::vector<fencing_token> naive_member_tokens(std::string_view key, std::string_view owner,
                                                 fencing_token token) const {
    if (opts_.token_mode != quorum_token_mode::naive_max) return {};
    return naive_.member_tokens(key, owner, token);
  }

  void forget_naive(const detail::quorum_args& a) {
    if (opts_.token_mode == quorum_token_mode::naive_max) naive_.forget(a);
  }

  quorum_options opts_;
  std::error_code config_error_;
  std::size_t write_quorum_ = 1;
  detail::naive_max_book naive_;                                  // naive_max only
  detail::reported_book<time_point> book_{opts_.member_timeout};  // quorum_book.hpp
  // Last: its workers are joined first, while everything a late clean-up uses still exists.
  detail::fan_out<Store, Clock> exec_;
};

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_QUORUM_HPP
