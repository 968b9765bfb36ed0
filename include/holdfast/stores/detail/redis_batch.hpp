// SPDX-License-Identifier: MIT
// holdfast/stores/detail/redis_batch.hpp - redis_renew_batch: many renewals in one pipelined round
// trip (redis_store::renew_batch; the keepalive's batch path, lease/detail/batch_renew.hpp).
//
// Redis answers pipelined commands in the order they were sent, each command on its own (Redis
// documentation, "Pipelining"): the n renew-script calls are written as one buffer, then the n
// replies are read in order, each judged exactly as renew() judges its reply. A renewal refused
// (lease_lost) or malformed says nothing about the others. A connection that fails midway
// (timeout, closed) leaves every reply not yet read with that error: those renewals may have
// applied, exactly as a lost reply of renew() (the holder retries, bounded by its validity).
// A NOSCRIPT reply (the server lost its script cache) means that call did not run: it is run
// again alone, by EVALSHA after loading the script, as the blocking path does. Part of
// stores/redis.hpp; not for users.
#ifndef HOLDFAST_STORES_DETAIL_REDIS_BATCH_HPP
#define HOLDFAST_STORES_DETAIL_REDIS_BATCH_HPP

#include <hiredis/hiredis.h>

#include <cstddef>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/result.hpp"
#include "holdfast/send_receive.hpp"
#include "holdfast/stores/detail/redis_connection.hpp"
#include "holdfast/stores/detail/redis_requests.hpp"
#include "holdfast/stores/redis_options.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

// [link locked] Renews q[0..n) (each q[i].op == store_op::renew) in one pipelined round trip;
// out[i] as renew() would return it. A request that is not a valid renewal is answered alone
// (errc::invalid_argument) and not sent.
inline void redis_renew_batch(redis_connection& link, redis_requests& requests,
                              const store_request* q, std::size_t n, result<grant>* out) {
  if (std::error_code ec = link.ensure_connected()) {
    for (std::size_t i = 0; i < n; ++i) out[i] = ec;
    return;
  }
  std::string wire;
  std::vector<std::size_t> sent;
  sent.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    std::error_code bad = check_redis_request(q[i]);
    if (!bad && q[i].op != store_op::renew) bad = make_error_code(errc::invalid_argument);
    if (bad) {
      out[i] = bad;
      continue;
    }
    const redis_call c = requests.prepare(link.options(), {}, {}, q[i]);
    link.append_eval(wire, c.script, c.keys, c.nkeys, c.args, c.nargs);
    sent.push_back(i);
  }
  if (sent.empty()) return;
  std::error_code failed = link.send_wire(wire);
  std::vector<std::size_t> again;  // NOSCRIPT: not run
  for (std::size_t i : sent) {
    if (failed) {
      out[i] = failed;  // the connection is gone: this renewal's outcome is unknown
      continue;
    }
    result<redis_reply_ptr> r = link.read_reply();
    if (!r) {
      failed = r.error();
      out[i] = failed;
      continue;
    }
    const redisReply* reply = r->get();
    if (reply->type == REDIS_REPLY_ERROR && starts_with(reply->str, reply->len, "NOSCRIPT")) {
      again.push_back(i);
      continue;
    }
    if (reply->type == REDIS_REPLY_ERROR) r = link.error_reply(reply);
    out[i] = read_redis_renew(link, std::move(r), q[i].token, q[i].ttl);
  }
  for (std::size_t i : again) {  // eval() loads the script again after NOSCRIPT
    const redis_call c = requests.prepare(link.options(), {}, {}, q[i]);
    out[i] = read_redis_renew(link, link.eval(c.script, c.keys, c.nkeys, c.args, c.nargs),
                              q[i].token, q[i].ttl);
  }
}

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_DETAIL_REDIS_BATCH_HPP
