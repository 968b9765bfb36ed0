// SPDX-License-Identifier: MIT
// holdfast/testing/workload_quorum.hpp - the shipped quorum_store (quorum.hpp) inside the
// simulator, over 3 or 5 simulated members, driven by the lease workload generator
// (workload_plan.hpp) and judged by the checker, with negative controls that must be caught:
//
//   control                | the bug                                         | caught by
//   -----------------------+-------------------------------------------------+-----------
//   keeps_unsure_member    | quorum_options::give_back_unsure = false: a     | O1
//                          | member whose reply was lost keeps the owner's   |
//                          | lease until its TTL (the kind of redlock-rb #76)|
//   counts_failed_raise    | a lagging member whose raise (the second round, | S2 or S3
//                          | raise_token) fails is counted as raised: the    | (in its own
//                          | quorum reports a lease fewer than W members hold| set-up)
//   gives_back_live_grant  | quorum_options::keep_live_grant = false: a      | S3 or S4
//                          | failed re-acquire by a live holder releases its | (set-up with
//                          | own lease on the members it is unsure of, and a | re-acquires)
//                          | second owner is granted within its validity     |
//
// gives_back_live_grant is caught in a set-up with re-acquires by live holders
// (quorum_sim_options::reacquires, op_kind::reacquire): the plain schedules never re-acquire a
// lease they hold, so they cannot meet it.
//
// counts_failed_raise is caught in a set-up aimed at it (run_quorum_control): members often down
// for a while and every raise lost on the way. In the plain schedules a failed raise seldom
// matters (S3 once in 300 seeds with 5 members, f = 2, empty restarts; never with 3 members).
//
// The set-up, per schedule:
//   members    N sim_store<quorum_member_store>: each on its own simulated node and clock
//              (per-member drift), with request/reply delays, lost requests, lost replies
//              (applied, then an error), errors, and optionally restarts: durable (state kept)
//              or EMPTY (counter and records lost; a shared restart_budget bounds how many
//              members may do so per run). Recorded (each member a store the checker judges,
//              so O1 sees a member left holding a lease) when quorum_sim_options::record_members.
//   clients    each simulated client has its own quorum_store (as each process would),
//              sequential dispatch, on the client's own clock, which may be coarse: every clock
//              read inside the quorum is a point where the simulator may pause or crash it.
//   recording  a sim_store with faults off wraps the clients' quorums and records the
//              quorum-level operations; it is the primary store the checker judges S2-S5 and L1
//              on, and the resources (fenced) give S1. A quorum lease has no single clock, so the
//              recorder reports each grant or renewal as ending where the quorum's validity does:
//              where the client's clock reads the operation's first member request plus
//              ttl*(1-drift) - margin (quorum_front::validity_end; the quorum reads its start
//              before that send, and members apply it after), converted to the recorder's clock.
//              It places a grant where the quorum reported it and a renewal or release where it
//              was sent. A re-acquire by an owner whose reported grant is live as recorded is
//              placed where the W-th member's grant arrived (members hold the owner's lease from
//              then on: a renewal by another name). That the same owner may get its grant's
//              token again only inside this validity is what S2 then judges. A release the quorum
//              could not confirm is recorded as applied (the client still sees its error; sim_store
//              does so for a lost reply) if after it fewer than W members could release the lease
//              (a record of the owner under the token the quorum sends, live OR EXPIRED:
//              memory_store releases an expired record nobody took over), or if it shortened how
//              long W members keep the key from others (a crash or a 1 ms give-back cut it short);
//              then a second release of it is recorded as not applied. A release that did neither
//              may still be finished by the owner's next failed try_acquire, whose give-back (issue
//              22) releases the owner's records on the members it is unsure of: if that shortens
//              how long W members keep the key, the release is recorded as applied after all (where
//              it was sent, the only place the history has for it). The recorder and the
//              member links are detail/quorum_front.hpp; the quorum's member records
//              (quorum_member_store) are detail/quorum_member_store.hpp.
//
// run_quorum_schedule(src, options) is the entry; the seeded search (tests/unit/
// test_quorum_sim.cpp), rapidcheck (tests/property/prop_quorum.cpp) and libFuzzer
// (fuzz/fuzz_quorum_schedule.cpp, through run_quorum_control()) call it.
// Thread-safety: one run per thread.
#ifndef HOLDFAST_TESTING_WORKLOAD_QUORUM_HPP
#define HOLDFAST_TESTING_WORKLOAD_QUORUM_HPP

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "holdfast/clock.hpp"
#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/observer.hpp"
#include "holdfast/quorum.hpp"
#include "holdfast/result.hpp"
#include "holdfast/store.hpp"
#include "holdfast/stores/memory.hpp"
#include "holdfast/testing/checker.hpp"
#include "holdfast/testing/decision.hpp"
#include "holdfast/testing/detail/quorum_front.hpp"
#include "holdfast/testing/detail/quorum_member_store.hpp"
#include "holdfast/testing/detail/schedule_runner.hpp"
#include "holdfast/testing/history.hpp"
#include "holdfast/testing/sim_store.hpp"
#include "holdfast/testing/simulator.hpp"
#include "holdfast/testing/workload.hpp"
#include "holdfast/testing/workload_plan.hpp"
#include "holdfast/validity.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace testing {

