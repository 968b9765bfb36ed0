// holdfast/stores/etcd.hpp - etcd_store: a LeaseStore in etcd (v3 API, server 3.4 and later),
// whose fencing token is etcd's own revision, and etcd_fence: fenced writes inside etcd.
// Opt-in: needs libcurl and nlohmann/json (Debian: libcurl4-openssl-dev, nlohmann-json3-dev;
// link -lcurl); nothing in the core includes it.
//
// Transport: etcd's v3 HTTP/JSON gateway (the client URL, under /v3/), one kept-alive libcurl
// connection per store. Keys and values travel base64-encoded, 64-bit numbers as JSON strings.
// TLS and client certificates go through libcurl; etcd users through an auth token fetched on
// first use and again when etcd says it expired (the request refused for it is sent once more:
// it was refused before anything happened). The gateway turns each request into the same gRPC
// call etcd's own clients make; measured on this project's machine, a read through it costs
// about 0.25 ms more than a bare HTTP request, against 0.7 ms or more of Raft commit for each
// write (tests/benchmarks/README.md), and it needs no generated code or gRPC runtime (Debian
// ships no etcd .proto files).
//
// A grant is an etcd lease plus one transaction that puts the key, bound to that lease, only if
// the key does not exist (Chubby-style: the lease ends, etcd deletes the key). The fencing token
// is the key's create_revision: store-wide, committed through Raft, and monotonic across
// release, expiry, leader changes and restarts, with no counter of holdfast's own (Kleppmann
// 2016: "etcd revision, ZK zxid"). The record is the key's value: the owner's bytes.
//
//   operation   | requests (round trips)                      | why
//   ------------+---------------------------------------------+----------------------------------
//   acquire     | lease/grant, kv/txn                     (2) | a key can only be bound to a
//               |   txn: create_revision(k) == 0 ?            | lease that exists, and etcd has
//               |        put(k, owner, lease) : range(k)      | no call that does both
//     busy      | + lease/revoke of the unused lease      (3) | no lease is left behind
//     same owner| + lease/keepalive of the holder's lease,    | T1's retry rule: the same token,
//     (retry)   |   lease/revoke of the unused one        (4) | the holder's lease refreshed
//   renew       | lease/keepalive of the grant's lease    (1) | the lease is the grant's own
//   release     | lease/revoke of the grant's lease       (1) | etcd deletes the key with it, in
//               |                                             | the same Raft entry
//   inspect     | kv/range, lease/timetolive              (2) | the lease's time left is not in
//               |                                             | the key's record
//
// renew and release need the grant's lease ID. The store remembers it for each grant it made
// (key, owner, token -> lease; at most etcd_options::remembered_grants entries); for a grant it
// did not make (another process, or one it forgot) it first reads the key with kv/range (one
// more round trip) and proceeds only if the key carries the caller's owner *and* token. Either
// way the request names a lease that only that grant ever had, so renew and release touch
// nothing but the caller's own grant (T3): the lease lives exactly as long as the key bound to
// it (revoke and expiry delete both in one step), so keeping it alive keeps alive the key that
// still carries the caller's owner and token, and nothing else. A key someone wrote behind
// holdfast's back (etcdctl put under the prefix) is outside this contract.
//
// TTLs and validity (DESIGN T2). etcd counts lease TTLs in whole seconds on the leader's clock,
// rounds the asked TTL up, and applies a minimum (ceil(1.5 x election timeout): 2 s with the
// defaults). holdfast asks for ceil(ttl / 1 s) and reads the TTL etcd applied from its answer.
// A grant reports min(asked, applied) (store.hpp: a grant never reports more than was asked;
// lease<> would not trust more anyway): etcd holds the key at least that long after the request
// left the client, since the leader starts the lease when it applies the grant. What the rounding
// means for validity: a holder trusts the TTL it asked for, but the key stays taken for the
// applied TTL, so a contender may wait up to applied - asked longer (asking 300 ms holds the key
// 2 s). Ask whole seconds of at least the minimum and the two agree.
//
// Expiry granularity, measured (tests/unit/test_etcd_store.cpp prints it): etcd 3.4's leader
// looks for expired leases every 500 ms and then revokes them through Raft, so a dead holder's
// key is free again between the applied TTL and about TTL + 0.6 s after its last grant or
// renewal request (measured on this project's 2-vCPU VM under load: 26 to 530 ms after the TTL,
// in every run of the expiry and cluster tests). Expiry is never *early*: the granularity only
// lengthens a hold. A leader change lengthens it too: the new leader restarts every lease's full
// TTL (plus an election timeout) when it takes over, so across a failover a dead holder's key can
// stay taken for up to about twice its TTL. The cluster fault tests measure both.
//
// Durability and restore: revisions live in etcd's Raft log and bolt database (fsync'd on every
// commit), so tokens keep increasing across member crashes, leader changes and full-cluster
// restarts. A snapshot restore (etcdctl snapshot restore) rewinds the revision to the snapshot's,
// so new grants can carry tokens *lower* than ones already issued: fences refuse them
// (stale_token; S1 holds) and checked_store reports them as protocol_error, but new holders are
// locked out until the revision passes the newest token a fence admitted. Recover with
// raise_token_floor(newest admitted token) on etcd 3.4 (one small write per revision skipped),
// or restore with `etcdutl snapshot restore --bump-revision N --mark-compacted` on etcd 3.5+.
//
// Keys: up to 256 bytes live at key_prefix + key, readable with etcdctl; longer keys (etcd takes
// a request of at most 1.5 MiB by default, and a transaction names its key three times) and keys
// starting with "#sha256/" live at key_prefix + "#sha256/" + hex(SHA-256(key)). Any bytes, NUL
// included. Owners are stored as the value, any bytes, up to etcd's request limit (~1.4 MiB).
//
// Never an implicit lease: every grant has its own lease with the caller's TTL (no TTL, no grant;
// etcd's own lock service once made a 60 s lease for callers that passed none, and locks vanished
// silently when nobody renewed it).
//
// Failures (T4): a member that is down, frozen, slow, without a leader, or answering something
// that is not the gateway's JSON is an error, never a grant: store_unavailable, timeout or
// protocol_error, with etcd's or libcurl's text in last_error_message(). A refused connection
// moves on to the next endpoint at once (nothing was sent); a timeout, a broken connection or an
// unavailable member moves the next call to the next endpoint, and the failed request is not
// retried (it may or may not have happened). Every request
// holdfast sends is safe to repeat: a repeated grant transaction finds its own key and returns
// its token, a repeated keepalive or revoke changes nothing more.
#ifndef HOLDFAST_STORES_ETCD_HPP
#define HOLDFAST_STORES_ETCD_HPP

#include <curl/curl.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <utility>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/result.hpp"
#include "holdfast/store.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN

