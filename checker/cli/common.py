"""What the commands of the command line share: exit codes, one-line bad input, the console,
the closing line every run ends with (:class:`Summary`), the progress display of long runs
(:class:`Progress`), how a scenario is named, the JSON of a check, and the commands a protocol
offers."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvproof.model.registry import protocols
from kvproof.model.scenario import Scenario, builtin, load_scenario

__all__ = ["EXIT_OK", "EXIT_MISMATCH", "EXIT_INCONCLUSIVE", "EXIT_BAD_INPUT", "EXIT_OUT_OF_MEMORY",
           "EXIT_UNEXPLAINED", "EXIT_INTERRUPTED", "EXIT_MEANINGS", "BadInputError", "Summary", "Tally", "exit_code", "claim_counts", "reports_summary", "Progress",
           "console", "resolve", "json_reports", "protocol_command", "add_protocol_arguments", "plural",
           "add_output_arguments", "output_console", "finish", "JSON_HELP", "QUIET_HELP"]

from kvproof.checker.outcome import (  # noqa: F401 - the command line's names for them
    _EXIT_STYLES, EXIT_BAD_INPUT, EXIT_BROKEN_PIPE, EXIT_INCONCLUSIVE, EXIT_INTERRUPTED, EXIT_MEANINGS, EXIT_MISMATCH,
    EXIT_OK, EXIT_OUT_OF_MEMORY, EXIT_UNEXPLAINED, Summary, Tally, console, exit_code, plural,
)


JSON_HELP = ("print one JSON object instead of the report: the command, its verdict and exit code, what it "
             "found, and the summary (the exit code is the same)")
"""The help of ``--json`` on every command that decides something."""
QUIET_HELP = "print nothing; the exit code tells"
"""The help of ``--quiet`` on every command that decides something."""


def add_output_arguments(parser: Any, json_help: str = JSON_HELP) -> None:
    """Add ``--json`` and ``--quiet`` to the ``parser`` of a command that decides something: the
    one place they are defined (how the command ends is :func:`finish`)."""
    parser.add_argument("--json", action="store_true", help=json_help)
    parser.add_argument("--quiet", action="store_true", help=QUIET_HELP)


def output_console(args: Any):
    """The console a command prints its report on: one that prints nothing under ``--json``
    (stdout is the JSON document's) or ``--quiet``."""
    return console(quiet=bool(getattr(args, "json", False) or getattr(args, "quiet", False)))


def finish(args: Any, summary: Summary, out: Any = None, body: dict[str, Any] | None = None) -> int:
    """How every command that decides something ends (:meth:`~kvproof.checker.outcome.Summary.end`):
    with ``--json`` the one JSON document (``command``, ``verdict``, ``exit_code``, ``body``'s
    keys, ``summary``); else the closing line on ``out`` (nothing on ``--quiet``'s console);
    the exit code."""
    if getattr(args, "json", False):
        return summary.end(None, body or {})
    return summary.end(out if out is not None else output_console(args))


def claim_counts(rows) -> tuple[int, int, int]:
    """(matched, mismatched, inconclusive) over rows that have an outcome (``result`` or
    ``outcome``) and an ``expected`` verdict (:class:`~kvproof.checker.outcome.Tally`): an
    inconclusive verdict is counted as inconclusive, never as a mismatch."""
    t = Tally.of((getattr(r, "result", None) or r.outcome, r.expected) for r in rows)
    return t.matched, t.mismatched, t.inconclusive


def reports_summary(command: str, reports, how: str, meaning: str = "", code: int | None = None) -> Summary:
    """The closing line of a run over scenario reports (``check``, ``report``): how many
    scenarios and claims, searched ``how``, how their verdicts compare with expectations, and
    the exit code of that (:func:`~kvproof.checker.outcome.exit_code`; ``code`` when the
    caller's tally counts more than the claims)."""
    from kvproof.checker.results import judged

    rows = [c for r in reports for c in r.claims]
    return Summary(command, f"{plural(len(reports), 'scenario')}, {plural(len(rows), 'claim')} ({how})",
                   *claim_counts(rows), exit_code(judged(reports)) if code is None else code, meaning)


class Progress:
    """A progress bar over the units of a run (scenarios, certificates, traces, requests), with
    a live description of the current one; drawn on stderr only when both stdout and stderr are
    terminals (never in a pipe, a file or CI log), only when the caller enables it (not
    ``--quiet``, not ``--json``), and only once the run has taken more than a second (short runs
    print nothing extra; a long phase that says nothing more still gets its bar after that
    second).  Calling it with a search's statistics shows the live state count."""

    GRACE = 1.0  # seconds before a bar is drawn

    def __init__(self, enabled: bool, total: int | None = 1, unit: str = "scenarios"):
        import threading

        self.enabled = enabled and sys.stderr.isatty() and sys.stdout.isatty()
        self.total = total
        self.unit = unit
        self.done = -1
        self.bar = None
        self.task = None
        self.label = ""
        self.text = ""
        self.started = time.perf_counter()
        self._lock = threading.RLock()
        self._timer = None
        self._stopped = False

    def start(self, label: str) -> None:
        """The next unit begins (the previous one, if any, is done)."""
        self.label = label
        self.done += 1
        self.note(label)

    def note(self, text: str, completed: int | None = None) -> None:
        """What the current unit is doing now (a phase, a method, a count done)."""
        with self._lock:
            self.text = text
            if completed is not None:
                self.done = completed
            self._maybe_show()
            if self.bar is not None:
                self.bar.update(self.task, total=self.total, description=text, completed=max(self.done, 0))

    def _maybe_show(self) -> None:
        if not self.enabled or self._stopped or self.bar is not None:
            return
        wait = self.GRACE - (time.perf_counter() - self.started)
        if wait > 0:  # not yet: come back when the grace is over, whether or not more is said
            if self._timer is None:
                import threading

                self._timer = threading.Timer(wait, self._on_time)
                self._timer.daemon = True
                self._timer.start()
            return
        from rich.console import Console
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress as Bar, SpinnerColumn, TextColumn,
                                   TimeElapsedColumn)

        self.bar = Bar(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                       TextColumn(self.unit), TimeElapsedColumn(), console=Console(file=sys.stderr),
                       transient=True)
        self.task = self.bar.add_task(self.text, total=self.total, completed=max(self.done, 0))
        self.bar.start()

    def _on_time(self) -> None:
        with self._lock:
            self._timer = None
            if self.text:
                self._maybe_show()

    def __call__(self, stats) -> None:
        """A search's live statistics (the explicit engine's progress callback)."""
        self.note(f"{self.label}: {stats.states:,} states · depth {stats.depth} · "
                  f"{stats.states_per_second:,.0f} states/s")

    def paused(self):
        """A context in which the caller prints to stdout with the bar out of the way (it is
        drawn again, below what was printed, when the context ends)."""
        import contextlib

        @contextlib.contextmanager
        def pause():
            with self._lock:
                bar = self.bar
                if bar is not None:
                    bar.stop()
                try:
                    yield
                finally:
                    if bar is not None and not self._stopped:
                        bar.start()

        return pause()

    def stop(self) -> None:
        """Remove the bar for good (it is transient: nothing is left on the terminal)."""
        with self._lock:
            self._stopped = True
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if self.bar is not None:
                self.bar.stop()
                self.bar = None

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


