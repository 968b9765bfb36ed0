// SPDX-License-Identifier: MIT
// holdfast/testing/conformance_contract.hpp - the LeaseStore contract (store.hpp, T1-T4) as
// deterministic checks on one store: check_contract(). check_store() (conformance.hpp) runs them
// on a fresh store from its factory, with expiry judged to the tick on the simulated clock; a
// test that builds its store itself (a real server, a second member of a cluster) calls
// check_contract() on it directly.
//
//   check                     | what it asks of the store
//   --------------------------+---------------------------------------------------------------
//   T4 bad input              | empty key/owner, TTL <= 0 or > max_ttl, token none/max, before
//                             | and after a grant: invalid_argument, and nothing changes
//   T1 grant                  | a grant carries an issuable token and a TTL in (0, asked]
//   T1 same owner             | re-acquiring one's own live lease returns the same token
//   T3 contention             | another owner gets busy (not an error); the record is unchanged
//   T3 renew/release by others| lease_lost / not_holder (also for a wrong token, a free key, a
//                             | second release, a renew after release), and the holder keeps it
//   keys                      | keys are independent and binary-safe (embedded NUL)
//   T1 across release         | the next grant's token is greater (and, with store_wide_tokens,
//                             | greater than every token of every key)
//   T2 expiry                 | no expiry before the TTL, expiry after it, by the store's clock;
//                             | renew after expiry is refused (no revival); the next grant's
//                             | token is greater; the expired holder can neither renew nor
//                             | release after a takeover; one's own expired lease comes back as
//                             | a new grant; releasing an expired lease is success or not_holder
//   inspect (if the store     | shows the holder, its token and remaining in (0, TTL]; shows no
//   has it)                   | lease after release or expiry; bad key: invalid_argument
//   T2 coarse clock           | on a clock reading whole seconds (rounded down), a grant made
//   (check_store only)        | mid-tick is held for its TTL of real time (store_hold_until)
//
// The checks come from this project's private store tests (memory, Redis, PostgreSQL, etcd,
// SQLite), made public so a user's store is held to the same contract; the T2 rules follow
// Chubby's and etcd's lease semantics, the token rules Kleppmann (2016).
#ifndef HOLDFAST_TESTING_CONFORMANCE_CONTRACT_HPP
#define HOLDFAST_TESTING_CONFORMANCE_CONTRACT_HPP

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <type_traits>

#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/result.hpp"
#include "holdfast/store.hpp"
#include "holdfast/testing/conformance_options.hpp"
#include "holdfast/testing/sim_store.hpp"
#include "holdfast/testing/simulator.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace testing {
namespace detail {

/// The TTL of grants the kit makes outside the schedules: run.ttl on the simulated clock (T2 is
/// judged against it), expiry_by_waiting when the kit waits for expiry, else 60 s (a store on
/// its own clock must not expire anything by itself while the checks run).
inline std::chrono::milliseconds contract_ttl(const conformance_options& o, bool simulated) {
  if (simulated) return o.run.ttl;
  if (!o.expire_now && o.expiry_by_waiting.count() > 0) return o.expiry_by_waiting;
  return std::chrono::milliseconds(60000);
}

/// A fault model without drift or clock ticks: the contract checks use exact clocks.
inline fault_options exact_clock_faults() {
  fault_options quiet;
  quiet.drift = false;
  quiet.store_clock_ticks = false;
  quiet.client_clock_ticks = false;
  return quiet;
}

/// A store the factory makes for one check, with a directory of its own if the factory takes a
/// store_env (removed after the store is destroyed).
template <class F>
struct fresh_store {
  fresh_store(F& make, sim_clock clock, std::uint64_t counter_start = 0) {
    store_env env;
    env.counter_start = counter_start;
    if constexpr (factory_takes_env_v<F>) {
      dir = std::make_unique<scratch_dir>();
      env.dir = dir->path();
    }
    store = make_store<factory_store_t<F>>(make, clock, env);
  }
  std::unique_ptr<scratch_dir> dir;  // declared first: destroyed after the store
  std::unique_ptr<factory_store_t<F>> store;
};

/// The contract checks on one store, in the order of the table in conformance_contract.hpp.
/// `sim` is the simulator whose clock the store reads (expiry to the tick), or null (expiry by
/// conformance_options::expire_now, by waiting, or not at all).
template <class Store>
class contract_checker {
 public:
  contract_checker(Store& s, simulator* sim, const conformance_options& o, conformance_report& rep)
      : s_(s),
        sim_(sim),
        o_(o),
        rep_(rep),
        ttl_(contract_ttl(o, sim != nullptr)),
        k1_(o.key_prefix + "conformance"),
        k2_(o.key_prefix + "conformance-2") {}

