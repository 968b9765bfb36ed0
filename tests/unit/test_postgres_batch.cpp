// SPDX-License-Identifier: MIT
// postgres_store::renew_batch (stores/detail/postgres_batch.hpp): many renewals in one statement,
// each lease owner- and token-checked with its own outcome. Needs the shared PostgreSQL of
// `.ci/servers start` (HOLDFAST_PG_CONNINFO); skipped loudly without it, failed in CI. Each case
// a few round trips: well under a second.
#include <catch2/catch.hpp>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "../support/real_servers.hpp"
#include "holdfast/keepalive.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/send_receive.hpp"
#include "holdfast/stores/postgres.hpp"

namespace test_postgres_batch {

namespace {

using namespace std::chrono_literals;
using holdfast::errc;
using holdfast::fencing_token;
using holdfast::grant;
using holdfast::result;
using holdfast::store_op;
using holdfast::store_request;

std::optional<holdfast::postgres_options> server() {
  std::optional<std::string> conninfo = hf_test::env("HOLDFAST_PG_CONNINFO");
  if (!conninfo) {
    if (hf_test::in_ci()) FAIL("HOLDFAST_PG_CONNINFO is not set (run .ci/servers start)");
    hf_test::loud_skip("no PostgreSQL: HOLDFAST_PG_CONNINFO unset");
    return std::nullopt;
  }
  holdfast::postgres_options o;
  o.conninfo = *conninfo;
  o.table = "hf_batch";  // keys carry a random tag: runs do not meet
  return o;
}

// `key` and `owner` must outlive the request (it holds views): named strings and literals.
store_request renewal(const std::string& key, std::string_view owner, fencing_token t,
                      std::chrono::milliseconds ttl) {
  return store_request{store_op::renew, key, owner, t, {}, ttl};
}

}  // namespace

TEST_CASE("postgres renew_batch: each lease judged alone, one lost among many",
          "[postgres][batch]") {
  std::optional<holdfast::postgres_options> o = server();
  if (!o) return;
  holdfast::postgres_store s(*o);
  const std::string tag = hf_test::random_tag();
  const std::string a = tag + "-a", b = tag + "-b", c = tag + "-c", d = tag + "-d";
  const fencing_token ta = s.try_acquire(a, "alice", 10s).value().token;
  const fencing_token tb = s.try_acquire(b, "alice", 10s).value().token;
  const fencing_token tc = s.try_acquire(c, "alice", 10s).value().token;
  REQUIRE(s.release(b, "alice", tb));  // b is lost: released (as if expired and taken)
  const fencing_token td = s.try_acquire(d, "bob", 10s).value().token;
  const std::vector<store_request> q{
      renewal(a, "alice", ta, 20s),
      renewal(b, "alice", tb, 20s),  // released: lease_lost
      renewal(c, "alice", tc, 20s),
      renewal(d, "alice", td, 20s),  // bob's: owner checked, lease_lost
      renewal(c, "alice", fencing_token(tc.value() + 1000), 20s),  // wrong token: lease_lost
      renewal(a, "alice", ta, 30s),  // a repeat: renewed alone, after the batch
      renewal(a, "", ta, 20s),       // bad arguments: not sent
  };
  std::vector<result<grant>> out(q.size(), result<grant>(errc::protocol_error));
  s.renew_batch(q.data(), q.size(), out.data());
  CHECK(out[0].value() == grant{ta, 20000ms});
  CHECK(out[1].error() == errc::lease_lost);
  CHECK(out[2].value() == grant{tc, 20000ms});
  CHECK(out[3].error() == errc::lease_lost);
  CHECK(out[4].error() == errc::lease_lost);
  CHECK(out[5].value() == grant{ta, 30000ms});
  CHECK(out[6].error() == errc::invalid_argument);
  // What the store holds: a and c extended (the repeat ran last), b free, d still bob's.
  const auto ra = s.inspect(a).value();
  REQUIRE(ra);
  CHECK(ra->remaining > 25s);
  CHECK(ra->remaining <= 30s);
  const auto rc = s.inspect(c).value();
  REQUIRE(rc);
  CHECK(rc->remaining > 15s);
  CHECK(rc->remaining <= 20s);
  CHECK(s.inspect(b).value() == std::nullopt);
  const auto rd = s.inspect(d).value();
  REQUIRE(rd);
  CHECK(rd->owner == "bob");
  CHECK(rd->remaining <= 10s);
  for (const auto& k : {a, c}) CHECK(s.release(k, "alice", k == a ? ta : tc));
  CHECK(s.release(d, "bob", td));
}

TEST_CASE("postgres renew_batch: a batch sent twice (a lost reply) renews the same leases again",
          "[postgres][batch]") {
  std::optional<holdfast::postgres_options> o = server();
  if (!o) return;
  holdfast::postgres_store s(*o);
  const std::string k = hf_test::random_tag() + "-k";
  const fencing_token t = s.try_acquire(k, "alice", 10s).value().token;
  const store_request q[] = {renewal(k, "alice", t, 20s)};
  result<grant> out[1] = {result<grant>(errc::protocol_error)};
  s.renew_batch(q, 1, out);
  s.renew_batch(q, 1, out);  // the retry of a batch whose reply was lost: idempotent
  CHECK(out[0].value() == grant{t, 20000ms});
  CHECK(s.try_acquire(k, "bob", 1s).error() == errc::busy);
  CHECK(s.release(k, "alice", t));
}

}  // namespace test_postgres_batch
