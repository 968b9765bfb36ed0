// SPDX-License-Identifier: MIT
// Tests of holdfast/testing/simulator.hpp, sim_store.hpp and resource.hpp: virtual time and
// per-node clocks, fibers that interleave the shipped blocking code, faults that do what they say,
// crashes that drain, and determinism (same decisions, byte-identical history).
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <holdfast/holdfast.hpp>
#include <holdfast/quorum.hpp>
#include <holdfast/testing/testing.hpp>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_testing_simulator {

using namespace holdfast::testing;
using namespace std::chrono_literals;

namespace {

constexpr std::int64_t ms = 1000000;

// Always answers the last option: with every fault but one switched off, that one always fires.
class last_option_source final : public decision_source {
 public:
  std::uint32_t choose(std::uint32_t n) override { return n == 0 ? 0 : n - 1; }
};

fault_options no_faults() {
  fault_options f;
  f.preemption = false;
  f.pauses = false;
  f.crashes = false;
  f.drift = false;
  f.store_clock_ticks = false;
  f.client_clock_ticks = false;
  return f;
}

store_fault_options no_store_faults() {
  store_fault_options f;
  f.request_delays = false;
  f.lost_requests = false;
  f.reply_delays = false;
  f.lost_replies = false;
  f.errors = false;
  f.restarts = false;
  return f;
}

using mstore = holdfast::memory_store<sim_clock>;
auto make_memory = [](sim_clock c) { return std::make_unique<mstore>(c); };

// One store with only the store faults in `f` and client A's one try_acquire on it, run to the
// end; `seen` is what A got back.
struct one_call {
  one_call(decision_source& src, store_fault_options f, std::chrono::milliseconds ttl)
      : sim(src, no_faults()), store(sim, "store", make_memory, f) {
    const node_id a = sim.add_client("A");
    sim.spawn(a, [this, ttl] { seen = store.try_acquire("orders", "A", ttl).error(); });
    sim.run();
  }
  simulator sim;
  sim_store<mstore> store;
  std::error_code seen;
};

holdfast::acquire_options<sim_clock> opts_for(simulator& sim, node_id n, const char* owner) {
  holdfast::acquire_options<sim_clock> o;
  o.clock = sim.clock(n);
  o.owner = owner;
  o.backoff.seed = 1;
  return o;
}

}  // namespace

TEST_CASE("simulator: same decisions give a byte-identical history", "[testing/simulator]") {
  run_options o;
  o.faults.clock_jumps = true;
  o.store_faults.restarts = true;
  for (std::uint64_t seed : {1u, 2u, 3u, 1234u}) {
    seeded_source s1(seed);
    seeded_source s2(seed);
    const run_result a = run_schedule(s1, o);
    const run_result b = run_schedule(s2, o);
    REQUIRE(a.log.events.size() > 10);
    REQUIRE(to_string(a.log) == to_string(b.log));
    REQUIRE(a.result.report() == b.result.report());
  }
  seeded_source x(1);
  seeded_source y(2);
  REQUIRE(to_string(run_schedule(x, o).log) != to_string(run_schedule(y, o).log));
}

TEST_CASE("simulator: a run recorded from the PRNG replays from its bytes", "[testing/simulator]") {
  seeded_source prng(77);
  recording_source rec(prng);
  const run_result original = run_schedule(rec);
  const std::vector<std::uint8_t> bytes = rec.to_bytes();
  byte_source replay(bytes.data(), bytes.size());
  const run_result again = run_schedule(replay);
  REQUIRE(to_string(again.log) == to_string(original.log));
}

