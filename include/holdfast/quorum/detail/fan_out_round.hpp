// SPDX-License-Identifier: MIT
// holdfast/quorum/detail/fan_out_round.hpp - one round of a fan-out (detail/fan_out.hpp): the state
// the caller and the members' workers share while requests are out, and the steps that fill it.
//
//   piece            | what it is
//   -----------------+-------------------------------------------------------------------------
//   split_call       | a call the split dispatch can put on the wire (request) or make (blocking)
//   fan_out_slot     | what a round knows of one member: idle, pending, on_time, late, done,
//                    | skipped
//   fan_out_round    | the slots, the replies, the first exception a member threw, what to do
//                    | with a late reply, the wake pipe of the split dispatch
//   fan_out_reply    | what run_round() hands the caller: the round and the replies on time
//   invoke_member,   | calling a member (its exception kept, the reply store_unavailable) and
//   file_reply, ...  | filing its reply as on time, late or handed to the clean-up
//
// A late reply may arrive after the caller has returned, so a round is shared (shared_ptr) by the
// caller and every worker with one of its requests. Not for users.
#ifndef HOLDFAST_QUORUM_DETAIL_FAN_OUT_ROUND_HPP
#define HOLDFAST_QUORUM_DETAIL_FAN_OUT_ROUND_HPP

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

#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/result.hpp"
#include "holdfast/send_receive.hpp"
#include "holdfast/store.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

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

  // Marks member i's request as out (pending), counted until its reply is filed.
  void mark_pending(std::size_t i) {
    std::lock_guard<std::mutex> lock(mutex);
    state[i] = fan_out_slot::pending;
    ++outstanding;
  }

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

// Keeps the exception being handled as the round's first, if it has none yet. Call inside
// HOLDFAST_CATCH_ALL.
template <class R>
void keep_exception(fan_out_round<R>& round) {
#if HOLDFAST_HAS_EXCEPTIONS
  std::lock_guard<std::mutex> lock(round.mutex);
  if (!round.exception) round.exception = std::current_exception();
#else
  (void)round;
#endif
}

// Rethrows the first exception a member threw in the round, if any.
template <class R>
void rethrow_member_exception(const std::shared_ptr<fan_out_round<R>>& round) {
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

// Calls `call` on a member, turning an exception into store_unavailable for the protocol and
// keeping the first one for the caller.
template <class R, class Member, class Call>
std::optional<R> invoke_member(fan_out_round<R>& round, std::size_t i, Member& member,
                               const Call& call) {
  std::optional<R> r;
  HOLDFAST_TRY {
    r.emplace(call(i, member));
  }
  HOLDFAST_CATCH_ALL {
    keep_exception(round);
    r.emplace(errc::store_unavailable);
  }
  return r;
}

// Files member i's reply `r` of the round: on time (waking the caller once the round is
// ready), late (kept for finalize), or handed to the clean-up at once (already finalized).
// Called on a worker, or by the caller's thread for a reply it read itself.
template <class R>
void file_reply(fan_out_round<R>& round, std::size_t i, std::optional<R> r) {
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

// Files a reply that came without a request in flight (answered by the caller's thread itself):
// the slot goes pending and is filed at once, so the round's counts stay in step.
template <class R>
void file_immediate(fan_out_round<R>& round, std::size_t i, std::optional<R> r) {
  round.mark_pending(i);
  file_reply<R>(round, i, std::move(r));
}

// Runs one request on a member's worker and files the reply.
template <class R, class Member, class Call>
void run_slot(fan_out_round<R>& round, std::size_t i, Member& member, const Call& call) {
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

// Reads member i's reply to the split request the caller's thread started (receive() waits
// at most the member's own timeout) and files it. Runs on the worker, holding the claim.
template <class R, class Member>
void finish_slot(fan_out_round<R>& round, std::size_t i, Member& member) {
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

#if HOLDFAST_DETAIL_HAS_POLL
// Opens the round's wake pipe (non-blocking, close-on-exec); false if the system refuses.
template <class R>
bool open_wake(fan_out_round<R>& round) {
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

// Empties the round's wake pipe after poll() (the bytes only mean "a worker filed a reply").
template <class R>
void drain_wake(const fan_out_round<R>& round) {
  if (round.wake_read < 0) return;
  char drain[64];
  while (::read(round.wake_read, drain, sizeof drain) > 0) {
  }
}
#endif

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_QUORUM_DETAIL_FAN_OUT_ROUND_HPP
