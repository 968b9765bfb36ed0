// SPDX-License-Identifier: MIT
// holdfast/testing/checker.hpp - the safety and liveness checker: reads a history and names the
// first violated invariant of the table below, with a short timeline in the notation of the
// README's timeline.
//
//   invariant              | checked at                 | violated when
//   -----------------------+----------------------------+------------------------------------------
//   S1 fenced writes       | each admitted write        | its token is older than one the resource
//                          |                            | already admitted, or equal to the newest
//                          |                            | one admitted there for another owner (two
//                          |                            | holders under one token)
//   S2 token order         | each new grant by a store  | its token is not greater than every token
//                          |                            | granted before on that key (or is 0/max)
//   S3 exclusive grants    | each new grant by a store  | another owner's lease on the key is still
//                          |                            | live by the store's clock
//   S4 holder belief       | each validity check that   | the store does not hold that lease for
//                          | said "valid" (only before  | that owner and token at that instant,
//                          | any clock left its bound)  | by the store's clock
//   S5 ownership           | each successful renew or   | the caller was not the holder (other
//                          | release                    | owner or token, or the lease had expired)
//   S6 permit bound        | each new grant of a key in | more than N keys of one semaphore's
//                          | a history::permit_groups   | permit_group would be live by the
//                          | group                      | store's clock (S3 generalised to N)
//   L1 liveness            | the heal event             | the contender did not acquire within the
//                          |                            | bound (ttl + backoff cap, on healed
//                          |                            | clocks)
//   L2 regression noticed  | before each event, if the  | a kept-alive holder whose clock went back
//                          | history has a regression   | heard nothing (no loss, no renewal) for
//                          | bound                      | that bound, its own stalls not counted
//   T4 store answers       | each grant or renewal a    | its TTL is <= 0 or > max_ttl: garbage,
//                          | store reported             | not a grant
//   O1 no orphaned grants  | each acquired or           | a store still holds a live grant the
//                          | acquire_failed event       | attempt made to its owner, neither
//                          |                            | reported nor gone back for (asked
//                          |                            | again, released): orphan_watch.hpp
//   O2 no abandoned places | each acquired or           | its client still holds a place in a
//                          | acquire_failed event       | hand-off queue (queue_watch.hpp)
//
// The checker replays the store events in order, keeping per (store, key) the record the store
// must have by the contract (store.hpp): holder, token, and expiry on the store's clock. Expiry is
// an interval [lo, hi]: a re-acquire or renew may set the expiry to now+ttl or keep a later one, a
// multi-step store may have read its clock when its operation began (event::begin_local_ns; lo is
// measured from there), and a store may end a lease late (it rounds up, its clock is coarse):
// instants within history::tolerance_ns *after* hi are judged neither way. None is allowed before
// lo: a store must never end a lease earlier than the TTL it reported (store.hpp, T2), so a grant
// to another owner one tick before lo is an overlap (S3). No contract-abiding store is reported.
//
// The code: verdict.hpp (public) holds what check() answers; under testing/detail/, lease_book.hpp
// records the leases, regression_watch.hpp follows L2, lost_life.hpp restarts and reboots,
// timeline.hpp writes the timeline, event_text.hpp the text forms svg.hpp shares.
//
// Thread-safety: check() is a pure function of its argument.
#ifndef HOLDFAST_TESTING_CHECKER_HPP
#define HOLDFAST_TESTING_CHECKER_HPP

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/store.hpp"
#include "holdfast/testing/detail/event_text.hpp"
#include "holdfast/testing/detail/lease_book.hpp"
#include "holdfast/testing/detail/lost_life.hpp"
#include "holdfast/testing/detail/orphan_watch.hpp"
#include "holdfast/testing/detail/queue_watch.hpp"
#include "holdfast/testing/detail/regression_watch.hpp"
#include "holdfast/testing/detail/timeline.hpp"
#include "holdfast/testing/history.hpp"
#include "holdfast/testing/verdict.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace testing {
namespace detail {

class checker {
 public:
  explicit checker(const history& h) : h_(h) {}
  const auto& keys() const noexcept { return keys_; }  // per (store, key): for lost_life()
  verdict run() {
    for (std::size_t i = 0; i < h_.events.size() && result_.ok(); ++i) {
      regression_due(i, h_.events[i].true_ns);
      if (result_.ok()) step(i);
    }
    if (result_.ok() && !h_.events.empty()) {
      regression_due(h_.events.size() - 1, h_.events.back().true_ns);
    }
    if (result_.ok() && heal_ != npos && !live_seen_) {
      // The run ended without the contender acquiring: report at the heal event.
      fail(invariant::l1_liveness, heal_, "after faults healed, no contender acquired at all",
           {heal_});
    }
    return std::move(result_);
  }

