"""Progress reports to the caravan planner (standard library only).

The wire is the planner's ``POST <base>/v1/progress`` (INTERFACES.md section 1,
Go package github.com/caravan-nomad/caravan/progress): a JSON sample with
``step``, ``loss`` and ``samples_per_sec`` (required) and optional fields,
``Authorization: Bearer <the task's Nomad workload identity>``.

Where to send it: ``$CARAVAN_PLANNER_URL`` (a base URL), the file named by
``$CARAVAN_PLANNER_URLS_FILE`` (one base URL a line, re-read at each report),
or the deprecated ``$CARAVAN_PROGRESS_URL``. The token, in order:
``$NOMAD_SECRETS_DIR/nomad_planner.jwt``, ``$NOMAD_TOKEN_planner``,
``$NOMAD_TOKEN``, ``$NOMAD_SECRETS_DIR/nomad_token``.

Reports are sent by a background thread (the newest sample wins), so a slow
or absent planner never slows or stops training; each kind of failure is
logged once.
"""

import json
import math
import os
import threading
import urllib.error
import urllib.request

from caravan._warn import warn_once

PATH = "/v1/progress"
ENV_URL = "CARAVAN_PLANNER_URL"
ENV_URLS_FILE = "CARAVAN_PLANNER_URLS_FILE"
ENV_URL_DEPRECATED = "CARAVAN_PROGRESS_URL"
ENV_TOKEN = "NOMAD_TOKEN_planner"
ENV_DEFAULT_TOKEN = "NOMAD_TOKEN"
ENV_SECRETS_DIR = "NOMAD_SECRETS_DIR"
TOKEN_FILE = "nomad_planner.jwt"
DEFAULT_TOKEN_FILE = "nomad_token"

# Plausibility bounds, as the Go package's Sample.Validate.
MAX_STEP = 1_000_000_000_000_000
MAX_LOSS = 1e12
# The planner's convergence model needs a positive loss: 0 and -0 are refused.
MIN_LOSS = 1e-30
MAX_SAMPLES_PER_SEC = 1e9
MAX_STEPS_PER_SEC = 1e6
MAX_BATCH_SIZE = 1 << 30
MAX_WORKERS = 100_000
MAX_GRAD_STAT = 1e30
# 16 TiB, as the Go package's MaxGPUMemoryPeakBytes.
MAX_GPU_MEMORY_PEAK_BYTES = 1 << 44

_FLOATS = {
    "loss": MAX_LOSS,
    "samples_per_sec": MAX_SAMPLES_PER_SEC,
    "steps_per_sec": MAX_STEPS_PER_SEC,
    "grad_sqr": MAX_GRAD_STAT,
    "grad_var": MAX_GRAD_STAT,
}
_INTS = {
    "step": MAX_STEP,
    "steps_total": MAX_STEP,
    "batch_size": MAX_BATCH_SIZE,
    "workers": MAX_WORKERS,
    "ps": MAX_WORKERS,
    "gpu_memory_peak_bytes": MAX_GPU_MEMORY_PEAK_BYTES,
}
_BOOLS = ("checkpointed", "done", "gpu_out_of_memory")
REQUIRED = ("step", "loss", "samples_per_sec")


def sample(step, loss, samples_per_sec, **optional):
    """Builds and validates a sample; raises ValueError naming the field."""
    s = {"step": step, "loss": loss, "samples_per_sec": samples_per_sec}
    s.update({k: v for k, v in optional.items() if v is not None})
    validate(s)
    return s


def gpu_memory_peak_bytes():
    """The most GPU memory this process has allocated through torch
    (``torch.cuda.max_memory_allocated``), or None without torch or CUDA."""
    try:
        import torch
    except ImportError:
        return None
    try:
        if not torch.cuda.is_available():
            return None
        return int(torch.cuda.max_memory_allocated())
    except (RuntimeError, AssertionError):
        return None


