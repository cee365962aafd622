"""The ``kvproof`` command line.

Commands are verbs: ``list``, ``check``, ``report``, ``show``, ``diff``, ``replay``,
``simulate``, ``conform``, ``audit``, ``validate``, ``completion``, ``graph``, and the symbolic
``prove`` and ``certify``
(:mod:`.cli_symbolic`).  Exit codes:

* 0 - every verdict matches its expectation (``replay``: the violation reproduces);
* 1 - a verdict does not (an unexpected violation, or an expected one not found);
* 2 - a result is inconclusive (a limit cut the search short: ``--max-states``, ``--max-depth``,
  or ``--max-seconds``, one time budget for the whole command, from process start to exit:
  :mod:`kvproof.checker.budget`);
* 3 - bad input: an unknown scenario or claim, a malformed scenario file, a trace that does not
  fit the spec, an output path that cannot be written (checked before any search), an error in
  an engine variant's code (named by file and line).  One line on stderr names the problem;
  nothing is left half-written;
* 4 - out of memory (one line with the advice: fingerprints, symmetry, workers);
* 5 - ``validate`` only: a line of the log is unexplained (an event lost, duplicated or
  reordered) and no violation came before it (a violation wins: exit 1);
* 130 - interrupted (Ctrl-C), worker processes included.

``simulate`` exits 1 when a response read another request's KV (0 with ``--report-only``);
``replay``, ``conform`` and ``diff`` exit 1 when a trace does not reproduce or the traces differ.
Every run ends with one closing line (:class:`~.common.Summary`; the ``summary`` object of
``--json``): what ran, how many claims matched, did not, or are inconclusive, and what the exit
code means.

Files are data: a trace, certificate or scenario file that names a protocol other than a
built-in one is refused unless the variant file is passed explicitly with ``--variant FILE.py``
(the file is code: :mod:`kvproof.model.registry`).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

from kvproof.checker.cli import symbolic as cli_symbolic
from kvproof.checker.cli.common import (EXIT_BAD_INPUT, EXIT_BROKEN_PIPE, EXIT_INCONCLUSIVE, EXIT_INTERRUPTED,
                                        EXIT_MISMATCH, EXIT_OK, EXIT_OUT_OF_MEMORY, EXIT_UNEXPLAINED, BadInput,
                                        Progress, Summary, plural, protocol_command, reports_summary)
from kvproof.checker.cli.common import console as _console
from kvproof.checker.symbolic.watchdog import BudgetSpent
from kvproof.checker.cli.common import json_reports as _json_reports
from kvproof.checker.cli.common import resolve as _resolve
from kvproof.model.registry import protocols, trust_variant, variant_error, variant_scope
from kvproof.model.scenario import Scenario, builtins, load_variant

# The engines, renderers and solvers are imported by the command that uses them, so that
# ``kvproof --help`` and ``kvproof list`` load neither Z3 nor numpy.

__all__ = ["main", "EXIT_OK", "EXIT_MISMATCH", "EXIT_INCONCLUSIVE", "EXIT_BAD_INPUT", "EXIT_OUT_OF_MEMORY",
           "EXIT_UNEXPLAINED", "EXIT_INTERRUPTED", "EXIT_BROKEN_PIPE", "VALIDATE_EXITS"]

class _Parser(argparse.ArgumentParser):
    """argparse with kvproof's bad-input exit (3; argparse's own 2 means "inconclusive" here),
    the subcommand named once, and a suggestion for a misspelt choice (``kvproof chek``)."""

    def error(self, message: str) -> None:
        import re

        from kvproof.model.scenario import did_you_mean

        m = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if m:
            message += did_you_mean(m.group(1), [c.strip(" '") for c in m.group(2).split(",")])
        where = "" if self.prog == "kvproof" else f"{self.prog}: "  # "kvproof: error: kvproof: ..." once
        raise BadInput(f"{where}{message}")


_Progress = Progress  # the name earlier versions and their tests used


# -- commands ----------------------------------------------------------------------------------
def cmd_list(args: argparse.Namespace) -> int:
    """List the built-in scenarios (and, with ``--claims``, the claims)."""
    out = _console()
    scenarios = builtins()
    width = max(len(s.name) for s in scenarios)
    for sc in scenarios:
        out.print(f"{sc.name:<{width}}  {sc.title}", overflow="ignore", crop=False)
    if args.claims:  # each protocol's claims, from its first built-in scenario
        first: dict[str, Any] = {}
        for sc in scenarios:
            first.setdefault(sc.family, sc)
        for family, sc in first.items():
            out.print(f"\nclaims of the {family} protocol ({sc.build().__class__.__name__}):")
            for c in sc.build().claims:
                tag = c.kind if c.at == "always" else f"{c.kind}, at quiescence"
                out.print(f"{c.name}  ({tag})\n    {c.doc}")
    return EXIT_OK


def cmd_check(args: argparse.Namespace) -> int:
    """Check scenarios; print the verdict table (or JSON) and write counterexamples."""
    from kvproof.checker.expected import write_expected
    from kvproof.checker.results import exit_code
    from kvproof.model.scenario import did_you_mean

    scenarios = _unique([_resolve(n) for n in args.scenarios]) if args.scenarios else builtins()
    for sc in scenarios:  # fail on bad input before any search starts or any file is written
        spec = sc.build()
        for inv in args.invariant or []:
            try:
                spec.claim(inv)
            except KeyError:
                raise BadInput(f"unknown invariant or witness {inv!r}{did_you_mean(inv, [c.name for c in spec.claims])} "
                               "(kvproof list --claims names them)") from None
    if args.write_expected and args.invariant:
        raise BadInput("--write-expected records whole scenarios: it cannot be combined with --invariant")
    if args.write_expected and args.symmetry:
        raise BadInput("--write-expected records unreduced state counts: it cannot be combined with --symmetry")
    limits = _limits(args)
    if args.engine != "explicit":
        if args.coverage:
            raise BadInput("--coverage counts the explicit engine's transitions: use --engine explicit")
        if args.write_expected:
            raise BadInput("--write-expected records the explicit engine's table: use --engine explicit")
        return cli_symbolic.check_symbolic(args, scenarios, limits)
    traces_dir = None if args.no_traces else Path(args.traces)
    engine = dict(visited=args.visited, symmetry=args.symmetry, workers=args.workers,
                  backend=args.backend, ray_address=args.ray_address)
    reports = _run(scenarios, limits, args.invariant, traces_dir, not args.quiet and not args.json,
                   budget=args.budget, table=not args.quiet and not args.json, html=bool(args.html), **engine)
    if args.write_expected:
        try:
            write_expected(Path(args.write_expected), reports)
        except OSError as e:
            raise BadInput(f"--write-expected {args.write_expected}: cannot write: {e.strerror or e}") from None
    _write_outputs(args, reports)
    coverage = _coverage(scenarios, limits) if args.coverage and (args.json or not args.quiet) else None
    summary = reports_summary("check", reports, exit_code(reports), "explicit search")
    if args.json:
        doc = _json_reports(reports)
        for entry, cov in zip(doc["scenarios"], coverage or ()):
            entry["coverage"] = cov.to_json()
        print(json.dumps({**doc, "summary": summary.to_json()}, indent=2))
    elif not args.quiet:
        from kvproof.checker.report.render import render_reports  # rich: only to print the table

        out = _console()
        out.print(render_reports(reports))
        for sc, cov in zip(scenarios, coverage or ()):
            out.print(_coverage_text(sc.name, cov), soft_wrap=True)
        summary.print(out)
    return summary.exit_code


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


def _limits(args: argparse.Namespace):
    """The limit flags; ``--max-seconds`` is one budget for the whole command (``args.budget``,
    set by :func:`main`: from process start for the console command), across every scenario
    and phase."""
    from kvproof.checker.explicit.search import Limits

    budget = getattr(args, "budget", None)
    if budget is not None:
        return budget.limits(args.max_states, args.max_depth)
    return Limits(args.max_states, None, args.max_depth)


def _run(scenarios, limits, only, traces_dir, show_progress: bool, budget=None, table: bool = False,
         html: bool = False, **engine) -> list:
    """Check every scenario in turn, with a progress bar on long runs; ``engine`` holds the
    explicit engine's options (visited set, symmetry, workers, backend).  With the command's
    ``budget`` (``--max-seconds``), each scenario's phases also keep back the time that
    reporting the scenarios before it takes: their rows of the verdict table (``table``), their
    counterexamples in the HTML report (``html``; :mod:`kvproof.checker.budget`)."""
    from kvproof.checker.budget import HTML_TRACE_SECONDS, ROW_SECONDS
    from kvproof.checker.explicit.run import check_scenario

    progress = Progress(show_progress, len(scenarios))
    reports = []
    keep = 0.0
    try:
        for sc in scenarios:
            progress.start(sc.name)
            if budget is not None:
                limits = budget.limits(limits.max_states, limits.max_depth, keep)
            report = check_scenario(sc, limits, only, traces_dir, progress, **engine)
            if report.stats.states:  # a scenario no search reached is one name in the table, not its rows
                keep += ROW_SECONDS * len(report.claims) * table
                keep += HTML_TRACE_SECONDS * sum(c.verdict == "violated" for c in report.claims) * html
            if report.symmetry.startswith("refused"):
                print(f"kvproof: {sc.name}: symmetry {report.symmetry}; searched without reduction", file=sys.stderr)
            reports.append(report)
    finally:
        progress.stop()
    return reports


def _unique(scenarios: list[Scenario]) -> list[Scenario]:
    """The scenarios, refusing two different ones with one name (their traces would collide)."""
    seen: dict[str, Scenario] = {}
    for sc in scenarios:
        other = seen.setdefault(sc.name, sc)
        if other is not sc and other.origin != sc.origin:
            raise BadInput(f"{sc.origin}: name: {sc.name!r} is also the name of {other.origin}; expected unique names")
    return list(seen.values())


def _check_output(path: str | None, flag: str, directory: bool = False) -> None:
    """Fail before any search if an output file (or, with ``directory``, a folder to write
    files in) cannot be written where it is asked for."""
    if path is None:
        return
    if "\0" in path:
        raise BadInput(f"{flag} {path!r}: a file name cannot contain a NUL byte")
    p = Path(path)
    if len(os.fsencode(path)) > 4000 or any(len(os.fsencode(part)) > 255 for part in p.parts):
        raise BadInput(f"{flag} {path[:80]}...: file name too long")
    if not directory and p.is_dir():
        raise BadInput(f"{flag} {path}: is a directory, expected a file name")
    if directory and p.exists() and not p.is_dir():
        raise BadInput(f"{flag} {path}: is a file, expected a folder")
    start = p if directory else p.parent
    parent = next((q for q in [start, *start.parents] if q.exists()), Path("."))
    if not parent.is_dir():
        raise BadInput(f"{flag} {path}: cannot write under {parent}: not a folder")
    try:  # os.access says yes to root on a read-only file system: create and remove a file instead
        fd, probe = tempfile.mkstemp(dir=parent, prefix=".kvproof-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise BadInput(f"{flag} {path}: cannot write under {parent}: {e.strerror or e}") from None


_OUTPUTS = {  # per command: (argument, flag, a folder?, the flag that turns it off)
    "check": (("traces", "--traces", True, "no_traces"), ("write_expected", "--write-expected", False, None),
              ("junit", "--junit", False, None), ("sarif", "--sarif", False, None), ("html", "--html", False, None)),
    "report": (("output", "-o", False, None),),
    "graph": (("output", "-o", False, None),),
    "simulate": (("traces", "--traces", True, "no_traces"),),
    "audit": (("traces", "--traces", True, "no_traces"),),
    "validate": (("traces", "--traces", True, "no_traces"),),
    "prove": (("traces", "--traces", True, "no_traces"), ("certificates", "--certificates", True, "no_certificates")),
}


def _check_outputs(args: argparse.Namespace) -> None:
    """Every output path of the command, checked before any input is read or search started."""
    for attr, flag, directory, off in _OUTPUTS.get(args.command, ()):
        if not (off and getattr(args, off, False)):
            _check_output(getattr(args, attr, None), flag, directory)


def _trust_variants(args: argparse.Namespace) -> None:
    """Run the ``--variant`` files the user passed (they are code), so that scenarios, traces
    and certificates naming their classes can be read; on ``check``, ``report`` and ``prove``
    each file's own ``SCENARIO`` joins the scenarios named (and only those are checked)."""
    variants = getattr(args, "variant", None) or []
    own = []
    for v in variants:
        module = trust_variant(v)
        if getattr(module, "SCENARIO", None) is not None:
            own.append(load_variant(v))
    if args.command in ("check", "report", "prove") and variants:
        args.scenarios = [*args.scenarios, *own]
        if not args.scenarios:
            raise BadInput(f"--variant {variants[0]}: the file has no SCENARIO; name the scenario files that use it")


