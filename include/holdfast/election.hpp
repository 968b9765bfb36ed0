// SPDX-License-Identifier: MIT
// holdfast/election.hpp - election<Store, Clock>: leader election over any LeaseStore, where the
// leader's *term* is the fencing token of its leadership lease.
//
//   holdfast::election<holdfast::redis_store> job(store, "nightly-report", 10s, opts);
//   auto term = job.campaign(std::chrono::minutes(5));   // blocks until leader (or timeout)
//   while (job.is_leader()) db.write(job.term(), job.owner(), ...);   // fenced by the term
//
// Leadership is a lease on the election's name. Campaigning acquires it (with a fresh owner id
// `<label>/<32 random hex digits>`, so the readable label shows in the store), a keepalive
// renews it, and resigning releases it. Because the term is the lease's fencing token, terms
// strictly increase from one leader to the next (store contract T1), and a deposed leader that
// has not yet noticed is refused by every resource that fences its writes (the README's timeline;
// fence.hpp). No election can promise that two processes never *believe* they lead at once (a
// paused leader believes until it looks); the term is what makes that harmless.
//
// Terms: a leader's term is its leadership lease's fencing token, so terms strictly increase but
// are not consecutive. A store with one counter for all keys (Redis, PostgreSQL's sequence,
// memory_store) draws a token for every acquire attempt, also each campaign attempt that finds
// the key busy, and for every other key's grants, so successive terms jump (1, then 9); etcd's
// term is the key's create_revision, which every write to the cluster advances. Compare terms
// (a higher term is a later leadership), never count with them or expect term + 1.
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
// Observing. A process that only wants to know who leads needs no candidate and no TTL:
// election_observer (election_observer.hpp) asks the store (inspect: readable label, owner,
// term, time left) and next_leader(known, timeout) blocks until that answer changes, sleeping in
// the store's watch_release where it has one. A candidate's leader() and next_leader() are the
// observer's. A candidate blocked in campaign() is woken by the release itself (acquire() waits
// in wait_for_release), so a new leader follows a resignation within a round trip or two.
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
#include "holdfast/detail/random.hpp"
#include "holdfast/detail/saturating.hpp"
#include "holdfast/election_observer.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/keepalive.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/lease/detail/option_texts.hpp"
#include "holdfast/recipes/detail/lease_recipe.hpp"
#include "holdfast/result.hpp"
#include "holdfast/store.hpp"
#include "holdfast/validity.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

/// 0.1's name of loss_cause: on_stopped_leading now takes a loss_cause (`resigned` included).
using stop_cause [[deprecated("use loss_cause")]] = loss_cause;

/// 0.1's mapping to stop_cause; a loss_cause is now passed as it is.
[[deprecated("on_stopped_leading takes the loss_cause itself")]] [[nodiscard]] constexpr loss_cause
to_stop_cause(loss_cause c) noexcept {
  return c == loss_cause::none ? loss_cause::validity_passed : c;
}

