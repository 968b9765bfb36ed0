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

#if defined(__has_include)
#if __has_include(<poll.h>)
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>
#define HOLDFAST_DETAIL_HAS_POLL 1
#endif
#endif
#ifndef HOLDFAST_DETAIL_HAS_POLL
#define HOLDFAST_DETAIL_HAS_POLL 0  // no poll(): the split dispatch is off, workers do it all
#endif

#include <cerrno>
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
#include "holdfast/result.hpp"
#include "holdfast/send_receive.hpp"
#include "holdfast/store.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

// One worker thread serving one member, FIFO, with a bounded queue. Tasks never throw (the
// executor wraps them).
//
// The claim: whoever calls the member holds it. The worker takes it for each task it runs; the
// caller's thread takes it with try_claim() to put a request on the wire itself (split dispatch),
// and only when the worker is idle with nothing queued, so member calls keep their FIFO order. A
// request the caller started and stopped waiting for is finished on the worker by a task posted
// with post_claimed(): it carries the caller's claim and runs before anything else queued. So a
// task never waits for a claim that only a task behind it could give back.
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
      queue_.push_back(item{std::move(task), false});
    }
    cv_.notify_one();
    return true;
  }

  // Takes the claim for the calling thread if the worker is idle and nothing is queued.
  bool try_claim() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (claimed_ || !queue_.empty()) return false;
    claimed_ = true;
    return true;
  }

  // Gives back the claim try_claim() took. Wakes the worker only if a task waits for the claim:
  // a wake-up for nothing would cost the very hand-off the caller's thread is avoiding.
  void release_claim() {
    bool waiting = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      claimed_ = false;
      waiting = !queue_.empty();
    }
    if (waiting) cv_.notify_one();
  }

  // Hands the caller's claim to `task`, queued ahead of everything; never refused (it finishes a
  // request already on the wire, which must be read).
  void post_claimed(std::function<void()> task) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_front(item{std::move(task), true});
    }
    cv_.notify_one();
  }

 private:
  struct item {
    std::function<void()> task;
    bool claimed;  // carries the claim of the thread that posted it
  };

  void run() {
    for (;;) {
      item next;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [this] {
          return (stop_ && queue_.empty()) ||
                 (!queue_.empty() && (queue_.front().claimed || !claimed_));
        });
        if (queue_.empty()) return;
        next = std::move(queue_.front());
        queue_.pop_front();
        claimed_ = true;
      }
      next.task();
      {
        std::lock_guard<std::mutex> lock(mutex_);
        claimed_ = false;
      }
    }
  }

  std::size_t max_queued_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<item> queue_;
  bool claimed_ = false;  // someone is calling the member
  bool stop_ = false;
  std::thread thread_;  // last: starts once everything it uses exists
};

// A call for run_round() that the split dispatch can put on the wire: `request(i)` gives member
// i's request (nullopt: the blocking call answers without the member, e.g. naive_max's missing
// token), and the call itself is the blocking form for workers and sequential dispatch.
template <class Request, class Blocking>
struct split_call {
  Request request;
  Blocking blocking;
  template <class Member>
  auto operator()(std::size_t i, Member& m) const -> decltype(blocking(i, m)) {
    return blocking(i, m);
  }
};
template <class Request, class Blocking>
split_call<Request, Blocking> make_split_call(Request request, Blocking blocking) {
  return split_call<Request, Blocking>{std::move(request), std::move(blocking)};
}
template <class C>
struct is_split_call : std::false_type {};
template <class Request, class Blocking>
struct is_split_call<split_call<Request, Blocking>> : std::true_type {};

// The field of a store_reply that an operation returning R fills.
template <class R>
R reply_as(store_reply&& r) {
  if constexpr (std::is_same_v<R, result<grant>>) {
    return r.granted;
  } else if constexpr (std::is_same_v<R, result<void>>) {
    return r.done;
  } else {
    static_assert(std::is_same_v<R, result<std::optional<lease_record>>>);
    return std::move(r.record);
  }
}

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
  // Split dispatch with some of the round's requests on workers: the caller polls wake_read
  // along with the members' sockets, and a worker that files an on-time reply writes a byte to
  // wake_write. -1 when unused. Closed with the round (workers hold it while they write).
  int wake_read = -1;
  int wake_write = -1;

  fan_out_round(const fan_out_round&) = delete;
  fan_out_round& operator=(const fan_out_round&) = delete;
  ~fan_out_round() {
#if HOLDFAST_DETAIL_HAS_POLL
    if (wake_read >= 0) ::close(wake_read);
    if (wake_write >= 0) ::close(wake_write);
#endif
  }
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

  // Lets run_round() put split calls on the wire from the caller's thread (see run_split), when
  // the members have the send/receive capability. Needs the workers (start_workers) too: they
  // take the requests the caller cannot start without blocking, and the late replies.
  void enable_split() noexcept {
    split_ = HOLDFAST_DETAIL_HAS_POLL && has_send_receive_v<Member> && !workers_.empty();
  }
  // True when the members are called in the caller's thread, one after another (no workers).
  [[nodiscard]] bool sequential() const noexcept { return workers_.empty(); }

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
#if HOLDFAST_DETAIL_HAS_POLL
    if constexpr (has_send_receive_v<Member> && is_split_call<Call>::value) {
      if (split_) return run_split<R>(targets, skip_unstarted, wait, call, std::move(out));
    }
