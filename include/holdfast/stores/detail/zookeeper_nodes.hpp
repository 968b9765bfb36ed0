// SPDX-License-Identifier: MIT
// holdfast/stores/detail/zookeeper_nodes.hpp - zookeeper_nodes: the single requests
// zookeeper_store makes over its link (create, list, the two pipelined, get, exists with a
// watch, delete), each
// counted, with ZooKeeper's answers unpacked into C++ values and its C structures freed. Not for
// users. Every member runs under the link's lock().
#ifndef HOLDFAST_STORES_DETAIL_ZOOKEEPER_NODES_HPP
#define HOLDFAST_STORES_DETAIL_ZOOKEEPER_NODES_HPP

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/result.hpp"
#include "holdfast/stores/detail/zookeeper_link.hpp"
#include "holdfast/stores/detail/zookeeper_names.hpp"
#include "holdfast/stores/zookeeper_options.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

/// A contender node under a key's parent: its name and sequence number.
struct zookeeper_child {
  std::string name;
  std::int64_t sequence = 0;
};

/// A node read with get: its name, data and Stat.
struct zookeeper_node {
  std::string name;
  std::string data;
  Stat stat{};
};

/// The requests of zookeeper_store (see the file overview).
class zookeeper_nodes {
 public:
  explicit zookeeper_nodes(zookeeper_link& link) : link_(link) {}

  /// Creates an ephemeral sequential node `prefix` + sequence under `parent` with data `owner`,
  /// creating missing parents (root's parts persistent, `parent` a container). Returns the
  /// client's code; on ZOK `name` and `stat` describe the node. A lost_reply fault applies the
  /// create and returns ZCONNECTIONLOSS.
  int create(const std::string& parent, const std::string& prefix, std::string_view owner,
             std::string& name, Stat& stat) {
    const std::string path = parent + "/" + prefix;
    int rc = create_once(path, owner, name, stat);
    if (rc == ZNONODE) {
      rc = make_parents(parent);
      if (rc == ZOK) rc = create_once(path, owner, name, stat);
    }
    if (rc == ZOK && link_.fault && link_.fault("create") == zookeeper_fault::lost_reply) {
      return ZCONNECTIONLOSS;
    }
    return rc;
  }

  /// The contender nodes under `parent`, in sequence order (empty if `parent` does not exist),
  /// or protocol_error for a child holdfast did not make.
  result<std::vector<zookeeper_child>> children(const std::string& parent) {
    String_vector v{};
    link_.count_request();
    const int rc = zoo_get_children(link_.handle(), parent.c_str(), 0, &v);
    std::vector<std::string> names;
    if (rc == ZOK) {
      names.reserve(static_cast<std::size_t>(v.count));
      for (int i = 0; i < v.count; ++i) names.emplace_back(v.data[i]);
      deallocate_String_vector(&v);
    }
    return contenders(parent, rc, names);
  }

  /// create() and children() of `parent` pipelined: both requests leave at once and cost one
  /// round trip. ZooKeeper answers a session's requests in the order they were sent, so the list
  /// sees the create. Returns the create's code (as create(); `kids` is then the list); on any
  /// other code than ZOK `kids` is to be ignored.
  int create_listed(const std::string& parent, const std::string& prefix, std::string_view owner,
                    std::string& name, Stat& stat, result<std::vector<zookeeper_child>>& kids) {
    int rc = create_listed_once(parent, prefix, owner, name, stat, kids);
    if (rc == ZNONODE) {
      rc = make_parents(parent);
      if (rc == ZOK) rc = create_listed_once(parent, prefix, owner, name, stat, kids);
    }
    if (rc == ZOK && link_.fault && link_.fault("create") == zookeeper_fault::lost_reply) {
      return ZCONNECTIONLOSS;
    }
    return rc;
  }

  /// Reads `parent`/`name`: nullopt if it does not exist.
  result<std::optional<zookeeper_node>> get(const std::string& parent, const std::string& name) {
    const std::string path = parent + "/" + name;
    zookeeper_node n;
    n.name = name;
    for (int attempt = 0; attempt < 2; ++attempt) {
      int len = static_cast<int>(buf_.size());
      link_.count_request();
      const int rc = zoo_get(link_.handle(), path.c_str(), 0, buf_.data(), &len, &n.stat);
      if (rc == ZNONODE) return std::optional<zookeeper_node>();
      if (rc != ZOK) return link_.fail_rc(rc, "get", path);
      if (n.stat.dataLength <= len || attempt == 1) {
        n.data.assign(buf_.data(), static_cast<std::size_t>(std::max(len, 0)));
        return std::optional<zookeeper_node>(std::move(n));
      }
      buf_.resize(static_cast<std::size_t>(n.stat.dataLength) + 1);  // larger: read once more
    }
    return std::optional<zookeeper_node>();
  }

