"""The ``kvproof`` command line.

Commands are verbs: ``list``, ``check``, ``show``, ``replay``, ``simulate``, and the symbolic
``prove`` and ``certify`` (:mod:`.cli_symbolic`).  Exit codes:

* 0 - every verdict matches its expectation (``replay``: the violation reproduces);
* 1 - a verdict does not (an unexpected violation, or an expected one not found);
* 2 - a result is inconclusive (a limit cut the search short);
* 3 - bad input: an unknown scenario or claim, a malformed scenario file, a trace that does not
  fit the spec.  One line on stderr names the problem; nothing is left half-written.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from rich.console import Console

from ..model.machine import Machine
from ..model.replay import replay, run_actions
from ..model.simulate import simulate, simulation_scenario
from ..spec.scenario import Scenario, ScenarioError, builtin, builtins, load_scenario
from .expected import write_expected
from .explicit import Limits, Stats
from .render import render_reports, render_trace
from .results import exit_code
from .run import check_scenario
from .traces import Trace, TraceError, read_trace, write_trace
from . import cli_symbolic
from .certificate import CertificateError

__all__ = ["main", "EXIT_OK", "EXIT_MISMATCH", "EXIT_INCONCLUSIVE", "EXIT_BAD_INPUT"]

EXIT_OK, EXIT_MISMATCH, EXIT_INCONCLUSIVE, EXIT_BAD_INPUT = 0, 1, 2, 3


class BadInput(Exception):
    """Input the command cannot use; its message is printed as one line, exit code 3."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse's own exit code 2 means "inconclusive" here
        raise BadInput(f"{self.prog}: {message}")


def _console(stream=None) -> Console:
    """Rich console on stdout; a pipe or CI log gets 120 columns and no colour codes."""
    stream = stream or sys.stdout
    width = None if stream.isatty() else 120
    return Console(file=stream, highlight=False, width=width)


def _resolve(name: str) -> Scenario:
    """A built-in scenario by name, or a scenario file by path."""
    if name.endswith(".toml") or os.sep in name or Path(name).is_file():
        return load_scenario(name)
    return builtin(name)


class _Progress:
    """A live status line on long runs, only when stderr is a terminal and not ``--quiet``."""

    def __init__(self, enabled: bool):
        self.enabled = enabled and sys.stderr.isatty()
        self.status = None
        self.label = ""
        self.started = 0.0

    def start(self, label: str) -> None:
        self.label, self.started = label, time.perf_counter()

    def __call__(self, stats: Stats) -> None:
        if not self.enabled or time.perf_counter() - self.started < 1.0:
            return
        text = (f"{self.label}: {stats.states:,} states · depth {stats.depth} · "
                f"{stats.states_per_second:,.0f} states/s")
        if self.status is None:
            self.status = Console(file=sys.stderr).status(text)
            self.status.start()
        else:
            self.status.update(text)

    def stop(self) -> None:
        if self.status is not None:
            self.status.stop()
            self.status = None


# -- commands ----------------------------------------------------------------------------------
def cmd_list(args: argparse.Namespace) -> int:
    """List the built-in scenarios (and, with ``--claims``, the claims)."""
    out = _console()
    scenarios = builtins()
    width = max(len(s.name) for s in scenarios)
    for sc in scenarios:
        out.print(f"{sc.name:<{width}}  {sc.title}", overflow="ignore", crop=False)
    if args.claims:
        spec = scenarios[0].build()
        out.print()
        for c in spec.claims:
            tag = c.kind if c.at == "always" else f"{c.kind}, at quiescence"
            out.print(f"{c.name}  ({tag})\n    {c.doc}")
    return EXIT_OK


