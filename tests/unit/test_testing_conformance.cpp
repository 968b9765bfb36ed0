// SPDX-License-Identifier: MIT
// Tests of holdfast/testing/conformance.hpp: the shipped memory_store conforms; every broken store
// is reported (by a contract check or by a schedule, named, with its seed); a store that keeps its
// own time is checked as far as possible and the rest is reported as skipped.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <holdfast/clock.hpp>
#include <holdfast/stores/memory.hpp>
#include <holdfast/testing/testing.hpp>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_testing_conformance {

using namespace holdfast::testing;

TEST_CASE("check_store: the shipped memory_store conforms", "[testing/conformance]") {
  conformance_options o;
  o.schedules = 200;
  const conformance_report r = check_store(
      [](sim_clock c) { return std::make_unique<holdfast::memory_store<sim_clock>>(c); }, o);
  INFO(r.summary());
  REQUIRE(r.ok());
  REQUIRE(static_cast<bool>(r));
  REQUIRE(r.contract_checks >= 25);
  REQUIRE(r.schedules == 200);
  REQUIRE(r.events > 200 * 20);
  // memory_store is one critical section per operation: nothing inside it to interleave, and the
  // report says so; real threads are not checked with a sim_clock factory, and it says so too.
  REQUIRE(r.skipped.size() == 2);
  REQUIRE_THAT(r.skipped.front(), Catch::Contains("contention across real threads"));
  REQUIRE_THAT(r.skipped.back(), Catch::Contains("holdfast::step_point"));
  REQUIRE_THAT(r.summary(), Catch::StartsWith("store conforms"));
}

TEST_CASE("check_store: every broken store is reported", "[testing/conformance]") {
  for (mutant m : all_mutants) {
    if (!is_store_mutant(m)) continue;
    const conformance_report r =
        check_store([m](sim_clock c) { return mutant_store<sim_clock>(c, m); });
    INFO("mutant " << to_string(m) << "\n" << r.summary());
    REQUIRE_FALSE(r.ok());
    REQUIRE_THAT(r.summary(), Catch::StartsWith("store does NOT conform"));
  }
}

TEST_CASE("check_store: contract checks name the rule a store breaks", "[testing/conformance]") {
  // release_without_owner_check is caught before any schedule runs, by T3.
  const conformance_report r = check_store(
      [](sim_clock c) { return mutant_store<sim_clock>(c, mutant::release_without_owner_check); });
  REQUIRE_FALSE(r.ok());
  REQUIRE_THAT(r.failures.front(), Catch::StartsWith("T3 release by another owner"));
  // counter_reset_on_release: T1 across release.
  const conformance_report c = check_store(
      [](sim_clock k) { return mutant_store<sim_clock>(k, mutant::counter_reset_on_release); });
  REQUIRE_THAT(c.summary(), Catch::Contains("T1 across release"));
  // A failing schedule names its seed and the invariant, with a timeline.
  const conformance_report t = check_store(
      [](sim_clock k) { return mutant_store<sim_clock>(k, mutant::token_after_grant); });
  REQUIRE_THAT(t.summary(), Catch::Contains("schedule seed=") && Catch::Contains("S2 token order"));
}

TEST_CASE("check_store: a store on its own clock is checked, expiry checks are skipped",
          "[testing/conformance]") {
  conformance_options o;
  o.schedules = 100;
  const conformance_report r =
      check_store([] { return std::make_unique<holdfast::memory_store<>>(); }, o);
  INFO(r.summary());
  REQUIRE(r.ok());
  REQUIRE(r.skipped.size() == 5);  // with the counter ends: not on a store's own clock
  REQUIRE_THAT(r.summary(), Catch::Contains("not explored:\n  - T2 expiry"));
  std::ostringstream os;
  os << r;
  REQUIRE(os.str() == r.summary());
}

TEST_CASE("fuzz_store: a schedule from bytes runs and returns 0 when nothing is violated",
          "[testing/conformance]") {
  const std::uint8_t bytes[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 200, 100, 50, 25};
  REQUIRE(
      fuzz_store([](sim_clock c) { return std::make_unique<holdfast::memory_store<sim_clock>>(c); },
                 bytes, sizeof bytes) == 0);
  REQUIRE(fuzz_schedule(bytes, sizeof bytes) == 0);
  REQUIRE(fuzz_schedule(nullptr, 0) == 0);
}

