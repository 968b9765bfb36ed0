// SPDX-License-Identifier: MIT
// holdfast/election.hpp - election<Store, Clock>: leader election over any LeaseStore, where the
// leader's *term* is the fencing token of its leadership lease.
//
//   holdfast::election<holdfast::redis_store> job(store, "nightly-report", 10s, opts);
//   auto term = job.campaign(std::chrono::minutes(5));   // blocks until leader (or timeout)
//   while (job.is_leader()) db.write(job.term(), job.owner(), ...);   // fenced by the term
//
// Leadership is a lease on the election's name. Campaigning acquires it (with a fresh owner id
// `<identity>/<32 random hex digits>`, so the readable identity shows in the store), a keepalive
// renews it, and resigning releases it. Because the term is the lease's fencing token, terms
// strictly increase from one leader to the next (store contract T1), and a deposed leader that
// has not yet noticed is refused by every resource that fences its writes (the README's timeline;
// fence.hpp). No election can promise that two processes never *believe* they lead at once (a
// paused leader believes until it looks); the term is what makes that harmless.
//
// Terms increase but are not consecutive: a store with one counter for all keys (Redis,
// PostgreSQL's sequence, memory_store) draws a token for every attempt, also one that finds the
// key busy, and for every other key's grants, so successive terms jump (1, then 9). etcd's term
// is the key's create_revision, which every write to the cluster advances. Compare terms, never
// count with them.
//
//   state      | entered when                                   | is_leader() | term()
//   -----------+------------------------------------------------+-------------+---------------
//   follower   | constructed; campaign() timed out or failed    | false       | none
//   leader     | campaign()/try_campaign() got the lease;       | until the   | the lease's
//              | on_started_leading(term) has run               | validity    | token
//   follower   | resign(); or the lease was lost (validity      | false       | none
//              | passed, renewal refused, clock went back): the |             |
//              | keepalive tells on_stopped_leading(cause)      |             |
//
// A leader whose renewals fail is told no later than the end of its validity on its own clock:
// the keepalive retries until valid_until() and turns the lease lost there (keepalive.hpp), so
// on_stopped_leading runs while the store may still hold the lease for (drift + margin) longer,
// never after another candidate can have been granted it (S4, within the drift bound).
//
// Observing. leader() asks the store who leads now (the inspect capability: readable identity,
// term, time left) without campaigning; next_leader(known, timeout) blocks until that answer
// changes. It sleeps in the store's watch_release capability where the store has one (woken by
// the leader's release, or at the latest when its lease can have expired; store.hpp) and
// otherwise polls at election_options::observe_interval, never sleeping past the leader's
// expiry. A candidate blocked in campaign() is woken by the release itself (acquire() waits in
// wait_for_release), so a new leader follows a resignation within a round trip or two.
//
// Sources: client-go's tools/leaderelection (the callbacks OnStartedLeading / OnStoppedLeading /
// OnNewLeader, renewal by a loop, "a leader that cannot renew stops before the lease expires");
// etcd's clientv3/concurrency Election (Campaign / Resign / Leader / Observe, the leader's key
// revision as its term); Curator's LeaderLatch (hasLeadership, getLeader); fencing by term:
// Kleppmann 2016, Chubby's sequencers (Burrows 2006), Raft's terms.
#ifndef HOLDFAST_ELECTION_HPP
#define HOLDFAST_ELECTION_HPP

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include "holdfast/cancel.hpp"
#include "holdfast/clock.hpp"
#include "holdfast/detail/config.hpp"
#include "holdfast/detail/lease_recipe.hpp"
#include "holdfast/detail/random.hpp"
#include "holdfast/detail/saturating.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/keepalive.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/result.hpp"
#include "holdfast/store.hpp"
#include "holdfast/validity.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

/// Who leads an election now, as the store reports it (election::leader()).
struct leader_info {
  /// The leader's readable identity: its owner id up to the last '/' (election owner ids are
  /// `<identity>/<random>`), or the whole owner id if it has no '/'.
  std::string identity;
  /// The leader's full owner id.
  std::string owner;
  /// The leader's term: the fencing token of its leadership lease.
  fencing_token term;
  /// Time left on the leader's lease by the store's clock (ms, rounded down).
  std::chrono::milliseconds remaining{0};

  /// Two answers name the same leadership iff owner and term agree (remaining is ignored).
  friend bool operator==(const leader_info& a, const leader_info& b) noexcept {
    return a.term == b.term && a.owner == b.owner;
  }
  friend bool operator!=(const leader_info& a, const leader_info& b) noexcept { return !(a == b); }
};

