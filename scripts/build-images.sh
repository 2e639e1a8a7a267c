#!/usr/bin/env bash
# Builds caravan's container images here, never pulling anything, into
# build/images/<name>.tar (a docker-archive that both `docker load` and
# `podman load` read; scripts/cluster.sh loads every tarball there into the
# cluster's dockerd and podman). An image whose inputs hash as in
# build/images/<name>.sha256 is not rebuilt, nor its binary: the inputs are
# the Containerfile, the Go version, go.mod and go.sum, and every source and
# embedded file of the packages the binary is built from (`go list -deps`).
#
#   scripts/build-images.sh            all images
#   scripts/build-images.sh NAME...    caravan-trainer, caravan-envprobe, caravan-adversary, caravan-pytorch,
#                                      caravan-trainer-nonroot
#
# Images (the Go ones FROM scratch, with static CGO_ENABLED=0 Go binaries):
#   localhost/caravan-trainer:local   /caravan, the trainer image's caravan (trainer/image: `caravan trainer` and `version` without cgo; it runs as
#                                     `caravan trainer`); ENTRYPOINT /caravan
#   localhost/caravan-envprobe:local  /envprobe (e2e/containers/envprobe): prints its
#                                     environment, for the container e2e tests
#   localhost/caravan-pytorch:local   Debian's python3-torch (1.13, CPU) and python3, and
#                                     caravan's Python helper in /opt/caravan (on
#                                     PYTHONPATH); ENTRYPOINT python3. Its base layer is
#                                     a tarball of the files dpkg installed on this
#                                     machine for those packages and their dependencies
#                                     (scripts/images/torch-rootfs.py), imported with
#                                     `podman import` as localhost/caravan-torch-root:KEY
#                                     and kept in the build store; its inputs are the
#                                     packages' names and versions. The helper is
#                                     added on top by a Containerfile, as a user adds it
#                                     to their own image (python/README.md).
#   localhost/caravan-adversary:local /ctradversary (e2e/adversarial/ctradversary): plants
#                                     one attack in the checkpoint directory, for
#                                     e2e/adversarial's container cases
#   localhost/caravan-trainer-nonroot:local  the trainer image with an /etc/passwd and /etc/group
#                                     and `USER trainer` (uid 4242, group trainers 4343), for
#                                     e2e/containers' non-root checkpoint test
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
out=$root/build/images
all=(caravan-trainer caravan-envprobe caravan-adversary caravan-pytorch caravan-trainer-nonroot)
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

# pkg_of NAME prints the Go package of the image's binary; containerfile_of
# NAME its Containerfile.
pkg_of() {
  case "$1" in
    caravan-trainer | caravan-trainer-nonroot) echo ./trainer/image ;; # the trainer alone: the full binary needs cgo
    caravan-envprobe) echo ./e2e/containers/envprobe ;;
    caravan-adversary) echo ./e2e/adversarial/ctradversary ;;
    caravan-pytorch) echo "" ;; # no Go binary
    *) echo "build-images: unknown image '$1' (want one of: ${all[*]})" >&2; exit 2 ;;
  esac
}
containerfile_of() {
  case "$1" in
    caravan-trainer) printf '%s\n' 'FROM scratch' 'COPY caravan /caravan' 'ENTRYPOINT ["/caravan"]' 'CMD ["trainer"]' ;;
    caravan-trainer-nonroot) printf '%s\n' 'FROM scratch' 'COPY caravan /caravan' 'COPY etc /etc' 'USER trainer' \
      'ENTRYPOINT ["/caravan"]' 'CMD ["trainer"]' ;;
    caravan-envprobe) printf '%s\n' 'FROM scratch' 'COPY envprobe /envprobe' 'ENTRYPOINT ["/envprobe"]' ;;
    caravan-adversary) printf '%s\n' 'FROM scratch' 'COPY ctradversary /ctradversary' 'ENTRYPOINT ["/ctradversary"]' ;;
    caravan-pytorch) printf '%s\n' "FROM localhost/caravan-torch-root:$(torch_root_key)" \
      'COPY caravan /opt/caravan/caravan' 'ENV PYTHONPATH=/opt/caravan' 'ENTRYPOINT ["python3"]' ;;
  esac
}

# nonroot_etc prints the non-root trainer image's /etc/passwd, a blank
# line, and its /etc/group.
nonroot_etc() {
  printf '%s\n' 'root:x:0:0:root:/root:/sbin/nologin' 'trainer:x:4242:4343:trainer:/:/sbin/nologin' ''
  printf '%s\n' 'root:x:0:' 'trainers:x:4343:'
}

# torch_root_key hashes the PyTorch image's base layer's inputs: the Debian
# packages (names and versions) and the script that lists their files.
torch_root_key() {
  { python3 "$root/scripts/images/torch-rootfs.py" key; cat "$root/scripts/images/torch-rootfs.py"; } |
    sha256sum | cut -c1-16
}

