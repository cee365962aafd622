"""Deadlines that the code running at the time cannot be trusted to look at.

* :func:`z3_deadline` - for the Z3 phases.  A Z3 ``check()`` runs in C and cannot look at a
  Python deadline; a per-call ``timeout`` bounds one call, not a sequence of them.
  :func:`z3_deadline` runs a timer thread that, once the deadline passes, interrupts the Z3
  context (``Z3_interrupt``, the one call Z3 allows from another thread) and keeps interrupting
  every few milliseconds until the block ends, so the running call and any started after it
  answer ``unknown`` ("interrupted") at once.  Engines then report the claim inconclusive, as
  for any other limit.
* :func:`backstop` - for a whole command (the console command's ``--max-seconds``,
  :mod:`kvproof.checker.budget`).  Its phases look at their deadline and stop there; what does
  not look (reading and compiling scenarios, rendering a long table, a C compiler, a phase
  that overran on a loaded machine) is stopped at the backstop's deadline: a timer thread
  interrupts a running Z3 call, as above, and sends SIGALRM to the main thread, whose handler
  raises :class:`BudgetSpent` there (a blocking system call is interrupted too; in a finaliser,
  where Python would ignore it, it waits for the next alarm).  It unwinds
  like Ctrl-C's ``KeyboardInterrupt`` - files are written whole or not at all, worker processes
  are stopped - and the command line turns it into one line and exit 2 (inconclusive).  A write
  to standard output is never cut part way: the alarm waits until the write has returned (a
  JSON document goes out in one write, so it is whole or absent), and :class:`BudgetSpent` says
  whether the command had written anything (:attr:`BudgetSpent.after_output`), so that nothing
  is appended to a document already written.

Neither imports Z3: a command that never loaded it has no Z3 call to interrupt.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from contextlib import contextmanager
from typing import Iterator

__all__ = ["z3_deadline", "INTERRUPTED", "BudgetSpent", "backstop"]

INTERRUPTED = "interrupted"
"""What ``reason_unknown()`` says of a call :func:`z3_deadline` interrupted."""

_EVERY = 0.02  # seconds between interrupts once the deadline has passed


def _wait_until(stop: threading.Event, deadline: float) -> bool:
    """Wait for ``stop`` until ``deadline`` (a ``time.perf_counter()`` reading, which may be
    ``inf``: a wait is at most an hour, so no timeout overflows); whether ``stop`` was set."""
    while True:
        left = deadline - time.perf_counter()
        if left <= 0:
            return stop.is_set()
        if stop.wait(min(left, 3600.0)):
            return True


def _interrupt_z3() -> None:
    """Interrupt the running call of Z3's main context, if Z3 is loaded (not while its import
    is still running: there is no call to interrupt then)."""
    main_ctx = getattr(sys.modules.get("z3"), "main_ctx", None)
    if main_ctx is not None:
        main_ctx().interrupt()


@contextmanager
def z3_deadline(deadline: float | None) -> Iterator[None]:
    """Interrupt Z3 (the main context) from ``deadline`` (a ``time.perf_counter()`` reading)
    to the end of the block; ``None``: no deadline, nothing runs."""
    if deadline is None:
        yield
        return
    import z3

    stop = threading.Event()

    def watch() -> None:
        if _wait_until(stop, deadline):
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
    except z3.Z3Exception:
        # once the deadline has passed, any Z3 call (reading a model, building a term) may fail
        # with "canceled": that is the budget running out, not an error of the code it stopped
        if time.perf_counter() < deadline:
            raise
        raise BudgetSpent() from None
    finally:
        stop.set()
        thread.join()


class BudgetSpent(BaseException):
    """The time budget of the whole command ran out before it finished: raised in the main
    thread by :func:`backstop`.  A :class:`BaseException`, like :class:`KeyboardInterrupt`, so
    that no ``except Exception`` takes it for an error of the code it interrupted.
    :attr:`after_output`: the command had already written to standard output."""

    def __init__(self, after_output: bool = False):
        super().__init__()
        self.after_output = after_output


class _HeldStdout:
    """Standard output seen through :func:`backstop`: each ``write`` runs whole (the alarm waits
    while one runs) and the first one is recorded."""

    def __init__(self, inner, state: dict):
        self._inner, self._state = inner, state

    def write(self, text):
        """Write ``text`` to the real standard output, the alarm held off meanwhile."""
        self._state["holding"] += 1
        try:
            return self._inner.write(text)
        finally:
            self._state["holding"] -= 1
            if text:
                self._state["wrote"] = True

    def flush(self):
        """Flush the real standard output, the alarm held off meanwhile (a pipe's reader may be slow)."""
        self._state["holding"] += 1
        try:
            return self._inner.flush()
        finally:
            self._state["holding"] -= 1

    def __getattr__(self, name):
        return getattr(self._inner, name)


@contextmanager
def backstop(deadline: float | None) -> Iterator[None]:
    """Raise :class:`BudgetSpent` in the main thread at ``deadline`` (a ``time.perf_counter()``
    reading; at once if it has passed) unless the block has ended, interrupting a Z3 call then
    running (see the module docstring).  Raised once; ``None``, or a caller outside the main
    thread: nothing runs.  SIGALRM's handler is kvproof's for the block (restored after)."""
    if deadline is None or threading.current_thread() is not threading.main_thread():
        yield
        return
    state = {"armed": False, "closing": False, "fired": False, "holding": 0, "wrote": False}

    def on_alarm(signum, frame) -> None:
        if not state["armed"] or state["closing"] or state["fired"] or state["holding"]:
            return  # before the block, after it, or inside a write: the watcher signals again 20 ms on
        while frame is not None:
            if frame.f_code.co_name == "__del__":
                return  # Python would ignore it there: the next alarm, 20 ms on, tries again
            frame = frame.f_back
        state["fired"] = True
        raise BudgetSpent(state["wrote"])

    stop = threading.Event()
    main = threading.main_thread().ident

    def watch() -> None:
        if _wait_until(stop, deadline):
            return
        while True:  # until the block ends: a Z3 call started while the exception unwinds ends at once too
            _interrupt_z3()
            if not state["fired"]:
                signal.pthread_kill(main, signal.SIGALRM)
            if stop.wait(_EVERY):
                return

    unraisable = sys.unraisablehook

    def swallowed(info) -> None:
        # the alarm came while a finaliser (__del__, a weakref callback) ran: the exception was
        # ignored there, so the next alarm raises it again
        if isinstance(info.exc_value, BudgetSpent):
            state["fired"] = False
            return
        unraisable(info)

    thread = threading.Thread(target=watch, name="kvproof-backstop", daemon=True)
    old = signal.signal(signal.SIGALRM, on_alarm)
    sys.unraisablehook = swallowed
    held = _HeldStdout(sys.stdout, state)
    sys.stdout = held
    try:
        thread.start()
        state["armed"] = True
        yield
    except Exception as e:
        # a Z3 call the watcher interrupted that is not a check (reading a model) fails with
        # "canceled": the budget ran out there, as if the alarm had come
        z3 = sys.modules.get("z3")
        if z3 is None or not isinstance(e, z3.Z3Exception) or time.perf_counter() < deadline:
            raise
        raise BudgetSpent(state["wrote"]) from None
    finally:
        while True:  # every step is idempotent: an alarm raised part way through starts it again
            try:
                state["closing"] = True  # from here the handler raises nothing: the block is over
                stop.set()
                thread.join()
                signal.signal(signal.SIGALRM, old)
                sys.unraisablehook = unraisable
                if sys.stdout is held:
                    sys.stdout = held._inner
                break
            except BudgetSpent:
                continue