/// Why a leader stopped leading: the argument of on_stopped_leading.
enum class stop_cause : unsigned char {
  resigned,         ///< resign() was called (or the election was destroyed while leading).
  validity_passed,  ///< Renewals did not land before the leader's validity ended on its clock.
  renew_refused,    ///< The store refused a renewal: the lease expired or was taken over.
  not_holder,       ///< The store said this candidate no longer holds the lease.
  clock_regressed,  ///< The leader's clock went backwards, so it could not measure its validity.
  protocol_error,   ///< The store answered a renewal with garbage.
};

/// Returns the stop_cause's name, e.g. "renew_refused".
[[nodiscard]] constexpr const char* to_string(stop_cause c) noexcept {
  switch (c) {
    case stop_cause::resigned:
      return "resigned";
    case stop_cause::validity_passed:
      return "validity_passed";
    case stop_cause::renew_refused:
      return "renew_refused";
    case stop_cause::not_holder:
      return "not_holder";
    case stop_cause::clock_regressed:
      return "clock_regressed";
    case stop_cause::protocol_error:
      return "protocol_error";
  }
  return "unknown";
}

/// Returns the stop_cause a lease's loss_cause means for a leader.
[[nodiscard]] constexpr stop_cause to_stop_cause(loss_cause c) noexcept {
  switch (c) {
    case loss_cause::renew_refused:
      return stop_cause::renew_refused;
    case loss_cause::not_holder:
      return stop_cause::not_holder;
    case loss_cause::clock_regressed:
      return stop_cause::clock_regressed;
    case loss_cause::protocol_error:
      return stop_cause::protocol_error;
    case loss_cause::none:
    case loss_cause::validity_passed:
      break;
  }
  return stop_cause::validity_passed;
}

/// Options for an election candidate.
template <class Clock = steady_clock>
struct election_options {
  /// The candidate's readable identity, shown to observers (leader_info::identity): a host name
  /// and pid, a pod name. Must be non-empty. The lease's owner id is `<identity>/<32 random hex
  /// digits>`, fresh for every campaign, so two candidates with one identity still differ (T3).
  std::string identity = "candidate";
  /// Clock, validity and backoff of every campaign (acquire.owner and acquire.on_lost are ignored:
  /// the election sets them).
  acquire_options<Clock> acquire{};
  /// The keepalive that renews the leadership lease; it must outlive the election. Null
  /// (default): the election starts its own, with `renewal`.
  holdfast::keepalive<Clock>* keepalive = nullptr;
  /// Options of the election's own keepalive (when `keepalive` is null). Default: renew at half
  /// the TTL, retry transient errors until the validity ends.
  keepalive_options renewal{};
  /// Called once each time this candidate becomes leader, with its term, on the thread that
  /// campaigned, before campaign() returns. Must be quick (start your work elsewhere): a loss
  /// noticed meanwhile waits for it, so that on_stopped_leading always comes after it.
  std::function<void(fencing_token)> on_started_leading{};
  /// Called once each time this candidate stops leading, with the cause: on the keepalive's
  /// thread when the lease is lost, on the caller's when resign() or is_leader() notices. Must
  /// be thread-safe and quick (set a flag, cancel the work). Of this election it may call only
  /// term(), name(), identity() and ttl(): campaign(), resign(), is_leader(), owner() and
  /// valid_until() take the lock of the lease handle, which the thread that noticed the loss may
  /// hold.
  std::function<void(stop_cause)> on_stopped_leading{};
  /// How often next_leader() asks the store when it cannot wait for a release (the store has no
  /// wait_for_release, or nobody leads). In (0, 1 h]; default 1 s.
  std::chrono::nanoseconds observe_interval = std::chrono::seconds(1);
};

/// Returns the readable identity in an election owner id: everything before the last '/', or the
/// whole id if it has none.
[[nodiscard]] inline std::string identity_of(std::string_view owner) {
  const std::size_t slash = owner.rfind('/');
  return std::string(slash == std::string_view::npos ? owner : owner.substr(0, slash));
}

/// One candidate in the election named `name` on a LeaseStore. See the overview at the top of
/// election.hpp for the states and what the term guarantees.
///
/// Thread-safety: every member may be called from any thread; campaign(), try_campaign() and
/// resign() are serialized. Callbacks are serialized with each other (on_stopped_leading always
/// after the on_started_leading of the same leadership); see on_stopped_leading for what they may
/// call. Neither copyable nor movable (the keepalive's callback refers
/// to it). Destroying it resigns (quietly; on_stopped_leading(resigned) runs if it led).
/// The store (and a given keepalive) must outlive it.
template <class Store, class Clock = steady_clock>
HOLDFAST_REQUIRES(lease_store<Store>&& ttl_clock<Clock>)
class election : public detail::lease_recipe<Store, Clock, election_options<Clock>> {
  using recipe = detail::lease_recipe<Store, Clock, election_options<Clock>>;

