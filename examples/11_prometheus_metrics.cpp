// SPDX-License-Identifier: MIT
// Example 11: lease events as Prometheus metrics, written by hand (no metrics library).
//
// A holdfast::lease_observer (observer.hpp) is told what leases do: every acquire attempt and its
// outcome with the wait and the store's latency, renewals, losses with their cause, releases, and
// each quorum member's answers. This one keeps counters and latency histograms and prints them in
// Prometheus' text exposition format
// (https://prometheus.io/docs/instrumenting/exposition_formats/), the names following Prometheus'
// conventions: counters end in `_total`, durations are in seconds and end in `_seconds`. Serve
// metrics_text() from your /metrics endpoint.
//
// What to alert on (README "Metrics"):
//   increase(holdfast_leases_lost_total[5m]) > 0
//       a holder lost a lease it thought it had; `cause` says why (validity_passed: its renewals
//       came too late, e.g. a stall; renew_refused: the store had expired it or given it away)
//   rate(holdfast_renewals_total{outcome!="ok"}[5m]) > 0
//       renewals are failing: the store is unhealthy and losses will follow within one TTL
//
// The run below makes a few of each event on an in-process store and a three-member quorum,
// prints the metrics, and checks that they say what happened. It sleeps for real for ~0.2 s.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <vector>

#include "holdfast/holdfast.hpp"
#include "holdfast/observer.hpp"
#include "holdfast/quorum.hpp"

namespace {

using namespace std::chrono_literals;

// A Prometheus histogram: cumulative buckets (upper bounds in seconds), a sum and a count.
class histogram {
 public:
  static constexpr double bounds[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                      0.1,    0.25,  0.5,    1,     2.5,  5,     10};
  static constexpr std::size_t n = sizeof bounds / sizeof bounds[0];

  void observe(std::chrono::nanoseconds d) {
    const double s = std::chrono::duration<double>(d).count();
    for (std::size_t i = 0; i < n; ++i) {
      if (s <= bounds[i]) ++counts_[i];
    }
    ++count_;
    sum_ += s;
  }

  // Appends the `_bucket`, `_sum` and `_count` lines of `name` with `labels` ("" or "a=\"b\"").
  void write(std::string& out, const std::string& name, const std::string& labels) const {
    char buf[256];
    const std::string sep = labels.empty() ? "" : labels + ",";
    for (std::size_t i = 0; i < n; ++i) {
      std::snprintf(buf, sizeof buf, "%s_bucket{%sle=\"%g\"} %llu\n", name.c_str(), sep.c_str(),
                    bounds[i], static_cast<unsigned long long>(counts_[i]));
      out += buf;
    }
    std::snprintf(buf, sizeof buf, "%s_bucket{%sle=\"+Inf\"} %llu\n", name.c_str(), sep.c_str(),
                  static_cast<unsigned long long>(count_));
    out += buf;
    const std::string braces = labels.empty() ? "" : "{" + labels + "}";
    std::snprintf(buf, sizeof buf, "%s_sum%s %.9f\n%s_count%s %llu\n", name.c_str(), braces.c_str(),
                  sum_, name.c_str(), braces.c_str(), static_cast<unsigned long long>(count_));
    out += buf;
  }

