// SPDX-License-Identifier: MIT
// Tests of the conformance kit's store faults (sim_store.hpp, conformance.hpp) against the example
// stores of tests/support/example_stores.hpp: a restart never destroys a store with an operation
// inside it, and a store may crash between two of its own steps.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <holdfast/testing/testing.hpp>
#include <map>
#include <memory>
#include <random>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "../support/example_stores.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_kit_faults {

using namespace holdfast::testing;
using example_stores::file_store;
using example_stores::flaw;
using example_stores::locked_store;

namespace {

// Counts, around each call, the operations inside the wrapped store; its destructor notes a store
// destroyed with an operation still inside it (the use-after-free of issue 21.1).
int destroyed_with_operation_inside = 0;

template <class S>
struct watched {
  std::unique_ptr<S> s;
  int inside = 0;
  explicit watched(std::unique_ptr<S> p) : s(std::move(p)) {}
  watched(const watched&) = delete;
  watched& operator=(const watched&) = delete;
  ~watched() {
    if (inside != 0) ++destroyed_with_operation_inside;
  }
  struct in {
    int& n;
    explicit in(int& k) : n(k) { ++n; }
    ~in() { --n; }
    in(const in&) = delete;
    in& operator=(const in&) = delete;
  };
  holdfast::result<holdfast::grant> try_acquire(std::string_view k, std::string_view o,
                                                std::chrono::milliseconds ttl) {
    in g(inside);
    return s->try_acquire(k, o, ttl);
  }
  holdfast::result<holdfast::grant> renew(std::string_view k, std::string_view o,
                                          holdfast::fencing_token t,
                                          std::chrono::milliseconds ttl) {
    in g(inside);
    return s->renew(k, o, t, ttl);
  }
  holdfast::result<void> release(std::string_view k, std::string_view o,
                                 holdfast::fencing_token t) {
    in g(inside);
    return s->release(k, o, t);
  }
};

auto durable_file_store(flaw f = flaw::none) {
  return [f](sim_clock c, const store_env& env) {
    return std::make_unique<watched<file_store<sim_clock>>>(
        std::make_unique<file_store<sim_clock>>(c, env, f));
  };
}

}  // namespace

TEST_CASE("kit: a restart never destroys a store with an operation inside it",
          "[testing/kit-faults]") {
  // Issue 21.1: a durable store with a step point on its correct path, restarted (destroyed and
  // reopened through its factory) while another client's operation was stopped inside it.
  destroyed_with_operation_inside = 0;
  run_options o;
  o.store_faults.restarts = true;
  o.reopen_on_restart = true;
  auto make = durable_file_store();
  std::uint64_t crashed_inside = 0;
  std::uint64_t ended_inside = 0;
  for (std::uint64_t seed = 1; seed <= 60; ++seed) {
    seeded_source src(seed);
    const run_result r = run_schedule(src, make, o);
    INFO("seed " << seed << "\n" << r.result.report());
    REQUIRE(r.result.ok());
    for (const event& e : r.log.events) {
      if (e.kind == event_kind::store_down && e.value == 1) ++crashed_inside;
      if (e.note == fault_note::store_crashed) ++ended_inside;
    }
  }
  REQUIRE(destroyed_with_operation_inside == 0);
  // The new fault happened: the store crashed between two of its own steps, and operations
  // inside it ended there with an error.
  REQUIRE(crashed_inside > 0);
  REQUIRE(ended_inside > 0);
}

TEST_CASE("kit: the correct example stores conform, durable and in memory",
          "[testing/kit-faults]") {
  conformance_options o;
  o.schedules = 100;
  o.durable = true;
  const conformance_report d = check_store(
      [](sim_clock c, const store_env& env) { return file_store<sim_clock>(c, env); }, o);
  INFO(d.summary());
  REQUIRE(d.ok());
  REQUIRE(d.store_steps > 0);
  conformance_options m;
  m.schedules = 100;
  const conformance_report r =
      check_store([](sim_clock c) { return locked_store<sim_clock>(c); }, m);
  INFO(r.summary());
  REQUIRE(r.ok());
  REQUIRE(r.store_steps > 0);
}

