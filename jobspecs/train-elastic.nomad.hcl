# Elastic data-parallel training with caravan's distributed trainer
# (trainer/README.md): Optimus's architecture, a parameter-server group
# ("ps", 1..k servers, parameters sharded across them) and a worker group
# ("worker", 1..n), synchronous SGD over TCP on Nomad-assigned ports.
#
#   nomad job run -var caravan_bin=$PWD/build/caravan jobspecs/train-elastic.nomad.hcl
#
# Scale workers:   nomad job scale train-elastic worker 3   (nobody restarts;
#                  the next step's micro-shards are spread over the workers)
# Scale servers:   nomad job scale train-elastic ps 2       (re-sharded at a step)
# Suspend:         nomad job scale train-elastic worker 0; nomad job scale train-elastic ps 0
# Resume:          scale both back up: training continues from the checkpoint
# Migrate:         nomad alloc stop ALLOC
#
# A worker added as training ends (after the coordinator's last step) finds
# no coordinator and waits for one that will not come, so the batch job does
# not complete: stop the job (a scale would make Nomad re-run the completed
# servers). The planner never resizes a finished job and stops one itself
# when workers still wait 5 s after the servers exited.
#
# Peers find each other through Nomad's native service discovery: every
# parameter server registers "<name>-ps" tagged "index-<alloc index>"; a
# template renders those into local/ps, which the trainer re-reads whenever
# it loses the coordinator (ps index 0). Only the coordinator's state
# matters: it gathers the shards and checkpoints the whole model through the
# caravan driver (scope = "group"); the other servers answer the checkpoint
# signal with a skip marker; workers hold no state.
#
# Compute time is MODELLED: compute_per_sample is a sleep per sample standing
# in for a GPU's time per sample (the real arithmetic is tiny); the trainer's
# start line says "compute=modelled ...". The gradient exchange is real TCP.
#
# The coordinator prints `final step=N ... params_sha256=H`: H equals a
# single-process `caravan trainer` run of the same configuration, whatever
# the scaling history.

variable "name" {
  description = "Job ID (and the prefix of the parameter servers' service name)."
  type        = string
  default     = "train-elastic"
}

variable "caravan_bin" {
  description = "Absolute path of the caravan binary on the clients."
  type        = string
}

variable "workers" {
  description = "Workers to start with."
  type        = number
  default     = 1
}

variable "ps" {
  description = "Parameter servers to start with."
  type        = number
  default     = 1
}

variable "steps" {
  description = "Total SGD steps."
  type        = number
  default     = 3000
}

variable "compute_per_sample" {
  description = "MODELLED GPU compute time per sample: each worker sleeps this long per sample it processes."
  type        = string
  default     = "2ms"
}

variable "shares" {
  description = "GPU shares per worker (of the device plugin's shares per GPU)."
  type        = number
  default     = 1
}

variable "trainer_args" {
  description = "More trainer flags for the parameter servers, e.g. [\"-batch\", \"128\", \"-micro-shards\", \"16\"] (see caravan trainer ps -h)."
  type        = list(string)
  default     = []
}

variable "resize_cost" {
  description = "What a change of workers or parameter servers costs this job, for the planner (caravan_resize_cost): nobody restarts, and new workers join at the next step, 4-5 s after the scale on the loaded local cluster; not the planner's restart_cost."
  type        = string
  default     = "5s"
}

variable "checkpoint_interval" {
  description = "Periodic checkpoint interval of the coordinating server (\"\" for none: only on stop and on demand)."
  type        = string
  default     = "1m"
}

job "train-elastic" {
  id   = var.name
  name = var.name # distinct in the Nomad UI, not the job block's label
  type = "batch"

  meta {
    caravan_planner      = "true"
    caravan_worker_group = "worker"
    caravan_ps_group     = "ps"
    caravan_speed_model  = "ps-sync"
    caravan_total_steps  = var.steps
    caravan_resize_cost  = var.resize_cost
  }

  group "ps" {
    count = var.ps

    # Only where the checkpoint store is reachable.
    constraint {
      attribute = "${attr.driver.caravan.checkpoint_store}"
      value     = "true"
    }

    network {
      port "ps" {}
    }

    service {
      provider = "nomad"
      name     = "${var.name}-ps"
      port     = "ps"
      tags     = ["index-${NOMAD_ALLOC_INDEX}"]
    }

    # Training is worth retrying: a lost server is replaced, and training
    # continues from the checkpoint (or from the survivors' slices).
    reschedule {
      attempts       = 0
      unlimited      = true
      delay          = "5s"
      delay_function = "constant"
    }

    restart {
      attempts = 2
      delay    = "2s"
      mode     = "fail"
    }

    task "ps" {
      driver = "caravan"

      # The checkpoint on stop (the coordinator gathers the shards) and a
      # shard server's hand-off both take well under a second.
      kill_timeout = "20s"

      config {
        command = var.caravan_bin
        args = concat([
          "trainer", "ps",
          "-listen", "${NOMAD_ADDR_ps}",
          "-peers-file", "local/ps",
          "-steps", "${var.steps}",
          "-compute-per-sample", var.compute_per_sample,
          "-log-every", "50",
        ], var.trainer_args)

        checkpoint {
          signal           = "SIGUSR1"
          scope            = "group"
          interval         = var.checkpoint_interval
          timeout          = "1m"
          on_restore_error = "fail"
        }
      }

      # Progress goes to the planner with this task's workload identity.
      identity {
        file = true # secrets/nomad_token: the default workload identity
      }

      env {
        CARAVAN_PLANNER_URLS_FILE = "${NOMAD_TASK_DIR}/planners"
      }

      template {
        destination = "local/ps"
        change_mode = "noop"
        data        = <<-EOT
          {{- range nomadService "${var.name}-ps" }}
          {{ .Address }}:{{ .Port }} {{ join "," .Tags }}
          {{- end }}
        EOT
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
        cpu    = 200
        memory = 128
      }
    }
  }

  group "worker" {
    count = var.workers

    reschedule {
      attempts       = 0
      unlimited      = true
      delay          = "5s"
      delay_function = "constant"
    }

    restart {
      attempts = 2
      delay    = "2s"
      mode     = "fail"
    }

    # Workers hold no state: no checkpoint block, a quick stop.
    task "worker" {
      driver       = "caravan"
      kill_timeout = "5s"

      config {
        command = var.caravan_bin
        args    = ["trainer", "worker", "-peers-file", "local/ps"]
      }

      template {
        destination = "local/ps"
        change_mode = "noop"
        data        = <<-EOT
          {{- range nomadService "${var.name}-ps" }}
          {{ .Address }}:{{ .Port }} {{ join "," .Tags }}
          {{- end }}
        EOT
      }

      resources {
        cpu    = 200
        memory = 128

        device "caravan/gpushare" {
          count = var.shares
        }
      }
    }
  }
}