/// The greatest token etcd can issue: revisions are signed 64-bit integers.
inline constexpr fencing_token etcd_max_token{
    static_cast<fencing_token::rep>(std::numeric_limits<std::int64_t>::max())};

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
  /// How many grants the store remembers the lease of (so renew and release take one round trip
  /// instead of two); older ones are forgotten first. >= 0; 0 remembers none.
  std::size_t remembered_grants = 4096;

  /// Returns errc::invalid_argument if an option is out of range (see each field); a zero error
  /// code otherwise.
  [[nodiscard]] std::error_code check() const noexcept {
    if (endpoints.empty() || key_prefix.empty()) return errc::invalid_argument;
    for (const std::string& e : endpoints) {
      if (e.empty() || e.find('\0') != std::string::npos) return errc::invalid_argument;
      if (e.rfind("http://", 0) != 0 && e.rfind("https://", 0) != 0) {
        return errc::invalid_argument;
      }
    }
    for (const std::string* s : {&api_path, &ca_file, &cert_file, &key_file}) {
      if (s->find('\0') != std::string::npos) return errc::invalid_argument;
    }
    if (cert_file.empty() != key_file.empty()) return errc::invalid_argument;
    if (username.empty() && !password.empty()) return errc::invalid_argument;
    if (connect_timeout <= std::chrono::milliseconds::zero() ||
        command_timeout <= std::chrono::milliseconds::zero()) {
      return errc::invalid_argument;
    }
    return {};
  }
};

namespace detail {

// ---------------------------------------------------------------------------------------------
// Encoding: base64 (the gateway's bytes), SHA-256 (names of long keys), decimal int64.
// ---------------------------------------------------------------------------------------------

/// Appends the standard base64 encoding (RFC 4648, with padding) of `in` to `out`.
inline void base64_append(std::string_view in, std::string& out) {
  static constexpr char digits[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const auto* p = reinterpret_cast<const unsigned char*>(in.data());
  std::size_t n = in.size();
  out.reserve(out.size() + (n + 2) / 3 * 4);
  for (; n >= 3; n -= 3, p += 3) {
    const std::uint32_t v = (std::uint32_t{p[0]} << 16) | (std::uint32_t{p[1]} << 8) | p[2];
    out += digits[v >> 18];
    out += digits[(v >> 12) & 63];
    out += digits[(v >> 6) & 63];
    out += digits[v & 63];
  }
  if (n > 0) {
    const std::uint32_t v = (std::uint32_t{p[0]} << 16) | (n == 2 ? std::uint32_t{p[1]} << 8 : 0);
    out += digits[v >> 18];
    out += digits[(v >> 12) & 63];
    out += n == 2 ? digits[(v >> 6) & 63] : '=';
    out += '=';
  }
}

/// Decodes standard base64 (padding optional) into `out`. Returns false for anything else.
inline bool base64_decode(std::string_view in, std::string& out) {
  out.clear();
  while (!in.empty() && in.back() == '=') in.remove_suffix(1);
  if (in.size() % 4 == 1) return false;
  out.reserve(in.size() / 4 * 3 + 2);
  std::uint32_t acc = 0;
  int bits = 0;
  for (char ch : in) {
    int v;
    if (ch >= 'A' && ch <= 'Z') {
      v = ch - 'A';
    } else if (ch >= 'a' && ch <= 'z') {
      v = ch - 'a' + 26;
    } else if (ch >= '0' && ch <= '9') {
      v = ch - '0' + 52;
    } else if (ch == '+') {
      v = 62;
    } else if (ch == '/') {
      v = 63;
    } else {
      return false;
    }
    acc = (acc << 6) | static_cast<std::uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  return true;
}

/// SHA-256 (FIPS 180-4) of `in`. Written out here rather than taken from a crypto library
/// because it only names long keys: one function is not worth a new link dependency.
inline std::array<unsigned char, 32> sha256(std::string_view in) {
  static constexpr std::uint32_t k[64] = {
      0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4,
      0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe,
      0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f,
      0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7,
      0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc,
      0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
      0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116,
      0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
      0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
      0xc67178f2};
  std::uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                        0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  auto rotr = [](std::uint32_t x, int n) { return (x >> n) | (x << (32 - n)); };
  auto block = [&](const unsigned char* b) {
    std::uint32_t w[64];
    for (int i = 0; i < 16; ++i) {
      w[i] = (std::uint32_t{b[4 * i]} << 24) | (std::uint32_t{b[4 * i + 1]} << 16) |
             (std::uint32_t{b[4 * i + 2]} << 8) | std::uint32_t{b[4 * i + 3]};
    }
    for (int i = 16; i < 64; ++i) {
      const std::uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3);
      const std::uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10);
      w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    std::uint32_t a = h[0], bb = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int i = 0; i < 64; ++i) {
      const std::uint32_t t1 =
          hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + k[i] + w[i];
      const std::uint32_t t2 =
          (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & bb) ^ (a & c) ^ (bb & c));
      hh = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = bb;
      bb = a;
      a = t1 + t2;
    }
    h[0] += a;
    h[1] += bb;
    h[2] += c;
    h[3] += d;
    h[4] += e;
    h[5] += f;
    h[6] += g;
    h[7] += hh;
  };
  const auto* p = reinterpret_cast<const unsigned char*>(in.data());
  std::size_t n = in.size();
  for (; n >= 64; n -= 64, p += 64) block(p);
  unsigned char tail[128] = {};
  std::memcpy(tail, p, n);
  tail[n] = 0x80;
  const std::size_t len = n < 56 ? 64 : 128;
  const std::uint64_t message_bits = static_cast<std::uint64_t>(in.size()) * 8;
  for (int i = 0; i < 8; ++i) {
    tail[len - 1 - static_cast<std::size_t>(i)] =
        static_cast<unsigned char>(message_bits >> (8 * i));
  }
  block(tail);
  if (len == 128) block(tail + 64);
  std::array<unsigned char, 32> out{};
  for (int i = 0; i < 8; ++i) {
    for (int j = 0; j < 4; ++j) {
      out[static_cast<std::size_t>(4 * i + j)] = static_cast<unsigned char>(h[i] >> (24 - 8 * j));
    }
  }
  return out;
}

/// Keys longer than this, or starting with etcd_hashed_marker, are stored by their SHA-256.
inline constexpr std::size_t etcd_raw_key_max = 256;
inline constexpr std::string_view etcd_hashed_marker = "#sha256/";

/// Appends the etcd key of lease key `key` (without the prefix) to `out`: the key itself, or
/// "#sha256/" + 64 hex digits for a long key or one that starts with that marker (so that the
/// two forms can never meet).
inline void etcd_key_name(std::string_view key, std::string& out) {
  if (key.size() <= etcd_raw_key_max &&
      key.substr(0, etcd_hashed_marker.size()) != etcd_hashed_marker) {
    out.append(key.data(), key.size());
    return;
  }
  static constexpr char hex[] = "0123456789abcdef";
  out += etcd_hashed_marker;
  for (unsigned char c : sha256(key)) {
    out += hex[c >> 4];
    out += hex[c & 15];
  }
}

