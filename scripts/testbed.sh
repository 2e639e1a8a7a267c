#!/usr/bin/env bash
# `make testbed`: bring the local cluster up if it is down (the one `make
# demo` leaves up is reused), then run `caravan testbed` on it. Extra flags go
# through TESTBED_FLAGS, e.g. TESTBED_FLAGS="--jobs 16 --seed 3".
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export CARAVAN_CLUSTER_DIR=${CARAVAN_CLUSTER_DIR:-$root/build/cluster}
export CARAVAN_PORT_BASE=${CARAVAN_PORT_BASE:-14600}
eval "$(scripts/cluster.sh env)"

scripts/cluster.sh up

# shellcheck disable=SC2086 # TESTBED_FLAGS is a list of flags
exec build/caravan testbed \
  --root "$root" \
  --nomad-bin "$root/build/bin/nomad" \
  --caravan-bin "$CARAVAN_CLUSTER_DIR/plugins/caravan" \
  --nomad-addr "$NOMAD_ADDR" \
  --consul-addr "$CONSUL_HTTP_ADDR" \
  --out "${TESTBED_OUT:-$root/build/testbed}" ${TESTBED_FLAGS:-}
