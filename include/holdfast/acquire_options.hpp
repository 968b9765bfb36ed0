// SPDX-License-Identifier: MIT
// holdfast/acquire_options.hpp - acquire_options<Clock>: how try_acquire() and acquire()
// (lease.hpp) acquire a lease (the holder's clock, its owner id, the validity math, the backoff of
// the blocking acquire, the on-loss callback, the observer), and the one check of what an acquire
// is given, shared by try_acquire, acquire and the recipes (distributed_mutex, election,
// semaphore) for all their leases. lease.hpp includes it.
#ifndef HOLDFAST_ACQUIRE_OPTIONS_HPP
#define HOLDFAST_ACQUIRE_OPTIONS_HPP

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include "holdfast/backoff.hpp"
#include "holdfast/cancel.hpp"
#include "holdfast/clock.hpp"
#include "holdfast/detail/config.hpp"
#include "holdfast/detail/owner_id.hpp"
#include "holdfast/detail/random.hpp"
#include "holdfast/detail/saturating.hpp"
#include "holdfast/error.hpp"
#include "holdfast/lease/detail/lease_shared.hpp"
#include "holdfast/observer.hpp"
#include "holdfast/result.hpp"
#include "holdfast/store.hpp"
#include "holdfast/validity.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

/// What a blocking call met on its way to its result: filled in by acquire(), try_acquire(), the
/// locks of distributed_mutex, election::campaign and semaphore::acquire when
/// acquire_options::report points at one. It is how a caller whose call ended in errc::timeout
/// learns the store's cause: a timeout after a run of store errors keeps the last of them here,
/// with the store's own text, so a store that kept failing until the deadline is never only
/// "timeout".
/// (Permanent errors, is_permanent(), are not retried: they are the call's own result.)
struct acquire_report {
  /// Store calls made to acquire (attempts; a semaphore counts one per slot asked).
  std::uint32_t attempts = 0;
  /// The last error other than busy that an attempt met (a store error, or errc::timeout for a
  /// grant that arrived after the validity it gives); zero if none.
  std::error_code last_store_error{};
  /// The text of last_store_error: the store's last_error_message() when the store has one (the
  /// server's text), else holdfast's note; empty if none.
  std::string last_store_message{};
};

// 0.1 spellings inside are [[deprecated]]: only their uses in callers' code warn.
HOLDFAST_DETAIL_ALLOW_DEPRECATED_BEGIN
/// Options for try_acquire() and acquire().
template <class Clock = steady_clock>
struct acquire_options {
  /// The holder's clock: validity and backoff sleeps are measured on it. Default: steady_clock.
  Clock clock{};
  /// A readable label (a host name, a worker name) for the owner id: the owner id becomes the
  /// label, a '/' and 32 random hex digits (128 bits), drawn anew for every acquire call:
  /// readable in the store and in logs, and still unique per acquirer (T3), so a restarted
  /// process never gets back its predecessor's live grant and token, as a stable id would (the
  /// reconnect bug of Curator's InterProcessMutex, CURATOR-604: a new session took the old
  /// session's lock node for its own). label_of(owner) gives it back. Default empty: the id is
  /// the 32 random hex digits alone. Ignored if `owner` is set.
  std::string label{};
  /// 0.1's name of `label` (its separator was '-'); read only when `label` is empty.
  [[deprecated("use label")]] std::string owner_label{};
  /// A fully caller-chosen owner id: the one id the store grants to, used as is. THE CALLER'S
  /// RESPONSIBILITY: it must be unique per acquirer (T3). Two acquirers sharing an id share the
  /// lease, and a process restarted with the same id (a host name, a pod name) is handed the
  /// previous process's live grant, with its token, as its own. Prefer label. Default empty: a
  /// random id (see label).
  std::string owner{};
  /// Drift bound and margin of the validity math. Default: 1% and 2 ms (Redlock's).
  validity_options validity{};
  /// Spacing of attempts in the blocking acquire(). Default: 10 ms doubling to 1 s, full jitter.
  backoff_options backoff{};
  /// Called once when the acquired lease turns lost (see loss_callback). Default: none.
  loss_callback on_lost{};
  /// Told of every acquire attempt and its outcome, and then of the acquired lease's renewals,
  /// loss and release (observer.hpp). Must outlive the lease. Default: none (no cost).
  lease_observer* observer = nullptr;
  /// Cancels a blocking acquire (and the recipes' blocking calls made with these options) from
  /// another thread: it returns errc::cancelled within one store round trip, holding nothing
  /// (cancel.hpp). Under C++20 a std::stop_token converts to it. Default: never cancelled.
  cancel_token cancel{};
  /// Filled in with what the call met (acquire_report), if set. Must outlive the call; one call
  /// at a time. Default: none.
  acquire_report* report = nullptr;
};
HOLDFAST_DETAIL_ALLOW_DEPRECATED_END

