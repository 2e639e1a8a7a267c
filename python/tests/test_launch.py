import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest
from contextlib import redirect_stderr

from caravan import _warn
from caravan.checkpoint import MARKER, atomic_write, read_marker, write_state_info
from caravan.elastic import pid_file
from caravan.launch import Forwarder, child_pid, node_addr, parse_args


class LaunchTest(unittest.TestCase):
    def setUp(self):
        _warn._reset()
        self.tmp = tempfile.TemporaryDirectory()
        self.ckpt = os.path.join(self.tmp.name, "ckpt")
        self.live = os.path.join(self.tmp.name, "live")
        os.makedirs(self.ckpt)
        os.makedirs(self.live)
        self.old_env = dict(os.environ)
        os.environ["CARAVAN_CHECKPOINT_DIR"] = self.ckpt
        os.environ["CARAVAN_CHECKPOINT_SEQUENCE"] = "3"

    def tearDown(self):
        os.environ.clear()
        os.environ.update(self.old_env)
        self.tmp.cleanup()

    def test_parse_args(self):
        a = parse_args(["--nnodes", "2:5", "--rdzv-endpoint", "h:1", "train.py", "--steps", "3"])
        self.assertEqual((a.min_nodes, a.max_nodes, a.script, a.script_args), (2, 5, "train.py", ["--steps", "3"]))
        self.assertEqual(parse_args(["--nnodes", "3", "--rdzv-endpoint", "h:1", "t.py"]).max_nodes, 3)
        for bad in (["--nnodes", "3:1", "--rdzv-endpoint", "h:1", "t.py"], ["--nnodes", "x", "--rdzv-endpoint", "h:1", "t.py"],
                    ["t.py"]):
            with redirect_stderr(io.StringIO()) as err, self.assertRaises(SystemExit):
                parse_args(bad)
            self.assertTrue("--nnodes" in err.getvalue() or "--rdzv-endpoint" in err.getvalue(), err.getvalue())

    def test_child_pid_only_for_live_children(self):
        path = os.path.join(self.tmp.name, "worker-0.pid")
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
        try:
            with open(path, "w") as f:
                f.write(str(child.pid))
            self.assertEqual(child_pid(path), child.pid)
            with open(path, "w") as f:
                f.write(str(os.getppid()))  # alive, not our child
            self.assertIsNone(child_pid(path))
        finally:
            child.kill()
            child.wait()
        self.assertIsNone(child_pid(os.path.join(self.tmp.name, "missing.pid")))
        zombie = subprocess.Popen([sys.executable, "-c", "pass"])
        with open(path, "w") as f:
            f.write(str(zombie.pid))
        deadline = time.time() + 30
        while child_pid(path) is not None and time.time() < deadline:
            time.sleep(0.05)  # exited but not reaped: a zombie
        self.assertIsNone(child_pid(path))
        zombie.wait()

    def test_answers_with_skip_without_worker_or_newer_snapshot(self):
        f = Forwarder(self.tmp.name, self.live)
        with redirect_stderr(io.StringIO()):
            f.on_signal(signal.SIGUSR1, None)
        self.assertEqual(read_marker(self.ckpt), {"sequence": 4, "skip": True})

    def test_answers_with_newer_live_snapshot(self):
        write_state_info(self.ckpt, 10, [])
        atomic_write(os.path.join(self.live, "state.pt"), b"snapshot")
        write_state_info(self.live, 25, ["state.pt"])
        f = Forwarder(self.tmp.name, self.live)
        with redirect_stderr(io.StringIO()):
            f.on_signal(signal.SIGUSR1, None)
        m = read_marker(self.ckpt)
        self.assertEqual((m["sequence"], m["step"], m.get("skip")), (4, 25, None))

    def test_checkpoint_on_stop_commits_live_snapshot_above_restored_marker(self):
        # A container's restore task restores the directory with its marker
        # and no $CARAVAN_CHECKPOINT_SEQUENCE: the marker is the floor.
        del os.environ["CARAVAN_CHECKPOINT_SEQUENCE"]
        write_state_info(self.ckpt, 10, [])
        atomic_write(os.path.join(self.ckpt, MARKER), json.dumps({"sequence": 9, "step": 10}))
        atomic_write(os.path.join(self.live, "state.pt"), b"snapshot")
        write_state_info(self.live, 25, ["state.pt"])
        self.assertTrue(parse_args(["--checkpoint-on-stop", "--rdzv-endpoint", "h:1", "t.py"]).checkpoint_on_stop)
        with redirect_stderr(io.StringIO()) as err:
            seq = Forwarder(self.tmp.name, self.live).checkpoint_on_stop()
        m = read_marker(self.ckpt)
        self.assertEqual((seq, m["step"], m.get("skip")), (10, 25, None))
        with open(os.path.join(self.ckpt, "state.pt"), "rb") as f:
            self.assertEqual(f.read(), b"snapshot")
        self.assertIn("stop checkpoint: step 25, sequence 10", err.getvalue())
        with redirect_stderr(io.StringIO()):  # nothing newer since: a skip marker
            Forwarder(self.tmp.name, self.live).checkpoint_on_stop()
        self.assertEqual(read_marker(self.ckpt), {"sequence": 11, "skip": True})

    def test_node_addr_names_the_allocation(self):
        # Two containers on one host network: same FQDN, both pid 1.
        a, b = node_addr({"NOMAD_ALLOC_ID": "a1"}), node_addr({"NOMAD_ALLOC_ID": "b2"})
        self.assertNotEqual(a, b)
        self.assertTrue(a.endswith("/a1"), a)
        self.assertNotIn("/", node_addr({}))

    def test_forwards_to_ready_worker(self):
        script = ("import signal, sys, time\n"
                  "got = []\n"
                  "signal.signal(signal.SIGUSR1, lambda s, f: got.append(s))\n"
                  "print('ready', flush=True)\n"
                  "while not got: time.sleep(0.01)\n"
                  "sys.exit(7)\n")
        child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
        try:
            self.assertEqual(child.stdout.readline().strip(), b"ready")
            with open(pid_file(self.tmp.name, 0), "w") as f:
                f.write(str(child.pid))
            with redirect_stderr(io.StringIO()) as err:
                Forwarder(self.tmp.name, self.live).on_signal(signal.SIGUSR1, None)
            self.assertEqual(child.wait(timeout=20), 7)
            self.assertIn("forwarded", err.getvalue())
            self.assertIsNone(read_marker(self.ckpt), "the worker answers, not the launcher")
        finally:
            child.kill()
            child.wait()


if __name__ == "__main__":
    unittest.main()
