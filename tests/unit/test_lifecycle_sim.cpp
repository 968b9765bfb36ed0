// SPDX-License-Identifier: MIT
// The lease-lifecycle pieces inside the simulator (testing/), judged by its S1-S5 checker:
//
//   - cas_store (stores/cas.hpp) over an in-memory CAS KV passes the whole store conformance kit
//     (contract checks and fault-injected schedules), and the kit reports the adapter over a
//     deliberately broken KV (negative controls);
//   - keepalive (keepalive.hpp): simulated processes whose worker holds a lease kept alive by a
//     keepalive it polls while working (an event loop), working in steps and writing through a
//     fence after checking valid(), under pauses, clock drift, delayed/lost requests and replies
//     and store errors. The
//     checker finds no violation; and it does find one for a worker that trusts its keepalive to
//     tell it about a loss instead of checking valid() on its own clock (the "lease silently
//     expired while its holder kept working" bug), which is the negative control.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "holdfast/keepalive.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/stores/cas.hpp"
#include "holdfast/stores/memory.hpp"
#include "holdfast/testing/testing.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_lifecycle_sim {

using namespace std::chrono_literals;
using holdfast::testing::sim_clock;

namespace {

namespace ht = holdfast::testing;

// ---------------------------------------------------------------------------------------------
// cas_store as a simulated store node

/// A KV for the controls: correct, or broken in one way.
enum class kv_flaw { none, deletes_freed, misses_renewals };

class test_kv {
 public:
  explicit test_kv(kv_flaw f = kv_flaw::none) : flaw_(f) {}

  holdfast::result<holdfast::cas_entry> get(std::string_view key) {
    auto it = map_.find(std::string(key));
    if (it == map_.end()) return holdfast::cas_entry{};
    holdfast::cas_entry e = it->second;
    auto stale = as_granted_.find(it->first);
    if (flaw_ == kv_flaw::misses_renewals && stale != as_granted_.end()) e.value = stale->second;
    return e;
  }

  holdfast::result<bool> compare_and_swap(std::string_view key, std::uint64_t expected,
                                          std::string_view value) {
    const std::string k(key);
    auto it = map_.find(k);
    if ((it == map_.end() ? 0 : it->second.version) != expected) return false;
    const auto rec = holdfast::detail::cas_record::decode(value);
    if (flaw_ == kv_flaw::deletes_freed && rec && !rec->held) {
      map_.erase(k);  // release = delete: the token counter goes with the record
      return true;
    }
    if (flaw_ == kv_flaw::misses_renewals) {
      const auto old =
          it == map_.end() ? std::nullopt : holdfast::detail::cas_record::decode(it->second.value);
      if (rec && rec->held && !(old && old->held && old->token == rec->token)) {
        as_granted_[k] = std::string(value);  // reads show grants, never a renewal
      } else if (!rec || !rec->held) {
        as_granted_.erase(k);
      }
    }
    map_[k] = holdfast::cas_entry{std::string(value), ++last_};
    return true;
  }

 private:
  kv_flaw flaw_;
  std::map<std::string, holdfast::cas_entry> map_;
  std::map<std::string, std::string> as_granted_;
  std::uint64_t last_ = 0;
};

/// The adapter and its KV as one store node: the adapter times sightings on the node's clock.
struct cas_node {
  cas_node(sim_clock clock, kv_flaw flaw) : kv(flaw), store(kv, clock) {}
  test_kv kv;
  holdfast::cas_store<test_kv, sim_clock> store;

