// SPDX-License-Identifier: MIT
// holdfast/stores/etcd_options.hpp - etcd_options: how etcd_store and etcd_fence reach an etcd
// cluster (endpoints, TLS, etcd users, timeouts) and where holdfast keeps its keys there; and
// etcd_max_token, the greatest token etcd can issue. Part of stores/etcd.hpp (include that); on
// its own it needs neither libcurl nor nlohmann/json.
#ifndef HOLDFAST_STORES_ETCD_OPTIONS_HPP
#define HOLDFAST_STORES_ETCD_OPTIONS_HPP

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/store.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

/// The greatest token etcd can issue: revisions are signed 64-bit integers.
inline constexpr fencing_token etcd_max_token{
    static_cast<fencing_token::rep>(std::numeric_limits<std::int64_t>::max())};

/// The largest owner etcd_store sends: 1.4 MiB, under etcd's default request limit of 1.5 MiB
/// (--max-request-bytes) with room for the transaction around it. Larger owners are refused with
/// errc::invalid_argument before anything is sent.
inline constexpr std::size_t etcd_max_owner_bytes = std::size_t{1468006};

/// Returns the message of an owner of `bytes` bytes over etcd_max_owner_bytes (invalid_argument).
inline std::string etcd_owner_over_limit(std::size_t bytes) {
  return "etcd: the owner of " + std::to_string(bytes) +
         " bytes is over etcd's request limit (--max-request-bytes, 1.5 MiB by default; an "
         "owner may have 1.4 MiB)";
}

/// Returns what makes `key` or `owner` too large for one etcd request (naming the limit), or an
/// empty string: either over etcd_max_owner_bytes cannot fit etcd's request limit. The one size
/// check of every etcd entry point that takes a key or an owner (etcd_store, its read-write and
/// multi-key paths, etcd_fence), run before anything is sent. Pass an empty owner where there is
/// none. (A key and an owner each under the limit can still exceed it together: etcd refuses
/// that request.)
inline std::string etcd_args_problem(std::string_view key, std::string_view owner) {
  if (key.size() > etcd_max_owner_bytes) {
    return "etcd: the key of " + std::to_string(key.size()) +
           " bytes is over etcd's request limit (--max-request-bytes, 1.5 MiB by default; a key "
           "may have 1.4 MiB)";
  }
  if (owner.size() > etcd_max_owner_bytes) return etcd_owner_over_limit(owner.size());
  return {};
}

/// How to reach an etcd cluster and where holdfast keeps its keys there.
struct etcd_options {
  /// Client URLs of the members ("http://10.0.0.5:2379", "https://..."), tried in order; a
  /// failed member moves later calls to the next one. Default {"http://127.0.0.1:2379"}.
  std::vector<std::string> endpoints{"http://127.0.0.1:2379"};
  /// Path of the JSON gateway under each endpoint: "/v3" (etcd 3.4+; the default) or "/v3beta"
  /// (etcd 3.3).
  std::string api_path = "/v3";
  /// Prefix of every lease key: lease "k" lives at key_prefix + "k". Non-empty.
  std::string key_prefix = "holdfast/lease/";
  /// etcd user for authentication (etcd's `auth enable`); empty sends no credentials. holdfast
  /// asks /v3/auth/authenticate for a token on first use and again whenever etcd says the token
  /// is no longer valid (its --auth-token-ttl ran out, or the member restarted). Use TLS (https
  /// endpoints) to keep the password off the wire.
  std::string username{};
  /// Password of `username`.
  std::string password{};
  /// TLS: CA bundle that verifies the members' certificates (empty: libcurl's default store).
  std::string ca_file{};
  /// TLS client certificate and key, PEM (both or neither), for etcd's --client-cert-auth.
  std::string cert_file{};
  /// See cert_file.
  std::string key_file{};
  /// Bound on establishing a connection, in ms, > 0.
  std::chrono::milliseconds connect_timeout{2000};
  /// Bound on each request (connect included), in ms, > 0. A timeout reports errc::timeout.
  std::chrono::milliseconds command_timeout{5000};
  /// The shortest lease TTL (ms) this store is asked for: try_acquire(), acquire(), acquire_all()
  /// and the recipes' constructors (mutex, election, semaphore) refuse a shorter one with
  /// errc::invalid_argument, naming this limit, before anything is sent
  /// (holdfast::store_min_ttl()). etcd applies a minimum lease TTL of ceil(1.5 x
  /// --election-timeout) in whole seconds and silently raises a shorter one to it (etcd 3.4 here:
  /// TTL 1 is granted as 2 s with the default 1000 ms election timeout, as 3 s with 2000 ms), so a
  /// key asked for 1 s would stay taken for 2 s while its holder trusts 1 s. Default 2000 ms, the
  /// minimum with etcd's defaults; a cluster with another election timeout E sets ceil(1.5 E / 1 s)
  /// s. In [0, max_ttl]; 0 turns the check off.
  std::chrono::milliseconds min_ttl{2000};
  /// How many grants the store remembers the lease of (so renew and release take one round trip
  /// instead of two); older ones are forgotten first. >= 0; 0 remembers none.
  std::size_t remembered_grants = 4096;

  /// Returns errc::invalid_argument if an option is out of range (see each field); a zero error
  /// code otherwise. `why`, if given, gets what is wrong, naming the field: "invalid
  /// etcd_options: endpoints[0] \"127.0.0.1:2379\" does not start with http:// or https://".
  [[nodiscard]] std::error_code check(std::string* why = nullptr) const {
    auto bad = [&](const std::string& what) -> std::error_code {
      if (why != nullptr) *why = "invalid etcd_options: " + what;
      return errc::invalid_argument;
    };
    if (endpoints.empty()) return bad("endpoints is empty");
    if (key_prefix.empty()) return bad("key_prefix is empty");
    for (std::size_t i = 0; i < endpoints.size(); ++i) {
      const std::string& e = endpoints[i];
      const std::string name = "endpoints[" + std::to_string(i) + "]";
      if (e.empty()) return bad(name + " is empty");
      if (e.find('\0') != std::string::npos) return bad(name + " contains NUL");
      if (e.rfind("http://", 0) != 0 && e.rfind("https://", 0) != 0) {
        std::string why = name;
        why += " \"";
        why += e;
        why += "\" does not start with http:// or https://";
        return bad(why);
      }
    }
    if (api_path.find('\0') != std::string::npos) return bad("api_path contains NUL");
    if (ca_file.find('\0') != std::string::npos) return bad("ca_file contains NUL");
    if (cert_file.find('\0') != std::string::npos) return bad("cert_file contains NUL");
    if (key_file.find('\0') != std::string::npos) return bad("key_file contains NUL");
    if (cert_file.empty() != key_file.empty()) {
      return bad("cert_file and key_file must be given together");
    }
    if (username.empty() && !password.empty()) return bad("password is set but username is empty");
    if (connect_timeout <= std::chrono::milliseconds::zero()) {
      return bad("connect_timeout " + std::to_string(connect_timeout.count()) + " ms is not > 0");
    }
    if (min_ttl < std::chrono::milliseconds::zero() || min_ttl > max_ttl) {
      return bad("min_ttl " + std::to_string(min_ttl.count()) + " ms is not in 0 .. max_ttl");
    }
    if (command_timeout <= std::chrono::milliseconds::zero()) {
      return bad("command_timeout " + std::to_string(command_timeout.count()) + " ms is not > 0");
    }
    return {};
  }
};

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_ETCD_OPTIONS_HPP
