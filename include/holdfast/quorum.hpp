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
// quorum_dispatch::threads (default): one small worker thread per member, started by the
// constructor; a member is only ever called from its own worker, so a member needs no locking of
// its own. The caller waits in real time, at most the per-member timeout: for try_acquire's first
// round until every member answered (Redlock's rule) unless failure is already certain, for the
// other rounds only until the outcome is decided. Replies still in flight are handled when they
// arrive: a late grant is raised to T when the quorum succeeded, else released.
// quorum_dispatch::sequential calls the members one after another in the caller's thread and treats
// a reply that took longer than the per-member timeout (on the quorum's clock) as lost, giving back
// a late grant at once: deterministic, for manual_clock tests and the simulator.
#ifndef HOLDFAST_QUORUM_HPP
#define HOLDFAST_QUORUM_HPP

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "holdfast/clock.hpp"
#include "holdfast/detail/config.hpp"
#include "holdfast/detail/saturating.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/result.hpp"
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

/// True iff S provides `result<void> raise_token_floor(fencing_token floor)`, which lifts the
/// store's counter to >= `floor` unconditionally (recovery after a regression).
template <class S>
inline constexpr bool has_raise_token_floor_v = detail::has_raise_token_floor<S>::value;

/// How quorum_store reaches its members (see "Dispatch" in quorum.hpp).
enum class quorum_dispatch {
  threads,     ///< One worker thread per member, requests in flight together (the default).
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
  /// 5-50 ms for a 10 s TTL). Under quorum_dispatch::threads this is real time; under sequential
  /// it is measured on the quorum's clock.
  std::chrono::milliseconds member_timeout{50};
  /// Cap on the per-member wait as a share of the TTL, in (0, 1]. Default 0.1.
  double member_timeout_share = 0.1;
  /// Drift bound and margin of the validity check (Redlock's rule). Default 1% and 2 ms.
  validity_options validity{};
  /// How many members may restart *empty* (without their counter) between two grants of a key
  /// while tokens stay strictly monotonic; sets W = write_quorum(N, empty_restarts). Default 0:
  /// W is a strict majority, and members must persist their counters (see the table above).
  std::size_t empty_restarts = 0;
  /// Threads (default) or sequential; see quorum_dispatch.
  quorum_dispatch dispatch = quorum_dispatch::threads;
  /// floor (default) or the naive_max negative control.
  quorum_token_mode token_mode = quorum_token_mode::floor;
  /// Most requests a member's worker may have queued; beyond it the member counts as unavailable
  /// for that request (a member that hangs must not make memory grow). Default 1024, >= 1.
  std::size_t max_queued = 1024;

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

// One worker thread serving one member, FIFO. Tasks never throw (the quorum wraps them).
class quorum_worker {
 public:
  explicit quorum_worker(std::size_t max_queued)
      : max_queued_(max_queued), thread_([this] { run(); }) {}
  quorum_worker(const quorum_worker&) = delete;
  quorum_worker& operator=(const quorum_worker&) = delete;

  // Finishes every queued task (releases and clean-ups among them), then joins.
  ~quorum_worker() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }

  // Queues `task`; false if the queue is full (the member is not keeping up).
  bool post(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (queue_.size() >= max_queued_) return false;
      queue_.push_back(std::move(task));
    }
    cv_.notify_one();
    return true;
  }

 private:
  void run() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      task();
    }
  }

  std::size_t max_queued_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  std::thread thread_;  // last: starts once everything it uses exists
};

// What one round of requests knows about one member.
enum class quorum_slot : unsigned char {
  idle,     // not asked in this round
  pending,  // asked, no reply yet
  on_time,  // replied before the caller stopped waiting
  late,     // replied after the caller stopped waiting, before the outcome was final
  done,     // late reply handed to the clean-up (or never needing one)
  skipped,  // never sent: queue full, or abandoned before it started
};

