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

from kvproof.checker.outcome import (WORDINGS, BadInput, Inconclusive, Summary, Unexplained, Verified, Violated,
                                     exit_code, judge, outcome_named, plural)

__all__ = ["BAD_INPUT", "EXPECTED", "TextPrinter", "JsonPrinter", "exit_of", "summary_of"]

BAD_INPUT = WORDINGS["validate"][BadInput]
"""The answer of a log that cannot be read (one of many: the run goes on with the next)."""

EXPECTED = WORDINGS["validate"][Verified]
"""What every log is expected to be: explained by a behaviour that breaks no invariant.  Each
answer is the word of an outcome (:data:`~kvproof.checker.outcome.WORDINGS`), judged against it."""

_MEANINGS = {
    Verified: "every event is explained by a behaviour that breaks no invariant",
    Violated: "a log shows a violation (or a possible one) of an invariant",
    Unexplained: "a line of a log is unexplained (no behaviour of the model produces it)",
    BadInput: "bad input",
    Inconclusive: "cannot decide (--max-states)",
}
"""What the exit code means, by the outcome that decided it."""


def exit_of(answers: Iterable[str]) -> int:
    """The exit code of a run whose logs got ``answers``: :func:`~kvproof.checker.outcome.exit_code`
    of their outcomes against :data:`EXPECTED` (0 for none).  A log that cannot be read does not
    hide what the others show: it counts as bad input only when no other log shows a violation
    or an unexplained line (the run went on past it)."""
    outcomes = [outcome_named(a) for a in answers]
    shown = any(judge(o, EXPECTED) in ("mismatched", "unexplained") for o in outcomes)
    return exit_code((o, EXPECTED) for o in outcomes if not (shown and isinstance(o, BadInput)))


def summary_of(answers: list[str], events: int) -> Summary:
    """The closing line of a run whose logs got ``answers`` and held ``events`` events in all:
    explained logs matched, violations and unexplained logs mismatched, undecided ones
    inconclusive (a log with bad input counts in none); its verdict and meaning are those of the
    answer that decided the exit code."""
    code = exit_of(answers)
    worst = next((a for a in answers if exit_of([a]) == code), EXPECTED)
    return Summary("validate", f"{plural(len(answers), 'log')}, {plural(events, 'event')}",
                   answers.count("explained"), answers.count("violation") + answers.count("unexplained"),
                   answers.count("undecided"), code, _MEANINGS[type(outcome_named(worst))], worst)


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
    """JSON Lines on ``stream``: one object per finding and verdict, then the closing one."""

    def __init__(self, stream: Any = None):
        self.stream = stream or sys.stdout

    def say(self, text: str, markup: bool = True) -> None:
        """Nothing: the text report is not part of the JSON."""

    def finding(self, obj: dict) -> None:
        """One object, one line."""
        self.stream.write(json.dumps(obj, separators=(",", ":"), sort_keys=False) + "\n")
        _flush(self.stream)

    def summary(self, s: Summary) -> int:
        """The closing object (:meth:`~kvproof.checker.outcome.Summary.document`: ``command``,
        ``verdict``, ``exit_code``, ``summary``); its exit code."""
        self.finding(s.document())
        return s.exit_code


def _flush(stream: Any) -> None:
    flush = getattr(stream, "flush", None)
    if flush is not None:
        flush()
