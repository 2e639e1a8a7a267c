import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

from caravan.checkpoint import read_marker

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.dirname(HERE)

# A training loop as python/README.md writes it: each step is a slow,
# uninterruptible piece of work (time.sleep resumes after a signal handler,
# PEP 475), the checkpoint and the stop are served between two steps.
SCRIPT = r"""
import sys, time, caravan
ckpt = caravan.Checkpointer()
step = ckpt.restored_step() or 0
while True:
    if ckpt.requested:
        ckpt.commit(step)
        print("checkpoint", step, flush=True)
    if ckpt.stop_requested:
        print("stopping at", step, flush=True)
        sys.exit(ckpt.stop_exit_code)
    print("begin", step, flush=True)
    time.sleep(0.3)
    step += 1
    print("end", step, flush=True)
"""


class StopTest(unittest.TestCase):
    """A stop signal mid-step: the step finishes, the process exits itself."""

    def run_until_stopped(self, ckpt_signal):
        with tempfile.TemporaryDirectory() as d:
            env = dict(os.environ, PYTHONPATH=PYTHON_DIR, CARAVAN_CHECKPOINT_DIR=d,
                       CARAVAN_CHECKPOINT_SIGNAL=ckpt_signal)
            p = subprocess.Popen([sys.executable, "-u", "-c", SCRIPT], env=env, stdout=subprocess.PIPE, text=True)
            lines = []
            try:
                deadline = time.monotonic() + 30
                while time.monotonic() < deadline:
                    line = p.stdout.readline()
                    lines.append(line.strip())
                    if line.startswith("begin 1"):
                        break
                else:
                    self.fail(f"no second step in {lines}")
                p.send_signal(signal.SIGTERM)  # mid-step: the step sleeps 0.3 s
                out, _ = p.communicate(timeout=30)
            finally:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            lines += out.split("\n")
            try:
                marker = read_marker(d)
            except FileNotFoundError:
                marker = None
            return p.returncode, lines, marker

    def test_sigterm_style_checkpoint_finishes_step_and_exits(self):
        code, lines, marker = self.run_until_stopped("SIGTERM")
        self.assertEqual(code, 143, lines)
        self.assertIn("end 2", lines, "the step in progress finished")
        self.assertNotIn("begin 2", lines, "no step began after the stop")
        self.assertIn("checkpoint 2", lines)
        self.assertIn("stopping at 2", lines)
        self.assertEqual(marker["step"], 2)
        self.assertEqual(marker["sequence"], 1)

    def test_stop_without_checkpoint_signal_finishes_step(self):
        code, lines, marker = self.run_until_stopped("SIGUSR1")
        self.assertEqual(code, 143, lines)
        self.assertIn("end 2", lines)
        self.assertNotIn("begin 2", lines)
        self.assertIn("stopping at 2", lines)
        self.assertIsNone(marker, "a plain stop writes no checkpoint (the driver asked for one before it)")


if __name__ == "__main__":
    unittest.main()
