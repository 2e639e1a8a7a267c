# The local cluster's container runtimes, sourced by scripts/cluster.sh (which
# sets root, dir, runtimes, clients and the start/alive/wait_for/log helpers).
#
# dockerd: Debian's docker.io, loopback only: no bridge, no iptables, no IP
# forwarding; its data root, exec root, pid file and socket under the cluster
# dir, so two clusters (and a system dockerd) never share state.
#
# podman: `podman system service`, its Docker-compatible API, with the
# settings this kind of machine needs (../shared/notes/containers.md): runc
# (crun fails on cgroups v1 hybrid mode), the cgroupfs manager, and default
# ulimits below root's hard limits (root cannot raise them here).
#
# Every client runs Nomad's docker driver (one per client: Nomad has one
# `docker` plugin); runtime_of says which daemon it talks to: podman's API
# for the clients in CARAVAN_PODMAN_CLIENTS (default client2), dockerd for
# the others. The client's node meta caravan.container_runtime names it, so
# a job picks a runtime with a constraint. Nomad's own podman driver plugin
# (nomad-driver-podman) is not run: no build of it free of BUSL-1.1 code
# exists (scripts/build-hashicorp.sh).
#
# Neither may pull: both get a proxy at a closed loopback port, so a missing
# image fails at once, and names with no registry resolve nowhere else. Every
# image they run is built here (scripts/build-images.sh) and loaded by
# load_images.

rt_dir=$dir/runtimes
docker_sock=$rt_dir/docker/docker.sock
podman_sock=$rt_dir/podman/podman.sock
# podman's runroot is short and outside the cluster dir: podman refuses a
# --runroot longer than 50 characters, and conmon's exit command (`podman
# container cleanup`, which marks an exited container "exited") passes one.
# Under a long cluster dir that cleanup failed: containers stayed "stopped"
# and every wait on one (the docker driver's, on each stop of a task) hung
# for podman's 20 s cleanup timeout. One per cluster dir.
podman_run=/tmp/caravan-podman-$(printf %s "$dir" | sha256sum | cut -c1-12)
# A closed port on loopback: any pull attempt fails at once, and nothing
# leaves the machine.
no_pull_proxy=http://127.0.0.1:9

# have_runtimes says whether this cluster runs the container runtimes.
have_runtimes() {
  case "$runtimes" in
    none) return 1 ;;
    auto | all) [[ -z $(missing_runtimes) ]] ;;
    *) echo "cluster: CARAVAN_RUNTIMES must be auto, all or none, got '$runtimes'" >&2; exit 2 ;;
  esac
}

# missing_runtimes prints what the container runtimes need and this machine
# lacks, with what installs it.
missing_runtimes() {
  local c m=()
  for c in dockerd podman runc; do
    command -v "$c" >/dev/null || m+=("$c (make e2e-deps)")
  done
  echo "${m[*]}"
}

# check_runtimes fails when CARAVAN_RUNTIMES=all and a runtime is missing,
# and warns when auto finds none.
check_runtimes() {
  have_runtimes && return 0
  [[ $runtimes == none ]] && return 0
  if [[ $runtimes == all ]]; then
    echo "cluster: CARAVAN_RUNTIMES=all, but missing: $(missing_runtimes)" >&2
    exit 1
  fi
  log "no container runtimes (missing: $(missing_runtimes)): the docker driver is off"
}

# denylist prints the clients' driver.denylist: docker only when the
# cluster runs no container runtimes.
denylist() {
  if have_runtimes; then echo "qemu,java"; else echo "docker,qemu,java"; fi
}

# runtime_of NODE prints the container runtime behind the client's docker
# driver: podman for the clients in CARAVAN_PODMAN_CLIENTS (default
# client2), docker for the others, none without runtimes.
runtime_of() {
  have_runtimes || { echo none; return; }
  local c
  for c in ${CARAVAN_PODMAN_CLIENTS-client2}; do
    [[ $c == "$1" ]] && { echo podman; return; }
  done
  echo docker
}

# runtime_used RUNTIME says whether a client of this cluster runs it (a
# one-client cluster starts no podman service).
runtime_used() {
  local n
  for n in "${clients[@]}"; do
    [[ $(runtime_of "$n") == "$1" ]] && return 0
  done
  return 1
}

