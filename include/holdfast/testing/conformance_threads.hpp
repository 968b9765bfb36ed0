// SPDX-License-Identifier: MIT
// holdfast/testing/conformance_threads.hpp - the contract under real threads:
// check_exclusive_grants() lets threads contend for one key, each through the store a factory
// makes for it, holders renewing and inspecting while the others acquire and inspect, and checks
// that at most one believes it holds the key at a time and that the tokens of successive grants
// strictly increase (store.hpp, T1 and T3; the checker's S2 and S3, here on real threads instead of
// simulated ones). failure_log collects failures from several threads, for this check and for a
// test's own threaded checks.
//
// check_store() runs it when conformance_options::threads > 0 and the factory takes no
// sim_clock: stores made by the factory must share their state (one server, one database file).
// Called directly, its factory may also return a std::shared_ptr to one store shared by every
// thread.
#ifndef HOLDFAST_TESTING_CONFORMANCE_THREADS_HPP
#define HOLDFAST_TESTING_CONFORMANCE_THREADS_HPP

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
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

/// A list of failed checks that several threads add to (test frameworks' assertions are often
/// not thread-safe: collect on the threads, assert after joining them).
///
/// Thread-safety: every member may be called from any thread at any time.
class failure_log {
 public:
  /// Records `what` if `ok` is false. Returns `ok`.
  bool expect(bool ok, const std::string& what) {
    checks_.fetch_add(1, std::memory_order_relaxed);
    if (!ok) {
      std::lock_guard<std::mutex> lock(mutex_);
      list_.push_back(what);
    }
    return ok;
  }
  /// Returns a copy of the failures recorded so far, in the order they were recorded.
  [[nodiscard]] std::vector<std::string> list() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return list_;
  }
  /// Returns true iff no failure was recorded.
  [[nodiscard]] bool empty() const { return list().empty(); }
  /// Returns the failures, one per line, each as "  - what".
  [[nodiscard]] std::string text() const {
    std::string out;
    for (const std::string& v : list()) out += "  - " + v + "\n";
    return out;
  }
  /// Returns the number of expect() calls so far.
  [[nodiscard]] std::uint32_t checks() const noexcept {
    return checks_.load(std::memory_order_relaxed);
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::string> list_;
  std::atomic<std::uint32_t> checks_{0};
};

namespace detail {

template <class T, class = void>
struct is_pointer_like : std::false_type {};
template <class T>
struct is_pointer_like<
    T, std::void_t<decltype(*std::declval<T&>()), decltype(std::declval<T&>().operator->())>>
    : std::true_type {};

/// The store a factory returned: the object itself, or what a unique_ptr, shared_ptr or other
/// smart pointer points to.
template <class T>
auto& store_of(T& made) {
  if constexpr (is_pointer_like<T>::value || std::is_pointer_v<T>) {
    return *made;
  } else {
    return made;
  }
}

/// What the contending threads share.
struct contention {
  std::string key;
  std::uint32_t threads = 0;
  std::uint32_t grants = 0;               // per thread
  std::atomic<int> inside{0};             // threads that believe they hold the key
  std::atomic<std::uint32_t> ready{0};    // threads that made their store (start_together)
  std::atomic<std::uint64_t> refused{0};  // contended acquires refused so far
  std::mutex order_mutex;
  std::vector<std::uint64_t> order;  // tokens of successive grants
  failure_log log;
};

/// Holds each thread until all have made their store, so that they contend from their first
/// call (started one by one, the first could take all its grants before the last began).
inline void start_together(contention& c) {
  c.ready.fetch_add(1);
  while (c.ready.load() < c.threads) std::this_thread::yield();
}

/// What a holder does before it releases: renews twice (as a keepalive does while others try to
/// acquire and inspect) and, if the store has inspect(), sees itself as the holder; then goes on
/// renewing (at most 64 more times) until another thread has been refused the key meanwhile, so
/// that every hold overlaps others' acquires and inspects even on a machine that runs the
/// threads one after another (measured before: 10 runs in 40 of a store whose renew and inspect
/// skip its lock went unreported by TSan). `refused` is read relaxed: it orders nothing, so TSan
/// still sees a race between the holder's and the contenders' calls.
template <class Store>
void holder_steps(Store& store, contention& c, const std::string& owner, fencing_token token) {
  const std::string rule = "contention across threads: ";
  const std::uint64_t refused_before = c.refused.load(std::memory_order_relaxed);
  for (int i = 0; i < 66; ++i) {
    if (i >= 2 && (c.threads < 2 || c.refused.load(std::memory_order_relaxed) > refused_before))
      break;
    const result<grant> r = store.renew(c.key, owner, token, std::chrono::milliseconds(60000));
    c.log.expect(r && r->token == token,
                 rule + "the holder's renew while others contend: " + error_text(r.error()));
    if (i == 1) {
      if constexpr (has_inspect_v<Store>) {
        const auto seen = store.inspect(c.key);
        c.log.expect(seen && *seen && (*seen)->owner == owner && (*seen)->token == token,
                     rule + "inspect by the holder does not show its lease");
      }
    }
    std::this_thread::yield();
  }
}

/// A grant's token must be above the one before (T1).
inline void record_grant(contention& c, fencing_token token) {
  std::lock_guard<std::mutex> lock(c.order_mutex);
  c.log.expect(c.order.empty() || c.order.back() < token.value(),
               "contention across threads: tokens of successive grants must strictly increase (" +
                   std::to_string(c.order.empty() ? 0 : c.order.back()) + " then " +
                   std::to_string(token.value()) + ")");
  c.order.push_back(token.value());
}

/// What one contending thread does: c.grants grants of c.key, each renewed and inspected by its
/// holder (holder_steps), then released, while the others try to acquire it and inspect it.
template <class MakeStore>
void contend(MakeStore& make, contention& c, const std::string& owner) {
  const std::string rule = "contention across threads: ";
  auto made = make();
  auto& store = store_of(made);
  start_together(c);
  std::uint32_t granted = 0;
  for (std::uint64_t attempt = 0; granted < c.grants && attempt < std::uint64_t(c.grants) * 2000;
       ++attempt) {
    const result<grant> g = store.try_acquire(c.key, owner, std::chrono::milliseconds(60000));
    if (!g) {
      c.log.expect(g.error() == errc::busy, rule + "contended acquire: " + error_text(g.error()));
      if constexpr (has_inspect_v<std::remove_reference_t<decltype(store)>>) {
        const auto seen = store.inspect(c.key);  // an observer, racing the holder's renewals
        c.log.expect(bool(seen), rule + "inspect while others hold: " + error_text(seen.error()));
      }
      c.refused.fetch_add(1, std::memory_order_relaxed);
      std::this_thread::yield();
      continue;
    }
    c.log.expect(c.inside.fetch_add(1) == 0, rule + "two holders at once");
    holder_steps(store, c, owner, g->token);
    record_grant(c, g->token);
    c.inside.fetch_sub(1);
    const result<void> rel = store.release(c.key, owner, g->token);
    c.log.expect(bool(rel), rule + "release after a contended grant: " + error_text(rel.error()));
    ++granted;
  }
  c.log.expect(granted == c.grants, rule + owner + " starved: " + std::to_string(granted) + " of " +
                                        std::to_string(c.grants) + " grants");
}

}  // namespace detail

