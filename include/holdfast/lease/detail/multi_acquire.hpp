// SPDX-License-Identifier: MIT
// holdfast/lease/detail/multi_acquire.hpp - the machinery behind try_acquire_all() and
// acquire_all() (multi_lease.hpp): the input check (sorted, no key twice), the atomic path over a
// store's try_acquire_all capability, the ordered path over plain try_acquire, the hold-and-wait
// loop of the blocking form, and the give-back that leaves nothing behind. Not for users.
//
// multi_control carries the negative controls of testing/multi_workload.hpp (an unordered
// acquisition; a failure that keeps what it got); the shipped functions pass none.
#ifndef HOLDFAST_LEASE_DETAIL_MULTI_ACQUIRE_HPP
#define HOLDFAST_LEASE_DETAIL_MULTI_ACQUIRE_HPP

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "holdfast/acquire_options.hpp"
#include "holdfast/backoff.hpp"
#include "holdfast/clock.hpp"
#include "holdfast/detail/config.hpp"
#include "holdfast/detail/saturating.hpp"
#include "holdfast/detail/unwind_guard.hpp"
#include "holdfast/error.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/lease/detail/acquire.hpp"
#include "holdfast/result.hpp"
#include "holdfast/store.hpp"
#include "holdfast/stores/detail/give_back.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

// What one multi-key attempt asks: the keys in the order they are taken, one TTL, one owner.
struct multi_request {
  std::vector<std::string> keys;
  std::chrono::milliseconds ttl{0};
  std::string owner;
};

// Negative controls (testing/multi_workload.hpp); none on every shipped path.
enum class multi_mutation : std::uint8_t {
  none,
  unordered,      // keys taken in the caller's order: {a,b} against {b,a} can deadlock
  keeps_partial,  // a failed attempt keeps the keys it took
};

template <class Store, class Clock>
struct multi_control {
  multi_mutation mutation = multi_mutation::none;
  std::vector<lease<Store, Clock>> kept;  // keeps_partial puts what it kept here
};

// Whether a failed store call may still have applied (its reply lost): anything but contention
// and errors that say nothing changed.
inline bool may_have_applied(const std::error_code& ec) noexcept {
  return ec && ec != errc::busy && !is_permanent(ec) && ec != errc::token_exhausted;
}

template <class Clock, class Rep, class Period>
result<multi_request> prepare_multi(std::vector<std::string> keys,
                                    std::chrono::duration<Rep, Period> ttl,
                                    const acquire_options<Clock>& opts,
                                    multi_mutation m = multi_mutation::none,
                                    std::chrono::milliseconds min_ttl = {}) {
  if (keys.empty()) return errc::invalid_argument;
  result<acquire_request> first = prepare_acquire(keys.front(), ttl, opts, min_ttl);
  if (!first) return first.error();
  for (const std::string& k : keys) {
    if (std::error_code ec = check_acquire_args(k, first->owner.view(), first->ttl)) return ec;
  }
  std::vector<std::string> given;  // only the unordered control keeps the caller's order
  if (m == multi_mutation::unordered) given = keys;
  std::sort(keys.begin(), keys.end());
  if (std::adjacent_find(keys.begin(), keys.end()) != keys.end()) return errc::invalid_argument;
  return multi_request{m == multi_mutation::unordered ? std::move(given) : std::move(keys),
                       first->ttl, std::string(first->owner.view())};
}

// Leave nothing behind for one key whose last call may have applied: detail/give_back.hpp's
// give_back (ask once more as the same owner, release what that gives; a failure is left to the
// key's TTL, since nothing renews it).

// Releases `held`, last key first (or, under keeps_partial, keeps them in the control).
template <class Store, class Clock>
void release_all(std::vector<lease<Store, Clock>>& held, multi_control<Store, Clock>* ctl) {
  if (ctl != nullptr && ctl->mutation == multi_mutation::keeps_partial) {
    for (auto& l : held) ctl->kept.push_back(std::move(l));
    held.clear();
    return;
  }
  for (auto it = held.rbegin(); it != held.rend(); ++it) (void)it->release();
  held.clear();  // a lease whose release failed tries once more here
}

// Ends a failed attempt: gives back `key` if its call may have applied, then everything held.
template <class Store, class Clock>
std::error_code fail_all(Store& store, std::vector<lease<Store, Clock>>& held, std::string_view key,
                         const multi_request& req, std::error_code ec,
                         multi_control<Store, Clock>* ctl) {
  const bool keeps = ctl != nullptr && ctl->mutation == multi_mutation::keeps_partial;
  if (!key.empty() && may_have_applied(ec) && !keeps) give_back(store, key, req.owner, req.ttl);
  release_all(held, ctl);
  return ec;
}

