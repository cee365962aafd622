"""``kvproof simulate SCENARIO``: a long random workload through a scenario's engine (the
protocol's workload simulator), counting the responses that read another request's KV; the run
up to the first exposure is written as a trace (sliced to the requests involved when long).

The protocol's ``simulate`` command is a module (or object) with ``scenario_of(scenario, args)``
(the scenario to run, from the options the protocol adds to the command through
:attr:`~kvproof.model.protocol.Protocol.arguments`), ``setting(args)`` (what the run is over, for its first line),
``simulate(machine, requests, seed, fault_weight, progress)`` returning an exposure with
``lines()`` and the counts printed here, ``slice_exposure(machine, exposure)`` and ``CLAIM``
(the claim an exposure breaks)."""

from __future__ import annotations

import argparse
import time

from kvproof.checker.cli.common import (BadInputError, Progress, Summary, Tally, add_output_arguments,
                                        add_protocol_arguments, finish, output_console, plural, resolve)
from kvproof.checker.cli.options import TRUST, positive_float, positive_int

__all__ = ["NAME", "OUTPUTS", "add_parser", "run"]

NAME = "simulate"
OUTPUTS = (("traces", "--traces", True, "no_traces"),)
"""The files ``simulate`` writes, checked before it starts (:func:`~.outputs.check_outputs`)."""


def add_parser(sub) -> None:
    """Register ``simulate`` on the main parser's subcommands."""
    sm = sub.add_parser("simulate", help="random long workload: how many responses read another's data",
                        description="Run a long random workload through a scenario's engine and count the "
                                    "responses that read another request's KV. Exit 0 when none did, 1 when one "
                                    "did (an exposure; 0 with --report-only), 3 on bad input.")
    sm.add_argument("scenario", metavar="SCENARIO", help="built-in name or scenario .toml file")
    sm.add_argument("--requests", type=positive_int, default=10_000, metavar="N",
                    help="requests to send in all (default 10000)")
    add_protocol_arguments(sm, "simulate")  # the workload's own sizes (pages, requests in flight)
    sm.add_argument("--seed", type=int, default=0, metavar="S",
                    help="seed of the random choices: one seed, one run (default 0)")
    sm.add_argument("--fault-weight", type=positive_float, default=0.02, metavar="W",
                    help="weight of aborts, failures and ack losses against 1 for progress (default 0.02)")
    sm.add_argument("--traces", default="traces", metavar="DIR",
                    help="where the run up to the first exposure is written (default: traces)")
    sm.add_argument("--no-traces", action="store_true", help="write no trace file")
    sm.add_argument("--trace-limit", type=positive_int, default=5000, metavar="STEPS",
                    help="write the first exposure only if it is at most this many steps (default 5000)")
    sm.add_argument("--report-only", action="store_true",
                    help="report exposures but exit 0 (default: exit 1 when a response read another's KV)")
    sm.add_argument("--variant", action="append", metavar="FILE.py", help=TRUST)
    add_output_arguments(sm)
    sm.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run a long random workload and count responses that read another request's data; exit 1
    when one did (an exposure), unless ``--report-only``."""
    from kvproof.checker.traces import Trace, write_trace
    from kvproof.model.machine import Machine
    from kvproof.model.replay import run_actions

    base = resolve(args.scenario)
    workload = base.family_protocol().command("simulate")
    if workload is None:
        raise BadInputError(f"simulate: the {base.family} protocol has no workload simulator")
    sc = workload.scenario_of(base, args)
    try:
        machine = Machine(sc.build())
    except ValueError as e:
        raise BadInputError(f"simulate: {e}") from None
    t0 = time.perf_counter()
    with Progress(not args.quiet and not args.json, args.requests, "requests") as progress:
        def tick(so_far) -> None:
            progress.note(f"{base.name}: {so_far.steps:,} steps · {so_far.foreign_reads:,} exposed so far",
                          completed=so_far.requests)

        exp = workload.simulate(machine, args.requests, args.seed, args.fault_weight, progress=tick)
    seconds = time.perf_counter() - t0
    out = output_console(args)
    written = None
    out.print(f"{base.name}: {exp.requests:,} requests {workload.setting(args)}, seed {args.seed}), "
              f"{exp.steps:,} steps in {seconds:.1f} s")
    for line in exp.lines():
        out.print(line)
    if exp.first_bad_run is not None:
        run, how = exp.first_bad_run, ""
        if len(run) > args.trace_limit:
            sliced = workload.slice_exposure(machine, exp)
            if sliced is not None and len(sliced) <= args.trace_limit:
                run, how = sliced, f" (sliced to the two requests involved: {len(sliced):,} steps)"
        if len(run) > args.trace_limit:
            out.print(f"  first exposure at step {len(exp.first_bad_run):,}: longer than --trace-limit "
                      f"{args.trace_limit} and not sliceable, not written")
        elif not args.no_traces:
            states = run_actions(machine, run)
            trace = Trace(sc, machine, workload.CLAIM, "counterexample", run, states)
            path = written = write_trace(trace, args.traces)
            out.print(f"  first exposure at step {len(exp.first_bad_run):,}, written to {path}{how}", soft_wrap=True)
    exposed = exp.foreign_reads > 0 or exp.first_bad_run is not None
    ran = (f"{plural(exp.requests, 'request')} on {base.name} (seed {args.seed}), 1 claim (no response reads "
           "another request's KV)")
    code = Tally(mismatched=int(exposed and not args.report_only)).exit_code  # --report-only: found, not failed
    meaning = ("no response read another request's KV" if not exposed
               else "an exposure was found and only reported (--report-only)" if args.report_only
               else "an exposure: a response read another request's KV")
    summary = Summary("simulate", ran, int(not exposed), int(exposed), 0, code, meaning)
    return finish(args, summary, out, {
        "scenario": base.name, "requests": exp.requests, "seed": args.seed, "steps": exp.steps,
        "seconds": round(seconds, 3), "foreign_reads": exp.foreign_reads, "exposed": exposed,
        "first_exposure_step": None if exp.first_bad_run is None else len(exp.first_bad_run),
        "trace": None if written is None else str(written), "lines": list(exp.lines())})