def _write_outputs(args: argparse.Namespace, reports) -> None:
    """Write the --junit, --sarif and --html files asked for (each writer imported only then:
    the HTML one loads rich)."""
    import importlib

    writers = (("junit", "junit", "write_junit"), ("sarif", "sarif", "write_sarif"), ("html", "html", "write_report"))
    for flag, module, name in writers:
        path = getattr(args, flag, None)
        if path is None:
            continue
        write = getattr(importlib.import_module(f"kvproof.checker.report.{module}"), name)
        try:
            write(path, reports)
        except OSError as e:
            raise BadInput(f"--{flag} {path}: cannot write: {e.strerror or e}") from None


def cmd_report(args: argparse.Namespace) -> int:
    """Check scenarios and write the HTML report (verdicts, sequence diagrams, page timelines)."""
    from kvproof.checker.results import exit_code

    scenarios = _unique([_resolve(n) for n in args.scenarios]) if args.scenarios else builtins()
    for sc in scenarios:
        sc.build()
    limits = _limits(args)
    reports = _run(scenarios, limits, None, None, not args.quiet, budget=args.budget, html=True)
    args.html, args.junit, args.sarif = args.output, None, None
    _write_outputs(args, reports)
    summary = reports_summary("report", reports, exit_code(reports), "explicit search")
    if not args.quiet:
        cx = sum(1 for r in reports for c in r.claims if c.kind == "invariant" and getattr(c.result, "trace", None))
        out = _console()
        out.print(f"wrote {args.output}: {len(reports)} scenario{'s' if len(reports) != 1 else ''}, "
                  f"{cx} counterexample{'s' if cx != 1 else ''}", soft_wrap=True)  # a path is not wrapped
        summary.print(out)
    return summary.exit_code


