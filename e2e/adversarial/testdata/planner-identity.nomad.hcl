# A task holding a planner workload identity, for the planner's adversarial
# tests: it only sleeps; the test reads its token from the task's secrets
# directory and presents it (or forgeries) to the planner. ttl = "" gives an
# identity without exp, which the planner must refuse.
variable "name" {
  type = string
}

variable "ttl" {
  description = "Identity ttl; \"\" for an identity that never expires (no exp claim)."
  type        = string
  default     = "1h"
}

job "placeholder" {
  id          = var.name
  name        = var.name
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
        for_each = var.ttl == "" ? [] : [var.ttl]
        content {
          name = "planner"
          aud  = ["caravan-planner"]
          file = true
          ttl  = identity.value
        }
      }

      dynamic "identity" {
        for_each = var.ttl == "" ? [1] : []
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
