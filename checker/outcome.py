"""How a command ends: the one outcome type, the one map from outcomes to exit codes, what each
code means, and the closing line every command prints (:class:`Summary`).

Every engine and every command says what it found with one of these nouns (the ``verdict`` word
each carries is what the text and JSON output print):

- :class:`Verified` / :class:`Violated` ``(trace)``: an invariant or liveness claim held on every
  reachable state of a complete search, or failed (with its counterexample);
- :class:`Reached` ``(trace)`` / :class:`Unreachable`: a witness reached, or never reached by a
  complete search;
- :class:`Proved` ``(certificate)`` / :class:`Refuted` ``(trace)``: a symbolic proof (an unsat
  answer) or refutation; a proof establishes what *verified* does, a refutation what *violated*
  does;
- :class:`Inconclusive` ``(reason, stats)``: a limit or an engine cut the work short;
- :class:`Unexplained` ``(line)``: a line of an event log no behaviour of the model produces;
- :class:`BadInput` ``(message)``: the input could not be used.

:func:`judge` compares one outcome with what was expected of it (``matched``, ``mismatched``,
``inconclusive``, ``unexplained``, ``bad input``); :class:`Tally` counts the judgements of a run;
:func:`exit_code` is the one map from them to the process's exit code, used by every command.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any, Iterable

__all__ = ["EXIT_OK", "EXIT_MISMATCH", "EXIT_INCONCLUSIVE", "EXIT_BAD_INPUT", "EXIT_OUT_OF_MEMORY",
           "EXIT_UNEXPLAINED", "EXIT_INTERRUPTED", "EXIT_BROKEN_PIPE", "EXIT_MEANINGS", "Verified", "Violated",
           "Reached", "Unreachable", "Proved", "Refuted", "Inconclusive", "Unexplained", "BadInput", "Outcome",
           "WORDINGS", "VERDICTS", "worded", "outcome_named", "judge", "Tally", "exit_code", "JUDGEMENTS", "Summary",
           "console", "plural"]

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


@dataclass(frozen=True)
class Verified:
    """The invariant or liveness claim holds on every reachable state (a complete search)."""

    trace: Any = None
    verdict: str = "verified"


@dataclass(frozen=True)
class Violated:
    """The invariant or liveness claim fails; ``trace`` is its counterexample (shortest for an
    invariant, a fair lasso for a liveness claim)."""

    trace: Any = None
    verdict: str = "violated"


@dataclass(frozen=True)
class Reached:
    """The witness is reachable; ``trace`` is a shortest path to a state where it holds."""

    trace: Any = None
    verdict: str = "reached"


@dataclass(frozen=True)
class Unreachable:
    """The witness holds in no reachable state (a complete search): the checks it guards may be
    vacuous."""

    trace: Any = None
    verdict: str = "unreachable"


@dataclass(frozen=True)
class Proved:
    """The claim is proved by a solver's unsat answer (k-induction, an inductive invariant, an
    all-sizes certificate); ``certificate`` is where the proof was written, if it was.  It
    establishes what :class:`Verified` does.  ``verdict`` is ``proved``, or ``holds`` for a
    claim proved at one size through the link."""

    certificate: Any = None
    verdict: str = "proved"


@dataclass(frozen=True)
class Refuted:
    """A symbolic engine found the claim false; ``trace`` is its counterexample.  It establishes
    what :class:`Violated` does."""

    trace: Any = None
    verdict: str = "refuted"


@dataclass(frozen=True)
class Inconclusive:
    """The work stopped before it could decide; ``reason`` says which limit (or engine) stopped
    it, ``stats`` what it had done by then."""

    reason: str
    stats: Any = None
    verdict: str = "inconclusive"


@dataclass(frozen=True)
class Unexplained:
    """A line of an event log that no behaviour of the model produces; ``line`` is its number,
    ``why`` what the model could not do."""

    line: int
    why: str = ""
    verdict: str = "unexplained"


@dataclass(frozen=True)
class BadInput:
    """The input could not be used (``message``: one line naming the problem)."""

    message: str
    verdict: str = "bad input"


Outcome = Verified | Violated | Reached | Unreachable | Proved | Refuted | Inconclusive | Unexplained | BadInput

WORDINGS: dict[str, dict[type, str]] = {
    "audit": {Verified: "not exposed", Violated: "exposed", Inconclusive: "cannot decide", BadInput: "bad input"},
    "validate": {Verified: "explained", Violated: "violation", Inconclusive: "undecided", Unexplained: "unexplained",
                 BadInput: "bad input"},
    "conform": {Verified: "reproduced", Violated: "diverged", Inconclusive: "not run"},
    "conform --random": {Verified: "agrees", Violated: "disagrees", Inconclusive: "not run"},
    "audit claim": {Verified: "holds", Violated: "violated", Inconclusive: "cut short"},
    "report": {Violated: "exposed", Verified: "safe", Inconclusive: "undecided"},
}
"""The commands that speak of their outcomes in words of their own: for each, the word it prints
for each outcome.  ``audit``'s *exposed* is a violation of what a deployment is expected to be
(*not exposed*); ``validate``'s answers are outcomes of the expectation that a log is explained
by a behaviour that breaks no invariant; ``conform``'s are a stored trace reproduced on the real
engine's code or not (``--random``: a random sequence agrees with it or not); an audit's claim
*holds* in a scenario of the family, is *violated* there, or its search was *cut short*; a
report's headline calls a configuration *exposed* (a safety or liveness claim violated), *safe*
(every one verified by a complete search) or *undecided*."""

VERDICTS: dict[str, type] = {
    **{word: cls for words in WORDINGS.values() for cls, word in words.items()},
    "verified": Verified, "violated": Violated, "reached": Reached, "unreachable": Unreachable,
    "proved": Proved, "holds": Proved, "refuted": Refuted, "inconclusive": Inconclusive,
    "unexplained": Unexplained, "bad input": BadInput,
}
"""Every verdict word any engine or command prints, and the outcome it names."""

_ESTABLISHES = {Proved: Verified, Refuted: Violated}
_UNDECIDED = {Inconclusive: "inconclusive", Unexplained: "unexplained", BadInput: "bad input"}


def worded(command: str, cls: type, *payload: Any) -> Outcome:
    """The outcome ``cls`` (with ``payload``, its fields in order) as ``command`` words it
    (:data:`WORDINGS`): ``worded("audit", Violated, trace)`` is a violation whose verdict word is
    *exposed*."""
    return cls(*payload, verdict=WORDINGS[command][cls])


def outcome_named(verdict: str) -> Outcome:
    """The outcome a verdict word names (a :data:`VERDICTS` key), with no payload: for a
    report that keeps its verdicts as words (``prove``'s rows, the all-sizes reports)."""
    cls = VERDICTS[verdict]
    if cls is Inconclusive or cls is BadInput:
        return cls("", verdict=verdict)
    if cls is Unexplained:
        return cls(0, verdict=verdict)
    return cls(verdict=verdict)


def judge(outcome: Outcome, expected: str | None = None) -> str:
    """How ``outcome`` compares with the verdict ``expected`` of it: ``inconclusive``,
    ``unexplained`` or ``bad input`` whatever was expected; otherwise ``matched`` when it is the
    outcome the expected word names (:data:`VERDICTS`: a proof matches *verified*, a refutation
    *violated*, *exposed* is a violation) or nothing was expected, ``mismatched`` when not."""
    undecided = _UNDECIDED.get(type(outcome))
    if undecided:
        return undecided
    if expected is None or expected == outcome.verdict:
        return "matched"
    named = VERDICTS.get(expected)
    return "matched" if named is not None and named in (type(outcome), _ESTABLISHES.get(type(outcome))) else "mismatched"


@dataclass(frozen=True)
class Tally:
    """How a run's outcomes compare with their expectations: the counts :func:`exit_code`
    maps to the exit code."""

    matched: int = 0
    mismatched: int = 0
    inconclusive: int = 0
    unexplained: int = 0
    bad_input: int = 0

    @classmethod
    def of(cls, judged: Iterable[tuple[Outcome, str | None]]) -> Tally:
        """The tally of ``(outcome, expected verdict)`` pairs (see :func:`judge`)."""
        counts = {"matched": 0, "mismatched": 0, "inconclusive": 0, "unexplained": 0, "bad input": 0}
        for outcome, expected in judged:
            counts[judge(outcome, expected)] += 1
        return cls(counts["matched"], counts["mismatched"], counts["inconclusive"], counts["unexplained"],
                   counts["bad input"])

    @property
    def exit_code(self) -> int:
        """:func:`exit_code` of this tally."""
        return exit_code(self)


def exit_code(outcomes: Tally | Iterable[tuple[Outcome, str | None]]) -> int:
    """The one map from a run's outcomes (a :class:`Tally`, or ``(outcome, expected verdict)``
    pairs) to its exit code, in this order: bad input 3; else an outcome that is not the
    expected one 1; else an unexplained log line 5; else an inconclusive outcome 2; else 0."""
    t = outcomes if isinstance(outcomes, Tally) else Tally.of(outcomes)
    if t.bad_input:
        return EXIT_BAD_INPUT
    if t.mismatched:
        return EXIT_MISMATCH
    if t.unexplained:
        return EXIT_UNEXPLAINED
    if t.inconclusive:
        return EXIT_INCONCLUSIVE
    return EXIT_OK


JUDGEMENTS: dict[int, str] = {Tally(**{field: 1}).exit_code: word for field, word in (
    ("matched", "matched"), ("mismatched", "mismatched"), ("inconclusive", "inconclusive"),
    ("unexplained", "unexplained"), ("bad_input", "bad input"))}
"""A run's verdict word for each exit code :func:`exit_code` gives (the :func:`judge` word of
the judgement that decided it): what the ``verdict`` key of a command's ``--json`` says when the
command has no word of its own (:data:`WORDINGS`)."""


def plural(n: int, word: str) -> str:
    """``n`` and ``word``, with an ``s`` unless ``n`` is one (``1 claim``, ``1,024 claims``)."""
    return f"{n:,} {word if n == 1 else word + 's'}"


@dataclass(frozen=True)
class Summary:
    """How a run ended, in the one closing line every command prints (and the top of its
    ``--json`` document, :meth:`document`): what ran, how many claims matched their expectation,
    how many did not, how many are inconclusive, what the exit code means and the run's verdict
    word (the command's own, else :data:`JUDGEMENTS`)."""

    command: str
    ran: str
    matched: int
    mismatched: int
    inconclusive: int
    exit_code: int
    meaning: str = ""
    verdict: str = ""

    def __post_init__(self) -> None:
        if not self.meaning:
            object.__setattr__(self, "meaning", EXIT_MEANINGS.get(self.exit_code, ""))
        if not self.verdict:
            object.__setattr__(self, "verdict", JUDGEMENTS.get(self.exit_code, ""))

    def line(self) -> str:
        """The closing line, e.g. ``kvproof check: 1 scenario, 12 claims (explicit search): 12
        matched, 0 mismatched, 0 inconclusive; exit 0: every verdict matches its expectation``."""
        return (f"kvproof {self.command}: {self.ran}: {self.matched:,} matched, {self.mismatched:,} mismatched, "
                f"{self.inconclusive:,} inconclusive; exit {self.exit_code}: {self.meaning}")

    def to_json(self) -> dict[str, Any]:
        """The ``summary`` object of the command's ``--json`` document."""
        return {"command": self.command, "ran": self.ran, "matched": self.matched, "mismatched": self.mismatched,
                "inconclusive": self.inconclusive, "exit_code": self.exit_code, "meaning": self.meaning}

    def document(self, body: dict[str, Any] | None = None) -> dict[str, Any]:
        """A command's whole ``--json`` document: the same top-level keys on every command -
        ``command``, ``verdict`` (the run's verdict word), ``exit_code`` - then the command's own
        ``body``, then the ``summary`` object (:meth:`to_json`)."""
        head = {"command": self.command, "verdict": self.verdict, "exit_code": self.exit_code}
        return {**head, **{k: v for k, v in (body or {}).items() if k not in head}, "summary": self.to_json()}

    def end(self, out=None, body: dict[str, Any] | None = None) -> int:
        """How every command ends: with ``body`` (``--json``), print the :meth:`document` of it
        as one JSON object on stdout (a value JSON has no type for as its text); else the closing line on ``out`` (nothing on a quiet
        console: ``--quiet``).  Returns the exit code."""
        if body is None:
            return self.print(out)
        import json

        sys.stdout.write(json.dumps(self.document(body), indent=2, ensure_ascii=False, default=str) + "\n")
        sys.stdout.flush()
        return self.exit_code

    def print(self, out=None) -> int:
        """Print the closing line on ``out`` (default: a console on stdout; colour only on a
        terminal, and never with ``NO_COLOR``) and return the exit code."""
        from rich.text import Text

        out = out or console()
        out.print(Text(self.line(), style=_EXIT_STYLES.get(self.exit_code, "bold red")), soft_wrap=True)
        return self.exit_code


def console(stream=None, quiet: bool = False):
    """Rich console on stdout; a pipe or CI log gets no colour codes and ``COLUMNS`` columns
    (120 when it is not set), the width prose is wrapped at (tables of verdicts are plain aligned
    columns, never cut: :class:`~kvproof.checker.report.columns.AlignedTable`).  When the
    reader of the pipe leaves (``kvproof show … | head``), printing raises ``BrokenPipeError``
    for ``main`` to end quietly with exit 141 (rich's own handling exits 1, kvproof's code for
    a verdict that does not match).  A ``quiet`` console prints nothing (``--quiet``, ``--json``)."""
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            raise BrokenPipeError(32, "Broken pipe")

    stream = stream or sys.stdout
    columns = os.environ.get("COLUMNS", "")
    width = None if stream.isatty() else int(columns) if columns.isdigit() and int(columns) > 0 else 120
    return _Console(file=stream, highlight=False, width=width, quiet=quiet)


