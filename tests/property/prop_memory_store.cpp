// SPDX-License-Identifier: MIT
// Property tests for holdfast/stores/memory.hpp: random sequences of acquire / renew / release /
// advance-time over a few keys and owners, run against memory_store<manual_clock>, and checked
// for the store-side safety invariants of testing/checker.hpp:
//
//   S2 token order      per key, tokens strictly increase in the order the store granted them,
//                       and (memory_store promises more) store-wide too
//   S3 exclusive grants per key, by the store's clock, no two grants overlap unless the earlier
//                       one ended (expired by its reported TTL, or released)
//   S5 ownership        renew and release by a non-holder fail and change nothing (inspect()
//                       before and after agree)
//   model               every answer and every inspect() equals a small reference model's
//
// A property that cannot fail proves nothing, so each one is also run against deliberately
// broken stores (toy_store below, with one flaw switched on) and must FAIL there within
// rapidcheck's default 100 cases. The same toy with no flaw passes everything, so each failure is
// the flaw's doing, not the toy's.
#include <rapidcheck.h>
#include <rapidcheck/catch.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "holdfast/clock.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/result.hpp"
#include "holdfast/store.hpp"
#include "holdfast/stores/memory.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_prop_memory_store {

namespace {

using holdfast::errc;
using holdfast::fencing_token;
using holdfast::grant;
using holdfast::lease_record;
using holdfast::manual_clock;
using holdfast::result;
using ms = std::chrono::milliseconds;
using tp = manual_clock::time_point;

constexpr int kKeys = 3;
constexpr int kOwners = 3;

// ---------------------------------------------------------------------------------------------
// Operations and their generator
// ---------------------------------------------------------------------------------------------

enum class op_kind { acquire, renew, release, advance };

/// Which token a renew or release presents, resolved when the op runs from what clients know.
enum class token_pick {
  own,        ///< the token this owner was last granted for this key (a holder's normal call)
  latest,     ///< the newest token granted for this key, to anyone (a non-holder with a real token)
  any,        ///< any token granted so far, for any key
  never_seen  ///< a token no grant carried
};

struct op {
  op_kind kind = op_kind::advance;
  int key = 0;
  int owner = 0;
  int ttl_ms = 1;      // acquire, renew
  int advance_ms = 0;  // advance; also picks among tokens for token_pick::any
  token_pick pick = token_pick::own;
};

std::string key_name(int k) {
  return "key" + std::to_string(k);
}
std::string owner_name(int o) {
  return "owner" + std::to_string(o);
}

void showValue(const op& o, std::ostream& os) {
  static const char* const picks[] = {"own", "latest", "any", "never_seen"};
  switch (o.kind) {
    case op_kind::acquire:
      os << "acquire(" << key_name(o.key) << ", " << owner_name(o.owner) << ", " << o.ttl_ms
         << "ms)";
      break;
    case op_kind::renew:
      os << "renew(" << key_name(o.key) << ", " << owner_name(o.owner) << ", "
         << picks[static_cast<int>(o.pick)] << " token, " << o.ttl_ms << "ms)";
      break;
    case op_kind::release:
      os << "release(" << key_name(o.key) << ", " << owner_name(o.owner) << ", "
         << picks[static_cast<int>(o.pick)] << " token)";
      break;
    case op_kind::advance:
      os << "advance(" << o.advance_ms << "ms)";
      break;
  }
}

rc::Gen<op> gen_op() {
  return rc::gen::build<op>(
      rc::gen::set(&op::kind, rc::gen::weightedElement<op_kind>({{4, op_kind::acquire},
                                                                 {3, op_kind::renew},
                                                                 {3, op_kind::release},
                                                                 {3, op_kind::advance}})),
      rc::gen::set(&op::key, rc::gen::inRange(0, kKeys)),
      rc::gen::set(&op::owner, rc::gen::inRange(0, kOwners)),
      // TTLs and steps of the same magnitude, so leases both outlive steps and expire often;
      // exact boundaries (advance == remaining TTL) come up regularly.
      rc::gen::set(&op::ttl_ms, rc::gen::inRange(1, 40)),
      rc::gen::set(&op::advance_ms, rc::gen::inRange(0, 30)),
      rc::gen::set(&op::pick, rc::gen::weightedElement<token_pick>({{5, token_pick::own},
                                                                    {3, token_pick::latest},
                                                                    {2, token_pick::any},
                                                                    {1, token_pick::never_seen}})));
}

rc::Gen<std::vector<op>> gen_ops() {
  return rc::gen::container<std::vector<op>>(gen_op());
}

// ---------------------------------------------------------------------------------------------
// toy_store: an independent, deliberately simple LeaseStore whose flaws can be switched on
// ---------------------------------------------------------------------------------------------

struct flaws {
  bool per_key_counter_reset = false;        ///< per-key counters, reset when a key is released
  bool ignore_live_lease = false;            ///< grants without checking for a live lease
  bool release_without_owner_check = false;  ///< release checks the token but not the owner
  bool renew_revives_expired = false;        ///< renew does not check expiry
  bool reacquire_new_token = false;          ///< same-owner re-acquire issues a fresh token
};

/// The toy with exactly one flaw switched on, e.g. with(&flaws::ignore_live_lease).
flaws with(bool flaws::*flaw) {
  flaws f;
  f.*flaw = true;
  return f;
}

class toy_store {
 public:
  toy_store(manual_clock clock, flaws f) : clock_(std::move(clock)), f_(f) {}

