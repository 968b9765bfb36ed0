// SPDX-License-Identifier: MIT
// holdfast/testing/testing.hpp - the testing umbrella: simulator, checker, conformance kit.
//
//   decision.hpp      decision_source: seeded PRNG, bytes (libFuzzer), recordings
//   simulator.hpp     simulator + sim_clock: virtual time, fibers, client faults, clock drift/jumps
//   fault_options.hpp fault_options: which faults the simulator injects (simulator.hpp includes it)
//   sim_store.hpp     sim_store<Store>: any LeaseStore on the simulated network (delays, losses,
//                     errors, restarts), one per store so quorums compose
//   store_factory.hpp store_env and how the kit calls a user's store factory
//   resource.hpp      sim_resource: the downstream resource, guarded by the shipped fences
//   history.hpp       what a run records
//   checker.hpp       check(history): S1-S6, L1, L2, T4, and a timeline like the README's
//   verdict.hpp       invariant, verdict: what check() answers (checker.hpp includes it)
//   mutants.hpp       the negative controls
//   workload_plan.hpp what a schedule's clients do: operations, run_options, generate_workload()
//   workload.hpp      generated schedules of shipped lease calls: run_schedule()
//   shrink.hpp        shrink_failure(): a failing schedule's minimal form
//   conformance.hpp   check_store(factory), fuzz_store(factory, data, size)
//   svg.hpp           to_svg(history): a counterexample as a picture; save_counterexample()
//   svg_options.hpp   svg_options: how to_svg() draws (svg.hpp includes it)
//   progress.hpp      progress_meter: a progress line for long checks on a terminal
// Not included here: rapidcheck.hpp (needs rapidcheck).
//
// Not part of holdfast.hpp: the core never includes testing/ (README, "Layout").
/// \file
/// The testing umbrella: includes every testing/ header but rapidcheck.hpp and declares nothing
/// itself; each included header documents its own contracts.
#ifndef HOLDFAST_TESTING_TESTING_HPP
#define HOLDFAST_TESTING_TESTING_HPP

#include "holdfast/testing/checker.hpp"
#include "holdfast/testing/conformance.hpp"
#include "holdfast/testing/decision.hpp"
#include "holdfast/testing/fault_options.hpp"
#include "holdfast/testing/history.hpp"
#include "holdfast/testing/mutants.hpp"
#include "holdfast/testing/progress.hpp"
#include "holdfast/testing/resource.hpp"
#include "holdfast/testing/shrink.hpp"
#include "holdfast/testing/sim_store.hpp"
#include "holdfast/testing/simulator.hpp"
#include "holdfast/testing/store_factory.hpp"
#include "holdfast/testing/svg.hpp"
#include "holdfast/testing/svg_options.hpp"
#include "holdfast/testing/verdict.hpp"
#include "holdfast/testing/workload.hpp"
#include "holdfast/testing/workload_plan.hpp"

#endif  // HOLDFAST_TESTING_TESTING_HPP
