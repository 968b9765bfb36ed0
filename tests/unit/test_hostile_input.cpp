// SPDX-License-Identifier: MIT
// Hostile and bad input, table-driven, through every public entry point: try_acquire, acquire,
// lease::renew/release, fence_gate / keyed_fence_gate admit, fenced::write, memory_store,
// cas_store, checked_store, distributed_mutex and keepalive registration. Inputs: zero, negative,
// 1 ns, too-short, huge, NaN and infinite TTLs; empty, 1 MiB and binary keys and owners; tokens 0
// and UINT64_MAX; deadlines in the past; stores answering garbage or a token lower than before;
// clocks jumping back; stores and clocks that throw.
//
// For each row: the errc it must report, and that the store is unchanged afterwards (records,
// token counter). Run under ASan+UBSan in CI, so a leak, an overflow or an abort also fails it.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <system_error>
#include <vector>

#include "holdfast/fence.hpp"
#include "holdfast/keepalive.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/mutex.hpp"
#include "holdfast/stores/cas.hpp"
#include "holdfast/stores/checked.hpp"
#include "holdfast/stores/memory.hpp"
#include "lifecycle_support.hpp"
#include "test_support.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_hostile_input {

using namespace std::chrono_literals;
using holdfast::errc;
using holdfast::fencing_token;
using holdfast::grant;
using holdfast::manual_clock;
using lifecycle_test::faulty_store;
using lifecycle_test::injected_failure;

namespace {

using ms = std::chrono::milliseconds;
using mstore = holdfast::memory_store<manual_clock>;
using fstore = faulty_store<mstore>;

const std::string kBinary("k\0\"'\n\r\\ \xff", 10);
const std::string kHuge(std::size_t{1} << 20, 'x');
constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();

/// One store with one live lease ("held", owner "holder"), and everything needed to call every
/// entry point on it. snapshot() is what "the store is unchanged" compares.
struct world {
  manual_clock clock;
  mstore inner{clock};
  fstore store{inner};
  holdfast::memory_cas_kv kv;
  holdfast::cas_store<holdfast::memory_cas_kv, manual_clock> cas{kv, clock};
  holdfast::checked_store<fstore> checked{store};
  holdfast::acquire_options<manual_clock> opts;
  fencing_token held_token;
  fencing_token cas_token;
  std::optional<holdfast::lease<fstore, manual_clock>> lease;  // on "leased", through `store`

  world() {
    opts.clock = clock;
    held_token = inner.try_acquire("held", "holder", 10s).value().token;
    cas_token = cas.try_acquire("held", "holder", 10s).value().token;
    lease.emplace(holdfast::try_acquire(store, "leased", 10s, opts).value());
  }

  std::string snapshot() {
    std::string s = std::to_string(inner.size()) + "|" + holdfast::to_string(inner.last_token());
    for (const char* key : {"held", "leased"}) {
      auto r = inner.inspect(key);
      REQUIRE(r);
      s += "|";
      if (*r)
        s += (*r)->owner + "/" + holdfast::to_string((*r)->token) + "/" +
             std::to_string((*r)->remaining.count());
    }
    auto e = kv.get("held");
    REQUIRE(e);
    s += "|" + std::to_string(e->version) + "|" + std::to_string(kv.size());
    return s;
  }
};

struct row {
  std::string name;
  std::function<std::error_code(world&)> call;
  std::error_code expected;
};

/// Runs each row in a fresh world: it must report `expected` and leave the store unchanged.
void run_table(const std::vector<row>& rows) {
  for (const row& r : rows) {
    INFO(r.name);
    world w;
    const std::string before = w.snapshot();
    std::error_code got;
    REQUIRE_NOTHROW(got = r.call(w));
    CHECK(got == r.expected);
    CHECK(w.snapshot() == before);
  }
}

template <class R>
std::error_code code_of(const R& r) {
  return r.error();
}

}  // namespace