TEST_CASE("simulator: clocks run at their own rate and jump; sleeping is virtual",
          "[testing/simulator]") {
  seeded_source src(1);
  simulator sim(src, no_faults());
  const node_id fast = sim.add_client("fast");
  const node_id slow = sim.add_client("slow");
  REQUIRE(sim.log().s4_until_ns == std::numeric_limits<std::int64_t>::max());
  sim.set_skew_ppm(fast, 10000);        // 1% fast
  sim.set_skew_ppm(slow, -10000);       // 1% slow
  REQUIRE(sim.log().s4_until_ns == 0);  // 2% apart: beyond a 1% bound, S4 is not promised
  std::int64_t fast_woke = 0;
  std::int64_t slow_woke = 0;
  sim.spawn(fast, [&] {
    const sim_clock c = sim.clock(fast);
    c.sleep_until(c.now() + 1010ms);  // 1.01 s on a clock 1% fast: 1 s of true time
    fast_woke = sim.now_ns();
  });
  sim.spawn(slow, [&] {
    const sim_clock c = sim.clock(slow);
    c.sleep_until(c.now() + 990ms);
    slow_woke = sim.now_ns();
  });
  sim.run();
  REQUIRE(fast_woke == 1000 * ms);
  REQUIRE(slow_woke == 1000 * ms);

  seeded_source src2(1);
  simulator exact(src2, no_faults());
  const node_id n = exact.add_client("n");
  exact.advance(3000 * ms);
  const std::int64_t before = exact.local_ns(n);
  exact.jump_clock(n, -5000 * ms);
  REQUIRE(exact.local_ns(n) == before - 5000 * ms);
  REQUIRE(exact.log().s4_until_ns == 3000 * ms);  // a jump ends the S4 promise from then on
  REQUIRE(exact.log().events.back().kind == event_kind::clock_jump);
  exact.advance(1000 * ms);
  REQUIRE(exact.local_ns(n) == before - 4000 * ms);  // and the clock runs on from there
}

TEST_CASE("simulator: drift within the bound keeps any two clocks within `drift` of each other",
          "[testing/simulator]") {
  const std::int32_t e = simulator::drift_ppm_bound(0.01);
  const double ratio = (1.0 + e / 1e6) / (1.0 - e / 1e6);
  REQUIRE(ratio <= 1.0 / (1.0 - 0.01));
  REQUIRE(e > 5000);
  REQUIRE(simulator::drift_ppm_bound(0.0) == 0);
}

TEST_CASE("simulator: clients interleave inside the shipped blocking acquire",
          "[testing/simulator]") {
  seeded_source src(1);
  simulator sim(src, no_faults());
  sim_store<mstore> store(sim, "store", make_memory, no_store_faults());
  sim.log().primary_store = store.node();
  const node_id a = sim.add_client("A");
  const node_id b = sim.add_client("B");
  std::optional<holdfast::fencing_token> a_token;
  std::optional<holdfast::fencing_token> b_token;
  std::int64_t b_acquired_at = -1;
  sim.spawn(a, [&] {
    auto l = holdfast::try_acquire(store, "orders", 10000ms, opts_for(sim, a, "A"));
    REQUIRE(l);
    a_token = l->token();
    sim.clock(a).sleep_until(sim.clock(a).now() + 400ms);
    REQUIRE(l->release());
  });
  sim.spawn(b, [&] {
    sim.clock(b).sleep_until(sim.clock(b).now() + 1ms);  // A first
    // Blocks in holdfast::acquire (backoff sleeps on the simulated clock) until A releases.
    auto l = holdfast::acquire(store, "orders", 10000ms, 60s, opts_for(sim, b, "B"));
    REQUIRE(l);
    b_token = l->token();
    b_acquired_at = sim.now_ns();
  });
  sim.run();
  REQUIRE(a_token);
  REQUIRE(b_token);
  REQUIRE(*a_token < *b_token);
  REQUIRE(b_acquired_at >= 400 * ms);
  REQUIRE(b_acquired_at < 10000 * ms);  // before A's TTL ran out: woken by A's release
  REQUIRE(check(sim.log()).ok());
}

