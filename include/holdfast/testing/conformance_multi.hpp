// SPDX-License-Identifier: MIT
// holdfast/testing/conformance_multi.hpp - the contract of the optional atomic multi-key grant
// (store.hpp, has_try_acquire_all_v: `try_acquire_all(keys, count, owner, ttl, grants)`) as
// deterministic checks on one store: check_try_acquire_all(). check_store() (conformance.hpp)
// runs them on the store of its contract checks whenever the store has the capability; a test
// that builds its store itself (a real server's) calls check_try_acquire_all() on it directly.
//
//   check                       | what it asks of the store
//   ----------------------------+-------------------------------------------------------------
//   multi T4 bad input          | count 0, a key given twice, an empty key or owner, a TTL <= 0
//                               | or > max_ttl: invalid_argument, and no key is taken
//   multi all                   | a grant of 3 free keys: each key held by the owner (another
//                               | owner's try_acquire is busy; inspect shows it with the token
//                               | reported for it), each token issuable, each TTL in (0, asked];
//                               | with store_wide_tokens, every new token above every earlier one
//   multi own lease             | each grant renews and releases on its own with its own token
//   multi T1 same owner         | asking again for keys one holds (a retry after a lost reply)
//                               | returns the same tokens, also for a key taken by try_acquire
//                               | mixed with a free one (which gets a new token)
//   multi T1 across release     | after release, the next grant of each key has a greater token
//   multi busy                  | a key held by another owner (first, middle or last in the
//                               | list): busy, and every other key of the list stays as it was
//                               | (free keys free, the caller's own keys with their tokens)
//
// These catch a store that grants the keys one at a time and keeps the first ones when a later
// one is busy (the "keeps a strict subset" fault multi_lease.hpp's ordered path guards against),
// reports a token a key does not hold, or draws a new token on a same-owner retry. Tokens of one
// step may be equal across its keys (etcd: one transaction, one revision); each is its key's own,
// and renew and release take it key by key. The keys are
// o.key_prefix + "multi-0" ... "multi-6"; every grant is released at the end.
#ifndef HOLDFAST_TESTING_CONFORMANCE_MULTI_HPP
#define HOLDFAST_TESTING_CONFORMANCE_MULTI_HPP

#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/result.hpp"
#include "holdfast/store.hpp"
#include "holdfast/testing/conformance_options.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace testing {
namespace detail {

/// The multi-key checks (the table at the top of conformance_multi.hpp) on one store that has
/// try_acquire_all, with grants of `ttl`.
template <class Store>
class multi_checker {
 public:
  multi_checker(Store& s, std::chrono::milliseconds ttl, const conformance_options& o,
                conformance_report& rep)
      : s_(s), ttl_(ttl), o_(o), rep_(rep) {
    for (int i = 0; i < 7; ++i) keys_.push_back(o.key_prefix + "multi-" + std::to_string(i));
  }

  void run() {
    bad_input();
    if (const result<grant> probe = s_.try_acquire(keys_[6], "z", ttl_)) {
      newest_ = probe->token;
      (void)s_.release(keys_[6], "z", probe->token);
    }
    std::vector<grant> first;
    if (!grant_all("multi all", {0, 1, 2}, "a", first)) return;
    for (std::size_t i = 0; i < 3; ++i) {
      expect_held("multi all", keys_[i], "a", first[i].token);
      expect(first[i].ttl > std::chrono::milliseconds(0) && first[i].ttl <= ttl_, "multi all",
             "the TTL granted for key " + std::to_string(i) + " is " +
                 std::to_string(first[i].ttl.count()) + "ms, not in (0, asked]");
    }
    if (o_.store_wide_tokens) {  // one counter: every new token is above every earlier one
      expect(newest_ < first[0].token && newest_ < first[1].token && newest_ < first[2].token,
             "multi all", "tokens " + tokens(first) + " are not above the newest before them");
    }
    same_owner_again(first);
    busy_leaves_nothing(first);
    own_leases_and_next_grant(first);
    mixed_with_a_single_grant();
  }

 private:
  void bad_input() {
    const std::string_view two[] = {keys_[0], keys_[1]};
    const std::string_view dup[] = {keys_[0], keys_[0]};
    const std::string_view empty[] = {keys_[0], ""};
    grant g[2];
    expect_invalid("multi T4 no keys", s_.try_acquire_all(two, 0, "a", ttl_, g));
    expect_invalid("multi T4 a key given twice", s_.try_acquire_all(dup, 2, "a", ttl_, g));
    expect_invalid("multi T4 empty key", s_.try_acquire_all(empty, 2, "a", ttl_, g));
    expect_invalid("multi T4 empty owner", s_.try_acquire_all(two, 2, "", ttl_, g));
    expect_invalid("multi T4 zero TTL",
                   s_.try_acquire_all(two, 2, "a", std::chrono::milliseconds(0), g));
    expect_invalid("multi T4 TTL above max_ttl",
                   s_.try_acquire_all(two, 2, "a", max_ttl + std::chrono::milliseconds(1), g));
    expect_free("multi T4 nothing taken", keys_[0]);
    expect_free("multi T4 nothing taken", keys_[1]);
  }