TEST_CASE("kit: a durable store restarted from a lagging copy loses its last operations",
          "[testing/kit-faults]") {
  // Issue 20.4: the copy lacks the store's last k >= 1 operations (grants lost, counter back at
  // the copy's). The correct store and the shipped fences still conform: S1 holds, and S2/S3 are
  // judged from the copy's state on.
  run_options o;
  o.store_faults.restarts = true;
  o.store_faults.lagging_restarts = true;
  o.reopen_on_restart = true;
  auto make = durable_file_store();
  std::uint64_t lagging = 0;
  std::uint64_t reissued = 0;  // a token granted again, to another owner, after a lost grant
  for (std::uint64_t seed = 1; seed <= 60; ++seed) {
    seeded_source src(seed);
    const run_result r = run_schedule(src, make, o);
    INFO("seed " << seed << "\n" << r.result.report());
    REQUIRE(r.result.ok());
    std::map<std::pair<int, std::uint64_t>, std::string> granted;
    for (const event& e : r.log.events) {
      if (e.kind == event_kind::store_up && e.value > 0) ++lagging;
      if (e.kind != event_kind::store_acquire || e.outcome != 0) continue;
      auto it = granted.find({e.key, e.token});
      if (it != granted.end() && it->second != e.owner) ++reissued;
      granted[{e.key, e.token}] = e.owner;
    }
  }
  REQUIRE(lagging > 0);
  REQUIRE(reissued > 0);
}

TEST_CASE("kit: each broken example store is named by check_store", "[testing/kit-faults]") {
  conformance_options o;
  o.schedules = 50;
  // Tokens from std::chrono::system_clock: two runs of one schedule differ.
  const conformance_report clock = check_store(
      [](sim_clock c) { return locked_store<sim_clock>(c, flaw::real_clock_tokens); }, o);
  INFO(clock.summary());
  REQUIRE_THAT(clock.summary(), Catch::Contains("determinism: two runs of schedule seed=1"));
  // A 32-bit counter, started below 2^32 through store_env::counter_start.
  conformance_options d = o;
  d.durable = true;
  const conformance_report narrow = check_store(
      [](sim_clock c, const store_env& env) {
        return file_store<sim_clock>(c, env, flaw::counter_32bit);
      },
      d);
  INFO(narrow.summary());
  REQUIRE_THAT(narrow.summary(), Catch::Contains("T1 across 2^32: after token 4294967295"));
}

TEST_CASE("kit: token order is checked across 2^31, 2^32, 2^53 and 2^63", "[testing/kit-faults]") {
  // Issue 21.2: the counter started a few grants below each end (store_env::counter_start). Each
  // broken counter passes the ends below its own and is named at its own.
  conformance_options o;
  o.schedules = 0;
  o.hostile_strings = false;
  const struct {
    flaw f;
    const char* named;
  } cases[] = {{flaw::counter_int32_clamped, "T1 across 2^31: after token 2147483647"},
               {flaw::counter_32bit, "T1 across 2^32: after token 4294967295"},
               {flaw::counter_double, "T1 across 2^53: after token 9007199254740992"},
               {flaw::counter_int64_clamped, "T1 across 2^63: after token 9223372036854775807"}};
  for (const auto& c : cases) {
    const flaw f = c.f;
    const conformance_report r = check_store(
        [f](sim_clock k, const store_env& env) {
          return locked_store<sim_clock>(k, f, env.counter_start);
        },
        o);
    INFO(r.summary());
    REQUIRE(r.failures.size() == 1);
    REQUIRE_THAT(r.summary(), Catch::Contains(c.named));
  }
  // The correct store crosses all four, and none is listed as not explored.
  const conformance_report fine = check_store(
      [](sim_clock k, const store_env& env) {
        return locked_store<sim_clock>(k, flaw::none, env.counter_start);
      },
      o);
  INFO(fine.summary());
  REQUIRE(fine.ok());
  REQUIRE_THAT(fine.summary(), !Catch::Contains("token order across"));
}

TEST_CASE("kit: a lease freed one tick early is a T2 matter, printed to the nanosecond",
          "[testing/kit-faults]") {
  // Issue 21.3: times with the precision the violation needs (not 3 decimals when the gap is
  // 1 ns), and a store that ends a lease before its TTL labelled as T2.
  run_options o;
  o.mutation = mutant::expires_1tick_early;
  run_result r;
  for (std::uint64_t seed = 1; seed <= 200; ++seed) {
    seeded_source src(seed);
    r = run_schedule(src, o);
    if (!r.result.ok()) break;
  }
  const std::string rep = r.result.report();
  INFO(rep);
  REQUIRE(r.result.violated == invariant::s3_exclusive_grants);
  REQUIRE_THAT(rep, Catch::Contains("was live for another 1ns"));
  REQUIRE_THAT(rep, Catch::Contains("the store ended that lease before the TTL it reported "
                                    "(store.hpp, T2)"));
  // The lease's expiry 1 ns after the violation is on a line of its own; with it the times
  // print to the nanosecond.
  REQUIRE_THAT(rep, Catch::Contains("the store's clock passes the expiry of C's lease #1 (after "
                                    "the violation)"));
  REQUIRE(std::regex_search(rep, std::regex("\\n  t=[0-9]+\\.[0-9]{9}s ")));
}