  result<grant> try_acquire(std::string_view key, std::string_view owner, ms ttl) {
    if (std::error_code ec = holdfast::check_acquire_args(key, owner, ttl)) return ec;
    const tp now = clock_.now();
    const std::string k(key);
    auto it = recs_.find(k);
    if (it != recs_.end() && now < it->second.expires && !f_.ignore_live_lease) {
      if (it->second.owner != owner) return errc::busy;
      if (!f_.reacquire_new_token) {
        it->second.expires = std::max(it->second.expires, now + ttl);
        return grant{it->second.token, ttl};
      }
    }
    std::uint64_t& counter = f_.per_key_counter_reset ? per_key_[k] : counter_;
    if (counter >= std::numeric_limits<std::uint64_t>::max() - 1) return errc::token_exhausted;
    const fencing_token token(++counter);
    recs_[k] = rec{std::string(owner), token, now + ttl};
    return grant{token, ttl};
  }

  result<grant> renew(std::string_view key, std::string_view owner, fencing_token token, ms ttl) {
    if (std::error_code ec = holdfast::check_renew_args(key, owner, token, ttl)) return ec;
    const tp now = clock_.now();
    auto it = recs_.find(std::string(key));
    if (it == recs_.end()) return errc::lease_lost;
    rec& r = it->second;
    if (!(now < r.expires) && !f_.renew_revives_expired) return errc::lease_lost;
    if (r.owner != owner || r.token != token) return errc::lease_lost;
    r.expires = now + ttl;
    return grant{token, ttl};
  }

  result<void> release(std::string_view key, std::string_view owner, fencing_token token) {
    if (std::error_code ec = holdfast::check_release_args(key, owner, token)) return ec;
    auto it = recs_.find(std::string(key));
    if (it == recs_.end() || it->second.token != token) return errc::not_holder;
    if (it->second.owner != owner && !f_.release_without_owner_check) return errc::not_holder;
    recs_.erase(it);
    if (f_.per_key_counter_reset) per_key_[std::string(key)] = 0;
    return {};
  }

  result<std::optional<lease_record>> inspect(std::string_view key) const {
    if (key.empty()) return errc::invalid_argument;
    const tp now = clock_.now();
    auto it = recs_.find(std::string(key));
    if (it == recs_.end() || !(now < it->second.expires)) return std::optional<lease_record>{};
    return std::optional<lease_record>{
        lease_record{it->second.owner, it->second.token,
                     std::chrono::duration_cast<ms>(it->second.expires - now)}};
  }

