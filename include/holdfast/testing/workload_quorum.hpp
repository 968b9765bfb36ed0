// SPDX-License-Identifier: MIT
// holdfast/testing/workload_quorum.hpp - the shipped quorum_store (quorum.hpp) inside the
// simulator, over 3 or 5 simulated members, driven by the lease workload generator
// (workload_plan.hpp) and judged by the checker, with negative controls that must be caught:
//
//   control                | the bug                                         | caught by
//   -----------------------+-------------------------------------------------+-----------
//   keeps_unsure_member    | quorum_options::give_back_unsure = false: a     | O1
//                          | member whose reply was lost keeps the owner's   |
//                          | lease until its TTL (the kind of redlock-rb #76)|
//   counts_failed_raise    | a lagging member whose raise (the second round, | S2 or S3
//                          | raise_token) fails is counted as raised: the    | (in its own
//                          | quorum reports a lease fewer than W members hold| set-up)
//   gives_back_live_grant  | quorum_options::keep_live_grant = false: a      | S3 or S4
//                          | failed re-acquire by a live holder releases its | (set-up with
//                          | own lease on the members it is unsure of, and a | re-acquires)
//                          | second owner is granted within its validity     |
//
// gives_back_live_grant is caught in a set-up with re-acquires by live holders
// (quorum_sim_options::reacquires, op_kind::reacquire): the plain schedules never re-acquire a
// lease they hold, so they cannot meet it.
//
// counts_failed_raise is caught in a set-up aimed at it (run_quorum_control): members often down
// for a while and every raise lost on the way. In the plain schedules a failed raise seldom
// matters (S3 once in 300 seeds with 5 members, f = 2, empty restarts; never with 3 members).
//
// The set-up, per schedule:
//   members    N sim_store<quorum_member_store>: each on its own simulated node and clock
//              (per-member drift), with request/reply delays, lost requests, lost replies
//              (applied, then an error), errors, and optionally restarts: durable (state kept)
//              or EMPTY (counter and records lost; a shared restart_budget bounds how many
//              members may do so per run). Recorded (each member a store the checker judges,
//              so O1 sees a member left holding a lease) when quorum_sim_options::record_members.
//   clients    each simulated client has its own quorum_store (as each process would),
//              sequential dispatch, on the client's own clock, which may be coarse: every clock
//              read inside the quorum is a point where the simulator may pause or crash it.
//   recording  a sim_store with faults off wraps the clients' quorums and records the
//              quorum-level operations; it is the primary store the checker judges S2-S5 and L1
//              on, and the resources (fenced) give S1. A quorum lease has no single clock, so the
//              recorder reports each grant or renewal as ending where the quorum's validity does:
//              where the client's clock reads the operation's first member request plus
//              ttl*(1-drift) - margin (quorum_front::validity_end; the quorum reads its start
//              before that send, and members apply it after), converted to the recorder's clock.
//              It places a grant where the quorum reported it and a renewal or release where it
//              was sent. A re-acquire by an owner whose reported grant is live as recorded is
//              placed where the W-th member's grant arrived (members hold the owner's lease from
//              then on: a renewal by another name). That the same owner may get its grant's
//              token again only inside this validity is what S2 then judges. A release the quorum
//              could not confirm is recorded as applied (the client still sees its error; sim_store
//              does so for a lost reply) if after it fewer than W members could release the lease
//              (a record of the owner under the token the quorum sends, live OR EXPIRED:
//              memory_store releases an expired record nobody took over), or if it shortened how
//              long W members keep the key from others (a crash or a 1 ms give-back cut it short);
//              then a second release of it is recorded as not applied. A release that did neither
//              may still be finished by the owner's next failed try_acquire, whose give-back (issue
//              22) releases the owner's records on the members it is unsure of: if that shortens
//              how long W members keep the key, the release is recorded as applied after all (where
//              it was sent, the only place the history has for it). The quorum's member records
//              (quorum_member_store) are detail/quorum_member_store.hpp.
//
// run_quorum_schedule(src, options) is the entry; the seeded search (tests/unit/
// test_quorum_sim.cpp), rapidcheck (tests/property/prop_quorum.cpp) and libFuzzer
// (fuzz/fuzz_quorum_schedule.cpp, through run_quorum_control()) call it.
// Thread-safety: one run per thread.
#ifndef HOLDFAST_TESTING_WORKLOAD_QUORUM_HPP
#define HOLDFAST_TESTING_WORKLOAD_QUORUM_HPP

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
#include "holdfast/stores/memory.hpp"
#include "holdfast/testing/checker.hpp"
#include "holdfast/testing/decision.hpp"
#include "holdfast/testing/detail/quorum_member_store.hpp"
#include "holdfast/testing/detail/schedule_runner.hpp"
#include "holdfast/testing/history.hpp"
#include "holdfast/testing/sim_store.hpp"
#include "holdfast/testing/simulator.hpp"
#include "holdfast/testing/workload.hpp"
#include "holdfast/testing/workload_plan.hpp"
#include "holdfast/validity.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace testing {

