#!/usr/bin/env bash
# Checks, before anything is built, that the `go` on PATH is new enough:
# caravan's go.mod and the Nomad/Consul sources it builds each name the
# oldest Go they accept, and an older go fails only minutes into a build.
#
#   scripts/check-go.sh                 # caravan's go.mod `go` line
#   scripts/check-go.sh 1.25.8 "Nomad v1.11.3"
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

want=${1:-$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$root/go.mod")}
why=${2:-"caravan (go.mod)"}

if ! command -v go >/dev/null 2>&1; then
  echo "error: no \`go\` on PATH; $why needs Go $want or newer (https://go.dev/dl/)" >&2
  exit 1
fi
# `go env GOVERSION` from the module: with GOTOOLCHAIN=auto (the default) an
# older go fetches the toolchain go.mod names first (a one-time download).
have=$(cd "$root" && go env GOVERSION 2>&1) || {
  echo "error: \`go env GOVERSION\` failed: $have" >&2
  echo "       $why needs Go $want or newer (https://go.dev/dl/)" >&2
  exit 1
}
have_num=${have#go}
have_num=${have_num%%[!0-9.]*} # go1.26rc1 -> 1.26, devel -> ""
if [[ -z $have_num ]]; then
  echo "==> go: $have (a development build; not checked against $want)"
  exit 0
fi
oldest=$(printf '%s\n%s\n' "$want" "$have_num" | sort -V | head -n1)
if [[ $oldest != "$want" ]]; then
  echo "error: $why needs Go $want or newer; \`go\` on PATH ($(command -v go)) is $have." >&2
  hint=""
  [[ $(go env GOTOOLCHAIN 2>/dev/null) == local* ]] && hint=", or set GOTOOLCHAIN=auto to let go fetch it"
  echo "       Install Go $want or newer (https://go.dev/dl/)$hint." >&2
  exit 1
fi
echo "==> go: $have (needs $want or newer for $why)"
