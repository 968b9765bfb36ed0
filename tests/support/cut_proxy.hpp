// SPDX-License-Identifier: MIT
// tests/support/cut_proxy.hpp - cut_proxy: a TCP proxy on 127.0.0.1 between a client and one
// server that can lose one reply for real: armed, it forwards the next client packet of at
// least `min_bytes` (a request, not a 12-byte ping) to the server, then closes the client's
// side at once and drops whatever the server answers; the server's side is closed 200 ms later,
// so the server reads and applies the request first, and no new connection is accepted until
// then (the client's reconnect waits in the listen backlog). The client sees its connection die
// between request and reply ("any store call can apply and lose its reply"). One thread per proxy,
// poll(2) over every connection. Test scratch only.
#ifndef HOLDFAST_TESTS_SUPPORT_CUT_PROXY_HPP
#define HOLDFAST_TESTS_SUPPORT_CUT_PROXY_HPP

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

namespace hf_test {

class cut_proxy {
 public:
  /// Listens on a free port of 127.0.0.1 and forwards to 127.0.0.1:`server_port`.
  explicit cut_proxy(int server_port) : server_port_(server_port) {
    listen_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (listen_ < 0 || ::bind(listen_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(listen_, 16) != 0 ||
        ::getsockname(listen_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      return;
    }
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { run(); });
  }
  cut_proxy(const cut_proxy&) = delete;
  cut_proxy& operator=(const cut_proxy&) = delete;
  ~cut_proxy() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    for (pair& p : pairs_) close_pair(p);
    if (listen_ >= 0) ::close(listen_);
  }

  /// The port clients connect to (0 if the proxy could not listen).
  [[nodiscard]] int port() const { return port_; }
  /// Loses the reply to the next client packet of at least `min_bytes` (see the overview).
  void arm(std::size_t min_bytes) { armed_ = min_bytes; }
  /// How many replies were lost so far.
  [[nodiscard]] int cuts() const { return cuts_.load(); }
  /// From now on drops what the server sends on the newest connection (its client's side stays
  /// open and hears nothing: a stream whose notifications are lost without the stream ending).
  void mute_newest() { mute_ = true; }
  /// Closes every connection open now, both sides (a dropped stream).
  void cut_all() { cut_all_ = true; }

 private:
  struct pair {
    int client = -1;
    int server = -1;
    std::chrono::steady_clock::time_point close_server_at{};  // set once cut
    bool muted = false;                                       // the server's data dropped
  };

  int connect_server() const {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<std::uint16_t>(server_port_));
    if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) return fd;
    if (fd >= 0) ::close(fd);
    return -1;
  }

  static void close_pair(pair& p) {
    if (p.client >= 0) ::close(p.client);
    if (p.server >= 0) ::close(p.server);
    p.client = p.server = -1;
  }

  // Moves what `from` has to `to` (if `to` >= 0); false when `from` closed.
  static bool pump(int from, int to, std::size_t* got = nullptr) {
    char buf[65536];
    const ssize_t n = ::recv(from, buf, sizeof buf, 0);
    if (n <= 0) return false;
    if (got != nullptr) *got = static_cast<std::size_t>(n);
    if (to >= 0) (void)::send(to, buf, static_cast<std::size_t>(n), MSG_NOSIGNAL);
    return true;
  }

  void run() {
    while (!stop_) {
      std::vector<pollfd> fds{{listen_, POLLIN, 0}};
      for (const pair& p : pairs_) {
        fds.push_back({p.client, POLLIN, 0});
        fds.push_back({p.server, POLLIN, 0});
      }
      ::poll(fds.data(), fds.size(), 20);
      const auto now = std::chrono::steady_clock::now();
      if (mute_.exchange(false) && !pairs_.empty()) pairs_.back().muted = true;
      if (cut_all_.exchange(false)) {
        for (pair& p : pairs_) close_pair(p);
      }
      for (std::size_t i = 0; i < pairs_.size(); ++i) {
        pair& p = pairs_[i];
        const pollfd& c = fds[1 + 2 * i];
        const pollfd& s = fds[2 + 2 * i];
        if (p.client < 0) {  // cut: the server's side lingers, then closes
          if (p.server >= 0 && s.revents != 0) (void)pump(p.server, -1);
          if (now >= p.close_server_at) close_pair(p);
          continue;
        }
        std::size_t got = 0;
        if (c.revents != 0 && !pump(p.client, p.server, &got)) {
          close_pair(p);
          continue;
        }
        const std::size_t want = armed_.load();
        if (got > 0 && want > 0 && got >= want) {
          armed_ = 0;
          ++cuts_;
          ::shutdown(p.client, SHUT_RDWR);
          ::close(p.client);
          p.client = -1;
          p.close_server_at = now + std::chrono::milliseconds(200);
          continue;
        }
        if (p.client >= 0 && s.revents != 0 && !pump(p.server, p.muted ? -1 : p.client)) {
          close_pair(p);
        }
      }
      std::vector<pair> live;
      for (const pair& p : pairs_) {
        if (p.client >= 0 || p.server >= 0) live.push_back(p);
      }
      pairs_.swap(live);
      // No new connection while a cut one lingers: the client's reconnect waits until the server
      // has applied the request (ZooKeeper refuses a request of a session that moved to a new
      // connection before it was processed; the cut must be the lost reply, not a lost request).
      bool lingering = false;
      for (const pair& p : pairs_) lingering = lingering || (p.client < 0 && p.server >= 0);
      if (!lingering && (fds[0].revents & POLLIN) != 0) {
        const int c = ::accept(listen_, nullptr, nullptr);
        const int s = c >= 0 ? connect_server() : -1;
        if (c >= 0 && s >= 0) {
          pairs_.push_back(pair{c, s, {}});
        } else if (c >= 0) {
          ::close(c);
        }
      }
    }
  }

  int server_port_;
  int listen_ = -1;
  int port_ = 0;
  std::vector<pair> pairs_;  // the proxy thread's only
  std::atomic<std::size_t> armed_{0};
  std::atomic<int> cuts_{0};
  std::atomic<bool> mute_{false};
  std::atomic<bool> cut_all_{false};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace hf_test

#endif  // HOLDFAST_TESTS_SUPPORT_CUT_PROXY_HPP
