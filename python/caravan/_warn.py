"""Warnings printed once per key, to stderr: a helper never stops training."""

import sys
import threading

_seen = set()
_lock = threading.Lock()


def warn_once(key, message):
    """Print "caravan: MESSAGE" to stderr the first time key is seen."""
    with _lock:
        if key in _seen:
            return False
        _seen.add(key)
    print(f"caravan: {message}", file=sys.stderr, flush=True)
    return True


def _reset():
    """Forget every key (tests)."""
    with _lock:
        _seen.clear()
