# A whole GPU from caravan's device plugin: every share of one GPU. On GPUs
# split into N shares a whole GPU is `count = N` with a constraint on the
# share count; GPUs an operator configured with shares = 1 (share_override)
# are whole GPUs with `count = 1`. The task prints its environment and sleeps.
#
#   nomad job run -var gpu_shares=4 jobspecs/gpu-whole.nomad.hcl

variable "job_name" {
  type    = string
  default = "gpu-whole"
}

variable "gpu_shares" {
  description = "Share count of the GPUs to take whole."
  type        = number
  default     = 4
}

variable "node" {
  description = "Pin the job to this node name (empty: any node)."
  type        = string
  default     = ""
}

job "gpu-whole" {
  id          = var.job_name
  name        = var.job_name
  type        = "batch"
  datacenters = ["dc1"]

  dynamic "constraint" {
    for_each = var.node == "" ? [] : [var.node]
    content {
      attribute = "${node.unique.name}"
      value     = constraint.value
    }
  }

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
          count = var.gpu_shares

          constraint {
            attribute = "${device.attr.shares}"
            value     = "${var.gpu_shares}"
          }
        }
      }
    }
  }
}
