# Elastic data-parallel PyTorch training (torch.distributed.elastic, c10d
# rendezvous, DistributedDataParallel: gloo on CPU, NCCL where
# torch.cuda.is_available()), run by the caravan task driver (variable
# driver, default "caravan") or as containers (driver "docker" or "podman",
# below). Change the number of workers while it trains, suspend it, resume
# it:
#
#   nomad job run -var caravan_python=$PWD/python jobspecs/train-pytorch-elastic.nomad.hcl
#   nomad job run -var driver=docker jobspecs/train-pytorch-elastic.nomad.hcl
#   nomad job scale train-pytorch-elastic worker 2    # the workers re-rendezvous as 2 and go on
#   nomad job scale train-pytorch-elastic worker 1
#   nomad job scale train-pytorch-elastic worker 0    # suspend: rank 0 checkpoints, the others answer "skip"
#   nomad job scale train-pytorch-elastic worker 1    # resume from that checkpoint
#
# The clients need python3 with torch (Debian: apt-get install python3-torch)
# and caravan's Python helper, installed (`pip install ./python`) or, as
# above, imported from the repository's python/ folder through PYTHONPATH
# (variable caravan_python). See python/README.md. With -var planner=true,
# caravan's planner scales the group "worker" itself (meta below) and rank 0
# reports progress to it.
#
# How it is put together:
#   group "rendezvous" (count 1): `python3 -m caravan.rendezvous` hosts the
#     c10d rendezvous store (a torch TCPStore) and registers it as the Nomad
#     service "<job>-rendezvous" (native discovery, provider = "nomad").
#   group "worker" (count = workers, what you scale): each allocation runs
#     `python3 -m caravan.launch` (torch.distributed.elastic's agent, in place
#     of torchrun, whose CLI fails on Debian's torch 1.13 with Python 3.11)
#     with nproc_per_node workers. A template renders the store's address from
#     the service; the agents rendezvous there (min 1, max max_workers).
#     checkpoint { scope = "group" }: the group has ONE checkpoint, written
#     by global rank 0 and restored by every allocation.
#
# Who hosts the store, and what happens when it goes away: the store is in
# its own group so that no worker allocation owns it. torchrun's default
# (the agent on the endpoint's host serves the store) would lose the
# rendezvous for everyone when a scale-down or drain removed that agent. If
# the rendezvous allocation itself is lost (node failure, drain, alloc stop),
# Nomad places a new one; the service moves, the template rewrites the
# address, and each launcher, having lost its store, stops its workers
# (they leave at an agreed step and keep a live snapshot) and rendezvouses
# at the new address. Training pauses for that time and loses no step. The
# group is done when every worker finishes; the last launchers tell the
# store's host, which exits, so the batch job completes.
#
# What happens on a change of membership (scale up or down, a worker
# allocation lost): the agents stop their workers, which leave at one step
# boundary they agree on (every step starts with a one-integer all_reduce
# for that) and keep a live snapshot of that step in their allocation
# ($CARAVAN_LIVE_DIR). The agents rendezvous again with the new members;
# every rank finds the freshest state the group holds (a live snapshot, or
# the checkpoint the driver restored in a new allocation), the rank holding
# it broadcasts it, and training continues at that step: no step is lost. A
# worker killed in the middle of a step (SIGKILL, node lost) leaves no
# snapshot: the others continue from their last snapshot or checkpoint.
#
# Determinism: the global batch (batch) is fixed; rank r of W trains on
# rows [r*batch/W, (r+1)*batch/W) and its loss is scaled so that DDP's
# average of the gradients is the gradient of the global batch's mean loss,
# whatever W. A run with changing W follows an uninterrupted run's
# trajectory up to floating-point reduction order (not bit for bit).
#
# To run your own script elastically (python/README.md has the 10 lines):
# create caravan.elastic.Elastic() first, restore with el.restore(model,
# opt), call el.boundary(step) before every step, and train on this rank's
# shard of a fixed global batch; put your script in the template below (or
# point args at a file on the clients).
#
# Containers (driver "docker": Nomad's docker driver; "podman": Nomad's
# podman driver plugin, which you install: it is not built or run here,
# README.md). The image (variable image) needs python3 with torch and
# caravan's Python helper: localhost/caravan-pytorch:local is built here
# from Debian's python3-torch, never pulled (scripts/build-images.sh; for
# the podman driver, `podman load -i build/images/caravan-pytorch.tar`);
# python/README.md, "Bring your own container", has the lines to add to your
# own image. What differs from the host processes:
# - network_mode = "host": the runtimes run without a bridge here, and
#   torch's stores and gloo pick their own ports (python/README.md, "Known
#   limits"), which only a shared network reaches.
# - caravan checkpoints each worker by two lifecycle tasks beside it
#   (driver/README.md, "Containers"): a prestart "restore" task restores the
#   slot's newest checkpoint into the allocation's shared directory (/alloc
#   in the container), and a poststop "commit" task commits what the
#   launcher saved there on its kill signal.
# - The trigger is the kill signal: a container cannot be sent the caravan
#   driver's SIGUSR1 request. On SIGTERM (scale-down, suspend, stop, alloc
#   stop, drains) `caravan.launch --checkpoint-on-stop` stops its workers,
#   which leave at a step boundary the group agrees on with a live snapshot
#   (as on any membership change), and commits that snapshot to
#   /alloc/checkpoint; the poststop task commits it to caravan's store. No
#   periodic or on-demand checkpoints (the caravan driver's interval). The
#   podman driver stops a container with the image's stop signal (SIGTERM;
#   the caravan-pytorch image sets none), not kill_signal.
# - The checkpoint key is per worker index, not the group's, with scope
#   "replica": every worker's snapshot holds the whole (replicated) model,
#   so each stopped worker checkpoints to its own index's key, and a new
#   worker restores the newest checkpoint of ANY index (the highest step;
#   after a scale-down the highest indexes stop first, so the newest state
#   is often another index's), waiting for the commits of workers Nomad is
#   stopping; el.restore() continues from the highest step any rank holds.
#   A group-scoped restore would wait for the running workers to finish
#   before a scale-up could start.
# - One worker process per container (nproc_per_node is not used).

