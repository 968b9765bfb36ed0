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
//   granted G2 later, so t_m(G2) > T1, and T2 >= t_m(G2) > T1.
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
// instead of from the end. (Reporting the remainder would make lease::renew(), which renews by the
// last granted TTL, shrink the TTL on every renewal.) Raw users do the same with valid_until().
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
// quorum_dispatch::automatic (default) picks by what the members can do (send_receive.hpp):
//
//   members                          | requests go out                    | hand-offs per round
//   ---------------------------------+------------------------------------+--------------------
//   send/receive (redis_store)       | all from the caller's thread       | none (faults: some)
//                                    | (send), replies taken as they come |
//                                    | from one poll() over every socket  |
//   in-process (completes_inline:    | called in turn, in the caller's    | none
//   memory_store)                    | thread, as sequential              |
//   anything else                    | one worker thread per member       | two per member
//
// Under the split dispatch each member still has its worker: it takes a request the caller's
// thread cannot start without blocking (the member is not connected yet, or busy with another
// caller's request; the caller then polls a pipe the worker signals, alongside the sockets) and
// reads the replies still in flight when the caller stops waiting, so late replies are handled
// exactly as under threads.
// quorum_dispatch::threads: one small worker thread per member, started by the constructor; a
// member is only ever called from its own worker (or, split, from a caller's thread holding the
// member's claim), so a member needs no locking of its own. The caller waits in real time, at most
// the per-member timeout: for try_acquire's first round until every member answered (Redlock's
// rule) unless failure is already certain, for the other rounds only until the outcome is
// decided. Replies still in flight are handled when they arrive: a late grant is raised to T when
// the quorum succeeded, else released.
// quorum_dispatch::sequential calls the members one after another in the caller's thread and treats
// a reply that took longer than the per-member timeout (on the quorum's clock) as lost, giving back
// a late grant at once: deterministic, for manual_clock tests and the simulator. The workers,
// rounds and late-reply handling are the fan-out executor, detail/fan_out.hpp; this file is the
// protocol over it.
#ifndef HOLDFAST_QUORUM_HPP
#define HOLDFAST_QUORUM_HPP

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

#include "holdfast/clock.hpp"
#include "holdfast/detail/config.hpp"
#include "holdfast/detail/fan_out.hpp"
#include "holdfast/detail/saturating.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/observer.hpp"
#include "holdfast/result.hpp"
#include "holdfast/send_receive.hpp"
#include "holdfast/store.hpp"
#include "holdfast/validity.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

namespace detail {

template <class S, class = void>
struct has_raise_token : std::false_type {};
template <class S>
struct has_raise_token<S, std::void_t<decltype(std::declval<S&>().raise_token(
                              std::declval<std::string_view>(), std::declval<std::string_view>(),
                              std::declval<fencing_token>(), std::declval<fencing_token>()))>>
    : std::is_convertible<decltype(std::declval<S&>().raise_token(
                              std::declval<std::string_view>(), std::declval<std::string_view>(),
                              std::declval<fencing_token>(), std::declval<fencing_token>())),
                          result<void>> {};

template <class S, class = void>
struct has_raise_token_floor : std::false_type {};
template <class S>
struct has_raise_token_floor<
    S, std::void_t<decltype(std::declval<S&>().raise_token_floor(std::declval<fencing_token>()))>>
    : std::is_convertible<decltype(std::declval<S&>().raise_token_floor(
                              std::declval<fencing_token>())),
                          result<void>> {};

}  // namespace detail

/// True iff S provides the token-floor capability quorum_store needs from its members:
/// `result<void> raise_token(std::string_view key, std::string_view owner, fencing_token token,
/// fencing_token to)`, which, atomically and only while `owner` holds the live lease on `key` with
/// `token` (or already `to`), re-labels that lease with `to` and lifts the store's counter to >=
/// `to` (errc::lease_lost otherwise). memory_store provides it.
template <class S>
inline constexpr bool has_raise_token_v = detail::has_raise_token<S>::value;

