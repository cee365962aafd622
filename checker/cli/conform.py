"""``kvproof conform``: traces replayed, or random event sequences run (``--random N``), on the
real engine code of the targets' protocol (its conformance harness)."""

from __future__ import annotations

import argparse
from pathlib import Path

from kvproof.checker.cli.common import BadInputError, Progress, Summary, add_output_arguments, finish, output_console, resolve
from kvproof.checker.cli.options import TRUST, positive_int
from kvproof.model.scenario import builtins

__all__ = ["NAME", "add_parser", "run"]

NAME = "conform"


def add_parser(sub) -> None:
    """Register ``conform`` on the main parser's subcommands."""
    cf = sub.add_parser("conform", help="replay traces or random sequences on a protocol's real engine code")
    cf.add_argument("targets", nargs="*", metavar="TRACE|SCENARIO",
                    help="trace files, a directory of traces, or scenarios of one protocol (default: the "
                         "conformance scenarios of the default protocol, or of the one --engine names)")
    cf.add_argument("--engine", default=None,
                    help="the real engine, NAME==VERSION, for the protocol NAME (kvproof list names the protocols)")
    cf.add_argument("--random", type=positive_int, metavar="N",
                    help="run N random event sequences per scenario instead of replaying traces")
    cf.add_argument("--seed", type=int, default=0, metavar="S")
    cf.add_argument("--traces", default="traces", metavar="DIR", help="where a scenario's traces are (default: traces)")
    cf.add_argument("--variant", action="append", metavar="FILE.py", help=TRUST)
    add_output_arguments(cf)
    cf.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run traces (replay) or random event sequences (``--random N``) on the real engine of the
    targets' protocol."""
    run_conform = _conform_protocol(args).command("conform")
    out = output_console(args)
    with Progress(not args.quiet and not args.json, None, "") as progress:
        done = run_conform(args, resolve, out, BadInputError, progress=progress)
    skipped = getattr(done, "skipped", 0)
    summary = Summary("conform", done.ran, done.matched, done.mismatched, skipped, done.exit_code,
                      done.meaning, done.verdict)
    return finish(args, summary, out, {"results": [{"target": str(o.trace), "verdict": o.verdict}
                                                   for o in done.outcomes], "not_run": skipped})


def _conform_protocol(args: argparse.Namespace):
    """The protocol whose conformance harness runs ``args.targets``: the one their scenarios
    belong to (a target that cannot be read counts for none: the harness reports it), else the
    one protocol named by ``--engine`` (``NAME==VERSION``), else the default protocol's."""
    from fnmatch import fnmatch

    from kvproof.checker.traces import read_trace
    from kvproof.model.registry import default_protocol, protocol_named, protocols

    families = set()
    for t in args.targets or []:
        try:
            p = Path(t)
            if p.is_dir():
                first = sorted(p.glob("*.itf.json"))[:1]
                families |= {read_trace(q).scenario.family for q in first}
            elif t.endswith(".json"):
                families.add(read_trace(p).scenario.family)
            elif "*" in t:
                families |= {s.family for s in builtins() if fnmatch(s.name, t)}
            else:
                families.add(resolve(t).family)
        except Exception:  # the harness reports it as bad input, in its own words
            continue
    families = {f or default_protocol().name for f in families}
    if len(families) > 1:
        raise BadInputError(f"conform: targets of {len(families)} protocols ({', '.join(sorted(families))}); "
                       "run each protocol's separately")
    if not families and args.engine:
        families = {p.name for p in protocols() if args.engine.split("==")[0] == p.name and "conform" in p.commands}
    if not families:
        return default_protocol()
    found = protocol_named(families.pop())
    if "conform" not in found.commands:
        raise BadInputError(f"conform: the {found.name} protocol has no conformance harness")
    return found
