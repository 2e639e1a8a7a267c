#!/usr/bin/env bash
# Builds a server binary (Nomad, Consul, or SeaweedFS for the S3 checkpoint
# store) from the Go module proxy into
# build/bin/<name>-<version>, and links build/bin/<name> to it. A build that
# already exists is reused, so a second run takes no time. It prints one line
# per stage (and one a minute while a stage runs); the go commands' output,
# hundreds of "go: downloading" lines, goes to build/logs/build-<name>-<version>.log,
# and a failure prints that log's other lines.
#
#   scripts/build-hashicorp.sh nomad  v1.6.1
#   scripts/build-hashicorp.sh consul v1.14.11
#   scripts/build-hashicorp.sh seaweedfs v0.0.0-20261109003541-7506e5f91cd6
#
# Only open-source (MPL-2.0) agents are built (issue 28): Nomad up to v1.6.3
# (v1.7.0 on is under the BUSL-1.1, and the proxy serves no later 1.6 patch)
# and Consul up to v1.14.x (v1.15 and v1.16 need the envoyextensions and
# troubleshoot sub-modules; v1.16.6 and v1.17 on are BUSL-1.1). Any other
# version, or a pseudo-version, is refused before anything is fetched. Run
# newer agents you already have with NOMAD_BIN and CONSUL_BIN
# (scripts/cluster.sh); nothing here downloads them.
#
# SeaweedFS (Apache-2.0) is not HashiCorp's, but it builds the same way:
# `go install` refuses it because its go.mod has replace directives, so it is
# built from the downloaded module source. Nomad's podman task driver is not
# built: the only version the proxy serves (v0.6.5) links Nomad v1.11.3.
set -euo pipefail

usage='usage: build-hashicorp.sh nomad|consul|seaweedfs VERSION'
name=${1:?$usage}
version=${2:?$usage}
root=$(cd "$(dirname "$0")/.." && pwd)
bin_dir="$root/build/bin"
out="$bin_dir/$name-$version"

# refuse WHY: the version is not one this script may build.
refuse() {
  echo "build-hashicorp.sh: refusing to build $name $version: $1" >&2
  exit 2
}

# release_line VERSION prints "MAJOR MINOR PATCH" of a plain release tag
# (vX.Y.Z), and nothing for anything else (a pre-release, a pseudo-version).
release_line() {
  [[ $1 =~ ^v([0-9]+)\.([0-9]+)\.([0-9]+)$ ]] && echo "${BASH_REMATCH[1]} ${BASH_REMATCH[2]} ${BASH_REMATCH[3]}"
}

# check_open_source: Nomad and Consul only at MPL-2.0 releases (the header
# says which), checked before the cache, so no path builds or links another.
check_open_source() {
  local major minor patch line
  case "$name" in
    nomad | consul) ;;
    nomad-driver-podman)
      refuse "no build of Nomad's podman driver free of BUSL-1.1 code exists (the module proxy serves only v0.6.5, which links Nomad v1.11.3); the local cluster runs podman through Nomad's docker driver instead" ;;
    *) return 0 ;;
  esac
  line=$(release_line "$version") ||
    refuse "only release tags (vX.Y.Z) are built; a pseudo-version or pre-release may be BUSL-1.1 code"
  read -r major minor patch <<<"$line"
  if [[ $name == nomad ]] && ((major > 1 || (major == 1 && (minor > 6 || (minor == 6 && patch > 3))))); then
    refuse "only Nomad up to v1.6.3 is open source (MPL-2.0): v1.7.0 and later are under the BUSL-1.1, and the module proxy serves no later 1.6 patch; run an agent you have with NOMAD_BIN instead"
  fi
  if [[ $name == consul ]] && ((major > 1 || (major == 1 && minor > 14))); then
    refuse "only Consul up to v1.14.x is built: v1.15 and v1.16 need its envoyextensions and troubleshoot sub-modules, and v1.16.6 and v1.17 on are under the BUSL-1.1; run an agent you have with CONSUL_BIN instead"
  fi
}
check_open_source

if [[ -x "$out" ]]; then
  ln -sfn "$name-$version" "$bin_dir/$name"
  echo "==> $name $version: cached at build/bin/$name-$version"
  exit 0
fi