def cmd_diff(args: argparse.Namespace) -> int:
    """Show where two traces first diverge and what differs there; exit 0 when identical."""
    from kvproof.checker.report.diff import diff_traces, render_diff
    from kvproof.checker.traces import read_trace

    a, b = read_trace(args.a), read_trace(args.b)
    d = diff_traces(a, b)
    out = _console()
    out.print(render_diff(d, args.a, args.b))
    same = int(d.identical)
    return Summary("diff", "2 traces compared", same, 1 - same, 0, EXIT_OK if same else EXIT_MISMATCH,
                   "the traces are identical" if same else "the traces differ").print(out)


def cmd_completion(args: argparse.Namespace) -> int:
    """Print a shell completion script (needs the ``completion`` extra: shtab)."""
    try:
        import shtab
    except ImportError:
        raise BadInput("completion needs shtab: pip install 'kvproof[completion]'") from None
    print(shtab.complete(build_parser(), shell=args.shell))
    return EXIT_OK


def cmd_show(args: argparse.Namespace) -> int:
    """Render a stored trace: text (one block per step), JSON step records, or Mermaid."""
    from kvproof.checker.report.focus import Focus, FocusError
    from kvproof.checker.report.mermaid import trace_mermaid
    from kvproof.checker.report.render import render_trace
    from kvproof.checker.report.trace_json import trace_records
    from kvproof.checker.traces import read_trace

    trace = read_trace(args.file)
    problem = _unverified(trace)
    if problem is not None:
        raise BadInput(f"{args.file}: {problem}; not shown (kvproof replay {args.file} says more)")
    if args.step is not None and not 0 <= args.step <= len(trace):
        raise BadInput(f"--step {args.step}: the trace has steps 0..{len(trace)}")
    try:
        only = Focus.of(trace, args.only) if args.only else None
    except FocusError as e:
        raise BadInput(str(e)) from None
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
            raise BadInput(f"{'--step' if args.step is not None else '--full'} applies to --format text and json, "
                           "not mermaid")
        sys.stdout.write(trace_mermaid(trace, only))
    else:
        _console().print(render_trace(trace, args.step, only, full=args.full))
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


