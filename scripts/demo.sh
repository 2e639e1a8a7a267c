#!/usr/bin/env bash
# `make demo`: starts the local cluster and runs caravan's main job end to
# end on simulated GPUs, then prints where to look. Leaves the cluster up
# unless DEMO_TEARDOWN=1 (`make demo DEMO_TEARDOWN=1`).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export CARAVAN_CLUSTER_DIR=${CARAVAN_CLUSTER_DIR:-$root/build/cluster}
export CARAVAN_PORT_BASE=${CARAVAN_PORT_BASE:-14600}
eval "$(scripts/cluster.sh env)"
nomad=$root/build/bin/nomad

step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
interrupted() { echo; echo "demo: interrupted; the cluster is still up (make cluster-down stops it)"; exit 130; }
trap interrupted INT

step "Starting the local cluster"
scripts/cluster.sh up

step "Running jobspecs/hello.nomad.hcl on each client"
for node in client1 client2; do
  "$nomad" job run -var "node=$node" jobspecs/hello.nomad.hcl >/dev/null
  alloc=""
  for _ in $(seq 1 120); do
    alloc=$("$nomad" job allocs -json hello 2>/dev/null | grep -o '"ID": "[^"]*"' | head -1 | cut -d'"' -f4 || true)
    status=$("$nomad" alloc status -json "$alloc" 2>/dev/null | grep -o '"ClientStatus": "[^"]*"' | head -1 | cut -d'"' -f4 || true)
    [[ $status == complete ]] && break
    sleep 0.5
  done
  echo "$node: $("$nomad" alloc logs "$alloc" hello)"
  "$nomad" job stop -purge hello >/dev/null
done

step "Summary"
echo "Nomad UI:  $NOMAD_ADDR/ui"
echo "Consul UI: http://$CONSUL_HTTP_ADDR/ui"
if [[ ${DEMO_TEARDOWN:-0} == 1 ]]; then
  scripts/cluster.sh down
else
  echo "The cluster is still up: 'make cluster-down' stops it."
fi