 public:
  // store_type, clock_type and error() come from the recipe, as do store_, key_ (the election's
  // name: the key of its leadership lease), opts_ and ttl_.
  using typename recipe::lease_type;
  using typename recipe::time_point;

  /// Makes a follower in the election `name` of `store`, whose leadership leases last `ttl` (ms,
  /// or any duration; truncated to whole ms). Never fails: bad arguments (empty name or identity,
  /// a TTL not in [1 ms, max_ttl] or too short for any validity on the clock, bad
  /// validity/backoff/keepalive options, observe_interval not in (0, 1 h]) are reported by error(),
  /// and every campaign then fails with it. Starts a keepalive thread unless opts.keepalive is
  /// given.
  template <class Rep, class Period>
  election(Store& store, std::string name, std::chrono::duration<Rep, Period> ttl,
           election_options<Clock> opts = {})
      : recipe(store, std::move(name), ttl, std::move(opts)) {
    // The recipe checked the name (the election's key), TTL, options and a given keepalive.
    const bool bad_interval = this->opts_.observe_interval <= std::chrono::nanoseconds::zero() ||
                              this->opts_.observe_interval > std::chrono::hours(1);
    if (this->config_error_ || this->opts_.identity.empty() || bad_interval ||
        (this->opts_.keepalive == nullptr && this->opts_.renewal.check())) {
      this->refuse();
      return;
    }
    if (this->opts_.keepalive == nullptr) {
      own_keepalive_ = std::make_unique<holdfast::keepalive<Clock>>(this->opts_.acquire.clock,
                                                                    this->opts_.renewal);
      this->opts_.keepalive = own_keepalive_.get();
    }
  }

  election(const election&) = delete;
  election& operator=(const election&) = delete;

  /// Resigns if leading (quietly: errors and exceptions from the store are swallowed; the TTL
  /// frees the key regardless), then stops the election's own keepalive, if any.
  ~election() {
    HOLDFAST_TRY {
      (void)resign();
    }
    HOLDFAST_CATCH_ALL {}
  }

  /// Campaigns until this candidate leads or `timeout` has passed on the clock (<= 0: one
  /// attempt), retrying contention and transient store errors as acquire() does (waiting for the
  /// leader's release where the store can, with backoff otherwise). On success the lease is
  /// handed to the keepalive and on_started_leading(term) runs on this thread before returning.
  /// Campaigning while already leading returns the current term at once.
  /// \returns the term (the leadership lease's fencing token);
  ///   errc::timeout if someone else led until the deadline (or the store kept failing);
  ///   errc::lease_lost if the lease was lost before leadership could start;
  ///   errc::invalid_argument for bad constructor arguments, or a keepalive that was stopped;
  ///   errc::cancelled within one store round trip of a stop of acquire.cancel (cancel.hpp),
  ///     leading nothing (a grant whose round trip saw the stop is given back);
  ///   errc::misconfigured, errc::permission_denied at once (the store's configuration);
  ///   any non-transient error acquire() reports (protocol_error, token_exhausted, ...).
  /// Exceptions from the store, clock or on_started_leading propagate. If on_started_leading
  /// throws, this candidate still leads (is_leader() is true, the keepalive renews, a later loss
  /// still calls on_stopped_leading): call resign() if a leader that failed to start must not lead.
  template <class Rep, class Period>
  result<fencing_token> campaign(std::chrono::duration<Rep, Period> timeout) {
    return run_campaign([&](const acquire_options<Clock>& o) {
      return holdfast::acquire(this->store_, this->key_, this->ttl_, timeout, o);
    });
  }

  /// Makes one attempt to lead, without waiting. \returns the term; errc::busy if another
  /// candidate leads; otherwise as campaign().
  result<fencing_token> try_campaign() {
    return run_campaign([&](const acquire_options<Clock>& o) {
      return holdfast::try_acquire(this->store_, this->key_, this->ttl_, o);
    });
  }

