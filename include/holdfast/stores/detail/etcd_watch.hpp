// SPDX-License-Identifier: MIT
// holdfast/stores/detail/etcd_watch.hpp - etcd_watch: one watch of one key (or one range: a
// read-write key's grants, etcd_rw_wait.hpp) over the v3 JSON gateway's /v3/watch stream, for
// etcd_store's wait_for_release, watch_release and wait_for_release_rw; and
// etcd_sightings, each thread's last busy answer (the revision it saw, the holder's lease), which
// a wait starts from. Not for users (stores/etcd.hpp is the public header).
//
// The gateway turns one HTTP POST of a WatchRequest into one gRPC Watch stream and writes each
// WatchResponse as one line of JSON ({"result": {...}}\n) for as long as the stream lives, so a
// watch holds a connection of its own (HTTP/1.1 cannot share one with a response that never
// ends), driven through a libcurl multi handle: the waiter sleeps in curl_multi_poll() until
// data arrives or its wake-up instant. Closing the connection ends the gRPC stream on the server.
//
//   first answer seen          | ends as    | the waiter
//   ---------------------------+------------+----------------------------------------------
//   an event (filter NOPUT:    | changed    | returns: the key was deleted (released, its
//     only deletions)          |            | lease revoked or expired) since the revision
//   canceled, compact_revision | compacted  | re-reads the key (the revision is gone)
//   stream ends after created  | dropped    | re-reads the key (a member restart, a proxy)
//   error answer, no created,  | refused    | reports store_unavailable (backoff follows)
//     refused connection       |            |
//   nothing by the wake-up     | quiet      | returns: the holder's lease can have expired
//   the waiter's token stopped | cancelled  | returns cancelled (interrupt(): curl_multi_wakeup)
#ifndef HOLDFAST_STORES_DETAIL_ETCD_WATCH_HPP
#define HOLDFAST_STORES_DETAIL_ETCD_WATCH_HPP

#include <curl/curl.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>

#include "holdfast/cancel.hpp"
#include "holdfast/detail/config.hpp"
#include "holdfast/stores/detail/etcd_encoding.hpp"
#include "holdfast/stores/detail/etcd_json.hpp"
#include "holdfast/stores/detail/etcd_link.hpp"
#include "holdfast/stores/etcd_options.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

/// A holder seen by a busy answer or a read: the revision of that answer and the holder's lease.
struct etcd_sighting {
  std::string key;  // the etcd key name (key_prefix + encoded key)
  std::int64_t revision = 0;
  std::int64_t lease = 0;
  std::int64_t token = 0;  // the holder's create_revision (its token), where the read gave it
};

/// Each thread's last busy answer on one store, for its next wait. Guarded by the link's mutex.
class etcd_sightings {
 public:
  void note(const std::string& key, std::int64_t revision, std::int64_t lease) {
    if (seen_.size() >= 1024) seen_.clear();  // threads that never waited: forget them all
    etcd_sighting& s = seen_[std::this_thread::get_id()];
    s.key = key;
    s.revision = revision;
    s.lease = lease;
  }
  /// This thread's sighting of `key`, taken (a sighting of another key is dropped).
  std::optional<etcd_sighting> take(const std::string& key) {
    const auto it = seen_.find(std::this_thread::get_id());
    if (it == seen_.end()) return std::nullopt;
    std::optional<etcd_sighting> out;
    if (it->second.key == key) out = std::move(it->second);
    seen_.erase(it);
    return out;
  }

 private:
  std::unordered_map<std::thread::id, etcd_sighting> seen_;
};

struct curl_multi_deleter {
  void operator()(CURLM* m) const noexcept { curl_multi_cleanup(m); }
};

/// One watch of one key from one revision, on its own connection. Not thread-safe (one waiter).
class etcd_watch {
 public:
  enum class end { changed, compacted, dropped, refused, quiet, cancelled };

  /// A watch whose wait() a stop of `cancel` ends at once (interrupt(), from the stopping thread).
  explicit etcd_watch(const cancel_token& cancel = {}) : cancel_(cancel) {
    if (cancel_.stop_possible()) cancel_.on_stop(stop_, [this] { interrupt(); });
  }
  etcd_watch(const etcd_watch&) = delete;
  etcd_watch& operator=(const etcd_watch&) = delete;
  ~etcd_watch() { close(); }

