// SPDX-License-Identifier: MIT
// holdfast/stores/detail/redis_link.hpp - redis_link: a redis_connection with its lock and the
// split (non-blocking) send/receive path of send_receive.hpp. One split request at a time: it is
// formatted into a buffer of our own (reused, no allocation once warm) and written with
// send(MSG_DONTWAIT | MSG_NOSIGNAL); replies are read with recv(MSG_DONTWAIT) and fed to the
// context's own hiredis reader, so the blocking path and this one share the connection and its
// parser. The socket itself stays blocking (with SO_SNDTIMEO/SO_RCVTIMEO) for the blocking path,
// whose callers wait (lock()) until the split request in flight has been received. Part of
// stores/redis.hpp; not for users.
#ifndef HOLDFAST_STORES_DETAIL_REDIS_LINK_HPP
#define HOLDFAST_STORES_DETAIL_REDIS_LINK_HPP

#include <hiredis/hiredis.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/result.hpp"
#include "holdfast/send_receive.hpp"
#include "holdfast/stores/detail/redis_connection.hpp"
#include "holdfast/stores/detail/redis_resp.hpp"
#include "holdfast/stores/redis_options.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

/// A redis_connection with its lock and the split send/receive path. Thread-safety: the owner
/// holds lock() around every blocking use and lock_raw() around every split call.
class redis_link : public redis_connection {
 public:
  redis_link(redis_options opts, std::vector<std::string> scripts)
      : redis_connection(std::move(opts), std::move(scripts)) {}

  /// Locks the connection for one blocking operation, first waiting until no split request is
  /// in flight (see "Split send/receive" below).
  [[nodiscard]] std::unique_lock<std::mutex> lock() const {
    std::unique_lock<std::mutex> l = lock_quiet();
    forget_error();  // a call begins: last_error() is to describe this one only
    return l;
  }
  /// As lock() without beginning a call: last_error_message(), and the cleanup of a call that
  /// failed (leave_queue), which must not clear that call's text.
  [[nodiscard]] std::unique_lock<std::mutex> lock_quiet() const {
    std::unique_lock<std::mutex> l(mutex_);
    idle_.wait(l, [this] { return !in_flight_; });
    return l;
  }
  /// Locks the connection without waiting for a split request in flight (the split calls).
  [[nodiscard]] std::unique_lock<std::mutex> lock_raw() const {
    return std::unique_lock<std::mutex>(mutex_);
  }

  // ---- Split send/receive (send_receive.hpp). One request at a time; every member below is
  // called with lock_raw() held.

  /// True while a split request is in flight (accepted, not yet received).
  [[nodiscard]] bool in_flight() const noexcept { return in_flight_; }

  /// Accepts a request that fails at once (bad arguments): finish() reports `code`.
  void start_failed(std::error_code code) {
    in_flight_ = true;
    complete_ = true;
    error_ = code;
    reply_.reset();
  }

  /// Starts script `index` by EVALSHA on the open connection (precondition: connected(), no
  /// request in flight), writing what the socket takes now. A NOSCRIPT answer is followed, once,
  /// by the same call as EVAL with the script's text (the script did not run; EVAL caches it
  /// under the same SHA1).
  void start(std::size_t index, const std::string_view* keys, std::size_t nkeys,
             const std::string_view* args, std::size_t nargs) {
    in_flight_ = true;
    complete_ = false;
    error_ = {};
    reply_.reset();
    sent_body_ = false;
    pending_index_ = index;
    pending_keys_ = nkeys;
    parts_.resize(nkeys + nargs);
    for (std::size_t i = 0; i < nkeys; ++i) parts_[i].assign(keys[i].data(), keys[i].size());
    for (std::size_t i = 0; i < nargs; ++i) {
      parts_[nkeys + i].assign(args[i].data(), args[i].size());
    }
    deadline_ = detail_deadline(options().command_timeout);
    format_pending();
    (void)write_pending();  // no read yet: the reply cannot be there, a recv() would be wasted
  }

  /// Does the non-blocking I/O the request in flight allows; true once it is complete (a reply,
  /// or a failure that dropped the connection).
  bool pump() {
    if (complete_) return true;
    if (!write_pending()) return complete_;
    redisContext* c = context();
    for (;;) {
      void* raw = nullptr;
      if (redisReaderGetReply(c->reader, &raw) != REDIS_OK) {
        return broken(errc::protocol_error, std::string("redis: ") + c->reader->errstr);
      }
      if (raw != nullptr) {
        redis_reply_ptr r(static_cast<redisReply*>(raw));
        if (r->type == REDIS_REPLY_ERROR && !sent_body_ &&
            starts_with(r->str, r->len, "NOSCRIPT")) {
          sent_body_ = true;
          format_pending();
          return pump();
        }
        reply_ = std::move(r);
        complete_ = true;
        return true;
      }
      char buf[16384];
      const ssize_t n = ::recv(c->fd, buf, sizeof buf, MSG_DONTWAIT);
      if (n > 0) {
        if (redisReaderFeed(c->reader, buf, static_cast<std::size_t>(n)) != REDIS_OK) {
          return broken(errc::protocol_error, std::string("redis: ") + c->reader->errstr);
        }
        continue;
      }
      if (n == 0) return broken(errc::store_unavailable, "redis: connection closed by the server");
      const int e = errno;
      if (e == EINTR) continue;
      if (e == EAGAIN || e == EWOULDBLOCK) return false;
      return broken(errc::store_unavailable, "redis: recv: " + std::generic_category().message(e));
    }
  }

