"""``kvproof replay FILE``: re-execute a stored trace against the model and confirm its claim
still fails (a witness: holds) at its last state, a lasso's loop still a fair violating cycle."""

from __future__ import annotations

import argparse

from kvproof.checker.cli.common import Summary, Tally, console, plural
from kvproof.checker.cli.options import TRUST

__all__ = ["NAME", "add_parser", "run"]

NAME = "replay"


def add_parser(sub) -> None:
    """Register ``replay`` on the main parser's subcommands."""
    rp = sub.add_parser("replay", help="re-execute a stored trace against the model")
    rp.add_argument("file", metavar="FILE")
    rp.add_argument("--variant", action="append", metavar="FILE.py", help=TRUST)
    rp.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Re-execute a stored trace and confirm its claim still hits at its last state."""
    from kvproof.checker.explicit.liveness import lasso_is_fair
    from kvproof.checker.traces import read_trace
    from kvproof.model.machine import reference_hits
    from kvproof.model.replay import replay

    trace = read_trace(args.file)
    out = console()
    ran = f"1 trace of {plural(len(trace), 'step')} ({trace.scenario.name}, {trace.claim})"
    failed = Summary("replay", ran, 0, 1, 0, Tally(mismatched=1).exit_code, "the trace does not reproduce")
    passed = Summary("replay", ran, 1, 0, 0, Tally(matched=1).exit_code, "the trace reproduces")
    diverged = replay(trace.machine, trace.actions, trace.states)
    if diverged is not None:
        out.print(f"diverged at step {diverged.step}: {diverged.reason}")
        return failed.print(out)
    c = trace.machine.spec.claim(trace.claim)
    if c.kind == "liveness":
        why = lasso_is_fair(trace.machine, trace.claim, trace.states, trace.actions,
                            trace.loop if trace.loop is not None else -1)
        if why is not None:
            out.print(f"replayed {len(trace)} steps, but the lasso does not violate {trace.claim}: {why}")
            return failed.print(out)
        out.print(f"reproduced: {len(trace)} steps replay exactly and the loop from step {trace.loop} "
                  f"is a fair cycle that violates {trace.claim}")
        return passed.print(out)
    if not reference_hits(trace.machine.spec, c, trace.states[-1]):  # the reference interpreter's opinion
        out.print(f"replayed {len(trace)} steps, but {trace.claim} does not "
                  f"{'fail' if c.kind == 'invariant' else 'hold'} at the last state")
        return failed.print(out)
    what = "violation" if c.kind == "invariant" else "witness"
    out.print(f"reproduced: {len(trace)} steps replay exactly and the {what} of {trace.claim} holds at step {len(trace)}")
    return passed.print(out)
