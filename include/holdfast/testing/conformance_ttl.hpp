// SPDX-License-Identifier: MIT
// holdfast/testing/conformance_ttl.hpp - the LeaseStore contract (store.hpp, T2) across the
// range of TTLs: a store holds a lease for the whole TTL it reports, whatever that TTL, and a
// renew holds it for the TTL the renew reports. check_store() (conformance.hpp) runs these on
// the store of its contract checks.
//
//   check                     | what it asks of the store
//   --------------------------+---------------------------------------------------------------
//   T2 held for the TTL       | on the simulated clock, grants of 1 ms, 1 s, 30 s + 1 ms, 1 h,
//   (factory taking a         | 2^31 ms - 1 ms, 2^31 ms + 1 ms, 2^32 ms, 30 days and max_ttl:
//   sim_clock)                | another owner gets busy (and inspect shows the holder) 1 ns
//                             | before the reported TTL has passed, and a grant 2 ms after it
//   T2 renew with another TTL | acquire 1 s then renew for 1 h (longer), acquire 1 h then renew
//   (factory taking a         | for 1 s (shorter), acquire 1 s then renew for 2^31 ms + 1 ms:
//   sim_clock)                | held until the renew's reported TTL has passed (a later expiry
//                             | is allowed, never an earlier one), free 2 ms after the later of
//                             | the two ends
//   inspect after long TTLs   | on a store keeping its own clock (with inspect): remaining after
//   (factory taking no clock) | a grant of 2 h, a renew for 30 days and a renew for 1 h is within
//                             | 2 s (plus the time the calls took) of the reported TTL, and no
//                             | more than it (after the shorter renew: the longer one's)
//
// These catch a store that caps the TTL it holds (at 5 s, 30 s, ...) but reports the asked one,
// keeps it in a type too narrow (an int32 of milliseconds wraps above 2^31 ms, about 24.8 days),
// or renews with the acquire's TTL instead of the renew's: the kit's other grants all use one
// short TTL. The rule is Chubby's and etcd's: a lease is held for the TTL granted.
#ifndef HOLDFAST_TESTING_CONFORMANCE_TTL_HPP
#define HOLDFAST_TESTING_CONFORMANCE_TTL_HPP

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>

#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/result.hpp"
#include "holdfast/store.hpp"
#include "holdfast/testing/conformance_options.hpp"
#include "holdfast/testing/simulator.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace testing {
namespace detail {

/// The TTL checks (the table at the top of conformance_ttl.hpp) on one store, on keys of its
/// own (o.key_prefix + "ttl-0", "ttl-1", ...). `sim` is the simulator whose exact clock the store
/// reads, or null (the store keeps its own clock: only the inspect checks run).
template <class Store>
class ttl_checker {
 public:
  ttl_checker(Store& s, simulator* sim, const conformance_options& o, conformance_report& rep)
      : s_(s), sim_(sim), o_(o), rep_(rep) {}

  void run() {
    using std::chrono::milliseconds;
    if (sim_ == nullptr) {
      own_clock();
      return;
    }
    const milliseconds second(1000), hour(3600000), w31(1LL << 31);
    renewed(second, hour);
    renewed(hour, second);
    renewed(second, w31 + milliseconds(1));
    const milliseconds range[] = {milliseconds(1),
                                  second,
                                  milliseconds(30001),
                                  hour,
                                  w31 - milliseconds(1),
                                  w31 + milliseconds(1),
                                  milliseconds(1LL << 32),
                                  hour * 24 * 30,
                                  max_ttl};
    for (const milliseconds ttl : range) granted(ttl);
  }

 private:
  using ms = std::chrono::milliseconds;
  static constexpr std::int64_t slack_ns = 2000000;  // 2 ms: a store may end a lease this late

  // A grant of `ttl` is held until 1 ns before its reported TTL and free 2 ms after it.
  void granted(ms ttl) {
    const std::string key = next_key();
    const result<grant> g = s_.try_acquire(key, "a", ttl);
    if (!reported("T2 held for the TTL", "a grant of " + ms_text(ttl), g, ttl)) return;
    const std::string what = "a grant of " + ms_text(ttl) + " (reported " + ms_text(g->ttl) + ")";
    sim_->advance(ns(g->ttl) - 1);
    held("T2 held for the TTL", key, g->token, what + " was ended before that TTL had passed");
    sim_->advance(1 + slack_ns);
    free_again("T2 expiry after the TTL", key, what + " was still held 2ms after its TTL");
  }

  // Acquire for `first`, renew halfway for `then`: held for the renew's reported TTL.
  void renewed(ms first, ms then) {
    const std::string key = next_key();
    const result<grant> g = s_.try_acquire(key, "a", first);
    if (!reported("T2 renew with another TTL", "a grant of " + ms_text(first), g, first)) return;
    sim_->advance(ns(g->ttl) / 2);
    const result<grant> r = s_.renew(key, "a", g->token, then);
    const std::string what = "a renew for " + ms_text(then) + " of a lease acquired for " +
                             ms_text(first) + ", halfway through";
    if (!reported("T2 renew with another TTL", what, r, then)) return;
    const std::int64_t old_left = ns(g->ttl) - ns(g->ttl) / 2;
    sim_->advance(ns(r->ttl) - 1);
    held("T2 renew with another TTL", key, g->token,
         what + " (reported " + ms_text(r->ttl) +
             ") was ended before the renewed TTL had passed since the renew (a store may keep a "
             "later expiry, never an earlier one than it reported)");
    sim_->advance(std::max<std::int64_t>(old_left - ns(r->ttl), 0) + 1 + slack_ns);
    free_again("T2 expiry after a renew", key,
               what + " was still held 2ms after the later of the acquire's and the renew's end");
  }

