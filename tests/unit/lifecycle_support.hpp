// SPDX-License-Identifier: MIT
// Test doubles shared by the lease-lifecycle tests (keepalive, mutex, cas store, hostile input):
// a LeaseStore wrapper that injects faults and counts calls, a clock that throws on demand, and a
// bounded real-time wait for tests that run real threads.
#ifndef HOLDFAST_TESTS_UNIT_LIFECYCLE_SUPPORT_HPP
#define HOLDFAST_TESTS_UNIT_LIFECYCLE_SUPPORT_HPP

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "holdfast/clock.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/result.hpp"
#include "holdfast/store.hpp"
#include "holdfast/stores/memory.hpp"

namespace lifecycle_test {

/// The exception the fault-injecting doubles throw; tests check it arrives unchanged.
struct injected_failure : std::runtime_error {
  explicit injected_failure(const char* what) : std::runtime_error(what) {}
};

/// Wraps a LeaseStore; each operation may be overridden by a hook (return nullopt to pass the call
/// through), and every call is counted. Thread-safe if the inner store is.
template <class Store>
class faulty_store {
 public:
  using acquire_hook = std::function<std::optional<holdfast::result<holdfast::grant>>(
      std::string_view key, std::string_view owner, std::chrono::milliseconds ttl)>;
  using renew_hook = std::function<std::optional<holdfast::result<holdfast::grant>>(
      std::string_view key, std::string_view owner, holdfast::fencing_token token,
      std::chrono::milliseconds ttl)>;
  using release_hook = std::function<std::optional<holdfast::result<void>>(
      std::string_view key, std::string_view owner, holdfast::fencing_token token)>;

  explicit faulty_store(Store& inner) : inner_(inner) {}

  holdfast::result<holdfast::grant> try_acquire(std::string_view key, std::string_view owner,
                                                std::chrono::milliseconds ttl) {
    ++acquire_calls;
    if (acquire_hook h = get(on_acquire_)) {
      if (auto r = h(key, owner, ttl)) return *r;
    }
    return inner_.try_acquire(key, owner, ttl);
  }

  holdfast::result<holdfast::grant> renew(std::string_view key, std::string_view owner,
                                          holdfast::fencing_token token,
                                          std::chrono::milliseconds ttl) {
    ++renew_calls;
    if (renew_hook h = get(on_renew_)) {
      if (auto r = h(key, owner, token, ttl)) return *r;
    }
    return inner_.renew(key, owner, token, ttl);
  }

  holdfast::result<void> release(std::string_view key, std::string_view owner,
                                 holdfast::fencing_token token) {
    ++release_calls;
    if (release_hook h = get(on_release_)) {
      if (auto r = h(key, owner, token)) return *r;
    }
    return inner_.release(key, owner, token);
  }

  void set_acquire_hook(acquire_hook h) { set(on_acquire_, std::move(h)); }
  void set_renew_hook(renew_hook h) { set(on_renew_, std::move(h)); }
  void set_release_hook(release_hook h) { set(on_release_, std::move(h)); }

  /// The next `n` renewals answer `e` (n < 0: all of them) without reaching the inner store.
  void fail_renewals(std::error_code e, int n = -1) {
    auto left = std::make_shared<std::atomic<int>>(n);
    set_renew_hook(
        [e, left](auto, auto, auto, auto) -> std::optional<holdfast::result<holdfast::grant>> {
          if (left->load() == 0) return std::nullopt;
          if (left->load() > 0) --*left;
          return holdfast::result<holdfast::grant>(e);
        });
  }
  /// The next `n` renewals throw injected_failure (n < 0: all of them).
  void throw_on_renewals(int n = -1) {
    auto left = std::make_shared<std::atomic<int>>(n);
    set_renew_hook(
        [left](auto, auto, auto, auto) -> std::optional<holdfast::result<holdfast::grant>> {
          if (left->load() == 0) return std::nullopt;
          if (left->load() > 0) --*left;
          throw injected_failure("renew exploded");
        });
  }
  /// The next `n` releases answer `e` (n < 0: all of them).
  void fail_releases(std::error_code e, int n = -1) {
    auto left = std::make_shared<std::atomic<int>>(n);
    set_release_hook([e, left](auto, auto, auto) -> std::optional<holdfast::result<void>> {
      if (left->load() == 0) return std::nullopt;
      if (left->load() > 0) --*left;
      return holdfast::result<void>(e);
    });
  }
  /// The next `n` releases throw injected_failure (n < 0: all of them).
  void throw_on_releases(int n = -1) {
    auto left = std::make_shared<std::atomic<int>>(n);
    set_release_hook([left](auto, auto, auto) -> std::optional<holdfast::result<void>> {
      if (left->load() == 0) return std::nullopt;
      if (left->load() > 0) --*left;
      throw injected_failure("release exploded");
    });
  }
  void clear_hooks() {
    set_acquire_hook(nullptr);
    set_renew_hook(nullptr);
    set_release_hook(nullptr);
  }