  /// The first contender under `parent` (the holder), read; nullopt if there is none. Re-lists
  /// once if it went away between the two reads.
  result<std::optional<zookeeper_node>> first(const std::string& parent) {
    for (int attempt = 0; attempt < 3; ++attempt) {
      result<std::vector<zookeeper_child>> kids = children(parent);
      if (!kids) return kids.error();
      if (kids->empty()) return std::optional<zookeeper_node>();
      result<std::optional<zookeeper_node>> n = get(parent, kids->front().name);
      if (!n || *n) return n;
    }
    return std::optional<zookeeper_node>();
  }

  /// Stat of `path`, with a watch on it (the link's watcher) if `watch`. ZNONODE if absent.
  int exists(const std::string& path, Stat& stat, bool watch) {
    link_.count_request();
    if (watch) {
      return zoo_wexists(link_.handle(), path.c_str(), zookeeper_link::watcher(), &link_, &stat);
    }
    return zoo_exists(link_.handle(), path.c_str(), 0, &stat);
  }

  /// Makes the server this session talks to catch up with the leader on `path` (the sync
  /// request, zoo_async), so that a read after it sees every write committed before it: after a
  /// ConnectionLoss the client may have reconnected to a follower that has not applied the
  /// create yet (ZooKeeper guarantees a session read-your-writes only for answered requests;
  /// Curator syncs before its protected-create search for the same reason). Blocks until the
  /// client calls the completion, which it always does (with ZCONNECTIONLOSS or ZCLOSING at
  /// worst). Returns the client's code.
  int sync(const std::string& path) {
    struct done_t {
      std::mutex m;
      std::condition_variable cv;
      bool done = false;
      int rc = ZOK;
    } w;
    link_.count_request();
    const bool lose = link_.fault && link_.fault("sync") == zookeeper_fault::lost_reply;
    const int rc = zoo_async(
        link_.handle(), path.c_str(),
        [](int code, const char* /*value*/, const void* data) {
          auto* d = static_cast<done_t*>(const_cast<void*>(data));
          std::lock_guard<std::mutex> g(d->m);
          d->rc = code;
          d->done = true;
          d->cv.notify_all();
        },
        &w);
    if (rc != ZOK) return rc;
    std::unique_lock<std::mutex> g(w.m);
    w.cv.wait(g, [&] { return w.done; });
    return lose ? ZCONNECTIONLOSS : w.rc;
  }

  /// Deletes `path` (any version). Returns the client's code.
  int remove(const std::string& path) {
    link_.count_request();
    return zoo_delete(link_.handle(), path.c_str(), -1);
  }

  /// The ACL of the nodes holdfast creates (see zookeeper_options::digest).
  ACL_vector* acl() const noexcept {
    return link_.options().digest.empty() ? &ZOO_OPEN_ACL_UNSAFE : &ZOO_CREATOR_ALL_ACL;
  }

  /// Creates every missing ancestor of `path` (persistent) and `path` (a container if
  /// `container`, else persistent). Returns ZOK or the first other code than ZNODEEXISTS.
  int make_parents(const std::string& path, bool container = true) {
    if (path.size() <= 1) return ZOK;  // "/" exists
    for (std::size_t at = path.find('/', 1);; at = path.find('/', at + 1)) {
      const bool last = at == std::string::npos;
      const std::string part = last ? path : path.substr(0, at);
      link_.count_request();
      const int rc = zoo_create(link_.handle(), part.c_str(), "", 0, acl(),
                                last && container ? ZOO_CONTAINER : ZOO_PERSISTENT, nullptr, 0);
      if (rc != ZOK && rc != ZNODEEXISTS) return rc;
      if (last) return ZOK;
    }
  }

