# Device requests and caravan_* meta the plugins would refuse or ignore
# after placement.
variable "shares" {
  type    = number
  default = 8
}

job "bad-gpu-meta" {
  meta {
    caravan_planner      = "true"
    caravan_worker_group = "workers"
    caravan_max_workers  = "many"
    caravan_min_worker   = "1"
    caravan_speed_model  = "ring"
    caravan_rightsize    = "always"
    caravan_max_gpu_shares = "0"
  }
  group "worker" {
    meta {
      caravan_gang = "true"
    }
    task "t" {
      driver = "raw_exec"
      config {
        command = "/bin/true"
      }
      resources {
        device "caravan/gpushare" {
          count = var.shares
          constraint {
            attribute = "${device.attr.shares}"
            value     = "4"
          }
          affinity {
            attribute = "${device.attr.idx}"
            value     = "0"
            weight    = 50
          }
        }
        device "caravan-gpu" {
          count = 1
        }
        device "nvidia/gpu" {
          count = 1
        }
      }
    }
  }
}
