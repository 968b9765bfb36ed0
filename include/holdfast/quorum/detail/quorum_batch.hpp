// SPDX-License-Identifier: MIT
// holdfast/quorum/detail/quorum_batch.hpp - quorum_store::renew_batch (quorum.hpp): many renewals
// in ONE round, each member sent the whole batch at once (its own renew_batch when it has one,
// lease/detail/batch_renew.hpp, else its renew() once per lease on its worker), each lease judged
// exactly as quorum_store::renew judges its own round:
//
//   per lease  | outcome
//   -----------+--------------------------------------------------------------------------------
//   bad args   | errc::invalid_argument (check_renew_args), sent to no member
//   >= W       | renewed with its token and a positive TTL: {token, the smallest TTL applied}
//              | if validity is left (counted from before the round), errc::timeout otherwise
//   > N - W    | said lease_lost: errc::lease_lost
//   otherwise  | errc::store_unavailable (transient; renew is idempotent for the same owner, so
//              | a lost reply leaves nothing wrong and the holder retries)
//
// One lease's outcome says nothing about another's: a member that lost one lease of the batch
// (lease_lost for it) still renews the others. A member that fails as a whole (throws, times out,
// fails its connection) fails every lease of the batch on that member only. Under naive_max (the
// negative control) each member is sent its own token of each lease, as renew() does. A member's
// exception reaches the caller only when no lease of the batch was renewed (then rethrown after
// every outcome is written); the observer is not told each member's answer (renew() does). Not
// for users.
#ifndef HOLDFAST_QUORUM_DETAIL_QUORUM_BATCH_HPP
#define HOLDFAST_QUORUM_DETAIL_QUORUM_BATCH_HPP

#include <chrono>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "holdfast/detail/config.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/lease/detail/batch_renew.hpp"
#include "holdfast/quorum/detail/fan_out.hpp"
#include "holdfast/quorum/detail/quorum_round.hpp"
#include "holdfast/quorum_options.hpp"
#include "holdfast/result.hpp"
#include "holdfast/send_receive.hpp"
#include "holdfast/store.hpp"

namespace holdfast {
HOLDFAST_ABI_NAMESPACE_BEGIN
namespace detail {

// One member's replies to a batch: one per lease sent, or the member's failure as a whole.
struct quorum_batch_reply {
  explicit quorum_batch_reply(errc e) : whole(make_error_code(e)) {}
  explicit quorum_batch_reply(std::vector<result<grant>> v) : each(std::move(v)) {}
  std::vector<result<grant>> each;  // parallel to quorum_batch::sent, when !whole
  std::error_code whole;            // the member failed as a whole: every lease failed there

  // Lease k's reply from this member.
  [[nodiscard]] result<grant> at(std::size_t k) const {
    if (whole || k >= each.size()) return whole ? whole : make_error_code(errc::protocol_error);
    return each[k];
  }
};

// A batch's leases, copied so that a member's late reply (on its worker) can still use them.
struct quorum_batch {
  std::vector<quorum_args> leases;  // the leases sent (valid arguments), in request order
  std::vector<std::size_t> sent;    // sent[k]: the index in the caller's arrays of leases[k]
  std::chrono::milliseconds shortest{0};

