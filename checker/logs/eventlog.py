"""Writing an event log (schema version 1, the format ``kvproof validate`` reads) from a running
process: one JSON object a line, appended under a lock so that threads never interleave lines.

This is the protocol-free half of the recorder: a protocol's recorder (its ``record``
module) decides which calls are which events, and which keys an event line has (its schema's),
and hands them to :meth:`EventLog.write`.
"""

from __future__ import annotations

import functools
import json
import os
import threading
import time
from typing import Any, Callable

from kvproof.checker.logs.validate import LOG_FORMAT, SCHEMA_VERSION

__all__ = ["EventLog", "Patches"]


class EventLog:
    """An event log being written to ``path``.

    The header (``{"v": 1, "log": "kvproof-events", "scenario": ...}`` plus ``header``) is
    written when the file is empty; every :meth:`emit` appends one event line, ``t`` being the
    seconds since the log was opened (``time.perf_counter``, not any clock the engine may have
    patched), the header's ``t0`` the wall-clock time (``time.time()``) of that moment, so that
    the logs of several processes can be merged by time (:mod:`kvproof.checker.logs.merge`).
    The file is opened in append mode and each line is written whole under a lock.
    """

    def __init__(self, path: str | os.PathLike, scenario: Any, **header: Any):
        self.path = os.fspath(path)
        self.lock = threading.Lock()
        self._perf = time.perf_counter
        self.t0 = self._perf()
        self.wall0 = time.time()  # the same moment on the wall clock (the header's t0)
        self.count = 0
        self.file = open(self.path, "a", encoding="utf-8")
        if self.file.tell() == 0:
            # t0: the wall clock at t = 0, so that several processes' logs can be merged by time
            head = {"v": SCHEMA_VERSION, "log": LOG_FORMAT, "scenario": scenario, **header,
                    "t0": round(self.wall0, 6)}
            self.file.write(json.dumps(head, separators=(",", ":")) + "\n")
            self.file.flush()

    def write(self, **fields: Any) -> None:
        """Append one event line: ``v``, ``t`` and ``fields`` in order (a protocol's own keys)."""
        with self.lock:
            if self.file.closed:
                return
            line = {"v": SCHEMA_VERSION, "t": round(self._perf() - self.t0, 6), **fields}
            self.file.write(json.dumps(line, separators=(",", ":")) + "\n")
            self.file.flush()
            self.count += 1

    def close(self) -> None:
        """Close the file; later events are dropped."""
        with self.lock:
            self.file.close()


class Patches:
    """Methods of a running engine's classes replaced by wrappers, and put back: what a
    protocol's recorder patches.  ``undo`` (set by the subclass, initially empty) lists what
    :meth:`uninstall` restores."""

    undo: list

    def wrap(self, cls: Any, name: str, make: Callable[[Callable], Callable]) -> None:
        """Replace ``cls.name`` by ``make(original)`` (undone by :meth:`uninstall`)."""
        had = name in vars(cls)
        orig = getattr(cls, name)
        setattr(cls, name, functools.wraps(orig)(make(orig)))
        self.undo.append((cls, name, orig if had else None))

    def uninstall(self) -> None:
        """Put every original method back."""
        for cls, name, orig in reversed(self.undo):
            if orig is None:
                delattr(cls, name)
            else:
                setattr(cls, name, orig)
        self.undo.clear()