// One round of requests, shared between the caller and the members' workers (a late reply may
// arrive after the caller has returned).
template <class R>
struct quorum_round {
  using late_fn = std::function<void(std::size_t, R&)>;
  using replies = std::vector<std::optional<R>>;
  // Whether the outcome is known from the replies in so far and the number still outstanding.
  using decided_fn = std::function<bool(const replies&, std::size_t)>;

  explicit quorum_round(std::size_t n) : state(n, quorum_slot::idle), reply(n), on_time(n) {}

  // The caller needs waking: every reply is in, or the ones in decide the outcome. Evaluated by
  // the worker that files a reply, so the caller wakes once per round, not once per reply.
  bool ready() const { return outstanding == 0 || (decided && decided(on_time, outstanding)); }

  std::mutex mutex;
  std::condition_variable cv;
  std::vector<quorum_slot> state;
  replies reply;    // every reply, on time or late
  replies on_time;  // the replies that came while the caller waited
  decided_fn decided;
  std::size_t outstanding = 0;  // pending slots
  bool abandoned = false;       // the caller stopped waiting
  bool finalized = false;       // the outcome is known; late replies go to on_late
  bool skip_unstarted = false;  // once abandoned, requests not yet started are not sent
  late_fn on_late;
#if HOLDFAST_HAS_EXCEPTIONS
  std::exception_ptr exception;  // the first exception a member threw
#endif
};

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
/// quorum_dispatch::threads each member store is called only from its own worker thread; under
/// sequential the members are called from the callers' threads and must be thread-safe if the
/// quorum is shared. The destructor waits for queued clean-ups (releases) to finish.
template <class Store, class Clock = steady_clock>
class quorum_store {
  static_assert(assert_lease_store<Store>(),
                "holdfast::quorum_store<Store>: Store must model LeaseStore");
  static_assert(
      has_raise_token_v<Store>,
      "holdfast::quorum_store<Store>: Store lacks `result<void> raise_token(std::string_view "
      "key, std::string_view owner, fencing_token token, fencing_token to)`, the "
      "token-floor capability that keeps quorum tokens monotonic (see quorum.hpp)");
  static_assert(is_ttl_clock_v<Clock>,
                "holdfast::quorum_store<Store, Clock>: Clock must model ttl_clock");

 public:
  using store_type = Store;
  using clock_type = Clock;

