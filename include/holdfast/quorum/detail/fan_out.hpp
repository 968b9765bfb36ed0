// SPDX-License-Identifier: MIT
// holdfast/quorum/detail/fan_out.hpp - fan_out<Member, Clock>: send one request to many members at
// once, wait for enough replies, and handle the replies that come too late.
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
//
// fan_out_worker lives in detail/fan_out_worker.hpp, fan_out_round and the steps that file a
// member's reply in detail/fan_out_round.hpp; this file is the dispatch: sequential, through the
// workers, and split (requests put on the wire from the caller's thread, replies taken as they
// come from one poll()).
#ifndef HOLDFAST_QUORUM_DETAIL_FAN_OUT_HPP
#define HOLDFAST_QUORUM_DETAIL_FAN_OUT_HPP

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/detail/saturating.hpp"
#include "holdfast/error.hpp"
#include "holdfast/quorum/detail/fan_out_round.hpp"
#include "holdfast/quorum/detail/fan_out_worker.hpp"
#include "holdfast/result.hpp"
#include "holdfast/send_receive.hpp"
#include "holdfast/store.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

// The executor: `Member` is any type the calls take by reference; `Clock` times sequential calls.
template <class Member, class Clock>
class fan_out {
 public:
  using time_point = typename Clock::time_point;

  fan_out(std::vector<Member*> members, Clock clock)
      : members_(std::move(members)), all_(members_.size()), clock_(std::move(clock)) {
    for (std::size_t i = 0; i < all_.size(); ++i) all_[i] = i;
  }
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

  // Every member's index, 0 .. size()-1 (made once: a round to all members allocates no list).
  [[nodiscard]] const std::vector<std::size_t>& all_members() const noexcept { return all_; }

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
    fan_out_reply<R> out{round, {}};  // on_time: filled when the caller stops waiting
    if constexpr (!std::is_same_v<Decided, std::nullptr_t>) round->decided = std::move(decided);
#if HOLDFAST_DETAIL_HAS_POLL
    if constexpr (has_send_receive_v<Member> && is_split_call<Call>::value) {
      if (split_) return run_split<R>(targets, skip_unstarted, wait, call, std::move(out));
    }
#endif
    if (workers_.empty()) return run_sequential<R>(targets, wait, call, std::move(out));
    const auto deadline = detail::saturating_add(std::chrono::steady_clock::now(), wait);
    for (std::size_t i : targets) post_slot<R>(out, i, call);
    return await_workers(skip_unstarted, deadline, std::move(out));
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

  // Rethrows the first exception a member threw in `round`, if any (fan_out_round.hpp).
  template <class R>
  static void rethrow_member_exception(const std::shared_ptr<fan_out_round<R>>& round) {
    detail::rethrow_member_exception(round);
  }

 private:
  // No workers: calls the members one after another in the caller's thread; a reply that took
  // longer than `wait` on the executor's clock (or whose clock went backwards) counts as late.
  template <class R, class Call>
  fan_out_reply<R> run_sequential(const std::vector<std::size_t>& targets,
                                  std::chrono::nanoseconds wait, const Call& call,
                                  fan_out_reply<R> out) const {
    fan_out_round<R>& round = *out.round;
    const auto limit = std::chrono::duration_cast<typename Clock::duration>(wait);
    for (std::size_t i : targets) {
      const time_point t0 = clock_.now();
      std::optional<R> r = invoke_member<R>(round, i, *members_[i], call);
      const time_point t1 = clock_.now();
      const bool late = t1 < t0 || detail::saturating_sub(t1, t0) > limit;
      std::lock_guard<std::mutex> lock(round.mutex);
      round.state[i] = late ? fan_out_slot::late : fan_out_slot::on_time;
      round.reply[i] = std::move(r);
      if (!late) round.on_time[i] = round.reply[i];
      out.unanswered += late ? 1 : 0;
    }
    out.on_time = round.on_time;
    std::lock_guard<std::mutex> lock(round.mutex);
    round.abandoned = true;
    return out;
  }

  // Queues member i's request of the round on its worker.
  template <class R, class Call>
  void post_slot(fan_out_reply<R>& out, std::size_t i, const Call& call) const {
    const std::shared_ptr<fan_out_round<R>>& round = out.round;
    round->mark_pending(i);
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
    close_round(out, skip_unstarted, decided_in_time);
    return out;
  }

