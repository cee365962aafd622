"""``kvproof check``: check scenarios (default: the whole built-in catalogue) with the explicit
engine, print the verdict table (or JSON), write counterexamples and the ``--junit``,
``--sarif``, ``--html`` and ``--write-expected`` files; ``--engine bmc|both`` hands the run to
the Z3 engines (:mod:`.check_symbolic`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from kvproof.checker.cli import check_symbolic
from kvproof.checker.cli.common import (BadInputError, add_output_arguments, finish, json_reports, output_console,
                                        reports_summary, resolve)
from kvproof.checker.cli.options import MAX_SECONDS, positive_float, positive_int
from kvproof.checker.explicit.checkpoint import DEFAULT_EVERY
from kvproof.checker.cli.outputs import write_outputs
from kvproof.checker.cli.scenarios import limits_of, run_scenarios, unique
from kvproof.model.scenario import builtins

__all__ = ["NAME", "OUTPUTS", "VARIANT_SCENARIOS", "VISITED_MODES", "BACKENDS", "add_parser", "run", "backend_of"]

NAME = "check"
OUTPUTS = (("traces", "--traces", True, "no_traces"), ("write_expected", "--write-expected", False, None),
           ("junit", "--junit", False, None), ("sarif", "--sarif", False, None), ("html", "--html", False, None))
"""The files ``check`` writes, checked before it starts (:func:`~.outputs.check_outputs`)."""
VARIANT_SCENARIOS = True
"""A ``--variant`` file's own ``SCENARIO`` joins the scenarios named."""
VISITED_MODES = ("exact", "fingerprint")  # kvproof.checker.explicit.visited.MODES (a test keeps them equal)


