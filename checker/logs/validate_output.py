"""How ``kvproof validate`` reports: the text printer and the JSON Lines printer (one object per
finding, one ``verdict`` object per log, and the closing ``summary`` object), and the
:class:`~kvproof.checker.outcome.Summary` of a run over one log or many.

A printer has three methods: ``say`` (a line of the text report), ``finding`` (a JSON object:
a finding or a log's verdict) and ``summary`` (the closing :class:`Summary`).  Each writes at once
and flushes, so that a live run (``--follow``) reports a finding as soon as it is made.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Iterable

from kvproof.checker.outcome import (EXIT_BAD_INPUT, EXIT_INCONCLUSIVE, EXIT_MISMATCH, EXIT_OK, EXIT_UNEXPLAINED,
                                     Summary, plural)

__all__ = ["ANSWER_EXITS", "BAD_INPUT", "TextPrinter", "JsonPrinter", "exit_of", "summary_of"]

BAD_INPUT = "bad input"
"""The answer of a log that cannot be read (one of many: the run goes on with the next)."""

ANSWER_EXITS = {"explained": EXIT_OK, "violation": EXIT_MISMATCH, "undecided": EXIT_INCONCLUSIVE,
                "unexplained": EXIT_UNEXPLAINED, BAD_INPUT: EXIT_BAD_INPUT}
"""Each answer's exit code."""

_PRECEDENCE = ("violation", "unexplained", BAD_INPUT, "undecided", "explained")
"""Over many logs the run's exit code is that of the first of these answers some log got: a
violation is the strongest statement about the engines, then a line no behaviour explains."""

_MEANINGS = {
    "explained": "every event is explained by a behaviour that breaks no invariant",
    "violation": "a log shows a violation (or a possible one) of an invariant",
    "unexplained": "a line of a log is unexplained (no behaviour of the model produces it)",
    BAD_INPUT: "bad input",
    "undecided": "cannot decide (--max-states)",
}


def exit_of(answers: Iterable[str]) -> int:
    """The exit code of a run whose logs got ``answers`` (:data:`_PRECEDENCE`); 0 for none."""
    got = set(answers)
    return next((ANSWER_EXITS[a] for a in _PRECEDENCE if a in got), EXIT_OK)


def summary_of(answers: list[str], events: int) -> Summary:
    """The closing line of a run whose logs got ``answers`` and held ``events`` events in all:
    explained logs matched, violations and unexplained logs mismatched, undecided ones
    inconclusive (a log with bad input counts in none)."""
    code = exit_of(answers)
    worst = next((a for a in _PRECEDENCE if a in answers), "explained")
    return Summary("validate", f"{plural(len(answers), 'log')}, {plural(events, 'event')}",
                   answers.count("explained"), answers.count("violation") + answers.count("unexplained"),
                   answers.count("undecided"), code, _MEANINGS[worst])


class TextPrinter:
    """The text report on a rich console: every ``say`` line; findings are not printed again."""

    def __init__(self, out: Any):
        self.out = out

    def say(self, text: str, markup: bool = True) -> None:
        """Print one line of the report."""
        self.out.print(text, soft_wrap=True, markup=markup)
        _flush(self.out.file)

    def finding(self, obj: dict) -> None:
        """Nothing: the text lines said it."""

    def summary(self, s: Summary) -> int:
        """The closing line; its exit code."""
        code = s.print(self.out)
        _flush(self.out.file)
        return code


class JsonPrinter:
    """JSON Lines on ``stream``: one object per finding and verdict, then ``{"summary": ...}``."""

    def __init__(self, stream: Any = None):
        self.stream = stream or sys.stdout

    def say(self, text: str, markup: bool = True) -> None:
        """Nothing: the text report is not part of the JSON."""

    def finding(self, obj: dict) -> None:
        """One object, one line."""
        self.stream.write(json.dumps(obj, separators=(",", ":"), sort_keys=False) + "\n")
        _flush(self.stream)

    def summary(self, s: Summary) -> int:
        """The closing ``summary`` object; its exit code."""
        self.finding({"summary": s.to_json()})
        return s.exit_code


def _flush(stream: Any) -> None:
    flush = getattr(stream, "flush", None)
    if flush is not None:
        flush()