TEST_CASE("hostile TTLs are invalid_argument everywhere, and change nothing", "[hostile]") {
  std::vector<row> rows;
  auto add_all = [&](const std::string& label, auto ttl) {
    rows.push_back(
        {"try_acquire ttl=" + label,
         [ttl](world& w) { return code_of(holdfast::try_acquire(w.store, "k", ttl, w.opts)); },
         errc::invalid_argument});
    rows.push_back(
        {"acquire ttl=" + label,
         [ttl](world& w) { return code_of(holdfast::acquire(w.store, "k", ttl, 1s, w.opts)); },
         errc::invalid_argument});
    rows.push_back({"lease::renew ttl=" + label,
                    [ttl](world& w) {
                      const auto until = w.lease->valid_until();
                      const int calls = w.store.renew_calls;
                      std::error_code ec = w.lease->renew(ttl).error();
                      CHECK(w.lease->valid_until() == until);
                      CHECK(w.lease->state() == holdfast::lease_state::held);
                      CHECK(w.store.renew_calls == calls);  // never reached the store
                      return ec;
                    },
                    errc::invalid_argument});
    rows.push_back({"distributed_mutex ttl=" + label,
                    [ttl](world& w) {
                      holdfast::mutex_options<manual_clock> o;
                      o.acquire = w.opts;
                      holdfast::distributed_mutex<fstore, manual_clock> m(w.store, "k", ttl, o);
                      CHECK_FALSE(m.try_lock());
                      return m.error();
                    },
                    errc::invalid_argument});
  };
  add_all("0", 0ms);
  add_all("-1ms", -1ms);
  add_all("1ns", 1ns);
  add_all("1ms (no validity left after drift and margin)", 1ms);
  add_all("max_ttl+1ms", holdfast::max_ttl + 1ms);
  add_all("hours::max", std::chrono::hours::max());
  add_all("nanoseconds::min", std::chrono::nanoseconds::min());
  add_all("nanoseconds::max", std::chrono::nanoseconds::max());
  add_all("NaN s", std::chrono::duration<double>(std::nan("")));
  add_all("+inf s", std::chrono::duration<double>(std::numeric_limits<double>::infinity()));
  add_all("-inf s", std::chrono::duration<double>(-std::numeric_limits<double>::infinity()));

  // The stores take milliseconds already; their bad values.
  for (ms ttl : {0ms, -1ms, ms::min(), ms::max(), holdfast::max_ttl + 1ms}) {
    const std::string label = std::to_string(ttl.count()) + "ms";
    rows.push_back({"memory_store::try_acquire ttl=" + label,
                    [ttl](world& w) { return code_of(w.inner.try_acquire("k", "o", ttl)); },
                    errc::invalid_argument});
    rows.push_back(
        {"memory_store::renew ttl=" + label,
         [ttl](world& w) { return code_of(w.inner.renew("held", "holder", w.held_token, ttl)); },
         errc::invalid_argument});
    rows.push_back({"cas_store::try_acquire ttl=" + label,
                    [ttl](world& w) { return code_of(w.cas.try_acquire("k", "o", ttl)); },
                    errc::invalid_argument});
    rows.push_back(
        {"cas_store::renew ttl=" + label,
         [ttl](world& w) { return code_of(w.cas.renew("held", "holder", w.cas_token, ttl)); },
         errc::invalid_argument});
    rows.push_back({"checked_store::try_acquire ttl=" + label,
                    [ttl](world& w) { return code_of(w.checked.try_acquire("k", "o", ttl)); },
                    errc::invalid_argument});
    rows.push_back(
        {"checked_store::renew ttl=" + label,
         [ttl](world& w) { return code_of(w.checked.renew("held", "holder", w.held_token, ttl)); },
         errc::invalid_argument});
  }
  run_table(rows);
}