/// Parses a JSON field holding a 64-bit integer (the gateway sends them as strings; plain JSON
/// numbers are accepted too). A missing field is 0 (the gateway omits zero values). Returns
/// false for any other type or text.
inline bool json_int64(const nlohmann::json& obj, const char* field, std::int64_t& out) {
  out = 0;
  const auto it = obj.find(field);
  if (it == obj.end()) return true;
  if (it->is_number_integer()) {
    if (it->is_number_unsigned() &&
        it->get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) {
      return false;
    }
    out = it->get<std::int64_t>();
    return true;
  }
  if (!it->is_string()) return false;
  const std::string& s = it->get_ref<const std::string&>();
  std::size_t i = 0;
  const bool negative = !s.empty() && s[0] == '-';
  if (negative) i = 1;
  if (i >= s.size() || s.size() - i > 19) return false;
  std::uint64_t v = 0;
  for (; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
    v = v * 10 + static_cast<std::uint64_t>(s[i] - '0');
  }
  if (v > static_cast<std::uint64_t>(INT64_MAX)) return false;
  out = negative ? -static_cast<std::int64_t>(v) : static_cast<std::int64_t>(v);
  return true;
}

/// Parses a JSON field holding base64 bytes (missing: empty). Returns false for anything else.
inline bool json_bytes(const nlohmann::json& obj, const char* field, std::string& out) {
  out.clear();
  const auto it = obj.find(field);
  if (it == obj.end()) return true;
  if (!it->is_string()) return false;
  return base64_decode(it->get_ref<const std::string&>(), out);
}

/// Parses a JSON boolean field (missing: false).
inline bool json_bool(const nlohmann::json& obj, const char* field, bool& out) {
  out = false;
  const auto it = obj.find(field);
  if (it == obj.end()) return true;
  if (!it->is_boolean()) return false;
  out = it->get<bool>();
  return true;
}

/// Returns the object member `field` if it is an object, else nullptr.
inline const nlohmann::json* json_object(const nlohmann::json& obj, const char* field) {
  const auto it = obj.find(field);
  if (it == obj.end() || !it->is_object()) return nullptr;
  return &*it;
}

/// Maps a gRPC status code in an etcd error answer to an errc.
inline errc classify_etcd_code(std::int64_t code) noexcept {
  switch (code) {
    case 4:  // DeadlineExceeded
      return errc::timeout;
    case 3:   // InvalidArgument: e.g. "etcdserver: request is too large"
    case 11:  // OutOfRange: e.g. "etcdserver: too large lease TTL"
      return errc::invalid_argument;
    case 1:   // Canceled
    case 2:   // Unknown (a member losing its leader, a proxy in the way)
    case 7:   // PermissionDenied
    case 8:   // ResourceExhausted: "etcdserver: too many requests"
    case 10:  // Aborted
    case 13:  // Internal
    case 14:  // Unavailable: "etcdserver: no leader", "request timed out", "leader changed"
    case 16:  // Unauthenticated
      return errc::store_unavailable;
    default:  // NotFound, AlreadyExists, FailedPrecondition, Unimplemented, ...: not expected here
      return errc::protocol_error;
  }
}

struct curl_easy_deleter {
  void operator()(CURL* c) const noexcept { curl_easy_cleanup(c); }
};
struct curl_slist_deleter {
  void operator()(curl_slist* l) const noexcept { curl_slist_free_all(l); }
};

/// libcurl's process-wide setup, done once (thread-safe since libcurl 7.84, and guarded by a
/// function-local static here for older ones). Never undone: other code may use libcurl too.
inline bool curl_ready() {
  static const bool ok = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
  return ok;
}

/// An etcd error answer: its gRPC code (or -1) and text.
struct etcd_failure {
  std::int64_t code = -1;
  std::string message;
};

/// One kept-alive libcurl connection to the JSON gateway of one member at a time, with failover
/// across the endpoints, and the last failure's text. Not thread-safe: the owner holds lock().
class etcd_link {
 public:
  explicit etcd_link(etcd_options opts) : opts_(std::move(opts)) {}

  [[nodiscard]] std::unique_lock<std::mutex> lock() const {
    return std::unique_lock<std::mutex>(mutex_);
  }
  [[nodiscard]] const etcd_options& options() const noexcept { return opts_; }
  [[nodiscard]] const std::string& last_error() const noexcept { return last_error_; }

  /// Records a failure's text and returns its code (so callers can `return fail(...)`).
  std::error_code fail(errc code, std::string message) {
    last_error_ = std::move(message);
    return code;
  }

  /// The endpoint the next request goes to.
  [[nodiscard]] const std::string& endpoint() const noexcept {
    return opts_.endpoints[current_ % opts_.endpoints.size()];
  }

  /// POSTs `body` (JSON) to api_path + `path` and parses the answer. An error answer (HTTP status
  /// other than 200, or a body with "error") becomes its classified code, unless `expected` is
  /// the gRPC code the caller handles itself: then it is returned in `*failure` with a success
  /// code and a null document. A refused connection tries the next endpoint at once.
  result<nlohmann::json> post(std::string_view path, const std::string& body,
                              std::int64_t expected = -1, etcd_failure* failure = nullptr) {
    if (opts_.check()) return fail(errc::invalid_argument, "etcd: invalid etcd_options");
    if (std::error_code ec = ensure_handle()) return ec;
    const bool auth = !opts_.username.empty() && !auth_disabled_;
    if (auth && token_.empty()) {
      if (std::error_code ec = authenticate()) return ec;
    }
    bool rejected = false;
    result<nlohmann::json> r = post_once(path, body, expected, failure, rejected);
    if (rejected && auth) {
      // etcd refused the token before doing anything: a new one, and the request once more.
      if (std::error_code ec = authenticate()) return ec;
      r = post_once(path, body, expected, failure, rejected);
    }
    return r;
  }

 private:
  // Asks for an auth token and sends it with every later request.
  std::error_code authenticate() {
    token_.clear();
    set_headers();
    nlohmann::json creds = {{"name", opts_.username}, {"password", opts_.password}};
    const std::string body = creds.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    bool rejected = false;
    result<nlohmann::json> r = post_once("/auth/authenticate", body, 9, &auth_failure_, rejected);
    if (!r) return r.error();
    if (r->is_null()) {  // FailedPrecondition: "authentication is not enabled"
      auth_disabled_ = true;
      return {};
    }
    const auto t = r->find("token");
    if (t == r->end() || !t->is_string() || t->get_ref<const std::string&>().empty() ||
        t->get_ref<const std::string&>().find_first_of("\r\n") != std::string::npos) {
      return fail(errc::protocol_error, "etcd: authenticate answered no token");
    }
    token_ = t->get<std::string>();
    set_headers();
    return {};
  }

  void set_headers() {
    std::unique_ptr<curl_slist, curl_slist_deleter> headers;
    std::string auth = "Authorization: " + token_;
    for (const char* h : {"Content-Type: application/json", "Accept: application/json",
                          "Expect:",  // no 100-continue round trip for large bodies
                          token_.empty() ? static_cast<const char*>(nullptr) : auth.c_str()}) {
      if (h == nullptr) continue;
      curl_slist* l = curl_slist_append(headers.get(), h);
      if (l == nullptr) return;  // out of memory: keep the old list
      (void)headers.release();
      headers.reset(l);
    }
    curl_easy_setopt(curl_.get(), CURLOPT_HTTPHEADER, headers.get());
    headers_ = std::move(headers);
  }

