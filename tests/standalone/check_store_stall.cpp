// SPDX-License-Identifier: MIT
// check_store on a store that holds its own mutex across a step point: the simulator's one thread
// blocks for good as soon as a second client reaches the lock. The check must not hang silently:
// its watchdog prints the likely cause and aborts. ctest passes this program iff that message
// appears (PASS_REGULAR_EXPRESSION in tests/CMakeLists.txt); exiting any other way, or hanging
// until ctest's timeout, fails it.
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "holdfast/step_point.hpp"
#include "holdfast/testing/conformance.hpp"

namespace {

using holdfast::errc;
using holdfast::fencing_token;
using holdfast::grant;
using holdfast::result;
using holdfast::testing::sim_clock;

// A map under a mutex, correct but for one thing: the mutex is held across a step point.
class locked_across_step {
 public:
  explicit locked_across_step(sim_clock c) : clock_(c) {}

  result<grant> try_acquire(std::string_view key, std::string_view owner,
                            std::chrono::milliseconds ttl) {
    std::lock_guard<std::mutex> lock(mu_);
    holdfast::step_point(clock_, holdfast::step_kind::between);  // the mistake
    auto& r = leases_[std::string(key)];
    if (!r.owner.empty() && clock_.now() < r.expires && r.owner != owner) return errc::busy;
    if (r.owner != owner || !(clock_.now() < r.expires)) r.token = fencing_token(++counter_);
    r.owner = std::string(owner);
    r.expires = clock_.now() + ttl;
    return grant{r.token, ttl};
  }
  result<grant> renew(std::string_view key, std::string_view owner, fencing_token token,
                      std::chrono::milliseconds ttl) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = leases_.find(std::string(key));
    if (it == leases_.end() || it->second.owner != owner || it->second.token != token ||
        !(clock_.now() < it->second.expires)) {
      return errc::lease_lost;
    }
    it->second.expires = clock_.now() + ttl;
    return grant{token, ttl};
  }
  result<void> release(std::string_view key, std::string_view owner, fencing_token token) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = leases_.find(std::string(key));
    if (it == leases_.end() || it->second.owner != owner || it->second.token != token) {
      return errc::not_holder;
    }
    it->second.owner.clear();
    return {};
  }

 private:
  struct record {
    std::string owner;
    fencing_token token;
    sim_clock::time_point expires{};
  };
  sim_clock clock_;
  std::mutex mu_;
  std::map<std::string, record> leases_;
  std::uint64_t counter_ = 0;
};

}  // namespace

int main() {
  holdfast::testing::conformance_options o;
  o.stall_limit = std::chrono::seconds(2);
  o.progress = holdfast::testing::progress_mode::off;
  auto report = holdfast::testing::check_store(
      [](sim_clock c) { return std::make_unique<locked_across_step>(c); }, o);
  std::printf("check_store returned instead of being stopped by its watchdog:\n%s\n",
              report.summary().c_str());
  return 1;
}