// 0.1 spellings inside are [[deprecated]]: only their uses in callers' code warn.
HOLDFAST_DETAIL_ALLOW_DEPRECATED_BEGIN
/// Options for an election candidate.
template <class Clock = steady_clock>
struct election_options {
  /// The candidate's readable label, shown to observers (leader_info::label): a host name and
  /// pid, a pod name. The lease's owner id is `<label>/<32 random hex digits>`, fresh for every
  /// campaign, so two candidates with one label still differ (T3); an empty label leaves the
  /// random digits alone.
  std::string label = "candidate";
  /// 0.1's name of `label`; when set, it is the label.
  [[deprecated("use label")]] std::string identity{};
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
  /// term(), name(), label() and ttl(): campaign(), resign(), is_leader(), owner() and
  /// valid_until() take the lock of the lease handle, which the thread that noticed the loss may
  /// hold.
  /// The cause is never loss_cause::none; `resigned` is resign()'s (or the destructor's).
  std::function<void(loss_cause)> on_stopped_leading{};
  /// How often next_leader() asks the store when it cannot wait for a release (the store has no
  /// wait_for_release, or nobody leads). In (0, 1 h]; default 1 s.
  std::chrono::nanoseconds observe_interval = std::chrono::seconds(1);
};
HOLDFAST_DETAIL_ALLOW_DEPRECATED_END

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
  /// or any duration; truncated to whole ms). Never fails: bad arguments (an empty name,
  /// a TTL not in [1 ms, max_ttl] or too short for any validity on the clock, bad
  /// validity/backoff/keepalive options, observe_interval not in (0, 1 h]) are reported by error(),
  /// and every campaign then fails with it. Starts a keepalive thread unless opts.keepalive is
  /// given.
  template <class Rep, class Period>
  election(Store& store, std::string name, std::chrono::duration<Rep, Period> ttl,
           election_options<Clock> opts = {})
      : recipe(store, std::move(name), ttl, std::move(opts), "election", "name") {
    // The recipe checked the name (the election's key), TTL, options and a given keepalive.
    HOLDFAST_DETAIL_ALLOW_DEPRECATED_BEGIN
    if (!this->opts_.identity.empty()) this->opts_.label = this->opts_.identity;
    HOLDFAST_DETAIL_ALLOW_DEPRECATED_END
    const std::string bad_interval =
        detail::interval_problem(this->opts_.observe_interval, "observe_interval");
    if (!bad_interval.empty()) this->refuse(bad_interval);
    if (this->opts_.keepalive == nullptr && this->opts_.renewal.check()) {
      this->refuse("renewal." + this->opts_.renewal.problem());
    }
    if (this->config_error_) return;
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
    if (announce) stopped(loss_cause::resigned);
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

  /// Returns the owner id of this candidate's leadership lease (`<label>/<random>`, new for
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

  /// Asks the store who leads now, without campaigning (requires the store's inspect()): as
  /// election_observer::leader(). errc::invalid_argument for bad constructor arguments.
  template <class S = Store, class = std::enable_if_t<has_inspect_v<S>>>
  result<std::optional<leader_info>> leader() {
    if (this->config_error_) return this->config_error_;
    return observer().leader();
  }

  /// Blocks until the answer to leader() differs from `known` or `timeout` passes on the clock:
  /// as election_observer::next_leader(), with this candidate's clock, observe_interval and
  /// acquire.cancel. errc::invalid_argument for bad constructor arguments.
  template <class Rep, class Period, class S = Store, class = std::enable_if_t<has_inspect_v<S>>>
  result<std::optional<leader_info>> next_leader(const std::optional<leader_info>& known,
                                                 std::chrono::duration<Rep, Period> timeout) {
    if (this->config_error_) return this->config_error_;
    return observer().next_leader(known, timeout);
  }

  /// Returns the election's name (the key of the leadership lease).
  [[nodiscard]] const std::string& name() const noexcept { return this->key_; }
  /// Returns the TTL (ms) of the leadership lease.
  [[nodiscard]] std::chrono::milliseconds ttl() const noexcept { return this->ttl_; }
  /// Returns the candidate's readable label.
  [[nodiscard]] const std::string& label() const noexcept { return this->opts_.label; }
  /// 0.1's name of label().
  [[deprecated("use label()")]] [[nodiscard]] const std::string& identity() const noexcept {
    return this->opts_.label;
  }

 private:
  election_observer<Store, Clock> observer() const {
    return election_observer<Store, Clock>(
        this->store_, this->key_,
        {this->opts_.acquire.clock, this->opts_.observe_interval, this->opts_.acquire.cancel});
  }

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
      o.owner = detail::labelled_owner_id(this->opts_.label);
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
      this->opts_.on_stopped_leading(c == loss_cause::none ? loss_cause::validity_passed : c);
  }

  void stopped(loss_cause c) {
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