  // The same owner asks again (a retry after a lost reply): the same tokens.
  void same_owner_again(const std::vector<grant>& first) {
    std::vector<grant> again;
    if (!grant_all("multi T1 same owner", {0, 1, 2}, "a", again)) return;
    for (std::size_t i = 0; i < 3; ++i) {
      expect(again[i].token == first[i].token, "multi T1 same owner",
             "asking again for keys one holds returned tokens " + tokens(again) + ", expected " +
                 tokens(first));
    }
  }

  // Another owner's key anywhere in the list: busy, nothing else changes.
  void busy_leaves_nothing(const std::vector<grant>& first) {
    const result<grant> b = s_.try_acquire(keys_[4], "b", ttl_);
    if (!expect(b.has_value(), "multi busy",
                "try_acquire on a free key failed: " + error_text(b.error()))) {
      return;
    }
    const std::vector<std::vector<std::size_t>> lists = {{4, 3, 5}, {3, 5, 4}, {3, 4}, {4, 5}};
    for (const auto& list : lists) {
      std::vector<grant> g;
      const result<void> r = call(list, "a", g);
      expect(!r && r.error() == errc::busy, "multi busy",
             "a list with another owner's key answered " +
                 (r ? std::string("a grant") : error_text(r.error())) + ", expected busy");
      if (r) release_all(list, "a", g);
      expect_free("multi busy leaves nothing", keys_[3]);
      expect_free("multi busy leaves nothing", keys_[5]);
    }
    // The caller's own keys with another owner's: busy, and its own keep their tokens.
    std::vector<grant> g;
    const result<void> r = call({0, 4, 1}, "a", g);
    expect(!r && r.error() == errc::busy, "multi busy",
           "a list of one's own keys and another owner's answered " +
               (r ? std::string("a grant") : error_text(r.error())) + ", expected busy");
    for (std::size_t i = 0; i < 2; ++i) {
      expect_held("multi busy leaves one's own keys", keys_[i], "a", first[i].token);
    }
    // Another owner asking for keys "a" holds gets busy too.
    const result<void> other = call({2, 6}, "b", g);
    expect(!other && other.error() == errc::busy, "multi busy",
           "another owner's list over a held key answered " +
               (other ? std::string("a grant") : error_text(other.error())) + ", expected busy");
    expect_free("multi busy leaves nothing", keys_[6]);
    (void)s_.release(keys_[4], "b", b->token);
  }

  // Each grant is its own lease; after release each key's next token is greater.
  void own_leases_and_next_grant(const std::vector<grant>& first) {
    const result<grant> r = s_.renew(keys_[1], "a", first[1].token, ttl_);
    expect(r && r->token == first[1].token, "multi own lease",
           "renewing one key of a multi-key grant with its token failed: " +
               (r ? "token " + to_string(r->token) : error_text(r.error())));
    for (std::size_t i = 0; i < 3; ++i) {
      const result<void> rel = s_.release(keys_[i], "a", first[i].token);
      expect(rel.has_value(), "multi own lease",
             "releasing key " + std::to_string(i) +
                 " of a multi-key grant failed: " + error_text(rel.error()));
      expect_free("multi own lease", keys_[i]);
    }
    std::vector<grant> next;
    if (!grant_all("multi T1 across release", {2, 0, 1}, "b", next)) return;
    // next is in the order asked: key 2, key 0, key 1.
    const std::size_t of[] = {2, 0, 1};
    for (std::size_t i = 0; i < 3; ++i) {
      expect(first[of[i]].token < next[i].token, "multi T1 across release",
             "key " + std::to_string(of[i]) + " was granted token " + to_string(next[i].token) +
                 " after release, not greater than its earlier " + to_string(first[of[i]].token));
    }
    release_all({2, 0, 1}, "b", next);
  }

  // A key taken by try_acquire and a free one: the held key keeps its token.
  void mixed_with_a_single_grant() {
    const result<grant> one = s_.try_acquire(keys_[3], "c", ttl_);
    if (!expect(one.has_value(), "multi T1 same owner",
                "try_acquire on a free key failed: " + error_text(one.error()))) {
      return;
    }
    std::vector<grant> g;
    if (!grant_all("multi T1 same owner", {5, 3}, "c", g)) {
      (void)s_.release(keys_[3], "c", one->token);
      return;
    }
    expect(g[1].token == one->token, "multi T1 same owner",
           "a key held by try_acquire came back from try_acquire_all with token " +
               to_string(g[1].token) + ", expected " + to_string(one->token));
    if (o_.store_wide_tokens) {
      expect(one->token < g[0].token, "multi all",
             "a free key granted after a held one got token " + to_string(g[0].token) +
                 ", not above the held one's " + to_string(one->token));
    }
    expect_held("multi all", keys_[5], "c", g[0].token);
    release_all({5, 3}, "c", g);
  }