TEST_CASE("sim_store: a lost reply is applied at the store and an error at the client",
          "[testing/simulator]") {
  last_option_source src;
  store_fault_options f = no_store_faults();
  f.lost_replies = true;
  one_call run(src, f, 10000ms);
  REQUIRE(run.seen == holdfast::errc::timeout);
  const event& e = run.sim.log().events.at(0);
  REQUIRE(e.kind == event_kind::store_acquire);
  REQUIRE(e.outcome == 0);  // applied: the store granted
  REQUIRE(e.token == 1);
  REQUIRE(e.seen == static_cast<outcome_code>(holdfast::errc::timeout));
  REQUIRE(e.note == fault_note::reply_lost);
  REQUIRE(run.sim.now_ns() == 1500 * ms);  // the client waited for its reply, 1.5 scale
  auto rec = run.store.inner().inspect("orders");
  REQUIRE(rec);
  REQUIRE(rec->has_value());
  REQUIRE((*rec)->owner == "A");
}

TEST_CASE("sim_store: errors before applying change nothing; after applying they change the store",
          "[testing/simulator]") {
  SECTION("before") {
    last_option_source src;
    store_fault_options f = no_store_faults();
    f.errors = true;  // request side: error before applying (last option); reply side too
    one_call run(src, f, 1000ms);
    REQUIRE(run.seen == holdfast::errc::store_unavailable);
    REQUIRE(run.sim.log().events.at(0).outcome == not_applied);
    REQUIRE(run.store.inner().last_token().is_none());
  }
  SECTION("after") {
    // Request delivered (answer 0), then the reply side's last option (40 of 41): error after
    // applying.
    const std::uint8_t bytes[] = {0, 40};
    byte_source src(bytes, sizeof bytes);
    store_fault_options f = no_store_faults();
    f.errors = true;
    one_call run(src, f, 1000ms);
    REQUIRE(run.seen == holdfast::errc::store_unavailable);
    REQUIRE(run.sim.log().events.at(0).outcome == 0);
    REQUIRE(run.sim.log().events.at(0).note == fault_note::error_after);
    REQUIRE(run.store.inner().last_token().value() == 1);
  }
}

TEST_CASE("sim_store: a durable store's restart is an outage that keeps its state",
          "[testing/simulator]") {
  last_option_source src;
  simulator sim(src, no_faults());
  store_fault_options f = no_store_faults();
  f.restarts = true;
  sim_store<mstore> store(sim, "store", make_memory, f);
  int restarts = 0;
  store.on_restart([&](std::unique_ptr<mstore>&) { ++restarts; });
  REQUIRE(store.try_acquire("orders", "X", 100000ms));  // outside any client: no faults
  const node_id a = sim.add_client("A");
  std::error_code during;
  std::error_code after;
  sim.spawn(a, [&] {
    during = store.try_acquire("orders", "A", 1000ms).error();  // takes the store down
    sim.clock(a).sleep_until(sim.clock(a).now() + 5s);
    after = store.try_acquire("orders", "A", 1000ms).error();  // down again, but back first
  });
  sim.run();
  REQUIRE(during == holdfast::errc::store_unavailable);
  REQUIRE(restarts == 1);
  REQUIRE(after == holdfast::errc::store_unavailable);  // the last option downs it again
  bool saw_down = false;
  bool saw_up = false;
  for (const event& e : sim.log().events) {
    saw_down = saw_down || e.kind == event_kind::store_down;
    saw_up = saw_up || e.kind == event_kind::store_up;
  }
  REQUIRE(saw_down);
  REQUIRE(saw_up);
  auto rec = store.inner().inspect("orders");  // X's lease survived both restarts
  REQUIRE(rec);
  REQUIRE(rec->has_value());
  REQUIRE((*rec)->owner == "X");
}