  /// Starts the watch of `key` (raw etcd key bytes; with `range_end`, every key in [key,
  /// range_end)) for deletions from `from_revision` on (0: from the revision after the one the
  /// member has when it creates the watch), on `endpoint`, sending `auth_token` if not empty.
  /// Connects without blocking; wait() drives it. Returns false (with why()) if libcurl cannot be
  /// set up. A watch from a revision the member has already passed is "unsynced" in etcd: its
  /// events come from a sync loop that runs every 100 ms, so they may come up to 100 ms late; a
  /// watch from now is synced at once (wait_created() and created_revision() tell what it missed).
  bool open(const etcd_options& o, const std::string& endpoint, const std::string& auth_token,
            const std::string& key, std::int64_t from_revision,
            const std::string* range_end = nullptr) {
    close();
    if (!curl_ready()) return failed("etcd: curl_global_init failed");
    easy_.reset(curl_easy_init());
    {
      std::lock_guard<std::mutex> lk(multi_mu_);  // interrupt() may read multi_ meanwhile
      if (!multi_) multi_.reset(curl_multi_init());
    }
    body_.assign(R"({"create_request":{"key":")");
    base64_append(key, body_);
    if (range_end != nullptr) {
      body_ += R"(","range_end":")";
      base64_append(*range_end, body_);
    }
    if (from_revision > 0) body_ += R"(","start_revision":")" + std::to_string(from_revision);
    body_ += R"(","filters":["NOPUT"]}})";
    url_ = endpoint + o.api_path + "/watch";
    if (!easy_ || !multi_ || !set_headers(auth_token)) return failed("etcd: out of memory");
    CURL* h = easy_.get();
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, error_buffer_);
    curl_easy_setopt(h, CURLOPT_URL, url_.c_str());
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body_.data());
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body_.size()));
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers_.get());
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, &etcd_watch::on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, this);
    curl_easy_setopt(h, CURLOPT_HTTP_VERSION, static_cast<long>(CURL_HTTP_VERSION_1_1));
    curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(h, CURLOPT_PROXY, "");
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt(h, CURLOPT_PROTOCOLS, static_cast<long>(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
                     static_cast<long>(std::min<std::int64_t>(o.connect_timeout.count(),
                                                              std::numeric_limits<long>::max())));
    if (!o.ca_file.empty()) curl_easy_setopt(h, CURLOPT_CAINFO, o.ca_file.c_str());
    if (!o.cert_file.empty()) {
      curl_easy_setopt(h, CURLOPT_SSLCERT, o.cert_file.c_str());
      curl_easy_setopt(h, CURLOPT_SSLKEY, o.key_file.c_str());
    }
    if (curl_multi_add_handle(multi_.get(), h) != CURLM_OK) return failed("etcd: curl_multi");
    added_ = true;
    return true;
  }

  /// Sleeps until the watch ends (see the overview) or `wake` (steady clock): quiet; or until
  /// the constructor's token is stopped: cancelled (interrupt() ends the poll at once).
  end wait(std::chrono::steady_clock::time_point wake) {
    return *drive(wake, false);
  }

  /// As wait(), but returns nullopt as soon as the member has created the watch (an end if the
  /// watch ends first); created_revision() is then the member's revision at its creation.
  std::optional<end> wait_created(std::chrono::steady_clock::time_point wake) {
    return drive(wake, true);
  }

  /// The member's revision when it created the watch (its header's), 0 before.
  [[nodiscard]] std::int64_t created_revision() const noexcept {
    return created_revision_;
  }

  /// The revision of the deletion that ended the watch as changed (0: none, or unreadable).
  [[nodiscard]] std::int64_t event_revision() const noexcept {
    return event_revision_;
  }

  /// Ends the poll of a wait() in progress, or of the next one, at once (curl_multi_wakeup, which
  /// is thread-safe). Callable from any thread while this watch lives: cancel_token::on_stop's
  /// wake-up of the waiter's token.
  void interrupt() noexcept {
#if LIBCURL_VERSION_NUM >= 0x074400  // 7.68.0
    std::lock_guard<std::mutex> lk(multi_mu_);
    if (multi_) (void)curl_multi_wakeup(multi_.get());
#endif
  }

  /// Why the watch ended as refused, dropped or compacted.
  [[nodiscard]] const std::string& why() const noexcept {
    return why_;
  }

 private:
  // wait() and wait_created(): drives the transfer until the watch ends, or (until_created) it
  // is created (nullopt).
  std::optional<end> drive(std::chrono::steady_clock::time_point wake, bool until_created) {
    for (;;) {
      if (cancel_.stop_requested()) return end::cancelled;
      int running = 0;
      if (curl_multi_perform(multi_.get(), &running) != CURLM_OK) {
        return ended(end::refused, "etcd: watch: curl_multi_perform failed");
      }
      if (const std::optional<end> e = take_lines()) return *e;
      if (until_created && created_) return std::nullopt;
      if (running == 0) return finished();
      const auto now = std::chrono::steady_clock::now();
      if (now >= wake) return end::quiet;
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(wake - now).count();
      std::int64_t most = 60000;
#if LIBCURL_VERSION_NUM < 0x074400  // no curl_multi_wakeup: a stop is seen every slice
      if (cancel_.stop_possible()) most = cancel_wait_slice.count();
#endif
      const int ms = static_cast<int>(std::min<std::int64_t>(left, most));
      if (curl_multi_poll(multi_.get(), nullptr, 0, ms, nullptr) != CURLM_OK) {
        return ended(end::refused, "etcd: watch: curl_multi_poll failed");
      }
    }
  }

  // The multi handle stays for the next open(), so interrupt() never sees it change.
  void close() noexcept {
    if (added_) curl_multi_remove_handle(multi_.get(), easy_.get());
    added_ = false;
    easy_.reset();
    created_ = false;
    created_revision_ = 0;
    event_revision_ = 0;
    buffer_.clear();
  }

  bool failed(std::string why) {
    why_ = std::move(why);
    return false;
  }
  end ended(end e, std::string why) {
    why_ = std::move(why);
    return e;
  }

  bool set_headers(const std::string& token) {
    headers_.reset();
    const std::string auth = "Authorization: " + token;
    for (const char* h : {"Content-Type: application/json", "Accept: application/json", "Expect:",
                          token.empty() ? static_cast<const char*>(nullptr) : auth.c_str()}) {
      if (h == nullptr) continue;
      curl_slist* l = curl_slist_append(headers_.get(), h);
      if (l == nullptr) return false;
      (void)headers_.release();
      headers_.reset(l);
    }
    return true;
  }

  // The transfer ended: before the watch was created, a refusal; after, a dropped stream.
  end finished() {
    CURLcode rc = CURLE_OK;
    int left = 0;
    while (CURLMsg* m = curl_multi_info_read(multi_.get(), &left)) {
      if (m->msg == CURLMSG_DONE) rc = m->data.result;
    }
    std::string what = "etcd: watch on " + url_ + ": ";
    what += rc != CURLE_OK ? (error_buffer_[0] != '\0' ? std::string(error_buffer_)
                                                       : std::string(curl_easy_strerror(rc)))
                           : std::string("the stream ended");
    return ended(created_ ? end::dropped : end::refused, std::move(what));
  }

  // Judges every complete line received so far; the first that ends the watch decides.
  std::optional<end> take_lines() {
    std::size_t start = 0;
    std::optional<end> out;
    for (std::size_t nl; !out && (nl = buffer_.find('\n', start)) != std::string::npos;
         start = nl + 1) {
      out = judge(buffer_.substr(start, nl - start));
    }
    buffer_.erase(0, start);
    return out;
  }

  std::optional<end> judge(const std::string& line) {
    if (line.find_first_not_of(" \r\t") == std::string::npos) return std::nullopt;
    const nlohmann::json doc = nlohmann::json::parse(line, nullptr, false);
    const nlohmann::json* r = doc.is_object() ? json_object(doc, "result") : nullptr;
    if (r == nullptr) {
      return ended(created_ ? end::dropped : end::refused,
                   "etcd: watch on " + url_ + " answered: " + line.substr(0, 200));
    }
    bool created = false;
    bool canceled = false;
    std::int64_t compacted = 0;
    if (!json_bool(*r, "created", created) || !json_bool(*r, "canceled", canceled) ||
        !json_int64(*r, "compact_revision", compacted)) {
      return ended(end::refused, "etcd: watch: an answer of unexpected shape from " + url_);
    }
    if (created && !created_) {
      const nlohmann::json* header = json_object(*r, "header");
      if (header == nullptr || !json_int64(*header, "revision", created_revision_)) {
        return ended(end::refused, "etcd: watch: a created answer without a revision from " + url_);
      }
    }
    created_ = created_ || created;
    const auto events = r->find("events");
    if (events != r->end() && events->is_array() && !events->empty()) {
      for (const nlohmann::json& ev : *events) {  // the deletion's revision (0 if unreadable)
        const nlohmann::json* kv = ev.is_object() ? json_object(ev, "kv") : nullptr;
        std::int64_t rev = 0;
        if (kv != nullptr && json_int64(*kv, "mod_revision", rev)) {
          event_revision_ = std::max(event_revision_, rev);
        }
      }
      return end::changed;
    }
    if (compacted > 0) {
      return ended(end::compacted,
                   "etcd: watch: revision compacted (now " + std::to_string(compacted) + ")");
    }
    if (canceled) {
      return ended(created_ ? end::dropped : end::refused, "etcd: watch canceled: " + line);
    }
    return std::nullopt;
  }

  static std::size_t on_data(char* data, std::size_t size, std::size_t count, void* self) {
    auto* w = static_cast<etcd_watch*>(self);
    const std::size_t n = size * count;
    if (w->buffer_.size() + n > (std::size_t{16} << 20)) return 0;  // runaway: ends the stream
    w->buffer_.append(data, n);
    return n;
  }

  std::unique_ptr<CURL, curl_easy_deleter> easy_;
  std::mutex multi_mu_;  // guards setting multi_ against interrupt()
  std::unique_ptr<CURLM, curl_multi_deleter> multi_;
  std::unique_ptr<curl_slist, curl_slist_deleter> headers_;
  bool added_ = false;
  bool created_ = false;
  std::int64_t created_revision_ = 0;
  std::int64_t event_revision_ = 0;
  std::string url_;
  std::string body_;
  std::string buffer_;
  std::string why_;
  char error_buffer_[CURL_ERROR_SIZE] = {};
  cancel_token cancel_;
  cancel_token::waker stop_;  // last: unregistered before anything interrupt() touches goes
};

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_STORES_DETAIL_ETCD_WATCH_HPP
