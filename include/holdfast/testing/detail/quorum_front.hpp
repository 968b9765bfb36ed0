// SPDX-License-Identifier: MIT
// holdfast/testing/detail/quorum_front.hpp - the quorum simulation's recorder and member links
// (workload_quorum.hpp, whose overview's "recording" entry says what the recorder records and
// where it places each operation): quorum_member_link (how a client's quorum reaches one
// member, with the counts_failed_raise control's lie), send_probe (each client's first member
// request and each member grant as it arrives, for the recorder) and quorum_front (the store the
// clients' schedules call: it forwards to the client's quorum_store and records the quorum-level
// operations). Not for users. Thread-safety: one run per thread.
#ifndef HOLDFAST_TESTING_DETAIL_QUORUM_FRONT_HPP
#define HOLDFAST_TESTING_DETAIL_QUORUM_FRONT_HPP

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "holdfast/clock.hpp"
#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/observer.hpp"
#include "holdfast/quorum.hpp"
#include "holdfast/result.hpp"
#include "holdfast/store.hpp"
#include "holdfast/testing/checker.hpp"
#include "holdfast/testing/detail/quorum_member_store.hpp"
#include "holdfast/testing/history.hpp"
#include "holdfast/testing/sim_store.hpp"
#include "holdfast/testing/simulator.hpp"
#include "holdfast/testing/workload_plan.hpp"
#include "holdfast/validity.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace testing {

/// A quorum member on the simulated network (sim_store.hpp's fault stages).
using quorum_sim_member = sim_store<quorum_member_store>;

namespace detail {

// How a client's quorum reaches one member: straight through, except that counts_failed_raise
// answers a failed raise (refused, or lost on the way: a lagging member in the second round) as
// raised. The member's own history stays true.
//
// With `lost_raises` (the set-up counts_failed_raise is caught in, with members often down for
// a while: quorum_sim_options::outages) the link also loses every raise on the way (timeout; the
// member never sees it, so its history stays true): a quorum then holds a lease only where W
// members issued its top token themselves. Rounds granted by exactly W members, one of them
// lagging, are common, and so are later rounds that the member holding the top token misses: a
// failed raise counted as raised lets a majority issue that token again (S2) or grant the key
// to a second owner (S3). Measured: 43% of seeds (128 of 300), 0 of 1,000 for the shipped quorum.
//
// Each first-round request (try_acquire, renew) is reported to the recorder's send_probe, and so
// is each grant a member answers a try_acquire with, as it arrives.
class send_probe;

class quorum_member_link {
 public:
  quorum_member_link(quorum_sim_member& m, bool counts_failed_raise, simulator* lost_raises,
                     send_probe* sends = nullptr, std::size_t index = 0)
      : m_(m), lies_(counts_failed_raise), sim_(lost_raises), sends_(sends), index_(index) {}
  result<grant> try_acquire(std::string_view k, std::string_view o, std::chrono::milliseconds t);
  result<grant> renew(std::string_view k, std::string_view o, fencing_token tk,
                      std::chrono::milliseconds t);
  result<void> release(std::string_view k, std::string_view o, fencing_token tk) {
    return m_.release(k, o, tk);
  }
  result<void> raise_token(std::string_view k, std::string_view o, fencing_token tk,
                           fencing_token to) {
    const bool lost = sim_ != nullptr && sim_->current_node() != no_node && !sim_->healed();
    result<void> r = lost ? result<void>(errc::timeout) : m_.raise_token(k, o, tk, to);
    if (!r && lies_) return {};
    return r;
  }

 private:
  quorum_sim_member& m_;
  bool lies_;
  simulator* sim_;
  send_probe* sends_;
  std::size_t index_;  // which member
};

// Where each client's quorum sent its first member request since the recorder armed it: the
// recorder's clock and the client's own (exact) then. The quorum reads its start (quorum.hpp)
// before that send, and the client may be paused between the recorder's reading and the quorum's.
// One reading per client node.
class send_probe {
 public:
  struct send {
    sim_clock::time_point recorder{};
    std::int64_t client_local = 0;  // the client's clock, exact (ns)
    node_id client = no_node;
  };
  send_probe(simulator& sim, sim_clock recorder_clock) : sim_(sim), clock_(recorder_clock) {}
  void arm() { first_[sim_.current_node()].reset(); }
  void sent() {
    const node_id n = sim_.current_node();
    const auto it = first_.find(n);
    if (it != first_.end() && !it->second) it->second = send{clock_.now(), sim_.local_ns(n), n};
  }
  // Called with (key, owner, member) as a member's grant of a try_acquire arrives.
  std::function<void(std::string_view, std::string_view, std::size_t)> on_grant;

