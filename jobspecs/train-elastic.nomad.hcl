# Elastic data-parallel training with caravan's distributed trainer
# (trainer/README.md): Optimus's architecture, a parameter-server group
# ("ps", 1..k servers, parameters sharded across them) and a worker group
# ("worker", 1..n), synchronous SGD over TCP on Nomad-assigned ports. The
# trainer runs as host processes under the caravan task driver (variable
# driver, default "caravan") or as containers of the trainer image (driver
# "docker" or "podman", below).
#
#   nomad job run -var caravan_bin=$PWD/build/caravan jobspecs/train-elastic.nomad.hcl
#   nomad job run -var driver=docker jobspecs/train-elastic.nomad.hcl
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
# Containers (driver "docker": Nomad's docker driver; "podman": Nomad's
# podman driver plugin, which you install: it is not built or run here,
# README.md). The image is built here, never pulled (scripts/build-images.sh;
# for the podman driver, `podman load -i build/images/caravan-trainer.tar`).
# The final parameters equal a single-process run whatever the scaling
# history, as on the host (e2e/containers, TestContainers_Elastic), and the
# planner manages the job as it does the host one. What differs:
# - network_mode = "host": dockerd and podman run without a bridge here, and
#   the servers and workers talk over loopback on Nomad-assigned ports.
# - caravan checkpoints the servers by lifecycle tasks beside them
#   (driver/README.md, "Containers"): a prestart "restore" task restores the
#   newest checkpoint into the allocation's shared directory (/alloc in the
#   container), and a poststop "commit" task commits what the server saved
#   there on its kill signal.
# - The servers save on SIGTERM (the kill signal Nomad sends on scale-down,
#   stop, alloc stop and drains): a container cannot be sent the driver's
#   SIGUSR1 checkpoint request. Periodic and on-demand checkpoints come from
#   the checkpoint sidecar task (checkpoint_interval; `nomad alloc signal -s
#   SIGUSR1 ALLOC checkpoint`), through a request file `trainer ps` polls.
#   The podman driver stops a container with the image's stop signal
#   (SIGTERM; the trainer image sets none), not kill_signal.
# - The checkpoint key is per server index (scope "alloc"), not the group's:
#   the coordinator is always index 0, so ps[0]'s key holds the whole model,
#   and a new server restores nothing that another still writes.
# - Drains stop batch allocations without replacing them (driver/README.md,
#   "Nomad behaviours to know"): migrate with `nomad alloc stop`.
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

variable "driver" {
  description = "Nomad task driver of the trainer: \"caravan\" (host processes, checkpointed by the driver), \"docker\" or \"podman\" (containers, checkpointed by caravan lifecycle tasks; \"podman\" is Nomad's podman driver plugin, which you install)."
  type        = string
  default     = "caravan"

  validation {
    condition     = contains(["caravan", "docker", "podman"], var.driver)
    error_message = "The driver must be \"caravan\", \"docker\" or \"podman\"."
  }
}

variable "caravan_bin" {
  description = "Absolute path of the caravan binary on the clients (driver \"caravan\")."
  type        = string
  default     = "caravan"
}

variable "image" {
  description = "The trainer image, loaded into the clients' runtimes (scripts/build-images.sh; drivers \"docker\" and \"podman\")."
  type        = string
  default     = "localhost/caravan-trainer:local"
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
  description = "Periodic checkpoint interval of the coordinating server. Host: default 1m, \"\" for none (only on stop and on demand). Containers: the checkpoint sidecar's period, default 10m, \"0\" for on demand only (`nomad alloc signal -s SIGUSR1 ALLOC checkpoint`)."
  type        = string
  default     = null
}

locals {
  host = var.driver == "caravan"
  # for_each of the blocks only the caravan driver, or only a container
  # driver, has.
  if_host      = local.host ? [true] : []
  if_container = local.host ? [] : [true]

  checkpoint_interval = var.checkpoint_interval != null ? var.checkpoint_interval : (local.host ? "1m" : "10m")
  # The task's directory: the working directory of a host process, /local
  # in a container.
  peers_file = local.host ? "local/ps" : "/local/ps"
  # A container saves into the allocation's shared directory on its kill
  # signal (the lifecycle tasks restore and commit it there); the caravan
  # driver checkpoints a host process itself.
  container_checkpoint_args = local.host ? [] : ["-checkpoint-dir", "/alloc/checkpoint", "-checkpoint-signal", "SIGTERM"]
  ps_args = concat([
    "trainer", "ps",
    "-listen", "${NOMAD_ADDR_ps}",
    "-peers-file", local.peers_file,
    "-steps", "${var.steps}",
    "-compute-per-sample", var.compute_per_sample,
    "-log-every", "50",
  ], local.container_checkpoint_args, var.trainer_args)
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
      driver      = var.driver
      kill_signal = local.host ? "" : "SIGTERM" # "": the driver's default

      # The checkpoint on stop (the coordinator gathers the shards) and a
      # shard server's hand-off both take well under a second.
      kill_timeout = "20s"

      dynamic "config" {
        for_each = local.if_host
        content {
          command = var.caravan_bin
          args    = local.ps_args

          checkpoint {
            signal           = "SIGUSR1"
            scope            = "group"
            interval         = local.checkpoint_interval
            timeout          = "1m"
            on_restore_error = "fail"
          }
        }
      }

      dynamic "config" {
        for_each = local.if_container
        content {
          image        = var.image
          network_mode = "host"
          args         = local.ps_args
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

    # Containers: caravan's checkpointing of "ps" by lifecycle tasks.
    dynamic "task" {
      for_each = local.if_container
      labels   = ["restore"]
      content {
        driver = "caravan"
        lifecycle { hook = "prestart" }
        config { checkpoint = { role = "restore", task = "ps", dir = "checkpoint", on_restore_error = "fail" } }
        resources {
          cpu    = 20
          memory = 32
        }
      }
    }

    # Periodic and on-demand checkpoints while the servers run: the sidecar
    # writes a request file into /alloc/checkpoint, which `trainer ps`
    # polls (the coordinator saves, another server answers with a skip
    # marker).
    dynamic "task" {
      for_each = local.if_container
      labels   = ["checkpoint"]
      content {
        driver = "caravan"
        lifecycle {
          hook    = "poststart"
          sidecar = true
        }
        config { checkpoint = { role = "sidecar", task = "ps", dir = "checkpoint", interval = local.checkpoint_interval } }
        resources {
          cpu    = 20
          memory = 32
        }
      }
    }

    dynamic "task" {
      for_each = local.if_container
      labels   = ["commit"]
      content {
        driver = "caravan"
        lifecycle { hook = "poststop" }
        config { checkpoint = { role = "commit", task = "ps", dir = "checkpoint" } }
        resources {
          cpu    = 20
          memory = 32
        }
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

    # Workers hold no state: no checkpoint, a quick stop.
    task "worker" {
      driver       = var.driver
      kill_timeout = "5s"

      dynamic "config" {
        for_each = local.if_host
        content {
          command = var.caravan_bin
          args    = ["trainer", "worker", "-peers-file", local.peers_file]
        }
      }

      dynamic "config" {
        for_each = local.if_container
        content {
          image        = var.image
          network_mode = "host"
          args         = ["trainer", "worker", "-peers-file", local.peers_file]
        }
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
