// SPDX-License-Identifier: MIT
// holdfast/testing/shapes_workload.hpp - the lock shapes (multi_lease.hpp, reentrant.hpp) inside
// the simulator: simulated processes using the shipped acquire_all() and reentrant_holder over
// a memory_store on the simulated network (delays, lost requests and replies, store errors,
// pauses, drift), judged by the checker (S1-S5 on the same history) and by the shapes' own
// properties, with negative controls that must be caught:
//
//   property        | what must hold                                       | negative control
//   ----------------+------------------------------------------------------+--------------------
//   all or nothing  | when acquire_all() fails, its owner holds none of its| multi_keeps_partial
//   (leave nothing  | keys in the store, except a key whose last call by   | (a failure keeps
//   behind)         | that owner failed without an answer (the TTL frees   | what it got)
//                   | it: nothing renews it)                               |
//   progress        | after the faults heal, two processes taking {k0, k1} | multi_unordered
//                   | in opposite orders both succeed within their timeout | (keys in the
//                   | (no deadlock)                                        | caller's order)
//   re-entry held   | after an exit that leaves the count above zero, the  | reentry_releases_
//                   | store still holds the holder's lease while it is     | at_first_exit
//                   | valid on the holder's clock                          |
//   re-entry freed  | after the last exit (every request id released once) | reentry_counts_
//                   | the store does not hold the holder's lease (unless   | retries (a retried
//                   | that release got no answer)                          | request counted)
//   read-write      | rw_workload.hpp's phase: no writer with a live reader| rw_writer_while_
//   (rw_checker.hpp)| or writer; writes only under a writer's token; with  | reader, rw_upgrade_
//                   | lost grants (lossy: drawn from the source), no two   | in_place, rw_admits_
//                   | writers admitted under one token (S1)                | reissued (lossy)
//
// The store here has no atomic multi-key capability (sim_store does not forward one), so
// acquire_all() takes the ordered path, the one whose give-back and lost replies matter; the
// atomic path is memory_store's single critical section (tests/unit/test_multi_lease.cpp).
//
// run_shapes_schedule(src, mutant) is the entry; the seeded search (tests/unit/
// test_shapes_sim.cpp), rapidcheck (tests/property/prop_shapes.cpp) and libFuzzer
// (fuzz/fuzz_multi_lease.cpp) all call it. Thread-safety: one run per thread.
#ifndef HOLDFAST_TESTING_SHAPES_WORKLOAD_HPP
#define HOLDFAST_TESTING_SHAPES_WORKLOAD_HPP

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/lease/detail/multi_acquire.hpp"
#include "holdfast/multi_lease.hpp"
#include "holdfast/reentrant.hpp"
#include "holdfast/stores/memory.hpp"
#include "holdfast/testing/checker.hpp"
#include "holdfast/testing/decision.hpp"
#include "holdfast/testing/history.hpp"
#include "holdfast/testing/resource.hpp"
#include "holdfast/testing/rw_workload.hpp"
#include "holdfast/testing/sim_store.hpp"
#include "holdfast/testing/simulator.hpp"
#include "holdfast/testing/verdict.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace testing {

/// The shapes' negative controls (see the table at the top of shapes_workload.hpp).
enum class shape_mutant : std::uint8_t {
  none,
  multi_unordered,
  multi_keeps_partial,
  reentry_releases_at_first_exit,
  reentry_counts_retries,
  rw_writer_while_reader,
  rw_upgrade_in_place,
  rw_admits_reissued,
};

/// Every shape_mutant but none.
inline constexpr shape_mutant all_shape_mutants[] = {shape_mutant::multi_unordered,
                                                     shape_mutant::multi_keeps_partial,
                                                     shape_mutant::reentry_releases_at_first_exit,
                                                     shape_mutant::reentry_counts_retries,
                                                     shape_mutant::rw_writer_while_reader,
                                                     shape_mutant::rw_upgrade_in_place,
                                                     shape_mutant::rw_admits_reissued};

