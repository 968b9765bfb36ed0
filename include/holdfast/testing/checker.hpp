// holdfast/testing/checker.hpp - the safety and liveness checker: reads a history and names the
// first violated invariant of the table below, with a short timeline in the notation of the
// README's timeline.
//
//   invariant              | checked at                 | violated when
//   -----------------------+----------------------------+-------------------------------------------
//   S1 fenced writes       | each admitted write        | its token is older than one the resource
//                          |                            | already admitted
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
//
// The checker replays the store events in order, keeping per (store, key) the record the store
// must have by the contract (store.hpp): holder, token, and expiry on the store's clock. Expiry is
// an interval [lo, hi]: a re-acquire or renew may set the expiry to now+ttl or keep a later one, a
// multi-step store may have read its clock when its operation began (event::begin_local_ns; lo is
// measured from there), and a store may end a lease late (it rounds up, its clock is coarse):
// instants within history::tolerance_ns *after* hi are judged neither way. None is allowed before
// lo: a store must never end a lease earlier than the TTL it reported (store.hpp, T2), so a grant
// to another owner one tick before lo is an overlap (S3). So the checker never reports a violation
// that some contract-abiding store could have produced.
//
// Thread-safety: check() is a pure function of its argument.
#ifndef HOLDFAST_TESTING_CHECKER_HPP
#define HOLDFAST_TESTING_CHECKER_HPP

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/store.hpp"
#include "holdfast/testing/history.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace testing {

/// The invariants in the table at the top of checker.hpp (none = all hold).
enum class invariant : std::uint8_t {
  none,
  s1_fenced_writes,
  s2_token_order,
  s3_exclusive_grants,
  s4_holder_belief,
  s5_ownership,
  l1_liveness,
  s6_permit_bound,
  t4_store_answers,  ///< The store reported a grant no store can make (TTL <= 0 or > max_ttl).
  l2_regression,  ///< A kept-alive holder whose clock went back heard nothing in a renew interval.
};

/// Returns the invariant's tag: "S1" .. "S5", "L1", or "-".
inline const char* tag(invariant i) noexcept {
  switch (i) {
    case invariant::none:
      return "-";
    case invariant::s1_fenced_writes:
      return "S1";
    case invariant::s2_token_order:
      return "S2";
    case invariant::s3_exclusive_grants:
      return "S3";
    case invariant::s4_holder_belief:
      return "S4";
    case invariant::s5_ownership:
      return "S5";
    case invariant::l1_liveness:
      return "L1";
    case invariant::s6_permit_bound:
      return "S6";
    case invariant::t4_store_answers:
      return "T4";
    case invariant::l2_regression:
      return "L2";
  }
  return "?";
}

/// Returns the invariant's name as in the table at the top of checker.hpp, e.g. "S1 fenced writes".
inline const char* to_string(invariant i) noexcept {
  switch (i) {
    case invariant::none:
      return "no violation";
    case invariant::s1_fenced_writes:
      return "S1 fenced writes";
    case invariant::s2_token_order:
      return "S2 token order";
    case invariant::s3_exclusive_grants:
      return "S3 exclusive grants";
    case invariant::s4_holder_belief:
      return "S4 holder belief";
    case invariant::s5_ownership:
      return "S5 ownership";
    case invariant::l1_liveness:
      return "L1 liveness";
    case invariant::s6_permit_bound:
      return "S6 permit bound";
    case invariant::t4_store_answers:
      return "T4 store answers";
    case invariant::l2_regression:
      return "L2 clock regression noticed";
  }
  return "?";
}

/// The checker's answer: ok, or the first violated invariant with an explanation and a timeline.
struct verdict {
  invariant violated = invariant::none;  ///< The first violated invariant (none: all hold).
  std::size_t at = 0;                    ///< Index of the violating event in history::events.
  std::string what;                      ///< One sentence: what went wrong.
  std::string timeline;  ///< The events that matter, one per line (the README's timeline).