def cmd_graph(args: argparse.Namespace) -> int:
    """Write a small scenario's reachable state graph as DOT or GraphML (through networkx)."""
    from kvproof.checker.explicit.coverage import GRAPH_LIMIT, GraphTooBig, state_graph, write_graph
    from kvproof.model.machine import Machine

    sc = _resolve(args.scenario)
    machine = Machine(sc.build())
    try:
        g = state_graph(machine, GRAPH_LIMIT)
    except ImportError:
        raise BadInput("graph needs networkx: pip install 'kvproof[graph]' (or pip install networkx)") from None
    except GraphTooBig:
        raise BadInput(f"graph: {sc.name} has more than {GRAPH_LIMIT:,} states, the limit for a graph export; "
                       "kvproof check --coverage counts its transitions by action instead") from None
    text = write_graph(g, args.output, args.format)
    if text is not None:
        sys.stdout.write(text)
    else:
        print(f"wrote {args.output}: {g.number_of_nodes():,} states, {g.number_of_edges():,} transitions",
              file=sys.stderr)
    return EXIT_OK


def cmd_replay(args: argparse.Namespace) -> int:
    """Re-execute a stored trace and confirm its claim still hits at its last state."""
    from kvproof.checker.explicit.liveness import lasso_is_fair
    from kvproof.checker.traces import read_trace
    from kvproof.model.machine import reference_hits
    from kvproof.model.replay import replay

    trace = read_trace(args.file)
    out = _console()
    ran = f"1 trace of {plural(len(trace), 'step')} ({trace.scenario.name}, {trace.claim})"
    failed = Summary("replay", ran, 0, 1, 0, EXIT_MISMATCH, "the trace does not reproduce")
    passed = Summary("replay", ran, 1, 0, 0, EXIT_OK, "the trace reproduces")
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


def cmd_simulate(args: argparse.Namespace) -> int:
    """Run a long random workload and count responses that read another request's data; exit 1
    when one did (an exposure), unless ``--report-only``."""
    from kvproof.checker.traces import Trace, write_trace
    from kvproof.model.machine import Machine
    from kvproof.model.replay import run_actions

    base = _resolve(args.scenario)
    workload = base.family_protocol().command("simulate")
    if workload is None:
        raise BadInput(f"simulate: the {base.family} protocol has no workload simulator")
    simulation_scenario, simulate, slice_exposure = (workload.simulation_scenario, workload.simulate,
                                                     workload.slice_exposure)
    sc = simulation_scenario(base, args.pages, args.slots)
    try:
        machine = Machine(sc.build())
    except ValueError as e:
        raise BadInput(f"simulate: {e}") from None
    t0 = time.perf_counter()
    with Progress(True, args.requests, "requests") as progress:
        def tick(so_far) -> None:
            progress.note(f"{base.name}: {so_far.steps:,} steps · {so_far.foreign_reads:,} exposed so far",
                          completed=so_far.requests)

        exp = simulate(machine, args.requests, args.seed, args.fault_weight, progress=tick)
    seconds = time.perf_counter() - t0
    out = _console()
    out.print(f"{base.name}: {exp.requests:,} requests over {args.pages} decode pages "
              f"({args.slots} at a time, seed {args.seed}), {exp.steps:,} steps in {seconds:.1f} s")
    out.print(f"  {exp.responses:,} successful responses, {exp.errors:,} errors, {exp.aborted:,} aborted")
    out.print(f"  {exp.foreign_reads:,} {_plural(exp.foreign_reads, 'response')} read another request's KV; "
              f"{exp.cross_tenant_reads:,} read another tenant's")
    held = getattr(exp, "held_releases", 0)
    if held:
        out.print(f"  {held:,} held {_plural(held, 'release')}: {exp.deadline_releases:,} on a deadline "
                  f"({exp.deadline_releases / held:.0%}), the rest on drain acks")
    if exp.stuck:
        out.print("  the run got stuck: requests left unfinished with nothing enabled")
    if exp.first_bad_run is not None:
        run, how = exp.first_bad_run, ""
        if len(run) > args.trace_limit:
            sliced = slice_exposure(machine, exp)
            if sliced is not None and len(sliced) <= args.trace_limit:
                run, how = sliced, f" (sliced to the two requests involved: {len(sliced):,} steps)"
        if len(run) > args.trace_limit:
            out.print(f"  first exposure at step {len(exp.first_bad_run):,}: longer than --trace-limit "
                      f"{args.trace_limit} and not sliceable, not written")
        elif not args.no_traces:
            states = run_actions(machine, run)
            trace = Trace(sc, machine, "decode_reads_only_own_pages", "counterexample", run, states)
            path = write_trace(trace, args.traces)
            out.print(f"  first exposure at step {len(exp.first_bad_run):,}, written to {path}{how}", soft_wrap=True)
    exposed = exp.foreign_reads > 0 or exp.first_bad_run is not None
    ran = (f"{plural(exp.requests, 'request')} on {base.name} (seed {args.seed}), 1 claim (no response reads "
           "another request's KV)")
    if not exposed:
        code, meaning = EXIT_OK, "no response read another request's KV"
    elif args.report_only:
        code, meaning = EXIT_OK, "an exposure was found and only reported (--report-only)"
    else:
        code, meaning = EXIT_MISMATCH, "an exposure: a response read another request's KV"
    return Summary("simulate", ran, int(not exposed), int(exposed), 0, code, meaning).print(out)


