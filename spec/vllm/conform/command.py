"""``kvproof conform`` for vLLM scenarios and traces: which to run on vLLM 0.33.0, and the report.

Targets are trace files, directories of traces, built-in scenario names or globs of them
(``vllm-*``).  Without ``--random`` every stored counterexample of the targets is replayed (exit
0 when all reproduce, 1 on a divergence); with ``--random N`` each scenario runs N random event
sequences (exit 0 when all agree, 1 with the minimal disagreement).  Bad input is raised as the
caller's one-line error type before the slow import of vLLM.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Callable, NamedTuple

from kvproof.checker.conform import bar_paused, conform_targets
from kvproof.checker.traces import read_trace
from kvproof.model.scenario import Scenario
from kvproof.spec.vllm.conform.engine import ENGINE, EngineUnavailable, load_vllm
from kvproof.spec.vllm.conform.replay import ConformError

__all__ = ["run_conform", "Conformed", "DEFAULT_TARGET"]

DEFAULT_TARGET = "vllm-*"


class Conformed(NamedTuple):
    """How a ``conform`` run ended: its exit code (0 or 1), what ran, how many traces or
    scenarios agreed with the real engine and how many did not, what the code means, and how
    many the harness cannot run (knobs it has no counterpart of; for ``--random``, knobs of a
    vLLM before 0.33.0's fixes): each is named in a ``not run`` line, and the run fails if nothing could run."""

    exit_code: int
    ran: str
    matched: int
    mismatched: int
    meaning: str
    skipped: int = 0


def run_conform(args: argparse.Namespace, resolve: Callable[[str], Scenario], out, bad, progress=None) -> Conformed:
    """Run the command; ``resolve`` names a scenario, ``out`` is a rich console, ``bad`` builds
    the CLI's bad-input exception, ``progress`` (optional) has ``start(label)``, called as each
    trace or scenario begins.  Returns how it ended (:class:`Conformed`)."""
    if args.engine not in (None, ENGINE):
        raise bad(f"--engine {args.engine}: only {ENGINE} is supported for vLLM scenarios")
    traces, scenarios = conform_targets(args, DEFAULT_TARGET, resolve, bad)
    for sc in scenarios + [read_trace(path).scenario for path in traces]:  # bad input first, before the slow import
        if sc.family != "vllm":
            raise bad(f"conform: {sc.name} is a scenario of the {sc.family or 'sglang'} protocol; "
                      f"run it separately from the vLLM targets")
    if progress is not None:
        progress.note(f"importing {ENGINE}")
    try:
        load_vllm()
    except EngineUnavailable as e:
        raise bad(f"conform: {e}") from None
    try:
        if args.random:
            return _random(args, scenarios or [read_trace(p).scenario for p in traces[:1]], out, progress)
        return _replay(traces, out, bad, progress)
    except ConformError as e:
        raise bad(f"conform: {e}") from None


def _random(args: argparse.Namespace, scenarios: list[Scenario], out, progress=None) -> Conformed:
    from kvproof.spec.vllm.conform.fuzz import fuzz_scenario
    from kvproof.spec.vllm.conform.replay import harness_for

    code = agreed = 0
    scenarios, skipped = _runnable(scenarios, lambda sc: harness_for(sc, sc.build(), random=True).close(),
                                   lambda sc: sc.name, out)
    if progress is not None:
        progress.total, progress.unit = len(scenarios), "scenarios"
    for sc in scenarios:
        if progress is not None:
            progress.start(f"{sc.name}: {args.random:,} random sequences on {ENGINE}")
        rep = fuzz_scenario(sc, args.random, seed=args.seed)
        agreed += rep.agrees
        with bar_paused(progress):
            if rep.agrees:
                out.print(f"{sc.name}: {rep.sequences:,} random sequences ({rep.steps:,} steps) agree "
                          f"with {ENGINE} ({rep.seconds:.1f} s)", markup=False)
                continue
            code = 1
            out.print(f"{sc.name}: disagreement after {rep.sequences:,} sequences; minimal sequence:", markup=False)
            for k, label in enumerate(rep.disagreement, 1):
                out.print(f"  {k:3}  {label}", markup=False)
            out.print(f"  {rep.result.reason}", soft_wrap=True, markup=False)
    ran = (f"{len(scenarios)} scenario{'s' * (len(scenarios) != 1)}, {args.random:,} random sequences each "
           f"(seed {args.seed}) on {ENGINE}")
    meaning = (f"every scenario's sequences agree with {ENGINE}" if code == 0
               else f"a sequence disagrees with {ENGINE}")
    return Conformed(code, ran, agreed, len(scenarios) - agreed, meaning, skipped)


def _replay(traces: list[Path], out, bad, progress=None) -> Conformed:
    from kvproof.spec.vllm.conform.report import replay_trace

    if not traces:
        raise bad("conform: no stored counterexample to replay (kvproof check writes them)")
    from kvproof.spec.vllm.conform.replay import harness_for

    def check(path):
        trace = read_trace(path)
        harness_for(trace.scenario, trace.machine.spec).close()

    traces, skipped = _runnable(traces, check, lambda p: p.name, out)
    code = reproduced = 0
    if progress is not None:
        progress.total, progress.unit = len(traces), "traces"
    for path in traces:
        if progress is not None:
            progress.start(f"{path.name} on {ENGINE}")
        v = replay_trace(path)
        with bar_paused(progress):
            if v.verdict == "reproduced":
                out.print(f"reproduced  {path.name}: {v.steps} steps, {v.how}", soft_wrap=True, markup=False)
                reproduced += 1
            else:
                code = 1
                out.print(f"diverged    {path.name} at step {v.step}: {v.reason}", soft_wrap=True, markup=False)
    ran = f"{len(traces)} trace{'s' * (len(traces) != 1)} replayed on {ENGINE}"
    meaning = f"every trace reproduces on {ENGINE}" if code == 0 else f"a trace diverges on {ENGINE}"
    return Conformed(code, ran, reproduced, len(traces) - reproduced, meaning, skipped)


def _runnable(items: list, check, name, out) -> tuple[list, int]:
    """The items ``check`` accepts and how many it refused; a ``not run`` line for each refused
    one (``ConformError``), which is re-raised when it refuses them all."""
    keep, first = [], None
    for item in items:
        try:
            check(item)
        except ConformError as e:
            out.print(f"not run     {name(item)}: {e}", soft_wrap=True, markup=False)
            first = first or e
            continue
        keep.append(item)
    if first is not None and not keep:
        raise first
    return keep, len(items) - len(keep)