TEST_CASE("sim_store: a shared restart budget lets only that many restarts run on_restart",
          "[testing/simulator]") {
  last_option_source src;  // every request takes its store down
  simulator sim(src, no_faults());
  store_fault_options f = no_store_faults();
  f.restarts = true;
  restart_budget budget{1};
  sim_store<mstore> m1(sim, "m1", make_memory, f);
  sim_store<mstore> m2(sim, "m2", make_memory, f);
  int emptied1 = 0;
  int emptied2 = 0;
  m1.on_restart(
      [&](std::unique_ptr<mstore>& s) {
        s = make_memory(m1.clock());  // comes back empty
        ++emptied1;
      },
      &budget);
  m2.on_restart(
      [&](std::unique_ptr<mstore>& s) {
        s = make_memory(m2.clock());  // comes back empty
        ++emptied2;
      },
      &budget);
  REQUIRE(m1.try_acquire("orders", "X", 100000ms));  // outside any client: no faults
  REQUIRE(m2.try_acquire("orders", "X", 100000ms));
  const node_id a = sim.add_client("A");
  sim.spawn(a, [&] {
    (void)m1.try_acquire("orders", "A", 1000ms);  // down: takes the budget's one restart
    (void)m2.try_acquire("orders", "A", 1000ms);  // down: none left, keeps its state
    sim.clock(a).sleep_until(sim.clock(a).now() + 5s);
    (void)m2.try_acquire("orders", "A", 1000ms);  // back (state kept), then down again
    (void)m1.try_acquire("orders", "A", 1000ms);  // back empty, then down again
    sim.clock(a).sleep_until(sim.clock(a).now() + 5s);
    (void)m1.try_acquire("orders", "A", 1000ms);  // back again: the budget is spent
  });
  sim.run();
  REQUIRE(budget.left == 0);
  REQUIRE(emptied1 == 1);
  REQUIRE(emptied2 == 0);
  auto rec1 = m1.inner().inspect("orders");
  auto rec2 = m2.inner().inspect("orders");
  REQUIRE(rec1);
  REQUIRE(rec2);
  REQUIRE_FALSE(rec1->has_value());  // m1 came back empty
  REQUIRE(m1.inner().last_token().is_none());
  REQUIRE(rec2->has_value());  // m2's restart kept X's lease
  REQUIRE((*rec2)->owner == "X");
}

TEST_CASE("sim_store: delay_weight sets how often requests and replies are delayed",
          "[testing/simulator]") {
  const auto delayed = [](std::uint32_t weight) {
    std::size_t n = 0;
    for (std::uint64_t seed = 1; seed <= 20; ++seed) {
      run_options o;
      o.store_faults.delay_weight = weight;
      seeded_source src(seed);
      const run_result r = run_schedule(src, o);
      REQUIRE(r.result.ok());
      for (const event& e : r.log.events) {
        n += e.note == fault_note::request_delayed || e.note == fault_note::reply_delayed ? 1 : 0;
      }
    }
    return n;
  };
  const std::size_t none = delayed(0);
  const std::size_t some = delayed(10);
  const std::size_t many = delayed(40);
  CHECK(none == 0);
  CHECK(some > 0);
  CHECK(many > some);
}

TEST_CASE("simulator: a crashed client's calls drain without reaching the store",
          "[testing/simulator]") {
  seeded_source src(1);
  simulator sim(src, no_faults());
  sim_store<mstore> store(sim, "store", make_memory, no_store_faults());
  sim.log().primary_store = store.node();
  const node_id a = sim.add_client("A");
  const node_id b = sim.add_client("B");
  std::size_t store_events_after_crash = 0;
  std::error_code renew_after_crash;
  std::int64_t b_acquired_at = -1;
  sim.spawn(a, [&] {
    auto l = holdfast::try_acquire(store, "orders", 1000ms, opts_for(sim, a, "A"));
    REQUIRE(l);
    sim.crash_current();
    REQUIRE(sim.current_crashed());
    const std::size_t before = sim.log().events.size();
    renew_after_crash = l->renew().error();  // the dead process's clock raced past validity
    (void)l->release();                      // fails at once: nothing is sent
    store_events_after_crash = sim.log().events.size() - before;
    // The handle's destructor would release too: nothing reaches the store either.
  });
  sim.spawn(b, [&] {
    sim.clock(b).sleep_until(sim.clock(b).now() + 1ms);  // A first
    auto l = holdfast::acquire(store, "orders", 1000ms, 5s, opts_for(sim, b, "B"));
    REQUIRE(l);
    b_acquired_at = sim.now_ns();
  });
  sim.run();
  REQUIRE(renew_after_crash == holdfast::errc::lease_lost);
  REQUIRE(store_events_after_crash == 0);
  REQUIRE(b_acquired_at >= 1000 * ms);  // B had to wait for A's TTL: A never released
  REQUIRE(check(sim.log()).ok());
}

