// SPDX-License-Identifier: MIT
// holdfast/stores/detail/redis_cluster_split.hpp - the scripts a redis_cluster_store runs on each
// primary, and the store's split send/receive path (send_receive.hpp), so that one thread can
// have requests to many stores in flight (quorum_store of cluster stores):
//
//   call      | does
//   ----------+----------------------------------------------------------------------------------
//   send      | names the key's record, counter and life record, picks the slot's primary by the
//             | slot map and starts the script on that primary's connection (redis_link: the
//             | same non-blocking writer and hiredis reader as redis_store's split path); declines
//             | (send_would_block) when that would need a wait: no slot map yet, the slot
//             | unserved, its primary not connected, a request in flight, or raise_token_floor
//             | (every slot, every primary: the blocking operation's work)
//   interest  | the primary's socket
//   progress  | the primary's non-blocking I/O
//   receive   | the reply, read by the blocking path's readers (redis_requests.hpp), with WAIT
//             | after a grant when wait_replicas > 0; a MOVED, ASK or TRYAGAIN answer (the script
//             | did not run) is followed by running the blocking operation from the start, as
//             | its own call would have: the map is read again after MOVED, ASKING sent after
//             | ASK, TRYAGAIN retried until command_timeout; so is a release whose connection
//             | was dropped while idle (redis_split_resend_last_call: it never got through)
//
// Part of stores/redis_cluster.hpp; not for users.
#ifndef HOLDFAST_STORES_DETAIL_REDIS_CLUSTER_SPLIT_HPP
#define HOLDFAST_STORES_DETAIL_REDIS_CLUSTER_SPLIT_HPP

#include <cstddef>
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
#include "holdfast/store.hpp"
#include "holdfast/stores/detail/redis_link.hpp"
#include "holdfast/stores/detail/redis_requests.hpp"
#include "holdfast/stores/detail/redis_resp.hpp"
#include "holdfast/stores/detail/redis_scripts.hpp"
#include "holdfast/stores/detail/redis_slots.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

/// The scripts on each primary: redis_store's, at redis_script's indices (one list keeps the
/// indices one definition), and after them a release that SPUBLISHes on the key's channel (in its
/// slot; a PUBLISH would cross the whole cluster bus) and uses no wait queue.
inline std::vector<std::string> redis_cluster_scripts() {
  std::vector<std::string> s = redis_store_scripts();
  s.emplace_back(
      "if redis.call('GET', KEYS[1]) == ARGV[2] .. ':' .. ARGV[1] then\n"
      "  redis.call('DEL', KEYS[1])\n"
      "  redis.call('SPUBLISH', ARGV[3], '1')\n"
      "  return 1\n"
      "end\n"
      "return 0\n");
  return s;
}
/// The index of that release script: after all of redis_store's, however many there are.
inline std::size_t redis_cluster_release_script() {
  static const std::size_t index = redis_store_scripts().size();
  return index;
}

/// True iff `error` (a connection's last_error()) says the script did not run because its slot
/// is elsewhere or moving: MOVED, ASK or TRYAGAIN. Such a call may be sent again.
inline bool redis_cluster_resendable(const std::string& error) {
  redis_redirect to;
  return parse_redis_redirect(error, to) || error.compare(0, 15, "redis: TRYAGAIN") == 0;
}

/// A store_reply with `ec` in every field.
inline store_reply redis_cluster_reply_of(std::error_code ec) {
  store_reply out;
  out.granted = ec;
  out.done = ec;
  out.record = ec;
  return out;
}

/// redis_cluster_store's split path (see the file overview). Every function takes the store's
/// mutex itself, without waiting for the request in flight (that is the split path's own).
struct redis_cluster_split {
  template <class S>
  static std::error_code send(S& s, const store_request& q) {
    std::lock_guard<std::mutex> lk(s.mu_);
    if (s.in_flight_ || q.op == store_op::raise_token_floor || !s.mapped_) {
      return send_would_block();
    }
    s.pending_key_.assign(q.key.data(), q.key.size());
    s.pending_owner_.assign(q.owner.data(), q.owner.size());
    s.pending_ = store_request{q.op, s.pending_key_, s.pending_owner_, q.token, q.to, q.ttl};
    if (std::error_code bad = check_redis_request(q)) {
      s.in_flight_ = true;
      s.pending_node_ = nullptr;
      s.pending_failed_ = bad;
      return {};
    }
    s.name_keys(q.key);
    if (s.slots_[s.slot_] < 0) return send_would_block();
    auto* n = s.nodes_[static_cast<std::size_t>(s.slots_[s.slot_])].get();
    if (!n->conn.connected()) return send_would_block();
    const std::string_view keys[] = {s.lease_, s.counter_, s.life_};
    s.token_text_ = std::to_string(q.token.value());
    s.to_text_ = std::to_string(q.to.value());
    s.ttl_text_ = std::to_string(q.ttl.count());
    switch (q.op) {
      case store_op::try_acquire: {
        const std::string_view args[] = {q.owner, s.ttl_text_, n->conn.life()};
        n->conn.start(redis_script::acquire, keys, 3, args, 3);
        break;
      }
      case store_op::renew: {
        const std::string_view args[] = {q.owner, s.token_text_, s.ttl_text_};
        n->conn.start(redis_script::renew, keys, 1, args, 3);
        break;
      }
      case store_op::release: {
        s.channel_.assign(s.opts_.node.wait_prefix)
            .append(s.lease_, s.opts_.node.key_prefix.size());
        const std::string_view args[] = {q.owner, s.token_text_, s.channel_};
        n->conn.start(redis_cluster_release_script(), keys, 1, args, 3);
        break;
      }
      case store_op::inspect:
        n->conn.start(redis_script::inspect, keys, 1, nullptr, 0);
        break;
      case store_op::raise_token: {
        const std::string_view args[] = {q.owner, s.token_text_, s.to_text_};
        n->conn.start(redis_script::raise, keys, 2, args, 3);
        break;
      }
      case store_op::raise_token_floor:
        return send_would_block();  // (declined above)
    }
    s.in_flight_ = true;
    s.pending_node_ = n;
    s.pending_failed_ = {};
    return {};
  }

