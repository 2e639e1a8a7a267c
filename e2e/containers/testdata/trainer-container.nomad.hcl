# caravan's trainer in the locally built FROM scratch image
# (localhost/caravan-trainer:local, scripts/build-images.sh), run to its
# last step on the pinned client by a container driver (var.driver: docker
# or podman). No checkpointing: the final line carries the parameters'
# SHA-256.

variable "job_name" {
  type    = string
  default = "trainer-container"
}

variable "driver" {
  description = "The task driver: docker (Nomad's, against the cluster's dockerd) or podman (the nomad-driver-podman plugin, against its podman service)."
  type        = string
  default     = "docker"

  validation {
    condition     = contains(["docker", "podman"], var.driver)
    error_message = "The driver must be docker or podman."
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
      driver = var.driver

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
