// SPDX-License-Identifier: MIT
// holdfast/stores/detail/wake_pipe.hpp - wake_pipe: a self-pipe that ends another thread's poll()
// early, for the cancellable waits of redis_store and postgres_store (store.hpp). A waiter's
// cancel_token::on_stop() wake-up writes one byte to it on the cancelling thread (write(2) on a
// non-blocking pipe: it never blocks and touches no client library); the thread reading the
// notification connection polls the pipe's read end beside the client's socket, drains it and
// looks at its waiters' tokens again. A pipe rather than eventfd: the same code on Linux, macOS
// and the BSDs. Not for users (part of stores/redis.hpp and stores/postgres.hpp).
#ifndef HOLDFAST_STORES_DETAIL_WAKE_PIPE_HPP
#define HOLDFAST_STORES_DETAIL_WAKE_PIPE_HPP

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <mutex>

#include "holdfast/cancel.hpp"
#include "holdfast/detail/config.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

/// A non-blocking, close-on-exec self-pipe. notify() may be called from any thread at any time
/// while it lives; drain() only by the one thread that polls fd().
class wake_pipe {
 public:
  wake_pipe() noexcept {
    if (::pipe(fds_) != 0) {
      fds_[0] = fds_[1] = -1;
      return;
    }
    for (int fd : fds_) {
      (void)::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
      (void)::fcntl(fd, F_SETFD, FD_CLOEXEC);
    }
  }
  wake_pipe(const wake_pipe&) = delete;
  wake_pipe& operator=(const wake_pipe&) = delete;
  ~wake_pipe() {
    for (int fd : fds_) {
      if (fd >= 0) (void)::close(fd);
    }
  }

  /// Whether the pipe exists (pipe(2) can fail for want of file descriptors; then nothing wakes
  /// a poll early, and its callers bound each poll instead).
  [[nodiscard]] bool ok() const noexcept { return fds_[0] >= 0; }

  /// The end to poll for POLLIN (-1 if !ok()).
  [[nodiscard]] int fd() const noexcept { return fds_[0]; }

  /// Makes fd() readable until drained. Never blocks (a full pipe is readable already).
  void notify() const noexcept {
    if (fds_[1] < 0) return;
    const char one = 1;
    ssize_t n = 0;
    do {
      n = ::write(fds_[1], &one, 1);
    } while (n < 0 && errno == EINTR);
  }

  /// Reads everything notify() wrote, so the next poll blocks again.
  void drain() const noexcept {
    if (fds_[0] < 0) return;
    char buf[64];
    while (::read(fds_[0], buf, sizeof buf) > 0) {
    }
  }

 private:
  int fds_[2] = {-1, -1};
};

/// Polls `fd` for `events` and `wake` (a wake_pipe's fd(); -1: none) for at most `ms`
/// milliseconds: 1 if `fd` is ready, 2 if only `wake` is (woken), 0 on timeout or EINTR, -1 on
/// an error (errno says which).
inline int poll_or_woken(int fd, short events, int wake, int ms) noexcept {
  pollfd p[2] = {{fd, events, 0}, {wake, POLLIN, 0}};
  const int n = ::poll(p, wake >= 0 ? 2 : 1, ms);
  if (n == 0 || (n < 0 && errno == EINTR)) return 0;
  if (n < 0) return -1;
  return p[0].revents != 0 ? 1 : 2;
}

/// [mu not held] While `guard` lives, a stop of `cancel` notifies `cv` (under `mu`, so no waiter
/// misses it between its check and its wait) and `pipe` (ending the poll of the thread that reads
/// for the waiters), on the cancelling thread. Each waiter then looks at its own token again.
inline void wake_on_stop(cancel_token::waker& guard, const cancel_token& cancel, std::mutex& mu,
                         std::condition_variable& cv, const wake_pipe& pipe) {
  if (!cancel.stop_possible()) return;
  cancel.on_stop(guard, [&mu, &cv, &pipe] {
    {
      std::lock_guard<std::mutex> lk(mu);
      cv.notify_all();
    }
    pipe.notify();
  });
}

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_DETAIL_WAKE_PIPE_HPP
