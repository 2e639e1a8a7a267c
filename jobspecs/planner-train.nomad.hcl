# A planner-managed training job running caravan's real trainer under the
# checkpointing driver: scale-downs, suspensions (scale to 0) and stops
# checkpoint the model, and replacements restore it, so the planner's
# reallocations continue training instead of restarting it.
#
# The trainer reports progress to the planner found in Consul, authenticated
# by the task's workload identity "planner" (secrets/nomad_planner.jwt); see
# planner/README.md for the protocol and the meta keys.
#
#   nomad job run -var caravan=$PWD/build/caravan jobspecs/planner-train.nomad.hcl

variable "name" {
  type    = string
  default = "planner-train"
}

variable "caravan" {
  description = "Absolute path of the caravan binary on the clients."
  type        = string
}

variable "count" {
  type    = number
  default = 1
}

variable "max_workers" {
  type    = number
  default = 4
}

variable "shares" {
  description = "GPU shares per worker (of the device plugin's shares per GPU)."
  type        = number
  default     = 2
}

variable "steps" {
  type    = number
  default = 200000
}

job "planner-train" {
  id   = var.name
  type = "service"

  meta {
    caravan_planner          = "true"
    caravan_worker_group     = "worker"
    caravan_min_workers      = "1"
    caravan_max_workers      = var.max_workers
    caravan_total_steps      = var.steps
    caravan_stop_on_converge = "true"
    caravan_converge_delta   = "0.0005"
    caravan_kind             = "mlp"
  }

  group "worker" {
    count = var.count

    update {
      max_parallel = 0
    }

    task "train" {
      driver = "caravan"

      config {
        command = var.caravan
        args    = ["trainer", "-steps", "${var.steps}", "-log-every", "50", "-step-delay", "5ms"]
      }

      identity {
        name = "planner"
        aud  = ["caravan-planner"]
        file = true
        ttl  = "1h"
      }

      template {
        destination = "local/planner.env"
        env         = true
        change_mode = "noop"
        data        = <<-EOT
          {{- range $i, $s := service "caravan-planner" }}{{ if eq $i 0 }}
          CARAVAN_PROGRESS_URL=http://{{ $s.Address }}:{{ $s.Port }}/v1/progress
          CARAVAN_PLANNER_URL=http://{{ $s.Address }}:{{ $s.Port }}
          {{- end }}{{ end }}
        EOT
      }

      kill_timeout = "30s"

      resources {
        cpu    = 500
        memory = 256

        device "caravan/gpushare" {
          count = var.shares
        }
      }
    }
  }
}