/// The quorum's negative controls (see the table at the top of workload_quorum.hpp).
enum class quorum_mutant : std::uint8_t {
  none,
  keeps_unsure_member,    ///< quorum_options::give_back_unsure = false.
  counts_failed_raise,    ///< A member's failed raise_token answers as raised.
  gives_back_live_grant,  ///< quorum_options::keep_live_grant = false.
};

/// Every quorum_mutant but none.
inline constexpr quorum_mutant all_quorum_mutants[] = {quorum_mutant::keeps_unsure_member,
                                                       quorum_mutant::counts_failed_raise,
                                                       quorum_mutant::gives_back_live_grant};

/// Returns the control's name as in the table ("none" for none).
inline const char* to_string(quorum_mutant m) noexcept {
  switch (m) {
    case quorum_mutant::none:
      return "none";
    case quorum_mutant::keeps_unsure_member:
      return "keeps_unsure_member";
    case quorum_mutant::counts_failed_raise:
      return "counts_failed_raise";
    case quorum_mutant::gives_back_live_grant:
      return "gives_back_live_grant";
  }
  return "?";
}

/// Returns the control named `s` ("none" included), or nullopt.
inline std::optional<quorum_mutant> quorum_mutant_from_string(std::string_view s) noexcept {
  for (quorum_mutant m :
       {quorum_mutant::none, quorum_mutant::keeps_unsure_member, quorum_mutant::counts_failed_raise,
        quorum_mutant::gives_back_live_grant}) {
    if (s == to_string(m)) return m;
  }
  return std::nullopt;
}

/// How simulated members restart: not at all, keeping their state, or empty.
enum class quorum_restarts : std::uint8_t { none, durable, empty };

// quorum_sim_member (a quorum member on the simulated network) is in detail/quorum_front.hpp.

/// One quorum schedule's set-up.
struct quorum_sim_options {
  std::size_t members = 5;
  quorum_token_mode mode = quorum_token_mode::floor;
  std::size_t empty_restarts_tolerated = 0;  ///< quorum_options::empty_restarts
  quorum_restarts restarts = quorum_restarts::none;
  int empty_restart_budget = 0;  ///< Members that may restart empty, per run.
  /// Record the members' own operations too (each member a store node the checker judges), so
  /// O1 sees a member left holding a lease the quorum did not report (issue 22).
  bool record_members = false;
  /// Take members down often (durable restarts, weight 6 against 40: down for 0.1, 0.5 or 2 TTL)
  /// and lose every raise on the way until faults heal (detail::quorum_member_link): the set-up
  /// counts_failed_raise is caught in (with run_quorum_control's longer one-key workload).
  bool outages = false;
  /// Holders also re-acquire their own live leases (run_options::reacquires): the set-up
  /// gives_back_live_grant is caught in. Off by default, so the other set-ups draw what they drew.
  bool reacquires = false;
  quorum_mutant mutation = quorum_mutant::none;
};