  /// Makes a quorum over `members` (not owned; distinct, non-null, an odd number of them) with
  /// `opts`, measuring validity on `clock`. Under quorum_dispatch::threads it starts one worker
  /// thread per member. A bad configuration is not an exception: check() reports it and every
  /// operation returns errc::invalid_argument. std::thread's own failure to start propagates
  /// (std::system_error; it aborts under -fno-exceptions).
  explicit quorum_store(std::vector<Store*> members, quorum_options opts = {},
                        Clock clock = Clock{})
      : members_(std::move(members)), opts_(opts), clock_(std::move(clock)) {
    config_error_ = opts_.check(members_.size());
    for (std::size_t i = 0; i < members_.size() && !config_error_; ++i) {
      if (members_[i] == nullptr) config_error_ = errc::invalid_argument;
      for (std::size_t j = 0; j < i && !config_error_; ++j) {
        if (members_[j] == members_[i]) config_error_ = errc::invalid_argument;
      }
    }
    write_quorum_ = write_quorum(members_.size(), opts_.empty_restarts);
    if (!config_error_ && opts_.dispatch == quorum_dispatch::threads) {
      workers_.reserve(members_.size());
      for (std::size_t i = 0; i < members_.size(); ++i) {
        workers_.push_back(std::make_unique<detail::quorum_worker>(opts_.max_queued));
      }
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
  [[nodiscard]] std::size_t size() const noexcept { return members_.size(); }
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
    const time_point start = clock_.now();
    auto args = make_args(key, owner, fencing_token{}, ttl);
    const std::chrono::nanoseconds wait = member_wait(ttl);
    const std::size_t n = members_.size();
    const std::size_t w = write_quorum_;

    // Round 1: try_acquire everywhere. As in Redlock, every member's reply is awaited (up to the
    // per-member wait), not just the first W: the token is then the max over every member that
    // granted, and all of them get raised to it, so the members' counters converge and a slower
    // member with a higher counter is not left out for good. Only a certain failure ends it early.
    auto r1 = run_round<result<grant>>(
        all_members(), true, wait,
        [args](std::size_t, Store& s) { return s.try_acquire(args->key, args->owner, args->ttl); },
        [w](const std::vector<std::optional<result<grant>>>& on_time, std::size_t outstanding) {
          std::size_t granted = 0;
          for (const auto& r : on_time) granted += (r && *r && usable(**r)) ? 1 : 0;
          return granted + outstanding < w;
        });
    std::vector<std::optional<fencing_token>> held(n);  // the token each member granted on time
    std::size_t granted = 0, exhausted = 0, failed = r1.unanswered;
    fencing_token top{};
    std::chrono::milliseconds applied = ttl;
    for (std::size_t i = 0; i < n; ++i) {
      const std::optional<result<grant>>& r = r1.on_time[i];
      if (!r) continue;
      if (*r && usable(**r)) {
        held[i] = (*r)->token;
        ++granted;
        if (top < (*r)->token) top = (*r)->token;
      } else if (*r) {
        // A malformed grant (token none/max, TTL <= 0): the member is failed; give back what it
        // may hold.
        if ((*r)->token.is_issuable()) release_in_background(i, args, (*r)->token);
        ++failed;
      } else if (r->error() == errc::busy) {
        // Contention: neither granted nor failed.
      } else if (r->error() == errc::token_exhausted) {
        ++exhausted;
        ++failed;
      } else {
        ++failed;
      }
    }

    std::vector<char> holds_top(n, 0);  // members holding the lease under `top`
    std::size_t holding = 0;
    std::shared_ptr<detail::quorum_round<result<void>>> r2;
    if (granted >= w && opts_.token_mode == quorum_token_mode::floor) {
      std::vector<std::size_t> lagging;
      for (std::size_t i = 0; i < n; ++i) {
        if (!held[i]) continue;
        if (*held[i] == top) {
          holds_top[i] = 1;
          ++holding;
        } else {
          lagging.push_back(i);
        }
      }
      if (holding >= w) {
        // Fast path: W members issued `top` themselves. Raise the rest without waiting.
        for (std::size_t i : lagging) raise_in_background(i, args, *held[i], top);
      } else {
        // Round 2: raise the lagging members to `top`; decided once W hold it.
        const std::size_t already = holding;
        std::vector<std::size_t> targets = lagging;
        auto round2 = run_round<result<void>>(
            targets, true, wait,
            [args, held, top](std::size_t i, Store& s) {
              return s.raise_token(args->key, args->owner, *held[i], top);
            },
            [already, w](const std::vector<std::optional<result<void>>>& on_time,
                         std::size_t outstanding) {
              std::size_t ok = already;
              for (const auto& r : on_time) ok += (r && *r) ? 1 : 0;
              return ok >= w || ok + outstanding < w;
            });
        for (std::size_t i : lagging) {
          if (round2.on_time[i] && *round2.on_time[i]) {
            holds_top[i] = 1;
            ++holding;
          }
        }
        r2 = round2.round;
        finalize(r2, nullptr);  // a late raise only adds a member holding `top`
      }
    } else if (granted >= w) {  // naive_max: report the max, raise nothing
      for (std::size_t i = 0; i < n; ++i) holds_top[i] = held[i] ? 1 : 0;
      holding = granted;
    }

    errc failure = errc::store_unavailable;
    if (granted < w) {
      if (exhausted > n - w) {
        failure = errc::token_exhausted;
      } else if (failed <= n - w) {
        failure = errc::busy;  // enough members answered (or may yet): contention
      }
    } else if (holding >= w) {
      const auto release_late = [this, args](std::size_t i, result<grant>& r) {
        if (r && r->token.is_issuable()) {
          (void)members_[i]->release(args->key, args->owner, r->token);
        }
      };
      // Sequential: late grants are given back now, inline, so that no member call (and no time)
      // passes between the validity check and the report. (Threads: they join below, on their
      // workers, without delaying the caller.)
      if (opts_.dispatch == quorum_dispatch::sequential) finalize(r1.round, release_late);
      // Validity is judged by the TTL the members actually applied (a member may grant less than
      // was asked): judging by the requested TTL could report a grant that already expired there.
      for (std::size_t i = 0; i < n; ++i) {
        if (holds_top[i] && r1.on_time[i] && (*r1.on_time[i])->ttl < applied) {
          applied = (*r1.on_time[i])->ttl;
        }
      }
      const time_point now = clock_.now();
      if (now < start || !(detail::saturating_sub(now, start) <
                           std::chrono::duration_cast<typename Clock::duration>(
                               trusted_span(applied, opts_.validity)))) {
        failure = errc::timeout;
      } else {
        if (opts_.token_mode == quorum_token_mode::naive_max) remember_naive(args, top, held);
        // A late grant joins the lease (raised to `top`) or is given back.
        finalize(r1.round, [this, args, top](std::size_t i, result<grant>& r) {
          if (!r || !r->token.is_issuable() || r->token == top) return;
          if (opts_.token_mode == quorum_token_mode::floor && r->token < top) {
            (void)members_[i]->raise_token(args->key, args->owner, r->token, top);
          } else {
            (void)members_[i]->release(args->key, args->owner, r->token);
          }
        });
        return grant{top, applied};
      }
    }

    // Failure: give back every grant, on time or late, under whichever token it carries now.
    finalize(
        r1.round,
        [this, args](std::size_t i, result<grant>& r) {
          if (r && r->token.is_issuable()) {
            (void)members_[i]->release(args->key, args->owner, r->token);
          }
        },
        true);
    std::vector<std::size_t> to_release;
    for (std::size_t i = 0; i < n; ++i) {
      if (held[i]) to_release.push_back(i);
    }
    if (!to_release.empty()) {
      auto cleanup = run_round<result<void>>(
          to_release, false,
          std::chrono::duration_cast<std::chrono::nanoseconds>(opts_.member_timeout),
          [args, held, top](std::size_t i, Store& s) -> result<void> {
            result<void> r = s.release(args->key, args->owner, top);
            if (!r && r.error() == errc::not_holder && *held[i] != top) {
              r = s.release(args->key, args->owner, *held[i]);
            }
            return r;
          },
          nullptr);
      finalize(cleanup.round, nullptr);
    }
    rethrow_member_exception(r1.round);
    if (r2) rethrow_member_exception(r2);
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
    const time_point start = clock_.now();
    auto args = make_args(key, owner, token, ttl);
    const std::vector<fencing_token> tokens = member_tokens(*args);
    const std::size_t w = write_quorum_;
    auto r = run_round<result<grant>>(
        all_members(), true, member_wait(ttl),
        [args, tokens](std::size_t i, Store& s) -> result<grant> {
          if (!tokens[i].is_issuable()) return errc::lease_lost;
          return s.renew(args->key, args->owner, tokens[i], args->ttl);
        },
        [w](const std::vector<std::optional<result<grant>>>& on_time, std::size_t outstanding) {
          std::size_t ok = 0;
          for (const auto& x : on_time) ok += (x && *x) ? 1 : 0;
          return ok >= w || ok + outstanding < w;
        });
    finalize(r.round, nullptr);
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
      const time_point now = clock_.now();
      if (now < start || !(detail::saturating_sub(now, start) <
                           std::chrono::duration_cast<typename Clock::duration>(
                               trusted_span(applied, opts_.validity)))) {
        return errc::timeout;
      }
      return grant{token, applied};
    }
    rethrow_member_exception(r.round);
    if (lost > members_.size() - w) return errc::lease_lost;
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
    auto r = run_round<result<void>>(
        all_members(), false,
        std::chrono::duration_cast<std::chrono::nanoseconds>(opts_.member_timeout),
        [args, tokens](std::size_t i, Store& s) -> result<void> {
          if (!tokens[i].is_issuable()) return errc::not_holder;
          return s.release(args->key, args->owner, tokens[i]);
        },
        [w](const std::vector<std::optional<result<void>>>& on_time, std::size_t) {
          std::size_t released = 0;
          for (const auto& x : on_time) released += (x && *x) ? 1 : 0;
          return released >= w;
        });
    finalize(r.round, nullptr);
    std::size_t released = 0, not_holder = 0;
    for (const auto& x : r.on_time) {
      if (!x) continue;
      if (*x) {
        ++released;
      } else if (x->error() == errc::not_holder) {
        ++not_holder;
      }
    }
    const std::size_t unknown = members_.size() - released - not_holder;
    if (released >= w) {
      forget_naive(*args);
      return {};
    }
    if (released + unknown < w) {
      forget_naive(*args);
      return errc::not_holder;
    }
    rethrow_member_exception(r.round);
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
    auto r = run_round<R>(
        all_members(), false,
        std::chrono::duration_cast<std::chrono::nanoseconds>(opts_.member_timeout),
        [args](std::size_t, Store& s) -> R { return s.inspect(args->key); },
        [w](const std::vector<std::optional<R>>& on_time, std::size_t outstanding) {
          const std::pair<std::size_t, std::size_t> top = best_agreement(on_time);
          return top.first >= w || top.first + outstanding < w;
        });
    finalize(r.round, nullptr);
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
    if (top.first + (members_.size() - answered) >= w) {
      rethrow_member_exception(r.round);
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
    auto r = run_round<result<void>>(
        all_members(), false,
        std::chrono::duration_cast<std::chrono::nanoseconds>(opts_.member_timeout),
        [floor](std::size_t, Store& s) { return s.raise_token_floor(floor); },
        [w](const std::vector<std::optional<result<void>>>& on_time, std::size_t outstanding) {
          std::size_t ok = 0;
          for (const auto& x : on_time) ok += (x && *x) ? 1 : 0;
          return outstanding == 0 || ok + outstanding < w;
        });
    finalize(r.round, nullptr);
    std::size_t ok = 0;
    for (const auto& x : r.on_time) ok += (x && *x) ? 1 : 0;
    if (ok >= w) return {};
    rethrow_member_exception(r.round);
    return errc::store_unavailable;
  }

 private:
  using time_point = typename Clock::time_point;
  using args_ptr = std::shared_ptr<const detail::quorum_args>;

  template <class R>
  struct round_result {
    std::shared_ptr<detail::quorum_round<R>> round;
    std::vector<std::optional<R>> on_time;  // replies that came while the caller waited
    // Members that count as failed for want of a reply: late (sequential), still outstanding
    // when the wait ran out, or never sent (queue full). Not those still outstanding when the
    // replies in had already decided the outcome: they might have answered anything.
    std::size_t unanswered = 0;
  };

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

  std::vector<std::size_t> all_members() const {
    std::vector<std::size_t> v(members_.size());
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = i;
    return v;
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

  // Sends `call` to `targets` and waits until every reply is in, `decided` says the outcome is
  // known, or `wait` has passed. Returns the replies that arrived in time; the round object keeps
  // collecting the rest for finalize().
  template <class R, class Call, class Decided>
  round_result<R> run_round(const std::vector<std::size_t>& targets, bool skip_unstarted,
                            std::chrono::nanoseconds wait, Call call, Decided decided) const {
    auto round = std::make_shared<detail::quorum_round<R>>(members_.size());
    round->skip_unstarted = skip_unstarted;
    round_result<R> out{round, std::vector<std::optional<R>>(members_.size())};
    if constexpr (!std::is_same_v<Decided, std::nullptr_t>) round->decided = std::move(decided);
    if (opts_.dispatch == quorum_dispatch::sequential) {
      const auto limit = std::chrono::duration_cast<typename Clock::duration>(wait);
      for (std::size_t i : targets) {
        const time_point t0 = clock_.now();
        std::optional<R> r = invoke_member<R>(*round, i, *members_[i], call);
        const time_point t1 = clock_.now();
        const bool late = t1 < t0 || detail::saturating_sub(t1, t0) > limit;
        std::lock_guard<std::mutex> lock(round->mutex);
        round->state[i] = late ? detail::quorum_slot::late : detail::quorum_slot::on_time;
        round->reply[i] = std::move(r);
        if (!late) round->on_time[i] = round->reply[i];
        out.unanswered += late ? 1 : 0;
      }
      out.on_time = round->on_time;
      std::lock_guard<std::mutex> lock(round->mutex);
      round->abandoned = true;
      return out;
    }
    const auto deadline = detail::saturating_add(std::chrono::steady_clock::now(), wait);
    for (std::size_t i : targets) {
      {
        std::lock_guard<std::mutex> lock(round->mutex);
        round->state[i] = detail::quorum_slot::pending;
        ++round->outstanding;
      }
      Store* member = members_[i];
      const bool posted =
          workers_[i]->post([round, i, member, call] { run_slot<R>(*round, i, *member, call); });
      if (!posted) {
        std::lock_guard<std::mutex> lock(round->mutex);
        round->state[i] = detail::quorum_slot::skipped;
        --round->outstanding;
        ++out.unanswered;
      }
    }
    std::unique_lock<std::mutex> lock(round->mutex);
    const bool decided_in_time =
        round->cv.wait_until(lock, deadline, [&] { return round->ready(); });
    round->abandoned = true;
    // Decided in time: requests not yet started still go out (a late grant joins the lease, a late
    // renewal extends it). Timed out: a member that far behind is not sent more of this round.
    round->skip_unstarted = skip_unstarted && !decided_in_time;
    if (!decided_in_time) out.unanswered += round->outstanding;
    out.on_time = round->on_time;
    return out;
  }

  // Calls `call` on a member, turning an exception into store_unavailable for the protocol and
  // keeping the first one for the caller.
  template <class R, class Call>
  static std::optional<R> invoke_member(detail::quorum_round<R>& round, std::size_t i,
                                        Store& member, const Call& call) {
    std::optional<R> r;
    HOLDFAST_TRY {
      r.emplace(call(i, member));
    }
    HOLDFAST_CATCH_ALL {
#if HOLDFAST_HAS_EXCEPTIONS
      std::lock_guard<std::mutex> lock(round.mutex);
      if (!round.exception) round.exception = std::current_exception();
#endif
      r.emplace(errc::store_unavailable);
    }
    (void)round;
    return r;
  }

  // Runs one request on a member's worker and files the reply.
  template <class R, class Call>
  static void run_slot(detail::quorum_round<R>& round, std::size_t i, Store& member,
                       const Call& call) {
    {
      std::lock_guard<std::mutex> lock(round.mutex);
      if (round.abandoned && round.skip_unstarted) {
        round.state[i] = detail::quorum_slot::skipped;
        --round.outstanding;
        return;  // the caller stopped waiting: nobody to wake
      }
    }
    std::optional<R> r = invoke_member<R>(round, i, member, call);
    std::function<void(std::size_t, R&)> late;
    {
      std::lock_guard<std::mutex> lock(round.mutex);
      --round.outstanding;
      round.reply[i] = std::move(r);
      if (!round.abandoned) {
        round.state[i] = detail::quorum_slot::on_time;
        round.on_time[i] = round.reply[i];
        if (round.ready()) round.cv.notify_all();
      } else if (!round.finalized) {
        round.state[i] = detail::quorum_slot::late;
      } else {
        round.state[i] = detail::quorum_slot::done;
        late = round.on_late;
      }
    }
    if (late) {
      HOLDFAST_TRY {
        late(i, *round.reply[i]);
      }
      HOLDFAST_CATCH_ALL {}  // a clean-up's failure only leaves a record for its TTL to free
    }
  }

  // Declares the outcome known: late replies already in are handed to `on_late` (on their
  // member's worker, or inline when sequential); later ones will be when they arrive. With
  // `drop_unstarted`, requests of the round that have not started yet are not sent at all.
  template <class R>
  void finalize(const std::shared_ptr<detail::quorum_round<R>>& round,
                typename detail::quorum_round<R>::late_fn on_late,
                bool drop_unstarted = false) const {
    std::vector<std::size_t> late;
    {
      std::lock_guard<std::mutex> lock(round->mutex);
      round->abandoned = true;
      if (drop_unstarted) round->skip_unstarted = true;
      round->finalized = true;
      round->on_late = on_late;
      for (std::size_t i = 0; i < round->state.size(); ++i) {
        if (round->state[i] == detail::quorum_slot::late) {
          round->state[i] = detail::quorum_slot::done;
          late.push_back(i);
        }
      }
    }
    if (!on_late) return;
    for (std::size_t i : late) {
      in_member_context(i, [round, i, on_late] {
        HOLDFAST_TRY {
          on_late(i, *round->reply[i]);
        }
        HOLDFAST_CATCH_ALL {}
      });
    }
  }

  // Runs `fn` where member i may be called: on its worker (not waited for) or inline.
  template <class F>
  void in_member_context(std::size_t i, F fn) const {
    if (opts_.dispatch == quorum_dispatch::threads) {
      (void)workers_[i]->post(std::function<void()>(std::move(fn)));
    } else {
      fn();
    }
  }

  void raise_in_background(std::size_t i, const args_ptr& args, fencing_token from,
                           fencing_token to) const {
    Store* member = members_[i];
    in_member_context(i, [member, args, from, to] {
      HOLDFAST_TRY {
        (void)member->raise_token(args->key, args->owner, from, to);
      }
      HOLDFAST_CATCH_ALL {}
    });
  }

  void release_in_background(std::size_t i, const args_ptr& args, fencing_token token) const {
    Store* member = members_[i];
    in_member_context(i, [member, args, token] {
      HOLDFAST_TRY {
        (void)member->release(args->key, args->owner, token);
      }
      HOLDFAST_CATCH_ALL {}
    });
  }

  template <class R>
  static void rethrow_member_exception(const std::shared_ptr<detail::quorum_round<R>>& round) {
#if HOLDFAST_HAS_EXCEPTIONS
    std::exception_ptr e;
    {
      std::lock_guard<std::mutex> lock(round->mutex);
      e = round->exception;
    }
    if (e) std::rethrow_exception(e);
#else
    (void)round;
#endif
  }

  // The token to send each member for an operation on (key, owner, token): `token` everywhere,
  // except under naive_max, where each member holds its own token.
  std::vector<fencing_token> member_tokens(const detail::quorum_args& a) const {
    std::vector<fencing_token> v(members_.size(), a.token);
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

  std::vector<Store*> members_;
  quorum_options opts_;
  Clock clock_;
  std::error_code config_error_;
  std::size_t write_quorum_ = 1;
  // naive_max only: (key, owner) -> (quorum token, each member's own token).
  mutable std::mutex naive_mutex_;
  std::map<std::pair<std::string, std::string>,
           std::pair<fencing_token, std::vector<fencing_token>>>
      naive_;
  std::vector<std::unique_ptr<detail::quorum_worker>> workers_;  // last: joined first
};

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_QUORUM_HPP