  result<nlohmann::json> post_once(std::string_view path, const std::string& body,
                                   std::int64_t expected, etcd_failure* failure,
                                   bool& auth_rejected) {
    auth_rejected = false;
    CURL* c = curl_.get();
    const std::size_t n = opts_.endpoints.size();
    for (std::size_t attempt = 0;; ++attempt) {
      url_ = endpoint();
      url_ += opts_.api_path;
      url_.append(path.data(), path.size());
      response_.clear();
      error_buffer_[0] = '\0';
      curl_easy_setopt(c, CURLOPT_URL, url_.c_str());
      curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.data());
      curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
      const CURLcode rc = curl_easy_perform(c);
      if (rc == CURLE_OK) break;
      std::string what = "etcd: " + url_ + ": ";
      what += error_buffer_[0] != '\0' ? error_buffer_ : curl_easy_strerror(rc);
      ++current_;  // whatever failed, the next request goes to the next member
      if (rc == CURLE_COULDNT_CONNECT && attempt + 1 < n) continue;  // nothing was sent
      if (rc == CURLE_OPERATION_TIMEDOUT) return fail(errc::timeout, std::move(what));
      if (rc == CURLE_WRITE_ERROR) {
        return fail(errc::protocol_error, "etcd: answer larger than 256 MiB from " + url_);
      }
      return fail(errc::store_unavailable, std::move(what));
    }
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    nlohmann::json doc = nlohmann::json::parse(response_, nullptr, false);
    const bool is_object = !doc.is_discarded() && doc.is_object();
    // A streaming call (keepalive) wraps its answer in "result", or its error in "error".
    if (is_object && doc.size() == 1 && doc.begin().key() == "result" && doc.begin()->is_object()) {
      nlohmann::json inner = std::move(*doc.begin());
      doc = std::move(inner);
    }
    const nlohmann::json* err = nullptr;
    if (is_object) {
      const auto it = doc.find("error");
      if (it != doc.end() && (it->is_object() || it->is_string())) err = &doc;
      if (it != doc.end() && it->is_object()) err = &*it;
    }
    if (status == 200 && is_object && err == nullptr) {
      // Every answer of the gateway carries a response header (cluster, member, revision).
      if (json_object(doc, "header") == nullptr) {
        return fail(errc::protocol_error,
                    "etcd: " + url_ + " answered no header (not etcd's gateway?): " + excerpt());
      }
      return doc;
    }
    if (status == 200 && !is_object) {
      return fail(errc::protocol_error, "etcd: " + url_ + " answered no JSON object: " + excerpt());
    }
    if (err == nullptr) {
      // Not the gateway's error shape: judge by the HTTP status alone.
      ++current_;
      const errc code = status >= 500 || status == 429 ? errc::store_unavailable
                        : status == 408                ? errc::timeout
                                                       : errc::protocol_error;
      return fail(code,
                  "etcd: " + url_ + " answered HTTP " + std::to_string(status) + ": " + excerpt());
    }
    etcd_failure f;
    std::int64_t code = -1;
    for (const char* field : {"code", "grpc_code"}) {
      std::int64_t v = 0;
      if (err->find(field) != err->end() && json_int64(*err, field, v)) code = v;
    }
    for (const char* field : {"message", "error"}) {
      const auto it = err->find(field);
      if (it != err->end() && it->is_string()) {
        f.message = it->get<std::string>();
        break;
      }
    }
    if (f.message.empty()) f.message = excerpt();
    f.code = code;
    if (expected >= 0 && code == expected && failure != nullptr) {
      *failure = std::move(f);
      return nlohmann::json();
    }
    errc e = code >= 0 ? classify_etcd_code(code) : errc::protocol_error;
    if (code == 8 && f.message.find("larger than max") != std::string::npos) {
      e = errc::invalid_argument;  // gRPC's own size limit: the request, not the server
    }
    if (code == 16 && f.message.find("invalid auth token") != std::string::npos) {
      auth_rejected = true;
    }
    if (code == 3 && (f.message.find("authentication failed") != std::string::npos ||
                      f.message.find("user name is empty") != std::string::npos)) {
      e = errc::store_unavailable;  // credentials refused or missing: as Redis' NOAUTH
    }
    if (e == errc::store_unavailable || e == errc::timeout) ++current_;
    return fail(e, "etcd: " + url_ + ": " + f.message + " (HTTP " + std::to_string(status) +
                       ", gRPC code " + std::to_string(code) + ")");
  }

  std::string excerpt() const {
    std::string s = response_.substr(0, 200);
    for (char& ch : s) {
      if (static_cast<unsigned char>(ch) < 32 || static_cast<unsigned char>(ch) >= 127) ch = '?';
    }
    if (response_.size() > 200) s += "...";
    return s.empty() ? std::string("(empty)") : s;
  }

  static std::size_t on_data(char* data, std::size_t size, std::size_t count, void* self) {
    auto* out = static_cast<std::string*>(self);
    const std::size_t n = size * count;
    if (out->size() + n > (std::size_t{256} << 20)) return 0;  // a runaway answer: abort
    out->append(data, n);
    return n;
  }

  std::error_code ensure_handle() {
    if (curl_) return {};
    if (!curl_ready()) return fail(errc::store_unavailable, "etcd: curl_global_init failed");
    std::unique_ptr<CURL, curl_easy_deleter> c(curl_easy_init());
    if (!c) return fail(errc::store_unavailable, "etcd: curl_easy_init failed");
    CURL* h = c.get();
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);  // no SIGALRM for timeouts, no SIGPIPE
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, error_buffer_);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &etcd_link::on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &response_);
    curl_easy_setopt(h, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1));
    curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(h, CURLOPT_PROXY, "");  // never a proxy from the environment
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt(h, CURLOPT_PROTOCOLS, static_cast<long>(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
                     static_cast<long>(std::min<std::int64_t>(opts_.connect_timeout.count(),
                                                              std::numeric_limits<long>::max())));
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS,
                     static_cast<long>(std::min<std::int64_t>(opts_.command_timeout.count(),
                                                              std::numeric_limits<long>::max())));
    if (!opts_.ca_file.empty()) curl_easy_setopt(h, CURLOPT_CAINFO, opts_.ca_file.c_str());
    if (!opts_.cert_file.empty()) {
      curl_easy_setopt(h, CURLOPT_SSLCERT, opts_.cert_file.c_str());
      curl_easy_setopt(h, CURLOPT_SSLKEY, opts_.key_file.c_str());
    }
    curl_ = std::move(c);
    set_headers();
    if (!headers_) {
      curl_.reset();
      return fail(errc::store_unavailable, "etcd: out of memory");
    }
    return {};
  }

  etcd_options opts_;
  std::unique_ptr<CURL, curl_easy_deleter> curl_;
  std::unique_ptr<curl_slist, curl_slist_deleter> headers_;
  std::size_t current_ = 0;
  std::string token_;           // etcd auth token, when a username is set
  bool auth_disabled_ = false;  // the cluster answered "authentication is not enabled"
  etcd_failure auth_failure_;
  std::string url_;
  std::string response_;
  char error_buffer_[CURL_ERROR_SIZE] = {};
  std::string last_error_;
  mutable std::mutex mutex_;
};

/// Returns min(`cap`, `seconds` s) in milliseconds, for a TTL etcd reported (never overflows).
inline std::chrono::milliseconds etcd_ttl_capped(std::int64_t seconds,
                                                 std::chrono::milliseconds cap) noexcept {
  if (seconds <= 0) return std::chrono::milliseconds::zero();
  if (seconds > cap.count() / 1000 + 1) return cap;
  const std::chrono::milliseconds ms(seconds * 1000);
  return ms < cap ? ms : cap;
}

