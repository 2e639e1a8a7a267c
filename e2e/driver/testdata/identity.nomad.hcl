# Checkpoint identity e2e job (e2e/driver/identity_test.go): caravan's
# trainer under the caravan driver, with the checkpoint block's scope and key
# as variables. A service job that holds after training, so scaling and
# purging are the only things that stop it.

variable "caravan_bin" {
  type = string
}

variable "count" {
  type    = number
  default = 1
}

variable "scope" {
  description = "checkpoint scope: \"alloc\" or \"group\""
  type        = string
  default     = "alloc"
}

variable "key" {
  description = "checkpoint key override (\"\": bound to this job's incarnation)"
  type        = string
  default     = ""
}

job "ckpt-identity" {
  type = "service"

  group "train" {
    count = var.count

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

    task "trainer" {
      driver       = "caravan"
      kill_timeout = "30s"

      config {
        command = var.caravan_bin
        args    = ["trainer", "-steps", "1000000", "-step-delay", "2ms", "-log-every", "200", "-hold=true"]

        checkpoint {
          scope   = var.scope
          key     = var.key
          timeout = "1m"
        }
      }

      resources {
        cpu    = 100
        memory = 128
      }
    }
  }
}
