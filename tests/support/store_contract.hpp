// tests/support/store_contract.hpp - the LeaseStore contract (store.hpp) as run-time
// checks that any store can be put through: memory_store (the reference), redis_store,
// postgres_store, and deliberately broken stores (negative controls: the checks must catch them).
//
// The checks return the list of violations instead of asserting, so a test can require "none"
// for a real store and "some" for a broken one. They never sleep: expiry is forced through the
// `expire_now(key)` hook each store's test supplies (a manual clock, PEXPIREAT, an UPDATE).
#ifndef HOLDFAST_TESTS_SUPPORT_STORE_CONTRACT_HPP
#define HOLDFAST_TESTS_SUPPORT_STORE_CONTRACT_HPP

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/store.hpp"

namespace hf_test {

/// Collects violations; `expect(cond, what)` records `what` when cond is false.
class violations {
 public:
  bool expect(bool ok, const std::string& what) {
    if (!ok) {
      std::lock_guard<std::mutex> lock(mutex_);
      list_.push_back(what);
    }
    return ok;
  }
  [[nodiscard]] std::vector<std::string> list() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return list_;
  }
  [[nodiscard]] std::string text() const {
    std::string out;
    for (const std::string& v : list()) out += "  - " + v + "\n";
    return out;
  }
  [[nodiscard]] bool empty() const { return list().empty(); }

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> list_;
};

inline std::string ec_text(const std::error_code& ec) {
  return ec ? ec.message() : std::string("success");
}

