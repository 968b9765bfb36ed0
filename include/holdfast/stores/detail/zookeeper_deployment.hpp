// SPDX-License-Identifier: MIT
// holdfast/stores/detail/zookeeper_deployment.hpp - what zookeeper_store reads about its
// ensemble (deployment.hpp): the ensemble's configuration (zoo_getconfig: the /zookeeper/config
// node, one "server.N=" line per member, empty on a standalone server) and the answer of the
// server this session is connected to to the four-letter word "srvr" (ZooKeeper's only word
// allowed by default: version, Mode standalone/leader/follower, the last zxid). Part of
// stores/zookeeper.hpp; not for users.
//
// What a ZooKeeper deployment can lose: on an ensemble, nothing it answered (every write is a Zab
// commit logged on a majority before the answer; a leader change keeps it and starts a new epoch,
// the czxid's high 32 bits). A standalone server is one disk: its crash stops every grant until
// it restarts, and with forceSync=no (not visible over the API) a crash can lose its last
// transactions, so czxids come again (fences refuse them). A restored snapshot rewinds zxids.
#ifndef HOLDFAST_STORES_DETAIL_ZOOKEEPER_DEPLOYMENT_HPP
#define HOLDFAST_STORES_DETAIL_ZOOKEEPER_DEPLOYMENT_HPP

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "holdfast/deployment.hpp"
#include "holdfast/detail/config.hpp"
#include "holdfast/result.hpp"
#include "holdfast/stores/detail/zookeeper_link.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

/// Sends the four-letter word `word` to the server at `addr` and returns its whole answer ("" if
/// it does not answer within `bound`: not listening, or the word not in 4lw.commands.whitelist).
inline std::string zookeeper_four_letters(const sockaddr_storage& addr, const char* word,
                                          std::chrono::milliseconds bound) {
  const int fd = ::socket(addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return {};
  const socklen_t len = addr.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + bound;
  auto wait = [&](short events) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, events, 0};
    return ::poll(&p, 1, static_cast<int>(left.count())) == 1;
  };
  bool ok = ::connect(fd, reinterpret_cast<const sockaddr*>(&addr), len) == 0 ||
            (errno == EINPROGRESS && wait(POLLOUT));
  int err = 0;
  socklen_t el = sizeof err;
  ok = ok && ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == 0;
  ok = ok && ::send(fd, word, 4, MSG_NOSIGNAL) == 4;
  char buf[1024];
  while (ok && wait(POLLIN)) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0 || out.size() > 65536) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

/// The value after "`name`: " on its own line of a four-letter answer ("" if absent).
inline std::string zookeeper_answer_field(const std::string& answer, const std::string& name) {
  const std::size_t at = answer.find(name + ": ");
  if (at == std::string::npos) return {};
  const std::size_t from = at + name.size() + 2;
  return answer.substr(from, answer.find('\n', from) - from);
}

/// The report of the ensemble `link` is connected to (see the file overview): one getconfig
/// request and one srvr exchange, each bounded by connect_timeout. Under link.lock().
/// \returns it; store_unavailable, timeout, permission_denied as the link reports them.
inline result<deployment_report> read_zookeeper_deployment(zookeeper_link& link) {
  if (std::error_code ec = link.ensure_connected()) return ec;
  std::vector<char> buf(65536);
  int len = static_cast<int>(buf.size());
  Stat st{};
  link.count_request();
  const int rc = zoo_getconfig(link.handle(), 0, buf.data(), &len, &st);
  if (rc != ZOK && rc != ZNONODE) return link.fail_rc(rc, "getconfig", ZOO_CONFIG_NODE);
  const std::string config = rc == ZOK && len > 0 ? std::string(buf.data(), len) : std::string();
  std::size_t members = 0;
  for (std::size_t at = config.find("server."); at != std::string::npos;
       at = config.find("server.", at + 1)) {
    members += at == 0 || config[at - 1] == '\n' ? 1 : 0;
  }
  sockaddr_storage addr{};
  socklen_t alen = sizeof addr;
  std::string srvr;
  if (zookeeper_get_connected_host(link.handle(), reinterpret_cast<sockaddr*>(&addr), &alen)) {
    srvr = zookeeper_four_letters(addr, "srvr", link.options().connect_timeout);
  }
  const std::string mode = zookeeper_answer_field(srvr, "Mode");
  const std::string zxid = zookeeper_answer_field(srvr, "Zxid");
  std::string version = zookeeper_answer_field(srvr, "Zookeeper version");
  version = version.substr(0, version.find_first_of("-, "));
  const unsigned long long z = zxid.empty() ? 0 : std::strtoull(zxid.c_str(), nullptr, 16);
  deployment_report out;
  if (members == 0 && mode == "standalone") members = 1;
  out.facts = "members=" + (members > 0 ? std::to_string(members) : std::string("unknown")) +
              " mode=" + (mode.empty() ? std::string("unanswered") : mode) +
              " version=" + (version.empty() ? std::string("unknown") : version) +
              " zxid=" + (zxid.empty() ? std::string("unknown") : zxid) +
              " session_timeout=" + std::to_string(link.granted_timeout().count()) + "ms";
  if (z != 0) out.life = "epoch " + std::to_string(z >> 32);  // changes with every leader
  if (mode == "standalone" || members == 1) {
    out.risks.push_back(
        "one server (Mode: standalone): its crash stops every grant until it restarts, and a "
        "crash with forceSync=no can lose its last transactions, so czxids come again (fences "
        "refuse them; run an ensemble of 3 or 5 members)");
  } else if (members > 0 && members % 2 == 0) {
    out.risks.push_back(std::to_string(members) +
                        " members: an even count tolerates no more failures than one fewer; a "
                        "partition in halves stops every grant (run 3 or 5)");
  }
  return out;
}

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_DETAIL_ZOOKEEPER_DEPLOYMENT_HPP