// A set whose first lease lapsed while later keys were taken is worthless: give it all back.
template <class Store, class Clock>
result<std::vector<lease<Store, Clock>>> finish_all(Store& store,
                                                    std::vector<lease<Store, Clock>>& held,
                                                    const multi_request& req, errc if_invalid,
                                                    multi_control<Store, Clock>* ctl) {
  for (auto& l : held) {
    if (!l.valid()) return fail_all(store, held, {}, req, make_error_code(if_invalid), ctl);
  }
  return std::move(held);
}

// try_acquire_all over plain try_acquire: the keys in req's order, one call each.
template <class Store, class Clock>
result<std::vector<lease<Store, Clock>>> take_in_order(Store& store, const multi_request& req,
                                                       const acquire_options<Clock>& opts,
                                                       multi_control<Store, Clock>* ctl) {
  std::vector<lease<Store, Clock>> held;
  held.reserve(req.keys.size());
  for (const std::string& key : req.keys) {
    result<lease<Store, Clock>> l = acquire_once(store, key, req.ttl, opts, req.owner);
    if (!l) return fail_all(store, held, key, req, l.error(), ctl);
    held.push_back(std::move(*l));
  }
  return finish_all(store, held, req, errc::timeout, ctl);
}

// try_acquire_all over the store's atomic capability: one call, then one lease per grant.
template <class Store, class Clock>
result<std::vector<lease<Store, Clock>>> take_atomic(Store& store, const multi_request& req,
                                                     const acquire_options<Clock>& opts,
                                                     multi_control<Store, Clock>* ctl) {
  const std::size_t n = req.keys.size();
  std::vector<std::string_view> views(req.keys.begin(), req.keys.end());
  std::vector<grant> grants(n);
  std::vector<lease<Store, Clock>> held;
  held.reserve(n);
  const typename Clock::time_point start = opts.clock.now();  // before the request leaves
  // An exception before every grant is a lease (a throwing store call, which may have applied;
  // an allocation) gives back the rest, best effort (unwind_guard.hpp); leases release themselves.
  bool answered = false;
  std::size_t next = 0;  // grants[next..n) are not leases yet
  const on_unwind unwind([&] {
    for (std::size_t i = next; i < n; ++i) {
      if (!answered) {
        (void)give_back(store, req.keys[i], req.owner, req.ttl);
      } else if (grants[i].token.is_issuable()) {
        (void)store.release(req.keys[i], req.owner, grants[i].token);
      }
    }
  });
  result<void> r = store.try_acquire_all(views.data(), n, req.owner, req.ttl, grants.data());
  answered = true;
  if (!r) {
    next = n;
    if (may_have_applied(r.error())) {
      for (const std::string& key : req.keys) give_back(store, key, req.owner, req.ttl);
    }
    return r.error();
  }
  bool malformed = false;
  for (std::size_t i = 0; i < n; ++i) {
    grant g = grants[i];
    if (!g.token.is_issuable() || g.ttl <= std::chrono::milliseconds::zero()) {
      malformed = true;
      next = i + 1;
      if (g.token.is_issuable()) (void)store.release(req.keys[i], req.owner, g.token);
      continue;
    }
    if (g.ttl > req.ttl) g.ttl = req.ttl;  // never trust more than was asked for
    held.push_back(
        lease_access::from_grant(store, opts, req.keys[i], req.owner, g, req.ttl, start));
    next = i + 1;
  }
  next = n;
  if (malformed) return fail_all(store, held, {}, req, make_error_code(errc::protocol_error), ctl);
  result<std::vector<lease<Store, Clock>>> out = finish_all(store, held, req, errc::timeout, ctl);
  if (out) {
    for (auto& l : *out) lease_access::arm(l, opts);
  }
  return out;
}

template <class Store, class Clock>
result<std::vector<lease<Store, Clock>>> take_all(Store& store, const multi_request& req,
                                                  const acquire_options<Clock>& opts,
                                                  multi_control<Store, Clock>* ctl = nullptr) {
  if constexpr (has_try_acquire_all_v<Store>) {
    if (ctl == nullptr || ctl->mutation == multi_mutation::none) {
      return take_atomic(store, req, opts, ctl);
    }
  }
  return take_in_order(store, req, opts, ctl);
}