/// The quorum's negative controls (see the table at the top of workload_quorum.hpp).
enum class quorum_mutant : std::uint8_t {
  none,
  keeps_unsure_member,    ///< quorum_options::give_back_unsure = false.
  counts_failed_raise,    ///< A member's failed raise_token answers as raised.
  gives_back_live_grant,  ///< quorum_options::keep_live_grant = false.
};

/// Every quorum_mutant but none.
inline constexpr quorum_mutant all_quorum_mutants[] = {quorum_mutant::keeps_unsure_member,
                                                       quorum_mutant::counts_failed_raise,
                                                       quorum_mutant::gives_back_live_grant};

/// Returns the control's name as in the table ("none" for none).
inline const char* to_string(quorum_mutant m) noexcept {
  switch (m) {
    case quorum_mutant::none:
      return "none";
    case quorum_mutant::keeps_unsure_member:
      return "keeps_unsure_member";
    case quorum_mutant::counts_failed_raise:
      return "counts_failed_raise";
    case quorum_mutant::gives_back_live_grant:
      return "gives_back_live_grant";
  }
  return "?";
}

/// Returns the control named `s` ("none" included), or nullopt.
inline std::optional<quorum_mutant> quorum_mutant_from_string(std::string_view s) noexcept {
  for (quorum_mutant m :
       {quorum_mutant::none, quorum_mutant::keeps_unsure_member, quorum_mutant::counts_failed_raise,
        quorum_mutant::gives_back_live_grant}) {
    if (s == to_string(m)) return m;
  }
  return std::nullopt;
}

/// How simulated members restart: not at all, keeping their state, or empty.
enum class quorum_restarts : std::uint8_t { none, durable, empty };

/// A quorum member on the simulated network (sim_store.hpp's fault stages).
using quorum_sim_member = sim_store<quorum_member_store>;

/// One quorum schedule's set-up.
struct quorum_sim_options {
  std::size_t members = 5;
  quorum_token_mode mode = quorum_token_mode::floor;
  std::size_t empty_restarts_tolerated = 0;  ///< quorum_options::empty_restarts
  quorum_restarts restarts = quorum_restarts::none;
  int empty_restart_budget = 0;  ///< Members that may restart empty, per run.
  /// Record the members' own operations too (each member a store node the checker judges), so
  /// O1 sees a member left holding a lease the quorum did not report (issue 22).
  bool record_members = false;
  /// Take members down often (durable restarts, weight 6 against 40: down for 0.1, 0.5 or 2 TTL)
  /// and lose every raise on the way until faults heal (detail::quorum_member_link): the set-up
  /// counts_failed_raise is caught in (with run_quorum_control's longer one-key workload).
  bool outages = false;
  /// Holders also re-acquire their own live leases (run_options::reacquires): the set-up
  /// gives_back_live_grant is caught in. Off by default, so the other set-ups draw what they drew.
  bool reacquires = false;
  quorum_mutant mutation = quorum_mutant::none;
};

