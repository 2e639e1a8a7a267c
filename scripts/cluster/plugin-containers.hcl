# Client plugin block for Nomad's docker driver (scripts/cluster/runtimes.sh
# starts the daemons and substitutes the socket). This client's containers
# run under @RUNTIME@: dockerd, or podman's Docker-compatible API service
# (node meta caravan.container_runtime says which). Nomad's own podman driver
# plugin is not run here: no build of it free of BUSL-1.1 code exists.
# Images are built here and loaded into both runtimes; nothing is pulled.
plugin "docker" {
  config {
    endpoint = "unix://@RUNTIME_SOCK@"

    # A setting for machines WITHOUT GPUs (this cluster's GPUs are
    # simulated): Nomad's docker driver switches a task to this runtime
    # whenever its device env has NVIDIA_VISIBLE_DEVICES, which caravan's
    # device plugin sets. A real GPU node keeps the default, "nvidia",
    # registered with dockerd by the NVIDIA container toolkit.
    nvidia_runtime = "runc"

    # Images are loaded here, never pulled: never garbage-collect them.
    gc {
      image = false
    }

    # The device plugin's MPS directories reach the container as device
    # mounts, which need no `volumes { enabled = true }`.
  }
}
