// SPDX-License-Identifier: MIT
// holdfast/observer.hpp - lease events for metrics and logs: an optional observer told what the
// leases of a process do, with timings, so that an operator can see how often locks are
// contended, how long acquires wait, how many leases are lost and why (client-go's leader-election
// metrics and userver's lock statistics are the models; nothing in holdfast depends on a metrics
// library: examples/11_prometheus_metrics.cpp turns the events into Prometheus text by hand).
//
//   struct counting : holdfast::lease_observer {
//     std::atomic<long> lost{0};
//     void on_event(const holdfast::lease_event& e) override {
//       if (e.kind == holdfast::lease_event_kind::lost) ++lost;
//     }
//   } obs;
//   holdfast::acquire_options<> opts;
//   opts.observer = &obs;                          // or mutex_options::acquire, quorum_options,
//   ... auto l = holdfast::try_acquire(store, "orders", 10s, opts);
//
// Where an observer is given, and what it hears:
//
//   given through               | events
//   ----------------------------+--------------------------------------------------------------
//   acquire_options::observer   | acquire_attempt (each store call), acquired / acquire_failed
//   (try_acquire, acquire,      | (each try_acquire()/acquire() call, with its wait); then for
//   mutex_options::acquire,     | the lease it made: renewed / renew_failed (the holder's and a
//   the recipes)                | keepalive's renewals), lost (once, with the cause), released /
//                               | release_failed
//   keepalive_options::observer | renewed / renew_failed / lost of the renewals the keepalive
//                               | makes, for leases whose own observer is another one (or none)
//   quorum_options::observer    | quorum_member: each member's answer to each round (operation,
//                               | member index, outcome, or no answer before the round ended)
//
// The order of one lease's events is its history: acquire_attempt..., acquired, (renewed |
// renew_failed)..., at most one lost, then released or release_failed (release_failed may be
// followed by a later released). A renew_failed that loses the lease comes right before its lost.
//
// Calls. An observer is called on the thread that did the operation (the caller's, or the
// keepalive's thread, or a quorum caller's), after the operation's outcome is decided and with no
// holdfast lock held: it may take its own locks, and may call into holdfast for *other* leases.
// It may be called concurrently from several threads and must be thread-safe. It should be quick
// (count, record a histogram bucket, log): the operation waits for it. An exception it throws is
// caught and discarded (in builds with exceptions): that event is lost to the observer, and the
// operation's result, the lease's state and the remaining events are exactly as they would have
// been without an observer. The observer must outlive every lease, keepalive, mutex and quorum it
// was given to. Strings in an event (key, owner) are views valid only during the call.
//
// Cost. With no observer (the default: a null pointer) an operation pays a pointer test per event
// point, allocates nothing and reads no clock beyond what it reads anyway (measured: 48 more
// instructions per acquire+release, 31 per renew; tests/benchmarks/README.md). With one, each
// operation reads its clock around the store call to measure the store's latency (try_acquire and
// release once more each side, renew once more after it), and an operation that reports after
// holding a lock (renew, release, a loss) allocates one small block for its events.
//
// Thread-safety: lease_event is a plain value; see "Calls" for lease_observer.
#ifndef HOLDFAST_OBSERVER_HPP
#define HOLDFAST_OBSERVER_HPP

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <system_error>

#include "holdfast/detail/config.hpp"
#include "holdfast/fencing_token.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

/// Why a lease turned lost; its enumerators and to_string() are in detail/lease_shared.hpp
/// (reached through lease.hpp; declared here so that an event can carry it without this header
/// depending on the lease machinery).
enum class loss_cause : unsigned char;

/// What a lease_event reports (see the table at the top of observer.hpp).
enum class lease_event_kind : std::uint8_t {
  acquire_attempt,  ///< One store try_acquire call answered: error() zero = granted, busy, or
                    ///< the store's error; store_latency; attempt (1-based).
  acquired,         ///< try_acquire()/acquire() returned a lease: token, wait, attempts.
  acquire_failed,   ///< try_acquire()/acquire() returned an error (busy, timeout,
                    ///< invalid_argument, the store's error, ...): error, wait, attempts.
  renewed,          ///< A renewal landed: store_latency; keepalive says whose.
  renew_failed,     ///< A renewal failed: error (lease_lost, store_unavailable, timeout,
                    ///< protocol_error, caught_exception, ...); store_latency (0: not sent).
  lost,             ///< The lease turned lost (once per lease): cause.
  released,         ///< release() ended the claim: error zero, or not_holder (the store no longer
                    ///< held it); store_latency.
  release_failed,   ///< release() failed with a store error; the lease stays releasing.
  quorum_member,    ///< A quorum member's answer in one round: operation, member, error (zero:
                    ///< it did as asked), answered. store_latency is not measured (zero).
};