 private:
  // The contenders among `names` (the answer `rc` to a list of `parent`), sorted.
  result<std::vector<zookeeper_child>> contenders(const std::string& parent, int rc,
                                                  const std::vector<std::string>& names) {
    if (rc == ZNONODE) return std::vector<zookeeper_child>();
    if (rc != ZOK) return link_.fail_rc(rc, "get_children", parent);
    std::vector<zookeeper_child> out;
    out.reserve(names.size());
    for (const std::string& n : names) {
      const std::optional<std::int64_t> seq = zookeeper_sequence(n);
      if (!seq) {
        return link_.fail(errc::protocol_error,
                          "zookeeper: " + parent + " has a child holdfast did not make");
      }
      out.push_back(zookeeper_child{n, *seq});
    }
    std::sort(out.begin(), out.end(), [](const zookeeper_child& a, const zookeeper_child& b) {
      return a.sequence < b.sequence;
    });
    return out;
  }

  // The create's answer in create_listed_once, written by the client's completion thread.
  struct listed {
    std::mutex m;
    std::condition_variable cv;
    bool answered = false;
    int create_rc = ZOK;
    std::string path;
    Stat stat{};
  };
  static void on_created(int rc, const char* value, const Stat* st, const void* data) {
    auto* l = static_cast<listed*>(const_cast<void*>(data));
    std::lock_guard<std::mutex> g(l->m);
    l->create_rc = rc;
    HOLDFAST_TRY {
      if (rc == ZOK && value != nullptr) l->path = value;
    }
    HOLDFAST_CATCH_ALL {
      l->create_rc = ZSYSTEMERROR;
    }
    if (rc == ZOK && st != nullptr) l->stat = *st;
    l->answered = true;
    l->cv.notify_all();
  }
  // The create leaves asynchronously and the list right behind it, synchronously: the client's
  // I/O thread hands a synchronous answer to the caller itself, where an asynchronous one goes
  // through its completion thread first (one thread wake-up more on the acquire's path). The
  // create's answer, which arrives first, reaches `l` through the completion thread meanwhile.
  int create_listed_once(const std::string& parent, const std::string& prefix,
                         std::string_view owner, std::string& name, Stat& stat,
                         result<std::vector<zookeeper_child>>& kids) {
    const std::string path = parent + "/" + prefix;
    listed l;
    link_.count_request();
    int rc =
        zoo_acreate2(link_.handle(), path.c_str(), owner.data(), static_cast<int>(owner.size()),
                     acl(), ZOO_EPHEMERAL_SEQUENTIAL, &on_created, &l);
    if (rc != ZOK) return rc;  // not sent
    link_.count_request();
    String_vector v{};
    int list_rc = zoo_get_children(link_.handle(), parent.c_str(), 0, &v);
    std::vector<std::string> names;
    if (list_rc == ZOK) {
      HOLDFAST_TRY {  // `l` must outlive the create's completion: nothing may leave before it
        names.reserve(static_cast<std::size_t>(v.count));
        for (int i = 0; i < v.count; ++i) names.emplace_back(v.data[i]);
      }
      HOLDFAST_CATCH_ALL {
        list_rc = ZSYSTEMERROR;
      }
      deallocate_String_vector(&v);
    }
    {
      std::unique_lock<std::mutex> g(l.m);
      l.cv.wait(g, [&] { return l.answered; });  // the client answers every request it sent
    }
    if (l.create_rc != ZOK) return l.create_rc;
    const std::size_t slash = l.path.rfind('/');
    name.assign(slash == std::string::npos ? l.path : l.path.substr(slash + 1));
    stat = l.stat;
    kids = contenders(parent, list_rc, names);
    return ZOK;
  }

  int create_once(const std::string& path, std::string_view owner, std::string& name, Stat& stat) {
    char out[1024];
    link_.count_request();
    const int rc =
        zoo_create2(link_.handle(), path.c_str(), owner.data(), static_cast<int>(owner.size()),
                    acl(), ZOO_EPHEMERAL_SEQUENTIAL, out, sizeof out, &stat);
    if (rc == ZOK) {
      const std::string_view full(out);
      const std::size_t slash = full.rfind('/');
      name.assign(slash == std::string_view::npos ? full : full.substr(slash + 1));
    }
    return rc;
  }

  zookeeper_link& link_;
  std::vector<char> buf_ = std::vector<char>(256);
};

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_DETAIL_ZOOKEEPER_NODES_HPP
