# train-elastic.nomad.hcl with the trainer as a container image under
# Nomad's docker driver: the same parameter-server group ("ps") and worker
# group ("worker"), the same planner meta, and caravan's checkpointing by
# lifecycle tasks beside the parameter servers (driver/README.md,
# "Containers"): a prestart "restore" task restores the newest checkpoint
# into the allocation's shared directory (/alloc in the container), and a
# poststop "commit" task commits what the server saved on its kill signal.
#
#   nomad job run jobspecs/train-elastic-docker.nomad.hcl
#
# Scale, suspend (both groups to 0), resume and migrate (nomad alloc stop)
# exactly as train-elastic: the final parameters equal a single-process
# `caravan trainer` run whatever the scaling history (e2e/containers,
# TestContainers_Elastic). The planner manages it as it does the host job.
#
# What differs from the host-process job:
# - network_mode = "host": dockerd and podman run without a bridge here, and
#   the servers and workers talk over loopback on Nomad-assigned ports.
# - The servers save on SIGTERM (the kill signal Nomad sends on scale-down,
#   stop, alloc stop and drains): a container cannot be sent the driver's
#   SIGUSR1 checkpoint request. Periodic and on-demand checkpoints come from
#   the checkpoint sidecar task (checkpoint_interval; `nomad alloc signal -s
#   SIGUSR1 ALLOC checkpoint`), through a request file `trainer ps` polls.
# - The checkpoint key is per server index (scope "alloc"), not the group's:
#   the coordinator is always index 0, so ps[0]'s key holds the whole model,
#   and a new server restores nothing that another still writes.
# - Drains stop batch allocations without replacing them (driver/README.md,
#   "Nomad behaviours to know"): migrate with `nomad alloc stop`.
#
# The image is built here, never pulled (scripts/build-images.sh). Compute
# time is MODELLED, as in train-elastic.nomad.hcl.

variable "name" {
  description = "Job ID (and the prefix of the parameter servers' service name)."
  type        = string
  default     = "train-elastic-docker"
}

variable "image" {
  description = "The trainer image, loaded into the clients' runtimes (scripts/build-images.sh)."
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
  description = "More trainer flags for the parameter servers (see caravan trainer ps -h)."
  type        = list(string)
  default     = []
}

variable "checkpoint_interval" {
  description = "Period of the parameter servers' checkpoint sidecar (\"0\": on demand only, `nomad alloc signal -s SIGUSR1 ALLOC checkpoint`)."
  type        = string
  default     = "10m"
}

variable "resize_cost" {
  description = "What a change of workers or parameter servers costs this job, for the planner (caravan_resize_cost)."
  type        = string
  default     = "5s"
}

job "train-elastic-docker" {
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
      driver       = "docker"
      kill_signal  = "SIGTERM"
      kill_timeout = "20s"

      config {
        image        = var.image
        network_mode = "host"
        args = concat([
          "trainer", "ps",
          "-listen", "${NOMAD_ADDR_ps}",
          "-peers-file", "/local/ps",
          "-steps", "${var.steps}",
          "-compute-per-sample", var.compute_per_sample,
          "-log-every", "50",
          "-checkpoint-dir", "/alloc/checkpoint",
          "-checkpoint-signal", "SIGTERM",
        ], var.trainer_args)
      }

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

    task "restore" {
      driver = "caravan"
      lifecycle { hook = "prestart" }
      config { checkpoint = { role = "restore", task = "ps", dir = "checkpoint", on_restore_error = "fail" } }
      resources {
        cpu    = 20
        memory = 32
      }
    }

    # Periodic and on-demand checkpoints while the servers run: the sidecar
    # writes a request file into /alloc/checkpoint, which `trainer ps`
    # polls (the coordinator saves, another server answers with a skip
    # marker).
    task "checkpoint" {
      driver = "caravan"
      lifecycle {
        hook    = "poststart"
        sidecar = true
      }
      config { checkpoint = { role = "sidecar", task = "ps", dir = "checkpoint", interval = var.checkpoint_interval } }
      resources {
        cpu    = 20
        memory = 32
      }
    }

    task "commit" {
      driver = "caravan"
      lifecycle { hook = "poststop" }
      config { checkpoint = { role = "commit", task = "ps", dir = "checkpoint" } }
      resources {
        cpu    = 20
        memory = 32
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

    # Workers hold no state: no checkpoint tasks, a quick stop.
    task "worker" {
      driver       = "docker"
      kill_timeout = "5s"

      config {
        image        = var.image
        network_mode = "host"
        args         = ["trainer", "worker", "-peers-file", "/local/ps"]
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
