// SPDX-License-Identifier: MIT
// holdfast/stores/detail/etcd_link.hpp - etcd_link: the transport under etcd_store and
// etcd_fence. One kept-alive libcurl connection to the v3 JSON gateway of one member at a time
// (HTTP/1.1, TLS and client certificates through libcurl, no proxy, no redirects), failover across
// the endpoints, the etcd user's auth token (fetched on first use and again when etcd says it
// expired), and the mapping of etcd's error answers (gRPC codes) and libcurl's failures to errc.
// See the overview of stores/etcd.hpp for which failures move to the next member. Not for users.
#ifndef HOLDFAST_STORES_DETAIL_ETCD_LINK_HPP
#define HOLDFAST_STORES_DETAIL_ETCD_LINK_HPP

#include <curl/curl.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/result.hpp"
#include "holdfast/stores/detail/call_bound.hpp"
#include "holdfast/stores/detail/etcd_json.hpp"
#include "holdfast/stores/etcd_options.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

/// Maps a gRPC status code in an etcd error answer to an errc.
inline errc classify_etcd_code(std::int64_t code) noexcept {
  switch (code) {
    case 4:  // DeadlineExceeded
      return errc::timeout;
    case 3:   // InvalidArgument: e.g. "etcdserver: request is too large"
    case 11:  // OutOfRange: e.g. "etcdserver: too large lease TTL"
      return errc::invalid_argument;
    case 7:   // PermissionDenied: "etcdserver: permission denied" (the user's role)
    case 16:  // Unauthenticated (after holdfast asked for a new token once)
      return errc::permission_denied;
    case 1:   // Canceled
    case 2:   // Unknown (a member losing its leader, a proxy in the way)
    case 8:   // ResourceExhausted: "etcdserver: too many requests"
    case 10:  // Aborted
    case 13:  // Internal
    case 14:  // Unavailable: "etcdserver: no leader", "request timed out", "leader changed"
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
/// A fault etcd_link::fault injects into one request (tests only).
enum class etcd_fault { none, lost_reply, unsent };

class etcd_link {
 public:
  explicit etcd_link(etcd_options opts) : opts_(std::move(opts)) {}

  /// Locks the link for one call, which begins by forgetting the last failure's text.
  [[nodiscard]] std::unique_lock<std::mutex> lock() const {
    std::unique_lock<std::mutex> l(mutex_);
    last_error_.clear();
    return l;
  }
  /// Locks without beginning a call (last_error_message() reads the text under it).
  [[nodiscard]] std::unique_lock<std::mutex> lock_quiet() const {
    return std::unique_lock<std::mutex>(mutex_);
  }
  [[nodiscard]] const etcd_options& options() const noexcept { return opts_; }
  [[nodiscard]] const std::string& last_error() const noexcept { return last_error_; }
  /// Whether the last request timed out (sent, or connecting, and no answer in time), as
  /// against one answered or refused: a give-back then waits store_call_floor, not again as long.
  [[nodiscard]] bool last_request_timed_out() const noexcept { return silent_; }
  /// The etcd auth token requests carry (empty without a username or before the first request);
  /// a watch on a connection of its own sends it too.
  [[nodiscard]] const std::string& auth_token() const noexcept { return token_; }

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
    std::string why;
    if (opts_.check(&why)) return fail(errc::invalid_argument, "etcd: " + why);
    const etcd_fault injected = fault ? fault(path, body) : etcd_fault::none;
    if (injected == etcd_fault::unsent) {
      return fail(errc::store_unavailable, "etcd: " + std::string(path) + ": not sent (fault)");
    }
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
    if (injected == etcd_fault::lost_reply) {  // applied, its answer lost
      ++current_;
      return fail(errc::timeout, "etcd: " + std::string(path) + ": reply lost (fault)");
    }
    return r;
  }

  /// The highest revision any answer has shown this link (every token etcd issued to this store
  /// is at most that), and whether an answer since the last settle_life() showed a new life: a
  /// cluster ID other than the first one seen (a cluster rebuilt, e.g. from a snapshot with a
  /// new --initial-cluster-token) or a revision below that highest one (a snapshot restore
  /// rewound it; also, harmlessly, a member that applied less than the one before).
  [[nodiscard]] std::int64_t highest_revision() const noexcept { return highest_; }
  [[nodiscard]] bool new_life() const noexcept { return new_life_; }
  void settle_life() noexcept { new_life_ = false; }
  /// How many new lives this link has seen since it was made (each counted once, when noticed,
  /// settled or not), and the highest revision seen before the latest of them (0 if none): what
  /// deployment() reports after the raise settled it.
  [[nodiscard]] std::uint64_t lives_seen() const noexcept { return lives_seen_; }
  [[nodiscard]] std::int64_t rewound_below() const noexcept { return rewound_below_; }
  /// The cluster ID of the newest answer ("" before the first).
  [[nodiscard]] const std::string& cluster_id() const noexcept { return cluster_; }

  /// For tests of the fault model ("any store call can apply and lose its reply"): when set, asked
  /// of each request's path and body. lost_reply: the request is sent and applied as usual, then
  /// reported as a timeout (its answer dropped) and the next request goes to the next member, as
  /// after a real lost answer; unsent: reported as store_unavailable before anything is sent. Empty
  /// by default (one test of an empty std::function per request).
  std::function<etcd_fault(std::string_view path, std::string_view body)> fault;

 private:
  void note_life(const nlohmann::json& header) {
    const auto c = header.find("cluster_id");
    if (c != header.end() && c->is_string()) {
      const std::string& id = c->get_ref<const std::string&>();
      if (!cluster_.empty() && id != cluster_) notice_life();
      cluster_ = id;
    }
    std::int64_t rev = 0;
    if (!json_int64(header, "revision", rev) || rev <= 0) return;
    if (rev < highest_) notice_life();
    if (rev > highest_) highest_ = rev;
  }

  // One new life, counted once however many answers show it before it is settled.
  void notice_life() noexcept {
    if (new_life_) return;
    new_life_ = true;
    ++lives_seen_;
    rewound_below_ = highest_;
  }

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

  // One request, on the current endpoint (moving on at once past a refused connection), and its
  // answer judged: a gateway answer, `expected`'s error answer for the caller, or a failure.
  result<nlohmann::json> post_once(std::string_view path, const std::string& body,
                                   std::int64_t expected, etcd_failure* failure,
                                   bool& auth_rejected) {
    auth_rejected = false;
    long status = 0;
    if (std::error_code ec = perform(path, body, status)) return ec;
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
      note_life(*json_object(doc, "header"));
      return doc;
    }
    if (status == 200 && !is_object) {
      return fail(errc::protocol_error, "etcd: " + url_ + " answered no JSON object: " + excerpt());
    }
    if (err == nullptr) {
      // Not the gateway's error shape: judge by the HTTP status alone.
      ++current_;
      const errc code = http_status_code(status);
      const char* field = code == errc::permission_denied ? " (etcd_options::username/password)"
                          : code == errc::misconfigured
                              ? ", not an answer of etcd's v3 JSON gateway (check "
                                "etcd_options::endpoints, api_path)"
                              : "";
      return fail(code, "etcd: " + url_ + " answered HTTP " + std::to_string(status) + field +
                            ": " + excerpt());
    }
    return error_answer(*err, status, expected, failure, auth_rejected);
  }

  // The request's connect and total timeouts: connect_timeout and command_timeout, each capped
  // by the deadline of the call running on this thread (detail/call_bound.hpp).
  void set_timeouts(CURL* c) const {
    const auto ms = [](std::chrono::milliseconds d) {
      return static_cast<long>(
          std::min<std::int64_t>(capped_by_call(d).count(), std::numeric_limits<long>::max()));
    };
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, ms(opts_.connect_timeout));
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, ms(opts_.command_timeout));
  }
  // POSTs `body` to api_path + `path` on the current endpoint, trying the next one at once while
  // the connection is refused (nothing was sent). Sets `status` to the HTTP status on success.
  std::error_code perform(std::string_view path, const std::string& body, long& status) {
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
      set_timeouts(c);
      const CURLcode rc = curl_easy_perform(c);
      silent_ = rc == CURLE_OPERATION_TIMEDOUT;
      if (rc == CURLE_OK) break;
      std::string what = "etcd: " + url_ + ": ";
      what += error_buffer_[0] != '\0' ? error_buffer_ : curl_easy_strerror(rc);
      if (rc == CURLE_SSL_CONNECT_ERROR && answers_plain_http(endpoint())) {
        ++current_;
        return fail(errc::misconfigured, what +
                                             " (TLS handshake failed: the endpoint answers "
                                             "plain HTTP; give it as http:// in "
                                             "etcd_options::endpoints)");
      }
      ++current_;  // whatever failed, the next request goes to the next member
      const bool unsent = rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST;
      if (unsent && attempt + 1 < n) continue;  // nothing was sent
      if (rc == CURLE_OPERATION_TIMEDOUT) return fail(errc::timeout, std::move(what));
      if (const char* field = misconfigured_field(rc)) {
        return fail(errc::misconfigured, what + " (etcd_options::" + field + ")");
      }
      if (rc == CURLE_WRITE_ERROR) {
        return fail(errc::protocol_error, "etcd: answer larger than 256 MiB from " + url_);
      }
      return fail(errc::store_unavailable, std::move(what));
    }
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    return {};
  }

  // An error answer in the gateway's shape (`err`: {code or grpc_code, message or error}): handed
  // to the caller in `*failure` (with a null document) if its code is `expected`, else classified
  // into a failure. Sets `auth_rejected` if etcd refused the auth token.
  result<nlohmann::json> error_answer(const nlohmann::json& err, long status, std::int64_t expected,
                                      etcd_failure* failure, bool& auth_rejected) {
    etcd_failure f;
    std::int64_t code = -1;
    for (const char* field : {"code", "grpc_code"}) {
      std::int64_t v = 0;
      if (err.find(field) != err.end() && json_int64(err, field, v)) code = v;
    }
    for (const char* field : {"message", "error"}) {
      const auto it = err.find(field);
      if (it != err.end() && it->is_string()) {
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
      e = errc::permission_denied;  // credentials refused or missing: as Redis' WRONGPASS
    }
    if (status == 401 || status == 403) e = errc::permission_denied;
    if (e == errc::store_unavailable || e == errc::timeout) ++current_;
    return fail(e, "etcd: " + url_ + ": " + f.message + " (HTTP " + std::to_string(status) +
                       ", gRPC code " + std::to_string(code) + ")");
  }

  // After a failed TLS handshake with `endpoint` (https://...): whether the same host and port
  // answer a plain-HTTP HEAD /version (any status). A server that is restarting or drops the
  // connection answers neither, so that stays transient; a plain-HTTP server (etcd without TLS:
  // it closes the handshake unanswered, SSL_ERROR_SYSCALL) is named. One connect_timeout at most.
  bool answers_plain_http(const std::string& endpoint) const {
    constexpr std::string_view tls = "https://";
    if (endpoint.compare(0, tls.size(), tls) != 0) return false;
    std::unique_ptr<CURL, curl_easy_deleter> h(curl_easy_init());
    if (!h) return false;
    const std::string url = "http://" + endpoint.substr(tls.size()) + "/version";
    const auto ms = static_cast<long>(capped_by_call(opts_.connect_timeout).count());
    curl_easy_setopt(h.get(), CURLOPT_URL, url.c_str());
    curl_easy_setopt(h.get(), CURLOPT_NOBODY, 1L);
    curl_easy_setopt(h.get(), CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h.get(), CURLOPT_NOPROXY, "*");
    curl_easy_setopt(h.get(), CURLOPT_CONNECTTIMEOUT_MS, std::max(ms, 1L));
    curl_easy_setopt(h.get(), CURLOPT_TIMEOUT_MS, std::max(ms, 1L));
    return curl_easy_perform(h.get()) == CURLE_OK;
  }

  // The errc of an HTTP status that came without the gateway's error shape. What waiting may
  // mend stays transient: a member or a proxy in front of it failing (500, 502, 503, 504), too
  // many requests (429), a timeout (408). Credentials are permission_denied (401, 403). Every
  // other 4xx, a redirect (holdfast follows none), 501 (method not implemented) and 505 (HTTP
  // version not supported) say the endpoint is not etcd's gateway: misconfigured, at once.
  static errc http_status_code(long status) noexcept {
    if (status == 408) return errc::timeout;
    if (status == 429) return errc::store_unavailable;
    if (status == 401 || status == 403) return errc::permission_denied;
    if (status == 501 || status == 505) return errc::misconfigured;
    if (status >= 500 && status <= 599) return errc::store_unavailable;
    if (status >= 300 && status <= 499) return errc::misconfigured;
    return errc::protocol_error;
  }

  // The option behind a libcurl failure that is the configuration's, never the network's: a
  // malformed URL, a host name that resolves nowhere (after every endpoint was
  // tried), TLS files that cannot be read or certificates that do not verify. nullptr otherwise.
  static const char* misconfigured_field(CURLcode rc) noexcept {
    switch (rc) {
      case CURLE_URL_MALFORMAT:         // (not UNSUPPORTED_PROTOCOL: libcurl also says it of a
      case CURLE_COULDNT_RESOLVE_HOST:  // peer that answers no HTTP, e.g. a closed connection)
        return "endpoints";
      case CURLE_SSL_CACERT_BADFILE:
      case CURLE_PEER_FAILED_VERIFICATION:
        return "ca_file";
      case CURLE_SSL_CERTPROBLEM:
        return "cert_file/key_file";
      default:
        return nullptr;
    }
  }

  // A short printable excerpt of the answer for an error's text: an HTML page's tags dropped,
  // runs of white space and control characters made one space, other bytes outside ASCII '?',
  // at most 160 characters (then "...").
  std::string excerpt() const {
    constexpr std::size_t limit = 160;
    const std::size_t first = response_.find_first_not_of(" \t\r\n");
    const bool html = first != std::string::npos && response_[first] == '<';
    std::string s;
    bool in_tag = false;
    for (std::size_t i = 0; i < response_.size() && s.size() <= limit; ++i) {
      const auto ch = static_cast<unsigned char>(response_[i]);
      if (html && (in_tag || ch == '<')) {
        in_tag = ch != '>';
        if (!in_tag && !s.empty() && s.back() != ' ') s += ' ';
        continue;
      }
      if (ch <= 32) {
        if (!s.empty() && s.back() != ' ') s += ' ';
      } else {
        s += ch < 127 ? static_cast<char>(ch) : '?';
      }
    }
    while (!s.empty() && s.back() == ' ') s.pop_back();
    if (s.size() > limit) {
      s.resize(limit - 3);
      s += "...";
    }
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
  std::string token_;         // etcd auth token, when a username is set
  std::string cluster_;       // the life seen (note_life)
  std::int64_t highest_ = 0;  // the highest revision seen
  bool new_life_ = false;
  std::uint64_t lives_seen_ = 0;    // new lives noticed (notice_life)
  std::int64_t rewound_below_ = 0;  // highest_ when the latest was noticed
  bool auth_disabled_ = false;      // the cluster answered "authentication is not enabled"
  etcd_failure auth_failure_;
  std::string url_;
  std::string response_;
  char error_buffer_[CURL_ERROR_SIZE] = {};
  mutable std::string last_error_;  // the most recent call's failure (cleared by lock())
  bool silent_ = false;             // the last request timed out (last_request_timed_out())
  mutable std::mutex mutex_;
};

/// The argument check of every etcd entry point that takes a key (and an owner: empty where there
/// is none), before anything is sent and before the call takes `link`'s lock: an empty key, or
/// a key or owner over etcd's request limit (etcd_args_problem, named in last_error_message()).
/// A refusal is a call of its own (it clears the last call's text). \returns invalid_argument or
/// a zero code.
inline std::error_code etcd_check_args(etcd_link& link, std::string_view key,
                                       std::string_view owner) {
  if (!key.empty() && key.size() <= etcd_max_owner_bytes && owner.size() <= etcd_max_owner_bytes) {
    return {};
  }
  auto guard = link.lock();
  if (key.empty()) return errc::invalid_argument;
  return link.fail(errc::invalid_argument, etcd_args_problem(key, owner));
}

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_DETAIL_ETCD_LINK_HPP