  // The first send since arm() (none if the quorum sent nothing); disarms.
  std::optional<send> take() {
    const auto it = first_.find(sim_.current_node());
    if (it == first_.end()) return std::nullopt;
    const std::optional<send> s = it->second;
    first_.erase(it);
    return s;
  }

 private:
  simulator& sim_;
  sim_clock clock_;
  std::map<node_id, std::optional<send>> first_;
};

inline result<grant> quorum_member_link::try_acquire(std::string_view k, std::string_view o,
                                                     std::chrono::milliseconds t) {
  if (sends_ != nullptr) sends_->sent();
  result<grant> r = m_.try_acquire(k, o, t);
  if (sends_ != nullptr && sends_->on_grant && r && r->token.is_issuable()) {
    sends_->on_grant(k, o, index_);
  }
  return r;
}

inline result<grant> quorum_member_link::renew(std::string_view k, std::string_view o,
                                               fencing_token tk, std::chrono::milliseconds t) {
  if (sends_ != nullptr) sends_->sent();
  return m_.renew(k, o, tk, t);
}

using member_quorum = quorum_store<quorum_member_link, sim_clock>;

// The LeaseStore the recorder wraps: routes each call to the calling client's own quorum_store
// and reports what is left of the grant's validity on the recorder's clock (see the header).
class quorum_front {
 public:
  quorum_front(simulator& sim, sim_clock recorder_clock, std::vector<quorum_sim_member*> members,
               quorum_options qo, run_options o, bool counts_failed_raise = false,
               bool outages = false)
      : sim_(sim),
        clock_(recorder_clock),
        members_(std::move(members)),
        qo_(qo),
        o_(o),
        sends_(sim, recorder_clock) {
    qo_.observer = &answers_;  // naive_max's member tokens
    sends_.on_grant = [this](std::string_view k, std::string_view ow, std::size_t i) {
      granted_by(k, ow, i);
    };
    for (quorum_sim_member* m : members_) {
      links_.push_back(std::make_unique<quorum_member_link>(
          *m, counts_failed_raise, outages ? &sim : nullptr, &sends_, links_.size()));
      link_ptrs_.push_back(links_.back().get());
    }
  }

  void set_recorder(sim_store<quorum_front>* r) { recorder_ = r; }

  result<grant> try_acquire(std::string_view key, std::string_view owner,
                            std::chrono::milliseconds ttl) {
    // The owner re-acquiring its lease, live as recorded: judged where W members answered the
    // first round granting it (see the header and member_answers).
    const auto rep = reported_.find(lease_id(key, owner));
    const node_id client = sim_.current_node();
    watches_.erase(client);
    if (recorder_ != nullptr && rep != reported_.end() && clock_.now() < rep->second.second) {
      watches_[client] = reacquire_watch{std::string(key), std::string(owner), {}, false, {}};
    }
    member_quorum& q = current();
    const auto t0 = clock_.now();
    answers_.granted.erase(lease_id(key, owner));
    // An unconfirmed release of this owner's lease, still recorded as not applied: a failed
    // try_acquire gives back the owner's records on the members it is unsure of (issue 22), so it
    // may end that lease: then the release is recorded as applied after all.
    const auto pending = unconfirmed_.find(lease_id(key, owner));
    std::vector<sim_clock::time_point> from;
    sim_clock::duration held = sim_clock::duration::zero();
    if (pending != unconfirmed_.end()) {
      for (quorum_sim_member* m : members_) from.push_back(m->clock().now());
      held = quorum_holds_for(key, owner, pending->second.second, q.quorum(), from);
    }
    sends_.arm();
    result<grant> g = q.try_acquire(key, owner, ttl);
    const sim_clock::time_point end = validity_end(sends_.take(), ttl, t0);
    std::optional<reacquire_watch> watched;
    if (const auto w = watches_.find(client); w != watches_.end()) {
      watched = std::move(w->second);
      watches_.erase(w);
    }
    const bool at_send = watched && watched->placed;
    if (pending != unconfirmed_.end()) {
      if (g) {
        unconfirmed_.erase(pending);  // a new grant of this owner replaces that lease anyway
      } else if (held > sim_clock::duration::zero() &&
                 quorum_holds_for(key, owner, pending->second.second, q.quorum(), from) < held) {
        applied_releases_.push_back({pending->second.first, true});
        unconfirmed_.erase(pending);
      }
    }
    if (!g) return g;
    if (qo_.token_mode == quorum_token_mode::naive_max) {
      naive_[lease_id(key, owner)] = {g->token, answers_.granted[lease_id(key, owner)]};
    }
    const auto t1 = clock_.now();
    if (left_until(end, t1) <= std::chrono::milliseconds::zero()) {
      (void)q.release(key, owner, g->token);
      return errc::timeout;
    }
    // Placed where W members granted it (a re-acquire) or where it returned; either way it ends
    // where the quorum's validity does (validity_end).
    const sim_clock::time_point at = at_send ? watched->at : t1;
    const std::chrono::milliseconds until = left_until(end, at);
    reported_[lease_id(key, owner)] = {g->token, at + until};
    return grant{g->token, until};
  }

