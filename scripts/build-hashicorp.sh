#!/usr/bin/env bash
# Builds a HashiCorp agent (nomad or consul) from the Go module proxy into
# build/bin/<name>-<version>, and links build/bin/<name> to it. A build that
# already exists is reused, so a second run takes no time.
#
#   scripts/build-hashicorp.sh nomad  v1.11.3
#   scripts/build-hashicorp.sh consul v1.22.3
set -euo pipefail

name=${1:?usage: build-hashicorp.sh nomad|consul VERSION}
version=${2:?usage: build-hashicorp.sh nomad|consul VERSION}
root=$(cd "$(dirname "$0")/.." && pwd)
bin_dir="$root/build/bin"
out="$bin_dir/$name-$version"

if [[ -x "$out" ]]; then
  ln -sfn "$name-$version" "$bin_dir/$name"
  echo "==> $name $version: cached at build/bin/$name-$version"
  exit 0
fi

case "$name" in
  nomad)
    module=github.com/hashicorp/nomad
    tags=ui
    # The ./api replace points at a sub-module the proxy zip does not hold.
    drop_replaces=(github.com/hashicorp/nomad/api)
    requires=(github.com/hashicorp/nomad/api@v0.0.0-20260324203407-b27b0c2e019a)
    ;;
  consul)
    module=github.com/hashicorp/consul
    tags=""
    drop_replaces=(
      github.com/hashicorp/consul/api
      github.com/hashicorp/consul/sdk
      github.com/hashicorp/consul/proto-public
      github.com/hashicorp/consul/envoyextensions
      github.com/hashicorp/consul/troubleshoot
    )
    requires=()
    ;;
  *) echo "build-hashicorp.sh: unknown agent '$name' (want nomad or consul)" >&2; exit 2 ;;
esac

echo "==> $name $version: building from the Go module proxy (a few minutes on a cold cache)"
mkdir -p "$bin_dir" "$root/build/src"
src_ro=$(go mod download -json "$module@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[[ -d "$src_ro" ]] || { echo "build-hashicorp.sh: go mod download $module@$version gave no directory" >&2; exit 1; }

work="$root/build/src/$name-$version"
rm -rf "$work"
cp -r "$src_ro" "$work"
chmod -R u+w "$work"
cd "$work"
for r in "${drop_replaces[@]}"; do
  go mod edit -dropreplace="$r"
done
for r in "${requires[@]}"; do
  go mod edit -require="$r"
done

CGO_CFLAGS="${CGO_CFLAGS:--Wno-deprecated-declarations}" \
  go build -mod=mod -trimpath ${tags:+-tags "$tags"} -o "$out.tmp" .
mv "$out.tmp" "$out"
ln -sfn "$name-$version" "$bin_dir/$name"
rm -rf "$work"
echo "==> $name $version: built build/bin/$name-$version"
