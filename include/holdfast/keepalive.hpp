// SPDX-License-Identifier: MIT
// holdfast/keepalive.hpp - keepalive<Clock>: one background thread that renews many leases before
// their TTL runs out, and notices when one is lost.
//
// Opt-in: a lease renews only when renew() is called, unless it is added to a keepalive (etcd's
// lease KeepAlive, Redisson's lock watchdog, client-go's leader-election renew loop):
//
//   holdfast::keepalive<> keepalive;                         // starts one thread
//   auto l = holdfast::try_acquire(store, "orders", 10s, opts);
//   keepalive.add(*l);                                        // renewed every 5 s from now on
//   while (l->valid()) do_some_work(l->token());              // stop when the lease is lost
//
// Per lease, the keepalive runs this loop (times on the keepalive's clock, which must measure the
// same time as the leases' clocks, e.g. copies of one clock):
//
//   event                                  | what the keepalive does
//   ---------------------------------------+---------------------------------------------------
//   renew_fraction * TTL after acquired_at | renew() with the TTL asked (lease::asked_ttl())
//   renew succeeded                        | schedule the next renewal from the new acquired_at
//   transient error (store_unavailable,    | retry with exponential backoff and full jitter, but
//   timeout, foreign error) or a store /   | never after valid_until(); the error (or
//   clock exception                        | caught_exception) is the lease's last_error()
//   validity passed before a renewal landed| lease turns lost (validity_passed), callback, drop
//   lease_lost / not_holder / garbage      | lease turns lost, callback, drop (never retried)
//   the clock went backwards (seen by the  | every lease is looked at at once: it turns lost
//   next poll)                             | (clock_regressed), callback, drop
//   lease released / releasing / destroyed | drop; nothing reaches the store for it again
//   remove(lease), stop()                  | drop; the lease stays held until its TTL runs out
//
// Serialization: adding a lease moves its state into a shared block with a per-lease operation
// mutex (detail/lease_shared.hpp); the keepalive drives it only through the keepalive_target port
// (detail/keepalive_port.hpp). The keepalive's renewal and the holder's renew()/release() take that
// mutex around their store call, so they never overlap, and once release() or remove() returns, the
// keepalive sends no renewal of that lease. A lease that no keepalive shares takes no lock.
//
// Batches: the renewals due in one poll() on one store that offers renew_batch (redis_store) go
// out together, at most max_batch per call, pipelined: all sent, then all replies read, each
// judged as its own renew() (lease/detail/batch_renew.hpp); other stores renew one at a time.
//
// Waiting: the thread sleeps until the earliest renewal is due, and add() and stop() wake it at
// once. On steady_clock it waits on a condition variable (the same steady time); on an
// interruptible clock (manual_clock; clock.hpp) it sleeps in the clock's sleep_until(tp, stop), so
// tests move its time by hand and synchronize with manual_clock::wait_for_sleepers(). A clock that
// is neither cannot be slept on without risking a stop() that waits for that clock to move, so
// there the thread reads the clock every `poll_interval` of real time. A clock that goes backwards
// is noticed at the next poll: on manual_clock the jump itself ends the sleep, on a clock that is
// neither it is within poll_interval of real time, so a holder hears clock_regressed within one
// renew interval instead of after the jump's length (the size of the jump no longer matters). With
// keepalive_options::start_thread = false there is no thread at all: call poll() yourself and
// sleep until the instant it returns (a simulator's cooperative client, an event loop); on a clock
// that can jump back, sleep for the duration to that instant on steady time, capped by a renew
// interval, never until the instant on that clock (see poll()). Under a
// cooperative scheduler (fibers, coroutines on one thread) call poll() from the task that uses
// the leases: a renewal holds its lease's operation mutex, a real mutex, across the store call,
// so another task of the same thread that touched the lease then would block the whole thread.
#ifndef HOLDFAST_KEEPALIVE_HPP
#define HOLDFAST_KEEPALIVE_HPP

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "holdfast/backoff.hpp"
#include "holdfast/clock.hpp"
#include "holdfast/detail/config.hpp"
#include "holdfast/detail/saturating.hpp"
#include "holdfast/error.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/lease/detail/batch_renew.hpp"
#include "holdfast/lease/detail/keepalive_port.hpp"
#include "holdfast/lease/detail/option_texts.hpp"
#include "holdfast/observer.hpp"
#include "holdfast/result.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