  // The caller stops waiting: requests not yet started still go out if the round was decided in
  // time (a late grant joins the lease, a late renewal extends it); if the wait ran out, a member
  // that far behind is not sent more of this round, and the outstanding count as unanswered.
  // Caller holds the round's mutex.
  template <class R>
  static void close_round(fan_out_reply<R>& out, bool skip_unstarted, bool decided_in_time) {
    fan_out_round<R>& round = *out.round;
    round.abandoned = true;
    round.skip_unstarted = skip_unstarted && !decided_in_time;
    if (!decided_in_time) out.unanswered += round.outstanding;
    // Moved, not copied: once abandoned, file_reply() and ready() no longer read round.on_time.
    out.on_time = std::move(round.on_time);
  }

#if HOLDFAST_DETAIL_HAS_POLL
  // The caller's side of a split round: the members whose request it put on the wire itself.
  struct split_flight {
    std::vector<std::size_t> flying;  // claimed, request on the wire
    // Parallel to `flying`: which to ask for progress, those poll() found ready (or that said
    // they were complete). Asking the others would cost a recv() each that finds nothing.
    std::vector<char> check;
    std::vector<struct pollfd> fds;  // reused by every poll()
    bool through_workers = false;    // some requests of the round went through workers
  };

  // What became of one request split_send() tried to put on the wire.
  enum class send_outcome { flying, filed, to_worker };

