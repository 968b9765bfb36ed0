// holdfast/testing/conformance.hpp - the store conformance kit: checks a user's LeaseStore
// against the contract (store.hpp, T1-T4) and the invariants (testing/checker.hpp: S1-S5 and L1)
// under thousands of simulated schedules, and a fuzz entry point for libFuzzer.
//
//   using holdfast::testing::sim_clock;
//   auto report = holdfast::testing::check_store(
//       [](sim_clock c) { return my_store<sim_clock>(c); });
//   if (!report) std::cerr << report;  // names the rule or invariant, with a timeline
//
// and, as a whole libFuzzer target (a file of its own; copy it as it is):
//
//   #include <holdfast/testing/conformance.hpp>
//   using holdfast::testing::sim_clock;
//   extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
//     return holdfast::testing::fuzz_store(
//         [](sim_clock c) { return my_store<sim_clock>(c); }, data, size);
//   }
//
// The factory is called as factory(sim_clock) (the store judges expiry by the simulated clock it
// is given: every check runs), factory(sim_clock, const store_env&) (the same, plus a directory
// for the store's files: new for each schedule, the same across its restarts), or factory() (the
// store keeps its own time: the checks that need expiry are not explored, and the report says
// so). It returns the store by value or as a std::unique_ptr, a fresh one per call. A store that
// takes several steps per operation marks the points between them with holdfast::step_point
// (step_point.hpp) so that other clients run there; the report says when none were seen.
//
// What runs by default, and how to turn on more:
//   - the contract checks below, then 300 schedules (conformance_options::schedules), with
//     pauses, crashes, delayed and lost requests and replies, store errors, clock drift within
//     the bound, and clients' clocks jumping in every other schedule (clock_jumps);
//   - restarts only for a store that claims durability (durable): each restart destroys the
//     store and calls the factory again, which must reopen what the old one persisted;
//   - fuzz_store() runs one schedule per input with the same faults (store_run_options()).
//
//   check                     | what it asks of the store
//   --------------------------+---------------------------------------------------------------
//   T4 bad input              | empty key/owner, TTL <= 0 or > max_ttl, token none/max:
//                             | invalid_argument, and nothing changes
//   T1 grant                  | a grant carries an issuable token and a TTL in (0, asked]
//   T1 same owner             | re-acquiring one's own live lease returns the same token
//   T3 contention             | another owner gets busy (not an error)
//   T3 renew/release by others| lease_lost / not_holder, and the holder keeps its lease
//   T1 across release         | the next grant's token is greater
//   T2 expiry                 | no expiry before the TTL, expiry after it, by the store's clock;
//                             | renew after expiry is refused (no revival); tokens still grow
//   T2 coarse clock           | on a clock reading whole seconds (rounded down), a grant made
//                             | mid-tick is held for its TTL of real time (store_hold_until)
//   keys                      | keys are independent and binary-safe (embedded NUL)
//   S1-S5, L1 schedules       | `schedules` seeded simulations with every fault, checked
//
// A failing schedule leaves its shrunk timeline in the report, and, when a directory is given
// (conformance_options::svg_dir, or HOLDFAST_SVG_DIR for check_store() and the fuzz entry
// points), a picture of it (svg.hpp) and the full text history there. check_store() shows a
// progress line on a terminal (progress.hpp; HOLDFAST_PROGRESS=0 silences it).
//
// Thread-safety: each call builds its own simulations; call it from one thread at a time.
#ifndef HOLDFAST_TESTING_CONFORMANCE_HPP
#define HOLDFAST_TESTING_CONFORMANCE_HPP

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/store.hpp"
#include "holdfast/testing/decision.hpp"
#include "holdfast/testing/progress.hpp"
#include "holdfast/testing/shrink.hpp"
#include "holdfast/testing/sim_store.hpp"
#include "holdfast/testing/simulator.hpp"
#include "holdfast/testing/svg.hpp"
#include "holdfast/testing/workload.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace testing {

/// How thoroughly check_store() checks.
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
  /// For a store that keeps its own clock (a factory taking no sim_clock: Redis, PostgreSQL, a
  /// server's store): makes the lease on `key` expire now by the store's own clock (move a
  /// manual clock on, PEXPIREAT, UPDATE the expiry column). With it the T2 contract checks run
  /// on such a store: expiry is honoured, a renewal after it is refused (no revival), the next
  /// grant's token is greater, the expired holder cannot release. Not used for a store on the
  /// simulated clock, whose expiry is judged at the TTL's end. Default: none.
  std::function<void(std::string_view key)> expire_now;
  /// Clients' clocks jump forwards and backwards (NTP steps, a VM resumed) in every other
  /// schedule: S1-S3, S5 and L1 are promised under jumps, S4 only until the first one, so the
  /// schedules without jumps keep checking S4 in full. Default on.
  bool clock_jumps = true;
  /// Everything else about the schedules (TTL, lengths, faults).
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

