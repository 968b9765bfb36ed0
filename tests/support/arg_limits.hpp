// SPDX-License-Identifier: MIT
// tests/support/arg_limits.hpp - check_arg_limits: every entry point a store offers that takes a
// key or an owner (the LeaseStore operations and each optional capability it has: inspect,
// try_acquire_until, the queued acquire, leave_queue, the waits, try_acquire_all, the read-write
// operations, blocking acquire()) refuses a key, and one an owner, over the store's size limit
// with invalid_argument at once, names the limit in last_error_message(), and connects to
// nothing: the store points at a black_hole, which counts connections (one that sent would also
// wait for its command timeout there). Shared by the test_arg_limits_*.cpp files.
#ifndef HOLDFAST_TESTS_SUPPORT_ARG_LIMITS_HPP
#define HOLDFAST_TESTS_SUPPORT_ARG_LIMITS_HPP

#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "black_hole.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/read_write_lease.hpp"
#include "holdfast/store.hpp"
#include "holdfast/store_deadline.hpp"

namespace hf_test {

/// `call` (returning a std::error_code) is refused with invalid_argument within 5 s (the stores
/// under test wait 10 s for a black hole; copying 512 MiB takes a while on a loaded machine),
/// `hole` saw no connection, and `s`'s message contains `limit` (the limit it names).
template <class Store, class Call>
void refused_at_once(black_hole& hole, Store& s, const char* what, std::string_view limit,
                     Call call) {
  INFO(what);
  const auto t0 = std::chrono::steady_clock::now();
  const std::error_code ec = call();
  CHECK(ec == holdfast::errc::invalid_argument);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5));
  CHECK(hole.connections() == 0);
  INFO(s.last_error_message());
  CHECK(s.last_error_message().find(limit) != std::string::npos);
}

/// Runs every key-and-owner entry point `s` offers with `big` (over its limit both as a key and
/// as an owner) as the key, then as the owner, and every key-only one with `big` as the key; with
/// `keys_limited` false (a store whose keys have no limit: ZooKeeper hashes long ones) only
/// as the owner.
template <class Store>
void check_arg_limits(black_hole& hole, Store& s, std::string_view big, std::string_view limit,
                      bool keys_limited = true) {
  using namespace std::chrono_literals;
  using holdfast::lease_mode;
  using clk = std::chrono::steady_clock;
  const holdfast::fencing_token t{7};
  const auto later = clk::now() + 5s;
  for (const auto& ko : {std::pair<std::string_view, std::string_view>{big, "owner"},
                         std::pair<std::string_view, std::string_view>{"key", big}}) {
    const std::string_view k = ko.first;
    const std::string_view o = ko.second;
    if (!keys_limited && k == big) continue;
    refused_at_once(hole, s, "try_acquire", limit, [&] { return s.try_acquire(k, o, 3s).error(); });
    refused_at_once(hole, s, "renew", limit, [&] { return s.renew(k, o, t, 3s).error(); });
    refused_at_once(hole, s, "release", limit, [&] { return s.release(k, o, t).error(); });
    if constexpr (holdfast::has_try_acquire_until_v<Store>) {
      refused_at_once(hole, s, "try_acquire_until", limit,
                      [&] { return s.try_acquire_until(k, o, 3s, later).error(); });
    }
    if constexpr (holdfast::has_try_acquire_queued_v<Store>) {
      refused_at_once(hole, s, "try_acquire_queued", limit,
                      [&] { return s.try_acquire_queued(k, o, 3s).error(); });
    }
    if constexpr (holdfast::has_try_acquire_queued_until_v<Store>) {
      refused_at_once(hole, s, "try_acquire_queued_until", limit,
                      [&] { return s.try_acquire_queued_until(k, o, 3s, later).error(); });
    }
    if constexpr (holdfast::has_try_acquire_all_v<Store>) {
      holdfast::grant g[1];
      refused_at_once(hole, s, "try_acquire_all", limit,
                      [&] { return s.try_acquire_all(&k, 1, o, 3s, g).error(); });
    }
    if constexpr (holdfast::has_read_write_v<Store>) {
      refused_at_once(hole, s, "try_acquire_rw", limit,
                      [&] { return s.try_acquire_rw(k, o, 3s, lease_mode::shared).error(); });
      refused_at_once(hole, s, "renew_rw", limit,
                      [&] { return s.renew_rw(k, o, t, 3s, lease_mode::shared).error(); });
      refused_at_once(hole, s, "release_rw", limit,
                      [&] { return s.release_rw(k, o, t, lease_mode::shared).error(); });
    }
    holdfast::acquire_options<> ao;
    ao.owner = std::string(o);
    refused_at_once(hole, s, "acquire()", limit,
                    [&] { return holdfast::acquire(s, k, 3s, 3s, ao).error(); });
  }
  if (!keys_limited) return;
  if constexpr (holdfast::has_inspect_v<Store>) {
    refused_at_once(hole, s, "inspect", limit, [&] { return s.inspect(big).error(); });
  }
  if constexpr (holdfast::has_leave_queue_v<Store>) {
    refused_at_once(hole, s, "leave_queue", limit, [&] { return s.leave_queue(big).error(); });
  }
  if constexpr (holdfast::can_wait_for_release_v<Store, clk>) {
    refused_at_once(hole, s, "wait_for_release", limit,
                    [&] { return s.wait_for_release(big, later).error(); });
  }
  if constexpr (holdfast::can_watch_release_v<Store, clk>) {
    refused_at_once(hole, s, "watch_release", limit,
                    [&] { return s.watch_release(big, later).error(); });
  }
  if constexpr (holdfast::can_wait_for_release_rw_v<Store>) {
    refused_at_once(hole, s, "wait_for_release_rw", limit, [&] {
      return s.wait_for_release_rw(big, lease_mode::exclusive, later).error();
    });
  }
  if constexpr (holdfast::can_wait_for_release_any_v<Store, clk>) {
    const std::vector<std::string> keys{"a", std::string(big)};
    refused_at_once(hole, s, "wait_for_release_any", limit,
                    [&] { return s.wait_for_release_any(keys, later).error(); });
  }
}

}  // namespace hf_test

#endif  // HOLDFAST_TESTS_SUPPORT_ARG_LIMITS_HPP