TEST_CASE("empty keys and owners are invalid_argument everywhere", "[hostile]") {
  std::vector<row> rows;
  for (const std::string& key : {std::string(), std::string("k")}) {
    for (const std::string& owner : {std::string(), std::string("o")}) {
      if (!key.empty() && !owner.empty()) continue;
      const std::string label = "key='" + key + "' owner='" + owner + "'";
      rows.push_back({"memory_store::try_acquire " + label,
                      [=](world& w) { return code_of(w.inner.try_acquire(key, owner, 10s)); },
                      errc::invalid_argument});
      rows.push_back(
          {"memory_store::renew " + label,
           [=](world& w) { return code_of(w.inner.renew(key, owner, w.held_token, 10s)); },
           errc::invalid_argument});
      rows.push_back({"memory_store::release " + label,
                      [=](world& w) { return code_of(w.inner.release(key, owner, w.held_token)); },
                      errc::invalid_argument});
      rows.push_back({"cas_store::try_acquire " + label,
                      [=](world& w) { return code_of(w.cas.try_acquire(key, owner, 10s)); },
                      errc::invalid_argument});
      rows.push_back({"cas_store::release " + label,
                      [=](world& w) { return code_of(w.cas.release(key, owner, w.cas_token)); },
                      errc::invalid_argument});
      rows.push_back({"checked_store::try_acquire " + label,
                      [=](world& w) { return code_of(w.checked.try_acquire(key, owner, 10s)); },
                      errc::invalid_argument});
      if (!key.empty()) continue;  // the lease API draws a random owner when none is given
      rows.push_back({"try_acquire " + label,
                      [=](world& w) {
                        auto o = w.opts;
                        o.owner = owner;
                        return code_of(holdfast::try_acquire(w.store, key, 10s, o));
                      },
                      errc::invalid_argument});
      rows.push_back({"acquire " + label,
                      [=](world& w) {
                        auto o = w.opts;
                        o.owner = owner;
                        return code_of(holdfast::acquire(w.store, key, 10s, 1s, o));
                      },
                      errc::invalid_argument});
      rows.push_back({"distributed_mutex " + label,
                      [=](world& w) {
                        holdfast::distributed_mutex<fstore, manual_clock> m(w.store, key, 10s);
                        CHECK_FALSE(m.try_lock());
                        CHECK(m.last_error() == errc::invalid_argument);
                        return m.error();
                      },
                      errc::invalid_argument});
    }
  }
  rows.push_back({"memory_store::inspect key=''",
                  [](world& w) { return code_of(w.inner.inspect("")); }, errc::invalid_argument});
  rows.push_back({"cas_store::inspect key=''", [](world& w) { return code_of(w.cas.inspect("")); },
                  errc::invalid_argument});
  rows.push_back({"keyed_fence_gate::admit resource=''",
                  [](world&) {
                    holdfast::keyed_fence_gate g;
                    return code_of(g.admit("", fencing_token(1), "holder"));
                  },
                  errc::invalid_argument});
  rows.push_back({"keyed_fence_gate::admit owner=''",
                  [](world&) {
                    holdfast::keyed_fence_gate g;
                    std::error_code ec = g.admit("r", fencing_token(1), "").error();
                    CHECK(g.newest("r").is_none());
                    return ec;
                  },
                  errc::invalid_argument});
  rows.push_back({"fence_gate::admit owner=''",
                  [](world&) {
                    holdfast::fence_gate g;
                    std::error_code ec = g.admit(fencing_token(1), "").error();
                    CHECK(g.newest().is_none());
                    return ec;
                  },
                  errc::invalid_argument});
  rows.push_back({"fenced::write owner=''",
                  [](world&) {
                    holdfast::fenced<int> v;
                    bool called = false;
                    std::error_code ec =
                        v.write(fencing_token(1), "", [&](int&) { called = true; }).error();
                    CHECK_FALSE(called);
                    CHECK(v.newest().is_none());
                    return ec;
                  },
                  errc::invalid_argument});
  run_table(rows);
}

