// SPDX-License-Identifier: MIT
// conformance_shared.hpp: the kit's read-write checks pass memory_store, on the simulated clock
// and called directly, and fail stores with one read-write bug each (a writer granted while a
// reader lives; no write intent; an upgrade in place; a reader freed a nanosecond early), naming
// the rule broken. Cost: a few milliseconds.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>

#include "holdfast/stores/memory.hpp"
#include "holdfast/testing/conformance_shared.hpp"

namespace test_conformance_shared {

namespace ht = holdfast::testing;
using holdfast::lease_mode;
using holdfast::testing::sim_clock;
using base_store = holdfast::memory_store<sim_clock>;

enum class flaw { none, writer_with_reader, no_intent, upgrade, early_expiry };

// memory_store<sim_clock> with one read-write bug.
class flawed_store : public base_store {
 public:
  flawed_store(sim_clock c, flaw f) : base_store(c), f_(f) {}
  holdfast::result<holdfast::grant> try_acquire_rw(std::string_view k, std::string_view o,
                                                   std::chrono::milliseconds t, lease_mode m) {
    if (f_ == flaw::writer_with_reader && m == lease_mode::exclusive) m = lease_mode::shared;
    if (f_ == flaw::early_expiry && m == lease_mode::shared) {
      t -= std::chrono::milliseconds(1);  // ends a reader 1 ms early, reporting the TTL asked
      if (t <= std::chrono::milliseconds(0)) return holdfast::errc::invalid_argument;
      auto g = base_store::try_acquire_rw(k, o, t, m);
      if (g) g->ttl += std::chrono::milliseconds(1);
      return g;
    }
    if (f_ == flaw::no_intent && m == lease_mode::exclusive && !readers_[std::string(k)].empty()) {
      return holdfast::errc::busy;  // refused without recording the writer's intent
    }
    auto g = base_store::try_acquire_rw(k, o, t, m);
    if (f_ == flaw::upgrade && !g && m == lease_mode::exclusive && o == "a") {
      return holdfast::grant{holdfast::fencing_token(99), t};  // "the reader upgrades"
    }
    if (g && m == lease_mode::shared) readers_[std::string(k)].insert(g->token.value());
    return g;
  }
  holdfast::result<void> release_rw(std::string_view k, std::string_view o,
                                    holdfast::fencing_token tk, lease_mode m) {
    auto r = base_store::release_rw(k, o, tk, m);
    if (r && m == lease_mode::shared) readers_[std::string(k)].erase(tk.value());
    return r;
  }

 private:
  flaw f_;
  std::map<std::string, std::set<std::uint64_t>> readers_;  // shared grants made (no expiry)
};

ht::conformance_report run(flaw f) {
  auto make = [f](sim_clock c) { return std::make_unique<flawed_store>(c, f); };
  ht::conformance_report rep;
  ht::detail::check_shared_grants(make, ht::conformance_options{}, rep);
  return rep;
}

bool names(const ht::conformance_report& rep, const std::string& rule) {
  for (const std::string& f : rep.failures) {
    if (f.compare(0, rule.size(), rule) == 0) return true;
  }
  return false;
}

TEST_CASE("the kit's read-write checks pass memory_store", "[conformance_shared]") {
  const ht::conformance_report rep = run(flaw::none);
  INFO(rep.failures.size() << " failures; first: "
                           << (rep.failures.empty() ? std::string() : rep.failures[0]));
  CHECK(rep.failures.empty());
  CHECK(rep.contract_checks > 30);
  holdfast::memory_store<> direct;
  CHECK(ht::check_read_write_contract(direct).failures.empty());
}

TEST_CASE("the kit's read-write checks fail each flawed store by the rule it breaks",
          "[conformance_shared]") {
  CHECK(names(run(flaw::writer_with_reader), "RW1 no writer while a reader lives"));
  CHECK(names(run(flaw::no_intent), "RW4 writer first (a new reader is kept out)"));
  CHECK(names(run(flaw::upgrade), "RW3 no upgrade in place"));
  CHECK(names(run(flaw::early_expiry), "RW1 expiry (1ns before the reader's TTL)"));
}

}  // namespace test_conformance_shared
