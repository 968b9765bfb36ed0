// SPDX-License-Identifier: MIT
// keepalive.hpp's batch path (lease/detail/batch_renew.hpp): the due leases of a store that offers
// renew_batch go out in one call, and each is judged as its own renew() would be: ordering,
// grouping by store, one failure or lost reply among many, a lease released, destroyed or removed
// around the batch, a store that throws, a clock that jumps back. Driven by poll() on a
// manual_clock (no thread), except the remove() from another thread.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "holdfast/keepalive.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/send_receive.hpp"
#include "holdfast/stores/memory.hpp"
#include "lifecycle_support.hpp"

namespace test_keepalive_batch {

using namespace std::chrono_literals;
using holdfast::errc;
using holdfast::keepalive;
using holdfast::keepalive_options;
using holdfast::lease_state;
using holdfast::loss_cause;
using holdfast::manual_clock;

namespace {

using mstore = holdfast::memory_store<manual_clock>;

// A faulty_store (hooks per renewal) that also offers renew_batch, recording each batch's keys.
class batch_store : public lifecycle_test::faulty_store<mstore> {
 public:
  using faulty_store::faulty_store;

  void renew_batch(const holdfast::store_request* q, std::size_t n,
                   holdfast::result<holdfast::grant>* out) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      std::vector<std::string> keys;
      for (std::size_t i = 0; i < n; ++i) keys.emplace_back(q[i].key);
      batches.push_back(keys);
    }
    if (during_batch) during_batch();
    if (throw_batch) throw lifecycle_test::injected_failure("batch exploded");
    for (std::size_t i = 0; i < n; ++i) out[i] = renew(q[i].key, q[i].owner, q[i].token, q[i].ttl);
  }

  std::vector<std::vector<std::string>> seen() {
    std::lock_guard<std::mutex> lock(mu_);
    return batches;
  }

  std::function<void()> during_batch;
  bool throw_batch = false;

 private:
  std::mutex mu_;
  std::vector<std::vector<std::string>> batches;
};

static_assert(holdfast::detail::has_renew_batch_v<batch_store>);
static_assert(!holdfast::detail::has_renew_batch_v<mstore>);

using blease = holdfast::lease<batch_store, manual_clock>;

struct fixture {
  manual_clock clock;
  mstore inner{clock};
  batch_store store{inner};
  std::mutex mu;
  std::vector<std::pair<std::string, loss_cause>> losses;

  blease take(const std::string& key, std::chrono::milliseconds ttl = 10s) {
    return take_from(store, key, ttl);
  }
  blease take_from(batch_store& s, const std::string& key, std::chrono::milliseconds ttl = 10s) {
    holdfast::acquire_options<manual_clock> o;
    o.clock = clock;
    o.on_lost = [this, key](loss_cause c) {
      std::lock_guard<std::mutex> lock(mu);
      losses.emplace_back(key, c);
    };
    auto l = holdfast::try_acquire(s, key, ttl, o);
    REQUIRE(l);
    return std::move(*l);
  }
  std::vector<std::pair<std::string, loss_cause>> seen() {
    std::lock_guard<std::mutex> lock(mu);
    return losses;
  }
  void at(manual_clock::duration t) { clock.set(manual_clock::time_point(t)); }
};

keepalive_options options(std::size_t max_batch = 256) {
  keepalive_options o;
  o.start_thread = false;
  o.retry.initial = 100ms;
  o.retry.max_delay = 1s;
  o.retry.seed = 42;
  o.max_batch = max_batch;
  return o;
}

using keys = std::vector<std::string>;

// The next `n` renewals of `key` answer `e` without reaching the store (lost = true: they reach
// it and apply, and only the reply is lost).
void fail_key(batch_store& s, mstore& inner, const std::string& key, std::error_code e, int n,
              bool lost = false) {
  auto left = std::make_shared<int>(n);
  s.set_renew_hook(
      [=, &inner](
          std::string_view k, std::string_view owner, holdfast::fencing_token t,
          std::chrono::milliseconds ttl) -> std::optional<holdfast::result<holdfast::grant>> {
        if (k != key || *left == 0) return std::nullopt;
        if (*left > 0) --*left;
        if (lost) (void)inner.renew(k, owner, t, ttl);
        return holdfast::result<holdfast::grant>(e);
      });
}

}  // namespace

