"""``kvproof check --engine bmc|both``: bounded model checking with Z3 (shortest violations), or
the explicit verdicts cross-checked by the Z3 engines (bounded model checking and k-induction).
Exit codes are the command line's: 0 every verdict matches, 1 one does not (or the engines
disagree), 2 something is inconclusive (agreement not established), 3 bad input."""

from __future__ import annotations

import argparse
from pathlib import Path

from kvproof.checker.cli.common import (EXIT_OK, Progress, Tally, finish, json_reports, output_console, plural,
                                        reports_summary)

__all__ = ["DEFAULT_DEPTH", "check_symbolic"]

DEFAULT_DEPTH = 24
"""``--engine bmc``'s depth without ``--depth``."""


def check_symbolic(args: argparse.Namespace, scenarios: list, limits) -> int:
    """``check --engine bmc`` (bounded, shortest violations) or ``--engine both`` (the explicit
    verdicts, cross-checked by :func:`~kvproof.checker.symbolic.run.cross_check`).  ``--max-seconds`` is one
    budget for the command: every phase stops at ``limits``' deadline, Z3 calls included
    (:func:`~kvproof.checker.symbolic.watchdog.z3_deadline`)."""
    from kvproof.checker.symbolic.watchdog import z3_deadline

    with z3_deadline(limits.deadline()):
        return _check_symbolic(args, scenarios, limits)


def _check_symbolic(args: argparse.Namespace, scenarios: list, limits) -> int:
    from rich.text import Text

    from kvproof.checker.symbolic.cti import render_failure
    from kvproof.checker.report.render import render_reports
    from kvproof.checker.explicit.run import check_scenario
    from kvproof.checker.symbolic.run import check_scenario_bmc, cross_check

    traces_dir = None if args.no_traces else Path(args.traces)
    out = output_console(args)
    deadline = limits.deadline()
    show = not args.quiet and not args.json
    if args.engine == "bmc":
        depth = args.depth or DEFAULT_DEPTH
        reports = []
        with Progress(show, len(scenarios)) as progress:
            for sc in scenarios:
                progress.start(f"{sc.name}: bounded model checking to depth {depth} (Z3)")
                reports.append(check_scenario_bmc(sc, depth, args.invariant, traces_dir, args.max_seconds, deadline))
        summary = reports_summary("check", reports, f"bounded model checking to depth {depth}")
        if not args.json and not args.quiet:
            out.print(render_reports(reports, args.verbose), crop=False)
        return finish(args, summary, out, json_reports(reports))
    problems, gaps, reports, agreements = [], [], [], []
    with Progress(show, len(scenarios)) as progress:
        for sc in scenarios:
            progress.start(f"{sc.name}: explicit search")
            rep = check_scenario(sc, limits, args.invariant, traces_dir, progress)
            how = (f"bounded model checking to depth {args.depth}" if args.depth
                   else "bounded model checking and k-induction")
            progress.note(f"{sc.name}: {how} (Z3), {plural(len(rep.claims), 'claim')}")
            agreement = cross_check(rep, args.depth, args.invariant, args.max_seconds, deadline=deadline)
            problems += agreement.problems
            gaps += agreement.gaps
            reports.append(rep)
            agreements.append(agreement)
    claims = Tally.of((c.result, c.expected) for r in reports for c in r.claims)
    code = Tally(claims.matched, claims.mismatched + len(problems), claims.inconclusive + len(gaps)).exit_code
    meaning = ("the engines disagree" if problems else "agreement not established" if gaps
               else "every verdict matches its expectation and the engines agree" if code == EXIT_OK else "")
    summary = reports_summary("check", reports,
                              f"explicit search and Z3 compared: {plural(len(problems), 'disagreement')}, "
                              f"{len(gaps):,} not established", meaning, code)
    if args.json:
        doc = json_reports(reports)
        for entry, a in zip(doc["scenarios"], agreements):
            entry["agreement"] = {"bounded_depth": a.bounded.stats.depth, "proved_never_hit": a.proved,
                                  "problems": a.problems, "not_established": a.gaps,
                                  "counterexample_to_induction": a.failure.to_json() if a.failure else None}
        return finish(args, summary, out, doc)
    if not args.quiet:
        out.print(render_reports(reports, args.verbose), crop=False)
        for a in agreements:
            how = f"bounded model checking to depth {a.bounded.stats.depth}"
            if a.proved:
                how += f"; {len(a.proved)} claim(s) never hit, proved so for all depths by k-induction"
            out.print(f"{a.bounded.scenario.name}: {how}")
            if a.failure is not None:
                out.print(render_failure(a.bounded.scenario.name, a.failure))
        if problems:
            out.print(Text("The engines disagree:", style="bold red"))
            for p in problems:
                out.print(f"  {p}")
        if gaps:
            out.print(Text("Agreement not established:", style="yellow"))
            for p in gaps:
                out.print(f"  {p}")
        if not problems and not gaps:
            out.print(f"explicit and symbolic engines agree on {len(reports)} scenario(s)")
    return finish(args, summary, out)
