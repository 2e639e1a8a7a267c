"""caravan's checkpoint protocol for Python training scripts (standard library only).

The caravan task driver (driver/README.md) gives a task:

  CARAVAN_CHECKPOINT_DIR         the checkpoint directory, already holding the
                                 restored checkpoint, if any
  CARAVAN_CHECKPOINT_SIGNAL      the signal that asks for a checkpoint (SIGUSR1)
  CARAVAN_CHECKPOINT_GENERATION  store generation restored (0: fresh)
  CARAVAN_CHECKPOINT_SEQUENCE    marker sequence restored (the floor for new ones)
  CARAVAN_CHECKPOINT_STEP        training step of the restored checkpoint
  CARAVAN_CHECKPOINT_RESTORED_FROM  node that wrote it

On the signal the task writes its files into the directory, then the marker
``caravan-checkpoint.json`` atomically with a sequence above every one seen,
and keeps training. A task that holds no state of its own (a data-parallel
rank other than the writer) answers with a skip marker, ``"skip": true``.

Besides the marker, this helper writes ``caravan-state.json`` (``{"step": N,
"files": [...]}``) after the state files: it says which step the files in a
directory hold, so a later reader knows it without loading them, even after
a skip marker replaced the marker.
"""

import json
import os
import signal
import tempfile
from dataclasses import dataclass

from caravan._warn import warn_once

MARKER = "caravan-checkpoint.json"
# MAX_STEP bounds a marker's step (and sequence): the driver refuses a marker
# above it (driver/protocol MaxStep, 2^53-1, the largest integer every JSON
# reader keeps exact).
MAX_STEP = 2**53 - 1
STATE_INFO = "caravan-state.json"

ENV_DIR = "CARAVAN_CHECKPOINT_DIR"
ENV_SIGNAL = "CARAVAN_CHECKPOINT_SIGNAL"
ENV_GENERATION = "CARAVAN_CHECKPOINT_GENERATION"
ENV_SEQUENCE = "CARAVAN_CHECKPOINT_SEQUENCE"
ENV_STEP = "CARAVAN_CHECKPOINT_STEP"
ENV_RESTORED_FROM = "CARAVAN_CHECKPOINT_RESTORED_FROM"

DEFAULT_SIGNAL = "SIGUSR1"
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def _env_int(env, name):
    """An integer variable, or 0 (with one warning) when it is malformed."""
    raw = (env.get(name) or "").strip()
    if not raw:
        return 0
    try:
        return int(raw)
    except ValueError:
        warn_once(("env", name), f"${name}={raw!r} is not an integer; using 0")
        return 0


@dataclass(frozen=True)
class RestoreInfo:
    """What the driver restored before the task started."""

    directory: str  # "" when the task runs without a checkpoint block
    generation: int  # 0: started fresh
    sequence: int  # floor for the next marker
    step: int  # 0 when unknown or fresh
    restored_from: str

    @property
    def restored(self):
        return self.generation > 0


def restore_info(env=None):
    """Reads the driver's restore variables (os.environ by default)."""
    env = os.environ if env is None else env
    return RestoreInfo(
        directory=env.get(ENV_DIR, ""),
        generation=_env_int(env, ENV_GENERATION),
        sequence=_env_int(env, ENV_SEQUENCE),
        step=_env_int(env, ENV_STEP),
        restored_from=env.get(ENV_RESTORED_FROM, ""),
    )


