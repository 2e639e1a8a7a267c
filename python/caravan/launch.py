"""python3 -m caravan.launch: torch.distributed.elastic's agent for one Nomad task.

    python3 -m caravan.launch --nnodes 1:4 --rdzv-endpoint-file local/rdzv \\
        train.py --steps 20000

It plays torchrun's part (torchrun's CLI fails at start on Debian's torch
1.13 under Python 3.11) through torch.distributed.elastic's public agent API
(WorkerSpec, LocalElasticAgent, the c10d rendezvous), and adds what running
under caravan's driver needs:

- The rendezvous store is hosted elsewhere (``python3 -m
  caravan.rendezvous``, its own task group); the launcher reads its address
  from ``--rdzv-endpoint`` or from a file a Nomad template renders from the
  service, waiting until it is there, and reads it again after losing the
  store (the store's allocation moved), then rendezvouses again.
- The driver signals this process only. The checkpoint signal
  (``$CARAVAN_CHECKPOINT_SIGNAL``) is forwarded to the local rank 0 worker
  once it has installed its handler (caravan.elastic writes its pid file);
  without such a worker (between two rendezvous), the launcher answers
  itself: it commits the live snapshot if it is newer than the checkpoint
  directory, else writes a skip marker.
- With ``--checkpoint-on-stop`` the stop signal (SIGTERM, SIGINT) is also
  the checkpoint trigger, for drivers that only send a kill signal (a
  docker or podman task checkpointed by caravan's lifecycle tasks): once the
  workers have stopped and left their live snapshot, the launcher commits it
  to the checkpoint directory (a skip marker when it holds nothing newer)
  and exits.
- Workers get ``CARAVAN_LIVE_DIR`` (live snapshots across re-rendezvous) and
  ``CARAVAN_LAUNCH_DIR``.
- When the workers succeed, the launcher closes the rendezvous and tells the
  store's host (counter ``caravan.done``) so it exits and a batch job completes.

Exit codes: 0 when training finished, 1 when the workers failed more than
``--max-restarts`` times in a row of failures, 128+N on signal N.
"""

import argparse
import os
import signal
import sys
import tempfile
import time
from datetime import timedelta

from caravan.checkpoint import Checkpointer, read_marker
from caravan.elastic import ENV_LAUNCH_DIR, ENV_LIVE_DIR, pid_file

DONE_KEY = "caravan.done"


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python3 -m caravan.launch", description=__doc__.split("\n")[0])
    p.add_argument("--nnodes", default="1:4", help="MIN:MAX allocations (agents) in the group, or N")
    p.add_argument("--nproc-per-node", type=int, default=1, help="worker processes per allocation (GPUs per node)")
    p.add_argument("--rdzv-endpoint", default="", help="HOST:PORT of the rendezvous store")
    p.add_argument("--rdzv-endpoint-file", default="", help="file holding HOST:PORT (a Nomad template); waited for")
    p.add_argument("--run-id", default=os.environ.get("NOMAD_JOB_ID", "caravan"), help="rendezvous ID")
    p.add_argument("--max-restarts", type=int, default=100,
                   help="worker-group restarts after failures (a peer leaving counts as one)")
    p.add_argument("--monitor-interval", type=float, default=1.0, help="seconds between worker checks")
    p.add_argument("--last-call", type=float, default=5.0,
                   help="seconds a rendezvous waits for more members once it has MIN")
    p.add_argument("--join-timeout", type=float, default=600.0, help="seconds to wait for MIN members")
    p.add_argument("--master-addr", default=os.environ.get("CARAVAN_ADVERTISE_ADDR", ""),
                   help="address the other allocations reach this one at (default $CARAVAN_ADVERTISE_ADDR)")
    p.add_argument("--python", default=sys.executable, help="interpreter for the script")
    p.add_argument("--checkpoint-on-stop", action="store_true",
                   help="on SIGTERM/SIGINT, commit the workers' live snapshot to $CARAVAN_CHECKPOINT_DIR before "
                        "exiting (the kill signal as the checkpoint trigger: docker/podman tasks with caravan's "
                        "lifecycle tasks)")
    p.add_argument("script")
    p.add_argument("script_args", nargs=argparse.REMAINDER)
    args = p.parse_args(argv)
    lo, _, hi = args.nnodes.partition(":")
    try:
        args.min_nodes, args.max_nodes = int(lo), int(hi or lo)
    except ValueError:
        p.error(f"--nnodes: want MIN:MAX or N, got {args.nnodes!r}")
    if not 1 <= args.min_nodes <= args.max_nodes:
        p.error(f"--nnodes: want 1 <= MIN <= MAX, got {args.nnodes!r}")
    if not args.rdzv_endpoint and not args.rdzv_endpoint_file:
        p.error("--rdzv-endpoint or --rdzv-endpoint-file is required")
    return args