namespace {
// A handle to a store that outlives it: a reopened database file, or one of many connections to
// one server (every factory call then sees the same state).
template <class Store>
struct shared_handle {
  std::shared_ptr<Store> s;
  holdfast::result<holdfast::grant> try_acquire(std::string_view k, std::string_view o,
                                                std::chrono::milliseconds ttl) {
    return s->try_acquire(k, o, ttl);
  }
  holdfast::result<holdfast::grant> renew(std::string_view k, std::string_view o,
                                          holdfast::fencing_token t,
                                          std::chrono::milliseconds ttl) {
    return s->renew(k, o, t, ttl);
  }
  holdfast::result<void> release(std::string_view k, std::string_view o,
                                 holdfast::fencing_token t) {
    return s->release(k, o, t);
  }
};
using reopened = shared_handle<holdfast::memory_store<sim_clock>>;
}  // namespace

TEST_CASE("check_store: durable re-creates the store through the factory at each restart",
          "[testing/conformance]") {
  // A store that keeps its state in memory is not durable: made anew at a restart, its token
  // counter starts over, and the kit must see it (the factory is really called again).
  conformance_options o;
  o.durable = true;
  const conformance_report r = check_store(
      [](sim_clock c) { return std::make_unique<holdfast::memory_store<sim_clock>>(c); }, o);
  INFO(r.summary());
  REQUIRE_FALSE(r.ok());
  REQUIRE_THAT(r.summary(), Catch::Contains("is back") && Catch::Contains("violated"));
  // A factory taking a store_env gets one directory per schedule, the same across restarts;
  // this one keeps a memory_store per directory, so reopening it finds the state again.
  std::vector<std::string> dirs;
  std::map<std::string, std::shared_ptr<holdfast::memory_store<sim_clock>>> disk;
  int calls = 0;
  conformance_options few;
  few.schedules = 30;
  few.durable = true;
  few.reboots = false;  // one memory_store per directory, kept across boots: no reboots here
  const conformance_report e = check_store(
      [&](sim_clock c, const store_env& env) {
        ++calls;
        if (env.restarts == 0) dirs.push_back(env.dir);
        REQUIRE(std::filesystem::is_directory(env.dir));
        REQUIRE(env.dir == dirs.back());
        auto& s = disk[env.dir];
        if (!s) s = std::make_shared<holdfast::memory_store<sim_clock>>(c);
        return reopened{s};
      },
      few);
  INFO(e.summary());
  REQUIRE(e.ok());
  // The contract checks, the coarse-clock check (T2), the counter ends (four), the first
  // schedule twice more (determinism), then one per schedule.
  REQUIRE(dirs.size() == 2 + 4 + 2 + 30);
  REQUIRE(calls > static_cast<int>(dirs.size()));  // restarts called it again
  for (const std::string& d : dirs) REQUIRE_FALSE(std::filesystem::exists(d));
}

TEST_CASE(
    "check_store: a store that forgets its clock's tick is reported, by contract and by "
    "schedule",
    "[testing/conformance]") {
  // Issue "time at the edges" (1): a store on a clock that reads whole seconds (rounded down)
  // ending a 1500 ms grant at reading + TTL. The contract check names T2 coarse clock; the
  // schedules (store clocks with ticks of 1 ms, 10 ms, 1 s) find it as S3.
  const conformance_report r = check_store(
      [](sim_clock c) { return mutant_store<sim_clock>(c, mutant::ignores_clock_tick); });
  INFO(r.summary());
  REQUIRE_FALSE(r.ok());
  REQUIRE(r.failures.size() == 2);
  REQUIRE_THAT(r.failures.front(), Catch::StartsWith("T2 coarse clock: on a store clock that "
                                                     "reads whole seconds"));
  REQUIRE_THAT(r.failures.back(), Catch::Contains("S3 exclusive grants violated"));
  // The correct mutant_store (it adds the tick) passes both.
  const conformance_report ok =
      check_store([](sim_clock c) { return mutant_store<sim_clock>(c, mutant::none); });
  INFO(ok.summary());
  REQUIRE(ok.ok());
}