# render_runtimes NODE prints the client's docker plugin block, pointed at
# its runtime's socket.
render_runtimes() {
  have_runtimes || return 0
  local rt sock=$docker_sock
  rt=$(runtime_of "$1")
  [[ $rt == podman ]] && sock=$podman_sock
  sed -e "s|@RUNTIME_SOCK@|$sock|g" -e "s|@RUNTIME@|$rt|g" \
    "$root/scripts/cluster/plugin-containers.hcl"
}

# render_engine NODE prints the caravan driver's docker_endpoint: the
# socket of the engine behind the client's docker driver (nothing without
# runtimes).
render_engine() {
  have_runtimes || return 0
  local sock=$docker_sock
  [[ $(runtime_of "$1") == podman ]] && sock=$podman_sock
  printf '    docker_endpoint = "unix://%s"\n' "$sock"
}

write_podman_conf() {
  local p=$rt_dir/podman
  mkdir -p "$p"/{root,tmp} "$podman_run"
  # podman keeps the runroot it was first started with in its database and
  # refuses (or silently keeps) a changed one: a cluster dir from before the
  # short runroot gets a new database (its images are in storage, kept).
  if [[ $(cat "$p/runroot" 2>/dev/null) != "$podman_run" ]]; then
    rm -f "$p/root/libpod/bolt_state.db"
    echo "$podman_run" >"$p/runroot"
  fi
  cat >"$p/containers.conf" <<EOF
# Written by scripts/cluster.sh for this cluster's podman service.
[containers]
default_ulimits = ["nofile=1024:1024", "nproc=4096:4096"]
log_driver = "k8s-file"
# The service's (closed) proxy is not the containers' business.
http_proxy = false

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
events_logfile_path = "$p/events.log"
tmp_dir = "$p/tmp"
# File locks under tmp_dir: the default ("shm") is one /dev/shm/libpod_lock
# table shared by every podman on the machine (a podman that frees or
# renumbers its locks rewrites it for all), so two clusters side by side
# would share container locks.
lock_type = "file"
EOF
  cat >"$p/storage.conf" <<EOF
[storage]
driver = "overlay"
graphroot = "$p/root"
runroot = "$podman_run"
EOF
  # No search registries: a short name resolves to a local image or nothing.
  cat >"$p/registries.conf" <<EOF
unqualified-search-registries = []
short-name-mode = "disabled"
EOF
}

# podman_env points podman at this cluster's configuration and storage.
podman_env() {
  local p=$rt_dir/podman
  export CONTAINERS_CONF="$p/containers.conf" CONTAINERS_STORAGE_CONF="$p/storage.conf" \
    CONTAINERS_REGISTRIES_CONF="$p/registries.conf"
}

docker_cli() { docker -H "unix://$docker_sock" "$@"; }
podman_cli() { podman --remote --url "unix://$podman_sock" "$@"; }

start_runtimes() {
  check_runtimes
  have_runtimes || return 0
  mkdir -p "$rt_dir"/docker/{data,exec}
  if runtime_used docker && ! alive dockerd; then
    log "starting dockerd (unix://$docker_sock, loopback only)"
    rm -f "$docker_sock" "$rt_dir/docker/dockerd.pid"
    (
      export HTTP_PROXY=$no_pull_proxy HTTPS_PROXY=$no_pull_proxy NO_PROXY=""
      start dockerd dockerd --iptables=false --ip-forward=false --ip-masq=false --bridge=none \
        --userland-proxy=false --data-root "$rt_dir/docker/data" --exec-root "$rt_dir/docker/exec" \
        --pidfile "$rt_dir/docker/dockerd.pid" -H "unix://$docker_sock"
    )
  fi
  if runtime_used podman && ! alive podman; then
    log "starting podman's API service (unix://$podman_sock)"
    write_podman_conf
    rm -f "$podman_sock"
    (
      export HTTP_PROXY=$no_pull_proxy HTTPS_PROXY=$no_pull_proxy NO_PROXY=""
      podman_env
      start podman podman --runtime runc --cgroup-manager cgroupfs \
        system service --time 0 "unix://$podman_sock"
    )
  fi
  if runtime_used docker; then wait_for "dockerd (see logs/dockerd.log)" 60 docker_cli info; fi
  if runtime_used podman; then wait_for "podman's API service (see logs/podman.log)" 60 podman_cli info; fi
  load_images
}

