// SPDX-License-Identifier: MIT
// tests/support/example_stores.hpp - two lease stores written the way the README ("Checking your
// own store") tells users to, each with a switch for one realistic mistake, so that tests can
// require the conformance kit to pass the correct ones and name every broken one:
//
//   store         | state                          | step point on its correct path
//   --------------+--------------------------------+------------------------------------------
//   locked_store  | in memory, one std::mutex      | after the commit (takes_effect), before
//                 |                                | its bookkeeping (between)
//   file_store    | a text file in store_env::dir, | after the file is written (takes_effect),
//                 | reloaded by the factory        | before it touches its own members again
//
//   flaw                 | the mistake
//   ---------------------+---------------------------------------------------------------------
//   none                 | (correct)
//   real_clock_tokens    | the token is std::chrono::system_clock nanoseconds, not a counter
//   unlocked_renew       | renew and inspect read and write the record without the mutex
//   counter_32bit        | the counter is a std::uint32_t (wraps after 2^32 grants)
//   counter_int32_clamped| (locked_store) the counter goes through a saturating conversion to
//                        | std::int32_t: it stops at 2^31 - 1
//   counter_double       | (locked_store) the counter is a double, as a Lua or JSON number is:
//                        | 2^53 + 1 rounds to 2^53
//   counter_int64_clamped| (locked_store) the counter stops at 2^63 - 1, as SQLite's integer
//                        | arithmetic does when it turns an overflow into a REAL
//   stalled_cleanup      | expired keys are listed, then deleted in a later step without
//                        | re-checking that they are still expired
//   reboot_wipes_counter | (file_store) a new boot identity deletes the file, counter included
//
// Both honour store_env's counter start (the token counter begins just below it) and, for
// file_store, its boot identity: leases of an earlier boot are dropped (their holders' processes
// died with the machine), the counter is kept.
//
// Thread-safety: locked_store is safe across threads (but for the unlocked_renew flaw);
// file_store is for one thread (the simulator's).
#ifndef HOLDFAST_TESTS_SUPPORT_EXAMPLE_STORES_HPP
#define HOLDFAST_TESTS_SUPPORT_EXAMPLE_STORES_HPP

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "holdfast/holdfast.hpp"
#include "holdfast/step_point.hpp"
#include "holdfast/testing/store_factory.hpp"

namespace example_stores {

enum class flaw {
  none,
  real_clock_tokens,
  unlocked_renew,
  counter_32bit,
  counter_int32_clamped,
  counter_double,
  counter_int64_clamped,
  stalled_cleanup,
  reboot_wipes_counter
};

/// The record of one key.
struct record {
  std::string owner;
  std::uint64_t token = 0;
  std::int64_t expires_ns = 0;  // the store's clock
};

/// What both stores share: the leases, the counter, and the rules of the contract.
template <class Clock>
class lease_table {
 public:
  lease_table(Clock clock, flaw f, std::uint64_t counter) : clock_(clock), flaw_(f) {
    counter_ = counter;
    counter32_ = static_cast<std::uint32_t>(counter);
    counterd_ = static_cast<double>(counter);
  }

  std::int64_t now() const { return clock_.now().time_since_epoch().count(); }

  // Ends a grant no earlier than ttl after `now` in real time: a reading lags by up to a tick.
  std::int64_t until(std::int64_t now, std::chrono::milliseconds ttl) const {
    const std::int64_t tick = std::chrono::nanoseconds(holdfast::clock_tick(clock_)).count();
    return now + std::chrono::nanoseconds(ttl).count() + tick;
  }

  std::uint64_t next_token() {
    if (flaw_ == flaw::real_clock_tokens) {
      return static_cast<std::uint64_t>(
          std::chrono::system_clock::now().time_since_epoch().count());
    }
    if (flaw_ == flaw::counter_32bit) return ++counter32_;
    if (flaw_ == flaw::counter_double) {
      counterd_ += 1;
      return static_cast<std::uint64_t>(counterd_);
    }
    const std::uint64_t cap = flaw_ == flaw::counter_int32_clamped   ? 0x7fffffffULL
                              : flaw_ == flaw::counter_int64_clamped ? 0x7fffffffffffffffULL
                                                                     : ~0ULL;
    counter_ = std::min(counter_ + 1, cap);
    return counter_;
  }

  holdfast::result<holdfast::grant> acquire(std::string_view key, std::string_view owner,
                                            std::chrono::milliseconds ttl) {
    const std::int64_t t = now();
    auto it = leases_.find(std::string(key));
    if (it != leases_.end() && t < it->second.expires_ns) {
      if (it->second.owner != owner) return holdfast::errc::busy;
      it->second.expires_ns = std::max(it->second.expires_ns, until(t, ttl));
      return holdfast::grant{holdfast::fencing_token(it->second.token), ttl};
    }
    const std::uint64_t token = next_token();
    leases_[std::string(key)] = record{std::string(owner), token, until(t, ttl)};
    return holdfast::grant{holdfast::fencing_token(token), ttl};
  }