 private:
  static constexpr std::size_t npos = no_event;

  struct key_state {
    bool held = false;
    std::string owner;
    std::uint64_t token = 0;
    std::int64_t lo = 0;  // earliest possible expiry (store clock)
    std::int64_t hi = 0;  // latest possible expiry (store clock)
    std::uint64_t max_token = 0;
    std::size_t max_event = npos;
  };

  struct resource_state {
    std::uint64_t max = 0;
    std::size_t event = npos;  // the first admitted write under `max` (its owner is max's holder)
  };

  // The expiry a grant or renewal sets, as an interval on the store's clock (the file comment).
  struct expiry {
    std::int64_t lo;
    std::int64_t hi;
  };

  static constexpr std::int64_t max_ttl_ms = holdfast::max_ttl.count();

  std::int64_t tol() const noexcept { return h_.tolerance_ns; }
  // No tolerance on this side: a store may end a lease later than its TTL says (it rounds up, its
  // clock is coarse), never earlier (store.hpp, T2), so a grant to another owner before `lo` is an
  // overlap. `lo` is measured from the store's clock when the granting operation began.
  bool definitely_live(const key_state& s, std::int64_t now) const noexcept {
    return s.held && now < s.lo;
  }
  bool definitely_expired(const key_state& s, std::int64_t now) const noexcept {
    return !s.held || now >= s.hi + tol();
  }

  // Fails L2 for a regression still unanswered once true time passed its bound (the watch's
  // table in detail/regression_watch.hpp).
  void regression_due(std::size_t i, std::int64_t now) {
    const regression_watch::overdue late = watch_.first_overdue(h_, now);
    if (late.event == npos) return;
    const std::size_t j = late.event;
    fail(invariant::l2_regression, j,
         h_.node_name(late.node) + "'s clock went back " + fmt_seconds(-h_.events[j].value) +
             " while a keepalive kept its lease, and it heard nothing (no loss reported, no "
             "renewal) for " +
             fmt_seconds(now - h_.events[j].true_ns) + ": the bound is one renew interval (" +
             fmt_seconds(h_.regression_bound_ns) + ", not counting its own stalls)",
         regression_watch::context(h_, late, i));
  }

  void step(std::size_t i) {
    const event& e = h_.events[i];
    watch_.observe(h_, i, e);
    if (e.kind == event_kind::acquired || e.kind == event_kind::acquire_failed) orphaned(i, e);
    if (!result_.ok()) return;
    orphans_.observe(h_, i, e);
    places_.observe(e, i);
    switch (e.kind) {
      case event_kind::store_acquire:
      case event_kind::store_renew:
      case event_kind::store_release:
      case event_kind::store_raise:
        if (e.outcome != not_applied) store_op(i, e);
        break;
      case event_kind::write:
        if (e.outcome == 0) write(i, e);
        break;
      case event_kind::validity:
        if (e.value == 1) belief(i, e);
        break;
      case event_kind::store_up:
        came_back<checker>(h_, i, keys_, lost_);  // detail/lost_life.hpp
        break;
      case event_kind::heal:
        heal_ = i;
        break;
      case event_kind::liveness_acquired:
        live_seen_ = true;
        if (heal_ != npos && e.true_ns - h_.events[heal_].true_ns > h_.events[heal_].value) {
          fail(invariant::l1_liveness, i,
               "after faults healed, the contender needed " +
                   fmt_seconds(e.true_ns - h_.events[heal_].true_ns) +
                   " to acquire; the bound is " + fmt_seconds(h_.events[heal_].value) +
                   " (ttl + backoff cap)",
               liveness_context(i));
        }
        break;
      case event_kind::liveness_failed:
        live_seen_ = true;
        fail(invariant::l1_liveness, i,
             std::string("after faults healed, the contender could not acquire (") +
                 outcome_name(e.outcome) + ") within the bound " +
                 (heal_ != npos ? fmt_seconds(h_.events[heal_].value) : std::string("?")),
             liveness_context(i));
        break;
      default:
        break;
    }
  }