  std::atomic<int> acquire_calls{0};
  std::atomic<int> renew_calls{0};
  std::atomic<int> release_calls{0};

 private:
  template <class H>
  H get(const H& h) {
    std::lock_guard<std::mutex> lock(mu_);
    return h;
  }
  template <class H>
  void set(H& slot, H h) {
    std::lock_guard<std::mutex> lock(mu_);
    slot = std::move(h);
  }

  Store& inner_;
  std::mutex mu_;
  acquire_hook on_acquire_;
  renew_hook on_renew_;
  release_hook on_release_;
};

/// A manual clock whose now() throws injected_failure while armed. Not interruptible.
class throwing_clock {
 public:
  using duration = holdfast::manual_clock::duration;
  using time_point = std::chrono::time_point<throwing_clock, duration>;

  throwing_clock() : armed_(std::make_shared<std::atomic<bool>>(false)) {}
  explicit throwing_clock(holdfast::manual_clock base)
      : base_(std::move(base)), armed_(std::make_shared<std::atomic<bool>>(false)) {}

  time_point now() const {
    if (armed_->load()) throw injected_failure("clock exploded");
    return time_point(base_.now().time_since_epoch());
  }
  void sleep_until(time_point t) const {
    base_.sleep_until(holdfast::manual_clock::time_point(t.time_since_epoch()));
  }

  void arm(bool on = true) { armed_->store(on); }
  holdfast::manual_clock& base() { return base_; }

 private:
  holdfast::manual_clock base_;
  std::shared_ptr<std::atomic<bool>> armed_;
};

/// Waits in real time (at most `limit`) until `pred()` holds, yielding in between; for tests with
/// real threads, where the outcome is observable but not signalled.
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit = std::chrono::seconds(20)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

/// What the keepalive tests share: a memory store behind a faulty_store on one manual clock, leases
/// taken from it whose loss callbacks record their causes, and a way to set the time.
struct keepalive_fixture {
  using mstore = holdfast::memory_store<holdfast::manual_clock>;
  using fstore = faulty_store<mstore>;
  using flease = holdfast::lease<fstore, holdfast::manual_clock>;

  holdfast::manual_clock clock;
  mstore inner{clock};
  fstore store{inner};
  std::mutex mu;
  std::vector<holdfast::loss_cause> losses;

  holdfast::acquire_options<holdfast::manual_clock> opts(std::string owner = {}) {
    holdfast::acquire_options<holdfast::manual_clock> o;
    o.clock = clock;
    o.owner = std::move(owner);
    o.on_lost = [this](holdfast::loss_cause c) {
      std::lock_guard<std::mutex> lock(mu);
      losses.push_back(c);
    };
    return o;
  }
  flease take(std::string key = "orders",
              std::chrono::milliseconds ttl = std::chrono::seconds(10)) {
    auto l = holdfast::try_acquire(store, key, ttl, opts());
    REQUIRE(l);
    return std::move(*l);
  }
  std::vector<holdfast::loss_cause> seen() {
    std::lock_guard<std::mutex> lock(mu);
    return losses;
  }
  // Moves time to `t` after the epoch.
  void at(holdfast::manual_clock::duration t) { clock.set(holdfast::manual_clock::time_point(t)); }
};

}  // namespace lifecycle_test

#endif  // HOLDFAST_TESTS_UNIT_LIFECYCLE_SUPPORT_HPP