/// What check_store() found.
struct conformance_report {
  std::vector<std::string> failures;  ///< Each failed check: its rule, what happened, a timeline.
  std::vector<std::string> skipped;   ///< Checks that could not run, and why.
  std::uint32_t contract_checks = 0;  ///< Deterministic contract checks run.
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

template <class Store>
class contract_checker {
 public:
  contract_checker(Store& s, simulator& sim, bool clock, const conformance_options& o,
                   conformance_report& rep)
      : s_(s), sim_(sim), clock_(clock), ttl_(o.run.ttl), rep_(rep), expire_now_(o.expire_now) {}

  void run() {
    using std::chrono::milliseconds;
    const std::string k = "conformance";
    // T4: bad input is refused and changes nothing.
    expect_invalid("T4 empty key", s_.try_acquire("", "a", ttl_));
    expect_invalid("T4 empty owner", s_.try_acquire(k, "", ttl_));
    expect_invalid("T4 zero TTL", s_.try_acquire(k, "a", milliseconds(0)));
    expect_invalid("T4 negative TTL", s_.try_acquire(k, "a", milliseconds(-5)));
    expect_invalid("T4 TTL above max_ttl", s_.try_acquire(k, "a", max_ttl + milliseconds(1)));
    // T1: a grant.
    result<grant> g1 = s_.try_acquire(k, "a", ttl_);
    if (!expect(g1.has_value(), "T1 grant",
                "try_acquire on a free key failed: " + msg(g1.error()))) {
      return;  // nothing below makes sense without a first grant
    }
    const fencing_token t1 = g1->token;
    expect(t1.is_issuable(), "T1 grant", "granted token " + to_string(t1) + " is not issuable");
    expect(g1->ttl > milliseconds(0) && g1->ttl <= ttl_, "T1 grant",
           "granted TTL " + std::to_string(g1->ttl.count()) + "ms is not in (0, asked]");
    // T4 after a grant: bad renew/release input changes nothing.
    expect_invalid("T4 renew with token none", s_.renew(k, "a", fencing_token{}, ttl_));
    expect_invalid("T4 renew with token max", s_.renew(k, "a", fencing_token::max(), ttl_));
    expect_invalid("T4 renew with zero TTL", s_.renew(k, "a", t1, milliseconds(0)));
    expect_invalid("T4 release with token none", s_.release(k, "a", fencing_token{}));
    expect_invalid("T4 release with token max", s_.release(k, "a", fencing_token::max()));
    expect_invalid("T4 release with empty owner", s_.release(k, "", t1));
    // T1: same owner, same token.
    result<grant> again = s_.try_acquire(k, "a", ttl_);
    expect(again && again->token == t1, "T1 same owner",
           "re-acquiring one's own live lease returned " +
               (again ? to_string(again->token) : msg(again.error())) + ", expected " +
               to_string(t1));
    // T3: contention is busy.
    result<grant> other = s_.try_acquire(k, "b", ttl_);
    expect(!other && other.error() == errc::busy, "T3 contention",
           "another owner's try_acquire on a held key returned " +
               (other ? "a grant " + to_string(other->token) : msg(other.error())) +
               ", expected busy");
    // T3: renew/release by non-holders fail and change nothing.
    result<grant> r1 = s_.renew(k, "b", t1, ttl_);
    expect(!r1, "T3 renew by another owner", "renew by a non-holder succeeded");
    result<grant> r2 = s_.renew(k, "a", fencing_token(t1.value() + 1), ttl_);
    expect(!r2, "T3 renew with another token", "renew with the wrong token succeeded");
    result<void> x1 = s_.release(k, "b", t1);
    expect(!x1, "T3 release by another owner", "release by a non-holder succeeded");
    result<void> x2 = s_.release(k, "a", fencing_token(t1.value() + 1));
    expect(!x2, "T3 release with another token", "release with the wrong token succeeded");
    result<grant> still = s_.try_acquire(k, "b", ttl_);
    expect(!still && still.error() == errc::busy, "T3 nothing changed",
           "after refused renew/release by others, another owner got " +
               (still ? "a grant" : msg(still.error())) + ", expected busy");
    result<grant> own = s_.renew(k, "a", t1, ttl_);
    expect(own && own->token == t1, "T3 holder unaffected",
           "the holder's own renew failed after others' attempts: " +
               (own ? to_string(own->token) : msg(own.error())));
    // Keys are independent and binary-safe.
    const std::string nul1("key\0one", 7);
    const std::string nul2("key\0two", 7);
    result<grant> n1 = s_.try_acquire(nul1, "c", ttl_);
    result<grant> n2 = s_.try_acquire(nul2, "d", ttl_);
    expect(n1 && n2, "keys binary-safe",
           "two keys differing after an embedded NUL are not independent: " +
               (n1 ? std::string("first ok") : msg(n1.error())) + ", " +
               (n2 ? std::string("second ok") : msg(n2.error())));
    // T1 across release.
    result<void> rel = s_.release(k, "a", t1);
    expect(rel.has_value(), "T3 release by the holder",
           "the holder's release failed: " + msg(rel.error()));
    result<grant> g2 = s_.try_acquire(k, "b", ttl_);
    if (!expect(g2.has_value(), "T1 across release",
                "acquire after release failed: " + msg(g2.error()))) {
      return;
    }
    expect(g2->token > t1, "T1 across release",
           "token after release " + to_string(g2->token) + " is not greater than " + to_string(t1));
    if (!clock_ && !expire_now_) {
      rep_.skipped.push_back(
          "T2 expiry: the store's clock is not injectable (pass a factory taking "
          "holdfast::testing::sim_clock to check expiry by the store's clock, or "
          "conformance_options::expire_now to force it on the store's own clock)");
      return;
    }
    if (clock_) {
      // T2: no expiry before the TTL, expiry after it, by the store's clock.
      const std::int64_t ttl_ns = std::chrono::nanoseconds(g2->ttl).count();
      sim_.advance(ttl_ns - 2000000);
      result<grant> early = s_.try_acquire(k, "c", ttl_);
      expect(!early && early.error() == errc::busy, "T2 no early expiry",
             "another owner acquired 2 ms before the TTL ran out");
      sim_.advance(4000000);
    } else {
      // The store keeps its own time: the test makes the lease expire by that clock (a manual
      // clock moved on, PEXPIREAT, an UPDATE of the expiry). No early expiry cannot be judged.
      result<grant> early = s_.try_acquire(k, "c", ttl_);
      expect(!early && early.error() == errc::busy, "T2 no early expiry",
             "another owner acquired a lease that had not been made to expire");
      expire_now_(k);
      rep_.skipped.push_back(
          "T2 expiry to the tick: the store keeps its own clock, so expiry was forced through "
          "conformance_options::expire_now, not judged at the TTL's end");
    }
    result<grant> revive = s_.renew(k, "b", g2->token, ttl_);
    expect(!revive, "T2 no revival", "renew after the TTL ran out revived an expired lease");
    result<grant> g3 = s_.try_acquire(k, "c", ttl_);
    if (!expect(g3.has_value(), "T2 expiry",
                "another owner could not acquire 2 ms after the TTL ran out: " + msg(g3.error()))) {
      return;
    }
    expect(g3->token > g2->token, "T1 across expiry",
           "token after expiry " + to_string(g3->token) + " is not greater than " +
               to_string(g2->token));
    result<void> late = s_.release(k, "b", g2->token);
    expect(!late, "T3 release after takeover",
           "the expired holder's release succeeded after another owner took over");
  }

