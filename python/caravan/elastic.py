"""Data-parallel workers under torch.distributed.elastic, run by caravan.launch.

    from caravan.elastic import Elastic
    el = Elastic()                     # first: signal handlers, then the process group
    import torch ...
    model, opt = ..., ...
    step = el.restore(model, opt)      # every rank: the group's freshest state
    ddp = DistributedDataParallel(model, ...)
    while step < steps:
        el.boundary(step)              # between two steps, on every rank
        ... train on this rank's shard of the global batch ...
        step += 1

What it does:

- ``restore``: every rank reads the step of the state its allocation holds:
  the checkpoint the driver restored (``$CARAVAN_CHECKPOINT_DIR``) and the
  live snapshot its workers left when the group last changed
  (``$CARAVAN_LIVE_DIR``, set by caravan.launch). The ranks agree on the
  highest step; the lowest rank holding it loads its state and broadcasts it,
  so all ranks continue from the same model and optimizer state.
- ``boundary``: answers a checkpoint request (global rank 0 writes the state
  and the marker; the other local ranks 0 write skip markers), then all ranks
  agree whether any of them was asked to stop (SIGTERM from its agent: the
  group is changing or the task stops). If so, or when a peer has gone, every
  local rank 0 writes a live snapshot of this step and all leave, and the
  agents re-rendezvous with the new membership. A worker leaves with exit
  code 143 when it was signalled itself and 75 when a peer asked, so that its
  agent restarts it rather than taking the group for finished.

A stop reaches every rank at the same step boundary, so a snapshot is the
state after exactly that step on every rank. A failure inside a step (a peer
killed with SIGKILL, a node lost) leaves no snapshot: the group goes on from
the freshest snapshot or checkpoint it still has.
"""

import datetime
import os
import sys

from caravan import pytorch as cpt
from caravan._warn import warn_once
from caravan.checkpoint import Checkpointer, state_step

ENV_LIVE_DIR = "CARAVAN_LIVE_DIR"
ENV_LAUNCH_DIR = "CARAVAN_LAUNCH_DIR"
EXIT_SIGNALLED = 143
EXIT_PEER_STOPPED = 75


def _env_int(name, default):
    try:
        return int(os.environ.get(name, default))
    except ValueError:
        return default


def pid_file(launch_dir, local_rank):
    """Where a worker announces it handles the checkpoint signal."""
    return os.path.join(launch_dir, f"worker-{local_rank}.pid")