/// What one quorum schedule did.
struct quorum_run {
  run_result run;
  int empty_restarts = 0;  ///< How many members did restart empty.
};

namespace detail {

// The members' faults: all of them, restarts as `restarts` says, and delays a little rarer than
// sim_store's default (weight 6 against 40, not 10): the rate these schedules were written with.
// With `outages`, members go down for a while often (durable restarts at weight 6).
inline store_fault_options quorum_member_faults(quorum_restarts restarts, bool outages = false) {
  store_fault_options f;
  f.restarts = restarts != quorum_restarts::none || outages;
  if (outages) f.restart_weight = 6;
  f.delay_weight = 6;
  return f;
}

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

// Adds q.members simulated members to `sim`, restarting as q says (empty restarts counted in
// `empty_restarts`, bounded by `budget`).
inline std::vector<std::unique_ptr<quorum_sim_member>> make_quorum_members(
    simulator& sim, const quorum_sim_options& q, restart_budget& budget, int& empty_restarts) {
  std::vector<std::unique_ptr<quorum_sim_member>> members;
  for (std::size_t i = 0; i < q.members; ++i) {
    members.push_back(std::make_unique<quorum_sim_member>(
        sim, "m" + std::to_string(i + 1),
        [](sim_clock c) { return std::make_unique<quorum_member_store>(c); },
        quorum_member_faults(q.restarts, q.outages)));
    quorum_sim_member& m = *members.back();
    m.record(q.record_members);  // by default the quorum-level operations alone are judged
    if (q.restarts == quorum_restarts::empty) {
      m.on_restart(
          [&m, &empty_restarts](std::unique_ptr<quorum_member_store>& s) {
            s = std::make_unique<quorum_member_store>(m.clock());  // counter and records gone
            ++empty_restarts;
          },
          &budget);
    }
  }
  return members;
}

// The quorum's options for one schedule.
inline quorum_options quorum_sim_quorum_options(const quorum_sim_options& q, const run_options& o) {
  quorum_options qo;
  qo.dispatch = quorum_dispatch::sequential;
  qo.token_mode = q.mode;
  qo.empty_restarts = q.empty_restarts_tolerated;
  qo.member_timeout = o.ttl;  // the share (10% of the TTL) decides
  qo.validity = o.validity;
  qo.give_back_unsure = q.mutation != quorum_mutant::keeps_unsure_member;
  qo.keep_live_grant = q.mutation != quorum_mutant::gives_back_live_grant;
  return qo;
}

}  // namespace detail