def cmd_check(args: argparse.Namespace) -> int:
    """Check scenarios; print the verdict table (or JSON) and write counterexamples."""
    names = args.scenarios or [s.name for s in builtins()]
    scenarios = [_resolve(n) for n in names]
    for sc in scenarios:  # fail on bad input before any search starts or any file is written
        spec = sc.build()
        for inv in args.invariant or []:
            try:
                spec.claim(inv)
            except KeyError:
                raise BadInput(f"unknown invariant or witness {inv!r} (kvproof list --claims names them)") from None
    if args.write_expected and args.invariant:
        raise BadInput("--write-expected records whole scenarios: it cannot be combined with --invariant")
    limits = Limits(args.max_states, args.max_seconds, args.max_depth)
    if args.engine != "explicit":
        if args.write_expected:
            raise BadInput("--write-expected records the explicit engine's table: use --engine explicit")
        return cli_symbolic.check_symbolic(args, scenarios, limits)
    traces_dir = None if args.no_traces else Path(args.traces)
    progress = _Progress(not args.quiet and not args.json)
    reports = []
    try:
        for sc in scenarios:
            progress.start(sc.name)
            reports.append(check_scenario(sc, limits, args.invariant, traces_dir, progress))
    finally:
        progress.stop()
    if args.write_expected:
        write_expected(Path(args.write_expected), reports)
    if args.json:
        print(json.dumps(_json_reports(reports), indent=2))
    elif not args.quiet:
        _console().print(render_reports(reports))
    return exit_code(reports)


def _json_reports(reports) -> dict[str, Any]:
    return {
        "scenarios": [
            {
                "name": r.scenario.name,
                "complete": r.complete,
                "reason": r.reason,
                "stats": {
                    "states": r.stats.states,
                    "transitions": r.stats.transitions,
                    "depth": r.stats.depth,
                    "quiescent_states": r.stats.quiescent,
                    "seconds": round(r.stats.seconds, 4),
                    "states_per_second": round(r.stats.states_per_second),
                },
                "results": [
                    {
                        "invariant": c.claim,
                        "kind": c.kind,
                        "expected": c.expected,
                        "verdict": c.verdict,
                        "states": r.stats.states,
                        "depth": c.depth if c.depth is not None else r.stats.depth,
                        "seconds": round(r.stats.seconds, 4),
                        "trace": str(c.trace_path) if c.trace_path else None,
                    }
                    for c in r.claims
                ],
            }
            for r in reports
        ]
    }


def cmd_show(args: argparse.Namespace) -> int:
    """Render a stored trace, one block per step."""
    trace = read_trace(args.file)
    if args.step is not None and not 0 <= args.step <= len(trace):
        raise BadInput(f"--step {args.step}: the trace has steps 0..{len(trace)}")
    _console().print(render_trace(trace, args.step))
    return EXIT_OK


def cmd_replay(args: argparse.Namespace) -> int:
    """Re-execute a stored trace and confirm its claim still hits at its last state."""
    trace = read_trace(args.file)
    out = _console()
    diverged = replay(trace.machine, trace.actions, trace.states)
    if diverged is not None:
        out.print(f"diverged at step {diverged.step}: {diverged.reason}")
        return EXIT_MISMATCH
    c = trace.machine.spec.claim(trace.claim)
    if not trace.machine.claim_hits(trace.claim, trace.states[-1]):
        out.print(f"replayed {len(trace)} steps, but {trace.claim} does not "
                  f"{'fail' if c.kind == 'invariant' else 'hold'} at the last state")
        return EXIT_MISMATCH
    what = "violation" if c.kind == "invariant" else "witness"
    out.print(f"reproduced: {len(trace)} steps replay exactly and the {what} of {trace.claim} holds at step {len(trace)}")
    return EXIT_OK


def cmd_simulate(args: argparse.Namespace) -> int:
    """Run a long random workload and count responses that read another request's data."""
    base = _resolve(args.scenario)
    sc = simulation_scenario(base, args.pages, args.slots)
    try:
        machine = Machine(sc.build())
    except ValueError as e:
        raise BadInput(f"simulate: {e}") from None
    t0 = time.perf_counter()
    exp = simulate(machine, args.requests, args.seed, args.fault_weight)
    seconds = time.perf_counter() - t0
    out = _console()
    out.print(f"{base.name}: {exp.requests:,} requests over {args.pages} decode pages "
              f"({args.slots} at a time, seed {args.seed}), {exp.steps:,} steps in {seconds:.1f} s")
    out.print(f"  {exp.responses:,} successful responses, {exp.errors:,} errors, {exp.aborted:,} aborted")
    out.print(f"  {exp.foreign_reads:,} {_plural(exp.foreign_reads, 'response')} read another request's KV; "
              f"{exp.cross_tenant_reads:,} read another tenant's")
    if exp.stuck:
        out.print("  the run got stuck: requests left unfinished with nothing enabled")
    if exp.first_bad_run is not None:
        run = exp.first_bad_run
        if len(run) > args.trace_limit:
            out.print(f"  first exposure at step {len(run):,}: longer than --trace-limit {args.trace_limit}, not written")
        elif not args.no_traces:
            states = run_actions(machine, run)
            trace = Trace(sc, machine, "decode_reads_only_own_pages", "counterexample", run, states)
            path = write_trace(trace, args.traces)
            out.print(f"  first exposure at step {len(run):,}, written to {path}")
    return EXIT_OK


