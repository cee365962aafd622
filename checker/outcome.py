"""How a command ends: the exit codes, what each means, and the closing line every command
prints (:class:`Summary`), shared by the command line and every role that reports to it (audit,
validate, certify), so the general layers below the command line can end a command the same way.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any

__all__ = ["EXIT_OK", "EXIT_MISMATCH", "EXIT_INCONCLUSIVE", "EXIT_BAD_INPUT", "EXIT_OUT_OF_MEMORY",
           "EXIT_UNEXPLAINED", "EXIT_INTERRUPTED", "EXIT_BROKEN_PIPE", "EXIT_MEANINGS", "Summary", "console", "plural"]

EXIT_OK, EXIT_MISMATCH, EXIT_INCONCLUSIVE, EXIT_BAD_INPUT = 0, 1, 2, 3
EXIT_OUT_OF_MEMORY = 4  # the search ran out of memory: one line with the advice (fingerprints, symmetry, workers)
EXIT_UNEXPLAINED = 5  # validate: a line of the log no behaviour of the model explains (lost, duplicated, reordered)
EXIT_INTERRUPTED = 130  # Ctrl-C (SIGINT), as shells report it
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: the reader of the output left (`kvproof show … | head`)


EXIT_MEANINGS = {  # what an exit code means when the command has nothing more particular to say
    EXIT_OK: "every verdict matches its expectation",
    EXIT_MISMATCH: "a verdict does not match its expectation",
    EXIT_INCONCLUSIVE: "a result is inconclusive (a limit cut the work short)",
    EXIT_BAD_INPUT: "bad input",
    EXIT_UNEXPLAINED: "a line of the log is unexplained (no behaviour of the model produces it)",
}
_EXIT_STYLES = {EXIT_OK: "bold green", EXIT_MISMATCH: "bold red", EXIT_INCONCLUSIVE: "bold yellow"}


def plural(n: int, word: str) -> str:
    """``n`` and ``word``, with an ``s`` unless ``n`` is one (``1 claim``, ``1,024 claims``)."""
    return f"{n:,} {word if n == 1 else word + 's'}"


@dataclass(frozen=True)
class Summary:
    """How a run ended, in the one closing line every command prints (and the ``summary``
    object of its ``--json``): what ran, how many claims matched their expectation, how many
    did not, how many are inconclusive, and what the exit code means."""

    command: str
    ran: str
    matched: int
    mismatched: int
    inconclusive: int
    exit_code: int
    meaning: str = ""

    def __post_init__(self) -> None:
        if not self.meaning:
            object.__setattr__(self, "meaning", EXIT_MEANINGS.get(self.exit_code, ""))

    def line(self) -> str:
        """The closing line, e.g. ``kvproof check: 1 scenario, 12 claims (explicit search): 12
        matched, 0 mismatched, 0 inconclusive; exit 0: every verdict matches its expectation``."""
        return (f"kvproof {self.command}: {self.ran}: {self.matched:,} matched, {self.mismatched:,} mismatched, "
                f"{self.inconclusive:,} inconclusive; exit {self.exit_code}: {self.meaning}")

    def to_json(self) -> dict[str, Any]:
        """The ``summary`` object of the command's ``--json`` document."""
        return {"command": self.command, "ran": self.ran, "matched": self.matched, "mismatched": self.mismatched,
                "inconclusive": self.inconclusive, "exit_code": self.exit_code, "meaning": self.meaning}

    def print(self, out=None) -> int:
        """Print the closing line on ``out`` (default: a console on stdout; colour only on a
        terminal, and never with ``NO_COLOR``) and return the exit code."""
        from rich.text import Text

        out = out or console()
        out.print(Text(self.line(), style=_EXIT_STYLES.get(self.exit_code, "bold red")), soft_wrap=True)
        return self.exit_code


def console(stream=None):
    """Rich console on stdout; a pipe or CI log gets no colour codes and ``COLUMNS`` columns
    (120 when it is not set), the width prose is wrapped at (tables of verdicts are plain aligned
    columns, never cut: :class:`~kvproof.checker.report.columns.AlignedTable`).  When the
    reader of the pipe leaves (``kvproof show … | head``), printing raises ``BrokenPipeError``
    for ``main`` to end quietly with exit 141 (rich's own handling exits 1, kvproof's code for
    a verdict that does not match)."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            raise BrokenPipeError(32, "Broken pipe")

    stream = stream or sys.stdout
    columns = os.environ.get("COLUMNS", "")
    width = None if stream.isatty() else int(columns) if columns.isdigit() and int(columns) > 0 else 120
    return _Console(file=stream, highlight=False, width=width)


