# caravan's trainer in the locally built FROM scratch image
# (localhost/caravan-trainer:local, scripts/build-images.sh), run to its
# last step on the pinned client by Nomad's docker driver, under the
# client's runtime (var.runtime: dockerd or podman's Docker-compatible API;
# the constraint checks it). No checkpointing: the final line carries the
# parameters' SHA-256.

variable "job_name" {
  type    = string
  default = "trainer-container"
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

variable "trainer_args" {
  type    = list(string)
  default = ["trainer", "-steps", "300", "-log-every", "0"]
}

job "trainer-container" {
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

    task "trainer" {
      driver = "docker"

      config {
        image        = "localhost/caravan-trainer:local"
        args         = var.trainer_args
        network_mode = "none"
      }

      resources {
        cpu    = 200
        memory = 128
      }
    }
  }
}
