"""``kvproof validate DIR``: many logs, one verdict each and one summary; with ``--backend ray``
the logs are checked on a Ray cluster (the cluster the explicit engine's Ray backend starts or
joins: :func:`~kvproof.checker.explicit.ray_backend.ray_session`) and the findings merged in the
order of the logs.

A log that cannot be read is its own verdict (``bad input``, its one line) and the others are
still checked.  On Ray each log is checked by a task that reads it, and writes a violation's
trace, at the path the driver names: on a cluster of several machines the logs (and
``--traces``) must be on a file system every node sees.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable

from kvproof.checker.logs.validate_command import LogResult, validate_log
from kvproof.checker.logs.validate_output import BAD_INPUT

__all__ = ["LOG_SUFFIX", "log_files", "validate_many", "Recorded"]

LOG_SUFFIX = ".jsonl"
"""The files of a directory that are its logs."""


class _Bad(Exception):
    """One log's bad input (the run goes on with the next log)."""


def log_files(paths: Iterable[str]) -> list[str]:
    """The logs ``paths`` name: a file as it is, a directory as its ``*.jsonl`` files (sorted,
    not its subdirectories'); ``ValueError`` (one line) for a path that is neither, or a
    directory without a log."""
    out: list[str] = []
    for p in paths:
        if os.path.isdir(p):
            found = sorted(str(f) for f in Path(p).iterdir() if f.name.endswith(LOG_SUFFIX) and f.is_file())
            if not found:
                raise ValueError(f"{p}: a directory with no event log (*{LOG_SUFFIX})")
            out += found
        else:
            out.append(p)
    return out


class Recorded:
    """A printer that keeps what it is given (``say`` lines and findings), to be replayed on the
    real printer in the order of the logs."""

    def __init__(self) -> None:
        self.items: list[tuple[str, Any, Any]] = []

    def say(self, text: str, markup: bool = True) -> None:
        """Keep a text line."""
        self.items.append(("say", text, markup))

    def finding(self, obj: dict) -> None:
        """Keep a finding."""
        self.items.append(("finding", obj, None))

    def replay(self, printer: Any) -> None:
        """Hand everything kept to ``printer``, in order."""
        for kind, a, b in self.items:
            if kind == "say":
                printer.say(a, b)
            else:
                printer.finding(a)


def check_one(args: Any, path: str, printer: Any) -> LogResult:
    """One log's verdict, its bad input a verdict too (its line said, the run goes on)."""
    try:
        result = validate_log(args, path, printer, _Bad)
    except _Bad as e:
        printer.say(str(e), False)
        result = LogResult(path, BAD_INPUT)
        result.findings.append({"log": path, "finding": BAD_INPUT, "why": str(e)})
        printer.finding(result.findings[-1])
    printer.finding(result.verdict())
    return result


def _remote(args: Any, path: str) -> tuple[LogResult, list]:
    """What a Ray task runs: one log, its output kept."""
    kept = Recorded()
    result = check_one(args, path, kept)
    return result, kept.items


def validate_many(args: Any, paths: list[str], printer: Any, workers: int = 2,
                  address: str | None = None) -> list[LogResult]:
    """Check every log of ``paths`` (one verdict each, handed to ``printer`` in their order):
    here one after the other, or with ``args.backend == "ray"`` as Ray tasks (``workers`` CPUs
    of a local cluster, or the cluster at ``address``), each task's search ``auto``."""
    if getattr(args, "backend", "auto") != "ray":
        return [check_one(args, p, printer) for p in paths]
    import copy

    from kvproof.checker.explicit.ray_backend import ray_session

    task_args = copy.copy(args)
    task_args.backend = "auto"
    task_args.func = None  # not sent: the command line's function
    results: list[LogResult] = []
    with ray_session(workers, address) as ray:
        task = ray.remote(num_cpus=1)(_remote)
        pending = [task.remote(task_args, p) for p in paths]
        for ref in pending:  # in the order of the logs: each printed as soon as it and those before are done
            result, items = ray.get(ref)
            kept = Recorded()
            kept.items = items
            kept.replay(printer)
            results.append(result)
    return results
