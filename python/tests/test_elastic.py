import os
import socket
import subprocess
import sys
import tempfile
import unittest

from caravan.checkpoint import read_marker, state_step

try:
    import torch
except ImportError:
    torch = None

WORKER = r"""
import os, signal, sys
from caravan.elastic import Elastic
el = Elastic()
import torch
torch.manual_seed(0)
model = torch.nn.Linear(2, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
step = el.restore(model, opt)
print("RESTORED", step, flush=True)
ckpt_at, stop_at = int(sys.argv[1]), int(sys.argv[2])
while step < 50:
    if step == ckpt_at:
        os.kill(os.getpid(), signal.SIGUSR1)
    if step == stop_at:
        os.kill(os.getpid(), signal.SIGTERM)
    el.boundary(step)
    opt.zero_grad()
    model(torch.ones(4, 2)).pow(2).mean().backward()
    opt.step()
    step += 1
print("DONE", step, model.weight.detach().tolist(), flush=True)
el.close()
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@unittest.skipIf(torch is None, "torch is not installed (Debian: python3-torch)")
class ElasticTest(unittest.TestCase):
    """One worker (world size 1, gloo) through checkpoint, stop and restore."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        d = self.tmp.name
        self.ckpt, self.live, self.launch = (os.path.join(d, n) for n in ("ckpt", "live", "launch"))
        for p in (self.ckpt, self.live, self.launch):
            os.makedirs(p)

    def tearDown(self):
        self.tmp.cleanup()

    def run_worker(self, ckpt_at=-1, stop_at=-1):
        env = dict(os.environ, RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(free_port()), CARAVAN_CHECKPOINT_DIR=self.ckpt, CARAVAN_LIVE_DIR=self.live,
                   CARAVAN_LAUNCH_DIR=self.launch,
                   PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        p = subprocess.run([sys.executable, "-c", WORKER, str(ckpt_at), str(stop_at)], env=env,
                           capture_output=True, text=True, timeout=300)
        return p.returncode, p.stdout

    def test_checkpoint_stop_snapshot_and_restore(self):
        code, out = self.run_worker(ckpt_at=10, stop_at=20)
        self.assertEqual(code, 143, out)
        self.assertIn("RESTORED 0", out)
        self.assertIn("checkpoint step=10", out)
        self.assertIn("live snapshot step=20", out)
        self.assertEqual(read_marker(self.ckpt)["step"], 10)
        self.assertEqual(state_step(self.live), 20)
        self.assertEqual(os.listdir(self.launch), [], "the pid file is removed on leaving")

        code, resumed = self.run_worker()
        self.assertEqual(code, 0, resumed)
        self.assertIn("RESTORED 20", resumed, "the live snapshot is fresher than the checkpoint")

        code, straight = self.run_worker_fresh()
        self.assertEqual(code, 0, straight)
        self.assertEqual(resumed.split("DONE")[1], straight.split("DONE")[1], "resumed run equals an uninterrupted one")

        os.unlink(os.path.join(self.live, "caravan-state.json"))
        code, out = self.run_worker()
        self.assertIn("RESTORED 10", out, "without a snapshot, the checkpoint")

    def run_worker_fresh(self):
        with tempfile.TemporaryDirectory() as d:
            old = self.ckpt, self.live
            self.ckpt, self.live = os.path.join(d, "c"), os.path.join(d, "l")
            os.makedirs(self.ckpt)
            try:
                return self.run_worker()
            finally:
                self.ckpt, self.live = old


if __name__ == "__main__":
    unittest.main()
