"""A deadline for the Z3 phases: solver calls still running when time is up are interrupted.

A Z3 ``check()`` runs in C and cannot look at a Python deadline; a per-call ``timeout`` bounds
one call, not a sequence of them.  :func:`z3_deadline` runs a timer thread that, once the
deadline passes, interrupts the Z3 context (``Z3_interrupt``, the one call Z3 allows from
another thread) and keeps interrupting every few milliseconds until the block ends, so the
running call and any started after it answer ``unknown`` ("interrupted") at once.  Engines
then report the claim inconclusive, as for any other limit.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Iterator

import z3

__all__ = ["z3_deadline", "INTERRUPTED"]

INTERRUPTED = "interrupted"
"""What ``reason_unknown()`` says of a call :func:`z3_deadline` interrupted."""

_EVERY = 0.02  # seconds between interrupts once the deadline has passed


@contextmanager
def z3_deadline(deadline: float | None) -> Iterator[None]:
    """Interrupt Z3 (the main context) from ``deadline`` (a ``time.perf_counter()`` reading)
    to the end of the block; ``None``: no deadline, nothing runs."""
    if deadline is None:
        yield
        return
    stop = threading.Event()

    def watch() -> None:
        if stop.wait(max(0.0, deadline - time.perf_counter())):
            return
        ctx = z3.main_ctx()
        while True:
            ctx.interrupt()
            if stop.wait(_EVERY):
                return

    thread = threading.Thread(target=watch, name="kvproof-z3-deadline", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