TEST_CASE("keepalive batch: the due leases of one store go out in one call, in due order",
          "[keepalive][keepalive_batch]") {
  fixture f;
  keepalive<manual_clock> ka(f.clock, options());
  blease a = f.take("a");
  f.at(1s);
  blease b = f.take("b");
  blease c = f.take("c");
  REQUIRE(ka.add(b));
  REQUIRE(ka.add(a));
  REQUIRE(ka.add(c));
  f.at(5s - 1ns);  // nothing due yet: a is due at 5 s, b and c at 6 s
  CHECK(ka.poll() == manual_clock::time_point(5s));
  CHECK(f.store.seen().empty());
  f.at(6s);
  // a (due 5 s), then b and c (due 6 s, in the order they were added): one call.
  CHECK(ka.poll() == manual_clock::time_point(11s));
  REQUIRE(f.store.seen().size() == 1);
  CHECK(f.store.seen()[0] == keys{"a", "b", "c"});
  CHECK(ka.stats().renewals == 3);
  CHECK(ka.stats().batches == 1);
  CHECK(f.store.renew_calls == 3);
  // Each validity runs from the clock read before the batch left: 6 s.
  for (blease* l : {&a, &b, &c}) {
    CHECK(l->acquired_at() == manual_clock::time_point(6s));
    CHECK(l->state() == lease_state::held);
  }
}

TEST_CASE("keepalive batch: max_batch splits a store's due leases; 1 renews one at a time",
          "[keepalive][keepalive_batch]") {
  const std::size_t max_batch = GENERATE(std::size_t{1}, std::size_t{2}, std::size_t{256});
  fixture f;
  keepalive<manual_clock> ka(f.clock, options(max_batch));
  std::vector<blease> held;
  for (const char* k : {"a", "b", "c", "d", "e"}) held.push_back(f.take(k));
  for (blease& l : held) REQUIRE(ka.add(l));
  f.at(5s);
  CHECK(ka.poll() == manual_clock::time_point(10s));
  CHECK(ka.stats().renewals == 5);
  CHECK(f.store.renew_calls == 5);
  if (max_batch == 1) {
    CHECK(f.store.seen().empty());  // the one-at-a-time path, as for a store without renew_batch
    CHECK(ka.stats().batches == 0);
  } else if (max_batch == 2) {
    CHECK(f.store.seen() == std::vector<keys>{{"a", "b"}, {"c", "d"}, {"e"}});
    CHECK(ka.stats().batches == 3);
  } else {
    CHECK(f.store.seen() == std::vector<keys>{{"a", "b", "c", "d", "e"}});
  }
  keepalive_options bad = options(0);
  CHECK(bad.check() == errc::invalid_argument);
  CHECK(bad.problem() == "max_batch of 0 is not in [1, 65536]");
  bad.max_batch = 65537;
  CHECK(bad.check() == errc::invalid_argument);
}

TEST_CASE("keepalive batch: leases on two stores go out in two calls",
          "[keepalive][keepalive_batch]") {
  fixture f;
  mstore inner2{f.clock};
  batch_store store2{inner2};
  keepalive<manual_clock> ka(f.clock, options());
  blease a = f.take("a");
  blease x = f.take_from(store2, "x");
  blease b = f.take("b");
  blease y = f.take_from(store2, "y");
  for (blease* l : {&a, &x, &b, &y}) REQUIRE(ka.add(*l));
  f.at(5s);
  CHECK(ka.poll() == manual_clock::time_point(10s));
  CHECK(f.store.seen() == std::vector<keys>{{"a", "b"}});
  CHECK(store2.seen() == std::vector<keys>{{"x", "y"}});
  CHECK(ka.stats().renewals == 4);
}

