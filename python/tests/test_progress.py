import http.server
import io
import json
import os
import sys
import tempfile
import types
import threading
import unittest
from contextlib import redirect_stderr

from caravan import _warn
from caravan.progress import (Reporter, gpu_memory_peak_bytes, grad_stats, grad_stats_from_norms,
                              is_gpu_out_of_memory, sample, token_from_env, urls_from_env)


class Planner(http.server.BaseHTTPRequestHandler):
    got = []
    status = 200

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        Planner.got.append((self.path, self.headers["Authorization"], self.headers["Content-Type"], json.loads(body)))
        self.send_response(Planner.status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"error": "step: no"}' if Planner.status != 200 else b"{}")

    def log_message(self, *_):
        pass


class ProgressTest(unittest.TestCase):
    def setUp(self):
        _warn._reset()
        Planner.got, Planner.status = [], 200
        self.srv = http.server.HTTPServer(("127.0.0.1", 0), Planner)
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.srv.server_port}"

    def tearDown(self):
        self.srv.shutdown()
        self.srv.server_close()

    def test_sample_validation_names_field(self):
        self.assertEqual(sample(3, 0.5, 10.0, workers=2, done=None),
                         {"step": 3, "loss": 0.5, "samples_per_sec": 10.0, "workers": 2})
        for kwargs, field in [
            (dict(step=-1, loss=1.0, samples_per_sec=1.0), "step"),
            (dict(step=1.5, loss=1.0, samples_per_sec=1.0), "step"),
            (dict(step=1, loss=float("nan"), samples_per_sec=1.0), "loss"),
            (dict(step=1, loss=float("inf"), samples_per_sec=1.0), "loss"),
            (dict(step=1, loss=0.0, samples_per_sec=1.0), "loss"),
            (dict(step=1, loss=-0.0, samples_per_sec=1.0), "loss"),
            (dict(step=1, loss=1e-31, samples_per_sec=1.0), "loss"),
            (dict(step=1, loss=1.0, samples_per_sec=-2.0), "samples_per_sec"),
            (dict(step=1, loss=1.0, samples_per_sec=1.0, workers=True), "workers"),
            (dict(step=1, loss=1.0, samples_per_sec=1.0, done="yes"), "done"),
            (dict(step=1, loss=1.0, samples_per_sec=1.0, colour=1), "colour"),
        ]:
            with self.assertRaisesRegex(ValueError, f"progress sample: {field}:"):
                sample(**kwargs)

    def test_env_and_token_order(self):
        with tempfile.TemporaryDirectory() as secrets:
            env = {"NOMAD_SECRETS_DIR": secrets, "NOMAD_TOKEN": "default", "NOMAD_TOKEN_planner": "named"}
            self.assertEqual(token_from_env(env), "named")
            with open(os.path.join(secrets, "nomad_planner.jwt"), "w") as f:
                f.write("file-named\n")
            self.assertEqual(token_from_env(env), "file-named")
            os.unlink(os.path.join(secrets, "nomad_planner.jwt"))
            del env["NOMAD_TOKEN_planner"]
            self.assertEqual(token_from_env(env), "default")
            del env["NOMAD_TOKEN"]
            with open(os.path.join(secrets, "nomad_token"), "w") as f:
                f.write("file-default")
            self.assertEqual(token_from_env(env), "file-default")
            urls = os.path.join(secrets, "urls")
            with open(urls, "w") as f:
                f.write("# planners\nhttp://a:1\n\nhttp://b:2\nhttp://a:1\n")
            self.assertEqual(urls_from_env({"CARAVAN_PLANNER_URLS_FILE": urls, "CARAVAN_PLANNER_URL": "http://c:3"}),
                             ["http://a:1", "http://b:2", "http://c:3"])
        self.assertEqual(urls_from_env({"CARAVAN_PROGRESS_URL": "http://old:1"}), ["http://old:1"])
        self.assertEqual(urls_from_env({"CARAVAN_PLANNER_URLS_FILE": "/nonexistent"}), [])

    def test_report_posts_wire_with_identity(self):
        r = Reporter({"CARAVAN_PLANNER_URL": self.url + "/", "NOMAD_TOKEN_planner": "jwt"})
        self.assertTrue(r.report(100, 0.25, 512.0, workers=2, batch_size=128, checkpointed=True))
        r.close()
        self.assertEqual(r.sent, 1)
        path, auth, ctype, body = Planner.got[0]
        self.assertEqual((path, auth, ctype), ("/v1/progress", "Bearer jwt", "application/json"))
        self.assertEqual(body, {"step": 100, "loss": 0.25, "samples_per_sec": 512.0, "workers": 2,
                                "batch_size": 128, "checkpointed": True})

    def test_report_adds_torch_peak_memory_when_cuda_is_there(self):
        fake = types.ModuleType("torch")
        fake.cuda = types.SimpleNamespace(is_available=lambda: True, max_memory_allocated=lambda: 3 << 30)
        env = {"CARAVAN_PLANNER_URL": self.url, "NOMAD_TOKEN_planner": "jwt"}
        saved = sys.modules.get("torch")
        sys.modules["torch"] = fake
        try:
            self.assertEqual(gpu_memory_peak_bytes(), 3 << 30)
            r = Reporter(env)
            self.assertTrue(r.report(1, 0.5, 10.0))
            r.close()
            fake.cuda.is_available = lambda: False
            self.assertIsNone(gpu_memory_peak_bytes())
            r = Reporter(env)
            self.assertTrue(r.report(2, 0.5, 10.0))
            r.close()
        finally:
            if saved is None:
                del sys.modules["torch"]
            else:
                sys.modules["torch"] = saved
        self.assertEqual(Planner.got[0][3]["gpu_memory_peak_bytes"], 3 << 30)
        self.assertNotIn("gpu_memory_peak_bytes", Planner.got[1][3])

    def test_report_oom_sends_the_flag_before_returning(self):
        env = {"CARAVAN_PLANNER_URL": self.url, "NOMAD_TOKEN_planner": "jwt"}
        r = Reporter(env)
        self.assertTrue(r.report_oom(7, 0.5, 10.0, gpu_memory_peak_bytes=5 << 30, done=True))
        # report_oom waited for the send: the planner has it now.
        self.assertEqual(len(Planner.got), 1)
        got = Planner.got[0][3]
        self.assertIs(got["gpu_out_of_memory"], True)
        self.assertEqual(got["gpu_memory_peak_bytes"], 5 << 30)
        self.assertEqual(got["step"], 7)
        self.assertNotIn("done", got)
        self.assertEqual(r.sent, 1)

    def test_oom_flag_is_validated(self):
        with self.assertRaisesRegex(ValueError, "progress sample: gpu_out_of_memory:"):
            sample(1, 1.0, 1.0, gpu_out_of_memory="yes")
        with self.assertRaisesRegex(ValueError, "progress sample: gpu_out_of_memory: .*done"):
            sample(1, 1.0, 1.0, gpu_out_of_memory=True, done=True)
        self.assertIs(sample(1, 1.0, 1.0, gpu_out_of_memory=True)["gpu_out_of_memory"], True)

    def test_is_gpu_out_of_memory(self):
        torch_oom = type("OutOfMemoryError", (RuntimeError,), {"__module__": "torch.cuda"})
        other_oom = type("OutOfMemoryError", (RuntimeError,), {"__module__": "mylib"})
        self.assertTrue(is_gpu_out_of_memory(torch_oom("CUDA out of memory. Tried to allocate 2.00 GiB")))
        self.assertTrue(is_gpu_out_of_memory(type("Sub", (torch_oom,), {})("x")))
        self.assertTrue(is_gpu_out_of_memory(RuntimeError("CUDA out of memory. Tried to allocate 20.00 MiB")))
        self.assertFalse(is_gpu_out_of_memory(other_oom("x")))
        self.assertFalse(is_gpu_out_of_memory(MemoryError()))
        self.assertFalse(is_gpu_out_of_memory(RuntimeError("shape mismatch")))

    def test_peak_memory_is_bounded(self):
        for bad in (-1, 1 << 45, 1.5, True):
            with self.assertRaisesRegex(ValueError, "progress sample: gpu_memory_peak_bytes:"):
                sample(1, 1.0, 1.0, gpu_memory_peak_bytes=bad)

    def test_missing_config_or_planner_never_raises(self):
        err = io.StringIO()
        with redirect_stderr(err):
            self.assertFalse(Reporter({}).report(1, 1.0, 1.0))
            self.assertFalse(Reporter({}).report(1, 1.0, 1.0))
            self.assertFalse(Reporter({"CARAVAN_PLANNER_URL": self.url}).report(1, float("nan"), 1.0))
            r = Reporter({"CARAVAN_PLANNER_URL": self.url})  # no identity
            self.assertTrue(r.report(1, 1.0, 1.0))
            r.close()
            Planner.status = 400
            r = Reporter({"CARAVAN_PLANNER_URL": self.url, "NOMAD_TOKEN": "t"})
            r.report(1, 1.0, 1.0)
            r.close()
            r = Reporter({"CARAVAN_PLANNER_URL": "http://127.0.0.1:1", "NOMAD_TOKEN": "t"}, timeout=1)
            r.report(1, 1.0, 1.0)
            r.close()
        log = err.getvalue()
        self.assertEqual(log.count("no planner address"), 1, log)
        self.assertIn("progress sample: loss", log)
        self.assertIn("no workload identity", log)
        self.assertIn("HTTP 400", log)
        self.assertIn("unreachable", log)
        self.assertEqual(r.failed, 1)


