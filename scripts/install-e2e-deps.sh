#!/usr/bin/env bash
# Installs, from Debian's packages, what the e2e tests need beyond Go and the
# agents, if it is missing: chromium (the browser test of the Nomad UI),
# python3-torch (the PyTorch jobspec's end-to-end run, on CPU), and the two
# container runtimes of the container e2e tests: docker.io (dockerd, which
# scripts/cluster.sh starts loopback-only) and podman (its Docker-compatible
# API service, which client2's docker driver talks to, with runc: crun fails
# on cgroups v1 hybrid mode).
#
#   scripts/install-e2e-deps.sh          all of the above
#   scripts/install-e2e-deps.sh --demo   the container runtimes only (make demo)
set -euo pipefail
chromium=${CARAVAN_CHROMIUM:-/usr/bin/chromium}
for_what="the e2e tests"
missing=()
case "${1:-}" in
  --demo) for_what="the demo" ;;
  "")
    [[ -x $chromium ]] || missing+=(chromium)
    /usr/bin/python3 -c 'import torch' >/dev/null 2>&1 || missing+=(python3-torch)
    ;;
  *) echo "install-e2e-deps: unknown argument '$1' (want --demo or none)" >&2; exit 2 ;;
esac
# A docker client alone (some images ship one) is not enough: the cluster
# starts Debian's daemon.
command -v dockerd >/dev/null || missing+=(docker.io)
command -v podman >/dev/null || missing+=(podman)
command -v runc >/dev/null || missing+=(runc)
(( ${#missing[@]} )) || exit 0

sudo=""
if [[ $(id -u) != 0 ]]; then
  command -v sudo >/dev/null || {
    echo "install-e2e-deps: $for_what need Debian's ${missing[*]}, and installing them needs root (or sudo): run 'apt-get update && apt-get install --no-install-recommends ${missing[*]}' as root, then this again" >&2
    exit 1
  }
  sudo=sudo
fi
echo "==> installing Debian's ${missing[*]} for $for_what"
start=$SECONDS
$sudo apt-get update -qq
# docker.io's maintainer scripts try to start the daemon through the init
# system; there is none to ask here, and scripts/cluster.sh starts its own.
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "==> installed ${missing[*]} in $((SECONDS - start))s"