/// How a keepalive schedules renewals.
struct keepalive_options {
  /// When a renewal is due, as a fraction of the lease's TTL after its acquired_at(), in (0, 1).
  /// Default 1/2 (validity.hpp): a renewal that fails still leaves half the TTL to retry in. The
  /// renewal is never scheduled later than just before valid_until().
  double renew_fraction = 0.5;
  /// Spacing of retries after a transient renewal failure. Retries stop at the lease's
  /// valid_until(), so max_attempts is ignored. Default: 10 ms doubling to 1 s, full jitter.
  backoff_options retry{};
  /// On a clock that is neither steady_clock nor interruptible, how often (real time, ns) the
  /// thread reads the clock to see whether a renewal is due. Also the real-time pause after the
  /// clock itself threw. In (0, 1 h]; default 100 ms. (The bound keeps the wait's deadline,
  /// now + poll_interval on std::chrono::steady_clock, from overflowing.)
  std::chrono::nanoseconds poll_interval = std::chrono::milliseconds(100);
  /// Start the background thread (default). false: no thread; the owner calls poll().
  bool start_thread = true;
  /// At most this many renewals due in one poll() on one store go out in one pipelined call, when
  /// the store offers renew_batch (redis_store): all sent, then all replies read, each judged
  /// as its own renew() (lease/detail/batch_renew.hpp). 1: every renewal is its own round trip,
  /// as on a store without renew_batch. In [1, 65536]; default 256.
  std::size_t max_batch = 256;
  /// Told of every renewal this keepalive makes (renewed / renew_failed, keepalive = true) and
  /// every loss it notices (lost), on the keepalive's thread (observer.hpp). A lease's own
  /// observer (acquire_options::observer) hears its keepalive renewals too; when both are the
  /// same observer it is told once. Must outlive the keepalive. Default: none.
  lease_observer* observer = nullptr;

  /// Returns errc::invalid_argument if renew_fraction is not in (0, 1) (or NaN), the retry backoff
  /// is invalid (backoff_options::check), or poll_interval is not in (0, 1 h]; a zero error code
  /// otherwise.
  [[nodiscard]] std::error_code check() const noexcept {
    if (!(renew_fraction > 0.0 && renew_fraction < 1.0)) return errc::invalid_argument;
    if (std::error_code ec = retry.check()) return ec;
    if (poll_interval <= std::chrono::nanoseconds::zero() ||
        poll_interval > std::chrono::hours(1)) {
      return errc::invalid_argument;
    }
    if (max_batch < 1 || max_batch > 65536) return errc::invalid_argument;
    return {};
  }

  /// Returns what check() refuses, naming the field, its value and the limit ("renew_fraction of
  /// 1.5 is not in (0, 1)"); empty when check() passes.
  [[nodiscard]] std::string problem() const {
    if (!(renew_fraction > 0.0 && renew_fraction < 1.0)) {
      return "renew_fraction of " + detail::number_text(renew_fraction) + " is not in (0, 1)";
    }
    std::string why = detail::backoff_problem(retry, "retry");
    if (why.empty()) why = detail::interval_problem(poll_interval, "poll_interval");
    if (why.empty() && (max_batch < 1 || max_batch > 65536)) {
      why = "max_batch of " + std::to_string(max_batch) + " is not in [1, 65536]";
    }
    return why;
  }
};

/// Counters of what a keepalive has done, for observability and tests.
struct keepalive_stats {
  std::uint64_t renewals = 0;     ///< Renewals the store granted.
  std::uint64_t retries = 0;      ///< Renewal attempts that failed transiently (or threw).
  std::uint64_t losses = 0;       ///< Leases found lost (then dropped).
  std::uint64_t passes = 0;       ///< Completed poll() passes that found work due.
  std::uint64_t regressions = 0;  ///< Times poll() found the clock had gone backwards.
  std::uint64_t batches = 0;      ///< renew_batch calls (each renews several leases at once).
};

namespace detail {
inline std::uint64_t next_keepalive_id() noexcept {
  static std::atomic<std::uint64_t> counter{0};
  return counter.fetch_add(1, std::memory_order_relaxed) + 1;  // never 0: 0 means "none"
}
}  // namespace detail