def cmd_conform(args: argparse.Namespace) -> int:
    """Run traces (replay) or random event sequences (``--random N``) on the real engine of the
    targets' protocol."""
    run_conform = _conform_protocol(args).command("conform")
    out = _console()
    with Progress(True, None, "") as progress:
        done = run_conform(args, _resolve, out, BadInput, progress=progress)
    skipped = getattr(done, "skipped", 0)
    return Summary("conform", done.ran, done.matched, done.mismatched, skipped, done.exit_code,
                   done.meaning).print(out)


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
                families.add(_resolve(t).family)
        except Exception:  # the harness reports it as bad input, in its own words
            continue
    families = {f or default_protocol().name for f in families}
    if len(families) > 1:
        raise BadInput(f"conform: targets of {len(families)} protocols ({', '.join(sorted(families))}); "
                       "run each protocol's separately")
    if not families and args.engine:
        families = {p.name for p in protocols() if args.engine.split("==")[0] == p.name and "conform" in p.commands}
    if not families:
        return default_protocol()
    found = protocol_named(families.pop())
    if "conform" not in found.commands:
        raise BadInput(f"conform: the {found.name} protocol has no conformance harness")
    return found


def cmd_audit(args: argparse.Namespace) -> int:
    """Map an engine's launch line to the model, check it, and print the hazards it is exposed to
    (kvproof's own options after ENGINE==VERSION were parsed by :func:`_audit_options`)."""
    run_audit = protocol_command("audit", args.engine.partition("==")[0].strip().lower())
    return run_audit(args, _console(), BadInput)


def _audit_options(args: argparse.Namespace) -> None:
    """argparse hands everything after ENGINE==VERSION to ``launch``: kvproof's own options
    there (before ``--``) are parsed here, before the command starts (``--max-seconds`` among
    them), and what follows ``--`` is the launch command."""
    words = list(args.launch)
    if "--" in words:
        cut = words.index("--")
        before, args.launch = words[:cut], words[cut + 1:]
        if before:
            args.launch_parser.parse_args([*before, args.engine], namespace=args)
            if args.launch:
                raise BadInput(f"audit: unexpected {' '.join(args.launch[:3])!r} before --")
            args.launch = words[cut + 1:]
    elif words and words[0].startswith("-"):
        raise BadInput(f"audit: {words[0]}: put the launch command after --")


VALIDATE_EXITS = {"explained": EXIT_OK, "violation": EXIT_MISMATCH, "undecided": EXIT_INCONCLUSIVE,
                  "unexplained": EXIT_UNEXPLAINED}
"""``validate``'s answers (:data:`kvproof.checker.logs.validate_command.ANSWERS`) and their exit codes."""


def cmd_validate(args: argparse.Namespace) -> int:
    """Search for a behaviour of the spec that explains an engine's event log (the protocol the
    log's header names supplies the ``validate`` command); the exit code of its answer
    (:data:`VALIDATE_EXITS`)."""
    from kvproof.checker.logs.validate_command import run_validate

    return VALIDATE_EXITS[run_validate(args, _console(), BadInput)]


def _plural(n: int, word: str) -> str:
    """``word``, with an ``s`` unless ``n`` is one."""
    return word if n == 1 else word + "s"


# -- parser --------------------------------------------------------------------------------------
VISITED_MODES = ("exact", "fingerprint")  # kvproof.checker.explicit.visited.MODES (a test keeps them equal)
_TRUST = "trust this engine variant file (it is code) for the protocol the input names (repeatable)"
_MAX_SECONDS = ("one wall-clock budget of S seconds for the whole command, from process start (start-up included) "
                "to exit, shared by every scenario and phase: the command ends within S + 0.5 s, what it did not "
                "decide inconclusive (exit 2)")


