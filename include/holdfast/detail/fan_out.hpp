// holdfast/detail/fan_out.hpp - fan_out<Member, Clock>: send one request to many members at once,
// wait for enough replies, and handle the replies that come too late.
//
// The executor under quorum_store (quorum.hpp), kept apart from the protocol so that the quorum
// reads as the protocol alone and the dispatch can change without touching it:
//
//   piece           | what it is
//   ----------------+--------------------------------------------------------------------------
//   fan_out_worker  | one thread serving one member, FIFO, with a bounded queue
//   fan_out_round   | one round of requests, shared by the caller and the workers: each member's
//                   | slot (idle, pending, on_time, late, done, skipped), its reply, the first
//                   | exception a member threw, and what to do with a late reply
//   fan_out         | the members, their workers (none: sequential), the clock; run_round() sends
//                   | and waits, finalize() declares the outcome and hands late replies over,
//                   | in_member_context() runs clean-ups where a member may be called
//
// Threads: a member is only ever called from its own worker, so it needs no locking of its own;
// the caller waits in real time (std::chrono::steady_clock) until the round is decided, every
// reply is in, or the wait runs out. Sequential (no workers): the members are called one after
// another in the caller's thread, and a reply that took longer than the wait on the executor's
// clock counts as late. Not for users.
#ifndef HOLDFAST_DETAIL_FAN_OUT_HPP
#define HOLDFAST_DETAIL_FAN_OUT_HPP

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/detail/saturating.hpp"
#include "holdfast/error.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

// One worker thread serving one member, FIFO. Tasks never throw (the executor wraps them).
class fan_out_worker {
 public:
  explicit fan_out_worker(std::size_t max_queued)
      : max_queued_(max_queued), thread_([this] { run(); }) {}
  fan_out_worker(const fan_out_worker&) = delete;
  fan_out_worker& operator=(const fan_out_worker&) = delete;

