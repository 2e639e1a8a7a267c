import io
import json
import os
import signal
import sys
import tempfile
import unittest
from contextlib import redirect_stderr

from caravan import _warn
from caravan.checkpoint import (MARKER, MAX_STEP, STATE_INFO, Checkpointer, atomic_write, copy_state, read_marker,
                                restore_info, state_step, write_state_info)


class CheckpointTest(unittest.TestCase):
    def setUp(self):
        _warn._reset()
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        self.env = {"CARAVAN_CHECKPOINT_DIR": self.dir, "CARAVAN_CHECKPOINT_SIGNAL": "SIGUSR1"}
        self.saved = {s: signal.getsignal(s) for s in (signal.SIGUSR1, signal.SIGUSR2, signal.SIGTERM, signal.SIGINT)}

    def tearDown(self):
        for s, h in self.saved.items():
            signal.signal(s, h)
        self.tmp.cleanup()

    def test_restore_info(self):
        env = dict(self.env, CARAVAN_CHECKPOINT_GENERATION="4", CARAVAN_CHECKPOINT_SEQUENCE="9",
                   CARAVAN_CHECKPOINT_STEP="1200", CARAVAN_CHECKPOINT_RESTORED_FROM="client1")
        r = restore_info(env)
        self.assertEqual((r.directory, r.generation, r.sequence, r.step, r.restored_from),
                         (self.dir, 4, 9, 1200, "client1"))
        self.assertTrue(r.restored)
        self.assertFalse(restore_info({}).restored)

    def test_commit_refuses_step_out_of_bounds(self):
        ck = Checkpointer(self.env)
        for step in (-1, MAX_STEP + 1, 2**64 - 1):
            with self.assertRaisesRegex(ValueError, "step: "):
                ck.commit(step)
        self.assertEqual(os.listdir(self.dir), [], "nothing written")
        self.assertEqual(ck.commit(MAX_STEP), 1)

    def test_malformed_variable_warns_once_and_uses_zero(self):
        err = io.StringIO()
        with redirect_stderr(err):
            r = restore_info({"CARAVAN_CHECKPOINT_SEQUENCE": "x"})
            restore_info({"CARAVAN_CHECKPOINT_SEQUENCE": "x"})
        self.assertEqual(r.sequence, 0)
        self.assertEqual(err.getvalue().count("CARAVAN_CHECKPOINT_SEQUENCE"), 1)

    def test_signal_requests_and_commit_writes_marker_above_floor(self):
        ck = Checkpointer(dict(self.env, CARAVAN_CHECKPOINT_SEQUENCE="5"))
        self.assertFalse(ck.requested)
        os.kill(os.getpid(), signal.SIGUSR1)
        self.assertTrue(ck.requested)
        self.assertFalse(ck.stop_requested)
        ck.write("w.bin", b"abc")
        seq = ck.commit(12, meta={"loss": 0.5}, files=["w.bin"])
        self.assertEqual(seq, 6)
        self.assertFalse(ck.requested)
        self.assertEqual(read_marker(self.dir), {"sequence": 6, "step": 12, "meta": {"loss": "0.5"}})
        self.assertEqual(state_step(self.dir), 12)
        self.assertEqual(ck.restored_step(), 12)
        self.assertEqual(ck.commit(13), 7)
        self.assertEqual(sorted(os.listdir(self.dir)), sorted([MARKER, STATE_INFO, "w.bin"]))

    def test_sequence_follows_marker_in_directory(self):
        atomic_write(os.path.join(self.dir, MARKER), json.dumps({"sequence": 41, "step": 3}))
        ck = Checkpointer(self.env, install=False)
        self.assertEqual(ck.restored_step(), 3)
        self.assertEqual(ck.skip(), 42)
        self.assertEqual(read_marker(self.dir), {"sequence": 42, "skip": True})
        self.assertIsNone(ck.restored_step(), "a skip marker without a state record holds no known state")

    def test_skip_marker_keeps_state_step(self):
        ck = Checkpointer(self.env, install=False)
        write_state_info(self.dir, 77, [])
        ck.skip()
        self.assertEqual(ck.restored_step(), 77)

    def test_stop_signals(self):
        ck = Checkpointer(self.env)
        os.kill(os.getpid(), signal.SIGTERM)
        self.assertTrue(ck.stop_requested)
        self.assertFalse(ck.requested)
        self.assertEqual(ck.stop_signal, signal.SIGTERM)
        self.assertEqual(ck.stop_exit_code, 143)

    def test_no_stop_exit_code_zero(self):
        self.assertEqual(Checkpointer(self.env).stop_exit_code, 0)

    def test_sigterm_style_checkpoint_signal_asks_for_both(self):
        ck = Checkpointer(dict(self.env, CARAVAN_CHECKPOINT_SIGNAL="SIGTERM"))
        os.kill(os.getpid(), signal.SIGTERM)
        self.assertTrue(ck.requested)
        self.assertTrue(ck.stop_requested)

    def test_missing_directory_never_stops_training(self):
        err = io.StringIO()
        with redirect_stderr(err):
            ck = Checkpointer({})
            ck2 = Checkpointer({})
        self.assertFalse(ck.enabled)
        self.assertEqual(err.getvalue().count("CARAVAN_CHECKPOINT_DIR"), 1)
        os.kill(os.getpid(), signal.SIGUSR1)  # handled, not fatal
        self.assertTrue(ck2.requested)
        self.assertIsNone(ck2.write("x", b"1"))
        self.assertIsNone(ck2.commit(1))
        self.assertIsNone(ck2.skip())
        self.assertFalse(ck2.requested)

    def test_bad_signal_name_falls_back(self):
        err = io.StringIO()
        with redirect_stderr(err):
            ck = Checkpointer(dict(self.env, CARAVAN_CHECKPOINT_SIGNAL="SIGFOO"), install=False)
        self.assertEqual(ck.signal, signal.SIGUSR1)
        self.assertIn("SIGFOO", err.getvalue())

    def test_atomic_write_leaves_no_temporary_on_failure(self):
        path = os.path.join(self.dir, "f")
        atomic_write(path, b"old")

        def boom(f):
            f.write(b"partial")
            raise RuntimeError("disk full")

        with self.assertRaises(RuntimeError):
            atomic_write(path, boom)
        with open(path, "rb") as f:
            self.assertEqual(f.read(), b"old")
        self.assertEqual(os.listdir(self.dir), ["f"])

    def test_commit_copy_promotes_newer_state_only(self):
        with tempfile.TemporaryDirectory() as live:
            atomic_write(os.path.join(live, "state.pt"), b"live")
            write_state_info(live, 50, ["state.pt"])
            ck = Checkpointer(self.env, install=False)
            seq = ck.commit_copy(live)
            self.assertEqual(read_marker(self.dir)["step"], 50)
            with open(os.path.join(self.dir, "state.pt"), "rb") as f:
                self.assertEqual(f.read(), b"live")
            self.assertEqual(ck.commit_copy(live), seq + 1)
            self.assertTrue(read_marker(self.dir)["skip"], "nothing newer: a skip marker")

    def test_copy_state_refuses_paths(self):
        with tempfile.TemporaryDirectory() as live:
            atomic_write(os.path.join(live, STATE_INFO), json.dumps({"step": 1, "files": ["../x"]}))
            with self.assertRaisesRegex(ValueError, "files: bad name"):
                copy_state(live, self.dir)


if __name__ == "__main__":
    unittest.main()
