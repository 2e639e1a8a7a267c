# A PyTorch training script that follows caravan's checkpoint protocol (see
# driver/README.md), run by the caravan task driver: suspend, resume and
# migrate it with the usual Nomad commands and it continues where it was.
#
#   nomad job run -var caravan_python=$PWD/python jobspecs/train-pytorch.nomad.hcl                    # CPU
#   nomad job run -var caravan_python=$PWD/python -var gpu_shares=4 jobspecs/train-pytorch.nomad.hcl  # 4 shares of a caravan GPU
#
# The clients need python3 with torch (Debian: apt-get install python3-torch)
# and caravan's Python helper: either installed (`pip install ./python`) or,
# as above, imported from the repository's python/ folder through PYTHONPATH
# (the caravan_python variable; the driver has no filesystem isolation, so
# the task reads it in place). The script itself is written into the task
# directory by the template below, so the job is self-contained. With
# gpu_shares > 0 the job asks caravan's fractional-GPU device plugin for
# shares, which sets CUDA_VISIBLE_DEVICES.
#
# The protocol, as the script implements it with the helper (python/README.md):
#   1. caravan.Checkpointer() installs the handler for
#      $CARAVAN_CHECKPOINT_SIGNAL (SIGUSR1) first;
#   2. caravan.pytorch.load restores the state the driver put in
#      $CARAVAN_CHECKPOINT_DIR, if any, and gives its step;
#   3. when ckpt.requested, between two steps, caravan.pytorch.save writes
#      state.pt atomically, then the marker caravan-checkpoint.json with a
#      sequence one above the last; training goes on;
#   4. nothing touches the directory until the next signal.
# Batches come from a generator seeded by (seed, step), so a resumed run
# sees exactly the batches an uninterrupted one would.
#
# For a data-parallel job that grows and shrinks with `nomad job scale`, see
# jobspecs/train-pytorch-elastic.nomad.hcl.

variable "nodes" {
  description = "Regular expression of the node names the job may run on."
  type        = string
  default     = ".*"
}

variable "steps" {
  description = "Total optimizer steps."
  type        = number
  default     = 20000
}

variable "gpu_shares" {
  description = "Shares of one caravan GPU (0: CPU only)."
  type        = number
  default     = 0
}

variable "python" {
  description = "Python interpreter with torch on the clients (Debian: /usr/bin/python3 with python3-torch)."
  type        = string
  default     = "python3"
}

variable "caravan_python" {
  description = "Directory on the clients holding the caravan Python helper (the repository's python/ folder), put on PYTHONPATH; \"\" when it is installed with `pip install ./python`."
  type        = string
  default     = ""
}

variable "checkpoint_interval" {
  description = "Periodic checkpoint interval (\"\" for none: only on stop and on demand)."
  type        = string
  default     = "10m"
}

job "train-pytorch" {
  type = "batch"

  group "train" {
    constraint {
      attribute = "${node.unique.name}"
      operator  = "regexp"
      value     = var.nodes
    }

    constraint {
      attribute = "${attr.driver.caravan.checkpoint_store}"
      value     = "true"
    }

    restart {
      attempts = 2
      delay    = "10s"
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

    task "train" {
      driver       = "caravan"
      kill_timeout = "60s"

      config {
        # env execs python, so the checkpoint signal reaches python itself.
        command = "/usr/bin/env"
        args    = [var.python, "-u", "${NOMAD_TASK_DIR}/train.py", "--steps", "${var.steps}"]

        checkpoint {
          signal           = "SIGUSR1"
          interval         = var.checkpoint_interval
          timeout          = "5m"
          on_restore_error = "fail"
        }
      }

      template {
        destination     = "local/train.py"
        left_delimiter  = "[["
        right_delimiter = "]]"
        data            = <<-EOF
          """Minimal PyTorch trainer following caravan's checkpoint protocol (python/README.md)."""
          import argparse, hashlib, sys, time

          import caravan, caravan.pytorch as cpt
          ckpt = caravan.Checkpointer()  # 1. first: the handler of $CARAVAN_CHECKPOINT_SIGNAL (and SIGTERM/SIGINT)
          progress = caravan.Reporter()  # to the planner, if $CARAVAN_PLANNER_URL is set

          import torch
          import torch.nn as nn

          p = argparse.ArgumentParser()
          p.add_argument("--steps", type=int, default=20000)
          p.add_argument("--batch", type=int, default=128)
          p.add_argument("--seed", type=int, default=1)
          p.add_argument("--lr", type=float, default=0.05)
          args = p.parse_args()

          device = "cuda" if torch.cuda.is_available() else "cpu"
          torch.set_num_threads(1)  # same arithmetic order on every node
          torch.manual_seed(args.seed)
          model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 1)).to(device)
          opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
          teacher = torch.randn(64, generator=torch.Generator().manual_seed(args.seed + 7))

          def batch(step):
              g = torch.Generator().manual_seed(args.seed * 1_000_003 + step)
              x = torch.rand(args.batch, 64, generator=g) * 2 - 1
              y = ((x @ teacher) > 0).float().unsqueeze(1)
              return x.to(device), y.to(device)

          # 2. Resume from the restored checkpoint, if any.
          step = cpt.load(ckpt.directory, model, opt, map_location=device) or 0
          if step:
              r = ckpt.restore
              print(f"resumed step={step} sequence={r.sequence} generation={r.generation} from={r.restored_from}", flush=True)

          loss_fn = nn.BCEWithLogitsLoss()
          t_last, n_last = time.time(), step
          while step < args.steps:
              # 3. Between two steps: answer a checkpoint request (state, then marker, atomically), or stop.
              if ckpt.requested:
                  t0 = time.time()
                  cpt.save(ckpt, step, model, opt, meta={"framework": "pytorch"})
                  print(f"checkpoint step={step} in {time.time() - t0:.3f}s", flush=True)
              if ckpt.stop_requested:
                  print(f"interrupted step={step}", flush=True)
                  sys.exit(143)
              x, y = batch(step)
              opt.zero_grad()
              loss = loss_fn(model(x), y)
              loss.backward()
              opt.step()
              step += 1
              if step % 500 == 0:
                  now = time.time()
                  speed = (step - n_last) * args.batch / (now - t_last)
                  print(f"step={step} loss={loss.item():.6f} samples_per_sec={speed:.0f}", flush=True)
                  progress.report(step, loss.item(), speed, batch_size=args.batch, steps_total=args.steps, workers=1)
                  t_last, n_last = now, step
          digest = hashlib.sha256()
          for t in model.state_dict().values():
              digest.update(t.detach().cpu().contiguous().numpy().tobytes())
          print(f"final step={step} loss={loss.item():.6f} params_sha256={digest.hexdigest()}", flush=True)
          progress.report(step, loss.item(), 0.0, steps_total=args.steps, done=True)
          progress.close()
        EOF
      }

      env {
        # The caravan helper package, imported from the repository's copy
        # (see the caravan_python variable).
        PYTHONPATH = var.caravan_python
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
  }
}
