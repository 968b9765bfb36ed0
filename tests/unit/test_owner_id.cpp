// SPDX-License-Identifier: MIT
// Owner ids (detail/random.hpp): 128 random bits as 32 hex digits, unique per acquirer (T3),
// also across fork(): a child must not replay its parent's generator and hand out the owner ids
// the parent is about to use.
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <set>
#include <string>

#include "holdfast/detail/random.hpp"

// One namespace per file, so that a suite can be compiled as one translation unit
// (HOLDFAST_UNITY_TESTS) without two files' helpers colliding.
namespace test_owner_id {

TEST_CASE("owner ids are 32 lowercase hex digits and do not repeat", "[lease]") {
  std::set<std::string> seen;
  for (int i = 0; i < 10000; ++i) {
    const std::string id = holdfast::detail::random_owner_id();
    REQUIRE(id.size() == 32);
    REQUIRE(id.find_first_not_of("0123456789abcdef") == std::string::npos);
    REQUIRE(seen.insert(id).second);
  }
}

TEST_CASE("a forked child does not replay its parent's owner ids", "[lease]") {
  (void)holdfast::detail::random_owner_id();  // the parent's generator is seeded before the fork
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const ::pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    const std::string id = holdfast::detail::random_owner_id();
    const ssize_t n = ::write(fds[1], id.data(), id.size());
    ::_exit(n == static_cast<ssize_t>(id.size()) ? 0 : 1);
  }
  ::close(fds[1]);
  char buf[32];
  std::size_t got = 0;
  while (got < sizeof buf) {
    const ssize_t n = ::read(fds[0], buf + got, sizeof buf - got);
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(fds[0]);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  REQUIRE(got == sizeof buf);
  const std::string child_id(buf, sizeof buf);
  // Without the reseed the child's first id would be exactly the parent's next one.
  const std::string parent_next = holdfast::detail::random_owner_id();
  CHECK(child_id != parent_next);
}

TEST_CASE("hex_digits8 writes each nibble's digit, the lowest first", "[lease]") {
  static constexpr char digits[] = "0123456789abcdef";
  // Every nibble value at every position (9 and 10 are the edge between '9' and 'a'), and all ones.
  std::uint32_t values[8 * 16 + 2] = {0xffffffffu, 0x9a9a9a9au};
  for (int pos = 0; pos < 8; ++pos) {
    for (std::uint32_t n = 0; n < 16; ++n) values[2 + pos * 16 + n] = n << (4 * pos);
  }
  for (const std::uint32_t v : values) {
    char got[8];
    holdfast::detail::hex_digits8(v, got);
    std::string want;
    for (int i = 0; i < 8; ++i) want += digits[(v >> (4 * i)) & 0xf];
    INFO("value " << v);
    REQUIRE(std::string(got, 8) == want);
  }
}

}  // namespace test_owner_id
