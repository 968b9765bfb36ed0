// SPDX-License-Identifier: MIT
// tests/support/black_hole.hpp - black_hole: a TCP listener on 127.0.0.1 that never answers.
// The kernel completes a client's connect from the listen backlog, so the client sees a server
// that took its connection and then says nothing, ever: the endpoint a store must not wait on
// past its caller's deadline. connections() counts the connects made so far (each is taken and
// held open, unanswered), so a test can also show that a call refused its arguments before
// connecting or sending anything. Test scratch only; no thread.
#ifndef HOLDFAST_TESTS_SUPPORT_BLACK_HOLE_HPP
#define HOLDFAST_TESTS_SUPPORT_BLACK_HOLE_HPP

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace hf_test {

class black_hole {
 public:
  /// Listens on a free port of 127.0.0.1 (port() is 0 if it could not).
  black_hole() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(fd_, 64) != 0 || ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0 ||
        ::fcntl(fd_, F_SETFL, O_NONBLOCK) != 0) {
      return;
    }
    port_ = ntohs(a.sin_port);
  }
  black_hole(const black_hole&) = delete;
  black_hole& operator=(const black_hole&) = delete;
  ~black_hole() {
    for (int c : held_) ::close(c);
    if (fd_ >= 0) ::close(fd_);
  }

  /// The port that takes connections and never answers.
  [[nodiscard]] int port() const { return port_; }
  /// "127.0.0.1:<port>".
  [[nodiscard]] std::string host_port() const { return "127.0.0.1:" + std::to_string(port_); }
  /// How many connections were made to it so far (taken from the backlog, held open, unread).
  int connections() {
    for (int c; (c = ::accept(fd_, nullptr, nullptr)) >= 0;) held_.push_back(c);
    return static_cast<int>(held_.size());
  }

 private:
  int fd_ = -1;
  int port_ = 0;
  std::vector<int> held_;
};

}  // namespace hf_test

#endif  // HOLDFAST_TESTS_SUPPORT_BLACK_HOLE_HPP
