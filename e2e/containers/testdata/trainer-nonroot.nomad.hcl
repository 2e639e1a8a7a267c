# The FROM scratch trainer under Nomad's docker driver running as a
# non-root user, checkpointed by caravan's restore and commit tasks
# (driver/README.md, "Containers"): the restore task gives
# /alloc/checkpoint the owner the container runs as, its `user` (variable
# user) or, without one, its image's USER resolved in the image
# (localhost/caravan-trainer-nonroot:local: USER trainer, 4242:4343).
# volumes mounts something over the checkpoint directory, which the
# restore task refuses.

variable "job_name" {
  type    = string
  default = "trainer-nonroot"
}

variable "node" {
  type    = string
  default = "client1"
}

variable "image" {
  type    = string
  default = "localhost/caravan-trainer-nonroot:local"
}

variable "user" {
  description = "The container's user (\"\": the image's USER)."
  type        = string
  default     = ""
}

variable "volumes" {
  type    = list(string)
  default = []
}

variable "steps" {
  type    = number
  default = 15000
}

job "trainer-nonroot" {
  id          = var.job_name
  name        = var.job_name
  type        = "service"
  datacenters = ["dc1"]

  group "train" {
    constraint {
      attribute = "${node.unique.name}"
      value     = var.node
    }

    update {
      max_parallel = 0
    }

    restart {
      attempts = 0
      mode     = "fail"
    }

    reschedule {
      attempts  = 0
      unlimited = false
    }

    task "trainer" {
      driver       = "docker"
      user         = var.user
      kill_signal  = "SIGTERM"
      kill_timeout = "30s"

      config {
        image        = var.image
        network_mode = "none"
        volumes      = var.volumes
        args = ["trainer", "-steps", "${var.steps}", "-step-delay", "2ms", "-log-every", "1000", "-hold",
        "-checkpoint-dir", "/alloc/checkpoint", "-checkpoint-signal", "SIGTERM"]
      }

      resources {
        cpu    = 200
        memory = 128
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
