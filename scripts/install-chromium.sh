#!/usr/bin/env bash
# Installs Debian's chromium for the browser e2e test, if it is missing.
set -euo pipefail
path=${CARAVAN_CHROMIUM:-/usr/bin/chromium}
if [[ -x $path ]]; then
  exit 0
fi
sudo=""
if [[ $(id -u) != 0 ]]; then
  command -v sudo >/dev/null || { echo "install-chromium: need root (or sudo) to apt-get install chromium" >&2; exit 1; }
  sudo=sudo
fi
echo "==> installing Debian's chromium for the browser test"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends chromium >/dev/null
echo "==> $("$path" --version 2>/dev/null)"
