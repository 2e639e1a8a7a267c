"""PyTorch state through caravan's checkpoint protocol (imports torch lazily).

    ckpt = caravan.Checkpointer()                     # first: installs the signal handler
    model, opt = ..., ...
    step = caravan.pytorch.load(ckpt.directory, model, opt) or 0
    while step < steps:
        caravan.pytorch.serve(ckpt, step, model, opt)  # between two steps
        ...

The state file (``state.pt``) holds ``{"model", "optimizer", "step", "extra"}``;
it is written atomically, then ``caravan-state.json``, then the marker. In a
data-parallel group only global rank 0 writes the state; the other processes
that own a checkpoint directory (local rank 0) answer with a skip marker.
"""

import os

from caravan.checkpoint import atomic_write, write_state_info

STATE_FILE = "state.pt"


def _torch():
    import torch  # lazily: the core of the helper does not need torch

    return torch


def unwrap(model):
    """The module inside a DistributedDataParallel (or DataParallel) wrapper."""
    return getattr(model, "module", model)


def state(step, model, optimizer=None, extra=None):
    """The state dictionary this module saves."""
    return {
        "model": unwrap(model).state_dict(),
        "optimizer": optimizer.state_dict() if optimizer is not None else None,
        "step": int(step),
        "extra": extra,
    }


def apply(st, model, optimizer=None):
    """Loads a state dictionary into model (and optimizer); returns its step."""
    unwrap(model).load_state_dict(st["model"])
    if optimizer is not None and st.get("optimizer") is not None:
        optimizer.load_state_dict(st["optimizer"])
    return int(st["step"])


def save_dir(directory, step, model, optimizer=None, extra=None, filename=STATE_FILE):
    """Writes the state into directory atomically, then caravan-state.json."""
    torch = _torch()
    st = state(step, model, optimizer, extra)
    atomic_write(os.path.join(directory, filename), lambda f: torch.save(st, f))
    write_state_info(directory, step, [filename])


def save(ckpt, step, model, optimizer=None, extra=None, meta=None, filename=STATE_FILE):
    """Writes the state into the checkpoint directory and commits the marker.
    Returns the marker's sequence (None when checkpoints are off)."""
    if not ckpt.enabled:
        return ckpt.commit(step)
    save_dir(ckpt.directory, step, model, optimizer, extra, filename)
    return ckpt.commit(step, meta=meta)


def read(directory, map_location="cpu", filename=STATE_FILE):
    """The state dictionary in directory, or None when it holds none."""
    path = os.path.join(directory, filename) if directory else ""
    if not path or not os.path.exists(path):
        return None
    return _torch().load(path, map_location=map_location)


def load(directory, model, optimizer=None, map_location="cpu", filename=STATE_FILE):
    """Loads the state in directory into model and optimizer; returns its
    step, or None when the directory holds no state."""
    st = read(directory, map_location, filename)
    return None if st is None else apply(st, model, optimizer)


def serve(ckpt, step, model, optimizer=None, extra=None, rank=None, local_rank=None, meta=None):
    """Answers a pending checkpoint request, between two steps: global rank 0
    saves and commits, another local rank 0 writes a skip marker, any other
    process just clears the request. rank and local_rank default to $RANK and
    $LOCAL_RANK (0 outside torch.distributed). Returns "saved", "skipped" or
    None (nothing pending)."""
    if not ckpt.requested:
        return None
    rank = int(os.environ.get("RANK", "0")) if rank is None else rank
    local_rank = int(os.environ.get("LOCAL_RANK", "0")) if local_rank is None else local_rank
    if rank == 0:
        save(ckpt, step, model, optimizer, extra, meta)
        return "saved"
    if local_rank == 0:
        ckpt.skip()
        return "skipped"
    ckpt._requested = False  # pylint: disable=protected-access
    return "skipped"
