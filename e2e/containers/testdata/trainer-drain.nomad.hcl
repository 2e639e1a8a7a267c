# The FROM scratch trainer under Nomad's docker driver (on client1 against
# dockerd, on client2 against podman's Docker-compatible API, so a drain
# moves it from one runtime to the other) with all three caravan checkpoint
# tasks (restore, sidecar, commit; driver/README.md, "Containers"), set up
# as driver/README.md's "Drains" section tells an operator to run a training
# that node drains must move: a service job (Nomad stops drained batch
# allocations without placing replacements), a migrate block, an update
# block with max_parallel = 0 (no deployment blocking `job scale`) and a
# trainer that stays up after its last step (-hold). No node is pinned: the
# test picks the start node with node eligibility. job_type = "batch" drops
# the service-only blocks, for the test of what a drain does to a batch job.

variable "job_name" {
  type    = string
  default = "trainer-drain"
}

variable "job_type" {
  description = "service (drains move it) or batch (drains stop it; driver/README.md)."
  type        = string
  default     = "service"
}

variable "trainer_args" {
  type    = list(string)
  default = ["trainer", "-steps", "15000", "-step-delay", "2ms", "-log-every", "500", "-hold"]
}

variable "kill_timeout" {
  description = "At most the client's max_kill_timeout (Nomad's default 30s caps a longer one)."
  type        = string
  default     = "30s"
}

variable "shutdown_delay" {
  description = "Nomad's wait between a stop and the kill signal: delays the final save and commit."
  type        = string
  default     = "0s"
}

variable "memory" {
  type    = number
  default = 256
}

job "trainer-drain" {
  id          = var.job_name
  name        = var.job_name
  type        = var.job_type
  datacenters = ["dc1"]

  constraint {
    attribute = "${attr.driver.caravan.checkpoint_store}"
    value     = "true"
  }

  group "train" {
    dynamic "migrate" {
      for_each = var.job_type == "service" ? [1] : []
      content {
        max_parallel     = 1
        health_check     = "task_states"
        min_healthy_time = "1s"
        healthy_deadline = "5m"
      }
    }

    dynamic "update" {
      for_each = var.job_type == "service" ? [1] : []
      content {
        max_parallel = 0
      }
    }

    restart {
      attempts = 0
      mode     = "fail"
    }

    reschedule {
      attempts       = 0
      unlimited      = true
      delay          = "5s"
      delay_function = "constant"
    }

    task "trainer" {
      driver         = "docker"
      kill_signal    = "SIGTERM"
      kill_timeout   = var.kill_timeout
      shutdown_delay = var.shutdown_delay

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
      config { checkpoint = { role = "sidecar", task = "trainer", dir = "checkpoint", timeout = "2m" } }
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