  // A store's applied operation, judged by a step per kind: the answer itself (T4), then token
  // order (S2), exclusive grants (S3), the permit bound (S6) and ownership (S5).
  void store_op(std::size_t i, const event& e) {
    key_state& s = keys_[{e.node, e.key}];
    const std::int64_t now = e.local_ns;  // the store's own clock
    if (e.outcome != 0) return;           // refused: changes nothing (S5 for failures is moot)
    if (!sane_grant(i, e)) return;
    switch (e.kind) {
      case event_kind::store_acquire:
        store_acquire(i, e, s, now);
        return;
      case event_kind::store_renew:
        store_renew(i, e, s, now);
        return;
      case event_kind::store_raise:
        raise(i, e, s, now);
        return;
      default:  // store_release
        store_release(i, e, s);
        return;
    }
  }

  // T4: a grant or renewal with a TTL outside (0, max_ttl] is garbage, not a grant. Judged before
  // any arithmetic, which it would overflow.
  bool sane_grant(std::size_t i, const event& e) {
    if (e.kind != event_kind::store_acquire && e.kind != event_kind::store_renew) return true;
    if (e.ttl_ms > 0 && e.ttl_ms <= max_ttl_ms) return true;
    fail(invariant::t4_store_answers, i,
         "the store reported a grant of \"" + key_name(e.key) + "\" with TTL " +
             std::to_string(e.ttl_ms) + "ms, outside (0, max_ttl]: a store that answers " +
             "garbage must report an error, never a grant",
         {i});
    return false;
  }

  // The store holds the grant for at least the TTL from when the operation began (`lo`) and, on a
  // coarse clock, up to two ticks longer than from when it applied (`hi`; store.hpp, T2: it
  // counts the tick its reading may lag, and frees the key at its first reading past that).
  expiry expiry_of(const event& e, std::int64_t now) const {
    const std::int64_t until = sat_add(now, e.ttl_ms * 1000000);
    const std::int64_t until_hi = sat_add(until, 2 * h_.tick_of(e.node));
    // The earliest expiry the store can have computed: from its clock when the operation began
    // (a multi-step store may have read it before stalling at a step point).
    const std::int64_t begin =
        e.begin_local_ns != 0 && e.begin_local_ns < now ? e.begin_local_ns : now;
    return {sat_add(begin, e.ttl_ms * 1000000), until_hi};
  }

  void store_acquire(std::size_t i, const event& e, key_state& s, std::int64_t now) {
    const expiry x = expiry_of(e, now);
    const bool same = s.held && s.owner == e.owner && s.token == e.token;
    if (same && !definitely_expired(s, now)) {  // the holder re-acquiring: extends
      s.lo = x.lo;
      s.hi = std::max(s.hi, x.hi);
      extend(i, e, x.hi);
      return;
    }
    if (!token_order(i, e, s)) return;
    if (!exclusive_grant(i, e, s, now)) return;
    if (!permit_bound(i, e, now)) return;
    s.held = true;
    s.owner = e.owner;
    s.token = e.token;
    s.lo = x.lo;
    s.hi = x.hi;
    s.max_token = e.token;
    s.max_event = i;
    granted_lease& r = leases_.at(e.node, e.key, e.token);
    r.grant = i;
    r.last = i;
    r.hi = x.hi;
    r.store = e.node;
    r.key = e.key;
  }

  // S2: a new grant's token is issuable and greater than every token granted before on the key.
  bool token_order(std::size_t i, const event& e, const key_state& s) {
    if (e.token == 0 || e.token == std::numeric_limits<std::uint64_t>::max()) {
      fail(invariant::s2_token_order, i,
           "the store granted an unissuable token " + fmt_token(e.token), {i});
      return false;
    }
    if (e.token > s.max_token) return true;
    std::vector<std::size_t> ctx = leases_.events(e.node, e.key, s.max_token);
    ctx.push_back(i);
    fail(invariant::s2_token_order, i,
         "the store granted " + fmt_token(e.token) + " to " + e.owner + " after granting " +
             holder_of(e.node, e.key, s.max_token) + " on \"" + key_name(e.key) +
             "\": tokens must strictly increase per key, in grant order",
         ctx);
    return false;
  }

