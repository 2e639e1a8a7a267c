# A task holding a workload identity, for the planner's adversarial tests:
# it only sleeps; the test reads its token from the task's secrets directory
# and presents it (or forgeries) to the planner. By default the task has its
# default identity (secrets/nomad_token; every Nomad). named = true gives it
# a named identity "planner" with the planner's audience instead
# (secrets/nomad_planner.jwt; Nomad 1.7 and later only: a 1.6 CLI refuses
# name, aud and ttl), and then ttl = "" an identity without exp, which the
# planner must refuse.
variable "name" {
  type = string
}

variable "namespace" {
  type    = string
  default = "default"
}

variable "named" {
  description = "A named identity (Nomad 1.7+) instead of the default one."
  type        = bool
  default     = false
}

variable "ttl" {
  description = "Identity ttl; \"\" for an identity that never expires (no exp claim)."
  type        = string
  default     = "1h"
}

job "placeholder" {
  id          = var.name
  name        = var.name
  namespace   = var.namespace
  type        = "service"
  datacenters = ["dc1"]

  group "main" {
    count = 1

    task "hold" {
      driver = "raw_exec"

      config {
        command = "/bin/sleep"
        args    = ["3600"]
      }

      dynamic "identity" {
        for_each = var.named ? [] : [1]
        content {
          file = true
        }
      }

      dynamic "identity" {
        for_each = var.named && var.ttl != "" ? [var.ttl] : []
        content {
          name = "planner"
          aud  = ["caravan-planner"]
          file = true
          ttl  = identity.value
        }
      }

      dynamic "identity" {
        for_each = var.named && var.ttl == "" ? [1] : []
        content {
          name = "planner"
          aud  = ["caravan-planner"]
          file = true
        }
      }

      resources {
        cpu    = 20
        memory = 32
      }
    }
  }
}