TEST_CASE("check_store: expire_now checks T2 on a store that keeps its own clock",
          "[testing/conformance]") {
  holdfast::manual_clock clock;
  conformance_options o;
  o.schedules = 10;
  o.expire_now = [&clock](std::string_view) { clock.advance(std::chrono::hours(1)); };
  const conformance_report r = check_store(
      [&clock] { return std::make_unique<holdfast::memory_store<holdfast::manual_clock>>(clock); },
      o);
  INFO(r.summary());
  REQUIRE(r.ok());
  REQUIRE_THAT(r.summary(), Catch::Contains("T2 expiry to the tick"));
  REQUIRE_THAT(r.summary(), !Catch::Contains("T2 expiry: the store's clock is not injectable"));
  // Negative control: a store on its own clock that revives an expired lease is caught.
  const conformance_report bad = check_store(
      [&clock] {
        return mutant_store<holdfast::manual_clock>(clock, mutant::renew_revives_expired);
      },
      o);
  INFO(bad.summary());
  REQUIRE_THAT(bad.summary(), Catch::Contains("T2 no revival"));
}

// ------------------------------------------------------------------------------------------------
// The parts of the kit a real-store test runs on a store it builds: check_contract,
// check_hostile_strings, check_exclusive_grants; each with the broken stores it must catch.
// ------------------------------------------------------------------------------------------------

namespace {

std::string lines(const conformance_report& r) {
  return r.summary();
}

/// memory_store with a manual clock: the reference the contract checks are calibrated on.
struct memory_reference {
  holdfast::manual_clock clock;
  holdfast::memory_store<holdfast::manual_clock> store{clock};
  conformance_options options() {
    conformance_options o;
    o.key_prefix = "k-";
    o.release_after_expiry_succeeds = true;  // memory_store keeps the record until taken over
    o.store_wide_tokens = true;
    o.expire_now = [c = clock](std::string_view) mutable { c.advance(std::chrono::hours(1)); };
    return o;
  }
};

/// Negative controls: memory_store with one rule broken each. The contract checks must catch
/// every one of them, or they prove nothing.
enum class breakage {
  release_without_owner_check,  // T3
  new_token_on_reacquire,       // T1 same owner
  token_reset,                  // T1 across release/expiry: a per-key counter reset to 1
  grant_busy,                   // T3 contention: a grant where the key is held
  inspect_shows_expired,        // inspect: an expired lease still shown
  inspect_wrong_owner,          // inspect: the owner's bytes changed
  busy_on_bad_input,            // T4: busy instead of invalid_argument
  expired_release_refused,      // T3 release after expiry, where the store promises success
  per_key_tokens,               // store-wide tokens: each key counts on its own
  renew_ignores_token,          // T3: the holder renews with any token
  release_of_free_key_ok,       // T3: releasing a key nobody holds reports success
};

/// Each breakage and a check that must name it.
const std::pair<breakage, const char*> all_breakages[] = {
    {breakage::release_without_owner_check, "T3 release by another owner"},
    {breakage::new_token_on_reacquire, "T1 same owner"},
    {breakage::token_reset, "T1 across release"},
    {breakage::grant_busy, "T3 contention"},
    {breakage::inspect_shows_expired, "T2 expiry (inspect)"},
    {breakage::inspect_wrong_owner, "inspect after a grant"},
    {breakage::busy_on_bad_input, "T4 empty key"},
    {breakage::expired_release_refused, "T3 release after expiry"},
    {breakage::per_key_tokens, "T1 a second key (store-wide)"},
    {breakage::renew_ignores_token, "T3 renew with another token"},
    {breakage::release_of_free_key_ok, "T3 second release"},
};

struct broken_store {
  explicit broken_store(breakage b) : kind(b) {}
  breakage kind;
  memory_reference ref;
  // per_key_tokens: the tokens shown to callers, per key, and the store's own behind them.
  std::map<std::string, std::uint64_t> per_key;
  std::map<std::pair<std::string, std::uint64_t>, std::uint64_t> shown, inner;
  std::map<std::string, holdfast::lease_record> last_seen;  // inspect_shows_expired
  std::uint64_t fake_token = 0;