  // S3: no grant to another owner while the key's lease is live by the store's clock.
  bool exclusive_grant(std::size_t i, const event& e, const key_state& s, std::int64_t now) {
    if (!definitely_live(s, now) || s.owner == e.owner) return true;
    std::vector<std::size_t> ctx = leases_.events(e.node, e.key, s.token);
    ctx.push_back(i);
    const granted_lease* v = leases_.find(e.node, e.key, s.token);
    fail(invariant::s3_exclusive_grants, i,
         "the store granted \"" + key_name(e.key) + "\" to " + e.owner + " while " + s.owner +
             "'s lease " + fmt_token(s.token) + " was live for another " + fmt_span(s.lo - now) +
             " by the store's clock" + overlap_cause(h_, v != nullptr ? v->grant : npos, e),
         ctx);
    return false;
  }

  // S5 for renew: only the holder's live lease is extended (never from an old expiry).
  void store_renew(std::size_t i, const event& e, key_state& s, std::int64_t now) {
    const bool holder = s.held && s.owner == e.owner && s.token == e.token;
    if (!holder || definitely_expired(s, now)) {
      std::vector<std::size_t> ctx = leases_.events(e.node, e.key, e.token);
      if (s.held && s.token != e.token) {
        std::vector<std::size_t> other = leases_.events(e.node, e.key, s.token);
        ctx.insert(ctx.end(), other.begin(), other.end());
      }
      ctx.push_back(i);
      fail(invariant::s5_ownership, i,
           holder ? "the store renewed " + e.owner + "'s lease " + fmt_token(e.token) + " " +
                        fmt_span(now - s.hi) + " after it expired by the store's clock: renew " +
                        "extended from the old expiry (after expiry it must answer lease_lost)"
                  : "the store renewed \"" + key_name(e.key) + "\" for " + e.owner + " " +
                        fmt_token(e.token) + ", who is not its holder (" + holder_text(s) + ")",
           ctx);
      return;
    }
    const expiry x = expiry_of(e, now);
    s.lo = x.lo;
    s.hi = std::max(s.hi, x.hi);
    extend(i, e, x.hi);
  }

  // S5 for release: only the holder's lease is released.
  void store_release(std::size_t i, const event& e, key_state& s) {
    const bool holder = s.held && s.owner == e.owner && s.token == e.token;
    if (!holder) {
      std::vector<std::size_t> ctx = leases_.events(e.node, e.key, s.token);
      std::vector<std::size_t> mine = leases_.events(e.node, e.key, e.token);
      ctx.insert(ctx.end(), mine.begin(), mine.end());
      ctx.push_back(i);
      fail(invariant::s5_ownership, i,
           "the store released \"" + key_name(e.key) + "\" for " + e.owner + " " +
               fmt_token(e.token) + ", who is not its holder (" + holder_text(s) + ")",
           ctx);
      return;
    }
    s.held = false;
    if (granted_lease* r = leases_.find_exact(e.node, e.key, e.token)) r->end = i;
  }

  // "<owner>'s <token>" of the key's holder, or "nobody" (for messages).
  static std::string holder_text(const key_state& s) {
    return s.held ? s.owner + "'s " + fmt_token(s.token) : std::string("nobody");
  }

  // S6: a new grant of a semaphore's permit key must leave at most N of its keys live. Only
  // leases that are definitely live count, so no contract-abiding store is ever reported.
  bool permit_bound(std::size_t i, const event& e, std::int64_t now) {
    const std::string& name = key_name(e.key);
    for (const permit_group& g : h_.permit_groups) {
      if (name.compare(0, g.prefix.size(), g.prefix) != 0) continue;
      std::vector<std::size_t> ctx;
      std::uint32_t live = 1;  // this grant
      for (const auto& kv : keys_) {
        if (kv.first.first != e.node || kv.first.second == e.key) continue;
        const std::string& other = key_name(kv.first.second);
        if (other.compare(0, g.prefix.size(), g.prefix) != 0) continue;
        if (!definitely_live(kv.second, now)) continue;
        ++live;
        std::vector<std::size_t> l = leases_.events(e.node, kv.first.second, kv.second.token);
        ctx.insert(ctx.end(), l.begin(), l.end());
      }
      if (live > g.permits) {
        ctx.push_back(i);
        fail(invariant::s6_permit_bound, i,
             "the store granted \"" + name + "\" to " + e.owner + " while " +
                 std::to_string(live - 1) + " other permits of \"" + g.prefix +
                 "\" were live by the store's clock: " + std::to_string(live) + " live permits, " +
                 "the bound is " + std::to_string(g.permits),
             ctx);
        return false;
      }
    }
    return true;
  }