TEST_CASE("simulator: a store's exception reaches run() after every client finished",
          "[testing/simulator]") {
  struct throwing_store {
    holdfast::result<holdfast::grant> try_acquire(std::string_view, std::string_view,
                                                  std::chrono::milliseconds) {
      throw std::runtime_error("store exploded");
    }
    holdfast::result<holdfast::grant> renew(std::string_view, std::string_view,
                                            holdfast::fencing_token, std::chrono::milliseconds) {
      return holdfast::errc::lease_lost;
    }
    holdfast::result<void> release(std::string_view, std::string_view, holdfast::fencing_token) {
      return {};
    }
  };
  seeded_source src(1);
  simulator sim(src, no_faults());
  sim_store<throwing_store> store(
      sim, "store", [] { return throwing_store{}; }, no_store_faults());
  const node_id a = sim.add_client("A");
  const node_id b = sim.add_client("B");
  bool b_finished = false;
  sim.spawn(a, [&] { (void)store.try_acquire("orders", "A", 1000ms); });
  sim.spawn(b, [&] {
    sim.clock(b).sleep_until(sim.clock(b).now() + 1s);
    b_finished = true;
  });
  REQUIRE_THROWS_WITH(sim.run(), "store exploded");
  REQUIRE(b_finished);  // B was crashed too, and ran to its end
}

TEST_CASE("sim_resource: the shipped fences reject stale tokens; the mutants do not",
          "[testing/simulator]") {
  for (resource_mode mode : {resource_mode::fenced, resource_mode::gate, resource_mode::unfenced,
                             resource_mode::check_then_write, resource_mode::token_only}) {
    seeded_source src(1);
    simulator sim(src, no_faults());
    sim_resource res(sim, 0, mode);
    const node_id a = sim.add_client("A");
    std::vector<bool> admitted;
    sim.spawn(a, [&] {
      for (std::uint64_t t : {5u, 5u, 7u, 6u}) {
        admitted.push_back(res.write(holdfast::fencing_token(t), "A").has_value());
      }
    });
    sim.run();
    INFO(to_string(mode));
    REQUIRE(admitted.size() == 4);
    REQUIRE(admitted[0]);
    REQUIRE(admitted[1]);  // equal tokens: the same holder writes again
    REQUIRE(admitted[2]);
    // 6 after 7 passes only a fence-less resource: check-then-write does check, its race needs
    // an interleaving (the mutant tests show the simulator finds one).
    const bool fenced = mode != resource_mode::unfenced;
    REQUIRE(admitted[3] == !fenced);
    REQUIRE(check(sim.log()).ok() == fenced);
  }
}

TEST_CASE("simulator: the correct stack keeps every invariant under every fault",
          "[testing/simulator]") {
  struct profile {
    const char* name;
    run_options o;
  };
  std::vector<profile> profiles(4);
  profiles[0].name = "faults within the drift bound (S1-S5, L1)";
  profiles[1].name = "clock jumps and drift beyond the bound, durable restarts";
  profiles[1].o.faults.clock_jumps = true;
  profiles[1].o.faults.drift_beyond_bound = true;
  profiles[1].o.store_faults.restarts = true;
  profiles[2].name = "short TTL (50 ms)";
  profiles[2].o.ttl = 50ms;
  profiles[3].name = "long TTL (30 s), four clients";
  profiles[3].o.ttl = 30000ms;
  profiles[3].o.max_clients = 4;
  progress_meter meter("simulator: the correct stack", 4 * 300);
  std::uint64_t all = 0;
  for (std::size_t k = 0; k < profiles.size(); ++k) {
    const profile& p = profiles[k];
    std::uint64_t events = 0;
    for (std::uint64_t seed = 0; seed < 300; ++seed) {
      seeded_source src(seed);
      const run_result r = run_schedule(src, p.o);
      events += r.log.events.size();
      meter.update(k * 300 + seed + 1, all + events, r.result.ok() ? 0 : 1);
      if (!r.result.ok()) {  // HOLDFAST_SVG_DIR: leave a picture for CI's artifacts
        (void)save_counterexample(
            svg_dir_from_env(),
            "simulator-profile" + std::to_string(k) + "-seed-" + std::to_string(seed), r.log,
            r.result);
      }
      INFO(p.name << ", seed " << seed << "\n" << r.result.report());
      REQUIRE(r.result.ok());
    }
    all += events;
    REQUIRE(events > 300 * 20);
  }
}