  void run() {
    bad_input_on_a_free_key();
    if (!first_grant()) return;  // nothing below makes sense without a first grant
    bad_input_on_a_held_key();
    same_owner_and_contention();
    refused_for_others();
    keys_are_independent();
    if (!release_and_grant_again() || !can_expire()) return;
    if (!expiry_and_takeover()) return;
    expiry_of_ones_own_lease();
    release_after_expiry();
  }

 private:
  void bad_input_on_a_free_key() {
    using std::chrono::milliseconds;
    expect_invalid("T4 empty key", s_.try_acquire("", "a", ttl_));
    expect_invalid("T4 empty owner", s_.try_acquire(k1_, "", ttl_));
    expect_invalid("T4 zero TTL", s_.try_acquire(k1_, "a", milliseconds(0)));
    expect_invalid("T4 negative TTL", s_.try_acquire(k1_, "a", milliseconds(-5)));
    expect_invalid("T4 TTL above max_ttl", s_.try_acquire(k1_, "a", max_ttl + milliseconds(1)));
    expect_invalid("T4 renew of a free key with token none",
                   s_.renew(k1_, "a", fencing_token{}, ttl_));
    expect_invalid("T4 renew of a free key with token max",
                   s_.renew(k1_, "a", fencing_token::max(), ttl_));
    expect_invalid("T4 release of a free key with token none",
                   s_.release(k1_, "a", fencing_token{}));
    expect_invalid("T4 release of a free key with token max",
                   s_.release(k1_, "a", fencing_token::max()));
    if constexpr (has_inspect_v<Store>) {
      expect_invalid("T4 inspect with empty key", s_.inspect(""));
    }
    expect_free("T4 nothing changed", k1_);
  }

  bool first_grant() {
    using std::chrono::milliseconds;
    const result<grant> g = s_.try_acquire(k1_, "a", ttl_);
    if (!expect(g.has_value(), "T1 grant",
                "try_acquire on a free key failed: " + error_text(g.error()))) {
      return false;
    }
    t1_ = g->token;
    note(t1_);
    expect(t1_.is_issuable(), "T1 grant", "granted token " + to_string(t1_) + " is not issuable");
    expect(g->ttl > milliseconds(0) && g->ttl <= ttl_, "T1 grant",
           "granted TTL " + std::to_string(g->ttl.count()) + "ms is not in (0, asked]");
    expect_holder("inspect after a grant", k1_, "a", t1_, true);
    return true;
  }

  void bad_input_on_a_held_key() {
    expect_invalid("T4 renew with token none", s_.renew(k1_, "a", fencing_token{}, ttl_));
    expect_invalid("T4 renew with token max", s_.renew(k1_, "a", fencing_token::max(), ttl_));
    expect_invalid("T4 renew with zero TTL", s_.renew(k1_, "a", t1_, std::chrono::milliseconds(0)));
    expect_invalid("T4 release with token none", s_.release(k1_, "a", fencing_token{}));
    expect_invalid("T4 release with token max", s_.release(k1_, "a", fencing_token::max()));
    expect_invalid("T4 release with empty owner", s_.release(k1_, "", t1_));
  }

  void same_owner_and_contention() {
    const result<grant> again = s_.try_acquire(k1_, "a", ttl_);
    expect(again && again->token == t1_, "T1 same owner",
           "re-acquiring one's own live lease returned " + text(again) + ", expected " +
               to_string(t1_));
    const result<grant> other = s_.try_acquire(k1_, "b", ttl_);
    expect(!other && other.error() == errc::busy, "T3 contention",
           "another owner's try_acquire on a held key returned " + text(other) + ", expected busy");
    expect_holder("T3 contention changed nothing", k1_, "a", t1_, false);
  }

  void refused_for_others() {
    const fencing_token wrong(t1_.value() + 1);
    expect_error("T3 renew by another owner", s_.renew(k1_, "b", t1_, ttl_), errc::lease_lost);
    expect_error("T3 renew with another token", s_.renew(k1_, "a", wrong, ttl_), errc::lease_lost);
    expect_error("T3 renew of a free key", s_.renew(k2_, "a", t1_, ttl_), errc::lease_lost);
    expect_error("T3 release by another owner", s_.release(k1_, "b", t1_), errc::not_holder);
    expect_error("T3 release with another token", s_.release(k1_, "a", wrong), errc::not_holder);
    const result<grant> still = s_.try_acquire(k1_, "b", ttl_);
    expect(!still && still.error() == errc::busy, "T3 nothing changed",
           "after refused renew/release by others, another owner got " + text(still) +
               ", expected busy");
    expect_holder("T3 nothing changed", k1_, "a", t1_, false);
    const result<grant> own = s_.renew(k1_, "a", t1_, ttl_);
    expect(own && own->token == t1_, "T3 holder unaffected",
           "the holder's own renew after others' attempts returned " + text(own));
  }