TEST_CASE("tokens 0 and UINT64_MAX are invalid_argument everywhere", "[hostile]") {
  std::vector<row> rows;
  for (std::uint64_t raw : {std::uint64_t{0}, kMax}) {
    const fencing_token t(raw);
    const std::string label = "token=" + std::to_string(raw);
    rows.push_back({"memory_store::renew " + label,
                    [t](world& w) { return code_of(w.inner.renew("held", "holder", t, 10s)); },
                    errc::invalid_argument});
    rows.push_back({"memory_store::release " + label,
                    [t](world& w) { return code_of(w.inner.release("held", "holder", t)); },
                    errc::invalid_argument});
    rows.push_back({"cas_store::renew " + label,
                    [t](world& w) { return code_of(w.cas.renew("held", "holder", t, 10s)); },
                    errc::invalid_argument});
    rows.push_back({"cas_store::release " + label,
                    [t](world& w) { return code_of(w.cas.release("held", "holder", t)); },
                    errc::invalid_argument});
    rows.push_back({"checked_store::renew " + label,
                    [t](world& w) { return code_of(w.checked.renew("held", "holder", t, 10s)); },
                    errc::invalid_argument});
    rows.push_back({"checked_store::release " + label,
                    [t](world& w) { return code_of(w.checked.release("held", "holder", t)); },
                    errc::invalid_argument});
    rows.push_back({"fence_gate::admit " + label,
                    [t](world&) {
                      holdfast::fence_gate g(fencing_token(5), "holder");
                      std::error_code ec = g.admit(t, "holder").error();
                      CHECK(g.newest() == fencing_token(5));
                      return ec;
                    },
                    errc::invalid_argument});
    rows.push_back({"keyed_fence_gate::admit " + label,
                    [t](world&) {
                      holdfast::keyed_fence_gate g;
                      std::error_code ec = g.admit("r", t, "holder").error();
                      CHECK(g.newest("r").is_none());
                      return ec;
                    },
                    errc::invalid_argument});
    rows.push_back({"fenced::write " + label,
                    [t](world&) {
                      holdfast::fenced<int> v;
                      bool called = false;
                      std::error_code ec =
                          v.write(t, "holder", [&](int&) { called = true; }).error();
                      CHECK_FALSE(called);
                      CHECK(v.newest().is_none());
                      return ec;
                    },
                    errc::invalid_argument});
  }
  run_table(rows);
}

TEST_CASE("1 MiB and binary keys and owners work, byte for byte", "[hostile]") {
  for (const std::string& key : {kBinary, kHuge}) {
    for (const std::string& owner : {kBinary, kHuge}) {
      world w;
      auto l = holdfast::try_acquire(w.store, key, 10s, [&] {
        auto o = w.opts;
        o.owner = owner;
        return o;
      }());
      REQUIRE(l);
      CHECK(l->key() == key);
      CHECK(l->owner() == owner);
      auto rec = w.inner.inspect(key);
      REQUIRE(*rec);
      CHECK((*rec)->owner == owner);
      // A NUL inside is part of the key: its prefix is another key.
      CHECK(w.inner.try_acquire(key.substr(0, 1), "other", 10s));
      auto c = w.cas.try_acquire(key, owner, 10s);
      REQUIRE(c);
      CHECK(w.cas.release(key, owner, c->token));
      holdfast::keyed_fence_gate gate;
      CHECK(gate.admit(key, *l));  // a 1 MiB or binary owner id, compared in full
      CHECK(gate.admit(key, *l));
      CHECK(gate.admit(key, l->token(), owner + "x").error() == errc::token_reissued);
      CHECK(gate.newest(key) == l->token());
      holdfast::fence_gate one;
      CHECK(one.admit(*l));
      CHECK(one.admit(*l));
      holdfast::distributed_mutex<fstore, manual_clock> m(w.store, key + "/m", 10s);
      CHECK(m.try_lock());
      m.unlock();
      REQUIRE(l->release());
    }
  }
}

