// SPDX-License-Identifier: MIT
// holdfast/stores/detail/zookeeper_link.hpp - zookeeper_link: the session under zookeeper_store
// and zookeeper_fence. One handle of ZooKeeper's multi-threaded C client (its own I/O and
// completion threads, automatic reconnects within the session), opened on first use and again
// after the server expired the last session; the watch events that wake waiters; the mapping of
// the client's return codes to errc; and a fault hook for the lost-reply tests. Not for users.
//
// Locks: mu_ (lock()) serializes the store's use of the handle and its own state; ev_mu_ guards
// what the client's completion thread writes (session state, fired watches). The completion
// thread takes only ev_mu_: a caller blocked in a synchronous call under mu_ waits for that same
// thread, so the watcher must never need mu_.
#ifndef HOLDFAST_STORES_DETAIL_ZOOKEEPER_LINK_HPP
#define HOLDFAST_STORES_DETAIL_ZOOKEEPER_LINK_HPP

// zookeeper.h declares the synchronous API (what holdfast uses) only under THREADED, the macro
// libzookeeper_mt's users define; holdfast defines it if nobody did, before the first inclusion.
#if defined(ZOOKEEPER_H_) && !defined(THREADED)
#error \
    "holdfast: <zookeeper/zookeeper.h> was included without THREADED; include holdfast's zookeeper headers first or define THREADED"
#endif
#ifndef THREADED
#define THREADED 1
#endif
#include <zookeeper/zookeeper.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <utility>

#include "holdfast/cancel.hpp"
#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/stores/detail/call_bound.hpp"
#include "holdfast/stores/zookeeper_options.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

/// Maps a ZooKeeper C client return code (not ZOK) to an errc.
inline errc zookeeper_errc(int rc) noexcept {
  switch (rc) {
    case ZOPERATIONTIMEOUT:
      return errc::timeout;
    case ZNOAUTH:
    case ZAUTHFAILED:
    case ZINVALIDACL:
    case ZSESSIONCLOSEDREQUIRESASLAUTH:
      return errc::permission_denied;
    case ZBADARGUMENTS:
      return errc::invalid_argument;
    case ZCONNECTIONLOSS:
    case ZSESSIONEXPIRED:
    case ZINVALIDSTATE:
    case ZCLOSING:
    case ZSESSIONMOVED:
    case ZNOTREADONLY:
    case ZTHROTTLEDOP:
    case ZSYSTEMERROR:
      return errc::store_unavailable;
    default:  // ZNONODE, ZNODEEXISTS, ZBADVERSION, ...: unexpected where they are not handled
      return errc::protocol_error;
  }
}

/// A fault the lost-reply tests inject into one request (zookeeper_link::fault).
enum class zookeeper_fault : unsigned char {
  none,        ///< the request goes as usual
  lost_reply,  ///< sent and applied, then reported as ZCONNECTIONLOSS (its answer dropped)
};

/// A session id as ZooKeeper prints it ("0x100b3c5e8a20001").
inline std::string zookeeper_session_text(std::int64_t id) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(id));
  return buf;
}

/// One ZooKeeper session (see the file overview). Not thread-safe but for the members that say
/// so: the owner holds lock() around every other use.
class zookeeper_link {
 public:
  explicit zookeeper_link(zookeeper_options o) : opts_(std::move(o)) {}
  zookeeper_link(const zookeeper_link&) = delete;
  zookeeper_link& operator=(const zookeeper_link&) = delete;
  ~zookeeper_link() { close(); }

  /// Locks the session for one call, which begins by forgetting the last failure's text.
  [[nodiscard]] std::unique_lock<std::mutex> lock() const {
    std::unique_lock l(mu_);
    last_error_.clear();
    return l;
  }
  /// Locks without beginning a call (last_error_message(), the reaper thread).
  [[nodiscard]] std::unique_lock<std::mutex> lock_quiet() const { return std::unique_lock(mu_); }
  [[nodiscard]] const zookeeper_options& options() const noexcept { return opts_; }
  [[nodiscard]] const std::string& last_error() const noexcept { return last_error_; }