#if HOLDFAST_HAS_CONCEPTS
/// A store a quorum_store can be made of: a LeaseStore with the token-floor capability
/// `result<void> raise_token(key, owner, token, to)` (see has_raise_token_v), as a
/// requires-expression: it constrains quorum_store.
template <class S>
concept quorum_member = lease_store<S>&& requires(S& s, std::string_view key,
                                                  std::string_view owner, fencing_token token,
                                                  fencing_token to) {
  { s.raise_token(key, owner, token, to) } -> std::convertible_to<result<void>>;
};
#endif

/// True iff S provides `result<void> raise_token_floor(fencing_token floor)`, which lifts the
/// store's counter to >= `floor` unconditionally (recovery after a regression).
template <class S>
inline constexpr bool has_raise_token_floor_v = detail::has_raise_token_floor<S>::value;

/// How quorum_store reaches its members (see "Dispatch" in quorum.hpp).
enum class quorum_dispatch {
  /// The default: requests in flight together from the caller's thread when the members have
  /// the send/receive capability, direct calls for in-process members (completes_inline), else
  /// threads.
  automatic,
  threads,     ///< One worker thread per member, requests in flight together.
  sequential,  ///< One member after another in the caller's thread: deterministic, for tests.
};

/// How quorum_store forms its fencing token.
enum class quorum_token_mode {
  /// The token floor: the max of the granting members' tokens, raised onto W members before the
  /// grant is reported. Strictly monotonic per key (see the proof in quorum.hpp). The default.
  floor,
  /// NEGATIVE CONTROL ONLY: the max of the granting members' tokens and nothing else. Tokens can
  /// go backwards when majorities differ; it exists so tests can show the checker catches that.
  /// Remembers each grant's member tokens in the quorum_store until release (renew and release
  /// need them), so an unreleased grant is never forgotten.
  naive_max,
};

/// Returns the write quorum W for `members` members tolerating `empty_restarts` members that
/// restart without their counter between two grants of a key: floor((members + empty_restarts)
/// / 2) + 1. With empty_restarts = 0 that is a strict majority. May exceed `members` (then no
/// configuration can satisfy the request; quorum_options::check reports it).
[[nodiscard]] constexpr std::size_t write_quorum(std::size_t members,
                                                 std::size_t empty_restarts) noexcept {
  return (members + empty_restarts) / 2 + 1;
}

/// Options for quorum_store.
struct quorum_options {
  /// Longest wait for one member's reply in one round, in ms (> 0). For try_acquire and renew the
  /// wait is further capped at member_timeout_share of the TTL. Default 50 ms (Redlock suggests
  /// 5-50 ms for a 10 s TTL). Under quorum_dispatch::threads, and automatic over members with
  /// send/receive, this is real time; under sequential, and automatic over in-process members
  /// (called directly), it is measured on the quorum's clock (a reply slower than it counts as
  /// lost and a late grant is given back at once).
  std::chrono::milliseconds member_timeout{50};
  /// Cap on the per-member wait as a share of the TTL, in (0, 1]. Default 0.1.
  double member_timeout_share = 0.1;
  /// Drift bound and margin of the validity check (Redlock's rule). Default 1% and 2 ms.
  validity_options validity{};
  /// How many members may restart *empty* (without their counter) between two grants of a key
  /// while tokens stay strictly monotonic; sets W = write_quorum(N, empty_restarts). Default 0:
  /// W is a strict majority, and members must persist their counters (see the table above).
  std::size_t empty_restarts = 0;
  /// automatic (default), threads or sequential; see quorum_dispatch.
  quorum_dispatch dispatch = quorum_dispatch::automatic;
  /// floor (default) or the naive_max negative control.
  quorum_token_mode token_mode = quorum_token_mode::floor;
  /// Most requests a member's worker may have queued; beyond it the member counts as unavailable
  /// for that request (a member that hangs must not make memory grow). Default 1024, >= 1.
  std::size_t max_queued = 1024;
  /// Told of each member's answer in each round (lease_event_kind::quorum_member: operation,
  /// member index, outcome; answered = false if the member had not answered when the round was
  /// decided or its wait ran out), on
  /// the calling thread once the round is decided, with no lock held (observer.hpp). Must outlive
  /// the quorum. Default: none.
  lease_observer* observer = nullptr;

