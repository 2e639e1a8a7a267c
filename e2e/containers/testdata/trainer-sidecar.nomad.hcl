# The FROM scratch trainer under Nomad's docker driver with all three caravan
# checkpoint tasks (driver/README.md, "Containers"): restore (prestart), the
# checkpoint sidecar (poststart, periodic with `interval`, on demand with
# `nomad alloc signal -s SIGUSR1 ALLOC checkpoint`, asking through the
# request file the trainer polls) and commit (poststop, after the trainer
# saved on its kill signal). The state is made large (trainer_args) so the
# final save and commit take seconds: the next allocation's restore must
# wait for them.

variable "job_name" {
  type    = string
  default = "trainer-sidecar"
}

variable "node" {
  type = string
}

variable "trainer_args" {
  type    = list(string)
  default = ["trainer", "-steps", "100000", "-log-every", "1", "-hold"]
}

variable "interval" {
  type    = string
  default = "0"
}

variable "memory" {
  type    = number
  default = 256
}

job "trainer-sidecar" {
  id          = var.job_name
  name        = var.job_name
  type        = "service"
  datacenters = ["dc1"]

  constraint {
    attribute = "${node.unique.name}"
    value     = var.node
  }

  group "train" {
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
      kill_signal  = "SIGTERM"
      kill_timeout = "60s"

      config {
        image        = "localhost/caravan-trainer:local"
        network_mode = "none"
        args         = concat(var.trainer_args, ["-checkpoint-dir", "/alloc/checkpoint", "-checkpoint-signal", "SIGTERM"])
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

    task "checkpoint" {
      driver = "caravan"
      lifecycle {
        hook    = "poststart"
        sidecar = true
      }
      config { checkpoint = { role = "sidecar", task = "trainer", dir = "checkpoint", interval = var.interval, timeout = "2m" } }
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
