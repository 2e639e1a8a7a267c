# A training job that survives suspend, resume and migration: caravan's
# deterministic example trainer (`caravan trainer`, real mini-batch SGD) run
# by the caravan task driver with the checkpoint protocol on.
#
#   nomad job run -var caravan_bin=/path/to/caravan jobspecs/train-checkpointed.nomad.hcl
#
# Suspend and resume:   nomad job scale train-checkpointed train 0   (then 1)
# Migrate:              nomad alloc stop ALLOC   (the replacement resumes elsewhere)
# Checkpoint now:       nomad alloc signal -s SIGUSR1 ALLOC trainer
# Drain a node:         nomad node drain -enable -yes NODE   (service jobs: -var job_type=service -var hold=true)
# Watch:                nomad alloc status ALLOC (events), nomad alloc logs -f ALLOC
#
# The trainer prints `final step=N ... params_sha256=H`; H is the same for
# an uninterrupted run and for any number of suspends and migrations.

variable "caravan_bin" {
  description = "Path of the caravan binary on the clients (the plugin binary works)."
  type        = string
  default     = "caravan"
}

variable "nodes" {
  description = "Regular expression of the node names the job may run on."
  type        = string
  default     = ".*"
}

variable "steps" {
  description = "Total SGD steps."
  type        = number
  default     = 20000
}

variable "step_delay" {
  description = "Sleep after each step, to make the example last long enough to play with."
  type        = string
  default     = "2ms"
}

variable "trainer_args" {
  description = "More trainer flags, e.g. [\"-features\", \"1024\", \"-hidden\", \"1024\"] for a 16 MiB state (see caravan trainer -h)."
  type        = list(string)
  default     = []
}

variable "memory" {
  description = "Memory (MiB) of the trainer; about 6x the state size (trainer_args) plus 40."
  type        = number
  default     = 128
}

variable "checkpoint_interval" {
  description = "Periodic checkpoint interval (\"\" for none: only on stop and on demand)."
  type        = string
  default     = ""
}

variable "kill_timeout" {
  description = "How long the stop (and its checkpoint) may take. Nomad clients cap it at their max_kill_timeout (30s unless raised)."
  type        = string
  default     = "30s"
}

variable "job_type" {
  description = "\"batch\" (ends when training ends) or \"service\" (with hold = true). Nomad does not replace drained batch allocations, so run as a service job to have a node drain move the training."
  type        = string
  default     = "batch"
}

variable "hold" {
  description = "Keep the trainer running after the last step until stopped (for service jobs, which Nomad would restart)."
  type        = bool
  default     = false
}

variable "progress_url" {
  description = "Planner endpoint receiving progress reports (\"\" for none)."
  type        = string
  default     = ""
}

job "train-checkpointed" {
  type = var.job_type

  group "train" {
    count = 1

    constraint {
      attribute = "${node.unique.name}"
      operator  = "regexp"
      value     = var.nodes
    }

    # Only schedule where the checkpoint store is reachable.
    constraint {
      attribute = "${attr.driver.caravan.checkpoint_store}"
      value     = "true"
    }

    # Service jobs: no deployments (they would block `nomad job scale` while
    # active); a training job is not rolled, it is checkpointed and moved.
    dynamic "update" {
      for_each = var.job_type == "service" ? [1] : []
      content {
        max_parallel = 0
      }
    }

    restart {
      attempts = 2
      delay    = "5s"
      mode     = "fail"
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

    task "trainer" {
      driver = "caravan"

      # The checkpoint on stop must finish within kill_timeout (a fifth of it
      # is kept for the kill signal).
      kill_timeout = var.kill_timeout

      config {
        command = var.caravan_bin
        args = concat([
          "trainer",
          "-steps", "${var.steps}",
          "-step-delay", var.step_delay,
          "-log-every", "500",
          "-report-url", var.progress_url,
          "-hold=${var.hold}",
        ], var.trainer_args)

        checkpoint {
          signal           = "SIGUSR1"
          interval         = var.checkpoint_interval
          timeout          = "1m"
          on_restore_error = "fail"
          # scope = "group"      # one state for a whole data-parallel group (driver/README.md)
          # key   = "my-run"     # resume across `nomad job stop -purge` and resubmission
        }
      }

      resources {
        cpu    = 200
        memory = var.memory
      }
    }
  }
}
