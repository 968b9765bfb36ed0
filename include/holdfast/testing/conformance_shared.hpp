// SPDX-License-Identifier: MIT
// holdfast/testing/conformance_shared.hpp - the read-write capability's contract (store.hpp,
// RW1-RW4) as deterministic checks on one store: check_read_write_contract(). check_store()
// (conformance.hpp) runs them on a fresh store from its factory, on the simulated clock, whenever
// the store has the capability (has_read_write_v).
//
//   check                | what it asks of the store
//   ---------------------+-----------------------------------------------------------------------
//   RW bad input         | a mode outside the enum, an empty key or owner, a TTL <= 0, a token
//                        | none/max: invalid_argument, and nothing changes
//   RW1 readers coexist  | two owners' shared grants, each with its own issuable token, increasing
//   RW3 same owner       | a live reader's re-ask returns its token; a writer's too
//   RW1 no writer        | an exclusive ask while a reader lives is busy (not an error), the
//                        | reader's own ask included (no upgrade)
//   T3 owner checks      | renew_rw/release_rw by another owner, with another token or in the
//                        | other mode: lease_lost / not_holder, and the reader keeps its grant
//   RW2 writer token     | once the readers released, the writer's token is greater than every
//                        | token granted before
//   RW1 writer alone     | while the writer holds, shared and other exclusive asks are busy, and
//                        | the writer's own shared ask too (no downgrade in place)
//   RW4 writer first     | a writer refused because a reader lives keeps a new reader out; it
//                        | wins once the reader released
//   RW1 expiry (sim)     | a reader's grant blocks a writer until its TTL, to the nanosecond of
//                        | the store's clock, and no longer than TTL + 2 ticks
//
// A false "conforms" is the worst answer: every check is made against the store's answers only,
// and a store that reports an error where the contract says busy fails (contention is not an
// error, T4).
#ifndef HOLDFAST_TESTING_CONFORMANCE_SHARED_HPP
#define HOLDFAST_TESTING_CONFORMANCE_SHARED_HPP

#include <chrono>
#include <string>
#include <system_error>

#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/result.hpp"
#include "holdfast/store.hpp"
#include "holdfast/testing/conformance_contract.hpp"
#include "holdfast/testing/conformance_options.hpp"
#include "holdfast/testing/simulator.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace testing {
namespace detail {

/// The read-write checks on one store, in the order of the table in conformance_shared.hpp.
template <class Store>
class shared_checker {
 public:
  shared_checker(Store& s, simulator* sim, const conformance_options& o, conformance_report& rep)
      : s_(s),
        sim_(sim),
        rep_(rep),
        ttl_(contract_ttl(o, sim != nullptr)),
        k_(o.key_prefix + "conformance-rw"),
        k2_(o.key_prefix + "conformance-rw-2") {}

  void run() {
    bad_input();
    if (!readers_coexist()) return;
    owner_checks();
    if (!writer_after_readers()) return;
    writer_first();
    if (sim_ != nullptr) expiry();
  }

 private:
  static constexpr lease_mode sh = lease_mode::shared;
  static constexpr lease_mode ex = lease_mode::exclusive;

  void bad_input() {
    const auto bad = static_cast<lease_mode>(7);
    invalid("RW bad input: mode", s_.try_acquire_rw(k_, "a", ttl_, bad));
    invalid("RW bad input: empty key", s_.try_acquire_rw("", "a", ttl_, sh));
    invalid("RW bad input: empty owner", s_.try_acquire_rw(k_, "", ttl_, ex));
    invalid("RW bad input: zero TTL", s_.try_acquire_rw(k_, "a", std::chrono::milliseconds(0), sh));
    invalid("RW bad input: renew with token none", s_.renew_rw(k_, "a", fencing_token{}, ttl_, sh));
    invalid("RW bad input: release with token max",
            s_.release_rw(k_, "a", fencing_token::max(), ex));
    invalid("RW bad input: release with a bad mode", s_.release_rw(k_, "a", fencing_token(1), bad));
  }