TEST_CASE("keepalive batch: one refusal and one transient failure affect only their own lease",
          "[keepalive][keepalive_batch]") {
  fixture f;
  keepalive<manual_clock> ka(f.clock, options());
  blease a = f.take("a");
  blease b = f.take("b");
  blease c = f.take("c");
  blease d = f.take("d");
  for (blease* l : {&a, &b, &c, &d}) REQUIRE(ka.add(*l));
  auto left = std::make_shared<int>(1);
  f.store.set_renew_hook([left](std::string_view k, auto, auto,
                                auto) -> std::optional<holdfast::result<holdfast::grant>> {
    if (k == "b") return holdfast::result<holdfast::grant>(errc::lease_lost);
    if (k == "c" && *left > 0) {
      --*left;
      return holdfast::result<holdfast::grant>(errc::store_unavailable);
    }
    return std::nullopt;
  });
  f.at(5s);
  const auto next = ka.poll();
  REQUIRE(next);
  CHECK(*next < manual_clock::time_point(5s + 1s + 1ns));  // c's retry, within the backoff
  CHECK(a.state() == lease_state::held);
  CHECK(a.acquired_at() == manual_clock::time_point(5s));
  CHECK(b.state() == lease_state::lost);
  CHECK(b.loss() == loss_cause::renew_refused);
  CHECK(c.state() == lease_state::held);
  CHECK(c.last_error() == errc::store_unavailable);
  CHECK(c.acquired_at() == manual_clock::time_point(0s));  // not renewed: validity unchanged
  CHECK(d.acquired_at() == manual_clock::time_point(5s));
  CHECK(f.seen() ==
        std::vector<std::pair<std::string, loss_cause>>{{"b", loss_cause::renew_refused}});
  CHECK(ka.stats().losses == 1);
  CHECK(ka.stats().retries == 1);
  CHECK(ka.size() == 3);
  f.at(*next - manual_clock::time_point{});
  CHECK(ka.poll() == manual_clock::time_point(10s));  // a and d next due at 10 s
  CHECK(c.acquired_at() == *next);
  CHECK(f.store.seen().back() == keys{"c"});  // a batch of one
}

TEST_CASE(
    "keepalive batch: a lost reply is unknown, retried, and loses the lease only when "
    "validity runs out",
    "[keepalive][keepalive_batch]") {
  fixture f;
  keepalive<manual_clock> ka(f.clock, options());
  blease a = f.take("a");
  blease b = f.take("b");
  blease c = f.take("c");
  for (blease* l : {&a, &b, &c}) REQUIRE(ka.add(*l));
  SECTION("one lost reply: the retry renews it") {
    fail_key(f.store, f.inner, "b", errc::timeout, 1, true);
    f.at(5s);
    const auto next = ka.poll();
    REQUIRE(next);
    CHECK(b.state() == lease_state::held);
    CHECK(b.last_error() == errc::timeout);
    CHECK(b.acquired_at() == manual_clock::time_point(0s));  // trusts only what it knows
    CHECK(a.acquired_at() == manual_clock::time_point(5s));
    CHECK(c.acquired_at() == manual_clock::time_point(5s));
    f.at(*next - manual_clock::time_point{});
    (void)ka.poll();
    CHECK(b.state() == lease_state::held);
    CHECK(b.acquired_at() == *next);
    CHECK(f.seen().empty());
  }
  SECTION("every reply of b lost: b turns lost at its validity, the others stay") {
    fail_key(f.store, f.inner, "b", errc::timeout, -1, true);
    f.at(5s);
    std::optional<manual_clock::time_point> next = ka.poll();
    const auto b_valid = b.valid_until();
    for (int i = 0; i < 100 && b.state() == lease_state::held && next; ++i) {
      CHECK(*next <= b_valid);  // never retried after its validity
      f.at(*next - manual_clock::time_point{});
      next = ka.poll();
    }
    CHECK(b.state() == lease_state::lost);
    CHECK(b.loss() == loss_cause::validity_passed);
    CHECK(f.clock.now() == b_valid);
    CHECK(a.state() == lease_state::held);
    CHECK(c.state() == lease_state::held);
    CHECK(f.seen() ==
          std::vector<std::pair<std::string, loss_cause>>{{"b", loss_cause::validity_passed}});
  }
}

TEST_CASE("keepalive batch: a store exception fails the whole batch transiently",
          "[keepalive][keepalive_batch]") {
  fixture f;
  keepalive<manual_clock> ka(f.clock, options());
  blease a = f.take("a");
  blease b = f.take("b");
  REQUIRE(ka.add(a));
  REQUIRE(ka.add(b));
  f.store.throw_batch = true;
  f.at(5s);
  const auto next = ka.poll();
  REQUIRE(next);
  for (blease* l : {&a, &b}) {
    CHECK(l->state() == lease_state::held);
    CHECK(l->last_error() == errc::caught_exception);
  }
  CHECK(ka.stats().retries == 2);
  CHECK(*next <= manual_clock::time_point(5s + 100ms));  // each its own jittered backoff
  f.store.throw_batch = false;
  f.at(5s + 100ms);
  (void)ka.poll();
  CHECK(a.acquired_at() == manual_clock::time_point(5s + 100ms));
  CHECK(b.acquired_at() == manual_clock::time_point(5s + 100ms));
  CHECK(f.store.seen().size() == 2);  // the retries: at the same instant, one batch
}