TEST_CASE("kit: a machine reboot crashes every client and restarts the store's clock",
          "[testing/kit-faults]") {
  // Issue 21.2: the correct file_store drops the old boot's leases and keeps its counter; it
  // conforms with reboots on. Each reboot's store_up says so, and every client crashed at the
  // reboot's instant.
  run_options o = durable_store_run_options();
  o.faults.clock_jumps = false;
  auto make = durable_file_store();
  std::uint64_t reboots = 0;
  std::uint64_t crashed_at_reboot = 0;
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    seeded_source src(seed);
    const run_result r = run_schedule(src, make, o);
    INFO("seed " << seed << "\n" << r.result.report());
    REQUIRE(r.result.ok());
    for (std::size_t i = 0; i < r.log.events.size(); ++i) {
      const event& e = r.log.events[i];
      if (e.kind == event_kind::store_up && e.note == fault_note::machine_rebooted) {
        ++reboots;
        REQUIRE(e.local_ns == 1000000);  // the store's clock started over
      }
      if (e.kind == event_kind::store_down && e.note == fault_note::machine_rebooted) {
        for (std::size_t j = i + 1;
             j < r.log.events.size() && r.log.events[j].kind == event_kind::crash; ++j) {
          REQUIRE(r.log.events[j].true_ns == e.true_ns);
          ++crashed_at_reboot;
        }
      }
    }
  }
  REQUIRE(reboots > 0);
  REQUIRE(crashed_at_reboot > 0);
}

TEST_CASE("kit: a store that wipes its counter on reboot is named", "[testing/kit-faults]") {
  // The contract check reboots the store between two grants of a key.
  conformance_options d;
  d.schedules = 0;
  d.durable = true;
  const conformance_report rep = check_store(
      [](sim_clock c, const store_env& env) {
        return file_store<sim_clock>(c, env, flaw::reboot_wipes_counter);
      },
      d);
  INFO(rep.summary());
  REQUIRE_THAT(rep.summary(), Catch::Contains("reboot: after the machine rebooted"));
  REQUIRE_THAT(rep.summary(), Catch::Contains("not above #1 granted before the reboot"));
  // The schedules alone find it too (S2 across a reboot), with the reboot in the timeline.
  run_options o = durable_store_run_options();
  auto make = durable_file_store(flaw::reboot_wipes_counter);
  std::uint64_t seed = 1;
  run_result r;
  for (; seed <= 200; ++seed) {
    seeded_source src(seed);
    r = run_schedule(src, make, o);
    if (!r.result.ok()) break;
  }
  INFO("seed " << seed << "\n" << r.result.report());
  REQUIRE_FALSE(r.result.ok());
  REQUIRE(r.result.violated == invariant::s2_token_order);
  REQUIRE_THAT(r.result.report(), Catch::Contains("machine reboots"));
}

TEST_CASE("kit: a cleanup that deletes what it listed before a stall is caught by default",
          "[testing/kit-faults]") {
  // Issue 21.3: the stalled cleanup lists expired keys, then (a step later) deletes them without
  // re-checking. The aimed stall (store_fault_options::regrant_stalls) holds its acquire between
  // the expiry it read and another client's re-grant, so the default in-memory check_store and
  // the durable one find it in their first schedules (it used to take ~400).
  const conformance_report m =
      check_store([](sim_clock c) { return locked_store<sim_clock>(c, flaw::stalled_cleanup); });
  INFO(m.summary());
  REQUIRE_THAT(m.summary(), Catch::Contains("S3 exclusive grants violated"));
  REQUIRE(m.schedules <= 30);
  // The shrunk timeline shows the operation that did the harm: where it stopped at its step
  // point (the cleanup had listed the expired key), and where it went on and deleted C#2's
  // grant (history::store_stalls).
  REQUIRE_THAT(
      m.summary(),
      Catch::Contains(
          "  t=1.001s    B's acquire of \"orders\" stops at a step point inside the store for "
          "5.000s (others run)\n"
          "  t=5.676s    C#2 acquires \"orders\" ttl=1000ms               -> token #3\n"
          "  t=6.001s    B's acquire of \"orders\" goes on past its step point, acting on what "
          "it read 5.000s earlier\n"
          "  t=6.001s    B acquires \"orders\" ttl=1000ms [began 5.000s earlier; others ran "
          "between its steps] [request in flight 0.001s] -> token #4   <- S3 violated\n"));
  conformance_options d;
  d.durable = true;
  const conformance_report f = check_store(
      [](sim_clock c, const store_env& env) {
        return file_store<sim_clock>(c, env, flaw::stalled_cleanup);
      },
      d);
  INFO(f.summary());
  REQUIRE_THAT(f.summary(), Catch::Contains("S3 exclusive grants violated"));
  REQUIRE(f.schedules <= 30);
  REQUIRE_THAT(
      f.summary(),
      Catch::Contains(
          "  t=3.205s    A#3's acquire of \"orders\" stops at a step point inside the store for "
          "1.840s (others run)\n"
          "  t=5.044s    B acquires \"orders\" ttl=1000ms                 -> token #3\n"
          "  t=5.045s    A#3's acquire of \"orders\" goes on past its step point, acting on "
          "what it read 1.840s earlier\n"
          "  t=5.045s    A#3 acquires \"orders\" ttl=1000ms [began 1.840s earlier; others ran "
          "between its steps] -> token #4   <- S3 violated\n"));
}