TEST_CASE("deadlines in the past make exactly one attempt", "[hostile]") {
  world w;
  w.opts.owner = "other";
  for (auto timeout : {0ns, -1ns, std::chrono::nanoseconds::min()}) {
    const int before = w.store.acquire_calls;
    CHECK(holdfast::acquire(w.store, "held", 10s, timeout, w.opts).error() == errc::timeout);
    CHECK(w.store.acquire_calls == before + 1);
  }
  holdfast::mutex_options<manual_clock> o;
  o.acquire = w.opts;
  holdfast::distributed_mutex<fstore, manual_clock> m(w.store, "held", 10s, o);
  const int before = w.store.acquire_calls;
  CHECK_FALSE(m.try_lock_until(manual_clock::time_point(-1h)));
  CHECK_FALSE(m.try_lock_for(-1s));
  CHECK_FALSE(m.try_lock_until(std::chrono::steady_clock::time_point::min()));
  CHECK(w.store.acquire_calls == before + 3);
  CHECK(w.clock.now() == manual_clock::time_point(0s));  // nothing slept
}

TEST_CASE("a store answering garbage gets protocol_error, never a lease", "[hostile]") {
  struct garbage {
    const char* name;
    grant answer;
  };
  const garbage answers[] = {
      {"token none", grant{fencing_token::none(), 10s}},
      {"token max", grant{fencing_token::max(), 10s}},
      {"TTL 0", grant{fencing_token(7), 0ms}},
      {"TTL negative", grant{fencing_token(7), -5s}},
  };
  for (const garbage& g : answers) {
    INFO(g.name);
    world w;
    const grant answer = g.answer;
    w.store.set_acquire_hook([answer](auto, auto, auto) -> std::optional<holdfast::result<grant>> {
      return holdfast::result<grant>(answer);
    });
    CHECK(holdfast::try_acquire(w.store, "k", 10s, w.opts).error() == errc::protocol_error);
    CHECK(w.checked.try_acquire("k", "o", 10s).error() == errc::protocol_error);
    holdfast::distributed_mutex<fstore, manual_clock> m(w.store, "k", 10s, {w.opts, nullptr});
    CHECK_FALSE(m.try_lock());
    CHECK(m.last_error() == errc::protocol_error);
    // And on renew: the lease stops trusting the store.
    w.store.clear_hooks();
    auto l = holdfast::try_acquire(w.store, "k2", 10s, w.opts);
    REQUIRE(l);
    w.store.set_renew_hook(
        [answer](auto, auto, auto, auto) -> std::optional<holdfast::result<grant>> {
          return holdfast::result<grant>(answer);
        });
    CHECK(l->renew().error() == errc::protocol_error);
    CHECK(l->loss() == holdfast::loss_cause::protocol_error);
    CHECK_FALSE(l->valid());
  }
}