# load_images [IMAGE...] loads images into the runtimes the cluster runs,
# skipping a runtime that already holds that image (same name, same ID): the
# PyTorch image is a gigabyte, and every container test calls this. Without
# arguments it loads every tarball of build/images/; an argument is a
# docker-archive tarball (`docker save` or `podman save` writes one) or the
# name of an image in this machine's own podman storage (what `podman
# build -t NAME` made), which it saves to a tarball first.
load_images() {
  local t tmp=""
  if (( $# == 0 )); then
    have_runtimes || return 0
    for t in "$root"/build/images/*.tar; do
      [[ -e $t ]] && load_image_tar "$t"
    done
    return 0
  fi
  if ! alive dockerd && ! alive podman; then
    echo "cluster: images: neither this cluster's dockerd nor its podman service runs; start them with 'scripts/cluster.sh up' (not CARAVAN_RUNTIMES=none)" >&2
    return 1
  fi
  for t in "$@"; do
    if [[ ! -f $t ]]; then
      command -v podman >/dev/null || { echo "cluster: images: $t is not a file, and podman is missing to save it" >&2; return 1; }
      [[ -n $tmp ]] || tmp=$(mktemp -d)
      # The user's own podman storage, not the cluster's service.
      podman image exists "$t" || { echo "cluster: images: $t is neither a tarball nor an image in podman's storage" >&2; rm -rf "$tmp"; return 1; }
      podman save -q --format docker-archive -o "$tmp/image.tar" "$t"
      load_image_tar "$tmp/image.tar" "$t"
      rm -f "$tmp/image.tar"
    else
      load_image_tar "$t"
    fi
  done
  [[ -z $tmp ]] || rm -rf "$tmp"
}

# load_image_tar TARBALL [LABEL] loads one docker-archive tarball into
# dockerd and podman's service.
load_image_tar() {
  local t=$1 label=${2:-$(basename "$1" .tar)} meta name id
  # manifest.json names the image and its config blob, whose digest is the
  # image ID both runtimes report.
  meta=$(tar -xOf "$t" manifest.json 2>/dev/null) || { echo "cluster: images: $t is not a docker-archive tarball (no manifest.json)" >&2; return 1; }
  name=$(sed -n 's/.*"RepoTags":\["\([^"]*\)".*/\1/p' <<<"$meta")
  id=$(sed -n 's/.*"Config":"\(blobs\/sha256\/\)\{0,1\}\([0-9a-f]\{64\}\).*/\2/p' <<<"$meta")
  if ! alive dockerd; then
    :
  elif [[ -n $name && -n $id && $(docker_cli image inspect -f '{{.Id}}' "$name" 2>/dev/null) == "sha256:$id" ]]; then
    log "$name already in dockerd"
  else
    docker_cli load -q -i "$t" >/dev/null
    log "loaded $label into dockerd"
  fi
  if ! alive podman; then
    :
  elif [[ -n $name && -n $id && $(podman_cli image inspect -f '{{.Id}}' "$name" 2>/dev/null) == "$id" ]]; then
    log "$name already in podman"
  else
    podman_cli load -q -i "$t" >/dev/null
    log "loaded $label into podman"
  fi
}

stop_runtimes() {
  local a
  # dockerd stops its containers on the way down; podman's service leaves
  # them to conmon, so stop them first (Nomad normally has already).
  if alive podman; then
    timeout 30 podman --remote --url "unix://$podman_sock" stop --all --time 5 >/dev/null 2>&1 || true
  fi
  for a in podman dockerd; do
    alive "$a" && log "stopping $a"
    stop_agent "$a"
  done
  unmount_under "$rt_dir"
  if ! alive podman; then
    unmount_under "$podman_run"
    rm -rf "$podman_run"
  fi
}

# unmount_under DIR unmounts what is left mounted below DIR (podman keeps its
# overlay directory bind-mounted on itself; Nomad clients leave their
# allocations' tmpfs mounts), deepest first, so the cluster dir can be
# removed.
unmount_under() {
  local m
  awk -v d="$1/" 'index($5, d) == 1 {print $5}' /proc/self/mountinfo | sort -r | while read -r m; do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
  done
}

status_runtimes() {
  local a
  for a in dockerd podman; do
    if alive "$a"; then echo "$a: running (pid $(pid_of "$a"))"; else echo "$a: stopped"; fi
  done
}
