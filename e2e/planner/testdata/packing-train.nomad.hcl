# A planner-managed trainer for e2e/planner/packing_test.go: caravan's real
# trainer under the checkpointing driver, with a MODELLED GPU profile
# (-gpu-use-percent) whose compute slows down when its simulated GPU is
# shared (internal/interference), a device affinity that steers it onto a
# given GPU (so a test can pack two jobs), and a relay sidecar that
# reports its progress lines to one planner URL.

variable "name" {
  type = string
}

variable "caravan_bin" {
  type = string
}

variable "planner_url" {
  type = string
}

variable "steps" {
  type    = number
  default = 3000
}

variable "gpu_use_percent" {
  description = "MODELLED GPU profile: the share of a whole GPU the trainer keeps busy."
  type        = number
  default     = 100
}

variable "compute_per_sample" {
  description = "MODELLED compute per sample, slowed down by the interference model."
  type        = string
  default     = "200us"
}

variable "gpu" {
  description = "uuid of the GPU the device affinity prefers (none: no preference)."
  type        = string
  default     = "none"
}

job "packing-train" {
  id   = var.name
  name = var.name
  type = "service"

  meta {
    caravan_planner      = "true"
    caravan_worker_group = "worker"
    caravan_min_workers  = "1"
    caravan_max_workers  = "1"
    caravan_total_steps  = var.steps
    caravan_kind         = "packing-e2e"
  }

  group "worker" {
    count = 1

    constraint {
      attribute = "${attr.driver.caravan.checkpoint_store}"
      value     = "true"
    }

    update {
      max_parallel = 0
    }

    reschedule {
      attempts       = 0
      unlimited      = true
      delay          = "5s"
      delay_function = "constant"
    }

    task "train" {
      driver = "caravan"

      config {
        command = var.caravan_bin
        args = ["trainer", "-steps", "${var.steps}", "-log-every", "50", "-hold",
          "-compute-per-sample", var.compute_per_sample, "-gpu-use-percent", "${var.gpu_use_percent}"]

        checkpoint {
          signal = "SIGUSR1"
        }
      }

      # The device plugin's occupancy file records each holder's GPU use
      # from this variable, so that the neighbour's modelled compute knows
      # this trainer's profile (device/README.md, "Simulated GPU occupancy").
      env {
        CARAVAN_SIMULATED_GPU_SM_PERCENT = "${var.gpu_use_percent}"
      }

      kill_timeout = "30s"

      resources {
        cpu    = 200
        memory = 256

        device "caravan/gpushare" {
          count = 2

          affinity {
            attribute = "${device.attr.uuid}"
            value     = var.gpu
            weight    = 100
          }
        }
      }
    }

    task "progress" {
      driver = "raw_exec"

      lifecycle {
        hook    = "poststart"
        sidecar = true
      }

      config {
        command = var.caravan_bin
        args    = ["planner", "relay", "-file", "${NOMAD_ALLOC_DIR}/logs/train.stdout", "-url", var.planner_url, "-every", "1s"]
      }

      identity {
        file = true
      }

      resources {
        cpu    = 20
        memory = 32
      }
    }
  }
}