TEST_CASE("checked_store refuses a token lower than one the store granted before", "[hostile]") {
  world w;
  auto first = w.checked.try_acquire("k", "a", 10s);
  REQUIRE(first);
  REQUIRE(w.checked.release("k", "a", first->token));
  // The store "restarts" and issues from a lower counter (a lost counter, a failover to a stale
  // replica): its next grant carries an old token.
  w.store.set_acquire_hook(
      [&](std::string_view k, std::string_view o, ms t) -> std::optional<holdfast::result<grant>> {
        auto g = w.inner.try_acquire(k, o, t);
        if (g) g->token = first->token;  // the same token again, to another owner
        return g;
      });
  const int releases = w.store.release_calls;
  CHECK(w.checked.try_acquire("k", "b", 10s).error() == errc::protocol_error);
  CHECK(w.store.release_calls == releases + 1);  // the bogus grant was handed back
  CHECK(w.checked.newest("k") == first->token);
  // Through the lease API too, on another key: the store answers a token below the key's last.
  w.store.clear_hooks();
  auto second = w.checked.try_acquire("k2", "a", 10s);
  REQUIRE(second);
  REQUIRE(w.checked.release("k2", "a", second->token));
  w.store.set_acquire_hook(
      [&](std::string_view k, std::string_view o, ms t) -> std::optional<holdfast::result<grant>> {
        auto g = w.inner.try_acquire(k, o, t);
        if (g) g->token = fencing_token(1);  // below the key's last grant
        return g;
      });
  CHECK(holdfast::try_acquire(w.checked, "k2", 10s, w.opts).error() == errc::protocol_error);
  // A grant longer than asked is a contract breach too (a lease would cap it; checked refuses).
  w.store.set_acquire_hook(
      [&](std::string_view k, std::string_view o, ms) -> std::optional<holdfast::result<grant>> {
        return w.inner.try_acquire(k, o, 1h);
      });
  CHECK(w.checked.try_acquire("k3", "c", 10s).error() == errc::protocol_error);
  // Renew answering another token.
  w.store.clear_hooks();
  auto g = w.checked.try_acquire("k4", "d", 10s);
  REQUIRE(g);
  w.store.set_renew_hook(
      [](auto, auto, fencing_token t, ms ttl) -> std::optional<holdfast::result<grant>> {
        return holdfast::result<grant>(grant{fencing_token(t.value() + 1), ttl});
      });
  CHECK(w.checked.renew("k4", "d", g->token, 10s).error() == errc::protocol_error);
  // Same owner re-acquiring its live lease gets the same token: that is allowed.
  w.store.clear_hooks();
  auto again = w.checked.try_acquire("k4", "d", 10s);
  REQUIRE(again);
  CHECK(again->token == g->token);
  CHECK(w.checked.tracked_keys() >= 3);
}

TEST_CASE("checked_store catches a store that resets its counter on release (control)",
          "[hostile]") {
  // A deliberately broken store: per-key counter, reset on release (the classic bug). Without
  // the wrapper a lease cannot tell; with it, the second grant is refused.
  struct resetting_store {
    std::map<std::string, std::pair<std::string, std::uint64_t>> held;
    holdfast::result<grant> try_acquire(std::string_view k, std::string_view o, ms ttl) {
      auto& h = held[std::string(k)];
      if (!h.first.empty() && h.first != o) return errc::busy;
      h = {std::string(o), 1};  // always token 1
      return grant{fencing_token(1), ttl};
    }
    holdfast::result<grant> renew(std::string_view, std::string_view, fencing_token t, ms ttl) {
      return grant{t, ttl};
    }
    holdfast::result<void> release(std::string_view k, std::string_view, fencing_token) {
      held.erase(std::string(k));
      return {};
    }
  } broken;
  manual_clock clock;
  holdfast::acquire_options<manual_clock> o;
  o.clock = clock;
  {
    auto a = holdfast::try_acquire(broken, "k", 10s, o);
    REQUIRE(a);
    REQUIRE(a->release());
    auto b = holdfast::try_acquire(broken, "k", 10s, o);
    REQUIRE(b);
    CHECK(b->token() == a->token());  // unchecked: the breach goes unnoticed
  }
  holdfast::checked_store<resetting_store> checked(broken);
  auto a = holdfast::try_acquire(checked, "k", 10s, o);
  REQUIRE(a);
  REQUIRE(a->release());
  CHECK(holdfast::try_acquire(checked, "k", 10s, o).error() == errc::protocol_error);
}