  result<grant> renew(std::string_view key, std::string_view owner, fencing_token token,
                      std::chrono::milliseconds) {
    if (recorder_ != nullptr) recorder_->linearized();  // judged where it was sent
    member_quorum& q = current();
    const auto placed = clock_.now();
    sends_.arm();
    result<grant> g = q.renew(key, owner, token, o_.ttl);  // the run's TTL, not the remainder
    const sim_clock::time_point end = validity_end(sends_.take(), o_.ttl, placed);
    if (!g) return g;
    if (left_until(end, clock_.now()) <= std::chrono::milliseconds::zero()) return errc::timeout;
    // Placed where the call began (the members extended the lease after that instant); it ends
    // where the quorum's validity does (validity_end). Counting the elapsed time again, or from
    // `placed`, would end the renewed lease before the quorum's validity does, and a same-owner
    // re-acquire inside that validity (the same grant) would look like a new grant of an ended
    // lease's token.
    const std::chrono::milliseconds until = left_until(end, placed);
    const auto rep = reported_.find(lease_id(key, owner));
    if (rep != reported_.end() && rep->second.first == token) rep->second.second = placed + until;
    return grant{token, until};
  }

  result<void> release(std::string_view key, std::string_view owner, fencing_token token) {
    // Judged where it was sent: members free the key from then on, not only when it returns.
    std::size_t event = static_cast<std::size_t>(-1);
    if (recorder_ != nullptr) {
      recorder_->linearized();
      event = sim_.log().events.size() - 1;  // linearized() just placed this call's event
    }
    member_quorum& q = current();
    const std::size_t carried = carrying(key, owner, token);
    std::vector<sim_clock::time_point> from;  // each member's clock when the release was sent
    for (quorum_sim_member* m : members_) from.push_back(m->clock().now());
    const sim_clock::duration held = quorum_holds_for(key, owner, token, q.quorum(), from);
    result<void> r = q.release(key, owner, token);
    // The quorum could not confirm it (a reply lost, the client died half-way), yet of the W
    // members that could release the lease when it was sent, fewer can now: it did take effect.
    unconfirmed_.erase(lease_id(key, owner));
    const auto rep = reported_.find(lease_id(key, owner));
    if (rep != reported_.end() && rep->second.first == token) reported_.erase(rep);
    if (!r && carried >= q.quorum() && carrying(key, owner, token) < q.quorum()) {
      applied_releases_.push_back({event, false});
    } else if (!r && held > sim_clock::duration::zero() &&
               quorum_holds_for(key, owner, token, q.quorum(), from) < held) {
      // It shortened how long W members keep the key from others: it took effect, though
      // expired records may still take a second release (amend() records it as not applied).
      applied_releases_.push_back({event, true});
    } else if (!r && held > sim_clock::duration::zero() && event != static_cast<std::size_t>(-1)) {
      // Not yet: the owner's next try_acquire may finish it (try_acquire()).
      unconfirmed_[lease_id(key, owner)] = {event, token};
    }
    if (r || r.error() == errc::not_holder) naive_.erase(lease_id(key, owner));  // as the quorum
    return r;
  }

  // Marks the releases that took effect although the quorum reported an error as applied (the
  // client still saw the error), as sim_store does for a lost reply. After one that shortened the
  // hold (release()), a later release of the lease (before a new grant of it) only freed expired
  // records: it is recorded as not applied (the client still sees what it saw).
  void amend(history& h) const {
    for (const auto& a : applied_releases_) {
      if (a.first < h.events.size() && h.events[a.first].kind == event_kind::store_release) {
        h.events[a.first].outcome = 0;
      }
    }
    for (const auto& a : applied_releases_) {
      if (a.second && a.first < h.events.size() && h.events[a.first].outcome == 0) {
        unapply_later(h, a.first);
      }
    }
  }