  // raise_token (quorum.hpp's token floor): only the live holder's lease is re-labelled, and
  // every later grant on the key must carry a greater token.
  void raise(std::size_t i, const event& e, key_state& s, std::int64_t now) {
    const std::uint64_t to = static_cast<std::uint64_t>(e.value);
    const bool holder = s.held && s.owner == e.owner && (s.token == e.token || s.token == to);
    if (!holder || definitely_expired(s, now)) {
      std::vector<std::size_t> ctx = leases_.events(e.node, e.key, e.token);
      ctx.push_back(i);
      fail(invariant::s5_ownership, i,
           "the store raised " + e.owner + "'s " + fmt_token(e.token) + " to " + fmt_token(to) +
               " on \"" + key_name(e.key) + "\", but " +
               (holder ? std::string("that lease had expired by the store's clock")
                       : "the holder is " + holder_text(s)),
           ctx);
      return;
    }
    const granted_lease* old = leases_.find_exact(e.node, e.key, s.token);
    granted_lease moved = old != nullptr ? *old : granted_lease{};
    moved.last = i;
    moved.store = e.node;
    moved.key = e.key;
    if (moved.grant == npos) moved.grant = i;
    leases_.at(e.node, e.key, to) = moved;
    s.token = to;
    if (to > s.max_token) {
      s.max_token = to;
      s.max_event = i;
    }
  }

  void extend(std::size_t i, const event& e, std::int64_t until) {
    granted_lease* r = leases_.find_exact(e.node, e.key, e.token);
    if (r == nullptr) return;
    r->last = i;
    r->hi = std::max(r->hi, until);
  }

  void write(std::size_t i, const event& e) {
    resource_state& r = resources_[e.key];
    if (r.event != npos && e.token < r.max) {
      std::vector<std::size_t> ctx = leases_.events(h_.primary_store, e.key, e.token);
      std::vector<std::size_t> newer = leases_.events(h_.primary_store, e.key, r.max);
      ctx.insert(ctx.end(), newer.begin(), newer.end());
      ctx.push_back(r.event);
      ctx.push_back(last_check(e.node, i));
      ctx.push_back(i);
      fail(invariant::s1_fenced_writes, i,
           who(e) + "'s write with " + fmt_token(e.token) + " was admitted after " +
               holder_of(h_.primary_store, e.key, r.max) +
               " had been admitted at the resource of \"" + key_name(e.key) + "\"",
           ctx);
      return;
    }
    if (r.event != npos && e.token == r.max && !e.owner.empty()) {
      const event& first = h_.events[r.event];
      if (!first.owner.empty() && first.owner != e.owner) {
        std::vector<std::size_t> ctx = leases_.events(h_.primary_store, e.key, e.token);
        ctx.push_back(r.event);
        ctx.push_back(last_check(e.node, i));
        ctx.push_back(i);
        fail(invariant::s1_fenced_writes, i,
             who(e) + "'s write with " + fmt_token(e.token) + " was admitted after " + first.owner +
                 "'s write with the same token at the resource of \"" + key_name(e.key) +
                 "\": two holders under one token (the store lost grants: token_reissued)",
             ctx);
        return;
      }
    }
    if (r.event == npos || e.token > r.max) {
      r.max = e.token;
      r.event = i;
    }
  }

  void belief(std::size_t i, const event& e) {
    if (h_.primary_store == no_node || e.true_ns >= h_.s4_until_ns) return;
    if (lost_.count({h_.primary_store, e.key, e.token, e.owner}) != 0) return;  // lost in a restart
    auto it = keys_.find({h_.primary_store, e.key});
    static const key_state empty{};
    const key_state& s = it == keys_.end() ? empty : it->second;
    const std::int64_t now = e.store_ns;
    const bool holder = s.held && s.owner == e.owner && s.token == e.token;
    if (holder && !definitely_expired(s, now)) return;
    std::vector<std::size_t> ctx = leases_.events(h_.primary_store, e.key, e.token);
    if (s.held && s.token != e.token) {
      std::vector<std::size_t> other = leases_.events(h_.primary_store, e.key, s.token);
      ctx.insert(ctx.end(), other.begin(), other.end());
    }
    ctx.push_back(i);
    std::string why;
    if (holder) {
      why = "its lease " + fmt_token(e.token) + " had expired " + fmt_seconds(now - s.hi) +
            " earlier by the store's clock";
    } else if (s.held) {
      why = "the store's holder is " + s.owner + " (" + fmt_token(s.token) + ")";
    } else {
      why = "the store holds no lease on the key";
    }
    fail(invariant::s4_holder_belief, i,
         who(e) + " believed it held \"" + key_name(e.key) + "\" with " + fmt_token(e.token) +
             " but " + why + " (clocks within the drift bound, no jumps)",
         ctx);
  }

