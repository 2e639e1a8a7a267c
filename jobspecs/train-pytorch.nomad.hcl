# A PyTorch training script that follows caravan's checkpoint protocol (see
# driver/README.md), run by the caravan task driver: suspend, resume and
# migrate it with the usual Nomad commands and it continues where it was.
#
#   nomad job run jobspecs/train-pytorch.nomad.hcl                 # CPU
#   nomad job run -var gpu_shares=4 jobspecs/train-pytorch.nomad.hcl  # 4 shares of a caravan GPU
#
# The clients need python3 with torch installed (`pip install torch`); the
# script is written into the task directory by the template below, so the
# job is self-contained. With gpu_shares > 0 the job asks caravan's
# fractional-GPU device plugin for shares, which sets CUDA_VISIBLE_DEVICES.
#
# The protocol, as the script implements it:
#   1. install the handler for $CARAVAN_CHECKPOINT_SIGNAL (SIGUSR1) first;
#   2. if $CARAVAN_CHECKPOINT_DIR/caravan-checkpoint.json exists, load the
#      state next to it and continue from its step;
#   3. on the signal, between two steps: torch.save the state to a temporary
#      file, fsync, rename to state.pt, then write caravan-checkpoint.json the
#      same way with a sequence one above the last;
#   4. do not touch the directory until the next signal.
# Batches come from a generator seeded by (seed, step), so a resumed run
# sees exactly the batches an uninterrupted one would.

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
          """Minimal PyTorch trainer following caravan's checkpoint protocol."""
          import argparse, hashlib, json, os, signal, sys, time

          import torch
          import torch.nn as nn

          MARKER = "caravan-checkpoint.json"
          STATE = "state.pt"

          p = argparse.ArgumentParser()
          p.add_argument("--steps", type=int, default=20000)
          p.add_argument("--batch", type=int, default=128)
          p.add_argument("--seed", type=int, default=1)
          p.add_argument("--lr", type=float, default=0.05)
          args = p.parse_args()

          ckpt_dir = os.environ.get("CARAVAN_CHECKPOINT_DIR", "")
          sig_name = os.environ.get("CARAVAN_CHECKPOINT_SIGNAL", "SIGUSR1")
          ckpt_sig = getattr(signal, sig_name)

          # 1. Handlers first: SIGUSR1's default action would kill us.
          want_ckpt = False
          want_exit = False
          def on_ckpt(signum, frame):
              global want_ckpt, want_exit
              want_ckpt = True
              if signum in (signal.SIGTERM, signal.SIGINT):  # SIGTERM-style
                  want_exit = True
          def on_exit(signum, frame):
              global want_exit
              want_exit = True
          signal.signal(ckpt_sig, on_ckpt)
          for s in (signal.SIGTERM, signal.SIGINT):
              if s != ckpt_sig:
                  signal.signal(s, on_exit)

          def fsync_dir(d):
              fd = os.open(d, os.O_RDONLY)
              try:
                  os.fsync(fd)
              finally:
                  os.close(fd)

          def atomic_write(path, write):
              tmp = path + ".tmp"
              with open(tmp, "wb") as f:
                  write(f)
                  f.flush()
                  os.fsync(f.fileno())
              os.replace(tmp, path)
              fsync_dir(os.path.dirname(path))

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
          step, seq = 0, int(os.environ.get("CARAVAN_CHECKPOINT_SEQUENCE", "0") or 0)
          if ckpt_dir and os.path.exists(os.path.join(ckpt_dir, MARKER)):
              with open(os.path.join(ckpt_dir, MARKER)) as f:
                  marker = json.load(f)
              state = torch.load(os.path.join(ckpt_dir, STATE), map_location=device)
              model.load_state_dict(state["model"])
              opt.load_state_dict(state["opt"])
              step, seq = state["step"], max(seq, marker["sequence"])
              print(f"resumed step={step} sequence={seq} generation={os.environ.get('CARAVAN_CHECKPOINT_GENERATION')}"
                    f" from={os.environ.get('CARAVAN_CHECKPOINT_RESTORED_FROM')}", flush=True)

          # 3. Save: state first, marker last, both atomically.
          def save():
              global seq
              if not ckpt_dir:
                  return
              seq += 1
              t0 = time.time()
              atomic_write(os.path.join(ckpt_dir, STATE),
                           lambda f: torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step}, f))
              marker = json.dumps({"sequence": seq, "step": step, "meta": {"framework": "pytorch"}}).encode()
              atomic_write(os.path.join(ckpt_dir, MARKER), lambda f: f.write(marker))
              print(f"checkpoint step={step} sequence={seq} in {time.time() - t0:.3f}s", flush=True)

          loss_fn = nn.BCEWithLogitsLoss()
          t_last, n_last = time.time(), step
          while step < args.steps:
              if want_ckpt:
                  want_ckpt = False
                  save()
              if want_exit:
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
                  print(f"step={step} loss={loss.item():.6f} samples_per_sec={(step - n_last) * args.batch / (now - t_last):.0f}", flush=True)
                  t_last, n_last = now, step
          digest = hashlib.sha256()
          for t in model.state_dict().values():
              digest.update(t.detach().cpu().contiguous().numpy().tobytes())
          print(f"final step={step} loss={loss.item():.6f} params_sha256={digest.hexdigest()}", flush=True)
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
  }
}