  /// Returns errc::invalid_argument unless `members` is odd, the write quorum fits in `members`,
  /// member_timeout is in (0, max_ttl], member_timeout_share is in (0, 1], max_queued >= 1 and
  /// validity.check() is clean; a zero error code otherwise.
  [[nodiscard]] std::error_code check(std::size_t members) const noexcept {
    if (members == 0 || members % 2 == 0) return errc::invalid_argument;
    if (empty_restarts >= members || write_quorum(members, empty_restarts) > members) {
      return errc::invalid_argument;
    }
    if (member_timeout <= std::chrono::milliseconds::zero() || member_timeout > max_ttl) {
      return errc::invalid_argument;
    }
    if (!(member_timeout_share > 0.0 && member_timeout_share <= 1.0)) {
      return errc::invalid_argument;
    }
    if (max_queued == 0) return errc::invalid_argument;
    return validity.check();
  }
};

namespace detail {

// Copies of an operation's arguments that outlive the caller (a late reply may need them).
struct quorum_args {
  std::string key;
  std::string owner;
  fencing_token token;
  std::chrono::milliseconds ttl{0};
};

}  // namespace detail

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
    for (std::size_t i = 0; i < m.size() && !config_error_; ++i) {
      if (m[i] == nullptr) config_error_ = errc::invalid_argument;
      for (std::size_t j = 0; j < i && !config_error_; ++j) {
        if (m[j] == m[i]) config_error_ = errc::invalid_argument;
      }
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
  /// Returns the number of members N.
  [[nodiscard]] std::size_t size() const noexcept { return exec_.size(); }
  /// Returns W, how many members must grant, renew or have released a lease (see empty_restarts).
  [[nodiscard]] std::size_t quorum() const noexcept { return write_quorum_; }
  /// Returns the options in use.
  [[nodiscard]] const quorum_options& options() const noexcept { return opts_; }

  /// Acquires `key` for `owner` for `ttl` (ms) on W members with one fencing token (the token
  /// floor), asking every member concurrently. Re-acquiring one's own live lease returns the same
  /// token while the members that grant it still hold it under that token; after a member lost
  /// the lease (restart, expiry) it may return a greater one, which only fences this owner's own
  /// older writes.
  /// \returns the grant {T, the smallest TTL the W members applied};
  ///   errc::busy if fewer than W granted and no more than N - W members failed (contention);
  ///   errc::store_unavailable if more than N - W members failed (an error, or no reply within
  ///     the per-member timeout), or the raise round left fewer than W members holding T;
  ///   errc::token_exhausted if too many members' counters are exhausted to form W;
  ///   errc::timeout if W granted but no validity was left (or the quorum's clock went backwards);
  ///   errc::invalid_argument (see check_acquire_args and check()).
  /// In every failure case whatever was granted is released (Redlock's rule: nothing is kept from
  /// a failed attempt, so a failed re-acquire of one's own lease gives that lease up too).
  result<grant> try_acquire(std::string_view key, std::string_view owner,
                            std::chrono::milliseconds ttl) {
    if (std::error_code ec = check_acquire_args(key, owner, ttl)) return ec;
    if (config_error_) return config_error_;
    const time_point start = exec_.clock().now();
    const args_ptr args = make_args(key, owner, fencing_token{}, ttl);
    const std::chrono::nanoseconds wait = member_wait(ttl);
    acquire_attempt a = tally(args, wait);
    if (a.granted >= write_quorum_) raise(a, args, wait);
    errc failure = refusal(a);
    if (a.granted >= write_quorum_ && a.holding >= write_quorum_) {
      // Sequential: late grants are given back now, inline, so that no member call (and no time)
      // passes between the validity check and the report. (Threads: they join below, on their
      // workers, without delaying the caller.)
      if (exec_.sequential()) {
        exec_.finalize(a.r1.round, [this, args](std::size_t i, result<grant>& r) {
          if (r && r->token.is_issuable()) {
            (void)exec_.member(i).release(args->key, args->owner, r->token);
          }
        });
      }
      const std::chrono::milliseconds applied = applied_ttl(a, ttl);
      if (!validity_left(start, applied)) {
        failure = errc::timeout;
      } else {
        if (opts_.token_mode == quorum_token_mode::naive_max) remember_naive(args, a.top, a.held);
        join_late_grants(a, args);
        return grant{a.top, applied};
      }
    }
    give_back(a, args);
    exec_.rethrow_member_exception(a.r1.round);
    if (a.r2) exec_.rethrow_member_exception(a.r2);
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
    auto args = make_args(key, owner, token, ttl);
    const std::vector<fencing_token> tokens = member_tokens(*args);
    const std::size_t w = write_quorum_;
    auto r = exec_.template run_round<result<grant>>(
        exec_.all_members(), true, member_wait(ttl),
        detail::make_split_call(
            [args, tokens](std::size_t i) -> std::optional<store_request> {
              if (!tokens[i].is_issuable()) return std::nullopt;
              return store_request{store_op::renew, args->key, args->owner,
                                   tokens[i],       {},        args->ttl};
            },
            [args, tokens](std::size_t i, Store& s) -> result<grant> {
              if (!tokens[i].is_issuable()) return errc::lease_lost;
              return s.renew(args->key, args->owner, tokens[i], args->ttl);
            }),
        [w](const std::vector<std::optional<result<grant>>>& on_time, std::size_t outstanding) {
          std::size_t ok = 0;
          for (const auto& x : on_time) ok += (x && *x) ? 1 : 0;
          return ok >= w || ok + outstanding < w;
        });
    exec_.finalize(r.round, nullptr);
    report_members(lease_operation::renew, *args, exec_.all_members(), r.on_time);
    std::size_t renewed = 0, lost = 0;
    std::chrono::milliseconds applied = ttl;
    for (std::size_t i = 0; i < r.on_time.size(); ++i) {
      const auto& x = r.on_time[i];
      if (!x) continue;
      // A renewal counts only if it carries the token it was asked to extend (T4: a member that
      // answers with another token is garbage, not a renewal) and a positive TTL.
      if (*x && (*x)->token == tokens[i] && (*x)->ttl > std::chrono::milliseconds::zero()) {
        ++renewed;
        if ((*x)->ttl < applied) applied = (*x)->ttl;
      } else if (!*x && x->error() == errc::lease_lost) {
        ++lost;
      }
    }
    if (renewed >= w) {
      if (!validity_left(start, applied)) return errc::timeout;
      return grant{token, applied};
    }
    exec_.rethrow_member_exception(r.round);
    if (lost > exec_.size() - w) return errc::lease_lost;
    return errc::store_unavailable;
  }

  /// Releases the lease on `key` held by `owner` with `token` on every member.
  /// \returns success once W members released it (any others expire by TTL);
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
    auto args = make_args(key, owner, token, std::chrono::milliseconds::zero());
    const std::vector<fencing_token> tokens = member_tokens(*args);
    const std::size_t w = write_quorum_;
    auto r = exec_.template run_round<result<void>>(
        exec_.all_members(), false,
        std::chrono::duration_cast<std::chrono::nanoseconds>(opts_.member_timeout),
        detail::make_split_call(
            [args, tokens](std::size_t i) -> std::optional<store_request> {
              if (!tokens[i].is_issuable()) return std::nullopt;
              return store_request{store_op::release, args->key, args->owner, tokens[i], {}, {}};
            },
            [args, tokens](std::size_t i, Store& s) -> result<void> {
              if (!tokens[i].is_issuable()) return errc::not_holder;
              return s.release(args->key, args->owner, tokens[i]);
            }),
        [w](const std::vector<std::optional<result<void>>>& on_time, std::size_t) {
          std::size_t released = 0;
          for (const auto& x : on_time) released += (x && *x) ? 1 : 0;
          return released >= w;
        });
    exec_.finalize(r.round, nullptr);
    report_members(lease_operation::release, *args, exec_.all_members(), r.on_time);
    std::size_t released = 0, not_holder = 0;
    for (const auto& x : r.on_time) {
      if (!x) continue;
      if (*x) {
        ++released;
      } else if (x->error() == errc::not_holder) {
        ++not_holder;
      }
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
    auto args =
        make_args(key, std::string_view{}, fencing_token{}, std::chrono::milliseconds::zero());
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
          const std::pair<std::size_t, std::size_t> top = best_agreement(on_time);
          return top.first >= w || top.first + outstanding < w;
        });
    exec_.finalize(r.round, nullptr);
    const std::pair<std::size_t, std::size_t> top = best_agreement(r.on_time);
    if (top.first >= w) {
      const lease_record& rec = *r.on_time[top.second]->value();
      std::vector<std::chrono::milliseconds> left;
      for (const auto& x : r.on_time) {
        if (x && *x && x->value() && same_holder(*x->value(), rec)) {
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
  using args_ptr = std::shared_ptr<const detail::quorum_args>;

  // try_acquire's state from round to round.
  struct acquire_attempt {
    detail::fan_out_reply<result<grant>> r1;             // round 1: try_acquire everywhere
    std::vector<std::optional<fencing_token>> held;      // the token each member granted on time
    std::size_t granted = 0, exhausted = 0, failed = 0;  // of round 1's replies
    fencing_token top{};                                 // the max of the granted tokens
    std::vector<char> holds_top;                         // members holding the lease under `top`
    std::size_t holding = 0;                             // how many
    std::shared_ptr<detail::fan_out_round<result<void>>> r2;  // round 2 (raise), if it ran
  };

  // try_acquire, round 1: asks every member and counts the answers. As in Redlock, every member's
  // reply is awaited (up to the per-member wait), not just the first W: the token is then the max
  // over every member that granted, and all of them get raised to it, so the members' counters
  // converge and a slower member with a higher counter is not left out for good. Only a certain
  // failure ends the wait early.
  acquire_attempt tally(const args_ptr& args, std::chrono::nanoseconds wait) {
    const std::size_t n = exec_.size();
    const std::size_t w = write_quorum_;
    acquire_attempt a;
    a.r1 = exec_.template run_round<result<grant>>(
        exec_.all_members(), true, wait,
        detail::make_split_call(
            [args](std::size_t) -> std::optional<store_request> {
              return store_request{
                  store_op::try_acquire, args->key, args->owner, {}, {}, args->ttl};
            },
            [args](std::size_t, Store& s) {
              return s.try_acquire(args->key, args->owner, args->ttl);
            }),
        [w](const std::vector<std::optional<result<grant>>>& on_time, std::size_t outstanding) {
          std::size_t granted = 0;
          for (const auto& r : on_time) granted += (r && *r && usable(**r)) ? 1 : 0;
          return granted + outstanding < w;
        });
    report_members(lease_operation::acquire, *args, exec_.all_members(), a.r1.on_time);
    a.held.resize(n);
    a.holds_top.assign(n, 0);
    a.failed = a.r1.unanswered;
    for (std::size_t i = 0; i < n; ++i) {
      const std::optional<result<grant>>& r = a.r1.on_time[i];
      if (!r) continue;
      if (*r && usable(**r)) {
        a.held[i] = (*r)->token;
        ++a.granted;
        if (a.top < (*r)->token) a.top = (*r)->token;
      } else if (*r) {
        // A malformed grant (token none/max, TTL <= 0): the member is failed; give back what it
        // may hold.
        if ((*r)->token.is_issuable()) release_in_background(i, args, (*r)->token);
        ++a.failed;
      } else if (r->error() == errc::busy) {
        // Contention: neither granted nor failed.
      } else if (r->error() == errc::token_exhausted) {
        ++a.exhausted;
        ++a.failed;
      } else {
        ++a.failed;
      }
    }
    return a;
  }

  // try_acquire, round 2 (once W granted): makes W members hold the lease under `top`. Members that
  // issued `top` themselves already do; if they are W, the rest are raised in the background
  // (fast path), otherwise the lagging members are raised now, decided once W hold `top`. Under
  // naive_max nothing is raised (the negative control).
  void raise(acquire_attempt& a, const args_ptr& args, std::chrono::nanoseconds wait) {
    const std::size_t n = exec_.size();
    const std::size_t w = write_quorum_;
    if (opts_.token_mode == quorum_token_mode::naive_max) {
      for (std::size_t i = 0; i < n; ++i) a.holds_top[i] = a.held[i] ? 1 : 0;
      a.holding = a.granted;
      return;
    }
    std::vector<std::size_t> lagging;
    for (std::size_t i = 0; i < n; ++i) {
      if (!a.held[i]) continue;
      if (*a.held[i] == a.top) {
        a.holds_top[i] = 1;
        ++a.holding;
      } else {
        lagging.push_back(i);
      }
    }
    if (a.holding >= w) {
      for (std::size_t i : lagging) raise_in_background(i, args, *a.held[i], a.top);
      return;
    }
    const std::size_t already = a.holding;
    auto round2 = exec_.template run_round<result<void>>(
        lagging, true, wait,
        detail::make_split_call(
            [args, held = a.held, top = a.top](std::size_t i) -> std::optional<store_request> {
              return store_request{
                  store_op::raise_token, args->key, args->owner, *held[i], top, {}};
            },
            [args, held = a.held, top = a.top](std::size_t i, Store& s) {
              return s.raise_token(args->key, args->owner, *held[i], top);
            }),
        [already, w](const std::vector<std::optional<result<void>>>& on_time,
                     std::size_t outstanding) {
          std::size_t ok = already;
          for (const auto& r : on_time) ok += (r && *r) ? 1 : 0;
          return ok >= w || ok + outstanding < w;
        });
    report_members(lease_operation::raise, *args, lagging, round2.on_time);
    for (std::size_t i : lagging) {
      if (round2.on_time[i] && *round2.on_time[i]) {
        a.holds_top[i] = 1;
        ++a.holding;
      }
    }
    a.r2 = round2.round;
    exec_.finalize(a.r2, nullptr);  // a late raise only adds a member holding `top`
  }

  // Why try_acquire fails if it does: too few grants are contention (busy) while no more than
  // N - W members failed, exhaustion when too many counters ran out, store_unavailable otherwise
  // (also when W granted but the raise left fewer than W holding `top`).
  errc refusal(const acquire_attempt& a) const {
    const std::size_t n = exec_.size();
    const std::size_t w = write_quorum_;
    if (a.granted >= w) return errc::store_unavailable;
    if (a.exhausted > n - w) return errc::token_exhausted;
    if (a.failed <= n - w) return errc::busy;  // enough members answered (or may yet)
    return errc::store_unavailable;
  }

  // The TTL the members holding `top` applied: the smallest, never more than asked. Validity is
  // judged by it (a member may grant less than was asked): judging by the requested TTL could
  // report a grant that already expired there.
  std::chrono::milliseconds applied_ttl(const acquire_attempt& a,
                                        std::chrono::milliseconds ttl) const {
    std::chrono::milliseconds applied = ttl;
    for (std::size_t i = 0; i < exec_.size(); ++i) {
      if (a.holds_top[i] && a.r1.on_time[i] && (*a.r1.on_time[i])->ttl < applied) {
        applied = (*a.r1.on_time[i])->ttl;
      }
    }
    return applied;
  }

  // Redlock's validity rule, shared by try_acquire and renew: some validity is left of a grant of
  // `applied` whose requests left at `start` (time elapsed on the quorum's clock, less drift and
  // margin). A clock that went backwards leaves none: elapsed time is then unknown.
  // The quorum's clock may read up to one tick behind true time (clock_tick), so elapsed time is
  // counted a tick longer (store.hpp, T2): now - start + tick < trusted_span(applied).
  bool validity_left(time_point start, std::chrono::milliseconds applied) const {
    const time_point now = exec_.clock().now();
    if (now < start) return false;
    const auto span =
        std::chrono::duration_cast<typename Clock::duration>(trusted_span(applied, opts_.validity));
    const auto elapsed = detail::saturating_sub(now, start);
    const auto tick = clock_tick(exec_.clock());
    return elapsed < span && tick < span - elapsed;
  }

  // After a reported grant: a late grant joins the lease (raised to `top`) or is given back.
  void join_late_grants(const acquire_attempt& a, const args_ptr& args) {
    exec_.finalize(a.r1.round, [this, args, top = a.top](std::size_t i, result<grant>& r) {
      if (!r || !r->token.is_issuable() || r->token == top) return;
      if (opts_.token_mode == quorum_token_mode::floor && r->token < top) {
        (void)exec_.member(i).raise_token(args->key, args->owner, r->token, top);
      } else {
        (void)exec_.member(i).release(args->key, args->owner, r->token);
      }
    });
  }

  // After a failed attempt: gives back every grant, on time or late, under whichever token it
  // carries now (`top` where a raise landed, the member's own otherwise). Redlock's rule: nothing
  // is kept from a failed attempt.
  void give_back(const acquire_attempt& a, const args_ptr& args) {
    exec_.finalize(
        a.r1.round,
        [this, args](std::size_t i, result<grant>& r) {
          if (r && r->token.is_issuable()) {
            (void)exec_.member(i).release(args->key, args->owner, r->token);
          }
        },
        true);
    std::vector<std::size_t> to_release;
    for (std::size_t i = 0; i < exec_.size(); ++i) {
      if (a.held[i]) to_release.push_back(i);
    }
    if (to_release.empty()) return;
    auto cleanup = exec_.template run_round<result<void>>(
        to_release, false,
        std::chrono::duration_cast<std::chrono::nanoseconds>(opts_.member_timeout),
        [args, held = a.held, top = a.top](std::size_t i, Store& s) -> result<void> {
          result<void> r = s.release(args->key, args->owner, top);
          if (!r && r.error() == errc::not_holder && *held[i] != top) {
            r = s.release(args->key, args->owner, *held[i]);
          }
          return r;
        },
        nullptr);
    exec_.finalize(cleanup.round, nullptr);
  }

  static bool usable(const grant& g) noexcept {
    return g.token.is_issuable() && g.ttl > std::chrono::milliseconds::zero();
  }

  static bool same_holder(const lease_record& a, const lease_record& b) {
    return a.token == b.token && a.owner == b.owner;
  }

  // Returns {votes, index} of the holder most members report (0 votes if none reports one).
  template <class R>
  static std::pair<std::size_t, std::size_t> best_agreement(
      const std::vector<std::optional<R>>& v) {
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

  static args_ptr make_args(std::string_view key, std::string_view owner, fencing_token token,
                            std::chrono::milliseconds ttl) {
    return std::make_shared<const detail::quorum_args>(
        detail::quorum_args{std::string(key), std::string(owner), token, ttl});
  }

  // The per-member wait of an acquire or renew of `ttl`: min(member_timeout, share * ttl).
  std::chrono::nanoseconds member_wait(std::chrono::milliseconds ttl) const {
    const auto cap = std::chrono::duration_cast<std::chrono::nanoseconds>(opts_.member_timeout);
    const auto share = std::chrono::nanoseconds(
        static_cast<std::int64_t>(static_cast<long double>(std::chrono::nanoseconds(ttl).count()) *
                                  opts_.member_timeout_share));
    const auto wait = share < cap ? share : cap;
    return wait > std::chrono::nanoseconds::zero() ? wait : std::chrono::nanoseconds(1);
  }

  void raise_in_background(std::size_t i, const args_ptr& args, fencing_token from,
                           fencing_token to) const {
    Store* member = &exec_.member(i);
    exec_.in_member_context(i, [member, args, from, to] {
      HOLDFAST_TRY {
        (void)member->raise_token(args->key, args->owner, from, to);
      }
      HOLDFAST_CATCH_ALL {}
    });
  }

  void release_in_background(std::size_t i, const args_ptr& args, fencing_token token) const {
    Store* member = &exec_.member(i);
    exec_.in_member_context(i, [member, args, token] {
      HOLDFAST_TRY {
        (void)member->release(args->key, args->owner, token);
      }
      HOLDFAST_CATCH_ALL {}
    });
  }

  // Tells opts_.observer each target's answer in a round of `op` (no-op without an observer).
  // Called on the caller's thread after the round, with no lock held.
  template <class R>
  void report_members(lease_operation op, const detail::quorum_args& a,
                      const std::vector<std::size_t>& targets,
                      const std::vector<std::optional<R>>& on_time) const {
    if (opts_.observer == nullptr) return;
    for (std::size_t i : targets) {
      lease_event e;
      e.kind = lease_event_kind::quorum_member;
      e.key = a.key;
      e.owner = a.owner;
      e.token = a.token;
      e.operation = op;
      e.member = i;
      const std::optional<R>& x = on_time[i];
      e.answered = x.has_value();
      if (!x) {
        // Not answered before the round was decided or its wait ran out: error stays zero.
      } else if (!*x) {
        e.error = x->error();
      } else if constexpr (std::is_same_v<R, result<grant>>) {
        e.token = (*x)->token;
      }
      detail::notify(opts_.observer, e);
    }
  }

  // The token to send each member for an operation on (key, owner, token): `token` everywhere,
  // except under naive_max, where each member holds its own token.
  std::vector<fencing_token> member_tokens(const detail::quorum_args& a) const {
    std::vector<fencing_token> v(exec_.size(), a.token);
    if (opts_.token_mode != quorum_token_mode::naive_max) return v;
    std::lock_guard<std::mutex> lock(naive_mutex_);
    auto it = naive_.find(std::make_pair(a.key, a.owner));
    if (it == naive_.end() || it->second.first != a.token) return v;
    return it->second.second;
  }

  void remember_naive(const args_ptr& a, fencing_token top,
                      const std::vector<std::optional<fencing_token>>& held) {
    std::vector<fencing_token> v(held.size());
    for (std::size_t i = 0; i < held.size(); ++i) v[i] = held[i] ? *held[i] : fencing_token{};
    std::lock_guard<std::mutex> lock(naive_mutex_);
    naive_[std::make_pair(a->key, a->owner)] = std::make_pair(top, std::move(v));
  }

  void forget_naive(const detail::quorum_args& a) {
    if (opts_.token_mode != quorum_token_mode::naive_max) return;
    std::lock_guard<std::mutex> lock(naive_mutex_);
    auto it = naive_.find(std::make_pair(a.key, a.owner));
    if (it != naive_.end() && it->second.first == a.token) naive_.erase(it);
  }

  quorum_options opts_;
  std::error_code config_error_;
  std::size_t write_quorum_ = 1;
  // naive_max only: (key, owner) -> (quorum token, each member's own token).
  mutable std::mutex naive_mutex_;
  std::map<std::pair<std::string, std::string>,
           std::pair<fencing_token, std::vector<fencing_token>>>
      naive_;
  // Last: its workers are joined first, while everything a late clean-up uses still exists.
  detail::fan_out<Store, Clock> exec_;
};

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_QUORUM_HPP