/// A background renewer: one thread keeps many leases alive by renewing each at
/// `renew_fraction` of its TTL, retrying transient errors until the lease's validity runs out, and
/// turning it lost (with its on-loss callback) when it cannot. See the tables at the top of
/// keepalive.hpp. Leases on different stores may share one keepalive if they share its Clock type.
///
/// Thread-safety: every member may be called from any thread, concurrently. Not copyable or
/// movable (its thread refers to it). Do not call stop() or destroy the keepalive from a loss
/// callback running on the keepalive's own thread (stop() there only requests the stop).
/// Exceptions: a store, clock or callback exception on the keepalive thread is caught and
/// reported on the lease (errc::caught_exception in lease::last_error()); it never reaches
/// std::terminate.
template <class Clock = steady_clock>
HOLDFAST_REQUIRES(ttl_clock<Clock>)
class keepalive : public detail::lease_renewer<Clock> {
  static_assert(assert_ttl_clock<Clock>(),
                "holdfast::keepalive<Clock>: Clock must model ttl_clock");
  using target_type = detail::keepalive_target<Clock>;

 public:
  using clock_type = Clock;
  using time_point = typename Clock::time_point;

  /// Makes a keepalive sleeping on `clock` and, unless opts.start_thread is false, starts its
  /// thread. With invalid options (see keepalive_options::check) no thread starts, and error()
  /// and every add() report errc::invalid_argument.
  explicit keepalive(Clock clock = Clock{}, keepalive_options opts = {})
      : clock_(std::move(clock)),
        opts_(opts),
        config_error_(opts.check()),
        config_message_(config_error_ ? "holdfast: keepalive: invalid argument: " + opts.problem()
                                      : std::string()),
        id_(detail::next_keepalive_id()) {
    if (!config_error_ && opts_.start_thread) thread_ = std::thread([this] { run(); });
  }

  keepalive(const keepalive&) = delete;
  keepalive& operator=(const keepalive&) = delete;

  /// Stops and joins the thread (see stop()). The leases stay held until their TTL runs out.
  ~keepalive() override { stop(); }

  /// Returns errc::invalid_argument if the options were invalid; zero otherwise.
  [[nodiscard]] std::error_code error() const noexcept override { return config_error_; }

  /// Returns what error() refers to, naming the option, its value and the limit ("holdfast:
  /// keepalive: invalid argument: renew_fraction of 1.5 is not in (0, 1)"); empty if none.
  [[nodiscard]] const std::string& error_message() const noexcept { return config_message_; }

  /// Starts renewing `l`: its first renewal is due at renew_fraction of its TTL after its
  /// acquired_at(). Adding a lease this keepalive already renews does nothing. The lease moves its
  /// state into a shared block (one allocation) the first time a keepalive takes it; the handle
  /// stays movable, and when it is released or destroyed the keepalive drops it.
  /// \returns success; errc::lease_lost if `l` is not held (lost, releasing, released);
  ///   errc::invalid_argument if another keepalive renews `l`, the options are invalid, or this
  ///   keepalive was stopped.
  /// Exceptions: std::bad_alloc may propagate, with nothing changed.
  template <class Store>
  result<void> add(lease<Store, Clock>& l) {
    return detail::keep_alive(*this, l);
  }

  /// The lease_renewer port (detail/keepalive_port.hpp) that add() and distributed_mutex use:
  /// errc::invalid_argument if the options are invalid or this keepalive was stopped.
  [[nodiscard]] std::error_code admission() const override {
    if (config_error_) return config_error_;
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return errc::invalid_argument;
    return {};
  }

  /// The lease_renewer port: starts renewing a lease's shared block (add() shares it first).
  result<void> add_shared(const std::shared_ptr<target_type>& t) override {
    result<std::pair<time_point, bool>> due = t->attach(id_, opts_.renew_fraction);
    if (!due) return due.error();
    if (!due->second) return {};  // already ours
      // The lease is attached now; if scheduling it fails (bad_alloc), detach it again, or a
      // retried add() would find it "already ours" and it would never be renewed.
#if HOLDFAST_HAS_EXCEPTIONS
    try {
#endif
      if (schedule(t, due->first, t->last_reading())) return {};
#if HOLDFAST_HAS_EXCEPTIONS
    } catch (...) {
      t->detach(id_);
      throw;
    }
#endif
    t->detach(id_);
    return errc::invalid_argument;
  }

 private:
  // Puts an attached lease on the schedule; false if the keepalive is stopping.
  // `seen` is the lease's latest clock reading: a later poll() that reads the clock earlier than
  // it knows the clock went backwards, even if the jump came before this keepalive's first poll.
  bool schedule(const std::shared_ptr<target_type>& t, time_point due, time_point seen) {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return false;
    if (!last_now_ || *last_now_ < seen) last_now_ = seen;
    backoff_options retry = opts_.retry;
    retry.max_attempts = 0;
    if (retry.seed) retry.seed = *retry.seed + (++seq_);
    schedule_.emplace(due, entry(t, t.get(), retry));
    ++size_;
    wake_locked();
    return true;
  }