  void keys_are_independent() {
    const std::string nul1 = o_.key_prefix + std::string("key\0one", 7);
    const std::string nul2 = o_.key_prefix + std::string("key\0two", 7);
    const result<grant> n1 = s_.try_acquire(nul1, "c", ttl_);
    const result<grant> n2 = s_.try_acquire(nul2, "d", ttl_);
    expect(n1 && n2, "keys binary-safe",
           "two keys differing after an embedded NUL are not independent: " + text(n1) + ", " +
               text(n2));
    if (n1) note(n1->token);
    if (n2) note(n2->token);
  }

  bool release_and_grant_again() {
    const result<void> rel = s_.release(k1_, "a", t1_);
    expect(rel.has_value(), "T3 release by the holder",
           "the holder's release failed: " + error_text(rel.error()));
    expect_free("T3 release by the holder", k1_);
    expect_error("T3 second release", s_.release(k1_, "a", t1_), errc::not_holder);
    expect_error("T3 renew after release", s_.renew(k1_, "a", t1_, ttl_), errc::lease_lost);
    const result<grant> g2 = s_.try_acquire(k1_, "b", ttl_);
    if (!expect(g2.has_value(), "T1 across release",
                "acquire after release failed: " + error_text(g2.error()))) {
      return false;
    }
    expect_greater("T1 across release", g2->token, t1_);
    t2_ = g2->token;
    ttl2_ = g2->ttl;
    note(t2_);
    const result<grant> g3 = s_.try_acquire(k2_, "a", ttl_);
    if (!expect(g3.has_value(), "T1 grant", "acquire of a second key failed: " + text(g3))) {
      return false;
    }
    expect_greater("T1 a second key", g3->token, fencing_token{});  // store-wide: above k1's
    note(g3->token);
    other_key_token_ = g3->token;
    const result<void> rel2 = s_.release(k2_, "a", g3->token);
    expect(rel2.has_value(), "T3 release by the holder",
           "release of the second key failed: " + error_text(rel2.error()));
    return true;
  }

  bool can_expire() {
    if (sim_ != nullptr || o_.expire_now || o_.expiry_by_waiting.count() > 0) return true;
    rep_.skipped.push_back(
        "T2 expiry: the store's clock is not injectable (pass a factory taking "
        "holdfast::testing::sim_clock to check expiry by the store's clock, or "
        "conformance_options::expire_now to force it on the store's own clock, or "
        "conformance_options::expiry_by_waiting to wait for it)");
    return false;
  }

  // k1 is held by "b" (t2_): no early expiry, then expiry, no revival, a takeover by "c".
  bool expiry_and_takeover() {
    const std::string early_rule = "T2 no early expiry";
    if (sim_ != nullptr) {
      sim_->advance(std::chrono::nanoseconds(ttl2_).count() - 2000000);
      expect_error(early_rule + " (2 ms before the TTL ran out)", s_.try_acquire(k1_, "c", ttl_),
                   errc::busy);
      sim_->advance(4000000);
    } else {
      expect_error(early_rule + " (a lease not made to expire)", s_.try_acquire(k1_, "c", ttl_),
                   errc::busy);
      expire(k1_, ttl2_);
      rep_.skipped.push_back(
          "T2 expiry to the tick: the store keeps its own clock, so expiry was forced through "
          "conformance_options::expire_now (or waited for), not judged at the TTL's end");
    }
    const result<grant> revive = s_.renew(k1_, "b", t2_, ttl_);
    expect(!revive && revive.error() == errc::lease_lost, "T2 no revival",
           "renew after the TTL ran out returned " + text(revive) + ", expected lease_lost");
    expect_free("T2 expiry (inspect)", k1_);
    const result<grant> g3 = s_.try_acquire(k1_, "c", ttl_);
    if (!expect(g3.has_value(), "T2 expiry",
                "another owner could not acquire after the TTL ran out: " + text(g3))) {
      return false;
    }
    expect_greater("T1 across expiry", g3->token, t2_);
    note(g3->token);
    t3_ = g3->token;
    ttl3_ = g3->ttl;
    expect_error("T3 renew after takeover", s_.renew(k1_, "b", t2_, ttl_), errc::lease_lost);
    expect_error("T3 release after takeover", s_.release(k1_, "b", t2_), errc::not_holder);
    expect_holder("T3 the old holder changed nothing", k1_, "c", t3_, false);
    return true;
  }

