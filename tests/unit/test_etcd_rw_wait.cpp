// SPDX-License-Identifier: MIT
// etcd_store's read-write wait (wait_for_release_rw, stores/detail/etcd_rw_wait.hpp) against the
// shared etcd .ci/servers starts (HOLDFAST_ETCD_ENDPOINTS): a blocked writer woken by the last
// reader's release, a blocked reader by the writer's release, both through read_write_lease's
// blocking acquire (which waits in the store, not by backoff), with the requests the waiter sends
// counted (none while asleep); a waiting writer's intent kept alive past its TTL while a longer
// reader holds; a writer's lease expiring wakes a reader; a waiter whose watch
// stream is cut (closed) or muted (open, silent: a lost notification) through a proxy
// (tests/support/cut_proxy.hpp) still gets the key by the holder's expiry; free keys, past
// deadlines and bad arguments return at once. Every holder's TTL (5 s) is far above the bound a
// wake-up is held to (500 ms), so a waiter that slept to an expiry, or backed off, fails. ~14 s;
// the first case, tagged [concurrency], also runs under TSan.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "../support/cut_proxy.hpp"
#include "../support/etcd_faulty.hpp"
#include "../support/etcd_servers.hpp"
#include "../support/real_servers.hpp"
#include "holdfast/read_write_lease.hpp"
#include "holdfast/stores/etcd.hpp"

