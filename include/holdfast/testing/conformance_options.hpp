// SPDX-License-Identifier: MIT
// holdfast/testing/conformance_options.hpp - what the store conformance kit is asked to check
// (conformance_options) and what it found (conformance_report). The checks themselves:
// conformance.hpp (check_store, the whole kit), conformance_contract.hpp (check_contract, the
// LeaseStore contract on one store), conformance_strings.hpp (check_hostile_strings) and
// conformance_threads.hpp (check_exclusive_grants, real threads).
//
// How expiry (store.hpp, T2) is checked depends on whose clock the store judges it by:
//
//   the store's clock                   | how the kit makes a lease expire
//   ------------------------------------+-----------------------------------------------------
//   holdfast::testing::sim_clock        | moves simulated time to the tick (check_store only)
//   its own, with expire_now            | calls expire_now(key): PEXPIREAT, an UPDATE, a revoke
//   its own, with expiry_by_waiting > 0 | grants that short TTL and waits it out in real time
//   its own, neither                    | does not: the expiry checks are reported as skipped
#ifndef HOLDFAST_TESTING_CONFORMANCE_OPTIONS_HPP
#define HOLDFAST_TESTING_CONFORMANCE_OPTIONS_HPP

#include <chrono>
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/testing/progress.hpp"
#include "holdfast/testing/workload.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace testing {

/// How thoroughly the conformance kit checks (check_store() reads all of it; check_contract(),
/// check_hostile_strings() and check_exclusive_grants() the fields they name).
struct conformance_options {
  /// Simulated schedules to run (each a few hundred events). Default 300.
  std::uint32_t schedules = 300;
  /// Seed of the first schedule; schedule i uses seed + i, so a failure names its seed.
  std::uint64_t seed = 1;
  /// The store claims durability: restarts are injected too, and each one destroys the store and
  /// calls the factory again, which must return a store over what the old one persisted. Give a
  /// file-backed store a factory taking (sim_clock, const store_env&) and keep its files in
  /// store_env::dir (new for each schedule, the same across its restarts). A store that keeps
  /// its state in memory is not durable: its tokens would start over (S2). Default off.
  bool durable = false;
  /// With durable: some restarts come back from a lagging copy of the store, one that lacks its
  /// last k >= 1 operations (an asynchronous replica promoted, a crash inside an fsync window, a
  /// restore from a backup): grants lost, the counter back at the copy's. The kit copies the
  /// files of store_env::dir, so it needs a factory taking a store_env (else the report lists
  /// the fault as not explored). The store is then judged from the copy's state on (S2, S3), and
  /// the fences must still admit no second holder (S1). Default on.
  bool lagging_restarts = true;
  /// With durable: some restarts are machine reboots (store_fault_options::reboots: every client
  /// crashes at that instant, the store's clock starts over, the factory gets a new
  /// store_env::boot), and a contract check reboots the store between two grants of one key
  /// (conformance_counter.hpp). The store must keep its token counter and drop the old boot's
  /// leases. Needs a factory taking a store_env (else reported as not explored). Default on.
  bool reboots = true;
  /// For a store that keeps its own clock (a factory taking no sim_clock: Redis, PostgreSQL,
  /// etcd, a server's store): makes the lease on `key` (exactly as the kit passed it to the
  /// store, key_prefix included) expire now by the store's own clock: move a manual clock on,
  /// PEXPIREAT in the past, UPDATE the expiry column, revoke the etcd lease. With it the T2
  /// contract checks run on such a store: a lease not made to expire is not taken over, expiry
  /// is honoured (inspect no longer shows it, another owner is granted it with a greater token),
  /// a renewal after it is refused (no revival), the expired holder can neither renew nor
  /// release after a takeover, and one's own expired lease is re-granted with a new token. It may
  /// expire other keys too (a manual clock moved on does). Called from the checking thread only.
  /// Not used for a store on the simulated clock, whose expiry is judged to the tick. Default:
  /// none.
  std::function<void(std::string_view key)> expire_now;
  /// For a store that keeps its own clock and offers no way to force expiry (no expire_now):
  /// the contract checks grant leases of this TTL (milliseconds) and, where a lease must expire,
  /// wait in real time for the TTL the store granted, plus a tenth, plus 20 ms (a bounded wait,
  /// three times per run). Pick it well above the time the contract checks take (about forty
  /// calls into the store) and above the store's clock tick. Zero (default): no waiting.
  std::chrono::milliseconds expiry_by_waiting{0};
  /// Prepended to every key the contract, hostile-string and contention checks use, to keep them
  /// apart from other data on a shared server. The schedules use their own keys. Default empty.
  std::string key_prefix{};
  /// The store promises that releasing one's own expired lease that nobody took over succeeds
  /// (memory_store and PostgreSQL keep the record until it is taken over). By default success
  /// and not_holder are both accepted (Redis and etcd delete an expired record; store.hpp allows
  /// either). Default off.
  bool release_after_expiry_succeeds = false;
  /// The store promises store-wide tokens: every grant's token is greater than every token it
  /// issued before for any key (one counter, as memory_store, Redis, PostgreSQL and etcd keep).
  /// T1 asks this per key only, so a CAS store with per-key counters conforms without it.
  /// Default off.
  bool store_wide_tokens = false;
  /// Run the hostile-string checks (check_hostile_strings(): quotes, script and SQL
  /// metacharacters, embedded NULs, invalid UTF-8, a 1 MiB key) on the contract checks' store.
  /// Default on.
  bool hostile_strings = true;
  /// Real threads contending for one key (check_exclusive_grants()), each with the store the
  /// factory makes for it; zero (default) runs none. Only for a factory taking no sim_clock (a
  /// simulated clock is not for real threads) whose stores share their state (a server, a
  /// file): independent in-memory stores would each grant the key. check_exclusive_grants() also
  /// takes a factory returning a std::shared_ptr to one store shared by every thread.
  std::uint32_t threads = 0;
  /// Grants each contending thread must get (attempts are bounded at 2000 per grant). Default 25.
  std::uint32_t grants_per_thread = 25;
  /// Clients' clocks jump forwards and backwards (NTP steps, a VM resumed) in every other
  /// schedule: S1-S3, S5 and L1 are promised under jumps, S4 only until the first one, so the
  /// schedules without jumps keep checking S4 in full. Default on.
  bool clock_jumps = true;
  /// Everything else about the schedules (TTL, lengths, faults). run.ttl is also the TTL of the
  /// contract checks on a store on the simulated clock (60 s on a store keeping its own clock,
  /// expiry_by_waiting when that is set).
  run_options run{};
  /// Where to write the failing schedule's picture and text timeline (save_counterexample() in
  /// svg.hpp: check_store-seed-<seed>.svg / .txt); empty (default) means the environment
  /// variable HOLDFAST_SVG_DIR, and nothing is written if that is unset too.
  std::string svg_dir{};
  /// The progress line on stderr (progress.hpp): by default only on a terminal, after 2 s.
  progress_mode progress = progress_mode::automatic;
  /// How long, in real time, a schedule (or a shrinking step) may run before the check is judged
  /// blocked and ended with a message (stall_watchdog in progress.hpp): a store that holds its own
  /// lock across a step point blocks the simulator's one thread for good. Zero disables it.
  /// Default 60 s (a schedule normally takes milliseconds).
  std::chrono::milliseconds stall_limit = std::chrono::seconds(60);
};