  bool readers_coexist() {
    const result<grant> a = s_.try_acquire_rw(k_, "a", ttl_, sh);
    const result<grant> b = s_.try_acquire_rw(k_, "b", ttl_, sh);
    if (!expect(a && b, "RW1 readers coexist",
                "two owners' shared asks on a free key returned " + text(a) + " and " + text(b))) {
      return false;
    }
    ra_ = a->token;
    rb_ = b->token;
    expect(ra_.is_issuable() && rb_.is_issuable() && ra_ < rb_, "RW1 readers coexist",
           "the readers' tokens " + to_string(ra_) + ", " + to_string(rb_) +
               " are not issuable and increasing");
    const result<grant> again = s_.try_acquire_rw(k_, "a", ttl_, sh);
    expect(again && again->token == ra_, "RW3 same owner",
           "a live reader's re-ask returned " + text(again) + ", expected " + to_string(ra_));
    busy("RW1 no writer while a reader lives", s_.try_acquire_rw(k_, "w", ttl_, ex));
    busy("RW3 no upgrade in place", s_.try_acquire_rw(k_, "a", ttl_, ex));
    return true;
  }

  void owner_checks() {
    const fencing_token wrong(rb_.value() + 1);
    error("T3 renew_rw by another owner", s_.renew_rw(k_, "c", ra_, ttl_, sh), errc::lease_lost);
    error("T3 renew_rw with another token", s_.renew_rw(k_, "a", wrong, ttl_, sh),
          errc::lease_lost);
    error("T3 renew_rw in the other mode", s_.renew_rw(k_, "a", ra_, ttl_, ex), errc::lease_lost);
    error("T3 release_rw by another owner", s_.release_rw(k_, "c", ra_, sh), errc::not_holder);
    error("T3 release_rw in the other mode", s_.release_rw(k_, "a", ra_, ex), errc::not_holder);
    const result<grant> own = s_.renew_rw(k_, "a", ra_, ttl_, sh);
    expect(own && own->token == ra_, "T3 reader unaffected",
           "the reader's own renew_rw after others' attempts returned " + text(own));
  }

  bool writer_after_readers() {
    ok("RW release of a reader", s_.release_rw(k_, "a", ra_, sh));
    ok("RW release of a reader", s_.release_rw(k_, "b", rb_, sh));
    error("RW second release", s_.release_rw(k_, "b", rb_, sh), errc::not_holder);
    const result<grant> w = s_.try_acquire_rw(k_, "w", ttl_, ex);
    if (!expect(w.has_value(), "RW1 writer after readers",
                "an exclusive ask once every reader released returned " + text(w))) {
      return false;
    }
    expect(w->token > rb_, "RW2 writer token",
           "the writer's token " + to_string(w->token) + " is not greater than the earlier " +
               to_string(rb_));
    const result<grant> again = s_.try_acquire_rw(k_, "w", ttl_, ex);
    expect(again && again->token == w->token, "RW3 same owner",
           "the writer's re-ask returned " + text(again));
    busy("RW1 no reader while a writer holds", s_.try_acquire_rw(k_, "r", ttl_, sh));
    busy("RW1 no second writer", s_.try_acquire_rw(k_, "v", ttl_, ex));
    busy("RW3 no downgrade in place", s_.try_acquire_rw(k_, "w", ttl_, sh));
    ok("RW release of the writer", s_.release_rw(k_, "w", w->token, ex));
    const result<grant> r = s_.try_acquire_rw(k_, "r", ttl_, sh);
    expect(r && r->token > w->token, "RW2 reader after the writer",
           "a reader after the writer's release got " + text(r) + ", expected a token above " +
               to_string(w->token));
    if (r) ok("RW release of a reader", s_.release_rw(k_, "r", r->token, sh));
    return true;
  }

  void writer_first() {
    const result<grant> r = s_.try_acquire_rw(k2_, "r", ttl_, sh);
    if (!expect(r.has_value(), "RW4 writer first", "a shared ask returned " + text(r))) return;
    busy("RW4 writer first (the writer waits)", s_.try_acquire_rw(k2_, "w", ttl_, ex));
    busy("RW4 writer first (a new reader is kept out)", s_.try_acquire_rw(k2_, "n", ttl_, sh));
    ok("RW release of a reader", s_.release_rw(k2_, "r", r->token, sh));
    const result<grant> w = s_.try_acquire_rw(k2_, "w", ttl_, ex);
    expect(w.has_value(), "RW4 writer first",
           "the waiting writer's ask once the reader left returned " + text(w));
    if (w) ok("RW release of the writer", s_.release_rw(k2_, "w", w->token, ex));
  }