/// Printable form of a possibly binary string (for messages only).
inline std::string printable(std::string_view s) {
  std::string out;
  const std::size_t shown = s.size() > 40 ? 40 : s.size();
  for (std::size_t i = 0; i < shown; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 32 && c < 127) {
      out += static_cast<char>(c);
    } else {
      static constexpr char hex[] = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  if (s.size() > shown) out += "...(" + std::to_string(s.size()) + " bytes)";
  return out;
}

/// Keys and owners that break naive stores: quotes, Lua/SQL/RESP metacharacters, NUL bytes,
/// invalid UTF-8, the store's own separators, and 1 MiB of random bytes (NULs included).
inline std::vector<std::string> hostile_strings() {
  using namespace std::string_literals;
  std::vector<std::string> v = {
      "'",
      "\"",
      "''; DROP TABLE holdfast_leases; --",
      "\"); DELETE FROM x; --",
      "$1",
      "\\x00",
      "]]) redis.call('FLUSHALL') --[[",
      "return redis.call('FLUSHALL')",
      "%s%n%d",
      "\r\n*1\r\n$8\r\nFLUSHALL\r\n",
      "\0"s,
      "a\0b"s,
      "\0\0\0tail"s,
      "\xff\xfe\xc0\x80",
      "1:2:3",
      ":",
      "{holdfast}:token",
      "\xe2\x80\xae\xf0\x9f\x94\x92",  // right-to-left override, a lock emoji
  };
  std::string big(1 << 20, '\0');
  std::mt19937_64 gen(20161108);  // fixed: the same megabyte every run
  for (char& c : big) c = static_cast<char>(gen() & 0xff);
  v.push_back(big);
  return v;
}

/// What a store's test supplies to the contract checks.
struct contract_hooks {
  /// Makes the lease on `key` (as passed to the store) expire now, by the store's own clock.
  std::function<void(std::string_view key)> expire_now;
  /// A prefix that keeps this run's keys apart from other runs on a shared server.
  std::string key_prefix;
  /// True if releasing an expired-but-not-taken-over lease may report not_holder (Redis deletes
  /// expired records); memory_store and postgres_store report success.
  bool release_after_expiry_may_fail = false;
};

/// Runs the single-client contract checks (store.hpp: T1, T3, T4's busy, bad input, inspect) on
/// `s` and returns what it violated. `s` must model LeaseStore with inspect().
template <class Store>
std::vector<std::string> check_store_contract(Store& s, const contract_hooks& h) {
  using holdfast::errc;
  using holdfast::fencing_token;
  using std::chrono::milliseconds;
  violations v;
  const std::string k1 = h.key_prefix + "contract-1";
  const std::string k2 = h.key_prefix + "contract-2";
  const std::string a = "owner-a";
  const std::string b = "owner-b";
  const milliseconds ttl{60000};

  auto is = [](const auto& r, errc e) { return !r && r.error() == e; };

  // Bad input changes nothing and is reported as invalid_argument.
  v.expect(is(s.try_acquire("", a, ttl), errc::invalid_argument), "acquire with empty key");
  v.expect(is(s.try_acquire(k1, "", ttl), errc::invalid_argument), "acquire with empty owner");
  v.expect(is(s.try_acquire(k1, a, milliseconds(0)), errc::invalid_argument), "acquire ttl 0");
  v.expect(is(s.try_acquire(k1, a, milliseconds(-5)), errc::invalid_argument), "acquire ttl < 0");
  v.expect(is(s.try_acquire(k1, a, holdfast::max_ttl + milliseconds(1)), errc::invalid_argument),
           "acquire ttl > max_ttl");
  v.expect(is(s.renew(k1, a, fencing_token{}, ttl), errc::invalid_argument), "renew token none");
  v.expect(is(s.renew(k1, a, fencing_token::max(), ttl), errc::invalid_argument),
           "renew token max");
  v.expect(is(s.release(k1, a, fencing_token{}), errc::invalid_argument), "release token none");
  v.expect(is(s.release(k1, a, fencing_token::max()), errc::invalid_argument), "release token max");
  v.expect(is(s.inspect(""), errc::invalid_argument), "inspect with empty key");
  {
    auto r = s.inspect(k1);
    v.expect(r && !r->has_value(), "bad input must leave the key free: " + ec_text(r.error()));
  }

  // Grant, busy, same-owner re-acquire.
  auto g1 = s.try_acquire(k1, a, ttl);
  if (!v.expect(bool(g1), "first acquire must grant: " + ec_text(g1.error()))) return v.list();
  v.expect(g1->token.is_issuable(), "granted token must be issuable");
  v.expect(g1->ttl > milliseconds(0) && g1->ttl <= ttl, "granted ttl must be in (0, asked]");
  {
    auto r = s.inspect(k1);
    v.expect(r && r->has_value() && (*r)->owner == a && (*r)->token == g1->token &&
                 (*r)->remaining > milliseconds(0) && (*r)->remaining <= ttl,
             "inspect must show the holder, its token and remaining in (0, ttl]");
  }
  v.expect(is(s.try_acquire(k1, b, ttl), errc::busy), "another owner must get busy");
  {
    auto again = s.try_acquire(k1, a, ttl);
    v.expect(again && again->token == g1->token,
             "same owner re-acquiring its live lease must get the same token");
  }
  {
    auto r = s.inspect(k1);
    v.expect(r && r->has_value() && (*r)->owner == a && (*r)->token == g1->token,
             "busy and re-acquire must not change the record");
  }

  // Renew: only the holder, with its token.
  {
    auto r = s.renew(k1, a, g1->token, ttl);
    v.expect(r && r->token == g1->token, "holder renew must succeed with the same token");
    v.expect(is(s.renew(k1, b, g1->token, ttl), errc::lease_lost), "renew by another owner");
    v.expect(is(s.renew(k1, a, fencing_token(g1->token.value() + 1), ttl), errc::lease_lost),
             "renew with a wrong token");
    v.expect(is(s.renew(k2, a, g1->token, ttl), errc::lease_lost), "renew of a free key");
  }

  // Release: only the holder, with its token; the record survives other attempts.
  v.expect(is(s.release(k1, b, g1->token), errc::not_holder), "release by another owner");
  v.expect(is(s.release(k1, a, fencing_token(g1->token.value() + 1)), errc::not_holder),
           "release with a wrong token");
  {
    auto r = s.inspect(k1);
    v.expect(r && r->has_value() && (*r)->owner == a, "failed renew/release must change nothing");
  }
  v.expect(bool(s.release(k1, a, g1->token)), "holder release must succeed");
  {
    auto r = s.inspect(k1);
    v.expect(r && !r->has_value(), "released key must be free");
  }
  v.expect(is(s.release(k1, a, g1->token), errc::not_holder), "second release: not_holder");
  v.expect(is(s.renew(k1, a, g1->token, ttl), errc::lease_lost), "renew after release");

  // T1: every new grant carries a strictly greater token, across release, expiry and keys.
  auto g2 = s.try_acquire(k1, b, ttl);
  if (!v.expect(bool(g2), "acquire after release must grant")) return v.list();
  v.expect(g1->token < g2->token, "token after release must be greater");
  auto g3 = s.try_acquire(k2, a, ttl);
  if (!v.expect(bool(g3), "acquire of another key must grant")) return v.list();
  v.expect(g2->token < g3->token, "store-wide tokens must increase across keys");
  v.expect(bool(s.release(k2, a, g3->token)), "release of the second key");
  h.expire_now(k1);
  v.expect(is(s.renew(k1, b, g2->token, ttl), errc::lease_lost), "expired lease must not renew");
  {
    auto r = s.inspect(k1);
    v.expect(r && !r->has_value(), "inspect must not show an expired lease");
  }
  auto g4 = s.try_acquire(k1, a, ttl);
  if (!v.expect(bool(g4), "acquire after expiry must grant: " + ec_text(g4.error()))) {
    return v.list();
  }
  v.expect(g3->token < g4->token, "token after expiry must be greater");
  v.expect(is(s.renew(k1, b, g2->token, ttl), errc::lease_lost), "old holder renew after takeover");
  v.expect(is(s.release(k1, b, g2->token), errc::not_holder), "old holder release after takeover");
  {
    auto r = s.inspect(k1);
    v.expect(r && r->has_value() && (*r)->owner == a && (*r)->token == g4->token,
             "the old holder must not disturb the new one");
  }
  // Same owner whose lease expired gets a NEW token (it is a new grant).
  h.expire_now(k1);
  {
    auto g5 = s.try_acquire(k1, a, ttl);
    v.expect(g5 && g4->token < g5->token, "re-acquire after own expiry must be a new grant");
    if (g5) {
      auto rel = s.release(k1, a, g5->token);
      v.expect(bool(rel), "release of the new grant");
    }
  }
  // Releasing an expired lease nobody took over: success or (Redis) not_holder, never an error.
  {
    auto g6 = s.try_acquire(k2, a, ttl);
    if (v.expect(bool(g6), "acquire k2 again: " + ec_text(g6.error()))) {
      v.expect(g3->token < g6->token, "k2 re-acquire after release must be a new, greater token");
      h.expire_now(k2);
      auto rel = s.release(k2, a, g6->token);
      v.expect(rel || (h.release_after_expiry_may_fail && rel.error() == errc::not_holder),
               "release after expiry: " + ec_text(rel.error()));
      auto r = s.inspect(k2);
      v.expect(r && !r->has_value(), "k2 must be free after expiry and release");
    }
  }
  return v.list();
}

/// Checks that hostile keys and owners round-trip exactly: each is acquired, inspected (owner
/// bytes identical), renewed and released; keys that differ only after a NUL byte are distinct.
template <class Store>
std::vector<std::string> check_hostile_strings(Store& s, const contract_hooks& h) {
  using std::chrono::milliseconds;
  violations v;
  const std::vector<std::string> hostile = hostile_strings();
  for (std::size_t i = 0; i < hostile.size(); ++i) {
    const std::string& key = hostile[i];
    const std::string& owner = hostile[hostile.size() - 1 - i];
    const std::string full_key = h.key_prefix + key;
    auto g = s.try_acquire(full_key, owner, milliseconds(60000));
    if (!v.expect(bool(g), "acquire key " + printable(key) + ": " + ec_text(g.error()))) continue;
    auto r = s.inspect(full_key);
    v.expect(
        r && r->has_value() && (*r)->owner == owner && (*r)->token == g->token,
        "owner must round-trip exactly for key " + printable(key) + " owner " + printable(owner));
    v.expect(
        s.try_acquire(full_key, owner + "x", milliseconds(60000)).error() == holdfast::errc::busy,
        "a different owner must be busy on key " + printable(key));
    auto again = s.try_acquire(full_key, owner, milliseconds(60000));
    v.expect(again && again->token == g->token, "same hostile owner re-acquire, same token");
    v.expect(bool(s.renew(full_key, owner, g->token, milliseconds(60000))),
             "renew key " + printable(key));
    v.expect(bool(s.release(full_key, owner, g->token)), "release key " + printable(key));
    auto after = s.inspect(full_key);
    v.expect(after && !after->has_value(), "key " + printable(key) + " free after release");
  }
  // Keys equal up to a NUL byte must be different leases.
  using namespace std::string_literals;
  const std::string x = h.key_prefix + "nul\0x"s;
  const std::string y = h.key_prefix + "nul\0y"s;
  auto gx = s.try_acquire(x, "p", milliseconds(60000));
  auto gy = s.try_acquire(y, "q", milliseconds(60000));
  v.expect(gx && gy, "keys differing after a NUL must be independent leases");
  if (gx) (void)s.release(x, "p", gx->token);
  if (gy) (void)s.release(y, "q", gy->token);
  // Owners equal up to a NUL byte must be different owners.
  const std::string z = h.key_prefix + "nul-owner";
  auto gz = s.try_acquire(z, "o\0a"s, milliseconds(60000));
  v.expect(gz && s.try_acquire(z, "o\0b"s, milliseconds(60000)).error() == holdfast::errc::busy,
           "owners differing after a NUL must be different owners");
  if (gz) (void)s.release(z, "o\0a"s, gz->token);
  return v.list();
}

/// Contention across real threads, each with its own store from `make()`: at most one thread
/// believes it holds `key` at a time (TTL far longer than the run, so no expiry), and the tokens
/// of successive grants strictly increase. Bounded: `rounds` grants per thread, each attempt
/// bounded by the store's own timeouts.
template <class MakeStore>
std::vector<std::string> check_exclusive_grants(MakeStore make, const std::string& key, int threads,
                                                int rounds) {
  using std::chrono::milliseconds;
  violations v;
  std::atomic<int> inside{0};
  std::mutex order_mutex;
  std::vector<std::uint64_t> order;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      auto store = make();
      const std::string owner = "thread-" + std::to_string(t);
      int granted = 0;
      for (int attempt = 0; granted < rounds && attempt < rounds * 2000; ++attempt) {
        auto g = store->try_acquire(key, owner, milliseconds(60000));
        if (!g) {
          v.expect(g.error() == holdfast::errc::busy, "contended acquire: " + ec_text(g.error()));
          std::this_thread::yield();
          continue;
        }
        v.expect(inside.fetch_add(1) == 0, "two holders at once");
        {
          std::lock_guard<std::mutex> lock(order_mutex);
          v.expect(order.empty() || order.back() < g->token.value(),
                   "tokens of successive grants must strictly increase");
          order.push_back(g->token.value());
        }
        inside.fetch_sub(1);
        v.expect(bool(store->release(key, owner, g->token)), "release after contended grant");
        ++granted;
      }
      v.expect(granted == rounds, owner + " starved");
    });
  }
  for (std::thread& th : pool) th.join();
  return v.list();
}

}  // namespace hf_test

#endif  // HOLDFAST_TESTS_SUPPORT_STORE_CONTRACT_HPP
