// SPDX-License-Identifier: MIT
// holdfast/testing/rw_workload.hpp - read-write leases (read_write_lease.hpp) inside the
// simulator: writer and reader processes using the shipped read_write_lease over memory_store's
// read-write capability on the simulated network (delays, lost requests and replies, store errors,
// pauses, drift, store clock ticks), judged by the read-write properties (rw_checker.hpp) and by
// S1-S5 on the writers' part of the history, with negative controls that must be caught:
//
//   control              | the bug                                           | caught by
//   ---------------------+---------------------------------------------------+-------------------
//   writer_while_reader  | the store grants an exclusive ask as if it were a | read-write
//                        | shared one: a writer while readers live           | exclusion
//   upgrade_in_place     | a reader "upgrades" by writing under its shared   | fenced write order
//                        | lease; two such readers are two writers at once   |
//   admits_reissued      | (lossy runs) the resource admits a token equal to | S1 fenced writes
//                        | the newest it admitted from another owner: a lost | (two holders under
//                        | grant's token, issued again, lets a second writer | one token)
//                        | in (fence.hpp without token_reissued)             |
//
// How the capability crosses the network: sim_store forwards the three lease operations, so the
// store behind it (rw_coded_store) takes the mode from the key, `r/K` shared and `w/K` exclusive,
// and rw_front gives the recipe try_acquire_rw/renew_rw/release_rw on top by coding the key. The
// history records `r/K` and `w/K` as two keys, which is how rw_checker.hpp tells the modes apart.
// The shipped path of an upgrade is release, then acquire_write. With `lossy`, the store also
// restarts from lagging copies (store_fault_options::lagging_restarts, every restart that can):
// a copy holds the read-write records and the counter (memory_store's copy_read_write_state), so a
// lost grant loses shared grants too, and rw_checker.hpp judges each life of the store from its
// copy's state, as checker.hpp does. The resource then also refuses a token equal to the newest it
// admitted from another owner (fence.hpp's token_reissued): a lost grant's token is issued again.
//
// run_rw_schedule(src, m) is the entry; shapes_workload.hpp runs it as a phase of
// run_shapes_schedule, so the seeded search, rapidcheck and libFuzzer of the shapes all run it.
// Thread-safety: one run per thread.
#ifndef HOLDFAST_TESTING_RW_WORKLOAD_HPP
#define HOLDFAST_TESTING_RW_WORKLOAD_HPP

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/read_write_lease.hpp"
#include "holdfast/stores/memory.hpp"
#include "holdfast/testing/checker.hpp"
#include "holdfast/testing/decision.hpp"
#include "holdfast/testing/history.hpp"
#include "holdfast/testing/rw_checker.hpp"
#include "holdfast/testing/sim_store.hpp"
#include "holdfast/testing/simulator.hpp"
#include "holdfast/testing/verdict.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace testing {

/// The read-write negative controls (see the table at the top of rw_workload.hpp).
enum class rw_mutation : std::uint8_t {
  none,
  writer_while_reader,
  upgrade_in_place,
  admits_reissued,
};

/// What one read-write run found: the first read-write property violated (rw_checker.hpp) and
/// the checker's verdict on the writers' part of the history.
struct rw_verdict {
  rw_finding rw;  ///< The read-write properties.
  verdict base;   ///< S1-S5 on the writers' events (readers coexist by design, so not S3).
  /// Returns true iff every property and invariant holds.
  [[nodiscard]] bool ok() const noexcept { return rw.ok() && base.ok(); }
  /// How many restarts came back from a lagging copy (lossy runs), losing grants.
  std::uint32_t lost_lives = 0;
};

namespace detail {

// The store behind the simulated network: memory_store's read-write grants, the mode taken from
// the key ("r/K" shared, "w/K" exclusive), with the writer_while_reader control's one bug.
class rw_coded_store {
 public:
  rw_coded_store(sim_clock clock, rw_mutation m) : s_(clock), m_(m) {}
  result<grant> try_acquire(std::string_view k, std::string_view o, std::chrono::milliseconds t) {
    lease_mode mode{};
    if (!decode(k, mode)) return errc::invalid_argument;
    return s_.try_acquire_rw(k.substr(2), o, t, served(mode));
  }
  result<grant> renew(std::string_view k, std::string_view o, fencing_token tk,
                      std::chrono::milliseconds t) {
    lease_mode mode{};
    if (!decode(k, mode)) return errc::invalid_argument;
    return s_.renew_rw(k.substr(2), o, tk, t, served(mode));
  }
  result<void> release(std::string_view k, std::string_view o, fencing_token tk) {
    lease_mode mode{};
    if (!decode(k, mode)) return errc::invalid_argument;
    return s_.release_rw(k.substr(2), o, tk, served(mode));
  }

