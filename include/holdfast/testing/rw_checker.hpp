// SPDX-License-Identifier: MIT
// holdfast/testing/rw_checker.hpp - the read-write properties (store.hpp, RW1-RW2) judged on a
// history, beside the lease invariants of checker.hpp:
//
//   property             | checked at                  | violated when
//   ---------------------+-----------------------------+--------------------------------------------
//   read-write exclusion | each new grant by the store | an exclusive grant while another grant of
//                        | of a read-write key         | the key is live by the store's clock, or a
//                        |                             | shared grant while an exclusive one is
//   read-write tokens    | each new grant              | its token is not greater than every token
//                        |                             | granted before for the key, in either mode
//   fenced write order   | each write a resource       | its token is not an exclusive grant's: a
//                        | admitted                    | reader's token (or none the store made)
//                        |                             | got a write in
//
// How a history names modes: a read-write key K is recorded as two keys, `r/K` (its shared
// grants) and `w/K` (its exclusive grants), as rw_workload.hpp's store does; a resource write
// event (event_kind::write) on key index `w/K` is a write to K's resource. Live "by the store's
// clock" is judged as checker.hpp judges it: a grant made (or renewed) when the store's clock
// read `begin` with TTL `t` is surely live while the clock reads less than begin + t, so no store
// keeping the contract is reported.
//
// A store that came back from a lagging copy (sim_store's lagging restart: a store_up event with
// value = operations lost > 0 and token = history events before the copy) holds the copy's
// grants and counter from then on: exclusion and token order are judged within each life of its
// state (a lost grant is gone, its token may be issued again), as checker.hpp judges S2/S3
// (detail/lost_life.hpp). The exclusive tokens stay known: a resource remembers what it admitted.
//
// Thread-safety: check_read_write() is a pure function of its argument.
#ifndef HOLDFAST_TESTING_RW_CHECKER_HPP
#define HOLDFAST_TESTING_RW_CHECKER_HPP

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/testing/history.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace testing {

/// The first read-write property a history violates (see the table above); empty if none.
struct rw_finding {
  std::string property;  ///< "read-write exclusion", "read-write tokens", "fenced write order".
  std::string what;      ///< One sentence, naming the event index, owners and tokens.
  /// Returns true iff no property was violated.
  [[nodiscard]] bool ok() const noexcept { return property.empty(); }
};

namespace detail {

struct rw_live_grant {
  std::string owner;
  std::uint64_t token = 0;
  bool shared = false;
  std::int64_t sure_until = 0;  // the store's clock reading until which it surely holds
};

struct rw_key_state {
  std::vector<rw_live_grant> grants;
  std::uint64_t max_token = 0;
  std::set<std::uint64_t> writer_tokens;
};

// Splits a recorded key name into (read-write key, shared?); false if it is not one.
inline bool rw_split(const std::string& name, std::string& key, bool& shared) {
  if (name.size() < 3 || name[1] != '/' || (name[0] != 'r' && name[0] != 'w')) return false;
  key = name.substr(2);
  shared = name[0] == 'r';
  return true;
}

inline std::string rw_mode_name(bool shared) {
  return shared ? "shared" : "exclusive";
}

class rw_judge {
 public:
  explicit rw_judge(const history& h) : h_(h) {}

  rw_finding run() {
    for (std::size_t i = 0; i < h_.events.size() && out_.ok(); ++i) step(i, h_.events[i]);
    return out_;
  }

 private:
  void step(std::size_t i, const event& e) {
    if (e.kind == event_kind::store_up && e.value > 0) return came_back(i, e);
    if (e.key >= h_.keys.size()) return;
    std::string key;
    bool shared = false;
    if (!rw_split(h_.keys[e.key], key, shared)) return;
    rw_key_state& s = keys_[key];
    if (e.kind == event_kind::write) {
      if (e.outcome == 0 && s.writer_tokens.count(e.token) == 0) {
        fail("fenced write order", i,
             "the resource of \"" + key + "\" admitted a write by " + e.owner + " under token " +
                 std::to_string(e.token) + ", which is no exclusive grant's: a reader wrote");
      }
      return;
    }
    if (e.outcome != 0) return;
    const std::int64_t now = e.local_ns;
    const std::int64_t begin =
        e.begin_local_ns != 0 && e.begin_local_ns < now ? e.begin_local_ns : now;
    const std::int64_t until = begin + e.ttl_ms * 1000000;
    rw_live_grant* mine = find(s, e.owner, e.token, shared);
    switch (e.kind) {
      case event_kind::store_acquire:
        if (mine != nullptr) {
          mine->sure_until = until;  // the same owner's re-ask: the same grant, extended
          return;
        }
        return grant(i, e, s, key, shared, now, until);
      case event_kind::store_renew:
        if (mine != nullptr) mine->sure_until = until;
        return;
      case event_kind::store_release:
        if (mine != nullptr) s.grants.erase(s.grants.begin() + (mine - s.grants.data()));
        return;
      default:
        return;
    }
  }

  void grant(std::size_t i, const event& e, rw_key_state& s, const std::string& key, bool shared,
             std::int64_t now, std::int64_t until) {
    if (e.token <= s.max_token) {
      return fail("read-write tokens", i,
                  "the store granted \"" + key + "\" " + rw_mode_name(shared) + " to " + e.owner +
                      " with token " + std::to_string(e.token) + " after granting token " +
                      std::to_string(s.max_token));
    }
    for (const rw_live_grant& g : s.grants) {
      if (!(now < g.sure_until) || (shared && g.shared)) continue;
      return fail("read-write exclusion", i,
                  "the store granted \"" + key + "\" " + rw_mode_name(shared) + " to " + e.owner +
                      " (token " + std::to_string(e.token) + ") while " + g.owner + "'s " +
                      rw_mode_name(g.shared) + " grant (token " + std::to_string(g.token) +
                      ") was live for another " + std::to_string((g.sure_until - now) / 1000000) +
                      " ms by the store's clock");
    }
    s.max_token = e.token;
    if (!shared) s.writer_tokens.insert(e.token);
    // Grants stay listed until released, expired ones included: a store may hold a grant past the
    // instant it surely holds it, and the same owner's re-ask then gets the same token back.
    s.grants.push_back(rw_live_grant{e.owner, e.token, shared, until});
  }

  // A lagging restart at event `i`: the store's grants and counters are the copy's, taken after
  // the first e.token events (replayed by a judge of their own); exclusive tokens are kept.
  void came_back(std::size_t i, const event& e) {
    history prefix = h_;
    prefix.events.resize(std::min<std::size_t>(static_cast<std::size_t>(e.token), i));
    rw_judge before(prefix);
    (void)before.run();
    for (auto& kv : keys_) {
      rw_key_state& now = before.keys_[kv.first];
      now.writer_tokens.insert(kv.second.writer_tokens.begin(), kv.second.writer_tokens.end());
    }
    keys_ = std::move(before.keys_);
  }

  static rw_live_grant* find(rw_key_state& s, const std::string& owner, std::uint64_t token,
                             bool shared) {
    for (rw_live_grant& g : s.grants) {
      if (g.token == token && g.owner == owner && g.shared == shared) return &g;
    }
    return nullptr;
  }

  void fail(const char* property, std::size_t i, const std::string& what) {
    out_.property = property;
    out_.what = "event " + std::to_string(i) + ": " + what;
  }

  const history& h_;
  std::map<std::string, rw_key_state> keys_;
  rw_finding out_;
};

}  // namespace detail

/// Judges the read-write properties of `h` (the table at the top of rw_checker.hpp) and returns
/// the first one violated, or an ok() finding. Events on keys that are not read-write keys are
/// ignored; run check() (checker.hpp) for the lease invariants.
[[nodiscard]] inline rw_finding check_read_write(const history& h) {
  return detail::rw_judge(h).run();
}

}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_RW_CHECKER_HPP