/// Returns the mutant's name as in the table.
inline const char* to_string(shape_mutant m) noexcept {
  switch (m) {
    case shape_mutant::none:
      return "none";
    case shape_mutant::multi_unordered:
      return "multi_unordered";
    case shape_mutant::multi_keeps_partial:
      return "multi_keeps_partial";
    case shape_mutant::reentry_releases_at_first_exit:
      return "reentry_releases_at_first_exit";
    case shape_mutant::reentry_counts_retries:
      return "reentry_counts_retries";
    case shape_mutant::rw_writer_while_reader:
      return "rw_writer_while_reader";
    case shape_mutant::rw_upgrade_in_place:
      return "rw_upgrade_in_place";
    case shape_mutant::rw_admits_reissued:
      return "rw_admits_reissued";
  }
  return "?";
}

/// Returns the mutant named `s`, or nullopt.
inline std::optional<shape_mutant> shape_mutant_from_string(std::string_view s) noexcept {
  for (shape_mutant m : all_shape_mutants) {
    if (s == to_string(m)) return m;
  }
  if (s == "none") return shape_mutant::none;
  return std::nullopt;
}

/// What one run of the shapes found: the shapes' own first violated property (empty: all hold)
/// and the checker's verdict on the same history.
struct shape_verdict {
  /// "all or nothing", "progress", "re-entry held", "re-entry freed", or a read-write property
  /// (rw_checker.hpp: "read-write exclusion", "read-write tokens", "fenced write order").
  std::string property;
  std::string what;  ///< One sentence.
  verdict base;      ///< S1-S5 on the history.
  /// How many restarts of the read-write phase's store came back from a lagging copy.
  std::uint32_t lost_lives = 0;
  /// Returns true iff every property and invariant holds.
  [[nodiscard]] bool ok() const noexcept { return property.empty() && base.ok(); }
  /// Returns "<property> violated: <what>", the checker's text, or "all hold".
  [[nodiscard]] std::string text() const {
    if (!property.empty()) return property + " violated: " + what + "\n";
    return base.ok() ? std::string("all hold\n") : base.report();
  }
};

namespace detail {

using shapes_inner = memory_store<sim_clock>;

// A LeaseStore in front of the simulated network that remembers, per (owner, key), whether the
// owner's last call ended without an answer (it may or may not have applied).
class tally_store {
 public:
  explicit tally_store(sim_store<shapes_inner>& s) : s_(s) {}
  result<grant> try_acquire(std::string_view k, std::string_view o, std::chrono::milliseconds t) {
    return note(k, o, s_.try_acquire(k, o, t));
  }
  result<grant> renew(std::string_view k, std::string_view o, fencing_token tk,
                      std::chrono::milliseconds t) {
    return note(k, o, s_.renew(k, o, tk, t));
  }
  result<void> release(std::string_view k, std::string_view o, fencing_token tk) {
    return note(k, o, s_.release(k, o, tk));
  }
  // True iff `o`'s last call on `k` may have applied without an answer.
  [[nodiscard]] bool unsure(const std::string& k, const std::string& o) const {
    auto it = unsure_.find({k, o});
    return it != unsure_.end() && it->second;
  }
  // Who holds `k` now by the store's clock (no faults, not recorded); empty: nobody.
  std::string holder(std::string_view k) {
    auto r = s_.inspect(k);
    return r && *r ? (*r)->owner : std::string();
  }

