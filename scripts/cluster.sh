#!/usr/bin/env bash
# Starts and stops caravan's local cluster: one Consul dev agent, one Nomad
# server and two Nomad clients (client1, client2; CARAVAN_CLIENTS for more),
# all on 127.0.0.1, with the caravan plugins loaded from
# $CARAVAN_CLUSTER_DIR/plugins.
#
#   scripts/cluster.sh up|down|status|env|images|s3-stop|s3-start
#   scripts/cluster.sh images [IMAGE...]  load images into the cluster's
#                        dockerd and podman: build/images/*.tar without
#                        arguments; else each a docker-archive tarball
#                        (`docker save`, `podman save`) or an image in this
#                        machine's podman storage (`podman build -t NAME`)
#
# `eval "$(scripts/cluster.sh env)"` sets NOMAD_ADDR and CONSUL_HTTP_ADDR
# and puts the agents' directory first on PATH, for `nomad job run`.
#
# Environment:
#   CARAVAN_CLUSTER_DIR  state, configs and logs (default: build/cluster)
#   CARAVAN_PORT_BASE    first port (default 14600): Consul HTTP = base,
#                        Nomad server HTTP = base+10, client1 = base+20,
#                        client2 = base+30, clientN = base+10+N*10. Distinct
#                        bases (100 apart) give distinct clusters.
#   CARAVAN_STORE        the clients' checkpoint store: posix (default) or
#                        s3; `up` on a running cluster with the other one
#                        restarts it.
#   CARAVAN_S3_FAULT_PROXY  1: TEST ONLY, with CARAVAN_STORE=s3, the clients
#                        reach the server through a fault-injecting proxy
#                        whose faults tests set at runtime (below); `up` on
#                        a running cluster without it (or with it, for 0)
#                        restarts it. Default 0.
#   CARAVAN_CLIENTS      Nomad clients, 1 to 8 (default 2), each with two
#                        simulated GPUs; `up` on a running cluster with
#                        another count restarts it.
#   NOMAD_BIN, CONSUL_BIN  the agent binaries (default build/bin/nomad and
#                        build/bin/consul: Nomad v1.6 and Consul v1.14.11,
#                        built by `make nomad consul`). Point them at agents
#                        you already have (e.g. Nomad 1.10, 1.11) to run the
#                        same cluster and e2e suite on those; nothing
#                        downloads them. `up` on a running cluster started
#                        with other binaries restarts it.
#
# Container runtimes: `up` also starts a loopback-only dockerd (no bridge, no
# iptables) and podman's Docker-compatible API service, each with its state,
# exec root and socket under the cluster dir (podman's runroot, which must be
# short, in /tmp; scripts/cluster/runtimes.sh), and loads the images of
# build/images/ (scripts/build-images.sh) into both. Neither can pull: their
# proxy is a closed loopback port. Every client runs Nomad's docker driver
# (a client has one): client1 against that dockerd, client2 against podman's
# API (CARAVAN_PODMAN_CLIENTS lists the podman-backed clients; default
# client2), each with node meta caravan.container_runtime = docker|podman for
# jobs' constraints. Nomad's podman driver plugin is not run: no build of it
# free of BUSL-1.1 code exists. CARAVAN_RUNTIMES=none starts neither daemon
# (the clients then deny the docker driver); CARAVAN_RUNTIMES=all fails when
# one is missing (auto: warns).
#
# Checkpoint store: CARAVAN_STORE=posix (the default) gives the clients one
# shared directory, $CARAVAN_CLUSTER_DIR/checkpoints; CARAVAN_STORE=s3 starts
# a SeaweedFS S3 server on loopback instead (`make seaweedfs` builds it;
# scripts/cluster/s3.sh has its ports and credential files), and the clients
# share no directory. `s3-stop` and `s3-start` stop and start that server
# alone (for tests of an S3 outage). With CARAVAN_S3_FAULT_PROXY=1 (tests
# only; `make e2e-s3` sets it) the clients reach it through internal/s3fault's
# proxy on 127.0.0.1:base+17, which passes every request through unchanged
# until a test sets a fault (503 SlowDown, a reset midway through an upload, a
# delay) on its loopback control endpoint, http://127.0.0.1:base+18
# (scripts/cluster/s3.sh, e2e/s3/doc.go).
#
# Every agent starts with CARAVAN_CLUSTER_MARK=<cluster dir> in its
# environment, which its plugins, executors, logmon and tasks inherit; `down`
# stops the jobs, then the agents, then any marked process still alive, so
# nothing the cluster started outlives it (and nothing else is touched).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
dir=${CARAVAN_CLUSTER_DIR:-$root/build/cluster}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
base=${CARAVAN_PORT_BASE:-14600}
bin=$root/build/bin
# The agents: the builds of `make nomad consul` (Nomad v1.6, Consul v1.14,
# both MPL-2.0), or binaries an operator already has.
nomad_bin=${NOMAD_BIN:-$bin/nomad}
consul_bin=${CONSUL_BIN:-$bin/consul}
nclients=${CARAVAN_CLIENTS:-2}
runtimes=${CARAVAN_RUNTIMES:-auto}