def validate(s):
    """Raises ValueError naming the first bad field of sample s."""
    for field in REQUIRED:
        if field not in s:
            raise ValueError(f"progress sample: {field}: required")
    for field, value in s.items():
        if field in _INTS:
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _INTS[field]:
                raise ValueError(f"progress sample: {field}: must be an integer in [0, {_INTS[field]}], got {value!r}")
        elif field == "loss":
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            if not ok or math.isnan(value) or not MIN_LOSS <= value <= MAX_LOSS:
                raise ValueError(f"progress sample: loss: must be a finite number in [{MIN_LOSS:g}, {MAX_LOSS:g}] "
                                 f"(the convergence model needs a positive loss), got {value!r}")
        elif field in _FLOATS:
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            if not ok or math.isnan(value) or not 0 <= value <= _FLOATS[field]:
                raise ValueError(f"progress sample: {field}: must be a finite number in [0, {_FLOATS[field]:g}], "
                                 f"got {value!r}")
        elif field in _BOOLS:
            if not isinstance(value, bool):
                raise ValueError(f"progress sample: {field}: must be true or false, got {value!r}")
        else:
            raise ValueError(f"progress sample: {field}: unknown field")
    if s.get("gpu_out_of_memory") and s.get("done"):
        raise ValueError("progress sample: gpu_out_of_memory: a report cannot say both that training is done "
                         "and that it ran out of GPU memory")


def is_gpu_out_of_memory(exc):
    """Whether exc is torch's GPU out-of-memory error: ``torch.cuda.OutOfMemoryError``
    (torch >= 1.13, matched by class so that torch need not be imported), or
    the RuntimeError older torch raised, whose message starts ``CUDA out of memory``."""
    for cls in type(exc).__mro__:
        if cls.__name__ == "OutOfMemoryError" and cls.__module__.split(".")[0] == "torch":
            return True
    return isinstance(exc, RuntimeError) and "CUDA out of memory" in str(exc)


def grad_stats_from_norms(local_sqr, total_sqr, count):
    """Pollux's gradient statistics (AdaptDL's gradient noise scale) from norms.

    ``count`` micro-batches (or replicas) of equal size each computed a mean
    gradient m_k; ``local_sqr`` is the mean of their squared norms
    (mean_k ||m_k||^2) and ``total_sqr`` the squared norm of their average
    (the gradient the optimizer applies). Returns ``(grad_sqr, grad_var)``:
    AdaptDL's unbiased estimate of the true gradient's squared norm, and the
    variance of the averaged gradient at the step's batch size, both clamped
    at 0, ready for ``report(..., grad_sqr=, grad_var=, batch_size=)``.
    Returns ``(None, None)`` for fewer than two micro-batches (no estimate),
    which ``report`` then leaves out.
    """
    if count < 2:
        return None, None
    for name, v in (("local_sqr", local_sqr), ("total_sqr", total_sqr)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v) or math.isinf(v) or v < 0:
            raise ValueError(f"grad_stats: {name}: must be a finite number >= 0, got {v!r}")
    grad_sqr = (count * total_sqr - local_sqr) / (count - 1)
    grad_var = (local_sqr - total_sqr) / (count - 1)
    return max(grad_sqr, 0.0), max(grad_var, 0.0)


def grad_stats(mean_grads):
    """``grad_stats_from_norms`` from the micro-batches' flat mean gradients.

    ``mean_grads`` is a list of equal-length sequences of floats, one per
    equal-sized micro-batch (e.g. ``p.grad`` flattened per micro-batch with
    gradient accumulation, or per replica before the all-reduce).
    """
    grads = [list(g) for g in mean_grads]
    if len(grads) < 2:
        return None, None
    width = len(grads[0])
    if any(len(g) != width for g in grads):
        raise ValueError("grad_stats: mean_grads: every gradient must have the same length")
    k = len(grads)
    local = sum(sum(x * x for x in g) for g in grads) / k
    total = sum((sum(g[i] for g in grads) / k) ** 2 for i in range(width))
    return grad_stats_from_norms(local, total, k)


def urls_from_env(env=None):
    """Every planner base URL the environment names (file first)."""
    env = os.environ if env is None else env
    urls = []
    path = env.get(ENV_URLS_FILE, "")
    if path:
        try:
            with open(path, encoding="utf-8") as f:
                for line in f:
                    line = line.strip()
                    if line and not line.startswith("#") and line not in urls:
                        urls.append(line)
        except OSError:
            pass  # the template may not be rendered yet
    url = (env.get(ENV_URL) or "").strip() or (env.get(ENV_URL_DEPRECATED) or "").strip()
    if url and url not in urls:
        urls.append(url)
    return urls


