"""``kvproof replay FILE``: re-execute a stored trace against the model and confirm its claim
still fails (a witness: holds) at its last state, a lasso's loop still a fair violating cycle."""

from __future__ import annotations

import argparse

from kvproof.checker.cli.common import Summary, Tally, add_output_arguments, finish, output_console, plural
from kvproof.checker.cli.options import TRUST

__all__ = ["NAME", "add_parser", "run"]

NAME = "replay"


def add_parser(sub) -> None:
    """Register ``replay`` on the main parser's subcommands."""
    rp = sub.add_parser("replay", help="re-execute a stored trace against the model")
    rp.add_argument("file", metavar="FILE")
    rp.add_argument("--variant", action="append", metavar="FILE.py", help=TRUST)
    add_output_arguments(rp)
    rp.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Re-execute a stored trace and confirm its claim still hits at its last state."""
    from kvproof.checker.traces import read_trace

    trace = read_trace(args.file)
    out = output_console(args)
    ran = f"1 trace of {plural(len(trace), 'step')} ({trace.scenario.name}, {trace.claim})"
    why = _replayed(trace)
    out.print(why[1])
    reproduced = why[0]
    summary = Summary("replay", ran, int(reproduced), int(not reproduced), 0,
                      Tally(int(reproduced), int(not reproduced)).exit_code,
                      "the trace reproduces" if reproduced else "the trace does not reproduce")
    return finish(args, summary, out, {"trace": args.file, "scenario": trace.scenario.name, "claim": trace.claim,
                                       "steps": len(trace), "loop": trace.loop, "reproduced": reproduced,
                                       "why": why[1]})


def _replayed(trace) -> tuple[bool, str]:
    """Whether ``trace`` reproduces (its steps replay exactly and its claim still hits at its
    last state, a lasso's loop a fair violating cycle), and the line that says so."""
    from kvproof.checker.explicit.liveness import lasso_is_fair
    from kvproof.model.machine import reference_hits
    from kvproof.model.replay import replay

    diverged = replay(trace.machine, trace.actions, trace.states)
    if diverged is not None:
        return False, f"diverged at step {diverged.step}: {diverged.reason}"
    c = trace.machine.spec.claim(trace.claim)
    if c.kind == "liveness":
        why = lasso_is_fair(trace.machine, trace.claim, trace.states, trace.actions,
                            trace.loop if trace.loop is not None else -1)
        if why is not None:
            return False, f"replayed {len(trace)} steps, but the lasso does not violate {trace.claim}: {why}"
        return True, (f"reproduced: {len(trace)} steps replay exactly and the loop from step {trace.loop} "
                      f"is a fair cycle that violates {trace.claim}")
    if not reference_hits(trace.machine.spec, c, trace.states[-1]):  # the reference interpreter's opinion
        return False, (f"replayed {len(trace)} steps, but {trace.claim} does not "
                       f"{'fail' if c.kind == 'invariant' else 'hold'} at the last state")
    what = "violation" if c.kind == "invariant" else "witness"
    return True, f"reproduced: {len(trace)} steps replay exactly and the {what} of {trace.claim} holds at step {len(trace)}"