/// The parts of a key-value a range answer carries.
struct etcd_kv {
  std::string value;
  std::int64_t create_revision = 0;
  std::int64_t lease = 0;
};

/// Reads the header's revision of an answer (> 0), or nullopt.
inline std::optional<std::int64_t> etcd_revision(const nlohmann::json& doc) {
  const nlohmann::json* header = json_object(doc, "header");
  std::int64_t rev = 0;
  if (header == nullptr || !json_int64(*header, "revision", rev) || rev <= 0) return std::nullopt;
  return rev;
}

/// Reads the first key of a range answer: true with `*found` set, or false for a bad shape.
inline bool etcd_first_kv(const nlohmann::json& range, std::optional<etcd_kv>& found) {
  found.reset();
  const auto kvs = range.find("kvs");
  if (kvs == range.end()) return true;  // the gateway omits an empty list
  if (!kvs->is_array() || kvs->size() > 1) return false;
  if (kvs->empty()) return true;
  const nlohmann::json& kv = (*kvs)[0];
  if (!kv.is_object()) return false;
  etcd_kv out;
  if (!json_bytes(kv, "value", out.value) ||
      !json_int64(kv, "create_revision", out.create_revision) ||
      !json_int64(kv, "lease", out.lease) || out.create_revision <= 0 || out.lease < 0) {
    return false;
  }
  found = std::move(out);
  return true;
}

}  // namespace detail

/// A LeaseStore in etcd, over its v3 JSON gateway (see the file overview for the requests, the
/// TTL rounding, durability, restores and failure behaviour). Models LeaseStore with inspect()
/// and raise_token_floor().
///
/// Tokens are etcd revisions: every new grant of any key carries a token greater than every
/// token etcd issued before (until a snapshot restore rewinds them), in 1 .. 2^63-1.
///
/// Differences from memory_store: the TTL is counted by etcd in whole seconds (the grant reports
/// min(asked, applied)); renew keeps the grant's lease alive for that lease's TTL whatever TTL it
/// is asked for (etcd cannot change a lease's TTL), reporting min(asked, that TTL); releasing a
/// lease that has already expired reports not_holder (etcd deleted the key with the lease).
///
/// Thread-safety: every member function may be called concurrently; one mutex serializes the
/// connection, so concurrent callers take turns. For parallel requests use one etcd_store per
/// thread. Not fork-safe: a child process makes its own store.
class etcd_store {
 public:
  /// Makes a store for the cluster in `opts`; connects on first use. Never throws on its own
  /// (allocation aside).
  explicit etcd_store(etcd_options opts = {}) : link_(std::move(opts)) {}

  etcd_store(const etcd_store&) = delete;
  etcd_store& operator=(const etcd_store&) = delete;