TEST_CASE("keepalive batch: released, destroyed and lost leases are not sent",
          "[keepalive][keepalive_batch]") {
  fixture f;
  keepalive<manual_clock> ka(f.clock, options());
  blease a = f.take("a");
  auto b = std::make_unique<blease>(f.take("b"));
  blease c = f.take("c");
  blease d = f.take("d", 6s);  // valid until ~5.94 s: due at 3 s
  for (blease* l : {&a, b.get(), &c, &d}) REQUIRE(ka.add(*l));
  REQUIRE(c.release());
  b.reset();  // destroyed: released by its destructor
  f.store.fail_renewals(errc::store_unavailable, -1);
  f.at(3s);
  (void)ka.poll();  // d fails transiently, alone
  f.store.clear_hooks();
  f.at(6s);  // a due at 5 s; d's validity passed: it turns lost in the batch, unsent
  CHECK(ka.poll() == manual_clock::time_point(11s));
  CHECK(f.store.seen().back() == keys{"a"});
  CHECK(d.loss() == loss_cause::validity_passed);
  CHECK(ka.size() == 1);
}

TEST_CASE("keepalive batch: a clock that jumps back loses every lease of the batch, unsent",
          "[keepalive][keepalive_batch]") {
  fixture f;
  keepalive<manual_clock> ka(f.clock, options());
  blease a = f.take("a");
  blease b = f.take("b");
  REQUIRE(ka.add(a));
  REQUIRE(ka.add(b));
  f.at(2s);
  (void)ka.poll();
  CHECK(a.valid());  // both leases read the clock at 2 s
  CHECK(b.valid());
  f.at(1s);
  CHECK(ka.poll() == std::nullopt);
  CHECK(a.loss() == loss_cause::clock_regressed);
  CHECK(b.loss() == loss_cause::clock_regressed);
  CHECK(f.store.seen().empty());
  CHECK(ka.stats().regressions == 1);
}

TEST_CASE("keepalive batch: a loss callback may release another lease of the same batch",
          "[keepalive][keepalive_batch]") {
  fixture f;
  keepalive<manual_clock> ka(f.clock, options());
  blease a = f.take("a");
  blease b = f.take("b");
  holdfast::acquire_options<manual_clock> o;
  o.clock = f.clock;
  o.on_lost = [&b](loss_cause) { (void)b.release(); };  // b's operation mutex must be free
  auto lost = holdfast::try_acquire(f.store, "c", 10s, o);
  REQUIRE(lost);
  for (blease* l : {&a, &b, &*lost}) REQUIRE(ka.add(*l));
  fail_key(f.store, f.inner, "c", errc::lease_lost, -1);
  f.at(5s);
  CHECK(ka.poll() == manual_clock::time_point(10s));
  CHECK(lost->loss() == loss_cause::renew_refused);
  CHECK(b.state() == lease_state::released);
  CHECK(a.state() == lease_state::held);
}

TEST_CASE("keepalive batch: remove() from another thread during the batch's store call",
          "[keepalive][keepalive_batch]") {
  fixture f;
  keepalive<manual_clock> ka(f.clock, options());
  blease a = f.take("a");
  blease b = f.take("b");
  REQUIRE(ka.add(a));
  REQUIRE(ka.add(b));
  std::thread remover;
  f.store.during_batch = [&] {
    remover = std::thread([&] { ka.remove(b); });  // waits for the batch, or finds it done
  };
  f.at(5s);
  (void)ka.poll();
  remover.join();
  f.store.during_batch = nullptr;
  CHECK(ka.size() == 1);
  f.at(10s);
  (void)ka.poll();
  CHECK(f.store.seen().back() == keys{"a"});
  CHECK(f.store.renew_calls == 3);
  CHECK(b.state() == lease_state::held);  // removed, not released: held until its TTL runs out
}

TEST_CASE("keepalive batch: the keepalive and the leases may be destroyed in either order",
          "[keepalive][keepalive_batch]") {
  fixture f;
  auto a = std::make_unique<blease>(f.take("a"));
  auto b = std::make_unique<blease>(f.take("b"));
  {
    keepalive<manual_clock> ka(f.clock, options());
    REQUIRE(ka.add(*a));
    REQUIRE(ka.add(*b));
    f.at(5s);
    (void)ka.poll();
    a.reset();  // destroyed while kept alive
  }
  CHECK(b->state() == lease_state::held);
  CHECK(b->release());
  CHECK(f.store.seen() == std::vector<keys>{{"a", "b"}});
}

}  // namespace test_keepalive_batch
