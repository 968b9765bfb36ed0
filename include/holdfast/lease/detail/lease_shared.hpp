// SPDX-License-Identifier: MIT
// holdfast/lease/detail/lease_shared.hpp - the state a lease keeps, and the operations on it.
//
// lease<Store, Clock> (lease.hpp) is a handle around a lease_body: inline while only its holder
// uses it, moved into a lease_shared block (one allocation, two mutexes) once a keepalive shares
// it. lease_shared is the keepalive_target the keepalive drives (detail/keepalive_port.hpp). The
// public vocabulary of a lease's life (lease_state, loss_cause, loss_callback) is defined in
// lease_state.hpp so that the body can use it; users reach it through lease.hpp.
#ifndef HOLDFAST_LEASE_DETAIL_LEASE_SHARED_HPP
#define HOLDFAST_LEASE_DETAIL_LEASE_SHARED_HPP

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <string>
#include <system_error>
#include <utility>

#include "holdfast/clock.hpp"
#include "holdfast/detail/config.hpp"
#include "holdfast/detail/owner_id.hpp"
#include "holdfast/detail/saturating.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/lease/detail/batch_renew.hpp"
#include "holdfast/lease/detail/keepalive_port.hpp"
#include "holdfast/lease/detail/lease_state.hpp"
#include "holdfast/observer.hpp"
#include "holdfast/result.hpp"
#include "holdfast/store.hpp"
#include "holdfast/validity.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

namespace detail {

// Locks a mutex if there is one: a lease that no keepalive shares has none and pays nothing.
class maybe_lock {
 public:
  explicit maybe_lock(std::mutex* m) : m_(m) {
    if (m_ != nullptr) m_->lock();
  }
  ~maybe_lock() {
    if (m_ != nullptr) m_->unlock();
  }
  maybe_lock(const maybe_lock&) = delete;
  maybe_lock& operator=(const maybe_lock&) = delete;

 private:
  std::mutex* m_;
};

// What an operation on a lease has to report once no lock is held: observer events (at most two:
// an outcome and a loss, in the order they happened) and the loss callback. The events live in a
// block allocated only when someone observes the lease, so an unobserved operation carries two
// null pointers and constructs nothing.
struct pending_loss {
  struct events {
    lease_event e[2];
    int n = 0;
  };

  loss_callback fn;
  loss_cause cause = loss_cause::none;
  lease_observer* observer = nullptr;  // the lease's
  lease_observer* also = nullptr;      // a keepalive's own observer (keepalive_options::observer)
  bool keepalive = false;              // the operation runs on a keepalive's thread
  std::unique_ptr<events> queued;

  bool observed() const noexcept { return observer != nullptr || also != nullptr; }

  // Queues `e` (observed operations only). Without memory for it the event is dropped: an
  // observer never costs an operation its outcome.
  void add(const lease_event& e) noexcept {
    if (!queued) queued.reset(new (std::nothrow) events);
    if (!queued || queued->n == 2) return;
    lease_event& slot = queued->e[queued->n++];
    slot = e;
    slot.keepalive = keepalive;
  }

  // Delivers the events (an observer's exception goes no further), then runs the callback. An
  // operation with nothing to report (no observer, no loss) pays two tests here, no call.
  void fire() {
    if (queued || fn) deliver();
  }

  void deliver() {
    if (queued) {
      std::unique_ptr<events> q = std::move(queued);
      for (int i = 0; i < q->n; ++i) {
        notify(observer, q->e[i]);
        if (also != observer) notify(also, q->e[i]);
      }
    }
    if (fn) {
      loss_callback f = std::move(fn);
      fn = nullptr;
      f(cause);
    }
  }
};

// Records the exception being handled (if exceptions exist) as the lease's last error.
template <class Body>
void record_caught_exception(Body& b) noexcept {
  b.last_error = make_error_code(errc::caught_exception);
#if HOLDFAST_HAS_EXCEPTIONS
  b.last_exception = std::current_exception();
#endif
}

// Everything a lease knows, and the operations on it. Inline in a lease, or in a lease_shared
// block once a keepalive shares it. Locking protocol in shared mode: `op` (the shared block's
// operation mutex) is held across every store call, so store operations on one lease are
// serialized; `data` guards the fields and is held only briefly, never across a store call or a
// callback. store, key, owner and token never change after construction, so they are read
// without `data`. Fields written by an operation (ttl, acquired_at, valid_until) are written under
// both mutexes, so holding either one is enough to read them.
template <class Store, class Clock>
struct lease_body {
  using time_point = typename Clock::time_point;