  // A store on its own clock: inspect's remaining time matches each reported TTL.
  void own_clock() {
    rep_.skipped.push_back(
        "T2 across the TTL range (1 ms to max_ttl, renews with another TTL) to the tick: the "
        "store's clock is not injectable (pass a factory taking holdfast::testing::sim_clock); "
        "only inspect's remaining time after long grants and renews was checked, if the store "
        "has inspect");
    if constexpr (has_inspect_v<Store>) {
      const ms hour(3600000);
      const std::string key = next_key();
      const auto start = std::chrono::steady_clock::now();
      const result<grant> g = s_.try_acquire(key, "a", 2 * hour);
      if (!reported("inspect after a long grant", "a grant of 2h", g, 2 * hour)) return;
      remaining("inspect after a long grant", key, "a grant of 2h", g->ttl, g->ttl, start);
      const ms month = hour * 24 * 30;
      const auto again = std::chrono::steady_clock::now();
      const result<grant> r = s_.renew(key, "a", g->token, month);
      if (reported("inspect after a renew with another TTL", "a renew for 30 days", r, month)) {
        remaining("inspect after a renew with another TTL", key, "a renew for 30 days", r->ttl,
                  r->ttl, again);
        const auto third = std::chrono::steady_clock::now();
        const result<grant> s = s_.renew(key, "a", g->token, hour);
        if (reported("inspect after a renew with another TTL", "a renew for 1h", s, hour)) {
          remaining("inspect after a renew with another TTL", key, "a renew for 1h", s->ttl, r->ttl,
                    third);
        }
      }
      (void)s_.release(key, "a", g->token);
    }
  }

  // inspect shows between `least` less the time since `since` (and 2 s, for a store counting
  // whole seconds) and `most` remaining.
  void remaining(const std::string& rule, const std::string& key, const std::string& what, ms least,
                 ms most, std::chrono::steady_clock::time_point since) {
    const auto took = std::chrono::duration_cast<ms>(std::chrono::steady_clock::now() - since);
    const auto r = s_.inspect(key);
    const bool shown = r && r->has_value();
    const ms left = shown ? (*r)->remaining : ms(0);
    expect(shown && left >= least - took - ms(2000) && left <= most, rule,
           what + " (reported " + ms_text(least) + ") shows " +
               (shown ? ms_text(left) + " remaining, expected within " + ms_text(least) +
                            " less 2s and the " + ms_text(took) + " the calls took"
                      : (r ? std::string("no lease") : error_text(r.error()))));
  }

  // The operation succeeded and reported a TTL in (0, asked]. A store may refuse a TTL it
  // cannot honour with an error of its own (a quorum cannot promise 1 ms): nothing was reported
  // to hold, and skipped says so; a TTL in (0, max_ttl] is no invalid_argument (T4), a fresh
  // key not busy, one's own live lease not lost.
  bool reported(const std::string& rule, const std::string& what, const result<grant>& g,
                ms asked) {
    if (!g) {
      const std::error_code e = g.error();
      if (e == errc::invalid_argument || e == errc::busy || e == errc::lease_lost) {
        expect(false, rule, what + " failed: " + error_text(e));
      } else {
        rep_.skipped.push_back(rule + ": " + what + " was refused (" + error_text(e) +
                               "), so nothing was held to check");
      }
      return false;
    }
    return expect(g->ttl > ms(0) && g->ttl <= asked, rule,
                  what + " reported a TTL of " + ms_text(g->ttl) + ", not in (0, asked]");
  }

  // Another owner gets busy; inspect (if the store has it) shows "a" with `token`.
  void held(const std::string& rule, const std::string& key, fencing_token token,
            const std::string& what) {
    const result<grant> other = s_.try_acquire(key, "b", ms(1000));
    expect(!other && other.error() == errc::busy, rule,
           what + ": another owner got " + (other ? "a grant" : error_text(other.error())) +
               " 1ns before, expected busy");
    if (other) (void)s_.release(key, "b", other->token);
    if constexpr (has_inspect_v<Store>) {
      const auto r = s_.inspect(key);
      expect(r && r->has_value() && (*r)->owner == "a" && (*r)->token == token, rule + " (inspect)",
             what + ": inspect shows " +
                 (r ? (r->has_value() ? "the lease of " + (*r)->owner : std::string("no lease"))
                    : error_text(r.error())) +
                 " 1ns before, expected the holder a with " + to_string(token));
    }
  }

  // Another owner gets a grant (released again at once).
  void free_again(const std::string& rule, const std::string& key, const std::string& what) {
    const result<grant> other = s_.try_acquire(key, "b", ms(1000));
    expect(other.has_value(), rule,
           what + ": another owner got " + (other ? "" : error_text(other.error())));
    if (other) (void)s_.release(key, "b", other->token);
  }

  std::string next_key() { return o_.key_prefix + "ttl-" + std::to_string(keys_++); }
  static std::int64_t ns(ms d) { return std::chrono::nanoseconds(d).count(); }
  static std::string ms_text(ms d) { return std::to_string(d.count()) + "ms"; }

  bool expect(bool ok, const std::string& rule, const std::string& what) {
    ++rep_.contract_checks;
    if (!ok) rep_.failures.push_back(rule + ": " + what);
    return ok;
  }

  Store& s_;
  simulator* sim_;
  const conformance_options& o_;
  conformance_report& rep_;
  int keys_ = 0;
};

}  // namespace detail
}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_CONFORMANCE_TTL_HPP