 private:
  using lease_id_t = std::pair<std::string, std::string>;  // (key, owner)
  static lease_id_t lease_id(std::string_view key, std::string_view owner) {
    return {std::string(key), std::string(owner)};
  }

  // naive_max only: each member's token in the quorum's last acquire round per (key, owner), as
  // the quorum's observer reports them (the quorum sends each member its own token).
  // A re-acquire by the owner of a lease live as recorded: where W members answered its first
  // round with a grant, the members hold the owner's lease (under its token or a fresh one) and
  // nobody else can be granted the key; that is where the recorder places it (a grant of another
  // owner may end just before: placing it where it was sent would misorder the two).
  struct reacquire_watch {
    std::string key, owner;
    std::vector<char> granted;  // by member
    bool placed = false;
    sim_clock::time_point at{};  // on the recorder's clock
  };

  // The quorum's observer: each member's answer in each round, on the caller's fiber.
  struct member_answers final : lease_observer {
    std::map<lease_id_t, std::map<std::size_t, fencing_token>> granted;  // naive_max only
    void on_event(const lease_event& e) override {
      if (e.kind != lease_event_kind::quorum_member || e.operation != lease_operation::acquire) {
        return;
      }
      if (!e.answered || e.error) return;
      granted[lease_id(e.key, e.owner)][e.member] = e.token;
    }
  };

  // Member i's grant of a try_acquire, as it arrives on the caller's fiber (send_probe). The
  // quorum's observer reports a round's answers only at its end, which a pause of the client, or
  // a member's lost reply waited out, may put after the re-acquired lease's recorded end although
  // W members had extended it before: placed there, the same grant looked like a new grant of an
  // ended lease's token (S2 false alarms).
  void granted_by(std::string_view key, std::string_view owner, std::size_t i) {
    const auto w = watches_.find(sim_.current_node());
    if (w == watches_.end()) return;
    reacquire_watch& watch = w->second;
    if (watch.placed || key != watch.key || owner != watch.owner) return;
    watch.granted.resize(members_.size());
    watch.granted.at(i) = 1;
    const auto n =
        static_cast<std::size_t>(std::count(watch.granted.begin(), watch.granted.end(), char{1}));
    if (n < current().quorum()) return;
    recorder_->linearized();
    watch.placed = true;
    watch.at = sim_clock::time_point(sim_clock::duration(sim_.log().events.back().local_ns));
  }

  // Records the later releases of release i's lease (same recorder, key, owner and token, up to
  // a new grant of it) as not applied: the lease had already ended at release i.
  static void unapply_later(history& h, std::size_t i) {
    const event e = h.events[i];
    for (std::size_t j = i + 1; j < h.events.size(); ++j) {
      event& x = h.events[j];
      if (x.node != e.node || x.key != e.key || x.owner != e.owner || x.token != e.token) continue;
      if (x.kind == event_kind::store_acquire && x.outcome == 0) return;
      if (x.kind == event_kind::store_release && x.outcome == 0) x.outcome = not_applied;
    }
  }

  // The token the quorum sends member i for `owner`'s lease on `key` under quorum token `token`.
  fencing_token sent_token(std::string_view key, std::string_view owner, fencing_token token,
                           std::size_t i) const {
    const auto naive = naive_.find(lease_id(key, owner));
    if (naive == naive_.end() || naive->second.first != token) return token;
    const auto it = naive->second.second.find(i);
    return it == naive->second.second.end() ? fencing_token{} : it->second;
  }

  // How long from `from` (one reading per member) W members keep `owner`'s lease on `key` from
  // others: the W-th longest of the members' holds (zero or less: it is over).
  sim_clock::duration quorum_holds_for(std::string_view key, std::string_view owner,
                                       fencing_token token, std::size_t w,
                                       const std::vector<sim_clock::time_point>& from) const {
    std::vector<sim_clock::duration> holds;
    for (std::size_t i = 0; i < members_.size(); ++i) {
      const fencing_token sent = sent_token(key, owner, token, i);
      holds.push_back(sent.is_issuable() ? members_[i]->inner().held_for(key, owner, sent, from[i])
                                         : sim_clock::duration::zero());
    }
    std::sort(holds.begin(), holds.end(), std::greater<>());
    return w == 0 || w > holds.size() ? sim_clock::duration::zero() : holds[w - 1];
  }