/// Returns the readable label in a generated owner id (`<label>/<random>`, acquire_options::label,
/// election_options::label, semaphore_options' acquire.label): everything before the last '/', or
/// the whole id if it has none (an id without a label, or one chosen by the caller).
[[nodiscard]] inline std::string label_of(std::string_view owner) {
  const std::size_t slash = owner.rfind(detail::owner_separator);
  return std::string(slash == std::string_view::npos ? owner : owner.substr(0, slash));
}

namespace detail {

// Names time points of a clock's duration where only the duration matters.
struct any_clock {};

// The one check of a lease TTL, shared by acquire (prepare_acquire), lease::renew and the
// recipes' constructors: `ttl` converts to whole milliseconds (truncating) within [1 ms, max_ttl]
// and leaves some validity after drift and margin on a holder clock of duration Dur and tick
// `tick` (validity.hpp's valid_until; a bad `validity` leaves none): with the defaults, more than
// 2 ms on an exact clock, 104 ms or more on a 100 ms clock. Returns the TTL in ms, or
// errc::invalid_argument; `span`, if given, receives trusted_span(TTL in ms, validity), which the
// check computes anyway (an acquire's lease uses it again: acquire_request::span).
// `validity_checked`: the caller found validity.check() clean just before (check_acquire_input),
// so the span is computed without checking the options again.
template <class Rep, class Period, class Dur>
result<std::chrono::milliseconds> checked_lease_ttl(std::chrono::duration<Rep, Period> ttl,
                                                    const validity_options& validity, Dur tick,
                                                    std::chrono::nanoseconds* span = nullptr,
                                                    bool validity_checked = false) {
  const std::optional<std::chrono::milliseconds> ms =
      checked_duration_cast<std::chrono::milliseconds>(ttl);
  if (!ms || check_ttl(*ms)) return errc::invalid_argument;
  using tp = std::chrono::time_point<any_clock, Dur>;
  const std::chrono::nanoseconds trusted =
      validity_checked ? checked_trusted_span(*ms, validity) : trusted_span(*ms, validity);
  if (!(tp{} < valid_until_of_span(tp{}, trusted, tick))) return errc::invalid_argument;
  if (span != nullptr) *span = trusted;
  return *ms;
}

// The input every acquire of a lease checks (try_acquire, acquire, and a distributed_mutex's
// constructor for all its locks): a non-empty key, sane validity and backoff options, and a lease
// TTL (checked_lease_ttl, which also gives its trusted `span` if asked). Returns the TTL in ms, or
// errc::invalid_argument.
template <class Rep, class Period, class Clock>
result<std::chrono::milliseconds> check_acquire_input(std::string_view key,
                                                      std::chrono::duration<Rep, Period> ttl,
                                                      const acquire_options<Clock>& opts,
                                                      std::chrono::nanoseconds* span = nullptr) {
  if (key.empty()) return errc::invalid_argument;
  if (std::error_code ec = opts.validity.check()) return ec;
  if (std::error_code ec = opts.backoff.check()) return ec;
  return checked_lease_ttl(ttl, opts.validity, clock_tick(opts.clock), span, true);
}

// The label an acquire_options gives: `label`, or 0.1's `owner_label` when label is empty.
template <class Clock>
const std::string& label_in(const acquire_options<Clock>& opts) noexcept {
  if (!opts.label.empty()) return opts.label;
  HOLDFAST_DETAIL_ALLOW_DEPRECATED_BEGIN
  return opts.owner_label;
  HOLDFAST_DETAIL_ALLOW_DEPRECATED_END
}

// The owner id of one acquire by a recipe that draws a fresh id for every acquire
// (distributed_mutex, the semaphore with unique_owner): `<label>/<random>`. The label is
// opts.label, else opts.owner (0.1 took the prefix there), else 0.1's owner_label.
template <class Clock>
std::string fresh_owner_id(const acquire_options<Clock>& opts) {
  if (opts.label.empty() && !opts.owner.empty()) return labelled_owner_id(opts.owner);
  return labelled_owner_id(label_in(opts));
}

// A TTL under the store's floor (store_min_ttl) is errc::invalid_argument, the limit named in
// `report` if given: at the floor is accepted, one ms under it refused.
inline std::error_code check_min_ttl(std::chrono::milliseconds ttl, std::chrono::milliseconds floor,
                                     acquire_report* report) {
  if (!(ttl < floor)) return {};
  if (report != nullptr) {
    report->last_store_error = make_error_code(errc::invalid_argument);
    report->last_store_message =
        "holdfast: invalid argument: the TTL of " + std::to_string(ttl.count()) +
        " ms is under the store's min_ttl of " + std::to_string(floor.count()) +
        " ms (its options' min_ttl: the shortest TTL it can honour)";
  }
  return errc::invalid_argument;
}

// What was wrong with an acquire's input that check_acquire_input refused, for
// acquire_options::report (the code alone does not say which argument it was).
template <class Rep, class Period, class Clock>
std::string invalid_acquire_input_text(std::string_view key, std::chrono::duration<Rep, Period> ttl,
                                       const acquire_options<Clock>& opts) {
  if (key.empty()) return "the key is empty";
  if (opts.validity.check()) return "acquire_options::validity is out of range";
  if (opts.backoff.check()) return "acquire_options::backoff is out of range";
  const std::optional<std::chrono::milliseconds> ms =
      checked_duration_cast<std::chrono::milliseconds>(ttl);
  if (!ms) return "the TTL does not fit in milliseconds";
  const std::string n = std::to_string(ms->count());
  if (ms->count() <= 0) return "the TTL of " + n + " ms is not positive";
  if (*ms > max_ttl) {
    return "the TTL of " + n + " ms is over max_ttl (" + std::to_string(max_ttl.count()) + " ms)";
  }
  return "the TTL of " + n +
         " ms leaves no validity after acquire_options::validity's drift and margin and the "
         "clock's tick";
}

// Fills `report` (if given) with the code and "holdfast: invalid argument: <what>".
inline std::error_code refuse_acquire_input(std::error_code ec, acquire_report* report,
                                            const std::string& what) {
  if (report != nullptr) {
    report->last_store_error = ec;
    report->last_store_message = "holdfast: invalid argument: " + what;
  }
  return ec;
}

// What try_acquire() and acquire() send, once the caller's input has passed every check.
struct acquire_request {
  acquire_request(std::chrono::milliseconds t, std::chrono::nanoseconds s) noexcept
      : ttl(t), span(s) {}
  std::chrono::milliseconds ttl;
  // trusted_span(ttl, opts.validity), computed once by the check: a lease granted this TTL counts
  // its validity with it (lease/detail/acquire.hpp's asked_ttl) instead of computing it again.
  std::chrono::nanoseconds span;
  // The owner id, kept inline (detail/owner_id.hpp): a generated one is written there, a given
  // one copied there, so checking and sending an acquire allocates nothing for it.
  owner_id owner;
};

// prepare_acquire's request once the TTL passed: the owner (opts.owner, or a fresh random one)
// written straight into the request in its result, which is returned with no move on the way (one
// return, of one object); check_acquire_args, the stores' own check, has the last word.
template <class Clock>
result<acquire_request> checked_request(std::string_view key, std::chrono::milliseconds ms,
                                        std::chrono::nanoseconds span,
                                        const acquire_options<Clock>& opts) {
  result<acquire_request> req(std::in_place, ms, span);
  owner_id& owner = req->owner;
  if (!opts.owner.empty()) {
    owner.assign(opts.owner);
  } else {
    owner.generate(label_in(opts));
  }
  if (std::error_code ec = check_acquire_args(key, owner.view(), ms)) {
    req = refuse_acquire_input(ec, opts.report, "the owner is empty");
  }
  return req;
}

// The input checks both acquire functions share: check_acquire_input, then the owner (a fresh
// random one when none is given; check_acquire_args, the stores' own check, has the last word).
template <class Rep, class Period, class Clock>
result<acquire_request> prepare_acquire(std::string_view key,
                                        std::chrono::duration<Rep, Period> ttl,
                                        const acquire_options<Clock>& opts,
                                        std::chrono::milliseconds min_ttl = {}) {
  std::chrono::nanoseconds span{};
  const result<std::chrono::milliseconds> ms = check_acquire_input(key, ttl, opts, &span);
  if (!ms) {
    if (opts.report == nullptr) return ms.error();
    return refuse_acquire_input(ms.error(), opts.report,
                                invalid_acquire_input_text(key, ttl, opts));
  }
  if (*ms < min_ttl) return check_min_ttl(*ms, min_ttl, opts.report);  // always an error here
  return checked_request(key, *ms, span, opts);
}

}  // namespace detail

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_ACQUIRE_OPTIONS_HPP