if ! [[ "$base" =~ ^[0-9]+$ ]] || (( base < 1024 || base > 19900 )); then
  echo "cluster: CARAVAN_PORT_BASE must be a number from 1024 to 19900, got '$base'" >&2
  exit 2
fi
if ! [[ "$nclients" =~ ^[1-8]$ ]]; then
  echo "cluster: CARAVAN_CLIENTS must be a number from 1 to 8, got '$nclients'" >&2
  exit 2
fi
clients=()
for ((i = 1; i <= nclients; i++)); do clients+=("client$i"); done
agents=(consul server "${clients[@]}")
# shellcheck source=scripts/cluster/runtimes.sh
source "$root/scripts/cluster/runtimes.sh"
# shellcheck source=scripts/cluster/s3.sh
source "$root/scripts/cluster/s3.sh"
store=$(store_kind)
check_s3_fault_proxy

consul_http=$base
server_http=$((base + 10))
server_rpc=$((base + 11))
export NOMAD_ADDR=http://127.0.0.1:$server_http
export CONSUL_HTTP_ADDR=127.0.0.1:$consul_http

log() { echo "==> cluster: $*"; }

pid_of() { cat "$dir/pids/$1.pid" 2>/dev/null || true; }
alive() { local p; p=$(pid_of "$1"); [[ -n "$p" ]] && kill -0 "$p" 2>/dev/null; }

running_agents() {
  local a n=0
  for a in "${agents[@]}"; do alive "$a" && n=$((n + 1)); done
  echo $n
}

# cgroup_parent NODE prints the client's parent cgroup, one per cluster and
# client: under cgroups v1 an absolute path (Nomad 1.6's cpuset manager
# makes it relative to the root, and a bare name turned cpuset management
# off), under v2 a name.
cgroup_parent() {
  local name="caravan-$base-$1"
  if [[ $(stat -fc %T /sys/fs/cgroup 2>/dev/null) == cgroup2fs ]]; then echo "$name"; else echo "/$name"; fi
}