namespace {
// What fuzz_store() runs per input, without its trap: the schedule `bytes` decode to. Returns
// the number of random 2048-byte inputs (a fixed generator) until one violates an invariant, or
// 0 if none of `max_inputs` does.
template <class F>
std::size_t inputs_to_catch(F make, const run_options& o, std::size_t max_inputs) {
  std::mt19937_64 gen(21);
  std::vector<std::uint8_t> bytes(2048);
  for (std::size_t n = 1; n <= max_inputs; ++n) {
    for (std::uint8_t& b : bytes) b = static_cast<std::uint8_t>(gen());
    byte_source src(bytes.data(), bytes.size());
    if (!run_schedule(src, make, o).result.ok()) return n;
  }
  return 0;
}
}  // namespace

TEST_CASE("kit: the fuzz entry point names each broken example store", "[testing/kit-faults]") {
  // Issue 21, done-when: fuzz_store() runs the contract checks once per process (here as the
  // report it would trap with), then the schedule each input decodes to.
  const run_options mem = store_run_options();
  const run_options durable = durable_store_run_options();
  auto locked = [](flaw f) { return [f](sim_clock c) { return locked_store<sim_clock>(c, f); }; };
  auto filed = [](flaw f) {
    return [f](sim_clock c, const store_env& env) { return file_store<sim_clock>(c, env, f); };
  };
  auto clock_tokens = locked(flaw::real_clock_tokens);
  REQUIRE_THAT(holdfast::testing::detail::fuzz_contract_report(clock_tokens, mem).summary(),
               Catch::Contains("determinism: two runs of schedule seed=1"));
  auto narrow = filed(flaw::counter_32bit);
  REQUIRE_THAT(holdfast::testing::detail::fuzz_contract_report(narrow, durable).summary(),
               Catch::Contains("T1 across 2^32"));
  auto wipes = filed(flaw::reboot_wipes_counter);
  REQUIRE_THAT(holdfast::testing::detail::fuzz_contract_report(wipes, durable).summary(),
               Catch::Contains("reboot: after the machine rebooted"));
  // The correct stores pass the same contract checks; the stalled cleanup passes them too and
  // is caught by the schedules, within a few inputs (the aimed stall).
  auto fine = filed(flaw::none);
  REQUIRE(holdfast::testing::detail::fuzz_contract_report(fine, durable).ok());
  auto stalled = locked(flaw::stalled_cleanup);
  REQUIRE(holdfast::testing::detail::fuzz_contract_report(stalled, mem).ok());
  const std::size_t m = inputs_to_catch(stalled, mem, 200);
  INFO("in memory: caught at input " << m);
  REQUIRE(m != 0);
  const std::size_t d = inputs_to_catch(filed(flaw::stalled_cleanup), durable, 200);
  INFO("durable: caught at input " << d);
  REQUIRE(d != 0);
  REQUIRE(inputs_to_catch(filed(flaw::none), durable, 20) == 0);
}

TEST_CASE("kit: holders renew and inspect while others acquire, on real threads",
          "[testing/kit-faults][concurrency]") {
  // The correct locked_store passes; its unlocked_renew variant is a data race that the README's
  // TSan recipe reports (renew and inspect run while other threads acquire and inspect).
  conformance_options o;
  o.threads = 3;
  o.grants_per_thread = 20;
  auto shared = std::make_shared<locked_store<holdfast::steady_clock>>(holdfast::steady_clock{});
  const conformance_report r = check_exclusive_grants([shared] { return shared; }, o);
  INFO(r.summary());
  REQUIRE(r.ok());
  REQUIRE(r.contract_checks > 3 * 20 * 4);
}

}  // namespace test_kit_faults