  // k1 is held by "c" (t3_): once it expires, "c" acquiring again is a new grant.
  void expiry_of_ones_own_lease() {
    expire(k1_, ttl3_);
    const result<grant> g = s_.try_acquire(k1_, "c", ttl_);
    if (!expect(g.has_value(), "T2 expiry",
                "acquire after one's own lease expired failed: " + text(g))) {
      return;
    }
    expect_greater("T1 re-acquire after one's own expiry", g->token, t3_);
    note(g->token);
    const result<void> rel = s_.release(k1_, "c", g->token);
    expect(rel.has_value(), "T3 release by the holder",
           "release of the new grant failed: " + error_text(rel.error()));
  }

  // k2 was released; a new grant on it expires and its holder releases it.
  void release_after_expiry() {
    const result<grant> g = s_.try_acquire(k2_, "a", ttl_);
    if (!expect(g.has_value(), "T1 across release",
                "acquire of the second key again failed: " + text(g))) {
      return;
    }
    expect_greater("T1 across release", g->token, other_key_token_);
    note(g->token);
    expire(k2_, g->ttl);
    const result<void> rel = s_.release(k2_, "a", g->token);
    const bool may_fail = !o_.release_after_expiry_succeeds;
    expect(rel || (may_fail && rel.error() == errc::not_holder), "T3 release after expiry",
           "releasing one's own expired lease nobody took over returned " +
               error_text(rel.error()) +
               (may_fail ? ", expected success or not_holder"
                         : ", expected success (the store promises it)"));
    expect_free("T2 expiry and release", k2_);
  }

  // Makes the lease on `key`, granted for `granted`, expire by the store's clock.
  void expire(const std::string& key, std::chrono::milliseconds granted) {
    if (sim_ != nullptr) {
      sim_->advance(std::chrono::nanoseconds(granted).count() + 2000000);
    } else if (o_.expire_now) {
      o_.expire_now(key);
    } else {
      std::this_thread::sleep_for(granted + granted / 10 + std::chrono::milliseconds(20));
    }
  }

  // Every token granted so far: with store_wide_tokens, each new grant must exceed them all.
  void note(fencing_token t) {
    if (o_.store_wide_tokens && newest_ < t) newest_ = t;
  }

  void expect_greater(const std::string& rule, fencing_token t, fencing_token before) {
    expect(before < t, rule,
           "token " + to_string(t) + " is not greater than " + to_string(before) +
               ", granted earlier");
    if (o_.store_wide_tokens) {
      expect(newest_ < t, rule + " (store-wide)",
             "token " + to_string(t) + " is not greater than " + to_string(newest_) +
                 ", granted earlier for another key");
    }
  }

  // inspect (when the store has it) shows `owner` holding `key` with `token`; with `remaining`,
  // also a remaining TTL in (0, asked].
  void expect_holder(const std::string& rule, const std::string& key, std::string_view owner,
                     fencing_token token, bool remaining) {
    if constexpr (has_inspect_v<Store>) {
      const auto r = s_.inspect(key);
      const bool held = r && r->has_value() && (*r)->owner == owner && (*r)->token == token;
      expect(
          held, rule,
          "inspect does not show the holder " + std::string(owner) + " with " + to_string(token) +
              ": " +
              (r ? (r->has_value() ? "shows " + to_string((*r)->token) : std::string("shows none"))
                 : error_text(r.error())));
      if (held && remaining) {
        const std::chrono::milliseconds left = (*r)->remaining;
        expect(left > std::chrono::milliseconds(0) && left <= ttl_, rule,
               "inspect shows " + std::to_string(left.count()) + "ms remaining, not in (0, TTL]");
      }
    }
  }

  // inspect (when the store has it) shows no lease on `key`.
  void expect_free(const std::string& rule, const std::string& key) {
    if constexpr (has_inspect_v<Store>) {
      const auto r = s_.inspect(key);
      expect(r && !r->has_value(), rule,
             "inspect shows " +
                 (r ? "a lease held by token " + to_string((*r)->token) : error_text(r.error())) +
                 ", expected none");
    }
  }

  static std::string text(const result<grant>& g) {
    return g ? "a grant of " + to_string(g->token) : error_text(g.error());
  }

