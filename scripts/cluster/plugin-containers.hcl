# Client plugin blocks for the container drivers (scripts/cluster/runtimes.sh
# starts the daemons and substitutes their sockets): Nomad's built-in docker
# driver talks to the cluster's dockerd, Nomad's podman driver (the external
# nomad-driver-podman plugin, in the plugin dir) to its podman service.
# Images are built here and loaded into both runtimes; nothing is pulled.
plugin "docker" {
  config {
    endpoint = "unix://@DOCKER_SOCK@"

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

plugin "nomad-driver-podman" {
  config {
    socket_path = "unix://@PODMAN_SOCK@"

    # Tasks mount only what Nomad gives them (the allocation and task
    # directories, and the device plugin's MPS directories, which need no
    # volumes): no host paths from the jobspec.
    volumes {
      enabled = false
    }
  }
}