  holdfast::result<holdfast::grant> try_acquire(std::string_view k, std::string_view o,
                                                std::chrono::milliseconds t) {
    return store.try_acquire(k, o, t);
  }
  holdfast::result<holdfast::grant> renew(std::string_view k, std::string_view o,
                                          holdfast::fencing_token tok,
                                          std::chrono::milliseconds t) {
    return store.renew(k, o, tok, t);
  }
  holdfast::result<void> release(std::string_view k, std::string_view o,
                                 holdfast::fencing_token tok) {
    return store.release(k, o, tok);
  }
  holdfast::result<std::optional<holdfast::lease_record>> inspect(std::string_view k) const {
    return store.inspect(k);
  }
};

ht::conformance_report check_cas(kv_flaw flaw, std::uint32_t schedules) {
  ht::conformance_options o;
  o.schedules = schedules;
  return ht::check_store([flaw](sim_clock c) { return std::make_unique<cas_node>(c, flaw); }, o);
}

// ---------------------------------------------------------------------------------------------
// keepalive schedules

constexpr std::chrono::milliseconds kTtl{1000};

enum class worker_kind {
  checks_valid,      ///< Checks lease::valid() before every write (the shipped advice).
  trusts_keepalive,  ///< Mutant: believes it holds until its keepalive reports a loss.
};

void record(ht::simulator& sim, ht::event_kind k, ht::node_id n, const std::string& owner,
            std::error_code ec = {}, std::uint64_t token = 0, std::int64_t value = 0) {
  if (sim.current_crashed()) return;
  ht::event e = sim.make_event(k, n);
  e.owner = owner;
  e.token = token;
  e.outcome = ht::to_outcome(ec);
  e.value = value;
  e.ttl_ms = kTtl.count();
  sim.log().add(std::move(e));
}

/// Runs one keepalive schedule from `seed` and returns the checker's verdict.
ht::verdict run_keepalive_schedule(std::uint64_t seed, worker_kind kind) {
  using store_t = ht::sim_store<holdfast::memory_store<sim_clock>>;
  using lease_t = holdfast::lease<store_t, sim_clock>;
  ht::seeded_source src(seed);
  ht::fault_options f;
  f.scale = kTtl;
  f.crashes = false;  // a crash kills a fiber, not its process's keepalive fiber: not modelled
  const holdfast::validity_options validity{};
  f.drift_bound = validity.drift;
  ht::history log;
  {
    ht::simulator sim(src, f);
    sim.log().keys.emplace_back("orders");
    store_t store(sim, "store", [](sim_clock c) {
      return std::make_unique<holdfast::memory_store<sim_clock>>(c);
    });
    sim.log().primary_store = store.node();
    sim.log().tolerance_ns = std::chrono::nanoseconds(1ms).count();
    ht::sim_resource resource(sim, 0, ht::resource_mode::fenced);

    struct process {
      ht::node_id node;
      std::string name;
      std::unique_ptr<holdfast::keepalive<sim_clock>> keepalive;
    };
    std::vector<process> procs(3);
    for (std::size_t i = 0; i < procs.size(); ++i) {
      process& p = procs[i];
      p.name = std::string(1, static_cast<char>('A' + i));
      p.node = sim.add_client(p.name);
      holdfast::keepalive_options ko;
      ko.start_thread = false;  // the simulator's fibers drive it
      ko.retry.initial = kTtl / 50;
      ko.retry.max_delay = kTtl / 4;
      ko.retry.seed = seed * 31 + i;
      p.keepalive = std::make_unique<holdfast::keepalive<sim_clock>>(sim.clock(p.node), ko);
    }
    for (std::size_t i = 0; i < procs.size(); ++i) {
      process& p = procs[i];
      // One fiber per process, polling its keepalive while it works (an event loop): fibers
      // share one thread, and a keepalive renewing a lease holds that lease's operation mutex
      // across the store call, so another fiber of the same thread must not use the lease then.
      sim.spawn(p.node, [&, i] {
        const sim_clock clock = sim.clock(p.node);
        // Works until `until`, in slices of at most a tenth of the TTL, polling the keepalive.
        const auto work_until = [&](sim_clock::time_point until) {
          for (sim_clock::time_point now = clock.now(); now < until; now = clock.now()) {
            const std::optional<sim_clock::time_point> next = p.keepalive->poll();
            sim_clock::time_point wake = std::min(until, now + kTtl / 10);
            if (next && *next < wake) wake = *next;
            clock.sleep_until(wake);
          }
        };
        for (int round = 0; round < 3; ++round) {
          holdfast::acquire_options<sim_clock> opts;
          opts.clock = clock;
          opts.owner = p.name + std::to_string(round);
          opts.validity = validity;
          opts.backoff.initial = kTtl / 50;
          opts.backoff.max_delay = kTtl / 4;
          opts.backoff.seed = seed * 7 + i * 3 + static_cast<std::uint64_t>(round);
          holdfast::result<lease_t> l = holdfast::acquire(store, "orders", kTtl, 3 * kTtl, opts);
          if (!l) {
            record(sim, ht::event_kind::acquire_failed, p.node, opts.owner, l.error());
            continue;
          }
          record(sim, ht::event_kind::acquired, p.node, opts.owner, {}, l->token().value());
          (void)p.keepalive->add(*l);
          const std::uint64_t losses = p.keepalive->stats().losses;
          for (int step = 0; step < 8; ++step) {
            // A step of work: 0.1 to 0.8 TTL, far longer in all than one TTL.
            work_until(clock.now() + kTtl * (1 + (step * 3 + round) % 8) / 10);
            const bool believes = kind == worker_kind::checks_valid
                                      ? l->valid()
                                      : p.keepalive->stats().losses == losses;
            record(sim, ht::event_kind::validity, p.node, opts.owner, {}, l->token().value(),
                   believes ? 1 : 0);
            if (!believes) break;
            (void)resource.write(l->token(), opts.owner);
          }
          const holdfast::result<void> r = l->release();
          record(sim, r ? ht::event_kind::released : ht::event_kind::release_failed, p.node,
                 opts.owner, r.error(), l->token().value());
        }
      });
    }
    sim.run();
    log = std::move(sim.log());
  }
  return ht::check(log);
}

}  // namespace

