"""``--max-seconds S``: one wall-clock budget for a whole command, from the start of its process
to its exit.

The phases of a command look at the deadline as they go (:class:`~kvproof.checker.explicit.Limits`
carries it to the searches, the C compiler, the liveness graph, and Z3 through
:func:`~kvproof.checker.symbolic.watchdog.z3_deadline`), stop there and leave what they did not decide
inconclusive.  Four things make that a bound on the process rather than on the phases:

* the budget counts from when the process started (:func:`process_started`: the kernel's record
  of it, so the interpreter's start-up and kvproof's imports are spent from it too);
* the phases stop :func:`reserve` seconds before the end (:meth:`Budget.limits`), keeping that
  time for what follows them: the verdict table, the traces, the reports, the closing line;
* the console command runs under :func:`~kvproof.checker.symbolic.watchdog.backstop`, which stops what
  does not look at the deadline :data:`GRACE` seconds after the end (:meth:`Budget.backstop`):
  one line, exit 2, inconclusive.
* what may spend its time in one call into C, which no signal interrupts (``audit`` reading a
  launch line with the installed engine's own parser: the engine's import loads torch's compiled
  extension), runs in a forked child process killed at the deadline (:meth:`Budget.call`).

``kvproof.checker.cli.main`` called in-process (a test, a script) counts the budget from the call
and only the phases keep to it; no signal is sent into the caller's process.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

__all__ = ["process_started", "reserve", "GRACE", "ROW_SECONDS", "HTML_TRACE_SECONDS", "Budget", "call_within"]

GRACE = 0.3
"""Seconds past the end of the budget at which :meth:`Budget.backstop` stops the command (what
is left then is unwinding and the interpreter's exit, which the budget cannot cut)."""

ROW_SECONDS = 0.002
"""Seconds kept back per verdict row a command has yet to print (rich lays out a row of the
verdict table in about a millisecond on an idle core; twice that on a loaded machine)."""

HTML_TRACE_SECONDS = 0.15
"""Seconds kept back per counterexample an HTML report has yet to draw (its steps, sequence
diagram and page timeline: about 70 ms each on an idle core)."""

_RESERVE_SHARE, _RESERVE_MAX = 0.1, 0.25


def reserve(seconds: float) -> float:
    """The seconds of a budget of ``seconds`` kept for what follows the phases: a tenth of it,
    at most a quarter of a second."""
    return min(_RESERVE_MAX, _RESERVE_SHARE * seconds)


def _proc_start_age() -> float | None:
    """Seconds since this process started, from ``/proc/self/stat`` (its start in clock ticks
    since boot, against ``CLOCK_BOOTTIME``; 10 ms resolution); ``None`` where that cannot be read."""
    try:
        with open("/proc/self/stat", "rb") as f:
            stat = f.read().decode("ascii", "replace")
        ticks = int(stat[stat.rindex(")") + 2:].split()[19])  # field 22, starttime (the name may hold spaces)
        return time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def process_started() -> float:
    """When this process started, as a ``time.perf_counter()`` reading: the kernel's start time
    on Linux, else (or where that reading is implausible) :data:`kvproof.STARTED`, when kvproof
    was first imported (a few tens of milliseconds later)."""
    from kvproof import STARTED

    now = time.perf_counter()
    age = _proc_start_age()
    if age is None:
        return STARTED
    started = now - age
    # the process started before kvproof's import (a clock tick's rounding aside), and not long before
    if started > STARTED + 0.02 or STARTED - started > 60.0:
        return STARTED
    return min(started, STARTED)


@dataclass(frozen=True)
class Budget:
    """``seconds`` of wall-clock time from ``started`` (a ``time.perf_counter()`` reading)."""

    seconds: float
    started: float

    @property
    def end(self) -> float:
        """The ``time.perf_counter()`` reading at which the budget is spent."""
        return self.started + self.seconds

    def limits(self, max_states: int | None = None, max_depth: int | None = None, keep: float = 0.0) -> Any:
        """The :class:`~kvproof.checker.explicit.Limits` of the command's phases: their deadline
        is :func:`reserve` seconds before :attr:`end`, and ``keep`` more (what the results found
        so far take to report: :data:`ROW_SECONDS`, :data:`HTML_TRACE_SECONDS`).  ``Limits``
        counts ``max_seconds`` from its ``started``, so that is moved back by as much; their
        reason names ``seconds``."""
        from kvproof.checker.explicit.search import Limits

        return Limits(max_states, self.seconds, max_depth, self.started - reserve(self.seconds) - keep)

    def backstop(self) -> Any:
        """:func:`~kvproof.checker.symbolic.watchdog.backstop` at :data:`GRACE` seconds past :attr:`end`."""
        from kvproof.checker.symbolic.watchdog import backstop

        return backstop(self.end + GRACE)

    def call(self, fn: Any, *args: Any) -> Any:
        """``fn(*args)`` in a forked child process (a ``multiprocessing`` fork, as the search's
        partition workers are), stopped at the phases' deadline (:meth:`limits`): its value, or
        the exception it raised, comes back over a pipe; past the deadline the child is killed
        and :class:`~kvproof.checker.symbolic.watchdog.BudgetSpent` raised here.

        For a call that may spend its time inside one call into C, which no signal interrupts
        and the backstop cannot stop: importing an engine to read a launch line with its own
        parser loads torch's compiled extension, a third of a second on an idle core with the
        interpreter held.  ``fn``'s value must pickle without importing what ``fn`` imported
        (plain data).  A child the kernel killed (the out-of-memory killer) is a
        :class:`MemoryError`, as a lost partition worker is."""
        import multiprocessing as mp
        import signal

        from kvproof.checker.symbolic.watchdog import BudgetSpent

        receive, send = mp.get_context("fork").Pipe(duplex=False)
        child = mp.get_context("fork").Process(target=_send_outcome, args=(send, fn, args), daemon=True)
        child.start()
        send.close()
        try:
            left = self.end - reserve(self.seconds) - time.perf_counter()
            if left <= 0 or not receive.poll(left):
                raise BudgetSpent()
            ok, value = receive.recv()
        except EOFError:  # the child ended without an answer
            child.join()
            if child.exitcode == -signal.SIGKILL:
                raise MemoryError("the child process reading the call was killed (out of memory?)") from None
            raise RuntimeError(f"the child process running the call exited (code {child.exitcode})") from None
        finally:
            child.kill()
            child.join()
            receive.close()
        if ok:
            return value
        raise value

    def line(self) -> str:
        """Why a command the backstop stopped ended: ``time limit S s reached ...``."""
        return (f"time limit {self.seconds:g} s reached before the command finished (one budget for the whole "
                f"command, from process start)")


def _send_outcome(conn: Any, fn: Any, args: tuple) -> None:
    """:meth:`Budget.call`'s child: send ``(True, value)`` or ``(False, exception)`` (the
    exception's text, as a :class:`RuntimeError`, when it does not pickle)."""
    try:
        outcome = (True, fn(*args))
    except BaseException as e:  # noqa: BLE001 - the parent re-raises it
        outcome = (False, e)
    try:
        conn.send(outcome)
    except Exception:  # noqa: BLE001 - an exception that does not pickle: its text
        conn.send((False, RuntimeError(f"{type(outcome[1]).__name__}: {outcome[1]}")))
    conn.close()


def call_within(budget: Budget | None, fn: Any, *args: Any) -> Any:
    """``fn(*args)``: here without a budget, else by :meth:`Budget.call` (in a child process
    stopped at the budget's deadline)."""
    return fn(*args) if budget is None else budget.call(fn, *args)