 private:
  template <class R>
  R note(std::string_view k, std::string_view o, R r) {
    unsure_[{std::string(k), std::string(o)}] = !r && holdfast::detail::may_have_applied(r.error());
    return r;
  }
  sim_store<shapes_inner>& s_;
  std::map<std::pair<std::string, std::string>, bool> unsure_;
};

inline constexpr std::chrono::milliseconds shapes_ttl{1000};
inline constexpr std::uint32_t shapes_keys = 3;

inline std::string shapes_key(std::uint32_t k) {
  return "k" + std::to_string(k);
}

struct shapes_world {
  // Every fault, or (calm) only delays: requests and replies in flight, no pauses or losses.
  shapes_world(decision_source& src, bool calm)
      : sim(src, faults(calm)),
        store(
            sim, "store", [](sim_clock c) { return std::make_unique<shapes_inner>(c); },
            store_faults(calm)),
        tally(store) {
    for (std::uint32_t k = 0; k < shapes_keys; ++k) sim.log().keys.push_back(shapes_key(k));
    sim.log().primary_store = store.node();
    sim.log().tolerance_ns = std::chrono::nanoseconds(std::chrono::milliseconds(1)).count();
    for (std::uint32_t k = 0; k < shapes_keys; ++k) {
      resources.push_back(
          std::make_unique<sim_resource>(sim, static_cast<std::uint8_t>(k), resource_mode::fenced));
    }
  }
  static store_fault_options store_faults(bool calm) {
    store_fault_options f;
    f.lost_requests = f.lost_replies = f.errors = !calm;
    return f;
  }
  static fault_options faults(bool calm) {
    fault_options f;
    f.pauses = !calm;
    // Calm delays stay well inside a TTL (up to 1.5 scale each way), so a renewal can land.
    f.scale =
        calm ? std::chrono::nanoseconds(shapes_ttl) / 10 : std::chrono::nanoseconds(shapes_ttl);
    f.crashes = false;  // a crash ends a fiber mid-protocol; the give-back is the client's
    f.drift_bound = validity_options{}.drift;
    f.client_clock_ticks = false;
    return f;
  }
  acquire_options<sim_clock> options(node_id n, std::uint64_t seed, std::string owner) {
    acquire_options<sim_clock> o;
    o.clock = sim.clock(n);
    o.owner = std::move(owner);
    o.backoff.initial = shapes_ttl / 50;
    o.backoff.max_delay = shapes_ttl / 4;
    o.backoff.seed = seed;
    return o;
  }
  void record(event_kind k, node_id n, const std::string& owner, std::uint32_t key,
              std::uint64_t token, std::int64_t value = 0, std::error_code ec = {}) {
    event e = sim.make_event(k, n);
    e.owner = owner;
    e.key = static_cast<std::uint8_t>(key);
    e.token = token;
    e.outcome = to_outcome(ec);
    e.value = value;
    e.ttl_ms = shapes_ttl.count();
    sim.log().add(std::move(e));
  }
  void violate(const char* property, std::string what) {
    if (!found.empty()) return;
    found = property;
    found_what = std::move(what);
  }