  holdfast::fencing_token show(std::string_view k, holdfast::fencing_token t) {
    const auto at = std::make_pair(std::string(k), t.value());
    auto it = shown.find(at);
    if (it == shown.end()) {
      it = shown.emplace(at, ++per_key[std::string(k)]).first;
      inner[{std::string(k), it->second}] = t.value();
    }
    return holdfast::fencing_token(it->second);
  }
  holdfast::fencing_token unshow(std::string_view k, holdfast::fencing_token t) {
    const auto it = inner.find({std::string(k), t.value()});
    return holdfast::fencing_token(it == inner.end() ? std::uint64_t(1) << 62 : it->second);
  }

  holdfast::result<holdfast::grant> try_acquire(std::string_view k, std::string_view o,
                                                std::chrono::milliseconds ttl) {
    using holdfast::fencing_token;
    if (kind == breakage::busy_on_bad_input && holdfast::check_acquire_args(k, o, ttl)) {
      return holdfast::errc::busy;
    }
    auto g = ref.store.try_acquire(k, o, ttl);
    if (kind == breakage::new_token_on_reacquire && g) {
      return holdfast::grant{fencing_token(g->token.value() + 1000 + ++fake_token), g->ttl};
    }
    if (kind == breakage::token_reset && g) {
      return holdfast::grant{fencing_token(1), g->ttl};  // a per-key counter reset to 1
    }
    if (kind == breakage::per_key_tokens && g) return holdfast::grant{show(k, g->token), g->ttl};
    if (kind == breakage::grant_busy && !g && g.error() == holdfast::errc::busy) {
      return holdfast::grant{fencing_token(999999), ttl};
    }
    if (kind == breakage::inspect_shows_expired && g) {
      last_seen[std::string(k)] = holdfast::lease_record{std::string(o), g->token, g->ttl};
    }
    return g;
  }
  holdfast::result<holdfast::grant> renew(std::string_view k, std::string_view o,
                                          holdfast::fencing_token t,
                                          std::chrono::milliseconds ttl) {
    if (kind == breakage::token_reset) {
      auto r = ref.store.inspect(k);
      if (r && r->has_value() && (*r)->owner == o) t = (*r)->token;
    }
    if (kind == breakage::renew_ignores_token && t.is_issuable()) {
      auto r = ref.store.inspect(k);
      if (r && r->has_value() && (*r)->owner == o) t = (*r)->token;
    }
    if (kind == breakage::per_key_tokens && t.is_issuable()) {
      auto g = ref.store.renew(k, o, unshow(k, t), ttl);
      if (g) g->token = t;
      return g;
    }
    return ref.store.renew(k, o, t, ttl);
  }
  holdfast::result<void> release(std::string_view k, std::string_view o,
                                 holdfast::fencing_token t) {
    if (holdfast::check_release_args(k, o, t)) return holdfast::errc::invalid_argument;
    auto r = ref.store.inspect(k);
    if (kind == breakage::release_without_owner_check || kind == breakage::token_reset) {
      if (r && r->has_value()) return ref.store.release(k, (*r)->owner, (*r)->token);
    }
    if (kind == breakage::expired_release_refused && r && !r->has_value()) {
      return holdfast::errc::not_holder;
    }
    if (kind == breakage::release_of_free_key_ok && r && !r->has_value()) return {};
    if (kind == breakage::per_key_tokens) t = unshow(k, t);
    last_seen.erase(std::string(k));
    return ref.store.release(k, o, t);
  }
  holdfast::result<std::optional<holdfast::lease_record>> inspect(std::string_view k) {
    auto r = ref.store.inspect(k);
    if (kind == breakage::inspect_shows_expired && r && !r->has_value()) {
      auto seen = last_seen.find(std::string(k));
      if (seen != last_seen.end()) return std::optional<holdfast::lease_record>(seen->second);
    }
    if (kind == breakage::inspect_wrong_owner && r && r->has_value()) (*r)->owner += "!";
    if (kind == breakage::per_key_tokens && r && r->has_value()) {
      (*r)->token = show(k, (*r)->token);
    }
    return r;
  }
};

/// A store that keeps keys and owners as C strings (up to the first NUL), as a naive store built
/// on char* APIs does: the hostile-string checks must catch it.
template <class Clock>
struct c_string_store {
  explicit c_string_store(Clock c) : s(c) {}
  holdfast::memory_store<Clock> s;
  // The bytes before the first NUL; "?" for none (the wrapped store refuses empty strings).
  static std::string c_str(std::string_view v) {
    const std::string s(v.substr(0, v.find('\0')));
    return s.empty() ? "?" : s;
  }
  holdfast::result<holdfast::grant> try_acquire(std::string_view k, std::string_view o,
                                                std::chrono::milliseconds ttl) {
    if (std::error_code ec = holdfast::check_acquire_args(k, o, ttl)) return ec;
    return s.try_acquire(c_str(k), c_str(o), ttl);
  }
  holdfast::result<holdfast::grant> renew(std::string_view k, std::string_view o,
                                          holdfast::fencing_token t,
                                          std::chrono::milliseconds ttl) {
    if (std::error_code ec = holdfast::check_renew_args(k, o, t, ttl)) return ec;
    return s.renew(c_str(k), c_str(o), t, ttl);
  }
  holdfast::result<void> release(std::string_view k, std::string_view o,
                                 holdfast::fencing_token t) {
    if (std::error_code ec = holdfast::check_release_args(k, o, t)) return ec;
    return s.release(c_str(k), c_str(o), t);
  }
};

/// A handle to one memory_store shared by every factory call (as connections to one server are).
using shared_memory = shared_handle<holdfast::memory_store<>>;

}  // namespace

