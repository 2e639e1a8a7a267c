# The reference trainer as a container image under Nomad's docker driver
# (or, with -var driver=podman, Nomad's podman driver plugin), checkpointed
# by caravan lifecycle tasks (driver/README.md, "Containers"):
# a prestart "restore" task restores the newest checkpoint into the
# allocation's shared directory (mounted at /alloc in the container), the
# container trains with -checkpoint-dir /alloc/checkpoint and, on its kill
# signal (SIGTERM, sent on job stop, scale-down, alloc stop and drains),
# saves and exits; a poststop "commit" task commits that checkpoint to
# caravan's store. Suspend with `nomad job scale train-container train 0`,
# resume with `... 1`: training continues from the saved step.
#
# A third, optional caravan task, the poststart sidecar "checkpoint", takes
# periodic (checkpoint_interval) and on-demand checkpoints while the
# container runs: `nomad alloc signal -s SIGUSR1 ALLOC checkpoint`. It asks
# the trainer through a request file in /alloc/checkpoint, which the trainer
# polls (a task cannot signal another without the alloc-lifecycle ACL), and
# holds a writer lease, so a new allocation's restore waits for an old
# allocation's commit still in flight.
#
# The image is built here, never pulled (scripts/build-images.sh,
# localhost/caravan-trainer:local). To use your own image: keep its
# checkpoint protocol (driver/protocol: save into the directory, write the
# marker, exit on the kill signal), and add the kill_* lines, the
# checkpoint-dir argument and the two caravan tasks below (README.md shows
# the diff).
#
#   nomad job run -var node=client1 jobspecs/train-container.nomad.hcl
#
# Nomad's podman driver (-var driver=podman) is the external
# nomad-driver-podman plugin, which you install: it is not built, run or
# tested here (no build of it free of BUSL-1.1 code exists: the Go module
# proxy serves only v0.6.5, which links Nomad v1.11.3; README.md); the local
# cluster runs the docker driver against podman instead, through podman's
# Docker-compatible API (client2). Its image must be in the podman service's
# local store (podman load -i build/images/caravan-trainer.tar); nothing is
# pulled. It stops a container with the image's stop signal (SIGTERM unless
# the image sets STOPSIGNAL), not kill_signal, so the trainer saves on
# SIGTERM either way.

variable "job_name" {
  type    = string
  default = "train-container"
}

variable "driver" {
  description = "Nomad task driver of the trainer: \"docker\" or \"podman\" (Nomad's podman driver plugin, which you install)."
  type        = string
  default     = "docker"

  validation {
    condition     = contains(["docker", "podman"], var.driver)
    error_message = "The driver must be \"docker\" or \"podman\"."
  }
}

variable "node" {
  description = "Name of the client that runs the container."
  type        = string
  default     = "client1"
}

variable "image" {
  type    = string
  default = "localhost/caravan-trainer:local"
}

variable "steps" {
  type    = number
  default = 20000
}

variable "step_delay" {
  type    = string
  default = "2ms"
}

variable "extra_args" {
  description = "More trainer flags, after the others (a later flag wins), e.g. a larger model."
  type        = list(string)
  default     = []
}

variable "memory" {
  description = "Memory of the trainer container in MiB."
  type        = number
  default     = 128
}

variable "kill_timeout" {
  description = "How long the trainer has to save and exit after its kill signal."
  type        = string
  default     = "30s"
}

variable "user" {
  description = "The trainer container's user, a name or a numeric ID (\"\": the image's USER). The restore task gives /alloc/checkpoint that owner."
  type        = string
  default     = ""
}

variable "volumes" {
  description = "More volumes of the trainer container (none at /alloc/checkpoint: the restore task refuses it)."
  type        = list(string)
  default     = []
}

variable "checkpoint_interval" {
  description = "Period of the sidecar's checkpoints (\"0\": on demand only)."
  type        = string
  default     = "10m"
}

job "train-container" {
  id          = var.job_name
  name        = var.job_name
  type        = "service"
  datacenters = ["dc1"]

  group "train" {
    count = 1

    constraint {
      attribute = "${node.unique.name}"
      value     = var.node
    }

    constraint {
      attribute = "${attr.driver.caravan.checkpoint_store}"
      value     = "true"
    }

    update {
      max_parallel = 0
    }

    restart {
      attempts = 0
      mode     = "fail"
    }

    # Checkpointed training must survive any number of moves: Nomad counts
    # `nomad alloc stop` and preemptions as reschedules, and the driver
    # warns (task event) when a checkpointing job's policy is finite.
    reschedule {
      attempts       = 0
      unlimited      = true
      delay          = "5s"
      delay_function = "constant"
    }

    task "trainer" {
      driver       = var.driver
      user         = var.user
      kill_signal  = "SIGTERM"
      kill_timeout = var.kill_timeout

      config {
        image        = var.image
        network_mode = "none"
        volumes      = var.volumes
        args = concat(["trainer", "-steps", "${var.steps}", "-step-delay", var.step_delay, "-log-every", "1000", "-hold",
        "-checkpoint-dir", "/alloc/checkpoint", "-checkpoint-signal", "SIGTERM"], var.extra_args)
      }

      resources {
        cpu    = 200
        memory = var.memory
      }
    }

    task "restore" {
      driver = "caravan"
      lifecycle { hook = "prestart" }
      config { checkpoint = { role = "restore", task = "trainer", dir = "checkpoint" } }
      resources {
        cpu    = 20
        memory = 32
      }
    }

    # Optional: periodic and on-demand checkpoints while the trainer runs.
    task "checkpoint" {
      driver = "caravan"
      lifecycle {
        hook    = "poststart"
        sidecar = true
      }
      config { checkpoint = { role = "sidecar", task = "trainer", dir = "checkpoint", interval = var.checkpoint_interval } }
      resources {
        cpu    = 20
        memory = 32
      }
    }

    task "commit" {
      driver = "caravan"
      lifecycle { hook = "poststop" }
      config { checkpoint = { role = "commit", task = "trainer", dir = "checkpoint" } }
      resources {
        cpu    = 20
        memory = 32
      }
    }
  }
}