 private:
  static bool decode(std::string_view k, lease_mode& mode) {
    if (k.size() < 3 || k[1] != '/' || (k[0] != 'r' && k[0] != 'w')) return false;
    mode = k[0] == 'r' ? lease_mode::shared : lease_mode::exclusive;
    return true;
  }
  lease_mode served(lease_mode mode) const noexcept {
    return m_ == rw_mutation::writer_while_reader ? lease_mode::shared : mode;
  }
  memory_store<sim_clock> s_;
  rw_mutation m_;
  friend struct rw_world;  // its lagging copies
};

// The read-write capability over the simulated network, for the shipped recipe.
class rw_front {
 public:
  explicit rw_front(sim_store<rw_coded_store>& s) : s_(s) {}
  result<grant> try_acquire_rw(std::string_view k, std::string_view o, std::chrono::milliseconds t,
                               lease_mode m) {
    return s_.try_acquire(code(k, m), o, t);
  }
  result<grant> renew_rw(std::string_view k, std::string_view o, fencing_token tk,
                         std::chrono::milliseconds t, lease_mode m) {
    return s_.renew(code(k, m), o, tk, t);
  }
  result<void> release_rw(std::string_view k, std::string_view o, fencing_token tk, lease_mode m) {
    return s_.release(code(k, m), o, tk);
  }

 private:
  static std::string code(std::string_view k, lease_mode m) {
    std::string s(m == lease_mode::shared ? "r/" : "w/");
    s.append(k.data(), k.size());
    return s;
  }
  sim_store<rw_coded_store>& s_;
};

inline constexpr std::chrono::milliseconds rw_ttl{1000};

struct rw_world {
  rw_world(decision_source& src, rw_mutation m, bool lossy = false)
      : mutation(m),
        sim(src, faults()),
        store(
            sim, "store", [m](sim_clock c) { return std::make_unique<rw_coded_store>(c, m); },
            store_faults(lossy)),
        front(store),
        lossy(lossy) {
    sim.log().keys = {"w/k0", "r/k0"};  // index 0: the writers' key and the resource's
    sim.log().primary_store = store.node();
    sim.log().tolerance_ns = std::chrono::nanoseconds(std::chrono::milliseconds(1)).count();
    if (!lossy) return;
    store.keep_copies([this, m](rw_coded_store& now) -> sim_store<rw_coded_store>::restore_fn {
      auto copy = std::make_shared<rw_coded_store>(store.clock(), m);
      copy->s_.copy_read_write_state(now.s_);
      return [this, copy, m](std::unique_ptr<rw_coded_store>& s) {
        s = std::make_unique<rw_coded_store>(store.clock(), m);
        s->s_.copy_read_write_state(copy->s_);
      };
    });
  }
  static store_fault_options store_faults(bool lossy) {
    store_fault_options f;
    f.lost_requests = f.lost_replies = f.errors = true;
    f.restarts = f.lagging_restarts = f.every_restart_lags = lossy;
    return f;
  }
  static fault_options faults() {
    fault_options f;
    f.scale = std::chrono::nanoseconds(rw_ttl);
    f.crashes = false;  // a crash ends a fiber mid-protocol; the recipe's handles are the point
    f.drift_bound = validity_options{}.drift;
    f.client_clock_ticks = false;
    return f;
  }
  acquire_options<sim_clock> options(node_id n, std::uint64_t seed, std::string owner) {
    acquire_options<sim_clock> o;
    o.clock = sim.clock(n);
    o.owner = std::move(owner);
    o.backoff.initial = rw_ttl / 50;
    o.backoff.max_delay = rw_ttl / 4;
    o.backoff.seed = seed;
    return o;
  }
  void record(event_kind k, node_id n, const std::string& owner, std::uint64_t token,
              std::int64_t value = 0, std::error_code ec = {}) {
    event e = sim.make_event(k, n);
    e.owner = owner;
    e.key = 0;
    e.token = token;
    e.outcome = to_outcome(ec);
    e.value = value;
    e.ttl_ms = rw_ttl.count();
    sim.log().add(std::move(e));
  }
  // The resource: admits a write iff its token is at least every token it has seen, reads
  // included (a reader presents its token when it reads, which fences stale writers out).
  void write(fencing_token t, const std::string& owner, node_id n) {
    const std::uint64_t before = gate;
    const bool reissued = lossy && t.value() == gate && owner != gate_owner &&
                          mutation != rw_mutation::admits_reissued;
    const bool admitted = t.value() >= gate && !reissued;
    if (admitted) {
      gate = t.value();
      gate_owner = owner;
    }
    record(event_kind::write, n, owner, t.value(), static_cast<std::int64_t>(before),
           admitted   ? std::error_code{}
           : reissued ? std::error_code(errc::token_reissued)
                      : std::error_code(errc::stale_token));
  }
  void read(fencing_token t, const std::string& owner) {
    if (t.value() > gate) {
      gate = t.value();
      gate_owner = owner;
    }
  }

