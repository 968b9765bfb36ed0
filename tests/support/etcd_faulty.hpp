// SPDX-License-Identifier: MIT
// tests/support/etcd_faulty.hpp - what the etcd suites that run against the shared etcd
// .ci/servers starts (HOLDFAST_ETCD_ENDPOINTS) set up the same way: shared_etcd(), options for that
// server under a key prefix of the test's own; and etcd_faulty, an etcd_store with faults injected
// into its link (detail::etcd_link::fault: a lost reply, a request not sent) that also counts what
// etcd holds of this store's own (the leases it asked for, the keys under its prefix), so a test
// can check that a failed call left nothing behind; and second_life(), a store's endpoints
// that lead to a second cluster whose revision is behind. Test scratch only; not thread-safe.
#ifndef HOLDFAST_TESTS_SUPPORT_ETCD_FAULTY_HPP
#define HOLDFAST_TESTS_SUPPORT_ETCD_FAULTY_HPP

#include <catch2/catch.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>

#include "etcd_servers.hpp"
#include "holdfast/stores/etcd.hpp"
#include "real_servers.hpp"

namespace hf_test {

/// Options for the shared etcd (HOLDFAST_ETCD_ENDPOINTS), with the key prefix `tag` + "/" + a
/// random tag + "/", so that tests running at once never meet. Unset: fails in CI, and is a loud
/// skip (nullopt) elsewhere.
inline std::optional<holdfast::etcd_options> shared_etcd(const std::string& tag) {
  std::optional<std::string> e = env("HOLDFAST_ETCD_ENDPOINTS");
  if (!e) {
    if (in_ci()) FAIL("HOLDFAST_ETCD_ENDPOINTS is unset (.ci/servers sets it)");
    loud_skip("no etcd: HOLDFAST_ETCD_ENDPOINTS is unset");
    return std::nullopt;
  }
  holdfast::etcd_options o;
  o.endpoints = split_commas(*e);
  o.key_prefix = tag + "/" + random_tag() + "/";
  return o;
}

/// etcd_store with faults in its link, and a look at what etcd holds of this store's own.
struct etcd_faulty : holdfast::etcd_store {
  explicit etcd_faulty(const holdfast::etcd_options& o) : etcd_store(o) {
    link_.fault = [this](std::string_view p, std::string_view body) {
      if (p == "/lease/grant") {  // the store picks its lease IDs: note each one it asked for
        const auto j = nlohmann::json::parse(body, nullptr, false);
        if (j.is_object() && j.contains("ID") && j["ID"].is_string()) {
          asked_.insert(std::stoll(j["ID"].get<std::string>()));
        }
      }
      const auto it = plan_.find(std::string(p));
      if (it == plan_.end()) return holdfast::detail::etcd_fault::none;
      return ++seen_[it->first] == it->second.second ? it->second.first
                                                     : holdfast::detail::etcd_fault::none;
    };
  }
  /// `f` for the `nth` request (1-based) to `path` from now on (added to earlier ones).
  void inject(const std::string& path, holdfast::detail::etcd_fault f, int nth = 1) {
    plan_[path] = {f, nth};
    seen_[path] = 0;
  }
  /// Injects nothing more (requests already counted stay counted).
  void clear() { plan_.clear(); }
  /// The leases etcd has now (lease/leases) that this store asked for: other tests share the
  /// server and take leases meanwhile (ci-run12 counted theirs).
  std::set<std::int64_t> leases() {
    auto guard = link_.lock();
    auto r = link_.post("/lease/leases", "{}");
    REQUIRE(r);
    std::set<std::int64_t> out;
    for (const auto& l : r->value("leases", nlohmann::json::array())) {
      const std::int64_t id = std::stoll(l.value("ID", std::string("0")));
      if (asked_.count(id) != 0) out.insert(id);
    }
    return out;
  }
  /// How many keys live under key_prefix + `sub` (all of this store's: plain, queue and
  /// read-write alike, when `sub` is empty).
  long long keys(const std::string& sub = "") {
    auto guard = link_.lock();
    const std::string from = link_.options().key_prefix + sub;
    std::string to = from;
    to.back() = static_cast<char>(to.back() + 1);
    std::string body = R"({"key":")";
    holdfast::detail::base64_append(from, body);
    body += R"(","range_end":")";
    holdfast::detail::base64_append(to, body);
    body += R"(","count_only":true})";
    auto r = link_.post("/kv/range", body);
    REQUIRE(r);
    return std::stoll(r->value("count", std::string("0")));
  }

  std::map<std::string, std::pair<holdfast::detail::etcd_fault, int>> plan_;
  std::map<std::string, int> seen_;
  std::set<std::int64_t> asked_;
};

/// Where a test of a store that moves to a cluster whose revision went back (a restore, as far
/// as a test can fake one) starts from; second_life() makes it.
struct etcd_second_life {
  holdfast::etcd_options two;        ///< the shared etcd, then a member of the other cluster
  holdfast::etcd_options on_second;  ///< that member alone (to read its revision)
  holdfast::fencing_token low;       ///< the other cluster's revision, read before the test
};

/// `o` with two endpoints, the shared etcd's first and then the first member of the other
/// cluster .ci/servers starts (HOLDFAST_ETCD_CLUSTER_ENDPOINTS: another cluster ID, a revision far
/// behind), that member alone, and its revision now; nullopt when the variable is unset.
inline std::optional<etcd_second_life> second_life(const holdfast::etcd_options& o) {
  std::optional<std::string> other = env("HOLDFAST_ETCD_CLUSTER_ENDPOINTS");
  if (!other) return std::nullopt;
  const std::string second = split_commas(*other).front();
  etcd_second_life out;
  out.two = o;
  out.two.endpoints = {o.endpoints.front(), second};
  out.on_second = o;
  out.on_second.endpoints = {second};
  holdfast::etcd_store behind(out.on_second);
  auto low = behind.revision();
  REQUIRE(low);
  out.low = *low;
  return out;
}

// Deletes every key under `o.key_prefix` (one `kv/deleterange` over the prefix, on a connection of
// the test's own), as an operator or a compaction of the store's keys would. \returns how many keys
// etcd says it deleted, or -1 when the request failed.
inline long long etcd_delete_prefix(const holdfast::etcd_options& o) {
  holdfast::detail::etcd_link adm(o);
  auto guard = adm.lock();
  std::string end = o.key_prefix;
  end.back() = static_cast<char>(end.back() + 1);
  std::string body = R"({"key":")";
  holdfast::detail::base64_append(o.key_prefix, body);
  body += R"(","range_end":")";
  holdfast::detail::base64_append(end, body);
  body += R"("})";
  auto r = adm.post("/kv/deleterange", body);
  if (!r) return -1;
  return std::stoll(r->value("deleted", std::string("0")));
}

}  // namespace hf_test

#endif  // HOLDFAST_TESTS_SUPPORT_ETCD_FAULTY_HPP
