// SPDX-License-Identifier: MIT
// holdfast/testing/conformance_counter.hpp - token order across the ends of a counter's range
// (store.hpp, T1): a store whose counter starts a few grants below 2^31, 2^32, 2^53 and 2^63 must
// go on issuing strictly increasing tokens across each boundary. A counter kept in an int32_t, a
// uint32_t, a double or an int64_t fails there, and only there: after 2^31 to 2^63 grants, which
// no test reaches by granting.
//
//   the kit starts the counter by                 | for
//   ----------------------------------------------+-------------------------------------------
//   store_env::counter_start (the store honours   | a factory taking (sim_clock, store_env)
//   it: its first token is greater)               |
//   raise_token_floor(start) after making it      | a store that has it (memory_store, Redis,
//                                                 | etcd, PostgreSQL)
//   - (reported as not explored)                  | any other store, one that ignored it, and
//                                                 | a store on its own clock (a server's: its
//                                                 | counter would stay raised)
//
// A store that ignored the start (its first token is not above it) is reported as not explored
// for that boundary, not as broken: support it, as the README asks store authors to.
//
// check_reboot(): the counter across a machine reboot (conformance_options::durable and reboots,
// a factory taking a store_env). The kit grants a key and releases it, grants a second and keeps
// it, then reboots: the store is destroyed, its clock started over, and it is reopened with
// store_env::boot 1. Both keys granted again must get tokens above their earlier ones (a store
// that wipes its state from an earlier boot, counter included, hands out #1 again: a stale
// holder's writes then pass the fence). The held key must be granted too: the old boot's leases
// are dropped (their holders died with the machine, and their expiry is on a clock that started
// over: kept, they would hold the key for as long as the old boot's uptime).
//
// Thread-safety: as check_store (one thread).
#ifndef HOLDFAST_TESTING_CONFORMANCE_COUNTER_HPP
#define HOLDFAST_TESTING_CONFORMANCE_COUNTER_HPP

#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>