/// Returns the enumerator's name, e.g. "acquire_attempt".
[[nodiscard]] constexpr const char* to_string(lease_event_kind k) noexcept {
  switch (k) {
    case lease_event_kind::acquire_attempt:
      return "acquire_attempt";
    case lease_event_kind::acquired:
      return "acquired";
    case lease_event_kind::acquire_failed:
      return "acquire_failed";
    case lease_event_kind::renewed:
      return "renewed";
    case lease_event_kind::renew_failed:
      return "renew_failed";
    case lease_event_kind::lost:
      return "lost";
    case lease_event_kind::released:
      return "released";
    case lease_event_kind::release_failed:
      return "release_failed";
    case lease_event_kind::quorum_member:
      return "quorum_member";
  }
  return "unknown";
}

/// The store operation a quorum_member event is about.
enum class lease_operation : std::uint8_t {
  acquire,  ///< try_acquire
  renew,    ///< renew
  release,  ///< release
  raise,    ///< raise_token (the quorum's token floor)
};

/// Returns the enumerator's name, e.g. "renew".
[[nodiscard]] constexpr const char* to_string(lease_operation o) noexcept {
  switch (o) {
    case lease_operation::acquire:
      return "acquire";
    case lease_operation::renew:
      return "renew";
    case lease_operation::release:
      return "release";
    case lease_operation::raise:
      return "raise";
  }
  return "unknown";
}

/// One thing a lease did (see lease_event_kind for which fields each kind sets; the others keep
/// their defaults). Durations are measured on the clock of the lease (acquire_options::clock) or
/// of the quorum, in that clock's resolution, converted to nanoseconds; a clock that went
/// backwards gives zero, never a negative duration.
struct lease_event {
  lease_event_kind kind = lease_event_kind::acquire_attempt;  ///< What happened.
  std::string_view key{};                                     ///< The lease's key.
  std::string_view owner{};                                   ///< The owner id.
  fencing_token token{};             ///< The lease's token (none when nothing was granted).
  std::error_code error{};           ///< Zero on success; else what the operation reported.
  loss_cause cause{};                ///< lost: why (loss_cause::none, value 0, otherwise).
  std::chrono::nanoseconds wait{0};  ///< acquired / acquire_failed: call to return.
  std::chrono::nanoseconds store_latency{0};  ///< The store call's duration (0: no store call).
  std::uint32_t attempt = 0;  ///< acquire_attempt: 1-based; acquired/failed: attempts made.
  bool keepalive = false;     ///< renewed / renew_failed / lost: on a keepalive's thread.
  lease_operation operation = lease_operation::acquire;  ///< quorum_member: which operation.
  std::size_t member = 0;  ///< quorum_member: the member's index in the quorum.
  bool answered = true;    ///< quorum_member: false = the member had not answered when the
                           ///< round was decided or its wait ran out (error then zero).
};

/// Receives lease events. Derive and override on_event(); give a pointer to it in the options
/// (see the table at the top of observer.hpp). Thread-safety: on_event() may be called
/// concurrently from several threads, always with no holdfast lock held.
class lease_observer {
 public:
  virtual ~lease_observer() = default;

  /// Called once per event, after the operation's outcome is decided. An exception it throws is
  /// caught and discarded (see "Calls" at the top of observer.hpp).
  virtual void on_event(const lease_event& e) = 0;

 protected:
  lease_observer() = default;
  lease_observer(const lease_observer&) = default;
  lease_observer& operator=(const lease_observer&) = default;
};

namespace detail {

// Tells `o` (if any) of `e`; an exception from the observer goes no further. For holdfast's own
// components: a recipe (election, semaphore) that acquires through try_acquire()/acquire() passes
// its options' observer on and needs nothing else; one that calls a store directly reports its
// calls with this, after its locks are released.
inline void notify(lease_observer* o, const lease_event& e) noexcept {
  if (o == nullptr) return;
  HOLDFAST_TRY {
    o->on_event(e);
  }
  HOLDFAST_CATCH_ALL {}
}

// The non-negative duration from `from` to `to` in nanoseconds (zero if the clock went back).
template <class TimePoint>
std::chrono::nanoseconds elapsed_ns(TimePoint from, TimePoint to) noexcept {
  if (!(from < to)) return std::chrono::nanoseconds::zero();
  return std::chrono::duration_cast<std::chrono::nanoseconds>(to - from);
}

}  // namespace detail

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_OBSERVER_HPP