/// Lets o.threads real threads contend for the key o.key_prefix + "contended", each through the
/// store `make()` returns for it (called once per thread, on that thread; the threads start
/// together once every store is made), until each has had o.grants_per_thread grants (TTL 60 s;
/// each renewed twice and, with inspect(), inspected by its holder, and renewed on, at most 64
/// more times, until another thread has been refused it meanwhile, then released; the threads
/// not holding it inspect it after each refusal: every hold overlaps others' acquires and
/// inspects, so an operation that skips the store's lock is a data race that -fsanitize=thread
/// reports), and checks: at most one thread believes it holds the key at a
/// time (T3), every contended acquire that is not granted is busy (T4), the holder's renewals
/// succeed with its token and inspect() shows it, the tokens of successive grants strictly increase
/// (T1), every release of a grant succeeds, no thread starves (attempts are bounded at 2000 per
/// grant, each bounded by the store's own timeouts). Idea: the private contention tests of this
/// project's real stores.
///
/// \param make  called as make() on each thread; returns a store (a LeaseStore), or a
///              std::unique_ptr / std::shared_ptr / pointer to one. Stores must share their
///              state: independent in-memory stores would each grant the key (and fail here).
/// \param o     threads (0: nothing runs, reported as skipped), grants_per_thread, key_prefix.
/// \returns the failures (each "contention across threads: what happened") and contract_checks,
///          the checks made on all threads.
///
/// An exception thrown by the factory or a store on a thread is rethrown here after every thread
/// has been joined (the first one). Thread-safety: the store each make() call returns is used
/// by one thread, unless the factory shares one (then it must be thread-safe).
template <class MakeStore>
conformance_report check_exclusive_grants(MakeStore&& make, const conformance_options& o) {
  conformance_report rep;
  if (o.threads == 0) {
    rep.skipped.push_back("contention across threads: conformance_options::threads is 0");
    return rep;
  }
  detail::contention c;
  c.key = o.key_prefix + "contended";
  c.threads = o.threads;
  c.grants = o.grants_per_thread;
  std::vector<std::exception_ptr> thrown(o.threads);
  std::vector<std::thread> pool;
  for (std::uint32_t t = 0; t < o.threads; ++t) {
    pool.emplace_back([&, t] {
#if HOLDFAST_HAS_EXCEPTIONS
      try {
#endif
        detail::contend(make, c, "thread-" + std::to_string(t));
#if HOLDFAST_HAS_EXCEPTIONS
      } catch (...) {
        c.ready.fetch_add(1);  // the others must not wait for this one (once too many is fine)
        thrown[t] = std::current_exception();
      }
#endif
    });
  }
  for (std::thread& th : pool) th.join();
#if HOLDFAST_HAS_EXCEPTIONS
  for (const std::exception_ptr& e : thrown) {
    if (e) std::rethrow_exception(e);
  }
#endif
  rep.failures = c.log.list();
  rep.contract_checks = c.log.checks();
  return rep;
}

}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_CONFORMANCE_THREADS_HPP