TEST_CASE("check_contract and check_hostile_strings pass on memory_store, the reference",
          "[testing/conformance]") {
  memory_reference ref;
  const conformance_report c = check_contract(ref.store, ref.options());
  INFO(lines(c));
  CHECK(c.ok());
  CHECK(c.contract_checks >= 60);
  REQUIRE_THAT(c.summary(), Catch::Contains("T2 expiry to the tick"));  // forced, and says so
  memory_reference ref2;
  const conformance_report h = check_hostile_strings(ref2.store, ref2.options());
  INFO(lines(h));
  CHECK(h.ok());
  CHECK(h.contract_checks >= 6 * hostile_strings().size());
}

TEST_CASE("check_contract catches deliberately broken stores", "[testing/conformance]") {
  for (const auto& [b, rule] : all_breakages) {
    broken_store s{b};
    const conformance_report r = check_contract(s, s.ref.options());
    INFO("breakage " << static_cast<int>(b) << "\n" << r.summary());
    CHECK_FALSE(r.ok());
    CHECK_THAT(r.summary(), Catch::Contains(std::string("FAILED ") + rule + ":"));
  }
  // Per-key tokens conform to T1 (a CAS store's): only store_wide_tokens makes them a failure.
  broken_store per_key{breakage::per_key_tokens};
  conformance_options o = per_key.ref.options();
  o.store_wide_tokens = false;
  const conformance_report r = check_contract(per_key, o);
  INFO(r.summary());
  CHECK(r.ok());
  broken_store refused{breakage::expired_release_refused};
  o = refused.ref.options();
  o.release_after_expiry_succeeds = false;  // not_holder is allowed then (Redis, etcd)
  CHECK(check_contract(refused, o).ok());
}

TEST_CASE("check_hostile_strings catches a store that stops at a NUL byte",
          "[testing/conformance]") {
  holdfast::manual_clock clock;
  c_string_store<holdfast::manual_clock> s(clock);
  const conformance_report r = check_hostile_strings(s);
  INFO(r.summary());
  REQUIRE_FALSE(r.ok());
  REQUIRE_THAT(r.summary(), Catch::Contains("keys differing after a NUL must be independent") &&
                                Catch::Contains("owners differing after a NUL"));
  // check_store runs the hostile strings on its own (and finds the NUL keys in the contract
  // checks too); hostile_strings = false leaves only the contract's.
  const conformance_report k =
      check_store([](sim_clock c) { return c_string_store<sim_clock>(c); });
  REQUIRE_THAT(k.summary(),
               Catch::Contains("hostile strings: ") && Catch::Contains("keys binary-safe"));
}