def fsync_dir(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path, data):
    """Writes path atomically: a temporary file in the same directory, fsync,
    rename over path, fsync the directory. data is bytes, str, or a function
    that writes to a binary file object."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=directory)
    try:
        os.fchmod(fd, 0o644)  # mkstemp's 0600 would hide the file from a task user
        with os.fdopen(fd, "wb") as f:
            if callable(data):
                data(f)
            else:
                f.write(data.encode() if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    fsync_dir(directory)


def read_json(path):
    """The JSON object in path, or None when it is missing or malformed."""
    try:
        with open(path, "rb") as f:
            doc = json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        warn_once(("json", path), f"ignoring unreadable {path}: {e}")
        return None
    return doc if isinstance(doc, dict) else None


def read_marker(directory):
    """The marker in directory (a dict), or None."""
    return read_json(os.path.join(directory, MARKER)) if directory else None


def state_step(directory):
    """The step of the state files in directory (from caravan-state.json),
    or None when it holds no complete state."""
    info = read_json(os.path.join(directory, STATE_INFO)) if directory else None
    if info is None or not isinstance(info.get("step"), int):
        return None
    return info["step"]


def write_state_info(directory, step, files):
    """Records that directory holds the state of step in files (call after
    writing them, before the marker)."""
    doc = {"step": int(step), "files": sorted(files)}
    atomic_write(os.path.join(directory, STATE_INFO), json.dumps(doc))


def copy_state(src, dst):
    """Copies the complete state in src (files named by its caravan-state.json)
    into dst atomically, file by file, the state record last. Returns its step,
    or None when src holds no complete state."""
    info = read_json(os.path.join(src, STATE_INFO))
    if info is None or not isinstance(info.get("step"), int):
        return None
    for name in info.get("files", []):
        if os.path.basename(name) != name or name in (MARKER, STATE_INFO):
            raise ValueError(f"{src}/{STATE_INFO}: files: bad name {name!r}")
        with open(os.path.join(src, name), "rb") as f:
            atomic_write(os.path.join(dst, name), lambda out: _copy(f, out))
    write_state_info(dst, info["step"], info.get("files", []))
    return info["step"]


def _copy(src, dst):
    while True:
        chunk = src.read(1 << 20)
        if not chunk:
            return
        dst.write(chunk)


def _signal_by_name(name):
    sig = getattr(signal, name, None) if name.startswith("SIG") else None
    if not isinstance(sig, signal.Signals):
        warn_once(("signal", name), f"${ENV_SIGNAL}={name!r} is not a signal name; using {DEFAULT_SIGNAL}")
        return signal.SIGUSR1
    return sig


class Checkpointer:
    """One task's side of the checkpoint protocol.

    Create it first thing (it installs the handler for the checkpoint signal,
    whose default action would kill the process), check ``requested`` between
    two training steps, write the state with ``write``/``write_files``, then
    ``commit(step)``; a rank that holds no state calls ``skip()``.

    ``stop_requested`` turns true on SIGTERM or SIGINT (the agent's or Nomad's
    stop), with ``handle_stop`` (the default); the script should then finish
    the step it is in, leave its loop at that step boundary and exit with
    ``sys.exit(ckpt.stop_exit_code)``. A process that lets the signal kill
    it mid-kernel can leave a shared MPS GPU failing its next client.
    """

    def __init__(self, env=None, install=True, handle_stop=True):
        env = os.environ if env is None else env
        self.restore = restore_info(env)
        self.directory = self.restore.directory
        if not self.directory:
            warn_once(("env", ENV_DIR), f"${ENV_DIR} is not set (not run by caravan's driver with a checkpoint "
                      "block?): checkpoints are off, training goes on")
        elif not os.path.isdir(self.directory):
            warn_once(("dir", self.directory), f"${ENV_DIR}={self.directory} is not a directory: checkpoints are off")
            self.directory = ""
        self.signal = _signal_by_name(env.get(ENV_SIGNAL) or DEFAULT_SIGNAL)
        self._sequence = self.restore.sequence
        self._requested = False
        self.stop_signal = None
        if install:
            self.install(handle_stop)

    # Signals.

    def install(self, handle_stop=True):
        """Installs the signal handlers (the constructor does, by default)."""
        signal.signal(self.signal, self._on_signal)
        if handle_stop:
            for s in STOP_SIGNALS:
                if s != self.signal:
                    signal.signal(s, self._on_signal)

    def _on_signal(self, signum, _frame):
        if signum == self.signal:
            self._requested = True
        if signum in STOP_SIGNALS:
            self.stop_signal = signal.Signals(signum)

    def request(self):
        """Asks for a checkpoint as the signal does (tests, or a script's own
        schedule)."""
        self._requested = True

    @property
    def enabled(self):
        return bool(self.directory)

    @property
    def requested(self):
        """A checkpoint was asked for and not yet answered."""
        return self._requested

    @property
    def stop_requested(self):
        return self.stop_signal is not None

    @property
    def stop_exit_code(self):
        """The exit status for a clean stop: 128 + the stop signal's number
        (143 for SIGTERM), as a process killed by it would report, but
        reached by exiting after the step, with CUDA torn down in order;
        0 when no stop was asked for."""
        return 128 + int(self.stop_signal) if self.stop_signal is not None else 0

    # Restore.

    def restored_step(self):
        """The step of the state in the directory (caravan-state.json, else the
        marker's or $CARAVAN_CHECKPOINT_STEP), or None when it holds none."""
        if not self.directory:
            return None
        step = state_step(self.directory)
        if step is not None:
            return step
        marker = read_marker(self.directory)
        if marker is None or marker.get("skip"):
            return None
        return marker.get("step", self.restore.step) if isinstance(marker.get("step", 0), int) else None

    def path(self, name):
        """Path of a checkpoint file (None when checkpoints are off)."""
        return os.path.join(self.directory, name) if self.directory else None

    # Save.

    def next_sequence(self):
        """A sequence above the restored one, the directory's marker and every
        one this process wrote."""
        marker = read_marker(self.directory) or {}
        seq = marker.get("sequence", 0)
        seq = seq if isinstance(seq, int) else 0
        self._sequence = max(self._sequence, seq, self.restore.sequence) + 1
        return self._sequence

    def write(self, name, data):
        """Writes one checkpoint file atomically (bytes, str or a writer
        function). Returns its path, or None when checkpoints are off."""
        if not self.directory:
            return None
        path = self.path(name)
        atomic_write(path, data)
        return path

    def commit(self, step=None, meta=None, files=None):
        """Writes the marker (and, with files, caravan-state.json first): the
        driver commits the directory. Returns the sequence, or None when
        checkpoints are off."""
        self._requested = False
        if not self.directory:
            return None
        if step is not None and not 0 <= int(step) <= MAX_STEP:
            raise ValueError(f"step: {int(step)} is outside 0..{MAX_STEP} (the driver refuses the marker)")
        if files is not None and step is not None:
            write_state_info(self.directory, step, files)
        doc = {"sequence": self.next_sequence()}
        if step is not None:
            doc["step"] = int(step)
        if meta:
            doc["meta"] = {str(k): str(v) for k, v in meta.items()}
        atomic_write(os.path.join(self.directory, MARKER), json.dumps(doc))
        return doc["sequence"]

    def skip(self):
        """Answers the request with a skip marker: another member of the group
        writes the state. Returns the sequence, or None when checkpoints are
        off."""
        self._requested = False
        if not self.directory:
            return None
        doc = {"sequence": self.next_sequence(), "skip": True}
        atomic_write(os.path.join(self.directory, MARKER), json.dumps(doc))
        return doc["sequence"]

    def commit_copy(self, src):
        """Copies a complete state directory (see copy_state) in and commits it
        at its step; skips when src holds nothing newer than the directory.
        Returns the sequence, or None when checkpoints are off."""
        if not self.directory:
            self._requested = False
            return None
        newer = state_step(src)
        have = self.restored_step()
        if newer is None or (have is not None and newer <= have):
            return self.skip()
        step = copy_state(src, self.directory)
        return self.commit(step, meta={"source": "live-snapshot"})