class Elastic:
    """One worker process of an elastic data-parallel group."""

    def __init__(self, backend=None, timeout=datetime.timedelta(seconds=120)):
        self.ckpt = Checkpointer()  # the handlers, before anything slow
        self.rank = _env_int("RANK", 0)
        self.local_rank = _env_int("LOCAL_RANK", 0)
        self.world_size = _env_int("WORLD_SIZE", 1)
        self.restart_count = _env_int("TORCHELASTIC_RESTART_COUNT", 0)
        self.live_dir = os.environ.get(ENV_LIVE_DIR, "")
        if not self.live_dir:
            warn_once(("env", ENV_LIVE_DIR), f"${ENV_LIVE_DIR} is not set (not started by caravan.launch?): no live "
                      "snapshots; a membership change continues from the last checkpoint")
        self._pid_path = None
        launch_dir = os.environ.get(ENV_LAUNCH_DIR, "")
        if launch_dir and os.path.isdir(launch_dir):
            self._pid_path = pid_file(launch_dir, self.local_rank)
            with open(self._pid_path, "w", encoding="utf-8") as f:
                f.write(str(os.getpid()))
        self.model = self.optimizer = self.extra = None

        import torch
        import torch.distributed as dist

        self._torch, self._dist = torch, dist
        if backend is None:
            backend = "nccl" if torch.cuda.is_available() else "gloo"
        if backend == "nccl":
            torch.cuda.set_device(self.local_rank)
            self.device = torch.device("cuda", self.local_rank)
        else:
            self.device = torch.device("cpu")
        self.backend = backend
        if not dist.is_initialized():
            dist.init_process_group(backend, timeout=timeout)
        self.world_size = dist.get_world_size()
        self.rank = dist.get_rank()

    def log(self, msg):
        print(f"[rank {self.rank}/{self.world_size}] {msg}", flush=True)

    def _local_best(self):
        """(step, directory) of the freshest state this allocation holds."""
        best = (-1, "")
        for directory in (self.ckpt.directory, self.live_dir):
            step = state_step(directory) if directory else None
            if directory == self.ckpt.directory and step is None and directory:
                step = self.ckpt.restored_step()
            if step is not None and step > best[0]:
                best = (step, directory)
        return best

    def restore(self, model, optimizer=None, extra=None):
        """Loads the group's freshest state into model and optimizer on every
        rank and remembers them for boundary(). Returns the step (0: fresh).
        extra is any picklable object saved with the state (see .extra)."""
        self.model, self.optimizer, self.extra = model, optimizer, extra
        torch, dist = self._torch, self._dist
        step, directory = self._local_best()
        steps = [torch.zeros(1, dtype=torch.int64, device=self.device) for _ in range(self.world_size)]
        dist.all_gather(steps, torch.tensor([step], dtype=torch.int64, device=self.device))
        steps = [int(s.item()) for s in steps]
        top = max(steps)
        if top < 0:
            self.log(f"starting fresh (world size {self.world_size})")
            return 0
        src = steps.index(top)
        obj = [cpt.read(directory) if self.rank == src else None]
        if self.world_size > 1:
            dist.broadcast_object_list(obj, src=src, device=self.device if self.backend == "nccl" else None)
        st = obj[0]
        cpt.apply(st, model, optimizer)
        self.extra = st.get("extra")
        kind = "checkpoint" if directory == self.ckpt.directory else "live snapshot"
        if self.rank == src:
            kind_note = f"{kind} {directory}"
        else:
            kind_note = f"rank {src}"
        self.log(f"restored step={top} from {kind_note} (steps held by ranks: {steps})")
        return top

    def boundary(self, step, extra=None):
        """Call between two steps on every rank: serves checkpoint requests and
        leaves the process (after a live snapshot) when the group stops."""
        if extra is not None:
            self.extra = extra
        served = cpt.serve(self.ckpt, step, self.model, self.optimizer, self.extra, self.rank, self.local_rank)
        if served == "saved":
            self.log(f"checkpoint step={step}")
        torch, dist = self._torch, self._dist
        flag = torch.tensor([1 if self.ckpt.stop_requested else 0], dtype=torch.int32, device=self.device)
        try:
            dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        except RuntimeError as e:
            self.leave(step, EXIT_PEER_STOPPED, f"a peer has gone ({str(e).splitlines()[0]})")
        if flag.item():
            own = self.ckpt.stop_requested
            self.leave(step, EXIT_SIGNALLED if own else EXIT_PEER_STOPPED,
                       "stop asked by this worker's agent" if own else "stop asked by a peer")

    def leave(self, step, code, why):
        """Writes the live snapshot (local rank 0), then exits with code."""
        if self.ckpt.requested:  # a request that arrived with the stop
            cpt.serve(self.ckpt, step, self.model, self.optimizer, self.extra, self.rank, self.local_rank)
        if self.local_rank == 0 and self.live_dir and self.model is not None:
            os.makedirs(self.live_dir, exist_ok=True)
            cpt.save_dir(self.live_dir, step, self.model, self.optimizer, self.extra)
            self.log(f"live snapshot step={step} ({why})")
        else:
            self.log(f"stopping at step={step} ({why})")
        self.close()
        sys.stdout.flush()
        sys.stderr.flush()
        # No interpreter teardown: the process group may hold sockets to gone
        # peers, and its destructor can block.
        os._exit(code)

    def close(self):
        if self._pid_path:
            try:
                os.unlink(self._pid_path)
            except FileNotFoundError:
                pass
            self._pid_path = None