 private:
  static std::string msg(const std::error_code& ec) { return ec ? ec.message() : "success"; }

  bool expect(bool ok, const std::string& rule, const std::string& what) {
    ++rep_.contract_checks;
    if (!ok) rep_.failures.push_back(rule + ": " + what);
    return ok;
  }

  template <class R>
  void expect_invalid(const std::string& rule, const R& r) {
    expect(!r && r.error() == errc::invalid_argument, rule,
           std::string("expected invalid_argument, got ") + (r ? "success" : msg(r.error())));
  }

  Store& s_;
  simulator& sim_;
  bool clock_;
  std::chrono::milliseconds ttl_;
  conformance_report& rep_;
  std::function<void(std::string_view)> expire_now_;
};

}  // namespace detail

/// Checks the store made by `make_store` against the LeaseStore contract and the safety and
/// liveness invariants (see the table at the top of conformance.hpp) and returns the report.
/// The first failing schedule is reported with its seed (re-run it with seeded_source(seed)
/// and run_schedule()) and the timeline of its shrunk form (shrink.hpp); contract checks report
/// every failure.
/// Exceptions thrown by the store propagate.
template <class Factory>
conformance_report check_store(Factory&& make_store, const conformance_options& o = {}) {
  using Store = detail::factory_store_t<std::remove_reference_t<Factory>>;
  constexpr bool simulated_clock = detail::factory_takes_clock_v<std::remove_reference_t<Factory>>;
  conformance_report rep;
  {
    seeded_source src(o.seed);
    fault_options quiet;
    quiet.drift = false;  // contract checks use an exact store clock
    quiet.store_clock_ticks = false;
    simulator sim(src, quiet);
    const node_id n = sim.add_store("store");
    store_env env;
    std::unique_ptr<detail::scratch_dir> dir;
    if constexpr (detail::factory_takes_env_v<std::remove_reference_t<Factory>>) {
      dir = std::make_unique<detail::scratch_dir>();
      env.dir = dir->path();
    }
    std::unique_ptr<Store> store = detail::make_store<Store>(make_store, sim.clock(n), env);
    detail::contract_checker<Store>(*store, sim, simulated_clock, o, rep).run();
  }
  if constexpr (simulated_clock) {
    // T2 on a coarse clock (store.hpp, T2; issue "time at the edges"): the store's clock reads true
    // time rounded down to whole seconds, and a grant of 1500 ms is made 0.7 s into a tick. It
    // must stay held until 1500 ms of real time have passed (a store that ends it at reading +
    // TTL frees it at true time 2.0 s, 1.3 s after the grant), and end within TTL + 2 ticks.
    seeded_source src(o.seed);
    fault_options quiet;
    quiet.drift = false;
    quiet.store_clock_ticks = false;
    simulator sim(src, quiet);
    const node_id n = sim.add_store("coarse store");
    sim.set_tick(n, 1000000000);
    store_env env;  // a store of its own: a directory of its own for a file-backed one
    std::unique_ptr<detail::scratch_dir> dir;
    if constexpr (detail::factory_takes_env_v<std::remove_reference_t<Factory>>) {
      dir = std::make_unique<detail::scratch_dir>();
      env.dir = dir->path();
    }
    std::unique_ptr<Store> store = detail::make_store<Store>(make_store, sim.clock(n), env);
    sim.advance(700000000);
    const std::chrono::milliseconds ttl(1500);
    result<grant> g = store->try_acquire("coarse", "a", ttl);
    ++rep.contract_checks;
    if (!g) {
      rep.failures.push_back("T2 coarse clock: try_acquire on a free key failed: " +
                             g.error().message());
    } else {
      const std::int64_t held_ns = std::chrono::nanoseconds(g->ttl).count();
      sim.advance(held_ns - 1);  // one nanosecond before the TTL has passed in real time
      result<grant> early = store->try_acquire("coarse", "b", ttl);
      ++rep.contract_checks;
      if (early || early.error() != errc::busy) {
        rep.failures.push_back(
            "T2 coarse clock: on a store clock that reads whole seconds (rounded down), a grant "
            "of " +
            std::to_string(g->ttl.count()) +
            "ms made 0.7s into a tick was ended before that TTL had passed in real time: "
            "another owner got " +
            (early ? std::string("a grant") : early.error().message()) +
            " 1ns before (count the tick the read may lag: store_hold_until, clock_tick)");
      }
      sim.advance(2000000001);  // TTL + 2 ticks after the grant
      result<grant> late = store->try_acquire("coarse", "b", ttl);
      ++rep.contract_checks;
      if (!late) {
        rep.failures.push_back(
            "T2 coarse clock: a grant of " + std::to_string(g->ttl.count()) +
            "ms still held 2 ticks (2s) after its TTL: " + late.error().message());
      }
    }
  }
  run_options ro = o.run;
  ro.store_faults.restarts = ro.store_faults.restarts || o.durable;
  ro.reopen_on_restart = ro.reopen_on_restart || o.durable;
  if (!simulated_clock) {
    rep.skipped.push_back(
        "S3, S4, expiry in S5, L1 over schedules: the store's clock is not injectable");
  }
  std::uint64_t store_steps = 0;
  progress_meter meter("check_store", o.schedules, o.progress);
  stall_watchdog watchdog("check_store", o.stall_limit);
  run_options jumps = ro;
  jumps.faults.clock_jumps = true;
  for (std::uint32_t i = 0; i < o.schedules; ++i) {
    const run_options& ri = o.clock_jumps && i % 2 == 1 ? jumps : ro;
    seeded_source src(o.seed + i);
    run_result r = run_schedule(src, make_store, ri);
    watchdog.beat();
    ++rep.schedules;
    rep.events += r.log.events.size();
    store_steps += r.log.store_steps;
    meter.update(rep.schedules, rep.events, rep.failures.size() + (r.result.ok() ? 0 : 1));
    if (!r.result.ok()) {
      // Replay it recorded, shrink it, and report the minimal timeline (the seed replays the
      // original: run_schedule(seeded_source(seed), factory, options)).
      seeded_source again(o.seed + i);
      recording_source rec(again);
      (void)run_schedule(rec, make_store, ri);
      const shrink_result s = shrink_failure(
          rec.to_bytes(),
          [&](byte_source& b) {
            watchdog.beat();
            return run_schedule(b, make_store, ri);
          },
          2000);
      const std::string picture = save_counterexample(
          o.svg_dir.empty() ? svg_dir_from_env() : o.svg_dir,
          "check_store-seed-" + std::to_string(o.seed + i), s.run.log, s.run.result);
      rep.failures.push_back("schedule seed=" + std::to_string(o.seed + i) + " (" +
                             std::to_string(r.log.events.size()) + " events; shrunk to " +
                             std::to_string(s.run.log.events.size()) +
                             "): " + s.run.result.report() +
                             (picture.empty() ? "" : "picture: " + picture + "\n"));
      break;
    }
  }
  rep.store_steps = store_steps;
  if (store_steps == 0 && rep.schedules != 0) {
    rep.skipped.push_back(
        "interleavings inside the store's operations: the store marked no step points, so each "
        "operation ran as one atomic step (right for a store that makes one call per operation; "
        "otherwise mark the points between its calls with holdfast::step_point(clock, "
        "holdfast::step_kind::between), step_point.hpp)");
  }
  return rep;
}