/// What the conformance kit found.
struct conformance_report {
  std::vector<std::string> failures;  ///< Each failed check: its rule, what happened, a timeline.
  std::vector<std::string> skipped;   ///< Checks that could not run, and why.
  std::uint32_t contract_checks = 0;  ///< Deterministic (and threaded) contract checks run.
  std::uint32_t schedules = 0;        ///< Simulated schedules run.
  std::uint64_t events = 0;           ///< Simulated events checked in all.
  std::uint64_t store_steps = 0;  ///< Step points (step_point.hpp) the store reached in schedules.

  /// Returns true iff nothing failed.
  [[nodiscard]] bool ok() const noexcept { return failures.empty(); }
  /// Returns true iff nothing failed.
  explicit operator bool() const noexcept { return ok(); }

  /// Returns a human-readable summary: counts, every failure, every skipped check.
  [[nodiscard]] std::string summary() const {
    std::string out = ok() ? "store conforms: " : "store does NOT conform: ";
    out += std::to_string(contract_checks) + " contract checks, " + std::to_string(schedules) +
           " schedules (" + std::to_string(events) + " events), " +
           std::to_string(failures.size()) + " failure(s)\n";
    for (const std::string& f : failures) out += "FAILED " + f + "\n";
    if (!skipped.empty()) out += "not explored:\n";
    for (const std::string& s : skipped) out += "  - " + s + "\n";
    return out;
  }

  /// Prints summary().
  friend std::ostream& operator<<(std::ostream& os, const conformance_report& r) {
    return os << r.summary();
  }
};

namespace detail {

/// An error's text for a failure message ("success" for none).
inline std::string error_text(const std::error_code& ec) {
  return ec ? ec.message() : std::string("success");
}

}  // namespace detail

}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_CONFORMANCE_OPTIONS_HPP