  // The split dispatch (members with the send/receive capability): the caller's thread claims
  // each member, puts every request on the wire (send), and poll()s all their sockets at once,
  // taking replies as they come, until the round is decided, every reply is in, or `wait` has
  // passed: no thread hand-off on the way. A member it cannot claim (its worker is busy or has
  // work queued, e.g. another caller's request) or whose send() declines (not connected yet:
  // connecting blocks) gets its request through its worker instead, and the caller polls a pipe
  // the worker writes to when it files the reply. Requests still in flight when the caller stops
  // waiting are finished on their workers (post_claimed): their replies are read and filed as
  // late, so a late grant is given back or joins the lease exactly as under threads.
  template <class R, class Call>
  fan_out_reply<R> run_split(const std::vector<std::size_t>& targets, bool skip_unstarted,
                             std::chrono::nanoseconds wait, const Call& call,
                             fan_out_reply<R> out) const {
    fan_out_round<R>& round = *out.round;
    const auto deadline = detail::saturating_add(std::chrono::steady_clock::now(), wait);
    split_flight f = split_send<R>(targets, call, out);
    bool decided_in_time = false;
    for (;;) {
      take_replies<R>(round, f);
      {
        std::lock_guard<std::mutex> lock(round.mutex);
        if (round.ready()) {
          decided_in_time = true;
          break;
        }
      }
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) break;
      if (f.flying.empty()) {
        if (!f.through_workers) break;
        return await_workers(skip_unstarted, deadline, std::move(out));  // only workers left
      }
      if (!poll_flying<R>(round, f, deadline - now)) break;
    }
    {
      std::lock_guard<std::mutex> lock(round.mutex);
      close_round(out, skip_unstarted, decided_in_time);
    }
    for (std::size_t i : f.flying) hand_to_worker<R>(out.round, i);
    return out;
  }

  // Puts the round's requests on the wire from the caller's thread where it can, and the others
  // through the members' workers. If some went each way and the wake pipe cannot be opened, the
  // ones on the wire go to their workers too (the caller then only waits on the workers).
  template <class R, class Call>
  split_flight split_send(const std::vector<std::size_t>& targets, const Call& call,
                          fan_out_reply<R>& out) const {
    fan_out_round<R>& round = *out.round;
    split_flight f;
    f.flying.reserve(targets.size());
    for (std::size_t i : targets) {
      switch (send_one<R>(round, i, call)) {
        case send_outcome::flying:
          f.flying.push_back(i);
          break;
        case send_outcome::filed:
          break;
        case send_outcome::to_worker:
          post_slot<R>(out, i, call);
          f.through_workers = true;
          break;
      }
    }
    if (f.through_workers && !f.flying.empty() && !open_wake(round)) {
      for (std::size_t i : f.flying) hand_to_worker<R>(out.round, i);  // no pipe: all on workers
      f.flying.clear();
    }
    f.check.assign(f.flying.size(), 0);
    f.fds.reserve(f.flying.size() + 1);
    return f;
  }

  // Tries to put member i's request on the wire from the caller's thread, holding its claim.
  // flying: sent (the claim stays until the reply is read); filed: answered without the member,
  // or send() refused with the store's reason; to_worker: no claim, or send() would block.
  template <class R, class Call>
  send_outcome send_one(fan_out_round<R>& round, std::size_t i, const Call& call) const {
    const std::optional<store_request> request = call.request(i);
    if (!request) {  // answered without the member
      file_immediate<R>(round, i, invoke_member<R>(round, i, *members_[i], call));
      return send_outcome::filed;
    }
    if (!workers_[i]->try_claim()) return send_outcome::to_worker;
    std::error_code ec = send_would_block();
    HOLDFAST_TRY {
      ec = members_[i]->send(*request);
    }
    HOLDFAST_CATCH_ALL {
      keep_exception(round);
      ec = errc::store_unavailable;
    }
    if (!ec) {
      round.mark_pending(i);
      return send_outcome::flying;
    }
    workers_[i]->release_claim();
    if (ec == send_would_block()) return send_outcome::to_worker;
    file_immediate<R>(round, i, std::optional<R>(R(ec)));  // not sent; the store says why
    return send_outcome::filed;
  }

  // Takes every reply on the wire that is complete, in whatever order they came, among the
  // members poll() marked (f.check), and files it; those members leave `f.flying`.
  template <class R>
  void take_replies(fan_out_round<R>& round, split_flight& f) const {
    for (std::size_t k = 0; k < f.flying.size();) {
      const std::size_t i = f.flying[k];
      if (!f.check[k]) {
        ++k;
        continue;
      }
      f.check[k] = 0;
      bool complete = true;
      HOLDFAST_TRY {
        complete = members_[i]->progress();
      }
      HOLDFAST_CATCH_ALL {
        keep_exception(round);
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
        keep_exception(round);
        r.emplace(errc::store_unavailable);
      }
      workers_[i]->release_claim();
      file_reply<R>(round, i, std::move(r));
      f.flying[k] = f.flying.back();
      f.flying.pop_back();
      f.check[k] = f.check.back();
      f.check.pop_back();
    }
  }

  // Waits (poll(), at most `left`) until a member on the wire or the wake pipe has something,
  // and marks the members to ask (f.check). A member that needs no waiting (fd < 0) is marked at
  // once, without polling. Returns false if poll() failed (not EINTR): the caller stops waiting.
  template <class R>
  bool poll_flying(fan_out_round<R>& round, split_flight& f,
                   std::chrono::steady_clock::duration left) const {
    f.fds.clear();
    bool ready_now = false;
    for (std::size_t k = 0; k < f.flying.size(); ++k) {
      io_interest want;
      HOLDFAST_TRY {
        want = members_[f.flying[k]]->interest();
      }
      HOLDFAST_CATCH_ALL {
        keep_exception(round);
      }
      if (want.fd < 0) {
        ready_now = true;
        f.check[k] = 1;
      }
      struct pollfd p {};
      p.fd = want.fd;  // poll() ignores a negative fd
      p.events = static_cast<short>((want.read ? POLLIN : 0) | (want.write ? POLLOUT : 0));
      f.fds.push_back(p);
    }
    if (ready_now) return true;
    if (round.wake_read >= 0) {
      struct pollfd p {};
      p.fd = round.wake_read;
      p.events = POLLIN;
      f.fds.push_back(p);
    }
    const auto ms_left = std::chrono::ceil<std::chrono::milliseconds>(left).count();
    const int ms = static_cast<int>(ms_left < 1 ? 1 : (ms_left > (1 << 30) ? (1 << 30) : ms_left));
    if (::poll(f.fds.data(), static_cast<nfds_t>(f.fds.size()), ms) < 0 && errno != EINTR) {
      return false;
    }
    for (std::size_t k = 0; k < f.flying.size(); ++k) f.check[k] = f.fds[k].revents != 0 ? 1 : 0;
    drain_wake(round);
    return true;
  }
#endif

  // Hands member i's request on the wire (and the caller's claim) to its worker, to be read and
  // filed there.
  template <class R>
  void hand_to_worker(const std::shared_ptr<fan_out_round<R>>& round, std::size_t i) const {
    Member* member = members_[i];
    workers_[i]->post_claimed([round, i, member] { finish_slot<R>(*round, i, *member); });
  }

  std::vector<Member*> members_;
  std::vector<std::size_t> all_;  // 0 .. size()-1
  Clock clock_;
  bool split_ = false;
  std::vector<std::unique_ptr<fan_out_worker>> workers_;  // last: joined first
};

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_QUORUM_DETAIL_FAN_OUT_HPP
