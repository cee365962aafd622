"""What an earlier complete search of a model found: its number of reachable states, kept in the
native backend's cache folder.

The default backend (:class:`~.backends.AutoBackend`) first searches with the Python engine up to
a state limit (its *probe*) and, when the search goes on, searches again natively from the start;
for a model searched before, the probe repeats work whose end is known.  :func:`remember` writes,
once a complete native search ends, how many states it found, in a file named by the machine's
:attr:`~kvproof.model.machine.Machine.fingerprint` (a digest of its compiled code, initial state,
actions and claims); :func:`known` reads it back.  A search is deterministic, so a model that
had more states than the probe's limit has them again, and the default backend then searches it
natively at once.  The count only chooses the backend: every backend has the same outcome, so a
wrong or missing file costs time, never a verdict; a file that cannot be read or written is
ignored.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

__all__ = ["cache_dir", "known", "remember"]


def cache_dir() -> Path:
    """Where compiled models are kept: ``$KVPROOF_CACHE_DIR``, else ``$XDG_CACHE_HOME/kvproof/native``,
    else ``~/.cache/kvproof/native``."""
    if os.environ.get("KVPROOF_CACHE_DIR"):
        return Path(os.environ["KVPROOF_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kvproof" / "native"


def _path(machine: Any) -> Path:
    return cache_dir() / "sizes" / machine.fingerprint


def known(machine: Any) -> int | None:
    """The states a complete search of ``machine`` found before (``None``: none is recorded)."""
    try:
        text = _path(machine).read_text()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None


def remember(machine: Any, states: int) -> None:
    """Record that a complete search of ``machine`` found ``states`` states (written whole, by
    a rename; nothing when the folder cannot be written)."""
    path = _path(machine)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(str(states))
        os.replace(tmp, path)
    except OSError:  # a read-only or full cache: the count is only a speed-up, so none is kept
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            return
