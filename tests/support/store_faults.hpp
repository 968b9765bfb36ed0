// SPDX-License-Identifier: MIT
// tests/support/store_faults.hpp - the fault checks every real-store test suite makes the same way
// (Redis, PostgreSQL, etcd): a server killed under a client that keeps calling, and what a store
// and a lease over it must answer once the server is gone (T4: errors only, never a grant it did
// not make; the lease learns it is lost from its own clock).
#ifndef HOLDFAST_TESTS_SUPPORT_STORE_FAULTS_HPP
#define HOLDFAST_TESTS_SUPPORT_STORE_FAULTS_HPP

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "holdfast/clock.hpp"
#include "holdfast/error.hpp"
#include "holdfast/lease.hpp"
#include "real_servers.hpp"

namespace hf_test {

/// How long check_kill_mid_run lets the worker run, and when it stops.
struct kill_run_options {
  int ops_before_kill = 50;  ///< the kill comes once the worker has made this many calls
  int max_ops = 2000;        ///< the worker's whole run, at most
  int enough_errors = 20;    ///< the worker stops after this many errors after the kill
  std::chrono::milliseconds warmup_bound{10000};  ///< how long to wait for ops_before_kill
};

/// A worker acquires and releases eight keys in turn on a store of its own (`make()`), while this
/// thread kills the server with `kill()` part-way through. Checks: no grant after the kill, at
/// least one error, and every error store_unavailable or timeout.
template <class MakeStore, class Kill>
void check_kill_mid_run(MakeStore make, Kill kill, kill_run_options o = {}) {
  std::atomic<bool> killed{false};
  std::atomic<int> ops{0};
  std::atomic<int> grants_after_kill{0};
  std::atomic<int> errors_after_kill{0};
  std::mutex mu;
  std::vector<std::string> bad;
  std::thread worker([&] {
    auto w = make();
    for (int i = 0; i < o.max_ops && errors_after_kill < o.enough_errors; ++i) {
      ++ops;
      const bool was_killed = killed.load();
      const std::string key = "churn-" + std::to_string(i % 8);
      auto g = w.try_acquire(key, "worker", std::chrono::milliseconds(10000));
      if (g) {
        if (was_killed) ++grants_after_kill;
        (void)w.release(key, "worker", g->token);
      } else if (was_killed) {
        ++errors_after_kill;
        if (g.error() != holdfast::errc::store_unavailable &&
            g.error() != holdfast::errc::timeout) {
          std::lock_guard<std::mutex> lock(mu);
          bad.push_back(g.error().message());
        }
      }
    }
  });
  CHECK(wait_until([&] { return ops >= o.ops_before_kill; }, o.warmup_bound));
  kill();
  killed = true;
  worker.join();
  CHECK(grants_after_kill == 0);
  CHECK(errors_after_kill > 0);
  CHECK(bad.empty());
}

/// With the server gone: every operation of `s` reports store_unavailable or timeout, never a
/// value, and says why in last_error_message(); the lease `l` (held, on `clock`, TTL 10 s) fails
/// to renew transiently and stays held and valid until its own clock passes its validity, then
/// knows it is lost without the store.
template <class Store, class Lease>
void check_dead_store(Store& s, Lease& l, holdfast::manual_clock& clock) {
  using holdfast::errc;
  using std::chrono::milliseconds;
  for (auto e : {s.try_acquire("x", "y", milliseconds(100)).error(),
                 s.renew("held", l.owner(), l.token(), milliseconds(100)).error(),
                 s.release("held", l.owner(), l.token()).error(), s.inspect("held").error()}) {
    CHECK((e == errc::store_unavailable || e == errc::timeout));
  }
  CHECK_FALSE(s.last_error_message().empty());
  auto r = l.renew();
  CHECK((r.error() == errc::store_unavailable || r.error() == errc::timeout));
  CHECK(l.state() == holdfast::lease_state::held);
  CHECK(l.valid());
  clock.advance(std::chrono::seconds(10));
  CHECK_FALSE(l.valid());
  CHECK(l.renew().error() == errc::lease_lost);
  CHECK(l.state() == holdfast::lease_state::lost);
}

}  // namespace hf_test

#endif  // HOLDFAST_TESTS_SUPPORT_STORE_FAULTS_HPP