variable "name" {
  description = "Job ID and name (also the rendezvous service's prefix and run ID)."
  type        = string
  default     = "train-pytorch-elastic"
}

variable "driver" {
  description = "Nomad task driver of the tasks: \"caravan\" (host processes, checkpointed by the driver), \"docker\" or \"podman\" (containers, checkpointed by caravan lifecycle tasks; \"podman\" is Nomad's podman driver plugin, which you install)."
  type        = string
  default     = "caravan"

  validation {
    condition     = contains(["caravan", "docker", "podman"], var.driver)
    error_message = "The driver must be \"caravan\", \"docker\" or \"podman\"."
  }
}

variable "image" {
  description = "Image with python3, torch and caravan's Python helper, present on the clients (built here: scripts/build-images.sh; drivers \"docker\" and \"podman\")."
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

variable "nproc_per_node" {
  description = "Worker processes per allocation (GPUs per allocation with NCCL; 1 on CPU). Runtime \"host\": a container runs one."
  type        = number
  default     = 1
}

variable "gpu_shares" {
  description = "Shares of one caravan GPU per worker allocation (0: CPU and gloo; > 0: NCCL, with nproc_per_node = 1). The planner counts a worker's GPUs from this request. Not run on this project's GPU-less machine; the image built here holds Debian's CPU-only torch, so its workers train with gloo whatever they are given."
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
  description = "Let caravan's planner scale the worker group (meta caravan_planner) and send it progress with the task's workload identity; the planner is found as the Consul service caravan-planner."
  type        = bool
  default     = false
}

variable "python" {
  description = "Python interpreter with torch on the clients (Debian: /usr/bin/python3 with python3-torch; driver \"caravan\")."
  type        = string
  default     = "python3"
}

variable "caravan_python" {
  description = "Directory on the clients holding the caravan Python helper (the repository's python/ folder), put on PYTHONPATH; \"\" when it is installed with `pip install ./python` (driver \"caravan\")."
  type        = string
  default     = ""
}

variable "checkpoint_interval" {
  description = "Periodic checkpoint interval (\"\" for none: only on stop and on demand; driver \"caravan\")."
  type        = string
  default     = "10m"
}

variable "gloo_socket_ifname" {
  description = "Network interface gloo uses between workers (GLOO_SOCKET_IFNAME; \"\": the one the host name resolves to)."
  type        = string
  default     = ""
}

locals {
  host = var.driver == "caravan"
  # for_each of the blocks only the caravan driver, or only a container
  # driver, has.
  if_host      = local.host ? [true] : []
  if_container = local.host ? [] : [true]

  # The launcher's arguments, after the interpreter (the image's entrypoint
  # in a container). A container checkpoints on its kill signal.
  launch_args = concat(["-u", "-m", "caravan.launch"], local.host ? [] : ["--checkpoint-on-stop"], [
    "--nnodes", "1:${var.max_workers}", "--nproc-per-node", local.host ? "${var.nproc_per_node}" : "1",
    "--rdzv-endpoint-file", "${NOMAD_TASK_DIR}/rendezvous", "--run-id", "${NOMAD_JOB_ID}",
    "${NOMAD_TASK_DIR}/train.py", "--steps", "${var.steps}", "--batch", "${var.batch}", "--min-step-time", "${var.min_step_time}",
    "--compute-per-sample", "${var.compute_per_sample}",
  ])
  store_args = ["-u", "-m", "caravan.rendezvous", "--host", "${NOMAD_IP_rdzv}", "--port", "${NOMAD_PORT_rdzv}"]
  # Host: the helper's folder on PYTHONPATH. Container: the image sets its
  # own PYTHONPATH, and the launcher saves on stop where the restore task
  # restored.
  train_env = local.host ? { PYTHONPATH = var.caravan_python } : { CARAVAN_CHECKPOINT_DIR = "${NOMAD_ALLOC_DIR}/checkpoint" }
}

job "train-pytorch-elastic" {
  id   = var.name
  name = var.name
  type = "batch"

  # Opt-in (variable planner): the planner may scale "worker" between 1 and
  # max_workers; the workers re-rendezvous as above.
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
      driver = var.driver

      dynamic "config" {
        for_each = local.if_host
        content {
          command = "/usr/bin/env"
          args    = concat([var.python], local.store_args)
        }
      }

      dynamic "config" {
        for_each = local.if_container
        content {
          image        = var.image
          network_mode = "host"
          args         = local.store_args
        }
      }

      # The image sets its own PYTHONPATH.
      dynamic "env" {
        for_each = local.if_host
        content {
          PYTHONPATH = var.caravan_python
        }
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
      driver = var.driver
      # Bounds the stop. Host: the checkpoint (4/5 of it), then the agent
      # stops its workers (they leave at the next step boundary). Container:
      # on SIGTERM the launcher stops its workers (they leave at the next
      # step boundary with a live snapshot) and commits that snapshot to
      # /alloc/checkpoint.
      kill_signal  = local.host ? "" : "SIGTERM" # "": the driver's default
      kill_timeout = "90s"

      dynamic "config" {
        for_each = local.if_host
        content {
          # env execs python, so the checkpoint signal reaches the launcher,
          # which forwards it to the local rank 0 worker.
          command = "/usr/bin/env"
          args    = concat([var.python], local.launch_args)

          checkpoint {
            scope            = "group"
            signal           = "SIGUSR1"
            interval         = var.checkpoint_interval
            timeout          = "5m"
            on_restore_error = "fail"
          }
        }
      }

      dynamic "config" {
        for_each = local.if_container
        content {
          image        = var.image
          network_mode = "host"
          args         = local.launch_args
        }
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

      env = merge(local.train_env, {
        CARAVAN_PLANNER_URLS_FILE = "${NOMAD_TASK_DIR}/planners"
        CARAVAN_ADVERTISE_ADDR    = "${attr.unique.network.ip-address}"
        GLOO_SOCKET_IFNAME        = var.gloo_socket_ifname
      })

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

    # Containers: caravan's checkpointing of "train", restore before it
    # starts, commit after it stops (a key per worker index; a restore takes
    # the newest of any index: scope "replica").
    dynamic "task" {
      for_each = local.if_container
      labels   = ["restore"]
      content {
        driver = "caravan"
        lifecycle { hook = "prestart" }
        config { checkpoint = { role = "restore", task = "train", dir = "checkpoint", scope = "replica" } }
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
        config { checkpoint = { role = "commit", task = "train", dir = "checkpoint", scope = "replica" } }
        resources {
          cpu    = 20
          memory = 32
        }
      }
    }
  }
}
