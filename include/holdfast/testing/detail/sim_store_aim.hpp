// SPDX-License-Identifier: MIT
// holdfast/testing/detail/sim_store_aim.hpp - pieces of sim_store (sim_store.hpp) that draw
// durations and aim stalls:
//
//   piece            | what it does
//   -----------------+---------------------------------------------------------------------------
//   network_delay    | time in flight of a delayed request or reply: 1 ms, or 1/50 .. 1.5 scale
//   shorter_ttl      | store_fault_options::shorter_ttls: now and then 50-90% of the TTL asked
//   regrant_aim      | store_fault_options::regrant_stalls: the expiry each key's last grant set
//                    | (by the store's clock) and how many grants the store applied; an acquire
//                    | that began once a key's lease had expired, and before anyone was granted
//                    | it again, is held at its first step point until another grant applies
//                    | (1 in 2; with stall_when_exhausted, always once the input has run out)
//   step_trace       | the stalls of one operation at its step points before it took effect,
//                    | for history::store_stalls (the timeline shows them with the operation)
//
// The aimed stall is the boundary search's counterpart inside a store: schedules already aim
// acquires at expiry instants; this aims the stall of a multi-step store's operation between
// the expiry it read and the re-grant that follows. A store that acts on what it read before the
// stall (a cleanup that lists expired keys and deletes them later without re-checking) deletes
// the new grant, and the checker sees it as S3.
//
// Not a public header. Thread-safety: the simulator's thread only.
#ifndef HOLDFAST_TESTING_DETAIL_SIM_STORE_AIM_HPP
#define HOLDFAST_TESTING_DETAIL_SIM_STORE_AIM_HPP

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/testing/fault_options.hpp"
#include "holdfast/testing/history.hpp"
#include "holdfast/testing/simulator.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace testing {
namespace detail {

/// The time a delayed request or reply spends in flight (ns).
inline std::int64_t network_delay(simulator& sim) {
  const std::int64_t s = sim.scale_ns();
  switch (sim.decide(5)) {
    case 0:
      return 1000000;
    case 1:
      return s / 50;
    case 2:
      return s / 10;
    case 3:
      return s / 2;
    default:
      return s * 3 / 2;
  }
}

/// The TTL a store applies to an acquire or renew asked for `ttl`: `ttl`, or under
/// shorter_ttls now and then 50-90% of it (at least 1 ms).
inline std::chrono::milliseconds shorter_ttl(simulator& sim, const store_fault_options& f,
                                             std::chrono::milliseconds ttl) {
  if (!f.shorter_ttls || sim.current_node() == no_node || sim.healed()) return ttl;
  if (ttl <= std::chrono::milliseconds(1) || sim.weighted({8, 1}) == 0) return ttl;
  const std::int64_t tenths = 5 + static_cast<std::int64_t>(sim.weighted({1, 1, 1, 1, 1}));
  const std::chrono::milliseconds shorter(ttl.count() * tenths / 10);
  return shorter > std::chrono::milliseconds::zero() ? shorter : std::chrono::milliseconds(1);
}

/// Whether an aimed stall is taken: 1 in 2, or always once the decision source has run out if
/// `when_exhausted` (store_fault_options::stall_when_exhausted).
inline bool take_aimed_stall(simulator& sim, bool when_exhausted) {
  if (when_exhausted && sim.decisions().exhausted()) return true;
  return sim.decide(2) == 1;
}

/// What the aimed stall knows of one store (the file comment).
class regrant_aim {
 public:
  /// A grant or renewal of key `k` applied at store time `now_ns` for `ttl_ms`.
  void granted(std::uint8_t k, bool acquire, std::int64_t now_ns, std::int64_t ttl_ms) {
    if (expiry_.size() <= k) expiry_.resize(k + 1u, 0);
    expiry_[k] = std::max(expiry_[k], now_ns + ttl_ms * 1000000);
    if (acquire) ++grants_;
  }
  /// Key `k` was released (free now).
  void released(std::uint8_t k) {
    if (k < expiry_.size()) expiry_[k] = 0;
  }
  /// True iff some key's last lease had expired by `begin_ns` (store time) and was not granted
  /// again since.
  [[nodiscard]] bool expired_at(std::int64_t begin_ns) const noexcept {
    return std::any_of(expiry_.begin(), expiry_.end(),
                       [begin_ns](std::int64_t x) { return x != 0 && x <= begin_ns; });
  }

  /// Holds the running client here until another grant applies on this store, at most two
  /// scale, or until `stop()` (the client crashed, the store went down). One stall at a time.
  template <class Stop>
  void stall(simulator& sim, Stop&& stop) {
    if (stalling_) return;
    stalling_ = true;
    const std::uint64_t seen = grants_;
    const std::int64_t until = sim.now_ns() + 2 * sim.scale_ns();
    const std::int64_t step = std::max<std::int64_t>(sim.scale_ns() / 200, 1000);
    while (grants_ == seen && sim.now_ns() < until && !stop()) sim.wait_true(step);
    stalling_ = false;
  }

 private:
  std::vector<std::int64_t> expiry_;  // per key index: the last grant's expiry (0: free)
  std::uint64_t grants_ = 0;
  bool stalling_ = false;
};

/// Where one store operation stopped at step points, and for how long (true time). Time passes
/// inside a store operation only at its step points, so a step is reached when the previous one
/// resumed (or the operation began).
class step_trace {
 public:
  /// The operation began at `now_ns`.
  void begin(std::int64_t now_ns) { last_ns_ = now_ns; }
  /// Its step point's wait is over at `now_ns` (others ran, or it stalled, since it got there).
  void resumed(std::int64_t now_ns) {
    if (!done_ && now_ns > last_ns_) stalls_.push_back({0, last_ns_, now_ns});
    last_ns_ = now_ns;
  }
  /// It took effect as `log.events[event]`: the stalls so far go into `log.store_stalls`, and
  /// later ones (after its commit) are not kept.
  void took_effect(history& log, std::size_t event) {
    if (done_) return;
    done_ = true;
    for (store_stall s : stalls_) {
      s.event = event;
      log.store_stalls.push_back(s);
    }
    stalls_.clear();
  }

 private:
  std::vector<store_stall> stalls_;
  std::int64_t last_ns_ = 0;
  bool done_ = false;
};

}  // namespace detail
}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_DETAIL_SIM_STORE_AIM_HPP