 private:
  struct rec {
    std::string owner;
    fencing_token token;
    tp expires;
  };
  manual_clock clock_;
  flaws f_;
  std::map<std::string, rec> recs_;
  std::map<std::string, std::uint64_t> per_key_;
  std::uint64_t counter_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Running a sequence: the history every checker reads
// ---------------------------------------------------------------------------------------------

struct event {
  op o;
  tp at;                                      ///< store time when the op ran
  fencing_token presented;                    ///< the token a renew/release presented
  std::error_code ec;                         ///< zero on success
  grant g;                                    ///< acquire/renew: what was granted
  std::optional<lease_record> before, after;  ///< inspect() of the op's key around the op
};

using history = std::vector<event>;

std::string at_ms(tp t) {
  return std::to_string(std::chrono::duration_cast<ms>(t.time_since_epoch()).count()) + "ms";
}

std::string describe(const event& e) {
  std::ostringstream os;
  os << "t=" << at_ms(e.at) << " ";
  showValue(e.o, os);
  if (e.o.kind == op_kind::renew || e.o.kind == op_kind::release) os << " with " << e.presented;
  if (e.o.kind != op_kind::advance) {
    if (e.ec) {
      os << " -> " << e.ec.message();
    } else if (e.o.kind == op_kind::release) {
      os << " -> ok";
    } else {
      os << " -> token " << e.g.token << " ttl=" << e.g.ttl.count() << "ms";
    }
  }
  return os.str();
}

/// The last few events up to and including `i`, as a readable timeline for a failure report.
std::string timeline(const history& h, std::size_t i) {
  std::string out;
  for (std::size_t j = i >= 6 ? i - 6 : 0; j <= i; ++j) {
    if (h[j].o.kind == op_kind::advance) continue;
    out += "\n    " + describe(h[j]);
  }
  return out;
}

bool same_record(const std::optional<lease_record>& a, const std::optional<lease_record>& b) {
  if (a.has_value() != b.has_value()) return false;
  return !a || (a->owner == b->owner && a->token == b->token && a->remaining == b->remaining);
}

template <class Store>
std::optional<lease_record> inspect_or_fail(const Store& s, int key) {
  auto r = s.inspect(key_name(key));
  RC_ASSERT(r.has_value());
  return *r;
}

/// Runs `ops` on `store` (whose clock is `clock`) and returns what happened.
template <class Store>
history run(Store& store, manual_clock clock, const std::vector<op>& ops) {
  history h;
  // What clients know: the token each owner last got per key, the newest per key, all of them.
  std::map<std::pair<int, int>, fencing_token> own;
  std::map<int, fencing_token> latest;
  std::vector<fencing_token> all;
  for (const op& o : ops) {
    event e;
    e.o = o;
    e.at = clock.now();
    if (o.kind == op_kind::advance) {
      clock.advance(ms(o.advance_ms));
      h.push_back(e);
      continue;
    }
    const std::string key = key_name(o.key), owner = owner_name(o.owner);
    switch (o.pick) {
      case token_pick::own:
        e.presented = own[{o.key, o.owner}];
        break;
      case token_pick::latest:
        e.presented = latest[o.key];
        break;
      case token_pick::any:
        if (!all.empty()) e.presented = all[static_cast<std::size_t>(o.advance_ms) % all.size()];
        break;
      case token_pick::never_seen:
        e.presented = fencing_token(1000000 + static_cast<std::uint64_t>(o.advance_ms));
        break;
    }
    if (e.presented.is_none()) e.presented = fencing_token(1);  // knows no token: guesses 1
    e.before = inspect_or_fail(store, o.key);
    if (o.kind == op_kind::acquire) {
      auto r = store.try_acquire(key, owner, ms(o.ttl_ms));
      if (r) {
        e.g = *r;
        own[{o.key, o.owner}] = r->token;
        latest[o.key] = r->token;
        all.push_back(r->token);
      } else {
        e.ec = r.error();
      }
    } else if (o.kind == op_kind::renew) {
      auto r = store.renew(key, owner, e.presented, ms(o.ttl_ms));
      if (r) {
        e.g = *r;
      } else {
        e.ec = r.error();
      }
    } else {
      auto r = store.release(key, owner, e.presented);
      if (!r) e.ec = r.error();
    }
    e.after = inspect_or_fail(store, o.key);
    h.push_back(e);
  }
  return h;
}

history run_memory(const std::vector<op>& ops, std::uint64_t last_issued = 0) {
  manual_clock clock;
  holdfast::memory_store_options opts;
  opts.last_issued = fencing_token(last_issued);
  holdfast::memory_store<manual_clock> store(clock, opts);
  return run(store, clock, ops);
}

history run_toy(flaws f, const std::vector<op>& ops) {
  manual_clock clock;
  toy_store store(clock, f);
  return run(store, clock, ops);
}

// ---------------------------------------------------------------------------------------------
// The checkers. Each returns the first violation as a readable report, or nullopt.
// ---------------------------------------------------------------------------------------------

/// The grants of each key as the store reported them to clients: who holds it, with which token,
/// until when by the TTLs it granted, and whether it was released.
struct reported_grant {
  std::string owner;
  fencing_token token;
  tp end;
  bool released = false;
  std::size_t granted_at_event = 0;
};

bool is_live(const std::optional<reported_grant>& g, tp at) {
  return g && !g->released && at < g->end;
}

/// True iff the successful acquire `e` is a re-acquire of the live grant `g` (same owner, same
/// token): it extends that grant, it is not a new one.
bool is_reacquire(const std::optional<reported_grant>& g, const event& e) {
  return is_live(g, e.at) && g->owner == owner_name(e.o.owner) && g->token == e.g.token;
}

/// Applies the successful event `h[i]` to its key's grant `g` as clients saw it: a re-acquire
/// extends it, any other acquire replaces it, a renew or release naming its owner and token
/// moves its end or ends it.
void apply_success(std::optional<reported_grant>& g, const history& h, std::size_t i) {
  const event& e = h[i];
  const std::string owner = owner_name(e.o.owner);
  if (e.o.kind == op_kind::acquire) {
    if (is_reacquire(g, e)) {
      g->end = std::max(g->end, e.at + e.g.ttl);
    } else {
      g = reported_grant{owner, e.g.token, e.at + e.g.ttl, false, i};
    }
  } else if (g && g->owner == owner && g->token == e.presented) {
    if (e.o.kind == op_kind::renew) g->end = e.at + e.g.ttl;
    if (e.o.kind == op_kind::release) g->released = true;
  }
}

/// The one replay every invariant below judges: walks the history keeping each key's grant as
/// the store reported it (apply_success), and asks `judge(i, event, grant before the event)` about
/// each event first. Returns the first violation `judge` reports, or nullopt.
template <class Judge>
std::optional<std::string> replay_grants(const history& h, Judge judge) {
  std::map<int, std::optional<reported_grant>> cur;
  for (std::size_t i = 0; i < h.size(); ++i) {
    const event& e = h[i];
    std::optional<reported_grant>& g = cur[e.o.key];
    if (std::optional<std::string> violation = judge(i, e, std::as_const(g))) return violation;
    if (!e.ec) apply_success(g, h, i);
  }
  return std::nullopt;
}

using grant_before = const std::optional<reported_grant>&;

/// S2: per key, every new grant's token is greater than every token granted before for that key;
/// store-wide, greater than every token granted before at all. A same-owner re-acquire of a live
/// grant must return that grant's token (it is not a new grant).
std::optional<std::string> check_s2(const history& h) {
  std::map<int, fencing_token> max_per_key;
  fencing_token max_all;
  return replay_grants(
      h, [&](std::size_t i, const event& e, grant_before c) -> std::optional<std::string> {
        if (e.ec || e.o.kind != op_kind::acquire || is_reacquire(c, e)) return std::nullopt;
        if (e.g.token <= max_per_key[e.o.key]) {
          return "S2 token order violated for " + key_name(e.o.key) + ": new grant carries " +
                 holdfast::to_string(e.g.token) + ", not above " +
                 holdfast::to_string(max_per_key[e.o.key]) + " granted earlier for that key" +
                 timeline(h, i);
        }
        if (e.g.token <= max_all) {
          return "S2 store-wide token order violated: new grant carries " +
                 holdfast::to_string(e.g.token) + ", not above " + holdfast::to_string(max_all) +
                 " granted earlier" + timeline(h, i);
        }
        max_per_key[e.o.key] = e.g.token;
        max_all = e.g.token;
        return std::nullopt;
      });
}

/// S3: a new grant of a key is made only once the previous grant of that key has ended: expired
/// by the TTL the store reported (as extended by renewals and re-acquires), or released.
std::optional<std::string> check_s3(const history& h) {
  return replay_grants(
      h, [&](std::size_t i, const event& e, grant_before c) -> std::optional<std::string> {
        if (e.ec || e.o.kind != op_kind::acquire) return std::nullopt;
        if (!is_live(c, e.at) || is_reacquire(c, e)) return std::nullopt;
        return "S3 exclusive grants violated on " + key_name(e.o.key) + ": granted to " +
               owner_name(e.o.owner) + " with " + holdfast::to_string(e.g.token) +
               " at t=" + at_ms(e.at) + " while " + c->owner + "'s grant " +
               holdfast::to_string(c->token) + " lasts until t=" + at_ms(c->end) + timeline(h, i);
      });
}

/// S5: renew by anyone but the live holder (owner and token), and release by anyone but the
/// holder of the key's latest unreleased grant (live or expired: no one else was granted it
/// since), fail and leave the key exactly as it was.
std::optional<std::string> check_s5(const history& h) {
  return replay_grants(
      h, [&](std::size_t i, const event& e, grant_before c) -> std::optional<std::string> {
        if (e.o.kind != op_kind::renew && e.o.kind != op_kind::release) return std::nullopt;
        const std::string owner = owner_name(e.o.owner);
        const bool names_holder = c && !c->released && c->owner == owner && c->token == e.presented;
        const bool holder =
            e.o.kind == op_kind::renew ? names_holder && e.at < c->end : names_holder;
        if (holder || (e.ec && same_record(e.before, e.after))) return std::nullopt;
        return std::string("S5 ownership violated: ") +
               (e.o.kind == op_kind::renew ? "renew" : "release") + " of " + key_name(e.o.key) +
               " by non-holder " + owner + " with " + holdfast::to_string(e.presented) +
               (e.ec ? " changed the record" : " succeeded") + timeline(h, i);
      });
}

/// The reference model: memory_store's table (stores/memory.hpp), written as plainly as possible.
/// Every answer (error code, token, TTL) and every inspect() afterwards must match it exactly.
std::optional<std::string> check_model(const history& h, std::uint64_t last_issued = 0) {
  struct rec {
    std::string owner;
    fencing_token token;
    tp expires;
  };
  std::map<int, rec> recs;
  std::uint64_t counter = last_issued;
  for (std::size_t i = 0; i < h.size(); ++i) {
    const event& e = h[i];
    if (e.o.kind == op_kind::advance) continue;
    const std::string owner = owner_name(e.o.owner);
    const ms ttl(e.o.ttl_ms);
    std::error_code want_ec;
    grant want_g;
    auto it = recs.find(e.o.key);
    const bool live = it != recs.end() && e.at < it->second.expires;
    if (e.o.kind == op_kind::acquire) {
      if (live && it->second.owner != owner) {
        want_ec = errc::busy;
      } else if (live) {
        it->second.expires = std::max(it->second.expires, e.at + ttl);
        want_g = grant{it->second.token, ttl};
      } else if (counter >= std::numeric_limits<std::uint64_t>::max() - 1) {
        want_ec = errc::token_exhausted;
      } else {
        want_g = grant{fencing_token(++counter), ttl};
        recs[e.o.key] = rec{owner, want_g.token, e.at + ttl};
      }
    } else if (e.o.kind == op_kind::renew) {
      if (live && it->second.owner == owner && it->second.token == e.presented) {
        it->second.expires = e.at + ttl;
        want_g = grant{e.presented, ttl};
      } else {
        want_ec = errc::lease_lost;
      }
    } else {
      if (it != recs.end() && it->second.owner == owner && it->second.token == e.presented) {
        recs.erase(it);
      } else {
        want_ec = errc::not_holder;
      }
    }
    std::optional<lease_record> want_after;
    auto now = recs.find(e.o.key);
    if (now != recs.end() && e.at < now->second.expires) {
      want_after = lease_record{now->second.owner, now->second.token,
                                std::chrono::duration_cast<ms>(now->second.expires - e.at)};
    }
    const bool answer_ok =
        e.ec == want_ec && (want_ec || e.o.kind == op_kind::release || e.g == want_g);
    if (!answer_ok || !same_record(e.after, want_after)) {
      std::string want =
          want_ec ? want_ec.message()
                  : (e.o.kind == op_kind::release ? std::string("ok")
                                                  : "token " + holdfast::to_string(want_g.token));
      return "reference model disagrees: expected " + want +
             (answer_ok ? " and a different record afterwards" : "") + " at" + timeline(h, i);
    }
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// Property plumbing
// ---------------------------------------------------------------------------------------------

void require_none(const std::optional<std::string>& violation) {
  if (violation) RC_FAIL(*violation);
}

using checker = std::optional<std::string> (*)(const history&);
std::optional<std::string> model_from_zero(const history& h) {
  return check_model(h);
}

/// Runs a property with rapidcheck's default parameters (100 cases, sizes up to 100; the seed
/// from RC_PARAMS if given, so a run can be replayed) and returns the failure's description, or
/// nullopt if every case passed. Uses rapidcheck's detail::checkTestable rather than rc::check
/// because rc::check's bool cannot tell "a case failed" from "gave up" or "errored"; a negative
/// control must see a real counterexample, and the violation it reports.
template <class Testable>
std::optional<std::string> counterexample(Testable&& testable) {
  rc::detail::TestParams params;  // the defaults: maxSuccess 100, maxSize 100
  params.seed = rc::detail::configuration().testParams.seed;
  const rc::detail::TestResult r = rc::detail::checkTestable(std::forward<Testable>(testable),
                                                             rc::detail::TestMetadata{}, params);
  rc::detail::FailureResult failure;
  if (!r.match(failure)) return std::nullopt;
  std::ostringstream os;
  rc::detail::printResultMessage(failure, os);  // the description and the counterexample
  return os.str();
}

/// Asserts that `check` finds a violation starting with `expected` in the history of a toy store
/// with flaw `f`, within the default case count.
void require_caught(checker check, flaws f, const std::string& expected) {
  const std::optional<std::string> found =
      counterexample([check, f] { require_none(check(run_toy(f, *gen_ops()))); });
  REQUIRE(found.has_value());
  INFO(*found);
  CHECK(found->find(expected) != std::string::npos);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// memory_store keeps every invariant
// ---------------------------------------------------------------------------------------------

TEST_CASE("memory_store keeps S2, S3, S5 and matches the reference model", "[memory_store]") {
  rc::prop("S2 token order", [] { require_none(check_s2(run_memory(*gen_ops()))); });
  rc::prop("S3 exclusive grants", [] { require_none(check_s3(run_memory(*gen_ops()))); });
  rc::prop("S5 ownership", [] { require_none(check_s5(run_memory(*gen_ops()))); });
  rc::prop("reference model", [] { require_none(check_model(run_memory(*gen_ops()))); });
}

TEST_CASE("memory_store matches the model near the top of the token range", "[memory_store]") {
  // A counter a few grants short of UINT64_MAX: grants run out mid-sequence and every later
  // fresh grant must be token_exhausted, changing nothing, while holders carry on.
  rc::prop("reference model with an almost exhausted counter", [] {
    const std::uint64_t last =
        std::numeric_limits<std::uint64_t>::max() - *rc::gen::inRange<std::uint64_t>(1, 12);
    const history h = run_memory(*gen_ops(), last);
    require_none(check_model(h, last));
    require_none(check_s2(h));
    require_none(check_s3(h));
    require_none(check_s5(h));
  });
}

TEST_CASE("the toy store without flaws keeps every invariant (control for the controls)",
          "[memory_store]") {
  rc::prop("S2", [] { require_none(check_s2(run_toy(flaws{}, *gen_ops()))); });
  rc::prop("S3", [] { require_none(check_s3(run_toy(flaws{}, *gen_ops()))); });
  rc::prop("S5", [] { require_none(check_s5(run_toy(flaws{}, *gen_ops()))); });
  rc::prop("model", [] { require_none(check_model(run_toy(flaws{}, *gen_ops()))); });
}

// ---------------------------------------------------------------------------------------------
// Negative controls: each property catches a store broken the way it is meant to catch
// ---------------------------------------------------------------------------------------------

TEST_CASE("S2 catches a store that resets a key's token counter on release", "[memory_store]") {
  require_caught(check_s2, with(&flaws::per_key_counter_reset), "S2");
}

TEST_CASE("S3 catches a store that grants without checking for a live lease", "[memory_store]") {
  require_caught(check_s3, with(&flaws::ignore_live_lease), "S3 exclusive grants violated");
}

TEST_CASE("S5 catches a store that releases without checking the owner", "[memory_store]") {
  require_caught(check_s5, with(&flaws::release_without_owner_check),
                 "S5 ownership violated: release");
}

TEST_CASE("S5 catches a store whose renew revives an expired lease", "[memory_store]") {
  require_caught(check_s5, with(&flaws::renew_revives_expired), "S5 ownership violated: renew");
}

TEST_CASE("the reference model catches every flaw, including a fresh token on re-acquire",
          "[memory_store]") {
  for (const flaws& f : {with(&flaws::per_key_counter_reset), with(&flaws::ignore_live_lease),
                         with(&flaws::release_without_owner_check),
                         with(&flaws::renew_revives_expired), with(&flaws::reacquire_new_token)}) {
    require_caught(model_from_zero, f, "reference model disagrees");
  }
}

}  // namespace test_prop_memory_store