  // A held lease on grant `g` of a request that asked for `ask` (ms; g.ttl may be less), whose
  // request left at `start`: valid until `until`, which is valid_until_for(clock, start,
  // trusted_span(g.ttl, v)) (the acquire's input check computed the span), with the clock last
  // read at `seen` (start, or the reading acquire_once judged the grant by) and armed with the
  // callback `lost` and the observer `obs`.
  lease_body(Store* s, Clock c, std::string&& k, owner_id&& o, grant g,
             std::chrono::milliseconds ask, validity_options v, time_point start, time_point until,
             time_point seen, const loss_callback& lost, lease_observer* obs)
      : store(s),
        clock(std::move(c)),
        key(std::move(k)),
        owner(std::move(o)),
        token(g.token),
        ttl(g.ttl),
        asked(ask),
        validity(v),
        tick(clock_tick(clock)),
        acquired_at(start),
        valid_until(until),
        last_seen(seen),
        state(lease_state::held),
        needs_release(true),
        on_lost(lost),
        observer(obs) {}

  // The instant a lease on `clock` whose request left at `start` stops trusting itself, for a
  // trusted span of `span` (validity.hpp): a tick of `clock` earlier than start + span.
  static time_point valid_until_for(const Clock& clock, time_point start,
                                    std::chrono::nanoseconds span) {
    return detail::valid_until_of_span(start, span, clock_tick(clock));
  }

  // Whether valid_at(now) holds for a lease just made by the constructor above with `seen` =
  // `start` (held, no reading after start): the reading did not go backwards, and it is before
  // `until`. acquire_once asks this before it makes the lease, so that a grant it keeps is built
  // once, in place, with `now` as its latest reading.
  static bool fresh_valid_at(time_point start, time_point until, time_point now) noexcept {
    return !(now < start) && now < until;
  }

  // Not declared noexcept: a defaulted move is noexcept exactly when the members' moves are, and
  // the Clock is the user's type (a noexcept that did not hold would make these deleted).
  lease_body(lease_body&&) = default;             // NOLINT(performance-noexcept-move-constructor)
  lease_body& operator=(lease_body&&) = default;  // NOLINT(performance-noexcept-move-constructor)

  // Marks a moved-from body as holding nothing.
  void clear() noexcept {
    token = fencing_token{};  // a moved-from handle must not offer a token it no longer holds
    state = lease_state::released;
    needs_release = false;
    on_lost = nullptr;
    observer = nullptr;  // a moved-from handle reports nothing
  }

  // [data] Turns a held lease lost for `why` (a lease is lost at most once).
  void lose(loss_cause why) noexcept {
    if (state != lease_state::held) return;
    state = lease_state::lost;
    if (loss == loss_cause::none) loss = why;
  }

  // An event about this lease (key, owner and token never change, so no lock is needed).
  lease_event event(lease_event_kind k) const noexcept {
    lease_event e;
    e.kind = k;
    e.key = key;
    e.owner = owner.view();
    e.token = token;
    return e;
  }

  // [data] Takes out what a loss has to report: the `lost` event for the observers (once) and the
  // callback (once). Inline, so that an operation on a lease not lost pays one test, no call.
  void collect(pending_loss& out) {
    if (loss != loss_cause::none) collect_loss(out);
  }

  // [data] collect() of a lost lease.
  void collect_loss(pending_loss& out) {
    out.observer = observer;
    if (out.observed() && !loss_observed) {
      loss_observed = true;
      lease_event e = event(lease_event_kind::lost);
      e.cause = loss;
      out.add(e);
    }
    if (loss_reported || !on_lost) return;
    loss_reported = true;
    out.fn = std::move(on_lost);
    on_lost = nullptr;
    out.cause = loss;
  }

  // [data] Reads the clock, remembering the latest reading; a reading earlier than the latest one
  // means the clock went backwards, and a lease that cannot measure time must not trust itself.
  time_point observe() { return observe_at(clock.now()); }

  // [data] observe() of the reading `now`.
  time_point observe_at(time_point now) noexcept {
    if (now < last_seen) {
      lose(loss_cause::clock_regressed);
    } else {
      last_seen = now;
    }
    return now;
  }

  // [data] valid() without the callback.
  bool check_valid() {
    if (state != lease_state::held) return false;
    return valid_at(clock.now());
  }

