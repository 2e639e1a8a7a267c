#!/usr/bin/env bash
# Runs the e2e test packages on E2E_PARALLEL independent local clusters at
# once (scripts/cluster.sh), one package at a time per cluster (-p 1): the
# e2e tests mostly wait on Nomad (scheduling, polling), so clusters overlap
# well even on 2 cores.
#
#   scripts/e2e.sh [PACKAGE...]     (default: every ./e2e/... package with tests)
#
# Environment:
#   E2E_PARALLEL     clusters, 1 to 4 (default 3). 1 runs the packages in
#                    `go list` order on one cluster, as `make e2e` always did.
#   E2E_TIMEOUT      go test -timeout for each package (default 40m)
#   E2E_PORT_BASE    cluster 1's CARAVAN_PORT_BASE (default 14700); cluster i
#                    gets E2E_PORT_BASE + (i-1) * E2E_PORT_STEP (default 100)
#   E2E_CLUSTER_DIR  cluster 1's CARAVAN_CLUSTER_DIR (default
#                    build/cluster-e2e); cluster i > 1 gets <dir>-<i>
#   E2E_LOG_DIR      per-package and per-cluster logs (default build/e2e-logs)
#   GO_TEST_FLAGS    more go test flags (e.g. -run; -v is always on)
#   NOMAD_BIN, CONSUL_BIN  agents of your own to run the clusters and tests
#                    on (scripts/cluster.sh; default build/bin's)
#   E2E_SKIP         packages to leave out, by path below the module (e.g.
#                    "e2e/s3": it needs a cluster of another kind, make e2e-s3)
#   E2E_BUILD_TARGETS make targets to build in the background while the
#                    packages run (e.g. "seaweedfs", which make e2e-s3 needs
#                    next); the run waits for them and fails if one fails
#
# Tests that need a newer agent than the one running (JWKS, named
# identities, keyring rotate -now, the scale index; e2e/harness/features.go)
# skip with a line "SKIP-NEEDS-FEATURE: <test>: <feature>". The packages run
# with -v so those lines reach their logs; the terminal gets each package's
# result, failed tests and those lines, and the end of the run lists every
# test skipped that way (also in <log dir>/skipped-features.txt).
#
# Packages are found afresh (`go list ./e2e/...`, those with test files, less
# e2e/harness, whose unit tests `make unit` runs), so a
# new one runs with no edit here. They form one queue, longest first by the
# table in duration() (unknown ones last), and each cluster takes the next one
# when it is free. Each package's verbose output goes to <log
# dir>/<pkg>.log (`tail -f` it to follow a package), and its result lines to
# the terminal when it ends, each prefixed with its cluster; at the end the
# failing packages' logs are printed whole, with a summary. The exit status is non-zero
# if a package failed or did not run, or a cluster did not start. Every
# cluster is stopped on exit, Ctrl-C or SIGTERM.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
n=${E2E_PARALLEL:-3}
timeout=${E2E_TIMEOUT:-40m}
base=${E2E_PORT_BASE:-14700}
step=${E2E_PORT_STEP:-100}
cdir=${E2E_CLUSTER_DIR:-$root/build/cluster-e2e}
logs=${E2E_LOG_DIR:-$root/build/e2e-logs}
read -r -a flags <<<"${GO_TEST_FLAGS:-}"
# -v: a skipped test's reason (SKIP-NEEDS-FEATURE lines) reaches the log.
[[ " ${flags[*]} " == *" -v "* ]] || flags=(-v "${flags[@]}")
skip_marker=SKIP-NEEDS-FEATURE

say() { echo "==> e2e: $*"; }
die() { echo "e2e: $*" >&2; exit 2; }

[[ $n =~ ^[1-4]$ ]] || die "E2E_PARALLEL must be a number from 1 to 4, got '$n'"
[[ $base =~ ^[0-9]+$ && $step =~ ^[0-9]+$ ]] || die "E2E_PORT_BASE and E2E_PORT_STEP must be numbers"
(( step % 100 == 0 && step > 0 )) || die "E2E_PORT_STEP must be a multiple of 100, got $step"
(( base + step * (n - 1) <= 19900 )) || die "E2E_PORT_BASE=$base with $n clusters $step apart passes 19900"
# cluster.sh gives each cluster the dynamic ports 20000 + 1000*((base/100)%10):
# the clusters' hundreds digits must differ.
declare -A digit=()
for ((i = 1; i <= n; i++)); do
  d=$((((base + step * (i - 1)) / 100) % 10))
  [[ -z ${digit[$d]:-} ]] || die "clusters $i and ${digit[$d]} would share dynamic ports (same hundreds digit); change E2E_PORT_STEP"
  digit[$d]=$i