  /// Records a failure's text and returns its code (so callers can `return fail(...)`).
  std::error_code fail(errc code, std::string message) {
    last_error_ = std::move(message);
    return code;
  }
  /// Records the failure of `op` on `path` with client return code `rc`.
  std::error_code fail_rc(int rc, const char* op, std::string_view path) {
    std::string m = "zookeeper: ";
    m += op;
    m += ' ';
    m.append(path.data(), path.size());
    m += ": ";
    m += zerror(rc);
    if (rc == ZNOAUTH) m += " (the node's ACL refuses this session: zookeeper_options::digest)";
    if (rc == ZNONODE && missing_chroot()) {
      return fail(errc::misconfigured, "zookeeper: the chroot " + chroot() +
                                           " of zookeeper_options::hosts does not exist: create "
                                           "it, or drop it from hosts (" +
                                           m + ")");
    }
    return fail(zookeeper_errc(rc), std::move(m));
  }
  /// The chroot path of zookeeper_options::hosts ("h:p,h:p/apps/x" -> "/apps/x"), "" if none.
  [[nodiscard]] std::string chroot() const {
    const std::size_t at = opts_.hosts.find('/');
    return at == std::string::npos ? std::string() : opts_.hosts.substr(at);
  }

  /// The open handle (after ensure_connected()).
  [[nodiscard]] zhandle_t* handle() const noexcept { return zh_; }
  /// The id of the current session (0 before the first).
  [[nodiscard]] std::int64_t session_id() const noexcept { return sid_; }
  /// How many sessions this link has had (a new one after each expiry).
  [[nodiscard]] std::uint64_t sessions() const noexcept { return sessions_; }
  /// The session timeout the server granted (ms), else the one asked. Thread-safe.
  [[nodiscard]] std::chrono::milliseconds granted_timeout() const noexcept {
    const std::int64_t t = granted_ms_.load(std::memory_order_relaxed);
    return t > 0 ? std::chrono::milliseconds(t) : opts_.session_timeout;
  }
  /// How many of this link's sessions the server expired (a lost lease's cause).
  [[nodiscard]] std::uint64_t expiries() const noexcept { return expiries_; }
  /// What the last session's end was, for the lease_lost text ("" while none ended).
  [[nodiscard]] const std::string& lost_session() const noexcept { return lost_session_; }

  /// Opens a session if none is open (or the last one expired, or the server refused its
  /// credentials), and waits until the client is connected, at most connect_timeout, and no
  /// longer than the caller's time left (the thread's call bound, detail/call_until.hpp: acquire()
  /// sets it around each attempt and its give-back), so a blocking call ends by its deadline.
  /// \returns a zero code; invalid_argument (bad options); misconfigured (hosts the client
  ///   cannot parse or resolve); permission_denied (digest refused); store_unavailable (no
  ///   server answered in time).
  std::error_code ensure_connected() {
    std::string why;
    if (opts_.check(&why)) return fail(errc::invalid_argument, "zookeeper: " + why);
    // Twice at most: a session this call finds reconnecting may turn out expired while it waits
    // (the server tells a client so only when it reconnects); that expiry is recorded and a new
    // session opened in the same call, so the caller hears of it now, not one call later.
    for (int pass = 0;; ++pass) {
      int state = 0;
      {
        std::lock_guard<std::mutex> g(ev_mu_);
        state = state_;
      }
      if (zh_ != nullptr && state == ZOO_CONNECTED_STATE) return {};
      if (zh_ != nullptr &&
          (state == ZOO_EXPIRED_SESSION_STATE || state == ZOO_AUTH_FAILED_STATE)) {
        if (state == ZOO_EXPIRED_SESSION_STATE && sid_ != 0) note_expiry();
        close();
      }
      const bool fresh = zh_ == nullptr;
      if (fresh) {
        if (std::error_code ec = open()) return ec;
      }
      std::error_code ec = wait_connected();
      if (!ec || fresh || pass > 0) return ec;
      std::lock_guard<std::mutex> g(ev_mu_);
      if (state_ != ZOO_EXPIRED_SESSION_STATE) return ec;
    }
  }

