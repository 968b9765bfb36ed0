// SPDX-License-Identifier: MIT
// holdfast/stores/detail/postgres_listen.hpp - pg_listening: the notification side of
// postgres_store's waits (wait_for_release, watch_release, wait_for_release_rw). A second session
// LISTENs on the table's channel (pg_channel_name); the release statements NOTIFY it when they
// commit, with the key's hash in hex (a read-write release: "rw:" + that hex, the read-write
// name space's). One waiting thread at a time reads the session and counts what arrives per hash
// for the others (pg_sleep_until_notified). Notifications are hints: every sleep is bounded by
// the holder's expiry, and the store stays the judge. A waiter's cancel_token wakes it through
// wake_on_stop() (the waiters on `cv` look again; the reader's poll ends on the self-pipe,
// wake_pipe.hpp), never calling libpq. Part of stores/postgres.hpp; not for users.
#ifndef HOLDFAST_STORES_DETAIL_POSTGRES_LISTEN_HPP
#define HOLDFAST_STORES_DETAIL_POSTGRES_LISTEN_HPP

#include <libpq-fe.h>
#include <poll.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <system_error>
#include <utility>

#include "holdfast/cancel.hpp"
#include "holdfast/detail/config.hpp"
#include "holdfast/stores/detail/postgres_link.hpp"
#include "holdfast/stores/detail/postgres_sql.hpp"
#include "holdfast/stores/detail/postgres_statements.hpp"  // pg_channel_name
#include "holdfast/stores/detail/wake_pipe.hpp"
#include "holdfast/stores/postgres_options.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

/// The listening session and the waiters' shared state (see the overview).
struct pg_listening {
  explicit pg_listening(const postgres_options& o)
      : link(o,
             {"SET client_min_messages = warning",
              "LISTEN " + pg_quote_ident(pg_channel_name(o)).value_or("\"holdfast\"")},
             {}) {}
  std::mutex mu;  // guards everything below; `link` only while no one is `reading`
  std::condition_variable cv;
  wake_pipe wake;  // (not guarded) ends the reader's poll: a waiter's token stopped
  pg_link link;
  bool reading = false;
  // Per notification payload being waited on: releases seen so far, and how many threads wait.
  std::map<std::string, std::pair<std::uint64_t, int>> seen;
};

/// [l.mu not held] Makes sure the listening session is up (it LISTENs on connect) unless another
/// thread is reading it. \returns its connection error.
inline std::error_code pg_listen_ready(pg_listening& l) {
  std::lock_guard<std::mutex> lk(l.mu);
  if (l.reading) return {};
  auto guard = l.link.lock();
  return l.link.ensure_connected();
}

/// [l.mu not held, l.reading set by the caller] Waits for notifications until `until` and counts
/// them per payload; false if the session failed (it reconnects, and LISTENs again, on next use).
inline bool pg_read_notifications(pg_listening& l, std::chrono::steady_clock::time_point until,
                                  std::map<std::string, std::uint64_t>& got) {
  auto guard = l.link.lock();
  PGconn* c = l.link.connection();
  if (c == nullptr) return false;
  const auto drain = [&] {
    bool any = false;
    while (PGnotify* n = PQnotifies(c)) {
      ++got[n->extra != nullptr ? std::string(n->extra) : std::string()];
      PQfreemem(n);
      any = true;
    }
    return any;
  };
  if (drain()) return true;  // queued by libpq earlier (e.g. while connecting)
  // Without a self-pipe (no file descriptor left) a stop is seen at least every slice.
  const auto slice = std::chrono::steady_clock::now() + cancel_wait_slice;
  const int w =
      pg_wait(PQsocket(c), POLLIN, l.wake.ok() || until < slice ? until : slice, l.wake.fd());
  l.wake.drain();
  if (w == 2) return true;  // woken: a waiter's token was stopped
  if (w < 0 || (w > 0 && !PQconsumeInput(c)) || PQstatus(c) != CONNECTION_OK) {
    l.link.disconnect();
    return false;
  }
  drain();
  return true;
}

/// [l.mu not held] Sleeps until a notification with `payload` arrives, until `wake`, or until
/// `cancel` is stopped, reading the session whenever no other thread does. A session that dies
/// ends the sleep at once: notifications may have been lost (a release while it was down), so
/// the caller asks again rather than sleep until the holder's expiry, and its next wait LISTENs
/// on a fresh session (issue 22).
inline void pg_sleep_until_notified(pg_listening& l, const std::string& payload,
                                    std::chrono::steady_clock::time_point wake,
                                    const cancel_token& cancel) {
  std::unique_lock<std::mutex> lk(l.mu);
  auto& entry = l.seen[payload];
  const std::uint64_t base = entry.first;
  ++entry.second;
  for (;;) {
    if (l.seen[payload].first != base) break;  // a release of this key was announced
    if (!(std::chrono::steady_clock::now() < wake) || cancel.stop_requested()) break;
    if (!l.reading) {
      l.reading = true;
      lk.unlock();
      std::map<std::string, std::uint64_t> got;
      const bool alive = pg_read_notifications(l, wake, got);
      lk.lock();
      l.reading = false;
      for (const auto& g : got) {
        auto it = l.seen.find(g.first);
        if (it != l.seen.end()) it->second.first += g.second;
      }
      l.cv.notify_all();
      if (!alive) break;
    } else {
      l.cv.wait_until(lk, wake);
    }
  }
  auto it = l.seen.find(payload);
  if (--it->second.second == 0) l.seen.erase(it);
}

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_DETAIL_POSTGRES_LISTEN_HPP