TEST_CASE("a clock that jumps back is treated conservatively everywhere", "[hostile]") {
  world w;
  w.clock.advance(100s);
  auto l = holdfast::try_acquire(w.store, "k", 10s, w.opts);
  REQUIRE(l);
  w.clock.advance(-1ms);
  const int renews = w.store.renew_calls;
  CHECK(l->renew().error() == errc::lease_lost);  // never extended
  CHECK(w.store.renew_calls == renews);
  CHECK(l->loss() == holdfast::loss_cause::clock_regressed);
  holdfast::keepalive_options ko;
  ko.start_thread = false;
  holdfast::keepalive<manual_clock> ka(w.clock, ko);
  CHECK(ka.add(*l).error() == errc::lease_lost);  // a lost lease cannot be kept alive
}

TEST_CASE("keepalive registration refuses what it cannot renew", "[hostile]") {
  world w;
  holdfast::keepalive_options ko;
  ko.start_thread = false;
  holdfast::keepalive<manual_clock> ka(w.clock, ko);
  auto released = holdfast::try_acquire(w.store, "a", 10s, w.opts);
  REQUIRE(released);
  REQUIRE(released->release());
  CHECK(ka.add(*released).error() == errc::lease_lost);
  auto releasing = holdfast::try_acquire(w.store, "b", 10s, w.opts);
  REQUIRE(releasing);
  w.store.fail_releases(errc::store_unavailable, 1);
  CHECK_FALSE(releasing->release());
  CHECK(ka.add(*releasing).error() == errc::lease_lost);
  auto expired = holdfast::try_acquire(w.store, "c", 10s, w.opts);
  REQUIRE(expired);
  w.clock.advance(1h);
  CHECK_FALSE(expired->valid());
  CHECK(ka.add(*expired).error() == errc::lease_lost);
  ka.stop();
  w.clock.advance(-1h);
  auto fresh = holdfast::try_acquire(w.store, "d", 10s, w.opts);
  REQUIRE(fresh);
  CHECK(ka.add(*fresh).error() == errc::invalid_argument);  // stopped
  CHECK(ka.size() == 0);
}

TEST_CASE("store and clock exceptions reach callers unchanged; destructors swallow them",
          "[hostile]") {
  SECTION("cas_store with a throwing clock") {
    lifecycle_test::throwing_clock clock;
    holdfast::memory_cas_kv kv;
    holdfast::cas_store<holdfast::memory_cas_kv, lifecycle_test::throwing_clock> s(kv, clock);
    REQUIRE(s.try_acquire("k", "a", 10s));
    clock.arm();
    CHECK_THROWS_MATCHES(s.try_acquire("k", "b", 10s), injected_failure,
                         Catch::Message("clock exploded"));
    CHECK_THROWS_AS(s.inspect("k"), injected_failure);
    CHECK(s.release("k", "a", fencing_token(1)));  // release reads no clock
  }
  SECTION("acquire with a throwing clock") {
    lifecycle_test::throwing_clock clock;
    mstore store(clock.base());
    holdfast::acquire_options<lifecycle_test::throwing_clock> o;
    o.clock = clock;
    clock.arm();
    CHECK_THROWS_AS(holdfast::acquire(store, "k", 10s, 1s, o), injected_failure);
    CHECK(store.size() == 0);
  }
  SECTION("checked_store passes a store's exception through") {
    world w;
    w.store.throw_on_renewals();
    CHECK_THROWS_MATCHES(w.checked.renew("held", "holder", w.held_token, 10s), injected_failure,
                         Catch::Message("renew exploded"));
  }
  SECTION("a lease destroyed on a throwing store and clock") {
    lifecycle_test::throwing_clock clock;
    mstore inner(clock.base());
    fstore store(inner);
    holdfast::acquire_options<lifecycle_test::throwing_clock> o;
    o.clock = clock;
    {
      auto l = holdfast::try_acquire(store, "k", 10s, o);
      REQUIRE(l);
      clock.arm();
      store.throw_on_releases();
    }  // must not terminate
    CHECK(store.release_calls == 1);
    clock.arm(false);
  }
}

}  // namespace test_hostile_input