  /// Registers interest in watch events on `path` and returns the count seen so far (pass it to
  /// wait_event). Thread-safe. Pair with forget_watch().
  std::uint64_t watch_interest(const std::string& path) {
    std::lock_guard<std::mutex> g(ev_mu_);
    interest& i = fired_[path];
    ++i.waiters;
    return i.fired + session_events_;
  }
  void forget_watch(const std::string& path) {
    std::lock_guard<std::mutex> g(ev_mu_);
    auto it = fired_.find(path);
    if (it != fired_.end() && --it->second.waiters == 0) fired_.erase(it);
  }
  /// True iff ZooKeeper reported `path` deleted while it was watched (a node's name is never
  /// used again, so it stays gone). Thread-safe; before forget_watch().
  bool deleted(const std::string& path) {
    std::lock_guard<std::mutex> g(ev_mu_);
    auto it = fired_.find(path);
    return it != fired_.end() && it->second.deleted != 0;
  }
  /// Sleeps until a watch event on `path` (or a session event) after `seen`, or `deadline`.
  /// Returns true iff woken (by an event or a stop). Thread-safe; never under lock().
  /// A stop of `cancel` ends the sleep at once (its wake-up, on the stopping thread, notifies
  /// under ev_mu_, so no waiter misses it between its check and its wait).
  bool wait_event(const std::string& path, std::uint64_t seen,
                  std::chrono::steady_clock::time_point deadline, const cancel_token& cancel) {
    cancel_token::waker stop;  // before the lock: the wake-up takes ev_mu_
    if (cancel.stop_possible()) {
      cancel.on_stop(stop, [this] {
        std::lock_guard<std::mutex> g(ev_mu_);
        ev_cv_.notify_all();
      });
    }
    std::unique_lock<std::mutex> g(ev_mu_);
    return ev_cv_.wait_until(g, deadline, [&] {
      if (cancel.stop_requested()) return true;
      auto it = fired_.find(path);
      return (it != fired_.end() ? it->second.fired : 0) + session_events_ != seen;
    });
  }
  /// The watcher for zoo_wexists: its context must be this link.
  static watcher_fn watcher() noexcept { return &on_event; }

  /// For tests of the fault model ("any store call can apply and lose its reply"): asked of each
  /// create (op "create": lost_reply applies it and drops its answer) and each sync (op "sync":
  /// told only, the answer is ignored). Empty by default.
  std::function<zookeeper_fault(const char* op)> fault;
  /// Requests sent to the server over this link's life (for the hand-off tests). Thread-safe.
  [[nodiscard]] std::uint64_t requests() const noexcept {
    return requests_.load(std::memory_order_relaxed);
  }
  void count_request() noexcept { requests_.fetch_add(1, std::memory_order_relaxed); }

  /// Closes the session (the server deletes its ephemeral nodes at once). Thread-safety: under
  /// lock(), never from the watcher.
  void close() noexcept {
    if (zh_ == nullptr) return;
    zookeeper_close(zh_);  // joins the client's threads: no callback runs after this
    zh_ = nullptr;
    std::lock_guard<std::mutex> g(ev_mu_);
    state_ = 0;
    ++session_events_;
    ev_cv_.notify_all();
  }

 private:
  // Whether a ZNONODE comes from a chroot that does not exist. The client maps "/" to the chroot,
  // so one exists request (made only after a ZNONODE, on a chroot) tells. A ZNONODE below an
  // existing chroot (a parent removed meanwhile) stays what it was.
  bool missing_chroot() {
    if (zh_ == nullptr || opts_.hosts.find('/') == std::string::npos) return false;
    count_request();
    return zoo_exists(zh_, "/", 0, nullptr) == ZNONODE;
  }
  void note_expiry() {
    lost_session_ = "zookeeper: session " + zookeeper_session_text(sid_) +
                    " expired (the server heard nothing from it for its timeout of " +
                    std::to_string(granted_timeout().count()) + " ms): every lease it held is lost";
    ++expiries_;
  }

  struct interest {
    std::uint64_t fired = 0;
    std::uint64_t deleted = 0;  // of which deletions (ZOO_DELETED_EVENT)
    int waiters = 0;
  };

  static void quiet_log(const char* /*message*/) {}

  std::error_code open() {
    errno = 0;
    zh_ = zookeeper_init2(opts_.hosts.c_str(), &on_event,
                          static_cast<int>(opts_.session_timeout.count()), nullptr, this, 0,
                          &quiet_log);
    if (zh_ == nullptr) {
      const int e = errno;
      return fail(errc::misconfigured,
                  "zookeeper: zookeeper_options::hosts \"" + opts_.hosts + "\" cannot be used: " +
                      (e != 0 ? std::error_code(e, std::generic_category()).message()
                              : std::string("unknown error")) +
                      " (expected host:port[,host:port...][/chroot])");
    }
    ++sessions_;
    // The client resolves its host list again each time its I/O thread goes round its loop
    // (before it sends any request: a getaddrinfo, and a netlink query of the machine's
    // addresses, on every request's path). -1: only when it has lost its connection.
    (void)zoo_set_servers_resolution_delay(zh_, -1);
    if (!opts_.digest.empty()) {
      const int rc = zoo_add_auth(zh_, "digest", opts_.digest.data(),
                                  static_cast<int>(opts_.digest.size()), nullptr, nullptr);
      if (rc != ZOK) return fail_rc(rc, "add_auth", "digest");
    }
    return {};
  }