/// The run options fuzz_store() uses by default: run_options' defaults with clients' clocks
/// jumping (S1-S3, S5 and L1 hold under jumps; S4 is checked up to the first jump).
inline run_options store_run_options() {
  run_options o;
  o.faults.clock_jumps = true;
  return o;
}

namespace detail {

// Prints a violation found by a fuzz entry point, and its shrunk form, then traps.
template <class Runner>
[[noreturn]] void report_and_trap(const run_result& r, const std::uint8_t* data, std::size_t size,
                                  Runner&& run) {
  std::fprintf(stderr, "holdfast: %s", r.result.report().c_str());
  const shrink_result s = shrink_failure(std::vector<std::uint8_t>(data, data + size), run, 2000);
  std::fprintf(stderr,
               "holdfast: shrunk to %zu decision bytes (from %zu) in %zu runs; minimal timeline:\n"
               "%s",
               s.bytes.size(), size, s.runs, s.run.result.report().c_str());
  // With HOLDFAST_SVG_DIR set, the shrunk schedule's picture and text go there too, named by a
  // hash of the input so that several crashes keep their own.
  std::uint64_t hash = 14695981039346656037ull;
  for (std::size_t i = 0; i < size; ++i) hash = (hash ^ data[i]) * 1099511628211ull;
  char name[40];
  std::snprintf(name, sizeof name, "fuzz-%016llx", static_cast<unsigned long long>(hash));
  const std::string picture =
      save_counterexample(svg_dir_from_env(), name, s.run.log, s.run.result);
  if (!picture.empty()) std::fprintf(stderr, "holdfast: picture: %s\n", picture.c_str());
  std::fflush(stderr);
  HOLDFAST_TRAP();
}

}  // namespace detail