def log(msg):
    print(f"caravan.launch: {msg}", file=sys.stderr, flush=True)


def read_endpoint(args):
    if args.rdzv_endpoint:
        return args.rdzv_endpoint
    try:
        with open(args.rdzv_endpoint_file, encoding="utf-8") as f:
            return f.read().strip()
    except OSError:
        return ""


def wait_endpoint(args):
    """The store's HOST:PORT, once known."""
    said = False
    while True:
        ep = read_endpoint(args)
        if ep:
            return ep
        if not said:
            log(f"waiting for the rendezvous endpoint in {args.rdzv_endpoint_file}")
            said = True
        time.sleep(1)


def child_pid(path):
    """The pid in path when it is a live child of this process, else None."""
    try:
        with open(path, encoding="utf-8") as f:
            pid = int(f.read().strip())
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            state, ppid = f.read().rsplit(")", 1)[1].split()[:2]
    except (OSError, ValueError, IndexError):
        return None
    # A zombie (exited, not yet reaped by the agent) would swallow the signal.
    return pid if int(ppid) == os.getpid() and state not in ("Z", "X") else None


class Forwarder:
    """Routes the checkpoint signal to the local rank 0 worker, or answers it."""

    def __init__(self, launch_dir, live_dir):
        self.launch_dir, self.live_dir = launch_dir, live_dir
        self.ckpt = Checkpointer(install=False)

    def install(self):
        signal.signal(self.ckpt.signal, self.on_signal)

    def on_signal(self, signum, _frame):
        pid = child_pid(pid_file(self.launch_dir, 0))
        if pid is not None:
            try:
                os.kill(pid, signum)
                log(f"checkpoint request forwarded to worker {pid}")
                return
            except ProcessLookupError:
                pass
        seq = self.ckpt.commit_copy(self.live_dir)
        log(f"checkpoint request answered by the launcher (no worker running): sequence {seq}")

    def checkpoint_on_stop(self):
        """Commits the live snapshot the stopped workers left (a skip marker
        when it is not newer than the checkpoint directory's state); returns
        the marker's sequence (None when checkpoints are off)."""
        seq = self.ckpt.commit_copy(self.live_dir)
        marker = read_marker(self.ckpt.directory) or {}
        what = "skip marker" if marker.get("skip") else f"step {marker.get('step')}"
        log(f"stop checkpoint: {what}, sequence {seq}")
        return seq


def node_addr(env=None):
    """The address part of this agent's rendezvous node descriptor: the
    host's FQDN, with the Nomad allocation ID when there is one. torch names
    a node by FQDN and pid, and two containers on one host's network share
    the FQDN and are both pid 1: without the allocation ID a second worker
    would join the rendezvous as the first one (and train alone)."""
    import socket

    env = os.environ if env is None else env
    alloc = env.get("NOMAD_ALLOC_ID", "")
    return f"{socket.getfqdn()}/{alloc}" if alloc else socket.getfqdn()


def unique_node_descs():
    """Makes the c10d rendezvous name this agent by node_addr()."""
    import threading

    from torch.distributed.elastic.rendezvous import dynamic_rendezvous as dr

    class Generator:
        def __init__(self):
            self._lock, self._local_id = threading.Lock(), 0

        def generate(self):
            with self._lock:
                local_id, self._local_id = self._local_id, self._local_id + 1
            return dr._NodeDesc(node_addr(), os.getpid(), local_id)  # pylint: disable=protected-access

    dr.DynamicRendezvousHandler._node_desc_generator = Generator()  # pylint: disable=protected-access