 public:
  /// Stops renewing `l`; the lease itself stays as it is (held until its TTL runs out, unless
  /// renewed by hand). Returns once any renewal of `l` in flight has finished; after that this
  /// keepalive sends no renewal of `l`. Does nothing if this keepalive does not renew `l`.
  template <class Store>
  void remove(lease<Store, Clock>& l) {
    std::shared_ptr<target_type> t = detail::lease_access::shared_block(l);
    if (!t) return;
    t->detach(id_);
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = schedule_.begin(); it != schedule_.end(); ++it) {
      if (it->second.raw == t.get()) {
        schedule_.erase(it);
        --size_;
        return;
      }
    }
    // An entry in flight in a poll() is dropped there, when its step ends. Marked here rather than
    // left to step() finding it detached: an add() right after this remove() attaches the lease
    // again and schedules a new entry, and the in-flight one must not come back beside it.
    for (const void* r : in_flight_) {
      if (r == t.get()) {
        if (std::find(cancelled_.begin(), cancelled_.end(), r) == cancelled_.end()) {
          cancelled_.push_back(r);
        }
        return;
      }
    }
  }

  /// Stops the keepalive for good: wakes and joins its thread, waits for a poll() in progress to
  /// finish its current store call, and detaches every lease. Prompt: it never waits on the clock,
  /// only for a store call already in flight. After it returns no renewal from this keepalive
  /// reaches any store. Idempotent. From a loss callback on the keepalive thread it only requests
  /// the stop (a thread cannot join itself); the destructor then completes it.
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      wake_locked();
    }
    if (thread_.joinable()) {
      if (thread_.get_id() == std::this_thread::get_id()) return;
      thread_.join();
    }
    std::lock_guard<std::mutex> poll_lock(poll_mu_);  // a poll() on another thread finishes first
    std::multimap<time_point, entry> dropped;
    {
      std::lock_guard<std::mutex> lock(mu_);
      dropped.swap(schedule_);
      size_ = 0;
    }
    for (auto& kv : dropped) {
      if (std::shared_ptr<target_type> t = kv.second.block.lock()) t->detach(id_);
    }
  }

  /// Returns true once stop() has been called.
  [[nodiscard]] bool stopped() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stopping_;
  }

  /// Returns how many leases this keepalive renews, counting ones released or destroyed since
  /// their last renewal (they are dropped when next due).
  [[nodiscard]] std::size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return size_;
  }

  /// Returns the counters (a consistent snapshot).
  [[nodiscard]] keepalive_stats stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

  /// Returns the latest error of the keepalive itself (not of a lease): errc::caught_exception if
  /// its clock threw on the keepalive thread; zero if none.
  [[nodiscard]] std::error_code last_error() const {
    std::lock_guard<std::mutex> lock(mu_);
    return last_error_;
  }

  /// Renews every lease that is due at clock.now(), on the calling thread, and returns when the
  /// next renewal is due (nullopt if no lease is kept alive, or after stop()). If the clock reads
  /// earlier than at the previous poll() (it went backwards), every lease is due at once: each
  /// finds the regression and turns lost with loss_cause::clock_regressed (or renews, if it had
  /// not read the clock since); stats().regressions counts these polls. The background
  /// thread calls it; without the thread (start_thread = false) call it yourself, sleeping until
  /// the instant it returns. Calls are serialized with each other.
  ///
  /// Driving it yourself on a clock that can jump back (a wall clock, a user's clock; not
  /// steady_clock): do not sleep *until* the returned instant on that clock. After a jump back
  /// by J, that instant is J further away, so `clock.sleep_until(*next)` sleeps for J as well,
  /// every lease expires meanwhile, and the poll that would have seen the regression comes too
  /// late. Sleep for a *duration* on a steady time instead, and cap it by the shortest renew
  /// interval, so a regression is seen by the next poll:
  ///
  ///   while (auto next = ka.poll()) {
  ///     auto wait = *next - clock.now();  // a duration, not an instant (<= 0: poll at once)
  ///     if (wait > cap) wait = cap;       // cap: e.g. the shortest TTL / 3
  ///     std::this_thread::sleep_for(wait);  // steady time: a jump of `clock` does not stretch it
  ///   }
  ///
  /// Then a jump back is seen within `cap` and its leases turn lost with clock_regressed while
  /// the store may still hold them, never after. An event loop does the same with a relative
  /// timer (a timerfd or asio::steady_timer armed with the duration, not the instant). On an
  /// interruptible clock (manual_clock) sleep_until is safe: a jump back ends the sleep
  /// (clock.hpp).
  /// Exceptions: one thrown by the clock's now() propagates, with nothing changed; store and
  /// callback exceptions are caught and reported on their lease.
  std::optional<time_point> poll() {
    std::lock_guard<std::mutex> poll_lock(poll_mu_);
    if (config_error_) return std::nullopt;
    const time_point now = clock_.now();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return std::nullopt;
      if (last_now_ && now < *last_now_) {
        // The clock went backwards: every renewal instant on the schedule now lies further away
        // than it did, by the size of the jump. Look at every lease at once instead: each reads
        // its clock, finds the regression and turns lost (clock_regressed, with its callback),
        // or, if it had not read the clock since the jump's target, renews.
        ++stats_.regressions;
        std::multimap<time_point, entry> all;
        all.swap(schedule_);
        while (!all.empty()) {
          node_type node = all.extract(all.begin());
          node.key() = now;
          schedule_.insert(std::move(node));
        }
      }
      last_now_ = now;
      batch_.clear();
      in_flight_.clear();
      cancelled_.clear();
      while (!schedule_.empty() && !(now < schedule_.begin()->first)) {
        batch_.push_back(schedule_.extract(schedule_.begin()));
        in_flight_.push_back(batch_.back().mapped().raw);
      }
      if (!batch_.empty()) ++stats_.passes;
    }
    const std::size_t batches = renew_due();
    if (batches != 0) {
      std::lock_guard<std::mutex> lock(mu_);
      stats_.batches += batches;
    }
    for (std::size_t i = 0; i < batch_.size(); ++i) {
      node_type& node = batch_[i];
      const detail::keepalive_step<Clock>& s = steps_[i];
      std::lock_guard<std::mutex> lock(mu_);
      const auto cancelled = std::find(cancelled_.begin(), cancelled_.end(), node.mapped().raw);
      if (cancelled != cancelled_.end()) {  // remove()d while in flight (and maybe added again)
        cancelled_.erase(cancelled);
        --size_;
        continue;
      }
      switch (s.outcome) {
        case detail::keepalive_outcome::renewed:
          ++stats_.renewals;
          node.mapped().retry = backoff(node.mapped().retry_options);
          node.key() = s.next;
          schedule_.insert(std::move(node));
          break;
        case detail::keepalive_outcome::retry: {
          ++stats_.retries;
          time_point at = detail::saturating_add(now, node.mapped().retry.next_delay());
          if (s.valid_until < at) at = s.valid_until;  // the last try, where loss is noticed
          node.key() = at;
          schedule_.insert(std::move(node));
          break;
        }
        case detail::keepalive_outcome::lost:
          ++stats_.losses;
          --size_;
          break;
        case detail::keepalive_outcome::done:
          --size_;
          break;
      }
    }
    batch_.clear();
    steps_.clear();
    std::lock_guard<std::mutex> lock(mu_);
    in_flight_.clear();
    cancelled_.clear();
    if (stopping_ || schedule_.empty()) return std::nullopt;
    return schedule_.begin()->first;
  }

 private:
  struct entry {
    entry(std::weak_ptr<target_type> b, const void* r, const backoff_options& o)
        : block(std::move(b)), raw(r), retry_options(o), retry(o) {}
    std::weak_ptr<target_type> block;
    const void* raw;  // identity only (the weak_ptr keeps the memory, so it is never reused)
    backoff_options retry_options;
    holdfast::backoff retry;
  };
  using node_type = typename std::multimap<time_point, entry>::node_type;

  // [poll_mu_] Renews the leases of batch_ (outcomes in steps_, in batch_'s order): those whose
  // store has renew_batch in groups of at most max_batch per store (detail::batch_plan; a group
  // of one too, so one path serves every renewal on such a store), the others one by one by
  // step(). Returns the number of renew_batch calls.
  std::size_t renew_due() {
    const std::size_t n = batch_.size();
    steps_.assign(n, detail::keepalive_step<Clock>{});
    targets_.clear();
    for (std::size_t i = 0; i < n; ++i) {
      targets_.push_back(batch_[i].mapped().block.lock());  // null: the lease was destroyed
    }
    plan_.make(n, opts_.max_batch, [this](std::size_t i) {
      return targets_[i] ? targets_[i]->batch() : detail::batch_key{};
    });
    std::size_t calls = 0;
    for (const auto& g : plan_.groups) {
      const std::size_t first = plan_.order[g.first].second;
      if (!targets_[first]) continue;
      if (!plan_.order[g.first].first) {  // a store without renew_batch, or max_batch == 1
        steps_[first] = targets_[first]->step(id_, opts_.renew_fraction, opts_.observer);
        continue;
      }
      group_.clear();
      for (std::size_t j = g.first; j < g.second; ++j) {
        group_.push_back(targets_[plan_.order[j].second].get());
      }
      out_.assign(group_.size(), detail::keepalive_step<Clock>{});
      targets_[first]->step_batch(group_.data(), group_.size(), id_, opts_.renew_fraction,
                                  opts_.observer, out_.data());
      for (std::size_t j = g.first; j < g.second; ++j) {
        steps_[plan_.order[j].second] = out_[j - g.first];
      }
      ++calls;
    }
    targets_.clear();  // no lease block outlives its poll here
    return calls;
  }

  void wake_locked() {
    wake_.store(true, std::memory_order_release);
    cv_.notify_all();
    if constexpr (is_interruptible_clock_v<Clock>) clock_.wake_sleepers();
  }

  void run() noexcept {
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stopping_) return;
        wake_.store(false, std::memory_order_release);
      }
      HOLDFAST_TRY {
        const std::optional<time_point> next = poll();
        sleep_until(next);
      }
      HOLDFAST_CATCH_ALL {
        // The clock threw: nothing to sleep on. Record it and pause in real time instead.
        std::unique_lock<std::mutex> lock(mu_);
        last_error_ = make_error_code(errc::caught_exception);
        cv_.wait_for(lock, opts_.poll_interval, [this] { return stopping_; });
      }
    }
  }

  // Sleeps until `next` (forever if nullopt) or until add()/stop() wakes the thread.
  void sleep_until(const std::optional<time_point>& next) {
    if constexpr (std::is_same_v<Clock, steady_clock>) {
      std::unique_lock<std::mutex> lock(mu_);
      const auto woken = [this] { return stopping_ || wake_.load(std::memory_order_acquire); };
      if (next) {
        cv_.wait_until(lock, *next, woken);
      } else {
        cv_.wait(lock, woken);
      }
    } else if constexpr (is_interruptible_clock_v<Clock>) {
      clock_.sleep_until(next ? *next : time_point::max(),
                         [this] { return wake_.load(std::memory_order_acquire); });
    } else {
      // Neither steady nor interruptible: a sleep on this clock could not be cut short, and a
      // stop() must never wait for someone else's clock to move. Look at the clock every
      // poll_interval of real time instead (simulators drive poll() themselves; see above).
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, opts_.poll_interval,
                   [this] { return stopping_ || wake_.load(std::memory_order_acquire); });
      (void)next;
    }
  }

  Clock clock_;
  const keepalive_options opts_;
  const std::error_code config_error_;
  const std::string config_message_;
  const std::uint64_t id_;

  mutable std::mutex mu_;  // guards everything below except batch_ (guarded by poll_mu_)
  std::condition_variable cv_;
  std::atomic<bool> wake_{false};
  bool stopping_ = false;
  std::multimap<time_point, entry> schedule_;
  std::size_t size_ = 0;
  std::uint64_t seq_ = 0;
  keepalive_stats stats_{};
  std::error_code last_error_{};
  std::optional<time_point> last_now_;  // the clock's reading at the latest poll()
  std::vector<const void*> in_flight_;  // the leases of the poll() in progress (its batch_)
  std::vector<const void*> cancelled_;  // of those, the ones remove()d meanwhile

  std::mutex poll_mu_;  // one poll() at a time; stop() waits on it for an in-flight store call
  std::vector<node_type> batch_;  // below: guarded by poll_mu_, reused from poll to poll
  std::vector<detail::keepalive_step<Clock>> steps_;  // batch_[i]'s outcome
  std::vector<std::shared_ptr<target_type>> targets_;
  detail::batch_plan plan_;
  std::vector<target_type*> group_;
  std::vector<detail::keepalive_step<Clock>> out_;

  std::thread thread_;  // last: started once everything above is constructed
};

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_KEEPALIVE_HPP