TEST_CASE("cas_store passes the store conformance kit in the simulator", "[cas][testing]") {
  const ht::conformance_report r = check_cas(kv_flaw::none, 200);
  INFO(r.summary());
  CHECK(r.ok());
  // Left unchecked: real threads (the factory takes a sim_clock) and the counter's ends (the kit
  // cannot start this store's counter near 2^32: conformance_counter.hpp).
  CHECK(r.skipped.size() == 2);
  CHECK_THAT(r.summary(), Catch::Contains("token order across 2^31"));
  CHECK_THAT(r.summary(), Catch::Contains("contention across real threads"));
  CHECK(r.schedules == 200);
}

TEST_CASE("the conformance kit reports cas_store over a KV that deletes freed records",
          "[cas][testing]") {
  const ht::conformance_report r = check_cas(kv_flaw::deletes_freed, 200);
  INFO(r.summary());
  CHECK_FALSE(r.ok());
  CHECK_THAT(r.summary(), Catch::Contains("T1"));
}

TEST_CASE("the conformance kit reports cas_store over a KV whose reads miss renewals",
          "[cas][testing]") {
  const ht::conformance_report r = check_cas(kv_flaw::misses_renewals, 200);
  INFO(r.summary());
  CHECK_FALSE(r.ok());
}

TEST_CASE("keepalive schedules keep S1-S5 under pauses, drift and store faults",
          "[keepalive][testing]") {
  for (std::uint64_t seed = 1; seed <= 500; ++seed) {
    const ht::verdict v = run_keepalive_schedule(seed, worker_kind::checks_valid);
    INFO("seed " << seed << "\n" << v.report());
    REQUIRE(v.ok());
  }
}

TEST_CASE("a worker trusting its keepalive instead of valid() is caught (control)",
          "[keepalive][testing]") {
  std::optional<ht::verdict> caught;
  for (std::uint64_t seed = 1; seed <= 500 && !caught; ++seed) {
    ht::verdict v = run_keepalive_schedule(seed, worker_kind::trusts_keepalive);
    if (!v.ok()) caught = std::move(v);
  }
  REQUIRE(caught);
  INFO(caught->report());
  CHECK(caught->violated == ht::invariant::s4_holder_belief);
}

}  // namespace test_lifecycle_sim
