# train-docker.nomad.hcl for Nomad's podman driver (the external
# nomad-driver-podman plugin, which you install): the same trainer image,
# the same three caravan checkpoint tasks; only the job's name and the
# trainer's `driver = "podman"` differ (TestJobspecs_PodmanMirrorsDocker
# keeps the two in step). The header of the docker version says how it
# checkpoints. One difference in the driver, not the jobspec: the podman
# driver stops a container with the image's stop signal (SIGTERM unless the
# image sets STOPSIGNAL), not kill_signal, so the trainer saves on SIGTERM.
#
# The image must be in the podman service's local store (podman load -i
# build/images/caravan-trainer.tar); nothing is pulled.
#
#   nomad job run -var node=client1 jobspecs/train-podman.nomad.hcl
#
# Not built, run or tested here: no build of that plugin free of BUSL-1.1
# code exists (the Go module proxy serves only v0.6.5, which links Nomad
# v1.11.3; README.md). Install it yourself to use this jobspec; the local
# cluster runs the docker version under podman instead, through podman's
# Docker-compatible API (client2).

variable "job_name" {
  type    = string
  default = "train-podman"
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

job "train-podman" {
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
      driver       = "podman"
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