  /// Grants `key` to `owner` for `ttl` (ms, asked of etcd rounded up to whole seconds) iff it has
  /// no live lease: one etcd lease and one put-if-absent transaction bound to it. The same owner
  /// re-acquiring its live lease gets the same token back and that lease refreshed to its TTL.
  /// \returns the grant {token = the key's create_revision, ttl = min(ttl, etcd's applied TTL)};
  ///   errc::busy if another owner holds the key; errc::invalid_argument for an empty key/owner
  ///   or ttl not in (0, max_ttl], or an owner larger than etcd accepts in one request;
  ///   errc::store_unavailable or errc::timeout if no member answers in time, has no leader or
  ///   refuses (no grant is reported; the unused lease is revoked at once if a member answers,
  ///   else a grant the transaction may have made ends with its TTL); errc::protocol_error for
  ///   an answer that is not the gateway's JSON, or a key holdfast did not write.
  result<grant> try_acquire(std::string_view key, std::string_view owner,
                            std::chrono::milliseconds ttl) {
    if (std::error_code ec = check_acquire_args(key, owner, ttl)) return ec;
    auto guard = link_.lock();
    const std::int64_t seconds = (ttl.count() + 999) / 1000;
    result<std::pair<std::int64_t, std::int64_t>> lease = grant_lease(seconds);
    if (!lease) return lease.error();
    const auto [id, applied_s] = *lease;
    const std::string& k = lease_key(key);
    body_.assign(R"({"compare":[{"key":")");
    b64_append(k);
    body_ +=
        R"(","target":"CREATE","result":"EQUAL","create_revision":"0"}],"success":[{"request_put":{"key":")";
    b64_append(k);
    body_ += R"(","value":")";
    detail::base64_append(owner, body_);
    body_ += R"(","lease":")";
    body_ += std::to_string(id);
    body_ += R"("}}],"failure":[{"request_range":{"key":")";
    b64_append(k);
    body_ += R"("}}]})";
    result<nlohmann::json> r = link_.post("/kv/txn", body_);
    if (!r) {
      // Nobody was told of a grant, so the lease goes back at once (with the key, if the
      // transaction did apply) rather than holding the key for its TTL; one attempt, on the next
      // member, and the transaction's failure is what the caller hears about.
      std::string why = link_.last_error();
      (void)revoke(id, nullptr);
      link_.fail(errc::store_unavailable, std::move(why));
      return r.error();
    }
    bool succeeded = false;
    if (!detail::json_bool(*r, "succeeded", succeeded)) return shape("acquire");
    const std::chrono::milliseconds reported = detail::etcd_ttl_capped(applied_s, ttl);
    if (succeeded) {
      // One put in the transaction: the key's create_revision is the transaction's revision.
      const std::optional<std::int64_t> rev = detail::etcd_revision(*r);
      if (!rev) return shape("acquire");
      remember(k, owner, *rev, id);
      return grant{fencing_token(static_cast<std::uint64_t>(*rev)), reported};
    }
    std::optional<detail::etcd_kv> kv;
    if (!failed_range(*r, kv)) return shape("acquire");
    if (kv && kv->lease == id) {
      // Our own transaction, repeated by the transport: the grant is ours.
      remember(k, owner, kv->create_revision, id);
      return grant{fencing_token(static_cast<std::uint64_t>(kv->create_revision)), reported};
    }
    if (kv && kv->lease == 0) {
      (void)revoke(id, nullptr);
      return link_.fail(errc::protocol_error,
                        "etcd: acquire: the key has no lease (not written by holdfast)");
    }
    if (kv && kv->value == owner) {
      // The holder itself asks again (a retry after a lost reply): same token, its own lease
      // refreshed, and the lease granted above given back.
      result<std::int64_t> left = keepalive(kv->lease);
      (void)revoke(id, nullptr);
      if (!left) return left.error();
      if (*left <= 0) return errc::busy;  // expired, not yet deleted: etcd still has the key
      remember(k, owner, kv->create_revision, kv->lease);
      return grant{fencing_token(static_cast<std::uint64_t>(kv->create_revision)),
                   detail::etcd_ttl_capped(*left, ttl)};
    }
    // Another owner holds it (or it vanished between the compare and the range: impossible in
    // one transaction, treated as busy all the same). Give the unused lease back.
    (void)revoke(id, nullptr);
    return errc::busy;
  }

  /// Keeps the lease on `key` alive iff `owner` holds it with `token`: one keepalive of the
  /// grant's own etcd lease (two round trips if this store did not make the grant). etcd restarts
  /// the lease's full TTL; `ttl` is checked but cannot change it.
  /// \returns the grant {token, min(ttl, the lease's TTL)}; errc::lease_lost if the key is free,
  ///   expired, or held by another owner or token; errc::invalid_argument (check_renew_args);
  ///   store_unavailable, timeout, protocol_error as for try_acquire.
  result<grant> renew(std::string_view key, std::string_view owner, fencing_token token,
                      std::chrono::milliseconds ttl) {
    if (std::error_code ec = check_renew_args(key, owner, token, ttl)) return ec;
    if (token > etcd_max_token) return errc::lease_lost;  // no revision is that large
    auto guard = link_.lock();
    const std::string& k = lease_key(key);
    result<std::int64_t> id = lease_of(k, owner, token);
    if (!id) return id.error();
    if (*id == 0) return errc::lease_lost;
    result<std::int64_t> left = keepalive(*id);
    if (!left) return left.error();
    if (*left <= 0) {
      forget(k);
      return errc::lease_lost;
    }
    return grant{token, detail::etcd_ttl_capped(*left, ttl)};
  }

  /// Frees `key` iff `owner` holds it with `token`: one revoke of the grant's own etcd lease,
  /// which deletes the key in the same step (two round trips if this store did not make the
  /// grant). \returns success; errc::not_holder if the key is free, expired, or held by another
  ///   owner or token; errc::invalid_argument (check_release_args); store_unavailable, timeout,
  ///   protocol_error as for try_acquire.
  result<void> release(std::string_view key, std::string_view owner, fencing_token token) {
    if (std::error_code ec = check_release_args(key, owner, token)) return ec;
    if (token > etcd_max_token) return errc::not_holder;
    auto guard = link_.lock();
    const std::string& k = lease_key(key);
    result<std::int64_t> id = lease_of(k, owner, token);
    if (!id) return id.error();
    if (*id == 0) return errc::not_holder;
    bool found = false;
    if (std::error_code ec = revoke(*id, &found)) return ec;
    forget(k);
    if (!found) return errc::not_holder;  // expired: etcd deleted the key with the lease
    return {};
  }

  /// Returns the live lease on `key` (owner, token, time left by the etcd leader's clock in whole
  /// seconds, rounded down), or nullopt; two round trips (range, timetolive).
  /// \returns errc::invalid_argument for an empty key; store_unavailable, timeout;
  ///   protocol_error for a key holdfast did not write.
  result<std::optional<lease_record>> inspect(std::string_view key) {
    if (key.empty()) return errc::invalid_argument;
    auto guard = link_.lock();
    const std::string& k = lease_key(key);
    result<std::optional<detail::etcd_kv>> kv = range(k);
    if (!kv) return kv.error();
    if (!*kv) return std::optional<lease_record>{};
    if ((*kv)->lease == 0) {
      return link_.fail(errc::protocol_error, "etcd: inspect: the key has no lease");
    }
    body_.assign(R"({"ID":")");
    body_ += std::to_string((*kv)->lease);
    body_ += R"("})";
    result<nlohmann::json> r = link_.post("/lease/timetolive", body_);
    if (!r) return r.error();
    std::int64_t left = 0;
    if (!detail::json_int64(*r, "TTL", left) || left < -1 || left > max_ttl.count() / 1000) {
      return shape("inspect");
    }
    if (left < 0) return std::optional<lease_record>{};  // revoked since: the key went with it
    return std::optional<lease_record>{lease_record{
        std::move((*kv)->value), fencing_token(static_cast<std::uint64_t>((*kv)->create_revision)),
        std::chrono::milliseconds(left * 1000)}};
  }

  /// Returns etcd's current revision: every token issued so far is at most this. One round trip.
  /// \returns store_unavailable, timeout, protocol_error.
  result<fencing_token> revision() {
    auto guard = link_.lock();
    return current_revision();
  }

  /// Raises etcd's revision to at least `floor`, so that every later grant carries a token above
  /// `floor`; live leases keep theirs. For recovery after a snapshot restore rewound the revision
  /// (see the overview): pass the newest token any fence admitted. etcd 3.4 has no way to set a
  /// revision, so this writes one small key (key_prefix + "#floor", no lease, deleted at the end)
  /// once per revision to skip: it refuses gaps above `max_steps`. Also the token-floor
  /// capability quorum_store uses (see quorum.hpp).
  /// \returns success; errc::invalid_argument unless `floor` is in [1, 2^63-1] and within
  ///   max_steps of the current revision; store_unavailable, timeout, protocol_error.
  result<void> raise_token_floor(fencing_token floor, std::uint64_t max_steps = 100000) {
    if (!floor.is_issuable() || floor > etcd_max_token) return errc::invalid_argument;
    auto guard = link_.lock();
    result<fencing_token> now = current_revision();
    if (!now) return now.error();
    if (*now >= floor) return {};
    if (floor.value() - now->value() > max_steps) {
      return link_.fail(errc::invalid_argument,
                        "etcd: raise_token_floor: " + std::to_string(floor.value() - now->value()) +
                            " revisions to skip is more than max_steps");
    }
    std::string k = link_.options().key_prefix + "#floor";
    body_.assign(R"({"key":")");
    b64_append(k);
    body_ += R"(","value":"")";
    body_ += "}";
    const std::string put = body_;
    std::uint64_t rev = now->value();
    while (rev < floor.value()) {
      result<nlohmann::json> r = link_.post("/kv/put", put);
      if (!r) return r.error();
      const std::optional<std::int64_t> got = detail::etcd_revision(*r);
      if (!got) return shape("raise_token_floor");
      rev = static_cast<std::uint64_t>(*got);
    }
    body_.assign(R"({"key":")");
    b64_append(k);
    body_ += R"("})";
    result<nlohmann::json> r = link_.post("/kv/deleterange", body_);  // one more revision
    if (!r) return r.error();
    return {};
  }

  /// Returns the text of the most recent failure on this store: etcd's message with the HTTP
  /// status and gRPC code (e.g. "etcd: http://127.0.0.1:2379/v3/kv/txn: etcdserver: no leader
  /// (HTTP 503, gRPC code 14)"), libcurl's transport error (e.g. "Connection refused"), or
  /// holdfast's own note on a malformed answer. Empty if nothing failed. Under concurrent use it
  /// may belong to another thread's call. busy, lease_lost and not_holder do not change it.
  [[nodiscard]] std::string last_error_message() const {
    auto guard = link_.lock();
    return link_.last_error();
  }

  /// Returns the options the store was made with.
  [[nodiscard]] const etcd_options& options() const noexcept { return link_.options(); }

 private:
  struct remembered {
    std::string owner;
    std::int64_t token = 0;
    std::int64_t lease = 0;
    std::uint64_t age = 0;
  };

  const std::string& lease_key(std::string_view key) {
    key_.assign(link_.options().key_prefix);
    detail::etcd_key_name(key, key_);
    return key_;
  }

  void b64_append(std::string_view bytes) { detail::base64_append(bytes, body_); }

  std::error_code shape(const char* op) {
    return link_.fail(
        errc::protocol_error,
        std::string("etcd: ") + op + ": an answer of unexpected shape from " + link_.endpoint());
  }

  // lease/grant: {id, applied TTL in seconds}.
  result<std::pair<std::int64_t, std::int64_t>> grant_lease(std::int64_t seconds) {
    body_.assign(R"({"TTL":")");
    body_ += std::to_string(seconds);
    body_ += R"("})";
    result<nlohmann::json> r = link_.post("/lease/grant", body_);
    if (!r) return r.error();
    std::int64_t id = 0;
    std::int64_t applied = 0;
    if (!detail::json_int64(*r, "ID", id) || !detail::json_int64(*r, "TTL", applied) || id == 0 ||
        applied <= 0) {
      const auto e = r->find("error");  // LeaseGrantResponse has an "error" text field
      if (e != r->end() && e->is_string() && !e->get_ref<const std::string&>().empty()) {
        return link_.fail(errc::store_unavailable, "etcd: lease grant: " + e->get<std::string>());
      }
      return shape("lease grant");
    }
    return std::make_pair(id, applied);
  }

  // lease/keepalive: the TTL etcd restarted (<= 0: the lease is gone).
  result<std::int64_t> keepalive(std::int64_t id) {
    body_.assign(R"({"ID":")");
    body_ += std::to_string(id);
    body_ += R"("})";
    result<nlohmann::json> r = link_.post("/lease/keepalive", body_);
    if (!r) return r.error();
    std::int64_t left = 0;
    if (!detail::json_int64(*r, "TTL", left)) return shape("keepalive");
    return left;
  }

  // lease/revoke; *found is false if etcd no longer had the lease.
  std::error_code revoke(std::int64_t id, bool* found) {
    body_.assign(R"({"ID":")");
    body_ += std::to_string(id);
    body_ += R"("})";
    detail::etcd_failure missing;
    result<nlohmann::json> r = link_.post("/lease/revoke", body_, 5 /* NotFound */, &missing);
    if (!r) return r.error();
    if (found != nullptr) *found = missing.code != 5;
    return {};
  }

  result<std::optional<detail::etcd_kv>> range(const std::string& k) {
    body_.assign(R"({"key":")");
    b64_append(k);
    body_ += R"("})";
    result<nlohmann::json> r = link_.post("/kv/range", body_);
    if (!r) return r.error();
    std::optional<detail::etcd_kv> kv;
    if (!detail::etcd_first_kv(*r, kv)) return shape("range");
    return kv;
  }

  result<fencing_token> current_revision() {
    body_.assign(R"({"key":")");
    b64_append(link_.options().key_prefix);
    body_ += R"(","count_only":true})";
    result<nlohmann::json> r = link_.post("/kv/range", body_);
    if (!r) return r.error();
    const std::optional<std::int64_t> rev = detail::etcd_revision(*r);
    if (!rev) return shape("revision");
    return fencing_token(static_cast<std::uint64_t>(*rev));
  }

  static bool failed_range(const nlohmann::json& txn, std::optional<detail::etcd_kv>& kv) {
    const auto responses = txn.find("responses");
    if (responses == txn.end() || !responses->is_array() || responses->size() != 1 ||
        !(*responses)[0].is_object()) {
      return false;
    }
    const nlohmann::json* range = detail::json_object((*responses)[0], "response_range");
    return range != nullptr && detail::etcd_first_kv(*range, kv);
  }

  // The lease of the grant (k, owner, token): remembered, or read from the key. 0: not held.
  result<std::int64_t> lease_of(const std::string& k, std::string_view owner, fencing_token token) {
    const auto t = static_cast<std::int64_t>(token.value());
    const auto it = remembered_.find(k);
    if (it != remembered_.end() && it->second.token == t && it->second.owner == owner) {
      return it->second.lease;
    }
    result<std::optional<detail::etcd_kv>> kv = range(k);
    if (!kv) return kv.error();
    if (!*kv || (*kv)->create_revision != t || (*kv)->value != owner) return std::int64_t{0};
    return (*kv)->lease;
  }

  void remember(const std::string& k, std::string_view owner, std::int64_t token,
                std::int64_t lease) {
    const std::size_t cap = link_.options().remembered_grants;
    if (cap == 0) return;
    if (remembered_.size() >= cap && remembered_.find(k) == remembered_.end()) {
      // Forget the oldest (a linear scan, only when full: renew and release stay O(1)).
      auto oldest = remembered_.begin();
      for (auto it = remembered_.begin(); it != remembered_.end(); ++it) {
        if (it->second.age < oldest->second.age) oldest = it;
      }
      remembered_.erase(oldest);
    }
    remembered& r = remembered_[k];
    r.owner.assign(owner.data(), owner.size());
    r.token = token;
    r.lease = lease;
    r.age = ++clock_;
  }

  void forget(const std::string& k) { remembered_.erase(k); }

  detail::etcd_link link_;
  std::unordered_map<std::string, remembered> remembered_;  // guarded by the link's mutex
  std::uint64_t clock_ = 0;
  std::string key_;  // scratch buffers, guarded by the link's mutex
  std::string body_;
};

