// SPDX-License-Identifier: MIT
// holdfast/stores/detail/link_client.hpp - link_client<Link>: what every real store and fence
// client has because it reaches its server over one link. A link (detail/redis_link.hpp,
// detail/postgres_link.hpp, detail/etcd_link.hpp) is one connection with its options, a mutex
// that its owner takes around every use (lock()), and the text of its last failure; the
// clients' members that only pass through to it live here once: connect() for links that connect
// ahead of use, last_error_message() and options(). Not for users: they see these members on
// redis_store, postgres_store, etcd_store and the fences.
#ifndef HOLDFAST_STORES_DETAIL_LINK_CLIENT_HPP
#define HOLDFAST_STORES_DETAIL_LINK_CLIENT_HPP

#include <string>
#include <system_error>
#include <utility>

#include "holdfast/detail/config.hpp"
#include "holdfast/result.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

/// The base of a client (store or fence) that talks to its server over one `Link`: it owns the
/// link and gives the members every such client has. Link provides lock(), options(),
/// last_error() and, if it can connect ahead of use, ensure_connected().
template <class Link>
class link_client {
 public:
  /// Connects now instead of on first use: opens the connection and runs the client's session
  /// setup (redis_store: AUTH, SELECT, CLIENT SETNAME and SCRIPT LOAD of its scripts, in one
  /// round trip; postgres_store: its session settings, table creation and statement
  /// preparation). Does nothing if already connected. Only for links that connect ahead of use
  /// (etcd's connects per request and has no connect()).
  /// \returns success; errc::invalid_argument for bad options; errc::store_unavailable if the
  ///   server cannot be reached or refuses the credentials or the setup; errc::timeout;
  ///   errc::protocol_error (e.g. a PostgreSQL table of that name with another layout); the
  ///   server's text in last_error_message().
  /// Thread-safety: as the client's operations (it takes the link's lock).
  template <class L = Link, class = decltype(std::declval<L&>().ensure_connected())>
  result<void> connect() {
    auto guard = link_.lock();
    if (std::error_code ec = link_.ensure_connected()) return ec;
    return {};
  }

  /// Returns the text of the failure of the most recent call on this client: the server's
  /// error (Redis: "NOAUTH Authentication required."; PostgreSQL, SQLSTATE first: "postgres:
  /// 57P01: FATAL: terminating connection due to administrator command"; etcd, with the HTTP
  /// status and gRPC code: "etcd: http://127.0.0.1:2379/v3/kv/txn: etcdserver: no leader (HTTP
  /// 503, gRPC code 14)"), the client library's transport error (hiredis', libpq's or libcurl's,
  /// e.g. "Connection refused"), or holdfast's own note on a malformed answer. Every call begins
  /// by clearing it, so it never describes an older call: it is empty after a call that
  /// succeeded or ended in contention (busy, lease_lost, not_holder, stale_token are outcomes:
  /// no text, but ZooKeeper's lease_lost names an expired session). Under concurrent use the most
  /// recent call may be another thread's; background work (ZooKeeper's reaper) does not clear it.
  /// Thread-safety: may be called concurrently with anything (it takes the link's lock without
  /// beginning a call).
  [[nodiscard]] std::string last_error_message() const {
    auto guard = link_.lock_quiet();
    return link_.last_error();
  }

  /// Returns the options the client was made with.
  [[nodiscard]] const auto& options() const noexcept { return link_.options(); }
  /// Returns the shortest lease TTL this store is asked for: options().min_ttl (the options'
  /// docstring says where the bound comes from). See holdfast::store_min_ttl().
  template <class L = Link>
  [[nodiscard]] auto min_ttl() const noexcept
      -> decltype(std::declval<const L&>().options().min_ttl) {
    return link_.options().min_ttl;
  }

 protected:
  /// Makes the link from `args` (the link's constructor arguments). The tag keeps this
  /// constructor from standing in for a copy or move.
  template <class... Args>
  explicit link_client(std::in_place_t /*tag*/, Args&&... args)
      : link_(std::forward<Args>(args)...) {}

  /// Ends a call refused before it reached the link (bad arguments) as a call: it begins one
  /// (clearing last_error_message(), which would otherwise describe an older call). \returns ec.
  std::error_code refused(std::error_code ec) const {
    auto guard = link_.lock();
    return ec;
  }

  Link link_;  // the client's own link: the derived client's operations use it under lock()
};

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_DETAIL_LINK_CLIENT_HPP
