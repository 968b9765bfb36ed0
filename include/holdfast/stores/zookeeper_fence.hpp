// SPDX-License-Identifier: MIT
// holdfast/stores/zookeeper_fence.hpp - zookeeper_fence: fenced writes inside ZooKeeper, the
// fence node and the caller's data node changed in one multi request. Part of
// stores/zookeeper.hpp (include that; its overview describes the session, failures and
// zookeeper_options). Opt-in: needs libzookeeper_mt.
#ifndef HOLDFAST_STORES_ZOOKEEPER_FENCE_HPP
#define HOLDFAST_STORES_ZOOKEEPER_FENCE_HPP

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/result.hpp"
#include "holdfast/stores/detail/link_client.hpp"
#include "holdfast/stores/detail/zookeeper_link.hpp"
#include "holdfast/stores/detail/zookeeper_nodes.hpp"
#include "holdfast/stores/zookeeper_options.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

/// Fenced writes whose fence lives in ZooKeeper next to the data (fence.hpp; Kleppmann 2016):
/// the fence node holds "<token>:<owner>" (the token as 20 decimal digits) and its version. A
/// write reads the fence node, judges the token, and sends one multi request that sets the fence
/// node *at the version it read* (a check-and-write: any write in between fails it with
/// ZBADVERSION, and the fence reads again) together with the caller's data node, so no newer
/// holder can slip in between. Admitted iff the token is newer than the fence's, or equal and
/// from the same owner (one holder writes many times). An older token is refused with
/// stale_token; an equal token from another owner with token_reissued (the store that issued it
/// lost grants and issued it again: admitting it would let a second holder through, DESIGN.md
/// section 5). Neither changes anything. A fence node holdfast did not write is protocol_error.
///
/// Paths are absolute ZooKeeper paths used as given (under the options' chroot, not its root);
/// missing parents are created (persistent). Tokens may come from any store. Every request is
/// safe to repeat: a write whose reply was lost, sent again, finds its own token and owner.
/// Thread-safety: as zookeeper_store (one mutex around one session).
class zookeeper_fence : private detail::link_client<detail::zookeeper_link> {
 public:
  using link_client::last_error_message;

  /// Makes a fence client for the ensemble in `opts` (hosts, timeouts, digest).
  explicit zookeeper_fence(zookeeper_options opts = {})
      : link_client(std::in_place, std::move(opts)) {}

  zookeeper_fence(const zookeeper_fence&) = delete;
  zookeeper_fence& operator=(const zookeeper_fence&) = delete;

  /// Admits (`token`, `owner`) at `fence_path` iff `token` is newer than the newest admitted
  /// there, or equal to it and admitted for `owner`, and records both, atomically.
  /// \returns success; errc::stale_token if a newer token was admitted; errc::token_reissued if
  ///   this token was admitted for another owner (nothing changes either way);
  ///   errc::invalid_argument for a path that is not absolute, an empty owner or a token no
  ///   store issues (none, max); store_unavailable, timeout (also after 16 lost races in a
  ///   row); permission_denied; protocol_error if the node holds no token.
  result<void> admit(std::string_view fence_path, fencing_token token, std::string_view owner) {
    return execute(fence_path, token, owner, nullptr, {});
  }

  /// Admits (`token`, `owner`) at `fence_path` and, only if admitted, puts `value` at
  /// `data_path` (created if absent), in one multi request. \returns as admit().
  result<void> write(std::string_view fence_path, fencing_token token, std::string_view owner,
                     std::string_view data_path, std::string_view value) {
    if (std::error_code ec = detail::zookeeper_check_args(link_, data_path, {})) return ec;
    const std::string data(data_path);
    if (!absolute(data)) return link_.fail(errc::invalid_argument, "zookeeper fence: bad path");
    return execute(fence_path, token, owner, &data, value);
  }

  /// Returns the newest token admitted at `fence_path` (fencing_token() if none).
  result<fencing_token> newest(std::string_view fence_path) {
    if (std::error_code ec = detail::zookeeper_check_args(link_, fence_path, {})) return ec;
    auto guard = link_.lock();
    if (std::error_code ec = link_.ensure_connected()) return ec;
    result<std::optional<detail::zookeeper_node>> n = read(std::string(fence_path));
    if (!n) return n.error();
    if (!*n) return fencing_token();
    std::string who;
    const std::optional<fencing_token> t = parse((*n)->data, who);
    if (!t) return link_.fail(errc::protocol_error, "zookeeper fence: not a fence node");
    return *t;
  }

  /// Returns the data at `data_path`, or nullopt if there is no such node.
  result<std::optional<std::string>> get(std::string_view data_path) {
    if (std::error_code ec = detail::zookeeper_check_args(link_, data_path, {})) return ec;
    auto guard = link_.lock();
    if (std::error_code ec = link_.ensure_connected()) return ec;
    result<std::optional<detail::zookeeper_node>> n = read(std::string(data_path));
    if (!n) return n.error();
    if (!*n) return std::optional<std::string>();
    return std::optional<std::string>(std::move((*n)->data));
  }

