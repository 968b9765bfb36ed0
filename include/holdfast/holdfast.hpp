// SPDX-License-Identifier: MIT
// holdfast/holdfast.hpp - the umbrella header: every core public header, nothing else.
//
// Leases with TTLs and fencing tokens over a store of your choice:
//   error.hpp, result.hpp     errc and result<T>: how every operation reports its outcome
//   fencing_token.hpp         the token every grant carries
//   clock.hpp, validity.hpp   TTL clocks (steady, manual) and how long a holder trusts its lease
//   backoff.hpp               exponential backoff with full jitter for blocking acquire
//   store.hpp                 the LeaseStore contract
//   stores/memory.hpp         memory_store, the in-process LeaseStore
//   stores/cas.hpp            cas_store: a LeaseStore on any compare-and-swap key-value store
//   stores/checked.hpp        checked_store: refuses a store's answers that break the contract
//   lease.hpp                 lease handles: try_acquire, acquire, renew, release, RAII, loss
//   keepalive.hpp             keepalive: one background thread renews many leases
//   mutex.hpp                 distributed_mutex: a lease as a std Lockable/TimedLockable
//   fence.hpp                 fence_gate, keyed_fence_gate, fenced<T>: admission by (token, owner)
//   quorum.hpp                quorum_store: one lease over N stores, monotonic quorum tokens
//   election.hpp              election: leader election, the term is the lease's fencing token
//   semaphore.hpp             semaphore: N permits, each a lease with its own token and TTL
//   observer.hpp              lease_observer: lease events (acquires, renewals, losses) for metrics
// Opt-in, not included here: stores/redis.hpp, stores/postgres.hpp (need their client libraries),
// testing/ (simulator, checker, conformance kit).
/// \file
/// The umbrella header: includes every core public header and declares nothing itself; each
/// included header documents its own contracts.
#ifndef HOLDFAST_HOLDFAST_HPP
#define HOLDFAST_HOLDFAST_HPP

#include "holdfast/backoff.hpp"
#include "holdfast/clock.hpp"
#include "holdfast/deployment.hpp"
#include "holdfast/election.hpp"
#include "holdfast/error.hpp"
#include "holdfast/fence.hpp"
#include "holdfast/fencing_token.hpp"
#include "holdfast/keepalive.hpp"
#include "holdfast/lease.hpp"
#include "holdfast/multi_lease.hpp"
#include "holdfast/mutex.hpp"
#include "holdfast/observer.hpp"
#include "holdfast/quorum.hpp"
#include "holdfast/read_write_lease.hpp"
#include "holdfast/recursive_mutex.hpp"
#include "holdfast/reentrant.hpp"
#include "holdfast/result.hpp"
#include "holdfast/semaphore.hpp"
#include "holdfast/send_receive.hpp"
#include "holdfast/step_point.hpp"
#include "holdfast/store.hpp"
#include "holdfast/store_deadline.hpp"
#include "holdfast/stores/cas.hpp"
#include "holdfast/stores/checked.hpp"
#include "holdfast/stores/memory.hpp"
#include "holdfast/validity.hpp"

#endif  // HOLDFAST_HOLDFAST_HPP