  // O1, O2: the attempt ending at `e` left no grant, no queue place behind (orphan/queue_watch).
  void orphaned(std::size_t i, const event& e) {
    if (const std::size_t q = places_.abandoned(e); q != npos) {
      const std::string ended = who(e) + "'s attempt ended (" + outcome_name(e.outcome) + ") ";
      return fail(invariant::o2_abandoned_place, i, ended + queue_watch::what(h_, q),
                  attempt_context(q, i, e));
    }
    const std::size_t g = orphans_.orphan(h_, e);
    if (g == npos) return;
    const event& o = h_.events[g];
    fail(invariant::o1_orphaned_grant, i,
         who(e) + "'s attempt ended (" + outcome_name(e.outcome) + ") while " +
             h_.node_name(o.node) + " still held the grant " + fmt_token(o.token) + " of \"" +
             key_name(o.key) + "\" it had made to " + o.owner + " (the client was told " +
             outcome_name(o.seen) + "), neither reported nor asked again nor released",
         attempt_context(g, i, e));
  }

  // The events of e's node (its own and its store calls) from event g to i.
  std::vector<std::size_t> attempt_context(std::size_t g, std::size_t i, const event& e) const {
    std::vector<std::size_t> ctx;
    for (std::size_t j = g; j <= i; ++j) {
      const event& x = h_.events[j];
      if (x.node == e.node || x.peer == e.node) ctx.push_back(j);
    }
    return ctx;
  }

  std::vector<std::size_t> liveness_context(std::size_t i) const {
    std::vector<std::size_t> ctx;
    if (heal_ != npos) ctx.push_back(heal_);
    for (const auto& kv : keys_) {
      if (kv.second.held) {
        std::vector<std::size_t> l =
            leases_.events(kv.first.first, kv.first.second, kv.second.token);
        ctx.insert(ctx.end(), l.begin(), l.end());
      }
    }
    ctx.push_back(i);
    return ctx;
  }
  // The validity check that let write `i` through: the same node's previous event, stalls
  // aside, if it is a check of the same token (npos for a write made without checking).
  std::size_t last_check(node_id node, std::size_t i) const {
    for (std::size_t j = i; j-- > 0;) {
      const event& e = h_.events[j];
      if (e.node != node || e.kind == event_kind::pause) continue;
      const bool check =
          e.kind == event_kind::validity && e.value == 1 && e.token == h_.events[i].token;
      return check ? j : npos;
    }
    return npos;
  }

  // "<owner> <token>" of the lease carrying `token` on `key` (for messages).
  std::string holder_of(node_id store, std::uint8_t key, std::uint64_t token) const {
    const granted_lease* r = leases_.find(store, key, token);
    if (r == nullptr) return fmt_token(token);
    return h_.events[r->grant].owner + "'s " + fmt_token(token);
  }

  const std::string& key_name(std::uint8_t k) const { return key_label(h_, k); }

  void fail(invariant inv, std::size_t at, std::string what, const std::vector<std::size_t>& ctx) {
    result_.violated = inv;
    result_.at = at;
    result_.what = std::move(what);
    result_.timeline = timeline(h_, leases_).render(ctx, at, inv);
  }

  // ---- timeline -------------------------------------------------------------------------------

  std::string who(const event& e) const {
    if (!e.owner.empty()) return e.owner;
    return h_.node_name(e.peer != no_node ? e.peer : e.node);
  }

  const history& h_;
  verdict result_;
  std::map<std::pair<node_id, std::uint8_t>, key_state> keys_;
  std::map<std::uint8_t, resource_state> resources_;
  lost_grants lost_;  // grants and renewals a store lost in a lagging restart
  lease_book leases_;
  std::size_t heal_ = npos;
  regression_watch watch_;  // L2
  orphan_watch orphans_;    // O1
  queue_watch places_;      // O2
  bool live_seen_ = false;
};

}  // namespace detail

/// Checks history `h` against every invariant of the table atop checker.hpp; returns the first
/// violation in event order, with a timeline of the events that matter, or an ok verdict. L1 only
/// if the history has a `heal` event; S4 only before s4_until_ns and with primary_store set.
[[nodiscard]] inline verdict check(const history& h) {
  return detail::checker(h).run();
}

}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_CHECKER_HPP
