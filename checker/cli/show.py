"""``kvproof show FILE``: render a stored trace (text, one block per step; JSON step records; or
a Mermaid sequence diagram), once replay confirms it is what it claims."""

from __future__ import annotations

import argparse
import json
import sys

from kvproof.checker.cli.common import EXIT_OK, BadInputError, console
from kvproof.checker.cli.options import TRUST

__all__ = ["NAME", "add_parser", "run"]

NAME = "show"


def add_parser(sub) -> None:
    """Register ``show`` on the main parser's subcommands."""
    sh = sub.add_parser("show", help="render a stored trace, once replay confirms it")
    sh.add_argument("file", metavar="FILE")
    sh.add_argument("--step", type=int, metavar="N", help="show only step N")
    sh.add_argument("--format", choices=("text", "json", "mermaid"), default="text",
                    help="text (default), json step records, or a Mermaid sequence diagram")
    sh.add_argument("--only", nargs="+", metavar="NAME",
                    help="follow a page (p3, q0), a request (R1) or a field (owner, owner[p3]) through the trace")
    sh.add_argument("--full", action="store_true",
                    help="also print every field of the state after each step shown (json: a state object per step)")
    sh.add_argument("--variant", action="append", metavar="FILE.py", help=TRUST)
    sh.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Render a stored trace: text (one block per step), JSON step records, or Mermaid."""
    from kvproof.checker.report.focus import Focus, FocusError
    from kvproof.checker.report.mermaid import trace_mermaid
    from kvproof.checker.report.render import render_trace
    from kvproof.checker.report.trace_json import trace_records
    from kvproof.checker.traces import read_trace

    trace = read_trace(args.file)
    problem = _unverified(trace)
    if problem is not None:
        raise BadInputError(f"{args.file}: {problem}; not shown (kvproof replay {args.file} says more)")
    if args.step is not None and not 0 <= args.step <= len(trace):
        raise BadInputError(f"--step {args.step}: the trace has steps 0..{len(trace)}")
    try:
        only = Focus.of(trace, args.only) if args.only else None
    except FocusError as e:
        raise BadInputError(str(e)) from None
    if args.format == "json":
        doc = trace_records(trace, args.step, only)
        if args.full:  # every field of the state after each step (and before the first)
            from kvproof.checker.states import named_values

            layout = trace.machine.spec.layout
            if args.step in (None, 0):
                doc["initial_state"] = named_values(layout, trace.states[0])
            for record in doc["steps"]:
                record["state"] = named_values(layout, trace.states[record["step"]])
        print(json.dumps(doc, indent=2, ensure_ascii=False))
    elif args.format == "mermaid":
        if args.step is not None or args.full:
            raise BadInputError(f"{'--step' if args.step is not None else '--full'} applies to --format text and json, "
                           "not mermaid")
        sys.stdout.write(trace_mermaid(trace, only))
    else:
        console().print(render_trace(trace, args.step, only, full=args.full))
    return EXIT_OK


def _unverified(trace) -> str | None:
    """Why ``trace`` cannot be shown as what it claims (``None``: it can): its stored states
    differ from what replaying its actions gives, or its claim does not fail (a witness: does not
    hold) at its last state, as in a file cut short, or a lasso is not a fair violating cycle."""
    from kvproof.checker.explicit.liveness import lasso_is_fair
    from kvproof.model.machine import reference_hits
    from kvproof.model.replay import replay

    diverged = replay(trace.machine, trace.actions, trace.states)
    if diverged is not None:
        return f"the stored states do not match replay at step {diverged.step}: {diverged.reason}"
    c = trace.machine.spec.claim(trace.claim)
    if c.kind == "liveness":
        why = lasso_is_fair(trace.machine, trace.claim, trace.states, trace.actions,
                            trace.loop if trace.loop is not None else -1)
        return None if why is None else f"the lasso does not violate {trace.claim}: {why}"
    if not reference_hits(trace.machine.spec, c, trace.states[-1]):
        verb = "fail" if c.kind == "invariant" else "hold"
        return (f"{trace.claim} does not {verb} at its last state (step {len(trace)}) on replay: "
                "the trace was cut short or edited")
    return None