def _plural(n: int, word: str) -> str:
    return word if n == 1 else word + "s"


# -- parser --------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every command."""
    p = _Parser(prog="kvproof", description="Model-check the PD-disaggregated KV page lifecycle.")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    ls = sub.add_parser("list", help="list the built-in scenarios")
    ls.add_argument("--claims", action="store_true", help="also list every invariant and witness")
    ls.set_defaults(func=cmd_list)

    ck = sub.add_parser("check", help="check scenarios (default: the whole built-in catalogue)")
    ck.add_argument("scenarios", nargs="*", metavar="SCENARIO", help="built-in name or scenario .toml file")
    ck.add_argument("--invariant", action="append", metavar="NAME", help="check only this claim (repeatable)")
    ck.add_argument("--max-states", type=_positive_int, metavar="N", help="stop after N distinct states")
    ck.add_argument("--max-seconds", type=_positive_float, metavar="S", help="stop after S seconds per scenario")
    ck.add_argument("--max-depth", type=_positive_int, metavar="D", help="explore at most D steps deep")
    ck.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    ck.add_argument("--traces", default="traces", metavar="DIR", help="where counterexamples go (default: traces)")
    ck.add_argument("--no-traces", action="store_true", help="write no trace files")
    ck.add_argument("--write-expected", metavar="FILE", help="write this run's verdicts and state counts as a TOML table")
    ck.add_argument("--quiet", action="store_true", help="print nothing; the exit code tells")
    ck.add_argument("--engine", choices=("explicit", "bmc", "both"), default="explicit",
                    help="explicit BFS (default), bounded model checking with Z3, or both compared")
    ck.add_argument("--depth", type=_positive_int, metavar="K",
                    help="bounded model checking depth (bmc: default 24; both: the explicit search's depth)")
    ck.set_defaults(func=cmd_check)

    cli_symbolic.add_commands(sub, _positive_int, _positive_float)

    sh = sub.add_parser("show", help="render a stored trace")
    sh.add_argument("file", metavar="FILE")
    sh.add_argument("--step", type=int, metavar="N", help="show only step N")
    sh.set_defaults(func=cmd_show)

    rp = sub.add_parser("replay", help="re-execute a stored trace against the model")
    rp.add_argument("file", metavar="FILE")
    rp.set_defaults(func=cmd_replay)

    sm = sub.add_parser("simulate", help="random long workload: how many responses read another's data")
    sm.add_argument("scenario", metavar="SCENARIO")
    sm.add_argument("--requests", type=_positive_int, default=10_000, metavar="N")
    sm.add_argument("--pages", type=_page_count, default=64, metavar="D", help="decode pages (default 64)")
    sm.add_argument("--slots", type=_slot_count, default=8, metavar="K", help="requests in flight at once (default 8)")
    sm.add_argument("--seed", type=int, default=0, metavar="S")
    sm.add_argument("--fault-weight", type=_positive_float, default=0.02, metavar="W",
                    help="weight of aborts, failures and ack losses against 1 for progress (default 0.02)")
    sm.add_argument("--traces", default="traces", metavar="DIR")
    sm.add_argument("--no-traces", action="store_true")
    sm.add_argument("--trace-limit", type=_positive_int, default=5000, metavar="STEPS",
                    help="write the first exposure only if it is at most this many steps (default 5000)")
    sm.set_defaults(func=cmd_simulate)
    return p


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {v}")
    return v


def _positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not v > 0:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {v}")
    return v


def _page_count(text: str) -> int:
    v = _positive_int(text)
    if v > 200:
        raise argparse.ArgumentTypeError(f"expected at most 200 pages, got {v}")
    return v


def _slot_count(text: str) -> int:
    v = _positive_int(text)
    if v > 64:
        raise argparse.ArgumentTypeError(f"expected at most 64 slots, got {v}")
    return v


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        return args.func(args)
    except (BadInput, ScenarioError, TraceError, CertificateError) as e:
        print(f"kvproof: error: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("kvproof: interrupted", file=sys.stderr)
        return 130


def entry() -> None:
    """Console-script entry point."""
    sys.exit(main())