  result<void> call(const std::vector<std::size_t>& list, std::string_view owner,
                    std::vector<grant>& out) {
    std::vector<std::string_view> views;
    views.reserve(list.size());
    for (std::size_t i : list) views.push_back(keys_[i]);
    out.assign(list.size(), grant{});
    return s_.try_acquire_all(views.data(), views.size(), owner, ttl_, out.data());
  }

  bool grant_all(const std::string& rule, const std::vector<std::size_t>& list,
                 std::string_view owner, std::vector<grant>& out) {
    const result<void> r = call(list, owner, out);
    if (!expect(r.has_value(), rule,
                "try_acquire_all on free keys failed: " + error_text(r.error())))
      return false;
    bool ok = true;
    for (const grant& g : out) {
      ok = expect(g.token.is_issuable(), rule,
                  "try_acquire_all reported token " + to_string(g.token) + ", not issuable") &&
           ok;
    }
    return ok;
  }

  void release_all(const std::vector<std::size_t>& list, std::string_view owner,
                   const std::vector<grant>& g) {
    for (std::size_t i = 0; i < list.size() && i < g.size(); ++i) {
      (void)s_.release(keys_[list[i]], owner, g[i].token);
    }
  }

  // Held by `owner` with `token`: another owner is busy, and inspect (if any) shows it.
  void expect_held(const std::string& rule, const std::string& key, std::string_view owner,
                   fencing_token token) {
    const result<grant> other = s_.try_acquire(key, "z", ttl_);
    expect(!other && other.error() == errc::busy, rule,
           "another owner asking for a key granted by try_acquire_all got " +
               (other ? std::string("a grant") : error_text(other.error())) + ", expected busy");
    if (other) (void)s_.release(key, "z", other->token);
    if constexpr (has_inspect_v<Store>) {
      const auto r = s_.inspect(key);
      expect(r && *r && (*r)->owner == owner && (*r)->token == token, rule,
             "inspect does not show the grant of token " + to_string(token));
    }
  }

  // Free: another owner gets it (and gives it back at once).
  void expect_free(const std::string& rule, const std::string& key) {
    const result<grant> g = s_.try_acquire(key, "z", ttl_);
    expect(g.has_value(), rule,
           "a key the call did not grant is not free: " + error_text(g.error()));
    if (g) (void)s_.release(key, "z", g->token);
  }

  static std::string tokens(const std::vector<grant>& g) {
    std::string out;
    for (const grant& x : g) out += (out.empty() ? "" : ", ") + to_string(x.token);
    return "{" + out + "}";
  }

  bool expect(bool ok, const std::string& rule, const std::string& what) {
    ++rep_.contract_checks;
    if (!ok) rep_.failures.push_back(rule + ": " + what);
    return ok;
  }

  void expect_invalid(const std::string& rule, const result<void>& r) {
    expect(!r && r.error() == errc::invalid_argument, rule,
           "expected " + error_text(make_error_code(errc::invalid_argument)) + ", got " +
               (r ? std::string("success") : error_text(r.error())));
  }

  Store& s_;
  std::chrono::milliseconds ttl_;
  const conformance_options& o_;
  conformance_report& rep_;
  fencing_token newest_;  // the kit's last single grant before the first multi-key grant
  std::vector<std::string> keys_;
};

}  // namespace detail

/// Runs the multi-key checks (the table at the top of conformance_multi.hpp) on `store`, which
/// must have try_acquire_all (has_try_acquire_all_v) and be empty for the keys the checks use
/// (o.key_prefix + "multi-0" ... "multi-6"); returns what it violated. Grants are made for 60 s
/// and all released at the end; o.store_wide_tokens adds the store-wide order (the other fields
/// are ignored).
/// \returns the failures (each "rule: what happened"); contract_checks counts the checks made.
///   A store's own errors are failures, never thrown.
/// Exceptions thrown by the store propagate. Thread-safety: calls the store from the calling
/// thread only; use the store from nowhere else meanwhile.
template <class Store>
conformance_report check_try_acquire_all(Store& store, const conformance_options& o = {}) {
  static_assert(has_try_acquire_all_v<Store>,
                "holdfast::testing::check_try_acquire_all: the store has no try_acquire_all");
  conformance_report rep;
  detail::multi_checker<Store>(store, std::chrono::milliseconds(60000), o, rep).run();
  return rep;
}

}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_CONFORMANCE_MULTI_HPP