#endif
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
    for (std::size_t i : targets) post_slot<R>(out, i, call);
    return await_workers(skip_unstarted, deadline, std::move(out));
  }

  // Queues member i's request of the round on its worker.
  template <class R, class Call>
  void post_slot(fan_out_reply<R>& out, std::size_t i, const Call& call) const {
    const std::shared_ptr<fan_out_round<R>>& round = out.round;
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

  // Waits (condition variable) until the workers' replies decide the round or `deadline`.
  template <class R>
  fan_out_reply<R> await_workers(bool skip_unstarted,
                                 std::chrono::steady_clock::time_point deadline,
                                 fan_out_reply<R> out) const {
    const std::shared_ptr<fan_out_round<R>>& round = out.round;
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
    file_reply<R>(round, i, invoke_member<R>(round, i, member, call));
  }

  // Files member i's reply `r` of the round: on time (waking the caller once the round is
  // ready), late (kept for finalize), or handed to the clean-up at once (already finalized).
  // Called on a worker, or by the caller's thread for a reply it read itself.
  template <class R>
  static void file_reply(fan_out_round<R>& round, std::size_t i, std::optional<R> r) {
    std::function<void(std::size_t, R&)> late;
    {
      std::lock_guard<std::mutex> lock(round.mutex);
      --round.outstanding;
      round.reply[i] = std::move(r);
      if (!round.abandoned) {
        round.state[i] = fan_out_slot::on_time;
        round.on_time[i] = round.reply[i];
        if (round.ready()) round.cv.notify_all();
#if HOLDFAST_DETAIL_HAS_POLL
        if (round.wake_write >= 0) {
          const char byte = 0;
          (void)!::write(round.wake_write, &byte, 1);  // non-blocking; a full pipe already wakes
        }
#endif
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

  // Reads member i's reply to the split request the caller's thread started (receive() waits
  // at most the member's own timeout) and files it. Runs on the worker, holding the claim.
  template <class R>
  static void finish_slot(fan_out_round<R>& round, std::size_t i, Member& member) {
    std::optional<R> r;
    HOLDFAST_TRY {
      r.emplace(reply_as<R>(member.receive()));
    }
    HOLDFAST_CATCH_ALL {
      keep_exception(round);
      r.emplace(errc::store_unavailable);
    }
    file_reply<R>(round, i, std::move(r));
  }

  template <class R>
  static void keep_exception(fan_out_round<R>& round) {
#if HOLDFAST_HAS_EXCEPTIONS
    std::lock_guard<std::mutex> lock(round.mutex);
    if (!round.exception) round.exception = std::current_exception();
#else
    (void)round;
#endif
  }

  // The split dispatch (members with the send/receive capability): the caller's thread claims
  // each member, puts every request on the wire (send), and poll()s all their sockets at once,
  // taking replies as they come, until the round is decided, every reply is in, or `wait` has
  // passed: no thread hand-off on the way. A member it cannot claim (its worker is busy or has
  // work queued, e.g. another caller's request) or whose send() declines (not connected yet:
  // connecting blocks) gets its request through its worker instead, and the caller polls a pipe
  // the worker writes to when it files the reply. Requests still in flight when the caller stops
  // waiting are finished on their workers (post_claimed): their replies are read and filed as
  // late, so a late grant is given back or joins the lease exactly as under threads.
#if HOLDFAST_DETAIL_HAS_POLL
  template <class R, class Call>
  fan_out_reply<R> run_split(const std::vector<std::size_t>& targets, bool skip_unstarted,
                             std::chrono::nanoseconds wait, const Call& call,
                             fan_out_reply<R> out) const {
    const std::shared_ptr<fan_out_round<R>>& round = out.round;
    const auto deadline = detail::saturating_add(std::chrono::steady_clock::now(), wait);
    std::vector<std::size_t> flying;  // claimed, request on the wire
    flying.reserve(targets.size());
    bool through_workers = false;
    for (std::size_t i : targets) {
      std::optional<store_request> request = call.request(i);
      if (!request) {  // answered without the member
        {
          std::lock_guard<std::mutex> lock(round->mutex);
          round->state[i] = fan_out_slot::pending;
          ++round->outstanding;
        }
        file_reply<R>(*round, i, invoke_member<R>(*round, i, *members_[i], call));
        continue;
      }
      if (workers_[i]->try_claim()) {
        std::error_code ec = send_would_block();
        HOLDFAST_TRY {
          ec = members_[i]->send(*request);
        }
        HOLDFAST_CATCH_ALL {
          keep_exception(*round);
          ec = errc::store_unavailable;
        }
        if (!ec) {
          std::lock_guard<std::mutex> lock(round->mutex);
          round->state[i] = fan_out_slot::pending;
          ++round->outstanding;
          flying.push_back(i);
          continue;
        }
        workers_[i]->release_claim();
        if (ec != send_would_block()) {  // not sent; the store says why
          {
            std::lock_guard<std::mutex> lock(round->mutex);
            round->state[i] = fan_out_slot::pending;
            ++round->outstanding;
          }
          file_reply<R>(*round, i, std::optional<R>(R(ec)));
          continue;
        }
      }
      post_slot<R>(out, i, call);
      through_workers = true;
    }
    if (through_workers && !flying.empty() && !open_wake(*round)) {
      for (std::size_t i : flying) hand_to_worker<R>(round, i);  // no pipe: all on the workers
      flying.clear();
    }
    std::vector<struct pollfd> fds;
    fds.reserve(flying.size() + 1);
    // Which flying members to ask for progress: those poll() found ready (or that said they were
    // complete). Asking the others would cost a recv() each that finds nothing.
    std::vector<char> check(flying.size(), 0);
    bool decided_in_time = false;
    for (;;) {
      // Take every reply that is complete, in whatever order they came.
      for (std::size_t k = 0; k < flying.size();) {
        const std::size_t i = flying[k];
        if (!check[k]) {
          ++k;
          continue;
        }
        check[k] = 0;
        bool complete = true;
        HOLDFAST_TRY {
          complete = members_[i]->progress();
        }
        HOLDFAST_CATCH_ALL {
          keep_exception(*round);
        }
        if (!complete) {
          ++k;
          continue;
        }
        std::optional<R> r;
        HOLDFAST_TRY {
          r.emplace(reply_as<R>(members_[i]->receive()));
        }
        HOLDFAST_CATCH_ALL {
          keep_exception(*round);
          r.emplace(errc::store_unavailable);
        }
        workers_[i]->release_claim();
        file_reply<R>(*round, i, std::move(r));
        flying[k] = flying.back();
        flying.pop_back();
        check[k] = check.back();
        check.pop_back();
      }
      {
        std::lock_guard<std::mutex> lock(round->mutex);
        if (round->ready()) {
          decided_in_time = true;
          break;
        }
      }
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) break;
      if (flying.empty()) {
        if (!through_workers) break;
        return await_workers(skip_unstarted, deadline, std::move(out));  // only workers left
      }
      fds.clear();
      bool ready_now = false;
      for (std::size_t k = 0; k < flying.size(); ++k) {
        const std::size_t i = flying[k];
        io_interest want;
        HOLDFAST_TRY {
          want = members_[i]->interest();
        }
        HOLDFAST_CATCH_ALL {
          keep_exception(*round);
        }
        if (want.fd < 0) {
          ready_now = true;
          check[k] = 1;
        }
        struct pollfd p {};
        p.fd = want.fd;  // poll() ignores a negative fd
        p.events = static_cast<short>((want.read ? POLLIN : 0) | (want.write ? POLLOUT : 0));
        fds.push_back(p);
      }
      if (ready_now) continue;
      if (round->wake_read >= 0) {
        struct pollfd p {};
        p.fd = round->wake_read;
        p.events = POLLIN;
        fds.push_back(p);
      }
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count();
      const int ms = static_cast<int>(left < 1 ? 1 : (left > (1 << 30) ? (1 << 30) : left));
      if (::poll(fds.data(), static_cast<nfds_t>(fds.size()), ms) < 0 && errno != EINTR) break;
      for (std::size_t k = 0; k < flying.size(); ++k) check[k] = fds[k].revents != 0 ? 1 : 0;
      if (round->wake_read >= 0) {
        char drain[64];
        while (::read(round->wake_read, drain, sizeof drain) > 0) {
        }
      }
    }
    {
      std::lock_guard<std::mutex> lock(round->mutex);
      round->abandoned = true;
      round->skip_unstarted = skip_unstarted && !decided_in_time;
      if (!decided_in_time) out.unanswered += round->outstanding;
      out.on_time = round->on_time;
    }
    for (std::size_t i : flying) hand_to_worker<R>(round, i);
    return out;
  }
#endif

  // Opens the round's wake pipe (non-blocking, close-on-exec); false if the system refuses.
  template <class R>
  static bool open_wake(fan_out_round<R>& round) {
    int fds[2];
    if (::pipe(fds) != 0) return false;
    for (int fd : fds) {
      (void)::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
      (void)::fcntl(fd, F_SETFD, FD_CLOEXEC);
    }
    std::lock_guard<std::mutex> lock(round.mutex);
    round.wake_read = fds[0];
    round.wake_write = fds[1];
    return true;
  }

  // Hands member i's request on the wire (and the caller's claim) to its worker, to be read and
  // filed there.
  template <class R>
  void hand_to_worker(const std::shared_ptr<fan_out_round<R>>& round, std::size_t i) const {
    Member* member = members_[i];
    workers_[i]->post_claimed([round, i, member] { finish_slot<R>(*round, i, *member); });
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
  bool split_ = false;
  std::vector<std::unique_ptr<fan_out_worker>> workers_;  // last: joined first
};

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_DETAIL_FAN_OUT_HPP