# remove_cgroups NODE removes the client's parent cgroup and what Nomad made
# under it (Nomad 1.6 leaves its cpuset "reserved" and "shared" behind),
# where they are empty: rmdir refuses a cgroup that still has processes.
remove_cgroups() {
  local name d
  name=$(cgroup_parent "$1")
  for d in /sys/fs/cgroup/*/"${name#/}" "/sys/fs/cgroup/${name#/}"; do
    [[ -d $d ]] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done
}

# render TEMPLATE NODE > OUT substitutes the cluster's paths and ports.
render() {
  local tmpl=$1 node=$2 idx=0
  [[ $node == client[0-9] ]] && idx=$((${node#client} - 1))
  local chttp=$((base + 20 + idx * 10))
  local k=$(((base / 100) % 10))
  # Each cluster's 1000 dynamic ports, split among its clients.
  local span=$((1000 / (nclients > 2 ? nclients : 2)))
  local dmin=$((20000 + k * 1000 + idx * span))
  sed -e "s|@CLUSTER_DIR@|$dir|g" \
      -e "s|@CLUSTER_ID@|$base|g" \
      -e "s|@NODE@|$node|g" \
      -e "s|@P_CONSUL_HTTP@|$consul_http|g" \
      -e "s|@P_CONSUL_DNS@|$((base + 1))|g" \
      -e "s|@P_CONSUL_SERF_LAN@|$((base + 2))|g" \
      -e "s|@P_CONSUL_SERF_WAN@|$((base + 3))|g" \
      -e "s|@P_CONSUL_SERVER@|$((base + 4))|g" \
      -e "s|@P_CONSUL_GRPC@|$((base + 5))|g" \
      -e "s|@P_SERVER_HTTP@|$server_http|g" \
      -e "s|@P_SERVER_RPC@|$server_rpc|g" \
      -e "s|@P_SERVER_SERF@|$((base + 12))|g" \
      -e "s|@P_CLIENT_HTTP@|$chttp|g" \
      -e "s|@P_CLIENT_RPC@|$((chttp + 1))|g" \
      -e "s|@P_CLIENT_SERF@|$((chttp + 2))|g" \
      -e "s|@P_DRIVER_METRICS@|$((chttp + 3))|g" \
      -e "s|@P_DEVICE_METRICS@|$((chttp + 4))|g" \
      -e "s|@P_DYN_MIN@|$dmin|g" \
      -e "s|@P_DYN_MAX@|$((dmin + span - 1))|g" \
      -e "s|@DRIVER_DENYLIST@|$(denylist)|g" \
      -e "s|@CONTAINER_RUNTIME@|$(runtime_of "$node")|g" \
      -e "s|@CGROUP_PARENT@|$(cgroup_parent "$node")|g" \
      "$tmpl"
}

# render_driver NODE prints the driver plugin's block, with its store.
render_driver() {
  local line
  render "$root/scripts/cluster/plugin-driver.hcl" "$1" | while IFS= read -r line; do
    case $line in
      @STORE@) render_store ;;
      @ENGINE@) render_engine "$1" ;;
      *) printf '%s\n' "$line" ;;
    esac
  done
}

# start NAME CMD... runs an agent in a session of its own, logging to logs/.
start() {
  local name=$1; shift
  CARAVAN_CLUSTER_MARK="$dir" PATH="$bin:$PATH" setsid "$@" >"$dir/logs/$name.log" 2>&1 < /dev/null &
  echo $! >"$dir/pids/$name.pid"
}

# wait_for WHAT SECONDS CMD... polls CMD until it succeeds.
wait_for() {
  local what=$1 secs=$2; shift 2
  local deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    if (( SECONDS >= deadline )); then
      echo "cluster: timed out after ${secs}s waiting for $what; see $dir/logs/" >&2
      return 1
    fi
    sleep 0.5
  done
}

# check_agents fails unless the Nomad and Consul binaries run, naming the
# variable or the make target that provides each, and logs their versions.
check_agents() {
  local var b make_target
  for var in NOMAD_BIN CONSUL_BIN; do
    if [[ $var == NOMAD_BIN ]]; then b=$nomad_bin make_target=nomad; else b=$consul_bin make_target=consul; fi
    if [[ -n ${!var:-} ]]; then
      [[ -x $b && ! -d $b ]] || { echo "cluster: $var=$b is not an executable file" >&2; exit 1; }
    else
      [[ -x $b ]] || { echo "cluster: $b is missing; run 'make $make_target' (or set $var to an agent you have)" >&2; exit 1; }
    fi
    "$b" version >/dev/null 2>&1 || { echo "cluster: '$b version' failed: not a working $make_target binary ($var)" >&2; exit 1; }
  done
  log "agents: $("$nomad_bin" version | head -n 1) ($nomad_bin), $("$consul_bin" version | head -n 1) ($consul_bin)"
}

nodes_ready() {
  local out
  out=$("$nomad_bin" node status -json 2>/dev/null) || return 1
  [[ $(grep -o '"Status": "ready"' <<<"$out" | wc -l) -ge $nclients ]]
}

# warn_disk says so when the cluster directory's filesystem is nearly full:
# the clients keep finished allocations up to 99% (scripts/cluster/client.hcl),
# and checkpoints, images and logs all land there.
warn_disk() {
  mkdir -p "$dir"
  local used
  used=$(df -P "$dir" 2>/dev/null | awk 'NR == 2 { sub("%", "", $5); print $5 }')
  if [[ -n $used ]] && (( used >= 90 )); then
    log "warning: the filesystem of $dir is ${used}% full; tasks may fail to write checkpoints or logs"
  fi
}

cmd_up() {
  s3_enabled && check_weed
  check_agents
  warn_disk
  [[ -x $root/build/caravan ]] || { echo "cluster: $root/build/caravan is missing; run 'make dev' first" >&2; exit 1; }
  local n
  n=$(running_agents)
  local had had_store had_proxy=0 proxy=0
  had=$(cat "$dir/clients" 2>/dev/null || echo 2)
  had_store=$(cat "$dir/store" 2>/dev/null || echo posix)
  s3_fault_proxy_on && had_proxy=1
  s3_fault_proxy_asked && proxy=1
  if (( n == ${#agents[@]} )) && [[ $had_proxy != "$proxy" ]]; then
    log "running with CARAVAN_S3_FAULT_PROXY=$had_proxy, $proxy asked for; restarting it"
    cmd_down
    n=0
  fi
  local had_agents
  had_agents=$(cat "$dir/agent-bins" 2>/dev/null || true)
  if (( n == ${#agents[@]} )) && [[ $had_agents != "$nomad_bin $consul_bin" ]]; then
    log "running the agents ${had_agents:-(unrecorded)}, $nomad_bin $consul_bin asked for; restarting it"
    cmd_down
    n=0
  fi
  if (( n == ${#agents[@]} )) && [[ $had == "$nclients" && $had_store == "$store" ]]; then
    start_runtimes
    start_s3
    log "already running (Nomad $NOMAD_ADDR, Consul http://$CONSUL_HTTP_ADDR)"
    return 0
  fi
  if (( n == ${#agents[@]} )); then
    log "running with $had clients and a $had_store store, $nclients and $store asked for; restarting it"
    cmd_down
  elif (( n > 0 )); then
    log "partly running ($n of ${#agents[@]} agents); restarting it"
    cmd_down
  fi

  mkdir -p "$dir"/{config,logs,pids,plugins,server}
  s3_enabled || mkdir -p "$dir/checkpoints"
  for n in "${clients[@]}"; do mkdir -p "$dir/$n" "$dir/mps/$n/pipe" "$dir/mps/$n/log"; done
  echo "$nclients" >"$dir/clients"
  echo "$store" >"$dir/store"
  echo "$nomad_bin $consul_bin" >"$dir/agent-bins"
  if s3_fault_proxy_asked; then echo on >"$dir/s3-fault-proxy"; else rm -f "$dir/s3-fault-proxy"; fi
  # Copy, then rename, so a rebuilt binary never replaces one a plugin runs.
  local p
  for p in caravan-gpu caravan; do
    cp "$root/build/caravan" "$dir/plugins/.$p.tmp"
    mv -f "$dir/plugins/.$p.tmp" "$dir/plugins/$p"
  done

  render "$root/scripts/cluster/consul.hcl" consul >"$dir/config/consul.hcl"
  render "$root/scripts/cluster/server.hcl" server >"$dir/config/server.hcl"
  for n in "${clients[@]}"; do
    {
      render "$root/scripts/cluster/client.hcl" "$n"
      render "$root/scripts/cluster/plugin-device.hcl" "$n"
      render_driver "$n"
      render_runtimes "$n"
    } >"$dir/config/$n.hcl"
  done

  start_runtimes
  if s3_enabled && ! alive weed; then
    write_s3_identities # fresh keys for each start of the cluster
  fi
  start_s3

  log "starting Consul (http://$CONSUL_HTTP_ADDR)"
  start consul "$consul_bin" agent -dev -config-file="$dir/config/consul.hcl"
  wait_for "Consul's leader" 60 "$consul_bin" catalog nodes

  log "starting the Nomad server ($NOMAD_ADDR)"
  start server "$nomad_bin" agent -config="$dir/config/server.hcl"
  wait_for "Nomad's leader" 60 "$nomad_bin" operator api /v1/status/leader

  for n in "${clients[@]}"; do
    log "starting Nomad $n"
    start "$n" "$nomad_bin" agent -config="$dir/config/$n.hcl"
  done
  wait_for "$nclients ready Nomad clients" 120 nodes_ready
  log "up: Nomad UI $NOMAD_ADDR/ui, Consul UI http://$CONSUL_HTTP_ADDR/ui, logs in $dir/logs"
}

# owned_pids prints every live process this cluster started: the agents and
# whatever they spawned (plugins, executors, logmon, tasks) carry the marker
# CARAVAN_CLUSTER_MARK=<cluster dir> in their environment, which go-plugin and
# Nomad's task environment pass on; their descendants are included too, in
# case a task cleared its environment.
owned_pids() {
  local e pid marked=()
  local mark="CARAVAN_CLUSTER_MARK=$dir"
  for e in /proc/[0-9]*/environ; do
    pid=${e#/proc/}; pid=${pid%/environ}
    [[ $pid == "$$" || $pid == "$BASHPID" ]] && continue
    if grep -qzxF "$mark" "$e" 2>/dev/null; then
      marked+=("$pid")
    fi
  done
  (( ${#marked[@]} )) || return 0
  # Add the descendants of marked processes, from one read of /proc.
  awk -v marked="${marked[*]}" '
    FNR == 1 {
      pid = FILENAME; sub(/^\/proc\//, "", pid); sub(/\/stat$/, "", pid)
      line = $0; sub(/^.*\) /, "", line); split(line, f, " ")
      parent[pid] = f[2]
    }
    END {
      n = split(marked, m, " "); for (i = 1; i <= n; i++) own[m[i]] = 1
      do {
        changed = 0
        for (p in parent) if (!(p in own) && (parent[p] in own)) { own[p] = 1; changed = 1 }
      } while (changed)
      for (p in own) if (p in parent) printf "%s ", p
    }' /proc/[0-9]*/stat 2>/dev/null
  echo
}

stop_agent() {
  local name=$1 p
  p=$(pid_of "$name")
  [[ -n $p ]] && kill -0 "$p" 2>/dev/null || return 0
  kill -INT "$p" 2>/dev/null || true
  local deadline=$((SECONDS + 20))
  while kill -0 "$p" 2>/dev/null && (( SECONDS < deadline )); do sleep 0.2; done
  kill -KILL "$p" 2>/dev/null || true
}

cmd_down() {
  if [[ -z $(ls "$dir"/pids/*.pid 2>/dev/null) ]] && [[ -z $(owned_pids) ]]; then
    log "not running"
    rm -rf "$dir/pids"
    return 0
  fi
  if alive server; then
    log "stopping jobs"
    local jobs
    jobs=$("$nomad_bin" job status -short 2>/dev/null | awk 'NR>1 && $4 != "dead" {print $1}') || true
    local j
    for j in $jobs; do
      "$nomad_bin" job stop -purge -detach "$j" >/dev/null 2>&1 || true
    done
    # Give the clients time to stop tasks (and the driver to checkpoint).
    local deadline=$((SECONDS + 60))
    while (( SECONDS < deadline )); do
      local live
      live=$("$nomad_bin" operator api '/v1/allocations?filter=ClientStatus%20%3D%3D%20%22running%22%20or%20ClientStatus%20%3D%3D%20%22pending%22' 2>/dev/null || echo err)
      [[ $live == "[]" || $live == err ]] && break
      sleep 0.5
    done
  fi
  # Every client this cluster started, whatever CARAVAN_CLIENTS says now.
  local a f started=()
  for f in "$dir"/pids/client*.pid; do
    [[ -e $f ]] && started+=("$(basename "$f" .pid)")
  done
  for a in "${started[@]}" server consul; do
    alive "$a" && log "stopping $a"
    stop_agent "$a"
  done
  stop_runtimes
  stop_s3
  stop_s3_fault_proxy
  local left
  left=$(owned_pids)
  if [[ -n $left ]]; then
    log "stopping $(wc -w <<<"$left") leftover executor/logmon/task processes"
    kill -TERM $left 2>/dev/null || true
    sleep 1
    left=$(owned_pids)
    [[ -n $left ]] && kill -KILL $left 2>/dev/null || true
  fi
  # The clients leave their allocations' secrets and private tmpfs mounts
  # behind; without this the cluster dir could not be removed.
  unmount_under "$dir"
  for a in "${started[@]}"; do remove_cgroups "$a"; done
  rm -rf "$dir/pids"
  log "down"
}

cmd_status() {
  local a
  for a in "${agents[@]}"; do
    if alive "$a"; then echo "$a: running (pid $(pid_of "$a"))"; else echo "$a: stopped"; fi
  done
  status_runtimes
  status_s3
  echo "Nomad: $NOMAD_ADDR  Consul: http://$CONSUL_HTTP_ADDR  dir: $dir"
}

cmd_env() {
  echo "export NOMAD_ADDR=$NOMAD_ADDR"
  echo "export CONSUL_HTTP_ADDR=$CONSUL_HTTP_ADDR"
  # The agents' directories (build/bin unless NOMAD_BIN or CONSUL_BIN say
  # otherwise), then build/ (caravan), go first on PATH, so `nomad job run`,
  # `consul` and `caravan validate` are the cluster's own; a directory PATH
  # already holds is not added again.
  local d path=$PATH
  for d in "$root/build" "$(dirname "$consul_bin")" "$(dirname "$nomad_bin")"; do
    case ":$path:" in *":$d:"*) continue ;; esac
    path=$d:$path
    printf 'export PATH=%q:"$PATH"\n' "$d"
  done
}

case "${1:-}" in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  env) cmd_env ;;
  images) shift; load_images "$@" ;;
  s3-stop) stop_s3 ;;
  s3-start)
    [[ $(cat "$dir/store" 2>/dev/null) == s3 ]] || { echo "cluster: $dir was not started with CARAVAN_STORE=s3" >&2; exit 1; }
    CARAVAN_STORE=s3 start_s3
    ;;
  *) echo "usage: scripts/cluster.sh up|down|status|env|images|s3-stop|s3-start" >&2; exit 2 ;;
esac