  rw_mutation mutation;
  simulator sim;
  sim_store<rw_coded_store> store;
  rw_front front;
  bool lossy;
  std::uint64_t gate = 0;
  std::string gate_owner;  // who presented `gate` (lossy: an equal token from another is refused)
};

using rw_lock = read_write_lease<rw_front, sim_clock>;

// Holds `l` for `slices` tenths of a TTL, renewing when due; while it is valid a writer writes the
// resource with its token each slice and a reader reads it (recorded: a writer's validity).
template <class Lease>
void rw_hold(rw_world& w, node_id n, Lease& l, int slices, bool writer) {
  const sim_clock clock = w.sim.clock(n);
  for (int s = 0; s < slices; ++s) {
    clock.sleep_until(clock.now() + rw_ttl / 10);
    if (!(clock.now() < l.renew_due_at())) (void)l.renew();
    const bool believes = l.valid();
    if (writer) w.record(event_kind::validity, n, l.owner(), l.token().value(), believes ? 1 : 0);
    if (!believes) return;
    if (writer) {
      w.write(l.token(), l.owner(), n);
    } else {
      w.read(l.token(), l.owner());
    }
  }
}

inline void rw_writer(rw_world& w, node_id n, const std::string& name) {
  for (std::uint32_t round = 0; round < 3; ++round) {
    const std::string owner = name + std::to_string(round);
    rw_lock lock(w.front, "k0", w.options(n, n * 131 + round, owner));
    auto l = lock.acquire_write(rw_ttl, 3 * rw_ttl);
    if (!l) {
      w.record(event_kind::acquire_failed, n, owner, 0, 0, l.error());
      continue;
    }
    w.record(event_kind::acquired, n, owner, l->token().value());
    rw_hold(w, n, *l, 1 + static_cast<int>(w.sim.decide(4)), true);
    w.record(event_kind::released, n, owner, l->token().value());
    (void)l->release();
  }
}

// A reader; every other round it then wants to write: the shipped way releases and acquires as a
// writer, the upgrade_in_place control writes under its shared lease.
inline void rw_reader(rw_world& w, node_id n, const std::string& name, rw_mutation m) {
  for (std::uint32_t round = 0; round < 3; ++round) {
    const std::string owner = name + std::to_string(round);
    rw_lock lock(w.front, "k0", w.options(n, n * 71 + round, owner));
    auto r = lock.acquire_read(rw_ttl, 3 * rw_ttl);
    if (!r) continue;
    rw_hold(w, n, *r, 1 + static_cast<int>(w.sim.decide(3)), false);
    if (w.sim.decide(2) == 0) continue;  // r releases its shared lease
    if (m == rw_mutation::upgrade_in_place) {
      if (r->valid()) w.write(r->token(), r->owner(), n);
      continue;
    }
    (void)r->release();
    auto l = lock.acquire_write(rw_ttl, 3 * rw_ttl);
    if (!l) {
      w.record(event_kind::acquire_failed, n, owner, 0, 0, l.error());
      continue;
    }
    w.record(event_kind::acquired, n, owner, l->token().value());
    rw_hold(w, n, *l, 1, true);
    w.record(event_kind::released, n, owner, l->token().value());
    (void)l->release();
  }
}

// The writers' part of a read-write history: every event but the store's operations on the
// shared keys (`r/...`), for check(): readers coexist, which S3 would call an overlap.
// A lagging restart's store_up counts the events before its copy (token): in the part, the
// events kept before that point.
inline history writers_part(const history& h) {
  history out = h;
  out.events.clear();
  std::vector<std::size_t> kept_before(h.events.size() + 1, 0);
  for (std::size_t i = 0; i < h.events.size(); ++i) {
    const event& e = h.events[i];
    kept_before[i] = out.events.size();
    const bool shared_key = e.key < h.keys.size() && h.keys[e.key].compare(0, 2, "r/") == 0;
    if (shared_key && e.kind != event_kind::store_up) continue;
    out.events.push_back(e);
    if (e.kind == event_kind::store_up && e.value > 0) {
      out.events.back().token = kept_before[std::min<std::size_t>(e.token, i)];
    }
  }
  return out;
}

}  // namespace detail

/// Runs one read-write schedule drawn from `src` with the negative control `m` (none: the shipped
/// code): two writers and three readers of one key under every fault (see the overview), and with
/// `lossy` restarts from lagging copies too. Returns the read-write properties' finding and S1-S5
/// on the writers' part of the history.
inline rw_verdict run_rw_schedule(decision_source& src, rw_mutation m = rw_mutation::none,
                                  bool lossy = false) {
  rw_verdict out;
  history log;
  {
    detail::rw_world w(src, m, lossy);
    for (int i = 0; i < 2; ++i) {
      const std::string name(1, static_cast<char>('W' + i));
      const node_id n = w.sim.add_client(name);
      w.sim.spawn(n, [&w, n, name] { detail::rw_writer(w, n, name); });
    }
    for (int i = 0; i < 3; ++i) {
      const std::string name(1, static_cast<char>('a' + i));
      const node_id n = w.sim.add_client(name);
      w.sim.spawn(n, [&w, n, name, m] { detail::rw_reader(w, n, name, m); });
    }
    w.sim.run();
    log = std::move(w.sim.log());
  }
  for (const event& e : log.events) {
    if (e.kind == event_kind::store_up && e.value > 0) ++out.lost_lives;
  }
  out.rw = check_read_write(log);
  out.base = check(detail::writers_part(log));
  return out;
}

}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_RW_WORKLOAD_HPP