def run_agent(args, endpoint, launch_dir):
    """One elastic agent run against the store at endpoint; returns when the
    workers succeeded, raises otherwise."""
    from torch.distributed.elastic.agent.server.api import WorkerSpec
    from torch.distributed.elastic.agent.server.local_elastic_agent import LocalElasticAgent
    from torch.distributed.elastic.multiprocessing import Std
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.elastic.rendezvous import RendezvousConnectionError, RendezvousParameters
    from torch.distributed.elastic.rendezvous import registry

    params = RendezvousParameters(
        backend="c10d", endpoint=endpoint, run_id=args.run_id,
        min_nodes=args.min_nodes, max_nodes=args.max_nodes,
        is_host=False,  # the store lives in caravan.rendezvous, never in an agent
        read_timeout=20,  # also bounds connecting to a store that has gone
        join_timeout=int(args.join_timeout), last_call_timeout=max(1, int(args.last_call)),
    )
    unique_node_descs()
    handler = registry.get_rendezvous_handler(params)
    spec = WorkerSpec(
        role="trainer", local_world_size=args.nproc_per_node,
        entrypoint=args.python, args=("-u", args.script, *args.script_args),
        rdzv_handler=handler, max_restarts=args.max_restarts, monitor_interval=args.monitor_interval,
        master_addr=args.master_addr or None,
        redirects=Std.NONE, tee=Std.NONE,  # explicit: torchrun's parsing of these fails on Python 3.11
    )
    agent = LocalElasticAgent(spec=spec, start_method="spawn", log_dir=os.path.join(launch_dir, "agent"))
    try:
        result = agent.run()
    except RendezvousConnectionError:
        # The store has gone: stop this handler's keep-alive thread (torch
        # 1.13 has no public call for it; shutdown() would try to close the
        # rendezvous), so it does not outlive the handler.
        stop = getattr(handler, "_stop_heartbeats", None)
        if stop is not None:
            stop()
        raise
    if result.is_failed():
        raise ChildFailedError(name=os.path.basename(args.script), failures=result.failures)
    handler.shutdown()  # close the rendezvous: training is over
    return handler


def mark_done(endpoint):
    """Tells the store's host that training finished."""
    from torch.distributed import TCPStore

    host, _, port = endpoint.rpartition(":")
    try:
        TCPStore(host, int(port), is_master=False, timeout=timedelta(seconds=10)).add(DONE_KEY, 1)
    except (RuntimeError, ValueError) as e:
        log(f"could not tell the rendezvous host that training is done: {e}")


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    alloc_dir = os.environ.get("NOMAD_ALLOC_DIR", "")
    launch_dir = os.environ.get(ENV_LAUNCH_DIR) or (
        os.path.join(alloc_dir, "caravan-launch", os.environ.get("NOMAD_TASK_NAME", "task")) if alloc_dir
        else tempfile.mkdtemp(prefix="caravan-launch-"))
    live_dir = os.environ.get(ENV_LIVE_DIR) or os.path.join(launch_dir, "live")
    os.makedirs(live_dir, exist_ok=True)
    os.environ[ENV_LAUNCH_DIR], os.environ[ENV_LIVE_DIR] = launch_dir, live_dir
    fwd = Forwarder(launch_dir, live_dir)
    fwd.install()

    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.elastic.rendezvous import RendezvousClosedError, RendezvousError

    def on_stop(signum, _frame):
        raise SignalException(f"signal {signum}", sigval=signal.Signals(signum))

    for s in (signal.SIGTERM, signal.SIGINT):
        signal.signal(s, on_stop)  # until the agent installs its own (same behaviour)
    while True:
        try:
            endpoint = wait_endpoint(args)
            log(f"rendezvous {args.run_id} at {endpoint}, {args.min_nodes}..{args.max_nodes} allocations "
                f"of {args.nproc_per_node} workers")
            run_agent(args, endpoint, launch_dir)
        except SignalException as e:
            log(f"stopped by {e.sigval.name}")
            if args.checkpoint_on_stop:
                fwd.checkpoint_on_stop()
            return 128 + int(e.sigval)
        except ChildFailedError as e:
            log(f"workers failed: {e}")
            return 1
        except RendezvousClosedError:
            log("the rendezvous is closed: the group finished (or failed) without this allocation")
            return 0
        except (RendezvousError, RuntimeError, TimeoutError) as e:
            log(f"lost the rendezvous store at {endpoint} ({type(e).__name__}: {e}); waiting to rendezvous again")
            time.sleep(2)
            continue
        mark_done(endpoint)
        log("training finished")
        return 0


if __name__ == "__main__":
    sys.exit(main())
