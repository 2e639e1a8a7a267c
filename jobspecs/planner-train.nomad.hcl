# A planner-managed training job running caravan's real trainer under the
# checkpointing driver: scale-downs, suspensions (scale to 0) and stops
# checkpoint the model, and replacements restore it, so the planner's
# reallocations continue training instead of restarting it.
#
# Progress reaches the planner without any code in the trainer: the
# "progress" sidecar relays the trainer's log lines (planner/README.md, "The
# progress protocol", for the meta keys and for reporting directly).
#
#   nomad job run -var caravan_bin=$PWD/build/caravan jobspecs/planner-train.nomad.hcl

variable "name" {
  type    = string
  default = "planner-train"
}

variable "caravan_bin" {
  description = "Absolute path of the caravan binary on the clients."
  type        = string
}

variable "count" {
  type    = number
  default = 1
}

variable "max_workers" {
  description = "This single-process trainer has no gradient exchange: keep 1 (the planner then time-slices it). For a job that more workers make faster, see train-elastic.nomad.hcl."
  type        = number
  default     = 1
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

variable "step_delay" {
  description = "Sleep after each step, to make a short run last."
  type        = string
  default     = "5ms"
}

job "planner-train" {
  id   = var.name
  name = var.name # distinct in the Nomad UI, not the job block's label
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

    # Only where the checkpoint store is reachable.
    constraint {
      attribute = "${attr.driver.caravan.checkpoint_store}"
      value     = "true"
    }

    update {
      max_parallel = 0
    }

    # Checkpointed training must survive any number of migrations, drains
    # and preemptions: Nomad counts `nomad alloc stop` as a reschedule, and
    # a batch job's default policy allows one in 24 h, after which the job
    # is left dead mid-training. The driver warns (task event) when a
    # checkpointing job's policy is finite.
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
        args    = ["trainer", "-steps", "${var.steps}", "-log-every", "50", "-step-delay", var.step_delay]

        # The planner's suspensions (scale to 0) and scale-downs checkpoint
        # the model; the replacement restores it.
        checkpoint {
          signal = "SIGUSR1"
        }
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

    # Zero-code progress: this sidecar follows the trainer's stdout
    # (`step=N loss=X samples_per_sec=S` lines) in the shared allocation
    # directory and reports the newest line every 2 s to every healthy
    # planner instance, with its own workload identity (same job).
    task "progress" {
      driver = "raw_exec"

      lifecycle {
        hook    = "poststart"
        sidecar = true
      }

      config {
        command = var.caravan_bin
        args = ["planner", "relay", "-file", "${NOMAD_ALLOC_DIR}/logs/train.stdout",
        "-urls-file", "local/planners"]
      }

      identity {
        file = true # secrets/nomad_token: the default workload identity
      }

      template {
        destination = "local/planners"
        change_mode = "noop"
        data        = <<-EOT
          {{- range service "caravan-planner" }}
          http://{{ .Address }}:{{ .Port }}
          {{- end }}
        EOT
      }

      resources {
        cpu    = 20
        memory = 32
      }
    }
  }
}
