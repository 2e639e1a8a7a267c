# An adversarial task for e2e/adversarial: a shell script run by the caravan
# driver with the checkpoint protocol on.
variable "name" {
  type = string
}

variable "script" {
  type = string
}

variable "kill_timeout" {
  type    = string
  default = "5s"
}

variable "restarts" {
  type    = number
  default = 0
}

job "adv" {
  id   = var.name
  name = var.name
  type = "service"

  group "g" {
    constraint {
      attribute = "${attr.driver.caravan.checkpoint_store}"
      value     = "true"
    }

    update {
      max_parallel = 0
    }

    restart {
      attempts = var.restarts
      delay    = "1s"
      mode     = "fail"
    }

    reschedule {
      attempts  = 0
      unlimited = false
    }

    task "t" {
      driver       = "caravan"
      kill_timeout = var.kill_timeout

      config {
        command = "/bin/sh"
        args    = ["-c", var.script]

        checkpoint {
          signal  = "SIGUSR1"
          timeout = "20s"
        }
      }

      resources {
        cpu    = 100
        memory = 64
      }
    }
  }
}
