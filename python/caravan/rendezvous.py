"""python3 -m caravan.rendezvous: hosts the c10d rendezvous store of an elastic group.

    python3 -m caravan.rendezvous --host 127.0.0.1 --port 29400

A torch TCPStore server in a process of its own, run as its own Nomad task
group (count = 1) and registered as a Nomad service, so the store outlives
any worker allocation: scaling the workers up or down, draining their nodes
or suspending them never takes the rendezvous away. If this allocation is
lost, Nomad places a new one; the workers' launchers read the new address
from their template and rendezvous again (the new store starts empty, which
the c10d rendezvous treats as a fresh round), continuing from their live
snapshots or the last checkpoint.

It exits 0 when a launcher increments the key ``caravan.done`` (training finished)
or on SIGTERM/SIGINT. Note: torch 1.13's TCPStore listens on every interface
of the host; run it on a network the workers share.
"""

import argparse
import signal
import sys
import time
from datetime import timedelta

DONE_KEY = "caravan.done"


def main(argv=None):
    p = argparse.ArgumentParser(prog="python3 -m caravan.rendezvous", description=__doc__.split("\n")[0])
    p.add_argument("--host", default="127.0.0.1", help="address the store's own client connects to")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--poll", type=float, default=1.0, help="seconds between checks of the done key")
    args = p.parse_args(argv)

    from torch.distributed import TCPStore

    stop = []
    for s in (signal.SIGTERM, signal.SIGINT):
        signal.signal(s, lambda signum, _f: stop.append(signum))
    store = TCPStore(args.host, args.port, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=60))
    print(f"caravan.rendezvous: store listening on port {args.port} (advertised as {args.host}:{args.port})",
          flush=True)
    while not stop:
        if store.add(DONE_KEY, 0) > 0:  # add(key, 0) reads a counter without blocking
            print("caravan.rendezvous: training finished; exiting", flush=True)
            return 0
        time.sleep(args.poll)
    print(f"caravan.rendezvous: stopped by signal {stop[0]}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