def _version() -> str:
    """The installed distribution's version (``unknown`` when run from a checkout without metadata)."""
    from importlib import metadata

    try:
        return metadata.version("kvproof")
    except metadata.PackageNotFoundError:
        return "unknown (no installed metadata)"


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every command."""
    p = _Parser(prog="kvproof", description="Model-check the PD-disaggregated KV page lifecycle.")
    p.add_argument("--version", action="version", version=f"kvproof {_version()}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    ls = sub.add_parser("list", help="list the built-in scenarios")
    ls.add_argument("--claims", action="store_true", help="also list every invariant and witness")
    ls.set_defaults(func=cmd_list)

    ck = sub.add_parser("check", help="check scenarios (default: the whole built-in catalogue)")
    ck.add_argument("scenarios", nargs="*", metavar="SCENARIO", help="built-in name or scenario .toml file")
    ck.add_argument("--variant", action="append", metavar="FILE.py",
                    help="trust and check an engine variant (code): its PdProtocol subclasses, and its SCENARIO "
                         "if it has one (repeatable)")
    ck.add_argument("--invariant", action="append", metavar="NAME", help="check only this claim (repeatable)")
    ck.add_argument("--max-states", type=_positive_int, metavar="N", help="stop after N distinct states")
    ck.add_argument("--max-seconds", type=_positive_float, metavar="S", help=_MAX_SECONDS)
    ck.add_argument("--max-depth", type=_positive_int, metavar="D", help="explore at most D steps deep")
    ck.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    ck.add_argument("--traces", default="traces", metavar="DIR", help="where counterexamples go (default: traces)")
    ck.add_argument("--no-traces", action="store_true", help="write no trace files")
    ck.add_argument("--write-expected", metavar="FILE", help="write this run's verdicts and state counts as a TOML table")
    ck.add_argument("--quiet", action="store_true", help="print nothing; the exit code tells")
    ck.add_argument("--junit", metavar="FILE", help="also write JUnit XML: a test case per scenario and claim")
    ck.add_argument("--sarif", metavar="FILE", help="also write SARIF 2.1.0: a result per unexpected verdict")
    ck.add_argument("--html", metavar="FILE", help="also write the HTML report (as kvproof report does)")
    ck.add_argument("--visited", choices=VISITED_MODES, default="exact",
                    help="store states exactly (default) or as 64-bit fingerprints (8 bytes a state)")
    ck.add_argument("--symmetry", action="store_true",
                    help="explore one state per orbit of the scenario's interchangeable requests")
    ck.add_argument("--workers", type=_positive_int, default=1, metavar="N",
                    help="explore with N workers (default 1): threads of the native backend, else processes "
                         "(or Ray actors) with states partitioned by hash")
    ck.add_argument("--backend", choices=("auto", "native", "python", "process", "ray"), default="auto",
                    help="auto (default): the model compiled to C where that applies (a C compiler found, "
                         "no liveness claim, over 20,000 states), else the Python engine; "
                         "native: always C (or an error); python (or process): the Python engine, with --workers "
                         "in forked processes; ray: workers on a Ray cluster (kvproof[ray])")
    ck.add_argument("--ray-address", metavar="ADDR",
                    help="Ray cluster to join (default: RAY_ADDRESS, else a local cluster of N workers)")
    ck.add_argument("--coverage", action="store_true",
                    help="also count each action's transitions over the reachable graph and list the actions "
                         "that never fired (a pass of its own)")
    ck.add_argument("--engine", choices=("explicit", "bmc", "both"), default="explicit",
                    help="explicit BFS (default), bounded model checking with Z3, or both compared")
    ck.add_argument("--depth", type=_positive_int, metavar="K",
                    help="bounded model checking depth (bmc: default 24; both: the deepest explicit hit, the rest proved by k-induction; with K, as deep as K and nothing proved)")
    ck.set_defaults(func=cmd_check)
    cli_symbolic.add_commands(sub, _positive_int, _positive_float)

    rp_ = sub.add_parser("report", help="check scenarios and write a self-contained HTML report")
    rp_.add_argument("scenarios", nargs="*", metavar="SCENARIO", help="built-in name or scenario .toml file")
    rp_.add_argument("-o", "--output", default="report.html", metavar="FILE", help="where (default: report.html)")
    rp_.add_argument("--max-states", type=_positive_int, metavar="N", help="stop after N distinct states")
    rp_.add_argument("--max-seconds", type=_positive_float, metavar="S", help=_MAX_SECONDS)
    rp_.add_argument("--max-depth", type=_positive_int, metavar="D", help="explore at most D steps deep")
    rp_.add_argument("--quiet", action="store_true", help="print nothing; the exit code tells")
    rp_.add_argument("--variant", action="append", metavar="FILE.py",
                     help="trust an engine variant (code) and check its SCENARIO if it has one (repeatable)")
    rp_.set_defaults(func=cmd_report)

    sh = sub.add_parser("show", help="render a stored trace, once replay confirms it")
    sh.add_argument("file", metavar="FILE")
    sh.add_argument("--step", type=int, metavar="N", help="show only step N")
    sh.add_argument("--format", choices=("text", "json", "mermaid"), default="text",
                    help="text (default), json step records, or a Mermaid sequence diagram")
    sh.add_argument("--only", nargs="+", metavar="NAME",
                    help="follow a page (p3, q0), a request (R1) or a field (owner, owner[p3]) through the trace")
    sh.add_argument("--full", action="store_true",
                    help="also print every field of the state after each step shown (json: a state object per step)")
    sh.add_argument("--variant", action="append", metavar="FILE.py", help=_TRUST)
    sh.set_defaults(func=cmd_show)

    gr = sub.add_parser("graph", help="write a small scenario's state graph (DOT or GraphML)")
    gr.add_argument("scenario", metavar="SCENARIO", help="built-in name or scenario .toml file (at most 10,000 states)")
    gr.add_argument("--format", choices=("dot", "graphml"), default="dot", help="dot (default) or graphml")
    gr.add_argument("-o", "--output", metavar="FILE", help="where (default: standard output)")
    gr.add_argument("--variant", action="append", metavar="FILE.py", help=_TRUST)
    gr.set_defaults(func=cmd_graph)

    df = sub.add_parser("diff", help="where two traces first diverge, and what differs")
    df.add_argument("a", metavar="A")
    df.add_argument("b", metavar="B")
    df.add_argument("--variant", action="append", metavar="FILE.py", help=_TRUST)
    df.set_defaults(func=cmd_diff)

    rp = sub.add_parser("replay", help="re-execute a stored trace against the model")
    rp.add_argument("file", metavar="FILE")
    rp.add_argument("--variant", action="append", metavar="FILE.py", help=_TRUST)
    rp.set_defaults(func=cmd_replay)

    sm = sub.add_parser("simulate", help="random long workload: how many responses read another's data",
                        description="Run a long random workload through a scenario's engine and count the "
                                    "responses that read another request's KV. Exit 0 when none did, 1 when one "
                                    "did (an exposure; 0 with --report-only), 3 on bad input.")
    sm.add_argument("scenario", metavar="SCENARIO", help="built-in name or scenario .toml file")
    sm.add_argument("--requests", type=_positive_int, default=10_000, metavar="N",
                    help="requests to send in all (default 10000)")
    sm.add_argument("--pages", type=_page_count, default=64, metavar="D", help="decode pages (default 64)")
    sm.add_argument("--slots", type=_slot_count, default=8, metavar="K", help="requests in flight at once (default 8)")
    sm.add_argument("--seed", type=int, default=0, metavar="S",
                    help="seed of the random choices: one seed, one run (default 0)")
    sm.add_argument("--fault-weight", type=_positive_float, default=0.02, metavar="W",
                    help="weight of aborts, failures and ack losses against 1 for progress (default 0.02)")
    sm.add_argument("--traces", default="traces", metavar="DIR",
                    help="where the run up to the first exposure is written (default: traces)")
    sm.add_argument("--no-traces", action="store_true", help="write no trace file")
    sm.add_argument("--trace-limit", type=_positive_int, default=5000, metavar="STEPS",
                    help="write the first exposure only if it is at most this many steps (default 5000)")
    sm.add_argument("--report-only", action="store_true",
                    help="report exposures but exit 0 (default: exit 1 when a response read another's KV)")
    sm.add_argument("--variant", action="append", metavar="FILE.py", help=_TRUST)
    sm.set_defaults(func=cmd_simulate)

    cf = sub.add_parser("conform", help="replay traces or random sequences on a protocol's real engine code")
    cf.add_argument("targets", nargs="*", metavar="TRACE|SCENARIO",
                    help="trace files, a directory of traces, or scenarios of one protocol (default: the "
                         "conformance scenarios of the default protocol, or of the one --engine names)")
    cf.add_argument("--engine", default=None,
                    help="the real engine, NAME==VERSION, for the protocol NAME (kvproof list names the protocols)")
    cf.add_argument("--random", type=_positive_int, metavar="N",
                    help="run N random event sequences per scenario instead of replaying traces")
    cf.add_argument("--seed", type=int, default=0, metavar="S")
    cf.add_argument("--traces", default="traces", metavar="DIR", help="where a scenario's traces are (default: traces)")
    cf.add_argument("--variant", action="append", metavar="FILE.py", help=_TRUST)
    cf.set_defaults(func=cmd_conform)

    au = sub.add_parser("audit", help="is a deployment, as launched, exposed? ENGINE==VERSION ... -- COMMAND...")
    au.add_argument("engine", metavar="ENGINE==VERSION",
                    help="the engine and its release (an unknown one is answered with the known ones)")
    au.add_argument("--env", action="append", metavar="NAME=VALUE",
                    help="an environment variable of the deployment (repeatable; kvproof's own environment is not read)")
    au.add_argument("--env-file", action="append", metavar="FILE", help="NAME=VALUE lines (repeatable)")
    au.add_argument("--peer-tp", type=_positive_int, metavar="N",
                    help="the other side's attention-TP size (default: the same as this line's)")
    for protocol in protocols():  # the options that only one protocol's engine has
        add = protocol.arguments.get("audit")
        if add is not None:
            add(au)
    au.add_argument("--traces", default="traces", metavar="DIR", help="where the hazards' traces go (default: traces)")
    au.add_argument("--no-traces", action="store_true", help="write no trace files")
    au.add_argument("--json", action="store_true", help="print one JSON object instead of the report")
    au.add_argument("--reader", choices=("auto", "engine", "table"), default="auto",
                    help="read the launch line with the installed engine's own parser (engine), the flag table "
                         "generated from it (table), or the engine when the named version is installed (auto)")
    au.add_argument("--max-states", type=_positive_int, metavar="N", help="stop each search after N distinct states")
    au.add_argument("--max-seconds", type=_positive_float, metavar="S", help=_MAX_SECONDS)
    au.add_argument("launch", nargs=argparse.REMAINDER, metavar="-- COMMAND", help="the launch command, after --")
    au.set_defaults(func=cmd_audit, launch_parser=au)

    va = sub.add_parser("validate", help="does a behaviour of the spec explain an engine's event log (JSONL)?",
                        description="Search for a behaviour of the spec that explains an engine's event log. "
                                    "Exit 0: explained; 1: a violation (every explanation up to an event breaks "
                                    "an invariant) or a possible violation (some explanation does; 0 with "
                                    "--certain-only); 5: unexplained, a line no behaviour produces (an event "
                                    "lost, duplicated or reordered) with no violation before it - a violation "
                                    "before an unexplained line wins, exit 1; 2: cannot decide (--max-states); "
                                    "3: bad input, wherever it is in the log.")
    va.add_argument("log", metavar="LOG", help="an event log: JSONL, a header line, then one event a line (schema 1)")
    va.add_argument("--max-states", type=_positive_int, default=100_000, metavar="N",
                    help="cannot decide (exit 2) past N possible states at one event (default 100000)")
    va.add_argument("--traces", metavar="DIR", help="where a violation's trace goes (default: the log's directory)")
    va.add_argument("--no-traces", action="store_true", help="write no trace file")
    va.add_argument("--certain-only", action="store_true",
                    help="exit 0 for a log every event of which is explained by a behaviour that breaks no "
                         "invariant, even where another behaviour consistent with it breaks one (a possible "
                         "violation, exit 1 by default)")
    va.add_argument("--backend", choices=("auto", "native", "python", "factored"), default="auto",
                    help="the search: the factored frontier where the spec suits it, else its steps in C where a "
                         "C compiler is found (auto, the default); always in C (native); the reference in Python "
                         "(python); the factored frontier (factored); the same answer")
    va.set_defaults(func=cmd_validate)

    co = sub.add_parser("completion", help="print a shell completion script (bash, zsh or tcsh)")
    co.add_argument("shell", choices=("bash", "zsh", "tcsh"))
    co.set_defaults(func=cmd_completion)
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


@functools.lru_cache(maxsize=1)
def _parser() -> argparse.ArgumentParser:
    """The parser, built once per process (16 ms; parsing does not change it)."""
    return build_parser()


_ONE_LINE = (("kvproof.checker.cli.common", "BadInput"), ("kvproof.model.scenario", "ScenarioError"),
             ("kvproof.model.registry", "ProtocolError"), ("kvproof.model.expr", "SpecError"),
             ("kvproof.checker.traces", "TraceError"), ("kvproof.checker.explicit.ray_backend", "RayUnavailable"),
             ("kvproof.checker.explicit.native", "NativeUnavailable"),
             ("kvproof.checker.certs.reader", "CertificateError"))


def _is_one_line(e: BaseException) -> bool:
    """``e`` is bad input reported in one line: an error of one of the :data:`_ONE_LINE` kinds
    (a module that was never imported cannot have raised its error, so none is imported here)."""
    for module, name in _ONE_LINE:
        m = sys.modules.get(module)
        if m is not None and isinstance(e, getattr(m, name)):
            return True
    return False


_OUT_OF_MEMORY = ("kvproof: error: out of memory: store states as fingerprints (--visited fingerprint, 8 bytes "
                  "a state), explore one state per orbit (--symmetry), or split the visited set over "
                  "processes or machines (--workers N, --backend ray)")


def main(argv: Sequence[str] | None = None, *, started: float | None = None, enforce: bool = False) -> int:
    """Run the command line; returns the exit code (0-5, 130 when interrupted, 141 when the reader
    of the output left).

    ``--max-seconds`` counts from ``started`` (a ``time.perf_counter()`` reading; default: this
    call); with ``enforce`` (the console command: :func:`entry`) a backstop also stops the call
    shortly after the budget's end, whatever runs then (:mod:`kvproof.checker.budget`), exit 2."""
    return _main(argv, started, enforce, [])