TEST_CASE("check_contract: a store on its own clock, expiry waited for in real time",
          "[testing/conformance][concurrency]") {
  conformance_options o;
  o.expiry_by_waiting = std::chrono::milliseconds(40);  // three bounded waits of 64 ms
  holdfast::memory_store<> s;
  const conformance_report r = check_contract(s, o);
  INFO(r.summary());
  REQUIRE(r.ok());
  REQUIRE_THAT(r.summary(), !Catch::Contains("T2 expiry: the store's clock is not injectable"));
  // Negative controls: a store that revives an expired lease; one that never expires.
  mutant_store<holdfast::steady_clock> revives({}, mutant::renew_revives_expired);
  REQUIRE_THAT(check_contract(revives, o).summary(), Catch::Contains("T2 no revival"));
  mutant_store<holdfast::steady_clock> never({}, mutant::never_expires);
  REQUIRE_THAT(check_contract(never, o).summary(), Catch::Contains("T2 expiry"));
}

TEST_CASE("check_exclusive_grants: one holder at a time across threads, tokens increasing",
          "[testing/conformance][concurrency]") {
  conformance_options o;
  o.threads = 4;
  o.grants_per_thread = 50;
  auto shared = std::make_shared<holdfast::memory_store<>>();
  const conformance_report r = check_exclusive_grants([&] { return shared; }, o);
  INFO(r.summary());
  REQUIRE(r.ok());
  REQUIRE(r.contract_checks >= 4 * 50 * 3);
  // Negative control: stores that share nothing each grant the key, with tokens from 1 again.
  const conformance_report apart =
      check_exclusive_grants([] { return holdfast::memory_store<>(); }, o);
  INFO(apart.summary());
  REQUIRE_FALSE(apart.ok());
  REQUIRE_THAT(apart.summary(), Catch::Contains("tokens of successive grants must strictly"));
  // check_store runs it for a factory on its own clock when threads > 0.
  conformance_options k = o;
  k.schedules = 0;  // one store shared by every call: schedules need a fresh one each
  const conformance_report all = check_store([&] { return shared_memory{shared}; }, k);
  INFO(all.summary());
  REQUIRE(all.ok());
  REQUIRE(all.contract_checks >= 4 * 50 * 3);
  REQUIRE_FALSE(
      check_exclusive_grants([] { return holdfast::memory_store<>(); }, conformance_options{})
          .skipped.empty());
}

// ------------------------------------------------------------------------------------------------
// T2 across the TTL range (conformance_ttl.hpp): stores that hold another TTL than they report.
// ------------------------------------------------------------------------------------------------

namespace {

/// Negative controls for conformance_ttl.hpp: memory_store on the simulated clock holding
/// another TTL than it reports (the new-user trial's my_store bugs), each reporting the asked one.
enum class ttl_breakage {
  capped_5s,          // holds at most 5 s
  capped_30s,         // holds at most 30 s
  int32_ms,           // keeps the TTL in an int32 of ms: wraps above 2^31 ms (~24.8 days)
  renew_ignores_ttl,  // renew holds for the acquire's TTL again
};

/// Each TTL breakage and the rule that must name it.
const std::pair<ttl_breakage, const char*> all_ttl_breakages[] = {
    {ttl_breakage::capped_5s, "T2 held for the TTL: a grant of 30001ms"},
    {ttl_breakage::capped_30s, "T2 held for the TTL: a grant of 30001ms"},
    {ttl_breakage::int32_ms, "T2 held for the TTL: a grant of 2147483649ms"},
    {ttl_breakage::renew_ignores_ttl, "T2 renew with another TTL: a renew for 3600000ms"},
};

template <class Clock>
struct ttl_broken_store {
  ttl_broken_store(Clock c, ttl_breakage b) : kind(b), s(c) {}
  ttl_breakage kind;
  holdfast::memory_store<Clock> s;
  std::map<std::string, std::chrono::milliseconds> acquired;  // renew_ignores_ttl