  /// Writes what the socket takes of the request in flight; true once all of it is written,
  /// false if the socket is full or the request failed (then complete).
  bool write_pending() {
    if (complete_) return false;
    redisContext* c = context();
    while (out_off_ < out_.size()) {
      const ssize_t n = ::send(c->fd, out_.data() + out_off_, out_.size() - out_off_,
                               HOLDFAST_DETAIL_MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        out_off_ += static_cast<std::size_t>(n);
        continue;
      }
      const int e = n < 0 ? errno : EPIPE;
      if (n < 0 && e == EINTR) continue;
      if (n < 0 && (e == EAGAIN || e == EWOULDBLOCK)) return false;
      (void)broken(errc::store_unavailable, "redis: send: " + std::generic_category().message(e));
      return false;
    }
    return true;
  }

  /// What the request in flight waits for (fd -1 once complete).
  [[nodiscard]] io_interest interest() const noexcept {
    if (!in_flight_ || complete_ || !connected()) return {};
    const bool writing = out_off_ < out_.size();
    return io_interest{context()->fd, !writing, writing};
  }

  /// Completes the request in flight, waiting (poll) until its reply is in or command_timeout
  /// has passed since start() (then errc::timeout, connection dropped), and frees the connection
  /// for the next request. An error reply becomes its classified error code, as in eval().
  result<redis_reply_ptr> finish() {
    while (!pump()) {
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline_) {
        (void)broken(errc::timeout, "redis: no reply within command_timeout");
        break;
      }
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline_ - now);
      const io_interest want = interest();
      struct pollfd p {};
      p.fd = want.fd;
      p.events = static_cast<short>((want.read ? POLLIN : 0) | (want.write ? POLLOUT : 0));
      const int w = ::poll(&p, 1, static_cast<int>(std::min<std::int64_t>(left.count(), 1 << 30)));
      if (w < 0 && errno != EINTR) {
        (void)broken(errc::store_unavailable,
                     "redis: poll: " + std::generic_category().message(errno));
        break;
      }
    }
    in_flight_ = false;
    idle_.notify_all();
    if (error_) return error_;
    redis_reply_ptr r = std::move(reply_);
    if (!r) return fail(errc::protocol_error, "redis: no reply");
    if (r->type == REDIS_REPLY_ERROR) return error_reply(r.get());  // READONLY as blocking calls
    return r;
  }

 private:
  static std::chrono::steady_clock::time_point detail_deadline(std::chrono::milliseconds d) {
    const auto now = std::chrono::steady_clock::now();
    return d < std::chrono::duration_cast<std::chrono::milliseconds>(
                   std::chrono::steady_clock::time_point::max() - now)
               ? now + d
               : std::chrono::steady_clock::time_point::max();
  }

  // A split request that failed: keep the reason, drop the connection (a late reply could be
  // read as the next command's), report complete.
  bool broken(errc code, std::string message) {
    error_ = fail(code, std::move(message));
    disconnect();
    complete_ = true;
    return true;
  }

  // Formats the pending call as EVALSHA (or, after NOSCRIPT, EVAL with the script's text).
  void format_pending() {
    out_.clear();
    out_off_ = 0;
    resp_append_array(out_, 3 + parts_.size());
    resp_append_bulk(out_, sent_body_ ? "EVAL" : "EVALSHA");
    resp_append_bulk(out_, sent_body_ ? script(pending_index_) : sha(pending_index_));
    resp_append_bulk(out_, std::to_string(pending_keys_));
    for (const std::string& p : parts_) resp_append_bulk(out_, p);
  }

  mutable std::mutex mutex_;
  // Split send/receive state, guarded by mutex_.
  mutable std::condition_variable idle_;  // signalled when a split request was received
  bool in_flight_ = false;
  bool complete_ = false;
  bool sent_body_ = false;
  std::size_t pending_index_ = 0;
  std::size_t pending_keys_ = 0;
  std::vector<std::string> parts_;  // the pending call's keys and arguments
  std::string out_;                 // the pending call in RESP
  std::size_t out_off_ = 0;         // bytes of out_ written
  redis_reply_ptr reply_;
  std::error_code error_;
  std::chrono::steady_clock::time_point deadline_{};
};

/// A holder's last call (a release) on `c`: runs `send` (one request on `c`, connecting first if
/// it is not connected) and, iff it failed with store_unavailable on a connection that was open
/// before it (since an earlier call) and is closed after it, runs `send` once more. That failure
/// is the connection dropped while idle (a server timeout, a restart, CLIENT KILL): the request
/// never got through, so rather than leave the key to its TTL it is sent again; if the first did
/// land after all, the second finds nothing to release and answers not_holder. Nothing else is
/// resent (after a timeout the request may have run). Thread-safety: as `c`'s calls. The rule of
/// redis_store::release, release_rw (redis_shared.hpp) and redis_cluster_store::release.
/// \returns what the last `send` returned.
template <class Send>
result<redis_reply_ptr> redis_send_last_call(const redis_connection& c, Send&& send) {
  const bool reused = c.connected();
  result<redis_reply_ptr> r = send();
  if (!r && r.error() == errc::store_unavailable && reused && !c.connected()) r = send();
  return r;
}

/// The same rule on the split path (send_receive.hpp), for redis_store's and
/// redis_cluster_store's receive(): true iff the split request `op` is a holder's last call (a
/// release: a lease's own, or a quorum's give-back of a member's grant) and it failed, as `r`
/// says, with store_unavailable, leaving `c` closed. The split path sends only on an open
/// connection (send() declines otherwise), so `c` was open before the request: the failure is
/// the connection dropped while idle, the request never got through, and the caller sends it
/// once more through its blocking path (which connects first and then sends once). A timeout
/// or any other error is not resent.
inline bool redis_split_resend_last_call(store_op op, const result<redis_reply_ptr>& r,
                                         const redis_connection& c) {
  return op == store_op::release && !r && r.error() == errc::store_unavailable && !c.connected();
}

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_DETAIL_REDIS_LINK_HPP
