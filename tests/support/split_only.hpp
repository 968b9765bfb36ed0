// SPDX-License-Identifier: MIT
// tests/support/split_only.hpp - what the send/receive suites of the Redis stores
// (test_redis_send_receive.cpp, test_redis_cluster_send_receive.cpp) drive their stores with:
// wait_reply(), which polls a store's descriptor until its request in flight is complete, and
// split_only<Store>, a LeaseStore whose every operation goes through the store's
// send/progress/receive (send_receive.hpp), so that the kit's contract checks exercise the split
// path; and gather_replies(), several stores' replies taken as they come. Test scratch only; not
// thread-safe (one request in flight per store, as the capability).
#ifndef HOLDFAST_TESTS_SUPPORT_SPLIT_ONLY_HPP
#define HOLDFAST_TESTS_SUPPORT_SPLIT_ONLY_HPP

#include <poll.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "holdfast/error.hpp"
#include "holdfast/send_receive.hpp"

namespace hf_test {

/// Waits (poll, 10 ms at a time) until `s`'s request in flight is complete, at most `bound`;
/// true if it is (also when `s` has no descriptor to wait on).
template <class Store>
bool wait_reply(Store& s, std::chrono::milliseconds bound) {
  const auto end = std::chrono::steady_clock::now() + bound;
  while (!s.progress()) {
    const holdfast::io_interest want = s.interest();
    if (want.fd < 0) return true;
    struct pollfd p {};
    p.fd = want.fd;
    p.events = static_cast<short>((want.read ? POLLIN : 0) | (want.write ? POLLOUT : 0));
    if (std::chrono::steady_clock::now() >= end) return false;
    (void)::poll(&p, 1, 10);
  }
  return true;
}

/// A LeaseStore over `Store` whose every operation goes through send/progress/receive. A declined
/// send (send_would_block) is followed by `on_decline(store, request)` (by default a blocking
/// connect(); a failure shows as the next send declining again) and sent once more; a send
/// declined again, or failing, answers store_unavailable. Each reply is waited for at most 5 s.
/// `sent` counts the requests sent, `declined` the sends declined.
template <class Store>
class split_only {
 public:
  using readier = std::function<void(Store&, const holdfast::store_request&)>;

  template <class Options>
  explicit split_only(
      Options o,
      readier on_decline = [](Store& s, const holdfast::store_request&) { (void)s.connect(); })
      : s_(std::move(o)), on_decline_(std::move(on_decline)) {}

  holdfast::result<holdfast::grant> try_acquire(std::string_view k, std::string_view o,
                                                std::chrono::milliseconds ttl) {
    return run({holdfast::store_op::try_acquire, k, o, {}, {}, ttl}).granted;
  }
  holdfast::result<holdfast::grant> renew(std::string_view k, std::string_view o,
                                          holdfast::fencing_token t,
                                          std::chrono::milliseconds ttl) {
    return run({holdfast::store_op::renew, k, o, t, {}, ttl}).granted;
  }
  holdfast::result<void> release(std::string_view k, std::string_view o,
                                 holdfast::fencing_token t) {
    return run({holdfast::store_op::release, k, o, t, {}, std::chrono::milliseconds(0)}).done;
  }
  holdfast::result<std::optional<holdfast::lease_record>> inspect(std::string_view k) {
    return run({holdfast::store_op::inspect, k, {}, {}, {}, std::chrono::milliseconds(0)}).record;
  }
  Store& store() { return s_; }
  int sent = 0, declined = 0;

 private:
  holdfast::store_reply run(const holdfast::store_request& r) {
    std::error_code ec = s_.send(r);
    if (ec == holdfast::send_would_block()) {
      ++declined;
      on_decline_(s_, r);
      ec = s_.send(r);
    }
    if (ec) {
      holdfast::store_reply out;
      out.granted = holdfast::errc::store_unavailable;
      out.done = holdfast::errc::store_unavailable;
      out.record = holdfast::errc::store_unavailable;
      return out;
    }
    ++sent;
    (void)wait_reply(s_, std::chrono::milliseconds(5000));
    return s_.receive();
  }
  Store s_;
  readier on_decline_;
};

/// What gather_replies() took: each store's reply (nullopt where none came) and how many are
/// missing.
struct gathered {
  std::vector<std::optional<holdfast::store_reply>> replies;
  std::size_t left = 0;
};

/// Waits (poll over every descriptor at once, 50 ms at a time, at most `bound`) for the reply of
/// each store in `stores` (pointer-likes to stores with one request in flight each), taking each
/// as it comes and the last store first when several are ready, so the order differs from the
/// sending order. The replies are in the stores' order.
template <class Stores>
gathered gather_replies(Stores& stores, std::chrono::milliseconds bound) {
  gathered out;
  out.replies.resize(stores.size());
  out.left = stores.size();
  const auto end = std::chrono::steady_clock::now() + bound;
  while (out.left > 0 && std::chrono::steady_clock::now() < end) {
    std::vector<struct pollfd> fds;
    for (std::size_t i = stores.size(); i-- > 0;) {
      if (out.replies[i]) continue;
      if (stores[i]->progress()) {
        out.replies[i] = stores[i]->receive();
        --out.left;
        continue;
      }
      const holdfast::io_interest want = stores[i]->interest();
      struct pollfd p {};
      p.fd = want.fd;
      p.events = static_cast<short>((want.read ? POLLIN : 0) | (want.write ? POLLOUT : 0));
      fds.push_back(p);
    }
    if (!fds.empty()) (void)::poll(fds.data(), fds.size(), 50);
  }
  return out;
}

}  // namespace hf_test

#endif  // HOLDFAST_TESTS_SUPPORT_SPLIT_ONLY_HPP