  /// Stops leading: releases the leadership lease (owner- and token-checked in the store, so a
  /// deposed leader cannot free its successor's) and runs on_stopped_leading(resigned) if this
  /// candidate led and had not been told of a loss. Does nothing when not leading.
  /// \returns success; errc::not_holder if the store no longer held the lease (it had been lost;
  ///   this candidate is a follower either way); any store error (the TTL then frees the key,
  ///   since nothing renews it any more).
  /// Exceptions from the store or on_stopped_leading propagate (the candidate is a follower).
  result<void> resign() {
    std::optional<lease_type> mine;
    bool announce = false;
    {
      std::lock_guard<std::mutex> op(op_mu_);
      if (!lease_) return {};
      {
        std::lock_guard<std::recursive_mutex> state(cb_mu_);
        announce = leading_ && announced_;
        leading_ = false;
        ++gen_;
      }
      mine.emplace(std::move(*lease_));
      lease_.reset();
    }
    result<void> r = mine->release();
    if (announce) stopped(stop_cause::resigned);
    return r;
  }

  /// Returns true iff this candidate leads and its lease is valid on its own clock now. Reads the
  /// clock; if the validity has passed, the lease turns lost and on_stopped_leading runs (here,
  /// or on the keepalive's thread, whichever notices first). Check it before each step of leader
  /// work, and fence every write with term().
  [[nodiscard]] bool is_leader() {
    std::lock_guard<std::mutex> op(op_mu_);
    if (!lease_) return false;
    {
      std::lock_guard<std::recursive_mutex> state(cb_mu_);
      if (!leading_) return false;
    }
    return lease_->valid();
  }

  /// Returns this candidate's term while it leads (the fencing token to pass, with owner(), with
  /// every write), or the none token, which every fence refuses.
  [[nodiscard]] fencing_token term() const {
    std::lock_guard<std::recursive_mutex> state(cb_mu_);
    return leading_ ? term_ : fencing_token{};
  }

  /// Returns the owner id of this candidate's leadership lease (`<identity>/<random>`, new for
  /// every campaign), or an empty string if it holds none. Fences admit (term(), owner()).
  [[nodiscard]] std::string owner() const {
    std::lock_guard<std::mutex> op(op_mu_);
    return lease_ ? lease_->owner() : std::string();
  }

  /// Returns the instant (on the clock) until which this leader trusts its lease, or nullopt
  /// when not leading.
  [[nodiscard]] std::optional<time_point> valid_until() const {
    std::lock_guard<std::mutex> op(op_mu_);
    if (!lease_) return std::nullopt;
    return lease_->valid_until();
  }

  /// Asks the store who leads now, without campaigning (requires the store's inspect()).
  /// \returns the leader, or nullopt if nobody leads (the key is free or its lease expired);
  ///   errc::invalid_argument for bad constructor arguments; any error inspect() reports.
  template <class S = Store, class = std::enable_if_t<has_inspect_v<S>>>
  result<std::optional<leader_info>> leader() {
    if (this->config_error_) return this->config_error_;
    result<std::optional<lease_record>> r = this->store_.inspect(this->key_);
    if (!r) return r.error();
    if (!*r) return std::optional<leader_info>{};
    const lease_record& rec = **r;
    return std::optional<leader_info>{
        leader_info{identity_of(rec.owner), rec.owner, rec.token, rec.remaining}};
  }

  /// Blocks until the store's answer to leader() differs from `known` (another leader or term,
  /// a leader where there was none, none where there was one) or `timeout` passes on the clock.
  /// While someone leads, it sleeps at most until that leader's lease can have expired and at
  /// most observe_interval, in the store's watch_release() where the store has it (woken by the
  /// leader's release; a watcher never takes a release away from a campaigning candidate, see
  /// store.hpp), on the clock otherwise; while nobody leads, it asks every observe_interval.
  /// \returns the new answer; errc::timeout if it did not change in time; errc::cancelled within
  ///   one store round trip of a stop of acquire.cancel (cancel.hpp); errors of inspect().
  /// Exceptions from the store or clock propagate.
  template <class Rep, class Period, class S = Store, class = std::enable_if_t<has_inspect_v<S>>>
  result<std::optional<leader_info>> next_leader(const std::optional<leader_info>& known,
                                                 std::chrono::duration<Rep, Period> timeout) {
    if (this->config_error_) return this->config_error_;
    Clock clock = this->opts_.acquire.clock;
    const time_point deadline = detail::saturating_add(
        clock.now(), timeout > decltype(timeout)::zero() ? timeout : decltype(timeout)::zero());
    const cancel_token& cancel = this->opts_.acquire.cancel;
    for (;;) {
      if (cancel.stop_requested()) return errc::cancelled;
      result<std::optional<leader_info>> now_leads = leader();
      if (!now_leads) return now_leads;
      if (now_leads->has_value() != known.has_value() || (known && **now_leads != *known)) {
        return now_leads;
      }
      const time_point now = clock.now();
      if (!(now < deadline)) return errc::timeout;
      time_point wake = detail::saturating_add(now, this->opts_.observe_interval);
      if (deadline < wake) wake = deadline;
      if (*now_leads) {
        // The leader changes only by a release or an expiry: never sleep past its expiry (its
        // time left by the store's clock, 1 ms more for rounding).
        const time_point expiry =
            detail::saturating_add(now, (**now_leads).remaining + std::chrono::milliseconds(1));
        if (expiry < wake) wake = expiry;
        if constexpr (can_watch_release_v<Store, Clock>) {
          if (this->store_.watch_release(this->key_,
                                         detail::cancellable_wait_end(cancel, now, wake))) {
            continue;
          }
          // A failed watch is only a lost hint: fall back to sleeping out the interval.
        }
      }
      if (!detail::sleep_until_or_cancelled(clock, wake, cancel)) return errc::cancelled;
    }
  }

