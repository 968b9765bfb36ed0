// SPDX-License-Identifier: MIT
// holdfast/lease/detail/batch_renew.hpp - renewing many leases of one store in one call: the
// keepalive's batch path (keepalive.hpp), for stores that offer renew_batch.
//
// A store may offer, besides renew(), the optional
//
//   void renew_batch(const store_request* requests, std::size_t n, result<grant>* replies);
//
// which performs n renewals (requests[i].op == store_op::renew) as renew() would, each its own
// operation with its own outcome in replies[i], in one pipelined exchange (redis_store: all n
// script calls written, then the n replies read). A failure of one renewal (lease_lost, a lost
// reply) says nothing about the others; a connection that dies midway leaves every reply not
// read an error (timeout, store_unavailable): unknown, exactly as a lost reply of renew().
//
// The keepalive renews a batch of due leases of one store in three steps:
//
//   step   | per lease, in due order                                  | locks
//   -------+----------------------------------------------------------+-------------------------
//   open   | take the operation mutex; skip a lease that is no longer | op (held to "close"),
//          | the keepalive's or not held; read the clock (the instant | data briefly
//          | validity counts from, before the request leaves); one    |
//          | past its validity turns lost and is not sent             |
//   send   | renew_batch() with the requests of the opened leases     | the ops of the batch
//   close  | each reply judged as renew() judges its own (renewed,    | op, data briefly; then
//          | transient -> retry, lease_lost -> lost); then every op   | no lock while callbacks
//          | is unlocked, and only then callbacks and observers run   | and observers run
//
// So a lease is renewed, retried and lost by the same rules as on the one-at-a-time path (they
// share lease_body::renew_begin / renew_end), and a release() or keepalive::remove() of a lease
// in the batch waits, as it does for one renewal in flight, until the batch's store call ends.
// Not for users.
#ifndef HOLDFAST_LEASE_DETAIL_BATCH_RENEW_HPP
#define HOLDFAST_LEASE_DETAIL_BATCH_RENEW_HPP

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <type_traits>
#include <utility>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/detail/detect.hpp"
#include "holdfast/lease/detail/keepalive_port.hpp"
#include "holdfast/observer.hpp"
#include "holdfast/result.hpp"
#include "holdfast/send_receive.hpp"
#include "holdfast/store.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

template <class S>
using renew_batch_call = decltype(std::declval<S&>().renew_batch(
    std::declval<const store_request*>(), std::size_t{}, std::declval<result<grant>*>()));

// True iff Store offers renew_batch (see the top of this file).
template <class S>
inline constexpr bool has_renew_batch_v = is_detected<renew_batch_call, S>::value;

// One address per type: with the store's address, it tells leases that may share a batch (two
// store objects of different types may share an address, a wrapper and its first member).
template <class T>
struct type_tag {
  static constexpr char id = 0;
};

// Which of a poll's n due leases go out together: `order` lists (batch key, index) with the leases
// of one store side by side, each store's in due order (a stable sort); `groups` are [begin, end)
// ranges of `order`, at most max_batch leases of one store each (a lease without a key alone),
// in the order of their earliest lease, so the lease due first is renewed first.
struct batch_plan {
  std::vector<std::pair<batch_key, std::size_t>> order;
  std::vector<std::pair<std::size_t, std::size_t>> groups;

  template <class KeyOf>
  void make(std::size_t n, std::size_t max_batch, KeyOf&& key_of) {
    order.clear();
    groups.clear();
    for (std::size_t i = 0; i < n; ++i) {
      order.emplace_back(max_batch > 1 ? key_of(i) : batch_key{}, i);
    }
    // By key, then by due order (the index): stable_sort's order without its temporary buffer
    // (an allocation a keepalive's poll must not need).
    std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
      return a.first < b.first || (!(b.first < a.first) && a.second < b.second);
    });
    for (std::size_t j = 0; j < n;) {
      std::size_t end = j + 1;
      while (order[j].first && end < n && end - j < max_batch &&
             order[end].first == order[j].first) {
        ++end;
      }
      groups.emplace_back(j, end);
      j = end;
    }
    std::sort(groups.begin(), groups.end(), [this](const auto& a, const auto& b) {
      return order[a.first].second < order[b.first].second;
    });
  }
};

// Renews group[0..n) (leases of one store of type Store; Shared = lease_shared<Store, Clock>,
// whose open/close/caught/finish are the three steps), writing each outcome to out[i]. Never
// throws: a store exception fails the whole batch transiently (reported on each lease, as step()
// does); without memory for the batch each lease is renewed by its own step().
template <class Shared, class Clock>
void renew_batch_step(keepalive_target<Clock>* const* targets, std::size_t n, std::uint64_t id,
                      double fraction, lease_observer* also, keepalive_step<Clock>* out) noexcept {
  const auto group = [targets](std::size_t i) { return static_cast<Shared*>(targets[i]); };
  std::vector<typename Shared::slot_type> slots;
  std::vector<store_request> requests;
  std::vector<std::size_t> sent;  // which slot each request belongs to
  std::vector<result<grant>> replies;
  HOLDFAST_TRY {
    slots.resize(n);
    requests.reserve(n);
    sent.reserve(n);
    replies.assign(n, result<grant>(errc::protocol_error));
  }
  HOLDFAST_CATCH_ALL {
    for (std::size_t i = 0; i < n; ++i) out[i] = group(i)->step(id, fraction, also);
    return;
  }
  for (std::size_t i = 0; i < n; ++i) {
    if (!group(i)->open(slots[i], id, fraction, also)) continue;
    const auto& b = group(i)->body;  // key, owner and token never change
    requests.push_back(
        store_request{store_op::renew, b.key, b.owner.view(), b.token, {}, slots[i].ttl});
    sent.push_back(i);
  }
  if (!requests.empty()) {
    bool threw = false;
    HOLDFAST_TRY {
      group(0)->body.store->renew_batch(requests.data(), requests.size(), replies.data());
    }
    HOLDFAST_CATCH_ALL {
      threw = true;
    }
    for (std::size_t k = 0; k < sent.size(); ++k) {
      Shared& s = *group(sent[k]);
      if (threw) {
        s.caught(slots[sent[k]]);
      } else {
        s.close(slots[sent[k]], replies[k], fraction);
      }
    }
  }
  // Every operation mutex of the batch is unlocked before any callback runs: a callback may
  // release another lease of the same batch.
  for (std::size_t i = 0; i < n; ++i) {
    if (slots[i].op.owns_lock()) slots[i].op.unlock();
  }
  for (std::size_t i = 0; i < n; ++i) {
    group(i)->finish(slots[i]);
    out[i] = slots[i].out;
  }
}

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_LEASE_DETAIL_BATCH_RENEW_HPP