/// What one quorum schedule did.
struct quorum_run {
  run_result run;
  int empty_restarts = 0;  ///< How many members did restart empty.
};

namespace detail {

// The members' faults: all of them, restarts as `restarts` says, and delays a little rarer than
// sim_store's default (weight 6 against 40, not 10): the rate these schedules were written with.
// With `outages`, members go down for a while often (durable restarts at weight 6).
inline store_fault_options quorum_member_faults(quorum_restarts restarts, bool outages = false) {
  store_fault_options f;
  f.restarts = restarts != quorum_restarts::none || outages;
  if (outages) f.restart_weight = 6;
  f.delay_weight = 6;
  return f;
}

// Adds q.members simulated members to `sim`, restarting as q says (empty restarts counted in
// `empty_restarts`, bounded by `budget`).
inline std::vector<std::unique_ptr<quorum_sim_member>> make_quorum_members(
    simulator& sim, const quorum_sim_options& q, restart_budget& budget, int& empty_restarts) {
  std::vector<std::unique_ptr<quorum_sim_member>> members;
  for (std::size_t i = 0; i < q.members; ++i) {
    members.push_back(std::make_unique<quorum_sim_member>(
        sim, "m" + std::to_string(i + 1),
        [](sim_clock c) { return std::make_unique<quorum_member_store>(c); },
        quorum_member_faults(q.restarts, q.outages)));
    quorum_sim_member& m = *members.back();
    m.record(q.record_members);  // by default the quorum-level operations alone are judged
    if (q.restarts == quorum_restarts::empty) {
      m.on_restart(
          [&m, &empty_restarts](std::unique_ptr<quorum_member_store>& s) {
            s = std::make_unique<quorum_member_store>(m.clock());  // counter and records gone
            ++empty_restarts;
          },
          &budget);
    }
  }
  return members;
}

// The quorum's options for one schedule.
inline quorum_options quorum_sim_quorum_options(const quorum_sim_options& q, const run_options& o) {
  quorum_options qo;
  qo.dispatch = quorum_dispatch::sequential;
  qo.token_mode = q.mode;
  qo.empty_restarts = q.empty_restarts_tolerated;
  qo.member_timeout = o.ttl;  // the share (10% of the TTL) decides
  qo.validity = o.validity;
  qo.give_back_unsure = q.mutation != quorum_mutant::keeps_unsure_member;
  qo.keep_live_grant = q.mutation != quorum_mutant::gives_back_live_grant;
  return qo;
}

}  // namespace detail