  // [data] check_valid() of a held lease, judged by the reading `now`.
  bool valid_at(time_point now) noexcept {
    observe_at(now);
    if (state != lease_state::held) return false;
    if (!(now < valid_until)) {
      lose(loss_cause::validity_passed);
      return false;
    }
    return true;
  }

  // The instant a keepalive renews at: `fraction` of the TTL after acquired_at, and strictly
  // before valid_until (a renewal sent at or after it is refused as too late). validity.hpp's
  // renew_due_at() is the one place this is computed.
  time_point due(double fraction) const noexcept {
    return holdfast::renew_due_at(acquired_at, ttl, validity, fraction, tick);
  }

  // [op] renew(ms): the store call runs with `data` unlocked.
  result<void> renew(std::mutex* data, std::chrono::milliseconds ms, pending_loss& out) {
    time_point start;
    if (std::error_code ec = renew_begin(data, out, start)) return ec;
    result<grant> g = store->renew(key, owner.view(), token, ms);
    return renew_end(data, ms, start, g, out);
  }

  // [op] The half of renew() before its store call: reads the clock into `start` (the instant
  // validity is counted from, read before the request leaves). A nonzero code means no request.
  std::error_code renew_begin(std::mutex* data, pending_loss& out, time_point& start) {
    out.observer = observer;
    maybe_lock lock(data);
    if (state != lease_state::held) return renew_failed(out, errc::lease_lost, {});
    start = observe();
    if (state == lease_state::held && !(start < valid_until)) lose(loss_cause::validity_passed);
    if (state != lease_state::held) return renew_failed(out, errc::lease_lost, {});
    return {};
  }

  // [op] The half of renew() after its store call: `g` is the store's answer to the renewal of
  // `ms` sent after renew_begin() read `start`.
  result<void> renew_end(std::mutex* data, std::chrono::milliseconds ms, time_point start,
                         result<grant> g, pending_loss& out) {
    // Asked before `data` is locked (renew_end runs without it): the store takes its own lock.
    const bool session_gone = !g && g.error() == errc::lease_lost &&
                              store_session_expired(*store, key, owner.view(), token);
    // Only an observed renewal reads the clock again, to measure the store's latency.
    const std::chrono::nanoseconds latency =
        out.observed() ? elapsed_ns(start, clock.now()) : std::chrono::nanoseconds::zero();
    maybe_lock lock(data);
    if (!g) {
      last_error = g.error();
      if (g.error() == errc::lease_lost) {
        lose(session_gone ? loss_cause::session_expired : loss_cause::renew_refused);
      }
      if (g.error() == errc::not_holder) lose(loss_cause::not_holder);
      return renew_failed(
          out, state != lease_state::held ? make_error_code(errc::lease_lost) : g.error(), latency);
    }
    if (state != lease_state::held) {  // lost while the call was out
      return renew_failed(out, errc::lease_lost, latency);
    }
    if (g->token != token || g->ttl <= std::chrono::milliseconds::zero()) {
      last_error = make_error_code(errc::protocol_error);
      lose(loss_cause::protocol_error);
      return renew_failed(out, errc::protocol_error, latency);
    }
    ttl = g->ttl < ms ? g->ttl : ms;  // never trust more than was asked for
    asked = ms;                       // the next renewal asks for this again, whatever was granted
    acquired_at = start;
    valid_until = holdfast::valid_until(start, ttl, validity, tick);
    if (out.observed()) {
      lease_event e = event(lease_event_kind::renewed);
      e.store_latency = latency;
      out.add(e);
    }
    return {};
  }

  // [data] A failed renewal: its event (if observed), then the loss it caused (if any).
  std::error_code renew_failed(pending_loss& out, std::error_code ec,
                               std::chrono::nanoseconds latency) {
    if (out.observed()) {
      lease_event e = event(lease_event_kind::renew_failed);
      e.error = ec;
      e.store_latency = latency;
      out.add(e);
    }
    collect(out);
    return ec;
  }