def token_from_env(env=None):
    """The task's workload identity, or "" when there is none."""
    env = os.environ if env is None else env
    secrets = env.get(ENV_SECRETS_DIR, "")

    def read(name):
        if not secrets:
            return ""
        try:
            with open(os.path.join(secrets, name), encoding="utf-8") as f:
                return f.read().strip()
        except OSError:
            return ""

    return (read(TOKEN_FILE) or (env.get(ENV_TOKEN) or "").strip()
            or (env.get(ENV_DEFAULT_TOKEN) or "").strip() or read(DEFAULT_TOKEN_FILE))


def progress_url(base):
    return base if base.endswith(PATH) else base.rstrip("/") + PATH


def post(url, token, s, timeout=5.0):
    """Sends one validated sample to one planner; raises OSError (HTTPError
    for a refusal) on failure."""
    req = urllib.request.Request(progress_url(url), data=json.dumps(s).encode(), method="POST", headers={
        "Content-Type": "application/json",
        "Authorization": "Bearer " + token,
    })
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        resp.read(64 << 10)


class Reporter:
    """Reports progress from a background thread.

    ``report(step, loss, samples_per_sec, **optional)`` adds
    ``gpu_memory_peak_bytes`` from torch when CUDA is available (omitted
    otherwise, or pass it yourself), validates the sample
    and hands it to the thread; it returns False (and warns once) for a bad
    sample or when no planner address or identity is set, True otherwise.
    Reports never raise and never block training.
    """

    def __init__(self, env=None, timeout=5.0):
        self._env = os.environ if env is None else env
        self._timeout = timeout
        self._cond = threading.Condition()
        self._pending = None
        self._closed = False
        self._thread = None
        self.sent = 0  # samples every planner accepted
        self.failed = 0

    def report(self, step, loss, samples_per_sec, **optional):
        if "gpu_memory_peak_bytes" not in optional:
            optional["gpu_memory_peak_bytes"] = gpu_memory_peak_bytes()
        try:
            s = sample(step, loss, samples_per_sec, **optional)
        except ValueError as e:
            warn_once(("progress", "invalid"), f"not reporting progress: {e}")
            return False
        if not urls_from_env(self._env):
            warn_once(("progress", "url"), f"no planner address (${ENV_URL} or ${ENV_URLS_FILE}): "
                      "progress is not reported")
            return False
        with self._cond:
            self._pending = s
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="caravan-progress", daemon=True)
                self._thread.start()
            self._cond.notify()
        return True

    def report_oom(self, step, loss, samples_per_sec, timeout=5.0, **optional):
        """Reports that this task is about to exit because its GPU ran out of
        memory (``gpu_out_of_memory``, with the peak GPU memory when torch has
        it), and waits up to timeout for the report to go out: call it just
        before exiting on torch's OutOfMemoryError (``is_gpu_out_of_memory``).
        The planner then counts the failure as out of GPU memory, not as a user
        error, and grows the job's GPU shares (planner/POLICY.md). Returns what
        ``report`` returns."""
        optional["gpu_out_of_memory"] = True
        optional.pop("done", None)
        ok = self.report(step, loss, samples_per_sec, **optional)
        self.close(timeout)
        return ok

    def close(self, timeout=5.0):
        """Sends the last pending sample (bounded by timeout) and stops."""
        with self._cond:
            self._closed = True
            self._cond.notify()
            thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def _run(self):
        while True:
            with self._cond:
                while self._pending is None and not self._closed:
                    self._cond.wait()
                s, self._pending = self._pending, None
                if s is None:
                    return
            self._send(s)

    def _send(self, s):
        token = token_from_env(self._env)
        if not token:
            warn_once(("progress", "token"), "no workload identity (give the task an identity block named "
                      "\"planner\"): progress is not reported")
            self.failed += 1
            return
        ok = True
        for url in urls_from_env(self._env):
            try:
                post(url, token, s, self._timeout)
            except urllib.error.HTTPError as e:
                ok = False
                warn_once(("progress", url, e.code), f"planner {url} refused progress: HTTP {e.code}: "
                          f"{e.read(4096).decode(errors='replace').strip()}")
            except (OSError, ValueError) as e:
                ok = False
                warn_once(("progress", url, "unreachable"), f"planner {url} unreachable ({e}); training goes on")
        if ok:
            self.sent += 1
        else:
            self.failed += 1
