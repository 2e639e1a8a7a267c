# train-elastic-docker.nomad.hcl for Nomad's podman driver (the external
# nomad-driver-podman plugin, which you install): the same groups, the
# same lifecycle tasks and planner meta; only the job's name and the
# `driver = "podman"` lines differ (TestJobspecs_PodmanMirrorsDocker keeps
# the two in step). The podman driver's task config takes the same image,
# args and network_mode = "host". The podman driver stops a container with
# the image's stop signal (SIGTERM; the trainer image sets none), not
# kill_signal: the servers save on SIGTERM either way.
#
#   nomad job run jobspecs/train-elastic-podman.nomad.hcl
#
# The image must be in the podman service's local store (podman load -i
# build/images/caravan-trainer.tar); nothing is pulled. Compute time is MODELLED, as in train-elastic.nomad.hcl.
#
# Not built, run or tested here: no build of that plugin free of BUSL-1.1
# code exists (the Go module proxy serves only v0.6.5, which links Nomad
# v1.11.3; README.md). Install it yourself to use this jobspec; the local
# cluster runs the docker version under podman instead, through podman's
# Docker-compatible API (client2).

variable "name" {
  description = "Job ID (and the prefix of the parameter servers' service name)."
  type        = string
  default     = "train-elastic-podman"
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

job "train-elastic-podman" {
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
      driver       = "podman"
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
      driver       = "podman"
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