/// One write an etcd_fence applies when it admits a token: put `value` at `key`, or delete `key`.
struct etcd_write {
  std::string key;                   ///< The key, any bytes, used exactly as given (no prefix).
  std::optional<std::string> value;  ///< The value to put; nullopt deletes the key.
};

/// Fenced writes whose fence lives in etcd next to the data: one transaction compares the fence
/// key's value with the token and, only if the fence is not newer, puts the caller's data and the
/// fence together (DESIGN §5; Kleppmann 2016), so no newer holder can slip in between. A fence
/// key holds the newest admitted token as 20 decimal digits, zero-padded (etcd compares values as
/// bytes, so equal width makes byte order numeric order); a write with an older token is refused
/// with stale_token and changes nothing. Equal tokens are admitted (one holder writes many
/// times). A fence value holdfast did not write is refused as protocol_error (nothing changes)
/// when it sorts above the token or below the least token "00000000000000000001" in byte order;
/// one that sorts between two tokens (a token with bytes appended, say) cannot be told from a
/// token by etcd's comparisons and is overwritten.
///
/// Fence and data keys are used exactly as given (no prefix). Tokens may come from any store.
/// Thread-safety: as etcd_store (one mutex around one connection).
class etcd_fence {
 public:
  /// Makes a fence client for the cluster in `opts` (connection fields only).
  explicit etcd_fence(etcd_options opts = {}) : link_(std::move(opts)) {}

  etcd_fence(const etcd_fence&) = delete;
  etcd_fence& operator=(const etcd_fence&) = delete;

  /// Admits `token` at `fence_key` iff it is not older than the newest admitted there, and
  /// records it, atomically. \returns success; errc::stale_token if a newer token was admitted
  ///   (nothing changes); errc::invalid_argument for an empty key or a token no store issues
  ///   (none, max); store_unavailable, timeout; protocol_error if the key holds no token.
  result<void> admit(std::string_view fence_key, fencing_token token) {
    return execute(fence_key, token, {});
  }