/// Runs one quorum schedule drawn from `src`: the workload (generate_workload(src, o)), then the
/// clients against their quorums of q.members simulated members, then (o.liveness) the L1
/// contenders; returns the history and the checker's verdict. Deterministic in `src`.
inline quorum_run run_quorum_schedule(decision_source& src, const quorum_sim_options& q,
                                      run_options o = {}) {
  if (q.restarts == quorum_restarts::empty) o.max_keys = 1;  // the restart bound is per key
  if (q.reacquires) o.reacquires = true;
  quorum_run out;
  out.run.plan = generate_workload(src, o);
  fault_options f = o.faults;
  f.scale = o.ttl;
  f.drift_bound = o.validity.drift;
  {
    simulator sim(src, f);
    for (std::uint32_t k = 0; k < out.run.plan.keys; ++k) {
      sim.log().keys.emplace_back(detail::key_name(k));
    }
    restart_budget budget{q.empty_restart_budget};
    const std::vector<std::unique_ptr<quorum_sim_member>> members =
        detail::make_quorum_members(sim, q, budget, out.empty_restarts);
    std::vector<quorum_sim_member*> ptrs;
    ptrs.reserve(members.size());
    for (const auto& m : members) ptrs.push_back(m.get());
    const quorum_options qo = detail::quorum_sim_quorum_options(q, o);
    store_fault_options quiet;
    quiet.request_delays = quiet.lost_requests = quiet.reply_delays = quiet.lost_replies = false;
    quiet.errors = quiet.restarts = false;
    sim_store<detail::quorum_front> recorder(
        sim, "quorum",
        [&](sim_clock c) {
          return std::make_unique<detail::quorum_front>(
              sim, c, ptrs, qo, o, q.mutation == quorum_mutant::counts_failed_raise, q.outages);
        },
        quiet);
    recorder.inner().set_recorder(&recorder);
    // A quorum of members on coarse clocks holds a grant like a store on a coarse clock: up to
    // two of the coarsest member's ticks beyond the TTL (store.hpp, T2). The recorder's own
    // clock, which quorum_front measures validity with, reads exactly; its history tick (which
    // the checker and the L1 bound read) is the coarsest member tick.
    std::int64_t tick = 0;
    for (const auto& m : members) tick = std::max(tick, sim.tick_ns(m->node()));
    sim.set_tick(recorder.node(), 0);
    sim.log().ticks.at(recorder.node()) = tick;
    sim.log().primary_store = recorder.node();
    sim.log().tolerance_ns = std::chrono::nanoseconds(o.tolerance).count();
    detail::schedule_runner<detail::quorum_front> runner(sim, recorder, out.run.plan, o);
    runner.run_clients();
    if (o.liveness) runner.run_liveness();
    out.run.log = std::move(sim.log());
    recorder.inner().amend(out.run.log);
  }
  out.run.result = check(out.run.log);
  return out;
}

/// The set-up the controls are caught in (and the fuzz harness fuzzes): three members, each
/// judged too (O1), running `m`; for counts_failed_raise members that are often down, raises
/// that never arrive (quorum_sim_options::outages) and one key under 96-192 operations; with
/// `reacquires` (gives_back_live_grant's set-up) holders re-acquire their own live leases.
/// Returns run_quorum_schedule's verdict.
inline verdict run_quorum_control(decision_source& src, quorum_mutant m, bool reacquires) {
  quorum_sim_options q;
  q.members = 3;
  q.record_members = true;
  q.mutation = m;
  q.reacquires = reacquires;
  run_options o;
  if (m == quorum_mutant::counts_failed_raise) {
    q.outages = true;
    o.max_keys = 1;
    o.min_ops = 96;
    o.max_ops = 192;
  } else if (reacquires) {  // one key under 96-192 operations: holders meet contenders
    o.max_keys = 1;
    o.min_ops = 96;
    o.max_ops = 192;
  }
  return run_quorum_schedule(src, q, o).run.result;
}

/// run_quorum_control in `m`'s own set-up: with re-acquires for gives_back_live_grant only (the
/// other set-ups, their measured rates and the kept fuzz inputs stay as they were).
inline verdict run_quorum_control(decision_source& src, quorum_mutant m) {
  return run_quorum_control(src, m, m == quorum_mutant::gives_back_live_grant);
}

/// Whether `v` is the invariant the checker names when it catches `m`: O1 for
/// keeps_unsure_member; S2 (a token issued again) or S3 (a second owner) for counts_failed_raise.
inline bool caught_as_expected(quorum_mutant m, invariant v) noexcept {
  switch (m) {
    case quorum_mutant::keeps_unsure_member:
      return v == invariant::o1_orphaned_grant;
    case quorum_mutant::counts_failed_raise:
      return v == invariant::s2_token_order || v == invariant::s3_exclusive_grants;
    case quorum_mutant::gives_back_live_grant:
      return v == invariant::s3_exclusive_grants || v == invariant::s4_holder_belief;
    case quorum_mutant::none:
      break;
  }
  return v == invariant::none;
}

}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_WORKLOAD_QUORUM_HPP
