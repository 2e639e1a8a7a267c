#!/usr/bin/env bash
# `make testbed`: bring the local cluster up if it is down (the one `make
# demo` leaves up is reused), then run `caravan testbed` on it. Extra flags go
# through TESTBED_FLAGS, e.g. TESTBED_FLAGS="--jobs 16 --seed 3".
# CLIENTS=N (make testbed CLIENTS=4) runs on N Nomad clients of two
# simulated GPUs each (a running cluster of another size is restarted), if
# memory allows about 512 MiB per client.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export CARAVAN_CLUSTER_DIR=${CARAVAN_CLUSTER_DIR:-$root/build/cluster}
export CARAVAN_PORT_BASE=${CARAVAN_PORT_BASE:-14600}
export CARAVAN_CLIENTS=${CLIENTS:-${CARAVAN_CLIENTS:-2}}
eval "$(scripts/cluster.sh env)"

# Each client: its agent and plugins (~180 MiB) and up to four tasks.
avail=$(awk '/^MemAvailable:/ {print int($2 / 1024)}' /proc/meminfo)
need=$((CARAVAN_CLIENTS * 512))
if (( CARAVAN_CLIENTS > 2 && avail < need )); then
  echo "testbed: CLIENTS=$CARAVAN_CLIENTS needs about $need MiB free, $avail MiB is available" >&2
  exit 1
fi

scripts/cluster.sh up

# shellcheck disable=SC2086 # TESTBED_FLAGS is a list of flags
exec build/caravan testbed \
  --root "$root" \
  --nomad-bin "${NOMAD_BIN:-$root/build/bin/nomad}" \
  --caravan-bin "$CARAVAN_CLUSTER_DIR/plugins/caravan" \
  --nomad-addr "$NOMAD_ADDR" \
  --consul-addr "$CONSUL_HTTP_ADDR" \
  --clients "$CARAVAN_CLIENTS" \
  --out "${TESTBED_OUT:-$root/build/testbed}" ${TESTBED_FLAGS:-}
