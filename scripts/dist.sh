#!/usr/bin/env bash
# Builds caravan's release tarballs under build/dist/:
#
#   caravan_<version>_linux_amd64.tar.gz
#   caravan_<version>_linux_arm64.tar.gz
#   SHA256SUMS
#
# Each holds caravan-<version>-linux-<arch>/ with the caravan binary (version
# and revision set through -ldflags), LICENSE, README.md, CHANGELOG.md,
# BUILD-INFO (how it was built: Go version, cgo, NVML), THIRD_PARTY_LICENSES
# (every module linked into that binary with its licence, then the licence
# texts: tools/licences, which fails the build on a licence not allowed),
# jobspecs/ and the Nomad agent snippets (jobspecs/agent/).
#
# cgo: caravan needs it (go-nvml loads libnvidia-ml through dlopen from C,
# and the task driver's executor, from Nomad's v1.6 plugin SDK, links runc's
# cgroup code, which does not build without cgo). amd64 is built natively;
# arm64 needs an aarch64 C cross compiler (DIST_ARM64_CC, default
# aarch64-linux-gnu-gcc, Debian's gcc-aarch64-linux-gnu), and without one
# the build stops, naming the package to install.
#
#   scripts/dist.sh [--check]   (--check: only verify an existing build/dist;
#                                DIST_DIR=dir to use another directory)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
version=${VERSION:-$(sed -n 's/^\tVersion *= "\(.*\)"$/\1/p' internal/version/version.go)}
revision=${GIT_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || true)}
out=${DIST_DIR:-$root/build/dist}
arches=(amd64 arm64)
pkg=github.com/caravan-nomad/caravan/internal/version

die() { echo "dist: $*" >&2; exit 1; }
[[ -n $version ]] || die "cannot read the version from internal/version/version.go"

# check verifies the tarballs against SHA256SUMS and their layout.
check() {
  [[ -f $out/SHA256SUMS ]] || die "$out/SHA256SUMS is missing"
  (cd "$out" && sha256sum --check --quiet SHA256SUMS) || die "checksums do not match"
  local arch tgz top f
  for arch in "${arches[@]}"; do
    tgz=$out/caravan_${version}_linux_${arch}.tar.gz
    [[ -f $tgz ]] || die "$tgz is missing"
    grep -q " caravan_${version}_linux_${arch}.tar.gz\$" "$out/SHA256SUMS" || die "$tgz is not in SHA256SUMS"
    top=caravan-${version}-linux-${arch}
    local listing
    listing=$(tar -tzf "$tgz")
    for f in caravan LICENSE README.md CHANGELOG.md BUILD-INFO THIRD_PARTY_LICENSES jobspecs/README.md jobspecs/agent/client-plugins.hcl; do
      grep -qx "$top/$f" <<<"$listing" || die "$tgz lacks $top/$f"
    done
    if grep -qv "^$top/" <<<"$listing"; then die "$tgz has entries outside $top/"; fi
    tar -xzOf "$tgz" "$top/BUILD-INFO" | grep -qx "version: $version" || die "$tgz: BUILD-INFO has another version"
    local report
    report=$(tar -xzOf "$tgz" "$top/THIRD_PARTY_LICENSES")
    [[ $(head -n 1 <<<"$report") == "Third-party licences of caravan" ]] || die "$tgz: THIRD_PARTY_LICENSES is not the licence report of caravan"
    grep -qE '^std +go[^ ]+ +BSD-3-Clause$' <<<"$report" || die "$tgz: THIRD_PARTY_LICENSES lists no module (not even Go's standard library)"
  done
  echo "dist: $out verified (${#arches[@]} tarballs, SHA256SUMS)"
}

if [[ ${1:-} == --check ]]; then
  check
  exit 0
fi

build() {
  local arch=$1 stage=$2 cgo=1 cc="" nvml=yes
  if [[ $arch == arm64 && $(go env GOHOSTARCH) != arm64 ]]; then
    cc=${DIST_ARM64_CC:-aarch64-linux-gnu-gcc}
    command -v "$cc" >/dev/null 2>&1 ||
      die "arm64: no C cross compiler $cc: caravan needs cgo (NVML, and the v1.6 executor's runc cgroup code); apt-get install gcc-aarch64-linux-gnu, or set DIST_ARM64_CC"
  fi
  echo "==> dist: linux/$arch (cgo=$cgo${cc:+, CC=$cc})"
  env CGO_ENABLED=$cgo GOOS=linux GOARCH=$arch ${cc:+CC=$cc} \
    go build -trimpath -ldflags "-s -w -X $pkg.Version=$version -X $pkg.GitCommit=$revision" \
    -o "$stage/caravan" .
  {
    echo "version: $version"
    echo "revision: $revision"
    echo "go: $(go env GOVERSION)"
    echo "target: linux/$arch"
    echo "cgo: $cgo"
    echo "nvml: $nvml"
  } >"$stage/BUILD-INFO"
  "$licences" report -module "$root" -o "$stage/THIRD_PARTY_LICENSES" "$stage/caravan" ||
    die "linux/$arch: the third-party licence report failed (a module not allowed, above)"
}

rm -rf "$out"
mkdir -p "$out"
# The licence checker (a module of its own) writes each binary's report.
licences=$out/.stage/licences
go build -C tools/licences -o "$licences" . || die "building tools/licences failed"
for arch in "${arches[@]}"; do
  top=caravan-${version}-linux-${arch}
  stage=$out/.stage/$top
  mkdir -p "$stage"
  build "$arch" "$stage"
  cp LICENSE README.md CHANGELOG.md "$stage/"
  cp -R jobspecs "$stage/jobspecs"
  # Reproducible archives: fixed owner, order and times.
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime='2000-01-01 00:00Z' \
    -C "$out/.stage" -czf "$out/caravan_${version}_linux_${arch}.tar.gz" "$top"
done
rm -rf "$out/.stage"
(cd "$out" && sha256sum caravan_*.tar.gz >SHA256SUMS)
check
ls -l "$out"