  // How many members would release `owner`'s lease on `key` with quorum token `token` now: those
  // still carrying the record, live or expired, under the token the quorum sends them (an
  // observer's look, outside the simulated network).
  std::size_t carrying(std::string_view key, std::string_view owner, fencing_token token) const {
    std::size_t n = 0;
    for (std::size_t i = 0; i < members_.size(); ++i) {
      const fencing_token sent = sent_token(key, owner, token, i);
      n += sent.is_issuable() && members_[i]->inner().carries(key, owner, sent) ? 1 : 0;
    }
    return n;
  }

  // Where, on the recorder's clock, the quorum's validity of a grant of `ttl` whose first request
  // left at `s` ends: where the client's clock reads `s` plus the trusted span, converted at the
  // recorder clock's rate. The quorum's own validity ends no later (quorum_validity_left: from its
  // start, read before that send, rounded down by the client's tick, which it counts as elapsed).
  // Counted on the recorder's clock from its own reading before the call instead, it ended earlier
  // by any pause of the client between the two readings and by the two clocks' drift, and a
  // same-owner re-acquire inside the quorum's validity (the same grant: members hold it,
  // quorum_book.hpp) looked like a new grant of an ended lease's token (S2 false alarms). It ends
  // no later than the members' leases if the quorum's validity does not (members apply the request
  // after it was sent): what the client is told is judged. Without a send, from `none_sent` on the
  // recorder's clock (its tick counted as elapsed, T2).
  sim_clock::time_point validity_end(const std::optional<send_probe::send>& s,
                                     std::chrono::milliseconds ttl,
                                     sim_clock::time_point none_sent) const {
    const auto span =
        std::chrono::duration_cast<sim_clock::duration>(trusted_span(ttl, o_.validity));
    if (!s) return none_sent + span - clock_tick(clock_);
    const std::int64_t client_end = s->client_local + span.count();
    const std::int64_t at = sim_.true_time_at(s->client, client_end);  // not before now
    const node_id r = clock_.node();
    const std::int64_t ahead = (at - sim_.now_ns()) * (1000000 + sim_.skew_ppm(r)) / 1000000;
    return sim_clock::time_point(sim_clock::duration(sim_.local_ns(r) + ahead));
  }

  // The whole milliseconds from `at` to `end` on the recorder's clock (zero or less: ended).
  static std::chrono::milliseconds left_until(sim_clock::time_point end, sim_clock::time_point at) {
    return std::chrono::floor<std::chrono::milliseconds>(end - at);
  }

  member_quorum& current() {
    const node_id n = sim_.current_node();
    std::unique_ptr<member_quorum>& q = quorums_[n];
    if (!q) {
      const sim_clock c = n == no_node ? clock_ : sim_.clock(n);
      q = std::make_unique<member_quorum>(link_ptrs_, qo_, c);
    }
    return *q;
  }

  simulator& sim_;
  sim_clock clock_;
  std::vector<quorum_sim_member*> members_;
  std::vector<std::unique_ptr<quorum_member_link>> links_;
  std::vector<quorum_member_link*> link_ptrs_;  // what each client's quorum is built over
  quorum_options qo_;
  run_options o_;
  sim_store<quorum_front>* recorder_ = nullptr;
  std::map<node_id, std::unique_ptr<member_quorum>> quorums_;
  // History indices of releases to record as applied, each with whether it shortened the hold
  // (release()), so that later releases of the lease are recorded as not applied.
  std::vector<std::pair<std::size_t, bool>> applied_releases_;
  // (key, owner) -> (history index, token) of the owner's last release the quorum could not
  // confirm and that did not shorten the hold, until the owner's next grant or release.
  std::map<lease_id_t, std::pair<std::size_t, fencing_token>> unconfirmed_;
  // (key, owner) -> the last grant reported and, on the recorder's clock, the end of the lease
  // as recorded (a grant's or renewal's), until released.
  std::map<lease_id_t, std::pair<fencing_token, sim_clock::time_point>> reported_;
  send_probe sends_;  // where each client's quorum sent its first request (validity from there)
  member_answers answers_;
  // The re-acquire under way per client node, if any: clients interleave (one's pause lets the
  // others run), and one shared watch was dropped by another client's call.
  std::map<node_id, reacquire_watch> watches_;
  // naive_max only: (key, owner) -> (quorum token, member -> that member's token).
  std::map<lease_id_t, std::pair<fencing_token, std::map<std::size_t, fencing_token>>> naive_;
};

}  // namespace detail
}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_DETAIL_QUORUM_FRONT_HPP