  /// Returns true iff no invariant was violated.
  [[nodiscard]] bool ok() const noexcept { return violated == invariant::none; }
  /// Returns true iff no invariant was violated.
  explicit operator bool() const noexcept { return ok(); }

  /// Returns "<invariant> violated: <what>" followed by the timeline, or "all invariants hold".
  [[nodiscard]] std::string report() const {
    if (ok()) return "all invariants hold (S1-S6, L1)\n";
    return std::string(to_string(violated)) + " violated: " + what + "\n" + timeline;
  }
};

namespace detail {

inline std::string fmt_seconds(std::int64_t ns) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.3fs", static_cast<double>(ns) / 1e9);
  return buf;
}

// A span that may be as short as one clock tick: seconds, or ns/us when under a millisecond (a
// lease ended one tick early must not read "live for another 0.000s").
inline std::string fmt_span(std::int64_t ns) {
  const std::int64_t a = ns < 0 ? -ns : ns;
  if (a >= 1000000) return fmt_seconds(ns);
  char buf[48];
  if (a < 1000) {
    std::snprintf(buf, sizeof buf, "%lldns", static_cast<long long>(ns));
  } else {
    std::snprintf(buf, sizeof buf, "%.3fus", static_cast<double>(ns) / 1e3);
  }
  return buf;
}

inline std::string fmt_token(std::uint64_t t) {
  return holdfast::to_string(fencing_token{t});  // fencing_token.hpp's one text form
}

class checker {
 public:
  explicit checker(const history& h) : h_(h) {}

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
  static constexpr std::size_t npos = static_cast<std::size_t>(-1);

