import os
import signal
import tempfile
import unittest

from caravan import _warn
from caravan.checkpoint import Checkpointer, read_marker, state_step

try:
    import torch
except ImportError:  # the core is tested without torch; these need it
    torch = None


@unittest.skipIf(torch is None, "torch is not installed (Debian: python3-torch)")
class PyTorchTest(unittest.TestCase):
    def setUp(self):
        _warn._reset()
        self.tmp = tempfile.TemporaryDirectory()
        self.env = {"CARAVAN_CHECKPOINT_DIR": self.tmp.name}
        self.old = signal.getsignal(signal.SIGUSR1)

    def tearDown(self):
        signal.signal(signal.SIGUSR1, self.old)
        for s in (signal.SIGTERM, signal.SIGINT):
            signal.signal(s, signal.SIG_DFL if s == signal.SIGTERM else signal.default_int_handler)
        self.tmp.cleanup()

    def model(self, seed):
        torch.manual_seed(seed)
        m = torch.nn.Linear(4, 2)
        opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
        m(torch.ones(3, 4)).sum().backward()
        opt.step()
        return m, opt

    def test_save_load_roundtrip(self):
        import caravan.pytorch as cpt
        ck = Checkpointer(self.env, install=False)
        m, opt = self.model(1)
        ck.request()
        self.assertEqual(cpt.serve(ck, 42, m, opt, rank=0, local_rank=0), "saved")
        self.assertEqual(read_marker(ck.directory)["step"], 42)
        self.assertEqual(state_step(ck.directory), 42)
        m2, opt2 = self.model(2)
        self.assertEqual(cpt.load(ck.directory, m2, opt2), 42)
        for a, b in zip(m.state_dict().values(), m2.state_dict().values()):
            self.assertTrue(torch.equal(a, b))
        self.assertEqual(opt.state_dict()["state"][0]["momentum_buffer"].tolist(),
                         opt2.state_dict()["state"][0]["momentum_buffer"].tolist())
        self.assertIsNone(cpt.serve(ck, 43, m, opt), "nothing pending")

    def test_other_ranks_skip(self):
        import caravan.pytorch as cpt
        ck = Checkpointer(self.env, install=False)
        m, opt = self.model(1)
        ck.request()
        self.assertEqual(cpt.serve(ck, 5, m, opt, rank=3, local_rank=0), "skipped")
        self.assertEqual(read_marker(ck.directory), {"sequence": 1, "skip": True})
        self.assertFalse(os.path.exists(os.path.join(ck.directory, "state.pt")))
        ck.request()
        self.assertEqual(cpt.serve(ck, 5, m, opt, rank=3, local_rank=1), "skipped")
        self.assertEqual(read_marker(ck.directory)["sequence"], 1, "only local rank 0 writes the marker")
        self.assertFalse(ck.requested)

    def test_load_without_state(self):
        import caravan.pytorch as cpt
        m, opt = self.model(1)
        self.assertIsNone(cpt.load(self.tmp.name, m, opt))
        self.assertIsNone(cpt.load("", m, opt))


if __name__ == "__main__":
    unittest.main()
