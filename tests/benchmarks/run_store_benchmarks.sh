#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds the real-store benchmarks (Release) and runs them against local servers in three
# placements, each with fresh servers from .ci/servers:
#
#   unpinned   servers and client wherever the scheduler puts them
#   split      servers on CPU 1, client on CPU 0 (taskset): the setting of the 1.1x target
#   pinned     servers and client all on CPU 0: round trips get cheap and script cost shows
#
# PostgreSQL runs with durable commits here (fsync=on), unlike the scratch servers of the tests,
# and its streaming standby is a synchronous one (synchronous_standby_names = '*') that only the
# sessions of bench_postgres_sync's "sync" variant wait for: the server's default is
# synchronous_commit = local, which for every other session is what `on` is without a
# synchronous standby (the commit waits for the primary's own flush).
# Usage: bash tests/benchmarks/run_store_benchmarks.sh [extra Google Benchmark flags];
# BENCH_MIN_TIME (default 2 s per benchmark) sets the run length.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="$root/build/bench-stores"
export HOLDFAST_SERVERS_DIR="$root/build/bench-servers"
export HOLDFAST_PG_OPTIONS="-c fsync=on -c synchronous_commit=local -c synchronous_standby_names=*"

cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DHOLDFAST_BUILD_TESTS=OFF \
  -DHOLDFAST_BUILD_EXAMPLES=OFF -DHOLDFAST_BUILD_FUZZ=OFF -DHOLDFAST_BUILD_BENCHMARKS=ON \
  -DHOLDFAST_WITH_REDIS=ON -DHOLDFAST_WITH_POSTGRES=ON -DHOLDFAST_WITH_ETCD=ON >/dev/null
cmake --build "$build" -j "${HOLDFAST_JOBS:-2}" --target holdfast_bench_redis holdfast_bench_postgres \
  holdfast_bench_etcd holdfast_bench_redis_ack holdfast_bench_postgres_sync

trap 'bash "$root/.ci/servers" stop' EXIT
placement() { # <name> <server cpus or ""> <client cpus or "">
  local name="$1" client=()
  [[ -n "$3" ]] && client=(taskset -c "$3")
  echo
  echo "=== $name: servers on CPUs '${2:-any}', client on CPUs '${3:-any}' ($(nproc) CPUs online)"
  HOLDFAST_SERVERS_TASKSET="$2" bash "$root/.ci/servers" start
  # shellcheck source=/dev/null
  source "$HOLDFAST_SERVERS_DIR/env"
  for b in redis redis_ack postgres postgres_sync etcd; do
    "${client[@]}" "$build/tests/holdfast_bench_$b" --benchmark_min_time="${BENCH_MIN_TIME:-2}" \
      --benchmark_counters_tabular=true "${@:4}"
  done
  bash "$root/.ci/servers" stop
}
placement unpinned "" "" "$@"
placement split 1 0 "$@"
placement pinned 0 0 "$@"