  holdfast::result<holdfast::grant> renew(std::string_view key, std::string_view owner,
                                          holdfast::fencing_token token,
                                          std::chrono::milliseconds ttl) {
    const std::int64_t t = now();
    auto it = leases_.find(std::string(key));
    if (it == leases_.end() || it->second.owner != owner || it->second.token != token.value() ||
        t >= it->second.expires_ns) {
      return holdfast::errc::lease_lost;
    }
    it->second.expires_ns = std::max(it->second.expires_ns, until(t, ttl));
    return holdfast::grant{token, ttl};
  }

  holdfast::result<void> release(std::string_view key, std::string_view owner,
                                 holdfast::fencing_token token) {
    auto it = leases_.find(std::string(key));
    if (it == leases_.end() || it->second.owner != owner || it->second.token != token.value()) {
      return holdfast::errc::not_holder;
    }
    leases_.erase(it);
    return {};
  }

  std::optional<holdfast::lease_record> inspect(std::string_view key) const {
    auto it = leases_.find(std::string(key));
    const std::int64_t t = now();
    if (it == leases_.end() || t >= it->second.expires_ns) return std::nullopt;
    holdfast::lease_record r;
    r.owner = it->second.owner;
    r.token = holdfast::fencing_token(it->second.token);
    // What is left for certain: the tick the reading may lag does not count.
    const std::int64_t tick = std::chrono::nanoseconds(holdfast::clock_tick(clock_)).count();
    r.remaining = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::nanoseconds(std::max<std::int64_t>(0, it->second.expires_ns - t - tick)));
    return r;
  }

  // The keys expired now (the stalled-cleanup flaw lists them, then deletes them later).
  std::vector<std::string> expired() const {
    std::vector<std::string> out;
    const std::int64_t t = now();
    for (const auto& kv : leases_) {
      if (t >= kv.second.expires_ns) out.push_back(kv.first);
    }
    return out;
  }

  std::map<std::string, record> leases_;
  std::uint64_t counter_ = 0;
  std::uint32_t counter32_ = 0;
  double counterd_ = 0;
  Clock clock_;
  flaw flaw_;
};

/// In memory, one mutex, a step point after each commit (see the table at the top).
template <class Clock>
class locked_store {
 public:
  explicit locked_store(Clock clock, flaw f = flaw::none, std::uint64_t counter = 0)
      : t_(clock, f, counter) {}

  holdfast::result<holdfast::grant> try_acquire(std::string_view key, std::string_view owner,
                                                std::chrono::milliseconds ttl) {
    if (std::error_code ec = holdfast::check_acquire_args(key, owner, ttl)) return ec;
    if (t_.flaw_ == flaw::stalled_cleanup) cleanup();
    holdfast::result<holdfast::grant> r = holdfast::errc::busy;
    {
      std::lock_guard<std::mutex> g(mu_);
      r = t_.acquire(key, owner, ttl);
    }
    bookkeeping();
    return r;
  }

  holdfast::result<holdfast::grant> renew(std::string_view key, std::string_view owner,
                                          holdfast::fencing_token token,
                                          std::chrono::milliseconds ttl) {
    if (std::error_code ec = holdfast::check_renew_args(key, owner, token, ttl)) return ec;
    holdfast::result<holdfast::grant> r = holdfast::errc::not_holder;
    if (t_.flaw_ == flaw::unlocked_renew) {
      r = t_.renew(key, owner, token, ttl);
    } else {
      std::lock_guard<std::mutex> g(mu_);
      r = t_.renew(key, owner, token, ttl);
    }
    bookkeeping();
    return r;
  }

  holdfast::result<void> release(std::string_view key, std::string_view owner,
                                 holdfast::fencing_token token) {
    if (std::error_code ec = holdfast::check_release_args(key, owner, token)) return ec;
    holdfast::result<void> r = holdfast::errc::not_holder;
    {
      std::lock_guard<std::mutex> g(mu_);
      r = t_.release(key, owner, token);
    }
    bookkeeping();
    return r;
  }

  holdfast::result<std::optional<holdfast::lease_record>> inspect(std::string_view key) {
    if (key.empty()) return holdfast::errc::invalid_argument;
    if (t_.flaw_ == flaw::unlocked_renew) return t_.inspect(key);
    std::lock_guard<std::mutex> g(mu_);
    return t_.inspect(key);
  }

 private:
  // The commit is visible; then, with no lock held, a step of its own (statistics).
  void bookkeeping() {
    holdfast::step_point(t_.clock_, holdfast::step_kind::takes_effect);
    holdfast::step_point(t_.clock_, holdfast::step_kind::between);
    std::lock_guard<std::mutex> g(mu_);
    ++operations_;
  }

