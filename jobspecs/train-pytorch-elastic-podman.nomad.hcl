# train-pytorch-elastic-docker.nomad.hcl for Nomad's podman driver (the
# external nomad-driver-podman plugin, which you install): the same
# groups, the same lifecycle tasks, training script and planner meta; only
# the job's name and the `driver = "podman"` lines differ
# (TestJobspecs_PodmanMirrorsDocker keeps the two in step). The podman
# driver's task config takes the same image, args and network_mode = "host".
# The header of the docker version says how it runs and checkpoints. The
# podman driver stops a container with the image's stop signal (SIGTERM;
# the caravan-pytorch image sets none), not kill_signal: the launcher
# checkpoints on SIGTERM either way.
#
#   nomad job run jobspecs/train-pytorch-elastic-podman.nomad.hcl
#
# The image must be in the podman service's local store (podman load -i
# build/images/caravan-pytorch.tar); nothing is pulled.
#
# Not built, run or tested here: no build of that plugin free of BUSL-1.1
# code exists (the Go module proxy serves only v0.6.5, which links Nomad
# v1.11.3; README.md). Install it yourself to use this jobspec; the local
# cluster runs the docker version under podman instead, through podman's
# Docker-compatible API (client2).

variable "name" {
  description = "Job ID and name (also the rendezvous service's prefix and run ID)."
  type        = string
  default     = "train-pytorch-elastic-podman"
}

variable "image" {
  description = "Image with python3, torch and caravan's Python helper, present on the clients (built here: scripts/build-images.sh)."
  type        = string
  default     = "localhost/caravan-pytorch:local"
}

variable "nodes" {
  description = "Regular expression of the node names the job may run on."
  type        = string
  default     = ".*"
}

variable "workers" {
  description = "Worker allocations to start with (scale the group \"worker\" to change it)."
  type        = number
  default     = 1
}

variable "max_workers" {
  description = "Most worker allocations in one rendezvous."
  type        = number
  default     = 4
}

variable "gpu_shares" {
  description = "Shares of one caravan GPU per worker allocation (0: none). The planner counts a worker's GPUs from this request. The image built here holds Debian's CPU-only torch, so its workers train with gloo whatever they are given (the local cluster's GPUs are simulated)."
  type        = number
  default     = 0
}

variable "steps" {
  description = "Total optimizer steps."
  type        = number
  default     = 20000
}

variable "batch" {
  description = "Global batch size (split across the workers)."
  type        = number
  default     = 128
}

variable "compute_per_sample" {
  description = "MODELLED compute for tests and demos, seconds per sample: each step also sleeps this times the rank's rows of the batch, so more workers make a step faster, as data-parallel compute does (0: none; no effect on the numbers)."
  type        = number
  default     = 0
}

variable "min_step_time" {
  description = "Pacing for tests and demos, NOT a compute model: each step takes at least this many seconds (0: train at full speed)."
  type        = number
  default     = 0
}

variable "planner" {
  description = "Let caravan's planner scale the worker group (meta caravan_planner) and send it progress with the task's workload identity."
  type        = bool
  default     = false
}

variable "gloo_socket_ifname" {
  description = "Network interface gloo uses between workers (GLOO_SOCKET_IFNAME; \"\": the one the host name resolves to)."
  type        = string
  default     = ""
}