  bool expect(bool ok, const std::string& rule, const std::string& what) {
    ++rep_.contract_checks;
    if (!ok) rep_.failures.push_back(rule + ": " + what);
    return ok;
  }

  template <class R>
  void expect_error(const std::string& rule, const R& r, errc e) {
    expect(!r && r.error() == e, rule,
           "expected " + error_text(make_error_code(e)) + ", got " +
               (r ? std::string("success") : error_text(r.error())));
  }

  template <class R>
  void expect_invalid(const std::string& rule, const R& r) {
    expect_error(rule, r, errc::invalid_argument);
  }

  Store& s_;
  simulator* sim_;
  const conformance_options& o_;
  conformance_report& rep_;
  std::chrono::milliseconds ttl_;
  std::string k1_;
  std::string k2_;
  fencing_token t1_, t2_, t3_, other_key_token_, newest_;
  std::chrono::milliseconds ttl2_{0}, ttl3_{0};
};

/// T2 on a coarse clock (store.hpp, T2): the store's clock reads true time rounded down to whole
/// seconds, and a grant of 1500 ms is made 0.7 s into a tick. It must stay held until 1500 ms of
/// real time have passed (a store that ends it at reading + TTL frees it at true time 2.0 s, 1.3
/// s after the grant), and end within TTL + 2 ticks.
template <class F>
void check_coarse_clock(F& make, const conformance_options& o, conformance_report& rep) {
  seeded_source src(o.seed);
  simulator sim(src, exact_clock_faults());
  const node_id n = sim.add_store("coarse store");
  sim.set_tick(n, 1000000000);
  fresh_store<F> fresh(make, sim.clock(n));
  sim.advance(700000000);
  const std::chrono::milliseconds ttl(1500);
  const result<grant> g = fresh.store->try_acquire("coarse", "a", ttl);
  ++rep.contract_checks;
  if (!g) {
    rep.failures.push_back("T2 coarse clock: try_acquire on a free key failed: " +
                           g.error().message());
    return;
  }
  sim.advance(std::chrono::nanoseconds(g->ttl).count() - 1);  // 1 ns before the TTL, real time
  const result<grant> early = fresh.store->try_acquire("coarse", "b", ttl);
  ++rep.contract_checks;
  if (early || early.error() != errc::busy) {
    rep.failures.push_back(
        "T2 coarse clock: on a store clock that reads whole seconds (rounded down), a grant of " +
        std::to_string(g->ttl.count()) +
        "ms made 0.7s into a tick was ended before that TTL had passed in real time: another "
        "owner got " +
        (early ? std::string("a grant") : early.error().message()) +
        " 1ns before (count the tick the read may lag: store_hold_until, clock_tick)");
  }
  sim.advance(2000000001);  // TTL + 2 ticks after the grant
  const result<grant> late = fresh.store->try_acquire("coarse", "b", ttl);
  ++rep.contract_checks;
  if (!late) {
    rep.failures.push_back("T2 coarse clock: a grant of " + std::to_string(g->ttl.count()) +
                           "ms still held 2 ticks (2s) after its TTL: " + late.error().message());
  }
}

}  // namespace detail

/// Runs the LeaseStore contract checks (the table at the top of conformance_contract.hpp) on
/// `store`, which must be empty for the keys the checks use (o.key_prefix + "conformance",
/// "conformance-2" and two keys with an embedded NUL), and returns what it violated; it does
/// not stop at the first failure (but at a missing grant the checks after it depend on).
///
/// \param store  a LeaseStore (store.hpp); the inspect checks run if it has inspect().
/// \param o      expire_now or expiry_by_waiting (else the T2 checks are reported as skipped),
///               key_prefix, release_after_expiry_succeeds, store_wide_tokens; the rest is
///               ignored. Leases are granted for 60 s (expiry_by_waiting when the kit waits).
/// \returns the failures (each "rule: what happened") and the skipped checks; contract_checks
///          counts the checks made. A store's own errors are failures, never thrown.
///
/// Exceptions thrown by the store or by o.expire_now propagate. Thread-safety: calls the store
/// from the calling thread only; use the store from nowhere else meanwhile. check_store() runs
/// the same checks on a store on the simulated clock, with expiry judged to the tick.
template <class Store>
conformance_report check_contract(Store& store, const conformance_options& o = {}) {
  static_assert(assert_lease_store<Store>());
  conformance_report rep;
  detail::contract_checker<Store>(store, nullptr, o, rep).run();
  return rep;
}

}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_CONFORMANCE_CONTRACT_HPP