/// Runs the schedule that `data` decodes to (one byte per decision; see byte_source) against
/// the store made by `make_store`. If an invariant is violated it prints the report, shrinks the
/// input (shrink.hpp) and prints the minimal timeline too, then calls __builtin_trap() so
/// libFuzzer records the input (the crash file replays the original schedule). Returns 0. A
/// whole fuzz target is three lines (see the top of conformance.hpp).
template <class Factory>
int fuzz_store(Factory&& make_store, const std::uint8_t* data, std::size_t size,
               const run_options& o = store_run_options()) {
  byte_source src(data, size);
  const run_result r = run_schedule(src, make_store, o);
  if (!r.result.ok()) {
    detail::report_and_trap(r, data, size,
                            [&](byte_source& s) { return run_schedule(s, make_store, o); });
  }
  return 0;
}

/// As fuzz_store(), against the shipped memory_store, or the mutant o.mutation selects.
inline int fuzz_schedule(const std::uint8_t* data, std::size_t size, const run_options& o = {}) {
  byte_source src(data, size);
  const run_result r = run_schedule(src, o);
  if (!r.result.ok()) {
    detail::report_and_trap(r, data, size, [&](byte_source& s) { return run_schedule(s, o); });
  }
  return 0;
}

}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_CONFORMANCE_HPP
