#!/usr/bin/env bash
# `make demo`: starts the local cluster (simulated GPUs) and runs
# `caravan demo` against it: GPU sharing, a checkpointed training job that is
# suspended, resumed and migrated, the same trainer as a container (Nomad's
# docker driver, the image localhost/caravan-trainer:local built here)
# suspended and resumed, and the planner's decisions. Leaves the
# cluster up for the UI unless DEMO_TEARDOWN=1 (`make demo DEMO_TEARDOWN=1`).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export CARAVAN_CLUSTER_DIR=${CARAVAN_CLUSTER_DIR:-$root/build/cluster}
export CARAVAN_PORT_BASE=${CARAVAN_PORT_BASE:-14600}
eval "$(scripts/cluster.sh env)"

printf '\n\033[1m==> Building the container job'"'"'s image (cached under build/images; needs podman and dockerd: make e2e-deps)\033[0m\n'
scripts/build-images.sh caravan-trainer

printf '\n\033[1m==> Starting the local cluster: Consul, a Nomad server, two clients with simulated GPUs\033[0m\n'
scripts/cluster.sh up

teardown=()
[[ ${DEMO_TEARDOWN:-0} == 1 ]] && teardown=(-teardown)
status=0
build/caravan demo "${teardown[@]}" \
  -root "$root" \
  -nomad-bin "${NOMAD_BIN:-$root/build/bin/nomad}" \
  -caravan-bin "$CARAVAN_CLUSTER_DIR/plugins/caravan" \
  -state-dir "$CARAVAN_CLUSTER_DIR/checkpoints" \
  -checkpoint-store "$CARAVAN_CLUSTER_DIR/checkpoints" \
  -nomad-addr "$NOMAD_ADDR" \
  -consul-addr "$CONSUL_HTTP_ADDR" || status=$?

if [[ ${DEMO_TEARDOWN:-0} == 1 ]]; then
  scripts/cluster.sh down
elif [[ $status == 0 ]]; then
  echo
  echo "The cluster is still up: open $NOMAD_ADDR/ui; 'make cluster-down' stops it."
else
  echo "The cluster is still up for inspection (logs in $CARAVAN_CLUSTER_DIR/logs); 'make cluster-down' stops it."
fi
exit $status