  // The flaw: list what is expired, then (another step) delete it without checking again.
  void cleanup() {
    std::vector<std::string> doomed;
    {
      std::lock_guard<std::mutex> g(mu_);
      doomed = t_.expired();
    }
    holdfast::step_point(t_.clock_, holdfast::step_kind::between);
    std::lock_guard<std::mutex> g(mu_);
    for (const std::string& k : doomed) t_.leases_.erase(k);
  }

  std::mutex mu_;
  lease_table<Clock> t_;
  std::uint64_t operations_ = 0;
};

/// Durable: the table lives in a file in store_env::dir, written after every change and read back
/// by the factory after a restart (see the table at the top).
template <class Clock>
class file_store {
 public:
  file_store(Clock clock, const holdfast::testing::store_env& env, flaw f = flaw::none)
      : t_(clock, f, 0), path_(env.dir + "/leases.txt") {
    load(env);
  }

  holdfast::result<holdfast::grant> try_acquire(std::string_view key, std::string_view owner,
                                                std::chrono::milliseconds ttl) {
    if (std::error_code ec = holdfast::check_acquire_args(key, owner, ttl)) return ec;
    if (t_.flaw_ == flaw::stalled_cleanup) cleanup();
    return persisted(t_.acquire(key, owner, ttl));
  }

  holdfast::result<holdfast::grant> renew(std::string_view key, std::string_view owner,
                                          holdfast::fencing_token token,
                                          std::chrono::milliseconds ttl) {
    if (std::error_code ec = holdfast::check_renew_args(key, owner, token, ttl)) return ec;
    return persisted(t_.renew(key, owner, token, ttl));
  }

  holdfast::result<void> release(std::string_view key, std::string_view owner,
                                 holdfast::fencing_token token) {
    if (std::error_code ec = holdfast::check_release_args(key, owner, token)) return ec;
    return persisted(t_.release(key, owner, token));
  }

  holdfast::result<std::optional<holdfast::lease_record>> inspect(std::string_view key) {
    if (key.empty()) return holdfast::errc::invalid_argument;
    return t_.inspect(key);
  }

 private:
  // Writes the table (a new file renamed over the old: a crash leaves one or the other), marks the
  // commit, then another step: it counts its writes (touching this object again).
  template <class R>
  R persisted(R r) {
    if (r) save();
    holdfast::step_point(t_.clock_, holdfast::step_kind::takes_effect);
    holdfast::step_point(t_.clock_, holdfast::step_kind::between);
    ++writes_;
    return r;
  }

  void cleanup() {
    const std::vector<std::string> doomed = t_.expired();
    holdfast::step_point(t_.clock_, holdfast::step_kind::between);
    for (const std::string& k : doomed) t_.leases_.erase(k);
  }

  static std::string hex(std::string_view s) {
    static const char digits[] = "0123456789abcdef";
    std::string out = "x";  // never empty
    for (unsigned char c : s) {
      out += digits[c >> 4];
      out += digits[c & 15];
    }
    return out;
  }
  static std::string unhex(const std::string& s) {
    std::string out;
    for (std::size_t i = 1; i + 1 < s.size(); i += 2) {
      out += static_cast<char>(std::stoi(s.substr(i, 2), nullptr, 16));
    }
    return out;
  }

  void save() const {
    const std::string tmp = path_ + ".new";
    {
      std::ofstream f(tmp, std::ios::trunc);
      f << boot_ << ' ' << t_.counter_ << ' ' << t_.counter32_ << '\n';
      for (const auto& kv : t_.leases_) {
        f << hex(kv.first) << ' ' << hex(kv.second.owner) << ' ' << kv.second.token << ' '
          << kv.second.expires_ns << '\n';
      }
    }
    std::rename(tmp.c_str(), path_.c_str());
  }

  // Reads the table back. Leases of an earlier boot are dropped (their holders died with the
  // machine, and the store's clock started over); the counter is kept (the flaw wipes it too).
  void load(const holdfast::testing::store_env& env) {
    boot_ = env.boot;
    t_.counter_ = env.counter_start;
    t_.counter32_ = static_cast<std::uint32_t>(env.counter_start);
    std::ifstream f(path_);
    std::uint64_t boot = 0;
    if (!(f >> boot >> t_.counter_ >> t_.counter32_)) return;
    if (boot != env.boot) {
      if (t_.flaw_ == flaw::reboot_wipes_counter) t_.counter_ = t_.counter32_ = 0;
      return;
    }
    std::string k, o;
    record r;
    while (f >> k >> o >> r.token >> r.expires_ns) {
      r.owner = unhex(o);
      t_.leases_[unhex(k)] = r;
    }
  }

  lease_table<Clock> t_;
  std::string path_;
  std::uint64_t boot_ = 0;
  std::uint64_t writes_ = 0;
};

}  // namespace example_stores

#endif  // HOLDFAST_TESTS_SUPPORT_EXAMPLE_STORES_HPP