TEST_CASE("sim_store: quorum members compose (raise_token, empty restarts, unrecorded members)",
          "[testing/simulator]") {
  using member = sim_store<mstore>;
  static_assert(holdfast::has_raise_token_v<member>, "sim_store forwards raise_token");
  static_assert(holdfast::has_raise_token_floor_v<member>, "sim_store forwards raise_token_floor");
  static_assert(holdfast::has_inspect_v<member>, "sim_store forwards inspect");

  seeded_source src(5);
  simulator sim(src, no_faults());
  std::vector<std::unique_ptr<member>> members;
  for (int i = 0; i < 3; ++i) {
    members.push_back(
        std::make_unique<member>(sim, "m" + std::to_string(i), make_memory, no_store_faults()));
  }
  members[2]->record(false);  // its operations see faults but stay out of the history
  const node_id a = sim.add_client("A");
  std::optional<holdfast::fencing_token> token;
  sim.spawn(a, [&] {
    holdfast::quorum_options qo;
    qo.dispatch = holdfast::quorum_dispatch::sequential;
    // Member 0 has issued more tokens than the others: the quorum's grant must raise the rest.
    REQUIRE(members[0]->try_acquire("warmup", "W", 1000ms));
    REQUIRE(members[0]->try_acquire("warmup2", "W", 1000ms));
    holdfast::quorum_store<member, sim_clock> q(
        {members[0].get(), members[1].get(), members[2].get()}, qo, sim.clock(a));
    auto l = holdfast::try_acquire(q, "orders", 1000ms, opts_for(sim, a, "A"));
    REQUIRE(l);
    token = l->token();
    REQUIRE(l->release());
  });
  sim.run();
  REQUIRE(token);
  REQUIRE(token->value() == 3);  // the floor: the max of the members' tokens, raised onto W
  std::size_t raises = 0;
  std::size_t from_m2 = 0;
  for (const event& e : sim.log().events) {
    raises += e.kind == event_kind::store_raise && e.outcome == 0 ? 1 : 0;
    from_m2 += e.node == members[2]->node() ? 1 : 0;
  }
  REQUIRE(raises >= 1);
  REQUIRE(from_m2 == 0);
  const verdict v = check(sim.log());
  INFO(v.report());
  REQUIRE(v.ok());  // member-level S2/S5 accept the raises

  // A restart that loses the state: on_restart replaces the store with a fresh one.
  last_option_source worst;
  simulator sim2(worst, no_faults());
  store_fault_options f = no_store_faults();
  f.restarts = true;
  member m(sim2, "m", make_memory, f);
  m.on_restart([&m](std::unique_ptr<mstore>& s) { s = std::make_unique<mstore>(m.clock()); });
  REQUIRE(m.try_acquire("orders", "X", 1000ms));  // outside a client: no faults; token 1
  const node_id b = sim2.add_client("B");
  sim2.spawn(b, [&] {
    (void)m.try_acquire("orders", "B", 1000ms);  // goes down
    sim2.clock(b).sleep_until(sim2.clock(b).now() + 5s);
    (void)m.try_acquire("orders", "B", 1000ms);  // comes back empty, then goes down again
  });
  sim2.run();
  REQUIRE(m.inner().last_token().is_none());  // the counter was lost with the state
}

}  // namespace test_testing_simulator
