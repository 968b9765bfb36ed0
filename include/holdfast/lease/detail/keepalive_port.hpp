// SPDX-License-Identifier: MIT
// holdfast/lease/detail/keepalive_port.hpp - the ports between a lease and whatever keeps it alive.
//
// Two small interfaces, independent of any Store type, so that neither side reaches into the
// other's internals:
//
//   port               | implemented by                        | driven by
//   -------------------+---------------------------------------+-----------------------------------
//   keepalive_target   | a lease's shared block                | a keepalive's thread (renew, drop)
//                      | (detail/lease_shared.hpp)             |
//   lease_renewer      | keepalive<Clock> (keepalive.hpp)      | lease.hpp's keep_alive(), which
//                      |                                       | keepalive::add() and
//                      |                                       | distributed_mutex use
//
// Not for users: keepalive.hpp and mutex.hpp are the public faces of both.
#ifndef HOLDFAST_LEASE_DETAIL_KEEPALIVE_PORT_HPP
#define HOLDFAST_LEASE_DETAIL_KEEPALIVE_PORT_HPP

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <system_error>
#include <utility>

#include "holdfast/detail/config.hpp"
#include "holdfast/observer.hpp"
#include "holdfast/result.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

// What one keepalive pass did to one lease: renewed it, failed transiently (retry), found it lost
// (and dropped it), or found it no longer the keepalive's business (released, removed, gone).
enum class keepalive_outcome { renewed, retry, lost, done };

template <class Clock>
struct keepalive_step {
  keepalive_outcome outcome = keepalive_outcome::done;
  typename Clock::time_point next{};         // renewed: when the next renewal is due
  typename Clock::time_point valid_until{};  // retry: the last instant worth retrying before
};

// Which leases one renew_batch call may renew together (batch_renew.hpp): those on one store
// object (`store`) of one lease type (`type`). {nullptr, nullptr}: this lease is renewed alone.
struct batch_key {
  const void* store = nullptr;
  const void* type = nullptr;

  explicit operator bool() const noexcept { return store != nullptr; }
  friend bool operator==(const batch_key& a, const batch_key& b) noexcept {
    return a.store == b.store && a.type == b.type;
  }
  friend bool operator<(const batch_key& a, const batch_key& b) noexcept {
    return std::less<const void*>()(a.store, b.store) ||
           (a.store == b.store && std::less<const void*>()(a.type, b.type));
  }
};

// The keepalive's view of a shared lease, independent of its Store type, so one keepalive thread
// serves leases on any stores that share a clock type.
template <class Clock>
class keepalive_target {
 public:
  using time_point = typename Clock::time_point;
  virtual ~keepalive_target() = default;
  // Marks the lease as kept alive by keepalive `id`. Returns the renewal due time and whether it
  // was newly attached (false: `id` already keeps it alive); lease_lost if the lease is not held;
  // invalid_argument if another keepalive already keeps it alive.
  virtual result<std::pair<time_point, bool>> attach(std::uint64_t id, double fraction) = 0;
  // Stops keepalive `id` from renewing the lease; returns once an in-flight renewal is done.
  virtual void detach(std::uint64_t id) = 0;
  // Renews the lease if keepalive `id` still keeps it alive. Never throws.
  // `also`: the keepalive's own observer (keepalive_options::observer), told of this renewal's
  // events besides the lease's observer (null: none).
  virtual keepalive_step<Clock> step(std::uint64_t id, double fraction,
                                     lease_observer* also) noexcept = 0;
  // The batch this lease may be renewed in (a falsy key: its store has no renew_batch).
  [[nodiscard]] virtual batch_key batch() const noexcept { return {}; }
  // Renews group[0..n), leases with this lease's batch() key (this one among them), as step()
  // renews one, in one store call; out[i] is group[i]'s outcome. Never throws.
  virtual void step_batch(keepalive_target* const* group, std::size_t n, std::uint64_t id,
                          double fraction, lease_observer* also,
                          keepalive_step<Clock>* out) noexcept {
    for (std::size_t i = 0; i < n; ++i) out[i] = group[i]->step(id, fraction, also);
  }
  // The latest reading of the clock the lease has seen (a clock that later reads earlier went
  // backwards, even if the keepalive itself never read it before).
  virtual time_point last_reading() = 0;

 protected:
  keepalive_target() = default;
  keepalive_target(const keepalive_target&) = default;
  keepalive_target& operator=(const keepalive_target&) = default;
};

// What a distributed_mutex (or any other owner of leases) needs of a keepalive: whether it can
// take leases at all, and taking one lease's shared block. keepalive<Clock> implements it; code
// that holds only a lease_renewer* needs no keepalive.hpp.
template <class Clock>
class lease_renewer {
 public:
  // Returns the keepalive's configuration error (errc::invalid_argument), or zero.
  [[nodiscard]] virtual std::error_code error() const noexcept = 0;
  // Returns errc::invalid_argument if no lease can be added now (bad options, stopped), or zero.
  [[nodiscard]] virtual std::error_code admission() const = 0;
  // Starts renewing the shared block `t` (see keepalive::add() for the outcomes).
  virtual result<void> add_shared(const std::shared_ptr<keepalive_target<Clock>>& t) = 0;

 protected:
  lease_renewer() = default;
  lease_renewer(const lease_renewer&) = default;
  lease_renewer& operator=(const lease_renewer&) = default;
  virtual ~lease_renewer() = default;
};

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_LEASE_DETAIL_KEEPALIVE_PORT_HPP
