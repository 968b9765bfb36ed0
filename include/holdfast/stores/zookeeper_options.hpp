// SPDX-License-Identifier: MIT
// holdfast/stores/zookeeper_options.hpp - zookeeper_options: how zookeeper_store and
// zookeeper_fence reach a ZooKeeper ensemble (hosts, session timeout, digest credentials) and
// where holdfast keeps its nodes there; and zookeeper_max_token. Part of stores/zookeeper.hpp
// (include that); on its own it needs no ZooKeeper client library.
#ifndef HOLDFAST_STORES_ZOOKEEPER_OPTIONS_HPP
#define HOLDFAST_STORES_ZOOKEEPER_OPTIONS_HPP

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <system_error>

#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/store.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

/// The greatest token ZooKeeper can issue: zxids are signed 64-bit integers (epoch in the high
/// 32 bits, counter in the low 32).
inline constexpr fencing_token zookeeper_max_token{
    static_cast<fencing_token::rep>(std::numeric_limits<std::int64_t>::max())};

/// The default largest owner zookeeper_store stores (as its node's data): 1,000,000 bytes,
/// under the server's default packet limit (jute.maxbuffer, 1 MiB - 1) with room for the request
/// around it. See zookeeper_options::max_owner_bytes.
inline constexpr std::size_t zookeeper_default_max_owner_bytes = std::size_t{1000000};

/// How to reach a ZooKeeper ensemble and where holdfast keeps its nodes there.
struct zookeeper_options {
  /// The ensemble, as the ZooKeeper client takes it: comma-separated host:port pairs, optionally
  /// followed by a chroot path ("10.0.0.5:2181,10.0.0.6:2181/apps/x"). The client picks a server
  /// at random and moves to the next when one fails. holdfast does not create the chroot: a
  /// chroot that does not exist is misconfigured, named, at the first request that meets it.
  /// Default "127.0.0.1:2181".
  std::string hosts = "127.0.0.1:2181";
  /// The parent of every lease's node: lease "k" queues under root + "/" + escaped "k" (see the
  /// overview of stores/zookeeper.hpp). An absolute path, not "/" and not ending in "/".
  std::string root = "/holdfast/lease";
  /// The session timeout asked of the server, in ms. The server grants a timeout between its
  /// minSessionTimeout and maxSessionTimeout (2 and 20 ticks by default: 4 s to 40 s with the
  /// default tickTime of 2 s); the granted one is the store's min_ttl() and the TTL of every
  /// grant (a lease lives as long as the session that holds it). In [1, 2^31) ms. Default 10 s.
  std::chrono::milliseconds session_timeout{10000};
  /// Bound on establishing a session (and on re-establishing it after the server expired the
  /// last one), in ms, > 0: a call finding no session after this reports store_unavailable.
  std::chrono::milliseconds connect_timeout{5000};
  /// ZooKeeper "digest" credentials, "user:password", added to the session (zoo_add_auth); empty
  /// sends none. With credentials, nodes holdfast creates carry ZOO_CREATOR_ALL_ACL (only this
  /// user may touch them); without, ZOO_OPEN_ACL_UNSAFE. A server refusing them is
  /// permission_denied, never retried.
  std::string digest{};
  /// The largest owner (bytes) the store sends; a larger one is invalid_argument before anything
  /// is sent. A packet over the server's jute.maxbuffer makes it drop the connection, so raise
  /// this only with that (server -Djute.maxbuffer=N: up to N - 48576). Default 1,000,000.
  std::size_t max_owner_bytes = zookeeper_default_max_owner_bytes;

  /// Returns errc::invalid_argument if an option is out of range (see each field); a zero error
  /// code otherwise. `why`, if given, gets what is wrong, naming the field: "invalid
  /// zookeeper_options: root \"holdfast\" is not an absolute path".
  [[nodiscard]] std::error_code check(std::string* why = nullptr) const {
    auto bad = [&](const std::string& what) -> std::error_code {
      if (why != nullptr) *why = "invalid zookeeper_options: " + what;
      return errc::invalid_argument;
    };
    if (hosts.empty()) return bad("hosts is empty");
    if (hosts.find('\0') != std::string::npos) return bad("hosts contains NUL");
    if (std::string port = port_out_of_range(); !port.empty()) {
      return bad("hosts \"" + hosts + "\": port " + port + " is out of range 1 .. 65535");
    }
    if (root.empty() || root[0] != '/') return bad("root \"" + root + "\" is not an absolute path");
    if (root.size() == 1 || root.back() == '/') return bad("root \"" + root + "\" ends in /");
    if (root.find('\0') != std::string::npos) return bad("root contains NUL");
    if (root.find("//") != std::string::npos) return bad("root \"" + root + "\" has an empty part");
    if (digest.find('\0') != std::string::npos) return bad("digest contains NUL");
    if (!digest.empty() && digest.find(':') == std::string::npos) {
      return bad("digest is not \"user:password\"");
    }
    if (session_timeout <= std::chrono::milliseconds::zero() ||
        session_timeout.count() > std::numeric_limits<std::int32_t>::max()) {
      return bad("session_timeout " + std::to_string(session_timeout.count()) +
                 " ms is not in 1 .. 2^31 - 1");
    }
    if (connect_timeout <= std::chrono::milliseconds::zero() || connect_timeout > max_ttl) {
      return bad("connect_timeout " + std::to_string(connect_timeout.count()) + " ms is not > 0");
    }
    return {};
  }

 private:
  // The first all-digit port of `hosts` ("h:p,h:p[/chroot]") outside 1 .. 65535 (the C client
  // would take 99999 as 34463, another port), or "". Other bad ports the client refuses itself.
  [[nodiscard]] std::string port_out_of_range() const {
    const std::string list = hosts.substr(0, hosts.find('/'));
    for (std::size_t at = 0; at <= list.size();) {
      const std::size_t end = std::min(list.find(',', at), list.size());
      const std::size_t colon = list.rfind(':', end == 0 ? 0 : end - 1);
      if (colon != std::string::npos && colon >= at && colon + 1 < end) {
        std::string port = list.substr(colon + 1, end - colon - 1);
        long value = 0;  // capped: a long run of digits stays out of range, never overflows
        for (char c : port)
          value = c < '0' || c > '9' ? -1 : std::min(value * 10 + (c - '0'), 100000L);
        if (value == 0 || value > 65535) return port;
      }
      at = end + 1;
    }
    return {};
  }
};

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_ZOOKEEPER_OPTIONS_HPP