 private:
  static bool absolute(const std::string& p) {
    return p.size() > 1 && p[0] == '/' && p.back() != '/' && p.find('\0') == std::string::npos;
  }

  static std::string text(fencing_token token, std::string_view owner) {
    char digits[24];
    std::snprintf(digits, sizeof digits, "%020llu", static_cast<unsigned long long>(token.value()));
    std::string v = digits;
    v += ':';
    v.append(owner.data(), owner.size());
    return v;
  }

  static std::optional<fencing_token> parse(std::string_view v, std::string& owner) {
    if (v.size() < 21 || v[20] != ':') return std::nullopt;
    std::uint64_t t = 0;
    for (std::size_t i = 0; i < 20; ++i) {
      if (v[i] < '0' || v[i] > '9') return std::nullopt;
      t = t * 10 + static_cast<std::uint64_t>(v[i] - '0');
    }
    owner.assign(v.substr(21));
    return fencing_token(t);
  }

  // Reads `path` (split into its parent and name for zookeeper_nodes::get).
  result<std::optional<detail::zookeeper_node>> read(const std::string& path) {
    if (!absolute(path)) return link_.fail(errc::invalid_argument, "zookeeper fence: bad path");
    const std::size_t slash = path.rfind('/');
    return nodes_.get(path.substr(0, slash == 0 ? 1 : slash), path.substr(slash + 1));
  }

  result<void> execute(std::string_view fence_path, fencing_token token, std::string_view owner,
                       const std::string* data, std::string_view value) {
    if (std::error_code ec = detail::zookeeper_check_args(link_, fence_path, owner)) return ec;
    const std::string fence(fence_path);
    if (!absolute(fence) || owner.empty() || !token.is_issuable()) {
      return link_.fail(errc::invalid_argument,
                        "zookeeper fence: a fence needs an absolute path, an owner and a token");
    }
    auto guard = link_.lock();
    if (std::error_code ec = link_.ensure_connected()) return ec;
    const std::string mine = text(token, owner);
    for (int race = 0; race < 16; ++race) {
      result<std::optional<detail::zookeeper_node>> f = read(fence);
      if (!f) return f.error();
      if (*f) {
        std::string who;
        const std::optional<fencing_token> t = parse((*f)->data, who);
        if (!t)
          return link_.fail(errc::protocol_error, "zookeeper fence: " + fence + " holds no token");
        if (token < *t) return errc::stale_token;
        if (token == *t && who != owner) return errc::token_reissued;
      } else if (const int rc = nodes_.make_parents(parent(fence), false); rc != ZOK) {
        return link_.fail_rc(rc, "create", parent(fence));
      }
      bool data_exists = false;
      if (data != nullptr) {
        Stat st{};
        const int rc = nodes_.exists(*data, st, false);
        if (rc == ZNONODE) {
          if (const int pr = nodes_.make_parents(parent(*data), false); pr != ZOK) {
            return link_.fail_rc(pr, "create", parent(*data));
          }
        } else if (rc != ZOK) {
          return link_.fail_rc(rc, "exists", *data);
        }
        data_exists = rc == ZOK;
      }
      const int rc = multi(fence, *f ? (*f)->stat.version : -1, mine, data, data_exists, value);
      if (rc == ZOK) return {};
      if (rc != ZBADVERSION && rc != ZNODEEXISTS && rc != ZNONODE) {
        return link_.fail_rc(rc, "multi", fence);
      }
      // Another writer changed the fence (or the data node) between the read and the multi.
    }
    return link_.fail(errc::timeout, "zookeeper fence: " + fence + ": 16 lost races in a row");
  }

  static std::string parent(const std::string& path) {
    const std::size_t slash = path.rfind('/');
    return slash == 0 ? std::string("/") : path.substr(0, slash);
  }

  // One multi: the fence set at `version` (created if -1), and the data set or created.
  int multi(const std::string& fence, int version, const std::string& mine, const std::string* data,
            bool data_exists, std::string_view value) {
    zoo_op_t ops[2];
    zoo_op_result_t results[2];
    Stat st[2]{};
    const int len = static_cast<int>(mine.size());
    if (version >= 0) {
      zoo_set_op_init(&ops[0], fence.c_str(), mine.data(), len, version, &st[0]);
    } else {
      zoo_create_op_init(&ops[0], fence.c_str(), mine.data(), len, nodes_.acl(), ZOO_PERSISTENT,
                         nullptr, 0);
    }
    int n = 1;
    if (data != nullptr) {
      const int vlen = static_cast<int>(value.size());
      if (data_exists) {
        zoo_set_op_init(&ops[1], data->c_str(), value.data(), vlen, -1, &st[1]);
      } else {
        zoo_create_op_init(&ops[1], data->c_str(), value.data(), vlen, nodes_.acl(), ZOO_PERSISTENT,
                           nullptr, 0);
      }
      n = 2;
    }
    link_.count_request();
    return zoo_multi(link_.handle(), n, ops, results);
  }

  detail::zookeeper_nodes nodes_{link_};
};

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_ZOOKEEPER_FENCE_HPP