 private:
  unsigned long long counts_[n] = {};
  unsigned long long count_ = 0;
  double sum_ = 0;
};

// A label value in the exposition format: backslash, double quote and newline escaped.
std::string label(std::string_view v) {
  std::string out;
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

// The outcome label of an event: "ok" or the error's name in holdfast's vocabulary.
std::string outcome(const std::error_code& ec) {
  if (!ec) return "ok";
  if (ec.category() == holdfast::error_category()) {
    switch (static_cast<holdfast::errc>(ec.value())) {
      case holdfast::errc::busy:
        return "busy";
      case holdfast::errc::lease_lost:
        return "lease_lost";
      case holdfast::errc::not_holder:
        return "not_holder";
      case holdfast::errc::timeout:
        return "timeout";
      case holdfast::errc::store_unavailable:
        return "store_unavailable";
      case holdfast::errc::invalid_argument:
        return "invalid_argument";
      case holdfast::errc::protocol_error:
        return "protocol_error";
      case holdfast::errc::token_exhausted:
        return "token_exhausted";
      case holdfast::errc::token_reissued:
        return "token_reissued";
      case holdfast::errc::misconfigured:
        return "misconfigured";
      case holdfast::errc::permission_denied:
        return "permission_denied";
      case holdfast::errc::cancelled:
        return "cancelled";
      case holdfast::errc::grant_not_durable:
        return "grant_not_durable";
      default:
        return "error";
    }
  }
  return "store_error";  // a store's own error category (a transport error, say)
}

// Turns lease events into Prometheus metrics. Thread-safe: events may come from any thread.
class prometheus_observer final : public holdfast::lease_observer {
 public:
  void on_event(const holdfast::lease_event& e) override {
    using K = holdfast::lease_event_kind;
    const std::string key = label(e.key);
    std::lock_guard<std::mutex> lock(mu_);
    switch (e.kind) {
      case K::acquire_attempt:
        ++counters_["holdfast_acquire_attempts_total"]
                   ["key=\"" + key + "\",outcome=\"" + outcome(e.error) + "\""];
        latency_["operation=\"acquire\""].observe(e.store_latency);
        break;
      case K::acquired:
      case K::acquire_failed:
        ++counters_["holdfast_acquires_total"]
                   ["key=\"" + key + "\",outcome=\"" + outcome(e.error) + "\""];
        wait_["key=\"" + key + "\""].observe(e.wait);
        if (e.kind == K::acquired) live_.insert({std::string(e.key), std::string(e.owner)});
        break;
      case K::renewed:
      case K::renew_failed:
        ++counters_["holdfast_renewals_total"]["key=\"" + key + "\",outcome=\"" + outcome(e.error) +
                                               "\",by=\"" + (e.keepalive ? "keepalive" : "holder") +
                                               "\""];
        if (e.store_latency.count() > 0 || e.kind == K::renewed) {
          latency_["operation=\"renew\""].observe(e.store_latency);
        }
        break;
      case K::lost:
        ++counters_["holdfast_leases_lost_total"]
                   ["key=\"" + key + "\",cause=\"" + holdfast::to_string(e.cause) + "\""];
        live_.erase({std::string(e.key), std::string(e.owner)});
        break;
      case K::released:
      case K::release_failed:
        ++counters_["holdfast_releases_total"]
                   ["key=\"" + key + "\",outcome=\"" + outcome(e.error) + "\""];
        latency_["operation=\"release\""].observe(e.store_latency);
        if (e.kind == K::released) live_.erase({std::string(e.key), std::string(e.owner)});
        break;
      case K::quorum_member:
        ++counters_["holdfast_quorum_member_replies_total"]
                   ["member=\"" + std::to_string(e.member) + "\",operation=\"" +
                    holdfast::to_string(e.operation) + "\",outcome=\"" +
                    (e.answered ? outcome(e.error) : std::string("no_reply")) + "\""];
        break;
    }
  }

  // The metrics in Prometheus' text format.
  std::string metrics_text() const {
    static const std::map<std::string, const char*> help = {
        {"holdfast_acquire_attempts_total", "Store try_acquire calls, by outcome."},
        {"holdfast_acquires_total", "try_acquire()/acquire() calls, by outcome."},
        {"holdfast_renewals_total", "Lease renewals, by outcome and by whom."},
        {"holdfast_leases_lost_total", "Leases lost while their holder held them, by cause."},
        {"holdfast_releases_total", "Lease releases, by outcome."},
        {"holdfast_quorum_member_replies_total", "Quorum members' answers, by outcome."},
    };
    std::lock_guard<std::mutex> lock(mu_);
    std::string out;
    for (const auto& [name, series] : counters_) {
      out += "# HELP " + name + " " + help.at(name) + "\n# TYPE " + name + " counter\n";
      for (const auto& [labels, value] : series) {
        out += name + "{" + labels + "} " + std::to_string(value) + "\n";
      }
    }
    out += "# HELP holdfast_leases_held Leases held now (acquired, not yet lost or released).\n";
    out += "# TYPE holdfast_leases_held gauge\n";
    std::map<std::string, int> held;
    for (const auto& l : live_) ++held[l.first];
    for (const auto& [key, count] : held) {
      out += "holdfast_leases_held{key=\"" + label(key) + "\"} " + std::to_string(count) + "\n";
    }
    out += "# HELP holdfast_acquire_wait_seconds Time from an acquire call to its outcome.\n";
    out += "# TYPE holdfast_acquire_wait_seconds histogram\n";
    for (const auto& [labels, h] : wait_) h.write(out, "holdfast_acquire_wait_seconds", labels);
    out += "# HELP holdfast_store_latency_seconds Time a store call took, by operation.\n";
    out += "# TYPE holdfast_store_latency_seconds histogram\n";
    for (const auto& [labels, h] : latency_) h.write(out, "holdfast_store_latency_seconds", labels);
    return out;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::map<std::string, unsigned long long>> counters_;
  std::map<std::string, histogram> wait_;
  std::map<std::string, histogram> latency_;
  std::set<std::pair<std::string, std::string>> live_;  // (key, owner) of leases held
};

// A store that is down for renewals while `down` is set (to show renew failures).
struct flaky_store {
  holdfast::memory_store<> inner;
  bool down = false;
  holdfast::result<holdfast::grant> try_acquire(std::string_view k, std::string_view o,
                                                std::chrono::milliseconds ttl) {
    if (down) return holdfast::errc::store_unavailable;
    return inner.try_acquire(k, o, ttl);
  }
  holdfast::result<holdfast::grant> renew(std::string_view k, std::string_view o,
                                          holdfast::fencing_token t,
                                          std::chrono::milliseconds ttl) {
    if (down) return holdfast::errc::store_unavailable;
    return inner.renew(k, o, t, ttl);
  }
  holdfast::result<void> release(std::string_view k, std::string_view o,
                                 holdfast::fencing_token t) {
    if (down) return holdfast::errc::store_unavailable;
    return inner.release(k, o, t);
  }
  holdfast::result<void> raise_token(std::string_view k, std::string_view o,
                                     holdfast::fencing_token from, holdfast::fencing_token to) {
    if (down) return holdfast::errc::store_unavailable;
    return inner.raise_token(k, o, from, to);
  }
};

bool has(const std::string& text, const std::string& line) {
  return text.find(line) != std::string::npos;
}

}  // namespace

int main() {
  prometheus_observer metrics;
  flaky_store store;
  holdfast::acquire_options<> opts;
  opts.observer = &metrics;

  // A acquires; B finds the key busy, then waits 50 ms for it in vain.
  opts.owner = "worker-a";
  auto a = holdfast::try_acquire(store, "orders", 2s, opts);
  if (!a) return 1;
  opts.owner = "worker-b";
  if (holdfast::try_acquire(store, "orders", 2s, opts).error() != holdfast::errc::busy) return 1;
  if (holdfast::acquire(store, "orders", 2s, 50ms, opts).error() != holdfast::errc::timeout) {
    return 1;
  }
  // A renews; the store goes down for one renewal; A renews again and releases; B gets the key.
  if (!a->renew()) return 1;
  store.down = true;
  if (a->renew().error() != holdfast::errc::store_unavailable) return 1;
  store.down = false;
  if (!a->renew() || !a->release()) return 1;
  auto b = holdfast::acquire(store, "orders", 2s, 1s, opts);
  if (!b) return 1;
  // C holds "ledger" for 100 ms and stalls past its validity: the lease is lost.
  opts.owner = "worker-c";
  auto c = holdfast::try_acquire(store, "ledger", 100ms, opts);
  if (!c) return 1;
  std::this_thread::sleep_for(120ms);
  if (c->valid()) return 1;
  // A quorum of three members, one of them down: each member's answers are counted.
  flaky_store m0, m1, m2;
  m2.down = true;
  holdfast::quorum_options qo;
  qo.observer = &metrics;
  holdfast::quorum_store<flaky_store> quorum({&m0, &m1, &m2}, qo);
  opts.owner = "worker-q";
  auto q = holdfast::try_acquire(quorum, "jobs", 2s, opts);
  if (!q || !q->release()) return 1;

  const std::string text = metrics.metrics_text();
  std::fputs(text.c_str(), stdout);
  // The metrics say what happened.
  const char* expected[] = {
      "# TYPE holdfast_acquire_attempts_total counter\n",
      "holdfast_acquires_total{key=\"orders\",outcome=\"busy\"} 1\n",
      "holdfast_acquires_total{key=\"orders\",outcome=\"timeout\"} 1\n",
      "holdfast_renewals_total{key=\"orders\",outcome=\"store_unavailable\",by=\"holder\"} 1\n",
      "holdfast_renewals_total{key=\"orders\",outcome=\"ok\",by=\"holder\"} 2\n",
      "holdfast_leases_lost_total{key=\"ledger\",cause=\"validity_passed\"} 1\n",
      "holdfast_releases_total{key=\"orders\",outcome=\"ok\"} 1\n",
      "holdfast_leases_held{key=\"orders\"} 1\n",
      ("holdfast_quorum_member_replies_total{member=\"2\",operation=\"acquire\","
       "outcome=\"store_unavailable\"} 1\n"),
      "holdfast_quorum_member_replies_total{member=\"0\",operation=\"acquire\",outcome=\"ok\"} 1\n",
      "# TYPE holdfast_acquire_wait_seconds histogram\n",
      "holdfast_acquire_wait_seconds_bucket{key=\"orders\",le=\"+Inf\"} 4\n",
      "holdfast_store_latency_seconds_count{operation=\"renew\"} 3\n",
  };
  for (const char* line : expected) {
    if (!has(text, line)) {
      std::fprintf(stderr, "missing from the metrics: %s", line);
      return 1;
    }
  }
  return 0;
}
