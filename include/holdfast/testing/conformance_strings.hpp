// SPDX-License-Identifier: MIT
// holdfast/testing/conformance_strings.hpp - keys and owners that break naive stores, and the
// check that a store keeps them exactly: check_hostile_strings(). check_store() runs it on the
// contract checks' store (conformance_options::hostile_strings, on by default).
//
// A store that builds a script, a statement or a protocol line out of a key, that stops at a NUL
// byte, re-encodes text or truncates long keys, either fails here or corrupts other data. The
// strings come from this project's Redis, PostgreSQL and etcd tests (Lua, SQL and RESP
// injection, the stores' own separators, a 1 MiB key), in the tradition of the "big list of
// naughty strings".
#ifndef HOLDFAST_TESTING_CONFORMANCE_STRINGS_HPP
#define HOLDFAST_TESTING_CONFORMANCE_STRINGS_HPP

#include <chrono>
#include <cstddef>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/result.hpp"
#include "holdfast/store.hpp"
#include "holdfast/testing/conformance_options.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace testing {

/// Returns keys and owners that break naive stores: quotes, Lua/SQL/RESP metacharacters, format
/// specifiers, NUL bytes (alone, inside, leading), invalid UTF-8, store separators, a
/// right-to-left override, and last 1 MiB (1 << 20 bytes) of pseudo-random bytes, NULs included,
/// the same every call (a fixed seed). None is empty. Thread-safety: none needed (no state).
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
  std::string big(std::size_t(1) << 20, '\0');
  std::mt19937_64 gen(20161108);  // fixed: the same megabyte every run
  for (char& c : big) c = static_cast<char>(gen() & 0xff);
  v.push_back(big);
  return v;
}

/// Returns a printable form of a possibly binary string, for messages: printable ASCII as is,
/// other bytes as \xNN, at most the first 40 bytes, then "...(N bytes)". Thread-safety: none
/// needed.
inline std::string printable(std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  const std::size_t shown = s.size() > 40 ? 40 : s.size();
  for (std::size_t i = 0; i < shown; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c >= 32 && c < 127) {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  if (s.size() > shown) out += "...(" + std::to_string(s.size()) + " bytes)";
  return out;
}

namespace detail {

/// The hostile-string checks, adding to `rep` (see check_hostile_strings()).
template <class Store>
class hostile_checker {
 public:
  hostile_checker(Store& s, const conformance_options& o, conformance_report& rep)
      : s_(s), o_(o), rep_(rep) {}

  void run() {
    const std::vector<std::string> hostile = hostile_strings();
    for (std::size_t i = 0; i < hostile.size(); ++i) {
      round_trip(hostile[i], hostile[hostile.size() - 1 - i]);
    }
    using namespace std::string_literals;
    // Keys equal up to a NUL byte are different leases; owners likewise different owners.
    const std::string x = o_.key_prefix + "nul\0x"s;
    const std::string y = o_.key_prefix + "nul\0y"s;
    const result<grant> gx = s_.try_acquire(x, "p", ttl_);
    const result<grant> gy = s_.try_acquire(y, "q", ttl_);
    expect(gx && gy, "keys differing after a NUL must be independent leases");
    if (gx) (void)s_.release(x, "p", gx->token);
    if (gy) (void)s_.release(y, "q", gy->token);
    const std::string z = o_.key_prefix + "nul-owner";
    const result<grant> gz = s_.try_acquire(z, "o\0a"s, ttl_);
    expect(gz && s_.try_acquire(z, "o\0b"s, ttl_).error() == errc::busy,
           "owners differing after a NUL must be different owners");
    if (gz) (void)s_.release(z, "o\0a"s, gz->token);
  }

 private:
  // Acquire, inspect (owner bytes identical), busy for another owner, same-owner re-acquire,
  // renew and release, all with `key` under `owner`.
  void round_trip(const std::string& key, const std::string& owner) {
    const std::string full_key = o_.key_prefix + key;
    const std::string shown = printable(key);
    const result<grant> g = s_.try_acquire(full_key, owner, ttl_);
    if (!expect(bool(g), "acquire key " + shown + ": " + error_text(g.error()))) return;
    if constexpr (has_inspect_v<Store>) {
      const auto r = s_.inspect(full_key);
      expect(r && r->has_value() && (*r)->owner == owner && (*r)->token == g->token,
             "owner must round-trip exactly for key " + shown + " owner " + printable(owner));
    }
    expect(s_.try_acquire(full_key, owner + "x", ttl_).error() == errc::busy,
           "a different owner must be busy on key " + shown);
    const result<grant> again = s_.try_acquire(full_key, owner, ttl_);
    expect(again && again->token == g->token,
           "same owner re-acquiring key " + shown + " must get the same token");
    expect(bool(s_.renew(full_key, owner, g->token, ttl_)), "renew key " + shown);
    expect(bool(s_.release(full_key, owner, g->token)), "release key " + shown);
    if constexpr (has_inspect_v<Store>) {
      const auto after = s_.inspect(full_key);
      expect(after && !after->has_value(), "key " + shown + " free after release");
    }
  }

  bool expect(bool ok, const std::string& what) {
    ++rep_.contract_checks;
    if (!ok) rep_.failures.push_back("hostile strings: " + what);
    return ok;
  }

  Store& s_;
  const conformance_options& o_;
  conformance_report& rep_;
  std::chrono::milliseconds ttl_{60000};  // far longer than the checks: nothing expires
};

}  // namespace detail

/// Checks that hostile keys and owners (hostile_strings()) round-trip exactly through `store`:
/// each key (after o.key_prefix) is acquired by a hostile owner, inspected (if the store has
/// inspect(): the owner's bytes identical), refused to another owner (busy), re-acquired by its
/// owner with the same token, renewed and released; keys differing only after a NUL byte are
/// different leases, owners differing only after one different owners. Leases are granted for
/// 60 s and all released.
///
/// \param store  a LeaseStore (store.hpp), empty for the keys used.
/// \param o      only key_prefix is read.
/// \returns the failures (each "hostile strings: what happened", the key shown by printable());
///          contract_checks counts the checks made.
///
/// Exceptions thrown by the store propagate. Thread-safety: calls the store from the calling
/// thread only.
template <class Store>
conformance_report check_hostile_strings(Store& store, const conformance_options& o = {}) {
  static_assert(assert_lease_store<Store>());
  conformance_report rep;
  detail::hostile_checker<Store>(store, o, rep).run();
  return rep;
}

}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_CONFORMANCE_STRINGS_HPP