def _main(argv: Sequence[str] | None, started: float | None, enforce: bool, parsed: list) -> int:
    """:func:`main`; the parsed arguments are appended to ``parsed``."""
    called = time.perf_counter()
    parser = _parser()
    args = None
    try:
        try:
            args = parser.parse_args(argv)
        except SystemExit as e:  # --help
            return e.code if isinstance(e.code, int) else EXIT_BAD_INPUT
        if args.func is cmd_audit:
            _audit_options(args)
        args.budget = _budget(args, called if started is None else started)
        parsed.append(args)
        backstop = args.budget.backstop() if enforce and args.budget is not None else contextlib.nullcontext()
        with backstop, variant_scope():  # the variants trusted by this command only
            try:
                _check_outputs(args)
                _trust_variants(args)
                return args.func(args)
            except Exception as e:  # an error in a user's engine variant is bad input: one line
                if _is_one_line(e) or isinstance(e, BrokenPipeError):
                    raise
                message = None if isinstance(e, MemoryError) else variant_error(e)
                if message is None:
                    raise
                raise BadInput(message) from None
    except MemoryError:
        print(_OUT_OF_MEMORY, file=sys.stderr)
        return EXIT_OUT_OF_MEMORY
    except BrokenPipeError:  # `kvproof show … | head`: the reader left; say nothing more
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except Exception as e:
        if not _is_one_line(e):
            if not isinstance(e, OSError):
                raise
            where = f"{e.filename}: " if e.filename else ""  # the disk filled up, a folder went away mid-run
            print(f"kvproof: error: {where}{e.strerror or _one_line(e)}", file=sys.stderr)
            return EXIT_BAD_INPUT
        print(f"kvproof: error: {_one_line(e)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("kvproof: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BudgetSpent:
        return _out_of_budget(args)


def _budget(args: argparse.Namespace, started: float):
    """The command's ``--max-seconds`` budget from ``started`` (``None`` without the flag)."""
    seconds = getattr(args, "max_seconds", None)
    if seconds is None:
        return None
    from kvproof.checker.budget import Budget

    return Budget(seconds, started)


def _out_of_budget(args: argparse.Namespace) -> int:
    """The backstop stopped the command: its closing line (the ``summary`` of ``--json``;
    nothing with ``--quiet``), exit 2."""
    meaning = "inconclusive: the command was stopped before it reported its verdicts"
    summary = Summary(args.command, args.budget.line(), 0, 0, 0, EXIT_INCONCLUSIVE, meaning)
    try:
        if getattr(args, "json", False):
            print(json.dumps({"summary": summary.to_json()}, indent=2), flush=True)
        elif not getattr(args, "quiet", False):
            print(f"\nkvproof {args.command}: {args.budget.line()}; exit {EXIT_INCONCLUSIVE}: {meaning}", flush=True)
    except BrokenPipeError:
        _silence_stdout()
    return EXIT_INCONCLUSIVE


def _silence_stdout() -> None:
    """Point standard output at /dev/null, so that the interpreter's last flush at exit does not
    fail again with a second BrokenPipeError."""
    import os

    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a real file (tests): nothing to flush
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


def _one_line(e: BaseException) -> str:
    """An error message on one line, at most 1,000 characters."""
    text = " ".join(str(e).split())
    return text if len(text) <= 1000 else text[:997] + "..."


def entry() -> None:
    """Console-script entry point (also ``python -m kvproof``): ``--max-seconds`` counts from the
    process's start, and is enforced (:func:`main`); with it, the process then exits without
    tearing the interpreter down (:func:`_exit_now`), which after a large search takes a tenth
    of a second or more that the budget would otherwise not cover."""
    from kvproof.checker.budget import process_started

    parsed: list = []
    code = _main(None, process_started(), True, parsed)
    if parsed and parsed[0].budget is not None:
        _exit_now(code)
    sys.exit(code)


def _exit_now(code: int) -> None:
    """End the process with ``code`` now: the exit handlers run (``atexit``: temporary folders,
    multiprocessing's children) and the output is flushed, but the objects are not freed one by
    one, nor modules torn down."""
    import atexit

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or broken pipe: nothing more can be said
            pass
    os._exit(code)