  // Finishes every queued task (releases and clean-ups among them), then joins.
  ~fan_out_worker() {
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
enum class fan_out_slot : unsigned char {
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
struct fan_out_round {
  using late_fn = std::function<void(std::size_t, R&)>;
  using replies = std::vector<std::optional<R>>;
  // Whether the outcome is known from the replies in so far and the number still outstanding.
  using decided_fn = std::function<bool(const replies&, std::size_t)>;

  explicit fan_out_round(std::size_t n) : state(n, fan_out_slot::idle), reply(n), on_time(n) {}

  // The caller needs waking: every reply is in, or the ones in decide the outcome. Evaluated by
  // the worker that files a reply, so the caller wakes once per round, not once per reply.
  bool ready() const { return outstanding == 0 || (decided && decided(on_time, outstanding)); }

  std::mutex mutex;
  std::condition_variable cv;
  std::vector<fan_out_slot> state;
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

// What run_round() returns to the caller.
template <class R>
struct fan_out_reply {
  std::shared_ptr<fan_out_round<R>> round;
  std::vector<std::optional<R>> on_time;  // replies that came while the caller waited
  // Members that count as failed for want of a reply: late (sequential), still outstanding
  // when the wait ran out, or never sent (queue full). Not those still outstanding when the
  // replies in had already decided the outcome: they might have answered anything.
  std::size_t unanswered = 0;
};

// The executor: `Member` is any type the calls take by reference; `Clock` times sequential calls.
template <class Member, class Clock>
class fan_out {
 public:
  using time_point = typename Clock::time_point;

  fan_out(std::vector<Member*> members, Clock clock)
      : members_(std::move(members)), clock_(std::move(clock)) {}
  fan_out(const fan_out&) = delete;
  fan_out& operator=(const fan_out&) = delete;
  // Waits for every member's queued tasks (late clean-ups among them), then stops the workers.
  ~fan_out() = default;

  // Starts one worker per member, each queueing at most `max_queued` tasks. Without this call
  // the executor is sequential.
  void start_workers(std::size_t max_queued) {
    workers_.reserve(members_.size());
    for (std::size_t i = 0; i < members_.size(); ++i) {
      workers_.push_back(std::make_unique<fan_out_worker>(max_queued));
    }
  }

  [[nodiscard]] std::size_t size() const noexcept { return members_.size(); }
  [[nodiscard]] Member& member(std::size_t i) const noexcept { return *members_[i]; }
  [[nodiscard]] const std::vector<Member*>& members() const noexcept { return members_; }
  [[nodiscard]] const Clock& clock() const noexcept { return clock_; }

  // Every member's index, 0 .. size()-1.
  std::vector<std::size_t> all_members() const {
    std::vector<std::size_t> v(members_.size());
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = i;
    return v;
  }

  // Sends `call` to `targets` and waits until every reply is in, `decided` says the outcome is
  // known, or `wait` has passed. Returns the replies that arrived in time; the round object keeps
  // collecting the rest for finalize().
  // R is the reply type, constructible from errc: a member that throws answers
  // errc::store_unavailable (the exception is kept for rethrow_member_exception()).
  template <class R, class Call, class Decided>
  fan_out_reply<R> run_round(const std::vector<std::size_t>& targets, bool skip_unstarted,
                             std::chrono::nanoseconds wait, Call call, Decided decided) const {
    auto round = std::make_shared<fan_out_round<R>>(members_.size());
    round->skip_unstarted = skip_unstarted;
    fan_out_reply<R> out{round, std::vector<std::optional<R>>(members_.size())};
    if constexpr (!std::is_same_v<Decided, std::nullptr_t>) round->decided = std::move(decided);
    if (workers_.empty()) {
      const auto limit = std::chrono::duration_cast<typename Clock::duration>(wait);
      for (std::size_t i : targets) {
        const time_point t0 = clock_.now();
        std::optional<R> r = invoke_member<R>(*round, i, *members_[i], call);
        const time_point t1 = clock_.now();
        const bool late = t1 < t0 || detail::saturating_sub(t1, t0) > limit;
        std::lock_guard<std::mutex> lock(round->mutex);
        round->state[i] = late ? fan_out_slot::late : fan_out_slot::on_time;
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
        round->state[i] = fan_out_slot::pending;
        ++round->outstanding;
      }
      Member* member = members_[i];
      const bool posted =
          workers_[i]->post([round, i, member, call] { run_slot<R>(*round, i, *member, call); });
      if (!posted) {
        std::lock_guard<std::mutex> lock(round->mutex);
        round->state[i] = fan_out_slot::skipped;
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
  static std::optional<R> invoke_member(fan_out_round<R>& round, std::size_t i, Member& member,
                                        const Call& call) {
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
  static void run_slot(fan_out_round<R>& round, std::size_t i, Member& member, const Call& call) {
    {
      std::lock_guard<std::mutex> lock(round.mutex);
      if (round.abandoned && round.skip_unstarted) {
        round.state[i] = fan_out_slot::skipped;
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
        round.state[i] = fan_out_slot::on_time;
        round.on_time[i] = round.reply[i];
        if (round.ready()) round.cv.notify_all();
      } else if (!round.finalized) {
        round.state[i] = fan_out_slot::late;
      } else {
        round.state[i] = fan_out_slot::done;
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
  void finalize(const std::shared_ptr<fan_out_round<R>>& round,
                typename fan_out_round<R>::late_fn on_late, bool drop_unstarted = false) const {
    std::vector<std::size_t> late;
    {
      std::lock_guard<std::mutex> lock(round->mutex);
      round->abandoned = true;
      if (drop_unstarted) round->skip_unstarted = true;
      round->finalized = true;
      round->on_late = on_late;
      for (std::size_t i = 0; i < round->state.size(); ++i) {
        if (round->state[i] == fan_out_slot::late) {
          round->state[i] = fan_out_slot::done;
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
    if (!workers_.empty()) {
      (void)workers_[i]->post(std::function<void()>(std::move(fn)));
    } else {
      fn();
    }
  }

  template <class R>
  static void rethrow_member_exception(const std::shared_ptr<fan_out_round<R>>& round) {
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

 private:
  std::vector<Member*> members_;
  Clock clock_;
  std::vector<std::unique_ptr<fan_out_worker>> workers_;  // last: joined first
};

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_DETAIL_FAN_OUT_HPP
