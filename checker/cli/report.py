"""``kvproof report``: check scenarios and write one self-contained HTML report (verdicts,
sequence diagrams, page timelines)."""

from __future__ import annotations

import argparse

from kvproof.checker.cli.common import add_output_arguments, finish, json_reports, output_console, reports_summary, resolve
from kvproof.checker.cli.options import MAX_SECONDS, positive_float, positive_int
from kvproof.checker.cli.outputs import write_outputs
from kvproof.checker.cli.scenarios import limits_of, run_scenarios, unique
from kvproof.model.scenario import builtins

__all__ = ["NAME", "OUTPUTS", "VARIANT_SCENARIOS", "add_parser", "run"]

NAME = "report"
OUTPUTS = (("output", "-o", False, None),)
"""The files ``report`` writes, checked before it starts (:func:`~.outputs.check_outputs`)."""
VARIANT_SCENARIOS = True
"""A ``--variant`` file's own ``SCENARIO`` joins the scenarios named."""


def add_parser(sub) -> None:
    """Register ``report`` on the main parser's subcommands."""
    rp_ = sub.add_parser("report", help="check scenarios and write a self-contained HTML report")
    rp_.add_argument("scenarios", nargs="*", metavar="SCENARIO", help="built-in name or scenario .toml file")
    rp_.add_argument("-o", "--output", default="report.html", metavar="FILE", help="where (default: report.html)")
    rp_.add_argument("--max-states", type=positive_int, metavar="N", help="stop after N distinct states")
    rp_.add_argument("--max-seconds", type=positive_float, metavar="S", help=MAX_SECONDS)
    rp_.add_argument("--max-depth", type=positive_int, metavar="D", help="explore at most D steps deep")
    add_output_arguments(rp_)
    rp_.add_argument("--variant", action="append", metavar="FILE.py",
                     help="trust an engine variant (code) and check its SCENARIO if it has one (repeatable)")
    rp_.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Check scenarios and write the HTML report (verdicts, sequence diagrams, page timelines)."""

    scenarios = unique([resolve(n) for n in args.scenarios]) if args.scenarios else builtins()
    for sc in scenarios:
        sc.build()
    limits = limits_of(args)
    reports = run_scenarios(scenarios, limits, None, None, not args.quiet and not args.json, budget=args.budget,
                            html=True)
    args.html, args.junit, args.sarif = args.output, None, None
    write_outputs(args, reports)
    summary = reports_summary("report", reports, "explicit search")
    from kvproof.checker.report.html import counterexamples

    cx = len(counterexamples(reports))
    out = output_console(args)
    out.print(f"wrote {args.output}: {len(reports)} scenario{'s' if len(reports) != 1 else ''}, "
              f"{cx} counterexample{'s' if cx != 1 else ''}", soft_wrap=True)  # a path is not wrapped
    return finish(args, summary, out, {"report": args.output, **json_reports(reports)})