  // [op] release(): the store call runs with `data` unlocked.
  result<void> release(std::mutex* data, pending_loss& out) {
    out.observer = observer;
    bool first_attempt;
    {
      maybe_lock lock(data);
      if (!needs_release) {
        if (state != lease_state::lost) state = lease_state::released;
        return {};
      }
      // From here on nothing renews this lease, whatever the store answers (or throws).
      first_attempt = state == lease_state::held;
      if (first_attempt) state = lease_state::releasing;
    }
    // Only an observed release reads the clock, to measure the store's latency.
    const bool observed = out.observed();
    time_point start{};
    if (observed) start = clock.now();
    result<void> r = store->release(key, owner.view(), token);
    const bool session_gone = !r && r.error() == errc::not_holder &&
                              store_session_expired(*store, key, owner.view(), token);
    const std::chrono::nanoseconds latency =
        observed ? elapsed_ns(start, clock.now()) : std::chrono::nanoseconds::zero();
    maybe_lock lock(data);
    if (r || r.error() == errc::not_holder) {
      needs_release = false;
      state = lease_state::released;
      // not_holder on a first attempt means the lease was gone before the holder let go: a loss
      // it never noticed. On a retry it may just mean an earlier attempt landed but its reply was
      // lost, so it proves nothing and is not reported.
      if (!r && first_attempt && loss == loss_cause::none) {
        loss = session_gone ? loss_cause::session_expired : loss_cause::not_holder;
      }
      collect(out);
    } else {
      last_error = r.error();
    }
    if (observed) {
      lease_event e = event(r || r.error() == errc::not_holder ? lease_event_kind::released
                                                               : lease_event_kind::release_failed);
      if (!r) e.error = r.error();
      e.store_latency = latency;
      out.add(e);
    }
    return r;
  }

  Store* store;
  Clock clock;
  std::string key;
  owner_id owner;  // inline (detail/owner_id.hpp): no allocation for the ids acquire makes
  fencing_token token;
  // The TTL (ms) of the latest grant or renewal as the store reported it (at most `asked`):
  // validity and the renewal schedule follow it. A store may grant less than asked (a ZooKeeper
  // grant woken with no request reports what is left of its session's timeout).
  std::chrono::milliseconds ttl;
  // The TTL (ms) the holder asked for in its latest acquire or renewal: the next renewal asks for
  // it again. Renewing with `ttl` instead would shrink the lease on every short grant, and ask
  // under the store's min_ttl.
  std::chrono::milliseconds asked;
  validity_options validity;
  typename Clock::duration tick;  // clock_tick(clock), read once: validity ends a tick earlier
  time_point acquired_at;
  time_point valid_until;
  time_point last_seen;
  lease_state state;
  bool needs_release;
  bool loss_reported = false;
  loss_cause loss = loss_cause::none;
  // The latest failure as a result<void> (success: none yet), not a std::error_code, whose default
  // constructor calls std::system_category() out of line in every acquire.
  result<void> last_error{};
  loss_callback on_lost{};
  lease_observer* observer = nullptr;  // acquire_options::observer (null: nobody listens)
  bool loss_observed = false;          // the `lost` event was reported
#if HOLDFAST_HAS_EXCEPTIONS
  std::exception_ptr last_exception{};
#endif
};

// One keepalive renewal of one lease, from open to finish (lease_shared below, batch_renew.hpp).
template <class Clock>
struct renewal_slot {
  std::unique_lock<std::mutex> op;     // the lease's operation mutex, from open to close
  pending_loss loss;                   // what to report once no lock is held
  typename Clock::time_point start{};  // the clock read before the request left
  std::chrono::milliseconds ttl{0};    // the TTL asked for (lease_body::asked, not the granted)
  keepalive_step<Clock> out;           // the outcome, for the keepalive's schedule
};

// A lease's state once a keepalive shares it.
template <class Store, class Clock>
class lease_shared final : public keepalive_target<Clock> {
 public:
  using time_point = typename Clock::time_point;

  explicit lease_shared(lease_body<Store, Clock>&& b) : body(std::move(b)) {}

  result<std::pair<time_point, bool>> attach(std::uint64_t id, double fraction) override {
    std::lock_guard<std::mutex> lock(data);
    if (body.state != lease_state::held) return errc::lease_lost;
    if (keepalive_id == id) return std::make_pair(body.due(fraction), false);
    if (keepalive_id != 0) return errc::invalid_argument;
    keepalive_id = id;
    return std::make_pair(body.due(fraction), true);
  }

  time_point last_reading() override {
    std::lock_guard<std::mutex> lock(data);
    return body.last_seen;
  }

  void detach(std::uint64_t id) override {
    std::lock_guard<std::mutex> op_lock(op);
    std::lock_guard<std::mutex> lock(data);
    if (keepalive_id == id) keepalive_id = 0;
  }

  using slot_type = renewal_slot<Clock>;