def add_parser(sub) -> None:
    """Register ``check`` on the main parser's subcommands."""
    ck = sub.add_parser("check", help="check scenarios (default: the whole built-in catalogue)")
    ck.add_argument("scenarios", nargs="*", metavar="SCENARIO", help="built-in name or scenario .toml file")
    ck.add_argument("--variant", action="append", metavar="FILE.py",
                    help="trust and check an engine variant (code): its PdProtocol subclasses, and its SCENARIO "
                         "if it has one (repeatable)")
    ck.add_argument("--invariant", action="append", metavar="NAME", help="check only this claim (repeatable)")
    ck.add_argument("--max-states", type=positive_int, metavar="N", help="stop after N distinct states")
    ck.add_argument("--max-seconds", type=positive_float, metavar="S", help=MAX_SECONDS)
    ck.add_argument("--max-depth", type=positive_int, metavar="D", help="explore at most D steps deep")
    ck.add_argument("--traces", default="traces", metavar="DIR", help="where counterexamples go (default: traces)")
    ck.add_argument("--no-traces", action="store_true", help="write no trace files")
    ck.add_argument("--write-expected", metavar="FILE", help="write this run's verdicts and state counts as a TOML table")
    add_output_arguments(ck)
    ck.add_argument("--verbose", action="store_true",
                    help="a row for every claim of every scenario and every trace file's path (default: with "
                         "several scenarios, a row per scenario and a line per claim not as expected)")
    ck.add_argument("--junit", metavar="FILE", help="also write JUnit XML: a test case per scenario and claim")
    ck.add_argument("--sarif", metavar="FILE", help="also write SARIF 2.1.0: a result per unexpected verdict")
    ck.add_argument("--html", metavar="FILE", help="also write the HTML report (as kvproof report does)")
    ck.add_argument("--visited", choices=VISITED_MODES, default="exact",
                    help="store states exactly (default) or as 64-bit fingerprints (8 bytes a state)")
    ck.add_argument("--symmetry", action="store_true",
                    help="explore one state per orbit of the scenario's interchangeable requests")
    ck.add_argument("--workers", type=positive_int, default=1, metavar="N",
                    help="explore with N workers (default 1): threads of the native backend, else processes "
                         "(or Ray actors) with states partitioned by hash")
    ck.add_argument("--backend", choices=tuple(BACKENDS), default="auto",
                    help="auto (default): the model compiled to C where that applies (a C compiler found, "
                         "no liveness claim, over 20,000 states), else the Python engine; "
                         "native: always C (or an error); python (or process): the Python engine, with --workers "
                         "in forked processes; ray: workers on a Ray cluster (kvproof[ray])")
    ck.add_argument("--ray-address", metavar="ADDR",
                    help="Ray cluster to join (default: RAY_ADDRESS, else a local cluster of N workers)")
    ck.add_argument("--coverage", action="store_true",
                    help="also count each action's transitions over the reachable graph and list the actions "
                         "that never fired (a pass of its own)")
    ck.add_argument("--checkpoint", metavar="DIR",
                    help="save each scenario's search in DIR as it goes (a file per scenario, written atomically) "
                         "and resume it from there when run again: the same verdicts, state counts and "
                         "counterexamples as a run never interrupted (the Python engine or the native backend, "
                         "one process: not with --workers N or --backend ray)")
    ck.add_argument("--checkpoint-every", type=positive_float, metavar="S",
                    help=f"with --checkpoint: save the search every S seconds, at a BFS level boundary "
                         f"(default {DEFAULT_EVERY:g})")
    ck.add_argument("--engine", choices=("explicit", "bmc", "both"), default="explicit",
                    help="explicit BFS (default), bounded model checking with Z3, or both compared")
    ck.add_argument("--depth", type=positive_int, metavar="K",
                    help="bounded model checking depth (bmc: default 24; both: the deepest explicit hit, the rest proved by k-induction; with K, as deep as K and nothing proved)")
    ck.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Check scenarios; print the verdict table (or JSON) and write counterexamples."""
    from kvproof.checker.expected import write_expected
    from kvproof.model.scenario import did_you_mean

    scenarios = unique([resolve(n) for n in args.scenarios]) if args.scenarios else builtins()
    for sc in scenarios:  # fail on bad input before any search starts or any file is written
        spec = sc.build()
        for inv in args.invariant or []:
            try:
                spec.claim(inv)
            except KeyError:
                raise BadInputError(f"unknown invariant or witness {inv!r}{did_you_mean(inv, [c.name for c in spec.claims])} "
                               "(kvproof list --claims names them)") from None
    if args.write_expected and args.invariant:
        raise BadInputError("--write-expected records whole scenarios: it cannot be combined with --invariant")
    if args.write_expected and args.symmetry:
        raise BadInputError("--write-expected records unreduced state counts: it cannot be combined with --symmetry")
    limits = limits_of(args)
    if args.checkpoint_every is not None and args.checkpoint is None:
        raise BadInputError("--checkpoint-every: it needs --checkpoint DIR (where the search is saved)")
    if args.checkpoint is not None and args.engine != "explicit":
        raise BadInputError("--checkpoint saves the explicit engine's search: use --engine explicit")
    if args.engine != "explicit":
        if args.coverage:
            raise BadInputError("--coverage counts the explicit engine's transitions: use --engine explicit")
        if args.write_expected:
            raise BadInputError("--write-expected records the explicit engine's table: use --engine explicit")
        return check_symbolic.check_symbolic(args, scenarios, limits)
    traces_dir = None if args.no_traces else Path(args.traces)
    engine = dict(visited=args.visited, symmetry=args.symmetry, backend=backend_of(args))
    if args.checkpoint is not None:
        engine.update(checkpoint=args.checkpoint, checkpoint_every=args.checkpoint_every)
        _check_checkpoints(args, scenarios, limits, engine)
    from kvproof.checker.explicit.checkpoint import CheckpointError

    try:
        reports = run_scenarios(scenarios, limits, args.invariant, traces_dir, not args.quiet and not args.json,
                                budget=args.budget, table=not args.quiet and not args.json, html=bool(args.html),
                                **engine)
    except CheckpointError as e:
        raise BadInputError(str(e)) from None
    if args.write_expected:
        try:
            write_expected(Path(args.write_expected), reports)
        except OSError as e:
            raise BadInputError(f"--write-expected {args.write_expected}: cannot write: {e.strerror or e}") from None
    write_outputs(args, reports)
    coverage = _coverage(scenarios, limits) if args.coverage and (args.json or not args.quiet) else None
    summary = reports_summary("check", reports, "explicit search")
    out = output_console(args)
    if args.json:
        doc = json_reports(reports)
        for entry, cov in zip(doc["scenarios"], coverage or ()):
            entry["coverage"] = cov.to_json()
        return finish(args, summary, out, doc)
    if not args.quiet:
        from kvproof.checker.report.render import render_reports  # rich: only to print the table

        out.print(render_reports(reports, args.verbose), crop=False)  # the table's cells are never cut
        for sc, cov in zip(scenarios, coverage or ()):
            out.print(_coverage_text(sc.name, cov), soft_wrap=True)
    return finish(args, summary, out)


BACKENDS = {
    "auto": lambda args, b: b.AutoBackend(args.workers),
    "native": lambda args, b: b.NativeBackend(args.workers),
    "python": lambda args, b: b.PythonBackend() if args.workers == 1 else b.WorkersBackend(args.workers),
    "process": lambda args, b: b.PythonBackend() if args.workers == 1 else b.WorkersBackend(args.workers),
    "ray": lambda args, b: b.RayBackend(args.workers, args.ray_address),
}
"""``--backend``'s choices, each with the backend object it and ``--workers`` (and ``--ray-address``)
make (:mod:`kvproof.checker.explicit.backends`; ``process`` is ``python``'s earlier name)."""


def backend_of(args: argparse.Namespace):
    """The explicit engine's backend object that ``--backend`` and ``--workers`` name (the one place
    the command line maps them: :data:`BACKENDS`)."""
    from kvproof.checker.explicit import backends  # constructing one imports no engine

    return BACKENDS[args.backend](args, backends)


def _check_checkpoints(args: argparse.Namespace, scenarios, limits, engine: dict) -> None:
    """Refuse ``--checkpoint`` before any search starts: a backend that cannot checkpoint, a
    folder that is not one, a checkpoint file there that is of another spec or search, or is
    not whole (the files are left as they are)."""
    from kvproof.checker.explicit.checkpoint import Checkpoint, CheckpointError, file_name
    from kvproof.model.machine import Machine

    folder = Path(args.checkpoint)
    if folder.exists() and not folder.is_dir():
        raise BadInputError(f"--checkpoint {args.checkpoint}: not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise BadInputError(f"--checkpoint {args.checkpoint}: cannot make the folder: {e.strerror or e}") from None
    backend = engine["backend"]
    try:
        backend.refuse_checkpoint()
        for sc in scenarios:
            if not (folder / file_name(sc.name)).exists():
                continue
            # the whole file, its scenario, kvproof version and spec; the search's options are
            # checked as each scenario starts (before its search writes anything)
            Checkpoint(folder, sc.name, Machine(sc.build()).fingerprint, {}).validate(search=False)
    except CheckpointError as e:
        raise BadInputError(str(e)) from None


def _coverage(scenarios, limits) -> list:
    """``check --coverage``: each scenario's transitions by action, from its reachable graph
    (a pass of its own, so that a plain check pays nothing)."""
    from kvproof.checker.explicit.coverage import action_coverage
    from kvproof.model.machine import Machine

    return [action_coverage(Machine(sc.build()), limits) for sc in scenarios]


def _coverage_text(name: str, cov) -> str:
    """The text of one scenario's coverage: a line per action, then those that never fired."""
    width = max(map(len, cov.fired), default=0)
    lines = [f"\n{name}: coverage: {cov.transitions:,} transitions over {cov.states:,} states, by action"
             + ("" if cov.complete else f" (search incomplete: {cov.reason})")]
    lines += [f"  {action:<{width}}  {n:>10,}" for action, n in cov.fired.items()]
    never = cov.never_fired
    lines.append(f"  never fired: {', '.join(never)}" if never else "  every action fired")
    return "\n".join(lines)
