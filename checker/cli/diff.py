"""``kvproof diff A B``: where two traces first diverge, and what differs there."""

from __future__ import annotations

import argparse

from kvproof.checker.cli.common import Summary, Tally, add_output_arguments, finish, output_console
from kvproof.checker.cli.options import TRUST

__all__ = ["NAME", "add_parser", "run"]

NAME = "diff"


def add_parser(sub) -> None:
    """Register ``diff`` on the main parser's subcommands."""
    df = sub.add_parser("diff", help="where two traces first diverge, and what differs")
    df.add_argument("a", metavar="A")
    df.add_argument("b", metavar="B")
    df.add_argument("--variant", action="append", metavar="FILE.py", help=TRUST)
    add_output_arguments(df)
    df.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Show where two traces first diverge and what differs there; exit 0 when identical."""
    from kvproof.checker.report.diff import diff_traces, render_diff
    from kvproof.checker.traces import read_trace

    a, b = read_trace(args.a), read_trace(args.b)
    d = diff_traces(a, b)
    out = output_console(args)
    out.print(render_diff(d, args.a, args.b))
    same = int(d.identical)
    summary = Summary("diff", "2 traces compared", same, 1 - same, 0, Tally(same, 1 - same).exit_code,
                      "the traces are identical" if same else "the traces differ")
    return finish(args, summary, out, {
        "a": args.a, "b": args.b, "identical": d.identical, "common_steps": d.common, "diverge": d.diverge,
        "settings": [{"setting": k, "a": x, "b": y} for k, x, y in d.settings],
        "fields": [{"field": k, "a": x, "b": y} for k, x, y in d.fields]})
