# A fraction of one GPU in a container: jobspecs/gpu-fraction.nomad.hcl with
# Nomad's docker driver on the pinned client, whose runtime (var.runtime:
# dockerd, or podman's Docker-compatible API; the constraint checks it) runs
# the locally built envprobe image (a FROM scratch image that prints its
# environment and which of its arguments are directories, then sleeps).

variable "job_name" {
  type    = string
  default = "gpu-fraction-container"
}

variable "shares" {
  type    = number
  default = 2
}

variable "runtime" {
  description = "The container runtime behind the client's docker driver (node meta caravan.container_runtime): docker (the cluster's dockerd) or podman (its podman service's Docker-compatible API)."
  type        = string
  default     = "docker"

  validation {
    condition     = contains(["docker", "podman"], var.runtime)
    error_message = "The runtime must be docker or podman."
  }
}

variable "node" {
  type = string
}

variable "image" {
  description = "A local image (built by scripts/build-images.sh); never pulled."
  type        = string
  default     = "localhost/caravan-envprobe:local"
}

variable "probe_paths" {
  description = "Paths the probe reports on (the MPS directories)."
  type        = list(string)
  default     = []
}

job "gpu-fraction-container" {
  id          = var.job_name
  name        = var.job_name
  type        = "batch"
  datacenters = ["dc1"]

  constraint {
    attribute = "${node.unique.name}"
    value     = var.node
  }

  constraint {
    attribute = "${meta.caravan.container_runtime}"
    value     = var.runtime
  }

  group "train" {
    reschedule {
      attempts  = 0
      unlimited = false
    }

    restart {
      attempts = 0
      mode     = "fail"
    }

    task "worker" {
      driver = "docker"

      config {
        image        = var.image
        args         = var.probe_paths
        network_mode = "none"
        # A missing image fails at once rather than waiting on a registry.
        image_pull_timeout = "30s"
      }

      resources {
        cpu    = 50
        memory = 32

        device "caravan/gpushare" {
          count = var.shares

          constraint {
            attribute = "${device.attr.shares}"
            value     = "4"
          }

          affinity {
            attribute = "${device.attr.index}"
            operator  = "<="
            value     = "0"
            weight    = 100
          }
        }
      }
    }
  }
}