class BadInputError(Exception):
    """Input the command cannot use; its message is printed as one line, exit code 3 (the
    exception a command raises; :class:`~kvproof.checker.outcome.BadInput` is the outcome it
    stands for)."""


def resolve(name: str | Scenario) -> Scenario:
    """A built-in scenario by name, or a scenario file by path (a ``--variant`` file's own
    scenario is passed as it is: ``main`` adds those to the scenarios named).  A ``.py`` file
    named as a scenario is bad input that says to pass it with ``--variant``."""
    if isinstance(name, Scenario):
        return name
    if name.endswith(".py"):  # read as TOML it would be "malformed TOML": say what it is instead
        raise BadInputError(f"{name}: a .py file is an engine variant (code), not a scenario: pass it with --variant {name}")
    if name.endswith(".toml") or os.sep in name or Path(name).is_file():
        return load_scenario(name)
    return builtin(name)


def json_reports(reports) -> dict[str, Any]:
    """The JSON document of ``check --json`` for these scenario reports."""
    return {
        "scenarios": [
            {
                "name": r.scenario.name,
                "complete": r.complete,
                "reason": r.reason,
                "stats": {
                    "states": r.stats.states,
                    "transitions": r.stats.transitions,
                    "depth": r.stats.depth,
                    "quiescent_states": r.stats.quiescent,
                    "seconds": round(r.stats.seconds, 4),
                    "states_per_second": round(r.stats.states_per_second),
                    "visited": r.stats.visited,
                    "bytes_per_state": round(r.stats.bytes_per_state, 1),
                    "collision_probability": r.stats.collision_probability,
                    "symmetry": r.symmetry,
                    "represented_states": r.stats.represented,
                    "reduction": round(r.stats.reduction, 3),
                    "workers": r.stats.workers,
                    "worker_cpu_seconds": list(r.stats.worker_cpu),
                    "backend": r.backend,
                    "backend_note": r.backend_note,
                },
                "notes": list(r.notes),
                **({"checkpoint": r.checkpoint} if r.checkpoint is not None else {}),
                "results": [
                    {
                        "invariant": c.claim,
                        "kind": c.kind,
                        "expected": c.expected,
                        "verdict": c.verdict,
                        "states": r.stats.states,
                        "depth": c.depth if c.depth is not None else r.stats.depth,
                        "seconds": round(r.stats.seconds, 4),
                        "trace": str(c.trace_path) if c.trace_path else None,
                    }
                    for c in r.claims
                ],
            }
            for r in reports
        ]
    }


def protocol_command(name: str, engine: str | None = None):
    """The callable that implements command ``name``, from the one registered protocol that
    offers it (:attr:`~kvproof.model.protocol.Protocol.commands`); with ``engine``, from the
    protocol of that name (``audit``: the engine of ``ENGINE==VERSION``).  An engine no protocol
    offers it for is bad input listing what the offering protocols know (their
    ``NAME-releases`` command, else their names)."""
    found = [p for p in protocols() if name in p.commands]
    if engine is not None:
        mine = [p for p in found if p.name == engine]
        if len(mine) == 1:
            return mine[0].command(name)
        known = []
        for p in found:
            listed = p.command(f"{name}-releases")
            known += listed() if listed is not None else [p.name]
        what = "expected ENGINE==VERSION" if not engine else f"{engine}: unknown engine"
        raise BadInputError(f"{name}: {what}; known: {', '.join(known) or 'none'}")
    if len(found) != 1:
        offered = ", ".join(p.name for p in found) or "none"
        raise BadInputError(f"{name}: expected one protocol to offer it, found {offered}")
    return found[0].command(name)


def add_protocol_arguments(parser: Any, command: str) -> None:
    """Add to ``command``'s ``parser`` the options each registered protocol declares for it
    (:attr:`~kvproof.model.protocol.Protocol.arguments`): what only one protocol's engine has."""
    for protocol in protocols():
        add = protocol.arguments.get(command)
        if add is not None:
            add(parser)