  simulator sim;
  sim_store<shapes_inner> store;
  tally_store tally;
  std::vector<std::unique_ptr<sim_resource>> resources;
  std::string found;
  std::string found_what;
};

inline std::uint32_t key_index(const std::string& k) {
  return static_cast<std::uint32_t>(std::stoul(k.substr(1)));
}

// One acquire_all() as the shipped code or a control does it.
inline result<multi_lease<tally_store, sim_clock>> shapes_acquire_all(
    shapes_world& w, std::vector<std::string> keys, std::chrono::nanoseconds timeout,
    const acquire_options<sim_clock>& o, shape_mutant m,
    std::vector<std::vector<lease<tally_store, sim_clock>>>& kept) {
  using holdfast::detail::multi_mutation;
  holdfast::detail::multi_control<tally_store, sim_clock> ctl;
  ctl.mutation = m == shape_mutant::multi_unordered       ? multi_mutation::unordered
                 : m == shape_mutant::multi_keeps_partial ? multi_mutation::keeps_partial
                                                          : multi_mutation::none;
  result<holdfast::detail::multi_request> req =
      holdfast::detail::prepare_multi(std::move(keys), shapes_ttl, o, ctl.mutation);
  if (!req) return req.error();
  auto got = holdfast::detail::wait_all(w.tally, *req,
                                        holdfast::detail::budget_of<sim_clock>(timeout), o, &ctl);
  kept.push_back(std::move(ctl.kept));
  if (!got) return got.error();
  return multi_lease<tally_store, sim_clock>(std::move(*got));
}

// Holds `m` for `slices` tenths of a TTL, renewing when due and writing each key's resource with
// its token while the set is valid.
inline void shapes_hold(shapes_world& w, node_id n, multi_lease<tally_store, sim_clock>& m,
                        int slices) {
  const sim_clock clock = w.sim.clock(n);
  for (int s = 0; s < slices; ++s) {
    clock.sleep_until(clock.now() + shapes_ttl / 10);
    if (!(clock.now() < m.renew_due_at())) (void)m.renew();
    for (std::size_t i = 0; i < m.size(); ++i) {
      const auto& l = m.leases()[i];
      const bool believes = m.valid(l.key());  // recorded at once: no point between
      w.record(event_kind::validity, n, l.owner(), key_index(l.key()), l.token().value(),
               believes ? 1 : 0);
      if (!believes) return;
      (void)w.resources[key_index(l.key())]->write(l.token(), l.owner());
    }
  }
}

using kept_leases = std::vector<std::vector<lease<tally_store, sim_clock>>>;

// A process taking random key sets (2 or 3 of the 3 keys, any order) under every fault; checks
// "all or nothing" whenever an attempt fails.
inline void multi_process(shapes_world& w, node_id n, const std::string& name, shape_mutant m,
                          kept_leases& kept) {
  for (std::uint32_t round = 0; round < 3; ++round) {
    const std::uint32_t size = 2 + w.sim.decide(2);
    const std::uint32_t start = w.sim.decide(shapes_keys);
    const bool down = w.sim.decide(2) == 1;
    std::vector<std::string> keys;
    for (std::uint32_t j = 0; j < size; ++j) {
      keys.push_back(shapes_key((start + (down ? shapes_keys - j : j)) % shapes_keys));
    }
    const std::string owner = name + std::to_string(round);
    const acquire_options<sim_clock> o = w.options(n, n * 131 + round, owner);
    auto r = shapes_acquire_all(w, keys, 3 * shapes_ttl, o, m, kept);
    if (!r) {
      w.record(event_kind::acquire_failed, n, owner, 0, 0, 0, r.error());
      for (const std::string& k : keys) {
        if (w.tally.holder(k) == owner && !w.tally.unsure(k, owner)) {
          std::string why = owner;
          why += "'s acquire_all failed (";
          why += r.error().message();
          why += ") and it still holds ";
          why += k;
          w.violate("all or nothing", why);
        }
      }
      continue;
    }
    for (const auto& l : r->leases()) {
      w.record(event_kind::acquired, n, owner, key_index(l.key()), l.token().value());
    }
    shapes_hold(w, n, *r, 1 + static_cast<int>(w.sim.decide(4)));
    for (const auto& l : r->leases()) {
      w.record(event_kind::released, n, owner, key_index(l.key()), l.token().value());
    }
    (void)r->release();
  }
}

// With only delays (no pauses, losses or errors): takes {k0, k1} in the order given, three times;
// each must succeed.
inline void progress_process(shapes_world& w, node_id n, const std::string& name, bool reverse,
                             shape_mutant m, kept_leases& kept) {
  for (std::uint32_t round = 0; round < 3; ++round) {
    const std::string owner = name + "p" + std::to_string(round);
    std::vector<std::string> keys{shapes_key(0), shapes_key(1)};
    if (reverse) std::swap(keys[0], keys[1]);
    auto r =
        shapes_acquire_all(w, keys, 8 * shapes_ttl, w.options(n, n * 17 + round, owner), m, kept);
    if (!r) {
      w.violate("progress", owner + "'s acquire_all of {" + keys[0] + ", " + keys[1] +
                                "} failed with only delays injected: " + r.error().message());
      return;
    }
    shapes_hold(w, n, *r, 3);
    (void)r->release();
  }
}

// A process entering "k2" twice (request ids a and b, with a retried "a" now and then), exiting
// b, then a; checks "re-entry held" after the inner exit and "re-entry freed" after the last.
inline void reentry_process(shapes_world& w, node_id n, const std::string& name, shape_mutant m) {
  const std::string key = shapes_key(2);
  const sim_clock clock = w.sim.clock(n);
  for (std::uint32_t round = 0; round < 3; ++round) {
    const std::string owner = name + "r" + std::to_string(round);
    reentrant_holder<tally_store, sim_clock> h(w.tally, w.options(n, n * 7 + round, owner));
    if (m == shape_mutant::reentry_releases_at_first_exit) {
      holdfast::detail::reentry_access::mutate(
          h, holdfast::detail::reentry_mutation::releases_at_first_exit);
    } else if (m == shape_mutant::reentry_counts_retries) {
      holdfast::detail::reentry_access::mutate(h,
                                               holdfast::detail::reentry_mutation::counts_retries);
    }
    result<fencing_token> t = h.acquire(key, shapes_ttl, 3 * shapes_ttl, "a");
    if (!t) continue;
    w.record(event_kind::acquired, n, owner, 2, t->value());
    if (w.sim.decide(2) == 1) (void)h.try_acquire(key, shapes_ttl, "a");  // the caller's retry
    if (h.try_acquire(key, shapes_ttl, "b")) {
      clock.sleep_until(clock.now() + shapes_ttl / 10);
      const bool was_valid = h.valid(key);  // the shipped exit of b makes no store call after it
      (void)h.release(key, "b");
      if (was_valid && w.tally.holder(key) != owner && !w.tally.unsure(key, owner)) {
        std::string why = owner;
        why += " left one of two entries of ";
        why += key;
        why += " and the store no longer holds its lease";
        w.violate("re-entry held", why);
      }
    }
    const bool believes = h.valid(key);
    w.record(event_kind::validity, n, owner, 2, t->value(), believes ? 1 : 0);
    if (believes) (void)w.resources[2]->write(*t, owner);
    (void)h.release(key, "a");
    w.record(event_kind::released, n, owner, 2, t->value());
    if (w.tally.holder(key) == owner && !w.tally.unsure(key, owner)) {
      std::string why = owner;
      why += " left every entry of ";
      why += key;
      why += " and the store still holds its lease";
      w.violate("re-entry freed", why);
    }
  }
}

}  // namespace detail

