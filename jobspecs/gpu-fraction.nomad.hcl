# A fraction of one GPU from caravan's device plugin: `shares` shares of a
# GPU split into 4 (2 shares = half the GPU's memory and compute). All shares
# of one request come from one physical GPU. The affinity packs jobs onto the
# lowest-index GPU that still has room, so small jobs share a GPU instead of
# spreading over all of them. The task prints its environment (the
# CUDA_VISIBLE_DEVICES, CUDA_MPS_* and CARAVAN_GPU_* variables the plugin
# set) and sleeps.
#
#   nomad job run -var shares=2 -var node=client1 jobspecs/gpu-fraction.nomad.hcl

variable "job_name" {
  type    = string
  default = "gpu-fraction"
}

variable "shares" {
  description = "Shares of one GPU to reserve (1 to the GPU's share count)."
  type        = number
  default     = 2
}

variable "gpu_shares" {
  description = "Only use GPUs split into this many shares (the share size)."
  type        = number
  default     = 4
}

variable "node" {
  description = "Pin the job to this node name (empty: any node)."
  type        = string
  default     = ""
}

variable "simulated_memory_mib" {
  description = "GPU memory the simulated backend reports for this task (0: the plugin's default)."
  type        = number
  default     = 0
}

job "gpu-fraction" {
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

      env {
        CARAVAN_SIMULATED_GPU_MEMORY_MIB = var.simulated_memory_mib > 0 ? "${var.simulated_memory_mib}" : ""
      }

      resources {
        cpu    = 50
        memory = 32

        device "caravan/gpushare" {
          count = var.shares

          constraint {
            attribute = "${device.attr.shares}"
            value     = "${var.gpu_shares}"
          }

          affinity {
            attribute = "${device.attr.index}"
            operator  = "<="
            value     = "0"
            weight    = 100
          }
        }
      }
    }
  }
}