job "train-pytorch-elastic-podman" {
  id   = var.name
  name = var.name
  type = "batch"

  meta {
    caravan_planner      = var.planner ? "true" : "false"
    caravan_worker_group = "worker"
    caravan_min_workers  = "1"
    caravan_max_workers  = var.max_workers
    caravan_total_steps  = var.steps
    caravan_speed_model  = "allreduce"
  }

  constraint {
    attribute = "${node.unique.name}"
    operator  = "regexp"
    value     = var.nodes
  }

  group "rendezvous" {
    network {
      port "rdzv" {}
    }

    service {
      provider = "nomad"
      name     = "${NOMAD_JOB_NAME}-rendezvous"
      port     = "rdzv"
    }

    restart {
      attempts = 3
      delay    = "5s"
      mode     = "fail"
    }

    task "store" {
      driver = "podman"

      config {
        image        = var.image
        network_mode = "host"
        args         = ["-u", "-m", "caravan.rendezvous", "--host", "${NOMAD_IP_rdzv}", "--port", "${NOMAD_PORT_rdzv}"]
      }

      resources {
        cpu    = 100
        memory = 512
      }
    }
  }

  group "worker" {
    count = var.workers

    constraint {
      attribute = "${attr.driver.caravan.checkpoint_store}"
      value     = "true"
    }

    # A failed launcher restarts in place, keeping its live snapshot.
    restart {
      attempts = 3
      delay    = "5s"
      mode     = "fail"
    }

    # Moves (`nomad alloc stop`, preemption) count as reschedules: a
    # checkpointing group allows any number (README.md, Operating notes).
    reschedule {
      attempts       = 0
      unlimited      = true
      delay          = "5s"
      delay_function = "constant"
    }

    task "train" {
      driver = "podman"
      # The checkpoint trigger: on SIGTERM the launcher stops its workers
      # (they leave at the next step boundary with a live snapshot) and
      # commits that snapshot to /alloc/checkpoint, within kill_timeout.
      kill_signal  = "SIGTERM"
      kill_timeout = "90s"

      config {
        image        = var.image
        network_mode = "host"
        args = ["-u", "-m", "caravan.launch", "--checkpoint-on-stop",
          "--nnodes", "1:${var.max_workers}", "--nproc-per-node", "1",
          "--rdzv-endpoint-file", "${NOMAD_TASK_DIR}/rendezvous", "--run-id", "${NOMAD_JOB_ID}",
          "${NOMAD_TASK_DIR}/train.py", "--steps", "${var.steps}", "--batch", "${var.batch}", "--min-step-time", "${var.min_step_time}",
        "--compute-per-sample", "${var.compute_per_sample}"]
      }

      # The store's address, from the Nomad service; rewritten when it moves
      # (the launcher re-reads it after losing the store).
      template {
        destination = "local/rendezvous"
        change_mode = "noop"
        data        = <<-EOF
          {{- range $i, $s := nomadService (printf "%s-rendezvous" (env "NOMAD_JOB_NAME")) -}}
          {{- if eq $i 0 }}{{ $s.Address }}:{{ $s.Port }}{{ end -}}
          {{- end -}}
        EOF
      }

      # Progress to the planner (rank 0 reports): its addresses from Consul,
      # the workload identity the planner verifies.
      dynamic "identity" {
        for_each = var.planner ? [1] : []
        content {
          file = true # secrets/nomad_token: the default workload identity
        }
      }

      dynamic "template" {
        for_each = var.planner ? [1] : []
        content {
          destination = "local/planners"
          change_mode = "noop"
          data        = <<-EOT
            {{- range service "caravan-planner" }}
            http://{{ .Address }}:{{ .Port }}
            {{- end }}
          EOT
        }
      }

      env {
        # Where the restore task restored, and the launcher saves on stop.
        CARAVAN_CHECKPOINT_DIR    = "${NOMAD_ALLOC_DIR}/checkpoint"
        CARAVAN_PLANNER_URLS_FILE = "${NOMAD_TASK_DIR}/planners"
        CARAVAN_ADVERTISE_ADDR    = "${attr.unique.network.ip-address}"
        GLOO_SOCKET_IFNAME        = var.gloo_socket_ifname
      }

      template {
        destination     = "local/train.py"
        left_delimiter  = "[["
        right_delimiter = "]]"
        data            = <<-EOF
          """Elastic data-parallel training with caravan's helper (python/README.md)."""
          import argparse, hashlib, time

          from caravan.elastic import Elastic
          el = Elastic()  # first: signal handlers; then the process group (gloo on CPU, NCCL on GPUs)

          import caravan, torch
          import torch.nn as nn
          from torch.nn.parallel import DistributedDataParallel as DDP

          p = argparse.ArgumentParser()
          p.add_argument("--steps", type=int, default=20000)
          p.add_argument("--batch", type=int, default=128)
          p.add_argument("--seed", type=int, default=1)
          p.add_argument("--lr", type=float, default=0.05)
          p.add_argument("--min-step-time", type=float, default=0.0, help="pacing for tests, not a compute model")
          p.add_argument("--compute-per-sample", type=float, default=0.0, help="MODELLED compute (s per sample) for tests")
          args = p.parse_args()

          torch.set_num_threads(1)
          torch.manual_seed(args.seed)
          model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 1)).to(el.device)
          opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
          teacher = torch.randn(64, generator=torch.Generator().manual_seed(args.seed + 7))

          def batch(step, n=args.batch):
              g = torch.Generator().manual_seed(args.seed * 1_000_003 + step)
              x = torch.rand(n, 64, generator=g) * 2 - 1
              return x, ((x @ teacher) > 0).float().unsqueeze(1)

          step = el.restore(model, opt)  # every rank: the group's freshest state (checkpoint or live snapshot)
          ddp = DDP(model, device_ids=[el.local_rank] if el.backend == "nccl" else None)
          W, B = el.world_size, args.batch
          lo, hi = el.rank * B // W, (el.rank + 1) * B // W  # this rank's rows of the global batch
          loss_fn = nn.BCEWithLogitsLoss(reduction="sum")
          progress = caravan.Reporter() if el.rank == 0 else None
          t_last, n_last = time.time(), step
          t_rep, n_rep = t_last, step  # the planner's samples: about one a second
          print(f"[rank {el.rank}/{W}] training from step={step} rows {lo}:{hi}", flush=True)
          while step < args.steps:
              el.boundary(step)  # checkpoint requests (rank 0 writes), agreed stops (live snapshot, exit)
              if args.min_step_time:
                  time.sleep(args.min_step_time)  # pacing (variable min_step_time), no effect on the numbers
              if args.compute_per_sample:
                  time.sleep(args.compute_per_sample * (hi - lo))  # MODELLED compute of this rank's rows
              x, y = batch(step)
              x, y = x[lo:hi].to(el.device), y[lo:hi].to(el.device)
              opt.zero_grad()
              loss = loss_fn(ddp(x), y) * (W / B)  # DDP averages over W: the global batch's mean loss
              loss.backward()
              opt.step()
              step += 1
              if step % 500 == 0:
                  total = loss.detach().clone()
                  torch.distributed.all_reduce(total)
                  if el.rank == 0:
                      now = time.time()
                      speed = (step - n_last) * B / (now - t_last)
                      print(f"step={step} loss={total.item() / W:.6f} samples_per_sec={speed:.0f} workers={W}", flush=True)
                      progress.report(step, total.item() / W, speed, batch_size=B, steps_total=args.steps, workers=W)
                      t_last, n_last = now, step
              if progress and time.time() - t_rep >= 1.0:
                  # Rank 0's rows estimate the batch's loss; the planner
                  # measures the speed from these samples.
                  now = time.time()
                  progress.report(step, loss.item(), (step - n_rep) * B / (now - t_rep), batch_size=B,
                                  steps_total=args.steps, workers=W)
                  t_rep, n_rep = now, step
          if el.rank == 0:
              x, y = batch(-1, 4096)  # a fixed evaluation set
              with torch.no_grad():
                  ev = nn.BCEWithLogitsLoss()(model(x.to(el.device)), y.to(el.device)).item()
              digest = hashlib.sha256()
              for t in model.state_dict().values():
                  digest.update(t.detach().cpu().contiguous().numpy().tobytes())
              print(f"final step={step} eval_loss={ev:.9f} params_sha256={digest.hexdigest()}", flush=True)
              progress.report(step, ev, 0.0, steps_total=args.steps, done=True)
              progress.close()
          el.close()
        EOF
      }

      resources {
        cpu    = 1000
        memory = 2048

        dynamic "device" {
          for_each = var.gpu_shares > 0 ? [1] : []
          labels   = ["caravan/gpushare"]
          content {
            count = var.gpu_shares
          }
        }
      }
    }

    # caravan's checkpointing of "train": restore before it starts, commit
    # after it stops (a key per worker index; a restore takes the newest of
    # any index: scope "replica").
    task "restore" {
      driver = "caravan"
      lifecycle { hook = "prestart" }
      config { checkpoint = { role = "restore", task = "train", dir = "checkpoint", scope = "replica" } }
      resources {
        cpu    = 20
        memory = 32
      }
    }

    task "commit" {
      driver = "caravan"
      lifecycle { hook = "poststop" }
      config { checkpoint = { role = "commit", task = "train", dir = "checkpoint", scope = "replica" } }
      resources {
        cpu    = 20
        memory = 32
      }
    }
  }
}
