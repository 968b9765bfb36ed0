// SPDX-License-Identifier: MIT
// stores/cas.hpp: cas_store turns a compare-and-swap key-value store into a LeaseStore with no
// shared clock. The first half runs one LeaseStore contract against memory_store and cas_store
// alike (TEMPLATE_TEST_CASE), written so that both semantics of expiry satisfy it: a contender
// that has seen a key held gets it once the holder's TTL has passed since. The second half tests
// what only the adapter does: freed records keep their counter, a record's version restarts a
// contender's wait, garbage in the KV, a KV that fails, throws or contradicts itself.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <system_error>

#include "holdfast/keepalive.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/stores/cas.hpp"
#include "holdfast/stores/memory.hpp"
#include "lifecycle_support.hpp"
#include "test_support.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_cas_store {

using namespace std::chrono_literals;
using holdfast::errc;
using holdfast::fencing_token;
using holdfast::grant;
using holdfast::manual_clock;
using lifecycle_test::injected_failure;

namespace {

using ms = std::chrono::milliseconds;

struct memory_fixture {
  manual_clock clock;
  holdfast::memory_store<manual_clock> store{clock};
  std::string snapshot(std::string_view key) {
    auto r = store.inspect(key);
    REQUIRE(r);
    if (!*r) return "free";
    return (*r)->owner + "/" + holdfast::to_string((*r)->token) + "/" +
           std::to_string((*r)->remaining.count());
  }
};

struct cas_fixture {
  manual_clock clock;
  holdfast::memory_cas_kv kv;
  holdfast::cas_store<holdfast::memory_cas_kv, manual_clock> store{kv, clock};
  // The raw value and version: "unchanged" means byte for byte.
  std::string snapshot(std::string_view key) {
    auto e = kv.get(key);
    REQUIRE(e);
    return std::to_string(e->version) + ":" + e->value;
  }
};

/// A cas_kv wrapper whose answers a test can override, counting calls.
struct scripted_kv {
  holdfast::memory_cas_kv inner;
  std::function<std::optional<holdfast::result<holdfast::cas_entry>>(std::string_view)> on_get;
  std::function<std::optional<holdfast::result<bool>>(std::string_view, std::uint64_t,
                                                      std::string_view)>
      on_cas;
  int gets = 0, swaps = 0;