if __name__ == "__main__":
    unittest.main()


class GradStatsTest(unittest.TestCase):
    def test_adaptdl_estimates(self):
        grads = [[1.0, 2.0], [3.0, 0.0], [0.5, 0.5], [1.5, 3.5]]
        sqr, var = grad_stats(grads)
        k = len(grads)
        local = sum(a * a + b * b for a, b in grads) / k
        mean = [sum(g[0] for g in grads) / k, sum(g[1] for g in grads) / k]
        total = mean[0] ** 2 + mean[1] ** 2
        self.assertAlmostEqual(sqr, (k * total - local) / (k - 1))
        self.assertAlmostEqual(var, (local - total) / (k - 1))
        # Valid sample fields.
        sample(1, 0.5, 10.0, grad_sqr=sqr, grad_var=var, batch_size=64)

    def test_one_micro_batch_has_no_estimate(self):
        self.assertEqual(grad_stats([[1.0, 2.0]]), (None, None))
        self.assertEqual(grad_stats_from_norms(1.0, 1.0, 1), (None, None))

    def test_bad_input_names_the_field(self):
        with self.assertRaisesRegex(ValueError, "local_sqr"):
            grad_stats_from_norms(float("nan"), 1.0, 4)
        with self.assertRaisesRegex(ValueError, "mean_grads"):
            grad_stats([[1.0], [1.0, 2.0]])