  struct lease_rec {
    std::size_t grant = npos;  // the store event that granted it
    std::size_t last = npos;   // the latest store event that extended it
    std::size_t end = npos;    // the store event that released it
    std::int64_t hi = 0;       // latest possible expiry, store clock
    node_id store = no_node;
    std::uint8_t key = 0;
  };

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
    std::size_t event = npos;
  };

  static constexpr std::int64_t max_ttl_ms = holdfast::max_ttl.count();
  static std::int64_t sat_add(std::int64_t a, std::int64_t b) noexcept {
    if (b > 0 && a > std::numeric_limits<std::int64_t>::max() - b) {
      return std::numeric_limits<std::int64_t>::max();
    }
    if (b < 0 && a < std::numeric_limits<std::int64_t>::min() - b) {
      return std::numeric_limits<std::int64_t>::min();
    }
    return a + b;
  }

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

  // L2 (testing/checker.hpp): a holder whose lease a keepalive keeps alive and whose clock
  // regresses (clock_regress: a jump back right after its keepalive read the clock) must learn it
  // (its lease turns lost, a validity check says no, a renewal fails) or renew, within
  // history::regression_bound_ns of true time, its own stalls not counted, unless by then its
  // clock has run past where it was before the jump. Tracked per client node from the history:
  // it keeps a lease from `acquired` until it releases, loses it, or crashes.
  void regression(std::size_t i, const event& e) {
    if (h_.regression_bound_ns <= 0 || e.node == no_node) return;
    if (e.node >= kept_.size()) {
      kept_.resize(e.node + 1, false);
      pending_.resize(e.node + 1, npos);
      due_.resize(e.node + 1, 0);
    }
    switch (e.kind) {
      case event_kind::acquired:
        kept_[e.node] = true;
        pending_[e.node] = npos;
        return;
      case event_kind::clock_regress:
        if (kept_[e.node] && pending_[e.node] == npos) {
          pending_[e.node] = i;
          due_[e.node] = sat_add(e.true_ns, h_.regression_bound_ns);
        }
        return;
      case event_kind::pause:  // a stalled process cannot react: the stall does not count
        if (pending_[e.node] != npos) due_[e.node] = sat_add(due_[e.node], e.value);
        return;
      case event_kind::renewed:
        pending_[e.node] = npos;
        return;
      case event_kind::validity:
      case event_kind::renew_failed:
        if (e.kind == event_kind::renew_failed || e.value == 0) pending_[e.node] = npos;
        return;
      case event_kind::lease_lost:
      case event_kind::released:
      case event_kind::release_failed:
      case event_kind::crash:
      case event_kind::restart:
        kept_[e.node] = false;
        pending_[e.node] = npos;
        return;
      default:
        return;
    }
  }

  // Fails L2 for a regression still unanswered once true time passed its bound.
  void regression_due(std::size_t i, std::int64_t now) {
    for (std::size_t n = 0; n < pending_.size() && result_.ok(); ++n) {
      const std::size_t j = pending_[n];
      if (j == npos) continue;
      if (now <= due_[n]) continue;
      // Moot once the holder's clock has surely read past where it was before the jump (it runs
      // during stalls too, at up to 5% slow): nothing is left to notice.
      if ((now - h_.events[j].true_ns) / 100 * 95 >= -h_.events[j].value) {
        pending_[n] = npos;
        continue;
      }
      std::vector<std::size_t> ctx = {j};
      for (std::size_t k = j; k-- > 0;) {  // the lease it held: its grant
        const event& a = h_.events[k];
        if (a.node == static_cast<node_id>(n) && a.kind == event_kind::acquired) {
          ctx.push_back(k);
          break;
        }
      }
      ctx.push_back(i);
      fail(invariant::l2_regression, j,
           h_.node_name(static_cast<node_id>(n)) + "'s clock went back " +
               fmt_seconds(-h_.events[j].value) +
               " while a keepalive kept its lease, and it heard nothing (no loss reported, no "
               "renewal) for " +
               fmt_seconds(now - h_.events[j].true_ns) + ": the bound is one renew interval (" +
               fmt_seconds(h_.regression_bound_ns) + ", not counting its own stalls)",
           ctx);
    }
  }

  void step(std::size_t i) {
    const event& e = h_.events[i];
    regression(i, e);
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

  void store_op(std::size_t i, const event& e) {
    key_state& s = keys_[{e.node, e.key}];
    const std::int64_t now = e.local_ns;  // the store's own clock
    if (e.outcome != 0) return;           // refused: changes nothing (S5 for failures is moot)
    if ((e.kind == event_kind::store_acquire || e.kind == event_kind::store_renew) &&
        (e.ttl_ms <= 0 || e.ttl_ms > max_ttl_ms)) {
      // Garbage, not a grant (T4): judged before any arithmetic, which it would overflow.
      fail(invariant::t4_store_answers, i,
           "the store reported a grant of \"" + key_name(e.key) + "\" with TTL " +
               std::to_string(e.ttl_ms) + "ms, outside (0, max_ttl]: a store that answers " +
               "garbage must report an error, never a grant",
           {i});
      return;
    }
    // The store holds the grant for at least the TTL from when the operation began (`until_lo`)
    // and, on a coarse clock, up to two ticks longer than from when it applied (store.hpp, T2: it
    // counts the tick its reading may lag, and frees the key at its first reading past that).
    const std::int64_t until = sat_add(now, e.ttl_ms * 1000000);
    const std::int64_t until_hi = sat_add(until, 2 * h_.tick_of(e.node));
    // The earliest expiry the store can have computed: from its clock when the operation began
    // (a multi-step store may have read it before stalling at a step point).
    const std::int64_t begin =
        e.begin_local_ns != 0 && e.begin_local_ns < now ? e.begin_local_ns : now;
    const std::int64_t until_lo = sat_add(begin, e.ttl_ms * 1000000);
    if (e.kind == event_kind::store_acquire) {
      const bool same = s.held && s.owner == e.owner && s.token == e.token;
      if (same && !definitely_expired(s, now)) {  // the holder re-acquiring: extends
        s.lo = until_lo;
        s.hi = std::max(s.hi, until_hi);
        extend(i, e, until_hi);
        return;
      }
      if (e.token == 0 || e.token == std::numeric_limits<std::uint64_t>::max()) {
        fail(invariant::s2_token_order, i,
             "the store granted an unissuable token " + fmt_token(e.token), {i});
        return;
      }
      if (e.token <= s.max_token) {
        std::vector<std::size_t> ctx = lease_events(e.node, e.key, s.max_token);
        ctx.push_back(i);
        fail(invariant::s2_token_order, i,
             "the store granted " + fmt_token(e.token) + " to " + e.owner + " after granting " +
                 holder_of(e.node, e.key, s.max_token) + " on \"" + key_name(e.key) +
                 "\": tokens must strictly increase per key, in grant order",
             ctx);
        return;
      }
      if (definitely_live(s, now) && s.owner != e.owner) {
        std::vector<std::size_t> ctx = lease_events(e.node, e.key, s.token);
        ctx.push_back(i);
        fail(invariant::s3_exclusive_grants, i,
             "the store granted \"" + key_name(e.key) + "\" to " + e.owner + " while " + s.owner +
                 "'s lease " + fmt_token(s.token) + " was live for another " +
                 fmt_span(s.lo - now) + " by the store's clock",
             ctx);
        return;
      }
      if (!permit_bound(i, e, now)) return;
      s.held = true;
      s.owner = e.owner;
      s.token = e.token;
      s.lo = until_lo;
      s.hi = until_hi;
      s.max_token = e.token;
      s.max_event = i;
      lease_rec& r = leases_[{e.node, e.key, e.token}];
      r.grant = i;
      r.last = i;
      r.hi = until_hi;
      r.store = e.node;
      r.key = e.key;
      return;
    }
    if (e.kind == event_kind::store_raise) {
      raise(i, e, s, now);
      return;
    }
    const bool holder = s.held && s.owner == e.owner && s.token == e.token;
    if (e.kind == event_kind::store_renew) {
      if (!holder || definitely_expired(s, now)) {
        std::vector<std::size_t> ctx = lease_events(e.node, e.key, e.token);
        if (s.held && s.token != e.token) {
          std::vector<std::size_t> other = lease_events(e.node, e.key, s.token);
          ctx.insert(ctx.end(), other.begin(), other.end());
        }
        ctx.push_back(i);
        fail(invariant::s5_ownership, i,
             holder ? "the store renewed " + e.owner + "'s lease " + fmt_token(e.token) +
                          " although it had expired " + fmt_seconds(now - s.hi) +
                          " earlier by the store's clock: an expired lease was revived"
                    : "the store renewed \"" + key_name(e.key) + "\" for " + e.owner + " " +
                          fmt_token(e.token) + ", who is not its holder (" +
                          (s.held ? s.owner + "'s " + fmt_token(s.token) : std::string("nobody")) +
                          ")",
             ctx);
        return;
      }
      s.lo = until_lo;
      s.hi = std::max(s.hi, until_hi);
      extend(i, e, until_hi);
      return;
    }
    // release
    if (!holder) {
      std::vector<std::size_t> ctx = lease_events(e.node, e.key, s.token);
      std::vector<std::size_t> mine = lease_events(e.node, e.key, e.token);
      ctx.insert(ctx.end(), mine.begin(), mine.end());
      ctx.push_back(i);
      fail(invariant::s5_ownership, i,
           "the store released \"" + key_name(e.key) + "\" for " + e.owner + " " +
               fmt_token(e.token) + ", who is not its holder (" +
               (s.held ? s.owner + "'s " + fmt_token(s.token) : std::string("nobody")) + ")",
           ctx);
      return;
    }
    s.held = false;
    auto it = leases_.find({e.node, e.key, e.token});
    if (it != leases_.end()) it->second.end = i;
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
        std::vector<std::size_t> l = lease_events(e.node, kv.first.second, kv.second.token);
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
      std::vector<std::size_t> ctx = lease_events(e.node, e.key, e.token);
      ctx.push_back(i);
      fail(invariant::s5_ownership, i,
           "the store raised " + e.owner + "'s " + fmt_token(e.token) + " to " + fmt_token(to) +
               " on \"" + key_name(e.key) + "\", but " +
               (holder ? std::string("that lease had expired by the store's clock")
                       : "the holder is " + (s.held ? s.owner + "'s " + fmt_token(s.token)
                                                    : std::string("nobody"))),
           ctx);
      return;
    }
    auto old = leases_.find({e.node, e.key, s.token});
    lease_rec moved = old != leases_.end() ? old->second : lease_rec{};
    moved.last = i;
    moved.store = e.node;
    moved.key = e.key;
    if (moved.grant == npos) moved.grant = i;
    leases_[{e.node, e.key, to}] = moved;
    s.token = to;
    if (to > s.max_token) {
      s.max_token = to;
      s.max_event = i;
    }
  }

  void extend(std::size_t i, const event& e, std::int64_t until) {
    auto it = leases_.find({e.node, e.key, e.token});
    if (it == leases_.end()) return;
    it->second.last = i;
    it->second.hi = std::max(it->second.hi, until);
  }

  void write(std::size_t i, const event& e) {
    resource_state& r = resources_[e.key];
    if (r.event != npos && e.token < r.max) {
      std::vector<std::size_t> ctx = lease_events(h_.primary_store, e.key, e.token);
      std::vector<std::size_t> newer = lease_events(h_.primary_store, e.key, r.max);
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
    if (r.event == npos || e.token > r.max) {
      r.max = e.token;
      r.event = i;
    }
  }

  void belief(std::size_t i, const event& e) {
    if (h_.primary_store == no_node || e.true_ns >= h_.s4_until_ns) return;
    auto it = keys_.find({h_.primary_store, e.key});
    static const key_state empty{};
    const key_state& s = it == keys_.end() ? empty : it->second;
    const std::int64_t now = e.store_ns;
    const bool holder = s.held && s.owner == e.owner && s.token == e.token;
    if (holder && !definitely_expired(s, now)) return;
    std::vector<std::size_t> ctx = lease_events(h_.primary_store, e.key, e.token);
    if (s.held && s.token != e.token) {
      std::vector<std::size_t> other = lease_events(h_.primary_store, e.key, s.token);
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

  std::vector<std::size_t> liveness_context(std::size_t i) const {
    std::vector<std::size_t> ctx;
    if (heal_ != npos) ctx.push_back(heal_);
    for (const auto& kv : keys_) {
      if (kv.second.held) {
        std::vector<std::size_t> l = lease_events(kv.first.first, kv.first.second, kv.second.token);
        ctx.insert(ctx.end(), l.begin(), l.end());
      }
    }
    ctx.push_back(i);
    return ctx;
  }

  // The lease granted with `token` on `key` by `store` (any store if no_node), or null.
  const lease_rec* find_lease(node_id store, std::uint8_t key, std::uint64_t token) const {
    if (store != no_node) {
      auto it = leases_.find({store, key, token});
      return it == leases_.end() ? nullptr : &it->second;
    }
    for (const auto& kv : leases_) {
      if (std::get<1>(kv.first) == key && std::get<2>(kv.first) == token) return &kv.second;
    }
    return nullptr;
  }

  // The grant and latest extension of the lease carrying `token` on `key`.
  std::vector<std::size_t> lease_events(node_id store, std::uint8_t key,
                                        std::uint64_t token) const {
    std::vector<std::size_t> out;
    const lease_rec* r = find_lease(store, key, token);
    if (r == nullptr) return out;
    out.push_back(r->grant);
    if (r->last != r->grant) out.push_back(r->last);
    if (r->end != npos) out.push_back(r->end);
    return out;
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
    const lease_rec* r = find_lease(store, key, token);
    if (r == nullptr) return fmt_token(token);
    return h_.events[r->grant].owner + "'s " + fmt_token(token);
  }

  const std::string& key_name(std::uint8_t k) const {
    static const std::string unknown = "?";
    return k < h_.keys.size() ? h_.keys[k] : unknown;
  }

  void fail(invariant inv, std::size_t at, std::string what, const std::vector<std::size_t>& ctx) {
    result_.violated = inv;
    result_.at = at;
    result_.what = std::move(what);
    result_.timeline = render(ctx, at);
  }

  // ---- timeline -------------------------------------------------------------------------------

  std::string who(const event& e) const {
    if (!e.owner.empty()) return e.owner;
    return h_.node_name(e.peer != no_node ? e.peer : e.node);
  }

  std::string describe(const event& e, bool violating) const {
    const std::string key = "\"" + key_name(e.key) + "\"";
    std::string act;
    std::string res;
    const bool ok = e.outcome == 0;
    switch (e.kind) {
      case event_kind::store_acquire:
        act = who(e) + " acquires " + key + " ttl=" + std::to_string(e.ttl_ms) + "ms";
        res = ok ? "token " + fmt_token(e.token) : outcome_name(e.outcome);
        break;
      case event_kind::store_renew:
        act = who(e) + " renews " + key + " " + fmt_token(e.token);
        res = ok ? "extended ttl=" + std::to_string(e.ttl_ms) + "ms" : outcome_name(e.outcome);
        break;
      case event_kind::store_release:
        act = who(e) + " releases " + key + " " + fmt_token(e.token);
        res = ok ? "released" : outcome_name(e.outcome);
        break;
      case event_kind::store_down:
        act = h_.node_name(e.node) + " goes down (restart)";
        break;
      case event_kind::store_up:
        act = h_.node_name(e.node) + " is back";
        break;
      case event_kind::acquired:
        act = who(e) + "'s acquire returns";
        res = "token " + fmt_token(e.token);
        break;
      case event_kind::acquire_failed:
        act = who(e) + "'s acquire returns";
        res = outcome_name(e.outcome);
        break;
      case event_kind::renewed:
      case event_kind::renew_failed:
        act = who(e) + "'s renew returns";
        res = outcome_name(e.outcome);
        break;
      case event_kind::released:
      case event_kind::release_failed:
        act = who(e) + "'s release returns";
        res = outcome_name(e.outcome);
        break;
      case event_kind::validity:
        act = who(e) + " checks its lease " + fmt_token(e.token);
        res = e.value == 1 ? "valid" : "not valid";
        break;
      case event_kind::write:
        act = who(e) + " writes with token " + fmt_token(e.token);
        if (ok) {
          res = std::string(violating ? "ADMITTED" : "admitted") +
                " (newest seen: " + fmt_token(static_cast<std::uint64_t>(e.value)) + ")";
        } else {
          res = "rejected (" + std::string(outcome_name(e.outcome)) + ")";
        }
        break;
      case event_kind::pause:
        act = h_.node_name(e.node) + " pauses " + fmt_seconds(e.value) + " (GC, swap, slow disk)";
        break;
      case event_kind::crash:
        act = h_.node_name(e.node) + " crashes";
        break;
      case event_kind::restart:
        act = h_.node_name(e.node) + " restarts" +
              (e.owner.empty() ? std::string() : " (new owner id " + e.owner + ")");
        break;
      case event_kind::clock_jump:
        act = h_.node_name(e.node) + "'s clock jumps " + (e.value >= 0 ? "+" : "") +
              fmt_seconds(e.value);
        break;
      case event_kind::heal:
        act = "faults stop; a contender must acquire within " + fmt_seconds(e.value);
        break;
      case event_kind::liveness_acquired:
        act = h_.node_name(e.node) + " (contender) acquires " + key;
        res = "token " + fmt_token(e.token);
        break;
      case event_kind::liveness_failed:
        act = h_.node_name(e.node) + " (contender) gives up on " + key;
        res = outcome_name(e.outcome);
        break;
      case event_kind::store_raise:
        act = who(e) + " raises " + key + " " + fmt_token(e.token) + " to " +
              fmt_token(static_cast<std::uint64_t>(e.value));
        res = ok ? "raised" : outcome_name(e.outcome);
        break;
      case event_kind::clock_regress:
        act = h_.node_name(e.node) + "'s clock goes back " + fmt_seconds(-e.value) +
              " (right after its keepalive read it)";
        break;
      case event_kind::lease_lost:
        act = who(e) + " is told its lease " + fmt_token(e.token) + " is lost";
        {
          // holdfast::loss_cause, in its declaration order (detail/lease_shared.hpp).
          static const char* const causes[] = {"none",       "validity_passed", "renew_refused",
                                               "not_holder", "clock_regressed", "protocol_error"};
          res = e.value >= 0 && e.value < 6 ? causes[e.value] : "?";
        }
        break;
    }
    // A multi-step store's operation: where it stalled between its steps, and when it returned
    // after taking effect (a token drawn in a later step is the classic bug, store.hpp T1).
    const bool store_op = e.kind == event_kind::store_acquire ||
                          e.kind == event_kind::store_renew || e.kind == event_kind::store_release;
    if (store_op && e.begin_local_ns != 0 && e.local_ns > e.begin_local_ns) {
      act += " [began " + fmt_span(e.local_ns - e.begin_local_ns) +
             " earlier; others ran between its steps]";
    }
    if (store_op && e.end_local_ns > e.local_ns) {
      act += " [took effect here; its last step ran " + fmt_span(e.end_local_ns - e.local_ns) +
             " later]";
    }
    switch (e.note) {
      case fault_note::none:
        break;
      case fault_note::request_delayed:
        act += " [request in flight " + fmt_seconds(e.value) + "]";
        break;
      case fault_note::reply_delayed:
        act += " [reply in flight " + fmt_seconds(e.value) + "]";
        break;
      case fault_note::reply_lost:
        act += " [reply lost]";
        break;
      case fault_note::error_after:
        act += " [store errs after applying]";
        break;
    }
    if (e.seen != e.outcome &&
        (e.kind == event_kind::store_acquire || e.kind == event_kind::store_renew ||
         e.kind == event_kind::store_release)) {
      res += std::string(" (client sees ") + outcome_name(e.seen) + ")";
    }
    std::string line = act;
    if (!res.empty()) {
      if (line.size() < 46) line.append(46 - line.size(), ' ');
      line += " -> " + res;
    }
    return line;
  }

  // Approximate true time at which `store`'s clock read `x` (clocks are linear between events).
  std::int64_t true_time_of(node_id store, std::int64_t x) const {
    std::int64_t best = -1;
    for (const event& e : h_.events) {
      std::int64_t clk;
      if (e.node == store &&
          (e.kind == event_kind::store_acquire || e.kind == event_kind::store_renew ||
           e.kind == event_kind::store_release)) {
        clk = e.local_ns;
      } else if (store == h_.primary_store) {
        clk = e.store_ns;
      } else {
        continue;
      }
      if (clk <= x) best = e.true_ns + (x - clk);
    }
    return best;
  }

  std::string render(std::vector<std::size_t> ctx, std::size_t at) const {
    // Nodes involved: whoever acted in the context. Their crashes, restarts and clock jumps in
    // the window matter; of the pauses, only the violator's stall right before the violation
    // (its other pauses, and everyone else's, only changed when things happened).
    std::vector<node_id> involved;
    std::size_t first = at;
    const event& v = h_.events[at];
    const node_id violator = v.peer != no_node ? v.peer : v.node;
    std::size_t violator_last = npos;
    for (std::size_t j : ctx) {
      if (j == npos || j >= h_.events.size()) continue;
      const event& e = h_.events[j];
      const node_id n = e.peer != no_node ? e.peer : e.node;
      if (std::find(involved.begin(), involved.end(), n) == involved.end()) involved.push_back(n);
      first = std::min(first, j);
      if (n == violator && j < at && (violator_last == npos || j > violator_last))
        violator_last = j;
    }
    for (std::size_t j = first; j < at; ++j) {
      const event& e = h_.events[j];
      const bool mine = std::find(involved.begin(), involved.end(), e.node) != involved.end();
      const bool fault = e.kind == event_kind::crash || e.kind == event_kind::restart ||
                         e.kind == event_kind::clock_jump;
      const bool stall = e.kind == event_kind::pause && e.node == violator &&
                         (violator_last == npos || j > violator_last);
      if ((fault && mine) || stall) ctx.push_back(j);
      if (e.kind == event_kind::store_down || e.kind == event_kind::store_up) ctx.push_back(j);
    }
    ctx.erase(std::remove(ctx.begin(), ctx.end(), npos), ctx.end());
    std::sort(ctx.begin(), ctx.end());
    ctx.erase(std::unique(ctx.begin(), ctx.end()), ctx.end());

    struct line {
      std::int64_t t;
      std::size_t order;
      std::string text;
    };
    std::vector<line> lines;
    for (std::size_t j : ctx) {
      const event& e = h_.events[j];
      std::string text = describe(e, j == at);
      if (j == at) text += "   <- " + std::string(tag(result_.violated)) + " violated";
      lines.push_back({e.true_ns, j * 2 + 1, std::move(text)});
    }
    // Synthesized expiry lines for the leases in the context that expired before the violation.
    const std::int64_t t_at = h_.events[at].true_ns;
    for (std::size_t j : ctx) {
      const event& e = h_.events[j];
      if (e.kind != event_kind::store_acquire || e.outcome != 0) continue;
      const lease_rec* r = find_lease(e.node, e.key, e.token);
      if (r == nullptr || r->grant != j) continue;
      const std::int64_t t = true_time_of(r->store, r->hi);
      if (t < 0 || t > t_at) continue;
      if (r->end != npos && h_.events[r->end].true_ns <= t) continue;  // released before
      std::size_t order = 0;  // place it among the events by time
      for (const line& l : lines) {
        if (l.t <= t) order = std::max(order, l.order + 1);
      }
      lines.push_back(
          {t, order,
           "the store's clock passes the expiry of " + e.owner + "'s lease " + fmt_token(e.token)});
    }
    std::sort(lines.begin(), lines.end(),
              [](const line& a, const line& b) { return a.order < b.order; });
    constexpr std::size_t max_lines = 16;
    std::string out;
    std::size_t skipped = 0;
    for (std::size_t k = 0; k < lines.size(); ++k) {
      if (lines.size() > max_lines && k >= 3 && k < lines.size() - (max_lines - 3)) {
        ++skipped;
        continue;
      }
      if (skipped != 0) {
        out += "  ...    (" + std::to_string(skipped) + " more)\n";
        skipped = 0;
      }
      char buf[32];
      std::snprintf(buf, sizeof buf, "  t=%-9s ", fmt_seconds(lines[k].t).c_str());
      out += buf;
      out += lines[k].text;
      out += '\n';
    }
    return out;
  }

  const history& h_;
  verdict result_;
  std::map<std::pair<node_id, std::uint8_t>, key_state> keys_;
  std::map<std::uint8_t, resource_state> resources_;
  std::map<std::tuple<node_id, std::uint8_t, std::uint64_t>, lease_rec> leases_;
  std::size_t heal_ = npos;
  std::vector<bool> kept_;            // L2: by client node, holds a kept-alive lease
  std::vector<std::size_t> pending_;  // L2: by client node, an unanswered regression (event)
  std::vector<std::int64_t> due_;     // L2: by client node, when it must have heard (true ns)
  bool live_seen_ = false;
};

}  // namespace detail

/// Checks history `h` against S1-S6 and L1 (see the table at the top of checker.hpp) and returns
/// the first violation in event order, with a timeline of the events that matter, or an ok
/// verdict. L1 is checked only if the history has a `heal` event; S4 only for events before
/// history::s4_until_ns and when history::primary_store is set.
[[nodiscard]] inline verdict check(const history& h) {
  return detail::checker(h).run();
}

}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_CHECKER_HPP
