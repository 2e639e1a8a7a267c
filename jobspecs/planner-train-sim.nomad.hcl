# A planner-managed training job whose workers are SIMULATED: a raw_exec shell
# loop that advances a global step shared by all workers of the job (a file in
# a shared directory, standing in for the driver's checkpoint), computes the
# loss of Optimus's curve l(k) = 1/(b0*k + 1) + b2 at that step, and reports
# progress to every healthy planner instance found in Consul, authenticated by
# the task's Nomad workload identity. Each worker holds real GPU shares from
# caravan's device plugin, so jobs really contend for them.
#
# It exists so the planner can be exercised end to end without the trainer or
# the checkpointing driver; planner-train.nomad.hcl runs the real trainer.
#
#   nomad job run -var name=sim-a -var caravan_bin=$PWD/build/caravan \
#     -var state_dir=$PWD/build/cluster/checkpoints jobspecs/planner-train-sim.nomad.hcl

variable "name" {
  description = "Job ID."
  type        = string
  default     = "planner-sim"
}

variable "caravan_bin" {
  description = "Absolute path of the caravan binary (for `caravan planner report`)."
  type        = string
}

variable "state_dir" {
  description = "Directory every client can reach, holding each job's global step."
  type        = string
}

variable "count" {
  description = "Workers at submission (the planner changes it)."
  type        = number
  default     = 1
}

variable "min_workers" {
  type    = number
  default = 1
}

variable "max_workers" {
  type    = number
  default = 4
}

variable "shares" {
  description = "GPU shares per worker."
  type        = number
  default     = 2
}

variable "steps_per_tick" {
  description = "Global steps each worker adds per second (its speed)."
  type        = number
  default     = 20
}

variable "b0" {
  description = "Loss curve slope: l(k) = 1/(b0*k + 1) + b2."
  type        = number
  default     = 0.0005
}

variable "target_loss" {
  type    = string
  default = "0.1"
}

variable "stop_on_converge" {
  type    = string
  default = "false"
}

variable "priority" {
  type    = number
  default = 50
}

variable "gang" {
  type    = string
  default = "false"
}

variable "rightsize" {
  description = "caravan_rightsize: \"recommend\" or \"apply\" (resize the shares per worker to the measured need)."
  type        = string
  default     = "recommend"
}

variable "gpu_memory_peak_mib" {
  description = "Peak GPU memory each report claims (MiB; SIMULATED, not measured); 0 sends none."
  type        = number
  default     = 0
}

variable "oom_below_shares" {
  description = "If not 0, a worker holding fewer GPU shares than this reports a SIMULATED GPU out-of-memory after a few seconds and exits 1 (to exercise the planner's regrowth)."
  type        = number
  default     = 0
}

variable "fail_exit" {
  description = "If not 0, every worker exits with this code after a few seconds (to exercise failure classification)."
  type        = number
  default     = 0
}

job "planner-sim" {
  id   = var.name
  name = var.name # distinct in the Nomad UI, not the job block's label
  type = "service"

  meta {
    caravan_planner          = "true"
    caravan_worker_group     = "worker"
    caravan_min_workers      = var.min_workers
    caravan_max_workers      = var.max_workers
    caravan_gang             = var.gang
    caravan_target_loss      = var.target_loss
    caravan_stop_on_converge = var.stop_on_converge
    caravan_priority         = var.priority
    caravan_kind             = "sim"
    caravan_rightsize        = var.rightsize
  }

  group "worker" {
    count = var.count

    # No deployments: Nomad blocks scaling while one is active, and workers
    # are replaced by count changes, not rolling updates.
    update {
      max_parallel = 0
    }

    # The planner decides counts; failed workers are not rescheduled forever.
    restart {
      attempts = 1
      interval = "1m"
      delay    = "2s"
      mode     = "fail"
    }

    reschedule {
      attempts  = 2
      interval  = "10m"
      delay     = "5s"
      unlimited = false
    }

    task "train" {
      driver = "raw_exec"

      config {
        command = "/bin/sh"
        args    = ["local/train.sh"]
      }

      # The token the planner has Nomad check (any Nomad from 1.4 on): it
      # proves which job and allocation this task belongs to.
      identity {
        file = true # secrets/nomad_token: the default workload identity
      }

      env {
        CARAVAN        = var.caravan_bin
        STATE_DIR      = var.state_dir
        STEPS_PER_TICK = var.steps_per_tick
        LOSS_B0        = var.b0
        FAIL_EXIT      = var.fail_exit
        PEAK_MIB       = var.gpu_memory_peak_mib
        OOM_BELOW      = var.oom_below_shares
      }

      # Every healthy planner instance, one URL per line, refreshed in place.
      template {
        data        = <<-EOT
          {{- range service "caravan-planner" }}
          http://{{ .Address }}:{{ .Port }}
          {{- end }}
        EOT
        destination = "local/planners"
        change_mode = "noop"
      }

      template {
        destination = "local/train.sh"
        perms       = "0755"
        data        = <<-EOT
          #!/bin/sh
          # Simulated data-parallel worker (see the jobspec's header).
          dir="$STATE_DIR/$NOMAD_NAMESPACE-$NOMAD_JOB_ID"
          mkdir -p "$dir"
          started=$(date +%s)
          # The shares this worker holds: the device plugin lists them.
          shares=$(printf '%s' "$CARAVAN_GPU_SHARE_IDS" | tr ',' '\n' | grep -c .)
          while :; do
            if [ "$FAIL_EXIT" != "0" ] && [ $(( $(date +%s) - started )) -ge 3 ]; then
              echo "simulated user error" >&2
              exit "$FAIL_EXIT"
            fi
            step=$(flock "$dir/lock" sh -c 'n=$(cat "$1/step" 2>/dev/null || echo 0); n=$((n + $2)); echo "$n" > "$1/step.tmp" && mv "$1/step.tmp" "$1/step"; echo "$n"' _ "$dir" "$STEPS_PER_TICK")
            loss=$(awk -v k="$step" -v b0="$LOSS_B0" 'BEGIN { printf "%.6f", 1 / (b0 * k + 1) + 0.05 }')
            echo "step=$step loss=$loss"
            if [ "$OOM_BELOW" -gt "$shares" ] && [ $(( $(date +%s) - started )) -ge 3 ]; then
              echo "simulated GPU out of memory at $shares share(s)" >&2
              for url in $(cat local/planners 2>/dev/null); do
                "$CARAVAN" planner report -url "$url" -step "$step" -loss "$loss" \
                  -samples-per-sec $((STEPS_PER_TICK * 32)) -gpu-out-of-memory || true
              done
              exit 1
            fi
            for url in $(cat local/planners 2>/dev/null); do
              "$CARAVAN" planner report -url "$url" -step "$step" -loss "$loss" \
                -samples-per-sec $((STEPS_PER_TICK * 32)) -batch-size 32 \
                -gpu-memory-peak-bytes $((PEAK_MIB * 1048576)) || true
            done
            sleep 1
          done
        EOT
      }

      resources {
        cpu    = 50
        memory = 64

        device "caravan/gpushare" {
          count = var.shares
        }
      }
    }
  }
}
