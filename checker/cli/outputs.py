"""The files a command writes: each checked before any input is read or search started (a path
that cannot be written is bad input, exit 3, with nothing written), and the ``--junit``,
``--sarif`` and ``--html`` files of a run over scenarios."""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from kvproof.checker.cli.common import BadInputError

__all__ = ["check_output", "check_outputs", "write_outputs"]


def check_output(path: str | None, flag: str, directory: bool = False) -> None:
    """Fail before any search if an output file (or, with ``directory``, a folder to write
    files in) cannot be written where it is asked for."""
    if path is None:
        return
    if "\0" in path:
        raise BadInputError(f"{flag} {path!r}: a file name cannot contain a NUL byte")
    p = Path(path)
    if len(os.fsencode(path)) > 4000 or any(len(os.fsencode(part)) > 255 for part in p.parts):
        raise BadInputError(f"{flag} {path[:80]}...: file name too long")
    if not directory and p.is_dir():
        raise BadInputError(f"{flag} {path}: is a directory, expected a file name")
    if directory and p.exists() and not p.is_dir():
        raise BadInputError(f"{flag} {path}: is a file, expected a folder")
    start = p if directory else p.parent
    parent = next((q for q in [start, *start.parents] if q.exists()), Path("."))
    if not parent.is_dir():
        raise BadInputError(f"{flag} {path}: cannot write under {parent}: not a folder")
    try:  # os.access says yes to root on a read-only file system: create and remove a file instead
        fd, probe = tempfile.mkstemp(dir=parent, prefix=".kvproof-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise BadInputError(f"{flag} {path}: cannot write under {parent}: {e.strerror or e}") from None


def check_outputs(args: argparse.Namespace, outputs) -> None:
    """Every output path of the command (its ``OUTPUTS``: argument, flag, a folder?, the flag
    that turns it off), checked before any input is read or search started."""
    for attr, flag, directory, off in outputs:
        if not (off and getattr(args, off, False)):
            check_output(getattr(args, attr, None), flag, directory)


def write_outputs(args: argparse.Namespace, reports) -> None:
    """Write the --junit, --sarif and --html files asked for (each writer imported only then:
    the HTML one loads rich)."""
    import importlib

    writers = (("junit", "junit", "write_junit"), ("sarif", "sarif", "write_sarif"), ("html", "html", "write_report"))
    for flag, module, name in writers:
        path = getattr(args, flag, None)
        if path is None:
            continue
        write = getattr(importlib.import_module(f"kvproof.checker.report.{module}"), name)
        try:
            write(path, reports)
        except OSError as e:
            raise BadInputError(f"--{flag} {path}: cannot write: {e.strerror or e}") from None