namespace test_etcd_rw_wait {

using holdfast::errc;
using holdfast::etcd_options;
using holdfast::etcd_store;
using holdfast::lease_mode;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;
constexpr lease_mode sh = lease_mode::shared;
constexpr lease_mode ex = lease_mode::exclusive;

static_assert(holdfast::can_wait_for_release_rw_v<etcd_store>);
static_assert(holdfast::can_wait_for_release_v<holdfast::read_write_view<etcd_store, ex>, steady>);
static_assert(holdfast::can_wait_for_release_v<holdfast::read_write_view<etcd_store, sh>, steady>);

namespace {

std::optional<etcd_options> shared() {
  return hf_test::shared_etcd("hf-rw-wait");
}

/// etcd_store that counts the requests it sends (the watch's stream is not one of them), and
/// keeps their paths for a failure's message.
struct counted : etcd_store {
  explicit counted(const etcd_options& o) : etcd_store(o) {
    link_.fault = [this](std::string_view path, std::string_view) {
      ++sent;
      const std::lock_guard<std::mutex> lock(paths_mutex);
      paths += std::string(path) + " ";
      return holdfast::detail::etcd_fault::none;
    };
  }
  std::string sent_paths() {
    const std::lock_guard<std::mutex> lock(paths_mutex);
    return paths;
  }
  std::atomic<int> sent{0};
  std::mutex paths_mutex;
  std::string paths;
};

double ms_between(steady::time_point a, steady::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

/// The port of the first endpoint ("http://127.0.0.1:P").
int port_of(const etcd_options& o) {
  const std::string& e = o.endpoints.front();
  return std::stoi(e.substr(e.rfind(':') + 1));
}

}  // namespace

TEST_CASE("etcd_store wait_for_release_rw: a waiting writer wakes at the last reader's release",
          "[etcd][read_write][wait][concurrency]") {
  std::optional<etcd_options> o = shared();
  if (!o) return;
  etcd_store holders(*o);
  counted waiter(*o);
  auto r1 = holders.try_acquire_rw("doc", "r1", 5s, sh);
  auto r2 = holders.try_acquire_rw("doc", "r2", 5s, sh);
  INFO(holders.last_error_message());
  REQUIRE(r1);
  REQUIRE(r2);
  holdfast::read_write_lease<etcd_store> doc(waiter, "doc");
  auto w = std::async(std::launch::async, [&] {
    auto l = doc.acquire_write(5s, 10s);
    return std::make_pair(steady::now(), std::move(l));
  });
  std::this_thread::sleep_for(300ms);  // the writer asked (intent), read, and sleeps
  const int before = waiter.sent.load();
  std::this_thread::sleep_for(400ms);
  CHECK(waiter.sent.load() == before);  // asleep: no request at all
  REQUIRE(holders.release_rw("doc", "r1", r1->token, sh));
  std::this_thread::sleep_for(300ms);
  REQUIRE(w.wait_for(0s) == std::future_status::timeout);  // r2 still holds
  const auto released = steady::now();
  REQUIRE(holders.release_rw("doc", "r2", r2->token, sh));
  REQUIRE(w.wait_for(3s) == std::future_status::ready);
  auto [woke, l] = w.get();
  INFO(waiter.last_error_message());
  REQUIRE(l);
  const double latency = ms_between(released, woke);
  INFO("woken " << latency << " ms after the last release; requests " << waiter.sent.load());
  CHECK(latency < 500);
  // The ask: lease/grant, txn (read), txn (intent) = 3; the wait, from that read: timetolive of
  // r1, r2 and the intent (its sleep at most half the intent's time left) = 3, and a range (its
  // watch, from now, is created past the read: the intent came between) = 1; r1's release: range
  // + 2 timetolive = 3; r2's: range = 1; the ask: lease/grant, txn (read), txn (grant, intent
  // deleted), revoke of the intent's lease = 4.
  CHECK(waiter.sent.load() <= 15);
  REQUIRE(l->release());
}

TEST_CASE("etcd_store wait_for_release_rw: a waiting writer's intent outlives its own TTL",
          "[etcd][read_write][wait]") {
  std::optional<etcd_options> o = shared();
  if (!o) return;
  etcd_store holders(*o);
  etcd_store waiter(*o);
  auto r1 = holders.try_acquire_rw("doc", "r1", 6s, sh);  // outlives the writer's 2 s intent
  REQUIRE(r1);
  holdfast::read_write_lease<etcd_store> doc(waiter, "doc");
  const auto t0 = steady::now();
  auto w = std::async(std::launch::async, [&] { return doc.acquire_write(2s, 10s); });
  // Asleep until the reader's expiry, the writer would let its intent lapse at 2 s and a new
  // reader in; waking at half the intent's time left, each ask renews it.
  std::this_thread::sleep_until(t0 + 3500ms);
  CHECK(holders.try_acquire_rw("doc", "late", 6s, sh).error() == errc::busy);
  REQUIRE(w.wait_for(0s) == std::future_status::timeout);
  const auto released = steady::now();
  REQUIRE(holders.release_rw("doc", "r1", r1->token, sh));
  REQUIRE(w.wait_for(3s) == std::future_status::ready);
  const double latency = ms_between(released, steady::now());
  auto l = w.get();
  INFO(waiter.last_error_message() << "; the writer " << latency << " ms after the release");
  REQUIRE(l);
  CHECK(latency < 500);
  REQUIRE(l->release());
}

TEST_CASE("etcd_store wait_for_release_rw: a waiting reader wakes at the writer's release",
          "[etcd][read_write][wait]") {
  std::optional<etcd_options> o = shared();
  if (!o) return;
  etcd_store holders(*o);
  counted waiter(*o);
  auto wg = holders.try_acquire_rw("doc", "w", 5s, ex);
  INFO(holders.last_error_message());
  REQUIRE(wg);
  holdfast::read_write_lease<etcd_store> doc(waiter, "doc");
  auto r = std::async(std::launch::async, [&] {
    auto l = doc.acquire_read(5s, 10s);
    return std::make_pair(steady::now(), std::move(l));
  });
  std::this_thread::sleep_for(300ms);
  const int before = waiter.sent.load();
  std::this_thread::sleep_for(400ms);
  CHECK(waiter.sent.load() == before);
  REQUIRE(r.wait_for(0s) == std::future_status::timeout);
  const auto released = steady::now();
  REQUIRE(holders.release_rw("doc", "w", wg->token, ex));
  REQUIRE(r.wait_for(3s) == std::future_status::ready);
  auto [woke, l] = r.get();
  INFO(waiter.last_error_message());
  REQUIRE(l);
  const double latency = ms_between(released, woke);
  INFO("woken " << latency << " ms after the release; requests " << waiter.sent.load() << ": "
                << waiter.sent_paths());
  CHECK(latency < 500);
  // grant+txn+revoke, timetolive, range, grant+txn: 7. CI's ASan build counted 8 once
  // (2026-12-08, which request was extra was not recorded; the paths are in the message now).
  // That the wait sends nothing while asleep is checked above; this bounds the rest.
  CHECK(waiter.sent.load() <= 8);
  CHECK(l->token() > wg->token);
  REQUIRE(l->release());
}

TEST_CASE(
    "etcd_store wait_for_release_rw: a grant deleted between the wait's read and its watch's "
    "creation wakes it at once",
    "[etcd][read_write][wait]") {
  // The watch is opened from now (etcd serves a watch from a passed revision out of a 100 ms sync
  // loop), so a deletion between the read and the watch is found by reading the range again. The
  // writer's record goes behind the store's back, its lease alive: without that read the reader
  // sleeps to its deadline.
  std::optional<etcd_options> o = shared();
  if (!o) return;
  etcd_store holders(*o);
  auto wg = holders.try_acquire_rw("doc", "w", 5s, ex);
  INFO(holders.last_error_message());
  REQUIRE(wg);
  struct between : etcd_store {
    explicit between(const etcd_options& opts) : etcd_store(opts) {
      link_.fault = [this](std::string_view path, std::string_view) {
        if (path == "/lease/timetolive" && once) {
          std::function<void()> f = std::move(once);
          once = nullptr;
          f();
        }
        return holdfast::detail::etcd_fault::none;
      };
    }
    std::function<void()> once;
  } waiter(*o);
  bool deleted = false;
  waiter.once = [&] { deleted = hf_test::etcd_delete_prefix(*o) > 0; };
  const auto t = steady::now();
  CHECK(waiter.wait_for_release_rw("doc", sh, steady::now() + 4s));
  CHECK(deleted);
  CHECK(ms_between(t, steady::now()) < 1000);  // not the 4 s deadline (the writer's TTL is 5 s)
}

TEST_CASE("etcd_store wait_for_release_rw: free modes, past deadlines, bad arguments at once",
          "[etcd][read_write][wait]") {
  std::optional<etcd_options> o = shared();
  if (!o) return;
  etcd_store s(*o);
  const auto t0 = steady::now();
  CHECK(s.wait_for_release_rw("free", ex, steady::now() + 5s));
  CHECK(s.wait_for_release_rw("free", sh, steady::now() + 5s));
  auto r = s.try_acquire_rw("doc", "r", 5s, sh);
  REQUIRE(r);
  CHECK(s.wait_for_release_rw("doc", sh, steady::now() + 5s));  // readers keep no reader out
  CHECK(s.wait_for_release_rw("doc", ex, steady::now() - 1s));  // the deadline passed
  CHECK(ms_between(t0, steady::now()) < 1000);
  CHECK(s.wait_for_release_rw("", ex, steady::now() + 5s).error() == errc::invalid_argument);
  CHECK(s.wait_for_release_rw("doc", static_cast<lease_mode>(7), steady::now() + 5s).error() ==
        errc::invalid_argument);
  const auto t1 = steady::now();  // a writer waits for the reader until the deadline
  CHECK(s.wait_for_release_rw("doc", ex, steady::now() + 300ms));
  CHECK(ms_between(t1, steady::now()) >= 290);
  holdfast::cancel_source stop;  // a stop ends the sleep at once
  auto c = std::async(std::launch::async, [&] {
    return s.wait_for_release_rw("doc", ex, steady::now() + 5s, stop.token());
  });
  std::this_thread::sleep_for(200ms);
  const auto stopped = steady::now();
  stop.request_stop();
  REQUIRE(c.wait_for(2s) == std::future_status::ready);
  CHECK(c.get().error() == errc::cancelled);
  CHECK(ms_between(stopped, steady::now()) < 500);
  REQUIRE(s.release_rw("doc", "r", r->token, sh));
}

TEST_CASE("etcd_store wait_for_release_rw: the writer's lease expiring wakes a reader",
          "[etcd][read_write][wait]") {
  std::optional<etcd_options> o = shared();
  if (!o) return;
  etcd_store holder(*o);
  etcd_store waiter(*o);
  auto wg = holder.try_acquire_rw("doc", "w", 2s, ex);  // never released: etcd ends it
  REQUIRE(wg);
  const auto granted = steady::now();
  // A wake-up at the lease's time left (timetolive's whole seconds, rounded down) may come just
  // before etcd ends it: the caller asks, and waits again (the watch sees the deletion).
  int wakes = 0;
  holdfast::result<holdfast::grant> g = errc::busy;
  while (!g && wakes < 4) {
    REQUIRE(waiter.wait_for_release_rw("doc", sh, granted + 10s));
    ++wakes;
    g = waiter.try_acquire_rw("doc", "r", 5s, sh);
  }
  const double after = ms_between(granted, steady::now());
  INFO("the key " << after << " ms after the 2 s grant, " << wakes << " wake-ups");
  REQUIRE(g);
  CHECK(after >= 1500);  // not before etcd's clock ended the lease (2 s, less what the grant took)
  CHECK(after < 3500);
  CHECK(wakes <= 3);  // timetolive rounds down: a sleep or two may end just before the expiry
}

TEST_CASE("etcd_store wait_for_release_rw: a cut or silent watch still wakes by the expiry",
          "[etcd][read_write][wait]") {
  std::optional<etcd_options> o = shared();
  if (!o) return;
  hf_test::cut_proxy proxy(port_of(*o));
  REQUIRE(proxy.port() > 0);
  etcd_options via = *o;
  via.endpoints = {"http://127.0.0.1:" + std::to_string(proxy.port())};
  etcd_store holder(*o);
  etcd_store waiter(via);
  const bool silent = GENERATE(false, true);
  INFO((silent ? "muted" : "cut") << " watch");
  auto wg = holder.try_acquire_rw("doc", "w", 3s, ex);  // never released: etcd ends it
  REQUIRE(wg);
  const auto granted = steady::now();
  holdfast::read_write_lease<etcd_store> doc(waiter, "doc");
  auto r = std::async(std::launch::async, [&] { return doc.acquire_read(5s, 10s); });
  std::this_thread::sleep_for(500ms);  // asleep on its watch, the newest connection
  if (silent) {
    proxy.mute_newest();  // the writer's expiry never reaches the waiter
  } else {
    proxy.cut_all();
  }
  REQUIRE(r.wait_for(8s) == std::future_status::ready);
  const double after = ms_between(granted, steady::now());
  auto l = r.get();
  INFO(waiter.last_error_message() << "; the key after " << after << " ms");
  REQUIRE(l);
  CHECK(after >= 2500);  // the writer's 3 s lease, not a wake-up by the fault
  CHECK(after < 5000);   // its expiry bounds the sleep (+ timetolive's rounding down)
  REQUIRE(l->release());
}

}  // namespace test_etcd_rw_wait