# torch_root imports the PyTorch image's base layer into the build store,
# unless an image of the same inputs is there.
torch_root() {
  local key t
  key=$(torch_root_key)
  podman image exists "localhost/caravan-torch-root:$key" && return 0
  t=$SECONDS
  # Older bases (other package versions) are dropped first.
  podman images --format '{{.Repository}}:{{.Tag}}' | awk '/^localhost\/caravan-torch-root:/' |
    xargs -r podman rmi -f >/dev/null 2>&1 || true
  python3 "$root/scripts/images/torch-rootfs.py" files |
    tar -C / --no-recursion --null -T - -cf - |
    podman import -q --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      --change 'ENV LANG=C.UTF-8' - "localhost/caravan-torch-root:$key" >/dev/null
  echo "==> base localhost/caravan-torch-root:$key imported from this machine's Debian packages in $((SECONDS - t))s"
}

# context_of NAME fills the build context dir of an image.
context_of() {
  local name=$1 ctx=$2 bin
  case "$name" in
    caravan-pytorch)
      torch_root
      mkdir -p "$ctx/caravan"
      (cd "$root/python/caravan" && find . -name '*.py' -print0 | xargs -0 cp --parents -t "$ctx/caravan")
      ;;
    caravan-trainer-nonroot)
      mkdir -p "$ctx/etc"
      nonroot_etc | awk -v d="$ctx/etc" 'NF == 0 {f = 1; next} {print > (d (f ? "/group" : "/passwd"))}'
      (cd "$root" && CGO_ENABLED=0 go build -trimpath -o "$ctx/caravan" "$(pkg_of "$name")")
      ;;
    *)
      bin=$(containerfile_of "$name" | awk '$1 == "COPY" {print $2}')
      (cd "$root" && CGO_ENABLED=0 go build -trimpath -o "$ctx/$bin" "$(pkg_of "$name")")
      ;;
  esac
}

# inputs_key NAME hashes what the image is made from, without building it.
inputs_key() {
  case "$1" in
    caravan-pytorch) python_inputs "$1" ;;
    caravan-trainer-nonroot) go_inputs "$1"; nonroot_etc ;;
    *) go_inputs "$1" ;;
  esac | sha256sum | cut -d' ' -f1
}

# python_inputs NAME: the Containerfile (naming the base's key) and the
# helper's sources.
python_inputs() {
  containerfile_of "$1"
  (cd "$root/python/caravan" && find . -name '*.py' -print0 | sort -z | xargs -0 sha256sum)
}

# go_inputs NAME: the Containerfile, Go, the modules and every source file
# of the binary's packages.
go_inputs() {
  local pkg
  pkg=$(pkg_of "$1")
  (
    cd "$root"
    containerfile_of "$1"
    go version
    cat go.mod go.sum
    CGO_ENABLED=0 go list -deps -f '{{if not .Standard}}{{.Dir}}{{"\t"}}{{join .GoFiles " "}} {{join .EmbedFiles " "}}{{end}}' "$pkg" |
      while IFS=$'\t' read -r d files; do
        [[ -n $d ]] || continue
        echo "$d"
        # Module cache directories are immutable: their path names them.
        [[ $d == "$root"* ]] || continue
        for f in $files; do sha256sum "$d/$f"; done
      done
  )
}

for name in "${names[@]}"; do pkg_of "$name" >/dev/null; done

for name in "${names[@]}"; do
  start=$SECONDS
  sum=$(inputs_key "$name")
  if [[ -f $out/$name.tar && $(cat "$out/$name.sha256" 2>/dev/null) == "$sum" ]]; then
    echo "==> image localhost/$name:local: cached (inputs $sum), $((SECONDS - start))s"
    continue
  fi
  ctx=$out/.ctx/$name
  rm -rf "$ctx"
  mkdir -p "$ctx"
  context_of "$name" "$ctx"
  containerfile_of "$name" >"$ctx/Containerfile"
  # --timestamp 0 makes the image's bytes depend on its inputs only.
  podman build -q --timestamp 0 --pull=never -f "$ctx/Containerfile" -t "$name:local" "$ctx" >/dev/null
  rm -f "$out/$name.tar.tmp"
  podman save -q --format docker-archive -o "$out/$name.tar.tmp" "localhost/$name:local"
  podman rmi -f "localhost/$name:local" >/dev/null 2>&1 || true
  mv -f "$out/$name.tar.tmp" "$out/$name.tar"
  echo "$sum" >"$out/$name.sha256"
  rm -rf "$ctx"
  echo "==> image localhost/$name:local: built build/images/$name.tar in $((SECONDS - start))s"
done
rmdir "$out/.ctx" 2>/dev/null || true