  /// Admits `token` at `fence_key` and, only if admitted, puts `value` at `data_key`, in one
  /// transaction. \returns as admit().
  result<void> write(std::string_view fence_key, fencing_token token, std::string_view data_key,
                     std::string_view value) {
    std::vector<etcd_write> w(1);
    w[0].key.assign(data_key.data(), data_key.size());
    w[0].value = std::string(value);
    return execute(fence_key, token, w);
  }

  /// Admits `token` at `fence_key` and, only if admitted, applies `writes` (puts and deletes,
  /// none of them on `fence_key`), all in one transaction. \returns as admit(); also
  ///   errc::invalid_argument for a write with an empty key or on the fence key, and for a
  ///   transaction etcd refuses as too large.
  result<void> execute(std::string_view fence_key, fencing_token token,
                       const std::vector<etcd_write>& writes) {
    if (fence_key.empty() || !token.is_issuable()) return errc::invalid_argument;
    for (const etcd_write& w : writes) {
      if (w.key.empty() || w.key == fence_key) return errc::invalid_argument;
    }
    auto guard = link_.lock();
    const std::string t = text(token);
    // compare: the fence sorts above the token (stale, or corrupt), else: the fence sorts below
    // the least token (corrupt), else admit. A missing fence fails every value comparison
    // (etcd's rule), so it reaches the admitting branch.
    body_.assign(R"({"compare":[{"key":")");
    b64(fence_key);
    body_ += R"(","target":"VALUE","result":"GREATER","value":")";
    b64(t);
    body_ += R"("}],"success":[{"request_range":{"key":")";
    b64(fence_key);
    body_ += R"("}}],"failure":[{"request_txn":{"compare":[{"key":")";
    b64(fence_key);
    body_ += R"(","target":"VALUE","result":"LESS","value":")";
    b64(text(fencing_token(1)));
    body_ += R"("}],"success":[{"request_range":{"key":")";
    b64(fence_key);
    body_ += R"("}}],"failure":[)";
    for (const etcd_write& w : writes) {
      if (w.value) {
        body_ += R"({"request_put":{"key":")";
        b64(w.key);
        body_ += R"(","value":")";
        b64(*w.value);
        body_ += R"("}},)";
      } else {
        body_ += R"({"request_delete_range":{"key":")";
        b64(w.key);
        body_ += R"("}},)";
      }
    }
    body_ += R"({"request_put":{"key":")";
    b64(fence_key);
    body_ += R"(","value":")";
    b64(t);
    body_ += R"("}}]}}]})";
    result<nlohmann::json> r = link_.post("/kv/txn", body_);
    if (!r) return r.error();
    bool stale = false;
    if (!detail::json_bool(*r, "succeeded", stale)) return shape();
    if (stale) {
      std::string v;
      if (!first_value(*r, v)) return shape();
      if (!parse(v)) {
        return link_.fail(errc::protocol_error, "etcd: fence key does not hold a token");
      }
      return errc::stale_token;
    }
    // The nested transaction: succeeded there means the fence sorted below every token.
    const auto responses = r->find("responses");
    if (responses == r->end() || !responses->is_array() || responses->size() != 1) return shape();
    const nlohmann::json* inner = detail::json_object((*responses)[0], "response_txn");
    bool corrupt = false;
    if (inner == nullptr || !detail::json_bool(*inner, "succeeded", corrupt)) return shape();
    if (corrupt) return link_.fail(errc::protocol_error, "etcd: fence key does not hold a token");
    return {};
  }

  /// Returns the newest token admitted at `fence_key` (none if none was). A snapshot only:
  /// deciding on it and then writing is the check-then-write race; use write() or execute().
  result<fencing_token> newest(std::string_view fence_key) {
    if (fence_key.empty()) return errc::invalid_argument;
    auto guard = link_.lock();
    body_.assign(R"({"key":")");
    b64(fence_key);
    body_ += R"("})";
    result<nlohmann::json> r = link_.post("/kv/range", body_);
    if (!r) return r.error();
    const auto kvs = r->find("kvs");
    if (kvs == r->end()) return fencing_token{};
    std::string v;
    if (!kvs->is_array() || kvs->size() != 1 || !(*kvs)[0].is_object() ||
        !detail::json_bytes((*kvs)[0], "value", v)) {
      return shape();
    }
    std::optional<fencing_token> t = parse(v);
    if (!t) return link_.fail(errc::protocol_error, "etcd: fence key does not hold a token");
    return *t;
  }

  /// Reads the value of `data_key` (nullopt if absent), linearizably. A write computed from it is
  /// safe only through write()/execute() with the reader's token: if a newer holder wrote in
  /// between, its token is in the fence and the write is refused (DESIGN §5).
  /// \returns errc::invalid_argument for an empty key; store_unavailable, timeout, protocol_error.
  result<std::optional<std::string>> get(std::string_view data_key) {
    if (data_key.empty()) return errc::invalid_argument;
    auto guard = link_.lock();
    body_.assign(R"({"key":")");
    b64(data_key);
    body_ += R"("})";
    result<nlohmann::json> r = link_.post("/kv/range", body_);
    if (!r) return r.error();
    const auto kvs = r->find("kvs");
    if (kvs == r->end()) return std::optional<std::string>{};
    std::string v;
    if (!kvs->is_array() || kvs->size() != 1 || !(*kvs)[0].is_object() ||
        !detail::json_bytes((*kvs)[0], "value", v)) {
      return shape();
    }
    return std::optional<std::string>(std::move(v));
  }

  /// As etcd_store::last_error_message().
  [[nodiscard]] std::string last_error_message() const {
    auto guard = link_.lock();
    return link_.last_error();
  }

  /// Returns `token` as a fence key holds it: 20 decimal digits, zero-padded.
  static std::string text(fencing_token token) {
    std::string s = std::to_string(token.value());
    return std::string(20 - s.size(), '0') + s;
  }

 private:
  static std::optional<fencing_token> parse(std::string_view v) {
    if (v.size() != 20) return std::nullopt;
    std::uint64_t x = 0;
    for (char c : v) {
      if (c < '0' || c > '9') return std::nullopt;
      const auto d = static_cast<std::uint64_t>(c - '0');
      if (x > (std::numeric_limits<std::uint64_t>::max() - d) / 10) return std::nullopt;
      x = x * 10 + d;
    }
    if (x == 0) return std::nullopt;
    return fencing_token(x);
  }

  static bool first_value(const nlohmann::json& txn, std::string& v) {
    const auto responses = txn.find("responses");
    if (responses == txn.end() || !responses->is_array() || responses->size() != 1) return false;
    const nlohmann::json* range = detail::json_object((*responses)[0], "response_range");
    if (range == nullptr) return false;
    const auto kvs = range->find("kvs");
    if (kvs == range->end() || !kvs->is_array() || kvs->size() != 1 || !(*kvs)[0].is_object()) {
      return false;
    }
    return detail::json_bytes((*kvs)[0], "value", v);
  }

  void b64(std::string_view bytes) { detail::base64_append(bytes, body_); }

  std::error_code shape() {
    return link_.fail(errc::protocol_error,
                      "etcd: fence: an answer of unexpected shape from " + link_.endpoint());
  }

  detail::etcd_link link_;
  std::string body_;  // scratch, guarded by the link's mutex
};

HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_ETCD_HPP