  // Member i's requests (views into `leases`); a lease whose token for i is not issuable (naive
  // max: i granted nothing) is not sent to i and answered lease_lost, as renew() does.
  template <class Store>
  std::vector<result<grant>> renew_on(std::size_t i, Store& s) const {
    std::vector<result<grant>> out(leases.size(), result<grant>(errc::lease_lost));
    std::vector<store_request> q;
    std::vector<std::size_t> at;
    q.reserve(leases.size());
    at.reserve(leases.size());
    for (std::size_t k = 0; k < leases.size(); ++k) {
      const quorum_args& a = leases[k];
      if (!a.token_for(i).is_issuable()) continue;
      q.push_back(store_request{store_op::renew, a.key, a.owner, a.token_for(i), {}, a.ttl});
      at.push_back(k);
    }
    if constexpr (has_renew_batch_v<Store>) {
      std::vector<result<grant>> r(q.size(), result<grant>(errc::protocol_error));
      if (!q.empty()) s.renew_batch(q.data(), q.size(), r.data());
      for (std::size_t j = 0; j < at.size(); ++j) out[at[j]] = r[j];
    } else {
      for (std::size_t j = 0; j < at.size(); ++j) {
        out[at[j]] = s.renew(q[j].key, q[j].owner, q[j].token, q[j].ttl);
      }
    }
    return out;
  }
};

// Lease k's tally over the members' replies so far: renewed (its token, a positive TTL), lost.
struct quorum_batch_count {
  std::size_t renewed = 0, lost = 0;
  std::chrono::milliseconds applied{0};
};

inline quorum_batch_count count_batch_lease(
    const quorum_batch& b, std::size_t k, const std::vector<std::optional<quorum_batch_reply>>& v) {
  quorum_batch_count c;
  c.applied = b.leases[k].ttl;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (!v[i]) continue;
    const result<grant> x = v[i]->at(k);
    // As renew(): a renewal counts only with the token it was asked to extend and a TTL > 0.
    if (x && x->token == b.leases[k].token_for(i) && x->ttl > std::chrono::milliseconds::zero()) {
      ++c.renewed;
      if (x->ttl < c.applied) c.applied = x->ttl;
    } else if (!x && x.error() == errc::lease_lost) {
      ++c.lost;
    }
  }
  return c;
}

// The batch round of quorum_store::renew_batch: `tokens_of(key, owner, token)` gives naive_max's
// member tokens (empty otherwise); `validity_left(applied)` is the quorum's validity rule for
// the round's start. Writes out[0..n).
template <class Store, class Clock, class TokensOf, class ValidityLeft>
void quorum_renew_batch(const fan_out<Store, Clock>& exec, const quorum_options& opts,
                        std::size_t w, const store_request* q, std::size_t n, result<grant>* out,
                        const TokensOf& tokens_of, const ValidityLeft& validity_left) {
  auto b = std::make_shared<quorum_batch>();
  b->leases.reserve(n);
  b->sent.reserve(n);
  for (std::size_t j = 0; j < n; ++j) {
    std::error_code bad = check_renew_args(q[j].key, q[j].owner, q[j].token, q[j].ttl);
    if (!bad && q[j].op != store_op::renew) bad = make_error_code(errc::invalid_argument);
    if (bad) {
      out[j] = bad;
      continue;
    }
    b->leases.push_back(quorum_args{std::string(q[j].key), std::string(q[j].owner), q[j].token,
                                    q[j].ttl, tokens_of(q[j].key, q[j].owner, q[j].token)});
    b->sent.push_back(j);
    if (b->shortest == std::chrono::milliseconds::zero() || q[j].ttl < b->shortest) {
      b->shortest = q[j].ttl;
    }
  }
  if (b->sent.empty()) return;
  using R = quorum_batch_reply;
  const std::shared_ptr<const quorum_batch> batch = b;
  auto r = exec.template run_round<R>(
      exec.all_members(), true, member_wait(opts, batch->shortest),
      [batch](std::size_t i, Store& s) { return R(batch->renew_on(i, s)); },
      [batch, w](const std::vector<std::optional<R>>& on_time, std::size_t outstanding) {
        for (std::size_t k = 0; k < batch->leases.size(); ++k) {
          const quorum_batch_count c = count_batch_lease(*batch, k, on_time);
          if (c.renewed < w && c.renewed + outstanding >= w) return false;  // k still open
        }
        return true;
      });
  exec.finalize(r.round, nullptr);  // a late renewal only extends the lease
  std::size_t failed = 0;
  for (std::size_t k = 0; k < batch->leases.size(); ++k) {
    const quorum_batch_count c = count_batch_lease(*batch, k, r.on_time);
    result<grant>& o = out[batch->sent[k]];
    if (c.renewed >= w) {
      if (validity_left(c.applied)) {
        o = grant{batch->leases[k].token, c.applied};
      } else {
        o = errc::timeout;
      }
    } else {
      ++failed;
      o = c.lost > exec.size() - w ? errc::lease_lost : errc::store_unavailable;
    }
  }
  // A member's exception reaches the caller only if no lease of the batch was renewed: otherwise
  // it would discard the renewals that succeeded (each failed lease says store_unavailable).
  if (failed == batch->leases.size()) exec.rethrow_member_exception(r.round);
}

}  // namespace detail
HOLDFAST_ABI_NAMESPACE_END
}  // namespace holdfast

#endif  // HOLDFAST_QUORUM_DETAIL_QUORUM_BATCH_HPP
