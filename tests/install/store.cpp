// SPDX-License-Identifier: MIT
// A consumer of real stores through their targets alone (holdfast::redis, holdfast::postgres,
// holdfast::etcd, holdfast::zookeeper; HOLDFAST_CONSUMER_<STORE> names which, one or several): each
// store's header compiles with the include paths its target brings, and the program links and runs
// against the client libraries. Each store asks a port nothing listens on, so the program expects
// an error, never a grant, and exits non-zero if it got a lease.
#include <chrono>
#include <cstdio>
#include <holdfast/holdfast.hpp>

#if !defined(HOLDFAST_CONSUMER_REDIS) && !defined(HOLDFAST_CONSUMER_POSTGRES) && \
    !defined(HOLDFAST_CONSUMER_ETCD) && !defined(HOLDFAST_CONSUMER_ZOOKEEPER)
#error "define HOLDFAST_CONSUMER_REDIS, _POSTGRES, _ETCD and/or _ZOOKEEPER"
#endif
#if defined(HOLDFAST_CONSUMER_REDIS)
#include <holdfast/stores/redis.hpp>
#endif
#if defined(HOLDFAST_CONSUMER_POSTGRES)
#include <holdfast/stores/postgres.hpp>
#endif
#if defined(HOLDFAST_CONSUMER_ETCD)
#include <holdfast/stores/etcd.hpp>
#endif
#if defined(HOLDFAST_CONSUMER_ZOOKEEPER)
#include <holdfast/stores/zookeeper.hpp>
#endif

namespace {

// Returns true if `store` refused to grant, as a store with no server must.
template <class Store>
bool refuses(const char* name, Store& store) {
  auto lease = holdfast::try_acquire(store, "consumer", std::chrono::seconds(10));
  if (lease) {
    std::printf("%s: granted a lease with no server\n", name);
    return false;
  }
  std::printf("%s: no server, as expected: %s\n", name, lease.error().message().c_str());
  return true;
}

}  // namespace

int main() {
  bool ok = true;
#if defined(HOLDFAST_CONSUMER_REDIS)
  holdfast::redis_options redis;
  redis.port = 1;  // nothing listens there: the connection is refused at once
  holdfast::redis_store redis_leases(redis);
  ok = refuses("redis", redis_leases) && ok;
#endif
#if defined(HOLDFAST_CONSUMER_POSTGRES)
  holdfast::postgres_options postgres;
  postgres.conninfo = "host=127.0.0.1 port=1 connect_timeout=2";
  holdfast::postgres_store postgres_leases(postgres);
  ok = refuses("postgres", postgres_leases) && ok;
#endif
#if defined(HOLDFAST_CONSUMER_ETCD)
  holdfast::etcd_options etcd;
  etcd.endpoints = {"http://127.0.0.1:1"};
  holdfast::etcd_store etcd_leases(etcd);
  ok = refuses("etcd", etcd_leases) && ok;
#endif
#if defined(HOLDFAST_CONSUMER_ZOOKEEPER)
  holdfast::zookeeper_options zookeeper;
  zookeeper.hosts = "127.0.0.1:1";
  zookeeper.connect_timeout = std::chrono::milliseconds(500);
  holdfast::zookeeper_store zookeeper_leases(zookeeper);
  ok = refuses("zookeeper", zookeeper_leases) && ok;
#endif
  return ok ? 0 : 1;
}
