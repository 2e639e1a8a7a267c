# The adversarial container: the caravan-adversary image (FROM scratch,
# scripts/build-images.sh) as a task of Nomad's docker driver on the pinned
# client, whose runtime (var.runtime; the constraint checks it) is the
# rootful dockerd or the rootful podman service's Docker-compatible API:
# either way what it writes into /alloc is written as host root. Beside it
# run caravan's checkpoint role tasks, as host root. It plants one attack in
# the shared checkpoint directory (/alloc/checkpoint) and waits to be
# stopped.

variable "name" {
  type = string
}

variable "case" {
  type = string
}

variable "sentinel" {
  type = string
}

variable "runtime" {
  description = "docker or podman: the runtime behind the client's docker driver (node meta caravan.container_runtime)."
  type        = string
  default     = "docker"
}

variable "node" {
  type    = string
  default = "client1"
}

job "adv-container" {
  id          = var.name
  name        = var.name
  type        = "service"
  datacenters = ["dc1"]

  constraint {
    attribute = "${node.unique.name}"
    value     = var.node
  }

  constraint {
    attribute = "${meta.caravan.container_runtime}"
    value     = var.runtime
  }

  group "g" {
    restart {
      attempts = 0
      mode     = "fail"
    }

    reschedule {
      attempts  = 0
      unlimited = false
    }

    task "t" {
      driver       = "docker"
      kill_timeout = "5s"

      config {
        image        = "localhost/caravan-adversary:local"
        network_mode = "none"
        args         = [var.case, var.sentinel]
      }

      resources {
        cpu    = 50
        memory = 32
      }
    }

    task "restore" {
      driver = "caravan"
      lifecycle { hook = "prestart" }
      config { checkpoint = { role = "restore", task = "t", dir = "checkpoint" } }
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
      config { checkpoint = { role = "sidecar", task = "t", dir = "checkpoint", timeout = "2s" } }
      resources {
        cpu    = 20
        memory = 32
      }
    }

    task "commit" {
      driver = "caravan"
      lifecycle { hook = "poststop" }
      config { checkpoint = { role = "commit", task = "t", dir = "checkpoint" } }
      resources {
        cpu    = 20
        memory = 32
      }
    }
  }
}
