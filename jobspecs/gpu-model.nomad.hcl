# GPU shares of a given model (and enough memory per share) from caravan's
# device plugin. Group names are GPU UUIDs, so the model is an attribute:
# constrain on ${device.attr.model}; ${device.attr.memory_per_share} (MiB)
# bounds the share size. The task prints its environment and sleeps.
#
#   nomad job run -var 'model=NVIDIA A100-SXM4-40GB' jobspecs/gpu-model.nomad.hcl

variable "job_name" {
  type    = string
  default = "gpu-model"
}

variable "model" {
  description = "GPU model, as NVML names it."
  type        = string
  default     = "NVIDIA A100-SXM4-40GB"
}

variable "shares" {
  type    = number
  default = 1
}

variable "min_memory_per_share_mib" {
  type    = number
  default = 1024
}

job "gpu-model" {
  id          = var.job_name
  name        = var.job_name
  type        = "batch"
  datacenters = ["dc1"]

  group "train" {
    reschedule {
      attempts  = 0
      unlimited = false
    }

    restart {
      attempts = 0
      mode     = "fail"
    }

    task "worker" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args    = ["-c", "env | sort; exec sleep 3600"]
      }

      resources {
        cpu    = 50
        memory = 32

        device "caravan/gpushare" {
          count = var.shares

          constraint {
            attribute = "${device.attr.model}"
            value     = var.model
          }

          constraint {
            attribute = "${device.attr.memory_per_share}"
            operator  = ">="
            value     = "${var.min_memory_per_share_mib} MiB"
          }
        }
      }
    }
  }
}