pkg=.
case "$name" in
  nomad)
    module=github.com/hashicorp/nomad
    tags=ui
    # The ./api replace points at a sub-module the proxy zip does not hold:
    # the api module at v1.6.3's commit (MPL-2.0) stands in for it.
    drop_replaces=(github.com/hashicorp/nomad/api)
    requires=(github.com/hashicorp/nomad/api@v0.0.0-20231030125810-e0497bff1437)
    ;;
  consul)
    module=github.com/hashicorp/consul
    tags=""
    # Sub-modules the proxy zip does not hold; go.mod's requires stand in.
    drop_replaces=(
      github.com/hashicorp/consul/api
      github.com/hashicorp/consul/sdk
      github.com/hashicorp/consul/proto-public
    )
    requires=()
    ;;
  seaweedfs)
    module=github.com/seaweedfs/seaweedfs
    tags=""
    pkg=./weed
    drop_replaces=()
    requires=()
    ;;
  *) echo "build-hashicorp.sh: unknown agent '$name' (want nomad, consul or seaweedfs)" >&2; exit 2 ;;
esac

log="$root/build/logs/build-$name-$version.log"
mkdir -p "$bin_dir" "$root/build/src" "$(dirname "$log")"
: >"$log"
t_start=$SECONDS

# stage N TEXT: one progress line per stage, with the time so far.
stage() {
  local el=$((SECONDS - t_start))
  printf '==> %s %s [%s] %s (%dm%02ds so far)\n' "$name" "$version" "$1" "$2" $((el / 60)) $((el % 60))
}

# quietly CMD...: runs CMD with its output (the module downloads' hundreds
# of "go: downloading" lines) in the log; on failure prints the log's other
# lines, so the error stays visible. While CMD runs, a line every minute.
quietly() {
  "$@" >>"$log" 2>&1 &
  local pid=$! t0=$SECONDS
  while ! wait_for "$pid" 60; do
    local el=$((SECONDS - t0))
    printf '    ... still at it: %dm%02ds (%d modules fetched; log: %s)\n' $((el / 60)) $((el % 60)) \
      "$(grep -c '^go: downloading' "$log" || true)" "${log#"$root"/}"
  done
  if ! wait "$pid"; then
    echo "build-hashicorp.sh: $name $version: '$*' failed; the log without its download lines:" >&2
    grep -v '^go: downloading' "$log" | tail -n 40 >&2
    exit 1
  fi
}

# wait_for PID SECONDS: true once PID has exited, false after SECONDS.
wait_for() {
  local i
  for ((i = 0; i < $2; i++)); do
    kill -0 "$1" 2>/dev/null || return 0
    sleep 1
  done
  ! kill -0 "$1" 2>/dev/null
}

stage 1/4 "fetching the $name source from the Go module proxy"
src_ro=$(go mod download -json "$module@$version" 2>>"$log" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[[ -d "$src_ro" ]] || { echo "build-hashicorp.sh: go mod download $module@$version gave no directory (log: $log)" >&2; tail -n 20 "$log" >&2; exit 1; }
# The oldest Go the agent's own go.mod accepts, checked before the long part.
"$root/scripts/check-go.sh" "$(sed -n 's/^go \([0-9.]*\)$/\1/p' "$src_ro/go.mod")" "$name $version (its go.mod)"

work="$root/build/src/$name-$version"
rm -rf "$work"
cp -r "$src_ro" "$work"
chmod -R u+w "$work"
cd "$work"
for r in ${drop_replaces[@]+"${drop_replaces[@]}"}; do
  go mod edit -dropreplace="$r"
done
for r in ${requires[@]+"${requires[@]}"}; do
  go mod edit -require="$r"
done

stage 2/4 "fetching its dependencies (a few hundred modules on a cold cache; log: ${log#"$root"/})"
quietly go list -mod=mod -deps ${tags:+-tags "$tags"} "$pkg" >/dev/null
stage 3/4 "compiling (the longest stage: many minutes on 2 cores on a cold build cache)"
CGO_CFLAGS="${CGO_CFLAGS:--Wno-deprecated-declarations}" \
  quietly go build -mod=mod -trimpath ${tags:+-tags "$tags"} -o "$out.tmp" "$pkg"
mv "$out.tmp" "$out"
ln -sfn "$name-$version" "$bin_dir/$name"
rm -rf "$work"
stage 4/4 "built build/bin/$name-$version"