  // On the simulated clock: a reader blocks a writer until its TTL (1 ns before: busy) and not
  // beyond TTL + 2 ticks of the store's clock.
  void expiry() {
    const std::string k = k_ + "-expiry";
    const result<grant> r = s_.try_acquire_rw(k, "r", ttl_, sh);
    if (!expect(r.has_value(), "RW1 expiry", "a shared ask returned " + text(r))) return;
    const std::int64_t ttl_ns = std::chrono::nanoseconds(r->ttl).count();
    sim_->advance(ttl_ns - 1);
    busy("RW1 expiry (1ns before the reader's TTL)", s_.try_acquire_rw(k, "w", ttl_, ex));
    sim_->advance(2000000001);  // well past TTL + 2 ticks of any tick the kit gives a store
    const result<grant> w = s_.try_acquire_rw(k, "w", ttl_, ex);
    expect(w.has_value(), "RW1 expiry",
           "a writer 2s after the reader's TTL ran out (nothing renewed it) got " + text(w));
    error("RW1 expiry (no renew after expiry)", s_.renew_rw(k, "r", r->token, ttl_, sh),
          errc::lease_lost);
  }

  static std::string text(const result<grant>& g) {
    return g ? "a grant of " + to_string(g->token) : error_text(g.error());
  }
  bool expect(bool good, const std::string& rule, const std::string& what) {
    ++rep_.contract_checks;
    if (!good) rep_.failures.push_back(rule + ": " + what);
    return good;
  }
  template <class R>
  void error(const std::string& rule, const R& r, errc e) {
    expect(!r && r.error() == e, rule,
           "expected " + error_text(make_error_code(e)) + ", got " +
               (r ? std::string("success") : error_text(r.error())));
  }
  template <class R>
  void invalid(const std::string& rule, const R& r) {
    error(rule, r, errc::invalid_argument);
  }
  void busy(const std::string& rule, const result<grant>& r) { error(rule, r, errc::busy); }
  void ok(const std::string& rule, const result<void>& r) {
    expect(r.has_value(), rule, "returned " + (r ? std::string("success") : error_text(r.error())));
  }

  Store& s_;
  simulator* sim_;
  conformance_report& rep_;
  std::chrono::milliseconds ttl_;
  std::string k_, k2_;
  fencing_token ra_, rb_;
};

/// check_store's part: the read-write checks on a fresh store on the simulated clock (exact).
template <class F>
void check_shared_grants(F& make, const conformance_options& o, conformance_report& rep) {
  seeded_source src(o.seed);
  simulator sim(src, exact_clock_faults());
  const node_id n = sim.add_store("read-write store");
  fresh_store<F> fresh(make, sim.clock(n));
  shared_checker<factory_store_t<F>>(*fresh.store, factory_takes_clock_v<F> ? &sim : nullptr, o,
                                     rep)
      .run();
}

}  // namespace detail

/// Runs the read-write checks (the table at the top of conformance_shared.hpp) on `store`, which
/// must have the capability (has_read_write_v) and no read-write grants on the keys
/// o.key_prefix + "conformance-rw" and "conformance-rw-2"; returns what it violated (it does not
/// stop at the first failure, but at a missing grant the checks after it depend on). The expiry
/// check needs the simulated clock and runs only in check_store(). Exceptions thrown by the store
/// propagate. Thread-safety: calls the store from the calling thread only.
template <class Store>
conformance_report check_read_write_contract(Store& store, const conformance_options& o = {}) {
  static_assert(has_read_write_v<Store>,
                "check_read_write_contract: the store has no read-write capability (store.hpp)");
  conformance_report rep;
  detail::shared_checker<Store>(store, nullptr, o, rep).run();
  return rep;
}

}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_CONFORMANCE_SHARED_HPP
