# Nomad client agent configuration for caravan on a GPU node: the two plugins
# and the raw_exec, docker and podman drivers the shipped jobspecs use. Add
# it to the client's configuration (nomad agent -config=...), and copy the
# caravan binary into plugin_dir twice: as caravan-gpu and as caravan (Nomad
# finds a plugin by its file name; `args` picks what the binary serves).
#
# e2e/jobspecs starts a client from this very file, changing only the lines
# marked "e2e:" (paths and sockets, and the GPU backend and the docker
# driver's nvidia_runtime: the CI machine has no GPU).

data_dir   = "/opt/nomad/data"    # e2e: data_dir
plugin_dir = "/opt/nomad/plugins" # e2e: plugin_dir

client {
  enabled = true
}

# raw_exec runs the jobspecs' plain tasks (hello, gpu-*, the planner, the
# relay sidecars). Like the caravan driver it runs tasks as the agent's user,
# without isolation; Nomad leaves it off until enabled. To refuse tasks that
# run as root or in privileged groups, deny their IDs (ranges allowed):
#   denied_host_uids = "0"
#   denied_host_gids = "0,27"
plugin "raw_exec" {
  config {
    enabled = true
  }
}

# Container tasks, under Nomad's docker driver (against dockerd, or against
# podman's Docker-compatible API service: `podman system service`, with this
# endpoint pointing at its socket) or Nomad's podman driver, get the same
# GPU reservation as host tasks (the GPU env, and the MPS pipe
# and log directories as bind mounts), and caravan's lifecycle tasks
# checkpoint them (driver/README.md, "Containers"). Keep the drivers'
# volumes off: caravan needs none.
plugin "docker" {
  config {
    endpoint = "unix:///var/run/docker.sock" # e2e: endpoint

    # The NVIDIA container toolkit's runtime, registered with dockerd (the
    # default, written out): the driver switches a task to it whenever the
    # task's device env has NVIDIA_VISIBLE_DEVICES, which caravan's device
    # plugin sets. Only a machine without GPUs (caravan's local cluster:
    # simulated GPUs) sets "runc".
    nvidia_runtime = "nvidia" # e2e: nvidia_runtime
  }
}

# Nomad's podman driver is an external plugin that caravan neither builds
# nor tests: the only version the Go module proxy serves (v0.6.5) links
# Nomad v1.11.3, under the BUSL-1.1 (README.md). If you install it yourself,
# copy nomad-driver-podman into plugin_dir beside caravan's; without it
# Nomad skips this block. It does not pass a
# device plugin's device nodes to the container: on a GPU node install the
# NVIDIA container toolkit's OCI hook for podman, which adds the GPUs named
# by the container's NVIDIA_VISIBLE_DEVICES (driver/README.md, "GPUs in
# podman containers").
plugin "nomad-driver-podman" {
  config {
    socket_path = "unix:///run/podman/podman.sock" # e2e: socket_path
    volumes {
      enabled = false
    }
  }
}

# Fractional GPUs through NVML (device/README.md).
plugin "caravan-gpu" {
  args = ["device"]

  config {
    backend            = "nvml" # e2e: backend
    shares             = 4
    fingerprint_period = "1m"

    # GPUs another device plugin (nomad-device-nvidia) hands out: list their
    # UUIDs here and the others in that plugin's ignored_gpu_ids, so no GPU
    # is given out twice.
    # ignored_gpu_ids = ["GPU-fef8089b-4820-abfc-e83e-94318197576e"]

    # Whole GPUs for the H100s: one share each.
    share_override {
      gpu    = "model:NVIDIA H100 80GB HBM3"
      shares = 1
    }
  }
}

# The checkpointing task driver (driver/README.md). Off until enabled, like
# raw_exec. The store is one directory every client reaches (an NFS or other
# shared mount), or an S3-compatible object store: the commented `store`
# block below, in place of checkpoint_store (README.md, "The S3 checkpoint
# store").
plugin "caravan" {
  args = ["driver"]

  config {
    enabled           = true
    checkpoint_store  = "/mnt/caravan-checkpoints" # e2e: checkpoint_store
    checkpoint_retain = 3

    # Without a shared mount (remove checkpoint_store):
    # store {
    #   endpoint         = "s3.example.internal:9000" # host[:port], no scheme
    #   tls              = true
    #   bucket           = "caravan-checkpoints"
    #   prefix           = "cluster-a"                # this cluster's part of the bucket
    #   region           = "us-east-1"
    #   path_style       = true                       # most self-hosted servers
    #   # AWS shared-credentials format, mode 0600; without it the client's
    #   # AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY
    #   credentials_file = "/etc/nomad.d/caravan-s3.credentials"
    # }

    # The same host ID checks as raw_exec's:
    #   denied_host_uids = "0"
    #   denied_host_gids = "0,27"

    # The local agent the driver asks for a job's incarnation (its create
    # index), so a purged and resubmitted job starts fresh. Defaults to
    # NOMAD_ADDR, else http://127.0.0.1:4646. With ACLs, a token that may
    # read jobs (read-job) in the tasks' namespaces:
    # nomad_address    = "https://127.0.0.1:4646"
    # nomad_token_file = "/etc/nomad.d/caravan-driver.token"

    # The engines behind the docker and podman drivers (their endpoint and
    # socket_path): the restore role asks them which user a container runs
    # as (its user, or its image's USER in the image's /etc/passwd), to give
    # its checkpoint directory that owner: give docker_endpoint the docker
    # plugin's endpoint above. A container task without a numeric uid:gid
    # user fails its restore when the engine cannot be reached. The defaults:
    # DOCKER_HOST, else this line's value, and for podman the commented one.
    docker_endpoint = "unix:///var/run/docker.sock" # e2e: docker_endpoint
    # podman_endpoint = "unix:///run/podman/podman.sock"
  }
}
