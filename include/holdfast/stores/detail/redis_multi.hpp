// SPDX-License-Identifier: MIT
// holdfast/stores/detail/redis_multi.hpp - redis_acquire_all(): redis_store's atomic multi-key
// grant (store.hpp's try_acquire_all capability; multi_lease.hpp uses it), and
// redis_acknowledge(), the WAIT for replicas after a grant that every acquire path shares.
//
// One script (redis_acquire_all_script in detail/redis_scripts.hpp) over every lease key, the
// counter and its life record: it judges every key before it writes anything, so it grants all
// or none in one round trip, the new tokens drawn from the store-wide counter as try_acquire's
// (a same-owner key keeps its token: a retry after a lost reply gets the same grants back, T1).
// Redis Cluster runs a script only over keys of one slot: with the default `{holdfast}` hash tag
// every key is; a Cluster store calls the same script per slot with that slot's counter.
// Part of stores/redis.hpp; not for users.
#ifndef HOLDFAST_STORES_DETAIL_REDIS_MULTI_HPP
#define HOLDFAST_STORES_DETAIL_REDIS_MULTI_HPP

#include <hiredis/hiredis.h>

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/result.hpp"
#include "holdfast/send_receive.hpp"
#include "holdfast/store.hpp"
#include "holdfast/store_deadline.hpp"
#include "holdfast/stores/detail/redis_link.hpp"
#include "holdfast/stores/detail/redis_requests.hpp"
#include "holdfast/stores/detail/redis_resp.hpp"
#include "holdfast/stores/detail/redis_scripts.hpp"
#include "holdfast/stores/redis_options.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

/// One try_acquire_all call's arguments (store.hpp's has_try_acquire_all_v).
struct redis_multi_request {
  const std::string_view* keys;
  std::size_t count;
  std::string_view owner;
  std::chrono::milliseconds ttl;
  grant* grants;
};

/// Checks a multi-key request as try_acquire checks one key (check_acquire_args, Redis' size
/// limit), plus count > 0, no null pointer and no key given twice (O(count^2): a handful of keys).
/// \returns errc::invalid_argument (naming a size problem in `why`) or a zero code.
inline std::error_code check_redis_multi(const redis_multi_request& q, const char** why) noexcept {
  if (q.keys == nullptr || q.grants == nullptr || q.count == 0) return errc::invalid_argument;
  for (std::size_t i = 0; i < q.count; ++i) {
    const store_request one{store_op::try_acquire, q.keys[i], q.owner, {}, {}, q.ttl};
    if (std::error_code ec = check_redis_request(one)) {
      *why = redis_size_problem(one);
      return ec;
    }
    for (std::size_t j = 0; j < i; ++j) {
      if (q.keys[j] == q.keys[i]) return errc::invalid_argument;
    }
  }
  return {};
}

/// [link locked] With wait_replicas > 0, after an acquire or renew that granted: WAITs for the
/// replicas (by the call's deadline at the latest: capped_by_call). A grant fewer of them
/// acknowledged in time is not reported: acquired ones (the `count` keys of `keys`, their tokens
/// in `granted`) are given back (released, each bounded by store_call_floor past a deadline that
/// WAIT used up), a renewed one keeps the validity of its last acknowledged grant on the holder's
/// side; through Sentinel a shortfall also drops the connection (the primary may be failing
/// over, so the next call asks the sentinels again). \returns a zero code iff the grant stands;
///   grant_not_durable when every grant was given back (nothing held); errc::timeout when a
///   release failed, so that the caller, told of an error that may hide a grant
///   (may_hide_grant), gives it back itself later (store_deadline.hpp, D2); the link's text says
///   which.
inline std::error_code redis_acknowledge(redis_link& link, redis_requests& rq,
                                         std::string_view broadcast, bool acquired,
                                         const std::string_view* keys, std::size_t count,
                                         std::string_view owner, const grant* granted) {
  const std::string why = link.replica_shortfall("", "the grant");
  if (why.empty()) return {};
  const redis_options& o = link.options();
  // WAIT may have used a call's deadline up: the releases get store_call_floor of their own.
  const call_floor own_time;
  std::string failed;
  for (std::size_t i = 0; acquired && i < count; ++i) {
    const store_request back{store_op::release, keys[i], owner, granted[i].token, {}, {}};
    const redis_call c = rq.prepare(o, broadcast, link.life(), back);
    const result<redis_reply_ptr> r = link.eval(c.script, c.keys, c.nkeys, c.args, c.nargs);
    if (!r && failed.empty()) failed = link.last_error();
  }
  if (!failed.empty()) {
    (void)link.not_durable({});  // (through Sentinel: drops the connection)
    return link.fail(errc::timeout, why + "; giving it back failed (" + failed +
                                        "): it lasts until its TTL unless given back later");
  }
  return link.not_durable(why + (acquired ? "; it was given back" : ""));
}

// Reads the acquire_all script's reply: 0 busy, else `count` tokens in key order.
inline result<void> read_redis_acquire_all(redis_link& link, const redisReply* reply,
                                           const redis_multi_request& q) {
  if (reply->type == REDIS_REPLY_INTEGER && reply->integer == 0) return errc::busy;
  if (reply->type != REDIS_REPLY_ARRAY || reply->elements != q.count) {
    return link.fail(errc::protocol_error, "redis: try_acquire_all: unexpected reply");
  }
  for (std::size_t i = 0; i < q.count; ++i) {
    const std::optional<fencing_token> t = reply_token(reply->element[i]);
    if (!t || !t->is_issuable()) {
      return link.fail(errc::protocol_error, "redis: try_acquire_all: unexpected token");
    }
    q.grants[i] = grant{*t, q.ttl};
  }
  return {};
}

/// Grants every key of `q` to its owner in one script and one round trip, or none (busy if any
/// is held live by another owner); see redis_store::try_acquire_all. [link not locked]
inline result<void> redis_acquire_all(redis_link& link, redis_requests& rq,
                                      std::string_view broadcast, const redis_multi_request& q) {
  const char* why = nullptr;
  if (std::error_code ec = check_redis_multi(q, &why)) {
    auto guard = link.lock();  // a call, refused: clears an older call's text
    if (why != nullptr) (void)link.fail(errc::invalid_argument, why);
    return ec;
  }
  auto guard = link.lock();
  // Connected before the call is built: the script carries the life read at connect.
  if (std::error_code ec = link.ensure_connected()) return ec;
  const redis_options& o = link.options();
  std::vector<std::string> names(q.count);
  std::vector<std::string_view> keys(q.count + 2);
  for (std::size_t i = 0; i < q.count; ++i) {
    names[i].reserve(o.key_prefix.size() + q.keys[i].size());
    names[i].append(o.key_prefix).append(q.keys[i].data(), q.keys[i].size());
    keys[i] = names[i];
  }
  keys[q.count] = o.counter_key;
  keys[q.count + 1] = rq.life_key(o);
  const std::string ttl = std::to_string(q.ttl.count());
  const std::string_view args[] = {q.owner, ttl, link.life()};
  result<redis_reply_ptr> r =
      link.eval(redis_script::acquire_all, keys.data(), keys.size(), args, 3);
  if (!r) return r.error();
  if (result<void> got = read_redis_acquire_all(link, r->get(), q); !got) return got;
  if (std::error_code ec =
          redis_acknowledge(link, rq, broadcast, true, q.keys, q.count, q.owner, q.grants)) {
    return ec;
  }
  return {};
}

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_DETAIL_REDIS_MULTI_HPP
