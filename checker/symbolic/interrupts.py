"""Ctrl-C during a Z3 call is an interrupt, not an answer.

By default Z3 catches SIGINT itself while it solves: it cancels the search and the call returns
``unknown`` ("interrupted from keyboard", or "canceled"), which an engine cannot tell from a
solver that gave up, so ``kvproof prove`` reported an interrupt as an inconclusive result
(exit 2).  :func:`interrupts_reach_python` turns that off for the duration of a command:

* Z3's own handler is disabled (the global parameter ``ctrl_c``), so SIGINT reaches Python's
  handler, which raises :class:`KeyboardInterrupt` as soon as the main thread runs Python code
  again (the command line turns it into exit 130 and one line);
* to make that "as soon as" prompt while the main thread is inside a long solver call, the
  signal also wakes a watcher thread (Python's wakeup file descriptor), which cancels the
  running call with ``Z3_interrupt``; the call returns, and the pending KeyboardInterrupt is
  raised at once, before any engine sees the ``unknown``.

Every Z3 call made inside the ``with`` block is covered, whichever engine makes it.
"""

from __future__ import annotations

import os
import signal
import threading
from contextlib import contextmanager
from typing import Iterator

import z3

__all__ = ["interrupts_reach_python"]


@contextmanager
def interrupts_reach_python() -> Iterator[None]:
    """Within the block, Ctrl-C (SIGINT) raises :class:`KeyboardInterrupt` promptly, also
    during a Z3 call (see the module docstring).  A no-op outside the main thread, or when
    SIGINT is not handled by Python (ignored, as in a background job)."""
    if (threading.current_thread() is not threading.main_thread()
            or signal.getsignal(signal.SIGINT) is not signal.default_int_handler):
        yield
        return
    r, w = os.pipe()
    os.set_blocking(w, False)
    old_fd = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    old_ctrl_c = z3.get_param("ctrl_c")
    z3.set_param("ctrl_c", False)
    ctx = z3.main_ctx()

    def watch() -> None:
        while True:
            try:
                data = os.read(r, 64)
            except OSError:
                return
            if not data:
                return  # the write end was closed: the block is over
            if signal.SIGINT in data:
                ctx.interrupt()

    watcher = threading.Thread(target=watch, name="kvproof-sigint", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        signal.set_wakeup_fd(old_fd)
        z3.set_param("ctrl_c", old_ctrl_c)
        os.close(w)
        watcher.join(timeout=5)
        os.close(r)