/// Runs one schedule of the shapes drawn from `src` (see the overview), with the negative
/// control `m` (none: the shipped code): the read-write phase (run_rw_schedule; for none and the
/// rw_ controls, which run it alone; its first decision says whether the store restarts from
/// lagging copies, losing grants, which rw_admits_reissued always does), three multi-key
/// processes and two re-entrant ones under every fault, then, healed, two processes taking
/// {k0, k1} in opposite orders. Returns the shapes' first violated property and the checker's
/// verdict on the history.
inline shape_verdict run_shapes_schedule(decision_source& src,
                                         shape_mutant m = shape_mutant::none) {
  shape_verdict out;
  const bool rw = m == shape_mutant::rw_writer_while_reader ||
                  m == shape_mutant::rw_upgrade_in_place || m == shape_mutant::rw_admits_reissued;
  if (rw || m == shape_mutant::none) {  // the read-write phase: its own world (rw_workload.hpp)
    // Lost grants only matter to the fence's equal-token rule: that control always has them.
    const bool lossy = m == shape_mutant::rw_admits_reissued || src.choose(2) == 1;
    const rw_verdict v =
        run_rw_schedule(src,
                        m == shape_mutant::rw_writer_while_reader ? rw_mutation::writer_while_reader
                        : m == shape_mutant::rw_upgrade_in_place  ? rw_mutation::upgrade_in_place
                        : m == shape_mutant::rw_admits_reissued   ? rw_mutation::admits_reissued
                                                                  : rw_mutation::none,
                        lossy);
    out.property = v.rw.property;
    out.what = v.rw.what;
    out.base = v.base;
    out.lost_lives = v.lost_lives;
    if (rw || !out.ok()) return out;
  }
  history log;
  {
    detail::kept_leases kept;  // the keeps_partial control's leases: destroyed after the run
    detail::shapes_world w(src, false);
    for (int i = 0; i < 3; ++i) {
      const std::string name(1, static_cast<char>('A' + i));
      const node_id n = w.sim.add_client(name);
      w.sim.spawn(n, [&w, n, name, m, &kept] { detail::multi_process(w, n, name, m, kept); });
    }
    for (int i = 0; i < 2; ++i) {
      const std::string name(1, static_cast<char>('R' + i));
      const node_id n = w.sim.add_client(name);
      w.sim.spawn(n, [&w, n, name, m] { detail::reentry_process(w, n, name, m); });
    }
    w.sim.run();
    out.property = w.found;
    out.what = w.found_what;
    kept.clear();
    log = std::move(w.sim.log());
  }
  out.base = check(log);
  if (!out.ok()) return out;
  {
    detail::kept_leases kept;
    detail::shapes_world w(src, true);  // progress: only delays, so a timeout is a deadlock
    for (int i = 0; i < 2; ++i) {
      const std::string name(1, static_cast<char>('X' + i));
      const node_id n = w.sim.add_client(name);
      w.sim.spawn(
          n, [&w, n, name, i, m, &kept] { detail::progress_process(w, n, name, i == 1, m, kept); });
    }
    w.sim.run();
    out.property = w.found;
    out.what = w.found_what;
    kept.clear();
    log = std::move(w.sim.log());
  }
  out.base = check(log);
  return out;
}

}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_SHAPES_WORKLOAD_HPP
