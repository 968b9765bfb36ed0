// SPDX-License-Identifier: MIT
// tests/unit/test_support.hpp - shared helpers of the unit tests: readable Catch2 output for
// holdfast's vocabulary types, clocks that make blocking code testable without real sleeps, and a
// store whose every answer a test can script (garbage, errors, exceptions).
//
// Not a test file (only tests/unit/*.cpp are built); included by the test files that need it.
// Everything here is inline or a template, so including it from several files of one executable
// is fine.
#ifndef HOLDFAST_TESTS_UNIT_TEST_SUPPORT_HPP
#define HOLDFAST_TESTS_UNIT_TEST_SUPPORT_HPP

#include <catch2/catch.hpp>

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "holdfast/clock.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/result.hpp"
#include "holdfast/store.hpp"
#include "holdfast/stores/memory.hpp"

namespace Catch {
// Print error codes as "holdfast:busy (lease is held by another owner)" instead of "{?}".
template <>
struct StringMaker<std::error_code> {
  static std::string convert(const std::error_code& ec) {
    if (!ec) return "success";
    return std::string(ec.category().name()) + ":" + std::to_string(ec.value()) + " (" +
           ec.message() + ")";
  }
};
template <>
struct StringMaker<holdfast::errc> {
  static std::string convert(holdfast::errc e) {
    return StringMaker<std::error_code>::convert(make_error_code(e));
  }
};
// Durations and manual times print as nanosecond counts instead of "{?}". (Explicit
// specializations: they coexist with Catch's own chrono printers if those are ever enabled.)
template <>
struct StringMaker<std::chrono::nanoseconds> {
  static std::string convert(std::chrono::nanoseconds d) {
    return std::to_string(d.count()) + "ns";
  }
};
template <>
struct StringMaker<std::chrono::milliseconds> {
  static std::string convert(std::chrono::milliseconds d) {
    return std::to_string(d.count()) + "ms";
  }
};
template <>
struct StringMaker<holdfast::manual_clock::time_point> {
  static std::string convert(holdfast::manual_clock::time_point t) {
    return "t=" + std::to_string(t.time_since_epoch().count()) + "ns";
  }
};
}  // namespace Catch

namespace holdfast_test {

using namespace std::chrono_literals;
using ms = std::chrono::milliseconds;
using ns = std::chrono::nanoseconds;

/// The exception the throwing fakes throw: the tests check that exactly this object, unchanged,
/// reaches the caller.
struct store_failure : std::runtime_error {
  explicit store_failure(const std::string& what, int code)
      : std::runtime_error(what), code(code) {}
  int code;
};

/// A manual_clock whose sleep_until() moves time to the deadline itself: blocking code (acquire's
/// backoff) runs to completion on one thread, in virtual time, and the test can read how long it
/// "slept". Copies share one time and one sleep log.
class jump_clock {
 public:
  using duration = holdfast::manual_clock::duration;
  using time_point = holdfast::manual_clock::time_point;

  [[nodiscard]] time_point now() const { return clock_.now(); }
  void sleep_until(time_point deadline) const {
    log_->push_back(deadline);
    if (clock_.now() < deadline) clock_.set(deadline);
  }

  /// The shared manual time (advance/set it like any manual_clock).
  [[nodiscard]] holdfast::manual_clock& manual() { return clock_; }
  /// Every deadline sleep_until() was called with, in order.
  [[nodiscard]] const std::vector<time_point>& sleeps() const { return *log_; }

 private:
  mutable holdfast::manual_clock clock_;
  std::shared_ptr<std::vector<time_point>> log_ = std::make_shared<std::vector<time_point>>();
};

/// A clock that ticks in whole seconds (a coarse clock), driven by a manual_clock: now() is the
/// manual time truncated to a second.
class coarse_clock {
 public:
  using duration = std::chrono::seconds;
  using time_point = std::chrono::time_point<coarse_clock, duration>;

  [[nodiscard]] time_point now() const {
    return time_point(std::chrono::duration_cast<duration>(fine_.now().time_since_epoch()));
  }
  void sleep_until(time_point deadline) const {
    fine_.sleep_until(holdfast::manual_clock::time_point(deadline.time_since_epoch()));
  }
  [[nodiscard]] holdfast::manual_clock& fine() { return fine_; }

