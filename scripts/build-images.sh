#!/usr/bin/env bash
# Builds caravan's container images here, never pulling anything, into
# build/images/<name>.tar (a docker-archive that both `docker load` and
# `podman load` read; scripts/cluster.sh loads every tarball there into the
# cluster's dockerd and podman). An image whose inputs (its Containerfile and
# the files copied into it) hash as in build/images/<name>.sha256 is not
# rebuilt.
#
#   scripts/build-images.sh            all images
#   scripts/build-images.sh NAME...    caravan-trainer, caravan-envprobe
#
# Images (every one FROM scratch, with static CGO_ENABLED=0 Go binaries):
#   localhost/caravan-trainer:local   /caravan, the caravan binary (its trainer runs as
#                                     `caravan trainer`); ENTRYPOINT /caravan
#   localhost/caravan-envprobe:local  /envprobe (e2e/containers/envprobe): prints its
#                                     environment, for the container e2e tests
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/build/images
all=(caravan-trainer caravan-envprobe)
names=("$@")
(( ${#names[@]} )) || names=("${all[@]}")

command -v podman >/dev/null || {
  echo "build-images: podman is missing; run 'make e2e-deps' (scripts/install-e2e-deps.sh)" >&2
  exit 1
}
mkdir -p "$out"

# Builds use a storage of their own under build/, not the cluster's: the
# tarball is what the cluster loads. No registry is configured, so FROM
# scratch is the only base there is.
store=$out/.store
mkdir -p "$store"/{root,run,tmp}
cat >"$store/storage.conf" <<EOF
[storage]
driver = "overlay"
graphroot = "$store/root"
runroot = "$store/run"
EOF
cat >"$store/registries.conf" <<EOF
unqualified-search-registries = []
short-name-mode = "disabled"
EOF
cat >"$store/containers.conf" <<EOF
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "none"
tmp_dir = "$store/tmp"
EOF
export CONTAINERS_STORAGE_CONF=$store/storage.conf CONTAINERS_REGISTRIES_CONF=$store/registries.conf \
  CONTAINERS_CONF=$store/containers.conf
# A pull, were one ever attempted, goes to a closed loopback port.
export HTTP_PROXY=http://127.0.0.1:9 HTTPS_PROXY=http://127.0.0.1:9 NO_PROXY=""

# stage NAME CTX writes the image's Containerfile and files into CTX.
stage() {
  local name=$1 ctx=$2
  case "$name" in
    caravan-trainer)
      (cd "$root" && CGO_ENABLED=0 go build -trimpath -o "$ctx/caravan" .)
      printf '%s\n' 'FROM scratch' 'COPY caravan /caravan' 'ENTRYPOINT ["/caravan"]' 'CMD ["trainer"]' >"$ctx/Containerfile"
      ;;
    caravan-envprobe)
      (cd "$root" && CGO_ENABLED=0 go build -trimpath -o "$ctx/envprobe" ./e2e/containers/envprobe)
      printf '%s\n' 'FROM scratch' 'COPY envprobe /envprobe' 'ENTRYPOINT ["/envprobe"]' >"$ctx/Containerfile"
      ;;
    *) echo "build-images: unknown image '$name' (want one of: ${all[*]})" >&2; exit 2 ;;
  esac
}

for name in "${names[@]}"; do
  start=$SECONDS
  ctx=$out/.ctx/$name
  rm -rf "$ctx"
  mkdir -p "$ctx"
  stage "$name" "$ctx"
  sum=$(cd "$ctx" && find . -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)
  if [[ -f $out/$name.tar && $(cat "$out/$name.sha256" 2>/dev/null) == "$sum" ]]; then
    echo "==> image $name:local: cached (inputs $sum), $((SECONDS - start))s"
    rm -rf "$ctx"
    continue
  fi
  # --timestamp 0 makes the image's bytes depend on its inputs only.
  podman build -q --timestamp 0 --pull=never -f "$ctx/Containerfile" -t "$name:local" "$ctx" >/dev/null
  rm -f "$out/$name.tar.tmp"
  podman save -q --format docker-archive -o "$out/$name.tar.tmp" "localhost/$name:local"
  podman rmi -f "localhost/$name:local" >/dev/null 2>&1 || true
  mv -f "$out/$name.tar.tmp" "$out/$name.tar"
  echo "$sum" >"$out/$name.sha256"
  rm -rf "$ctx"
  echo "==> image $name:local: built build/images/$name.tar in $((SECONDS - start))s"
done