done

port_of() { echo $((base + step * ($1 - 1))); }
dir_of() { if (( $1 == 1 )); then echo "$cdir"; else echo "$cdir-$1"; fi; }
cluster_env() { echo "CARAVAN_CLUSTER_DIR=$(dir_of "$1")" "CARAVAN_PORT_BASE=$(port_of "$1")"; }

# duration PKG prints the package's expected run time in seconds on one
# cluster of three in a clean-clone make test on 2 cores (measured there on
# 2026-11-27 before the container tests split, estimated for the split
# packages from a run on one cluster; s3 on its own cluster), or 0 when
# unknown. It only orders the queue.
duration() {
  case ${1##*/e2e/} in
    planner) echo 905 ;;
    containers/elastic) echo 900 ;;
    adversarial) echo 885 ;;
    containers) echo 700 ;;
    driver) echo 508 ;;
    ui) echo 201 ;;
    testbed) echo 177 ;;
    elastic) echo 67 ;;
    device) echo 77 ;;
    jobspecs) echo 60 ;;
    s3) echo 220 ;;
    cluster) echo 4 ;;
    *) echo 0 ;;
  esac
}

if (( $# )); then
  pkgs=("$@")
else
  listed=$(go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}' ./e2e/...)
  mapfile -t pkgs < <(sed -e '/^$/d' -e '\|/e2e/harness$|d' <<<"$listed")
fi
read -r -a skip <<<"${E2E_SKIP:-}"
kept=()
for p in "${pkgs[@]}"; do
  keep=1
  for k in "${skip[@]}"; do [[ $p == */"${k#./}" || $p == "$k" ]] && keep=; done
  [[ -n $keep ]] && kept+=("$p")
done
pkgs=("${kept[@]}")
(( ${#pkgs[@]} )) || die "no e2e packages with tests"

rm -rf "$logs"
mkdir -p "$logs"
queue=$logs/.queue
results=$logs/.results
: >"$results"
if (( n == 1 )); then
  printf '%s\n' "${pkgs[@]}" >"$queue"
else
  for p in "${pkgs[@]}"; do printf '%s\t%s\n' "$(duration "$p")" "$p"; done |
    sort -t$'\t' -k1,1nr -k2,2 | cut -f2 >"$queue"
fi
(( n <= ${#pkgs[@]} )) || n=${#pkgs[@]}

# take prints the next package of the queue and removes it (empty: none).
take() {
  (
    flock 9
    local p
    p=$(head -n 1 "$queue")
    [[ -z $p ]] || sed -i 1d "$queue"
    echo "$p"
  ) 9>"$queue.lock"
}

# Background builds (E2E_BUILD_TARGETS), each writing its exit status.
declare -A build_pid=()
start_builds() {
  local t
  for t in ${E2E_BUILD_TARGETS:-}; do
    [[ -n ${build_pid[$t]:-} ]] && continue
    say "building $t in the background (log: $logs/build-$t.log)"
    (
      rc=0
      "${MAKE:-make}" --no-print-directory "$t" >"$logs/build-$t.log" 2>&1 || rc=$?
      echo "$rc" >"$logs/build-$t.rc"
    ) &
    build_pid[$t]=$!
  done
}

# worker I starts cluster I and runs queued packages on it until none is left.
worker() {
  local i=$1 env p name plog start rc
  read -r -a env <<<"$(cluster_env "$i")"
  local clog=$logs/cluster-$i.log tag="[e2e-$i]"
  echo "$tag cluster $i: port base $(port_of "$i"), dir $(dir_of "$i"), log $clog"
  env "${env[@]}" scripts/cluster.sh down >"$clog" 2>&1 || true
  if ! env "${env[@]}" scripts/cluster.sh up >>"$clog" 2>&1; then
    echo "$tag cluster $i did not start:"
    tail -n 20 "$clog" | sed "s|^|$tag |"
    printf 'cluster\t%s\t-\tdid not start (%s)\n' "$i" "$clog" >>"$results"
    return 0
  fi
  while p=$(take) && [[ -n $p ]]; do
    name=${p##*/e2e/}
    plog=$logs/${name//\//-}.log
    start=$SECONDS
    echo "$tag $name: started"
    rc=0
    env "${env[@]}" CARAVAN_E2E=1 go test -p 1 -count=1 -timeout "$timeout" "${flags[@]}" "$p" >"$plog" 2>&1 || rc=$?
    # The verbose log stays in the file; the terminal gets the outcome.
    grep -E "^(ok|FAIL|panic:)|^ *--- FAIL|$skip_marker" "$plog" | sed "s|^|$tag |" || true
    if (( rc == 0 )); then
      printf 'ok\t%s\t%s\t%s\n' "$i" "$((SECONDS - start))" "$name" >>"$results"
    else
      printf 'FAIL\t%s\t%s\t%s\n' "$i" "$((SECONDS - start))" "$name" >>"$results"
    fi
  done
}

# descendants PID prints the process's descendants, deepest last.
descendants() {
  local c
  for c in $(ps -o pid= --ppid "$1" 2>/dev/null); do
    echo "$c"
    descendants "$c"
  done
}

workers=()
cleaned=
cleanup() {
  [[ -n $cleaned ]] && return
  cleaned=1
  trap '' INT TERM
  local w left=()
  for w in "${workers[@]}"; do
    kill -0 "$w" 2>/dev/null && left+=("$w" $(descendants "$w"))
  done
  for b in "${build_pid[@]}"; do
    kill -0 "$b" 2>/dev/null && left+=("$b" $(descendants "$b"))
  done
  if (( ${#left[@]} )); then
    say "stopping ${#left[@]} test and build processes"
    kill -TERM "${left[@]}" 2>/dev/null || true
    sleep 2
    kill -KILL "${left[@]}" 2>/dev/null || true
  fi
  say "stopping the clusters"
  local i e
  for ((i = 1; i <= n; i++)); do
    read -r -a e <<<"$(cluster_env "$i")"
    env "${e[@]}" scripts/cluster.sh down >>"$logs/cluster-$i.log" 2>&1 &
  done
  wait
}
trap cleanup EXIT
trap 'say "interrupted"; cleanup; exit 130' INT
trap 'say "terminated"; cleanup; exit 143' TERM

started=$SECONDS
say "${#pkgs[@]} packages on $n cluster(s), logs in $logs"
start_builds
for ((i = 1; i <= n; i++)); do
  worker "$i" &
  workers+=($!)
done
for w in "${workers[@]}"; do wait "$w" || true; done
for t in "${!build_pid[@]}"; do
  wait "${build_pid[$t]}" || true
  if [[ $(cat "$logs/build-$t.rc" 2>/dev/null) != 0 ]]; then
    printf 'build\t-\t-\tmake %s failed (%s)\n' "$t" "$logs/build-$t.log" >>"$results"
    tail -n 30 "$logs/build-$t.log"
  fi
done

status=0
while read -r p; do
  [[ -n $p ]] || continue
  printf 'NOT RUN\t-\t-\t%s\n' "${p##*/e2e/}" >>"$results"
done <"$queue"
rm -f "$queue" "$queue.lock"
while IFS=$'\t' read -r res c secs name; do
  [[ $res == ok ]] && continue
  status=1
  if [[ $res == FAIL ]]; then
    echo
    say "---- $name failed on cluster $c; its log ($logs/${name//\//-}.log):"
    cat "$logs/${name//\//-}.log"
  fi
done <"$results"
# skipped_features prints "<test>: <feature>" for every test the logs say
# was skipped for an agent feature, once each.
skipped_features() {
  cat "$logs"/*.log 2>/dev/null | sed -n "s/^.*$skip_marker: //p" | sort -u
}
skipped_features >"$logs/skipped-features.txt"
echo
if [[ -s $logs/skipped-features.txt ]]; then
  say "$(wc -l <"$logs/skipped-features.txt") tests skipped: the agent lacks a feature they need ($logs/skipped-features.txt):"
  sed 's/^/    /' "$logs/skipped-features.txt"
else
  say "no test skipped for a missing agent feature"
fi
echo
say "summary (${#pkgs[@]} packages, $n cluster(s), $((SECONDS - started))s wall):"
sort -t$'\t' -k3,3nr "$results" | awk -F'\t' '{printf "    %-8s cluster %-2s %6ss  %s\n", $1, $2, $3, $4}' | tee "$logs/summary.txt"
exit "$status"
