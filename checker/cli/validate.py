"""``kvproof validate LOG``: search for a behaviour of the spec that explains an engine's event
log (:mod:`kvproof.checker.logs`); the exit code of its answer (:data:`VALIDATE_EXITS`)."""

from __future__ import annotations

import argparse

from kvproof.checker.cli.common import BadInput, console
from kvproof.checker.outcome import Inconclusive, Unexplained, Verified, Violated, exit_code
from kvproof.checker.cli.options import positive_int

__all__ = ["NAME", "OUTPUTS", "VALIDATE_OUTCOMES", "VALIDATE_EXITS", "add_parser", "run"]

NAME = "validate"
OUTPUTS = (("traces", "--traces", True, "no_traces"),)
"""The files ``validate`` writes, checked before it starts (:func:`~.outputs.check_outputs`)."""

VALIDATE_OUTCOMES = {"explained": Verified(), "violation": Violated(), "undecided": Inconclusive("--max-states"),
                     "unexplained": Unexplained(0)}
"""``validate``'s answers (:data:`kvproof.checker.logs.validate_command.ANSWERS`) as outcomes: a log
is expected to be explained by a behaviour that breaks no invariant."""

VALIDATE_EXITS = {answer: exit_code([(outcome, "verified")]) for answer, outcome in VALIDATE_OUTCOMES.items()}
"""``validate``'s answers and their exit codes (:func:`kvproof.checker.outcome.exit_code`)."""


def add_parser(sub) -> None:
    """Register ``validate`` on the main parser's subcommands."""
    va = sub.add_parser("validate", help="does a behaviour of the spec explain an engine's event log (JSONL)?",
                        description="Search for a behaviour of the spec that explains an engine's event log. "
                                    "Exit 0: explained; 1: a violation (every explanation up to an event breaks "
                                    "an invariant) or a possible violation (some explanation does; 0 with "
                                    "--certain-only); 5: unexplained, a line no behaviour produces (an event "
                                    "lost, duplicated or reordered) with no violation before it - a violation "
                                    "before an unexplained line wins, exit 1; 2: cannot decide (--max-states); "
                                    "3: bad input, wherever it is in the log.")
    va.add_argument("log", metavar="LOG", help="an event log: JSONL, a header line, then one event a line (schema 1)")
    va.add_argument("--max-states", type=positive_int, default=100_000, metavar="N",
                    help="cannot decide (exit 2) past N possible states at one event (default 100000)")
    va.add_argument("--traces", metavar="DIR", help="where a violation's trace goes (default: the log's directory)")
    va.add_argument("--no-traces", action="store_true", help="write no trace file")
    va.add_argument("--certain-only", action="store_true",
                    help="exit 0 for a log every event of which is explained by a behaviour that breaks no "
                         "invariant, even where another behaviour consistent with it breaks one (a possible "
                         "violation, exit 1 by default)")
    va.add_argument("--backend", choices=("auto", "native", "python", "factored"), default="auto",
                    help="the search: the factored frontier where the spec suits it, else its steps in C where a "
                         "C compiler is found (auto, the default); always in C (native); the reference in Python "
                         "(python); the factored frontier (factored); the same answer")
    va.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Search for a behaviour of the spec that explains an engine's event log (the protocol the
    log's header names supplies the ``validate`` command); the exit code of its answer
    (:data:`VALIDATE_EXITS`)."""
    from kvproof.checker.logs.validate_command import run_validate

    return VALIDATE_EXITS[run_validate(args, console(), BadInput)]