  std::error_code wait_connected() {
    int state = 0;
    const std::chrono::milliseconds wait = capped_by_call(opts_.connect_timeout);
    {
      std::unique_lock<std::mutex> g(ev_mu_);
      ev_cv_.wait_for(g, wait, [&] {
        return state_ == ZOO_CONNECTED_STATE || state_ == ZOO_AUTH_FAILED_STATE ||
               state_ == ZOO_EXPIRED_SESSION_STATE;
      });
      state = state_;
    }
    if (state == ZOO_CONNECTED_STATE) {
      const clientid_t* id = zoo_client_id(zh_);
      sid_ = id != nullptr ? id->client_id : 0;
      const int t = zoo_recv_timeout(zh_);
      if (t > 0) granted_ms_.store(t, std::memory_order_relaxed);
      return {};
    }
    if (state == ZOO_AUTH_FAILED_STATE) {
      return fail(errc::permission_denied,
                  "zookeeper: the server refused the credentials (zookeeper_options::digest)");
    }
    if (state == ZOO_EXPIRED_SESSION_STATE) {
      return fail(errc::store_unavailable, "zookeeper: the new session expired at once");
    }
    return fail(errc::store_unavailable,
                "zookeeper: no server of \"" + opts_.hosts + "\" answered within " +
                    std::to_string(wait.count()) +
                    (wait < opts_.connect_timeout ? " ms (the caller's time left)"
                                                  : " ms (zookeeper_options::connect_timeout)"));
  }

  // The client's completion thread: session events (connected, connecting, expired, auth
  // failed) and the watches zoo_wexists set. Takes ev_mu_ only (see the file overview).
  static void on_event(zhandle_t* /*zh*/, int type, int state, const char* path, void* ctx) {
    auto* self = static_cast<zookeeper_link*>(ctx);
    std::lock_guard<std::mutex> g(self->ev_mu_);
    if (type == ZOO_SESSION_EVENT) {
      self->state_ = state;
      ++self->session_events_;
    } else if (path != nullptr) {
      auto it = self->fired_.find(path);
      if (it != self->fired_.end()) {
        ++it->second.fired;
        if (type == ZOO_DELETED_EVENT) ++it->second.deleted;
      }
    }
    self->ev_cv_.notify_all();
  }

  zookeeper_options opts_;
  mutable std::mutex mu_;
  zhandle_t* zh_ = nullptr;
  std::int64_t sid_ = 0;
  std::uint64_t sessions_ = 0;
  std::uint64_t expiries_ = 0;
  std::atomic<std::int64_t> granted_ms_{0};
  std::atomic<std::uint64_t> requests_{0};
  mutable std::string last_error_;  // the most recent call's failure (cleared by lock())
  std::string lost_session_;

  std::mutex ev_mu_;  // guards the members below; taken by the completion thread
  std::condition_variable ev_cv_;
  int state_ = 0;
  std::uint64_t session_events_ = 0;
  std::unordered_map<std::string, interest> fired_;
};

/// The argument check of every ZooKeeper entry point that takes an owner or a path sent as given
/// (a fence's): either over zookeeper_options::max_owner_bytes (the server's jute.maxbuffer bounds
/// a packet; it drops the connection on a larger one) is refused before anything is sent,
/// named in last_error_message(). A lease key has no limit: it travels escaped, or hashed when
/// long, as a node name of at most 240 bytes (zookeeper_names.hpp); pass {} for it. Takes
/// `link`'s lock for the refusal (a call of its own): call it before the call locks.
/// \returns errc::invalid_argument or a zero code.
inline std::error_code zookeeper_check_args(zookeeper_link& link, std::string_view path,
                                            std::string_view owner) {
  const std::size_t most = link.options().max_owner_bytes;
  if (path.size() <= most && owner.size() <= most) return {};
  auto guard = link.lock();
  const bool by_owner = owner.size() > most;
  return link.fail(errc::invalid_argument,
                   std::string("zookeeper: the ") + (by_owner ? "owner" : "path") + " of " +
                       std::to_string(by_owner ? owner.size() : path.size()) +
                       " bytes is over zookeeper_options::max_owner_bytes (" +
                       std::to_string(most) + "; the server's jute.maxbuffer bounds it)");
}

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_DETAIL_ZOOKEEPER_LINK_HPP