/// Runs one quorum schedule drawn from `src`: the workload (generate_workload(src, o)), then the
/// clients against their quorums of q.members simulated members, then (o.liveness) the L1
/// contenders; returns the history and the checker's verdict. Deterministic in `src`.
inline quorum_run run_quorum_schedule(decision_source& src, const quorum_sim_options& q,
                                      run_options o = {}) {
  if (q.restarts == quorum_restarts::empty) o.max_keys = 1;  // the restart bound is per key
  if (q.reacquires) o.reacquires = true;
  quorum_run out;
  out.run.plan = generate_workload(src, o);
  fault_options f = o.faults;
  f.scale = o.ttl;
  f.drift_bound = o.validity.drift;
  {
    simulator sim(src, f);
    for (std::uint32_t k = 0; k < out.run.plan.keys; ++k) {
      sim.log().keys.emplace_back(detail::key_name(k));
    }
    restart_budget budget{q.empty_restart_budget};
    const std::vector<std::unique_ptr<quorum_sim_member>> members =
        detail::make_quorum_members(sim, q, budget, out.empty_restarts);
    std::vector<quorum_sim_member*> ptrs;
    ptrs.reserve(members.size());
    for (const auto& m : members) ptrs.push_back(m.get());
    const quorum_options qo = detail::quorum_sim_quorum_options(q, o);
    store_fault_options quiet;
    quiet.request_delays = quiet.lost_requests = quiet.reply_delays = quiet.lost_replies = false;
    quiet.errors = quiet.restarts = false;
    sim_store<detail::quorum_front> recorder(
        sim, "quorum",
        [&](sim_clock c) {
          return std::make_unique<detail::quorum_front>(
              sim, c, ptrs, qo, o, q.mutation == quorum_mutant::counts_failed_raise, q.outages);
        },
        quiet);
    recorder.inner().set_recorder(&recorder);
    // A quorum of members on coarse clocks holds a grant like a store on a coarse clock: up to
    // two of the coarsest member's ticks beyond the TTL (store.hpp, T2). The recorder's own
    // clock, which quorum_front measures validity with, reads exactly; its history tick (which
    // the checker and the L1 bound read) is the coarsest member tick.
    std::int64_t tick = 0;
    for (const auto& m : members) tick = std::max(tick, sim.tick_ns(m->node()));
    sim.set_tick(recorder.node(), 0);
    sim.log().ticks.at(recorder.node()) = tick;
    sim.log().primary_store = recorder.node();
    sim.log().tolerance_ns = std::chrono::nanoseconds(o.tolerance).count();
    detail::schedule_runner<detail::quorum_front> runner(sim, recorder, out.run.plan, o);
    runner.run_clients();
    if (o.liveness) runner.run_liveness();
    out.run.log = std::move(sim.log());
    recorder.inner().amend(out.run.log);
  }
  out.run.result = check(out.run.log);
  return out;
}

/// The set-up the controls are caught in (and the fuzz harness fuzzes): three members, each
/// judged too (O1), running `m`; for counts_failed_raise members that are often down, raises
/// that never arrive (quorum_sim_options::outages) and one key under 96-192 operations; with
/// `reacquires` (gives_back_live_grant's set-up) holders re-acquire their own live leases.
/// Returns run_quorum_schedule's verdict.
inline verdict run_quorum_control(decision_source& src, quorum_mutant m, bool reacquires) {
  quorum_sim_options q;
  q.members = 3;
  q.record_members = true;
  q.mutation = m;
  q.reacquires = reacquires;
  run_options o;
  if (m == quorum_mutant::counts_failed_raise) {
    q.outages = true;
    o.max_keys = 1;
    o.min_ops = 96;
    o.max_ops = 192;
  } else if (reacquires) {  // one key under 96-192 operations: holders meet contenders
    o.max_keys = 1;
    o.min_ops = 96;
    o.max_ops = 192;
  }
  return run_quorum_schedule(src, q, o).run.result;
}

/// run_quorum_control in `m`'s own set-up: with re-acquires for gives_back_live_grant only (the
/// other set-ups, their measured rates and the kept fuzz inputs stay as they were).
inline verdict run_quorum_control(decision_source& src, quorum_mutant m) {
  return run_quorum_control(src, m, m == quorum_mutant::gives_back_live_grant);
}

/// Whether `v` is the invariant the checker names when it catches `m`: O1 for
/// keeps_unsure_member; S2 (a token issued again) or S3 (a second owner) for counts_failed_raise.
inline bool caught_as_expected(quorum_mutant m, invariant v) noexcept {
  switch (m) {
    case quorum_mutant::keeps_unsure_member:
      return v == invariant::o1_orphaned_grant;
    case quorum_mutant::counts_failed_raise:
      return v == invariant::s2_token_order || v == invariant::s3_exclusive_grants;
    case quorum_mutant::gives_back_live_grant:
      return v == invariant::s3_exclusive_grants || v == invariant::s4_holder_belief;
    case quorum_mutant::none:
      break;
  }
  return v == invariant::none;
}

}  // namespace testing
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_TESTING_WORKLOAD_QUORUM_HPP