// acquire_all over the atomic capability: the one step retried with backoff.
template <class Store, class Clock>
result<std::vector<lease<Store, Clock>>> wait_atomic(Store& store, const multi_request& req,
                                                     typename Clock::duration budget,
                                                     const acquire_options<Clock>& opts,
                                                     multi_control<Store, Clock>* ctl) {
  Clock clock = opts.clock;
  forward_budget<Clock> b(budget, clock.now());
  backoff delays(opts.backoff);
  for (std::uint32_t made = 1;; ++made) {
    result<std::vector<lease<Store, Clock>>> r = take_atomic(store, req, opts, ctl);
    if (r || !is_transient(r.error())) return r;
    if (delays.exhausted(made)) return r;
    const typename Clock::duration left = b.advance(clock.now());
    if (left <= Clock::duration::zero()) return errc::timeout;
    const std::optional<typename Clock::duration> next =
        checked_duration_cast<typename Clock::duration>(delays.next_delay());
    clock.sleep_until(saturating_add(clock.now(), next && *next < left ? *next : left));
  }
}

// Renews the held leases whose renew instant has come; errc::lease_lost if one is lost.
template <class Store, class Clock>
std::error_code renew_due(std::vector<lease<Store, Clock>>& held, const Clock& clock) {
  for (auto& l : held) {
    if (clock.now() < l.renew_due_at()) continue;
    result<void> r = l.renew();
    if (!r && !l.valid()) return errc::lease_lost;
  }
  return {};
}

// acquire_all over plain LeaseStores: hold and wait, in req's order. Each key's wait is cut at
// the earliest renew instant of the keys held, which are renewed before waiting on.
template <class Store, class Clock>
result<std::vector<lease<Store, Clock>>> wait_in_order_once(Store& store, const multi_request& req,
                                                            forward_budget<Clock>& b,
                                                            const acquire_options<Clock>& opts,
                                                            multi_control<Store, Clock>* ctl) {
  Clock clock = opts.clock;
  acquire_options<Clock> o = opts;
  o.owner = req.owner;
  std::vector<lease<Store, Clock>> held;
  held.reserve(req.keys.size());
  for (const std::string& key : req.keys) {
    for (bool first = true;; first = false) {
      typename Clock::duration wait = b.advance(clock.now());
      if (!first && wait <= Clock::duration::zero()) {
        return fail_all(store, held, {}, req, make_error_code(errc::timeout), ctl);
      }
      // At least the backoff's first delay, so a renewal that keeps failing is not retried in a
      // busy loop (the lease stays valid until valid_until(), well after its renew instant).
      const typename Clock::duration floor =
          std::min(wait, checked_duration_cast<typename Clock::duration>(opts.backoff.initial)
                             .value_or(Clock::duration::zero()));
      for (const auto& l : held) {
        wait = std::min(wait, std::max(floor, saturating_sub(l.renew_due_at(), clock.now())));
      }
      result<lease<Store, Clock>> l = acquire_retrying<false>(store, key, req.ttl, wait, o);
      if (l) {
        held.push_back(std::move(*l));
        break;
      }
      // (acquire() gave back what its last attempt may have made: no key to give back here;
      // asking again would make a fresh grant whose own reply may be lost.)
      if (l.error() != errc::timeout) return fail_all(store, held, {}, req, l.error(), ctl);
      if (std::error_code ec = renew_due(held, clock)) {
        return fail_all(store, held, {}, req, ec, ctl);
      }
    }
  }
  return finish_all(store, held, req, errc::lease_lost, ctl);
}

// wait_in_order_once, started over (everything given back first) when a key it held was lost
// while it waited for a later one, as long as the budget lasts.
template <class Store, class Clock>
result<std::vector<lease<Store, Clock>>> wait_in_order(Store& store, const multi_request& req,
                                                       typename Clock::duration budget,
                                                       const acquire_options<Clock>& opts,
                                                       multi_control<Store, Clock>* ctl) {
  Clock clock = opts.clock;
  forward_budget<Clock> b(budget, clock.now());
  for (;;) {
    result<std::vector<lease<Store, Clock>>> r = wait_in_order_once(store, req, b, opts, ctl);
    if (r || r.error() != errc::lease_lost || b.advance(clock.now()) <= Clock::duration::zero()) {
      return r;
    }
  }
}

template <class Store, class Clock>
result<std::vector<lease<Store, Clock>>> wait_all(Store& store, const multi_request& req,
                                                  typename Clock::duration budget,
                                                  const acquire_options<Clock>& opts,
                                                  multi_control<Store, Clock>* ctl = nullptr) {
  if constexpr (has_try_acquire_all_v<Store>) {
    if (ctl == nullptr || ctl->mutation == multi_mutation::none) {
      return wait_atomic(store, req, budget, opts, ctl);
    }
  }
  return wait_in_order(store, req, budget, opts, ctl);
}

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_LEASE_DETAIL_MULTI_ACQUIRE_HPP