 private:
  mutable holdfast::manual_clock fine_;
};

/// A store clock that reads a manual_clock's time rounded *down* to a tick of `q` and declares
/// that tick (clock_tick() sees it): a coarse clock such as a jiffy-based or whole-second one.
/// The test moves the shared manual_clock (`fine()`), which a holder may read exactly.
class rounding_clock {
 public:
  using duration = std::chrono::nanoseconds;
  using time_point = std::chrono::time_point<rounding_clock, duration>;

  /// An exact clock of its own (acquire_options needs a default-constructible clock).
  rounding_clock() = default;
  rounding_clock(holdfast::manual_clock fine, duration q) : fine_(std::move(fine)), q_(q) {}

  [[nodiscard]] time_point now() const {
    const duration t = fine_.now().time_since_epoch();
    duration r = t % q_;
    if (r < duration::zero()) r += q_;
    return time_point(t - r);
  }
  void sleep_until(time_point deadline) const {
    fine_.sleep_until(holdfast::manual_clock::time_point(deadline.time_since_epoch()));
  }
  [[nodiscard]] duration tick() const noexcept { return q_; }
  [[nodiscard]] holdfast::manual_clock& fine() { return fine_; }

 private:
  mutable holdfast::manual_clock fine_;
  duration q_{1};
};

/// A manual_clock whose now() throws store_failure while `fail` is set (a clock is user code too).
class throwing_clock {
 public:
  using duration = holdfast::manual_clock::duration;
  using time_point = holdfast::manual_clock::time_point;

  [[nodiscard]] time_point now() const {
    if (*fail_) throw store_failure("clock failed", 7);
    return clock_.now();
  }
  void sleep_until(time_point deadline) const { clock_.sleep_until(deadline); }
  void set_failing(bool f) { *fail_ = f; }
  [[nodiscard]] holdfast::manual_clock& manual() { return clock_; }

 private:
  holdfast::manual_clock clock_;
  std::shared_ptr<bool> fail_ = std::make_shared<bool>(false);
};

/// A LeaseStore over a real memory_store whose answers a test may override one operation at a
/// time, and which counts and logs every call. An unset hook forwards to the inner store; a hook
/// may call `inner` itself (e.g. to grant and then "lose the reply").
struct scripted_store {
  using acquire_fn =
      std::function<holdfast::result<holdfast::grant>(std::string_view, std::string_view, ms)>;
  using renew_fn = std::function<holdfast::result<holdfast::grant>(
      std::string_view, std::string_view, holdfast::fencing_token, ms)>;
  using release_fn = std::function<holdfast::result<void>(std::string_view, std::string_view,
                                                          holdfast::fencing_token)>;

  explicit scripted_store(holdfast::manual_clock clock) : inner(std::move(clock)) {}

  holdfast::result<holdfast::grant> try_acquire(std::string_view key, std::string_view owner,
                                                ms ttl) {
    ++acquires;
    owners.emplace_back(owner);
    if (on_acquire) return on_acquire(key, owner, ttl);
    return inner.try_acquire(key, owner, ttl);
  }
  holdfast::result<holdfast::grant> renew(std::string_view key, std::string_view owner,
                                          holdfast::fencing_token token, ms ttl) {
    ++renews;
    if (on_renew) return on_renew(key, owner, token, ttl);
    return inner.renew(key, owner, token, ttl);
  }
  holdfast::result<void> release(std::string_view key, std::string_view owner,
                                 holdfast::fencing_token token) {
    ++releases;
    if (on_release) return on_release(key, owner, token);
    return inner.release(key, owner, token);
  }

  holdfast::memory_store<holdfast::manual_clock> inner;
  acquire_fn on_acquire;
  renew_fn on_renew;
  release_fn on_release;
  int acquires = 0;
  int renews = 0;
  int releases = 0;
  std::vector<std::string> owners;  ///< The owner of every try_acquire call, in order.
};

/// Returns the live record of `key` in `store`, or nullopt; fails the test if inspect() errs.
template <class Store>
std::optional<holdfast::lease_record> record_of(const Store& store, std::string_view key) {
  auto r = store.inspect(key);
  REQUIRE(r.has_value());
  return *r;
}

/// Compares two inspect() snapshots field by field.
inline bool same_record(const std::optional<holdfast::lease_record>& a,
                        const std::optional<holdfast::lease_record>& b) {
  if (a.has_value() != b.has_value()) return false;
  if (!a) return true;
  return a->owner == b->owner && a->token == b->token && a->remaining == b->remaining;
}

}  // namespace holdfast_test

#endif  // HOLDFAST_TESTS_UNIT_TEST_SUPPORT_HPP