  /// Returns the election's name (the key of the leadership lease).
  [[nodiscard]] const std::string& name() const noexcept { return this->key_; }
  /// Returns the TTL (ms) of the leadership lease.
  [[nodiscard]] std::chrono::milliseconds ttl() const noexcept { return this->ttl_; }
  /// Returns the candidate's readable identity.
  [[nodiscard]] const std::string& identity() const noexcept { return this->opts_.identity; }

 private:
  template <class Acquire>
  result<fencing_token> run_campaign(Acquire&& acquire) {
    if (this->config_error_) return this->config_error_;
    std::uint64_t gen;
    fencing_token term;
    {
      std::lock_guard<std::mutex> op(op_mu_);
      if (lease_) {
        {
          std::lock_guard<std::recursive_mutex> state(cb_mu_);
          if (leading_) return term_;
        }
        lease_.reset();  // a lost lease: its destructor frees whatever the store still has
      }
      acquire_options<Clock> o = this->opts_.acquire;
      o.owner = this->opts_.identity + "/" + detail::random_owner_id();
      {
        std::lock_guard<std::recursive_mutex> state(cb_mu_);
        gen = ++gen_;
      }
      o.on_lost = [this, gen](loss_cause c) { lost(gen, c); };
      result<lease_type> l = acquire(o);
      if (!l) return l.error();
      term = l->token();
      {
        std::lock_guard<std::recursive_mutex> state(cb_mu_);
        leading_ = true;
        announced_ = false;
        term_ = term;
      }
      lease_.emplace(std::move(*l));
      if (result<void> added = this->opts_.keepalive->add(*lease_); !added) {
        // Lost already (its callback ran and found nothing announced), or the keepalive is
        // stopped: this candidate cannot lead safely. Give the key back.
        {
          std::lock_guard<std::recursive_mutex> state(cb_mu_);
          leading_ = false;
          ++gen_;
        }
        (void)lease_->release();
        lease_.reset();
        return added.error();
      }
    }
    std::lock_guard<std::recursive_mutex> state(cb_mu_);
    if (!leading_ || gen_ != gen) return errc::lease_lost;  // lost before it could start
    announced_ = true;
    if (this->opts_.on_started_leading) this->opts_.on_started_leading(term);
    return term;
  }

  // The lease's on-loss callback (keepalive thread, or whoever noticed).
  void lost(std::uint64_t gen, loss_cause c) {
    std::lock_guard<std::recursive_mutex> state(cb_mu_);
    if (gen != gen_ || !leading_) return;
    leading_ = false;
    if (announced_ && this->opts_.on_stopped_leading)
      this->opts_.on_stopped_leading(to_stop_cause(c));
  }

  void stopped(stop_cause c) {
    std::lock_guard<std::recursive_mutex> state(cb_mu_);
    if (this->opts_.on_stopped_leading) this->opts_.on_stopped_leading(c);
  }

  std::unique_ptr<holdfast::keepalive<Clock>> own_keepalive_;

  mutable std::mutex op_mu_;  // the lease handle; campaign/resign/is_leader take turns
  std::optional<lease_type> lease_;
  // Leadership state and the callbacks. Recursive: a callback that asks is_leader() may notice
  // the loss on its own thread and re-enter lost().
  mutable std::recursive_mutex cb_mu_;
  std::uint64_t gen_ = 0;  // bumped per campaign and resign: stale loss callbacks are ignored
  bool leading_ = false;
  bool announced_ = false;
  fencing_token term_{};
};

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_ELECTION_HPP