#include "holdfast/detail/config.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/quorum_options.hpp"
#include "holdfast/result.hpp"
#include "holdfast/testing/conformance_contract.hpp"
#include "holdfast/testing/conformance_options.hpp"
#include "holdfast/testing/decision.hpp"
#include "holdfast/testing/simulator.hpp"
#include "holdfast/testing/store_factory.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace testing {
namespace detail {

/// Where the counter starts for each boundary: a few grants below it.
inline constexpr std::uint64_t counter_ends[] = {(1ULL << 31) - 3, (1ULL << 32) - 3,
                                                 (1ULL << 53) - 3, (1ULL << 63) - 3};
inline constexpr const char* counter_end_names[] = {"2^31", "2^32", "2^53", "2^63"};

/// Grants (and releases) six times on a store whose counter starts at `start`; returns false
/// when the store did not start there (not explored).
template <class Store>
bool grants_across(Store& store, std::uint64_t start, const char* end, const conformance_options& o,
                   conformance_report& rep) {
  const std::string key = o.key_prefix + "counter-end";
  std::uint64_t last = start;
  for (int g = 0; g < 6; ++g) {
    const std::string owner = "owner-" + std::to_string(g);
    const result<grant> r = store.try_acquire(key, owner, std::chrono::milliseconds(60000));
    ++rep.contract_checks;
    if (!r) {
      rep.failures.push_back(std::string("T1 across ") + end + ": try_acquire on a free key " +
                             "failed: " + error_text(r.error()));
      return true;
    }
    const std::uint64_t t = r->token.value();
    if (g == 0 && t <= start) return false;  // the store ignored the start
    if (t <= last || t == std::numeric_limits<std::uint64_t>::max()) {
      rep.failures.push_back(std::string("T1 across ") + end + ": after token " +
                             std::to_string(last) + " the store granted " + std::to_string(t) +
                             " (its counter wraps or loses precision there: keep it in a "
                             "std::uint64_t, and store it as one)");
      return true;
    }
    last = t;
    (void)store.release(key, owner, r->token);
  }
  return true;
}

/// T1 at each end of the range (the table at the top of conformance_counter.hpp).
template <class F>
void check_counter_ends(F& make, const conformance_options& o, conformance_report& rep) {
  using Store = factory_store_t<F>;
  constexpr bool by_env = factory_takes_env_v<F>;
  if constexpr (!factory_takes_clock_v<F>) {
    // A server's store: raising its counter would last beyond the check (other users of the
    // server would see tokens near 2^63 from then on).
    (void)make;
    (void)o;
    rep.skipped.push_back(
        "token order across 2^31, 2^32, 2^53, 2^63: not on a store that keeps its own clock (a "
        "server's counter would stay raised; conformance_counter.hpp)");
  } else if constexpr (!by_env && !has_raise_token_floor_v<Store>) {
    (void)make;
    (void)o;
    rep.skipped.push_back(
        "token order across 2^31, 2^32, 2^53, 2^63: the kit cannot start the store's counter "
        "there (honour store_env::counter_start with a factory taking (sim_clock, store_env), "
        "or offer raise_token_floor(); conformance_counter.hpp)");
  } else {
    std::string ignored;
    for (std::size_t i = 0; i < 4; ++i) {
      seeded_source src(o.seed);
      simulator sim(src, exact_clock_faults());
      const node_id n = sim.add_store("store");
      fresh_store<F> fresh(make, sim.clock(n), counter_ends[i]);
      if constexpr (!by_env) {
        if (!fresh.store->raise_token_floor(fencing_token(counter_ends[i]))) continue;
      }
      const std::size_t before = rep.failures.size();
      if (!grants_across(*fresh.store, counter_ends[i], counter_end_names[i], o, rep)) {
        ignored += std::string(ignored.empty() ? "" : ", ") + counter_end_names[i];
      }
      if (rep.failures.size() != before) return;  // one boundary is enough to name it
    }
    if (!ignored.empty()) {
      rep.skipped.push_back("token order across " + ignored +
                            ": the store did not start its counter at store_env::counter_start "
                            "(conformance_counter.hpp)");
    }
  }
}

/// The token counter across a machine reboot (the file comment).
template <class F>
void check_reboot(F& make, const conformance_options& o, conformance_report& rep) {
  if (!o.durable || !o.reboots) return;
  if constexpr (!factory_takes_env_v<F>) {
    (void)make;
    rep.skipped.push_back(
        "machine reboots: the factory takes no store_env, so the kit cannot tell the store it "
        "rebooted (store_env::boot; conformance_counter.hpp)");
  } else {
    using Store = factory_store_t<F>;
    seeded_source src(o.seed);
    simulator sim(src, exact_clock_faults());
    const node_id n = sim.add_store("store");
    scratch_dir dir;
    store_env env;
    env.dir = dir.path();
    std::unique_ptr<Store> s = make_store<Store>(make, sim.clock(n), env);
    const std::string keys[2] = {o.key_prefix + "reboot-released", o.key_prefix + "reboot-held"};
    std::uint64_t before[2] = {0, 0};
    for (int k = 0; k < 2; ++k) {
      const result<grant> g = s->try_acquire(keys[k], "before-reboot", o.run.ttl);
      ++rep.contract_checks;
      if (!g) return;  // the contract checks report a free key refused
      before[k] = g->token.value();
      if (k == 0) (void)s->release(keys[k], "before-reboot", g->token);
    }
    s.reset();
    sim.advance(std::chrono::nanoseconds(o.run.ttl).count() / 2);
    sim.restart_clock(n, 1000000);
    ++env.boot;
    ++env.restarts;
    s = make_store<Store>(make, sim.clock(n), env);
    for (int k = 0; k < 2; ++k) {
      const result<grant> g = s->try_acquire(keys[k], "after-reboot", o.run.ttl);
      ++rep.contract_checks;
      if (g && g->token.value() > before[k]) continue;
      rep.failures.push_back(
          "reboot: after the machine rebooted (store_env::boot 0 -> 1, the store's clock started "
          "over) the store " +
          (g ? "granted \"" + keys[k] + "\" token #" + std::to_string(g->token.value()) +
                   ", not above #" + std::to_string(before[k]) + " granted before the reboot"
             : "refused \"" + keys[k] + "\" (" + error_text(g.error()) + ")" +
                   (k == 1 ? ", keeping a lease of the earlier boot" : "")) +
          ": keep the token counter across reboots and drop the old boot's leases (their holders "
          "died with the machine; store_env::boot; store.hpp, T1)");
      return;
    }
  }
}

}  // namespace detail
}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_CONFORMANCE_COUNTER_HPP
