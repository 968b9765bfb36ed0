// SPDX-License-Identifier: MIT
// Owner ids (detail/random.hpp): 128 random bits as 32 hex digits, unique per acquirer (T3),
// also across fork(): a child must not replay its parent's generator and hand out the owner ids
// the parent is about to use. And detail::owner_id (detail/owner_id.hpp), the id a lease keeps:
// inline up to inline_capacity characters, on the heap beyond, the same characters either way.
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "holdfast/detail/owner_id.hpp"
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

TEST_CASE("hex_digits32 writes hex_digits8's digits of its four halves, in order", "[lease]") {
  // Each nibble value at each of the 32 positions (9 and 10 are the edge between '9' and 'a', 15
  // the top of the signed byte compare), all ones, and draws of a fixed-seed generator.
  std::vector<std::pair<std::uint64_t, std::uint64_t>> words = {{~0ULL, ~0ULL}, {0, 0}};
  for (int pos = 0; pos < 16; ++pos) {
    for (std::uint64_t n = 0; n < 16; ++n) {
      words.emplace_back(n << (4 * pos), 0);
      words.emplace_back(0, n << (4 * pos));
    }
  }
  holdfast::detail::xoshiro256 gen(26);
  for (int i = 0; i < 1000; ++i) words.emplace_back(gen.next(), gen.next());
  for (const auto& [lo, hi] : words) {
    char want[32];
    holdfast::detail::hex_digits8(static_cast<std::uint32_t>(lo), want);
    holdfast::detail::hex_digits8(static_cast<std::uint32_t>(lo >> 32), want + 8);
    holdfast::detail::hex_digits8(static_cast<std::uint32_t>(hi), want + 16);
    holdfast::detail::hex_digits8(static_cast<std::uint32_t>(hi >> 32), want + 24);
    char got[32];
    holdfast::detail::hex_digits32(lo, hi, got);
    INFO("words " << lo << " " << hi);
    REQUIRE(std::string(got, 32) == std::string(want, 32));
  }
}

TEST_CASE("each thread's generator is seeded apart", "[lease]") {
  std::string ids[2];
  std::thread t([&] { ids[0] = holdfast::detail::random_owner_id(); });
  ids[1] = holdfast::detail::random_owner_id();
  t.join();
  CHECK(ids[0].size() == 32);
  CHECK(ids[0] != ids[1]);
}

using holdfast::detail::owner_id;

// Ids one character under, at and over what an owner_id keeps inline, and far over.
std::string id_of(std::size_t n) {
  std::string s;
  for (std::size_t i = 0; i < n; ++i) s += static_cast<char>('a' + i % 26);
  return s;
}

TEST_CASE("owner_id keeps the same characters inline and on the heap", "[lease]") {
  const std::size_t cap = owner_id::inline_capacity;
  for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{32}, cap - 1, cap,
                              cap + 1, std::size_t{1000}}) {
    INFO("size " << n);
    const std::string want = id_of(n);
    const owner_id a{std::string_view(want)};
    CHECK(a.view() == want);
    CHECK(a.size() == n);
    CHECK(a.empty() == (n == 0));
    CHECK(a.str() == want);
    CHECK(&a.str() == &a.str());  // one string, made once
    owner_id b{std::string(want)};
    CHECK(b.view() == want);
    const owner_id c = b;  // a copy
    CHECK(c.view() == want);
    owner_id d = std::move(b);
    CHECK(d.view() == want);
    CHECK(b.empty());  // NOLINT(bugprone-use-after-move): a moved-from id is empty
    CHECK(b.view().empty());
    owner_id e{std::string_view("x")};
    e = c;
    CHECK(e.str() == want);
    e.assign("other");
    CHECK(e.view() == "other");
    CHECK(e.str() == "other");  // the string made before was for the old id
    std::string_view as_view = d;
    CHECK(as_view == want);
  }
}

TEST_CASE("owner_id::str keeps one string across moves and under concurrent callers", "[lease]") {
  owner_id a{std::string_view(id_of(32))};
  const std::string* first = &a.str();
  owner_id b = std::move(a);
  CHECK(&b.str() == first);  // the string moved with the id
  owner_id c{std::string_view(id_of(40))};
  const std::string* seen[2] = {nullptr, nullptr};
  std::thread t([&] { seen[0] = &c.str(); });
  seen[1] = &c.str();
  t.join();
  CHECK(seen[0] == seen[1]);
  CHECK(*seen[0] == id_of(40));
}

TEST_CASE("owner_id::generate writes labelled_owner_id's form, inline or not", "[lease]") {
  const std::size_t cap = owner_id::inline_capacity;
  // Labels whose ids end one under, at and one over the inline capacity, none, and a long one.
  for (const std::size_t label_size :
       {std::size_t{0}, std::size_t{6}, cap - 34, cap - 33, cap - 32, std::size_t{200}}) {
    INFO("label size " << label_size);
    const std::string label = id_of(label_size);
    owner_id a;
    a.generate(label);
    owner_id b;
    b.generate(label);
    const std::string_view id = a.view();
    const std::size_t digits = label.empty() ? 0 : label.size() + 1;
    REQUIRE(id.size() == digits + 32);
    if (!label.empty()) {
      CHECK(id.substr(0, label.size()) == label);
      CHECK(id[label.size()] == holdfast::detail::owner_separator);
    }
    CHECK(id.substr(digits).find_first_not_of("0123456789abcdef") == std::string_view::npos);
    CHECK(a.view() != b.view());
    CHECK(a.str() == std::string(id));
  }
}

}  // namespace test_owner_id
