#!/usr/bin/env bash
# Installs, from Debian's packages, what the e2e tests need beyond Go and the
# agents, if it is missing: chromium (the browser test of the Nomad UI) and
# python3-torch (the PyTorch jobspec's end-to-end run, on CPU).
set -euo pipefail
chromium=${CARAVAN_CHROMIUM:-/usr/bin/chromium}
missing=()
[[ -x $chromium ]] || missing+=(chromium)
/usr/bin/python3 -c 'import torch' >/dev/null 2>&1 || missing+=(python3-torch)
(( ${#missing[@]} )) || exit 0

sudo=""
if [[ $(id -u) != 0 ]]; then
  command -v sudo >/dev/null || { echo "install-e2e-deps: need root (or sudo) to apt-get install ${missing[*]}" >&2; exit 1; }
  sudo=sudo
fi
echo "==> installing Debian's ${missing[*]} for the e2e tests"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "==> installed ${missing[*]}"