  holdfast::result<holdfast::cas_entry> get(std::string_view key) {
    ++gets;
    if (on_get) {
      if (auto r = on_get(key)) return *r;
    }
    return inner.get(key);
  }
  holdfast::result<bool> compare_and_swap(std::string_view key, std::uint64_t expected,
                                          std::string_view value) {
    ++swaps;
    if (on_cas) {
      if (auto r = on_cas(key, expected, value)) return *r;
    }
    return inner.compare_and_swap(key, expected, value);
  }
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// The shared contract

TEMPLATE_TEST_CASE("contract: a free key is granted; others are busy; the holder re-acquires",
                   "[cas][memory_store]", memory_fixture, cas_fixture) {
  TestType f;
  auto a = f.store.try_acquire("orders", "A", 10s);
  REQUIRE(a);
  CHECK(a->token.is_issuable());
  CHECK(a->ttl == 10s);
  auto rec = f.store.inspect("orders");
  REQUIRE(rec);
  REQUIRE(*rec);
  CHECK((*rec)->owner == "A");
  CHECK((*rec)->token == a->token);
  const std::string before = f.snapshot("orders");
  CHECK(f.store.try_acquire("orders", "B", 10s).error() == errc::busy);
  CHECK(f.snapshot("orders") == before);  // busy changes nothing
  f.clock.advance(3s);
  auto again = f.store.try_acquire("orders", "A", 10s);
  REQUIRE(again);
  CHECK(again->token == a->token);  // a retry after a lost reply is safe
}

TEMPLATE_TEST_CASE("contract: renew and release work for the holder only", "[cas][memory_store]",
                   memory_fixture, cas_fixture) {
  TestType f;
  auto a = f.store.try_acquire("orders", "A", 10s);
  REQUIRE(a);
  const std::string before = f.snapshot("orders");
  const fencing_token other(a->token.value() + 1);
  CHECK(f.store.renew("orders", "B", a->token, 10s).error() == errc::lease_lost);
  CHECK(f.store.renew("orders", "A", other, 10s).error() == errc::lease_lost);
  CHECK(f.store.release("orders", "B", a->token).error() == errc::not_holder);
  CHECK(f.store.release("orders", "A", other).error() == errc::not_holder);
  CHECK(f.snapshot("orders") == before);  // S5: nothing changed
  f.clock.advance(5s);
  auto r = f.store.renew("orders", "A", a->token, 10s);
  REQUIRE(r);
  CHECK(r->token == a->token);
  REQUIRE(f.store.release("orders", "A", a->token));
  CHECK_FALSE(f.store.inspect("orders").value());
  CHECK(f.store.release("orders", "A", a->token).error() == errc::not_holder);
  CHECK(f.store.renew("orders", "A", a->token, 10s).error() == errc::lease_lost);
}

TEMPLATE_TEST_CASE("contract: a contender gets the key once the holder's TTL has passed",
                   "[cas][memory_store]", memory_fixture, cas_fixture) {
  TestType f;
  auto a = f.store.try_acquire("orders", "A", 10s);
  REQUIRE(a);
  CHECK(f.store.try_acquire("orders", "B", 10s).error() == errc::busy);  // B starts watching
  f.clock.advance(10s - 1ms);
  CHECK(f.store.try_acquire("orders", "B", 10s).error() == errc::busy);
  f.clock.advance(1ms);
  auto b = f.store.try_acquire("orders", "B", 10s);
  REQUIRE(b);
  CHECK(b->token > a->token);
  // The old holder can neither renew nor release the new holder's lease.
  CHECK(f.store.renew("orders", "A", a->token, 10s).error() == errc::lease_lost);
  CHECK(f.store.release("orders", "A", a->token).error() == errc::not_holder);
  auto rec = f.store.inspect("orders");
  REQUIRE(rec);
  REQUIRE(*rec);
  CHECK((*rec)->owner == "B");
}

TEMPLATE_TEST_CASE("contract: a renewal keeps contenders out", "[cas][memory_store]",
                   memory_fixture, cas_fixture) {
  TestType f;
  auto a = f.store.try_acquire("orders", "A", 10s);
  REQUIRE(a);
  CHECK(f.store.try_acquire("orders", "B", 10s).error() == errc::busy);
  f.clock.advance(5s);
  REQUIRE(f.store.renew("orders", "A", a->token, 10s));
  f.clock.advance(5s);  // a full TTL after the grant, half a TTL after the renewal
  CHECK(f.store.try_acquire("orders", "B", 10s).error() == errc::busy);
  f.clock.advance(10s);  // the holder stopped renewing: a full TTL after anyone could see that
  CHECK(f.store.try_acquire("orders", "B", 10s));
}

TEMPLATE_TEST_CASE("contract: a renew after the TTL ran out is lease_lost, never a revival",
                   "[cas][memory_store]", memory_fixture, cas_fixture) {
  TestType f;
  auto a = f.store.try_acquire("orders", "A", 10s);
  REQUIRE(a);
  f.clock.advance(10s - 1ms);
  REQUIRE(f.store.renew("orders", "A", a->token, 10s));  // in time
  f.clock.advance(10s);                                  // nobody took it over, yet it expired
  const std::string before = f.snapshot("orders");
  CHECK(f.store.renew("orders", "A", a->token, 10s).error() == errc::lease_lost);
  CHECK(f.snapshot("orders") == before);
  auto b = f.store.try_acquire("orders", "B", 10s);  // and it is free for the next owner
  REQUIRE(b);
  CHECK(b->token > a->token);
}

TEMPLATE_TEST_CASE("contract: tokens strictly increase across release and takeover",
                   "[cas][memory_store]", memory_fixture, cas_fixture) {
  TestType f;
  fencing_token last;
  for (int round = 0; round < 5; ++round) {
    auto g = f.store.try_acquire("orders", "A" + std::to_string(round), 1s);
    REQUIRE(g);
    CHECK(g->token > last);
    last = g->token;
    if (round % 2 == 0) {
      REQUIRE(f.store.release("orders", "A" + std::to_string(round), g->token));
    } else {
      CHECK(f.store.try_acquire("orders", "watcher", 1s).error() == errc::busy);
      f.clock.advance(1s);
      auto w = f.store.try_acquire("orders", "watcher", 1s);  // takeover
      REQUIRE(w);
      CHECK(w->token > last);
      last = w->token;
      REQUIRE(f.store.release("orders", "watcher", w->token));
    }
  }
}

TEMPLATE_TEST_CASE("contract: bad arguments are invalid_argument and change nothing",
                   "[cas][memory_store]", memory_fixture, cas_fixture) {
  TestType f;
  auto a = f.store.try_acquire("orders", "A", 10s);
  REQUIRE(a);
  const std::string before = f.snapshot("orders");
  const ms too_long = holdfast::max_ttl + 1ms;
  for (ms ttl : {0ms, -1ms, too_long, ms::min(), ms::max()}) {
    CHECK(f.store.try_acquire("x", "A", ttl).error() == errc::invalid_argument);
    CHECK(f.store.renew("orders", "A", a->token, ttl).error() == errc::invalid_argument);
  }
  CHECK(f.store.try_acquire("", "A", 10s).error() == errc::invalid_argument);
  CHECK(f.store.try_acquire("x", "", 10s).error() == errc::invalid_argument);
  for (fencing_token t : {fencing_token::none(), fencing_token::max()}) {
    CHECK(f.store.renew("orders", "A", t, 10s).error() == errc::invalid_argument);
    CHECK(f.store.release("orders", "A", t).error() == errc::invalid_argument);
  }
  CHECK(f.store.release("", "A", a->token).error() == errc::invalid_argument);
  CHECK(f.store.release("orders", "", a->token).error() == errc::invalid_argument);
  CHECK(f.store.inspect("").error() == errc::invalid_argument);
  CHECK(f.snapshot("orders") == before);
  CHECK(f.snapshot("x") == f.snapshot("never-used"));
}

TEMPLATE_TEST_CASE("contract: keys and owners are binary-safe", "[cas][memory_store]",
                   memory_fixture, cas_fixture) {
  TestType f;
  const std::string nul_key("k\0ey\n\"'", 7), nul_owner("o\0\r\n\"", 5);
  const std::string big(1 << 20, '\xff');
  auto a = f.store.try_acquire(nul_key, nul_owner, 10s);
  REQUIRE(a);
  CHECK(f.store.try_acquire(std::string("k"), nul_owner, 10s));  // a prefix is another key
  CHECK(f.store.try_acquire(nul_key, std::string("o"), 10s).error() == errc::busy);
  auto b = f.store.try_acquire(big, big, 10s);
  REQUIRE(b);
  auto rec = f.store.inspect(nul_key);
  REQUIRE(rec);
  REQUIRE(*rec);
  CHECK((*rec)->owner == nul_owner);
  CHECK(f.store.release(nul_key, nul_owner, a->token));
  CHECK(f.store.release(big, big, b->token));
}

TEMPLATE_TEST_CASE("contract: a lease with a keepalive holds the key against contenders",
                   "[cas][memory_store][keepalive]", memory_fixture, cas_fixture) {
  TestType f;
  using store_t = std::remove_reference_t<decltype(f.store)>;
  holdfast::acquire_options<manual_clock> o;
  o.clock = f.clock;
  holdfast::keepalive_options ko;
  ko.start_thread = false;
  holdfast::keepalive<manual_clock> ka(f.clock, ko);
  auto l = holdfast::try_acquire(f.store, "orders", 10s, o);
  REQUIRE(l);
  REQUIRE(ka.add(*l));
  for (int i = 0; i < 20; ++i) {
    f.clock.advance(2500ms);
    (void)ka.poll();
    CHECK(f.store.try_acquire("orders", "B", 10s).error() == errc::busy);
  }
  CHECK(l->valid());
  ka.remove(*l);  // renewals stop: the watching contender gets the key, with a newer token
  f.clock.advance(10s);
  o.owner = "B";
  auto b = holdfast::try_acquire(f.store, "orders", 10s, o);
  REQUIRE(b);
  CHECK(b->token() > l->token());
  CHECK_FALSE(l->valid());
  static_assert(holdfast::is_lease_store_v<store_t>);
}

// ---------------------------------------------------------------------------------------------
// The adapter only

TEST_CASE("cas_kv detection", "[cas]") {
  STATIC_REQUIRE(holdfast::is_cas_kv_v<holdfast::memory_cas_kv>);
  STATIC_REQUIRE(holdfast::is_cas_kv_v<scripted_kv>);
  STATIC_REQUIRE_FALSE(holdfast::is_cas_kv_v<int>);
  STATIC_REQUIRE_FALSE(holdfast::is_cas_kv_v<holdfast::memory_store<>>);
  STATIC_REQUIRE(holdfast::is_lease_store_v<holdfast::cas_store<holdfast::memory_cas_kv>>);
  STATIC_REQUIRE(holdfast::has_inspect_v<holdfast::cas_store<holdfast::memory_cas_kv>>);
}

TEST_CASE("memory_cas_kv compares versions and never reuses one", "[cas]") {
  holdfast::memory_cas_kv kv;
  CHECK(kv.get("k")->version == 0);
  CHECK_FALSE(*kv.compare_and_swap("k", 5, "x"));
  CHECK(*kv.compare_and_swap("k", 0, "a"));
  const auto v1 = kv.get("k")->version;
  CHECK_FALSE(*kv.compare_and_swap("k", 0, "b"));
  CHECK(*kv.compare_and_swap("k", v1, "a"));  // the same bytes again ...
  CHECK(kv.get("k")->version > v1);           // ... still a new version
  CHECK(kv.get("k")->value == "a");
  CHECK(kv.size() == 1);
}

TEST_CASE("a released record is kept free, with its counter, not deleted", "[cas]") {
  cas_fixture f;
  auto a = f.store.try_acquire("orders", "A", 10s);
  REQUIRE(a);
  CHECK(a->token == fencing_token(1));
  REQUIRE(f.store.release("orders", "A", a->token));
  CHECK(f.kv.size() == 1);
  CHECK(f.kv.get("orders")->version != 0);
  auto b = f.store.try_acquire("orders", "B", 10s);  // free: no wait needed
  REQUIRE(b);
  CHECK(b->token == fencing_token(2));
  // Tokens are per key: another key starts its own counter.
  CHECK(f.store.try_acquire("other", "A", 10s)->token == fencing_token(1));
}

TEST_CASE("tokens survive a restart of the adapter", "[cas]") {
  manual_clock clock;
  holdfast::memory_cas_kv kv;
  fencing_token last;
  for (int i = 0; i < 3; ++i) {
    holdfast::cas_store<holdfast::memory_cas_kv, manual_clock> s(kv, clock);
    auto g = s.try_acquire("orders", "A" + std::to_string(i), 10s);
    REQUIRE(g);
    CHECK(g->token > last);
    last = g->token;
    REQUIRE(s.release("orders", "A" + std::to_string(i), g->token));
  }
}

TEST_CASE("the wait restarts whenever the record's version changes", "[cas]") {
  cas_fixture f;
  auto a = f.store.try_acquire("orders", "A", 10s);
  REQUIRE(a);
  CHECK(f.store.try_acquire("orders", "B", 10s).error() == errc::busy);
  CHECK(f.store.watching() == 1);
  for (int i = 0; i < 10; ++i) {
    f.clock.advance(9s);
    REQUIRE(f.store.renew("orders", "A", a->token, 10s));
    CHECK(f.store.try_acquire("orders", "B", 10s).error() == errc::busy);
  }
  // A contender that polls rarely: saw version v, then nothing for a long time, still v: ok.
  f.clock.advance(1h);
  auto b = f.store.try_acquire("orders", "B", 10s);
  REQUIRE(b);
  CHECK(f.store.watching() == 1);  // one entry per key: now B's grant, timed from its write
  REQUIRE(f.store.release("orders", "B", b->token));
  CHECK(f.store.watching() == 0);  // a free key needs no timing
}

TEST_CASE("a contender's first sight starts the wait, however old the record is", "[cas]") {
  // Two processes: A's adapter wrote the record, B's never saw it being written.
  manual_clock clock;
  holdfast::memory_cas_kv kv;
  holdfast::cas_store<holdfast::memory_cas_kv, manual_clock> a(kv, clock), b(kv, clock);
  REQUIRE(a.try_acquire("orders", "A", 10s));
  clock.advance(1h);  // nobody in B's process looked: B cannot know how old the record is
  CHECK(b.try_acquire("orders", "B", 10s).error() == errc::busy);
  clock.advance(10s - 1ms);
  CHECK(b.try_acquire("orders", "B", 10s).error() == errc::busy);
  clock.advance(1ms);
  CHECK(b.try_acquire("orders", "B", 10s));
}

TEST_CASE("an adapter times the records it wrote from the write itself", "[cas]") {
  cas_fixture f;
  REQUIRE(f.store.try_acquire("orders", "A", 10s));
  CHECK(f.store.watching() == 1);
  f.clock.advance(10s);                            // a full TTL since the grant this adapter made
  CHECK(f.store.try_acquire("orders", "B", 10s));  // no extra wait in the same process
}

TEST_CASE("renew is refused only once this adapter has seen the record for a full TTL", "[cas]") {
  manual_clock clock;
  holdfast::memory_cas_kv kv;
  holdfast::cas_store<holdfast::memory_cas_kv, manual_clock> a(kv, clock), b(kv, clock);
  auto g = a.try_acquire("orders", "A", 10s);
  REQUIRE(g);
  clock.advance(10s);
  // B never saw the record: no contender of B's could have taken it, so B renews it for A ...
  auto r = b.renew("orders", "A", g->token, 10s);
  REQUIRE(r);
  // ... which is a new record version: A's adapter, which saw the old one expire, sees a new one.
  REQUIRE(a.renew("orders", "A", g->token, 10s));
  clock.advance(10s);
  CHECK(a.renew("orders", "A", g->token, 10s).error() == errc::lease_lost);  // A wrote the last
  CHECK(b.renew("orders", "A", g->token, 10s));  // B never saw A's last write: renews it
  CHECK(b.renew("orders", "A", g->token, 10s));  // and, having written it now, times it
  clock.advance(10s);
  CHECK(b.renew("orders", "A", g->token, 10s).error() == errc::lease_lost);
}

TEST_CASE("the wait is the holder's TTL, and re-acquiring never shortens it", "[cas]") {
  cas_fixture f;
  REQUIRE(f.store.try_acquire("orders", "A", 30s));
  REQUIRE(f.store.try_acquire("orders", "A", 1s));  // same owner, shorter TTL asked
  CHECK(f.store.try_acquire("orders", "B", 1s).error() == errc::busy);
  f.clock.advance(29s);
  CHECK(f.store.try_acquire("orders", "B", 1s).error() == errc::busy);  // B waits 30 s, not 1 s
  f.clock.advance(1s);
  CHECK(f.store.try_acquire("orders", "B", 1s));
}

TEST_CASE("cas inspect reports what a contender would conclude", "[cas]") {
  cas_fixture f;
  auto a = f.store.try_acquire("orders", "A", 10s);
  REQUIRE(a);
  auto r = f.store.inspect("orders");
  REQUIRE(*r);
  CHECK((*r)->remaining == 10s);  // timed from the grant this adapter wrote
  f.clock.advance(4s);
  r = f.store.inspect("orders");
  REQUIRE(*r);
  CHECK((*r)->remaining == 6s);
  f.clock.advance(6s);
  CHECK_FALSE(*f.store.inspect("orders"));
  // Another process's adapter, which never saw the record written, assumes the full TTL and
  // starts no wait by inspecting.
  holdfast::cas_store<holdfast::memory_cas_kv, manual_clock> other(f.kv, f.clock);
  r = other.inspect("orders");
  REQUIRE(*r);
  CHECK((*r)->remaining == 10s);
  CHECK(other.watching() == 0);
}

TEST_CASE("a clock going backwards restarts every wait", "[cas]") {
  cas_fixture f;
  f.clock.advance(100s);
  REQUIRE(f.store.try_acquire("orders", "A", 10s));
  CHECK(f.store.try_acquire("orders", "B", 10s).error() == errc::busy);
  f.clock.advance(9s);
  f.clock.advance(-50s);  // 59 s: behind the first sight at 100 s
  CHECK(f.store.try_acquire("orders", "B", 10s).error() == errc::busy);  // regression: restart
  f.clock.advance(9s);  // 68 s: a first sight at 100 s would now look like -32 s of waiting
  CHECK(f.store.try_acquire("orders", "B", 10s).error() == errc::busy);
  f.clock.advance(1s);  // a full TTL after the restart
  CHECK(f.store.try_acquire("orders", "B", 10s));
}

TEST_CASE("token counter near UINT64_MAX: token_exhausted, record unchanged", "[cas]") {
  cas_fixture f;
  holdfast::detail::cas_record near;
  near.counter = std::numeric_limits<std::uint64_t>::max() - 2;
  REQUIRE(*f.kv.compare_and_swap("orders", 0, near.encode()));
  auto g = f.store.try_acquire("orders", "A", 10s);
  REQUIRE(g);
  CHECK(g->token == fencing_token(std::numeric_limits<std::uint64_t>::max() - 1));
  REQUIRE(f.store.release("orders", "A", g->token));
  const std::string before = f.snapshot("orders");
  CHECK(f.store.try_acquire("orders", "B", 10s).error() == errc::token_exhausted);
  CHECK(f.snapshot("orders") == before);
}

TEST_CASE("garbage in the KV is protocol_error and is left alone", "[cas]") {
  cas_fixture f;
  holdfast::detail::cas_record good;
  good.held = true;
  good.counter = 5;
  good.token = fencing_token(5);
  good.ttl = 10s;
  good.owner = "A";
  const std::string valid = good.encode();
  auto with = [&](auto change) {
    holdfast::detail::cas_record r = good;
    change(r);
    return r.encode();
  };
  const std::string cases[] = {
      "",  // an empty value at a real version
      "hello",
      std::string(100, '\0'),
      "hf2" + valid.substr(3),                     // unknown format
      valid.substr(0, 3) + "X" + valid.substr(4),  // unknown state
      valid + "x",                                 // owner length disagrees
      valid.substr(0, valid.size() - 1),
      with([](auto& r) { r.counter = 4; }),  // token above the counter
      with([](auto& r) { r.counter = 0; }),
      with([](auto& r) { r.counter = std::numeric_limits<std::uint64_t>::max(); }),
      with([](auto& r) { r.ttl = 0ms; }),
      with([](auto& r) { r.ttl = holdfast::max_ttl + 1ms; }),
      with([](auto& r) { r.token = fencing_token::none(); }),
      with([](auto& r) { r.owner.clear(); }),
      with([](auto& r) { r.held = false; }),  // free, yet with an owner, token and TTL
  };
  int n = 0;
  for (const std::string& v : cases) {
    INFO("case " << n++);
    holdfast::memory_cas_kv kv;
    holdfast::cas_store<holdfast::memory_cas_kv, manual_clock> s(kv, f.clock);
    REQUIRE(*kv.compare_and_swap("orders", 0, v));
    const auto before = kv.get("orders").value();
    CHECK(s.try_acquire("orders", "A", 10s).error() == errc::protocol_error);
    CHECK(s.renew("orders", "A", fencing_token(5), 10s).error() == errc::protocol_error);
    CHECK(s.release("orders", "A", fencing_token(5)).error() == errc::protocol_error);
    CHECK(s.inspect("orders").error() == errc::protocol_error);
    CHECK(kv.get("orders")->version == before.version);
    CHECK(kv.get("orders")->value == before.value);
  }
  // The valid record itself decodes (the changes above are what made them garbage).
  holdfast::memory_cas_kv kv;
  holdfast::cas_store<holdfast::memory_cas_kv, manual_clock> s(kv, f.clock);
  REQUIRE(*kv.compare_and_swap("orders", 0, valid));
  CHECK(s.renew("orders", "A", fencing_token(5), 10s));
}

TEST_CASE("KV errors and exceptions reach the caller unchanged", "[cas]") {
  manual_clock clock;
  scripted_kv kv;
  holdfast::cas_store<scripted_kv, manual_clock> s(kv, clock);
  auto a = s.try_acquire("orders", "A", 10s);
  REQUIRE(a);
  SECTION("get fails") {
    kv.on_get = [](auto) { return holdfast::result<holdfast::cas_entry>(errc::store_unavailable); };
    CHECK(s.try_acquire("orders", "B", 10s).error() == errc::store_unavailable);
    CHECK(s.renew("orders", "A", a->token, 10s).error() == errc::store_unavailable);
    CHECK(s.release("orders", "A", a->token).error() == errc::store_unavailable);
    CHECK(s.inspect("orders").error() == errc::store_unavailable);
  }
  SECTION("compare_and_swap fails with a foreign error") {
    const std::error_code refused = std::make_error_code(std::errc::connection_refused);
    kv.on_cas = [&](auto, auto, auto) { return holdfast::result<bool>(refused); };
    CHECK(s.renew("orders", "A", a->token, 10s).error() == refused);
    CHECK(s.release("orders", "A", a->token).error() == refused);
  }
  SECTION("the KV throws") {
    kv.on_get = [](auto) -> std::optional<holdfast::result<holdfast::cas_entry>> {
      throw injected_failure("kv exploded");
    };
    CHECK_THROWS_MATCHES(s.try_acquire("orders", "B", 10s), injected_failure,
                         Catch::Message("kv exploded"));
    CHECK_THROWS_AS(s.renew("orders", "A", a->token, 10s), injected_failure);
  }
  SECTION("a KV that contradicts itself is caught, not looped on") {
    kv.on_cas = [](auto, auto, auto) { return holdfast::result<bool>(false); };  // never writes
    CHECK(s.renew("orders", "A", a->token, 10s).error() == errc::protocol_error);
    CHECK(s.release("orders", "A", a->token).error() == errc::protocol_error);
    CHECK(kv.swaps < 10);
  }
  SECTION("a KV whose key keeps changing under us") {
    int writes = 0;
    kv.on_cas = [&](std::string_view k, std::uint64_t,
                    std::string_view v) -> std::optional<holdfast::result<bool>> {
      // Someone else rewrites the same record each time, so our CAS always loses.
      auto cur = kv.inner.get(k).value();
      (void)kv.inner.compare_and_swap(k, cur.version, cur.value);
      ++writes;
      (void)v;
      return holdfast::result<bool>(false);
    };
    CHECK(s.renew("orders", "A", a->token, 10s).error() == errc::store_unavailable);
    CHECK(s.try_acquire("orders", "A", 10s).error() == errc::busy);
    CHECK(writes <= 16);
  }
  SECTION("a version-0 answer with a value") {
    kv.on_get = [](auto) {
      return holdfast::result<holdfast::cas_entry>(holdfast::cas_entry{"junk", 0});
    };
    CHECK(s.try_acquire("orders", "B", 10s).error() == errc::protocol_error);
    CHECK(s.inspect("orders").error() == errc::protocol_error);
  }
}

TEST_CASE("two processes, each with its own clock, share one KV", "[cas]") {
  holdfast::memory_cas_kv kv;
  manual_clock a_clock, b_clock;  // unrelated clocks: no shared time at all
  b_clock.advance(1000h);
  holdfast::cas_store<holdfast::memory_cas_kv, manual_clock> a(kv, a_clock), b(kv, b_clock);
  auto ga = a.try_acquire("orders", "A", 10s);
  REQUIRE(ga);
  CHECK(b.try_acquire("orders", "B", 10s).error() == errc::busy);
  a_clock.advance(1h);  // A's clock racing ahead changes nothing for B's wait ...
  CHECK(b.try_acquire("orders", "B", 10s).error() == errc::busy);
  // ... though A's own adapter now considers the lease expired, and will not renew it.
  CHECK(a.renew("orders", "A", ga->token, 10s).error() == errc::lease_lost);
  CHECK(b.try_acquire("orders", "B", 10s).error() == errc::busy);
  b_clock.advance(10s);
  auto gb = b.try_acquire("orders", "B", 10s);
  REQUIRE(gb);
  CHECK(gb->token > ga->token);
}

TEST_CASE("a contender on a coarse clock waits the full TTL in real time", "[cas]") {
  // The kind of issue "time at the edges" (1) on the CAS adapter: the contender's clock reads true
  // time rounded down to whole seconds. It first sees A's 1500 ms record at true time 0.999 s
  // (read 0 s). Before, it took the key over when its clock read 1.5 s (true time 2.0 s: only
  // 1.001 s of watching). Expected: busy until the clock reads 0 + 1.5 s + 1 s tick, i.e. true
  // time 3.0 s; one tick before, at and after.
  manual_clock truth;
  holdfast::memory_cas_kv kv;
  holdfast::cas_store<holdfast::memory_cas_kv, manual_clock> holder(kv, truth);
  holdfast::cas_store<holdfast::memory_cas_kv, holdfast_test::rounding_clock> contender(
      kv, holdfast_test::rounding_clock(truth, 1s));
  truth.set(manual_clock::time_point(200ms));
  auto a = holder.try_acquire("k", "A", 1500ms);
  REQUIRE(a);
  truth.set(manual_clock::time_point(999ms));
  CHECK(contender.try_acquire("k", "B", 1500ms).error() == errc::busy);  // the wait starts
  for (const std::chrono::nanoseconds t : {2s - 0ns, 3s - 1ns}) {
    truth.set(manual_clock::time_point(t));
    CHECK(contender.try_acquire("k", "B", 1500ms).error() == errc::busy);
  }
  truth.set(manual_clock::time_point(3s));
  auto b = contender.try_acquire("k", "B", 1500ms);
  REQUIRE(b);
  CHECK(b->token > a->token);
}

TEST_CASE("an adapter's memory is bounded by the keys in use, not every key it saw held", "[cas]") {
  // Review input: adapter B sees 20000 distinct keys held by A (through another adapter), each
  // freed by A there, never through B. Before, B remembered all 20000 sightings. Expected: its
  // sightings are swept once watched unchanged for two TTLs, so at most 64 remain here.
  manual_clock clock;
  holdfast::memory_cas_kv kv;
  holdfast::cas_store<holdfast::memory_cas_kv, manual_clock> a(kv, clock);
  holdfast::cas_store<holdfast::memory_cas_kv, manual_clock> b(kv, clock);
  for (int i = 0; i < 20000; ++i) {
    const std::string key = "key" + std::to_string(i);
    auto g = a.try_acquire(key, "A", 1ms);
    REQUIRE(g);
    REQUIRE(b.try_acquire(key, "B", 1ms).error() == errc::busy);  // B starts timing it
    REQUIRE(a.release(key, "A", g->token));
    clock.advance(1ms);
  }
  CHECK(a.watching() == 0);
  CHECK(b.watching() <= 64);
  // A key B is still waiting on is kept: its wait goes on and ends on time.
  auto held = a.try_acquire("live", "A", 10ms);
  REQUIRE(held);
  CHECK(b.try_acquire("live", "B", 10ms).error() == errc::busy);
  for (int i = 0; i < 200; ++i) {  // many other keys come and go meanwhile (sweeps run)
    const std::string key = "other" + std::to_string(i);
    auto g = a.try_acquire(key, "A", 1ms);
    REQUIRE(g);
    REQUIRE(b.try_acquire(key, "B", 1ms).error() == errc::busy);
  }
  clock.advance(10ms - 1ns);
  CHECK(b.try_acquire("live", "B", 10ms).error() == errc::busy);
  clock.advance(1ns);
  CHECK(b.try_acquire("live", "B", 10ms));
}

}  // namespace test_cas_store