  template <class S>
  static io_interest interest(const S& s) {
    std::lock_guard<std::mutex> lk(s.mu_);
    if (!s.in_flight_ || s.pending_node_ == nullptr) return {};
    return s.pending_node_->conn.interest();
  }

  template <class S>
  static bool progress(S& s) {
    std::lock_guard<std::mutex> lk(s.mu_);
    return !s.in_flight_ || s.pending_node_ == nullptr || s.pending_node_->conn.pump();
  }

  template <class S>
  static store_reply receive(S& s) {
    std::unique_lock<std::mutex> lk(s.mu_);
    if (!s.in_flight_) return redis_cluster_reply_of(errc::invalid_argument);
    store_reply out;  // protocol_error in every field until read
    bool resend = false;
    if (s.pending_failed_) {
      out = redis_cluster_reply_of(s.pending_failed_);
    } else {
      auto& n = *s.pending_node_;
      result<redis_reply_ptr> r = n.conn.finish();
      // Sent again by the blocking path: a script that did not run (MOVED, ASK, TRYAGAIN), or
      // a release on a connection dropped while idle (redis_split_resend_last_call).
      const bool dropped = redis_split_resend_last_call(s.pending_.op, r, n.conn);
      resend = !r && (dropped || redis_cluster_resendable(n.conn.last_error()));
      if (resend && !dropped) {
        redis_redirect to;
        if (parse_redis_redirect(n.conn.last_error(), to) && !to.ask) s.mapped_ = false;
      } else {
        read(s, n, std::move(r), out);
      }
    }
    s.in_flight_ = false;
    s.pending_node_ = nullptr;
    s.idle_.notify_all();
    if (!resend) return out;
    // The script did not run: the blocking operation, from the start (it waits for no split
    // request now; another thread may send one meanwhile, which this then waits for).
    const store_request q = s.pending_;
    const std::string key = s.pending_key_, owner = s.pending_owner_;
    lk.unlock();
    switch (q.op) {
      case store_op::try_acquire:
        out.granted = s.try_acquire(key, owner, q.ttl);
        break;
      case store_op::renew:
        out.granted = s.renew(key, owner, q.token, q.ttl);
        break;
      case store_op::release:
        out.done = s.release(key, owner, q.token);
        break;
      case store_op::inspect:
        out.record = s.inspect(key);
        break;
      case store_op::raise_token:
        out.done = s.raise_token(key, owner, q.token, q.to);
        break;
      case store_op::raise_token_floor:
        break;  // never sent
    }
    return out;
  }

 private:
  // [locked] Reads the reply to the request in flight on `n` as the blocking operation does,
  // with its failure noted and, after a grant, WAIT (wait_replicas).
  template <class S, class Node>
  static void read(S& s, Node& n, result<redis_reply_ptr> r, store_reply& out) {
    read_redis_reply(n.conn, s.pending_, std::move(r), out);
    const store_op op = s.pending_.op;
    std::error_code failed;
    if (op == store_op::try_acquire || op == store_op::renew) {
      if (!out.granted) failed = out.granted.error();
    } else if (op == store_op::inspect) {
      if (!out.record) failed = out.record.error();
    } else if (!out.done && out.done.error() != errc::not_holder &&
               out.done.error() != errc::lease_lost) {
      failed = out.done.error();
    }
    if (failed && failed != errc::busy && failed != errc::lease_lost) (void)s.note(&n, failed);
    if (out.granted && (op == store_op::try_acquire || op == store_op::renew)) {
      s.name_keys(s.pending_key_);  // a grant given back is released by name
      out.granted = s.acknowledge(n, out.granted, s.pending_owner_, op == store_op::try_acquire);
    }
  }
};

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_DETAIL_REDIS_CLUSTER_SPLIT_HPP