  keepalive_step<Clock> step(std::uint64_t id, double fraction,
                             lease_observer* also) noexcept override {
    slot_type s;
    if (open(s, id, fraction, also)) {
      HOLDFAST_TRY {
        result<grant> g = body.store->renew(body.key, body.owner.view(), body.token, s.ttl);
        close(s, g, fraction);
      }
      HOLDFAST_CATCH_ALL {
        caught(s);
      }
    }
    if (s.op.owns_lock()) s.op.unlock();
    finish(s);
    return s.out;
  }

  batch_key batch() const noexcept override {
    if constexpr (has_renew_batch_v<Store>) {
      return {body.store, &type_tag<lease_shared>::id};
    } else {
      return {};
    }
  }

  void step_batch(keepalive_target<Clock>* const* group, std::size_t n, std::uint64_t id,
                  double fraction, lease_observer* also,
                  keepalive_step<Clock>* out) noexcept override {
    if constexpr (has_renew_batch_v<Store>) {
      // Same batch() key: every member is a lease_shared of this type on this store.
      renew_batch_step<lease_shared>(group, n, id, fraction, also, out);
    } else {
      keepalive_target<Clock>::step_batch(group, n, id, fraction, also, out);
    }
  }

  // The keepalive's renewal in steps (batch_renew.hpp): open takes the operation mutex into `s`
  // and, if keepalive `id` still renews the held lease, reads the clock; true iff a renewal
  // request is to be sent (otherwise s.out says what happened).
  bool open(slot_type& s, std::uint64_t id, double fraction, lease_observer* also) noexcept {
    s.loss.also = also;
    s.loss.keepalive = true;
    HOLDFAST_TRY {
      s.op = std::unique_lock<std::mutex>(op);
      {
        std::lock_guard<std::mutex> lock(data);
        if (keepalive_id != id) return false;
        if (body.state != lease_state::held) {
          keepalive_id = 0;
          return false;
        }
        s.ttl = body.asked;
      }
      if (!body.renew_begin(&data, s.loss, s.start)) return true;
      settle(s, false, fraction);
    }
    HOLDFAST_CATCH_ALL {
      caught(s);
    }
    return false;
  }

  // Judges the store's answer `g` to the request open() let out.
  void close(slot_type& s, result<grant> g, double fraction) noexcept {
    HOLDFAST_TRY {
      const result<void> r = body.renew_end(&data, s.ttl, s.start, g, s.loss);
      settle(s, static_cast<bool>(r), fraction);
    }
    HOLDFAST_CATCH_ALL {
      caught(s);
    }
  }

  // A store or clock that throws on the keepalive thread: report it on the lease and treat it
  // as transient; validity still bounds the retries.
  void caught(slot_type& s) noexcept {
    std::lock_guard<std::mutex> lock(data);
    record_caught_exception(body);
    s.out.outcome = keepalive_outcome::retry;
    s.out.valid_until = body.valid_until;
    s.loss.observer = body.observer;
    if (s.loss.observed()) {
      HOLDFAST_TRY {
        lease_event e = body.event(lease_event_kind::renew_failed);
        e.error = make_error_code(errc::caught_exception);
        s.loss.add(e);
      }
      HOLDFAST_CATCH_ALL {}
    }
  }

  // With the operation mutex unlocked: the events and the callback the renewal has to report.
  void finish(slot_type& s) noexcept {
    HOLDFAST_TRY {
      s.loss.fire();
    }
    HOLDFAST_CATCH_ALL {
      std::lock_guard<std::mutex> lock(data);
      record_caught_exception(body);
    }
  }

  // Where the renewal leaves the lease: renewed (next due), transient (retry until validity
  // runs out), or no longer the keepalive's business (lost, or released while the call was out).
  void settle(slot_type& s, bool renewed, double fraction) {
    std::lock_guard<std::mutex> lock(data);
    if (renewed) {
      s.out.outcome = keepalive_outcome::renewed;
      s.out.next = body.due(fraction);
    } else if (body.state == lease_state::held) {
      s.out.outcome = keepalive_outcome::retry;
      s.out.valid_until = body.valid_until;
    } else {
      keepalive_id = 0;
      if (body.state == lease_state::lost) s.out.outcome = keepalive_outcome::lost;
    }
  }

  std::mutex op;    // held across every store call on this lease
  std::mutex data;  // guards body's fields; never held across a store call or a callback
  lease_body<Store, Clock> body;
  std::uint64_t keepalive_id = 0;  // which keepalive renews this lease (0: none)
};

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_LEASE_DETAIL_LEASE_SHARED_HPP