  std::chrono::milliseconds held(std::chrono::milliseconds ttl) const {
    using std::chrono::milliseconds;
    if (kind == ttl_breakage::capped_5s) return std::min(ttl, milliseconds(5000));
    if (kind == ttl_breakage::capped_30s) return std::min(ttl, milliseconds(30000));
    if (kind == ttl_breakage::int32_ms) {
      // The int32 wraps; a non-positive result holds the lease 1 ms (the store's own clock then
      // ends it at once, as the trial's store did).
      const auto wrapped = static_cast<std::int32_t>(static_cast<std::uint32_t>(ttl.count()));
      return milliseconds(wrapped > 0 ? wrapped : 1);
    }
    return ttl;
  }
  holdfast::result<holdfast::grant> try_acquire(std::string_view k, std::string_view o,
                                                std::chrono::milliseconds ttl) {
    if (std::error_code ec = holdfast::check_acquire_args(k, o, ttl)) return ec;
    auto g = s.try_acquire(k, o, held(ttl));
    if (!g) return g;
    acquired[std::string(k)] = held(ttl);
    return holdfast::grant{g->token, ttl};
  }
  holdfast::result<holdfast::grant> renew(std::string_view k, std::string_view o,
                                          holdfast::fencing_token t,
                                          std::chrono::milliseconds ttl) {
    if (std::error_code ec = holdfast::check_renew_args(k, o, t, ttl)) return ec;
    const auto before = acquired.find(std::string(k));
    const bool ignore = kind == ttl_breakage::renew_ignores_ttl && before != acquired.end();
    auto g = s.renew(k, o, t, ignore ? before->second : held(ttl));
    if (!g) return g;
    return holdfast::grant{g->token, ttl};
  }
  holdfast::result<void> release(std::string_view k, std::string_view o,
                                 holdfast::fencing_token t) {
    return s.release(k, o, t);
  }
  holdfast::result<std::optional<holdfast::lease_record>> inspect(std::string_view k) {
    return s.inspect(k);
  }
};

}  // namespace

TEST_CASE("check_store catches a store holding another TTL than it reports",
          "[testing/conformance]") {
  conformance_options o;
  o.schedules = 20;  // the schedules grant one short TTL: they cannot see these
  for (const auto& [b, rule] : all_ttl_breakages) {
    const ttl_breakage kind = b;
    const conformance_report r =
        check_store([kind](sim_clock c) { return ttl_broken_store<sim_clock>(c, kind); }, o);
    INFO("TTL breakage " << static_cast<int>(b) << "\n" << r.summary());
    CHECK_FALSE(r.ok());
    CHECK_THAT(r.summary(), Catch::Contains(std::string("FAILED ") + rule));
  }
  // The shipped stores hold what they report across the whole range, renews included.
  const conformance_report m = check_store(
      [](sim_clock c) { return std::make_unique<holdfast::memory_store<sim_clock>>(c); }, o);
  INFO(m.summary());
  CHECK(m.ok());
  const conformance_report n =
      check_store([](sim_clock c) { return mutant_store<sim_clock>(c, mutant::none); }, o);
  INFO(n.summary());
  CHECK(n.ok());
  // A sim_clock factory cannot be checked across real threads, and the report says how to.
  CHECK_THAT(m.summary(), Catch::Contains("contention across real threads") &&
                              Catch::Contains("-fsanitize=thread"));
}

TEST_CASE("check_store: on its own clock, inspect after long grants matches the TTL reported",
          "[testing/conformance]") {
  holdfast::manual_clock clock;
  conformance_options o;
  o.schedules = 5;
  o.expire_now = [&clock](std::string_view) { clock.advance(std::chrono::hours(1)); };
  const conformance_report r = check_store(
      [&clock] { return std::make_unique<holdfast::memory_store<holdfast::manual_clock>>(clock); },
      o);
  INFO(r.summary());
  CHECK(r.ok());
  CHECK_THAT(r.summary(), Catch::Contains("T2 across the TTL range"));
  // Negative controls on the same clock: each breakage shows in inspect's remaining time.
  for (const auto& [b, rule] : all_ttl_breakages) {
    const ttl_breakage kind = b;
    const conformance_report bad = check_store(
        [&clock, kind] { return ttl_broken_store<holdfast::manual_clock>(clock, kind); }, o);
    INFO("TTL breakage " << static_cast<int>(b) << " (" << rule << ")\n" << bad.summary());
    CHECK_FALSE(bad.ok());
    CHECK_THAT(bad.summary(), Catch::Contains("FAILED inspect after a"));
  }
}

}  // namespace test_testing_conformance
