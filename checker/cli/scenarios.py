"""Running scenarios through the explicit engine, as ``check`` and ``report`` do: the scenarios
named (two with one name refused), the limits of the command (``--max-states``, ``--max-depth``,
``--max-seconds``), and the run over them with its progress bar."""

from __future__ import annotations

import argparse
import sys

from kvproof.checker.cli.common import BadInputError, Progress
from kvproof.model.scenario import Scenario

__all__ = ["unique", "limits_of", "run_scenarios"]


def unique(scenarios: list[Scenario]) -> list[Scenario]:
    """The scenarios, refusing two different ones with one name (their traces would collide)."""
    seen: dict[str, Scenario] = {}
    for sc in scenarios:
        other = seen.setdefault(sc.name, sc)
        if other is not sc and other.origin != sc.origin:
            raise BadInputError(f"{sc.origin}: name: {sc.name!r} is also the name of {other.origin}; expected unique names")
    return list(seen.values())


def limits_of(args: argparse.Namespace):
    """The limit flags; ``--max-seconds`` is one budget for the whole command (``args.budget``,
    set by :func:`main`: from process start for the console command), across every scenario
    and phase."""
    from kvproof.checker.explicit.search import Limits

    budget = getattr(args, "budget", None)
    if budget is not None:
        return budget.limits(args.max_states, args.max_depth)
    return Limits(args.max_states, None, args.max_depth)


def run_scenarios(scenarios, limits, only, traces_dir, show_progress: bool, budget=None, table: bool = False,
         html: bool = False, **engine) -> list:
    """Check every scenario in turn, with a progress bar on long runs; ``engine`` holds the
    explicit engine's options (visited set, symmetry, the backend object).  With the command's
    ``budget`` (``--max-seconds``), each scenario's phases also keep back the time that
    reporting the scenarios before it takes: their rows of the verdict table (``table``), their
    counterexamples in the HTML report (``html``; :mod:`kvproof.checker.budget`)."""
    from kvproof.checker.budget import HTML_TRACE_SECONDS, ROW_SECONDS
    from kvproof.checker.explicit.run import check_scenario

    progress = Progress(show_progress, len(scenarios))
    reports = []
    keep = 0.0
    try:
        for sc in scenarios:
            progress.start(sc.name)
            if budget is not None:
                limits = budget.limits(limits.max_states, limits.max_depth, keep)
            report = check_scenario(sc, limits, only, traces_dir, progress, **engine)
            if report.stats.states:  # a scenario no search reached is one name in the table, not its rows
                keep += ROW_SECONDS * len(report.claims) * table
                keep += HTML_TRACE_SECONDS * sum(c.verdict == "violated" for c in report.claims) * html
            if report.symmetry.startswith("refused"):
                print(f"kvproof: {sc.name}: symmetry {report.symmetry}; searched without reduction", file=sys.stderr)
            reports.append(report)
    finally:
        progress.stop()
    return reports
